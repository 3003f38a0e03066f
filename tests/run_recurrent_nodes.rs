//! ONNX LSTM, GRU and RNN nodes with the attributes tract 0.23 ignored (bad-input report of 2
//! December, S1: `direction: reverse`, `clip`, `input_forget`, other activations ran as if
//! absent, up to 11.2 off) and a multi-step LSTM at saturation (S6: tract's approximate sigmoid
//! and tanh), against a float64 evaluation written here from the ONNX definitions. The peer
//! test `tests/peer/peer_recurrent_nodes.py` runs every form against onnxruntime too.

use mlagents::onnx::{attr_float, attr_int, attr_string, float_initializer, value_info, GraphBuilder, FLOAT};
use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, TensorData};
use rand::{Rng, SeedableRng};
use tract_onnx::pb;

/// One recurrent node to build and evaluate.
struct Form {
    op: &'static str,
    hidden: usize,
    features: usize,
    steps: usize,
    batch: usize,
    reverse: bool,
    clip: Option<f32>,
    input_forget: bool,
    activations: Option<Vec<&'static str>>,
    scale: f32,
}

impl Form {
    fn new(op: &'static str) -> Self {
        Form { op, hidden: 3, features: 2, steps: 4, batch: 2, reverse: false, clip: None, input_forget: false, activations: None, scale: 0.8 }
    }

    fn gates(&self) -> usize {
        match self.op {
            "LSTM" => 4,
            "GRU" => 3,
            _ => 1,
        }
    }
}

fn activation(name: &str, x: f64) -> f64 {
    match name {
        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "Tanh" => x.tanh(),
        "Relu" => x.max(0.0),
        other => panic!("no reference for {other}"),
    }
}

/// `Y` (`[T, 1, B, h]` flattened) in float64, with initial states of zeros.
fn reference(form: &Form, x: &[f32], w: &[f32], r: &[f32], b: &[f32]) -> Vec<f64> {
    let (h, f, g) = (form.hidden, form.features, form.gates());
    let defaults: Vec<&str> = match form.op {
        "LSTM" => vec!["Sigmoid", "Tanh", "Tanh"],
        "GRU" => vec!["Sigmoid", "Tanh"],
        _ => vec!["Tanh"],
    };
    let acts = form.activations.clone().unwrap_or(defaults);
    let clip = |v: f64| form.clip.map_or(v, |c| v.clamp(-(c as f64), c as f64));
    // Row k of W times x, of R times state, plus both biases.
    let affine = |k: usize, input: &[f64], state: &[f64]| -> f64 {
        let from_x: f64 = (0..f).map(|j| w[k * f + j] as f64 * input[j]).sum();
        let from_h: f64 = (0..h).map(|j| r[k * h + j] as f64 * state[j]).sum();
        from_x + from_h + b[k] as f64 + b[g * h + k] as f64
    };
    let mut y = vec![0.0; form.steps * form.batch * h];
    for n in 0..form.batch {
        let (mut state, mut cell) = (vec![0.0f64; h], vec![0.0f64; h]);
        let order: Vec<usize> = if form.reverse { (0..form.steps).rev().collect() } else { (0..form.steps).collect() };
        for t in order {
            let input: Vec<f64> = (0..f).map(|j| x[(t * form.batch + n) * f + j] as f64).collect();
            let next: Vec<f64> = match form.op {
                "LSTM" => {
                    let mut next = vec![0.0; h];
                    for u in 0..h {
                        let i = activation(acts[0], clip(affine(u, &input, &state)));
                        let o = activation(acts[0], clip(affine(h + u, &input, &state)));
                        let forget = if form.input_forget { 1.0 - i } else { activation(acts[0], clip(affine(2 * h + u, &input, &state))) };
                        let candidate = activation(acts[1], clip(affine(3 * h + u, &input, &state)));
                        cell[u] = forget * cell[u] + i * candidate;
                        next[u] = o * activation(acts[2], cell[u]);
                    }
                    next
                }
                "GRU" => (0..h)
                    .map(|u| {
                        let z = activation(acts[0], clip(affine(u, &input, &state)));
                        let reset: Vec<f64> = (0..h).map(|v| activation(acts[0], clip(affine(h + v, &input, &state)))).collect();
                        let from_x: f64 = (0..f).map(|j| w[(2 * h + u) * f + j] as f64 * input[j]).sum();
                        let from_h: f64 = (0..h).map(|j| r[(2 * h + u) * h + j] as f64 * reset[j] * state[j]).sum();
                        let candidate = activation(acts[1], clip(from_x + from_h + b[2 * h + u] as f64 + b[g * h + 2 * h + u] as f64));
                        (1.0 - z) * candidate + z * state[u]
                    })
                    .collect(),
                _ => (0..h).map(|u| activation(acts[0], clip(affine(u, &input, &state)))).collect(),
            };
            state = next;
            for u in 0..h {
                y[(t * form.batch + n) * h + u] = state[u];
            }
        }
    }
    y
}

