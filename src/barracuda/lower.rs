//! Lowering a `.nn` model onto tract: the layers are translated, one small rule per layer
//! kind, into an ONNX graph (tract-onnx's protobuf types, opset 11) that keeps Barracuda's
//! rank-4 NHWC tensors, and tract builds and optimizes that graph like any ONNX model. Layer
//! semantics follow barracuda-nn.md §7; a layer kind or parameter outside them is an error
//! naming the layer, never a wrong answer.

use super::lstm_cell::{find_lstm_cells, LstmCell};
use super::model::{Activation, Layer, LayerType, NnModel, TensorDesc};
use std::collections::HashMap;
use std::rc::Rc;
use crate::onnx::{attr_float, attr_int, attr_ints, attr_string, value_info, GraphBuilder, FLOAT, INT64};
use tract_onnx::pb::{AttributeProto, ModelProto, ValueInfoProto};

/// The largest OneHot depth lowered (a discrete branch of ML-Agents is far smaller).
const MAX_ONE_HOT_DEPTH: i64 = 1 << 16;

/// The opset of the lowered graph.
pub const OPSET: i64 = 11;

/// A `.nn` model tract cannot run as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LowerError {
    #[error("layer {layer:?}: layer kind {kind} is not supported")]
    UnsupportedLayer { layer: String, kind: String },
    #[error("layer {layer:?}: activation {activation} is not supported")]
    UnsupportedActivation { layer: String, activation: String },
    #[error("layer {layer:?}: {detail}")]
    BadLayer { layer: String, detail: String },
    #[error("layer {layer:?} reads {input:?}, which no input, memory or earlier layer provides")]
    UnknownInput { layer: String, input: String },
    #[error("output {0:?} is not produced by any layer")]
    UnknownOutput(String),
}

/// How to lower.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowerOptions {
    /// RandomNormal/RandomUniform produce their mean (noise 0).
    pub deterministic: bool,
    /// Seed of the random layers (their own `pad[0]`, as in Barracuda, otherwise).
    pub seed: Option<u32>,
    /// Lower for our tract runner rather than for a file Unity imports (Barracuda-era
    /// importers reject a computed `Expand`): with `deterministic`, a random layer with an
    /// input becomes its mode expanded to the input's shape (`Expand(mode, Shape(x))`, which
    /// tract folds into a constant at a fixed batch, and with it the noise's scaling and the
    /// add to the mean) instead of `x - x + mode` (three steps of every run); an LSTM cell
    /// written as layers ([`super::lstm_cell`]) becomes one ONNX `LSTM` (which tract runs as
    /// two matrix products and one fused step; Barracuda imports no `LSTM`).
    pub for_runner: bool,
}

/// The ONNX `strides` and `pads` of a Conv2D or pool layer (`stride` `[x, y]`, `pad`
/// `[left, top, right, bottom]` or automatic).
fn stride_and_pads(layer: &Layer) -> Result<Vec<AttributeProto>, LowerError> {
    let bad = |detail: String| LowerError::BadLayer { layer: layer.name.clone(), detail };
    let (sx, sy) = match layer.stride.as_slice() {
        [] => (1, 1),
        [sx, sy] => (*sx as i64, *sy as i64),
        other => return Err(bad(format!("stride {other:?} is not [x, y]"))),
    };
    let mut attrs = vec![attr_ints("strides", &[sy, sx])];
    match layer.pad.as_slice() {
        [] => {}
        [-1] => attrs.push(attr_string("auto_pad", "SAME_UPPER")),
        [-2] => attrs.push(attr_string("auto_pad", "SAME_LOWER")),
        [l, t, r, bt] if [*l, *t, *r, *bt].iter().all(|p| *p >= 0) => attrs.push(attr_ints("pads", &[*t as i64, *l as i64, *bt as i64, *r as i64])),
        other => return Err(bad(format!("pad {other:?} is not [left, top, right, bottom] or automatic"))),
    }
    Ok(attrs)
}

