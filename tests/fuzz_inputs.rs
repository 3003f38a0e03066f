//! Fuzz and property tests of every input surface: ONNX files, `.nn` files with memories and
//! previous actions, `eval` JSON, YAML configurations, checkpoint files, side-channel payloads,
//! and communicator messages both ways over real gRPC connections. The property: an error or a
//! result, never a panic, an abort or a hang (each wait has a limit), and memory bounded by
//! what the input can hold.
//!
//! Each suite runs a fixed number of seeded cases (seconds in CI). A longer run by hand:
//! `MLAGENTS_FUZZ_CASES=20000 MLAGENTS_FUZZ_SEED=7 cargo test --release --test fuzz_inputs -- --nocapture`
//! (the count is per suite; each suite prints how many cases it ran and what they reached).

mod common;

use common::{models_dir, policy_description, temp_dir};
use mlagents::barracuda;
use mlagents::comm::server::{close_message, BindAddress, Incoming, Server};
use mlagents::comm::side_channel::{
    shared, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, FloatPropertiesChannel, ParameterValue,
    RawBytesChannel, Sampler, SideChannelManager, StatsAggregation, StatsSideChannel,
};
use mlagents::comm::{handshake, DEFAULT_MAX_MESSAGE_SIZE};
use mlagents::env::{EnvOptions, UnityEnvironment};
use mlagents::proto::{
    unity_rl_input_proto::ListAgentActionProto, AgentActionProto, HeaderProto, UnityInputProto, UnityMessageProto,
    UnityRlInitializationInputProto, UnityRlInputProto,
};
use mlagents::run::{LoadOptions, NamedTensors, NnPolicy, OnnxPolicy, Policy, TensorData};
use mlagents::sim::academy::{self, SimOptions};
use mlagents::sim::client::UnityClient;
use mlagents::sim::scenes;
use mlagents::spec::{ActionSpec, ApiVersion};
use mlagents::checkpoint::{AdamState, Checkpoint, CheckpointDescription, CHECKPOINT_FORMAT_VERSION};
use mlagents::train::config::RunOptions;
use mlagents::train::memory_cost;
use prost::Message;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tract_onnx::pb;

/// Cases per suite: `MLAGENTS_FUZZ_CASES`, else the suite's CI budget.
fn cases(ci_budget: usize) -> usize {
    std::env::var("MLAGENTS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(ci_budget)
}

/// The random stream of a suite (`MLAGENTS_FUZZ_SEED` varies it between long runs).
fn rng(suite: u64) -> ChaCha8Rng {
    let seed: u64 = std::env::var("MLAGENTS_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(suite))
}

/// Runs one case; a panic fails the test naming the case. With `MLAGENTS_FUZZ_TRACE` set,
/// each case is named before it runs (to find one that aborts or hangs).
fn guarded<T>(case: &str, f: impl FnOnce() -> T) -> T {
    if std::env::var_os("MLAGENTS_FUZZ_TRACE").is_some() {
        eprintln!("case: {case}");
    }
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            let message = payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            panic!("{case}: panicked: {message}")
        }
    }
}

/// One to three byte flips, insertions or deletions.
fn mutate_bytes(original: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..rng.random_range(1..4) {
        if bytes.is_empty() {
            bytes.push(rng.random());
            continue;
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..4) {
            0 | 1 => bytes[at] = rng.random(),
            2 => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, rng.random()),
        }
    }
    if rng.random_bool(0.05) {
        bytes.truncate(rng.random_range(0..=bytes.len()));
    }
    bytes
}

/// A number a careless or hostile input might hold.
fn odd_i64(rng: &mut ChaCha8Rng) -> i64 {
    *[0, -1, -7, 1, 2, 3, 8, 1 << 31, (1 << 31) - 1, 1 << 40, 1 << 62, i64::MAX, i64::MIN, 2_000_000_000].get(rng.random_range(0..14)).unwrap()
}

fn odd_f32(rng: &mut ChaCha8Rng) -> f32 {
    *[0.0, -1.0, 1.0, 0.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30, f32::MIN_POSITIVE, 3.0].get(rng.random_range(0..11)).unwrap()
}

