//! Writes the networks of the policy benchmark (`scripts/bench-policy.sh`), each as `.onnx`
//! (model API 3) and `.nn` with the same random weights, into a folder:
//! - `mlp-small`: 3DBall's shape (8 observations, 2 x 128, 2 continuous actions, normalised);
//! - `mlp-wide`: Walker's size (243 observations, 3 x 512, 39 continuous actions, normalised);
//! - `visual`: an 84 x 84 x 3 camera through the simple encoder, 2 x 256, 5 discrete actions;
//! - `recurrent`: Hallway's size (108 observations, 2 x 128, an LSTM of memory 128, 5 discrete
//!   actions).
//!
//! `cargo run --release --example bench_models -- DIR`

use mlagents::policy::{PolicyDescription, Weights, POLICY_FORMAT_VERSION};
use mlagents::spec::ActionSpec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "bench-models".into()));
    std::fs::create_dir_all(&dir)?;
    let cases = [
        ("mlp-small", vec![vec![8]], 128, 2, ActionSpec::continuous(2), true, 0),
        ("mlp-wide", vec![vec![243]], 512, 3, ActionSpec::continuous(39), true, 0),
        ("visual", vec![vec![84, 84, 3]], 256, 2, ActionSpec::discrete(&[5]), false, 0),
        ("recurrent", vec![vec![108]], 128, 2, ActionSpec::discrete(&[5]), false, 128),
    ];
    for (k, (name, observation_shapes, hidden_units, num_layers, action_spec, normalize, memory_size)) in cases.into_iter().enumerate() {
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes,
            action_spec,
            hidden_units,
            num_layers,
            normalize,
            memory_size,
            vis_encode_type: mlagents::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: mlagents::policy::ContinuousHead::default(),
        };
        let weights = Weights::random(&description, k as u64);
        std::fs::write(dir.join(format!("{name}.onnx")), mlagents::onnx::export::to_onnx_bytes(&description, &weights)?)?;
        let nn = mlagents::barracuda::export::to_nn(&description, &weights)?;
        std::fs::write(dir.join(format!("{name}.nn")), mlagents::barracuda::write(&nn))?;
    }
    Ok(())
}
