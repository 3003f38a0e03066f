//! Writes ONNX exports of small random-weight policies (continuous with normalisation,
//! multi-branch discrete, hybrid, and recurrent ones) into a folder, for the peer checks against onnx.checker and
//! onnxruntime (tests/peer/peer_export.py). `cargo run --example export_random -- DIR`

use mlagents::onnx::export::to_onnx_bytes;
use mlagents::policy::{PolicyDescription, Weights, POLICY_FORMAT_VERSION};
use mlagents::spec::ActionSpec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "exports".into()));
    std::fs::create_dir_all(&dir)?;
    let cases = [
        ("continuous", ActionSpec::continuous(2), vec![8], true, 0),
        ("discrete", ActionSpec::discrete(&[3, 2]), vec![5, 3], false, 0),
        ("hybrid", ActionSpec::hybrid(2, &[3]), vec![6], true, 0),
        ("recurrent_discrete", ActionSpec::discrete(&[3, 2]), vec![5, 3], false, 16),
        ("recurrent_continuous", ActionSpec::continuous(2), vec![8], true, 8),
    ];
    for (k, (name, actions, observations, normalize, memory_size)) in cases.into_iter().enumerate() {
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: observations.into_iter().map(|s| vec![s]).collect(),
            action_spec: actions,
            hidden_units: 16,
            num_layers: 2,
            normalize,
            memory_size,
            continuous_head: mlagents::policy::ContinuousHead::default(),
        };
        let weights = Weights::random(&description, k as u64);
        std::fs::write(dir.join(format!("{name}.onnx")), to_onnx_bytes(&description, &weights)?)?;
    }
    Ok(())
}