/// A structural change to a valid ONNX model: names nothing provides, odd dims, element
/// types, attributes, opsets, initializers, operators, node order.
fn mutate_onnx(original: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut model = pb::ModelProto::decode(original).expect("a real model decodes");
    let graph = model.graph.as_mut().expect("graph");
    let nodes = graph.node.len().max(1);
    match rng.random_range(0..11) {
        0 if !graph.output.is_empty() => {
            let k = rng.random_range(0..graph.output.len());
            graph.output[k].name.push('z');
        }
        1 => {
            let node = &mut graph.node[rng.random_range(0..nodes)];
            if let Some(input) = node.input.first_mut() {
                input.push('z');
            }
        }
        2 | 3 if !graph.input.is_empty() => {
            use pb::tensor_shape_proto::dimension::Value;
            let k = rng.random_range(0..graph.input.len());
            if let Some(pb::type_proto::Value::TensorType(t)) = graph.input[k].r#type.as_mut().and_then(|t| t.value.as_mut()) {
                if rng.random_bool(0.3) {
                    t.elem_type = rng.random_range(0..20);
                } else if let Some(shape) = t.shape.as_mut() {
                    if !shape.dim.is_empty() {
                        let d = rng.random_range(0..shape.dim.len());
                        shape.dim[d].value = Some(Value::DimValue(odd_i64(rng)));
                    }
                }
            }
        }
        4 => {
            let node = &mut graph.node[rng.random_range(0..nodes)];
            if let Some(a) = node.attribute.first_mut() {
                a.i = odd_i64(rng);
                a.f = odd_f32(rng);
                if !a.ints.is_empty() {
                    let k = rng.random_range(0..a.ints.len());
                    a.ints[k] = odd_i64(rng);
                }
            }
        }
        5 => {
            let version = [0, 1, 8, 9, 13, 22, 999][rng.random_range(0..7)];
            match model.opset_import.first_mut() {
                Some(o) if rng.random_bool(0.8) => o.version = version,
                _ => model.opset_import.clear(),
            }
        }
        6 if !graph.initializer.is_empty() => {
            let k = rng.random_range(0..graph.initializer.len());
            let t = &mut graph.initializer[k];
            match rng.random_range(0..4) {
                0 => {
                    let keep = rng.random_range(0..=t.raw_data.len());
                    t.raw_data.truncate(keep);
                }
                1 if !t.dims.is_empty() => {
                    let d = rng.random_range(0..t.dims.len());
                    t.dims[d] = odd_i64(rng);
                }
                2 => t.data_type = rng.random_range(0..20),
                _ => {
                    // A non-finite weight.
                    if t.raw_data.len() >= 4 {
                        t.raw_data[..4].copy_from_slice(&f32::NAN.to_le_bytes());
                    } else if let Some(v) = t.float_data.first_mut() {
                        *v = f32::NAN;
                    }
                }
            }
        }
        7 => {
            let ops = ["Gemm", "Conv", "FooBarOp", "Reshape", "Multinomial", "OneHot", "Slice", "Concat", "Expand", "Tile"];
            graph.node[rng.random_range(0..nodes)].op_type = ops[rng.random_range(0..ops.len())].into();
        }
        8 if nodes > 1 => {
            let (a, b) = (rng.random_range(0..nodes), rng.random_range(0..nodes));
            graph.node.swap(a, b);
            // A node fed by the last node's output: a cycle when it feeds back.
            let last = graph.node[nodes - 1].output.first().cloned().unwrap_or_default();
            if let Some(input) = graph.node[0].input.first_mut() {
                *input = last;
            }
        }
        9 if nodes > 1 => {
            graph.node.remove(rng.random_range(0..nodes));
        }
        _ => {
            // External data.
            if let Some(t) = graph.initializer.first_mut() {
                t.data_location = Some(1);
            }
        }
    }
    model.encode_to_vec()
}

#[test]
fn onnx_files_give_results_or_errors() {
    let mut rng = rng(1);
    let names = ["3DBall.onnx", "deterDiscrete1obs3action_v2_0.onnx", "hybrid0vis8vec_2c_2_3d_v2_0.onnx", "discrete1vis0vec_2_3action_v1_0.onnx"];
    let originals: Vec<(&str, Vec<u8>)> = names.iter().map(|n| (*n, std::fs::read(models_dir().join("onnx").join(n)).unwrap())).collect();
    let n = cases(300);
    let (mut loaded, mut ran) = (0, 0);
    for i in 0..n {
        let (name, original) = &originals[i % originals.len()];
        let bytes = if rng.random_bool(0.5) { mutate_bytes(original, &mut rng) } else { mutate_onnx(original, &mut rng) };
        let deterministic = rng.random_bool(0.5);
        let batch = [1, 2, 12][rng.random_range(0..3)];
        let (l, r) = guarded(&format!("{name}, case {i}"), || {
            let Ok(policy) = OnnxPolicy::from_bytes(&bytes, name, LoadOptions { deterministic, seed: Some(1), ..Default::default() }) else {
                return (false, false);
            };
            let _ = policy.non_finite_weights();
            let ran = policy.neutral_inputs(batch).and_then(|inputs| policy.run(&inputs)).is_ok();
            (true, ran)
        });
        loaded += usize::from(l);
        ran += usize::from(r);
    }
    eprintln!("ONNX files: {n} cases, {loaded} loaded, {ran} ran");
    assert!(loaded > 0 && ran > 0, "the mutations never produced a runnable model: the suite tests nothing");
}

