//! Environment steps per second with random actions, driven by our `env` API.
//! `cargo bench --bench env_steps -- [SCENE] [STEPS]` (default 3DBall, 3000 steps).
//! `scripts/bench-env.sh` runs it beside the Python `mlagents_envs` client on the same scene.

use mlagents::env::{ActionTuple, EnvOptions, UnityEnvironment};
use rand::SeedableRng;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let scene = args.first().cloned().unwrap_or_else(|| "3DBall".into());
    let steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3000);
    let options = EnvOptions { env: Some(format!("sim:{scene}")), base_port: Some(0), ..Default::default() };
    let mut env = UnityEnvironment::new(options).expect("start the scene");
    env.reset().expect("reset");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut agent_steps = 0usize;
    let start = Instant::now();
    for _ in 0..steps {
        for name in env.behavior_names() {
            let spec = env.behavior_specs()[&name].action_spec.clone();
            let (decisions, _) = env.steps_ref(&name).expect("steps");
            agent_steps += decisions.len();
            let actions = ActionTuple::random(&spec, decisions, &mut rng);
            env.set_actions(&name, actions).expect("actions");
        }
        env.step().expect("step");
    }
    let seconds = start.elapsed().as_secs_f64();
    env.close().expect("close");
    println!(
        "{{\"client\": \"mlagents-rs\", \"scene\": \"{scene}\", \"steps\": {steps}, \"agent_steps\": {agent_steps}, \"seconds\": {seconds:.3}, \"steps_per_second\": {:.1}}}",
        steps as f64 / seconds
    );
}
