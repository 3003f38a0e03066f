//! Exporting a policy to a Barracuda `.nn` file (format 16) as ML-Agents 0.16-0.21 did
//! (barracuda-nn.md §8, §11): inputs `vector_observation` and `action_masks`, the constants
//! `version_number` (2), `memory_size`, `is_continuous_control`, `action_output_shape` in a
//! first Load layer, Dense + Swish layers, and an `action` output holding clipped actions
//! (continuous) or normalised log-probabilities per branch (discrete). Only layer kinds every
//! Barracuda release runs are used.

use crate::spec::model::{self, ModelInput};
use super::model::{Activation, Input, Layer, LayerType, Memory, NnModel, WeightType};
use super::writer::TensorBlob;
use super::FORMAT_VERSION;
use crate::policy::visual::{Step, LEAKY_SLOPE};
use crate::policy::{names, ContinuousHead, PolicyDescription, PolicyError, VisualEncoder, WeightTensor, Weights, LOG_SIGMA_BOUNDS, NORMALIZATION_CLIP};

struct NnBuilder {
    blob: TensorBlob,
    layers: Vec<Layer>,
    constants: Layer,
}

impl NnBuilder {
    fn tensor(&mut self, name: &str, shape: &[i32], values: &[f32]) -> Result<super::TensorDesc, PolicyError> {
        self.blob.add(name, shape, values).map_err(PolicyError::Unsupported)
    }

    /// A constant in the first Load layer; returns its name.
    fn constant(&mut self, name: &str, values: &[f32]) -> Result<String, PolicyError> {
        let t = self.tensor(name, &[1, 1, 1, values.len() as i32], values)?;
        self.constants.tensors.push(t);
        Ok(name.into())
    }

    fn layer(&mut self, name: &str, kind: LayerType, inputs: &[&str]) -> String {
        self.layers.push(Layer::new(name, kind, inputs));
        name.into()
    }

    /// Concatenation on the channel axis (Barracuda's axis 3).
    fn concat(&mut self, name: &str, inputs: &[&str]) -> String {
        let mut l = Layer::new(name, LayerType::Concat, inputs);
        l.axis = 3;
        self.layers.push(l);
        name.into()
    }

    fn activation(&mut self, name: &str, activation: Activation, input: &str) -> String {
        let mut l = Layer::new(name, LayerType::Activation, &[input]);
        l.activation = activation;
        self.layers.push(l);
        name.into()
    }

    /// Dense with a torch `[out, in]` weight, stored as Barracuda's `[in, 1, 1, out]`.
    fn dense(&mut self, name: &str, input: &str, weights: &Weights, weight: &str, bias: &str) -> Result<String, PolicyError> {
        self.dense_values(name, input, weights.get(weight)?, weights.get(bias)?)
    }

    fn dense_values(&mut self, name: &str, input: &str, w: &WeightTensor, b: &WeightTensor) -> Result<String, PolicyError> {
        let (out, inp) = (w.shape[0], w.shape[1]);
        let mut transposed = vec![0.0; out * inp];
        for o in 0..out {
            for i in 0..inp {
                transposed[i * out + o] = w.data[o * inp + i];
            }
        }
        let kernel = self.tensor(&format!("{name}/kernel"), &[inp as i32, 1, 1, out as i32], &transposed)?;
        let bias = self.tensor(&format!("{name}/bias"), &[1, 1, 1, out as i32], &b.data)?;
        let mut l = Layer::new(name, LayerType::Dense, &[input]);
        l.tensors = vec![kernel, bias];
        self.layers.push(l);
        Ok(name.into())
    }
}

/// A visual encoder on an NHWC input (`visual_observation_k`): Conv2D layers with
/// Barracuda's `[KH, KW, Cin, Cout]` kernels and `[left, top, right, bottom]` pads, MaxPool2D,
/// Add for the residual blocks, activations as Activation layers, Flatten (H, W, C order),
/// then the dense layer with its input rows reordered from torch's (C, H, W) flatten order.
fn visual_encoder(b: &mut NnBuilder, input: &str, encoder: &VisualEncoder, hidden: usize, weights: &Weights, obs: usize) -> Result<String, PolicyError> {
    let mut names = EncoderLayerNames { base: format!("visual_encoder_{obs}"), convs: 0, pools: 0, residuals: 0 };
    encoder_steps(b, input.to_string(), &encoder.steps(hidden), weights, &names::visual_encoder(obs), &mut names)
}

