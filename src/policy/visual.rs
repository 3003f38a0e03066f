//! ML-Agents 0.28's visual encoders (`vis_encode_type`: `simple`, `nature_cnn`, `resnet`,
//! `match3`, `fully_connected`), written once as a list of [`Step`]s that every backend
//! interprets: the plain-Rust reference forward pass here, the ONNX and `.nn` exporters and
//! the tch trainer. Module paths and shapes are 0.28's (`trainers/torch/encoders.py`), so a
//! checkpoint's weights are named as 0.28 names them (reward-signals.md §8).

use super::{PolicyError, WeightTensor, Weights};
use serde::{Deserialize, Serialize};

/// ML-Agents' `EncoderType`: which network turns an image into `hidden_units` features.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncoderType {
    /// Conv 16 8×8/4 → Conv 32 4×4/2 → Dense, LeakyReLU after each.
    #[default]
    Simple,
    /// The DQN ("Nature") network: Conv 32 8×8/4 → Conv 64 4×4/2 → Conv 64 3×3/1 → Dense.
    NatureCnn,
    /// IMPALA's residual network: three stacks of Conv 3×3 (padded) → MaxPool 3/2 → two
    /// residual blocks, channels 16, 32, 32; then Swish, Dense and ReLU.
    Resnet,
    /// The small network for board games (`SmallVisualEncoder`): Conv 35 3×3 → Conv 144 3×3
    /// → Dense.
    Match3,
    /// No convolution: the image flattened (C, H, W order) into a dense layer.
    FullyConnected,
}

impl EncoderType {
    /// Every type, in 0.28's order.
    pub const ALL: [EncoderType; 5] = [Self::Simple, Self::NatureCnn, Self::Resnet, Self::Match3, Self::FullyConnected];

    /// Whether this is the default (`simple`); `policy.json` leaves the default out.
    pub fn is_simple(&self) -> bool {
        *self == Self::Simple
    }

    /// The name in a configuration (`vis_encode_type`).
    pub fn key(self) -> &'static str {
        match self {
            Self::Simple => "simple",
            Self::NatureCnn => "nature_cnn",
            Self::Resnet => "resnet",
            Self::Match3 => "match3",
            Self::FullyConnected => "fully_connected",
        }
    }

    /// The smallest height and width the encoder takes (0.28's `min_resolution`: the smallest
    /// side with a feature map left after the last convolution or pool).
    pub fn min_side(self) -> usize {
        match self {
            Self::Simple => 20,
            Self::NatureCnn => 36,
            Self::Resnet => 15,
            Self::Match3 => 5,
            Self::FullyConnected => 1,
        }
    }
}

impl std::fmt::Display for EncoderType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// LeakyReLU's negative slope (torch's default).
pub const LEAKY_SLOPE: f32 = 0.01;

/// One step of an encoder. Weight names are relative to the encoder's module
/// (`…processors.{i}.`); tensors are NCHW, as torch runs them after 0.28's permute.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `nn.Conv2d` with bias: weights `[output, input, kernel, kernel]` at `{module}.weight`.
    Conv { module: String, input: usize, output: usize, kernel: usize, stride: usize, padding: usize },
    /// `nn.MaxPool2d(kernel, stride)` without padding (floor).
    MaxPool { kernel: usize, stride: usize },
    LeakyRelu,
    Relu,
    /// `x · sigmoid(x)`.
    Swish,
    /// `x + steps(x)` (0.28's `ResNetBlock`).
    Residual(Vec<Step>),
    /// `[N, C, H, W]` to `[N, C·H·W]` (C, H, W order).
    Flatten { channels: usize, height: usize, width: usize },
    /// A linear layer `[output, input]` at `{module}.weight`.
    Dense { module: String, input: usize, output: usize },
}

/// An encoder of one `[height, width, channels]` observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisualEncoder {
    pub encoder_type: EncoderType,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