struct Builder<'a> {
    model: &'a NnModel,
    options: LowerOptions,
    format: i64,
    graph: &'a mut GraphBuilder,
    /// `.nn` name -> current ONNX value name.
    values: HashMap<String, String>,
    /// With twins: `.nn` name -> the value computed with the random layers at their mode, for
    /// every layer downstream of a random layer.
    twins: Option<HashMap<String, String>>,
    /// The index of the layer being lowered.
    current: usize,
    /// With `for_runner`: the LSTM cells lowered as one `LSTM` each.
    lstm_cells: Vec<Rc<LstmCell>>,
    /// The new hidden state of a cell whose `LSTM` is written, by the index of the layer
    /// that computes it as layers.
    pending_hidden: HashMap<usize, String>,
}

impl Builder<'_> {
    fn node(&mut self, op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>, base: &str) -> String {
        self.graph.node(op, inputs, attribute, base)
    }

    fn constant(&mut self, base: &str, dims: &[i64], data: Vec<f32>) -> String {
        self.graph.constant(base, dims, data)
    }

    fn constant_i64(&mut self, base: &str, dims: &[i64], data: Vec<i64>) -> String {
        self.graph.constant_i64(base, dims, data)
    }

    fn tensor_constant(&mut self, t: &TensorDesc) -> String {
        let dims: Vec<i64> = t.shape.iter().map(|d| *d as i64).collect();
        let data = self.model.tensor_values(t);
        self.constant(&t.name, &dims, data)
    }

    fn resolve(&self, layer: &Layer, name: &str) -> Result<String, LowerError> {
        self.values.get(name).cloned().ok_or_else(|| LowerError::UnknownInput { layer: layer.name.clone(), input: name.into() })
    }

    /// A version-16 axis as an NHWC index (0..4); later versions store an 8-D index.
    fn axis(&self, layer: &Layer) -> Result<i64, LowerError> {
        nhwc_axis(self.format, layer.axis)
            .ok_or_else(|| LowerError::BadLayer { layer: layer.name.clone(), detail: format!("axis {} is outside NHWC", layer.axis) })
    }

    /// `[N, H, W, C]` -> `[N, H*W*C]`.
    fn flat(&mut self, x: String, base: &str) -> String {
        self.node("Flatten", vec![x], vec![attr_int("axis", 1)], base)
    }

    /// `[N, K]` -> `[N, 1, 1, K]` (one axis per Unsqueeze, as Barracuda before 2.3 reads them).
    fn unflat(&mut self, x: String, base: &str) -> String {
        unsqueeze_to_rank4(self.graph, x, base)
    }

    fn activation(&mut self, layer: &Layer, activation: Activation, x: String) -> Result<String, LowerError> {
        use Activation as A;
        let base = layer.name.as_str();
        let simple = |a: A| -> Option<&'static str> {
            Some(match a {
                A::None => "Identity",
                A::Relu => "Relu",
                A::Tanh => "Tanh",
                A::Sigmoid => "Sigmoid",
                A::Exp => "Exp",
                A::Log => "Log",
                A::Sqrt => "Sqrt",
                A::Abs => "Abs",
                A::Neg => "Neg",
                A::Ceil => "Ceil",
                A::Floor => "Floor",
                A::Round => "Round",
                A::Reciprocal => "Reciprocal",
                A::Softplus => "Softplus",
                A::Softsign => "Softsign",
                A::Erf => "Erf",
                A::Sin => "Sin",
                A::Cos => "Cos",
                A::Tan => "Tan",
                A::Asin => "Asin",
                A::Acos => "Acos",
                A::Atan => "Atan",
                A::Sinh => "Sinh",
                A::Cosh => "Cosh",
                A::Asinh => "Asinh",
                A::Acosh => "Acosh",
                A::Atanh => "Atanh",
                _ => return None,
            })
        };
        if let Some(op) = simple(activation) {
            return Ok(self.node(op, vec![x], vec![], base));
        }
        Ok(match activation {
            A::Swish => {
                let s = self.node("Sigmoid", vec![x.clone()], vec![], base);
                self.node("Mul", vec![x, s], vec![], base)
            }
            A::Elu => self.node("Elu", vec![x], vec![attr_float("alpha", layer.alpha)], base),
            A::LeakyRelu => self.node("LeakyRelu", vec![x], vec![attr_float("alpha", layer.alpha)], base),
            A::Selu => self.node("Selu", vec![x], vec![attr_float("alpha", layer.alpha), attr_float("gamma", layer.beta)], base),
            A::HardSigmoid => {
                self.node("HardSigmoid", vec![x], vec![attr_float("alpha", layer.alpha), attr_float("beta", layer.beta)], base)
            }
            A::Relu6 | A::Clip => {
                let (lo, hi) = if activation == A::Relu6 { (0.0, 6.0) } else { (layer.alpha, layer.beta) };
                let lo = self.constant("clip_min", &[], vec![lo]);
                let hi = self.constant("clip_max", &[], vec![hi]);
                self.node("Clip", vec![x, lo, hi], vec![], base)
            }
            A::Pow => {
                let e = self.constant("exponent", &[], vec![layer.alpha]);
                self.node("Pow", vec![x, e], vec![], base)
            }
            A::Softmax | A::LogSoftmax => {
                let f = self.flat(x, base);
                let op = if activation == A::Softmax { "Softmax" } else { "LogSoftmax" };
                let s = self.node(op, vec![f], vec![attr_int("axis", 1)], base);
                self.unflat(s, base)
            }
            other => {
                return Err(LowerError::UnsupportedActivation { layer: layer.name.clone(), activation: format!("{other:?}") })
            }
        })
    }

    fn dense(&mut self, layer: &Layer, inputs: &[String]) -> Result<String, LowerError> {
        let bad = |detail: &str| LowerError::BadLayer { layer: layer.name.clone(), detail: detail.into() };
        let ([x], [w, b]) = (inputs, layer.tensors.as_slice()) else {
            return Err(bad("Dense needs 1 input and 2 tensors"));
        };
        if w.shape.len() != 4 {
            return Err(bad("the Dense kernel's shape needs 4 entries [in, 1, 1, out]"));
        }
        let (n_in, n_out) = (w.shape[0] as i64, w.shape[3] as i64);
        let weights = self.model.tensor_values(w);
        let w = self.constant(&w.name, &[n_in, n_out], weights);
        let bias = self.model.tensor_values(b);
        if bias.len() as i64 != n_out {
            return Err(bad("bias length differs from the kernel's output size"));
        }
        let b = self.constant(&b.name, &[n_out], bias);
        let f = self.flat(x.clone(), &layer.name);
        let g = self.node("Gemm", vec![f, w, b], vec![], &layer.name);
        Ok(self.unflat(g, &layer.name))
    }

    fn conv(&mut self, layer: &Layer, inputs: &[String]) -> Result<String, LowerError> {
        let bad = |detail: String| LowerError::BadLayer { layer: layer.name.clone(), detail };
        let ([x], [k, b]) = (inputs, layer.tensors.as_slice()) else {
            return Err(bad("Conv2D needs 1 input and 2 tensors".into()));
        };
        if k.shape.len() != 4 {
            return Err(bad(format!("the Conv2D kernel's shape {:?} needs 4 entries [KH, KW, Cin, Cout]", k.shape)));
        }
        let [kh, kw, cin, cout] = [k.shape[0], k.shape[1], k.shape[2], k.shape[3]].map(|d| d as usize);
        // HWIO -> OIHW.
        let hwio = self.model.tensor_values(k);
        let mut oihw = vec![0.0; hwio.len()];
        for dy in 0..kh {
            for dx in 0..kw {
                for c in 0..cin {
                    for o in 0..cout {
                        oihw[((o * cin + c) * kh + dy) * kw + dx] = hwio[((dy * kw + dx) * cin + c) * cout + o];
                    }
                }
            }
        }
        let kernel = self.constant(&k.name, &[cout as i64, cin as i64, kh as i64, kw as i64], oihw);
        let bias = self.constant(&b.name, &[cout as i64], self.model.tensor_values(b));
        // strides, kernel_shape, then pads: the order earlier conversions wrote.
        let mut attrs = stride_and_pads(layer)?;
        attrs.insert(1, attr_ints("kernel_shape", &[kh as i64, kw as i64]));
        let nchw = self.node("Transpose", vec![x.clone()], vec![attr_ints("perm", &[0, 3, 1, 2])], &layer.name);
        let y = self.node("Conv", vec![nchw, kernel, bias], attrs, &layer.name);
        Ok(self.node("Transpose", vec![y], vec![attr_ints("perm", &[0, 2, 3, 1])], &layer.name))
    }

    /// MaxPool2D and AvgPool2D (barracuda-nn.md §7.7): `pool` is `[width, height]`; run on
    /// NCHW between transposes, as a convolution.
    fn pool(&mut self, layer: &Layer, x: String) -> Result<String, LowerError> {
        let [pw, ph] = layer.pool.as_slice() else {
            return Err(LowerError::BadLayer { layer: layer.name.clone(), detail: format!("pool {:?} is not [width, height]", layer.pool) });
        };
        let mut attrs = vec![attr_ints("kernel_shape", &[*ph as i64, *pw as i64])];
        attrs.extend(stride_and_pads(layer)?);
        let op = if layer.layer_type == LayerType::MaxPool2D { "MaxPool" } else { "AveragePool" };
        let nchw = self.node("Transpose", vec![x], vec![attr_ints("perm", &[0, 3, 1, 2])], &layer.name);
        let y = self.node(op, vec![nchw], attrs, &layer.name);
        Ok(self.node("Transpose", vec![y], vec![attr_ints("perm", &[0, 2, 3, 1])], &layer.name))
    }

    fn strided_slice(&mut self, layer: &Layer, x: String) -> Result<String, LowerError> {
        let bad = |detail: String| LowerError::BadLayer { layer: layer.name.clone(), detail };
        let (starts, ends, steps) = (&layer.pad, &layer.pool, &layer.stride);
        if starts.len() != 4 || ends.len() != 4 || steps.len() != 4 {
            return Err(bad(format!("StridedSlice needs 4 starts, ends and strides; has {starts:?} {ends:?} {steps:?}")));
        }
        let mut onnx = (vec![], vec![], vec![], vec![]);
        for axis in 0..4 {
            let (s, e, st) = (starts[axis] as i64, ends[axis] as i64, steps[axis] as i64);
            let (from, to) = if s == e {
                if st == 0 {
                    (s, if s == -1 { i64::MAX } else { s + 1 })
                } else {
                    (0, i64::MAX)
                }
            } else if st == 1 {
                (s, if e == 0 { i64::MAX } else { e })
            } else {
                return Err(bad(format!("axis {axis}: slice {s}..{e} step {st} is not supported (unit steps only)")));
            };
            onnx.0.push(from);
            onnx.1.push(to);
            onnx.2.push(axis as i64);
            onnx.3.push(1);
        }
        let starts = self.constant_i64("starts", &[4], onnx.0);
        let ends = self.constant_i64("ends", &[4], onnx.1);
        let axes = self.constant_i64("axes", &[4], onnx.2);
        let steps = self.constant_i64("steps", &[4], onnx.3);
        Ok(self.node("Slice", vec![x, starts, ends, axes, steps], vec![], &layer.name))
    }

    fn random(&mut self, layer: &Layer, x: Option<String>) -> Result<String, LowerError> {
        let normal = layer.layer_type == LayerType::RandomNormal;
        // Barracuda seeds the stream once with pad[0] (1337 without pad) and continues it; the
        // runner keeps tract's state between runs, so a seeded op does the same.
        let seed = self.options.seed.map(|s| s as f32).unwrap_or_else(|| layer.pad.first().map_or(1337.0, |s| *s as f32));
        let seed = vec![attr_float("seed", seed)];
        let (scale, mean) = (layer.alpha, layer.beta);
        if !layer.pool.is_empty() {
            let shape: Vec<i64> = layer.pool.iter().map(|d| *d as i64).collect();
            if self.options.deterministic {
                let n = shape.iter().product::<i64>().max(0) as usize;
                let mode = if normal { mean } else { mean + scale * 0.5 };
                return Ok(self.constant(&layer.name, &shape, vec![mode; n]));
            }
            let mut attrs = vec![attr_ints("shape", &shape)];
            attrs.extend(seed);
            attrs.extend(if normal {
                [attr_float("mean", mean), attr_float("scale", scale)]
            } else {
                [attr_float("low", mean), attr_float("high", mean + scale)]
            });
            return Ok(self.node(if normal { "RandomNormal" } else { "RandomUniform" }, vec![], attrs, &layer.name));
        }
        let x = x.ok_or_else(|| LowerError::BadLayer { layer: layer.name.clone(), detail: "needs an input or a pool shape".into() })?;
        if self.options.deterministic {
            let mode = self.constant("mode", &[], vec![if normal { mean } else { mean + scale * 0.5 }]);
            if self.options.for_runner {
                let shape = self.node("Shape", vec![x], vec![], &layer.name);
                return Ok(self.node("Expand", vec![mode, shape], vec![], &layer.name));
            }
            let zeros = self.node("Sub", vec![x.clone(), x], vec![], &layer.name);
            return Ok(self.node("Add", vec![zeros, mode], vec![], &layer.name));
        }
        let mut attrs = if normal {
            vec![attr_float("mean", mean), attr_float("scale", scale)]
        } else {
            vec![attr_float("low", mean), attr_float("high", mean + scale)]
        };
        attrs.extend(seed);
        Ok(self.node(if normal { "RandomNormalLike" } else { "RandomUniformLike" }, vec![x], attrs, &layer.name))
    }

    /// Add, Sub, Mul, Div, Pow, Min, Max folded over the arguments; Mean as their sum
    /// divided by their count.
    fn elementwise(&mut self, layer: &Layer, args: &[String]) -> Result<String, LowerError> {
        use LayerType as T;
        if args.len() < 2 {
            return Err(LowerError::BadLayer { layer: layer.name.clone(), detail: "needs at least 2 arguments".into() });
        }
        let op = match layer.layer_type {
            T::Add | T::Mean => "Add",
            T::Sub => "Sub",
            T::Mul => "Mul",
            T::Div => "Div",
            T::Pow => "Pow",
            T::Min => "Min",
            _ => "Max",
        };
        let name = layer.name.as_str();
        let mut acc = args[0].clone();
        for a in &args[1..] {
            acc = self.node(op, vec![acc, a.clone()], vec![], name);
        }
        if layer.layer_type == T::Mean {
            let n = self.constant("count", &[], vec![args.len() as f32]);
            acc = self.node("Div", vec![acc, n], vec![], name);
        }
        Ok(acc)
    }

    /// Reshape to the layer's pool shape, or to the shape of its second input.
    fn reshape(&mut self, layer: &Layer, args: &[String]) -> Result<String, LowerError> {
        let name = layer.name.as_str();
        let shape = if layer.pool.is_empty() {
            let other = args.get(1).cloned().ok_or_else(|| LowerError::BadLayer {
                layer: layer.name.clone(),
                detail: "Reshape without a target shape or a second input".into(),
            })?;
            self.node("Shape", vec![other], vec![], name)
        } else {
            let dims: Vec<i64> = layer.pool.iter().map(|d| *d as i64).collect();
            self.constant_i64("shape", &[dims.len() as i64], dims)
        };
        let x = args.first().cloned().ok_or_else(|| LowerError::BadLayer { layer: layer.name.clone(), detail: "no input".into() })?;
        Ok(self.node("Reshape", vec![x, shape], vec![], name))
    }

    /// OneHot of depth `pool[0]` with `alpha` for the hit and `beta` elsewhere.
    fn one_hot(&mut self, layer: &Layer, x: String) -> Result<String, LowerError> {
        let name = layer.name.as_str();
        let depth = *layer.pool.first().ok_or_else(|| LowerError::BadLayer {
            layer: layer.name.clone(),
            detail: "OneHot without a depth in pool".into(),
        })? as i64;
        if !(1..=MAX_ONE_HOT_DEPTH).contains(&depth) {
            return Err(LowerError::BadLayer { layer: layer.name.clone(), detail: format!("OneHot depth {depth} is outside 1..={MAX_ONE_HOT_DEPTH}") });
        }
        // index == class ? on : off, for each class: an index outside [0, depth) gives
        // all `off` (tract's own OneHot panics on one).
        let f = self.flat(x, name);
        let indices = self.node("Cast", vec![f], vec![attr_int("to", INT64 as i64)], name);
        let indices = self.node("Unsqueeze", vec![indices], vec![attr_ints("axes", &[-1])], name);
        let classes = self.constant_i64("classes", &[depth.max(0)], (0..depth.max(0)).collect());
        let hit = self.node("Equal", vec![indices, classes], vec![], name);
        let on = self.constant("on", &[1], vec![layer.alpha]);
        let off = self.constant("off", &[1], vec![layer.beta]);
        let h = self.node("Where", vec![hit, on, off], vec![], name);
        Ok(self.node("Unsqueeze", vec![h], vec![attr_ints("axes", &[1])], name))
    }

    /// Lowers a layer; with twins, a layer that is random or reads a value that has a twin is
    /// lowered a second time, deterministically and from the twins of its inputs.
    fn layer_and_twin(&mut self, layer: &Layer) -> Result<(), LowerError> {
        self.layer(layer)?;
        let Some(twins) = &self.twins else { return Ok(()) };
        let random = matches!(layer.layer_type, LayerType::RandomNormal | LayerType::RandomUniform);
        let swapped: Vec<(String, String)> = layer.inputs.iter().filter_map(|i| twins.get(i).map(|t| (i.clone(), t.clone()))).collect();
        if !random && swapped.is_empty() {
            return Ok(());
        }
        let normal = self.values[&layer.name].clone();
        let originals: Vec<(String, Option<String>)> = swapped.iter().map(|(i, t)| (i.clone(), self.values.insert(i.clone(), t.clone()))).collect();
        let options = self.options;
        self.options.deterministic = true;
        let result = self.layer(layer);
        self.options = options;
        let twin = std::mem::replace(self.values.get_mut(&layer.name).expect("lowered above"), normal);
        for (name, original) in originals.into_iter().rev() {
            if let Some(v) = original {
                self.values.insert(name, v);
            }
        }
        result?;
        self.twins.as_mut().expect("checked above").insert(layer.name.clone(), twin);
        Ok(())
    }

    fn layer(&mut self, layer: &Layer) -> Result<(), LowerError> {
        use LayerType as T;
        if layer.layer_type == T::Load {
            for t in &layer.tensors {
                let v = self.tensor_constant(t);
                let key = if layer.tensors.len() == 1 { layer.name.clone() } else { t.name.clone() };
                self.values.insert(key, v);
            }
            return Ok(());
        }
        let inputs: Vec<String> = layer.inputs.iter().map(|i| self.resolve(layer, i)).collect::<Result<_, _>>()?;
        let mut args = inputs.clone();
        let own_tensors_are_args = !matches!(layer.layer_type, T::Dense | T::Conv2D);
        if own_tensors_are_args {
            for t in &layer.tensors {
                let v = self.tensor_constant(t);
                args.push(v);
            }
        }
        let first = || {
            args.first().cloned().ok_or_else(|| LowerError::BadLayer { layer: layer.name.clone(), detail: "no input".into() })
        };
        let name = layer.name.as_str();
        let mut out = match layer.layer_type {
            T::Nop | T::Dropout => self.node("Identity", vec![first()?], vec![], name),
            T::Dense => self.dense(layer, &inputs)?,
            T::Conv2D => self.conv(layer, &inputs)?,
            T::MaxPool2D | T::AvgPool2D => self.pool(layer, first()?)?,
            T::Activation => self.activation(layer, layer.activation, first()?)?,
            T::Add | T::Sub | T::Mul | T::Div | T::Pow | T::Min | T::Max | T::Mean => self.elementwise(layer, &args)?,
            T::ReduceSum | T::ReduceMean | T::ReduceMax | T::ReduceMin | T::ReduceProd => {
                let op = format!("{:?}", layer.layer_type);
                let axis = self.axis(layer)?;
                self.node(&op, vec![first()?], vec![attr_ints("axes", &[axis]), attr_int("keepdims", 1)], name)
            }
            T::Concat => {
                let axis = self.axis(layer)?;
                self.node("Concat", args.clone(), vec![attr_int("axis", axis)], name)
            }
            T::StridedSlice => self.strided_slice(layer, first()?)?,
            T::Flatten => {
                let f = self.flat(first()?, name);
                self.unflat(f, name)
            }
            T::Reshape => self.reshape(layer, &args)?,
            T::OneHot => self.one_hot(layer, first()?)?,
            T::RandomNormal | T::RandomUniform => self.random(layer, args.first().cloned())?,
            other => return Err(LowerError::UnsupportedLayer { layer: layer.name.clone(), kind: format!("{other:?}") }),
        };
        if layer.layer_type != T::Activation && layer.activation != Activation::None {
            out = self.activation(layer, layer.activation, out)?;
        }
        self.values.insert(layer.name.clone(), out);
        self.take_lstm_outputs(layer)
    }

    /// The layers of an LSTM cell are lowered as written (what else reads a gate keeps
    /// reading it), but the new cell state, where it is computed, and the new hidden state
    /// come from one `LSTM` node; the gate layers nothing else reads are left unused, and
    /// tract drops them.
    fn take_lstm_outputs(&mut self, layer: &Layer) -> Result<(), LowerError> {
        if let Some(cell) = self.lstm_cells.iter().find(|c| c.c_out == self.current).cloned() {
            let (c, h) = self.lstm(&cell, &layer.name)?;
            self.values.insert(layer.name.clone(), c);
            self.pending_hidden.insert(cell.h_out, h);
        } else if let Some(h) = self.pending_hidden.remove(&self.current) {
            self.values.insert(layer.name.clone(), h);
        }
        Ok(())
    }

    /// One ONNX `LSTM` step (sequence length 1) for a cell: its new cell and hidden states,
    /// rank 4.
    fn lstm(&mut self, cell: &LstmCell, base: &str) -> Result<(String, String), LowerError> {
        let layer = &self.model.layers[self.current];
        let sequence = |this: &mut Self, name: &str| -> Result<String, LowerError> {
            let value = this.resolve(layer, name)?;
            let rows = this.flat(value, base);
            Ok(this.node("Unsqueeze", vec![rows], vec![attr_ints("axes", &[0])], base))
        };
        let x = sequence(self, &cell.x)?;
        let h = sequence(self, &cell.h_in)?;
        let c = sequence(self, &cell.c_in)?;
        let (hidden, input) = (cell.hidden as i64, cell.input as i64);
        let w = self.constant(&format!("{base}/lstm_W"), &[1, 4 * hidden, input], cell.w.clone());
        let r = self.constant(&format!("{base}/lstm_R"), &[1, 4 * hidden, hidden], cell.r.clone());
        // ONNX adds an input and a recurrent bias; the layers have one.
        let mut bias = cell.bias.clone();
        bias.resize(8 * cell.hidden, 0.0);
        let b = self.constant(&format!("{base}/lstm_B"), &[1, 8 * hidden], bias);
        let outputs = ["lstm_Y", "lstm_Y_h", "lstm_Y_c"].map(|o| self.graph.fresh(&format!("{base}/{o}")));
        self.graph.node_outputs("LSTM", vec![x, w, r, b, String::new(), h, c], vec![attr_int("hidden_size", hidden)], &outputs);
        let last_step = |this: &mut Self, value: &str| {
            let rows = this.node("Squeeze", vec![value.to_string()], vec![attr_ints("axes", &[0])], base);
            this.unflat(rows, base)
        };
        Ok((last_step(self, &outputs[2]), last_step(self, &outputs[1])))
    }
}

