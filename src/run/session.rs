//! What `mlagents-run`'s subcommands do, as functions that return typed reports: the binary
//! parses flags, calls one of these, and prints the report (text for people, `--json` for
//! machines) with the exit code [`Report::passed`] gives.

use super::text;
use super::{check, check_parity, FileVersion, compare_models, record_steps, CompareReport, LoadOptions, ModelInterface, NamedTensors, ParityReport, PlayReport, Policy, PolicyDriver};
use crate::checkpoint::sha256_hex;
use crate::env::{ActionTuple, DecisionSteps, EnvOptions, UnityEnvironment};
use crate::policy::parity::ParityRecord;
use crate::spec::{BehaviorName, BehaviorSpec};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// A report a subcommand prints.
pub trait Report: Serialize {
    /// The text a person reads (`--json` prints the serialised report instead).
    fn text(&self) -> String;
    /// Whether the subcommand's check passed (exit status 0); a failed one exits with 1.
    fn passed(&self) -> bool {
        true
    }
}

/// Where the environment is and how to reach it.
#[derive(Debug, Clone)]
pub struct EnvTarget {
    /// A Unity build, `sim:SCENE`, or `editor`.
    pub env: String,
    /// The behavior (full or plain name); `None`: the first one (`check`: all of them).
    pub behavior: Option<String>,
    /// `None`: a free port for `sim:` scenes, 5005 for builds, 5004 for the Editor.
    pub base_port: Option<u16>,
    pub timeout_wait: std::time::Duration,
}

impl EnvTarget {
    /// Starts the environment and resets it.
    pub(crate) fn start(&self, seed: u64) -> Result<UnityEnvironment> {
        let env = self.env.as_str();
        let base_port = self.base_port.or(if env.starts_with(crate::env::SIM_PREFIX) { Some(0) } else { None });
        let mut environment = UnityEnvironment::new(EnvOptions {
            env: (env != "editor").then(|| env.to_string()),
            base_port,
            seed: seed as i32,
            timeout_wait: self.timeout_wait,
            // Scenes send stats; they are not reported here, only accepted.
            side_channels: vec![crate::comm::side_channel::shared(crate::comm::side_channel::StatsSideChannel::new())],
            ..Default::default()
        })?;
        environment.reset()?;
        Ok(environment)
    }

    /// The behavior this target names (full name or plain name), or the first one.
    fn pick_behavior(&self, environment: &UnityEnvironment) -> Result<String> {
        let names = environment.behavior_names();
        match &self.behavior {
            Some(b) => names
                .iter()
                .find(|n| *n == b || BehaviorName::parse(n).name == *b)
                .cloned()
                .with_context(|| format!("no behavior {b:?} in the environment (it has {names:?})")),
            None => names.first().cloned().context("the environment reported no behavior"),
        }
    }
}

/// `inspect`: what a model file declares.
#[derive(Debug, Serialize)]
pub struct InspectReport {
    pub file: String,
    #[serde(flatten)]
    pub interface: ModelInterface,
    pub sha256: String,
}

/// Reads a model (the format its content shows) and its interface.
pub fn inspect(path: &Path) -> Result<InspectReport> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let policy = Policy::from_bytes(&bytes, path, LoadOptions { deterministic: true, ..Default::default() })?;
    Ok(InspectReport { file: path.display().to_string(), interface: policy.interface()?.clone(), sha256: sha256_hex(&bytes) })
}

/// `inspect X.demo`: what a demonstration holds.
#[derive(Debug, Serialize)]
pub struct DemoReport {
    pub file: String,
    pub api_version: i32,
    pub name: String,
    pub behavior: String,
    /// Each observation: name, shape and type.
    pub observations: Vec<String>,
    pub actions: String,
    pub records: usize,
    /// Episodes ended in the file, and how many of them by reaching their maximum length.
    pub episodes: usize,
    pub interrupted: usize,
    /// The mean reward the file's metadata records (Unity counts one episode more than ended).
    pub metadata_mean_reward: f32,
    /// The mean return of the episodes that ended.
    pub mean_episode_return: Option<f32>,
    pub sha256: String,
}

