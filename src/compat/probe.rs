//! Rule M12: the probe run com.unity.ml-agents 3.0.0 and 4.x make when they load a model
//! (`SentisModelInfo`): every input zero-filled with its dynamic dims set to 1, every output
//! read, the metadata taken from those outputs (unity-import.md §3.1). Made here on tract, at
//! batch 1 and again for several agents. The same run tells, for every target, whether the
//! graph computes at all ([`run_failure`], rule O6).

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
    let outputs = match neutral_runs(&policy) {
        Ok(outputs) => outputs,
        Err(failure) => {
            out.push(finding(Severity::Error, failure.message(true)));
            return out;
        }
    };
    for (name, metadata) in &facts.metadata {
        let (Some(stored), Some(computed)) = (&metadata.values, outputs.get(name)) else { continue };
        let same = stored.len() == computed.data.len() && stored.iter().zip(&computed.data).all(|(s, c)| *s as f32 == *c);
        if !same {
            out.push(finding(Severity::Error, format!("{name} computes {:?} in a run while the model stores {stored:?}; Unity reads the computed value: make the output the constant itself", computed.data)));
        }
    }
    out
}

/// A run on all-zero inputs that failed: the batch and why.
pub struct RunFailure {
    batch: usize,
    error: crate::run::RunError,
}

impl RunFailure {
    /// Whether the model fails at batch 1 already (else only when several agents share it).
    pub fn at_batch_1(&self) -> bool {
        self.batch == 1
    }

    /// What failed, said as the probe of a release that runs the model at load (`at_load`),
    /// or as a graph no engine computes.
    pub fn message(&self, at_load: bool) -> String {
        let when = match (self.batch, at_load) {
            (1, true) => "at batch 1, as Unity runs it at load".to_string(),
            (batch, true) => format!("at batch {batch}, as Unity runs it once several agents share the model"),
            (batch, false) => format!("at batch {batch}"),
        };
        format!("the model fails on all-zero inputs {when}: {}", self.error)
    }
}

/// Runs the model on all-zero inputs (every action allowed) at batch 1 and again for several
/// agents; the outputs at batch 1, or the first failure.
fn neutral_runs(policy: &OnnxPolicy) -> Result<crate::run::NamedTensors, RunFailure> {
    let mut first = None;
    for batch in [1, SEVERAL_AGENTS] {
        let outputs = policy.neutral_inputs(batch).and_then(|inputs| policy.run(&inputs)).map_err(|error| RunFailure { batch, error })?;
        first.get_or_insert(outputs);
    }
    Ok(first.expect("batch 1 ran"))
}

/// Whether the graph computes at all (rule O6 for every target): the failure of a run on
/// all-zero inputs at batch 1 or several agents, for a model this runner loads. (A model it
/// cannot load is left to the rules that read why.)
pub fn run_failure(bytes: &[u8], label: &str) -> Option<RunFailure> {
    let policy = OnnxPolicy::from_bytes(bytes, label, LoadOptions { deterministic: true, ..Default::default() }).ok()?;
    neutral_runs(&policy).err()
}
