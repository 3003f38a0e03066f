//! `mlagents-run`: inspect and evaluate ML-Agents policies (`.onnx` and `.nn`, both on tract).
//!
//! - `mlagents-run inspect MODEL [--json]`: format and version, ML-Agents constants, inputs and
//!   outputs with shapes, layer/op histogram, sha256. `inspect X.demo` summarises a Unity
//!   demonstration (behavior, specs, records, episodes, mean return).
//! - `mlagents-run eval MODEL --inputs FILE.json [--deterministic] [--seed N] [--json]`: runs
//!   the model once on `{"inputs": {"<name>": {"shape": [...], "data": [...]}}}` and prints
//!   `{"outputs": {...}}` for every output.
//!
//! - `mlagents-run MODEL --env ENV [--episodes N] [--deterministic] [--behavior NAME]` (or
//!   `mlagents-run play ...`): plays the policy against a live environment (a Unity build,
//!   `sim:SCENE`, or the Editor when ENV is `editor`) and prints, per behavior, episodes, mean
//!   and std of the episode reward and decisions per second.
//!
//!   With `--opponent OTHER`, MODEL plays every behavior of team 0 and OTHER every other
//!   team; it prints each team's wins, draws, losses (the sign of an episode's last reward),
//!   interrupted episodes and mean reward, and the rating difference they imply.
//!
//!   With `--parity FILE` (a `<Behavior>.parity.json` from `mlagents-export`), the model's
//!   outputs on the recorded inputs are first compared with the training network's (max abs
//!   error per output, `--tolerance`, default 1e-5); exit status 1 when they differ.
//!
//!   With `--record-demo OUT.demo`, the play is recorded as a Unity demonstration (the first
//!   `--episodes` episodes, every agent's whole), for GAIL and behavioral cloning.
//!
//! - `mlagents-run check MODEL --target T [--behavior-spec FILE.json] [--device D] [--json]`: whether the
//!   model loads in Unity package releases (src/compat).
//! - `mlagents-run check MODEL --env ENV [--behavior NAME]`: validates the model against the
//!   environment's behavior specs as Unity's model checker does, listing every violation
//!   (exit status 1 when there is any).
//!   `--target PACKAGE@VERSION` (repeatable; `ml-agents@2.0.1`, `barracuda@1.0.4`,
//!   `sentis@2.1.0`, `inference-engine@2.2.1`, or `all`), with or without `--env`: checks
//!   the file against what each Unity package release imports and demands, offline; each
//!   finding has its rule id, severity, what to do and Unity's own message (exit status 1
//!   when a target has an error).
//!
//! - `mlagents-run compare A B (--parity FILE | --env ENV [--decisions N])`: runs two models
//!   (e.g. an `.onnx` and an `.nn`) deterministically on the same decisions, fed as Unity feeds
//!   each, and compares their actions (exit status 1 when they differ).

