//! `mlagents-run check --target`: the offline Unity compatibility checks (unity-import.md §5)
//! on the real Unity-trained models, the real mlagents-learn 0.28 exports, our own golden
//! exports, hand-made failing variants of them, and bad input.

use mlagents::compat::{check_bytes, check_file, resolve_targets, CompatibilityReport, Severity};
use std::path::Path;

mod common;

use common::{golden_case_dir, models_dir, temp_dir, GOLDEN_CASES};

fn all() -> Vec<mlagents::compat::Target> {
    resolve_targets(&["all".to_string()]).unwrap()
}

/// The bucket of an `all` row (`ml-agents@2.0.1 (barracuda@2.0.0)` → its ML-Agents bucket).
fn bucket_names() -> Vec<String> {
    all().iter().map(|t| format!("{:?}", t.ml_agents.as_ref().unwrap().1)).collect()
}

/// One line per model: each bucket's verdict and the rules that failed there.
fn verdict_line(name: &str, report: &CompatibilityReport) -> String {
    let mut line = name.to_string();
    for (bucket, target) in bucket_names().iter().zip(&report.targets) {
        let mut ids: Vec<&str> = target.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.id).collect();
        ids.dedup();
        line += &format!(" {bucket}={}", target.verdict);
        if !ids.is_empty() {
            line += &format!("[{}]", ids.join(","));
        }
    }
    line
}

/// Every real model in the shared corpus against `all`, compared with the committed table
/// (tests/fixtures/compat/verdicts.txt). On a difference the new table is printed whole.
#[test]
fn real_models_get_the_committed_verdicts() {
    let models = models_dir();
    let mut lines = vec![];
    for folder in ["nn", "onnx"] {
        let mut files: Vec<_> = std::fs::read_dir(models.join(folder)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            let report = check_file(&file, &all()).unwrap_or_else(|e| panic!("{e}"));
            lines.push(verdict_line(&format!("{folder}/{}", file.file_name().unwrap().to_string_lossy()), &report));
        }
    }
    for file in ["continuous", "discrete", "hybrid"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/reference/mlagents-0.28/{file}.onnx"));
        lines.push(verdict_line(&format!("mlagents-0.28/{file}.onnx"), &check_file(&path, &all()).unwrap()));
    }
    let table = lines.join("\n") + "\n";
    let expected = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat/verdicts.txt")).unwrap();
    assert!(table == expected, "the verdicts differ from tests/fixtures/compat/verdicts.txt; now:\n{table}");
}

/// The real mlagents-learn 0.28 export under torch 2.13 makes its metadata with Identity
/// nodes: Barracuda-era ML-Agents (M1-M5) would not find them (M5), the Sentis era reads them.
#[test]
fn identity_metadata_is_flagged_for_barracuda_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/reference/mlagents-0.28/continuous.onnx");
    let report = check_file(&path, &resolve_targets(&["ml-agents@2.0.1".into(), "ml-agents@2.3.0-exp.3".into(), "ml-agents@3.0.0".into(), "ml-agents@4.0.0".into()]).unwrap()).unwrap();
    for barracuda in &report.targets[..2] {
        let m5: Vec<_> = barracuda.findings.iter().filter(|f| f.id == "M5").collect();
        assert!(!m5.is_empty(), "{}", report.text());
        assert!(m5.iter().any(|f| f.message.contains("version_number") && f.unity_message.as_deref() == Some("Required constant \"version_number\" was not found in the model file.")));
    }
    for sentis in &report.targets[2..] {
        assert!(sentis.findings.iter().all(|f| f.id != "M5"), "{}", report.text());
        assert_ne!(sentis.verdict, "error", "{}", report.text());
    }
}

