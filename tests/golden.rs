//! Golden-file regression tests over `models/golden/<case>/` (see models/README.md): the
//! fixtures are intact, a fresh `mlagents-export` (a real child process) writes byte-identical
//! files, our runner reproduces the recorded training outputs from both formats, and bad
//! checkpoints fail with clear errors and write nothing.

use mlagents::policy::parity::ParityRecord;
use mlagents::run::check_parity;
use mlagents::checkpoint::sha256_hex;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{golden_case_dir as case_dir, golden_export_args, temp_dir, GOLDEN_CASES as CASES};

/// A run folder holding only the case's checkpoint (no exports).
fn checkpoint_only_copy(case: &str, behavior: &str, name: &str) -> PathBuf {
    let run = temp_dir(&format!("golden-{name}")).join("run");
    let from = case_dir(case).join("run").join(behavior);
    std::fs::create_dir_all(run.join(behavior)).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, run.join(behavior).join(path.file_name().unwrap())).unwrap();
    }
    run
}

fn export(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-export")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn fixtures_match_their_manifest() {
    for (case, _) in CASES {
        let dir = case_dir(case);
        let manifest = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
        let mut listed = 0;
        for line in manifest.lines() {
            let (sum, file) = line.split_once("  ").unwrap();
            assert_eq!(sha256_hex(&std::fs::read(dir.join(file)).unwrap()), sum, "{case}/{file}");
            listed += 1;
        }
        assert!(listed >= 4, "{case}: {listed} files listed");
    }
}

#[test]
fn re_export_is_byte_identical() {
    for (case, behavior) in CASES {
        let run = checkpoint_only_copy(case, behavior, &format!("reexport-{case}"));
        let extra = golden_export_args(case);
        let args: Vec<&str> = std::iter::once(run.to_str().unwrap()).chain(extra.iter().map(String::as_str)).collect();
        let (ok, log) = export(&args);
        assert!(ok, "{case}: {log}");
        let golden = case_dir(case).join("run");
        let mut compared = 0;
        for ext in ["onnx", "nn", "parity.json"] {
            let name = format!("{behavior}.{ext}");
            let (ours, theirs) = (run.join(&name), golden.join(&name));
            assert_eq!(ours.exists(), theirs.exists(), "{case}: {name}");
            if theirs.exists() {
                assert!(std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap(), "{case}: {name} differs from the golden file");
                compared += 1;
            }
        }
        assert!(compared >= 2);
        let _ = std::fs::remove_dir_all(run.parent().unwrap());
    }
}

#[test]
fn runner_reproduces_the_training_outputs() {
    for (case, behavior) in CASES {
        let run = case_dir(case).join("run");
        let record = ParityRecord::read(&run.join(format!("{behavior}.parity.json"))).unwrap();
        assert_eq!(record.batch, 16);
        for ext in ["onnx", "nn"] {
            let model = run.join(format!("{behavior}.{ext}"));
            if !model.exists() {
                continue;
            }
            if ext == "nn" {
                // Barracuda format 16 with ML-Agents' constants.
                let nn = mlagents::barracuda::read_file(&model).unwrap();
                let spec = &record.policy.action_spec;
                let continuous = spec.continuous_size > 0;
                assert_eq!(nn.version, 16, "{case}");
                assert_eq!(nn.constant("version_number"), Some(2.0), "{case}");
                assert_eq!(nn.constant("memory_size"), Some(record.policy.memory_size as f32), "{case}");
                assert_eq!(nn.constant("is_continuous_control"), Some(if continuous { 1.0 } else { 0.0 }), "{case}");
                let width = if continuous { spec.continuous_size } else { spec.mask_len() };
                assert_eq!(nn.constant("action_output_shape"), Some(width as f32), "{case}");
            }
            let report = check_parity(&model, &record, 1e-5).unwrap();
            assert!(report.passed, "{case}.{ext}: {report:?}");
            assert_eq!(report.recorded_sha256.as_deref(), Some(report.sha256.as_str()), "{case}.{ext}");
            let continuous = record.policy.action_spec.continuous_size > 0;
            // Deterministic and sampled (recorded noise / uniform draws) for each kind of action;
            // a recurrent policy adds the memory after each row, and the rows replayed with the
            // memory carried (memories and deterministic actions).
            let discrete = !record.policy.action_spec.discrete_branches.is_empty();
            let kinds = usize::from(continuous) + usize::from(discrete);
            let recurrent = if record.policy.memory_size > 0 { 2 + kinds } else { 0 };
            assert_eq!(report.checks.len(), 2 * kinds + recurrent, "{report:?}");
        }
    }
}

