//! Writes the failing fixtures of the Unity compatibility checker (tests/fixtures/compat/):
//! one small model per row of unity-import.md §4 that an offline check can see, each a
//! minimal ML-Agents policy with one fault, and `expected.tsv`: file, target, the rule that
//! must report it, its severity and Unity's text for it (`-` where Unity prints none).
//! Usage: cargo run --example compat_fixtures [OUT_DIR]   (default tests/fixtures/compat)

use mlagents::onnx::{attr_float, attr_int, attr_ints, value_info, GraphBuilder, FLOAT};
use prost::Message;
use std::path::PathBuf;
use tract_onnx::pb::ModelProto;

/// How the minimal policy is built.
#[derive(Clone, Copy, Default)]
struct Policy {
    /// Model API 2 (legacy `action` and its constants) instead of 3.
    legacy: bool,
    memory_size: f32,
}

/// A one-layer continuous policy (2 observations, 1 action) with its metadata as graph
/// outputs; `fault` changes the builder, the outputs listed and the extra outputs.
fn policy(p: Policy, fault: impl FnOnce(&mut GraphBuilder, &mut Vec<String>)) -> ModelProto {
    let mut b = GraphBuilder::default();
    let input = if p.legacy { "vector_observation" } else { "obs_0" };
    let weights = b.constant("W", &[2, 1], vec![0.5, -0.25]);
    let mut outputs = vec![];
    let action = if p.legacy { "action" } else { "continuous_actions" };
    b.node_into("MatMul", vec![input.into(), weights], vec![], action);
    outputs.push(action.to_string());
    let mut constants = vec![("version_number", if p.legacy { 2.0 } else { 3.0 }), ("memory_size", p.memory_size)];
    if p.legacy {
        constants.extend([("is_continuous_control", 1.0), ("action_output_shape", 1.0)]);
    } else {
        b.node_into("Identity", vec![action.into()], vec![], "deterministic_continuous_actions");
        outputs.push("deterministic_continuous_actions".into());
        constants.push(("continuous_action_output_shape", 1.0));
    }
    for (name, value) in constants {
        b.named_constant(name, &[1], vec![value]);
        outputs.push(name.into());
    }
    fault(&mut b, &mut outputs);
    let outputs = outputs.iter().map(|o| value_info(o, FLOAT, &[-1, 1])).collect();
    b.finish("fixture", 9, vec![value_info(input, FLOAT, &[-1, 2])], outputs, "mlagents-rs compat_fixtures")
}

/// Removes an initializer (and its graph output) by name.
fn drop_constant(b: &mut GraphBuilder, outputs: &mut Vec<String>, name: &str) {
    b.initializers.retain(|t| t.name != name);
    outputs.retain(|o| o != name);
}

/// `obs_0` `[N, 2]` as an image `[N, 2, 1, 1]` through a 1x1 convolution of 4 channels:
/// returns the convolution's output.
fn convolution(b: &mut GraphBuilder) -> String {
    let shape = b.constant_i64("image_shape", &[4], vec![-1, 2, 1, 1]);
    let image = b.node("Reshape", vec!["obs_0".into(), shape], vec![], "image");
    let kernel = b.constant("kernel", &[4, 2, 1, 1], vec![0.1; 8]);
    b.node("Conv", vec![image, kernel], vec![attr_ints("kernel_shape", &[1, 1])], "conv")
}

/// Adds a node reading the action, listed as an extra output.
fn extra_node(b: &mut GraphBuilder, outputs: &mut Vec<String>, op: &str, attributes: Vec<tract_onnx::pb::AttributeProto>, extra_inputs: Vec<String>, action: &str) {
    let mut inputs = vec![action.to_string()];
    inputs.extend(extra_inputs);
    let out = b.node(op, inputs, attributes, &op.to_lowercase());
    outputs.push(out);
}

