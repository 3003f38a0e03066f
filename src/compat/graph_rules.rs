//! The rules of unity-import.md §5.2 on an ONNX graph's structure and stored tensors (O2,
//! O4-O6), the operator rules that read which inputs are constant or attribute values
//! Barracuda ignores (P6, P7, P9, P11), and the operators a Sentis GPU backend lacks (P10).

use super::facts::{Attribute, ModelFacts, Operation};
use super::targets::{EngineBucket, Target};
use super::{Device, Finding, Severity};
use crate::run::ModelFormat;
use std::collections::{BTreeMap, BTreeSet};

/// What Barracuda prints for a constant whose data it cannot read (`ONNXTensor`).
const UNREADABLE_CONSTANT: &str = "Could not read tensor data for constant tensor";

fn op_finding(id: &'static str, severity: Severity, op: &Operation, what: String, unity_message: Option<String>) -> Finding {
    Finding::new(id, severity, format!("{} node {:?}: {what}", op.op_type, op.name), unity_message)
}

/// O2, O4, O5 and O6.
pub fn structure(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx {
        return;
    }
    let barracuda = target.engine.bucket.is_barracuda();
    let opset = facts.default_opset();
    if let (true, Some(v)) = (barracuda, opset) {
        if v > 11 {
            out.push(Finding::new("O2", Severity::Warning, format!("opset {v}: Unity's Barracuda documentation asks for opset 9 (at most 11); later opsets move attributes into inputs that Barracuda reads differently: export with opset 9"), None));
        }
    }
    for op in facts.operations.iter().filter(|op| !op.domain.is_empty() && op.domain != "ai.onnx") {
        out.push(op_finding("O4", Severity::Error, op, format!("domain {:?}: Unity's importers know only the default ONNX domain and would read it as the standard op of that name", op.domain), None));
    }
    if facts.functions > 0 {
        out.push(Finding::new("O4", Severity::Error, format!("the model defines {} local function(s), which Unity's importers do not expand: inline them when exporting", facts.functions), None));
    }
    if facts.sparse_initializers > 0 {
        out.push(Finding::new("O4", Severity::Error, format!("{} sparse initializer(s): Unity's importers read dense tensors only", facts.sparse_initializers), None));
    }
    for t in facts.initializers.iter().filter(|t| matches!(t.element_type, 8 | 14 | 15)) {
        out.push(Finding::new("O4", Severity::Error, format!("initializer {:?} holds {} values, which Unity's importers do not take", t.name, if t.element_type == 8 { "string" } else { "complex" }), None));
    }
    if barracuda {
        stored_tensors(facts, out);
    }
    soundness(facts, out);
    duplicate_outputs(facts, barracuda, out);
}

/// O6: a graph output listed twice, which Sentis's `ModelValidator` refuses at import.
fn duplicate_outputs(facts: &ModelFacts, barracuda: bool, out: &mut Vec<Finding>) {
    let mut listed: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in &facts.outputs {
        *listed.entry(name.as_str()).or_default() += 1;
    }
    for (name, count) in listed.into_iter().filter(|(_, count)| *count > 1) {
        let (severity, consequence, unity) = if barracuda {
            (Severity::Warning, "Barracuda's handling of it is not documented", None)
        } else {
            (Severity::Error, "Sentis and Inference Engine refuse the model at import", Some("Output is specified more than once in the model".to_string()))
        };
        out.push(Finding::new("O6", severity, format!("graph output {name:?} is listed {count} times; {consequence}: list it once"), unity));
    }
}

/// O5: how Barracuda reads constants.
fn stored_tensors(facts: &ModelFacts, out: &mut Vec<Finding>) {
    let used: BTreeSet<&str> = facts.operations.iter().flat_map(|op| op.inputs.iter().map(String::as_str)).collect();
    for t in &facts.initializers {
        if t.external || t.double_data {
            let why = if t.external { "its data lives in an external file" } else { "its data is in the double_data field" };
            out.push(Finding::new("O5", Severity::Error, format!("initializer {:?}: {why}, which Barracuda cannot read: store it inline as raw data", t.name), Some(UNREADABLE_CONSTANT.into())));
        } else if t.dims.contains(&0) && used.contains(t.name.as_str()) {
            out.push(Finding::new("O5", Severity::Error, format!("initializer {:?} has a zero-sized shape {:?} and is used; Barracuda stores it without data and fails an assertion on it: remove it", t.name, t.dims), None));
        }
    }
}