/// Inputs for a `.nn` model as Unity feeds them, with previous actions (in and out of their
/// branches), masks and, sometimes, memories.
fn nn_inputs(model: &barracuda::NnModel, batch: usize, rng: &mut ChaCha8Rng) -> NamedTensors {
    let mut inputs = NamedTensors::new();
    for input in &model.inputs {
        let mut shape: Vec<usize> = input.shape.iter().map(|d| (*d).clamp(1, 128) as usize).collect();
        shape.resize(4, 1);
        shape[0] = batch;
        let len: usize = shape.iter().product();
        let data = match input.name.as_str() {
            "prev_action" => (0..len).map(|_| rng.random_range(-2..6) as f32 + if rng.random_bool(0.1) { 0.5 } else { 0.0 }).collect(),
            "action_masks" => (0..len).map(|_| f32::from(rng.random_bool(0.8))).collect(),
            _ => (0..len).map(|_| rng.random_range(-1.0..1.0)).collect(),
        };
        inputs.insert(input.name.clone(), TensorData { shape, data });
    }
    if rng.random_bool(0.5) {
        for memory in &model.memories {
            let size = memory.shape.last().copied().unwrap_or(1).clamp(1, 4096) as usize;
            inputs.insert(memory.input.clone(), TensorData { shape: vec![batch, size], data: vec![0.1; batch * size] });
        }
    }
    inputs
}

#[test]
fn nn_files_with_memories_and_previous_actions_give_results_or_errors() {
    let mut rng = rng(2);
    let names = ["discrete1vis0vec_2_3action_recurr.nn", "Hallway.nn", "Basic.nn"];
    let originals: Vec<(&str, Vec<u8>)> = names.iter().map(|n| (*n, std::fs::read(models_dir().join("nn").join(n)).unwrap())).collect();
    let n = cases(150);
    let (mut parsed, mut ran, mut out_of_branch) = (0, 0, 0);
    for i in 0..n {
        let (name, original) = &originals[i % originals.len()];
        // Most mutations in the header and layer sections, where shapes and sizes live.
        let region = original.len().min(4000);
        let mut bytes = original.clone();
        if rng.random_bool(0.8) {
            // Flips keep the layout, so more of them parse and reach the lowering.
            for _ in 0..rng.random_range(1..3) {
                let at = rng.random_range(0..region);
                bytes[at] = rng.random();
            }
        } else {
            let head = mutate_bytes(&bytes[..region], &mut rng);
            bytes.splice(..region, head);
        }
        let batch = [1, 3, 16][rng.random_range(0..3)];
        let result = guarded(&format!("{name}, case {i}"), || {
            let model = barracuda::read(&bytes).ok()?;
            let policy = NnPolicy::from_model(model.clone(), name, LoadOptions { deterministic: true, ..Default::default() }).ok();
            let inputs = nn_inputs(&model, batch, &mut rng);
            let outcome = policy.map(|p| p.run(&inputs));
            Some(outcome)
        });
        if let Some(outcome) = result {
            parsed += 1;
            match outcome {
                Some(Ok(_)) => ran += 1,
                Some(Err(e)) if e.to_string().contains("outside branch") => out_of_branch += 1,
                _ => {}
            }
        }
    }
    eprintln!(".nn files: {n} cases, {parsed} parsed, {ran} ran, {out_of_branch} refused previous actions outside their branch");
    assert!(parsed > 0 && ran > 0, "the mutations never produced a runnable model: the suite tests nothing");
}

/// A random `eval` input document: names the model knows (with their widths) and others,
/// shapes with odd dims, data of the right or wrong length, numbers, names of non-finite
/// values, wrong types. Half the documents are well-formed but for their values.
fn eval_document(names: &[(&str, usize)], rng: &mut ChaCha8Rng) -> String {
    let mut entries = vec![];
    if rng.random_bool(0.5) {
        let batch = [1, 2, 5, 64][rng.random_range(0..4)];
        for (name, width) in names {
            let data: Vec<String> = (0..batch * width)
                .map(|_| match rng.random_range(0..30) {
                    0 => "\"NaN\"".into(),
                    1 => "\"Infinity\"".into(),
                    2 => "\"-Infinity\"".into(),
                    3 => "3.4e38".into(),
                    _ if name.contains("mask") => rng.random_range(0..2).to_string(),
                    _ => format!("{:.3}", rng.random_range(-5.0..5.0)),
                })
                .collect();
            entries.push(format!("\"{name}\": {{\"shape\": [{batch}, {width}], \"data\": [{}]}}", data.join(",")));
        }
        return format!("{{\"inputs\": {{{}}}}}", entries.join(","));
    }
    for (name, _) in names {
        if rng.random_bool(0.1) {
            continue;
        }
        let rank = rng.random_range(0..4);
        let mut shape: Vec<String> = (0..rank).map(|_| ["0", "1", "2", "3", "8", "20", "4294967296", "1099511627776"][rng.random_range(0..8)].to_string()).collect();
        if rng.random_bool(0.5) && rank == 2 {
            shape = vec![rng.random_range(1..5).to_string(), ["8", "20", "3"][rng.random_range(0..3)].to_string()];
        }
        let product: usize = shape.iter().filter_map(|d| d.parse::<usize>().ok()).try_fold(1usize, |n, d| n.checked_mul(d)).unwrap_or(0).min(200);
        let len = if rng.random_bool(0.7) { product } else { rng.random_range(0..50) };
        let data: Vec<String> = (0..len)
            .map(|_| match rng.random_range(0..20) {
                0 => "\"NaN\"".into(),
                1 => "\"Infinity\"".into(),
                2 => "\"-Infinity\"".into(),
                3 => "\"x\"".into(),
                4 => "null".into(),
                5 => "1e300".into(),
                6 => "[1]".into(),
                _ => format!("{:.3}", rng.random_range(-2.0..2.0)),
            })
            .collect();
        entries.push(format!("\"{name}\": {{\"shape\": [{}], \"data\": [{}]}}", shape.join(","), data.join(",")));
    }
    if rng.random_bool(0.2) {
        entries.push("\"bogus\": {\"shape\": [1], \"data\": [0]}".into());
    }
    format!("{{\"inputs\": {{{}}}}}", entries.join(","))
}

