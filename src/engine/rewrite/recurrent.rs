//! ONNX `LSTM`, `GRU` and `RNN` nodes as ONNX defines them, every attribute included.
//!
//! tract 0.23 reads these nodes with forward direction, ONNX's default activations and no
//! clip whatever the attributes say: `direction: reverse`, `clip`, `input_forget`, other
//! `activations` (with their `activation_alpha` / `activation_beta`) ran silently wrong, up
//! to 11.2 off with Relu activations (bad-input report of 2 December, S1), and its sigmoid
//! and tanh are the approximations [`super::exact`] replaces elsewhere (S6). Before tract
//! sees the graph, every recurrent node that the one-step rewrite ([`super::lstm_step`]) did
//! not take becomes one ONNX `Scan` per direction whose body computes one time step with
//! ONNX ops and the exact activations:
//!
//! - LSTM (gates `i o f c`): `i = f(xWᵢ + hRᵢ + bᵢ + Pᵢ⊙c)`, `f = 1 - i` with
//!   `input_forget`, else `f(… + P_f⊙c)`, `c' = f⊙c + i⊙g(…)`, `o = f(… + Pₒ⊙c')`,
//!   `h' = o⊙h(c')`;
//! - GRU (gates `z r h`): `z`, `r` as above, `h̃ = g(xWₕ + (r⊙h)Rₕ + Rbₕ + Wbₕ)`, or with
//!   `linear_before_reset` `g(xWₕ + Wbₕ + r⊙(hRₕ + Rbₕ))`; `h' = (1 - z)⊙h̃ + z⊙h`;
//! - RNN: `h' = f(xW + hR + b)`.
//!
//! `clip` bounds every gate's input to its activation (after the biases and peepholes) to
//! [-clip, clip]; the cell state is not clipped (onnxruntime's rule). LSTM and GRU consume
//! `activation_alpha` and `activation_beta` in the order of the activations, by those that
//! take them (onnxruntime's reading); an RNN's activation of direction d takes entry d (the
//! ONNX reference implementation's and onnxruntime's). A value not given is the ONNX operator's
//! default (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1, otherwise 0; onnxruntime's RNN takes
//! 0 for every activation when the attribute is absent). `reverse` runs the scan backwards and keeps `Y` in the input's time order;
//! `bidirectional` runs both and stacks them on the direction axis; `layout: 1` scans the
//! second axis. What cannot be computed faithfully is refused naming the node and what it
//! sets: `sequence_lens` (per-row lengths), an unknown activation, a direction or a count of
//! activations ONNX does not define, and non-default attributes on weights computed by nodes.

use crate::engine::kernels::exact_ops::{AFFINE, ELU, SIGMOID, TANH};
use crate::onnx::{attr_float, attr_int, attr_ints, GraphBuilder, FLOAT};
use tract_onnx::pb;

/// The three recurrent cells of ONNX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Lstm,
    Gru,
    Rnn,
}

impl Cell {
    fn of(op_type: &str) -> Option<Cell> {
        match op_type {
            "LSTM" => Some(Cell::Lstm),
            "GRU" => Some(Cell::Gru),
            "RNN" => Some(Cell::Rnn),
            _ => None,
        }
    }

    /// Gates per direction (rows of `W` per hidden unit).
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
            Cell::Rnn => 1,
        }
    }

    /// ONNX's default activations of one direction.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Rnn => &["Tanh"],
        }
    }

    /// The attributes ONNX defines for the cell (`output_sequence` is opset 1's, which
    /// changes nothing computed).
    fn known_attribute(self, name: &str) -> bool {
        let common = ["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout", "output_sequence"];
        common.contains(&name) || (self == Cell::Lstm && name == "input_forget") || (self == Cell::Gru && name == "linear_before_reset")
    }
}

/// An activation function of a recurrent cell, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Activation {
    Relu,
    Tanh,
    Sigmoid,
    Affine { alpha: f32, beta: f32 },
    LeakyRelu { alpha: f32 },
    ThresholdedRelu { alpha: f32 },
    ScaledTanh { alpha: f32, beta: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    Elu { alpha: f32 },
    Softsign,
    Softplus,
}

