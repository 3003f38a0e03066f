//! Activations that tract approximates, rewritten before tract sees the graph with ops it
//! computes to within a few ulps, so that the runner gives what Unity (and onnxruntime)
//! give where it matters: at saturation and far in the tails. tract 0.23's `Tanh` is a
//! rational approximation that stops at ±0.9999993 (Unity gives ±1, and `log(1 - tanh²)`
//! then differs by ~1); its `Sigmoid` never goes below 4.8e-7 (sigmoid(-20) is 2e-9), which
//! every Swish layer inherits; its `Elu` loses the precision of `exp(x) - 1` near 0.
//! tests/run_activations.rs measures every activation the real models use.
//!
//! - `Sigmoid(x)` becomes `1 / (1 + exp(-x))` (tract's `Exp` is accurate; no cancellation),
//!   except inside Swish (`x * Sigmoid(x)`, every hidden layer of ML-Agents' networks), which
//!   tract fuses into one fast kernel: its error there is at most 7e-6 absolute for inputs
//!   down to -30 and 6e-7 relative above (measured in tests/run_activations.rs), below what
//!   a hidden layer's float sums carry, while the exact form costs 20-60% of an MLP's
//!   inference time (scripts/bench-policy.sh).
//! - `Tanh(x)` stays tract's where `|x| < 1` (accurate there) and is
//!   `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)` elsewhere (exactly ±1 at saturation).
//! - `Elu(x)` for `x < 0` is `alpha (exp(x) - 1)` computed as `alpha tanh(x/2) (exp(x) + 1)`
//!   (the same value without the cancellation), with the exact tanh above.

use tract_onnx::pb::{self, NodeProto, TensorProto};

const FLOAT: i32 = 1;

/// Rewrites every `Tanh` and `Elu` of the graph, and every `Sigmoid` outside a Swish;
/// returns how many.
pub fn exact_activations(graph: &mut pb::GraphProto) -> usize {
    let swish_sigmoids = swish_sigmoids(graph);
    let mut builder = Builder { nodes: Vec::with_capacity(graph.node.len()), constants: vec![] };
    let mut rewritten = 0;
    for node in std::mem::take(&mut graph.node) {
        let (Some(x), Some(y)) = (node.input.first().cloned(), node.output.first().cloned()) else {
            builder.nodes.push(node);
            continue;
        };
        match node.op_type.as_str() {
            "Sigmoid" if !swish_sigmoids.contains(&y) => builder.sigmoid(&x, &y),
            "Tanh" => builder.tanh(&x, &y),
            "Elu" => {
                let alpha = node.attribute.iter().find(|a| a.name == "alpha").map_or(1.0, |a| a.f);
                builder.elu(&x, &y, alpha)
            }
            _ => {
                builder.nodes.push(node);
                continue;
            }
        }
        rewritten += 1;
    }
    graph.node = builder.nodes;
    graph.initializer.extend(builder.constants);
    rewritten
}

/// The outputs of the `Sigmoid`s that only feed `Mul(x, Sigmoid(x))` with their own input.
fn swish_sigmoids(graph: &pb::GraphProto) -> std::collections::HashSet<String> {
    let graph_outputs: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    graph
        .node
        .iter()
        .filter(|n| n.op_type == "Sigmoid" && n.input.len() == 1 && n.output.len() == 1)
        .filter(|sigmoid| {
            let (x, y) = (&sigmoid.input[0], &sigmoid.output[0]);
            let mut consumers = graph.node.iter().filter(|n| n.input.contains(y)).peekable();
            consumers.peek().is_some()
                && !graph_outputs.contains(&y.as_str())
                && consumers.all(|n| n.op_type == "Mul" && n.input.len() == 2 && n.input.contains(x) && n.input.contains(y))
        })
        .map(|sigmoid| sigmoid.output[0].clone())
        .collect()
}

/// Nodes and scalar constants of the rewrites, named after the output they replace.
struct Builder {
    nodes: Vec<NodeProto>,
    constants: Vec<TensorProto>,
}

impl Builder {
    fn op(&mut self, op: &str, inputs: &[&str], output: String) -> String {
        self.nodes.push(NodeProto {
            name: format!("{output}_node"),
            op_type: op.into(),
            input: inputs.iter().map(|i| i.to_string()).collect(),
            output: vec![output.clone()],
            ..Default::default()
        });
        output
    }

    fn constant(&mut self, name: String, value: f32) -> String {
        self.constants.push(TensorProto { name: name.clone(), data_type: FLOAT, float_data: vec![value], ..Default::default() });
        name
    }

    /// `y = 1 / (1 + exp(-x))`.
    fn sigmoid(&mut self, x: &str, y: &str) {
        let one = self.constant(format!("{y}/exact/one"), 1.0);
        let negated = self.op("Neg", &[x], format!("{y}/exact/neg"));
        let e = self.op("Exp", &[&negated], format!("{y}/exact/exp"));
        let denominator = self.op("Add", &[&one, &e], format!("{y}/exact/denominator"));
        self.op("Div", &[&one, &denominator], y.to_string());
    }

    /// `y = tanh(x)`: tract's below |x| = 1, `sign(x) (1 - e) / (1 + e)` with
    /// `e = exp(-2|x|)` above.
    fn tanh(&mut self, x: &str, y: &str) {
        let p = |what: &str| format!("{y}/exact/{what}");
        let (one, minus_two, zero) = (self.constant(p("one"), 1.0), self.constant(p("minus_two"), -2.0), self.constant(p("zero"), 0.0));
        let approximate = self.op("Tanh", &[x], p("approximate"));
        let magnitude = self.op("Abs", &[x], p("abs"));
        let scaled = self.op("Mul", &[&magnitude, &minus_two], p("scaled"));
        let e = self.op("Exp", &[&scaled], p("exp"));
        let numerator = self.op("Sub", &[&one, &e], p("numerator"));
        let denominator = self.op("Add", &[&one, &e], p("denominator"));
        let positive = self.op("Div", &[&numerator, &denominator], p("positive"));
        let negative = self.op("Neg", &[&positive], p("negative"));
        let below_zero = self.op("Less", &[x, &zero], p("below_zero"));
        let tail = self.op("Where", &[&below_zero, &negative, &positive], p("tail"));
        let near_zero = self.op("Less", &[&magnitude, &one], p("near_zero"));
        self.op("Where", &[&near_zero, &approximate, &tail], y.to_string());
    }

    /// `y = x` for `x >= 0`, else `alpha tanh(x / 2) (exp(x) + 1)` (= `alpha (exp(x) - 1)`).
    fn elu(&mut self, x: &str, y: &str, alpha: f32) {
        let p = |what: &str| format!("{y}/exact/{what}");
        let (one, half, zero, alpha) = (self.constant(p("one"), 1.0), self.constant(p("half"), 0.5), self.constant(p("zero"), 0.0), self.constant(p("alpha"), alpha));
        let halved = self.op("Mul", &[x, &half], p("halved"));
        let tanh = p("tanh");
        self.tanh(&halved, &tanh);
        let e = self.op("Exp", &[x], p("exp"));
        let e_plus_one = self.op("Add", &[&e, &one], p("exp_plus_one"));
        let expm1 = self.op("Mul", &[&tanh, &e_plus_one], p("expm1"));
        let negative = self.op("Mul", &[&expm1, &alpha], p("negative"));
        let below_zero = self.op("Less", &[x, &zero], p("below_zero"));
        self.op("Where", &[&below_zero, &negative, x], y.to_string());
    }
}
