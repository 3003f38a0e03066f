//! The training loop: environments stepped together, one PPO trainer per behavior (created
//! when the behavior first appears), updates when a trainer's buffer is full, until every
//! trainer has reached `max_steps`; then each policy is exported to ONNX.

use super::trainer::PpoTrainer;
use crate::comm::side_channel::{shared, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, ParameterValue, Sampler, SharedSideChannel};
use crate::env::{EnvOptions, VecEnv};
use crate::spec::BehaviorName;
use crate::train::config::{EnvironmentParameter, RunOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by SIGINT/SIGTERM: training stops after the current step, closes the environments
/// and still exports.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

fn install_stop_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, request_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, request_stop as *const () as libc::sighandler_t);
    }
}

/// How to run a training session besides the configuration.
#[derive(Debug, Clone)]
pub struct LearnOptions {
    /// `--env`: a build, `sim:SCENE`, or `None` for the Editor.
    pub env: Option<String>,
    /// Where `<Behavior>.onnx`, TensorBoard files and `configuration.yaml` go (None: nowhere).
    pub run_dir: Option<PathBuf>,
    pub timeout_wait: Duration,
}

/// What a session achieved, per behavior.
#[derive(Debug, Clone)]
pub struct BehaviorResult {
    pub steps: u64,
    pub episode_returns: Vec<f32>,
    pub summaries: Vec<String>,
    pub onnx: Option<PathBuf>,
}

fn side_channels(run: &RunOptions) -> Vec<SharedSideChannel> {
    let engine = shared(EngineConfigurationChannel::new());
    let e = &run.engine_settings;
    engine.lock().unwrap_or_else(|p| p.into_inner()).set_configuration(EngineConfig {
        width: Some(e.width),
        height: Some(e.height),
        quality_level: Some(e.quality_level),
        time_scale: Some(e.time_scale),
        target_frame_rate: Some(e.target_frame_rate),
        capture_frame_rate: Some(e.capture_frame_rate),
    });
    let params = shared(EnvironmentParametersChannel::new());
    {
        let mut p = params.lock().unwrap_or_else(|p| p.into_inner());
        for (key, value) in &run.environment_parameters {
            let value = match value {
                EnvironmentParameter::Constant(v) => ParameterValue::Float(*v as f32),
                EnvironmentParameter::Uniform { min_value, max_value, seed } => {
                    ParameterValue::Sampled { seed: *seed, sampler: Sampler::Uniform { min: *min_value as f32, max: *max_value as f32 } }
                }
                EnvironmentParameter::Gaussian { mean, st_dev, seed } => {
                    ParameterValue::Sampled { seed: *seed, sampler: Sampler::Gaussian { mean: *mean as f32, std_dev: *st_dev as f32 } }
                }
                EnvironmentParameter::MultiRangeUniform { intervals, seed } => ParameterValue::Sampled {
                    seed: *seed,
                    sampler: Sampler::MultiRangeUniform { intervals: intervals.iter().map(|(a, b)| (*a as f32, *b as f32)).collect() },
                },
            };
            p.set_parameter(key, value);
        }
    }
    let stats = shared(crate::comm::side_channel::StatsSideChannel::new());
    vec![engine, params, stats]
}

/// Trains until every behavior's trainer has reached its `max_steps`.
pub fn learn(run: &RunOptions, options: &LearnOptions) -> Result<BTreeMap<String, BehaviorResult>, String> {
    // As mlagents-learn: seed -1 draws one in [0, 10000).
    let seed = if run.env_settings.seed < 0 { rand::random::<u64>() % 10_000 } else { run.env_settings.seed as u64 };
    let base = EnvOptions {
        env: options.env.clone(),
        base_port: Some(run.env_settings.base_port),
        seed: seed as i32,
        no_graphics: run.engine_settings.no_graphics || options.env.as_deref().is_some_and(|e| e.starts_with("sim:")),
        timeout_wait: options.timeout_wait,
        additional_args: run.env_settings.env_args.clone().unwrap_or_default(),
        debug_output: run.debug,
        ..Default::default()
    };
    let mut envs = VecEnv::new(run.env_settings.num_envs.max(1), |w| VecEnv::worker_options(&base, w, &|_| side_channels(run)))
        .map_err(|e| e.to_string())?;
    envs.reset().map_err(|e| e.to_string())?;
    install_stop_handlers();
    let mut trainers: BTreeMap<String, PpoTrainer> = BTreeMap::new();
    loop {
        if STOP_REQUESTED.load(Ordering::SeqCst) {
            log::info!("stop requested: closing the environments and exporting");
            break;
        }
        for (worker, env) in envs.envs_mut().iter_mut().enumerate() {
            for name in env.behavior_names() {
                if !trainers.contains_key(&name) {
                    let brain = BehaviorName::parse(&name).name;
                    let settings = run
                        .settings_for(&brain)
                        .ok_or_else(|| format!("behavior name {brain} has not been specified in the configuration"))?
                        .clone();
                    let tensorboard = options.run_dir.as_ref().map(|d| d.join(&brain));
                    let spec = env.behavior_specs()[&name].clone();
                    trainers.insert(name.clone(), PpoTrainer::new(&brain, &spec, settings, seed, tensorboard.as_deref())?);
                }
                let trainer = trainers.get_mut(&name).expect("inserted above");
                let (decisions, terminals) = env.get_steps(&name).map_err(|e| e.to_string())?;
                let (actions, chosen) = trainer.act(&decisions);
                if trainer.should_train() {
                    trainer.ingest(worker, &decisions, &terminals, chosen);
                }
                env.set_actions(&name, actions).map_err(|e| e.to_string())?;
            }
        }
        for trainer in trainers.values_mut() {
            if trainer.should_train() {
                trainer.maybe_update();
            }
        }
        if !trainers.is_empty() && trainers.values().all(|t| !t.should_train()) {
            break;
        }
        envs.step().map_err(|e| e.to_string())?;
    }
    envs.close().map_err(|e| e.to_string())?;
    let mut results = BTreeMap::new();
    for trainer in trainers.values() {
        let onnx = match &options.run_dir {
            Some(dir) => Some(export(trainer, dir)?),
            None => None,
        };
        results.insert(
            trainer.behavior.clone(),
            BehaviorResult { steps: trainer.step, episode_returns: trainer.episode_returns.clone(), summaries: trainer.summaries.clone(), onnx },
        );
    }
    Ok(results)
}

fn export(trainer: &PpoTrainer, dir: &Path) -> Result<PathBuf, String> {
    let (description, weights) = trainer.policy();
    let bytes = crate::onnx::export::to_onnx_bytes(&description, &weights).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{}.onnx", trainer.behavior));
    std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    // The Barracuda export for older Unity packages (not for hybrid actions, which it cannot express).
    match crate::barracuda::export::to_nn(&description, &weights) {
        Ok(model) => {
            let nn = dir.join(format!("{}.nn", trainer.behavior));
            std::fs::write(&nn, crate::barracuda::write(&model)).map_err(|e| format!("{}: {e}", nn.display()))?;
        }
        Err(e) => log::info!("{}: no .nn export: {e}", trainer.behavior),
    }
    Ok(path)
}