impl Activation {
    /// Parses `name` (any case, as onnxruntime reads it), taking its alpha and beta from the
    /// node's lists when it uses them.
    fn parse(name: &str, alphas: &mut impl Iterator<Item = f32>, betas: &mut impl Iterator<Item = f32>) -> Option<Activation> {
        let mut alpha = |default: f32| alphas.next().unwrap_or(default);
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => Activation::Relu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "affine" => Activation::Affine { alpha: alpha(0.0), beta: betas.next().unwrap_or(0.0) },
            "leakyrelu" => Activation::LeakyRelu { alpha: alpha(0.01) },
            "thresholdedrelu" => Activation::ThresholdedRelu { alpha: alpha(0.0) },
            "scaledtanh" => Activation::ScaledTanh { alpha: alpha(0.0), beta: betas.next().unwrap_or(0.0) },
            "hardsigmoid" => Activation::HardSigmoid { alpha: alpha(0.2), beta: betas.next().unwrap_or(0.5) },
            "elu" => Activation::Elu { alpha: alpha(1.0) },
            "softsign" => Activation::Softsign,
            "softplus" => Activation::Softplus,
            _ => return None,
        })
    }
}

/// One recurrent node, read and checked.
struct Recurrent<'a> {
    node: &'a pb::NodeProto,
    cell: Cell,
    hidden: usize,
    features: usize,
    /// One entry per direction: whether it runs backwards.
    reversed: Vec<bool>,
    /// The activations of each direction.
    activations: Vec<Vec<Activation>>,
    clip: Option<f32>,
    input_forget: bool,
    linear_before_reset: bool,
    batch_first: bool,
    /// `W [D, G·h, features]`, `R [D, G·h, h]`, `B [D, 2·G·h]`, `P [D, 3h]`.
    w: Vec<f32>,
    r: Vec<f32>,
    bias: Option<Vec<f32>>,
    peepholes: Option<Vec<f32>>,
}

/// Rewrites every `LSTM`, `GRU` and `RNN` of the graph into scans (see the module docs);
/// returns how many, or why a node cannot be computed as ONNX defines it.
pub fn recurrent_nodes(graph: &mut pb::GraphProto, opset: i64) -> Result<usize, String> {
    let mut rewritten = 0;
    let mut nodes = Vec::with_capacity(graph.node.len());
    let mut initializers = vec![];
    for node in std::mem::take(&mut graph.node) {
        let Some(cell) = Cell::of(&node.op_type).filter(|_| node.domain.is_empty() || node.domain == "ai.onnx") else {
            nodes.push(node);
            continue;
        };
        match read(&node, cell, &graph.initializer)? {
            Some(recurrent) => {
                let mut builder = GraphBuilder::default();
                recurrent.expand(&mut builder, opset);
                nodes.extend(builder.nodes);
                initializers.extend(builder.initializers);
                rewritten += 1;
            }
            None => nodes.push(node),
        }
    }
    graph.node = nodes;
    graph.initializer.extend(initializers);
    Ok(rewritten)
}

/// A node's description: `"LSTM node \"name\""`.
fn describe(node: &pb::NodeProto) -> String {
    format!("{} node {:?}", node.op_type, node.name)
}

