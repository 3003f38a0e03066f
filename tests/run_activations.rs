//! Activations on saturating inputs: our runner (ONNX models and `.nn` models lowered onto the
//! same ops) computes each activation the real models use as an exact evaluation does, to
//! within a few ulps, and saturates where the exact function does (tanh(10) is 1.0 in f32,
//! as Barracuda and onnxruntime give it).

mod common;

use common::models_dir;
use mlagents::onnx::{attr_float, attr_int, value_info, GraphBuilder, FLOAT};
use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, TensorData};
use std::collections::BTreeSet;

/// Inputs from deep saturation to zero and back.
const INPUTS: [f32; 19] = [-100.0, -30.0, -20.0, -10.0, -9.5, -5.0, -2.0, -1.0, -0.1, -1e-4, 0.0, 1e-4, 0.1, 1.0, 2.0, 5.0, 9.5, 10.0, 30.0];

/// An activation as the runner builds it (ONNX ops) and its exact value (f64).
struct Case {
    name: &'static str,
    build: fn(&mut GraphBuilder, String) -> String,
    exact: fn(&[f64]) -> Vec<f64>,
    /// Only inputs in the function's domain.
    domain: fn(f32) -> bool,
}

fn unary(op: &'static str) -> impl Fn(&mut GraphBuilder, String) -> String {
    move |g, x| g.node(op, vec![x], vec![], op)
}

