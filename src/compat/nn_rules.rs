//! The `.nn` rules of unity-import.md §5.2 beyond the version and the layer kinds: strings,
//! dataset shapes, axes (N2, N4), the metadata as the Barracuda-era ML-Agents reads it (N5) and
//! the legacy recurrent memories (N6).

use super::facts::ModelFacts;
use super::targets::{MlAgentsBucket, Target};
use super::{Finding, Severity};
use crate::run::ModelFormat;
use crate::spec::model as names;

/// N2 and N4 (every Barracuda target reads the file the same way).
pub fn nn_file(facts: &ModelFacts, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Nn || !target.engine.bucket.is_barracuda() {
        return;
    }
    for name in &facts.non_ascii_names {
        out.push(Finding::new("N2", Severity::Error, format!("name {name:?} is not ASCII; Barracuda reads .nn strings as ASCII, so the name Unity sees differs: use ASCII names"), None));
    }
    if facts.nn_version == Some(16) {
        for (name, shape) in facts.nn_datasets.iter().filter(|(_, s)| s.len() != 4) {
            out.push(Finding::new("N2", Severity::Error, format!("dataset {name:?} has shape {shape:?}; a version-16 .nn stores every tensor as [N, H, W, C]: write 4 dims"), None));
        }
        for op in &facts.operations {
            if let Some(axis) = op.int("axis").filter(|a| !(-4..4).contains(a)) {
                out.push(Finding::new("N4", Severity::Error, format!("{} layer {:?}: axis {axis} is outside -4..3, the NHWC axes of a version-16 .nn", op.op_type, op.name), None));
            }
        }
    }
}

/// N5 and N6 for a Barracuda-era ML-Agents target.
pub fn nn_interface(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Nn || bucket > MlAgentsBucket::M5 {
        return;
    }
    for (name, metadata) in &facts.metadata {
        let dims = &metadata.dims;
        let rows_of_one = dims.len() == 4 && dims[..3].iter().all(|d| *d == 1);
        if !rows_of_one {
            out.push(Finding::new("N5", Severity::Error, format!("constant {name} has shape {dims:?}; ML-Agents reads the metadata as [1, 1, 1, n] datasets: write that shape"), None));
        }
    }
    let version = facts.constant(names::VERSION_NUMBER);
    if bucket <= MlAgentsBucket::M3 && version == Some(2.0) {
        for (input, output) in &facts.memories {
            let legacy = |n: &str| n.ends_with("_h") || n.ends_with("_c");
            if !legacy(input) || !legacy(output) {
                out.push(Finding::new("N6", Severity::Error, format!("memory {input} -> {output}: com.unity.ml-agents 1.x pairs a version-2 model's memories by the suffixes _h and _c: name both ends so"), None));
            }
        }
    }
}