#[test]
fn eval_inputs_give_results_or_errors() {
    let mut rng = rng(3);
    let models = [
        (models_dir().join("onnx/3DBall.onnx"), vec![("obs_0", 8)]),
        (models_dir().join("nn/Basic.nn"), vec![("vector_observation", 20), ("action_masks", 3)]),
        (models_dir().join("onnx/deterDiscrete1obs3action_v2_0.onnx"), vec![("obs_0", 20), ("action_masks", 3)]),
    ];
    let policies: Vec<(Policy, Vec<(&str, usize)>)> =
        models.iter().map(|(p, names)| (Policy::load(p, LoadOptions { deterministic: true, ..Default::default() }).unwrap(), names.clone())).collect();
    let n = cases(600);
    let (mut parsed, mut ran) = (0, 0);
    for i in 0..n {
        let (policy, names) = &policies[i % policies.len()];
        let document = eval_document(names, &mut rng);
        let outcome = guarded(&format!("eval case {i}: {document}"), || {
            let inputs = mlagents::run::parse_eval_inputs(&document).ok()?;
            let result = policy.run(&inputs);
            if let Ok(outputs) = &result {
                // Whatever came out can be printed (non-finite values as names).
                serde_json::to_string(outputs).expect("outputs serialise");
            }
            Some(result.is_ok())
        });
        parsed += usize::from(outcome.is_some());
        ran += usize::from(outcome == Some(true));
    }
    // Huge batches run, bounded by what the document holds.
    let (policy, _) = &policies[0];
    let rows = 20_000;
    let inputs = NamedTensors::from([("obs_0".to_string(), TensorData { shape: vec![rows, 8], data: vec![0.25; rows * 8] })]);
    assert_eq!(policy.run(&inputs).unwrap()["deterministic_continuous_actions"].shape, vec![rows, 2]);
    eprintln!("eval inputs: {n} cases, {parsed} parsed, {ran} ran");
    assert!(parsed > 0 && ran > 0, "the generator never produced a valid document: the suite tests nothing");
}

