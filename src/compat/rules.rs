//! The rules of unity-import.md §5.2, one function per group, each adding the findings of
//! one model against one target. Where Unity prints a message for a failure, the finding
//! carries Unity's text so that a user can match what the Editor showed.

use super::facts::{element_type_name, MadeBy, ModelFacts, FLOAT, INT32, INT64};
use super::targets::{accepted_nn_versions, imports_op, runs_nn_layer, EngineBucket, EnginePackage, MlAgentsBucket, Target};
use super::{Finding, Severity};
use crate::run::ModelFormat;
use crate::spec::model as names;

/// The text .NET prints for a null dereference, which 1.0.x shows for a missing constant.
const NULL_REFERENCE: &str = "NullReferenceException: Object reference not set to an instance of an object";

/// What .NET prints when a tensor of one element type is read as another.
const INVALID_CAST: &str = "InvalidCastException: Specified cast is not valid.";

/// Whether an ONNX element type is an integer type.
fn is_integer(element_type: i32) -> bool {
    element_type == INT32 || element_type == INT64 || (2..=5).contains(&element_type) || element_type == 12 || element_type == 13
}

/// What the file is, as opposed to what it is named.
pub struct Container {
    /// The format the content shows.
    pub format: ModelFormat,
    /// The format the file name says.
    pub named: ModelFormat,
    /// The first eight bytes as the little-endian int64 Barracuda reads as a version.
    pub leading_int64: Option<i64>,
}

/// F1, F2 and N1: the file's format against its name and against what the target imports.
pub fn container(c: &Container, facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    let barracuda = target.engine.bucket.is_barracuda();
    match (c.format, c.named) {
        (ModelFormat::Onnx, ModelFormat::Nn) => out.push(Finding::new(
            "F1",
            Severity::Error,
            "the file holds an ONNX model but is named .nn; Unity picks the importer by extension: rename it to .onnx".into(),
            (barracuda).then(|| format!("NotSupportedException: Format version not supported: {}", c.leading_int64.unwrap_or(0) % 255)),
        )),
        (ModelFormat::Nn, ModelFormat::Onnx) => out.push(Finding::new(
            "F1",
            Severity::Error,
            "the file holds a Barracuda .nn model but is not named .nn; Unity picks the importer by extension: rename it to .nn".into(),
            None,
        )),
        _ => {}
    }
    if c.format != ModelFormat::Nn {
        return;
    }
    if !barracuda {
        let who = target.ml_agents.as_ref().map_or_else(|| format!("{}", target.engine.package.id()), |(v, _)| format!("com.unity.ml-agents {v}"));
        out.push(Finding::new(
            "F2",
            Severity::Error,
            format!("{who} imports only .onnx and .sentis models (no .nn importer in Sentis / Inference Engine): export the policy as ONNX (mlagents-export, model API 3)"),
            None,
        ));
    } else if let (Some(version), Some(accepted)) = (facts.nn_version, accepted_nn_versions(&target.engine)) {
        if !accepted.contains(&version) {
            out.push(Finding::new(
                "N1",
                Severity::Error,
                format!("barracuda {} reads .nn format versions {accepted:?}, this file is version {version}: write version 16, which every Barracuda reads", target.engine.version),
                Some(format!("NotSupportedException: Format version not supported: {version}")),
            ));
        }
    }
}

/// N3: every `.nn` layer type and fused activation must be one the Barracuda release runs
/// (its loader takes any code; an unimplemented one fails when the model runs).
pub fn nn_layers(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Nn {
        return;
    }
    for layer in &facts.operations {
        let Some((layer_runs, activation_runs)) = runs_nn_layer(&target.engine, &layer.op_type, layer.activation.as_deref()) else { return };
        if !layer_runs {
            out.push(Finding::new(
                "N3",
                Severity::Error,
                format!("layer {:?} is a {} layer, which barracuda {} declares but does not run: export the network without it", layer.name, layer.op_type, target.engine.version),
                Some(format!("{} operations are not implemented yet!", layer.op_type)),
            ));
        }
        if !activation_runs {
            out.push(Finding::new(
                "N3",
                Severity::Error,
                format!("layer {:?} uses the activation {}, which barracuda {} does not run: use another activation or a newer Barracuda", layer.name, layer.activation.as_deref().unwrap_or_default(), target.engine.version),
                Some("This activation function is not implemented yet!".into()),
            ));
        }
    }
}