/// Our own exports pass their own checker: ONNX (model API 3) wherever ML-Agents takes API 3
/// (2.0 on; an entity export where its layout is fed), `.nn` wherever Barracuda-era ML-Agents takes it (a recurrent API-2 `.nn` only in
/// 1.x, as Unity rules).
#[test]
fn our_golden_exports_pass_the_buckets_that_load_them() {
    let buckets = bucket_names();
    for (case, behavior) in GOLDEN_CASES {
        let run = golden_case_dir(case).join("run");
        let onnx = check_file(&run.join(format!("{behavior}.onnx")), &all()).unwrap();
        for (bucket, target) in buckets.iter().zip(&onnx.targets) {
            // An entity export fits the packages of its layout only: Barracuda's (2.x) by
            // default, Sentis' (3.x on) when exported for it.
            let loads = match case {
                "entities" => ("M4".."M6").contains(&bucket.as_str()),
                "entities-sentis" => bucket.as_str() >= "M6",
                _ => bucket.as_str() >= "M4",
            };
            assert_eq!(target.verdict != "error", loads, "{case} .onnx in {bucket}:\n{}", onnx.text());
        }
        let nn = run.join(format!("{behavior}.nn"));
        if !nn.exists() {
            continue;
        }
        let nn = check_file(&nn, &all()).unwrap();
        let recurrent = case == "recurrent";
        for (bucket, target) in buckets.iter().zip(&nn.targets) {
            let loads = if recurrent { bucket.as_str() < "M4" } else { bucket.as_str() < "M6" };
            assert_eq!(target.verdict != "error", loads, "{case} .nn in {bucket}:\n{}", nn.text());
        }
    }
}

fn errors(report: &CompatibilityReport, id: &str) -> Vec<mlagents::compat::Finding> {
    report.targets.iter().flat_map(|t| t.findings.iter()).filter(|f| f.id == id && f.severity == Severity::Error).cloned().collect()
}

/// unity-import.md §4 rows 1, 11, 14 and 15 on real files: an API-3 model in a 1.x package,
/// ONNX bytes named `.nn`, a recurrent API-2 model in 2.x, a `.nn` in 3.x.
#[test]
fn the_reported_failures_get_their_rule_and_unity_text() {
    let models = models_dir();
    let v3 = std::fs::read(models.join("onnx/3DBall.onnx")).unwrap();
    let in_1x = check_bytes(&v3, "3DBall.onnx", &resolve_targets(&["ml-agents@1.0.6".into()]).unwrap()).unwrap();
    let m1 = errors(&in_1x, "M1");
    assert!(m1.iter().any(|f| f.unity_message.as_deref() == Some("Version of the trainer the model was trained with (3) is not compatible with the Brain's version (2).") && f.message.contains("2.0.0")), "{}", in_1x.text());

    let renamed = check_bytes(&v3, "3DBall.nn", &resolve_targets(&["barracuda@1.0.4".into()]).unwrap()).unwrap();
    let f1 = errors(&renamed, "F1");
    let leading = i64::from_le_bytes(v3[..8].try_into().unwrap()) % 255;
    assert_eq!(f1[0].unity_message.as_deref(), Some(format!("NotSupportedException: Format version not supported: {leading}").as_str()), "{}", renamed.text());

    let hallway = check_file(&models.join("nn/Hallway.nn"), &resolve_targets(&["ml-agents@1.9.1".into(), "ml-agents@2.0.1".into()]).unwrap()).unwrap();
    assert!(errors(&hallway, "M2").len() == 1 && hallway.targets[0].verdict != "error", "{}", hallway.text());
    assert!(errors(&hallway, "M2")[0].unity_message.as_deref().unwrap().starts_with("Models from com.unity.ml-agents 1.x that use recurrent neural networks are not supported"));

    let nn_in_3x = check_file(&models.join("nn/3DBall.nn"), &resolve_targets(&["ml-agents@3.0.0".into()]).unwrap()).unwrap();
    assert_eq!(errors(&nn_in_3x, "F2").len(), 1, "{}", nn_in_3x.text());
}

