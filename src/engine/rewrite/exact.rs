//! Activations that tract approximates, rewritten before tract sees the graph into ops of our
//! own ([`crate::engine::kernels::exact_ops`], one node each) that compute them to within a few ulps, so that
//! the runner gives what Unity (and onnxruntime) give where it matters: at saturation and far in the tails. tract 0.23's `Tanh` is a
//! rational approximation that stops at ±0.9999993 (Unity gives ±1, and `log(1 - tanh²)`
//! then differs by ~1); its `Sigmoid` never goes below 4.8e-7 (sigmoid(-20) is 2e-9), which
//! every Swish layer inherits; its `Elu` loses the precision of `exp(x) - 1` near 0.
//! tests/run_activations.rs measures every activation the real models use.
//!
//! - `Sigmoid(x)` becomes `1 / (1 + exp(-x))` (tract's `Exp` is accurate; no cancellation),
//!   and Swish (`x * Sigmoid(x)`, every hidden layer of ML-Agents' networks) becomes
//!   `x / (1 + exp(-x))`. tract's fused Swish kernel was kept once for speed (its error is
//!   up to 7e-6 absolute in the negative tail), but those errors add up over a layer: on
//!   Reacher.nn's in-distribution inputs they moved `mu` by 1.6e-4 and the action by 1.5e-4
//!   where onnxruntime stays within 1.3e-5 of a float64 evaluation. Written with ONNX ops the
//!   exact form cost about 20% of a small MLP's latency at batch 1 (five plan steps per
//!   layer); as one op it costs what tract's fused kernel did.
//! - `Tanh(x)` stays tract's where `|x| < 1` (accurate there) and is
//!   `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)` elsewhere (exactly ±1 at saturation).
//! - `Elu(x)` for `x < 0` is `alpha (exp(x) - 1)` computed as `alpha tanh(x/2) (exp(x) + 1)`
//!   (the same value without the cancellation), with the exact tanh above.

use crate::engine::kernels::exact_ops::{ELU, SIGMOID, SWISH, TANH};
use tract_onnx::pb;

/// Rewrites every `Tanh`, `Elu` and `Sigmoid` of the graph (a Swish's `Sigmoid` and `Mul`
/// together) into the ops of [`crate::engine::kernels::exact_ops`]; returns how many.
pub fn exact_activations(graph: &mut pb::GraphProto) -> usize {
    // Swish: the Sigmoid's output -> its input x, for the Mul that reads both.
    let swish_inputs = swish_sigmoids(graph);
    let mut nodes = Vec::with_capacity(graph.node.len());
    let mut rewritten = 0;
    for mut node in std::mem::take(&mut graph.node) {
        let Some(y) = node.output.first().cloned() else {
            nodes.push(node);
            continue;
        };
        match node.op_type.as_str() {
            // Only the Swish's Mul reads it: that Mul becomes the Swish.
            "Sigmoid" if swish_inputs.contains_key(&y) => continue,
            "Mul" if node.input.len() == 2 && node.input.iter().any(|i| swish_inputs.contains_key(i)) => {
                let sigmoid = node.input.iter().find(|i| swish_inputs.contains_key(*i)).expect("checked above");
                node.input = vec![swish_inputs[sigmoid].clone()];
                node.op_type = SWISH.into();
            }
            "Sigmoid" => node.op_type = SIGMOID.into(),
            "Tanh" => node.op_type = TANH.into(),
            // (Elu keeps its alpha attribute.)
            "Elu" => node.op_type = ELU.into(),
            _ => {
                nodes.push(node);
                continue;
            }
        }
        rewritten += 1;
        nodes.push(node);
    }
    graph.node = nodes;
    rewritten
}

/// The `Sigmoid`s that only feed `Mul(x, Sigmoid(x))` with their own input: output -> input.
fn swish_sigmoids(graph: &pb::GraphProto) -> std::collections::HashMap<String, String> {
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
        .map(|sigmoid| (sigmoid.output[0].clone(), sigmoid.input[0].clone()))
        .collect()
}