/// A layer's axis as an NHWC index (0..4): version 16 stores it so (negative from the end),
/// later versions store an index into 8 dimensions. `None` outside NHWC.
fn nhwc_axis(format: i64, axis: i32) -> Option<i64> {
    let a = axis as i64;
    let mapped = if format >= 17 && a >= 0 {
        match a {
            2 => 0,
            5 => 1,
            6 => 2,
            7 => 3,
            _ => -99,
        }
    } else if a < 0 {
        4 + a
    } else {
        a
    };
    (0..4).contains(&mapped).then_some(mapped)
}

/// `[N, K]` -> `[N, 1, 1, K]` with two single-axis Unsqueeze nodes (Barracuda before 2.3
/// takes one axis per node).
pub fn unsqueeze_to_rank4(graph: &mut GraphBuilder, x: String, base: &str) -> String {
    let once = graph.node("Unsqueeze", vec![x], vec![attr_ints("axes", &[1])], base);
    graph.node("Unsqueeze", vec![once], vec![attr_ints("axes", &[1])], base)
}

/// The values a lowering left in a caller's graph.
pub struct LoweredValues {
    /// `.nn` layer (and output) name -> the ONNX value holding it.
    pub values: HashMap<String, String>,
    /// With [`lower_into`]'s `twins`: the value of each layer downstream of a random layer
    /// computed with every random layer at its mode (noise 0), by `.nn` name.
    pub twins: HashMap<String, String>,
}

