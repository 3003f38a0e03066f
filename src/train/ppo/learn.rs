//! The training loop: environments stepped together, one PPO trainer per behavior (created
//! when the behavior first appears, from a checkpoint when resuming or initialising), updates
//! when a trainer's buffer is full, checkpoints (with their exports) every
//! `checkpoint_interval`, until every trainer has reached `max_steps` or a stop is requested;
//! then a final checkpoint, the final exports, and the run logs.

use super::trainer::PpoTrainer;
use crate::comm::side_channel::{shared, StatsSideChannel, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, SharedSideChannel};
use crate::env::{EnvOptions, VecEnv};
use crate::spec::BehaviorName;
use crate::train::config::RunOptions;
use crate::export::{export_checkpoint, ExportOptions};
use crate::checkpoint;
use crate::train::error::TrainError;
use crate::train::run_logs::{write_training_status, Timers};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What a training session tells whoever runs it; the library itself prints nothing and
/// draws nothing (`mlagents-learn` prints the summaries and draws a progress bar).
pub trait LearnObserver {
    /// A summary line, in ML-Agents' console format.
    fn summary(&mut self, _line: &str) {}
    /// Steps done by all behaviors (each counted up to its `max_steps`), their total, and the
    /// steps this session has taken.
    fn progress(&mut self, _done: u64, _total: u64, _gained: u64) {}
    /// The session has stopped stepping.
    fn finished(&mut self) {}
}

/// An observer that ignores everything.
pub struct Silent;

impl LearnObserver for Silent {}

/// How to run a training session besides the configuration.
#[derive(Debug, Clone)]
pub struct LearnOptions {
    /// `--env`: a build, `sim:SCENE`, or `None` for the Editor.
    pub env: Option<String>,
    /// The run folder: checkpoints, exports, TensorBoard files, run logs (None: nothing is
    /// written, no checkpoints).
    pub run_dir: Option<PathBuf>,
    pub timeout_wait: Duration,
    /// `--resume`: continue every behavior from its latest checkpoint in `run_dir` (step,
    /// weights, normalisers, optimizer state).
    pub resume: bool,
    /// `--initialize-from`: another run folder whose latest checkpoints give the initial
    /// weights (step 0, fresh optimizer).
    pub initialize_from: Option<PathBuf>,
    /// The resolved configuration, written to `<run>/configuration.yaml` once every behavior
    /// present at the first reset has its trainer (for `--resume`: once its checkpoint has
    /// loaded), so a failed start or resume leaves the earlier record as it was.
    pub configuration_yaml: Option<String>,
    /// Set (e.g. by a signal handler) to stop after the current step: a checkpoint is written,
    /// the environments closed and the policies exported.
    pub stop: Option<&'static AtomicBool>,
}

impl LearnOptions {
    /// Options for `env` with nothing written to disk.
    pub fn in_memory(env: &str) -> Self {
        Self { env: Some(env.into()), run_dir: None, timeout_wait: Duration::from_secs(60), resume: false, initialize_from: None, configuration_yaml: None, stop: None }
    }
}

/// What a session achieved, per behavior.
#[derive(Debug, Clone)]
pub struct BehaviorResult {
    pub steps: u64,
    pub episode_returns: Vec<f32>,
    pub summaries: Vec<String>,
    /// The final `<Behavior>.onnx` in the run folder.
    pub onnx: Option<PathBuf>,
    /// Steps of the checkpoints written in this session.
    pub checkpoints: Vec<u64>,
}

/// The stats channel of one environment (what the scene reports, e.g. `Sim/...` values).
type StatsChannel = std::sync::Arc<std::sync::Mutex<StatsSideChannel>>;

fn side_channels(run: &RunOptions, stats: StatsChannel) -> Vec<SharedSideChannel> {
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
        // Every parameter is in its first lesson (curricula of several lessons are refused).
        for parameter in &run.environment_parameters {
            p.set_parameter(&parameter.name, parameter.curriculum[0].value.to_side_channel());
        }
    }
    vec![engine, params, stats]
}