/// O6: every value a node reads or the graph outputs is produced once, and the nodes can be
/// ordered (Unity sorts them; Sentis silently drops an output nothing produces).
fn soundness(facts: &ModelFacts, out: &mut Vec<Finding>) {
    let mut producers: BTreeMap<&str, usize> = BTreeMap::new();
    // Graph inputs (without the initializers old IR versions list among them) and initializers.
    let given = facts.inputs.iter().map(|(name, _)| name.as_str()).chain(facts.initializers.iter().map(|t| t.name.as_str()));
    for name in given {
        *producers.entry(name).or_default() += 1;
    }
    for name in facts.operations.iter().flat_map(|op| op.outputs.iter()).filter(|o| !o.is_empty()) {
        *producers.entry(name).or_default() += 1;
    }
    for (name, count) in producers.iter().filter(|(_, c)| **c > 1) {
        out.push(Finding::new("O6", Severity::Error, format!("{name:?} is produced {count} times (inputs, initializers and node outputs must have distinct names)"), None));
    }
    for op in &facts.operations {
        for input in op.inputs.iter().filter(|i| !i.is_empty() && !producers.contains_key(i.as_str())) {
            out.push(op_finding("O6", Severity::Error, op, format!("reads {input:?}, which no input, initializer or node provides"), None));
        }
    }
    for (name, _) in facts.outputs.iter().filter(|(o, _)| !producers.contains_key(o.as_str())) {
        out.push(Finding::new("O6", Severity::Error, format!("graph output {name:?} is produced by nothing; Sentis drops it silently and Barracuda fails to find it"), None));
    }
    if let Some(op) = cycle_member(facts) {
        out.push(op_finding("O6", Severity::Error, op, "is part of a cycle: the graph cannot be ordered".into(), None));
    }
}

/// A node on a cycle, if the graph has one (Kahn's algorithm).
fn cycle_member(facts: &ModelFacts) -> Option<&Operation> {
    let made_by: BTreeMap<&str, usize> = facts.operations.iter().enumerate().flat_map(|(i, op)| op.outputs.iter().map(move |o| (o.as_str(), i))).collect();
    let depends: Vec<BTreeSet<usize>> = facts.operations.iter().map(|op| op.inputs.iter().filter_map(|i| made_by.get(i.as_str()).copied()).collect()).collect();
    let mut done = vec![false; depends.len()];
    loop {
        let ready: Vec<usize> = (0..depends.len()).filter(|i| !done[*i] && depends[*i].iter().all(|d| done[*d])).collect();
        if ready.is_empty() {
            break;
        }
        for i in ready {
            done[i] = true;
        }
    }
    done.iter().position(|d| !d).map(|i| &facts.operations[i])
}

/// Whether a value is a constant (an initializer or a `Constant` node's output).
fn is_constant(facts: &ModelFacts, name: &str) -> bool {
    facts.constants.contains_key(name)
}