/// Summarises a `.demo` file.
pub fn inspect_demo(path: &Path) -> Result<DemoReport> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let demo = crate::demo::read(path)?;
    let mut returns = vec![];
    let mut running = 0.0f64;
    for record in &demo.records {
        running += record.reward as f64;
        if record.done {
            returns.push(running);
            running = 0.0;
        }
    }
    Ok(DemoReport {
        file: path.display().to_string(),
        api_version: demo.metadata.api_version,
        name: demo.metadata.name.clone(),
        behavior: demo.behavior_name.clone(),
        observations: demo.spec.observation_specs.iter().map(|o| format!("{:?} {:?} {:?}", o.name, o.shape, o.observation_type)).collect(),
        actions: demo.spec.action_spec.to_string(),
        records: demo.records.len(),
        episodes: returns.len(),
        interrupted: demo.records.iter().filter(|r| r.done && r.interrupted).count(),
        metadata_mean_reward: demo.metadata.mean_reward,
        mean_episode_return: (!returns.is_empty()).then(|| (returns.iter().sum::<f64>() / returns.len() as f64) as f32),
        sha256: sha256_hex(&bytes),
    })
}

impl Report for DemoReport {
    fn text(&self) -> String {
        let mut out = format!("{}: demonstration {:?} (API {}) of {}\n", self.file, self.name, self.api_version, self.behavior);
        out += &format!("  observations: {}\n  actions: {}\n", self.observations.join(", "), self.actions);
        out += &format!("  {} records, {} episodes ended ({} interrupted)", self.records, self.episodes, self.interrupted);
        if let Some(mean) = self.mean_episode_return {
            out += &format!(", mean return {mean:.3}");
        }
        out += &format!("\n  sha256 {}\n", self.sha256);
        out
    }
}

/// `eval`: every output of one run.
#[derive(Debug, Serialize)]
pub struct EvalReport {
    pub outputs: NamedTensors,
}

/// Runs a model once on the inputs of an `eval` document.
pub fn eval(model: &Path, inputs: &Path, options: LoadOptions) -> Result<EvalReport> {
    let text = std::fs::read_to_string(inputs).with_context(|| format!("reading {}", inputs.display()))?;
    let tensors = super::parse_eval_inputs(&text).with_context(|| format!("parsing {}", inputs.display()))?;
    let policy = Policy::load(model, options)?;
    Ok(EvalReport { outputs: policy.run(&tensors)? })
}

/// `check`: the violations of each behavior.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub model: String,
    pub env: String,
    pub checks: Vec<BehaviorCheck>,
}

/// Unity's model checks against one behavior.
#[derive(Debug, Serialize)]
pub struct BehaviorCheck {
    pub behavior: String,
    pub violations: Vec<String>,
    /// The behavior's spec as the environment reported it (the shape a `--behavior-spec`
    /// file takes).
    pub spec: crate::spec::BehaviorSpec,
}

/// Checks a model against the behavior specs of a live environment (the named behavior, or
/// all of them).
pub fn check_model(model: &Path, target: &EnvTarget) -> Result<CheckReport> {
    let policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() })?;
    let interface = policy.interface()?;
    let mut environment = target.start(0)?;
    let names = match &target.behavior {
        Some(_) => vec![target.pick_behavior(&environment)?],
        None => environment.behavior_names(),
    };
    let checks = names
        .into_iter()
        .map(|behavior| {
            let spec = environment.behavior_specs()[&behavior].clone();
            let violations = check(interface, &spec);
            BehaviorCheck { behavior, violations, spec }
        })
        .collect();
    environment.close()?;
    Ok(CheckReport { model: model.display().to_string(), env: target.env.clone(), checks })
}

/// How to play.
#[derive(Debug, Clone, Copy)]
pub struct PlaySettings {
    pub episodes: usize,
    pub max_steps: usize,
    pub deterministic: bool,
    /// Seeds the in-graph noise, the sampling of discrete actions and the environment.
    pub seed: u64,
}

/// `play`: what each behavior scored, and the parity check made first, if any.
#[derive(Debug, Serialize)]
pub struct PlaySummary {
    pub model: String,
    pub env: String,
    pub deterministic: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub behaviors: Vec<PlayReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity: Option<ParityReport>,
    /// The `.demo` file the play was recorded into (`--record-demo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demo: Option<RecordedDemo>,
}

/// A recording `play --record-demo` wrote.
#[derive(Debug, Serialize)]
pub struct RecordedDemo {
    pub path: String,
    pub records: usize,
    pub episodes: usize,
}

