//! The tract runner on every real ONNX policy of ../shared/models/onnx: loads (with the
//! RandomNormalLike workaround), evaluates at batch 1 and 12 in both modes, and rejects bad
//! inputs and non-ONNX files with clear errors. (Parity with onnxruntime is checked by
//! tests/peer/peer_onnx_parity.py.)

mod common;

use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, TensorData};

use common::models_dir;

fn neutral_inputs(policy: &OnnxPolicy, batch: usize) -> NamedTensors {
    policy
        .inputs()
        .iter()
        .map(|i| {
            let shape: Vec<usize> = i.dims.iter().map(|d| d.unwrap_or(batch)).collect();
            let n = shape.iter().product();
            let fill = if i.name == "action_masks" { 1.0 } else { 0.25 };
            (i.name.clone(), TensorData { shape, data: vec![fill; n] })
        })
        .collect()
}

#[test]
fn every_real_onnx_model_evaluates() {
    let mut count = 0;
    for entry in std::fs::read_dir(models_dir().join("onnx")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for deterministic in [true, false] {
            let policy = OnnxPolicy::load(&path, LoadOptions { deterministic, seed: Some(3), ..Default::default() }).unwrap();
            let batches: &[usize] = if name.contains("obsolete_recurr") { &[1] } else { &[1, 12] };
            for batch in batches {
                let out = policy.run(&neutral_inputs(&policy, *batch)).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(out.len(), policy.outputs().len(), "{name}");
                let version = out["version_number"].data[0];
                assert!(version == 2.0 || version == 3.0, "{name}: version {version}");
                for (output, t) in &out {
                    assert!(t.data.iter().all(|v| v.is_finite()), "{name} {output}: not finite");
                }
            }
        }
        count += 1;
    }
    assert_eq!(count, 14);
}

#[test]
fn deterministic_mode_is_repeatable_and_matches_the_v3_deterministic_output() {
    let path = models_dir().join("onnx/3DBall.onnx");
    let policy = OnnxPolicy::load(&path, LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
    let inputs = neutral_inputs(&policy, 4);
    let a = policy.run(&inputs).unwrap();
    let b = policy.run(&inputs).unwrap();
    assert_eq!(a, b);
    // With zero noise, the sampled head's clip(mu, -3, 3) / 3 equals the deterministic head.
    assert_eq!(a["continuous_actions"].data, a["deterministic_continuous_actions"].data);
}

#[test]
fn bad_inputs_and_files_are_clear_errors() {
    let path = models_dir().join("onnx/3DBall.onnx");
    let policy = OnnxPolicy::load(&path, LoadOptions::default()).unwrap();
    let e = policy.run(&NamedTensors::new()).unwrap_err().to_string();
    assert!(e.contains("obs_0"), "{e}");
    let mut wrong = NamedTensors::new();
    wrong.insert("obs_0".into(), TensorData { shape: vec![1, 7], data: vec![0.0; 7] });
    let e = policy.run(&wrong).unwrap_err().to_string();
    assert!(e.contains("obs_0") && e.contains("[1, 7]"), "{e}");
    wrong.insert("obs_0".into(), TensorData { shape: vec![1, 8], data: vec![0.0; 3] });
    assert!(policy.run(&wrong).unwrap_err().to_string().contains("needs 8 values"));
    let nn = models_dir().join("nn/Basic.nn");
    let e = OnnxPolicy::load(&nn, LoadOptions::default()).err().expect("not onnx").to_string();
    assert!(e.contains("not an ONNX model"), "{e}");
}

#[test]
fn seeded_noise_is_repeatable_per_policy_and_continues_between_runs() {
    let path = models_dir().join("onnx/3DBall.onnx");
    let load = || OnnxPolicy::load(&path, LoadOptions { deterministic: false, seed: Some(11), ..Default::default() }).unwrap();
    let (a, b) = (load(), load());
    let inputs = neutral_inputs(&a, 2);
    let a1 = a.run(&inputs).unwrap()["continuous_actions"].data.clone();
    let a2 = a.run(&inputs).unwrap()["continuous_actions"].data.clone();
    let b1 = b.run(&inputs).unwrap()["continuous_actions"].data.clone();
    assert_ne!(a1, a2, "the noise stream continues from one decision to the next");
    assert_eq!(a1, b1, "the same seed gives the same stream");
}

/// Sampled discrete actions come from a stream that continues from decision to decision (tract's
/// own Multinomial re-seeds at every run, which repeated one draw forever), reproducible for a
/// seed, and spread over the actions the policy gives weight to.
#[test]
fn sampled_discrete_actions_continue_their_stream_between_runs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/golden/discrete-masked/run/GridWorld.onnx");
    let load = |seed| OnnxPolicy::load(&path, LoadOptions { deterministic: false, seed: Some(seed), ..Default::default() }).unwrap();
    let draws = |policy: &OnnxPolicy| -> Vec<f32> {
        let inputs = neutral_inputs(policy, 1);
        (0..200).map(|_| policy.run(&inputs).unwrap()["discrete_actions"].data[0]).collect()
    };
    let (first, again, other_seed) = (draws(&load(0)), draws(&load(0)), draws(&load(1)));
    let distinct: std::collections::BTreeSet<i64> = first.iter().map(|a| *a as i64).collect();
    assert!(distinct.len() >= 2, "200 sampled decisions on one observation all chose {distinct:?}");
    assert!(distinct.iter().all(|a| (0..5).contains(a)), "actions outside the branch: {distinct:?}");
    assert_eq!(first, again, "the same seed gives the same stream");
    assert_ne!(first, other_seed, "another seed gives another stream");
    // The policy's own inputs: no caller has to provide the draws.
    assert!(load(0).inputs().iter().all(|i| i.name != mlagents::run::UNIFORM_INPUT));
}

