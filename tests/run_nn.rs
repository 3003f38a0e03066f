//! `.nn` policies on tract. Every real file of ../shared/models/nn evaluates with sane
//! outputs; every layer kind found in those files is checked on small models built with the
//! writer against values computed by hand here; unsupported layers are named errors.

mod common;

use mlagents::barracuda::{self, Activation, Input, Layer, LayerType, Memory, NnModel, TensorBlob, WeightType};
use mlagents::run::{LoadOptions, NamedTensors, NnPolicy, TensorData};
use rand::SeedableRng;

use common::models_dir;

fn inputs_for(model: &NnModel, batch: usize) -> NamedTensors {
    model
        .inputs
        .iter()
        .map(|i| {
            let mut shape: Vec<usize> = i.shape.iter().map(|d| (*d).max(1) as usize).collect();
            shape[0] = batch;
            let n: usize = shape.iter().product();
            let data = match i.name.as_str() {
                "action_masks" => vec![1.0; n],
                "prev_action" | "recurrent_in" => vec![0.0; n],
                _ => (0..n).map(|k| ((k * 7919) % 100) as f32 / 100.0).collect(),
            };
            (i.name.clone(), TensorData { shape, data })
        })
        .collect()
}

#[test]
fn every_real_nn_file_evaluates() {
    let mut count = 0;
    for entry in std::fs::read_dir(models_dir().join("nn")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for deterministic in [true, false] {
            let policy = NnPolicy::load(&path, LoadOptions { deterministic, seed: Some(1), ..Default::default() })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for batch in [1, 4] {
                let out = policy.run(&inputs_for(policy.model(), batch)).unwrap_or_else(|e| panic!("{name}: {e}"));
                let action = &out["action"];
                assert_eq!(action.shape[0], batch, "{name}");
                assert!(action.data.iter().all(|v| v.is_finite()), "{name}: {:?}", action.data);
                let size = policy.model().constant("action_output_shape").unwrap() as usize;
                assert_eq!(action.shape[1], size, "{name}");
                if policy.model().constant("is_continuous_control") == Some(1.0) {
                    assert!(action.data.iter().all(|v| v.abs() <= 1.0 + 1e-6), "{name}: actions outside [-1, 1]");
                } else {
                    // Per-branch log-probabilities: each branch's probabilities sum to 1.
                    for row in action.data.chunks(size) {
                        let total: f32 = row.iter().map(|l| l.exp()).sum();
                        assert!((total - total.round()).abs() < 1e-3 && total.round() >= 1.0, "{name}: {total}");
                    }
                }
                for m in &policy.model().memories {
                    assert_eq!(out[&m.output].shape, vec![batch, m.shape[3] as usize], "{name}: memory {}", m.output);
                }
            }
        }
        count += 1;
    }
    assert_eq!(count, 24);
}