/// Lowers a model's layers into `graph`, whose values named in `inputs` stand for the model's
/// inputs and memory inputs (`.nn` name -> ONNX value, rank-4 NHWC). With `twins` (the
/// deterministic stand-ins of some inputs, e.g. a noise input's zeros), the layers downstream
/// of random layers or of those inputs are also lowered deterministically (see
/// [`LoweredValues`]).
pub fn lower_into(model: &NnModel, options: LowerOptions, graph: &mut GraphBuilder, inputs: HashMap<String, String>, twins: Option<HashMap<String, String>>) -> Result<LoweredValues, LowerError> {
    let format = model.format_version();
    // Twins lower layers a second time, which the cells' outputs would not follow.
    let lstm_cells = if options.for_runner && twins.is_none() {
        find_lstm_cells(model, |concat| nhwc_axis(format, concat.axis) == Some(3)).into_iter().map(Rc::new).collect()
    } else {
        vec![]
    };
    let mut b = Builder { model, options, format, graph, values: inputs, twins, current: 0, lstm_cells, pending_hidden: HashMap::new() };
    for (index, layer) in model.layers.iter().enumerate() {
        b.current = index;
        b.layer_and_twin(layer)?;
    }
    Ok(LoweredValues { values: b.values, twins: b.twins.unwrap_or_default() })
}