/// P1: every ONNX operator must be one the target's importer registers.
pub fn operators(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx {
        return;
    }
    let mut reported: Vec<&str> = vec![];
    for op in &facts.operations {
        if reported.contains(&op.op_type.as_str()) {
            continue;
        }
        let Some(false) = imports_op(&target.engine, &op.op_type) else { continue };
        reported.push(&op.op_type);
        let unity = match target.engine.package {
            EnginePackage::Barracuda => format!("OnnxImportException: Unknown type {} encountered while parsing layer {}.", op.op_type, op.name),
            EnginePackage::InferenceEngine if target.engine.bucket == EngineBucket::S4 => format!("Unsupported ONNX Operator: {}", op.op_type),
            _ => format!("{} not supported", op.op_type),
        };
        out.push(Finding::new(
            "P1",
            Severity::Error,
            format!("{}@{} does not import the ONNX operator {} (node {:?}): export the network without it", target.engine.package.id(), target.engine.version, op.op_type, op.name),
            Some(unity),
        ));
    }
}

/// O1 and O3: the opset Sentis and Inference Engine read.
pub fn opsets(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx || target.engine.bucket.is_barracuda() {
        return;
    }
    let default = facts.opset_imports.iter().find(|(domain, _)| domain.is_empty());
    match default {
        None if target.engine.bucket >= EngineBucket::S2 => out.push(Finding::new(
            "O1",
            Severity::Error,
            format!(
                "opset_import has no entry with domain \"\" (it has {:?}); {}@{} then parses the graph as opset 15 and breaks opset-9 attribute forms (Slice, Squeeze, Unsqueeze, Clip, Split): declare the opset with domain \"\"",
                facts.opset_imports,
                target.engine.package.id(),
                target.engine.version
            ),
            None,
        )),
        Some((_, version)) if !(7..=15).contains(version) => out.push(Finding::new(
            "O3",
            Severity::Warning,
            format!("opset {version} is outside the 7 to 15 that Sentis documents (\"the results obtained may be unexpected\"): export with an opset in 7..15"),
            None,
        )),
        _ => {}
    }
}

/// The message of a missing metadata tensor as the ML-Agents release prints it.
fn missing_constant_message(bucket: MlAgentsBucket, name: &str) -> String {
    if bucket <= MlAgentsBucket::M1b {
        NULL_REFERENCE.to_string()
    } else {
        format!("Required constant \"{name}\" was not found in the model file.")
    }
}

/// Every rule about what com.unity.ml-agents demands (M1-M7, M9) for a release of `bucket`.
pub fn ml_agents(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    version_and_memory(facts, bucket, out);
    action_outputs(facts, bucket, out);
    barracuda_metadata(facts, bucket, out);
    sentis_types(facts, bucket, out);
    input_names(facts, out);
}