/// The fixtures whose rule is a warning (the spec's detection for §4 row 10 is a warning: the
/// same pattern loads in some Barracuda releases).
const WARNINGS: &[&str] = &["row10_reshape_after_conv.onnx"];

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "tests/fixtures/compat".into()));
    std::fs::create_dir_all(&dir).expect("fixture folder");
    let legacy = Policy { legacy: true, ..Default::default() };
    let api3 = Policy::default();
    let cases: Vec<(&str, ModelProto, &str, &str, &str)> = vec![
        ("row01_api3_in_1x.onnx", policy(api3, |_, _| {}), "ml-agents@1.0.6", "M1", "Version of the trainer the model was trained with (3) is not compatible with the Brain's version (2)."),
        ("row02_missing_legacy_constant.onnx", policy(legacy, |b, o| drop_constant(b, o, "is_continuous_control")), "ml-agents@1.0.7", "M3", "NullReferenceException: Object reference not set to an instance of an object"),
        ("row03_missing_version.onnx", policy(api3, |b, o| drop_constant(b, o, "version_number")), "ml-agents@2.0.1", "M1", "Required constant \"version_number\" was not found in the model file."),
        (
            "row03_identity_metadata.onnx",
            policy(api3, |b, _| {
                let t = b.initializers.iter_mut().find(|t| t.name == "version_number").expect("version_number");
                t.name = "version_number_value".into();
                b.node_into("Identity", vec!["version_number_value".into()], vec![], "version_number");
            }),
            "ml-agents@2.3.0-exp.3",
            "M5",
            "Required constant \"version_number\" was not found in the model file.",
        ),
        ("row04_legacy_in_sentis.onnx", policy(legacy, |b, o| drop_constant(b, o, "is_continuous_control")), "ml-agents@3.0.0", "M8", "NullReferenceException: Object reference not set to an instance of an object"),
        ("row05_argmax_in_barracuda_1_2_0.onnx", policy(api3, |b, o| extra_node(b, o, "ArgMax", vec![attr_int("axis", 1)], vec![], "continuous_actions")), "barracuda@1.2.0", "P1", "OnnxImportException: Unknown type ArgMax encountered while parsing layer argmax#2_node."),
        ("row06_unknown_op_in_sentis.onnx", policy(api3, |b, o| extra_node(b, o, "Mish", vec![], vec![], "continuous_actions")), "ml-agents@3.0.0", "P1", "Mish not supported"),
        ("row06_unknown_op_in_ie_2_4.onnx", policy(api3, |b, o| extra_node(b, o, "Unique", vec![], vec![], "continuous_actions")), "inference-engine@2.4.0", "P1", "Unsupported ONNX Operator: Unique"),
        (
            "row07_split_without_sizes.onnx",
            policy(api3, |b, o| {
                let sizes = b.constant_i64("sizes", &[1], vec![1]);
                extra_node(b, o, "Split", vec![attr_int("axis", 1)], vec![sizes], "continuous_actions")
            }),
            "ml-agents@2.0.1",
            "P5",
            "Unexpected error while parsing layer split#3_node of type Split. Unsupported default attribute split for node split#3_node of type Split. Value is required.",
        ),
        (
            "row08_rank_5.onnx",
            policy(api3, |b, o| {
                let mut x = "continuous_actions".to_string();
                for _ in 0..3 {
                    x = b.node("Unsqueeze", vec![x], vec![attr_ints("axes", &[1])], "unsqueeze");
                }
                o.push(x);
            }),
            "barracuda@1.0.4",
            "O7",
            "Only tensors of rank 4 or less are supported, but got rank 5",
        ),
        (
            "row09_gemm_size_mismatch.onnx",
            policy(api3, |b, o| {
                let conv = convolution(b);
                let flat = b.node("Flatten", vec![conv], vec![attr_int("axis", 1)], "flat");
                let weights = b.constant("Wg", &[5, 1], vec![0.5; 5]);
                let out = b.node("Gemm", vec![flat, weights], vec![], "gemm");
                o.push(out);
            }),
            "ml-agents@2.0.1",
            "O6",
            "Unexpected error while parsing layer gemm#8_node of type Gemm. Assertion failure. Values are not equal. Expected: 4 == 5",
        ),
        (
            "row10_reshape_after_conv.onnx",
            policy(api3, |b, o| {
                let conv = convolution(b);
                let shape = b.constant_i64("shape", &[3], vec![-1, 4, 1]);
                let out = b.node("Reshape", vec![conv, shape], vec![], "reshape");
                o.push(out);
            }),
            "ml-agents@2.0.0-exp.1",
            "O7",
            "Unexpected error while evaluating model output version_number. System.ArgumentException: Cannot reshape array of size",
        ),
        (
            "row12_dynamic_expand.onnx",
            policy(api3, |b, o| {
                let shape = b.node("Shape", vec!["obs_0".into()], vec![], "shape");
                let one = b.constant("one", &[1], vec![1.0]);
                let out = b.node("Expand", vec![one, shape], vec![], "expand");
                o.push(out);
            }),
            "barracuda@1.0.4",
            "P6",
            "-",
        ),
        ("row11_onnx_named_nn.nn", policy(api3, |_, _| {}), "ml-agents@2.0.1", "F1", "NotSupportedException: Format version not supported: FORMAT_VERSION"),
        (
            "row13_gemm_alpha.onnx",
            policy(api3, |b, o| {
                let w = b.constant("Wg", &[1, 1], vec![2.0]);
                extra_node(b, o, "Gemm", vec![attr_float("alpha", 0.5)], vec![w], "continuous_actions")
            }),
            "ml-agents@2.3.0-exp.3",
            "P2",
            "-",
        ),
        ("row13_reduce_without_axes.onnx", policy(api3, |b, o| extra_node(b, o, "ReduceSum", vec![], vec![], "continuous_actions")), "ml-agents@2.0.1", "P4", "-"),
        (
            "row14_api2_memory_in_2x.onnx",
            policy(Policy { legacy: true, memory_size: 16.0 }, |_, _| {}),
            "ml-agents@2.0.1",
            "M2",
            "Models from com.unity.ml-agents 1.x that use recurrent neural networks are not supported in newer versions. Either retrain with an newer trainer, or use an older version of com.unity.ml-agents.",
        ),
    ];
    let mut expected = String::from("# file\ttarget\trule\tseverity\tUnity's message (- for none); written by examples/compat_fixtures.rs\n");
    for (file, model, target, rule, unity) in cases {
        let bytes = model.encode_to_vec();
        // Unity reads an ONNX file named .nn as a .nn: its first int64, modulo 255.
        let unity = unity.replace("FORMAT_VERSION", &(i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) % 255).to_string());
        std::fs::write(dir.join(file), &bytes).expect("write fixture");
        let severity = if WARNINGS.contains(&file) { "warning" } else { "error" };
        expected += &format!("{file}\t{target}\t{rule}\t{severity}\t{unity}\n");
    }
    // Row 15: a .nn in ML-Agents 3.x (our golden 3DBall export).
    let nn = std::fs::read("models/golden/continuous/run/3DBall.nn").expect("models/golden/continuous/run/3DBall.nn (run from the repository root)");
    std::fs::write(dir.join("row15_nn_in_3x.nn"), nn).expect("write fixture");
    expected += "row15_nn_in_3x.nn\tml-agents@3.0.0\tF2\terror\t-\n";
    std::fs::write(dir.join("expected.tsv"), expected).expect("write expected.tsv");
    println!("wrote {}", dir.display());
}
