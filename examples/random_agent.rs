//! Plays random valid actions against an environment with the `env` API and prints episode
//! statistics per behavior: what a user script against `mlagents_envs` looks like here.
//!
//! `cargo run --release --example random_agent -- [ENV] [STEPS]`
//! ENV is `sim:SCENE` (default `sim:3DBall`), a Unity build path, or `editor`.

use mlagents::comm::side_channel::{shared, EngineConfig, EngineConfigurationChannel, StatsSideChannel};
use mlagents::env::{ActionTuple, EnvOptions, UnityEnvironment};
use rand::SeedableRng;
use std::collections::BTreeMap;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = args.first().cloned().unwrap_or_else(|| "sim:3DBall".into());
    let steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let engine = shared(EngineConfigurationChannel::new());
    engine.lock().unwrap().set_configuration(EngineConfig::mlagents_learn_default());
    let stats = shared(StatsSideChannel::new());
    let options = EnvOptions {
        env: (target != "editor").then_some(target.clone()),
        side_channels: vec![engine, stats.clone()],
        ..Default::default()
    };
    let mut env = UnityEnvironment::new(options)?;
    env.reset()?;
    println!("{target}: {}", env.academy_name());
    for (name, spec) in env.behavior_specs() {
        let shapes: Vec<_> = spec.observation_specs.iter().map(|o| o.shape.clone()).collect();
        println!("  {name}: observations {shapes:?}, actions {}", spec.action_spec);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut running: BTreeMap<(String, i32), f32> = BTreeMap::new();
    let mut finished: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    let start = std::time::Instant::now();
    for _ in 0..steps {
        for name in env.behavior_names() {
            let spec = env.behavior_specs()[&name].action_spec.clone();
            let (decisions, terminals) = env.get_steps(&name)?;
            for (i, id) in terminals.agent_id.iter().enumerate() {
                let total = running.remove(&(name.clone(), *id)).unwrap_or(0.0) + terminals.reward[i];
                finished.entry(name.clone()).or_default().push(total);
            }
            for (i, id) in decisions.agent_id.iter().enumerate() {
                *running.entry((name.clone(), *id)).or_default() += decisions.reward[i];
            }
            env.set_actions(&name, ActionTuple::random(&spec, &decisions, &mut rng))?;
        }
        env.step()?;
    }
    let seconds = start.elapsed().as_secs_f64();
    for (name, returns) in &finished {
        let mean = returns.iter().sum::<f32>() / returns.len() as f32;
        println!("  {name}: {} episodes, mean return {mean:.3}", returns.len());
    }
    let scene_stats = stats.lock().unwrap().get_and_reset_stats();
    println!("  stats from the scene: {:?}", scene_stats.keys().collect::<Vec<_>>());
    println!("  {steps} steps in {seconds:.2} s ({:.0} steps/s)", steps as f64 / seconds);
    env.close()?;
    Ok(())
}