/// A padded, grouped convolution and a strided one without bias, as a model of its own.
fn convolutions_model() -> tract_onnx::pb::ModelProto {
    use mlagents::onnx::{attr_int, attr_ints, value_info, GraphBuilder, FLOAT};
    let mut g = GraphBuilder::default();
    let values = |n: usize, scale: f32| (0..n).map(|k| ((k * 7919) % 97) as f32 / 97.0 * scale - scale / 2.0).collect::<Vec<f32>>();
    let w1 = g.constant("w1", &[8, 2, 3, 3], values(8 * 2 * 9, 0.6));
    let b1 = g.constant("b1", &[8], values(8, 0.2));
    let w2 = g.constant("w2", &[6, 8, 4, 4], values(6 * 8 * 16, 0.3));
    let c1 = g.node("Conv", vec!["obs_0".into(), w1, b1], vec![attr_ints("kernel_shape", &[3, 3]), attr_ints("pads", &[1, 1, 1, 1]), attr_int("group", 2)], "conv1");
    let r1 = g.node("Relu", vec![c1], vec![], "relu");
    let c2 = g.node("Conv", vec![r1, w2], vec![attr_ints("kernel_shape", &[4, 4]), attr_ints("strides", &[2, 2])], "conv2");
    g.node_into("Flatten", vec![c2], vec![attr_int("axis", 1)], "features");
    g.finish("convolutions", 11, vec![value_info("obs_0", FLOAT, &[-1, 4, 20, 20])], vec![value_info("features", FLOAT, &[-1, 6 * 9 * 9])], "test")
}

/// A batch runs each image's convolutions on its own (src/engine/rewrite/conv_batch.rs rewrites them as
/// grouped convolutions): a batch of 5 gives what 5 runs of one image give.
#[test]
fn batched_convolutions_equal_one_image_at_a_time() {
    let real = ["Visual3DBall.onnx", "GridFoodCollector.onnx", "continuous2vis8vec2action_v1_0.onnx"]
        .map(|name| (name.to_string(), OnnxPolicy::load(&models_dir().join("onnx").join(name), LoadOptions { deterministic: true, ..Default::default() }).unwrap()));
    let generated = ("generated".to_string(), OnnxPolicy::from_proto(convolutions_model(), "generated", LoadOptions::default()).unwrap());
    for (name, policy) in real.into_iter().chain([generated]) {
        let batch = 5;
        let mut inputs = neutral_inputs(&policy, batch);
        for (input, t) in inputs.iter_mut().filter(|(n, _)| n.as_str() != "action_masks") {
            let salt = input.len();
            t.data.iter_mut().enumerate().for_each(|(k, v)| *v = ((k * 31 + salt * 17) % 101) as f32 / 101.0);
        }
        let together = policy.run(&inputs).unwrap();
        for row in 0..batch {
            let one: NamedTensors = inputs
                .iter()
                .map(|(n, t)| {
                    let per_row = t.data.len() / batch;
                    let mut shape = t.shape.clone();
                    shape[0] = 1;
                    (n.clone(), TensorData { shape, data: t.data[row * per_row..(row + 1) * per_row].to_vec() })
                })
                .collect();
            let alone = policy.run(&one).unwrap();
            for (output, t) in &alone {
                let per_row = t.data.len();
                let batched = &together[output].data;
                if batched.len() != per_row * batch {
                    continue; // a model constant
                }
                assert_eq!(together[output].shape[1..], t.shape[1..], "{name} {output}");
                for (k, (a, b)) in t.data.iter().zip(&batched[row * per_row..]).enumerate() {
                    assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0), "{name} {output} row {row} value {k}: alone {a}, in the batch {b}");
                }
            }
        }
    }
}