/// A mutation of one line of a YAML configuration: a value replaced by an odd one, a key
/// misspelt, a line deleted, duplicated or re-indented.
fn mutate_yaml(text: &str, rng: &mut ChaCha8Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    if lines.is_empty() {
        return text.into();
    }
    let k = rng.random_range(0..lines.len());
    let values = [".nan", ".inf", "-.inf", "-1", "0", "1e300", "-0.001", "abc", "[]", "{}", "~", "2", "0.5", "\"x\"", "&a 1", "*a", "1000000000", "100000000000000", "9007199254740993"];
    match rng.random_range(0..5) {
        0 | 1 => {
            if let Some((key, _)) = lines[k].split_once(':') {
                lines[k] = format!("{key}: {}", values[rng.random_range(0..values.len())]);
            }
        }
        2 => lines[k] = lines[k].replacen(':', "x:", 1),
        3 => {
            lines.remove(k);
        }
        _ => {
            let line = lines[k].clone();
            lines.insert(k, if rng.random_bool(0.5) { line } else { format!("  {line}") });
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn yaml_configurations_give_settings_in_range_or_errors() {
    let mut rng = rng(4);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut originals = vec![];
    for dir in ["tests/fixtures/config", "config"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if entry.path().extension().is_some_and(|e| e == "yaml") {
                originals.push(std::fs::read_to_string(entry.path()).unwrap());
            }
        }
    }
    let n = cases(2000);
    let mut accepted = 0;
    for i in 0..n {
        let mut text = originals[i % originals.len()].clone();
        for _ in 0..rng.random_range(1..3) {
            text = mutate_yaml(&text, &mut rng);
        }
        let ok = guarded(&format!("config case {i}:\n{text}"), || {
            let Ok(run) = RunOptions::from_yaml(&text, "fuzz.yaml") else { return false };
            // What is accepted is in range.
            let mut all: Vec<(&str, &mlagents::train::config::TrainerSettings)> = run.behaviors.iter().map(|(n, s)| (n.as_str(), s)).collect();
            all.extend(run.default_settings.iter().map(|s| ("default_settings", s)));
            for (name, s) in all {
                let h = &s.hyperparameters;
                assert!(h.learning_rate.is_finite() && h.learning_rate > 0.0, "{name}: learning_rate {}", h.learning_rate);
                assert!(h.beta.is_finite() && h.beta >= 0.0 && h.epsilon.is_finite() && h.epsilon > 0.0, "{name}");
                assert!((0.0..=1.0).contains(&h.lambd), "{name}: lambd {}", h.lambd);
                assert!(h.batch_size >= 1 && h.buffer_size >= h.batch_size && h.num_epoch >= 1, "{name}");
                assert!(s.network_settings.hidden_units >= 1 && s.network_settings.num_layers >= 1, "{name}");
                assert!(s.checkpoint_interval >= 1 && s.keep_checkpoints >= 1 && s.time_horizon >= 1 && s.summary_freq >= 1, "{name}");
                for signal in s.reward_signals.values() {
                    assert!((0.0..=1.0).contains(&signal.gamma) && signal.strength.is_finite(), "{name}");
                }
            }
            let _ = run.check_run_settings("fuzz.yaml");
            let _ = run.to_yaml();
            // Nothing accepted makes the trainer allocate past the machine.
            if let Some(available) = memory_cost::physical_memory() {
                for settings in run.behaviors.values().chain(run.default_settings.iter()) {
                    let sizes = settings.sizes();
                    let too_large = memory_cost::beyond(memory_cost::costs(&sizes, memory_cost::BehaviorShape::least(&sizes)), available);
                    assert!(too_large.is_none(), "accepted {too_large:?}");
                }
            }
            true
        });
        accepted += usize::from(ok);
    }
    eprintln!("YAML configurations: {n} cases, {accepted} accepted");
    assert!(accepted > 0, "every mutant was refused: the suite tests nothing");
}

/// LogSoftmax of rows with large spreads (tails far under -103, where log(softmax) was
/// `-inf`), at opsets 9 and 13, rank 2 and 3, against a float64 evaluation: every value within
/// 1e-5 relative, finite wherever the float64 value fits in float32.
#[test]
fn log_softmax_keeps_its_far_tails() {
    use mlagents::onnx::{attr_int, value_info, GraphBuilder, FLOAT};
    let mut rng = rng(9);
    let n = cases(60);
    let mut worst = 0.0f64;
    for i in 0..n {
        let (opset, rank3) = ([9, 13][rng.random_range(0..2)], rng.random_bool(0.3));
        let width = rng.random_range(1..70usize);
        let rows = rng.random_range(1..6usize);
        let spread = [1.0f32, 50.0, 200.0, 1e4, 1e6][rng.random_range(0..5)];
        let data: Vec<f32> = (0..rows * width).map(|_| rng.random_range(-spread..=spread)).collect();
        let dims: Vec<i64> = if rank3 { vec![rows as i64, 1, width as i64] } else { vec![rows as i64, width as i64] };
        let mut graph = GraphBuilder::default();
        let axis = if rank3 { -1 } else { 1 };
        graph.node_into("LogSoftmax", vec!["x".into()], vec![attr_int("axis", axis)], "y");
        let model = graph.finish("log_softmax", opset, vec![value_info("x", FLOAT, &dims)], vec![value_info("y", FLOAT, &dims)], "fuzz");
        let shape: Vec<usize> = dims.iter().map(|d| *d as usize).collect();
        let inputs = NamedTensors::from([("x".to_string(), TensorData { shape, data: data.clone() })]);
        let got = guarded(&format!("log-softmax case {i}"), || OnnxPolicy::from_proto(model, "fuzz", LoadOptions::default()).unwrap().run(&inputs).unwrap());
        for (row, out) in data.chunks(width).zip(got["y"].data.chunks(width)) {
            let max = row.iter().fold(f64::MIN, |m, v| m.max(*v as f64));
            let sum: f64 = row.iter().map(|v| (*v as f64 - max).exp()).sum();
            for (x, y) in row.iter().zip(out) {
                let want = *x as f64 - max - sum.ln();
                if want < f32::MIN as f64 {
                    continue;
                }
                let error = (*y as f64 - want).abs();
                worst = worst.max(error / want.abs().max(1.0));
                assert!(y.is_finite() && error <= 1e-5 * want.abs().max(1.0), "case {i} (opset {opset}, spread {spread}): {y} for {want}");
            }
        }
    }
    eprintln!("log-softmax: {n} cases, worst relative error {worst:.2e}");
}

/// A random JSON value to put in place of a field.
fn odd_json(rng: &mut ChaCha8Rng) -> serde_json::Value {
    use serde_json::json;
    [json!(null), json!(-1), json!(0), json!(1e300), json!(18446744073709551615u64), json!("x"), json!([]), json!({}), json!(true), json!(2), json!("../../etc/passwd")]
        [rng.random_range(0..11)]
    .clone()
}

/// Replaces one randomly chosen leaf of a JSON document.
fn mutate_json(value: &mut serde_json::Value, rng: &mut ChaCha8Rng) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() && rng.random_bool(0.8) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.random_range(0..keys.len())];
            if rng.random_bool(0.1) {
                map.remove(key);
            } else {
                mutate_json(map.get_mut(key).expect("listed key"), rng);
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() && rng.random_bool(0.8) => {
            let k = rng.random_range(0..items.len());
            mutate_json(&mut items[k], rng);
        }
        other => *other = odd_json(rng),
    }
}