/// M1 and M2: `version_number` and `memory_size`, with each release's messages.
pub fn version_and_memory(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    match facts.constant(names::VERSION_NUMBER) {
        None => out.push(Finding::new("M1", Severity::Error, "the model has no version_number constant: export it with the ML-Agents metadata".into(), Some(missing_constant_message(bucket, names::VERSION_NUMBER)))),
        Some(v) if bucket <= MlAgentsBucket::M3 && v != 2.0 => {
            let unity = if v == -1.0 {
                "Model was not trained using the right version of ML-Agents. Cannot use this model.".to_string()
            } else if bucket == MlAgentsBucket::M1b && v > 2.0 {
                "Model was trained with a newer version of the trainer than is supported.".to_string()
            } else {
                format!("Version of the trainer the model was trained with ({v}) is not compatible with the Brain's version (2).")
            };
            let advice = if v == 3.0 { "a model API 3 policy needs com.unity.ml-agents >= 2.0.0 (Release 17): upgrade the package or export with --onnx-api 2 / as .nn" } else { "export model API 2" };
            out.push(Finding::new("M1", Severity::Error, format!("version_number is {v}; com.unity.ml-agents 1.x loads only 2: {advice}"), Some(unity)));
        }
        Some(v) if bucket >= MlAgentsBucket::M4 && v < 2.0 => out.push(Finding::new(
            "M1",
            Severity::Error,
            format!("version_number is {v}; this release loads 2 or 3: re-export the policy"),
            Some(format!("Model was trained with a older version of the trainer than is supported. Either retrain with an newer trainer, or use an older version of com.unity.ml-agents.\nModel version: {v} Minimum supported version: 2")),
        )),
        Some(v) if bucket >= MlAgentsBucket::M4 && v > 3.0 => out.push(Finding::new(
            "M1",
            Severity::Error,
            format!("version_number is {v}; this release loads 2 or 3: re-export the policy"),
            Some("Model was trained with a newer version of the trainer than is supported.".into()),
        )),
        _ => {}
    }
    match facts.constant(names::MEMORY_SIZE) {
        None => out.push(Finding::new("M2", Severity::Error, "the model has no memory_size constant: export it with the ML-Agents metadata (0 without memory)".into(), Some(missing_constant_message(bucket, names::MEMORY_SIZE)))),
        Some(m) if m > 0.0 && bucket >= MlAgentsBucket::M4 && facts.constant(names::VERSION_NUMBER) == Some(2.0) => out.push(Finding::new(
            "M2",
            Severity::Error,
            format!("a model API 2 policy with memory (memory_size {m}) runs only in com.unity.ml-agents 1.x: export model API 3"),
            Some("Models from com.unity.ml-agents 1.x that use recurrent neural networks are not supported in newer versions. Either retrain with an newer trainer, or use an older version of com.unity.ml-agents.".into()),
        )),
        _ => {}
    }
}

/// M3 and M4: the action outputs and the constants that describe them.
pub fn action_outputs(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    let modern = facts.has_output(names::CONTINUOUS_ACTIONS) || facts.has_output(names::DISCRETE_ACTIONS);
    if bucket <= MlAgentsBucket::M2 || (!modern && bucket <= MlAgentsBucket::M5) {
        for name in [names::IS_CONTINUOUS_CONTROL, names::ACTION_OUTPUT_SHAPE] {
            if facts.constant(name).is_none() {
                let unity = match (bucket, name) {
                    (b, _) if b <= MlAgentsBucket::M2 => missing_constant_message(b, name),
                    (_, names::IS_CONTINUOUS_CONTROL) => "Required constant \"is_continuous_control\" was not found in the model file. This is only required for model that uses a deprecated model format.".into(),
                    _ => "The model does not contain any Action Output Shape Node.".into(),
                };
                out.push(Finding::new("M3", Severity::Error, format!("the legacy interface needs the constant {name}: export model API 2 with the legacy outputs, or use com.unity.ml-agents >= 1.7 with continuous_actions / discrete_actions"), Some(unity)));
            }
        }
        if bucket <= MlAgentsBucket::M2 && !facts.has_output(names::ACTION) {
            out.push(Finding::new("M3", Severity::Error, "com.unity.ml-agents before 1.7 reads the output action, which the model lacks: export model API 2 with the legacy outputs".into(), None));
        }
        return;
    }
    if !modern && bucket >= MlAgentsBucket::M6 && facts.format == ModelFormat::Onnx {
        legacy_in_sentis(facts, out);
    }
    if !modern && !facts.has_output(names::ACTION) {
        out.push(Finding::new("M4", Severity::Error, "the model has no action output (continuous_actions or discrete_actions)".into(), Some("The model does not contain any Action Output Node.".into())));
    }
    for (output, shape, kind) in [
        (names::CONTINUOUS_ACTIONS, names::CONTINUOUS_ACTION_OUTPUT_SHAPE, "continuous"),
        (names::DISCRETE_ACTIONS, names::DISCRETE_ACTION_OUTPUT_SHAPE, "discrete"),
    ] {
        if facts.has_output(output) && !facts.metadata.contains_key(shape) {
            let unity = format!("The model uses {kind} action but does not contain {} Action Output Shape Node.", if kind == "continuous" { "Continuous" } else { "Discrete" });
            out.push(Finding::new("M4", Severity::Error, format!("{output} is an output but {shape} is missing: export it with the ML-Agents metadata"), Some(unity)));
        }
    }
    if bucket >= MlAgentsBucket::M5 {
        for (output, deterministic, kind) in [
            (names::CONTINUOUS_ACTIONS, names::DETERMINISTIC_CONTINUOUS_ACTIONS, "Continuous"),
            (names::DISCRETE_ACTIONS, names::DETERMINISTIC_DISCRETE_ACTIONS, "Discrete"),
        ] {
            if facts.has_output(output) && !facts.has_output(deterministic) {
                out.push(Finding::new(
                    "M4",
                    Severity::Warning,
                    format!("no {deterministic} output: the policy runs, but not with the behavior's Deterministic Inference flag set"),
                    Some(format!("The model uses deterministic inference but does not contain Deterministic {kind} Action Output Tensor. Uncheck `Deterministic inference` flag.")),
                ));
            }
        }
    }
}