/// A graph input transposed NHWC -> NCHW (as every lowered `.nn` image input is; the runner
/// transposes it while copying it in, or with its own op when the transposition is a graph
/// output, src/engine/rewrite/layout_ops.rs) holds each value where the transposition puts it, for image
/// sizes around the copy loop's 64-pixel blocks and for 1 to 70 channels; a transposition by
/// another permutation is left to tract and is right too. The caller gives NHWC either way.
#[test]
fn input_transpositions_move_every_value() {
    use mlagents::onnx::{attr_ints, value_info, GraphBuilder, FLOAT};
    let cases = [([0, 3, 1, 2], [2, 5, 13, 3]), ([0, 3, 1, 2], [3, 8, 8, 1]), ([0, 3, 1, 2], [1, 9, 15, 70]), ([0, 3, 1, 2], [1, 1, 1, 4]), ([0, 3, 1, 2], [2, 3, 30, 2]), ([0, 2, 3, 1], [2, 4, 6, 5])];
    for ((permutation, [n, h, w, c]), read_on) in cases.into_iter().flat_map(|case| [(case, false), (case, true)]) {
        let mut g = GraphBuilder::default();
        if read_on {
            let moved = g.node("Transpose", vec!["image".into()], vec![attr_ints("perm", &permutation)], "transposed");
            g.node_into("Identity", vec![moved], vec![], "moved");
        } else {
            g.node_into("Transpose", vec!["image".into()], vec![attr_ints("perm", &permutation)], "moved");
        }
        let proto = g.finish("transpose", 11, vec![value_info("image", FLOAT, &[-1, h as i64, w as i64, c as i64])], vec![value_info("moved", FLOAT, &[])], "test");
        let policy = OnnxPolicy::from_proto(proto, "transpose", LoadOptions::default()).unwrap();
        let declared: Vec<Option<usize>> = vec![None, Some(h), Some(w), Some(c)];
        assert_eq!(policy.inputs()[0].dims, declared, "the caller's NHWC dims");
        let data: Vec<f32> = (0..n * h * w * c).map(|k| k as f32).collect();
        let shape = [n, h, w, c];
        let out = policy.run(&NamedTensors::from([("image".to_string(), TensorData { shape: shape.to_vec(), data })])).unwrap();
        let moved = &out["moved"];
        let expected_shape: Vec<usize> = permutation.iter().map(|a| shape[*a as usize]).collect();
        assert_eq!(moved.shape, expected_shape, "{permutation:?} of {shape:?}");
        let strides = [h * w * c, w * c, c, 1];
        let mut index = [0usize; 4];
        for (k, value) in moved.data.iter().enumerate() {
            let mut rest = k;
            for axis in (0..4).rev() {
                index[permutation[axis] as usize] = rest % expected_shape[axis];
                rest /= expected_shape[axis];
            }
            let source: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            assert_eq!(*value, source as f32, "{permutation:?} of {shape:?} (read on: {read_on}): value {k}");
        }
    }
}

/// Inputs prepared once are read in place by every run: runs on them give what a run on the
/// named tensors gives, again and again (an op that works in place, here the `Add`, must not
/// write into them), for ONNX and `.nn` alike; another policy refuses them.
#[test]
fn prepared_inputs_are_read_in_place_and_stay_as_they_were() {
    use mlagents::onnx::{value_info, GraphBuilder, FLOAT};
    use mlagents::run::Policy;
    let mut g = GraphBuilder::default();
    let one = g.constant("one", &[1], vec![1.0]);
    let shifted = g.node("Add", vec!["x".into(), one], vec![], "shifted");
    g.node_into("Relu", vec![shifted], vec![], "y");
    let proto = g.finish("in_place", 13, vec![value_info("x", FLOAT, &[-1, 6])], vec![value_info("y", FLOAT, &[])], "test");
    let policy = Policy::from(OnnxPolicy::from_proto(proto, "in_place", LoadOptions::default()).unwrap());
    let inputs = NamedTensors::from([("x".to_string(), TensorData { shape: vec![5, 6], data: (0..30).map(|k| k as f32 / 10.0 - 1.5).collect() })]);
    let prepared = policy.prepare(&inputs).unwrap();
    let expected = policy.run(&inputs).unwrap();
    for _ in 0..3 {
        assert_eq!(policy.run_prepared(&prepared).unwrap(), expected);
    }
    for file in ["onnx/3DBall.onnx", "nn/3DBall.nn", "onnx/GridFoodCollector.onnx", "nn/continuous2vis8vec2action.nn"] {
        let path = models_dir().join(file);
        let policy = Policy::load(&path, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
        let inputs: NamedTensors = policy
            .interface()
            .unwrap()
            .inputs
            .iter()
            .map(|i| {
                let shape: Vec<usize> = std::iter::once(12).chain(i.dims.iter().map(|d| (*d).max(1) as usize)).collect();
                let n: usize = shape.iter().product();
                (i.name.clone(), TensorData { shape, data: (0..n).map(|k| (k % 7) as f32 / 7.0).collect() })
            })
            .collect();
        let prepared = policy.prepare(&inputs).unwrap();
        let expected = policy.run(&inputs).unwrap();
        assert_eq!(policy.run_prepared(&prepared).unwrap(), expected, "{file}");
        assert_eq!(policy.run_prepared(&prepared).unwrap(), expected, "{file}, again");
        let other = Policy::load(&path, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
        let e = other.run_prepared(&prepared).unwrap_err().to_string();
        assert!(e.contains("prepared by another policy"), "{file}: {e}");
    }
}