fn map(f: fn(f64) -> f64) -> impl Fn(&[f64]) -> Vec<f64> {
    move |xs| xs.iter().map(|x| f(*x)).collect()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn cases() -> Vec<Case> {
    fn all(_: f32) -> bool {
        true
    }
    vec![
        Case { name: "Tanh", build: |g, x| unary("Tanh")(g, x), exact: |xs| map(f64::tanh)(xs), domain: all },
        Case { name: "Sigmoid", build: |g, x| unary("Sigmoid")(g, x), exact: |xs| map(sigmoid)(xs), domain: all },
        Case {
            name: "Swish",
            build: |g, x| {
                let s = g.node("Sigmoid", vec![x.clone()], vec![], "swish");
                g.node("Mul", vec![x, s], vec![], "swish")
            },
            exact: |xs| map(|x| x * sigmoid(x))(xs),
            domain: all,
        },
        Case { name: "Relu", build: |g, x| unary("Relu")(g, x), exact: |xs| map(|x| x.max(0.0))(xs), domain: all },
        Case {
            name: "LeakyRelu",
            build: |g, x| g.node("LeakyRelu", vec![x], vec![attr_float("alpha", 0.01)], "leaky"),
            exact: |xs| map(|x| if x < 0.0 { 0.01f32 as f64 * x } else { x })(xs),
            domain: all,
        },
        Case { name: "Elu", build: |g, x| g.node("Elu", vec![x], vec![attr_float("alpha", 1.0)], "elu"), exact: |xs| map(|x| if x < 0.0 { x.exp() - 1.0 } else { x })(xs), domain: all },
        Case { name: "Exp", build: |g, x| unary("Exp")(g, x), exact: |xs| map(f64::exp)(xs), domain: |x| x <= 80.0 },
        Case { name: "Log", build: |g, x| unary("Log")(g, x), exact: |xs| map(f64::ln)(xs), domain: |x| x > 0.0 },
        Case { name: "Abs", build: |g, x| unary("Abs")(g, x), exact: |xs| map(f64::abs)(xs), domain: all },
        Case { name: "Neg", build: |g, x| unary("Neg")(g, x), exact: |xs| map(|x| -x)(xs), domain: all },
        Case { name: "Sqrt", build: |g, x| unary("Sqrt")(g, x), exact: |xs| map(f64::sqrt)(xs), domain: |x| x >= 0.0 },
        Case {
            name: "Softmax",
            build: |g, x| g.node("Softmax", vec![x], vec![attr_int("axis", 1)], "softmax"),
            exact: |xs| {
                let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = xs.iter().map(|x| (x - max).exp()).sum();
                xs.iter().map(|x| (x - max).exp() / sum).collect()
            },
            domain: |x| x.abs() <= 30.0,
        },
    ]
}

/// Within 8 ulps of the exact value rounded to f32, or within 1e-12 of it (far below what
/// an f32 next to values of order 1 can show).
fn close(got: f32, exact: f64) -> bool {
    let want = exact as f32;
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= 8.0 * f32::EPSILON * want.abs() || (got - want).abs() <= 1e-12
}

fn run(case: &Case, inputs: &[f32]) -> Vec<f32> {
    let mut g = GraphBuilder::default();
    let y = (case.build)(&mut g, "x".into());
    g.node_into("Identity", vec![y], vec![], "y");
    let model = g.finish("activation", 13, vec![value_info("x", FLOAT, &[1, inputs.len() as i64])], vec![value_info("y", FLOAT, &[1, inputs.len() as i64])], "test");
    let policy = OnnxPolicy::from_proto(model, case.name, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let feed = NamedTensors::from([("x".to_string(), TensorData { shape: vec![1, inputs.len()], data: inputs.to_vec() })]);
    policy.run(&feed).unwrap()["y"].data.clone()
}

#[test]
fn activations_are_exact_at_saturation() {
    let mut failures = vec![];
    for case in cases() {
        let inputs: Vec<f32> = INPUTS.iter().copied().filter(|x| (case.domain)(*x)).collect();
        let exact = (case.exact)(&inputs.iter().map(|x| *x as f64).collect::<Vec<_>>());
        let got = run(&case, &inputs);
        for ((x, g), e) in inputs.iter().zip(&got).zip(&exact) {
            if !close(*g, *e) {
                failures.push(format!("{}({x}) = {g:e}, exact {:e}", case.name, *e as f32));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every activation a real model uses (fused or as a layer of its own; ONNX op types among
/// the activations) is one of the cases above, so a model with a new one fails here.
#[test]
fn the_cases_cover_every_activation_of_the_real_models() {
    let tested: BTreeSet<&str> = cases().iter().map(|c| c.name).collect();
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(models_dir().join("nn")).unwrap() {
        let model = mlagents::barracuda::read_file(&entry.unwrap().path()).unwrap();
        for layer in &model.layers {
            let name = format!("{:?}", layer.activation);
            if name != "None" {
                used.insert(name);
            }
        }
    }
    let activation_ops = ["Tanh", "Sigmoid", "Relu", "LeakyRelu", "Elu", "Selu", "Exp", "Log", "Softplus", "Softsign", "Softmax", "LogSoftmax", "Sqrt", "Erf", "HardSigmoid"];
    for entry in std::fs::read_dir(models_dir().join("onnx")).unwrap() {
        use prost::Message;
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let model = tract_onnx::pb::ModelProto::decode(bytes.as_slice()).unwrap();
        for node in &model.graph.unwrap().node {
            if activation_ops.contains(&node.op_type.as_str()) {
                used.insert(node.op_type.clone());
            }
        }
    }
    let untested: Vec<&String> = used.iter().filter(|u| !tested.contains(u.as_str())).collect();
    assert!(untested.is_empty(), "activations the real models use without a saturation case: {untested:?} (used: {used:?})");
}

/// Reacher.nn (TF-era: `action = tanh(...)`) on inputs that saturate it: the saturated
/// actions are exactly ±1, as Barracuda gives them (with tract's own tanh they were
/// ±0.9999994).
#[test]
fn reacher_saturates_as_unity_does() {
    let policy = mlagents::run::Policy::load(&models_dir().join("nn/Reacher.nn"), LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let data: Vec<f32> = [50.0f32; 33].into_iter().chain([-50.0; 33]).collect();
    let outputs = policy.run(&NamedTensors::from([("vector_observation".to_string(), TensorData { shape: vec![2, 33], data })])).unwrap();
    let action = &outputs["action"].data;
    assert!(action.iter().all(|a| a.abs() <= 1.0), "{action:?}");
    let saturated: Vec<usize> = (0..action.len()).filter(|k| action[*k].abs() > 0.999_999).collect();
    assert!(saturated.len() >= 4, "{action:?}");
    for k in saturated {
        assert_eq!(action[k].abs(), 1.0, "{action:?}");
    }
}

/// The exact activations (one op each in the runner, computed in chunks) over a tensor of
/// many chunks, in float32, float64 and float16 (the model casts its input to the type and
/// back): float32 and float64 as close as above, float16 within its own rounding.
#[test]
fn exact_activations_hold_in_every_float_type_over_many_chunks() {
    const DOUBLE: i32 = 11;
    const HALF: i32 = 10;
    let inputs: Vec<f32> = (0..1000).map(|k| INPUTS[k % INPUTS.len()] * (1.0 + k as f32 * 1e-4)).collect();
    let exact_inputs: Vec<f64> = inputs.iter().map(|x| *x as f64).collect();
    let mut failures = vec![];
    for case in cases().into_iter().filter(|c| ["Tanh", "Sigmoid", "Swish", "Elu"].contains(&c.name)) {
        let exact = (case.exact)(&exact_inputs);
        for dt in [FLOAT, DOUBLE, HALF] {
            let mut g = GraphBuilder::default();
            let x = g.node("Cast", vec!["x".into()], vec![attr_int("to", dt as i64)], "in");
            let y = (case.build)(&mut g, x);
            g.node_into("Cast", vec![y], vec![attr_int("to", FLOAT as i64)], "y");
            let dims = [1, inputs.len() as i64];
            let model = g.finish("activation", 13, vec![value_info("x", FLOAT, &dims)], vec![value_info("y", FLOAT, &dims)], "test");
            let policy = OnnxPolicy::from_proto(model, case.name, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
            let feed = NamedTensors::from([("x".to_string(), TensorData { shape: vec![1, inputs.len()], data: inputs.clone() })]);
            let got = policy.run(&feed).unwrap_or_else(|e| panic!("{} in type {dt}: {e}", case.name))["y"].data.clone();
            for ((x, g), e) in inputs.iter().zip(&got).zip(&exact) {
                // float16: the input itself is rounded to 11 bits, so compare with the slope.
                let fits = if dt == HALF { (*g as f64 - e).abs() <= 4e-3 * e.abs().max(x.abs() as f64).max(1e-3) } else { close(*g, *e) };
                if !fits {
                    failures.push(format!("{}({x}) in type {dt} = {g:e}, exact {:e}", case.name, *e as f32));
                }
            }
        }
    }
    assert!(failures.len() == 0, "{} failures:\n{}", failures.len(), failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n"));
}
