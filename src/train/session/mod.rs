//! The training session every trainer shares (the `train` feature): environments stepped
//! together, one trainer per behavior (created when the behavior first appears, from a
//! checkpoint when resuming or initialising), updates when a trainer is ready, checkpoints
//! (with their exports) every `checkpoint_interval`, until every trainer has reached
//! `max_steps` or a stop is requested; then a final checkpoint, the final exports, and the run
//! logs. [`league`] and [`ghost`] are self-play, [`persistence`] what a run keeps on disk,
//! [`options`] what the command line says besides the configuration.

mod ghost;
mod groups;
mod league;
mod options;
mod overlap;
mod parity;
mod persistence;
mod restarts;
pub mod trainer;

use trainer::BehaviorTrainer;
use league::League;
pub use options::LearnOptions;
use persistence::{create_trainer, restore_lessons, save_checkpoint, training_status_path};
use crate::comm::side_channel::{shared, StatsSideChannel, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, SharedSideChannel};
use crate::env::{EnvOptions, VecEnv};
use crate::spec::BehaviorName;
use crate::train::config::RunOptions;
use crate::train::networks::OneThread;
use crate::export::{export_checkpoint, ExportOptions};
use crate::checkpoint;
use crate::train::error::TrainError;
use crate::train::trajectory::{agent_source, EndedEpisodes};
use crate::train::curriculum::{LessonManager, TrainerStanding, LESSON_NUMBER_TAG};
use crate::train::run_logs::{read_status_values, write_training_status, Timers, ELO};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

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
    /// Returns of the episodes each team finished, in order (with self-play, whether the
    /// trainable network or a ghost played it).
    pub team_returns: BTreeMap<i32, Vec<f32>>,
    /// Updates that ran on the update thread (`threaded: true`) while the environments stepped.
    pub updates_on_thread: u64,
}

/// The stats channel of one environment (what the scene reports, e.g. `Sim/...` values).
type StatsChannel = std::sync::Arc<std::sync::Mutex<StatsSideChannel>>;
/// The environment parameters channel of one environment.
type ParametersChannel = std::sync::Arc<std::sync::Mutex<EnvironmentParametersChannel>>;

/// Queues every parameter's current lesson value on each environment's channel (they travel
/// with the next reset or step).
fn send_parameters(lessons: &LessonManager, channels: &[ParametersChannel]) {
    for channel in channels {
        let mut channel = crate::comm::side_channel::lock(channel);
        for (name, value) in lessons.current_values() {
            channel.set_parameter(&name, value);
        }
    }
}

fn side_channels(run: &RunOptions, params: ParametersChannel, stats: StatsChannel) -> Vec<SharedSideChannel> {
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
    vec![engine, params, stats]
}