/// A convolution step reading a `map` of (channels, height, width), which becomes its output's.
fn conv(map: &mut (usize, usize, usize), module: String, output: usize, kernel: usize, stride: usize, padding: usize) -> Step {
    let (input, h, w) = *map;
    *map = (output, side_after(h, kernel, stride, padding), side_after(w, kernel, stride, padding));
    Step::Conv { module, input, output, kernel, stride, padding }
}

/// Feature-map side after a convolution or pool (0.28's `conv_output_shape`).
fn side_after(n: usize, kernel: usize, stride: usize, padding: usize) -> usize {
    (n + 2 * padding - kernel) / stride + 1
}

impl VisualEncoder {
    /// The encoder of `encoder_type` for a rank-3 shape `[height, width, channels]`, or 0.28's
    /// error for an image below the type's minimum (its wording, with the missing space
    /// between its two sentences fixed) or a shape that is not rank 3.
    pub fn new(encoder_type: EncoderType, shape: &[usize]) -> Result<Self, String> {
        let &[height, width, channels] = shape else {
            return Err(format!("observation shape {shape:?} is not an image [height, width, channels]"));
        };
        let min = encoder_type.min_side();
        if height < min || width < min {
            return Err(format!(
                "Visual observation resolution ({width}x{height}) is too small for the provided EncoderType ({encoder_type}). The min dimension is {min}"
            ));
        }
        if channels == 0 {
            return Err(format!("observation shape {shape:?} has no channels"));
        }
        Ok(Self { encoder_type, height, width, channels })
    }

    /// The steps from the NCHW image to the `hidden` features.
    pub fn steps(&self, hidden: usize) -> Vec<Step> {
        let mut map = (self.channels, self.height, self.width);
        let mut steps = vec![];
        let plain_convs: &[(usize, usize, usize)] = match self.encoder_type {
            EncoderType::Simple => &[(16, 8, 4), (32, 4, 2)],
            EncoderType::NatureCnn => &[(32, 8, 4), (64, 4, 2), (64, 3, 1)],
            EncoderType::Match3 => &[(35, 3, 1), (144, 3, 1)],
            EncoderType::FullyConnected | EncoderType::Resnet => &[],
        };
        for (k, (output, kernel, stride)) in plain_convs.iter().enumerate() {
            steps.push(conv(&mut map, format!("conv_layers.{}", 2 * k), *output, *kernel, *stride, 0));
            steps.push(Step::LeakyRelu);
        }
        let mut dense = "dense.0";
        if self.encoder_type == EncoderType::Resnet {
            // `sequential`: per stack a conv, a pool and two blocks (4 modules), then Swish.
            for (stack, output) in [16, 32, 32].into_iter().enumerate() {
                let index = 4 * stack;
                steps.push(conv(&mut map, format!("sequential.{index}"), output, 3, 1, 1));
                steps.push(Step::MaxPool { kernel: 3, stride: 2 });
                map = (map.0, side_after(map.1, 3, 2, 0), side_after(map.2, 3, 2, 0));
                for block in [index + 2, index + 3] {
                    let block_conv = |layer: usize| Step::Conv { module: format!("sequential.{block}.layers.{layer}"), input: output, output, kernel: 3, stride: 1, padding: 1 };
                    steps.push(Step::Residual(vec![Step::Swish, block_conv(1), Step::Swish, block_conv(3)]));
                }
            }
            steps.push(Step::Swish);
            dense = "dense";
        }
        let (channels, height, width) = map;
        steps.push(Step::Flatten { channels, height, width });
        steps.push(Step::Dense { module: dense.into(), input: channels * height * width, output: hidden });
        steps.push(if self.encoder_type == EncoderType::Resnet { Step::Relu } else { Step::LeakyRelu });
        steps
    }