/// Layer names of one encoder (`visual_encoder_{obs}/conv_{k}`, `…/pool_{k}`, `…/residual_{k}`,
/// `…/flatten`, `…/dense`; an activation is named after the layer it reads).
struct EncoderLayerNames {
    base: String,
    convs: usize,
    pools: usize,
    residuals: usize,
}

fn encoder_steps(b: &mut NnBuilder, x: String, steps: &[Step], weights: &Weights, module: &str, names: &mut EncoderLayerNames) -> Result<String, PolicyError> {
    let mut x = x;
    // The (C, H, W) of the last Flatten: the dense layer's rows are reordered from it.
    let mut flattened = None;
    for step in steps {
        x = match step {
            Step::Conv { module: conv, input: cin, output: cout, kernel, stride, padding } => {
                let name = format!("{}/conv_{}", names.base, names.convs);
                names.convs += 1;
                let (cin, cout, kernel) = (*cin, *cout, *kernel);
                let w = weights.get(&format!("{module}.{conv}.weight"))?;
                let mut hwio = vec![0.0; w.data.len()];
                for o in 0..cout {
                    for c in 0..cin {
                        for dy in 0..kernel {
                            for dx in 0..kernel {
                                hwio[((dy * kernel + dx) * cin + c) * cout + o] = w.data[((o * cin + c) * kernel + dy) * kernel + dx];
                            }
                        }
                    }
                }
                let kernel_tensor = b.tensor(&format!("{name}/kernel"), &[kernel as i32, kernel as i32, cin as i32, cout as i32], &hwio)?;
                let bias = b.tensor(&format!("{name}/bias"), &[1, 1, 1, cout as i32], &weights.get(&format!("{module}.{conv}.bias"))?.data)?;
                let mut layer = Layer::new(&name, LayerType::Conv2D, &[&x]);
                layer.tensors = vec![kernel_tensor, bias];
                (layer.stride, layer.pad) = (vec![*stride as i32; 2], vec![*padding as i32; 4]);
                b.layers.push(layer);
                name
            }
            Step::MaxPool { kernel, stride } => {
                let name = format!("{}/pool_{}", names.base, names.pools);
                names.pools += 1;
                let mut layer = Layer::new(&name, LayerType::MaxPool2D, &[&x]);
                (layer.pool, layer.stride, layer.pad) = (vec![*kernel as i32; 2], vec![*stride as i32; 2], vec![0; 4]);
                b.layers.push(layer);
                name
            }
            Step::LeakyRelu => leaky_relu(b, &format!("{x}/leaky_relu"), &x),
            Step::Relu => b.activation(&format!("{x}/relu"), Activation::Relu, &x),
            Step::Swish => b.activation(&format!("{x}/swish"), Activation::Swish, &x),
            Step::Residual(inner) => {
                let name = format!("{}/residual_{}", names.base, names.residuals);
                names.residuals += 1;
                let y = encoder_steps(b, x.clone(), inner, weights, module, names)?;
                b.layer(&name, LayerType::Add, &[&x, &y])
            }
            Step::Flatten { channels, height, width } => {
                flattened = Some((*channels, *height, *width));
                b.layer(&format!("{}/flatten", names.base), LayerType::Flatten, &[&x])
            }
            Step::Dense { module: dense, .. } => {
                let w = weights.get(&format!("{module}.{dense}.weight"))?;
                let (c, h, wd) = flattened.ok_or_else(|| PolicyError::Unsupported("an encoder's dense layer reads a Flatten".into()))?;
                let out = w.shape[0];
                let mut reordered = vec![0.0; w.data.len()];
                for o in 0..out {
                    for ch in 0..c {
                        for y in 0..h {
                            for xx in 0..wd {
                                reordered[o * c * h * wd + (y * wd + xx) * c + ch] = w.data[o * c * h * wd + (ch * h + y) * wd + xx];
                            }
                        }
                    }
                }
                let reordered = WeightTensor { shape: w.shape.clone(), data: reordered };
                let name = format!("{}/dense", names.base);
                b.dense_values(&name, &x, &reordered, weights.get(&format!("{module}.{dense}.bias"))?)?
            }
        };
    }
    Ok(x)
}

