//! Regression tests of the runner and the exporter under bad input (the findings of the
//! adversarial test report of 2026-11-30): crafted ONNX and `.nn` files, renamed files,
//! non-finite weights, foreign parity records, odd flags, and plays that never end an episode.

mod common;

use common::{golden_case_dir, models_dir, temp_dir};
use mlagents::barracuda;
use mlagents::run::{check, LoadOptions, ModelFormat, NamedTensors, NnPolicy, OnnxPolicy, Policy, RunError, TensorData};
use prost::Message;
use std::process::Command;
use tract_onnx::pb;

fn real_onnx(name: &str) -> pb::ModelProto {
    pb::ModelProto::decode(std::fs::read(models_dir().join("onnx").join(name)).unwrap().as_slice()).unwrap()
}

fn load(model: &pb::ModelProto) -> Result<OnnxPolicy, RunError> {
    OnnxPolicy::from_bytes(&model.encode_to_vec(), "crafted.onnx", LoadOptions { deterministic: true, ..Default::default() })
}

fn run_tool(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-run")).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// P1, D6, U9, U17: what tract would panic on or misread is named in the model's terms.
#[test]
fn malformed_onnx_graphs_are_named_in_the_models_terms() {
    let mut dangling = real_onnx("3DBall.onnx");
    dangling.graph.as_mut().unwrap().output[2].name = "continuous_actionz".into();
    let e = load(&dangling).err().unwrap().to_string();
    assert!(e.contains("graph output \"continuous_actionz\" is not produced by any node"), "{e}");

    let mut newer = real_onnx("3DBall.onnx");
    newer.opset_import[0].version = 999;
    let e = load(&newer).err().unwrap().to_string();
    assert!(e.contains("opset 999 is newer than this runner supports"), "{e}");

    let mut no_opset = real_onnx("3DBall.onnx");
    no_opset.opset_import.clear();
    assert!(load(&no_opset).err().unwrap().to_string().contains("declares no opset"));

    let mut unknown = real_onnx("3DBall.onnx");
    unknown.graph.as_mut().unwrap().node[3].op_type = "FooBarOp".into();
    let e = load(&unknown).err().unwrap().to_string();
    assert!(e.contains("operator FooBarOp") && e.contains("not supported"), "{e}");

    let mut external = real_onnx("3DBall.onnx");
    external.graph.as_mut().unwrap().initializer[0].data_location = Some(1);
    assert!(load(&external).err().unwrap().to_string().contains("external data"));

    let mut cycle = real_onnx("3DBall.onnx");
    let graph = cycle.graph.as_mut().unwrap();
    // A node fed by the node it feeds: a cycle of two.
    let (fed, feeding) = (0..graph.node.len())
        .find_map(|i| {
            let out = graph.node[i].output[0].clone();
            let j = (i + 1..graph.node.len()).find(|j| graph.node[*j].input.contains(&out))?;
            (!graph.node[i].input.is_empty()).then_some((i, j))
        })
        .unwrap();
    graph.node[fed].input[0] = graph.node[feeding].output[0].clone();
    let e = load(&cycle).err().unwrap().to_string();
    assert!(e.contains("cycle"), "{e}");

    let e = OnnxPolicy::from_bytes(&[], "empty.onnx", LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("no graph"), "{e}");
}

/// P2: a huge declared input is an error before any allocation.
#[test]
fn huge_declared_inputs_are_refused_not_allocated() {
    use pb::tensor_shape_proto::dimension::Value;
    for size in [1i64 << 40, 1 << 62, 2_000_000_000] {
        let mut model = real_onnx("3DBall.onnx");
        let input = &mut model.graph.as_mut().unwrap().input[0];
        let Some(pb::type_proto::Value::TensorType(t)) = input.r#type.as_mut().and_then(|t| t.value.as_mut()) else { panic!("typed input") };
        t.shape.as_mut().unwrap().dim[1].value = Some(Value::DimValue(size));
        let policy = load(&model).unwrap();
        let started = std::time::Instant::now();
        let e = policy.neutral_inputs(1).err().unwrap();
        assert!(matches!(e, RunError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("obs_0") && e.to_string().contains("refusing to allocate"), "{e}");
        assert!(started.elapsed().as_secs() < 2);
    }
}

/// P3, P4: a previous action outside its branch and a memory size edited to 2^31-1.
#[test]
fn recurrent_nn_inputs_and_memories_are_checked_before_they_reach_tract() {
    let bytes = std::fs::read(models_dir().join("nn/discrete1vis0vec_2_3action_recurr.nn")).unwrap();
    let model = barracuda::read(&bytes).unwrap();
    let policy = NnPolicy::from_model(model.clone(), "recurrent.nn", LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let mut inputs = NamedTensors::new();
    for input in &model.inputs {
        let mut shape: Vec<usize> = input.shape.iter().map(|d| (*d).max(1) as usize).collect();
        shape.resize(4, 1);
        let n = shape.iter().product();
        let fill = if input.name == "action_masks" { 1.0 } else { 0.0 };
        inputs.insert(input.name.clone(), TensorData { shape, data: vec![fill; n] });
    }
    policy.run(&inputs).unwrap();
    let width = inputs["prev_action"].data.len();
    for bad in [2.0, 7.0, -3.0, 0.5] {
        let mut odd = inputs.clone();
        odd.get_mut("prev_action").unwrap().data = vec![bad; width];
        let e = policy.run(&odd).err().unwrap().to_string();
        assert!(e.contains("prev_action") && e.contains("outside branch 0"), "{bad}: {e}");
    }
    let mut huge = model.clone();
    let last = huge.memories[0].shape.len() - 1;
    huge.memories[0].shape[last] = i32::MAX;
    let e = NnPolicy::from_model(huge, "huge.nn", LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains(&model.memories[0].input) && e.contains("values per agent"), "{e}");
}

/// D3: non-finite weights are flagged by `check`, fail parity, and are never exported.
#[test]
fn non_finite_weights_are_flagged() {
    let mut model = real_onnx("3DBall.onnx");
    let weight = &mut model.graph.as_mut().unwrap().initializer.iter_mut().find(|t| t.name.contains("seq_layers.0.weight")).unwrap();
    weight.raw_data[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    let policy = Policy::from(load(&model).unwrap());
    let flagged = policy.non_finite_weights();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    assert!(flagged[0].contains("seq_layers.0.weight") && flagged[0].contains("1 non-finite value"), "{flagged:?}");
    let facts = policy.interface().unwrap();
    let spec = mlagents::spec::BehaviorSpec {
        observation_specs: vec![mlagents::spec::ObservationSpec::vector(8, "obs_0")],
        action_spec: mlagents::spec::ActionSpec::continuous(2),
    };
    let violations = check(facts, &spec);
    assert!(violations.iter().any(|v| v.contains("NaN or infinities")), "{violations:?}");
    // No real model is flagged.
    for dir in ["onnx", "nn"] {
        for entry in std::fs::read_dir(models_dir().join(dir)).unwrap().flatten() {
            let policy = Policy::load(&entry.path(), LoadOptions { deterministic: true, ..Default::default() }).unwrap();
            assert!(policy.non_finite_weights().is_empty(), "{}: {:?}", entry.path().display(), policy.non_finite_weights());
        }
    }
}

/// A checkpoint whose actor holds a NaN is unusable: export takes the previous checkpoint
/// (with a warning) or, asked for that step, fails naming the weight.
#[test]
fn a_checkpoint_with_nan_weights_is_not_exported() {
    use mlagents::checkpoint::{self, Checkpoint};
    let case = golden_case_dir("continuous").join("run/3DBall");
    let dir = temp_dir("nan-checkpoint").join("run");
    let behavior_dir = dir.join("3DBall");
    std::fs::create_dir_all(&behavior_dir).unwrap();
    let good = checkpoint::latest(&case, "3DBall").unwrap();
    Checkpoint::write(&behavior_dir, good.description.clone(), &good.tensors).unwrap();
    let mut poisoned = good.tensors.clone();
    poisoned.0.get_mut("network_body._body_endoder.seq_layers.0.weight").unwrap().data[3] = f32::NAN;
    let mut later = good.description.clone();
    later.step += 1000;
    Checkpoint::write(&behavior_dir, later.clone(), &poisoned).unwrap();
    let e = Checkpoint::read(&behavior_dir.join(format!("3DBall-{}.json", later.step))).err().unwrap().to_string();
    assert!(e.contains("seq_layers.0.weight") && e.contains("non-finite"), "{e}");
    assert_eq!(checkpoint::latest(&behavior_dir, "3DBall").unwrap().description.step, good.description.step);
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-export")).arg(&dir).args(["--checkpoint", &later.step.to_string()]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("non-finite"), "{said}");
    assert!(!dir.join("3DBall.onnx").exists(), "a failed export wrote files");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// U5, U16: the format comes from the content; an empty file says so; one message per error.
#[test]
fn the_format_comes_from_the_content() {
    let dir = temp_dir("renamed");
    let onnx_as_nn = dir.join("3DBall.nn");
    std::fs::copy(models_dir().join("onnx/3DBall.onnx"), &onnx_as_nn).unwrap();
    let nn_as_onnx = dir.join("Basic.onnx");
    std::fs::copy(models_dir().join("nn/Basic.nn"), &nn_as_onnx).unwrap();
    assert_eq!(Policy::load(&onnx_as_nn, LoadOptions::default()).unwrap().format(), ModelFormat::Onnx);
    assert_eq!(Policy::load(&nn_as_onnx, LoadOptions::default()).unwrap().format(), ModelFormat::Nn);
    let (code, said) = run_tool(&["inspect", nn_as_onnx.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("\"format\": \"barracuda\""), "{said}");
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let e = Policy::load(&empty, LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("empty (0 bytes)"), "{e}");
    let missing = dir.join("missing.nn");
    let e = Policy::load(&missing, LoadOptions::default()).err().unwrap().to_string();
    assert_eq!(e.matches("cannot read").count(), 1, "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// U11: inputs of one call share their batch; non-finite values travel as names.
#[test]
fn inputs_of_one_call_share_their_batch() {
    let policy = Policy::load(&models_dir().join("nn/Basic.nn"), LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let inputs = NamedTensors::from([
        ("vector_observation".to_string(), TensorData { shape: vec![2, 20], data: vec![0.0; 40] }),
        ("action_masks".to_string(), TensorData { shape: vec![1, 3], data: vec![1.0; 3] }),
    ]);
    let e = policy.run(&inputs).err().unwrap().to_string();
    assert!(e.contains("batch"), "{e}");
    // A NaN observation is accepted as a name; every action masked out gives NaN
    // probabilities, printed as their name.
    let dir = temp_dir("eval-nan");
    let file = dir.join("in.json");
    let data: Vec<String> = (0..20).map(|k| if k == 0 { "\"NaN\"".into() } else { "0.1".into() }).collect();
    let document = format!(
        "{{\"inputs\": {{\"vector_observation\": {{\"shape\": [1, 20], \"data\": [{}]}}, \"action_masks\": {{\"shape\": [1, 3], \"data\": [0, 0, 0]}}}}}}",
        data.join(",")
    );
    std::fs::write(&file, document).unwrap();
    let (code, said) = run_tool(&["eval", models_dir().join("nn/Basic.nn").to_str().unwrap(), "--inputs", file.to_str().unwrap(), "--deterministic", "--json"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("\"NaN\"") && !said.contains("null"), "a NaN output prints as its name: {said}");
    let _ = std::fs::remove_dir_all(dir);
}

/// U3, U4, U15, U2: play checks the model first and fails when no episode ends; odd flags are
/// refused; a misspelt scene says what it is.
#[test]
fn play_and_compare_refuse_what_cannot_work() {
    let (code, said) = run_tool(&["play", models_dir().join("onnx/3DBall.onnx").to_str().unwrap(), "--env", "sim:Basic", "--episodes", "2"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("mlagents-run check") && said.contains("continuous actions"), "{said}");
    let (code, said) = run_tool(&["play", models_dir().join("nn/Basic.nn").to_str().unwrap(), "--env", "sim:Basic", "--episodes", "3", "--max-steps", "2"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("no episode of Basic?team=0 ended within 2 environment steps"), "{said}");
    let nn = models_dir().join("nn/Basic.nn");
    for flags in [["--decisions", "0"], ["--tolerance", "NaN"], ["--tolerance", "-1"]] {
        let (code, said) = run_tool(&["compare", nn.to_str().unwrap(), nn.to_str().unwrap(), "--env", "sim:Basic", flags[0], flags[1]]);
        assert_eq!(code, Some(2), "{flags:?}: {said}");
    }
    let (code, said) = run_tool(&["play", nn.to_str().unwrap(), "--env", "sim:basic", "--episodes", "1"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("did you mean Basic?"), "{said}");
}

/// U15: a parity record made for other files says so.
#[test]
fn a_foreign_parity_record_is_recognised() {
    let record = golden_case_dir("discrete-masked").join("run/GridWorld.parity.json");
    let (code, said) = run_tool(&["play", models_dir().join("onnx/3DBall.onnx").to_str().unwrap(), "--env", "sim:3DBall", "--parity", record.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("was made for GridWorld.nn and GridWorld.onnx"), "{said}");
}

/// U12: export names the paths it looked at and the behaviors it has.
#[test]
fn export_messages_name_what_exists() {
    let dir = temp_dir("export-messages");
    let (ok, said) = {
        let out = Command::new(env!("CARGO_BIN_EXE_mlagents-export")).args(["nothing", "--results-dir"]).arg(&dir).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(!ok && said.contains(&dir.join("nothing").display().to_string()), "{said}");
    std::fs::write(dir.join("afile"), b"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-export")).args(["afile", "--results-dir"]).arg(&dir).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a file, not a run folder"));
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-export")).arg(golden_case_dir("continuous").join("run")).args(["--behavior", "Nope"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("behaviors with checkpoints: 3DBall"), "{said}");
    let _ = std::fs::remove_dir_all(dir);
}

/// U11: a `.nn` input is given as ML-Agents feeds it, `[N, size]`, or in Barracuda's rank 4;
/// other shapes are refused naming the declared one, not a reshaped one.
#[test]
fn nn_inputs_are_refused_in_the_shape_the_user_wrote() {
    let policy = Policy::load(&models_dir().join("nn/3DBall.nn"), LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let run = |shape: Vec<usize>| {
        let n = shape.iter().product();
        policy.run(&NamedTensors::from([("vector_observation".to_string(), TensorData { shape, data: vec![0.1; n] })]))
    };
    run(vec![2, 8]).unwrap();
    run(vec![2, 1, 1, 8]).unwrap();
    for shape in [vec![1, 2, 4], vec![2, 4], vec![1, 1, 1, 1, 8]] {
        let e = run(shape.clone()).err().unwrap().to_string();
        assert!(e.contains(&format!("shape {shape:?} does not fit the declared [batch, 8]")), "{shape:?}: {e}");
    }
}

/// U1 (report of 2 December): intermediate shapes annotated with the symbolic batch (as
/// onnx.shape_inference, onnxsim and newer exporters write them) made every batch a
/// contradiction ("Impossible to unify Sym(batch) with Val(1)"), and `check` an M12 error.
#[test]
fn symbolic_intermediate_shapes_are_hints_not_constraints() {
    use mlagents::onnx::{value_info, GraphBuilder, FLOAT};
    let mut b = GraphBuilder::default();
    let w = b.constant("W", &[2, 3], vec![0.5, -1.0, 0.25, 2.0, 1.5, -0.5]);
    b.node_into("MatMul", vec!["obs_0".into(), w], vec![], "hidden");
    b.node_into("Relu", vec!["hidden".into()], vec![], "continuous_actions");
    b.named_constant("version_number", &[1], vec![3.0]);
    b.named_constant("memory_size", &[1], vec![0.0]);
    b.named_constant("continuous_action_output_shape", &[1], vec![3.0]);
    let outputs = ["continuous_actions", "version_number", "memory_size", "continuous_action_output_shape"].iter().map(|o| value_info(o, FLOAT, &[])).collect();
    let mut model = b.finish("annotated", 9, vec![value_info("obs_0", FLOAT, &[-1, 2])], outputs, "tests");
    model.graph.as_mut().unwrap().value_info.push(value_info("hidden", FLOAT, &[-1, 3]));
    let policy = load(&model).unwrap();
    for batch in [1, 3] {
        let inputs = NamedTensors::from([("obs_0".to_string(), TensorData { shape: vec![batch, 2], data: vec![1.0; batch * 2] })]);
        assert_eq!(policy.run(&inputs).unwrap()["continuous_actions"].data[..3], [2.5, 0.5, 0.0]);
    }
    let report = mlagents::compat::check_bytes(&model.encode_to_vec(), "annotated.onnx", &mlagents::compat::resolve_targets(&["ml-agents@3.0.0".into()]).unwrap()).unwrap();
    assert!(!report.targets[0].findings.iter().any(|f| f.id == "M12"), "{}", report.text());
}

/// C5 (report of 2 December): `inspect` lists the operators the file holds, not those of the
/// graph the runner rewrote for tract.
#[test]
fn inspect_lists_the_files_operators() {
    let (status, out) = run_tool(&["inspect", models_dir().join("onnx/3DBall.onnx").to_str().unwrap(), "--json"]);
    assert_eq!(status, Some(0), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let operators = &report["operators"];
    assert!(operators["Sigmoid"].as_u64() == Some(2) && operators["RandomNormalLike"].as_u64() == Some(1), "{operators}");
    assert!(!operators.as_object().unwrap().keys().any(|k| k.starts_with("MlAgents")), "{operators}");
}

/// P2 (report of 2 December): a reader that goes away (`| head`) ends the output quietly; it
/// was a panic with a backtrace.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::process::Stdio;
    let model = models_dir().join("onnx/deterDiscrete1obs3action_v2_0.onnx");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlagents-run"))
        .args(["check", model.to_str().unwrap(), "--target", "all", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
}
