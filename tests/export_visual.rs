//! Visual policies (each of ML-Agents' encoders) in both export formats: random weights,
//! random images and vectors, outputs of the plain-Rust reference forward pass recorded as a
//! parity record, then our runner feeds the `.onnx` (NCHW `obs_i`) and the `.nn` (NHWC
//! `visual_observation_k`, sliced `vector_observation`) as Unity would and must reproduce them.

use mlagents::barracuda::{self, export::to_nn};
use mlagents::compat::{check_file, resolve_targets, Severity};
use mlagents::onnx::export::to_onnx_bytes;
use mlagents::policy::parity::{ParityRecord, PARITY_FORMAT_VERSION};
use mlagents::policy::{reference_forward, EncoderType, PolicyDescription, Weights, POLICY_FORMAT_VERSION};
use mlagents::run::check_parity;
use mlagents::spec::ActionSpec;
use rand::{Rng, SeedableRng};

fn check(name: &str, observation_shapes: Vec<Vec<usize>>, action_spec: ActionSpec, seed: u64) {
    check_encoder(name, EncoderType::Simple, observation_shapes, action_spec, seed);
}

fn check_encoder(name: &str, vis_encode_type: EncoderType, observation_shapes: Vec<Vec<usize>>, action_spec: ActionSpec, seed: u64) {
    check_policy(name, vis_encode_type, vec![], observation_shapes, action_spec, seed);
}

/// Exports a random policy with these observations (the `goal_observations` conditioning its
/// body through the hypernetwork) and checks both formats against the reference forward pass.
fn check_policy(name: &str, vis_encode_type: EncoderType, goal_observations: Vec<usize>, observation_shapes: Vec<Vec<usize>>, action_spec: ActionSpec, seed: u64) {
    let d = PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes,
        action_spec,
        hidden_units: 16,
        num_layers: 1,
        normalize: true,
        memory_size: 0,
        vis_encode_type,
        goal_observations,
        continuous_head: mlagents::policy::ContinuousHead::default(),
    };
    let weights = Weights::random(&d, seed);
    let n = 6;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let observations: Vec<Vec<f32>> = d
        .observation_shapes
        .iter()
        .map(|s| (0..n * s.iter().product::<usize>()).map(|_| if s.len() == 3 { rng.random_range(0.0..1.0) } else { rng.random_range(-2.0..2.0) }).collect())
        .collect();
    let total = d.action_spec.mask_len();
    let masks: Vec<f32> = (0..n * total).map(|k| if k % 4 == 1 { 0.0 } else { 1.0 }).collect();
    let (continuous, discrete) = reference_forward(&d, &weights, &observations, Some(&masks), n).unwrap();
    let c = d.action_spec.continuous_size;
    let record = ParityRecord {
        format_version: PARITY_FORMAT_VERSION,
        behavior: name.into(),
        step: 0,
        policy: d.clone(),
        files: Default::default(),
        batch: n,
        observations,
        action_masks: masks,
        // Zero noise: the sampled continuous action is the deterministic one.
        noise: vec![0.0; n * c],
        deterministic_continuous_actions: continuous.clone(),
        continuous_actions: continuous,
        deterministic_discrete_actions: discrete,
        uniform: vec![],
        discrete_actions: vec![],
        recurrent_in: vec![],
        recurrent_out: vec![],
    };
    record.validate().unwrap();
    let dir = std::env::temp_dir().join(format!("mlagents-visual-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let onnx = dir.join(format!("{name}.onnx"));
    std::fs::write(&onnx, to_onnx_bytes(&d, &weights).unwrap()).unwrap();
    let mut models = vec![onnx];
    if d.action_spec.is_hybrid() {
        // The .nn interface has no hybrid actions.
    } else if !d.goal_observations.is_empty() {
        // Barracuda's .nn has no per-row matrix product: refused, naming the way out.
        let e = to_nn(&d, &weights).unwrap_err().to_string();
        assert!(e.contains("goal-conditioned") && e.contains("export ONNX"), "{e}");
    } else {
        let nn = dir.join(format!("{name}.nn"));
        std::fs::write(&nn, barracuda::write(&to_nn(&d, &weights).unwrap())).unwrap();
        models.push(nn);
    }
    for model in models {
        // Unity's importers take every layer of every encoder: what fails a target is the
        // format (.nn on Sentis, F2), the interface (model API 3 on ML-Agents 1.x, M rules) or the
        // deterministic discrete output's ArgMax on Barracuda before 1.2 (P1), never the encoder.
        let compat = check_file(&model, &resolve_targets(&["all".to_string()]).unwrap()).unwrap();
        for target in &compat.targets {
            for finding in target.findings.iter().filter(|f| f.severity == Severity::Error) {
                let expected = finding.id == "F2" || finding.id.starts_with('M') || (finding.id == "P1" && finding.message.contains("operator ArgMax"));
                assert!(expected, "{}: {} {}", model.display(), finding.id, finding.message);
            }
        }
        let report = check_parity(&model, &record, 1e-5).unwrap();
        assert!(report.passed, "{}: {report:?}", model.display());
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn one_image_discrete() {
    check("image-discrete", vec![vec![20, 20, 3]], ActionSpec::discrete(&[3]), 1);
}

#[test]
fn image_between_vectors_continuous() {
    check("mixed-continuous", vec![vec![4], vec![36, 24, 1], vec![3]], ActionSpec::continuous(2), 2);
}

#[test]
fn two_images_and_a_vector_hybrid() {
    check("two-images-hybrid", vec![vec![20, 20, 3], vec![5], vec![24, 30, 2]], ActionSpec::hybrid(1, &[2, 3]), 3);
}

/// Every other encoder (nature_cnn, resnet with its padded convolutions, pools and residual
/// blocks, match3, fully_connected) through both formats: an image before a vector, and a
/// cube image (height = width = channels, where only the model's layout convention tells
/// how to feed it) after one.
#[test]
fn every_encoder_type() {
    let cases = [
        (EncoderType::NatureCnn, vec![36, 40, 3], 36),
        (EncoderType::Resnet, vec![17, 15, 2], 15),
        (EncoderType::Match3, vec![6, 5, 4], 6),
        (EncoderType::FullyConnected, vec![3, 4, 2], 4),
    ];
    for (k, (encoder, image, cube)) in cases.into_iter().enumerate() {
        let name = format!("encoder-{encoder}");
        check_encoder(&name, encoder, vec![image, vec![3]], ActionSpec::discrete(&[3, 2]), 10 + k as u64);
        check_encoder(&format!("{name}-cube"), encoder, vec![vec![2], vec![cube; 3]], ActionSpec::continuous(2), 20 + k as u64);
    }
}

/// Goal-conditioned policies (0.28's hypernetwork, `goal_conditioning_type: hyper`): a vector
/// goal beside an image, and an image goal, through ONNX (per-row MatMul of the generated
/// matrices); the .nn export refuses them.
#[test]
fn goal_conditioned_policies() {
    check_policy("goal-vector", EncoderType::Simple, vec![1], vec![vec![20, 24, 3], vec![2], vec![3]], ActionSpec::discrete(&[3, 2]), 31);
    check_policy("goal-image", EncoderType::Match3, vec![0], vec![vec![6, 5, 2], vec![4]], ActionSpec::continuous(2), 32);
    check_policy("goal-hybrid", EncoderType::Simple, vec![0, 2], vec![vec![2], vec![5], vec![3]], ActionSpec::hybrid(1, &[2]), 33);
}
