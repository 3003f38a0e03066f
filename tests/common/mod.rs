//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mlagents::env::{EnvOptions, UnityEnvironment};
use std::time::Duration;

/// Options for a stand-in scene on a free port, with a short timeout.
pub fn sim_options(scene: &str) -> EnvOptions {
    EnvOptions {
        env: Some(format!("sim:{scene}")),
        base_port: Some(0),
        seed: 7,
        timeout_wait: Duration::from_secs(30),
        ..Default::default()
    }
}

/// Starts a stand-in scene as a child process.
pub fn start(scene: &str) -> UnityEnvironment {
    UnityEnvironment::new(sim_options(scene)).unwrap_or_else(|e| panic!("starting sim:{scene}: {e}"))
}

/// The Unity-trained models (`MLAGENTS_MODELS`, else `../shared/models`).
pub fn models_dir() -> std::path::PathBuf {
    std::env::var_os("MLAGENTS_MODELS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/models"))
}

/// A small vector-observation policy description (16 hidden units, 2 layers).
pub fn policy_description(
    actions: mlagents::spec::ActionSpec,
    observations: &[usize],
    normalize: bool,
) -> mlagents::policy::PolicyDescription {
    mlagents::policy::PolicyDescription {
        format_version: mlagents::policy::POLICY_FORMAT_VERSION,
        observation_shapes: observations.iter().map(|s| vec![*s]).collect(),
        action_spec: actions,
        hidden_units: 16,
        num_layers: 2,
        normalize,
        memory_size: 0,
        vis_encode_type: mlagents::policy::EncoderType::Simple,
        goal_observations: vec![],
        continuous_head: mlagents::policy::ContinuousHead::default(),
    }
}

/// The behavior a vector-observation policy description serves.
pub fn vector_behavior_spec(d: &mlagents::policy::PolicyDescription) -> mlagents::spec::BehaviorSpec {
    mlagents::spec::BehaviorSpec {
        observation_specs: d.observation_shapes.iter().map(|s| mlagents::spec::ObservationSpec::vector(s[0], "v")).collect(),
        action_spec: d.action_spec.clone(),
    }
}

/// Asserts that a policy passes Unity's checks against the behavior its description serves.
pub fn assert_passes_unity_checks(policy: mlagents::run::Policy, d: &mlagents::policy::PolicyDescription) {
    assert_eq!(mlagents::run::check(policy.interface().unwrap(), &vector_behavior_spec(d)), Vec::<String>::new());
}

/// Plays a model file on a stand-in scene until 20 episodes end (driver seed 1).
pub fn play_file(model: &std::path::Path, scene: &str, deterministic: bool) -> mlagents::run::PlayReport {
    use mlagents::run::{play, LoadOptions, Policy, PolicyDriver};
    let policy = Policy::load(model, LoadOptions { deterministic, ..Default::default() }).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    let mut env = start(scene);
    env.reset().unwrap();
    let behavior = env.behavior_names()[0].clone();
    let spec = env.behavior_specs()[&behavior].clone();
    let mut driver = PolicyDriver::new(policy, &behavior, &spec, deterministic, 1).unwrap();
    let report = play(&mut env, &mut driver, 20, 20_000).unwrap();
    env.close().unwrap();
    report
}

/// A fresh, empty folder under the system temp folder, unique to this process.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mlagents-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The golden fixtures (models/golden): case folder and behavior name.
pub const GOLDEN_CASES: [(&str, &str); 7] =
    [("discrete-masked", "GridWorld"), ("continuous", "3DBall"), ("hybrid", "1D"), ("visual", "1D"), ("recurrent", "1D"), ("entities", "1D"), ("entities-sentis", "1D")];

/// The extra `mlagents-export` flags of a golden case (its `export-args` file; none without).
pub fn golden_export_args(case: &str) -> Vec<String> {
    std::fs::read_to_string(golden_case_dir(case).join("export-args")).map(|text| text.split_whitespace().map(str::to_string).collect()).unwrap_or_default()
}

/// `models/golden/<case>`.
pub fn golden_case_dir(case: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/golden").join(case)
}

/// Starts `mlagents-learn CONFIG --run-id ID --env sim:Simple1DDiscrete --results-dir DIR EXTRA...`.
#[cfg(feature = "train")]
pub fn spawn_learn(config: &std::path::Path, run_id: &str, results: &std::path::Path, extra: &[&str]) -> std::process::Child {
    spawn_learn_on("Simple1DDiscrete", config, run_id, results, extra)
}