/// Rule P1 with each importer's words: an operator Barracuda never had, one Barracuda gained
/// in 1.2.1, one only Inference Engine 2.4 has.
#[test]
fn operators_are_checked_per_release() {
    use mlagents::onnx::GraphBuilder;
    use prost::Message;
    let mut b = GraphBuilder::default();
    let x = "x".to_string();
    let arg = b.node("ArgMax", vec![x.clone()], vec![], "arg");
    let ge = b.node("GreaterOrEqual", vec![x.clone(), x.clone()], vec![], "ge");
    let bit = b.node("BitwiseNot", vec![x.clone()], vec![], "bit");
    let model = b.finish("ops", 9, vec![mlagents::onnx::value_info("x", 1, &[-1, 3])], [arg, ge, bit].iter().map(|o| mlagents::onnx::value_info(o, 1, &[-1])).collect(), "test");
    let bytes = model.encode_to_vec();
    let report = check_bytes(&bytes, "ops.onnx", &resolve_targets(&["barracuda@1.2.0".into(), "barracuda@3.0.0".into(), "sentis@2.1.0".into(), "ie@2.4.0".into()]).unwrap()).unwrap();
    let unknown = |t: usize| -> Vec<String> { report.targets[t].findings.iter().filter(|f| f.id == "P1").map(|f| f.unity_message.clone().unwrap()).collect() };
    assert_eq!(unknown(0).len(), 3, "{}", report.text());
    assert!(unknown(0)[0].starts_with("OnnxImportException: Unknown type ArgMax encountered while parsing layer"), "{:?}", unknown(0));
    assert_eq!(unknown(1).len(), 2, "{}", report.text());
    assert_eq!(unknown(2), vec!["BitwiseNot not supported".to_string()]);
    assert!(unknown(3).is_empty(), "{}", report.text());
}

