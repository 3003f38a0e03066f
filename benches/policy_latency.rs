//! Single-decision latency of a policy on our tract runner: median, p10 and p90 over many
//! runs after warm-up, at batch 1 and 12. `cargo bench --bench policy_latency -- MODEL...`
//! (default: 3DBall.onnx and 3DBall.nn of ../shared/models). `scripts/bench-policy.sh` runs
//! it beside onnxruntime on the same files.

use mlagents::run::{LoadOptions, NamedTensors, Policy, TensorData};
use std::path::PathBuf;
use std::time::Instant;

fn inputs(policy: &Policy, batch: usize) -> NamedTensors {
    let interface = policy.interface().expect("the model's interface");
    let declared: Vec<(String, Vec<usize>)> =
        interface.inputs.iter().map(|i| (i.name.clone(), i.dims.iter().map(|d| (*d).max(1) as usize).collect())).collect();
    declared
        .into_iter()
        .map(|(name, rest)| {
            let mut shape = vec![batch];
            shape.extend(rest);
            let n = shape.iter().product();
            let data = if name == "action_masks" { vec![1.0; n] } else { (0..n).map(|k| ((k * 37) % 100) as f32 / 100.0).collect() };
            (name, TensorData { shape, data })
        })
        .collect()
}

fn main() {
    let mut models: Vec<PathBuf> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(PathBuf::from).collect();
    if models.is_empty() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/models");
        models = vec![dir.join("onnx/3DBall.onnx"), dir.join("nn/3DBall.nn")];
    }
    for model in models {
        let deterministic = std::env::var_os("DETERMINISTIC").is_some();
        let policy = Policy::load(&model, LoadOptions { deterministic, seed: None, ..Default::default() }).expect("load");
        let batches: Vec<usize> = std::env::var("BATCHES").ok().map(|b| b.split(',').filter_map(|x| x.parse().ok()).collect()).unwrap_or(vec![1, 12]);
        for batch in batches {
            let feed = inputs(&policy, batch);
            for _ in 0..2000 {
                policy.run(&feed).expect("run");
            }
            let mut times: Vec<f64> = (0..20000)
                .map(|_| {
                    let start = Instant::now();
                    policy.run(&feed).expect("run");
                    start.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            times.sort_by(|a, b| a.total_cmp(b));
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "{{\"engine\": \"mlagents-rs (tract)\", \"model\": \"{}\", \"batch\": {batch}, \"median_us\": {:.2}, \"p10_us\": {:.2}, \"p90_us\": {:.2}}}",
                model.file_name().unwrap().to_string_lossy(),
                at(0.5),
                at(0.1),
                at(0.9)
            );
        }
    }
}
