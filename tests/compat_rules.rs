//! The compatibility rules one by one on small models with one fault each (the rules the §4
//! fixtures of tests/compat_targets.rs do not exercise): graph structure and stored tensors
//! (O2, O4-O6), operator inputs and ignored attributes (P6, P7, P9, P11), `.nn` strings, axes,
//! metadata and memories (N2, N4-N6), input shapes (M10) and a behavior spec (M11).

mod common;

use common::models_dir;
use mlagents::barracuda::{self, LayerType};
use mlagents::compat::{check_bytes, check_model_bytes, resolve_targets, CheckOptions, Device, Severity};
use mlagents::onnx::{attr_int, attr_ints, attr_string, value_info, GraphBuilder, FLOAT};
use mlagents::spec::BehaviorSpec;
use prost::Message;

/// A minimal API-3 continuous policy (`obs_0` [N, 2] -> MatMul -> `continuous_actions`);
/// `fault` edits it before it is finished (opset `opset`, input dims `input_dims`).
fn model(opset: i64, input_dims: &[i64], fault: impl FnOnce(&mut GraphBuilder, &mut Vec<String>)) -> Vec<u8> {
    let mut b = GraphBuilder::default();
    let w = b.constant("W", &[2, 1], vec![0.5, -0.25]);
    b.node_into("MatMul", vec!["obs_0".into(), w], vec![], "continuous_actions");
    b.node_into("Identity", vec!["continuous_actions".into()], vec![], "deterministic_continuous_actions");
    let mut outputs = vec!["continuous_actions".to_string(), "deterministic_continuous_actions".into()];
    for (name, value) in [("version_number", 3.0), ("memory_size", 0.0), ("continuous_action_output_shape", 1.0)] {
        b.named_constant(name, &[1], vec![value]);
        outputs.push(name.into());
    }
    fault(&mut b, &mut outputs);
    let outputs = outputs.iter().map(|o| value_info(o, FLOAT, &[])).collect();
    b.finish("rules", opset, vec![value_info("obs_0", FLOAT, input_dims)], outputs, "tests").encode_to_vec()
}

fn clean() -> Vec<u8> {
    model(9, &[-1, 2], |_, _| {})
}

/// The (rule, severity) findings of `bytes` for one target.
fn findings(bytes: &[u8], target: &str) -> Vec<(String, Severity, String)> {
    let report = check_bytes(bytes, "model.onnx", &resolve_targets(&[target.to_string()]).unwrap()).unwrap();
    report.targets[0].findings.iter().map(|f| (f.id.to_string(), f.severity, f.message.clone())).collect()
}

fn has(bytes: &[u8], target: &str, rule: &str, severity: Severity) -> bool {
    let found = findings(bytes, target);
    found.iter().any(|(r, s, _)| r == rule && *s == severity)
}

#[test]
fn the_clean_model_has_no_findings_from_these_rules() {
    for target in ["barracuda@1.0.4", "ml-agents@2.0.1", "ml-agents@2.3.0-exp.3", "ml-agents@4.0.0"] {
        let found: Vec<_> = findings(&clean(), target).into_iter().filter(|(r, ..)| ["O2", "O4", "O5", "O6", "O7", "P6", "P7", "P9", "P11", "M10"].contains(&r.as_str())).collect();
        assert!(found.is_empty(), "{target}: {found:?}");
    }
}