/// Bad input: unknown targets list the known ones, unreadable files are errors (never a
/// panic), truncated and mutated models are reported or refused cleanly.
#[test]
fn bad_input_gets_clear_errors() {
    let error = resolve_targets(&["ml-agents@9.9.9".into()]).unwrap_err();
    assert!(error.contains("known:") && error.contains("2.0.1"), "{error}");
    assert!(resolve_targets(&["unity@1.0".into()]).unwrap_err().contains("unknown package"));
    assert!(check_bytes(&[], "empty.onnx", &all()).unwrap_err().contains("empty"));
    let dir = temp_dir("compat-bad");
    assert!(check_file(&dir.join("missing.onnx"), &all()).is_err());
    let models = models_dir();
    for file in ["nn/3DBall.nn", "onnx/3DBall.onnx"] {
        let bytes = std::fs::read(models.join(file)).unwrap();
        for cut in [9, bytes.len() / 3, bytes.len() - 1] {
            // Either an error naming the file or a report; never a panic.
            if let Err(e) = check_bytes(&bytes[..cut], file, &all()) {
                assert!(e.contains(file), "{e}");
            }
        }
        let mut flipped = bytes.clone();
        for i in (0..flipped.len()).step_by(97) {
            flipped[i] ^= 0x5a;
        }
        let _ = check_bytes(&flipped, file, &all());
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// One failing fixture per row of unity-import.md §4 (made by examples/compat_fixtures.rs):
/// each is reported with its rule, its severity and Unity's exact text, and every row has one.
#[test]
fn every_fixture_gets_its_rule_and_unity_text() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat");
    let expected = std::fs::read_to_string(dir.join("expected.tsv")).unwrap();
    let mut rows = std::collections::BTreeSet::new();
    for line in expected.lines().filter(|l| !l.starts_with('#')) {
        let [file, target, rule, severity, unity]: [&str; 5] = line.split('\t').collect::<Vec<_>>().try_into().unwrap_or_else(|_| panic!("{line}"));
        let severity = if severity == "warning" { Severity::Warning } else { Severity::Error };
        let report = check_file(&dir.join(file), &resolve_targets(&[target.to_string()]).unwrap()).unwrap();
        let found = report.targets[0].findings.iter().any(|f| f.id == rule && f.severity == severity && (unity == "-" || f.unity_message.as_deref() == Some(&unity.replace("\\n", "\n"))));
        assert!(found, "{file} against {target}: no {rule} {severity:?} with Unity's text {unity:?}:\n{}", report.text());
        rows.insert(file[3..5].parse::<usize>().unwrap());
    }
    assert_eq!(rows, (1..=15).collect(), "the rows of §4 with a fixture");
}

/// Our `--onnx-api 2` exports load in every Barracuda-era com.unity.ml-agents bucket: the
/// golden checkpoints exported at model API 2 (the exporter takes vector observations and one
/// action kind without memory there: the continuous and discrete cases), checked against `all`.
#[test]
fn our_api_2_exports_pass_the_1x_buckets() {
    use mlagents::onnx::export::{to_onnx_api_bytes, OnnxApi};
    let buckets = bucket_names();
    let mut checked = 0;
    for (case, behavior) in GOLDEN_CASES {
        let checkpoint = mlagents::checkpoint::latest(&golden_case_dir(case).join("run").join(behavior), behavior).unwrap();
        let policy = &checkpoint.description.policy;
        let Ok(bytes) = to_onnx_api_bytes(policy, &checkpoint.actor_weights().unwrap(), OnnxApi::V2) else {
            assert!(!["continuous", "discrete-masked"].contains(&case), "{case} exports at model API 2");
            continue;
        };
        checked += 1;
        let report = check_bytes(&bytes, &format!("{case}-api2.onnx"), &all()).unwrap();
        for (bucket, target) in buckets.iter().zip(&report.targets).filter(|(b, _)| b.as_str() < "M6") {
            assert_ne!(target.verdict, "error", "{case} API 2 in {bucket}:\n{}", report.text());
        }
    }
    assert_eq!(checked, 2);
}

/// The command line: `--json` in the shape, exit status 1 when a target has an
/// error and 0 otherwise, `--env` combined (live behavior checks beside the offline ones),
/// and an unknown target refused with the known ones listed.
#[test]
fn the_command_line_reports_and_exits_as_documented() {
    let run = |args: &[&str]| std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-run")).args(args).output().unwrap();
    let models = models_dir();
    let nn = models.join("nn/3DBall.nn");
    let out = run(&["check", nn.to_str().unwrap(), "--target", "ml-agents@1.0.6", "--target", "ml-agents@3.0.0", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["format"], "nn");
    assert_eq!(json["targets"][0]["verdict"], "ok");
    assert_eq!(json["targets"][1]["verdict"], "error");
    assert_eq!(json["targets"][1]["findings"][0]["id"], "F2");
    assert!(json["targets"][1]["findings"][0]["severity"] == "error" && json["targets"][1]["findings"][0]["message"].is_string());

    let onnx = models.join("onnx/3DBall.onnx");
    let out = run(&["check", onnx.to_str().unwrap(), "--target", "ml-agents@4.0.0", "--env", "sim:3DBall", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["targets"][0]["verdict"], "ok");
    assert_eq!(json["environment"]["checks"][0]["violations"], serde_json::json!([]));

    let out = run(&["check", onnx.to_str().unwrap(), "--target", "sentis@7.0.0"]);
    assert!(!out.status.success() && out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sentis 1.0 to 2.1.x"));
}

/// Rule N3: a `.nn` layer or activation a Barracuda release declares but does not run is
/// reported with Unity's runtime text (Squeeze in every release; Softplus before 1.1).
#[test]
fn nn_layers_barracuda_does_not_run_are_reported() {
    use mlagents::barracuda::{read, write, Activation, LayerType};
    let mut model = read(&std::fs::read(golden_case_dir("continuous").join("run/3DBall.nn")).unwrap()).unwrap();
    let dense = model.layers.iter().position(|l| l.layer_type == LayerType::Dense).unwrap();
    model.layers[dense].activation = Activation::Softplus;
    let other = model.layers.iter().position(|l| l.layer_type != LayerType::Load && l.layer_type != LayerType::Dense).unwrap();
    model.layers[other].layer_type = LayerType::Squeeze;
    let report = check_bytes(&write(&model), "mutated.nn", &resolve_targets(&["ml-agents@1.0.6".into(), "ml-agents@2.0.1".into()]).unwrap()).unwrap();
    let n3 = |t: usize| -> Vec<String> { report.targets[t].findings.iter().filter(|f| f.id == "N3").map(|f| f.unity_message.clone().unwrap()).collect() };
    let mut in_1_0 = n3(0);
    in_1_0.sort();
    assert_eq!(in_1_0, vec!["Squeeze operations are not implemented yet!".to_string(), "This activation function is not implemented yet!".to_string()], "{}", report.text());
    assert_eq!(n3(1), vec!["Squeeze operations are not implemented yet!".to_string()], "{}", report.text());
}