#[test]
fn checkpoint_files_give_checkpoints_or_errors() {
    use mlagents::export::{export_checkpoint, ExportOptions};
    let mut rng = rng(5);
    let dir = temp_dir("fuzz-checkpoints");
    let policy = policy_description(ActionSpec::hybrid(2, &[3, 2]), &[6, 4], true);
    let description = CheckpointDescription {
        format_version: CHECKPOINT_FORMAT_VERSION,
        behavior: "B".into(),
        trainer: "ppo".into(),
        step: 100,
        policy: policy.clone(),
        optimizer: AdamState { step: 3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8 },
        weights_file: String::new(),
        weights_sha256: String::new(),
        reward: Some(0.5),
        creation_time: 0.0,
        curriculum: None,
        self_play: None,
        trainer_state: None,
    };
    let weights = mlagents::policy::Weights::random(&policy, 3);
    let json_path = Checkpoint::write(&dir, description, &weights).unwrap();
    let tensors_path = dir.join("B-100.safetensors");
    let (json, tensors) = (std::fs::read(&json_path).unwrap(), std::fs::read(&tensors_path).unwrap());
    let out = temp_dir("fuzz-checkpoint-exports");
    let n = cases(300);
    let mut read = 0;
    for i in 0..n {
        let mut description: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let mut bytes = tensors.clone();
        match rng.random_range(0..3) {
            0 => mutate_json(&mut description, &mut rng),
            1 => bytes = mutate_bytes(&tensors, &mut rng),
            _ => {
                // The tensors' header edited, with the sha256 updated so the edit is not caught
                // as a torn file.
                let header_len = 8 + u64::from_le_bytes(tensors[..8].try_into().unwrap()) as usize;
                let head = mutate_bytes(&bytes[..header_len.min(bytes.len())], &mut rng);
                bytes.splice(..header_len.min(bytes.len()), head);
            }
        }
        if let (true, Some(fields)) = (rng.random_bool(0.7), description.as_object_mut()) {
            fields.insert("weights_sha256".into(), mlagents::checkpoint::sha256_hex(&bytes).into());
        }
        std::fs::write(&tensors_path, &bytes).unwrap();
        std::fs::write(&json_path, serde_json::to_vec(&description).unwrap()).unwrap();
        let ok = guarded(&format!("checkpoint case {i}"), || match Checkpoint::read(&json_path) {
            Ok(checkpoint) => {
                let _ = export_checkpoint(&checkpoint, &out, "B", ExportOptions::default(), true);
                true
            }
            Err(_) => false,
        });
        read += usize::from(ok);
    }
    eprintln!("checkpoint files: {n} cases, {read} read back");
    assert!(read > 0, "every mutant was refused: the suite tests nothing");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(out);
}

/// Every channel either side registers.
fn all_channels() -> SideChannelManager {
    SideChannelManager::new(vec![
        shared(EngineConfigurationChannel::new()),
        shared(EnvironmentParametersChannel::new()),
        shared(StatsSideChannel::new()),
        shared(FloatPropertiesChannel::new()),
        shared(RawBytesChannel::new(academy::ECHO_CHANNEL_ID)),
    ])
    .unwrap()
}

#[test]
fn side_channel_payloads_give_values_or_errors() {
    let mut rng = rng(6);
    // Valid traffic of every channel, both directions, as the base of the mutations.
    let engine = shared(EngineConfigurationChannel::new());
    engine.lock().unwrap().set_configuration(EngineConfig { width: Some(84), height: Some(84), quality_level: Some(5), time_scale: Some(20.0), target_frame_rate: Some(-1), capture_frame_rate: Some(60) });
    let parameters = shared(EnvironmentParametersChannel::new());
    parameters.lock().unwrap().set_parameter("mass", ParameterValue::Float(2.0));
    parameters.lock().unwrap().set_parameter("scale", ParameterValue::Sampled { seed: 3, sampler: Sampler::Uniform { min: 0.5, max: 1.5 } });
    let floats = shared(FloatPropertiesChannel::new());
    floats.lock().unwrap().set_property("gravity", -9.8);
    let stats = shared(StatsSideChannel::new());
    stats.lock().unwrap().add("Sim/Value", 1.5, StatsAggregation::Average);
    let echo = shared(RawBytesChannel::new(academy::ECHO_CHANNEL_ID));
    echo.lock().unwrap().send_raw_data(vec![1, 2, 3]);
    let mut sender = SideChannelManager::new(vec![engine, parameters, floats, stats, echo]).unwrap();
    let valid = sender.take_outgoing(ApiVersion::new(1, 5, 0));
    assert!(!valid.is_empty());
    let n = cases(5000);
    let mut accepted = 0;
    for i in 0..n {
        let bytes = if rng.random_bool(0.8) { mutate_bytes(&valid, &mut rng) } else { (0..rng.random_range(0..64)).map(|_| rng.random()).collect() };
        let ok = guarded(&format!("side channel case {i}"), || all_channels().process_incoming(&bytes).is_ok());
        accepted += usize::from(ok);
    }
    eprintln!("side-channel payloads: {n} cases, {accepted} accepted");
    assert!(accepted > 0, "every mutant was refused: the suite tests nothing");
}