fn leaky_relu(b: &mut NnBuilder, name: &str, input: &str) -> String {
    let mut l = Layer::new(name, LayerType::Activation, &[input]);
    l.activation = Activation::LeakyRelu;
    l.alpha = LEAKY_SLOPE;
    b.layers.push(l);
    name.into()
}

/// Builds the `.nn` model of a policy: the vector observations concatenated in one
/// `vector_observation` input (as Unity 1.x feeds it), images as `visual_observation_k`.
/// The steps, in the order their layers lie in the file: the constants, the vector input
/// (normalised), the observation encodings, the Swish body, the action head.
pub fn to_nn(description: &PolicyDescription, weights: &Weights) -> Result<NnModel, PolicyError> {
    description.check(weights)?;
    description.check_no_entities_for_nn()?;
    let actions = &description.action_spec;
    if actions.is_hybrid() {
        return Err(PolicyError::Unsupported("the .nn interface (model API 2) has no hybrid actions; export ONNX".into()));
    }
    if !description.goal_observations.is_empty() {
        return Err(PolicyError::Unsupported(
            "a goal-conditioned policy (goal_conditioning_type: hyper) multiplies each row by its own generated matrix, which the .nn format (model API 2) cannot express; export ONNX, or train with goal_conditioning_type: none".into(),
        ));
    }
    let mut b = NnBuilder { blob: TensorBlob::new(), layers: vec![], constants: Layer::new(model::ACTION_OUTPUT_SHAPE, LayerType::Load, &[]) };
    write_constants(&mut b, description)?;
    let mut inputs = vec![];
    let vector = vector_input(&mut b, description, weights, &mut inputs)?;
    let mut x = encodings(&mut b, description, weights, &vector, &mut inputs)?;
    for l in 0..description.num_layers {
        let d = b.dense(&format!("main_graph_0/hidden_{l}"), &x, weights, &names::body_weight(l), &names::body_bias(l))?;
        x = b.activation(&format!("main_graph_0/hidden_{l}/swish"), Activation::Swish, &d);
    }
    let memories = if description.is_recurrent() {
        let (h, memories) = lstm_cell(&mut b, &x, weights)?;
        x = h;
        memories
    } else {
        vec![]
    };
    if actions.continuous_size > 0 {
        continuous_head(&mut b, &x, weights, description.continuous_head)?;
    } else {
        let total: usize = actions.discrete_branches.iter().sum();
        inputs.push(Input { name: model::ACTION_MASKS.into(), shape: vec![-1, 1, 1, total as i32] });
        discrete_head(&mut b, &x, weights, &actions.discrete_branches)?;
    }
    Ok(assemble(b, inputs, memories))
}

/// Names of the memories of a recurrent `.nn`: the names end in `_h` / `_c` as
/// com.unity.ml-agents 1.x requires, h first so that an agent's memory vector is `[h | c]` as
/// in the ONNX export (1.x concatenates the memories in declaration order).
pub const MEMORY_H_IN: &str = "recurrent_in_h";
pub const MEMORY_H_OUT: &str = "recurrent_out_h";
pub const MEMORY_C_IN: &str = "recurrent_in_c";
pub const MEMORY_C_OUT: &str = "recurrent_out_c";