/// Creates a behavior's trainer, loading its starting point for `--resume` or
/// `--initialize-from` (or the behavior's `init_path`).
fn create_trainer(run: &RunOptions, options: &LearnOptions, name: &str, spec: &crate::spec::BehaviorSpec, seed: u64) -> Result<PpoTrainer, TrainError> {
    let brain = BehaviorName::parse(name).name;
    let settings = run
        .settings_for(&brain)
        .ok_or_else(|| {
            let named: Vec<&str> = run.behaviors.keys().map(String::as_str).collect();
            let named = if named.is_empty() { "no behavior".to_string() } else { named.join(", ") };
            TrainError::Mismatch(format!("the environment's behavior {brain} is not in the configuration, which names {named}; add it under behaviors: or give default_settings"))
        })?
        .clone();
    let tensorboard = options.run_dir.as_ref().map(|d| d.join(&brain));
    if let (Some(dir), false) = (&tensorboard, options.resume) {
        // As ML-Agents: a new (not resumed) run starts its TensorBoard files afresh.
        remove_event_files(dir);
    }
    let init_path = settings.init_path.clone();
    let mut trainer = PpoTrainer::new(&brain, spec, settings, seed, tensorboard.as_deref())?;
    if options.resume {
        let dir = options.run_dir.as_ref().ok_or_else(|| TrainError::Mismatch("--resume needs a run folder".into()))?.join(&brain);
        let c = checkpoint::latest(&dir, &brain).map_err(|e| TrainError::checkpoint(format!("cannot resume {brain}"), e))?;
        trainer.restore(&c, true)?;
        log::info!("Resuming training of {brain} from step {} ({})", c.description.step, c.path.display());
    } else if let Some(from) = &options.initialize_from {
        let c = checkpoint::latest(&from.join(&brain), &brain).map_err(|e| TrainError::checkpoint(format!("cannot initialize {brain} from {}", from.display()), e))?;
        trainer.restore(&c, false)?;
        log::info!("Initializing {brain} from {}", c.path.display());
    } else if let Some(path) = init_path {
        let c = checkpoint::Checkpoint::read(Path::new(&path)).map_err(|e| TrainError::checkpoint(format!("init_path of {brain}"), e))?;
        trainer.restore(&c, false)?;
        log::info!("Initializing {brain} from {path}");
    }
    Ok(trainer)
}