use clap::{Parser, Subcommand};
use mlagents::run::session::{self, Decisions, EnvTarget, PlaySettings, Report};
use mlagents::run::LoadOptions;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc for the process: tract allocates its intermediate tensors on every call, and
/// glibc's malloc/free were about a tenth of a small policy's inference time (perf, 3DBall);
/// freed memory is kept for the next decision ([`mlagents::engine::allocator`]).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "mlagents-run", version, about = "Inspect and run ML-Agents policies (.onnx, .nn)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Format, version, ML-Agents constants, inputs, outputs, op histogram and sha256.
    Inspect {
        model: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Runs the model once on inputs from a JSON file.
    Eval {
        model: PathBuf,
        #[arg(long)]
        inputs: PathBuf,
        /// Replace in-graph sampling by its mode (noise 0, argmax), for cross-engine comparisons.
        #[arg(long)]
        deterministic: bool,
        #[arg(long)]
        seed: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Validates the model against an environment's behavior specs, as Unity does (--env),
    /// and against what Unity package releases import (--target).
    Check {
        model: PathBuf,
        /// A Unity build, `sim:SCENE`, or `editor`.
        #[arg(long)]
        env: Option<String>,
        /// The behavior (default: every behavior of the environment).
        #[arg(long, requires = "env")]
        behavior: Option<String>,
        #[arg(long, requires = "env")]
        base_port: Option<u16>,
        #[arg(long, default_value_t = 60, requires = "env")]
        timeout_wait: u64,
        /// PACKAGE@VERSION (ml-agents@2.0.1, barracuda@1.0.4, sentis@2.1.0,
        /// inference-engine@2.2.1) or `all` (one release per ML-Agents bucket); repeatable.
        #[arg(long = "target", required_unless_present = "env")]
        targets: Vec<String>,
        /// With --target: also check the model against this behavior spec (JSON, as `check
        /// --env ENV --json` prints it under "spec"), as Unity does at load (rule M11).
        #[arg(long, requires = "targets")]
        behavior_spec: Option<PathBuf>,
        /// With --target: the inference device the behavior uses (warns on operators the
        /// Sentis GPU backends lack).
        #[arg(long, value_enum, default_value = "cpu", requires = "targets")]
        device: mlagents::compat::Device,
        #[arg(long)]
        json: bool,
    },
    /// Plays the policy against a live environment.
    Play {
        model: PathBuf,
        #[command(flatten)]
        env: EnvArgs,
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        episodes: u64,
        #[arg(long)]
        deterministic: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Give up after this many environment steps.
        #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
        max_steps: u64,
        /// A parity record to check the model against before playing.
        #[arg(long)]
        parity: Option<PathBuf>,
        /// Another model that plays every team but team 0 (head to head: wins, draws and
        /// losses per team, and the rating difference they imply).
        #[arg(long, conflicts_with = "parity")]
        opponent: Option<PathBuf>,
        #[arg(long, default_value_t = 1e-5, value_parser = parse_tolerance)]
        tolerance: f32,
        /// Record the play as a Unity demonstration (a `.demo` file 0.28's GAIL and behavioral
        /// cloning read): the first --episodes episodes, every agent's whole.
        #[arg(long, value_name = "OUT.demo", conflicts_with = "opponent", value_parser = parse_demo_path)]
        record_demo: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Runs two models on the same decisions and compares their actions.
    Compare {
        first: PathBuf,
        second: PathBuf,
        /// Take the decisions from a parity record.
        #[arg(long)]
        parity: Option<PathBuf>,
        /// Or from a live environment (random actions between decisions).
        #[arg(long)]
        env: Option<String>,
        #[arg(long)]
        behavior: Option<String>,
        /// Decision batches to collect from the environment.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
        decisions: u64,
        #[arg(long, default_value_t = 1e-5, value_parser = parse_tolerance)]
        tolerance: f32,
        #[arg(long)]
        json: bool,
    },
}

/// A path for a recorded demonstration: it must end in `.demo`, as Unity and 0.28 require.
fn parse_demo_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match path.extension() {
        Some(x) if x == "demo" => Ok(path),
        _ => Err(format!("{text} does not end in .demo (Unity and ML-Agents read only .demo files)")),
    }
}

/// A comparison tolerance: a finite number, zero or more.
fn parse_tolerance(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(t) => Err(format!("{t} is not a tolerance (a finite number, zero or more)")),
        Err(e) => Err(e.to_string()),
    }
}

/// Where the environment is and how to reach it (shared by `check` and `play`).
#[derive(clap::Args)]
struct EnvArgs {
    /// A Unity build, `sim:SCENE`, or `editor`.
    #[arg(long)]
    env: String,
    /// The behavior (default: the only one, or the first by name; `check` checks them all).
    #[arg(long)]
    behavior: Option<String>,
    /// Default: a free port for `sim:` scenes, 5005 for builds, 5004 for the Editor.
    #[arg(long)]
    base_port: Option<u16>,
    #[arg(long, default_value_t = 60)]
    timeout_wait: u64,
}

