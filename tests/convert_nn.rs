//! `mlagents-export convert`: every Unity-trained `.nn` migrates to an ONNX policy that passes
//! its parity record (the `.nn`'s outputs by our runner) and the ML-Agents 3.0.0 / Inference
//! Engine 2.2.1 checks; the converted Basic, 3DBall and 3DBallHard policies score on the
//! stand-in scenes as the `.nn` does; bad input writes nothing. (onnxruntime on the converted
//! files: tests/peer/peer_convert.py.)

mod common;

use common::{models_dir, temp_dir};
use mlagents::barracuda::{self, LayerType};
use mlagents::compat::{check_file, resolve_targets};
use mlagents::export::convert::{convert_nn, ConvertError, ConvertOptions};
use mlagents::onnx::export::OnnxApi;
use mlagents::policy::parity::ParityRecord;
use mlagents::run::{check_parity, LoadOptions, Policy};
use mlagents::spec::BehaviorSpec;
use std::path::{Path, PathBuf};

fn real_nn_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(models_dir().join("nn")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "nn")).collect();
    files.sort();
    assert!(files.len() >= 24, "{files:?}");
    files
}

/// The error findings of a file for these targets.
fn errors(path: &Path, targets: &[&str]) -> Vec<String> {
    let targets = resolve_targets(&targets.iter().map(|t| t.to_string()).collect::<Vec<_>>()).unwrap();
    let report = check_file(path, &targets).unwrap();
    report.targets.iter().flat_map(|t| t.findings.iter().filter(|f| f.severity == mlagents::compat::Severity::Error).map(move |f| format!("{}: {} {}", t.target, f.id, f.message))).collect()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn every_real_nn_converts_passes_parity_and_loads_in_ml_agents_3_and_4() {
    let dir = temp_dir("convert-all");
    for nn in real_nn_files() {
        let stem = nn.file_stem().unwrap().to_string_lossy().into_owned();
        let out = dir.join(format!("{stem}.onnx"));
        let converted = convert_nn(&nn, &out, &ConvertOptions::default()).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert!(converted.report.passed && converted.report.rows == 64, "{stem}: {:?}", converted.report);
        // The record on disk proves the written file and the .nn alike.
        let record = ParityRecord::read(&converted.parity).unwrap();
        assert_eq!(record.files.len(), 2, "{stem}: {:?}", record.files);
        for model in [&out, &nn] {
            let report = check_parity(model, &record, 1e-5).unwrap();
            assert!(report.passed, "{stem}: {} fails its record: {:?}", model.display(), report.checks);
            assert_eq!(report.recorded_sha256.as_deref(), Some(report.sha256.as_str()), "{stem}: {}", model.display());
        }
        let found = errors(&out, &["ml-agents@3.0.0", "inference-engine@2.2.1", "ml-agents@4.0.0"]);
        assert!(found.is_empty(), "{stem}: {found:?}");
    }
}

#[test]
fn converted_unity_policies_score_as_the_nn_does() {
    let dir = temp_dir("convert-play");
    for (name, scene) in [("Basic", "Basic"), ("3DBall", "3DBall"), ("3DBallHard", "3DBallHardLegacy")] {
        let nn = models_dir().join(format!("nn/{name}.nn"));
        let onnx = dir.join(format!("{name}.onnx"));
        convert_nn(&nn, &onnx, &ConvertOptions::default()).unwrap();
        let (a, b) = (common::play_file(&nn, scene, true), common::play_file(&onnx, scene, true));
        eprintln!("{name} on {scene}: .nn {:.3}, converted {:.3} (20 episodes, deterministic)", a.mean_reward, b.mean_reward);
        assert_eq!(a.episodes, 20);
        assert_eq!(b.episodes, 20);
        // Same environment seed, same decisions: the same episodes.
        assert_eq!(a.returns, b.returns, "{name}");
    }
}

#[test]
fn api_2_conversions_load_in_the_barracuda_era_and_refuse_memory() {
    let dir = temp_dir("convert-v2");
    let options = ConvertOptions { onnx_api: OnnxApi::V2, ..Default::default() };
    for name in ["Basic", "3DBall", "GridWorld", "BigWallJump"] {
        let out = dir.join(format!("{name}.onnx"));
        let converted = convert_nn(&models_dir().join(format!("nn/{name}.nn")), &out, &options).unwrap();
        assert!(converted.report.passed, "{name}");
        let found = errors(&out, &["ml-agents@1.0.8", "ml-agents@1.9.1-preview", "ml-agents@2.3.0-exp.3", "ml-agents@4.0.0"]);
        assert!(found.is_empty(), "{name}: {found:?}");
        // The legacy constants are the .nn's own (action_output_shape: every branch's width).
        let constants = |p: &Path| Policy::load(p, LoadOptions::default()).unwrap().interface().unwrap().constants.clone();
        let (ours, theirs) = (constants(&out), constants(&models_dir().join(format!("nn/{name}.nn"))));
        for constant in ["action_output_shape", "is_continuous_control", "memory_size"] {
            assert_eq!(ours.get(constant), theirs.get(constant), "{name}: {constant}");
        }
    }
    let out = dir.join("Hallway.onnx");
    let e = convert_nn(&models_dir().join("nn/Hallway.nn"), &out, &options).unwrap_err();
    assert!(e.to_string().contains("refuse version-2 models that use memory"), "{e}");
    assert!(!out.exists());
}

#[test]
fn a_behavior_spec_orders_and_splits_the_observations() {
    let dir = temp_dir("convert-spec");
    let nn = models_dir().join("nn/continuous2vis8vec2action.nn");
    // Vector sensors of 3 and 5 around the two cameras.
    let spec = BehaviorSpec::from_json(
        r#"{"observation_specs": [{"shape": [3], "name": "A"}, {"shape": [20, 21, 3], "name": "Camera0"}, {"shape": [5], "name": "B"}, {"shape": [22, 20, 3], "name": "Camera1"}],
            "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#,
    )
    .unwrap();
    let out = dir.join("split.onnx");
    let converted = convert_nn(&nn, &out, &ConvertOptions { behavior_spec: Some(spec.clone()), ..Default::default() }).unwrap();
    assert!(converted.report.passed);
    let policy = Policy::load(&out, LoadOptions::default()).unwrap();
    let inputs: Vec<(String, Vec<i64>)> = policy.interface().unwrap().inputs.iter().map(|i| (i.name.clone(), i.dims.clone())).collect();
    assert_eq!(inputs, [("obs_0".into(), vec![3]), ("obs_1".into(), vec![3, 20, 21]), ("obs_2".into(), vec![5]), ("obs_3".into(), vec![3, 22, 20])]);
    // Specs that do not fit the .nn: errors naming the difference, nothing written.
    let misfits = [
        (r#"{"observation_specs": [{"shape": [8]}, {"shape": [20, 21, 3]}], "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#, "camera(s)"),
        (r#"{"observation_specs": [{"shape": [7]}, {"shape": [20, 21, 3]}, {"shape": [22, 20, 3]}], "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#, "sum to 7"),
        (r#"{"observation_specs": [{"shape": [8]}, {"shape": [21, 20, 3]}, {"shape": [22, 20, 3]}], "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#, "[21, 20, 3]"),
        (r#"{"observation_specs": [{"shape": [8]}, {"shape": [20, 21, 3]}, {"shape": [22, 20, 3]}], "action_spec": {"continuous_size": 0, "discrete_branches": [2]}}"#, "actions"),
    ];
    // Discrete policies: the spec's branches (a camera policy, and four branches).
    for (name, json) in [
        ("GridWorld", r#"{"observation_specs": [{"shape": [64, 84, 3]}], "action_spec": {"continuous_size": 0, "discrete_branches": [5]}}"#),
        ("BigWallJump", r#"{"observation_specs": [{"shape": [444]}], "action_spec": {"continuous_size": 0, "discrete_branches": [3, 3, 3, 2]}}"#),
    ] {
        let spec = BehaviorSpec::from_json(json).unwrap();
        let converted = convert_nn(&models_dir().join(format!("nn/{name}.nn")), &dir.join(format!("{name}.onnx")), &ConvertOptions { behavior_spec: Some(spec.clone()), ..Default::default() }).unwrap();
        assert_eq!(converted.layout.action_spec, spec.action_spec, "{name}");
        assert!(converted.report.passed, "{name}");
    }
    let out = dir.join("misfit.onnx");
    for (json, expected) in misfits {
        let spec = BehaviorSpec::from_json(json).unwrap();
        let e = convert_nn(&nn, &out, &ConvertOptions { behavior_spec: Some(spec), ..Default::default() }).unwrap_err();
        assert!(matches!(e, ConvertError::Input { .. }) && e.to_string().contains(expected), "{e}");
        assert!(!out.exists());
    }
    for bad in ["", "{", "[]", r#"{"observation_specs": [{"shape": [1, 2, 3, 4]}], "action_spec": {"continuous_size": 1, "discrete_branches": []}}"#, r#"{"observation_specs": [], "action_spec": {}, "extra": 1}"#] {
        assert!(BehaviorSpec::from_json(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let dir = temp_dir("convert-bad");
    let out = dir.join("out.onnx");
    let basic = std::fs::read(models_dir().join("nn/Basic.nn")).unwrap();
    let convert_bytes = |name: &str, bytes: &[u8]| {
        let input = dir.join(name);
        std::fs::write(&input, bytes).unwrap();
        let e = convert_nn(&input, &out, &ConvertOptions::default()).unwrap_err();
        std::fs::remove_file(&input).unwrap();
        e.to_string()
    };
    // An ONNX model named .nn.
    let onnx = std::fs::read(models_dir().join("onnx/3DBall.onnx")).unwrap();
    assert!(convert_bytes("renamed.nn", &onnx).contains("ONNX model, not a Barracuda .nn"));
    // Truncated and empty files.
    for cut in [0, 8, 100, basic.len() / 2, basic.len() - 1] {
        let e = convert_bytes("cut.nn", &basic[..cut]);
        assert!(e.contains("cut.nn"), "{e}");
    }
    // A layer with no faithful translation: named, nothing written.
    let mut model = barracuda::read(&basic).unwrap();
    let dense = model.layers.iter_mut().find(|l| l.layer_type == LayerType::Dense).unwrap();
    dense.layer_type = LayerType::MaxPool2D;
    let name = dense.name.clone();
    let e = convert_bytes("maxpool.nn", &barracuda::write(&model));
    assert!(e.contains("no faithful ONNX translation") && e.contains(&name), "{e}");
    // An output not named .onnx (the input itself included).
    let input = models_dir().join("nn/Basic.nn");
    for named in [dir.join("out.nn"), dir.join("out"), input.clone()] {
        let e = convert_nn(&input, &named, &ConvertOptions::default()).unwrap_err();
        assert!(e.to_string().contains("must be named .onnx"), "{e}");
    }
    // A missing file, and an output folder that does not exist.
    let e = convert_nn(&dir.join("missing.nn"), &out, &ConvertOptions::default()).unwrap_err();
    assert!(e.to_string().contains("missing.nn"), "{e}");
    let e = convert_nn(&models_dir().join("nn/Basic.nn"), &dir.join("no/such/dir/out.onnx"), &ConvertOptions::default()).unwrap_err();
    assert!(matches!(e, ConvertError::Write { .. }), "{e}");
    assert_eq!(files_in(&dir), Vec::<String>::new());
}

#[test]
fn the_command_line_converts_and_reports() {
    let dir = temp_dir("convert-cli");
    let exe = env!("CARGO_BIN_EXE_mlagents-export");
    let out = dir.join("Basic.onnx");
    let result = std::process::Command::new(exe).args(["convert"]).arg(models_dir().join("nn/Basic.nn")).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success(), "{stdout} {}", String::from_utf8_lossy(&result.stderr));
    assert!(stdout.contains("discrete branches [3]") && stdout.contains("parity with the .nn on 64 rows passed"), "{stdout}");
    assert_eq!(files_in(&dir), ["Basic.onnx", "Basic.parity.json"]);
    let spec = dir.join("spec.json");
    std::fs::write(&spec, "{ not json").unwrap();
    let second = dir.join("second.onnx");
    let result = std::process::Command::new(exe).args(["convert"]).arg(models_dir().join("nn/Basic.nn")).arg(&second).arg("--behavior-spec").arg(&spec).output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success() && stderr.contains("spec.json") && stderr.contains("not a behavior spec"), "{stderr}");
    let result = std::process::Command::new(exe).args(["convert", "a.nn", "b.onnx", "--onnx-api", "4"]).output().unwrap();
    assert!(!result.status.success() && String::from_utf8_lossy(&result.stderr).contains("--onnx-api 4"));
    assert!(!second.exists());
}