/// Checks a model against a parity record (when given), then plays it (recording the play as
/// a `.demo` file at `record`, when given): refused, as Unity would refuse to load it, when it
/// fails Unity's checks for the behavior.
pub fn play_model(model: &Path, target: &EnvTarget, settings: PlaySettings, parity: Option<(&Path, f32)>, record: Option<&Path>) -> Result<PlaySummary> {
    let parity = parity.map(|(record, tolerance)| -> Result<ParityReport> { Ok(check_parity(model, &ParityRecord::read(record)?, tolerance)?) }).transpose()?;
    let options = LoadOptions { deterministic: settings.deterministic, seed: Some(settings.seed as u32), ..Default::default() };
    let policy = Policy::load(model, options)?;
    let interface = policy.interface()?;
    let mut environment = target.start(settings.seed)?;
    let name = target.pick_behavior(&environment)?;
    let spec = environment.behavior_specs()[&name].clone();
    let violations = check(interface, &spec);
    if !violations.is_empty() {
        let _ = environment.close();
        anyhow::bail!(
            "{} does not fit behavior {name} of {}, as Unity's model checks would say (see `mlagents-run check`):\n  {}",
            model.display(),
            target.env,
            violations.join("\n  ")
        );
    }
    let mut driver = PolicyDriver::new(policy, &name, &spec, settings.deterministic, settings.seed)?;
    driver.compute_only_actions()?;
    let mut recorder = record.map(|_| crate::demo::recorder::DemoRecorder::new(&spec));
    let mut report = super::play_recording(&mut environment, &mut driver, settings.episodes, settings.max_steps, recorder.as_mut())?;
    let demo = match (record, recorder) {
        (Some(path), Some(recorder)) => {
            let demo_name = name.split('?').next().unwrap_or(&name);
            recorder.write(path, demo_name, &name, Some(settings.episodes))?;
            let written = crate::demo::read(path)?;
            Some(RecordedDemo { path: path.display().to_string(), records: written.records.len(), episodes: written.episodes() })
        }
        _ => None,
    };
    match report.stopped {
        // The environment already ended the session.
        Some(_) => {
            let _ = environment.close();
        }
        None => environment.close()?,
    }
    report.decisions_per_second = report.decisions_per_second.round();
    Ok(PlaySummary { model: model.display().to_string(), env: target.env.clone(), deterministic: settings.deterministic, behaviors: vec![report], parity, demo })
}

/// `play --opponent`: a head-to-head match of two models on a game of several teams.
#[derive(Debug, Serialize)]
pub struct MatchReport {
    pub model: String,
    pub opponent: String,
    pub env: String,
    pub deterministic: bool,
    /// Agent episodes of team 0 played.
    pub episodes: usize,
    /// Results by team id.
    pub teams: std::collections::BTreeMap<String, super::versus::TeamResult>,
    /// The rating difference of team 0 over the others that its results imply.
    pub rating_difference: Option<f64>,
}

/// Plays `model` for every behavior of team 0 and `opponent` for every other team; each model
/// must fit the behaviors it drives (Unity's checks), or it is an error naming the behavior.
///
/// Teams may appear after the first message (agents spawned later bring their team later);
/// the match waits for a second team (`versus::TEAM_WAIT_STEPS`).
pub fn head_to_head(model: &Path, opponent: &Path, target: &EnvTarget, settings: PlaySettings) -> Result<MatchReport> {
    let mut environment = target.start(settings.seed)?;
    let mut new_driver = |name: &str, spec: &crate::spec::BehaviorSpec| -> std::result::Result<PolicyDriver, super::PlayError> {
        let team = BehaviorName::parse(name).team_id;
        let path = if team == 0 { model } else { opponent };
        let options = LoadOptions { deterministic: settings.deterministic, seed: Some(settings.seed as u32 + team as u32), ..Default::default() };
        let policy = Policy::load(path, options)?;
        let violations = check(policy.interface()?, spec);
        if !violations.is_empty() {
            return Err(super::PlayError::Unfit { model: path.display().to_string(), behavior: name.into(), team, violations });
        }
        let mut driver = PolicyDriver::new(policy, name, spec, settings.deterministic, settings.seed + team as u64)?;
        driver.compute_only_actions()?;
        Ok(driver)
    };
    let models = [(0, model.display().to_string()), (1, opponent.display().to_string())].into();
    let results = match super::versus::play_match(&mut environment, &mut new_driver, &models, settings.episodes, settings.max_steps) {
        Ok(results) => results,
        Err(e) => {
            let _ = environment.close();
            return Err(e.into());
        }
    };
    environment.close()?;
    let first = results.values().next().cloned().unwrap_or_default();
    Ok(MatchReport {
        model: model.display().to_string(),
        opponent: opponent.display().to_string(),
        env: target.env.clone(),
        deterministic: settings.deterministic,
        episodes: first.episodes(),
        rating_difference: super::versus::rating_difference(first.wins, first.draws, first.losses),
        teams: results.into_iter().map(|(t, r)| (t.to_string(), r)).collect(),
    })
}