impl EnvArgs {
    fn target(&self) -> EnvTarget {
        EnvTarget {
            env: self.env.clone(),
            behavior: self.behavior.clone(),
            base_port: self.base_port,
            timeout_wait: std::time::Duration::from_secs(self.timeout_wait),
        }
    }
}

/// Prints a report (text, or JSON with `--json`) and gives its exit status (a reader that
/// went away stops the printing, not the verdict).
fn print(report: &impl Report, as_json: bool) -> anyhow::Result<ExitCode> {
    let text = if as_json { serde_json::to_string_pretty(report).expect("reports serialise to JSON") + "\n" } else { report.text() };
    mlagents::console::write_stdout(&text).map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Runs one subcommand: its exit status, or the error that stopped it.
fn run(command: Command) -> anyhow::Result<ExitCode> {
    Ok(match command {
        Command::Inspect { model, json } if model.extension().is_some_and(|x| x == "demo") => print(&session::inspect_demo(&model)?, json)?,
        Command::Inspect { model, json } => print(&session::inspect(&model)?, json)?,
        Command::Eval { model, inputs, deterministic, seed, json } => {
            print(&session::eval(&model, &inputs, LoadOptions { deterministic, seed, ..Default::default() })?, json)?
        }
        Command::Check { model, env, behavior, base_port, timeout_wait, targets, behavior_spec, device, json } => {
            let targets = mlagents::compat::resolve_targets(&targets).map_err(anyhow::Error::msg)?;
            let spec = behavior_spec.map(|path| mlagents::spec::BehaviorSpec::read_file(&path)).transpose().map_err(anyhow::Error::msg)?;
            let compatibility = if targets.is_empty() {
                None
            } else {
                let options = mlagents::compat::CheckOptions { behavior_spec: spec.as_ref(), device };
                Some(mlagents::compat::check_file_with(&model, &targets, options).map_err(anyhow::Error::msg)?)
            };
            let environment = match env {
                Some(env) => Some(session::check_model(&model, &EnvTarget { env, behavior, base_port, timeout_wait: std::time::Duration::from_secs(timeout_wait) })?),
                None => None,
            };
            match (compatibility, environment) {
                (Some(compatibility), None) => print(&compatibility, json)?,
                (None, Some(environment)) => print(&environment, json)?,
                (compatibility, environment) => print(&mlagents::compat::CheckOutput { compatibility, environment }, json)?,
            }
        }
        Command::Compare { first, second, parity, env, behavior, decisions, tolerance, json } => {
            let decisions = match (&parity, env) {
                (Some(record), _) => Decisions::Recorded(record),
                (None, Some(env)) => {
                    let target = EnvTarget { env, behavior, base_port: None, timeout_wait: std::time::Duration::from_secs(60) };
                    Decisions::Live { target, batches: decisions as usize }
                }
                (None, None) => anyhow::bail!("compare needs the decisions: --parity FILE or --env ENV"),
            };
            print(&session::compare(&first, &second, decisions, tolerance)?, json)?
        }
        Command::Play { model, env, episodes, deterministic, seed, max_steps, parity, opponent, tolerance, record_demo, json } => {
            let settings = PlaySettings { episodes: episodes as usize, max_steps: max_steps as usize, deterministic, seed };
            if let Some(opponent) = opponent {
                return print(&session::head_to_head(&model, &opponent, &env.target(), settings)?, json);
            }
            let parity = parity.as_deref().map(|record| (record, tolerance));
            print(&session::play_model(&model, &env.target(), settings, parity, record_demo.as_deref())?, json)?
        }
    })
}

fn main() -> ExitCode {
    mlagents::engine::allocator::keep_freed_memory();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // `mlagents-run MODEL --env ENV ...` is short for `mlagents-run play MODEL --env ENV ...`.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let subcommands = ["inspect", "eval", "check", "play", "compare", "help"];
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        if !first.starts_with('-') && !subcommands.contains(&first) {
            args.insert(1, "play".into());
        }
    }
    match run(Cli::parse_from(args).command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mlagents-run: {}", mlagents::error_text(e.chain()));
            ExitCode::FAILURE
        }
    }
}