/// The LSTM cell as the TF-era exporter lowered it (lstm.md §6.2-6.3): `Concat(x, h)`, one
/// Dense per gate (kernel rows: input then recurrent weights; bias: the sum of torch's two),
/// Sigmoid/Tanh, `c' = c·f + i·g`, `h' = o·tanh(c')`. Returns `h'` and the two memories
/// (`[1, 1, 1, m/2]` each).
fn lstm_cell(b: &mut NnBuilder, x: &str, weights: &Weights) -> Result<(String, Vec<Memory>), PolicyError> {
    use crate::policy::lstm::{Gate, LstmWeights};
    let lstm = LstmWeights::read(weights)?;
    let (hidden, input) = (lstm.hidden, lstm.input_size);
    let joined = b.concat("lstm/concat", &[x, MEMORY_H_IN]);
    let mut gate = |gate: Gate, label: &str, activation: Activation| -> Result<String, PolicyError> {
        let w = lstm.gate(gate);
        // torch [h, in] and [h, h] side by side as one [h, in + h] weight.
        let mut joined_weight = Vec::with_capacity(hidden * (input + hidden));
        for k in 0..hidden {
            joined_weight.extend_from_slice(&w.input[k * input..(k + 1) * input]);
            joined_weight.extend_from_slice(&w.recurrent[k * hidden..(k + 1) * hidden]);
        }
        let bias: Vec<f32> = w.input_bias.iter().zip(&w.recurrent_bias).map(|(a, b)| a + b).collect();
        let name = format!("lstm/{label}");
        let dense = b.dense_values(
            &name,
            &joined,
            &WeightTensor { shape: vec![hidden, input + hidden], data: joined_weight },
            &WeightTensor { shape: vec![hidden], data: bias },
        )?;
        Ok(b.activation(&format!("{name}/activation"), activation, &dense))
    };
    let i = gate(Gate::Input, "input_gate", Activation::Sigmoid)?;
    let g = gate(Gate::Cell, "cell_gate", Activation::Tanh)?;
    let f = gate(Gate::Forget, "forget_gate", Activation::Sigmoid)?;
    let o = gate(Gate::Output, "output_gate", Activation::Sigmoid)?;
    let kept = b.layer("lstm/kept", LayerType::Mul, &[MEMORY_C_IN, &f]);
    let written = b.layer("lstm/written", LayerType::Mul, &[&i, &g]);
    let c = b.layer(MEMORY_C_OUT, LayerType::Add, &[&kept, &written]);
    let squashed = b.activation("lstm/tanh_c", Activation::Tanh, &c);
    let h = b.layer(MEMORY_H_OUT, LayerType::Mul, &[&o, &squashed]);
    let shape = vec![1, 1, 1, hidden as i32];
    let memories = vec![
        Memory { shape: shape.clone(), input: MEMORY_H_IN.into(), output: MEMORY_H_OUT.into() },
        Memory { shape, input: MEMORY_C_IN.into(), output: MEMORY_C_OUT.into() },
    ];
    Ok((h, memories))
}

/// ML-Agents' constants, in the Load layer that is named after its first tensor
/// (barracuda-nn.md §8).
fn write_constants(b: &mut NnBuilder, description: &PolicyDescription) -> Result<(), PolicyError> {
    let actions = &description.action_spec;
    let continuous = actions.continuous_size > 0;
    let output_size = if continuous { actions.continuous_size } else { actions.discrete_branches.iter().sum() };
    b.constant(model::ACTION_OUTPUT_SHAPE, &[output_size as f32])?;
    b.constant(model::MEMORY_SIZE, &[description.memory_size as f32])?;
    b.constant(model::VERSION_NUMBER, &[2.0])?;
    b.constant(model::IS_CONTINUOUS_CONTROL, &[if continuous { 1.0 } else { 0.0 }])?;
    Ok(())
}

/// The `vector_observation` input (when the policy has vector observations) and its
/// normalisation; returns the name of the (normalised) vector, empty without one.
fn vector_input(b: &mut NnBuilder, description: &PolicyDescription, weights: &Weights, inputs: &mut Vec<Input>) -> Result<String, PolicyError> {
    let vector_width = description.vector_width();
    let mut vector = String::new();
    if vector_width > 0 {
        inputs.push(Input { name: model::VECTOR_OBSERVATION.into(), shape: vec![-1, 1, 1, vector_width as i32] });
        vector = model::VECTOR_OBSERVATION.into();
    }
    if description.normalize && vector_width > 0 {
        let (mut mean, mut std) = (vec![], vec![]);
        for (i, _) in description.observation_shapes.iter().enumerate().filter(|(_, s)| s.len() == 1) {
            let steps = weights.get(&names::normalization_steps(i))?.data[0];
            mean.extend_from_slice(&weights.get(&names::running_mean(i))?.data);
            std.extend(weights.get(&names::running_variance(i))?.data.iter().map(|v| (v / steps).sqrt()));
        }
        let mean = b.constant("normalization/mean", &mean)?;
        let std = b.constant("normalization/std", &std)?;
        let low = b.constant("normalization/low", &[-NORMALIZATION_CLIP])?;
        let high = b.constant("normalization/high", &[NORMALIZATION_CLIP])?;
        let centred = b.layer("normalization/sub", LayerType::Sub, &[&vector, &mean]);
        let z = b.layer("normalization/div", LayerType::Div, &[&centred, &std]);
        let lower = b.layer("normalization/max", LayerType::Max, &[&z, &low]);
        vector = b.layer("normalization/clip", LayerType::Min, &[&lower, &high]);
    }
    Ok(vector)
}

