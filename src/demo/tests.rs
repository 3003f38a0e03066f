use super::*;
use crate::spec::ObservationSpec;

fn spec() -> BehaviorSpec {
    BehaviorSpec { observation_specs: vec![ObservationSpec::vector(2, "position"), ObservationSpec::vector(1, "goal")], action_spec: ActionSpec::hybrid(1, &[3]) }
}

/// A record of decision `k` of an agent: observations k, reward k / 10, action k - 1 (the
/// Unity convention) or zeros at an episode's start.
fn record(k: usize, done: bool, first: bool) -> DemoRecord {
    let previous = k as f32 - 1.0;
    DemoRecord {
        observations: vec![vec![k as f32, -(k as f32)], vec![0.5]],
        reward: k as f32 / 10.0,
        done,
        interrupted: false,
        agent_id: 3,
        action_mask: if done { vec![] } else { vec![false, true, false] },
        continuous: vec![if first { 0.0 } else { previous / 10.0 }],
        discrete: vec![if first { 0 } else { (previous as i32).rem_euclid(3) }],
    }
}

/// Two episodes: decisions 0, 1, 2 (terminal), then 3, 4 (terminal).
fn two_episodes() -> Vec<DemoRecord> {
    vec![record(0, false, true), record(1, false, false), record(2, true, false), record(3, false, true), record(4, true, false)]
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mlagents-demo-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_written_demo_reads_back_as_written() {
    let dir = temp("roundtrip");
    let path = dir.join("a.demo");
    write(&path, "Corridor expert!! recording", "Corridor?team=0", &spec(), &two_episodes()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes[..BRAIN_PARAMETERS_OFFSET].ends_with(&[0]), "the metadata is padded to byte 33");
    let demo = read(&path).unwrap();
    assert_eq!(demo.metadata, DemoMetadata { api_version: 1, name: "Corridor expert ".into(), number_steps: 5, number_episodes: 3, mean_reward: 1.0 / 3.0 });
    assert_eq!(demo.behavior_name, "Corridor?team=0");
    assert_eq!(demo.spec.action_spec, spec().action_spec);
    assert_eq!(demo.spec.observation_specs.iter().map(|o| (o.shape.clone(), o.name.clone())).collect::<Vec<_>>(), vec![(vec![2], "position".into()), (vec![1], "goal".into())]);
    assert_eq!(demo.records, two_episodes());
    assert_eq!(demo.episodes(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

/// Ours pairs each observation with the action taken from it and never the terminal one; 0.28
/// pairs it with the action stored beside it (one decision late) over all records but the last.
#[test]
fn pairings_take_the_action_from_the_observation_or_as_0_28_does() {
    let demo = Demonstration { path: "x.demo".into(), metadata: DemoMetadata { api_version: 1, name: String::new(), number_steps: 5, number_episodes: 3, mean_reward: 0.0 }, behavior_name: "B".into(), spec: spec(), records: two_episodes() };
    let ours = training_rows(std::slice::from_ref(&demo), Pairing::ActionTaken);
    // Rows from decisions 0, 1 and 3: each with the action chosen there (k / 10, k mod 3).
    let summary: Vec<(f32, f32, i32, f32, bool)> = ours.iter().map(|r| (r.observations[0][0], r.continuous[0], r.discrete[0], r.reward, r.done)).collect();
    assert_eq!(summary, vec![(0.0, 0.0, 0, 0.1, false), (1.0, 0.1, 1, 0.2, true), (3.0, 0.3, 0, 0.4, true)]);
    let compat = training_rows(&[demo.clone(), demo], Pairing::Compat0_28);
    assert_eq!(compat.len(), 9, "all records of both files but the last");
    // Each record's own (previous) action; done when the next record is a terminal one.
    let summary: Vec<(f32, f32, bool)> = compat.iter().take(5).map(|r| (r.observations[0][0], r.continuous[0], r.done)).collect();
    assert_eq!(summary, vec![(0.0, 0.0, false), (1.0, 0.0, true), (2.0, 0.1, false), (3.0, 0.0, true), (4.0, 0.3, false)]);
    assert_eq!(ours.iter().map(|r| r.episode_ends).collect::<Vec<_>>(), vec![false, true, true]);
    assert_eq!(compat.iter().map(|r| r.episode_ends).collect::<Vec<_>>(), vec![false, true, false, true, false, false, true, false, true], "0.28 cuts where the next record is done, and at the very end");
}

/// A recording that stops mid-episode ends its last episode there: the rows of the next file
/// start another (a recurrent policy's sequences never span two files).
#[test]
fn a_recording_cut_mid_episode_ends_its_last_row_episode() {
    let mut records = two_episodes();
    records.last_mut().unwrap().done = false;
    let demo = Demonstration { path: "x.demo".into(), metadata: DemoMetadata { api_version: 1, name: String::new(), number_steps: 5, number_episodes: 2, mean_reward: 0.0 }, behavior_name: "B".into(), spec: spec(), records };
    let rows = training_rows(&[demo.clone(), demo], Pairing::ActionTaken);
    assert_eq!(rows.iter().map(|r| (r.done, r.episode_ends)).collect::<Vec<_>>(), [(false, false), (true, true), (false, true)].repeat(2));
}

#[test]
fn bad_files_are_named_with_what_is_wrong() {
    let dir = temp("bad");
    let good = dir.join("good.demo");
    write(&good, "g", "B?team=0", &spec(), &two_episodes()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated.demo", bytes[..bytes.len() - 7].to_vec(), "past the end of the file"),
        ("empty.demo", vec![], "ends before its metadata"),
        ("garbage.demo", vec![0xff; 64], "metadata"),
        ("version.demo", {
            let meta = DemonstrationMetaProto { api_version: 2, ..Default::default() };
            let mut b = meta.encode_length_delimited_to_vec();
            b.extend(&bytes[b.len()..]);
            b
        }, "API version 2 is not supported"),
    ];
    for (name, content, expected) in cases {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains(name) && error.contains(expected), "{name}: {error}");
    }
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    assert!(read_path(&dir.join("notes.txt")).unwrap_err().to_string().contains("is not a '.demo' file"));
    assert!(read_path(&dir.join("nothing")).unwrap_err().to_string().contains("does not exist"));
    let empty = dir.join("folder");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(read_path(&empty).unwrap_err().to_string().contains("no '.demo' files"));
    let _ = std::fs::remove_dir_all(dir);
}

/// A folder reads in name order; a recording for another policy is refused naming both specs.
#[test]
fn folders_read_in_order_and_specs_are_checked() {
    let dir = temp("folder");
    for (name, first) in [("b.demo", 10usize), ("a.demo", 0)] {
        let records: Vec<DemoRecord> = (0..2).map(|k| record(first + k, k == 1, k == 0)).collect();
        write(&dir.join(name), name, "B?team=0", &spec(), &records).unwrap();
    }
    let demos = read_path(&dir).unwrap();
    assert_eq!(demos.iter().map(|d| d.records[0].observations[0][0]).collect::<Vec<_>>(), vec![0.0, 10.0]);
    demos[0].check_spec(&spec()).unwrap();
    let other_actions = BehaviorSpec { action_spec: ActionSpec::discrete(&[3]), ..spec() };
    let error = demos[0].check_spec(&other_actions).unwrap_err().to_string();
    assert!(error.contains("actions") && error.contains(&spec().action_spec.to_string()) && error.contains(&other_actions.action_spec.to_string()), "{error}");
    let other_observations = BehaviorSpec { observation_specs: vec![ObservationSpec::vector(3, "position")], ..spec() };
    let error = demos[0].check_spec(&other_observations).unwrap_err().to_string();
    assert!(error.contains("observations") && error.contains("[2]") && error.contains("[3]"), "{error}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A file of com.unity.ml-agents 3.x declares its images channel-first (`[C, H, W]`): they are
/// read as `[H, W, C]`, values moved to match, so that they fit a policy of the same scene.
#[test]
fn channel_first_images_are_read_channel_last() {
    use crate::spec::DimensionProperty::{None as Plain, TranslationalEquivariance as Spatial};
    let (c, h, w) = (2, 3, 4);
    let image = ObservationSpec { shape: vec![c, h, w], dimension_properties: vec![Plain, Spatial, Spatial], ..ObservationSpec::visual_hwc(h, w, c, "camera") };
    let spec = BehaviorSpec { observation_specs: vec![image, ObservationSpec::vector(1, "goal")], action_spec: ActionSpec::discrete(&[2]) };
    // Value (ch, y, x) = 100 ch + 10 y + x, written in CHW order.
    let chw: Vec<f32> = (0..c).flat_map(|ch| (0..h).flat_map(move |y| (0..w).map(move |x| (100 * ch + 10 * y + x) as f32))).collect();
    let records: Vec<DemoRecord> = (0..3)
        .map(|k| DemoRecord { observations: vec![chw.clone(), vec![k as f32]], reward: 0.0, done: k == 2, interrupted: false, agent_id: 1, action_mask: vec![], continuous: vec![], discrete: vec![1] })
        .collect();
    let path = temp("channel-first").join("camera.demo");
    write(&path, "camera", "B?team=0", &spec, &records).unwrap();
    let demo = read(&path).unwrap();
    assert_eq!(demo.spec.observation_specs[0].shape, vec![h, w, c]);
    assert_eq!(demo.spec.observation_specs[0].dimension_properties, vec![Spatial, Spatial, Plain]);
    let hwc: Vec<f32> = (0..h).flat_map(|y| (0..w).flat_map(move |x| (0..c).map(move |ch| (100 * ch + 10 * y + x) as f32))).collect();
    assert!(demo.records.iter().all(|r| r.observations[0] == hwc));
    let policy = BehaviorSpec { observation_specs: vec![ObservationSpec::visual_hwc(h, w, c, "camera"), ObservationSpec::vector(1, "goal")], action_spec: ActionSpec::discrete(&[2]) };
    demo.check_spec(&policy).unwrap();
}