/// M8: a model without `continuous_actions` / `discrete_actions` takes the Sentis-era legacy
/// path, which reads the legacy constants as integer tensors (unity-import.md §4 row 4).
fn legacy_in_sentis(facts: &ModelFacts, out: &mut Vec<Finding>) {
    for name in [names::IS_CONTINUOUS_CONTROL, names::ACTION_OUTPUT_SHAPE] {
        match facts.metadata.get(name) {
            None => out.push(Finding::new(
                "M8",
                Severity::Error,
                format!("without continuous_actions / discrete_actions this release takes its legacy path, which reads {name}, and the model has none: export model API 3"),
                Some(NULL_REFERENCE.into()),
            )),
            Some(m) if !is_integer(m.element_type) => out.push(Finding::new(
                "M8",
                Severity::Error,
                format!("without continuous_actions / discrete_actions this release takes its legacy path, which reads {name} as an integer tensor; it is {}: export model API 3", element_type_name(m.element_type)),
                Some(INVALID_CAST.into()),
            )),
            _ => {}
        }
    }
}

/// The metadata tensors ML-Agents reads from this model.
pub(super) fn required_metadata(facts: &ModelFacts) -> Vec<&'static str> {
    let mut required = vec![names::VERSION_NUMBER, names::MEMORY_SIZE];
    for (output, shape) in [(names::CONTINUOUS_ACTIONS, names::CONTINUOUS_ACTION_OUTPUT_SHAPE), (names::DISCRETE_ACTIONS, names::DISCRETE_ACTION_OUTPUT_SHAPE)] {
        if facts.has_output(output) {
            required.push(shape);
        }
    }
    if facts.has_output(names::ACTION) {
        required.extend([names::IS_CONTINUOUS_CONTROL, names::ACTION_OUTPUT_SHAPE]);
    }
    required
}

/// M5: in the Barracuda era a metadata tensor is found only as a constant (an initializer or
/// a `Constant` node's output) that is kept: a graph output, or an unreferenced `Constant`
/// node. One computed by a node (torch 2.x's `Identity`) or an initializer that is not an
/// output is not found (unity-import.md §1.6).
pub fn barracuda_metadata(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx || bucket > MlAgentsBucket::M5 {
        return;
    }
    for name in required_metadata(facts) {
        let Some(m) = facts.metadata.get(name) else { continue };
        let problem = match &m.made_by {
            MadeBy::Node(op) => format!("{name} is computed by a {op} node, and Barracuda keeps graph outputs computed by nodes as layers, not as the constant ML-Agents looks up"),
            MadeBy::Initializer if !m.is_output => format!("{name} is an initializer that is not a graph output, which Barracuda drops"),
            _ => continue,
        };
        out.push(Finding::new("M5", Severity::Error, format!("{problem}: store it as an initializer listed among the graph outputs (as ML-Agents' exporter does)"), Some(missing_constant_message(bucket, name))));
    }
}