/// What a Unity player sends: its first handshake call, and its reply to a reset (recorded
/// from the stand-in Basic scene over a real connection, our server playing the trainer).
fn record_unity_side() -> (Vec<u8>, Vec<u8>) {
    let mut server = Server::bind(&BindAddress::Loopback, 0, DEFAULT_MAX_MESSAGE_SIZE).unwrap();
    let mut options = SimOptions::new(server.port());
    options.seed = Some(1);
    let unity = std::thread::spawn(move || academy::run(scenes::build("Basic").unwrap(), options));
    let mut recorded = vec![];
    for call in 0..3 {
        let Ok(Incoming::Message { message, reply, .. }) = server.recv_timeout(Duration::from_secs(30)) else { panic!("call {call} did not come") };
        recorded.push(message.encode_to_vec());
        let answer = match call {
            0 => handshake_reply(1, "1.5.0"),
            1 => trainer_input(UnityRlInputProto { command: 1, ..Default::default() }),
            _ => close_message(),
        };
        reply.send(answer).unwrap();
    }
    server.shutdown();
    let _ = unity.join().unwrap();
    (recorded.remove(0), recorded.remove(1))
}

fn handshake_reply(seed: i32, version: &str) -> UnityMessageProto {
    UnityMessageProto {
        header: Some(HeaderProto { status: 200, message: String::new() }),
        unity_output: None,
        unity_input: Some(UnityInputProto {
            rl_input: None,
            rl_initialization_input: Some(UnityRlInitializationInputProto {
                seed,
                communication_version: version.into(),
                package_version: "0.28.0".into(),
                capabilities: Some(handshake::our_capabilities()),
                num_areas: 1,
            }),
        }),
    }
}

fn trainer_input(input: UnityRlInputProto) -> UnityMessageProto {
    UnityMessageProto {
        header: Some(HeaderProto { status: 200, message: String::new() }),
        unity_output: None,
        unity_input: Some(UnityInputProto { rl_input: Some(input), rl_initialization_input: None }),
    }
}