#[test]
fn graph_structure_and_stored_tensors() {
    // O2: a late opset for Barracuda.
    assert!(has(&model(13, &[-1, 2], |_, _| {}), "ml-agents@2.0.1", "O2", Severity::Warning));
    assert!(!has(&model(13, &[-1, 2], |_, _| {}), "ml-agents@3.0.0", "O2", Severity::Warning));
    // O4: a custom domain.
    let custom = model(9, &[-1, 2], |b, o| {
        let out = b.node("Relu", vec!["continuous_actions".into()], vec![], "relu");
        b.nodes.last_mut().unwrap().domain = "com.example".into();
        o.push(out);
    });
    assert!(has(&custom, "ml-agents@4.0.0", "O4", Severity::Error));
    // O5: a double_data constant and a used zero-sized one, for Barracuda only.
    let double = model(9, &[-1, 2], |b, o| {
        let t = b.initializers.iter_mut().find(|t| t.name == "version_number").unwrap();
        (t.data_type, t.double_data, t.float_data) = (11, vec![3.0], vec![]);
        let empty = b.constant("empty", &[0], vec![]);
        let out = b.node("Concat", vec!["continuous_actions".into(), empty], vec![attr_int("axis", 0)], "concat");
        o.push(out);
    });
    let o5: Vec<_> = findings(&double, "ml-agents@2.0.1").into_iter().filter(|(r, ..)| r == "O5").collect();
    assert_eq!(o5.len(), 2, "{o5:?}");
    assert!(!has(&double, "ml-agents@4.0.0", "O5", Severity::Error));
    // O6: a dangling input, an unproduced output, a value produced twice, a cycle.
    let unsound = model(9, &[-1, 2], |b, o| {
        b.node_into("Add", vec!["continuous_actions".into(), "nowhere".into()], vec![], "dangling");
        b.node_into("Relu", vec!["loop_b".into()], vec![], "loop_a");
        b.node_into("Relu", vec!["loop_a".into()], vec![], "loop_b");
        b.node_into("Relu", vec!["obs_0".into()], vec![], "continuous_actions");
        o.extend(["dangling".into(), "never_made".into()]);
    });
    let o6: Vec<String> = findings(&unsound, "ml-agents@4.0.0").into_iter().filter(|(r, ..)| r == "O6").map(|(.., m)| m).collect();
    for expected in ["\"nowhere\"", "\"never_made\"", "produced 2 times", "cycle"] {
        assert!(o6.iter().any(|m| m.contains(expected)), "{expected}: {o6:?}");
    }
    // Old IR versions list the initializers among the graph inputs too: not a second producer.
    let listed = {
        let mut m = <tract_onnx::pb::ModelProto as prost::Message>::decode(clean().as_slice()).unwrap();
        let graph = m.graph.as_mut().unwrap();
        let names: Vec<String> = graph.initializer.iter().map(|t| t.name.clone()).collect();
        graph.input.extend(names.iter().map(|n| value_info(n, FLOAT, &[])));
        m.encode_to_vec()
    };
    assert!(!has(&listed, "ml-agents@4.0.0", "O6", Severity::Error), "{:?}", findings(&listed, "ml-agents@4.0.0"));
    // O7: rank 9 anywhere fails Sentis; Barracuda 3 takes 7-D constants no more.
    let deep = model(9, &[-1, 2], |b, o| {
        let c = b.constant("deep", &[1, 1, 1, 1, 1, 1, 1, 1, 1], vec![1.0]);
        let out = b.node("Mul", vec!["continuous_actions".into(), c], vec![], "deep");
        o.push(out);
    });
    assert!(has(&deep, "ml-agents@4.0.0", "O7", Severity::Error));
    assert!(has(&deep, "ml-agents@2.3.0-exp.3", "O7", Severity::Error));
}