/// Reads a recurrent node. `None`: its weights are computed by nodes and it uses only what
/// tract computes (ONNX's defaults, forward or bidirectional), so tract keeps it.
fn read<'a>(node: &'a pb::NodeProto, cell: Cell, initializers: &[pb::TensorProto]) -> Result<Option<Recurrent<'a>>, String> {
    let refuse = |what: String| format!("{}: {what}", describe(node));
    if let Some(unknown) = node.attribute.iter().find(|a| !cell.known_attribute(&a.name)) {
        return Err(refuse(format!("attribute {:?} is not one ONNX defines for {}", unknown.name, node.op_type)));
    }
    let input = |k: usize| node.input.get(k).filter(|name| !name.is_empty());
    if let Some(lengths) = input(4) {
        return Err(refuse(format!(
            "reads sequence_lens {lengths:?}; per-row sequence lengths are not supported by this runner (remove the input when every row runs the whole sequence)"
        )));
    }
    if cell != Cell::Lstm && (input(6).is_some() || input(7).is_some()) {
        return Err(refuse("has inputs past initial_h, which ONNX does not define for it".into()));
    }
    let attribute = |name: &str| node.attribute.iter().find(|a| a.name == name);
    let direction = attribute("direction").map_or("forward".to_string(), |a| String::from_utf8_lossy(&a.s).into_owned());
    let reversed = match direction.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(refuse(format!("direction {other:?} is not forward, reverse or bidirectional"))),
    };
    let directions = reversed.len();
    let names: Vec<String> = match attribute("activations") {
        Some(a) => a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        None => cell.default_activations().iter().cycle().take(cell.default_activations().len() * directions).map(|s| s.to_string()).collect(),
    };
    let per_direction = cell.default_activations().len();
    if names.len() != per_direction * directions {
        return Err(refuse(format!("{} activations {names:?} for {directions} direction(s); ONNX asks for {}", names.len(), per_direction * directions)));
    }
    let alpha_list = attribute("activation_alpha").map(|a| a.floats.clone()).unwrap_or_default();
    let beta_list = attribute("activation_beta").map(|a| a.floats.clone()).unwrap_or_default();
    let (mut alphas, mut betas) = (alpha_list.iter().copied(), beta_list.iter().copied());
    let mut parsed = vec![];
    for (k, name) in names.iter().enumerate() {
        // An RNN's one activation per direction takes the values at its own position (the ONNX
        // reference implementation's and onnxruntime's reading); LSTM and GRU activations take
        // them in turn, those that use them only (onnxruntime's).
        let activation = match cell {
            Cell::Rnn => Activation::parse(name, &mut alpha_list.get(k).copied().into_iter(), &mut beta_list.get(k).copied().into_iter()),
            _ => Activation::parse(name, &mut alphas, &mut betas),
        };
        parsed.push(activation.ok_or_else(|| refuse(format!("activation {name:?} is not one ONNX defines for recurrent nodes")))?);
    }
    let activations: Vec<Vec<Activation>> = parsed.chunks(per_direction).map(<[Activation]>::to_vec).collect();
    let clip = match attribute("clip") {
        Some(a) if a.f.is_finite() && a.f > 0.0 => Some(a.f),
        Some(a) => return Err(refuse(format!("clip {} is not a positive threshold", a.f))),
        None => None,
    };
    let flag = |name: &str| -> Result<bool, String> {
        match attribute(name).map(|a| a.i) {
            None | Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(refuse(format!("{name} {v} is neither 0 nor 1"))),
        }
    };
    let (input_forget, linear_before_reset, batch_first) = (flag("input_forget")?, flag("linear_before_reset")?, flag("layout")?);

    let weights = |k: usize| input(k).and_then(|name| initializers.iter().find(|t| &t.name == name)).and_then(|t| Some((t.dims.clone(), float_values(t)?)));
    let (Some((w_dims, w)), Some((r_dims, r))) = (weights(1), weights(2)) else {
        let defaults = names.iter().map(String::as_str).eq(cell.default_activations().iter().cycle().take(names.len()).copied())
            && direction != "reverse"
            && clip.is_none()
            && !input_forget
            && !batch_first
            && attribute("activation_alpha").is_none()
            && attribute("activation_beta").is_none();
        if defaults {
            return Ok(None);
        }
        return Err(refuse("its weights W and R are computed by nodes, and this runner computes its non-default attributes only with constant weights".into()));
    };
    let gates = cell.gates();
    let hidden = usize::try_from(*r_dims.get(2).unwrap_or(&0)).unwrap_or(0);
    let features = usize::try_from(*w_dims.get(2).unwrap_or(&0)).unwrap_or(0);
    let expected_w = [directions as i64, (gates * hidden) as i64, features as i64];
    let expected_r = [directions as i64, (gates * hidden) as i64, hidden as i64];
    if hidden == 0 || features == 0 || w_dims != expected_w || r_dims != expected_r {
        return Err(refuse(format!("weights W {w_dims:?} and R {r_dims:?} do not fit {directions} direction(s) of {gates} gate(s)")));
    }
    if let Some(declared) = attribute("hidden_size").map(|a| a.i) {
        if declared != hidden as i64 {
            return Err(refuse(format!("hidden_size {declared} but R holds {hidden} hidden units")));
        }
    }
    let optional = |k: usize, dims: [usize; 2], what: &str| -> Result<Option<Vec<f32>>, String> {
        let Some(name) = input(k) else { return Ok(None) };
        let (found, values) = weights(k).ok_or_else(|| refuse(format!("its {what} {name:?} is not a float initializer")))?;
        if found != [dims[0] as i64, dims[1] as i64] {
            return Err(refuse(format!("its {what} {name:?} is {found:?}, not {dims:?}")));
        }
        Ok(Some(values))
    };
    let bias = optional(3, [directions, 2 * gates * hidden], "bias B")?;
    let peepholes = if cell == Cell::Lstm { optional(7, [directions, 3 * hidden], "peepholes P")? } else { None };
    Ok(Some(Recurrent { node, cell, hidden, features, reversed, activations, clip, input_forget, linear_before_reset, batch_first, w, r, bias, peepholes }))
}