/// Structural mutations of a decoded message: the same protobuf with odd field values.
fn mutate_message(bytes: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut message = UnityMessageProto::decode(bytes).expect("recorded messages decode");
    if let Some(output) = message.unity_output.as_mut() {
        if let Some(init) = output.rl_initialization_output.as_mut() {
            match rng.random_range(0..3) {
                0 => init.communication_version = ["", "banana", "99.0.0", "0.14.0", "1.5"][rng.random_range(0..5)].into(),
                1 => init.package_version = String::new(),
                _ => init.capabilities = None,
            }
        }
        if let Some(rl) = output.rl_output.as_mut() {
            rl.side_channel = mutate_bytes(&rl.side_channel, rng);
            for list in rl.agent_infos.values_mut() {
                for info in &mut list.value {
                    match rng.random_range(0..6) {
                        0 => info.reward = odd_f32(rng),
                        1 => info.id = odd_i64(rng) as i32,
                        2 => info.action_mask = (0..rng.random_range(0..6)).map(|_| rng.random()).collect(),
                        _ => {
                            for obs in &mut info.observations {
                                if rng.random_bool(0.5) {
                                    let k = rng.random_range(0..obs.shape.len().max(1));
                                    if let Some(d) = obs.shape.get_mut(k) {
                                        *d = odd_i64(rng) as i32;
                                    }
                                } else {
                                    obs.compression_type = rng.random_range(0..3);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    message.encode_to_vec()
}

#[test]
fn messages_from_the_environment_give_steps_or_errors() {
    let mut rng = rng(7);
    let (first, reset_output) = record_unity_side();
    let second = UnityMessageProto { header: Some(HeaderProto { status: 200, message: String::new() }), ..Default::default() }.encode_to_vec();
    let n = cases(60);
    let (mut handshakes, mut resets) = (0, 0);
    for i in 0..n {
        let pending = UnityEnvironment::listen(EnvOptions { env: None, base_port: Some(0), timeout_wait: Duration::from_secs(2), ..Default::default() }).unwrap();
        let port = pending.port();
        let during_handshake = rng.random_bool(0.4);
        let raw = rng.random_bool(0.5);
        let (first_call, reset_reply) = if during_handshake {
            let bytes = if raw { mutate_bytes(&first, &mut rng) } else { mutate_message(&first, &mut rng) };
            (bytes, reset_output.clone())
        } else {
            let bytes = if raw { mutate_bytes(&reset_output, &mut rng) } else { mutate_message(&reset_output, &mut rng) };
            (first.clone(), bytes)
        };
        let second = second.clone();
        let unity = std::thread::spawn(move || {
            let mut client = UnityClient::connect("localhost", port, Duration::from_secs(5)).ok()?;
            client.exchange_raw(first_call).ok()?;
            // Held until the trainer resets; then the (mutated) reply to the reset.
            client.exchange_raw(second).ok()?;
            client.exchange_raw(reset_reply).ok()
        });
        let (h, r) = guarded(&format!("environment message case {i}"), || {
            let Ok(mut env) = pending.handshake() else { return (false, false) };
            let reset = env.reset().is_ok();
            if reset {
                for name in env.behavior_names() {
                    let _ = env.get_steps(&name);
                }
            }
            (true, reset)
        });
        handshakes += usize::from(h);
        resets += usize::from(r);
        let _ = unity.join();
    }
    eprintln!("messages from the environment: {n} cases, {handshakes} handshakes, {resets} resets accepted");
    assert!(handshakes > 0 && resets > 0, "the suite never got past the handshake: it tests nothing");
}

/// The next call of the stand-in, until it has stopped (or 10 s).
fn next_call<T>(server: &Server, unity: &std::thread::JoinHandle<T>) -> Option<tokio::sync::oneshot::Sender<UnityMessageProto>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        match server.recv_timeout(Duration::from_millis(50)) {
            Ok(Incoming::Message { reply, .. }) => return Some(reply),
            Ok(Incoming::CallFailed { .. }) => return None,
            Err(_) if unity.is_finished() => return None,
            Err(_) => {}
        }
    }
    None
}

/// A trainer input with odd actions, commands and side-channel bytes.
fn odd_trainer_input(rng: &mut ChaCha8Rng) -> UnityRlInputProto {
    let mut input = UnityRlInputProto { command: [0, 0, 0, 1, 2, 7, -1][rng.random_range(0..7)], ..Default::default() };
    let behaviors = ["Basic?team=0", "Basic?team=0", "Nope?team=0", ""];
    let behavior = behaviors[rng.random_range(0..behaviors.len())];
    let actions = (0..rng.random_range(0..3))
        .map(|_| AgentActionProto {
            continuous_actions: (0..rng.random_range(0..3)).map(|_| odd_f32(rng)).collect(),
            discrete_actions: (0..rng.random_range(0..3)).map(|_| odd_i64(rng) as i32).collect(),
            vector_actions_deprecated: (0..rng.random_range(0..2)).map(|_| odd_f32(rng)).collect(),
            value: 0.0,
        })
        .collect();
    input.agent_actions.insert(behavior.into(), ListAgentActionProto { value: actions });
    if rng.random_bool(0.5) {
        input.side_channel = (0..rng.random_range(0..48)).map(|_| rng.random()).collect();
    }
    input
}

#[test]
fn messages_from_the_trainer_give_steps_or_errors() {
    let mut rng = rng(8);
    let n = cases(40);
    let mut survived = 0;
    for i in 0..n {
        let mut server = Server::bind(&BindAddress::Loopback, 0, DEFAULT_MAX_MESSAGE_SIZE).unwrap();
        let mut options = SimOptions::new(server.port());
        options.seed = Some(1);
        options.handshake_timeout = Duration::from_secs(5);
        options.exchange_timeout = Duration::from_secs(5);
        let unity = std::thread::spawn(move || academy::run(scenes::build("Basic").unwrap(), options));
        let steps = rng.random_range(1..6);
        for call in 0..steps + 2 {
            let Some(reply) = next_call(&server, &unity) else { break };
            let answer = match call {
                0 if rng.random_bool(0.2) => handshake_reply(rng.random(), ["1.5.0", "9.0.0", "", "x"][rng.random_range(0..4)]),
                0 => handshake_reply(1, "1.5.0"),
                1 => trainer_input(UnityRlInputProto { command: 1, ..Default::default() }),
                c if c == steps + 1 => close_message(),
                _ => trainer_input(odd_trainer_input(&mut rng)),
            };
            let _ = reply.send(answer);
        }
        server.shutdown();
        let outcome = unity.join();
        assert!(outcome.is_ok(), "trainer message case {i}: the stand-in panicked");
        survived += usize::from(matches!(outcome, Ok(Ok(_))));
    }
    eprintln!("messages from the trainer: {n} cases, {survived} ended with the trainer closing the link");
}