/// Starts `mlagents-learn CONFIG --run-id ID --env sim:SCENE --results-dir DIR EXTRA...`.
#[cfg(feature = "train")]
pub fn spawn_learn_on(scene: &str, config: &std::path::Path, run_id: &str, results: &std::path::Path, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-learn"))
        .args([config.to_str().unwrap(), "--run-id", run_id, "--env", &format!("sim:{scene}"), "--results-dir"])
        .arg(results)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child and returns whether it succeeded, with its stdout and stderr.
pub fn finish(child: std::process::Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Values a TensorBoard event file records for `tag` (simple values), in order.
pub fn scalars(events: &[u8], tag: &str) -> Vec<f32> {
    // Summary.Value: the tag (field 1), then simple_value (field 2, fixed32: key 0x15).
    let mut values = vec![];
    for (at, _) in events.windows(tag.len() + 1).enumerate().filter(|(_, w)| &w[1..] == tag.as_bytes() && w[0] as usize == tag.len()) {
        let after = at + 1 + tag.len();
        if events.get(after) == Some(&0x15) {
            values.push(f32::from_le_bytes(events[after + 1..after + 5].try_into().unwrap()));
        }
    }
    values
}

/// The bytes of the TensorBoard event file in `dir`.
pub fn event_file(dir: &std::path::Path) -> Vec<u8> {
    let path = dir
        .read_dir()
        .unwrap()
        .map(|f| f.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents"))
        .expect("event file");
    std::fs::read(path).unwrap()
}

/// A checkpoint's tensors without its parity record (`rollout.*`, which an export rewrites):
/// what a resume must restore exactly.
pub fn tensors_without_rollouts(c: &mlagents::checkpoint::Checkpoint) -> std::collections::BTreeMap<String, mlagents::policy::WeightTensor> {
    let mut tensors = c.tensors.0.clone();
    tensors.retain(|name, _| !name.starts_with(mlagents::checkpoint::ROLLOUT_PREFIX));
    tensors
}

/// `tests/fixtures/config/SparseSwitch.yaml` (0.28's ppo/Pyramids.yaml fitted to the scene)
/// with its curiosity block replaced by `signals` (YAML under `reward_signals:`; `None` keeps
/// it), `extra` behavior keys, `max_steps` and an environment seed.
pub fn sparse_switch_config(signals: Option<&str>, extra: &str, max_steps: u64, seed: i64) -> String {
    let fixture = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config/SparseSwitch.yaml")).unwrap();
    let (start, end) = (fixture.find("      curiosity:\n").unwrap(), fixture.find("    keep_checkpoints:").unwrap());
    let signals = signals.unwrap_or(&fixture[start..end]);
    let yaml = format!("{}{signals}{extra}{}", &fixture[..start], &fixture[end..]).replace("max_steps: 100000", &format!("max_steps: {max_steps}"));
    format!("{yaml}env_settings: {{base_port: 0, seed: {seed}}}\n")
}

/// The mean of the last 40 episode returns (five per agent of a SparseSwitch run).
pub fn last_40_mean(returns: &[f32]) -> f32 {
    let tail = &returns[returns.len().saturating_sub(40)..];
    tail.iter().sum::<f32>() / tail.len().max(1) as f32
}

/// The reference scripts' weights (`tests/peer/encoder_reference.py`'s `fill`): value i of
/// tensor `name` is `(((i·7919 + s·104729) mod 2001) − 1000) / 1000 / √fan_in`, s the sum of the
/// name's bytes, fan_in the product of the shape after its first dimension (1 for a bias).
pub fn reference_weight(name: &str, shape: &[usize]) -> mlagents::policy::WeightTensor {
    let s: i64 = name.bytes().map(i64::from).sum();
    let n: usize = shape.iter().product();
    let fan_in: usize = if shape.len() > 1 { shape[1..].iter().product() } else { 1 };
    let data = (0..n as i64).map(|i| ((((i * 7919 + s * 104_729) % 2001) - 1000) as f64 / 1000.0 / (fan_in as f64).sqrt()) as f32).collect();
    mlagents::policy::WeightTensor { shape: shape.to_vec(), data }
}

/// The cases of `tests/fixtures/attention/reference.json` (written by
/// `tests/peer/attention_reference.py` from the real 0.28 observation encoder).
pub fn attention_reference() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/attention/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A JSON array of sizes.
pub fn usizes(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

/// The attention reference script's `observation`: value k of row r of observation i is
/// ((37k + 11r + 5i) mod 101) / 50 − 1; an entity buffer keeps every entity in row 0, 0.02s
/// in entity 0 and entity 1 in row 1, nothing in row 2.
pub fn attention_observation(index: usize, shape: &[usize], row: usize) -> Vec<f32> {
    let size: usize = shape.iter().product();
    let values: Vec<f32> = (0..size).map(|k| ((((k * 37 + row * 11 + index * 5) % 101) as f64) / 50.0 - 1.0) as f32).collect();
    if shape.len() == 1 || row == 0 {
        return values;
    }
    let entity = shape[1];
    (0..size)
        .map(|k| match (row, k / entity) {
            (1, 0) => 0.02,
            (1, 1) => values[k],
            _ => 0.0,
        })
        .collect()
}

/// The seeds of the training cases that must pass on two seeds of three (our random streams
/// are not Python's: a case must pass on several seeds, not on one lucky one).
pub const THREE_SEEDS: [i64; 3] = [1337, 1338, 1339];

/// Runs `run` with `seeds` in turn until a majority of them has passed (`passes`) or failed,
/// and returns what each run that took place gave and how many of them passed: once two of
/// three agree, the third cannot change the verdict, so it is not paid for.
pub fn until_majority<T>(seeds: &[i64], passes: impl Fn(&T) -> bool, mut run: impl FnMut(i64) -> T) -> (Vec<T>, usize) {
    let majority = seeds.len() / 2 + 1;
    let (mut results, mut passed) = (Vec::with_capacity(seeds.len()), 0);
    for &seed in seeds {
        let result = run(seed);
        passed += usize::from(passes(&result));
        results.push(result);
        if passed >= majority || results.len() - passed >= majority {
            break;
        }
    }
    (results, passed)
}