/// M6 and M7: Sentis-era element types (metadata and continuous outputs float32, discrete
/// actions integers, inputs float32).
pub fn sentis_types(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx || bucket < MlAgentsBucket::M6 {
        return;
    }
    let legacy = [names::IS_CONTINUOUS_CONTROL, names::ACTION_OUTPUT_SHAPE];
    for name in required_metadata(facts).into_iter().filter(|n| !legacy.contains(n)) {
        let Some(m) = facts.metadata.get(name) else { continue };
        if m.element_type != FLOAT && m.element_type != 0 {
            out.push(Finding::new("M6", Severity::Error, format!("{name} is {}; this release reads it as float32: store it as float32", element_type_name(m.element_type)), Some(INVALID_CAST.into())));
        }
        if bucket == MlAgentsBucket::M6 && matches!(m.made_by, MadeBy::Node(_)) && m.values.is_none() {
            out.push(Finding::new("M6", Severity::Error, format!("{name} is computed by a node that Sentis 1.2 cannot fold into a constant: store it as an initializer"), Some(format!("Required constant \"{name}\" was not found in the model file."))));
        }
    }
    // Model API 2's discrete outputs are log-probabilities that C# samples (floats).
    let api3 = facts.constant(names::VERSION_NUMBER) == Some(3.0);
    for (name, element_type) in &facts.outputs {
        let discrete = api3 && (name == names::DISCRETE_ACTIONS || name == names::DETERMINISTIC_DISCRETE_ACTIONS);
        let float_output = name == names::CONTINUOUS_ACTIONS || name == names::DETERMINISTIC_CONTINUOUS_ACTIONS || name == names::RECURRENT_OUT;
        if discrete && *element_type != 0 && !is_integer(*element_type) {
            out.push(Finding::new("M7", Severity::Error, format!("{name} is {}; this release reads discrete actions as integers: output int64 or int32", element_type_name(*element_type)), Some(INVALID_CAST.into())));
        } else if float_output && *element_type != 0 && *element_type != FLOAT {
            out.push(Finding::new("M7", Severity::Error, format!("{name} is {}; this release reads it as float32", element_type_name(*element_type)), Some(INVALID_CAST.into())));
        }
    }
    for (name, element_type) in &facts.inputs {
        if *element_type != 0 && *element_type != FLOAT {
            out.push(Finding::new("M7", Severity::Error, format!("input {name} is {}; ML-Agents feeds every input as float32", element_type_name(*element_type)), None));
        }
    }
}

/// M9: the inputs ML-Agents knows how to feed.
pub fn input_names(facts: &ModelFacts, out: &mut Vec<Finding>) {
    let known = |name: &str| {
        [names::ACTION_MASKS, names::RECURRENT_IN, names::PREV_ACTION, names::EPSILON, names::SEQUENCE_LENGTH, names::VECTOR_OBSERVATION].contains(&name)
            || name.strip_prefix(names::OBSERVATION_PREFIX).is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            || name.contains(names::VISUAL_OBSERVATION_PREFIX.trim_end_matches('_'))
            || facts.memories.iter().any(|(input, _)| input == name)
    };
    for (name, _) in facts.inputs.iter().filter(|(n, _)| !known(n)) {
        out.push(Finding::new(
            "M9",
            Severity::Error,
            format!("input {name} is not one ML-Agents feeds (obs_N, action_masks, recurrent_in, or the model API 2 names): rename it"),
            Some(format!("Unknown tensorProxy expected as input : {name}")),
        ));
    }
}