/// A float32 tensor's values, when it holds what its dims declare.
fn float_values(t: &pb::TensorProto) -> Option<Vec<f32>> {
    if t.data_type != FLOAT {
        return None;
    }
    let values: Vec<f32> = crate::onnx::tensor_values(t)?.map(|v| v as f32).collect();
    let declared = t.dims.iter().try_fold(1usize, |n, d| n.checked_mul(usize::try_from(*d).ok()?))?;
    (declared == values.len()).then_some(values)
}

/// The attributes of a `Split` of axis 1 into `parts` equal parts (opset 18 on asks for their
/// number).
fn equal_split(parts: i64, opset: i64) -> Vec<pb::AttributeProto> {
    let mut attributes = vec![attr_int("axis", 1)];
    if opset >= 18 {
        attributes.push(attr_int("num_outputs", parts));
    }
    attributes
}

/// A value of the body of one direction's scan, and the builder it is written into.
struct Body {
    graph: GraphBuilder,
}

impl Body {
    fn op(&mut self, op: &str, inputs: &[&str], attribute: Vec<pb::AttributeProto>, base: &str) -> String {
        self.graph.node(op, inputs.iter().map(|s| s.to_string()).collect(), attribute, base)
    }

    fn constant(&mut self, base: &str, dims: &[i64], data: Vec<f32>) -> String {
        self.graph.constant(base, dims, data)
    }

    fn scalar(&mut self, base: &str, value: f32) -> String {
        self.graph.constant(base, &[], vec![value])
    }