/// Where `compare` takes its decisions from.
#[derive(Debug, Clone)]
pub enum Decisions<'a> {
    /// The rows of a parity record.
    Recorded(&'a Path),
    /// Batches from a live environment, stepped with random actions.
    Live { target: EnvTarget, batches: usize },
}

/// Runs two models deterministically on the same decisions and compares their actions.
pub fn compare(first: &Path, second: &Path, decisions: Decisions<'_>, tolerance: f32) -> Result<CompareReport> {
    let (name, spec, batches) = match decisions {
        Decisions::Recorded(path) => {
            let record = ParityRecord::read(path)?;
            let (spec, steps) = record_steps(&record);
            (record.behavior.clone(), spec, vec![steps])
        }
        Decisions::Live { target, batches } => live_decisions(&target, batches)?,
    };
    Ok(compare_models(first, second, &name, &spec, &batches, tolerance)?)
}

/// `count` decision batches of the target behavior, every behavior stepped with random
/// actions.
fn live_decisions(target: &EnvTarget, count: usize) -> Result<(String, BehaviorSpec, Vec<DecisionSteps>)> {
    let mut environment = target.start(0)?;
    let name = target.pick_behavior(&environment)?;
    let spec = environment.behavior_specs()[&name].clone();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
    let mut batches = vec![];
    while batches.len() < count {
        for other in environment.behavior_names() {
            let (d, _) = environment.get_steps(&other)?;
            let s = environment.behavior_specs()[&other].clone();
            if other == name && !d.is_empty() {
                batches.push(d.clone());
            }
            environment.set_actions(&other, ActionTuple::random(&s.action_spec, &d, &mut rng))?;
        }
        environment.step()?;
    }
    environment.close()?;
    Ok((name, spec, batches))
}

impl Report for InspectReport {
    fn text(&self) -> String {
        let i = &self.interface;
        let version = match &i.file_version {
            FileVersion::Barracuda { version } => format!("Barracuda .nn, format version {version}"),
            FileVersion::Onnx { ir_version, opset, producer } => {
                let opset = opset.map_or_else(|| "none".to_string(), |o| o.to_string());
                format!("ONNX, IR version {ir_version}, opset {opset}, written by {}", if producer.is_empty() { "an unnamed producer" } else { producer })
            }
        };
        let dims = |d: &[i64]| {
            let rest: Vec<String> = d.iter().map(|v| if *v < 0 { "any".to_string() } else { v.to_string() }).collect();
            format!("[batch{}]", rest.iter().map(|r| format!(", {r}")).collect::<String>())
        };
        let list = |items: Vec<String>| if items.is_empty() { "none".to_string() } else { items.join(", ") };
        let mut out = format!("file:       {}\nformat:     {version}\nsha256:     {}\n", self.file, self.sha256);
        let constants = i.constants.iter().map(|(name, v)| format!("{name} {}", list(v.iter().map(|x| x.to_string()).collect())));
        out += &format!("constants:  {}\n", list(constants.collect()));
        let width = i.all_inputs().map(|(n, _)| n.len()).chain(i.outputs.iter().map(|o| o.name.len())).max().unwrap_or(0);
        out += "inputs:\n";
        for (name, d) in i.all_inputs() {
            out += &format!("  {name:width$}  {}\n", dims(d));
        }
        out += "outputs:\n";
        for o in &i.outputs {
            let shape = o.shape_at_batch_1.as_ref().map_or(String::new(), |s| format!("{s:?} at batch 1"));
            out += &format!("  {:width$}  {shape}\n", o.name);
        }
        let memories = i.memories.iter().map(|m| format!("{} -> {} ({} values at {})", m.input, m.output, m.size, m.offset));
        out += &format!("memories:   {} (memory size {})\n", list(memories.collect()), i.memory_size);
        for (name, layout) in &i.entity_layouts {
            let meaning = match layout {
                crate::spec::EntityLayout::Barracuda => "Barracuda's transposed view, as com.unity.ml-agents 2.x and earlier feed it",
                crate::spec::EntityLayout::Natural => "as they are, as com.unity.ml-agents 3.x and later (Sentis) feed them",
            };
            out += &format!("entities:   {name} expects its entities laid out {layout} ({meaning}); the runner feeds them so\n");
        }
        out += &format!("operators:  {}\n", list(i.operators.iter().map(|(op, n)| format!("{op} {n}")).collect()));
        out += &format!("non-finite weights: {}\n", list(i.non_finite_weights.clone()));
        out
    }
}

