//! The `.nn` reader and writer on the real Unity-trained files of ../shared/models/nn:
//! every file parses and round-trips byte for byte, its constants and layers are those
//! barracuda-nn.md §12 lists, and mutated or truncated files give errors, never panics.

mod common;

use mlagents::barracuda::{self, Activation, Layer, LayerType, NnModel, TensorBlob, WeightType};
use rand::{Rng, SeedableRng};

use common::models_dir;
use std::path::PathBuf;

fn nn_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(models_dir().join("nn"))
        .expect("../shared/models/nn (set MLAGENTS_MODELS)")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "nn"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 24, "the shared corpus has 24 .nn files");
    files
}

#[test]
fn every_real_file_round_trips_byte_for_byte() {
    for path in nn_files() {
        let bytes = std::fs::read(&path).unwrap();
        let model = barracuda::read(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(model.version, 16);
        assert!(model.trailer.is_none());
        let written = barracuda::write(&model);
        assert!(written == bytes, "{}: rewritten file differs", path.display());
    }
}

/// barracuda-nn.md §12.1: layers, inputs, and version_number / memory_size /
/// is_continuous_control / action_output_shape.
#[test]
fn constants_and_layers_match_the_inventory() {
    let table: &[(&str, usize, &[&str], [f32; 4])] = &[
        ("3DBall", 34, &["vector_observation"], [2.0, 0.0, 1.0, 2.0]),
        ("3DBallHard", 34, &["vector_observation"], [2.0, 0.0, 1.0, 2.0]),
        ("Basic", 14, &["vector_observation", "action_masks"], [2.0, 0.0, 0.0, 3.0]),
        ("BigWallJump", 43, &["vector_observation", "action_masks"], [2.0, 0.0, 0.0, 11.0]),
        ("Bouncer", 34, &["vector_observation"], [2.0, 0.0, 1.0, 3.0]),
        ("CrawlerDynamic", 36, &["vector_observation"], [2.0, 0.0, 1.0, 20.0]),
        ("FoodCollector", 43, &["vector_observation", "action_masks"], [2.0, 0.0, 0.0, 11.0]),
        ("GridWorld", 20, &["visual_observation_0", "action_masks"], [2.0, 0.0, 0.0, 5.0]),
        ("Hallway", 37, &["vector_observation", "prev_action", "recurrent_in", "action_masks"], [2.0, 128.0, 0.0, 5.0]),
        ("Reacher", 38, &["vector_observation"], [2.0, 0.0, 1.0, 4.0]),
        ("WalkerStatic", 36, &["vector_observation"], [2.0, 0.0, 1.0, 39.0]),
        (
            "discrete1vis0vec_2_3action_recurr",
            55,
            &["visual_observation_0", "prev_action", "recurrent_in", "action_masks"],
            [2.0, 128.0, 0.0, 5.0],
        ),
    ];
    for (name, layers, inputs, constants) in table {
        let model = barracuda::read_file(&models_dir().join(format!("nn/{name}.nn"))).unwrap();
        assert_eq!(model.layers.len(), *layers, "{name}");
        let got: Vec<&str> = model.inputs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(&got, inputs, "{name}");
        let values: Vec<f32> = ["version_number", "memory_size", "is_continuous_control", "action_output_shape"]
            .iter()
            .map(|c| model.constant(c).unwrap_or_else(|| panic!("{name}: {c} missing")))
            .collect();
        assert_eq!(values, constants, "{name}");
    }
    let gridworld = barracuda::read_file(&models_dir().join("nn/GridWorld.nn")).unwrap();
    assert_eq!(gridworld.inputs[0].shape, vec![-1, 64, 84, 3]);
    let hist = gridworld.layer_histogram();
    assert_eq!(hist[&LayerType::Conv2D], 2);
    assert_eq!(hist[&LayerType::Reshape], 1);
    let hallway = barracuda::read_file(&models_dir().join("nn/Hallway.nn")).unwrap();
    assert_eq!(hallway.memories.len(), 2);
    assert_eq!(hallway.memories[0].input, "strided_slice_1_c");
    assert_eq!(hallway.memories[0].output, "concat_2_c");
    assert_eq!(hallway.memories[0].shape, vec![1, 1, 1, 64]);
}

/// The whole corpus's layer histogram is the one barracuda-nn.md §12.1 gives for the 25
/// distinct files of corpus A less the user-trained RollerBall model (not shared here).
#[test]
fn corpus_histogram() {
    let mut total = std::collections::BTreeMap::new();
    for path in nn_files() {
        for (t, n) in barracuda::read_file(&path).unwrap().layer_histogram() {
            *total.entry(t).or_insert(0) += n;
        }
    }
    assert_eq!(total[&LayerType::Conv2D], 8);
    assert_eq!(total[&LayerType::OneHot], 3);
    assert_eq!(total[&LayerType::Reshape], 1);
    assert_eq!(total[&LayerType::Flatten], 5);
    assert_eq!(total[&LayerType::RandomNormal], 12);
    assert_eq!(total[&LayerType::Load], 24);
}

/// Property test: random byte flips, insertions, deletions and every truncation of real
/// files give an error or a model, never a panic; and whatever parses writes back to the
/// same bytes.
#[test]
fn mutated_and_truncated_files_never_panic() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2024);
    for name in ["Basic", "Hallway", "GridWorld"] {
        let original = std::fs::read(models_dir().join(format!("nn/{name}.nn"))).unwrap();
        let header_end = original.len().min(6000);
        for cut in (0..header_end).step_by(7) {
            assert!(barracuda::read(&original[..cut]).is_err(), "{name} cut at {cut} parsed");
        }
        for _ in 0..3000 {
            let mut bytes = original.clone();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..header_end.min(bytes.len()));
                match rng.random_range(0..3) {
                    0 => bytes[at] = rng.random(),
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, rng.random()),
                }
            }
            if let Ok(model) = barracuda::read(&bytes) {
                assert!(barracuda::write(&model) == bytes, "{name}: a mutated file that parses must round-trip");
            }
        }
    }
}

