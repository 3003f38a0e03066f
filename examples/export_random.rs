//! Writes ONNX exports of small random-weight policies (continuous with normalisation,
//! multi-branch discrete, hybrid, recurrent ones, one per visual encoder, goal-conditioned
//! ones, and entity (BufferSensor) ones in both entity layouts) into a folder, for the peer
//! checks against onnx.checker and onnxruntime (tests/peer/peer_export.py).
//! `cargo run --example export_random -- DIR`

use mlagents::onnx::export::{to_onnx_bytes_with, OnnxOptions};
use mlagents::policy::{EncoderType, PolicyDescription, Weights, POLICY_FORMAT_VERSION};
use mlagents::spec::{ActionSpec, EntityLayout};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "exports".into()));
    std::fs::create_dir_all(&dir)?;
    let vector = |sizes: &[usize]| sizes.iter().map(|s| vec![*s]).collect::<Vec<_>>();
    let simple = EncoderType::Simple;
    let cases = [
        ("continuous", ActionSpec::continuous(2), vector(&[8]), true, 0, simple),
        ("discrete", ActionSpec::discrete(&[3, 2]), vector(&[5, 3]), false, 0, simple),
        ("hybrid", ActionSpec::hybrid(2, &[3]), vector(&[6]), true, 0, simple),
        ("recurrent_discrete", ActionSpec::discrete(&[3, 2]), vector(&[5, 3]), false, 16, simple),
        ("recurrent_continuous", ActionSpec::continuous(2), vector(&[8]), true, 8, simple),
        ("visual_simple", ActionSpec::continuous(2), vec![vec![24, 20, 3], vec![4]], true, 0, simple),
        ("visual_nature_cnn", ActionSpec::discrete(&[3]), vec![vec![36, 40, 2]], false, 0, EncoderType::NatureCnn),
        ("visual_resnet", ActionSpec::hybrid(1, &[2]), vec![vec![4], vec![17, 15, 3]], true, 0, EncoderType::Resnet),
        ("visual_match3", ActionSpec::discrete(&[4, 2]), vec![vec![9, 8, 6]], false, 0, EncoderType::Match3),
        ("visual_fully_connected", ActionSpec::continuous(1), vec![vec![5, 5, 5]], false, 0, EncoderType::FullyConnected),
        // Observation 1 is a goal signal conditioning the body (0.28's hypernetwork).
        ("goal_conditioned", ActionSpec::discrete(&[3]), vec![vec![20, 20, 3], vec![2], vec![4]], true, 0, simple),
        ("goal_conditioned_recurrent", ActionSpec::continuous(2), vec![vec![3], vec![2]], false, 8, simple),
        // Entity observations [max entities, entity size]; `_natural` files are for Sentis.
        ("entities", ActionSpec::discrete(&[2]), vec![vec![10, 5]], false, 0, simple),
        ("entities_natural", ActionSpec::discrete(&[2]), vec![vec![10, 5]], false, 0, simple),
        ("entities_with_vector", ActionSpec::hybrid(2, &[3]), vec![vec![3], vec![6, 4], vec![2, 3]], true, 0, simple),
        ("entities_with_vector_natural", ActionSpec::hybrid(2, &[3]), vec![vec![3], vec![6, 4], vec![2, 3]], true, 0, simple),
        ("entities_recurrent", ActionSpec::continuous(2), vec![vec![4, 3], vec![2]], false, 8, simple),
    ];
    for (k, (name, actions, observation_shapes, normalize, memory_size, vis_encode_type)) in cases.into_iter().enumerate() {
        let goal_observations = if name.starts_with("goal_conditioned") { vec![1] } else { vec![] };
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes,
            action_spec: actions,
            hidden_units: 16,
            num_layers: 2,
            normalize,
            memory_size,
            vis_encode_type,
            goal_observations,
            continuous_head: mlagents::policy::ContinuousHead::default(),
        };
        let weights = Weights::random(&description, k as u64);
        let entity_layout = if name.ends_with("_natural") { EntityLayout::Natural } else { EntityLayout::Barracuda };
        let options = OnnxOptions { entity_layout, ..Default::default() };
        std::fs::write(dir.join(format!("{name}.onnx")), to_onnx_bytes_with(&description, &weights, options)?)?;
    }
    Ok(())
}