    /// Width of the flattened features the dense layer reads.
    pub fn flat_size(&self) -> usize {
        self.steps(1)
            .iter()
            .find_map(|s| match s {
                Step::Dense { input, .. } => Some(*input),
                _ => None,
            })
            .expect("every encoder ends in a dense layer")
    }

    /// Every weight with its shape, names relative to the encoder's module, in step order.
    pub fn weight_shapes(&self, hidden: usize) -> Vec<(String, Vec<usize>)> {
        fn collect(steps: &[Step], shapes: &mut Vec<(String, Vec<usize>)>) {
            for step in steps {
                match step {
                    Step::Conv { module, input, output, kernel, .. } => {
                        shapes.push((format!("{module}.weight"), vec![*output, *input, *kernel, *kernel]));
                        shapes.push((format!("{module}.bias"), vec![*output]));
                    }
                    Step::Dense { module, input, output } => {
                        shapes.push((format!("{module}.weight"), vec![*output, *input]));
                        shapes.push((format!("{module}.bias"), vec![*output]));
                    }
                    Step::Residual(inner) => collect(inner, shapes),
                    _ => {}
                }
            }
        }
        let mut shapes = vec![];
        collect(&self.steps(hidden), &mut shapes);
        shapes
    }

    /// The features of one image (`[H, W, C]` as the environment sends it), in plain Rust;
    /// `prefix` is the encoder's module path (`…processors.{i}`).
    pub fn forward_reference(&self, hwc: &[f32], weights: &Weights, prefix: &str, hidden: usize) -> Result<Vec<f32>, PolicyError> {
        let (h, w, c) = (self.height, self.width, self.channels);
        let mut chw = vec![0.0; hwc.len()];
        for y in 0..h {
            for x in 0..w {
                for ch in 0..c {
                    chw[(ch * h + y) * w + x] = hwc[(y * w + x) * c + ch];
                }
            }
        }
        let map = FeatureMap { data: chw, channels: c, height: h, width: w };
        Ok(run_steps(&self.steps(hidden), map, weights, prefix)?.data)
    }
}

/// A CHW feature map of one image (or, after Flatten, a row of `channels` features).
#[derive(Clone)]
struct FeatureMap {
    data: Vec<f32>,
    channels: usize,
    height: usize,
    width: usize,
}

fn weight<'w>(weights: &'w Weights, prefix: &str, module: &str, what: &str) -> Result<&'w WeightTensor, PolicyError> {
    weights.get(&format!("{prefix}.{module}.{what}"))
}

fn run_steps(steps: &[Step], mut x: FeatureMap, weights: &Weights, prefix: &str) -> Result<FeatureMap, PolicyError> {
    for step in steps {
        x = match step {
            Step::Conv { module, output, kernel, stride, padding, .. } => {
                convolve(&x, weight(weights, prefix, module, "weight")?, weight(weights, prefix, module, "bias")?, *output, *kernel, *stride, *padding)
            }
            Step::MaxPool { kernel, stride } => max_pool(&x, *kernel, *stride),
            Step::LeakyRelu => map(x, |v| if v < 0.0 { v * LEAKY_SLOPE } else { v }),
            Step::Relu => map(x, |v| v.max(0.0)),
            Step::Swish => map(x, |v| v / (1.0 + (-v).exp())),
            Step::Residual(inner) => {
                let mut y = run_steps(inner, x.clone(), weights, prefix)?;
                y.data.iter_mut().zip(&x.data).for_each(|(a, b)| *a += b);
                y
            }
            Step::Flatten { .. } => FeatureMap { channels: x.data.len(), height: 1, width: 1, data: x.data },
            Step::Dense { module, input, output } => {
                let (w, b) = (weight(weights, prefix, module, "weight")?, weight(weights, prefix, module, "bias")?);
                let data = (0..*output).map(|o| b.data[o] + (0..*input).map(|i| x.data[i] * w.data[o * input + i]).sum::<f32>()).collect();
                FeatureMap { data, channels: *output, height: 1, width: 1 }
            }
        };
    }
    Ok(x)
}

