//! Single-decision latency of a policy on our tract runner, as deterministic play runs it (only
//! the action outputs computed): median, p10 and p90 after warm-up, at each batch size. The
//! inputs are prepared once in the runner's tensors and read in place by every run, as
//! onnxruntime reads the caller's numpy arrays in place.
//! `cargo bench --bench policy_latency -- MODEL...` (default: 3DBall.onnx and 3DBall.nn of
//! ../shared/models; `BATCHES=1,12,64`). `scripts/bench-policy.sh` runs it beside onnxruntime
//! on the same files and prints the table.

use mlagents::run::{LoadOptions, NamedTensors, Policy, TensorData};

/// The allocator `mlagents-run` uses (tract allocates per call).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use mlagents::spec::model;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Most timed runs per case, and the time after which a case stops early.
const RUNS: usize = 20_000;
const BUDGET: Duration = Duration::from_secs(3);

fn inputs(policy: &Policy, batch: usize) -> NamedTensors {
    let interface = policy.interface().expect("the model's interface");
    interface
        .inputs
        .iter()
        .map(|i| {
            let mut shape = vec![batch];
            shape.extend(i.dims.iter().map(|d| (*d).max(1) as usize));
            let n = shape.iter().product();
            let data = match i.name.as_str() {
                model::ACTION_MASKS => vec![1.0; n],
                // Indices into each branch (a TF-era model's one-hot input).
                model::PREV_ACTION => vec![0.0; n],
                _ => (0..n).map(|k| ((k * 37) % 100) as f32 / 100.0).collect(),
            };
            (i.name.clone(), TensorData { shape, data })
        })
        .collect()
}

/// The outputs deterministic play reads: the deterministic actions of model API 3, else
/// `action`, and a recurrent model's memories (the same names
/// `benches/policy_latency_onnxruntime.py` asks for).
fn action_outputs(policy: &Policy) -> Vec<String> {
    let has = |name: &str| policy.outputs().iter().any(|o| o == name);
    let mut outputs: Vec<String> =
        [model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::DETERMINISTIC_DISCRETE_ACTIONS].into_iter().filter(|n| has(n)).map(String::from).collect();
    if outputs.is_empty() {
        outputs.push(model::ACTION.into());
    }
    outputs.extend(policy.interface().expect("the model's interface").memories.iter().map(|m| m.output.clone()));
    outputs
}

fn main() {
    mlagents::engine::allocator::keep_freed_memory();
    let mut models: Vec<PathBuf> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(PathBuf::from).collect();
    if models.is_empty() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/models");
        models = vec![dir.join("onnx/3DBall.onnx"), dir.join("nn/3DBall.nn")];
    }
    let batches: Vec<usize> = std::env::var("BATCHES").ok().map(|b| b.split(',').filter_map(|x| x.parse().ok()).collect()).unwrap_or(vec![1, 12, 64]);
    for model in models {
        let mut policy = Policy::load(&model, LoadOptions { deterministic: true, ..Default::default() }).expect("load");
        let outputs = action_outputs(&policy);
        policy.keep_outputs(&outputs.iter().map(String::as_str).collect::<Vec<_>>()).expect("action outputs");
        for &batch in &batches {
            let feed = policy.prepare(&inputs(&policy, batch)).expect("inputs");
            let warm = Instant::now();
            while warm.elapsed() < BUDGET / 10 {
                policy.run_prepared(&feed).expect("run");
            }
            let start = Instant::now();
            let mut times = Vec::with_capacity(RUNS);
            while times.len() < RUNS && start.elapsed() < BUDGET {
                let t = Instant::now();
                policy.run_prepared(&feed).expect("run");
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(|a, b| a.total_cmp(b));
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "{{\"engine\": \"mlagents-rs (tract)\", \"model\": \"{}\", \"outputs\": {outputs:?}, \"batch\": {batch}, \"runs\": {}, \"median_us\": {:.2}, \"p10_us\": {:.2}, \"p90_us\": {:.2}}}",
                model.file_name().unwrap().to_string_lossy(),
                times.len(),
                at(0.5),
                at(0.1),
                at(0.9)
            );
        }
    }
}