#[test]
fn typed_errors_name_what_is_wrong() {
    let bytes = std::fs::read(models_dir().join("nn/Basic.nn")).unwrap();
    let mut v = bytes.clone();
    v[0] = 14;
    assert!(barracuda::read(&v).unwrap_err().to_string().contains("version 14"));
    let e = barracuda::read(&bytes[..bytes.len() - 1]).unwrap_err().to_string();
    assert!(e.contains("weight blob"), "{e}");
    let mut v = bytes.clone();
    v.extend_from_slice(&[1, 2, 3]);
    assert!(barracuda::read(&v).unwrap_err().to_string().contains("trailer"));
    let mut v = bytes.clone();
    v[8..12].copy_from_slice(&i32::MAX.to_le_bytes()); // input count
    let e = barracuda::read(&v).unwrap_err().to_string();
    assert!(e.contains("truncated or damaged .nn file: input count 2147483647 at byte 8 does not fit"), "{e}");
    // Layer 0 ("action_output_shape", a Load): its type code follows the name.
    let at = bytes.windows(19).position(|w| w == b"action_output_shape").unwrap() + 19;
    let mut v = bytes.clone();
    v[at..at + 4].copy_from_slice(&4i32.to_le_bytes());
    let e = barracuda::read(&v).unwrap_err().to_string();
    assert!(e.contains("unknown layer type 4") && e.contains("action_output_shape"), "{e}");
}

/// A model built with the writer: two Dense layers with Swish, read back identical.
#[test]
fn written_models_read_back() {
    let mut blob = TensorBlob::new();
    let mut load = Layer::new("version_number", LayerType::Load, &[]);
    load.tensors.push(blob.add("version_number", &[1], &[2.0]).unwrap());
    load.tensors.push(blob.add("memory_size", &[1], &[0.0]).unwrap());
    let mut dense = Layer::new("dense", LayerType::Dense, &["vector_observation"]);
    dense.tensors.push(blob.add("dense/kernel", &[2, 1, 1, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap());
    dense.tensors.push(blob.add("dense/bias", &[3], &[0.1, 0.2, 0.3]).unwrap());
    let mut swish = Layer::new("action", LayerType::Activation, &["dense"]);
    swish.activation = Activation::Swish;
    assert!(blob.add("bad", &[2, 2], &[1.0]).is_err());
    let model = NnModel {
        version: 16,
        inputs: vec![barracuda::Input { name: "vector_observation".into(), shape: vec![-1, 1, 1, 2] }],
        outputs: vec!["action".into()],
        memories: vec![],
        layers: vec![load, dense, swish],
        weight_type: WeightType::Float32,
        padding: vec![],
        weights: blob.into_bytes(),
        trailer: None,
    };
    let bytes = barracuda::write(&model);
    let back = barracuda::read(&bytes).unwrap();
    assert_eq!(back, model);
    assert_eq!(back.constant("version_number"), Some(2.0));
    assert_eq!(back.tensor_values(back.tensor("dense/bias").unwrap()), vec![0.1, 0.2, 0.3]);
    // Later format versions: 19 pads the blob to 16 bytes, 20 adds the weight type, 18 the trailer metadata.
    for version in [17, 18, 19, 20] {
        let mut m = model.clone();
        m.version = version;
        m.trailer = Some(barracuda::Trailer {
            producer_name: "test".into(),
            metadata: if version >= 18 { vec![("k".into(), "v".into())] } else { vec![] },
            ..Default::default()
        });
        let bytes = barracuda::write(&m);
        let back = barracuda::read(&bytes).unwrap();
        assert_eq!(barracuda::write(&back), bytes, "version {version}");
        assert_eq!(back.tensor_values(back.tensor("dense/kernel").unwrap()), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}