/// The observation encodings in observation order (images through the visual encoder,
/// consecutive vector observations as one slice of `vector`), concatenated when there are
/// several; returns the name of the encoding.
fn encodings(b: &mut NnBuilder, description: &PolicyDescription, weights: &Weights, vector: &str, inputs: &mut Vec<Input>) -> Result<String, PolicyError> {
    let vector_width = description.vector_width();
    // No slice at all when the vector observations are all consecutive.
    let mut encodings: Vec<String> = vec![];
    let mut runs: Vec<(usize, usize, usize)> = vec![]; // (position in encodings, start, end)
    let (mut offset, mut visual_count) = (0, 0);
    for (i, shape) in description.observation_shapes.iter().enumerate() {
        if let Some(encoder) = description.visual_encoder(i) {
            let name = ModelInput::VisualObservation(visual_count).name();
            inputs.push(Input { name: name.clone(), shape: vec![-1, encoder.height as i32, encoder.width as i32, encoder.channels as i32] });
            encodings.push(visual_encoder(b, &name, &encoder, description.hidden_units, weights, i)?);
            visual_count += 1;
            continue;
        }
        match runs.last_mut() {
            Some((position, _, end)) if *position + 1 == encodings.len() && *end == offset => *end += shape[0],
            _ => {
                runs.push((encodings.len(), offset, offset + shape[0]));
                encodings.push(String::new());
            }
        }
        offset += shape[0];
    }
    for (position, start, end) in runs {
        encodings[position] = if (start, end) == (0, vector_width) {
            vector.to_string()
        } else {
            let name = format!("{}/slice_{start}_{end}", model::VECTOR_OBSERVATION);
            let mut slice = Layer::new(&name, LayerType::StridedSlice, &[vector]);
            (slice.pad, slice.pool, slice.stride) = (vec![0, 0, 0, start as i32], vec![0, 0, 0, end as i32], vec![1, 1, 1, 1]);
            b.layers.push(slice);
            name
        };
    }
    Ok(if encodings.len() == 1 {
        encodings.remove(0)
    } else {
        let refs: Vec<&str> = encodings.iter().map(|e| e.as_str()).collect();
        b.concat("encodings/concat", &refs)
    })
}

/// Continuous actions as `action`: PPO's head clip(mu + exp(log_std) * N(0, 1), -3, 3) / 3
/// (its deterministic action is clip(mu, -3, 3) / 3); SAC's tanh(mu + exp(log σ) * N(0, 1)) with
/// log σ a dense layer bounded to [-20, 2].
fn continuous_head(b: &mut NnBuilder, x: &str, weights: &Weights, head: ContinuousHead) -> Result<(), PolicyError> {
    let mu = b.dense("policy/mu", x, weights, names::MU_WEIGHT, names::MU_BIAS)?;
    let log_std = match head {
        ContinuousHead::Clipped => b.constant("policy/log_std", &weights.get(names::LOG_SIGMA)?.data)?,
        ContinuousHead::Squashed => {
            let layer = b.dense("policy/log_std_dense", x, weights, names::LOG_SIGMA_WEIGHT, names::LOG_SIGMA_BIAS)?;
            let (low, high) = LOG_SIGMA_BOUNDS;
            let low = b.constant("policy/log_std_low", &[low])?;
            let high = b.constant("policy/log_std_high", &[high])?;
            let lower = b.layer("policy/log_std_max", LayerType::Max, &[&layer, &low]);
            b.layer("policy/log_std", LayerType::Min, &[&lower, &high])
        }
    };
    let std = b.activation("policy/std", Activation::Exp, &log_std);
    let mut noise = Layer::new("policy/epsilon", LayerType::RandomNormal, &[&mu]);
    (noise.alpha, noise.beta) = (1.0, 0.0);
    b.layers.push(noise);
    let scaled = b.layer("policy/scaled_noise", LayerType::Mul, &["policy/epsilon", &std]);
    let sample = b.layer("policy/sample", LayerType::Add, &[&mu, &scaled]);
    if head == ContinuousHead::Squashed {
        b.activation(model::ACTION, Activation::Tanh, &sample);
        return Ok(());
    }
    let low = b.constant("policy/clip_low", &[-model::ACTION_CLIP])?;
    let high = b.constant("policy/clip_high", &[model::ACTION_CLIP])?;
    let three = b.constant("policy/three", &[model::ACTION_CLIP])?;
    let lower = b.layer("policy/clip_max", LayerType::Max, &[&sample, &low]);
    let clipped = b.layer("policy/clip_min", LayerType::Min, &[&lower, &high]);
    let scaled_action = b.layer("policy/action", LayerType::Div, &[&clipped, &three]);
    b.activation(model::ACTION, Activation::None, &scaled_action);
    Ok(())
}