fn remove_event_files(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("events.out.tfevents") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes a checkpoint labelled `step` into `<run>/<Behavior>/`, verifies it by reading it
/// back, exports `<Behavior>-<step>.onnx` / `.nn` beside it, and drops the oldest beyond
/// `keep_checkpoints`.
fn save_checkpoint(trainer: &PpoTrainer, run_dir: &Path, step: u64) -> Result<checkpoint::Checkpoint, TrainError> {
    let dir = run_dir.join(&trainer.behavior);
    let (description, tensors) = trainer.checkpoint(step);
    let path = checkpoint::Checkpoint::write(&dir, description, &tensors).map_err(|source| TrainError::Checkpoint { context: None, source })?;
    let saved = checkpoint::Checkpoint::read(&path).map_err(|e| TrainError::checkpoint("checkpoint written but unreadable", e))?;
    let stem = checkpoint::stem(&trainer.behavior, step);
    export_checkpoint(&saved, &dir, &stem, ExportOptions::default(), false)?;
    checkpoint::prune(&dir, &trainer.behavior, trainer.settings.keep_checkpoints);
    log::info!("Exported {}", dir.join(format!("{stem}.onnx")).display());
    Ok(saved)
}

/// `run_logs/training_status.json` of a run folder (named in errors).
fn training_status_path(run_dir: &Path) -> PathBuf {
    run_dir.join("run_logs").join("training_status.json")
}

/// Where an agent's steps come from, for the trajectory assembly: its environment (worker)
/// and its team, so that agents of two teams of one behavior never mix.
fn agent_source(worker: usize, team_id: i32) -> usize {
    const TEAMS_PER_WORKER: usize = 1 << 16;
    worker * TEAMS_PER_WORKER + team_id.clamp(0, TEAMS_PER_WORKER as i32 - 1) as usize
}

/// Trains until every behavior's trainer has reached its `max_steps` (or a stop is asked
/// for), telling nobody how it goes.
pub fn learn(run: &RunOptions, options: &LearnOptions) -> Result<BTreeMap<String, BehaviorResult>, TrainError> {
    learn_observed(run, options, &mut Silent)
}

/// [`learn`], reporting summaries and progress to `observer`.
pub fn learn_observed(run: &RunOptions, options: &LearnOptions, observer: &mut dyn LearnObserver) -> Result<BTreeMap<String, BehaviorResult>, TrainError> {
    // As mlagents-learn: seed -1 draws one in [0, 10000); the parameters' seeds follow it.
    let mut run = run.clone();
    run.resolve_seeds();
    let run = &run;
    let seed = run.env_settings.seed as u64;
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
    for parameter in &run.environment_parameters {
        let lesson = &parameter.curriculum[0];
        log::info!("Parameter '{}' is in lesson '{}' and has value '{}'.", parameter.name, lesson.name, lesson.value.describe());
    }
    let workers = run.env_settings.num_envs.max(1);
    let stats_channels: Vec<StatsChannel> = (0..workers).map(|_| shared(StatsSideChannel::new())).collect();
    let mut envs = VecEnv::new(workers, |w| VecEnv::worker_options(&base, w, &|w| side_channels(run, stats_channels[w as usize].clone())))?;
    envs.reset()?;
    let mut session = Session {
        run,
        options,
        seed,
        trainers: BTreeMap::new(),
        team_specs: BTreeMap::new(),
        seen: BTreeSet::new(),
        timers: Timers::default(),
        observer,
        checkpoints: BTreeMap::new(),
        configuration_pending: options.configuration_yaml.as_deref(),
    };
    let mut failure = None;
    loop {
        if options.stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) {
            log::info!("stop requested: closing the environments and exporting");
            break;
        }
        match session.advance(&mut envs, &stats_channels) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    session.observer.finished();
    if let Err(e) = envs.close() {
        match &failure {
            None => failure = Some(e.into()),
            Some(_) => log::warn!("closing the environments: {e}"),
        }
    }
    // Whatever happened, what was trained is saved before the error is reported.
    let results = session.finish()?;
    match failure {
        None => Ok(results),
        Some(e) if options.run_dir.is_some() && !results.is_empty() => {
            let saved: Vec<String> = results
                .iter()
                .map(|(b, r)| match r.checkpoints.last() {
                    Some(step) => format!("{b} at step {step}"),
                    None => format!("none of {b} in this session"),
                })
                .collect();
            Err(TrainError::AfterCheckpoints { error: Box::new(e), saved: saved.join(", ") })
        }
        Some(e) => Err(e),
    }
}

/// The training state across environment steps.
struct Session<'a, 'o> {
    run: &'a RunOptions,
    options: &'a LearnOptions,
    seed: u64,
    /// One trainer per behavior (brain) name.
    trainers: BTreeMap<String, PpoTrainer>,
    /// The spec of each behavior's first team.
    team_specs: BTreeMap<String, crate::spec::BehaviorSpec>,
    /// Every behavior id (`Name?team=N`) seen.
    seen: BTreeSet<String>,
    timers: Timers,
    observer: &'o mut dyn LearnObserver,
    /// Steps of the checkpoints written, per behavior.
    checkpoints: BTreeMap<String, Vec<u64>>,
    /// `configuration.yaml`, until it is written (after the first round of trainers).
    configuration_pending: Option<&'a str>,
}

impl Session<'_, '_> {
    /// Acts for every behavior of every environment, trains where a buffer is full, writes due
    /// checkpoints and steps the environments. Returns false once every trainer is done.
    fn advance(&mut self, envs: &mut VecEnv, stats_channels: &[StatsChannel]) -> Result<bool, TrainError> {
        let mut checkpointed = false;
        for (worker, env) in envs.envs_mut().iter_mut().enumerate() {
            for name in env.behavior_names() {
                // Without self-play, the teams of one behavior share its policy, as ML-Agents'
                // PPO trainer does.
                let parsed = BehaviorName::parse(&name);
                let spec = env.behavior_specs()[&name].clone();
                if !self.trainers.contains_key(&parsed.name) {
                    self.trainers.insert(parsed.name.clone(), create_trainer(self.run, self.options, &name, &spec, self.seed)?);
                    self.team_specs.insert(parsed.name.clone(), spec.clone());
                } else if !self.seen.contains(&name) {
                    let shapes = |s: &crate::spec::BehaviorSpec| (s.observation_specs.iter().map(|o| o.shape.clone()).collect::<Vec<_>>(), s.action_spec.clone());
                    if shapes(&self.team_specs[&parsed.name]) != shapes(&spec) {
                        return Err(TrainError::Mismatch(format!("{name} and another team of {} have different behavior specs; one policy cannot serve both", parsed.name)));
                    }
                    log::warn!("{} has several teams; without self-play they share one policy", parsed.name);
                }
                self.seen.insert(name.clone());
                let trainer = self.trainers.get_mut(&parsed.name).expect("inserted above");
                let timers = &mut self.timers;
                let (decisions, terminals) = env.get_steps(&name)?;
                let (actions, chosen) = timers.time("act", || trainer.act(&decisions))?;
                if trainer.should_train() {
                    let source = agent_source(worker, parsed.team_id);
                    timers.time("process_trajectory", || trainer.ingest(source, &decisions, &terminals, chosen));
                }
                for line in trainer.new_summaries() {
                    self.observer.summary(&line);
                }
                if let (Some(step), Some(dir)) = (trainer.pending_checkpoint.take(), &self.options.run_dir) {
                    timers.time("save_checkpoint", || save_checkpoint(trainer, dir, step))?;
                    self.checkpoints.entry(trainer.behavior.clone()).or_default().push(step);
                    checkpointed = true;
                }
                env.set_actions(&name, actions)?;
            }
        }
        if let (true, Some(dir)) = (checkpointed, &self.options.run_dir) {
            // As ML-Agents: the status lists the checkpoints as they are written, so it is
            // true after a crash too.
            let behaviors: Vec<String> = self.trainers.keys().cloned().collect();
            write_training_status(dir, &behaviors, &BTreeMap::new()).map_err(|e| TrainError::writing(training_status_path(dir), e))?;
        }
        if let (Some(yaml), Some(dir)) = (self.configuration_pending.take(), &self.options.run_dir) {
            let path = dir.join("configuration.yaml");
            checkpoint::write_atomic(&path, yaml.as_bytes()).map_err(|e| TrainError::writing(path, e))?;
        }
        for trainer in self.trainers.values_mut() {
            if trainer.should_train() {
                self.timers.time("update_policy", || trainer.maybe_update())?;
            }
        }
        let total: u64 = self.trainers.values().map(|t| t.settings.max_steps).sum();
        let done: u64 = self.trainers.values().map(|t| t.step.min(t.settings.max_steps)).sum();
        let gained = self.trainers.values().map(|t| t.step.saturating_sub(t.initial_step)).sum();
        self.observer.progress(done, total, gained);
        if !self.trainers.is_empty() && self.trainers.values().all(|t| !t.should_train()) {
            return Ok(false);
        }
        self.timers.time("env_step", || envs.step())?;
        // What the scenes report on the stats channel goes to every behavior's summaries
        // (as ML-Agents records environment stats for each behavior of the environment).
        for channel in stats_channels {
            let received = crate::comm::side_channel::lock(channel).get_and_reset_stats();
            for (key, values) in received {
                for v in values {
                    self.trainers.values_mut().for_each(|t| t.add_environment_stat(&key, v.value, v.aggregation));
                }
            }
        }
        Ok(true)
    }

    /// The final checkpoint of each behavior at its current step, its exports in the run
    /// folder, and the run logs.
    fn finish(mut self) -> Result<BTreeMap<String, BehaviorResult>, TrainError> {
        let mut results = BTreeMap::new();
        let mut final_steps = BTreeMap::new();
        for trainer in self.trainers.values() {
            let mut onnx = None;
            if trainer.diverged {
                log::warn!("{}: not checkpointed (its weights are not finite); its last checkpoint on disk is its last good one", trainer.behavior);
            } else if let Some(dir) = &self.options.run_dir {
                let saved = save_checkpoint(trainer, dir, trainer.step)?;
                self.checkpoints.entry(trainer.behavior.clone()).or_default().push(trainer.step);
                let exported = export_checkpoint(&saved, dir, &trainer.behavior, ExportOptions::default(), true)?;
                if let Some(why) = &exported.nn_skipped {
                    log::info!("{}: no .nn export: {why}", trainer.behavior);
                }
                log::info!("Exported {}", exported.onnx.display());
                onnx = Some(exported.onnx);
                final_steps.insert(trainer.behavior.clone(), trainer.step);
            }
            if let Some(mean) = trainer.last_summary_reward() {
                self.timers.gauge(&format!("{}.Environment.Cumulative Reward.mean", trainer.behavior), mean as f64);
            }
            results.insert(
                trainer.behavior.clone(),
                BehaviorResult {
                    steps: trainer.step,
                    episode_returns: trainer.episode_returns.clone(),
                    summaries: trainer.summaries.clone(),
                    onnx,
                    checkpoints: self.checkpoints.get(&trainer.behavior).cloned().unwrap_or_default(),
                },
            );
        }
        if let Some(dir) = &self.options.run_dir {
            let behaviors: Vec<String> = self.trainers.keys().cloned().collect();
            write_training_status(dir, &behaviors, &final_steps).map_err(|e| TrainError::writing(training_status_path(dir), e))?;
            self.timers.write(dir).map_err(|e| TrainError::writing(dir.join("run_logs").join("timers.json"), e))?;
        }
        Ok(results)
    }
}