#[test]
fn onnx_api_2_export_keeps_parity() {
    for (case, behavior) in CASES {
        let run = checkpoint_only_copy(case, behavior, &format!("api2-{case}"));
        let (ok, log) = export(&[run.to_str().unwrap(), "--onnx-api", "2"]);
        // Model API 2 has no hybrid actions, images and entities are exported with API 3 only,
        // and Unity 2.x+ refuses version-2 models with memory.
        if ["hybrid", "visual", "recurrent", "entities", "entities-sentis"].contains(&case) {
            assert!(!ok && ["hybrid", "visual", "memory", "entity"].iter().any(|why| log.contains(why)), "{log}");
            assert!(!run.join("1D.onnx").exists(), "a failed export wrote a file");
            continue;
        }
        assert!(ok, "{case}: {log}");
        let record = ParityRecord::read(&run.join(format!("{behavior}.parity.json"))).unwrap();
        let report = check_parity(&run.join(format!("{behavior}.onnx")), &record, 1e-5).unwrap();
        assert!(report.passed, "{case}: {report:?}");
        assert!(report.checks.iter().all(|c| c.output.starts_with("action")), "{report:?}");
        let _ = std::fs::remove_dir_all(run.parent().unwrap());
    }
}

#[test]
fn bad_checkpoints_fail_clearly_and_write_nothing() {
    let (case, behavior) = CASES[1];
    let run = checkpoint_only_copy(case, behavior, "corrupt");
    let checkpoint_dir = run.join(behavior);
    let json = std::fs::read_dir(&checkpoint_dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "json")).unwrap();
    let step = json.file_stem().unwrap().to_string_lossy().rsplit('-').next().unwrap().to_string();
    let before = files_in(&run);

    // A missing run, a missing step.
    let (ok, log) = export(&[run.join("nope").to_str().unwrap()]);
    assert!(!ok && log.contains("does not exist"), "{log}");
    let (ok, log) = export(&[run.to_str().unwrap(), "--checkpoint", "7"]);
    assert!(!ok && log.contains("no checkpoint at step 7") && log.contains(&step), "{log}");

    // Tensors cut in half: the sha256 no longer matches.
    let tensors = json.with_extension("safetensors");
    let bytes = std::fs::read(&tensors).unwrap();
    std::fs::write(&tensors, &bytes[..bytes.len() / 2]).unwrap();
    let (ok, log) = export(&[run.to_str().unwrap(), "--checkpoint", &step]);
    assert!(!ok && log.contains("damaged") && log.contains("sha256"), "{log}");
    let (ok, log) = export(&[run.to_str().unwrap()]);
    assert!(!ok && log.contains("no usable checkpoint"), "{log}");
    std::fs::write(&tensors, &bytes).unwrap();

    // A description from a newer format.
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::write(&json, text.replacen("\"format_version\": 1", "\"format_version\": 99", 1)).unwrap();
    let (ok, log) = export(&[run.to_str().unwrap()]);
    assert!(!ok && log.contains("format version 99"), "{log}");
    std::fs::write(&json, &text).unwrap();

    // A network description from a newer format.
    std::fs::write(&json, text.replacen("\"format_version\": 1", "\"format_version\": 7", 2).replacen("\"format_version\": 7", "\"format_version\": 1", 1)).unwrap();
    let (ok, log) = export(&[run.to_str().unwrap()]);
    assert!(!ok && log.contains("policy format version 7"), "{log}");
    std::fs::write(&json, &text).unwrap();

    // A description that is not JSON.
    std::fs::write(&json, b"\x00garbage").unwrap();
    let (ok, log) = export(&[run.to_str().unwrap()]);
    assert!(!ok && log.contains("not a checkpoint description"), "{log}");

    assert_eq!(files_in(&run), before, "a failed export wrote files");
    let _ = std::fs::remove_dir_all(run.parent().unwrap());
}

fn run_tool(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mlagents-run")).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// `mlagents-run compare`: the golden `.onnx` and `.nn` act the same on the recorded inputs
/// and on live decisions of their scene; a different policy with the same interface does not.
#[test]
fn compare_tells_same_from_different() {
    let run = case_dir("discrete-masked").join("run");
    let (onnx, nn, parity) = (run.join("GridWorld.onnx"), run.join("GridWorld.nn"), run.join("GridWorld.parity.json"));
    let (code, log) = run_tool(&["compare", onnx.to_str().unwrap(), nn.to_str().unwrap(), "--parity", parity.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("16 decisions") && log.contains("same"), "{log}");
    let (code, log) = run_tool(&["compare", onnx.to_str().unwrap(), nn.to_str().unwrap(), "--env", "sim:GridWorldVector", "--decisions", "20"]);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("same"), "{log}");

    // The same interface with other weights.
    let record = ParityRecord::read(&parity).unwrap();
    let other = temp_dir("compare-other").join("other.onnx");
    let weights = mlagents::policy::Weights::random(&record.policy, 99);
    std::fs::write(&other, mlagents::onnx::export::to_onnx_bytes(&record.policy, &weights).unwrap()).unwrap();
    let (code, log) = run_tool(&["compare", onnx.to_str().unwrap(), other.to_str().unwrap(), "--parity", parity.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("DIFFERENT"), "{log}");
    // And its parity check fails, naming the output.
    let (code, log) = run_tool(&[other.to_str().unwrap(), "--env", "sim:GridWorldVector", "--parity", parity.to_str().unwrap(), "--episodes", "1"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deterministic_discrete_actions") && log.contains("FAILED") && log.contains("NOT the file"), "{log}");
    let _ = std::fs::remove_dir_all(other.parent().unwrap());
}