#[test]
fn operator_inputs_and_ignored_attributes() {
    // P7: computed conv weights, a computed bias, a grouped convolution.
    let conv = model(9, &[-1, 2], |b, o| {
        let shape = b.constant_i64("image", &[4], vec![-1, 2, 1, 1]);
        let image = b.node("Reshape", vec!["obs_0".into(), shape], vec![], "image");
        let w = b.constant("w", &[4, 2, 1, 1], vec![1.0; 8]);
        let grouped = b.node("Conv", vec![image.clone(), w], vec![attr_int("group", 2)], "grouped");
        let computed = b.node("Conv", vec![image.clone(), image.clone(), image], vec![], "computed");
        o.extend([grouped, computed]);
    });
    let p7: Vec<String> = findings(&conv, "ml-agents@2.0.1").into_iter().filter(|(r, ..)| r == "P7").map(|(.., m)| m).collect();
    assert_eq!(p7.len(), 3, "{p7:?}");
    assert!(!has(&conv, "ml-agents@4.0.0", "P7", Severity::Error));
    // P9: Multinomial drawing several samples; a bidirectional LSTM.
    let sampling = model(9, &[-1, 2], |b, o| {
        let m = b.node("Multinomial", vec!["obs_0".into()], vec![attr_int("sample_size", 3)], "draw");
        let l = b.node("LSTM", vec!["obs_0".into()], vec![attr_string("direction", "bidirectional")], "lstm");
        o.extend([m, l]);
    });
    let p9: Vec<String> = findings(&sampling, "ml-agents@4.0.0").into_iter().filter(|(r, ..)| r == "P9").map(|(.., m)| m).collect();
    assert!(p9.iter().any(|m| m.contains("sample_size 3")) && p9.iter().any(|m| m.contains("bidirectional")), "{p9:?}");
    // P11: an attribute Barracuda ignores; the neutral value is fine.
    let pooled = |ceil: i64| {
        model(9, &[-1, 2], |b, o| {
            let shape = b.constant_i64("image", &[4], vec![-1, 2, 1, 1]);
            let image = b.node("Reshape", vec!["obs_0".into(), shape], vec![], "image");
            let out = b.node("MaxPool", vec![image], vec![attr_ints("kernel_shape", &[1, 1]), attr_int("ceil_mode", ceil)], "pool");
            o.push(out);
        })
    };
    assert!(has(&pooled(1), "ml-agents@2.0.1", "P11", Severity::Error));
    // P10: Multinomial on Sentis 2.1's GPU backends (not on the CPU, nor in Inference Engine).
    let on = |device: Device, target: &str| {
        let report = check_model_bytes(&sampling, "model.onnx", &resolve_targets(&[target.to_string()]).unwrap(), CheckOptions { device, ..Default::default() }).unwrap();
        report.targets[0].findings.iter().filter(|f| f.id == "P10").map(|f| f.message.clone()).collect::<Vec<_>>()
    };
    assert!(on(Device::Compute, "ml-agents@3.0.0").iter().any(|m| m.contains("Multinomial")));
    assert!(on(Device::Pixel, "ml-agents@4.0.0").iter().any(|m| m.contains("LSTM")));
    assert!(on(Device::Cpu, "ml-agents@3.0.0").is_empty());
    assert!(!on(Device::Compute, "ml-agents@4.0.0").iter().any(|m| m.contains("Multinomial")));
    assert!(!has(&pooled(0), "ml-agents@2.0.1", "P11", Severity::Error));
}

#[test]
fn input_shapes() {
    // M10: a fixed batch, a rank-5 observation, and images channels-last.
    assert!(has(&model(9, &[1, 2], |_, _| {}), "ml-agents@4.0.0", "M10", Severity::Warning));
    assert!(has(&model(9, &[-1, 1, 1, 1, 2], |_, _| {}), "ml-agents@4.0.0", "M10", Severity::Error));
    assert!(has(&model(9, &[-1, 84, 84, 3], |_, _| {}), "ml-agents@4.0.0", "M10", Severity::Warning));
    assert!(!has(&model(9, &[-1, 3, 84, 84], |_, _| {}), "ml-agents@4.0.0", "M10", Severity::Warning));
}

/// M13: a variable-length observation `[N, 4, 3]` read through 0.28's Transpose + Reshape
/// quirk (`quirk`) or as declared.
fn buffer_model(quirk: bool) -> Vec<u8> {
    model(9, &[-1, 2], |b, o| {
        let mut x = "obs_1".to_string();
        if quirk {
            let t = b.node("Transpose", vec![x], vec![attr_ints("perm", &[0, 2, 1])], "quirk");
            let shape = b.constant_i64("back", &[3], vec![-1, 4, 3]);
            x = b.node("Reshape", vec![t, shape], vec![], "quirk");
        }
        let out = b.node("ReduceSum", vec![x], vec![attr_ints("axes", &[1]), attr_int("keepdims", 0)], "pool");
        o.push(out);
    })
}

#[test]
fn variable_length_observations_follow_each_era() {
    let with_buffer = |quirk: bool| {
        let mut m = <tract_onnx::pb::ModelProto as prost::Message>::decode(buffer_model(quirk).as_slice()).unwrap();
        m.graph.as_mut().unwrap().input.push(value_info("obs_1", FLOAT, &[-1, 4, 3]));
        m.encode_to_vec()
    };
    assert!(!has(&with_buffer(true), "ml-agents@2.3.0-exp.3", "M13", Severity::Error));
    assert!(has(&with_buffer(false), "ml-agents@2.3.0-exp.3", "M13", Severity::Error));
    assert!(has(&with_buffer(true), "ml-agents@4.0.0", "M13", Severity::Error));
    assert!(!has(&with_buffer(false), "ml-agents@4.0.0", "M13", Severity::Error));
}

