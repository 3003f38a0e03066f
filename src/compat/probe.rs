//! Rule M12: the probe run com.unity.ml-agents 3.0.0 and 4.x make when they load a model
//! (`SentisModelInfo`): every input zero-filled with its dynamic dims set to 1, every output
//! read, the metadata taken from those outputs (unity-import.md §3.1). Made here on tract, at
//! batch 1 and again for several agents.

use super::facts::ModelFacts;
use super::rules::required_metadata;
use super::{Finding, Severity};
use crate::run::{LoadOptions, OnnxPolicy};

/// The batch of the second run (Unity resizes the inputs to the number of agents).
const SEVERAL_AGENTS: usize = 3;

fn finding(severity: Severity, message: String) -> Finding {
    Finding::new("M12", severity, message, None)
}

/// The probe's findings for an ONNX model (`bytes`, named `label` in messages).
pub fn probe(bytes: &[u8], label: &str, facts: &ModelFacts) -> Vec<Finding> {
    let mut out = vec![];
    for name in required_metadata(facts) {
        if facts.metadata.contains_key(name) && !facts.has_output(name) {
            out.push(finding(Severity::Error, format!("{name} is not a graph output, and this release reads the metadata from the outputs of a run at load: list it among the graph outputs")));
        }
    }
    let policy = match OnnxPolicy::from_bytes(bytes, label, LoadOptions::default()) {
        Ok(policy) => policy,
        Err(e) => {
            out.push(finding(Severity::Warning, format!("the probe run Unity makes at load could not be made here ({e})")));
            return out;
        }
    };
    for batch in [1, SEVERAL_AGENTS] {
        let outputs = match policy.neutral_inputs(batch).and_then(|inputs| policy.run(&inputs)) {
            Ok(outputs) => outputs,
            Err(e) => {
                let when = if batch == 1 { "at batch 1, as Unity runs it at load".to_string() } else { format!("at batch {batch}, as Unity runs it once several agents share the model") };
                out.push(finding(Severity::Error, format!("the model fails on all-zero inputs {when}: {e}")));
                return out;
            }
        };
        if batch != 1 {
            continue;
        }
        for (name, metadata) in &facts.metadata {
            let (Some(stored), Some(computed)) = (&metadata.values, outputs.get(name)) else { continue };
            let same = stored.len() == computed.data.len() && stored.iter().zip(&computed.data).all(|(s, c)| *s as f32 == *c);
            if !same {
                out.push(finding(Severity::Error, format!("{name} computes {:?} in a run while the model stores {stored:?}; Unity reads the computed value: make the output the constant itself", computed.data)));
            }
        }
    }
    out
}