#[test]
fn basic_nn_walks_towards_the_large_goal() {
    let policy = NnPolicy::load(&models_dir().join("nn/Basic.nn"), LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
    let mut obs = vec![0.0; 20];
    obs[10] = 1.0;
    let mut inputs = NamedTensors::new();
    inputs.insert("vector_observation".into(), TensorData { shape: vec![1, 20], data: obs });
    inputs.insert("action_masks".into(), TensorData { shape: vec![1, 3], data: vec![1.0; 3] });
    let action = &policy.run(&inputs).unwrap()["action"];
    assert!(action.data[2] > -1e-3, "move right with probability ~1: {:?}", action.data);
}

/// Builds small models with the writer.
struct Build {
    blob: TensorBlob,
    layers: Vec<Layer>,
    inputs: Vec<Input>,
    memories: Vec<Memory>,
}

impl Build {
    fn new(inputs: &[(&str, [i32; 4])]) -> Self {
        let inputs = inputs.iter().map(|(n, s)| Input { name: n.to_string(), shape: s.to_vec() }).collect();
        Self { blob: TensorBlob::new(), layers: vec![], inputs, memories: vec![] }
    }

    fn layer(&mut self, name: &str, kind: LayerType, inputs: &[&str], tensors: &[(&str, &[i32], &[f32])]) -> &mut Layer {
        let mut layer = Layer::new(name, kind, inputs);
        for (n, shape, values) in tensors {
            layer.tensors.push(self.blob.add(n, shape, values).unwrap());
        }
        self.layers.push(layer);
        self.layers.last_mut().unwrap()
    }

    fn run(self, output: &str, deterministic: bool, feeds: &[(&str, Vec<usize>, Vec<f32>)]) -> TensorData {
        let model = NnModel {
            version: 16,
            inputs: self.inputs,
            outputs: vec![output.into()],
            memories: self.memories,
            layers: self.layers,
            weight_type: WeightType::Float32,
            padding: vec![],
            weights: self.blob.into_bytes(),
            trailer: None,
        };
        // Through the writer and the reader, as a file would be.
        let model = barracuda::read(&barracuda::write(&model)).unwrap();
        let policy = NnPolicy::from_model(model, "test", LoadOptions { deterministic, seed: Some(5), ..Default::default() }).unwrap();
        let inputs = feeds.iter().map(|(n, s, d)| (n.to_string(), TensorData { shape: s.clone(), data: d.clone() })).collect();
        policy.run(&inputs).unwrap().remove(output).unwrap()
    }
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

const X: &str = "x";

fn one_input(c: i32) -> Build {
    Build::new(&[(X, [-1, 1, 1, c])])
}

#[test]
fn dense_then_swish() {
    let mut b = one_input(2);
    b.layer("d", LayerType::Dense, &[X], &[("w", &[2, 1, 1, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), ("b", &[3], &[0.5, -1.0, 0.0])]);
    b.layer("y", LayerType::Activation, &["d"], &[]).activation = Activation::Swish;
    let y = b.run("y", true, &[(X, vec![2, 2], vec![1.0, -1.0, 0.5, 2.0])]);
    let swish = |v: f32| v / (1.0 + (-v).exp());
    // Row 1: [1,-1]·W + b = [1-4, 2-5, 3-6] + b = [-2.5, -4, -3]; row 2: [0.5+8, 1+10, 1.5+12] + b.
    let expected: Vec<f32> = [-2.5, -4.0, -3.0, 9.0, 10.0, 13.5].iter().map(|v| swish(*v)).collect();
    close(&y.data, &expected);
    assert_eq!(y.shape, vec![2, 3]);
}

#[test]
fn activations() {
    let x = [0.5f32, 2.0, -0.7];
    type Reference = fn(f32) -> f32;
    let cases: &[(Activation, Reference)] = &[
        (Activation::None, |v| v),
        (Activation::Relu, |v| v.max(0.0)),
        (Activation::Tanh, f32::tanh),
        (Activation::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
        (Activation::Elu, |v| if v > 0.0 { v } else { v.exp() - 1.0 }),
        (Activation::Exp, f32::exp),
        (Activation::Neg, |v| -v),
    ];
    for (activation, f) in cases {
        let mut b = one_input(3);
        b.layer("y", LayerType::Activation, &[X], &[]).activation = *activation;
        let y = b.run("y", true, &[(X, vec![1, 3], x.to_vec())]);
        close(&y.data, &x.map(f));
    }
    for (activation, f) in [(Activation::Log, f32::ln as fn(f32) -> f32), (Activation::Sqrt, f32::sqrt)] {
        let mut b = one_input(2);
        b.layer("y", LayerType::Activation, &[X], &[]).activation = activation;
        let y = b.run("y", true, &[(X, vec![1, 2], vec![0.25, 4.0])]);
        close(&y.data, &[f(0.25), f(4.0)]);
    }
    let mut b = one_input(3);
    b.layer("y", LayerType::Activation, &[X], &[]).activation = Activation::Softmax;
    let y = b.run("y", true, &[(X, vec![2, 3], vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0])]);
    let e: f32 = (1f32).exp() + (2f32).exp() + (3f32).exp();
    close(&y.data, &[1f32.exp() / e, 2f32.exp() / e, 3f32.exp() / e, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
}

#[test]
fn broadcasting_arithmetic_with_loaded_constants() {
    for (kind, f) in [
        (LayerType::Add, (|a, b| a + b) as fn(f32, f32) -> f32),
        (LayerType::Sub, |a, b| a - b),
        (LayerType::Mul, |a, b| a * b),
        (LayerType::Div, |a, b| a / b),
        (LayerType::Max, f32::max),
        (LayerType::Min, f32::min),
        (LayerType::Pow, f32::powf),
    ] {
        let mut b = one_input(3);
        b.layer("k", LayerType::Load, &[], &[("k", &[1, 1, 1, 3], &[2.0, 0.5, 3.0])]);
        b.layer("y", kind, &[X, "k"], &[]);
        let x = vec![1.5, 4.0, 2.0, 0.25, 1.0, 9.0];
        let y = b.run("y", true, &[(X, vec![2, 3], x.clone())]);
        let k = [2.0, 0.5, 3.0];
        let expected: Vec<f32> = x.iter().enumerate().map(|(i, v)| f(*v, k[i % 3])).collect();
        close(&y.data, &expected);
    }
    // A multi-tensor Load splits into constants named by tensor; a scalar broadcasts too.
    let mut b = one_input(2);
    b.layer("consts", LayerType::Load, &[], &[("two", &[1, 1, 1, 1], &[2.0]), ("one", &[1, 1, 1, 1], &[1.0])]);
    b.layer("y", LayerType::Mul, &[X, "two", "one"], &[]);
    close(&b.run("y", true, &[(X, vec![1, 2], vec![3.0, -1.0])]).data, &[6.0, -2.0]);
}

#[test]
fn strided_slice_reduce_sum_and_concat() {
    // The discrete head's pieces: slice a branch of the mask, ReduceSum, Concat.
    let mut b = one_input(5);
    let s = b.layer("s", LayerType::StridedSlice, &[X], &[]);
    (s.pad, s.pool, s.stride) = (vec![0, 0, 0, 1], vec![0, 0, 0, 4], vec![1, 1, 1, 1]);
    let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
    close(&b.run("s", true, &[(X, vec![2, 5], x.clone())]).data, &[2.0, 3.0, 4.0, 7.0, 8.0, 9.0]);
    let mut b = one_input(5);
    let s = b.layer("s", LayerType::StridedSlice, &[X], &[]);
    (s.pad, s.pool, s.stride) = (vec![0, 0, 0, 3], vec![0, 0, 0, 3], vec![1, 1, 1, 0]); // x[:, 3]
    close(&b.run("s", true, &[(X, vec![2, 5], x.clone())]).data, &[4.0, 9.0]);
    let mut b = one_input(5);
    b.layer("r", LayerType::ReduceSum, &[X], &[]).axis = 3;
    close(&b.run("r", true, &[(X, vec![2, 5], x.clone())]).data, &[15.0, 40.0]);
    let mut b = one_input(5);
    b.layer("r", LayerType::ReduceSum, &[X], &[]).axis = -1;
    b.layer("c", LayerType::Concat, &["r", X], &[]).axis = 3;
    let y = b.run("c", true, &[(X, vec![2, 5], x)]);
    assert_eq!(y.shape, vec![2, 6]);
    close(&y.data[..6], &[15.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn conv2d_flatten_and_reshape() {
    // 3x3 single-channel image, 2x2 kernel with 2 output channels, stride 1, valid padding.
    let mut b = Build::new(&[(X, [-1, 3, 3, 1])]);
    // HWIO kernel: K[dy][dx][0][k]; channel 0 sums the window, channel 1 takes its top-left.
    let k = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0];
    let c = b.layer("conv", LayerType::Conv2D, &[X], &[("k", &[2, 2, 1, 2], &k), ("b", &[2], &[0.0, 10.0])]);
    c.stride = vec![1, 1];
    b.layer("flat", LayerType::Flatten, &["conv"], &[]);
    let image: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let y = b.run("flat", true, &[(X, vec![1, 3, 3, 1], image.clone())]);
    // Windows: [1,2,4,5], [2,3,5,6], [4,5,7,8], [5,6,8,9]; output NHWC flattened.
    close(&y.data, &[12.0, 11.0, 16.0, 12.0, 24.0, 14.0, 28.0, 15.0]);
    let mut b = Build::new(&[(X, [-1, 3, 3, 1])]);
    b.layer("r", LayerType::Reshape, &[X], &[]).pool = vec![-1, 1, 1, 9];
    let y = b.run("r", true, &[(X, vec![1, 3, 3, 1], image.clone())]);
    assert_eq!(y.shape, vec![1, 9]);
    close(&y.data, &image);
}

#[test]
fn one_hot_and_random_normal() {
    let mut b = one_input(1);
    let h = b.layer("h", LayerType::OneHot, &[X], &[]);
    (h.pool, h.alpha, h.beta) = (vec![3], 1.0, 0.0);
    let y = b.run("h", true, &[(X, vec![3, 1], vec![0.0, 2.0, 1.0])]);
    close(&y.data, &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    // Deterministic: the mean (beta); sampled: beta + alpha * N(0, 1).
    let build = || {
        let mut b = one_input(4000);
        let r = b.layer("r", LayerType::RandomNormal, &[X], &[]);
        (r.alpha, r.beta) = (2.0, 0.5);
        b
    };
    let zeros = vec![0.0; 4000];
    close(&build().run("r", true, &[(X, vec![1, 4000], zeros.clone())]).data, &[0.5; 4000]);
    let samples = build().run("r", false, &[(X, vec![1, 4000], zeros)]).data;
    let mean = samples.iter().sum::<f32>() / 4000.0;
    let std = (samples.iter().map(|s| (s - mean).powi(2)).sum::<f32>() / 4000.0).sqrt();
    assert!((mean - 0.5).abs() < 0.15 && (std - 2.0).abs() < 0.15, "mean {mean} std {std}");
}

#[test]
fn memories_carry_state_between_runs() {
    // state' = state + x: the memory output is fed back as the memory input.
    let mut b = one_input(2);
    b.memories.push(Memory { shape: vec![1, 1, 1, 2], input: "state_in".into(), output: "state_out".into() });
    b.layer("state_out", LayerType::Add, &["state_in", X], &[]);
    let model = NnModel {
        version: 16,
        inputs: b.inputs,
        outputs: vec!["state_out".into()],
        memories: b.memories,
        layers: b.layers,
        weight_type: WeightType::Float32,
        padding: vec![],
        weights: b.blob.into_bytes(),
        trailer: None,
    };
    let policy = NnPolicy::from_model(model, "memory", LoadOptions::default()).unwrap();
    let mut inputs = NamedTensors::new();
    inputs.insert(X.into(), TensorData { shape: vec![1, 2], data: vec![1.0, 2.0] });
    let first = policy.run(&inputs).unwrap()["state_out"].clone(); // memory starts at zero
    close(&first.data, &[1.0, 2.0]);
    inputs.insert("state_in".into(), first);
    close(&policy.run(&inputs).unwrap()["state_out"].data, &[2.0, 4.0]);
}

#[test]
fn unsupported_layers_are_named() {
    let mut b = one_input(2);
    b.layer("upsample", LayerType::Upsample2D, &[X], &[]);
    let model = NnModel {
        version: 16,
        inputs: b.inputs,
        outputs: vec!["upsample".into()],
        memories: vec![],
        layers: b.layers,
        weight_type: WeightType::Float32,
        padding: vec![],
        weights: vec![],
        trailer: None,
    };
    let e = NnPolicy::from_model(model, "m.nn", LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("upsample") && e.contains("Upsample2D") && e.contains("not supported"), "{e}");
}

/// Mutated real files that still parse must lower and run or fail with an error: never panic.
#[test]
fn mutated_files_that_parse_never_panic_when_run() {
    let original = std::fs::read(models_dir().join("nn/Basic.nn")).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(77);
    let mut parsed = 0;
    for _ in 0..150 {
        let mut bytes = original.clone();
        let at = rand::Rng::random_range(&mut rng, 0..2700);
        bytes[at] = rand::Rng::random(&mut rng);
        let Ok(model) = barracuda::read(&bytes) else { continue };
        parsed += 1;
        if let Ok(policy) = NnPolicy::from_model(model.clone(), "mutated", LoadOptions { deterministic: true, seed: None, ..Default::default() }) {
            let _ = policy.run(&inputs_for(&model, 2));
        }
    }
    assert!(parsed > 20, "only {parsed} mutations parsed");
}

/// The LSTM cell of a recurrent `.nn` runs as one step of our own (the runner's lowering
/// writes one ONNX `LSTM`, src/engine/rewrite/lstm_step.rs runs it with the exact activations): over six
/// steps with the memories fed back, it gives what the cell's layers give run one by one.
#[test]
fn lstm_cells_run_as_one_step_and_match_their_layers() {
    for name in ["Hallway.nn", "discrete1vis0vec_2_3action_recurr.nn"] {
        let model = barracuda::read_file(&models_dir().join("nn").join(name)).unwrap();
        let lowered = |for_runner| barracuda::to_onnx(&model, barracuda::LowerOptions { deterministic: true, for_runner, ..Default::default() }).unwrap();
        let lstm_nodes = |proto: &tract_onnx::pb::ModelProto| proto.graph.as_ref().unwrap().node.iter().filter(|n| n.op_type == "LSTM").count();
        assert_eq!(lstm_nodes(&lowered(true)), 1, "{name}: the runner's lowering writes the cell as one LSTM");
        assert_eq!(lstm_nodes(&lowered(false)), 0, "{name}: a file for Unity keeps the layers");
        let runner = NnPolicy::from_model(model.clone(), name, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
        let layers = mlagents::run::OnnxPolicy::from_proto(lowered(false), name, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
        let batch = 3;
        let mut inputs = inputs_for(&model, batch);
        for m in &model.memories {
            inputs.insert(m.input.clone(), TensorData { shape: vec![batch, 1, 1, m.shape[3] as usize], data: vec![0.0; batch * m.shape[3] as usize] });
        }
        for step in 0..6 {
            let (ours, reference) = (runner.run(&inputs).unwrap(), layers.run(&inputs).unwrap());
            for (output, expected) in &reference {
                let got = &ours[output].data;
                assert_eq!(got.len(), expected.data.len(), "{name} {output}");
                for (k, (a, b)) in got.iter().zip(&expected.data).enumerate() {
                    assert!((a - b).abs() <= 2e-6 * b.abs().max(1.0), "{name} step {step} {output}[{k}]: {a} vs the layers' {b}");
                }
            }
            for m in &model.memories {
                let mut carried = reference[&m.output].clone();
                carried.shape = vec![batch, 1, 1, carried.data.len() / batch];
                inputs.insert(m.input.clone(), carried);
            }
        }
    }
}