/// P6, P7, P9 and P11.
pub fn operator_inputs(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx {
        return;
    }
    let bucket = target.engine.bucket;
    for op in &facts.operations {
        let input = |k: usize| op.inputs.get(k).filter(|i| !i.is_empty());
        let dynamic = |k: usize| input(k).is_some_and(|i| !is_constant(facts, i));
        match op.op_type.as_str() {
            "Reshape" | "Expand" if bucket <= EngineBucket::B2 && dynamic(1) => out.push(op_finding("P6", Severity::Error, op, format!("its shape {:?} is computed, and Barracuda before 1.3 (the legacy importer) takes constant shapes only: export a constant shape (-1 and 0 allowed)", op.inputs[1]), None)),
            "ConstantOfShape" if bucket <= EngineBucket::B2 && dynamic(0) => out.push(op_finding("P6", Severity::Error, op, "its shape is computed, and Barracuda before 1.3 takes constant shapes only".into(), None)),
            "Shape" if bucket <= EngineBucket::B2 => out.push(op_finding("P6", Severity::Warning, op, "Barracuda before 1.3 bakes Shape into a constant, with 0 for the sizes it does not know: a wrong shape at run time".into(), None)),
            _ => {}
        }
        if op.op_type == "Expand" && bucket.is_barracuda() && bucket <= EngineBucket::B4 && !(bucket <= EngineBucket::B2 && dynamic(1)) {
            out.push(op_finding("P6", Severity::Warning, op, "Barracuda up to 2.2 broadcasts Expand's operands with known bugs at run time (ML-Agents' own exporter avoids Expand): broadcast with Mul/Add by a constant instead".into(), None));
        }
        if matches!(op.op_type.as_str(), "Conv" | "ConvTranspose") && bucket.is_barracuda() {
            convolution(facts, op, out);
        }
        if bucket.is_barracuda() || bucket >= EngineBucket::S1 {
            sampling_and_recurrence(op, out);
        }
        if bucket.is_barracuda() {
            ignored_attributes(op, out);
            if op.op_type == "Clip" {
                for (k, bound) in [(1, "min"), (2, "max")] {
                    if dynamic(k) {
                        out.push(op_finding("P11", Severity::Error, op, format!("its {bound} {:?} is computed; Barracuda reads Clip's bounds only as constants and silently drops a computed one (no clipping, no error): give a constant {bound}", op.inputs[k]), None));
                    }
                }
            }
        }
    }
}

/// P7: what Barracuda's Conv importer takes.
fn convolution(facts: &ModelFacts, op: &Operation, out: &mut Vec<Finding>) {
    if op.inputs.get(1).is_some_and(|w| !is_constant(facts, w)) {
        out.push(op_finding("P7", Severity::Error, op, "its weights are computed; Barracuda takes constant weights only".into(), None));
    }
    if op.inputs.get(2).is_some_and(|b| !b.is_empty() && !is_constant(facts, b)) {
        out.push(op_finding("P7", Severity::Error, op, "its bias is computed; Barracuda silently drops a bias that is not a constant (a wrong result, no error)".into(), None));
    }
    let group = op.int("group").unwrap_or(1);
    let per_group = op.inputs.get(1).and_then(|w| facts.constants.get(w)).and_then(|dims| dims.get(1).copied());
    if op.op_type == "Conv" && group > 1 && per_group != Some(1) {
        out.push(op_finding("P7", Severity::Error, op, format!("group {group} with {} input channels per group: Barracuda runs group 1 and depthwise convolutions only", per_group.map_or("unknown".into(), |c| c.to_string())), None));
    }
}

/// P9: Multinomial and LSTM as Unity's importers run them.
fn sampling_and_recurrence(op: &Operation, out: &mut Vec<Finding>) {
    match op.op_type.as_str() {
        "Multinomial" if op.int("sample_size").unwrap_or(1) != 1 => {
            out.push(op_finding("P9", Severity::Error, op, format!("sample_size {}: Unity draws one sample per row", op.int("sample_size").unwrap_or(1)), None))
        }
        "LSTM" => {
            let mut odd = vec![];
            if op.text("direction").is_some_and(|d| d != "forward") {
                odd.push(format!("direction {:?}", op.text("direction").unwrap_or_default()));
            }
            if let Some(Attribute::Texts(a)) = op.attributes.get("activations") {
                if a.iter().map(String::as_str).ne(["Sigmoid", "Tanh", "Tanh"]) {
                    odd.push(format!("activations {a:?}"));
                }
            }
            for name in ["clip", "activation_alpha", "activation_beta"] {
                if op.attributes.contains_key(name) {
                    odd.push(name.to_string());
                }
            }
            for name in ["input_forget", "layout"] {
                if op.int(name).unwrap_or(0) != 0 {
                    odd.push(format!("{name} {}", op.int(name).unwrap_or(0)));
                }
            }
            if !odd.is_empty() {
                out.push(op_finding("P9", Severity::Error, op, format!("{}: Unity's importers run a forward LSTM with the default activations, no clip and layout 0, and ignore these: export the default form", odd.join(", ")), None));
            }
        }
        _ => {}
    }
}