#[test]
fn nn_strings_axes_metadata_and_memories() {
    let basic = std::fs::read(models_dir().join("nn/Basic.nn")).unwrap();
    let mut model = barracuda::read(&basic).unwrap();
    model.layers[1].name = "caf\u{e9}".into();
    let concat = model.layers.iter_mut().find(|l| l.layer_type == LayerType::StridedSlice).unwrap();
    concat.layer_type = LayerType::Concat;
    concat.axis = 7;
    let load = model.layers.iter_mut().find(|l| l.layer_type == LayerType::Load).unwrap();
    let version = load.tensors.iter_mut().find(|t| t.name == "version_number").unwrap();
    version.shape = vec![1, 1];
    let bytes = barracuda::write(&model);
    let report = check_bytes(&bytes, "model.nn", &resolve_targets(&["ml-agents@1.9.1".into()]).unwrap()).unwrap();
    let ids: Vec<&str> = report.targets[0].findings.iter().map(|f| f.id).collect();
    for rule in ["N2", "N4", "N5"] {
        assert!(ids.contains(&rule), "{rule}: {}", report.text());
    }
    // N6: Hallway's memories end in _c/_h; renamed, 1.x cannot pair them.
    let hallway = std::fs::read(models_dir().join("nn/Hallway.nn")).unwrap();
    let mut model = barracuda::read(&hallway).unwrap();
    let fine = check_bytes(&hallway, "Hallway.nn", &resolve_targets(&["ml-agents@1.9.1".into()]).unwrap()).unwrap();
    assert!(!fine.targets[0].findings.iter().any(|f| f.id == "N6"), "{}", fine.text());
    let memory = model.memories[0].output.clone();
    for layer in model.layers.iter_mut() {
        if layer.name == memory {
            layer.name = "new_state".into();
        }
        for input in layer.inputs.iter_mut().filter(|i| **i == memory) {
            *input = "new_state".into();
        }
    }
    model.memories[0].output = "new_state".into();
    let renamed = check_bytes(&barracuda::write(&model), "Hallway.nn", &resolve_targets(&["ml-agents@1.9.1".into()]).unwrap()).unwrap();
    assert!(renamed.targets[0].findings.iter().any(|f| f.id == "N6"), "{}", renamed.text());
}