    /// `activation(x)` with ONNX ops and the exact ones of [`crate::engine::kernels::exact_ops`].
    fn activation(&mut self, activation: Activation, x: &str) -> String {
        match activation {
            Activation::Relu => self.op("Relu", &[x], vec![], "relu"),
            Activation::Tanh => self.op(TANH, &[x], vec![], "tanh"),
            Activation::Sigmoid => self.op(SIGMOID, &[x], vec![], "sigmoid"),
            Activation::Affine { alpha, beta } => self.op(AFFINE, &[x], vec![attr_float("alpha", alpha), attr_float("beta", beta)], "affine"),
            Activation::LeakyRelu { alpha } => self.op("LeakyRelu", &[x], vec![attr_float("alpha", alpha)], "leaky_relu"),
            Activation::ThresholdedRelu { alpha } => {
                let a = self.scalar("alpha", alpha);
                let above = self.op("Greater", &[x, &a], vec![], "above");
                let kept = self.op("Cast", &[&above], vec![attr_int("to", FLOAT as i64)], "kept");
                self.op("Mul", &[x, &kept], vec![], "thresholded_relu")
            }
            Activation::ScaledTanh { alpha, beta } => {
                let inner = self.op(AFFINE, &[x], vec![attr_float("alpha", beta), attr_float("beta", 0.0)], "scaled");
                let tanh = self.op(TANH, &[&inner], vec![], "tanh");
                self.op(AFFINE, &[&tanh], vec![attr_float("alpha", alpha), attr_float("beta", 0.0)], "scaled_tanh")
            }
            Activation::HardSigmoid { alpha, beta } => self.op("HardSigmoid", &[x], vec![attr_float("alpha", alpha), attr_float("beta", beta)], "hard_sigmoid"),
            Activation::Elu { alpha } => self.op(ELU, &[x], vec![attr_float("alpha", alpha)], "elu"),
            Activation::Softsign => {
                let one = self.scalar("one", 1.0);
                let magnitude = self.op("Abs", &[x], vec![], "abs");
                let denominator = self.op("Add", &[&magnitude, &one], vec![], "denominator");
                self.op("Div", &[x, &denominator], vec![], "softsign")
            }
            Activation::Softplus => {
                // max(x, 0) + ln(1 + exp(-|x|)): no overflow for large x.
                let one = self.scalar("one", 1.0);
                let magnitude = self.op("Abs", &[x], vec![], "abs");
                let negative = self.op("Neg", &[&magnitude], vec![], "negative");
                let tail = self.op("Exp", &[&negative], vec![], "tail");
                let shifted = self.op("Add", &[&tail, &one], vec![], "shifted");
                let log = self.op("Log", &[&shifted], vec![], "log");
                let positive = self.op("Relu", &[x], vec![], "positive");
                self.op("Add", &[&positive, &log], vec![], "softplus")
            }
        }
    }

    /// `x` bounded to [-clip, clip] when the node clips.
    fn clipped(&mut self, x: String, clip: Option<f32>) -> String {
        let Some(clip) = clip else { return x };
        let (high, low) = (self.scalar("clip", clip), self.scalar("clip", -clip));
        let below = self.op("Min", &[&x, &high], vec![], "clip");
        self.op("Max", &[&below, &low], vec![], "clipped")
    }

    /// `rows · K + bias` with `K` `[in, out]` (row-major) and `bias` `[out]`.
    fn affine(&mut self, rows: &str, kernel: Vec<f32>, inputs: usize, bias: Vec<f32>, base: &str) -> String {
        let outputs = bias.len();
        let k = self.constant(&format!("{base}_kernel"), &[inputs as i64, outputs as i64], kernel);
        let b = self.constant(&format!("{base}_bias"), &[outputs as i64], bias);
        let product = self.op("MatMul", &[rows, &k], vec![], base);
        self.op("Add", &[&product, &b], vec![], base)
    }
}