impl Report for EvalReport {
    fn text(&self) -> String {
        text::for_people(self)
    }
}

impl Report for CheckReport {
    fn text(&self) -> String {
        let mut out = format!("{} against {}:\n", self.model, self.env);
        let width = self.checks.iter().map(|c| c.behavior.len()).max().unwrap_or(0);
        for c in &self.checks {
            if c.violations.is_empty() {
                out += &format!("  {:width$}  ok (Unity would load it)\n", c.behavior);
                continue;
            }
            out += &format!("  {:width$}  {} violation{}:\n", c.behavior, c.violations.len(), if c.violations.len() == 1 { "" } else { "s" });
            for v in &c.violations {
                out += &format!("    - {v}\n");
            }
        }
        out
    }

    fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.violations.is_empty())
    }
}

impl Report for ParityReport {
    fn text(&self) -> String {
        let sha = match &self.recorded_sha256 {
            Some(s) if *s == self.sha256 => "the file the record was made for",
            Some(_) => "NOT the file the record was made for (sha256 differs)",
            None => "a file the record does not list",
        };
        let mut out = format!("parity of {} ({sha}) on {} recorded rows, tolerance {:e}:\n", self.model, self.rows, self.tolerance);
        if !self.non_finite_weights.is_empty() {
            out += &format!("  weights hold NaN or infinities (Unity would compute NaN actions): {} FAILED\n", self.non_finite_weights.join(", "));
        }
        for c in &self.checks {
            let rows = if c.mismatched_rows > 0 { format!(", {} rows differ", c.mismatched_rows) } else { String::new() };
            out += &format!("  {} vs recorded {}: max abs error {:e}{rows} {}\n", c.output, c.recorded, c.max_abs_error, if c.passed { "ok" } else { "FAILED" });
        }
        out
    }

    fn passed(&self) -> bool {
        self.passed
    }
}

impl Report for MatchReport {
    fn text(&self) -> String {
        let mut out = format!(
            "{} (team 0) against {} on {}, {} episodes, {}\n",
            self.model,
            self.opponent,
            self.env,
            self.episodes,
            if self.deterministic { "deterministic" } else { "sampled" }
        );
        for (team, r) in &self.teams {
            out += &format!(
                "team {team} ({}): {} wins, {} draws, {} losses, {} interrupted, mean reward {:.3}\n",
                r.behaviors.join(", "),
                r.wins,
                r.draws,
                r.losses,
                r.interrupted,
                r.mean_reward
            );
        }
        match self.rating_difference {
            Some(d) => out += &format!("rating difference of team 0 over the others: {d:+.0}\n"),
            None => out += "no rated game (every episode was interrupted)\n",
        }
        out
    }
}

impl Report for PlaySummary {
    fn text(&self) -> String {
        let mut out = self.parity.as_ref().map(Report::text).unwrap_or_default();
        for b in &self.behaviors {
            out += &format!(
                "{}: {} episodes, mean reward {:.3}, std {:.3}, {} decisions/s ({})\n",
                b.behavior,
                b.episodes,
                b.mean_reward,
                b.std_reward,
                b.decisions_per_second,
                if self.deterministic { "deterministic" } else { "sampled" }
            );
            let t = &b.microseconds_per_decision;
            out += &format!(
                "  µs per decision: environment {:.2}, inputs {:.2}, inference {:.2}, decoding {:.2}\n",
                t.environment, t.inputs, t.inference, t.decoding
            );
            if let Some(reason) = &b.stopped {
                out += &format!("  stopped after {} episodes: {reason}\n", b.episodes);
            }
        }
        if self.parity.as_ref().is_some_and(|p| !p.passed) {
            out += "the model's outputs differ from the parity record\n";
        }
        if let Some(demo) = &self.demo {
            out += &format!("recorded {} episodes ({} decisions) into {}\n", demo.episodes, demo.records, demo.path);
        }
        out
    }

    fn passed(&self) -> bool {
        self.parity.as_ref().is_none_or(|p| p.passed)
    }
}

impl Report for CompareReport {
    fn text(&self) -> String {
        format!(
            "{} vs {}: {} decisions, continuous max abs error {:e}, {} discrete rows differ (tolerance {:e}): {}\n",
            self.first,
            self.second,
            self.rows,
            self.continuous_max_abs_error,
            self.discrete_mismatched_rows,
            self.tolerance,
            if self.passed { "same" } else { "DIFFERENT" }
        )
    }

    fn passed(&self) -> bool {
        self.passed
    }
}