/// How to start the run's environments (before each worker's port and side channels).
fn environment_options(run: &RunOptions, options: &LearnOptions) -> EnvOptions {
    EnvOptions {
        env: options.env.clone(),
        base_port: Some(run.env_settings.base_port),
        seed: run.env_settings.seed as i32,
        no_graphics: run.engine_settings.no_graphics || options.env.as_deref().is_some_and(|e| e.starts_with("sim:")),
        timeout_wait: options.timeout_wait,
        additional_args: run.env_settings.env_args.clone().unwrap_or_default(),
        debug_output: run.debug,
        ..Default::default()
    }
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
    let seed = match (options.resume, &options.run_dir) {
        (true, Some(dir)) => persistence::resumed_seed(run.env_settings.seed as u64, dir),
        _ => run.env_settings.seed as u64,
    };
    let _one_thread = OneThread::for_run(run);
    let base = EnvOptions { seed: seed as i32, ..environment_options(run, options) };
    let mut lessons = LessonManager::new(run.environment_parameters.clone());
    if let (true, Some(dir)) = (options.resume, &options.run_dir) {
        restore_lessons(dir, &mut lessons)?;
    }
    let workers = run.env_settings.num_envs.max(1);
    let stats_channels: Vec<StatsChannel> = (0..workers).map(|_| shared(StatsSideChannel::new())).collect();
    let parameter_channels: Vec<ParametersChannel> = (0..workers).map(|_| shared(EnvironmentParametersChannel::new())).collect();
    send_parameters(&lessons, &parameter_channels);
    let options_for = |w: u32| VecEnv::worker_options(&base, w, &|w| side_channels(run, parameter_channels[w as usize].clone(), stats_channels[w as usize].clone()));
    let mut envs = VecEnv::new(workers, &options_for)?;
    envs.reset()?;
    // As 0.28: every parameter's lesson, once the environments have their values.
    for k in 0..run.environment_parameters.len() {
        log::info!("{}", lessons.lesson_line(k));
    }
    let mut session = Session {
        run,
        options,
        seed,
        trainers: BTreeMap::new(),
        league: League::new(seed),
        team_returns: BTreeMap::new(),
        lessons,
        parameter_channels: &parameter_channels,
        // The Editor cannot be started again; a build or a stand-in can.
        players: options.env.is_some().then_some(&options_for as &(dyn Fn(u32) -> EnvOptions + Sync)),
        restarts: restarts::RestartQuota::new(&run.env_settings, workers),
        team_specs: BTreeMap::new(),
        seen: BTreeSet::new(),
        timers: Timers::default(),
        observer,
        checkpoints: BTreeMap::new(),
        configuration_pending: options.configuration_yaml.as_deref(),
        group_behaviors: Default::default(),
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

/// Writes the checkpoint a trainer has due (`--run-dir` given); returns whether it wrote one.
fn save_due_checkpoint(
    trainer: &mut BehaviorTrainer,
    lessons: &LessonManager,
    league: &League,
    options: &LearnOptions,
    checkpoints: &mut BTreeMap<String, Vec<u64>>,
    timers: &mut Timers,
) -> Result<bool, TrainError> {
    let (Some(step), Some(dir)) = (trainer.pending_checkpoint.take(), &options.run_dir) else { return Ok(false) };
    timers.time("save_checkpoint", || save_checkpoint(trainer, lessons, league, dir, step))?;
    checkpoints.entry(trainer.behavior.clone()).or_default().push(step);
    Ok(true)
}

/// The training state across environment steps.
struct Session<'a, 'o> {
    run: &'a RunOptions,
    options: &'a LearnOptions,
    seed: u64,
    /// One trainer per behavior (brain) name.
    trainers: BTreeMap<String, BehaviorTrainer>,
    /// The self-play behaviors and their team rotation.
    league: League,
    /// Returns of the episodes each team of each behavior finished (whoever played it).
    team_returns: BTreeMap<(String, i32), Vec<f32>>,
    /// Every environment parameter's lesson.
    lessons: LessonManager,
    /// Each environment's parameters channel (lesson values are queued on it).
    parameter_channels: &'a [ParametersChannel],
    /// How to start each worker's player again (None: the Editor, which cannot be).
    players: Option<&'a (dyn Fn(u32) -> EnvOptions + Sync)>,
    /// The restarts each worker has left.
    restarts: restarts::RestartQuota,
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
    /// The behavior each agent group was first seen under (a group split across behaviors is
    /// warned about).
    group_behaviors: groups::GroupBehaviors,
}

impl Session<'_, '_> {
    /// Acts for every behavior of every environment, trains where a buffer is full, writes due
    /// checkpoints and steps the environments. Returns false once every trainer is done.
    fn advance(&mut self, envs: &mut VecEnv, stats_channels: &[StatsChannel]) -> Result<bool, TrainError> {
        self.register_new_behaviors(envs)?;
        let mut checkpointed = false;
        for (worker, env) in envs.envs_mut().iter_mut().enumerate() {
            for name in env.behavior_names() {
                let parsed = BehaviorName::parse(&name);
                let trainer = self.trainers.get_mut(&parsed.name).expect("registered above");
                let timers = &mut self.timers;
                let (decisions, terminals) = env.get_steps(&name)?;
                for warning in self.group_behaviors.observe(worker, &name, decisions.group_id.iter().chain(&terminals.group_id).copied()) {
                    log::warn!("{warning}");
                }
                let source = agent_source(worker, parsed.team_id);
                let (actions, returns) = if self.league.ghost_plays(&parsed.name, parsed.team_id) {
                    timers.time("act", || self.league.act(&parsed.name, parsed.team_id, source, &decisions, &terminals))?
                } else {
                    let (actions, chosen) = timers.time("act", || trainer.act(source, &decisions, &terminals))?;
                    // A self-play learning team's steps count past max_steps (they drive team changes).
                    if trainer.should_train() || self.league.has(&parsed.name) {
                        let ingested = timers.time("process_trajectory", || trainer.ingest(source, &decisions, &terminals, chosen))?;
                        self.league.rate(&parsed.name, &ingested.games, trainer);
                        (actions, ingested.episode_returns)
                    } else {
                        (actions, vec![])
                    }
                };
                self.team_returns.entry((parsed.name.clone(), parsed.team_id)).or_default().extend(returns);
                for line in trainer.new_summaries() {
                    self.observer.summary(&line);
                }
                checkpointed |= save_due_checkpoint(trainer, &self.lessons, &self.league, self.options, &mut self.checkpoints, timers)?;
                env.set_actions(&name, actions)?;
            }
        }
        for (behavior, trainer) in self.trainers.iter_mut() {
            // threaded: an update that is back (with the trajectories that waited for it, which
            // may make a checkpoint due before the next update leaves), then the next one.
            let mut updated = self.timers.time("update_policy", || trainer.collect_update())?;
            checkpointed |= save_due_checkpoint(trainer, &self.lessons, &self.league, self.options, &mut self.checkpoints, &mut self.timers)?;
            if trainer.should_train() {
                updated |= self.timers.time("update_policy", || trainer.start_update())?;
            }
            self.league.advance(behavior, trainer, updated);
        }
        if let (true, Some(dir)) = (checkpointed, &self.options.run_dir) {
            // As ML-Agents: the status lists the checkpoints as they are written, so it is
            // true after a crash too.
            let behaviors: Vec<String> = self.trainers.keys().cloned().collect();
            write_training_status(dir, &behaviors, &BTreeMap::new(), &self.lessons.lesson_numbers(), &self.league.elos()).map_err(|e| TrainError::writing(training_status_path(dir), e))?;
        }
        if let (Some(yaml), Some(dir)) = (self.configuration_pending.take(), &self.options.run_dir) {
            let path = dir.join("configuration.yaml");
            checkpoint::write_atomic(&path, yaml.as_bytes()).map_err(|e| TrainError::writing(path, e))?;
        }
        let total: u64 = self.trainers.values().map(|t| t.settings.max_steps).sum();
        let done: u64 = self.trainers.values().map(|t| t.step.min(t.settings.max_steps)).sum();
        let gained = self.trainers.values().map(|t| t.step.saturating_sub(t.initial_step)).sum();
        self.observer.progress(done, total, gained);
        if !self.trainers.is_empty() && self.trainers.values().all(|t| !t.should_train()) {
            return Ok(false);
        }
        let lessons_reset = self.advance_lessons(envs.envs_mut().len())?;
        // A team change resets the environments as a lesson's require_reset does.
        let failures = if self.league.take_reset() || lessons_reset {
            self.trainers.values_mut().for_each(|t| t.end_episodes(EndedEpisodes::All));
            self.league.end_episodes(EndedEpisodes::All);
            self.timers.time("env_reset", || Ok::<_, TrainError>(envs.reset_each()))?
        } else {
            self.timers.time("env_step", || Ok::<_, TrainError>(envs.step_each()))?
        };
        for (worker, error) in failures {
            self.replace_player(envs, worker, error)?;
        }
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

    /// A worker's player failed during a step or a reset: within its restart quota, a new
    /// player takes its place (0.28's `env_settings` restarts) and the failed one's episodes in
    /// progress are dropped, while the other workers' go on; otherwise the error stops the run.
    fn replace_player(&mut self, envs: &mut VecEnv, worker: usize, error: crate::env::EnvError) -> Result<(), TrainError> {
        let Some(start_player) = self.players.filter(|_| restarts::is_player_failure(&error)) else { return Err(error.into()) };
        let restart = match self.restarts.take(worker, std::time::Instant::now()) {
            Ok(n) => n,
            Err(why) => return Err(TrainError::RestartsExhausted { worker, why, error }),
        };
        log::warn!("Restarting worker[{worker}] (restart {restart}) after '{error}'; its episodes in progress are dropped");
        let ended = EndedEpisodes::OfWorker(worker);
        self.trainers.values_mut().for_each(|t| t.end_episodes(ended));
        self.league.end_episodes(ended);
        send_parameters(&self.lessons, &self.parameter_channels[worker..=worker]);
        let mut player = crate::env::UnityEnvironment::new(start_player(worker as u32))?;
        player.reset()?;
        envs.replace(worker, player);
        Ok(())
    }

    /// Creates the trainers of behaviors seen for the first time (one per behavior name;
    /// teams of one behavior share it) and registers their teams with the league, lowest team
    /// id first; on `--resume`, a self-play behavior then continues its recorded state.
    fn register_new_behaviors(&mut self, envs: &mut VecEnv) -> Result<(), TrainError> {
        let mut new: Vec<(i32, String, crate::spec::BehaviorSpec)> = vec![];
        for env in envs.envs_mut().iter() {
            for name in env.behavior_names() {
                if !self.seen.contains(&name) && !new.iter().any(|(_, n, _)| *n == name) {
                    let team = BehaviorName::parse_strict(&name).map_err(TrainError::Mismatch)?.team_id;
                    new.push((team, name.clone(), env.behavior_specs()[&name].clone()));
                }
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        new.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let first_round = self.seen.is_empty();
        let mut created = vec![];
        for (team, name, spec) in new {
            let brain = BehaviorName::parse(&name).name;
            if !self.trainers.contains_key(&brain) {
                self.trainers.insert(brain.clone(), create_trainer(self.run, self.options, &self.lessons, &name, &spec, self.seed)?);
                self.team_specs.insert(brain.clone(), spec.clone());
                created.push(brain.clone());
            } else {
                let shapes = |s: &crate::spec::BehaviorSpec| (s.observation_specs.iter().map(|o| o.shape.clone()).collect::<Vec<_>>(), s.action_spec.clone());
                if shapes(&self.team_specs[&brain]) != shapes(&spec) {
                    return Err(TrainError::Mismatch(format!("{name} and another team of {brain} have different behavior specs; one policy cannot serve both")));
                }
                if self.trainers[&brain].settings.self_play.is_none() {
                    // As ML-Agents' PPO trainer: without self-play, the teams share one policy.
                    log::warn!("{brain} has several teams; without self-play they share one policy");
                }
            }
            let initial_elo = self.stored_elo(&brain);
            self.league.register(&self.trainers[&brain], team, initial_elo);
            self.seen.insert(name);
        }
        if first_round {
            self.league.drop_lonely_behaviors();
        }
        if let (true, Some(dir)) = (self.options.resume, &self.options.run_dir) {
            for brain in &created {
                if let (true, Ok(c)) = (self.league.has(brain), checkpoint::latest(&dir.join(brain), brain)) {
                    self.league.restore(brain, &c)?;
                }
            }
        }
        Ok(())
    }

    /// `--resume` without a recorded self-play state: the rating 0.28 keeps in
    /// `training_status.json` (`<behavior>.elo`).
    fn stored_elo(&self, behavior: &str) -> Option<f64> {
        let dir = self.options.run_dir.as_ref().filter(|_| self.options.resume)?;
        read_status_values(&training_status_path(dir), ELO).ok().flatten()?.get(behavior).copied()
    }

    /// 0.28's `reset_env_if_ready`, once per environment stepped: lessons whose criteria are
    /// met move on; then every reward buffer is cleared and every parameter's value queued
    /// for the environments. Returns whether a lesson left asks for a reset (the episodes in
    /// progress are then dropped; the caller resets instead of stepping). Each advance also
    /// records every parameter's lesson number in every behavior's summaries.
    fn advance_lessons(&mut self, environments: usize) -> Result<bool, TrainError> {
        if self.lessons.is_empty() {
            return Ok(false);
        }
        let mut must_reset = false;
        let elos = self.league.elos();
        for _ in 0..environments {
            let standings: BTreeMap<String, TrainerStanding> = self
                .trainers
                .iter()
                .map(|(name, t)| (name.clone(), TrainerStanding { step: t.step, max_steps: t.settings.max_steps, rewards: &t.reward_buffer, elo: elos.get(name).copied() }))
                .collect();
            let update = self.lessons.update(&standings);
            for change in &update.changes {
                log::info!("{}", self.lessons.change_line(change));
                log::info!("{}", self.lessons.lesson_line(change.parameter));
            }
            if update.updated() {
                self.trainers.values_mut().for_each(|t| t.reward_buffer.clear());
                send_parameters(&self.lessons, self.parameter_channels);
            }
            must_reset |= update.must_reset;
        }
        if must_reset {
            log::info!("The lesson left asks for a reset (require_reset): the environments reset and the episodes in progress are dropped.");
        }
        for (parameter, lesson) in self.lessons.lesson_numbers() {
            let tag = format!("{LESSON_NUMBER_TAG}{parameter}");
            self.trainers.values_mut().for_each(|t| t.add_environment_stat(&tag, lesson as f32, crate::comm::side_channel::StatsAggregation::MostRecent));
        }
        Ok(must_reset)
    }

    /// The final checkpoint of each behavior at its current step, its exports in the run
    /// folder, and the run logs.
    fn finish(mut self) -> Result<BTreeMap<String, BehaviorResult>, TrainError> {
        let mut results = BTreeMap::new();
        let mut final_steps = BTreeMap::new();
        for trainer in self.trainers.values_mut() {
            // threaded: the update in flight and the trajectories that wait for it.
            if let Err(e) = trainer.finish_update() {
                log::warn!("{e}");
            }
        }
        for trainer in self.trainers.values() {
            let mut onnx = None;
            if trainer.updating() {
                log::warn!("{}: not checkpointed (its update thread failed); its last checkpoint on disk is its last good one", trainer.behavior);
            } else if trainer.diverged {
                log::warn!("{}: not checkpointed (its weights are not finite); its last checkpoint on disk is its last good one", trainer.behavior);
            } else if let Some(dir) = &self.options.run_dir {
                let saved = save_checkpoint(trainer, &self.lessons, &self.league, dir, trainer.step)?;
                self.checkpoints.entry(trainer.behavior.clone()).or_default().push(trainer.step);
                let exported = export_checkpoint(&saved, dir, &trainer.behavior, ExportOptions::default(), true)?;
                if let Some(why) = &exported.nn_skipped {
                    log::info!("{}: no .nn export: {why}", trainer.behavior);
                }
                log::info!("Exported {}", exported.onnx.display());
                onnx = Some(exported.onnx);
                final_steps.insert(trainer.behavior.clone(), trainer.step);
            }
            if trainer.updates_on_thread > 0 {
                self.timers.add("update_policy_on_its_thread", trainer.update_thread_time, trainer.updates_on_thread);
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
                    team_returns: self.team_returns.iter().filter(|((b, _), _)| *b == trainer.behavior).map(|((_, t), r)| (*t, r.clone())).collect(),
                    updates_on_thread: trainer.updates_on_thread,
                },
            );
        }
        if let Some(dir) = &self.options.run_dir {
            let behaviors: Vec<String> = self.trainers.keys().cloned().collect();
            write_training_status(dir, &behaviors, &final_steps, &self.lessons.lesson_numbers(), &self.league.elos()).map_err(|e| TrainError::writing(training_status_path(dir), e))?;
            self.timers.write(dir).map_err(|e| TrainError::writing(dir.join("run_logs").join("timers.json"), e))?;
        }
        Ok(results)
    }
}
