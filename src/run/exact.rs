//! Activations that tract approximates, rewritten before tract sees the graph with ops it
//! computes to within a few ulps, so that the runner gives what Unity (and onnxruntime)
//! give where it matters: at saturation and far in the tails. tract 0.23's `Tanh` is a
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
//!   where onnxruntime stays within 1.3e-5 of a float64 evaluation. The exact form costs about
//!   20% of a small MLP's latency at batch 1 (scripts/bench-policy.sh).
//! - `Tanh(x)` stays tract's where `|x| < 1` (accurate there) and is
//!   `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)` elsewhere (exactly ±1 at saturation).
//! - `Elu(x)` for `x < 0` is `alpha (exp(x) - 1)` computed as `alpha tanh(x/2) (exp(x) + 1)`
//!   (the same value without the cancellation), with the exact tanh above.

use crate::onnx::GraphBuilder;
use tract_onnx::pb;

/// Rewrites every `Tanh`, `Elu` and `Sigmoid` of the graph (a Swish's `Sigmoid` and `Mul`
/// together); returns how many.
pub fn exact_activations(graph: &mut pb::GraphProto) -> usize {
    let swish_sigmoids = swish_sigmoids(graph);
    let mut swish_denominators: std::collections::HashMap<String, (String, String)> = Default::default();
    let mut g = GraphBuilder::default();
    let mut rewritten = 0;
    for node in std::mem::take(&mut graph.node) {
        let (Some(x), Some(y)) = (node.input.first().cloned(), node.output.first().cloned()) else {
            g.nodes.push(node);
            continue;
        };
        // Values of a rewrite are named `<output>/exact#k`: unique per rewritten output.
        let base = format!("{y}/exact");
        match node.op_type.as_str() {
            "Sigmoid" if swish_sigmoids.contains(&y) => {
                // Only the Swish's Mul reads it: it becomes `x / (1 + exp(-x))` there.
                let denominator = one_plus_exp_minus(&mut g, x.clone(), &base);
                swish_denominators.insert(y, (x, denominator));
            }
            "Sigmoid" => {
                let sigmoid = sigmoid(&mut g, x, &base);
                g.node_into("Identity", vec![sigmoid], vec![], &y);
            }
            "Mul" if node.input.len() == 2 && node.input.iter().any(|i| swish_denominators.contains_key(i)) => {
                let sigmoid = node.input.iter().find(|i| swish_denominators.contains_key(*i)).expect("checked above");
                let (x, denominator) = swish_denominators[sigmoid].clone();
                g.node_into("Div", vec![x, denominator], vec![], &y);
            }
            "Tanh" => {
                let tanh = tanh(&mut g, x, &base);
                g.node_into("Identity", vec![tanh], vec![], &y);
            }
            "Elu" => {
                let alpha = node.attribute.iter().find(|a| a.name == "alpha").map_or(1.0, |a| a.f);
                let elu = elu(&mut g, x, alpha, &base);
                g.node_into("Identity", vec![elu], vec![], &y);
            }
            _ => {
                g.nodes.push(node);
                continue;
            }
        }
        rewritten += 1;
    }
    graph.node = g.nodes;
    graph.initializer.extend(g.initializers);
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

/// `1 + exp(-x)`.
fn one_plus_exp_minus(g: &mut GraphBuilder, x: String, base: &str) -> String {
    let one = g.constant(base, &[], vec![1.0]);
    let negated = g.node("Neg", vec![x], vec![], base);
    let e = g.node("Exp", vec![negated], vec![], base);
    g.node("Add", vec![one, e], vec![], base)
}

/// `1 / (1 + exp(-x))`.
fn sigmoid(g: &mut GraphBuilder, x: String, base: &str) -> String {
    let one = g.constant(base, &[], vec![1.0]);
    let denominator = one_plus_exp_minus(g, x, base);
    g.node("Div", vec![one, denominator], vec![], base)
}

/// `tanh(x)`: tract's below |x| = 1, `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)`
/// above.
fn tanh(g: &mut GraphBuilder, x: String, base: &str) -> String {
    let one = g.constant(base, &[], vec![1.0]);
    let minus_two = g.constant(base, &[], vec![-2.0]);
    let zero = g.constant(base, &[], vec![0.0]);
    let approximate = g.node("Tanh", vec![x.clone()], vec![], base);
    let magnitude = g.node("Abs", vec![x.clone()], vec![], base);
    let scaled = g.node("Mul", vec![magnitude.clone(), minus_two], vec![], base);
    let e = g.node("Exp", vec![scaled], vec![], base);
    let numerator = g.node("Sub", vec![one.clone(), e.clone()], vec![], base);
    let denominator = g.node("Add", vec![one.clone(), e], vec![], base);
    let positive = g.node("Div", vec![numerator, denominator], vec![], base);
    let negative = g.node("Neg", vec![positive.clone()], vec![], base);
    let below_zero = g.node("Less", vec![x, zero], vec![], base);
    let tail = g.node("Where", vec![below_zero, negative, positive], vec![], base);
    let near_zero = g.node("Less", vec![magnitude, one], vec![], base);
    g.node("Where", vec![near_zero, approximate, tail], vec![], base)
}

/// `x` for `x >= 0`, else `alpha tanh(x / 2) (exp(x) + 1)` (= `alpha (exp(x) - 1)`).
fn elu(g: &mut GraphBuilder, x: String, alpha: f32, base: &str) -> String {
    let one = g.constant(base, &[], vec![1.0]);
    let half = g.constant(base, &[], vec![0.5]);
    let zero = g.constant(base, &[], vec![0.0]);
    let alpha = g.constant(base, &[], vec![alpha]);
    let halved = g.node("Mul", vec![x.clone(), half], vec![], base);
    let tanh = tanh(g, halved, base);
    let e = g.node("Exp", vec![x.clone()], vec![], base);
    let e_plus_one = g.node("Add", vec![e, one], vec![], base);
    let expm1 = g.node("Mul", vec![tanh, e_plus_one], vec![], base);
    let negative = g.node("Mul", vec![expm1, alpha], vec![], base);
    let below_zero = g.node("Less", vec![x.clone(), zero], vec![], base);
    g.node("Where", vec![below_zero, negative, x], vec![], base)
}