/// The form's model (weights drawn from `seed`), and the weights.
fn build(form: &Form, seed: u64) -> (pb::ModelProto, [Vec<f32>; 3]) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (h, f, g) = (form.hidden, form.features, form.gates());
    let mut draw = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-form.scale..form.scale)).collect() };
    let (w, r, b) = (draw(g * h * f), draw(g * h * h), draw(2 * g * h));
    let mut graph = GraphBuilder::default();
    graph.initializers.push(float_initializer("W", &[1, (g * h) as i64, f as i64], w.clone()));
    graph.initializers.push(float_initializer("R", &[1, (g * h) as i64, h as i64], r.clone()));
    graph.initializers.push(float_initializer("B", &[1, (2 * g * h) as i64], b.clone()));
    let mut attributes = vec![attr_int("hidden_size", h as i64)];
    if form.reverse {
        attributes.push(attr_string("direction", "reverse"));
    }
    if let Some(clip) = form.clip {
        attributes.push(attr_float("clip", clip));
    }
    if form.input_forget {
        attributes.push(attr_int("input_forget", 1));
    }
    if let Some(acts) = &form.activations {
        attributes.push(pb::AttributeProto { name: "activations".into(), strings: acts.iter().map(|a| a.as_bytes().to_vec()).collect(), r#type: pb::attribute_proto::AttributeType::Strings as i32, ..Default::default() });
    }
    graph.node_outputs(form.op, vec!["X".into(), "W".into(), "R".into(), "B".into()], attributes, &["Y".to_string()]);
    graph.nodes.last_mut().unwrap().name = format!("{}_node", form.op.to_lowercase());
    let model = graph.finish("recurrent", 9, vec![value_info("X", FLOAT, &[form.steps as i64, -1, f as i64])], vec![value_info("Y", FLOAT, &[])], "test");
    (model, [w, r, b])
}

/// The largest error of the runner against the float64 evaluation beyond `1e-5 + 1e-4 |y|`
/// (0 when within), and the largest error.
fn errors(form: &Form, seed: u64) -> (f64, f64) {
    let (model, [w, r, b]) = build(form, seed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 1);
    let x: Vec<f32> = (0..form.steps * form.batch * form.features).map(|_| rng.random_range(-2.0..2.0)).collect();
    let policy = OnnxPolicy::from_proto(model, "recurrent.onnx", LoadOptions::default()).unwrap();
    let inputs = NamedTensors::from([("X".to_string(), TensorData { shape: vec![form.steps, form.batch, form.features], data: x.clone() })]);
    let y = policy.run(&inputs).unwrap().remove("Y").unwrap();
    assert_eq!(y.shape, vec![form.steps, 1, form.batch, form.hidden]);
    let want = reference(form, &x, &w, &r, &b);
    let mut excess = 0.0f64;
    let mut worst = 0.0f64;
    for (got, want) in y.data.iter().zip(&want) {
        let error = (*got as f64 - want).abs();
        worst = worst.max(error);
        excess = excess.max(error - (1e-5 + 1e-4 * want.abs()));
    }
    (excess, worst)
}

#[test]
fn attributes_tract_ignored_are_computed_as_onnx_defines_them() {
    let forms = [
        Form { reverse: true, ..Form::new("LSTM") },
        Form { clip: Some(0.5), scale: 1.5, ..Form::new("LSTM") },
        Form { input_forget: true, ..Form::new("LSTM") },
        Form { activations: Some(vec!["Sigmoid", "Relu", "Relu"]), scale: 1.2, ..Form::new("LSTM") },
        Form { reverse: true, clip: Some(0.3), scale: 1.5, ..Form::new("GRU") },
        Form { activations: Some(vec!["Sigmoid", "Relu"]), ..Form::new("GRU") },
        Form { activations: Some(vec!["Relu"]), reverse: true, ..Form::new("RNN") },
        Form { clip: Some(0.7), scale: 1.3, ..Form::new("RNN") },
        Form { steps: 1, batch: 5, ..Form::new("LSTM") },
    ];
    for (k, form) in forms.iter().enumerate() {
        let (excess, worst) = errors(form, 10 + k as u64);
        assert!(excess <= 0.0, "{} form {k}: max abs error {worst:e}", form.op);
    }
}

/// A multi-step LSTM whose output gate saturates: H is about 1e-13, where tract's sigmoid
/// floor of 4.8e-7 gave 4.8e-7.
#[test]
fn a_saturated_multi_step_lstm_keeps_its_tiny_outputs() {
    let form = Form { steps: 3, batch: 1, hidden: 1, features: 1, ..Form::new("LSTM") };
    // Gates i, o, f, c: the output gate's bias -30 closes it.
    let (w, r) = (vec![0.5, 0.0, 0.5, 0.5], vec![0.1, 0.0, 0.1, 0.1]);
    let b = vec![0.0, -30.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let (mut model, _) = build(&form, 1);
    let graph = model.graph.as_mut().unwrap();
    graph.initializer = vec![float_initializer("W", &[1, 4, 1], w.clone()), float_initializer("R", &[1, 4, 1], r.clone()), float_initializer("B", &[1, 8], b.clone())];
    let x = vec![1.0f32, -0.5, 2.0];
    let policy = OnnxPolicy::from_proto(model, "saturated.onnx", LoadOptions::default()).unwrap();
    let y = policy.run(&NamedTensors::from([("X".to_string(), TensorData { shape: vec![3, 1, 1], data: x.clone() })])).unwrap().remove("Y").unwrap();
    let want = reference(&form, &x, &w, &r, &b);
    for (got, want) in y.data.iter().zip(&want) {
        assert!(want.abs() < 1e-12 && (*got as f64 - want).abs() <= 1e-5 * want.abs(), "{got} for {want}");
    }
}

/// Per-row sequence lengths are refused naming the node, not run as if absent.
#[test]
fn sequence_lengths_are_refused_naming_the_node() {
    let (mut model, _) = build(&Form::new("LSTM"), 3);
    let graph = model.graph.as_mut().unwrap();
    graph.node[0].input.push("lengths".into());
    graph.input.push(value_info("lengths", 6, &[-1]));
    let e = OnnxPolicy::from_proto(model, "lengths.onnx", LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("lstm_node") && e.contains("sequence_lens"), "{e}");
}