/// Discrete actions: per branch, the softmax masked by its slice of `action_masks`,
/// renormalised and logged; the branches concatenated as `action`.
fn discrete_head(b: &mut NnBuilder, x: &str, weights: &Weights, discrete_branches: &[usize]) -> Result<(), PolicyError> {
    let epsilon = b.constant("policy/epsilon_prob", &[1e-7])?;
    let mut branches = vec![];
    let mut start = 0;
    for (k, size) in discrete_branches.iter().enumerate() {
        let logits = b.dense(&format!("policy/branch_{k}"), x, weights, &names::branch_weight(k), &names::branch_bias(k))?;
        let probs = b.activation(&format!("policy/branch_{k}/softmax"), Activation::Softmax, &logits);
        let mut slice = Layer::new(&format!("policy/branch_{k}/mask"), LayerType::StridedSlice, &[model::ACTION_MASKS]);
        (slice.pad, slice.pool, slice.stride) = (vec![0, 0, 0, start], vec![0, 0, 0, start + *size as i32], vec![1, 1, 1, 1]);
        b.layers.push(slice);
        let shifted = b.layer(&format!("policy/branch_{k}/add"), LayerType::Add, &[&probs, &epsilon]);
        let masked = b.layer(&format!("policy/branch_{k}/masked"), LayerType::Mul, &[&shifted, &format!("policy/branch_{k}/mask")]);
        let mut sum = Layer::new(&format!("policy/branch_{k}/sum"), LayerType::ReduceSum, &[&masked]);
        sum.axis = 3;
        b.layers.push(sum);
        let normalised = b.layer(&format!("policy/branch_{k}/normalised"), LayerType::Div, &[&masked, &format!("policy/branch_{k}/sum")]);
        let lifted = b.layer(&format!("policy/branch_{k}/lifted"), LayerType::Add, &[&normalised, &epsilon]);
        branches.push(b.activation(&format!("policy/branch_{k}/log"), Activation::Log, &lifted));
        start += *size as i32;
    }
    let refs: Vec<&str> = branches.iter().map(|s| s.as_str()).collect();
    if refs.len() == 1 {
        b.activation(model::ACTION, Activation::None, refs[0]);
    } else {
        let concat = b.concat("policy/concat", &refs);
        b.activation(model::ACTION, Activation::None, &concat);
    }
    Ok(())
}

/// The model: the Load layer of constants first, then the other layers, tensors repacked in
/// file order.
fn assemble(b: NnBuilder, inputs: Vec<Input>, memories: Vec<Memory>) -> NnModel {
    let NnBuilder { blob, mut layers, constants } = b;
    let mut ordered = vec![constants];
    ordered.append(&mut layers);
    let mut model = NnModel {
        version: FORMAT_VERSION,
        inputs,
        outputs: vec![model::ACTION.into()],
        memories,
        layers: ordered,
        weight_type: WeightType::Float32,
        padding: vec![],
        weights: blob.into_bytes(),
        trailer: None,
    };
    repack(&mut model);
    model
}

/// Rewrites tensor offsets and the blob in file order (constants were added to the Load
/// layer interleaved with other layers' tensors).
fn repack(model: &mut NnModel) {
    let old = model.clone();
    let mut blob = TensorBlob::new();
    for layer in &mut model.layers {
        for t in &mut layer.tensors {
            let values = old.tensor_values(t);
            *t = blob.add(&t.name, &t.shape, &values).expect("shapes were checked when added");
        }
    }
    model.weights = blob.into_bytes();
}