fn map(mut x: FeatureMap, f: impl Fn(f32) -> f32) -> FeatureMap {
    x.data.iter_mut().for_each(|v| *v = f(*v));
    x
}

#[allow(clippy::too_many_arguments)]
fn convolve(x: &FeatureMap, weight: &WeightTensor, bias: &WeightTensor, output: usize, kernel: usize, stride: usize, padding: usize) -> FeatureMap {
    let (cin, hin, win) = (x.channels, x.height, x.width);
    let (hout, wout) = (side_after(hin, kernel, stride, padding), side_after(win, kernel, stride, padding));
    let mut y = vec![0.0; output * hout * wout];
    for o in 0..output {
        for oy in 0..hout {
            for ox in 0..wout {
                let mut acc = bias.data[o];
                for ci in 0..cin {
                    for ky in 0..kernel {
                        let Some(iy) = (oy * stride + ky).checked_sub(padding).filter(|iy| *iy < hin) else { continue };
                        for kx in 0..kernel {
                            let Some(ix) = (ox * stride + kx).checked_sub(padding).filter(|ix| *ix < win) else { continue };
                            acc += x.data[(ci * hin + iy) * win + ix] * weight.data[((o * cin + ci) * kernel + ky) * kernel + kx];
                        }
                    }
                }
                y[(o * hout + oy) * wout + ox] = acc;
            }
        }
    }
    FeatureMap { data: y, channels: output, height: hout, width: wout }
}

fn max_pool(x: &FeatureMap, kernel: usize, stride: usize) -> FeatureMap {
    let (hout, wout) = (side_after(x.height, kernel, stride, 0), side_after(x.width, kernel, stride, 0));
    let mut y = vec![f32::NEG_INFINITY; x.channels * hout * wout];
    for c in 0..x.channels {
        for oy in 0..hout {
            for ox in 0..wout {
                let out = &mut y[(c * hout + oy) * wout + ox];
                for ky in 0..kernel {
                    for kx in 0..kernel {
                        *out = out.max(x.data[(c * x.height + oy * stride + ky) * x.width + ox * stride + kx]);
                    }
                }
            }
        }
    }
    FeatureMap { data: y, channels: x.channels, height: hout, width: wout }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_sizes_are_those_of_the_spec_table() {
        // reward-signals.md §8.2: flattened widths for the shipped image sizes.
        let table = [
            ([84, 84], [2592, 3136, 2592, 921_600]),
            ([64, 84], [1728, 1792, 2016, 691_200]),
            ([40, 40], [288, 64, 512, 186_624]),
            ([36, 36], [288, 64, 288, 147_456]),
        ];
        let types = [EncoderType::Simple, EncoderType::NatureCnn, EncoderType::Resnet, EncoderType::Match3];
        for ([h, w], widths) in table {
            for (t, width) in types.iter().zip(widths) {
                assert_eq!(VisualEncoder::new(*t, &[h, w, 1]).unwrap().flat_size(), width, "{t} {h}x{w}");
            }
        }
        assert_eq!(VisualEncoder::new(EncoderType::Match3, &[9, 8, 1]).unwrap().flat_size(), 2880);
        assert_eq!(VisualEncoder::new(EncoderType::FullyConnected, &[5, 7, 3]).unwrap().flat_size(), 105);
    }

    #[test]
    fn the_minimum_side_is_the_smallest_that_encodes() {
        for t in EncoderType::ALL {
            let min = t.min_side();
            assert!(VisualEncoder::new(t, &[min, min, 2]).is_ok(), "{t}");
            if min > 1 {
                let error = VisualEncoder::new(t, &[min - 1, min, 2]).unwrap_err();
                assert_eq!(
                    error,
                    format!("Visual observation resolution ({min}x{}) is too small for the provided EncoderType ({t}). The min dimension is {min}", min - 1)
                );
            }
        }
    }
}