/// Attributes Barracuda reads with a warning and then ignores (`UnsupportedAttribute`,
/// unity-import.md §1.5): op, attribute, and the value that means the same as ignoring it
/// (None: any value set is ignored).
const IGNORED_ATTRIBUTES: &[(&str, &str, Option<i64>)] = &[
    ("MaxPool", "ceil_mode", Some(0)),
    ("MaxPool", "storage_order", Some(0)),
    ("MaxPool", "dilations", Some(1)),
    ("AveragePool", "ceil_mode", Some(0)),
    ("AveragePool", "count_include_pad", Some(0)),
    ("ConvTranspose", "group", Some(1)),
    ("ConvTranspose", "output_shape", None),
    ("ConvTranspose", "dilations", Some(1)),
    ("ArgMax", "select_last_index", Some(0)),
    ("ArgMin", "select_last_index", Some(0)),
    ("Resize", "coordinate_transformation_mode", None),
    ("Resize", "cubic_coeff_a", None),
    ("Resize", "exclude_outside", Some(0)),
    ("Resize", "extrapolation_value", None),
    ("Resize", "nearest_mode", None),
    ("Constant", "value_float", None),
    ("Constant", "value_floats", None),
    ("Constant", "value_int", None),
    ("Constant", "value_ints", None),
    ("Constant", "sparse_value", None),
];

/// P11: an attribute value Barracuda would ignore (and default) is an error.
fn ignored_attributes(op: &Operation, out: &mut Vec<Finding>) {
    for (_, name, neutral) in IGNORED_ATTRIBUTES.iter().filter(|(kind, ..)| *kind == op.op_type) {
        let Some(value) = op.attributes.get(*name) else { continue };
        let harmless = match (value, neutral) {
            (Attribute::Int(v), Some(n)) => v == n,
            (Attribute::Ints(v), Some(n)) => v.iter().all(|x| x == n),
            _ => false,
        };
        if !harmless {
            out.push(op_finding("P11", Severity::Error, op, format!("attribute {name} is set ({value:?}); Barracuda ignores it with a warning and computes the default: export without it"), None));
        }
    }
}

/// Operators the Sentis / Inference Engine docs (`supported-operators.md`, unity-import.md
/// §2.3) mark as missing on a GPU backend: op, the backends, and the newest bucket the note
/// applies to.
const GPU_GAPS: &[(&str, &[Device], EngineBucket)] = &[
    ("Multinomial", &[Device::Compute, Device::Pixel], EngineBucket::S2),
    ("LSTM", &[Device::Pixel], EngineBucket::S4),
    ("TopK", &[Device::Pixel], EngineBucket::S4),
    ("NonZero", &[Device::Compute, Device::Pixel], EngineBucket::S4),
    ("Compress", &[Device::Compute, Device::Pixel], EngineBucket::S4),
];

/// P10: operators the chosen Sentis-era GPU backend does not run (warnings: Sentis may fall
/// back or fail at run time), and pooling beyond 2-D on GPU.
pub fn backend_limits(facts: &ModelFacts, target: &Target, device: Device, out: &mut Vec<Finding>) {
    let bucket = target.engine.bucket;
    if device == Device::Cpu || bucket.is_barracuda() || facts.format != ModelFormat::Onnx {
        return;
    }
    for op in &facts.operations {
        let gap = GPU_GAPS.iter().find(|(kind, devices, newest)| *kind == op.op_type && devices.contains(&device) && bucket <= *newest);
        if gap.is_some() {
            out.push(op_finding("P10", Severity::Warning, op, format!("documented as not supported on the {device:?} backend of {}@{}: use the CPU (Burst) inference device", target.engine.package.id(), target.engine.version), None));
        }
        let pooling = matches!(op.op_type.as_str(), "MaxPool" | "AveragePool");
        if let (true, Some(Attribute::Ints(kernel))) = (pooling, op.attributes.get("kernel_shape")) {
            if kernel.len() > 2 {
                out.push(op_finding("P10", Severity::Warning, op, format!("a {}-D pooling; the GPU backends pool in 1-D and 2-D only", kernel.len()), None));
            }
        }
    }
}