#[test]
fn a_behavior_spec_is_checked_as_unity_does() {
    let targets = resolve_targets(&["ml-agents@4.0.0".into()]).unwrap();
    let fits = BehaviorSpec::from_json(r#"{"observation_specs": [{"shape": [2]}], "action_spec": {"continuous_size": 1, "discrete_branches": []}}"#).unwrap();
    let misfits = BehaviorSpec::from_json(r#"{"observation_specs": [{"shape": [3]}], "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#).unwrap();
    let ok = check_model_bytes(&clean(), "model.onnx", &targets, CheckOptions { behavior_spec: Some(&fits), ..Default::default() }).unwrap();
    assert!(!ok.targets[0].findings.iter().any(|f| f.id == "M11"), "{}", ok.text());
    let bad = check_model_bytes(&clean(), "model.onnx", &targets, CheckOptions { behavior_spec: Some(&misfits), ..Default::default() }).unwrap();
    let m11: Vec<&str> = bad.targets[0].findings.iter().filter(|f| f.id == "M11" && f.severity == Severity::Error).map(|f| f.message.as_str()).collect();
    assert_eq!(m11.len(), 2, "{}", bad.text());
    // The command line reads the file and refuses a bad one.
    let dir = common::temp_dir("compat-spec");
    let (model_path, spec_path) = (dir.join("model.onnx"), dir.join("spec.json"));
    std::fs::write(&model_path, clean()).unwrap();
    std::fs::write(&spec_path, r#"{"observation_specs": [{"shape": [3]}], "action_spec": {"continuous_size": 2, "discrete_branches": []}}"#).unwrap();
    let run = |spec: &std::path::Path| std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-run")).args(["check", model_path.to_str().unwrap(), "--target", "ml-agents@4.0.0", "--behavior-spec", spec.to_str().unwrap()]).output().unwrap();
    let out = run(&spec_path);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("M11"));
    std::fs::write(&spec_path, "[1, 2").unwrap();
    let out = run(&spec_path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("spec.json") && stderr.contains("not a behavior spec"), "{stderr}");
}

/// What the third adversarial round (2 December) found `check --target` passing: a graph that
/// cannot run (C1), an output listed twice (C2), a Clip with computed bounds on Barracuda (C3),
/// a rank-3 Softmax without an axis, and a Softmax axis Barracuda 1.0 ignores (C4).
#[test]
fn defects_a_target_refuses_or_runs_wrongly_are_errors() {
    // C1: a Reshape the tensor cannot take, at every batch: an error for every target, the
    // Sentis 1.2 one included (it does not probe at load, the first decision throws).
    let unrunnable = model(9, &[-1, 2], |b, o| {
        let shape = b.constant_i64("shape", &[2], vec![-1, 3]);
        o.push(b.node("Reshape", vec!["continuous_actions".into(), shape], vec![], "reshaped"));
    });
    for target in ["ml-agents@3.0.0-exp.1", "ml-agents@2.0.1", "barracuda@1.0.4", "sentis@1.2.0"] {
        let o6: Vec<String> = findings(&unrunnable, target).into_iter().filter(|(r, s, _)| r == "O6" && *s == Severity::Error).map(|(.., m)| m).collect();
        assert!(o6.iter().any(|m| m.contains("all-zero inputs at batch 1") && m.contains("does not compute")), "{target}: {o6:?}");
    }
    assert!(has(&unrunnable, "ml-agents@4.0.0", "M12", Severity::Error) && !has(&unrunnable, "ml-agents@4.0.0", "O6", Severity::Error));
    // C2: an output listed twice.
    let twice = model(9, &[-1, 2], |_, o| o.push("version_number".into()));
    for target in ["ml-agents@3.0.0-exp.1", "ml-agents@3.0.0", "ml-agents@4.0.0"] {
        assert!(has(&twice, target, "O6", Severity::Error), "{target}: {:?}", findings(&twice, target));
    }
    assert!(has(&twice, "ml-agents@2.0.1", "O6", Severity::Warning));
    // C3: Clip's bounds made by nodes (opset 11: the bounds are inputs).
    let clipped = model(11, &[-1, 2], |b, o| {
        let half = b.constant("half", &[], vec![0.5]);
        let low = b.node("Neg", vec![half.clone()], vec![], "low");
        o.push(b.node("Clip", vec!["obs_0".into(), low, half], vec![], "clipped"));
    });
    for target in ["ml-agents@2.0.1", "ml-agents@2.3.0-exp.3", "barracuda@2.1.0-exp.1"] {
        let p11: Vec<String> = findings(&clipped, target).into_iter().filter(|(r, s, _)| r == "P11" && *s == Severity::Error).map(|(.., m)| m).collect();
        assert!(p11.iter().any(|m| m.contains("Clip") && m.contains("min")), "{target}: {p11:?}");
    }
    assert!(!has(&clipped, "ml-agents@4.0.0", "P11", Severity::Error));
    // C4: a Softmax over [N, 1, 3] without an axis: all ones where axis 1 is read.
    let rank3 = model(9, &[-1, 2], |b, o| {
        let shape = b.constant_i64("shape", &[3], vec![-1, 1, 1]);
        let logits = b.node("Reshape", vec!["continuous_actions".into(), shape], vec![], "logits");
        o.push(b.node("Softmax", vec![logits], vec![], "probabilities"));
    });
    for target in ["ml-agents@2.0.1", "ml-agents@3.0.0-exp.1"] {
        assert!(has(&rank3, target, "P3", Severity::Error), "{target}: {:?}", findings(&rank3, target));
    }
    assert!(has(&rank3, "ml-agents@4.0.0", "P3", Severity::Warning));
    let rank2 = |axis: i64| model(9, &[-1, 2], |b, o| o.push(b.node("Softmax", vec!["obs_0".into()], vec![attr_int("axis", axis)], "probabilities")));
    assert!(has(&rank2(0), "barracuda@1.0.4", "P3", Severity::Error));
    assert!(!has(&rank2(1), "barracuda@1.0.4", "P3", Severity::Error));
    assert!(!has(&rank2(-1), "barracuda@1.0.4", "P3", Severity::Error));
}