impl Recurrent<'_> {
    /// Rows `g·h .. (g+1)·h` of direction `d`'s `W` (`R` when `recurrent`), transposed to
    /// `[in, h]` and stacked for gates `gates`.
    fn kernel(&self, d: usize, gates: &[usize], recurrent: bool) -> Vec<f32> {
        let (source, width) = if recurrent { (&self.r, self.hidden) } else { (&self.w, self.features) };
        let rows_per_direction = self.cell.gates() * self.hidden;
        let mut kernel = Vec::with_capacity(width * gates.len() * self.hidden);
        for column in 0..width {
            for &gate in gates {
                for unit in 0..self.hidden {
                    let row = d * rows_per_direction + gate * self.hidden + unit;
                    kernel.push(source[row * width + column]);
                }
            }
        }
        kernel
    }

    /// `[W | R]` of gates `gates` stacked as one `[features + h, gates·h]` kernel (rows of
    /// `Concat(x, h)` times it give `x·Wᵀ + h·Rᵀ`).
    fn joined_kernel(&self, d: usize, gates: &[usize]) -> Vec<f32> {
        let mut kernel = self.kernel(d, gates, false);
        kernel.extend(self.kernel(d, gates, true));
        kernel
    }

    /// Direction `d`'s bias of gate `gate`: `Wb` (`input`) or `Rb`, zeros without `B`.
    fn gate_bias(&self, d: usize, gate: usize, recurrent: bool) -> Vec<f32> {
        let h = self.hidden;
        let Some(bias) = &self.bias else { return vec![0.0; h] };
        let start = d * 2 * self.cell.gates() * h + usize::from(recurrent) * self.cell.gates() * h + gate * h;
        bias[start..start + h].to_vec()
    }

    /// `Wb + Rb` of the gates `gates`, side by side.
    fn summed_bias(&self, d: usize, gates: &[usize]) -> Vec<f32> {
        gates.iter().flat_map(|&g| self.gate_bias(d, g, false).into_iter().zip(self.gate_bias(d, g, true)).map(|(w, r)| w + r)).collect()
    }

    /// Peephole `k` (`i o f`) of direction `d`.
    fn peephole(&self, d: usize, k: usize) -> Option<Vec<f32>> {
        let h = self.hidden;
        self.peepholes.as_ref().map(|p| p[(d * 3 + k) * h..(d * 3 + k + 1) * h].to_vec())
    }

    /// The body of direction `d`'s scan: inputs `h` (and `c`), then `x_t`; outputs `h'` (and
    /// `c'`), then `y_t`.
    fn body(&self, d: usize, opset: i64) -> pb::GraphProto {
        let mut body = Body { graph: GraphBuilder::default() };
        let (h, c, x) = ("h_prev".to_string(), "c_prev".to_string(), "x_t".to_string());
        let acts = &self.activations[d];
        let joined = body.op("Concat", &[&x, &h], vec![attr_int("axis", 1)], "joined");
        let inputs = self.features + self.hidden;
        let mut outputs = vec![];
        match self.cell {
            Cell::Lstm => {
                let (f_act, g_act, h_act) = (acts[0], acts[1], acts[2]);
                let gates = body.affine(&joined, self.joined_kernel(d, &[0, 1, 2, 3]), inputs, self.summed_bias(d, &[0, 1, 2, 3]), "gates");
                let split: Vec<String> = ["i", "o", "f", "c"].iter().map(|g| body.graph.fresh(&format!("pre_{g}"))).collect();
                body.graph.node_outputs("Split", vec![gates], equal_split(4, opset), &split);
                let with_peephole = |body: &mut Body, pre: &str, k: usize, state: &str| -> String {
                    match self.peephole(d, k) {
                        Some(p) => {
                            let p = body.constant("peephole", &[self.hidden as i64], p);
                            let product = body.op("Mul", &[state, &p], vec![], "peephole");
                            body.op("Add", &[pre, &product], vec![], "with_peephole")
                        }
                        None => pre.to_string(),
                    }
                };
                let pre_i = with_peephole(&mut body, &split[0], 0, &c);
                let pre_i = body.clipped(pre_i, self.clip);
                let i = body.activation(f_act, &pre_i);
                let f = if self.input_forget {
                    let one = body.scalar("one", 1.0);
                    body.op("Sub", &[&one, &i], vec![], "forget")
                } else {
                    let pre_f = with_peephole(&mut body, &split[2], 2, &c);
                    let pre_f = body.clipped(pre_f, self.clip);
                    body.activation(f_act, &pre_f)
                };
                let pre_g = body.clipped(split[3].clone(), self.clip);
                let g = body.activation(g_act, &pre_g);
                let kept = body.op("Mul", &[&f, &c], vec![], "kept");
                let written = body.op("Mul", &[&i, &g], vec![], "written");
                let c_new = body.op("Add", &[&kept, &written], vec![], "c_new");
                let pre_o = with_peephole(&mut body, &split[1], 1, &c_new);
                let pre_o = body.clipped(pre_o, self.clip);
                let o = body.activation(f_act, &pre_o);
                let shown = body.activation(h_act, &c_new);
                let h_new = body.op("Mul", &[&o, &shown], vec![], "h_new");
                outputs.push(h_new);
                outputs.push(c_new);
            }
            Cell::Gru => {
                let (f_act, g_act) = (acts[0], acts[1]);
                let zr = body.affine(&joined, self.joined_kernel(d, &[0, 1]), inputs, self.summed_bias(d, &[0, 1]), "zr");
                let split: Vec<String> = ["z", "r"].iter().map(|g| body.graph.fresh(&format!("pre_{g}"))).collect();
                body.graph.node_outputs("Split", vec![zr], equal_split(2, opset), &split);
                let pre_z = body.clipped(split[0].clone(), self.clip);
                let z = body.activation(f_act, &pre_z);
                let pre_r = body.clipped(split[1].clone(), self.clip);
                let r = body.activation(f_act, &pre_r);
                let from_x = body.affine(&x, self.kernel(d, &[2], false), self.features, self.gate_bias(d, 2, false), "x_h");
                let from_h = if self.linear_before_reset {
                    let linear = body.affine(&h, self.kernel(d, &[2], true), self.hidden, self.gate_bias(d, 2, true), "h_h");
                    body.op("Mul", &[&r, &linear], vec![], "reset")
                } else {
                    let reset = body.op("Mul", &[&r, &h], vec![], "reset");
                    body.affine(&reset, self.kernel(d, &[2], true), self.hidden, self.gate_bias(d, 2, true), "h_h")
                };
                let pre_h = body.op("Add", &[&from_x, &from_h], vec![], "pre_h");
                let pre_h = body.clipped(pre_h, self.clip);
                let candidate = body.activation(g_act, &pre_h);
                let one = body.scalar("one", 1.0);
                let keep_new = body.op("Sub", &[&one, &z], vec![], "keep_new");
                let new_part = body.op("Mul", &[&keep_new, &candidate], vec![], "new_part");
                let old_part = body.op("Mul", &[&z, &h], vec![], "old_part");
                outputs.push(body.op("Add", &[&new_part, &old_part], vec![], "h_new"));
            }
            Cell::Rnn => {
                let pre = body.affine(&joined, self.joined_kernel(d, &[0]), inputs, self.summed_bias(d, &[0]), "pre");
                let pre = body.clipped(pre, self.clip);
                outputs.push(body.activation(acts[0], &pre));
            }
        }
        let y = body.op("Identity", &[&outputs[0]], vec![], "y_t");
        outputs.push(y);
        // Float values of no declared shape (an empty dims list would declare rank 0).
        let unshaped = |name: &str| pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(pb::TypeProto { value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor { elem_type: FLOAT, shape: None })), ..Default::default() }),
            ..Default::default()
        };
        let mut inputs = vec![unshaped(&h)];
        if self.cell == Cell::Lstm {
            inputs.push(unshaped(&c));
        }
        inputs.push(unshaped(&x));
        let outputs = outputs.iter().map(|o| unshaped(o)).collect();
        let model = body.graph.finish(&format!("{}/direction_{d}", self.node.name), opset, inputs, outputs, "");
        model.graph.expect("finish writes a graph")
    }

    /// The scans of every direction and the nodes that shape their results into the node's
    /// outputs (`Y`, `Y_h`, `Y_c` under the node's own output names).
    fn expand(&self, builder: &mut GraphBuilder, opset: i64) {
        let base = if self.node.name.is_empty() { self.node.output.first().cloned().unwrap_or_default() } else { self.node.name.clone() };
        let name = |suffix: &str| format!("{base}/scan/{suffix}");
        let x = self.node.input[0].clone();
        let hidden = self.hidden as i64;
        // The axes of the batch and the direction in X, the states and Y.
        let (batch_axis, direction_axis) = if self.batch_first { (0, 1) } else { (1, 0) };
        let mut zeros = None;
        let mut initial = |builder: &mut GraphBuilder, k: usize, d: usize| -> String {
            match self.node.input.get(k).filter(|n| !n.is_empty()) {
                Some(state) => {
                    let index = builder.constant_i64(&name("direction"), &[], vec![d as i64]);
                    builder.node("Gather", vec![state.clone(), index], vec![attr_int("axis", direction_axis)], &name(&format!("initial_{k}_{d}")))
                }
                None => zeros
                    .get_or_insert_with(|| {
                        // Zeros [batch, h], the batch read from X's shape.
                        let shape = builder.node("Shape", vec![x.clone()], vec![], &name("x_shape"));
                        let axis = builder.constant_i64(&name("batch_axis"), &[1], vec![batch_axis]);
                        let batch = builder.node("Gather", vec![shape, axis], vec![attr_int("axis", 0)], &name("batch"));
                        let one = builder.constant_i64(&name("one"), &[1], vec![1]);
                        let repeats = builder.node("Concat", vec![batch, one], vec![attr_int("axis", 0)], &name("repeats"));
                        let row = builder.constant(&name("zero_row"), &[1, hidden], vec![0.0; self.hidden]);
                        builder.node("Tile", vec![row, repeats], vec![], &name("zeros"))
                    })
                    .clone(),
            }
        };
        let lstm = self.cell == Cell::Lstm;
        let mut last_h = vec![];
        let mut last_c = vec![];
        let mut sequences = vec![];
        for (d, &reversed) in self.reversed.iter().enumerate() {
            let mut inputs = vec![initial(builder, 5, d)];
            if lstm {
                inputs.push(initial(builder, 6, d));
            }
            inputs.push(x.clone());
            let mut outputs = vec![builder.fresh(&name(&format!("h_{d}")))];
            if lstm {
                outputs.push(builder.fresh(&name(&format!("c_{d}"))));
            }
            outputs.push(builder.fresh(&name(&format!("y_{d}"))));
            let direction = i64::from(reversed);
            let mut attributes = vec![
                pb::AttributeProto { name: "body".into(), g: Some(self.body(d, opset)), r#type: pb::attribute_proto::AttributeType::Graph as i32, ..Default::default() },
                attr_int("num_scan_inputs", 1),
                attr_ints("scan_input_directions", &[direction]),
                attr_ints("scan_output_directions", &[direction]),
            ];
            if self.batch_first {
                attributes.push(attr_ints("scan_input_axes", &[1]));
                attributes.push(attr_ints("scan_output_axes", &[1]));
            }
            builder.node_outputs("Scan", inputs, attributes, &outputs);
            last_h.push(outputs[0].clone());
            if lstm {
                last_c.push(outputs[1].clone());
            }
            sequences.push(outputs.last().expect("y").clone());
        }
        // Y: [T, D, batch, h] (layout 0) or [batch, T, D, h]; Y_h, Y_c: [D, batch, h] or [batch, D, h].
        let (y_shape, y_axis) = if self.batch_first { (vec![0, 0, 1, hidden], 2) } else { (vec![0, 1, -1, hidden], 1) };
        let (state_shape, state_axis) = if self.batch_first { (vec![0, 1, hidden], 1) } else { (vec![1, -1, hidden], 0) };
        let results = [(0, sequences, y_shape, y_axis), (1, last_h, state_shape.clone(), state_axis), (2, last_c, state_shape, state_axis)];
        for (slot, per_direction, shape, axis) in results {
            let Some(output) = self.node.output.get(slot).filter(|o| !o.is_empty()) else { continue };
            let shape = builder.constant_i64(&name("shape"), &[shape.len() as i64], shape);
            let reshaped: Vec<String> = per_direction.iter().map(|v| builder.node("Reshape", vec![v.clone(), shape.clone()], vec![], &name("reshaped"))).collect();
            builder.node_into("Concat", reshaped, vec![attr_int("axis", axis)], output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphas_and_betas_go_to_the_activations_that_take_them_in_order() {
        let (mut alphas, mut betas) = (vec![0.5, 2.0].into_iter(), vec![0.25].into_iter());
        let parsed: Vec<Activation> = ["Relu", "leakyrelu", "Sigmoid", "HardSigmoid", "Elu"].iter().map(|n| Activation::parse(n, &mut alphas, &mut betas).unwrap()).collect();
        assert_eq!(
            parsed,
            [
                Activation::Relu,
                Activation::LeakyRelu { alpha: 0.5 },
                Activation::Sigmoid,
                Activation::HardSigmoid { alpha: 2.0, beta: 0.25 },
                Activation::Elu { alpha: 1.0 }
            ]
        );
        assert_eq!(Activation::parse("Swish", &mut alphas, &mut betas), None);
    }
}