/// Lowers a model into an ONNX graph whose inputs are the model's inputs and memory inputs
/// (rank 4, batch symbolic) and whose outputs are the model's outputs then its memory
/// outputs, under their `.nn` names.
pub fn to_onnx(model: &NnModel, options: LowerOptions) -> Result<ModelProto, LowerError> {
    let mut graph = GraphBuilder::default();
    let mut inputs = vec![];
    let mut names = HashMap::new();
    for input in &model.inputs {
        names.insert(input.name.clone(), input.name.clone());
        inputs.push(value_info(&input.name, FLOAT, &input.shape.iter().map(|d| *d as i64).collect::<Vec<_>>()));
    }
    for m in &model.memories {
        let mut shape = m.shape.clone();
        if let Some(first) = shape.first_mut() {
            *first = -1; // one memory row per agent
        }
        names.insert(m.input.clone(), m.input.clone());
        inputs.push(value_info(&m.input, FLOAT, &shape.iter().map(|d| *d as i64).collect::<Vec<_>>()));
    }
    let lowered = lower_into(model, options, &mut graph, names, None)?;
    let mut outputs = vec![];
    let wanted: Vec<&String> = model.outputs.iter().chain(model.memories.iter().map(|m| &m.output)).collect();
    for name in wanted {
        if outputs.iter().any(|o: &ValueInfoProto| &o.name == name) {
            continue;
        }
        let value = lowered.values.get(name).cloned().ok_or_else(|| LowerError::UnknownOutput(name.clone()))?;
        graph.node_into("Identity", vec![value], vec![], name);
        outputs.push(ValueInfoProto { name: name.clone(), ..Default::default() });
    }
    Ok(graph.finish("barracuda", OPSET, inputs, outputs, "mlagents-rs barracuda lowering"))
}
