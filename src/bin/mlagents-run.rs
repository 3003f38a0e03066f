//! `mlagents-run`: inspect and evaluate ML-Agents policies (`.onnx` and `.nn`, both on tract).
//!
//! - `mlagents-run inspect MODEL [--json]`: format and version, ML-Agents constants, inputs and
//!   outputs with shapes, layer/op histogram, sha256.
//! - `mlagents-run eval MODEL --inputs FILE.json [--deterministic] [--seed N] [--json]`: runs
//!   the model once on `{"inputs": {"<name>": {"shape": [...], "data": [...]}}}` and prints
//!   `{"outputs": {...}}` for every output.
//!
//! - `mlagents-run MODEL --env ENV [--episodes N] [--deterministic] [--behavior NAME]` (or
//!   `mlagents-run play ...`): plays the policy against a live environment (a Unity build,
//!   `sim:SCENE`, or the Editor when ENV is `editor`) and prints, per behavior, episodes, mean
//!   and std of the episode reward and decisions per second.
//!
//!   With `--parity FILE` (a `<Behavior>.parity.json` from `mlagents-export`), the model's
//!   outputs on the recorded inputs are first compared with the training network's (max abs
//!   error per output, `--tolerance`, default 1e-5); exit status 1 when they differ.
//!
//! - `mlagents-run check MODEL --env ENV [--behavior NAME]`: validates the model against the
//!   environment's behavior specs as Unity's model checker does, listing every violation
//!   (exit status 1 when there is any).
//!
//! - `mlagents-run compare A B (--parity FILE | --env ENV [--decisions N])`: runs two models
//!   (e.g. an `.onnx` and an `.nn`) deterministically on the same decisions, fed as Unity feeds
//!   each, and compares their actions (exit status 1 when they differ).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mlagents::barracuda;
use mlagents::env::{EnvOptions, UnityEnvironment};
use mlagents::policy::parity::ParityRecord;
use mlagents::run::{check, check_parity, compare_models, record_steps, CompareReport, LoadOptions, ModelFacts, parse_eval_inputs, OnnxPolicy, ParityReport, Policy, PolicyDriver};
use mlagents::spec::{BehaviorName, MODEL_CONSTANTS};
use serde_json::json;
use mlagents::checkpoint::sha256_hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// Validates the model against an environment's behavior specs, as Unity does.
    Check {
        model: PathBuf,
        #[command(flatten)]
        env: EnvArgs,
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
        #[arg(long, default_value_t = 1e-5, value_parser = parse_tolerance)]
        tolerance: f32,
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

/// Starts the environment and resets it.
fn start_environment(args: &EnvArgs, seed: u64) -> Result<UnityEnvironment> {
    let env = args.env.as_str();
    let target = (env != "editor").then(|| env.to_string());
    let base_port = args.base_port.or(if env.starts_with(mlagents::env::SIM_PREFIX) { Some(0) } else { None });
    let mut environment = UnityEnvironment::new(EnvOptions {
        env: target,
        base_port,
        seed: seed as i32,
        timeout_wait: std::time::Duration::from_secs(args.timeout_wait),
        // Scenes send stats; they are not reported here, only accepted.
        side_channels: vec![mlagents::comm::side_channel::shared(mlagents::comm::side_channel::StatsSideChannel::new())],
        ..Default::default()
    })?;
    environment.reset()?;
    Ok(environment)
}

/// The behavior named `wanted` (full name or plain name), or the first one.
fn pick_behavior(environment: &UnityEnvironment, wanted: Option<String>) -> Result<String> {
    let names = environment.behavior_names();
    match wanted {
        Some(b) => names
            .iter()
            .find(|n| **n == b || BehaviorName::parse(n).name == b)
            .cloned()
            .with_context(|| format!("no behavior {b:?} in the environment (it has {names:?})")),
        None => names.first().cloned().context("the environment reported no behavior"),
    }
}

fn check_model(model: &Path, args: &EnvArgs) -> Result<(serde_json::Value, bool)> {
    let policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() })?;
    let facts = ModelFacts::of(&policy)?;
    let mut environment = start_environment(args, 0)?;
    let names = match &args.behavior {
        Some(_) => vec![pick_behavior(&environment, args.behavior.clone())?],
        None => environment.behavior_names(),
    };
    let mut clean = true;
    let mut reports = vec![];
    for name in names {
        let violations = check(&facts, &environment.behavior_specs()[&name]);
        clean &= violations.is_empty();
        reports.push(json!({"behavior": name, "violations": violations}));
    }
    environment.close()?;
    Ok((json!({"model": model.display().to_string(), "env": args.env, "checks": reports}), clean))
}

fn play(model: &Path, args: &EnvArgs, seed: u64, options: LoadOptions, episodes: usize, max_steps: usize) -> Result<serde_json::Value> {
    let policy = Policy::load(model, options)?;
    let facts = ModelFacts::of(&policy)?;
    let mut environment = start_environment(args, seed)?;
    let name = pick_behavior(&environment, args.behavior.clone())?;
    let spec = environment.behavior_specs()[&name].clone();
    // Unity refuses to load what `check` reports: so does play.
    let violations = check(&facts, &spec);
    if !violations.is_empty() {
        let _ = environment.close();
        anyhow::bail!(
            "{} does not fit behavior {name} of {}, as Unity's model checks would say (see `mlagents-run check`):\n  {}",
            model.display(),
            args.env,
            violations.join("\n  ")
        );
    }
    let mut driver = PolicyDriver::new(policy, &name, &spec, options.deterministic, seed)?;
    let report = mlagents::run::play(&mut environment, &mut driver, episodes, max_steps)?;
    environment.close()?;
    Ok(json!({
        "model": model.display().to_string(),
        "env": args.env,
        "deterministic": options.deterministic,
        "behaviors": [{
            "behavior": report.behavior,
            "episodes": report.episodes,
            "mean_reward": report.mean_reward,
            "std_reward": report.std_reward,
            "decisions": report.decisions,
            "decisions_per_second": report.decisions_per_second.round(),
        }],
    }))
}

fn parity(model: &Path, record: &Path, tolerance: f32) -> Result<ParityReport> {
    let record = ParityRecord::read(record)?;
    Ok(check_parity(model, &record, tolerance)?)
}

fn print_parity(report: &ParityReport) {
    let sha = match &report.recorded_sha256 {
        Some(s) if *s == report.sha256 => "the file the record was made for",
        Some(_) => "NOT the file the record was made for (sha256 differs)",
        None => "a file the record does not list",
    };
    println!("parity of {} ({sha}) on {} recorded rows, tolerance {:e}:", report.model, report.rows, report.tolerance);
    if !report.non_finite_weights.is_empty() {
        println!("  weights hold NaN or infinities (Unity would compute NaN actions): {} FAILED", report.non_finite_weights.join(", "));
    }
    for c in &report.checks {
        println!(
            "  {} vs recorded {}: max abs error {:e}{} {}",
            c.output,
            c.recorded,
            c.max_abs_error,
            if c.mismatched_rows > 0 { format!(", {} rows differ", c.mismatched_rows) } else { String::new() },
            if c.passed { "ok" } else { "FAILED" }
        );
    }
}

/// Decision batches from a live environment, stepped with random actions.
fn live_decisions(env: &str, behavior: Option<String>, count: usize) -> Result<(String, mlagents::spec::BehaviorSpec, Vec<mlagents::env::DecisionSteps>)> {
    let args = EnvArgs { env: env.into(), behavior, base_port: None, timeout_wait: 60 };
    let mut environment = start_environment(&args, 0)?;
    let name = pick_behavior(&environment, args.behavior.clone())?;
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
            environment.set_actions(&other, mlagents::env::ActionTuple::random(&s.action_spec, &d, &mut rng))?;
        }
        environment.step()?;
    }
    environment.close()?;
    Ok((name, spec, batches))
}

fn compare(first: &Path, second: &Path, parity: Option<&Path>, env: Option<&str>, behavior: Option<String>, decisions: usize, tolerance: f32) -> Result<CompareReport> {
    let (name, spec, batches) = match (parity, env) {
        (Some(p), _) => {
            let record = ParityRecord::read(p)?;
            let (spec, steps) = record_steps(&record);
            (record.behavior.clone(), spec, vec![steps])
        }
        (None, Some(env)) => live_decisions(env, behavior, decisions)?,
        (None, None) => anyhow::bail!("compare needs the decisions: --parity FILE or --env ENV"),
    };
    Ok(compare_models(first, second, &name, &spec, &batches, tolerance)?)
}


/// Inspects a model, `.nn` or ONNX as its content shows.
fn inspect(path: &Path) -> Result<serde_json::Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    // Read once: the policy tells the format and the weights; the file's own fields come
    // from the bytes.
    let policy = Policy::from_bytes(&bytes, path, LoadOptions { deterministic: true, ..Default::default() })?;
    let mut report = match &policy {
        Policy::Nn(_) => inspect_nn(path, &bytes)?,
        Policy::Onnx(onnx) => inspect_onnx(path, &bytes, onnx)?,
    };
    report["non_finite_weights"] = json!(policy.non_finite_weights());
    Ok(report)
}

fn inspect_nn(path: &Path, bytes: &[u8]) -> Result<serde_json::Value> {
    let model = barracuda::read(bytes).with_context(|| format!("reading {}", path.display()))?;
    let constants: BTreeMap<&str, f32> =
        MODEL_CONSTANTS.iter().filter_map(|c| model.constant(c).map(|v| (*c, v))).collect();
    let histogram: BTreeMap<String, usize> =
        model.layer_histogram().into_iter().map(|(t, n)| (format!("{t:?}"), n)).collect();
    Ok(json!({
        "file": path.display().to_string(),
        "format": "barracuda",
        "version": model.version,
        "constants": constants,
        "inputs": model.inputs.iter().map(|i| json!({"name": i.name, "shape": i.shape})).collect::<Vec<_>>(),
        "outputs": model.outputs,
        "memories": model.memories.iter().map(|m| json!({"input": m.input, "output": m.output, "shape": m.shape})).collect::<Vec<_>>(),
        "layers": model.layers.len(),
        "histogram": histogram,
        "sha256": sha256_hex(bytes),
    }))
}

fn inspect_onnx(path: &Path, bytes: &[u8], policy: &OnnxPolicy) -> Result<serde_json::Value> {
    let label = path.display().to_string();
    let proto = policy.proto();
    let graph = proto.graph.as_ref().context("no graph")?;
    let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.node {
        *histogram.entry(node.op_type.clone()).or_default() += 1;
    }
    // The constants are graph outputs: read them from one run at batch 1 on neutral inputs.
    let outputs = policy.run(&policy.neutral_inputs(1)?)?;
    let constants: BTreeMap<&str, f32> = MODEL_CONSTANTS
        .iter()
        .filter_map(|c| outputs.get(*c).and_then(|t| t.data.first()).map(|v| (*c, *v)))
        .collect();
    let dims = |d: &Option<usize>| d.map_or(json!("batch"), |v| json!(v));
    Ok(json!({
        "file": label,
        "format": "onnx",
        "ir_version": proto.ir_version,
        "opset": proto.opset_import.iter().map(|o| o.version).max(),
        "producer": format!("{} {}", proto.producer_name, proto.producer_version).trim(),
        "constants": constants,
        "inputs": policy.inputs().iter().map(|i| json!({"name": i.name, "shape": i.dims.iter().map(dims).collect::<Vec<_>>()})).collect::<Vec<_>>(),
        "outputs": policy.outputs().iter().map(|o| json!({"name": o, "shape_at_batch_1": outputs.get(o).map(|t| t.shape.clone())})).collect::<Vec<_>>(),
        "nodes": graph.node.len(),
        "histogram": histogram,
        "sha256": sha256_hex(bytes),
    }))
}

fn print_report(report: &serde_json::Value, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(report).expect("json"));
        return;
    }
    let mut text = String::new();
    for (key, value) in report.as_object().into_iter().flatten() {
        write_for_people(&mut text, key, value, "");
    }
    print!("{text}");
}

/// A scalar as a person reads it: strings unquoted, whole floats without a fraction.
fn scalar_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        serde_json::Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// `key: value` lines, nested objects and lists indented (`--json` prints the same for
/// machines).
fn write_for_people(out: &mut String, key: &str, value: &serde_json::Value, indent: &str) {
    use serde_json::Value;
    use std::fmt::Write;
    let deeper = format!("{indent}  ");
    match value {
        Value::Object(fields) if fields.is_empty() => {
            let _ = writeln!(out, "{indent}{key}: none");
        }
        Value::Object(fields) => {
            let _ = writeln!(out, "{indent}{key}:");
            for (k, v) in fields {
                write_for_people(out, k, v, &deeper);
            }
        }
        Value::Array(items) if items.iter().all(|i| i.is_string()) && items.iter().any(|i| scalar_text(i).len() > 30) => {
            // Sentences (e.g. violations): one per line.
            let _ = writeln!(out, "{indent}{key}:");
            for item in items {
                let _ = writeln!(out, "{deeper}- {}", scalar_text(item));
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let list: Vec<String> = items.iter().map(scalar_text).collect();
            let _ = writeln!(out, "{indent}{key}: {}", if list.is_empty() { "none".into() } else { list.join(", ") });
        }
        Value::Array(items) => {
            let _ = writeln!(out, "{indent}{key}:");
            for item in items {
                match item.as_object() {
                    // One line per item when its fields are scalars: `- name: obs_0, shape: batch, 8`.
                    Some(fields) if fields.values().all(|v| !v.is_object() && !v.as_array().is_some_and(|a| a.iter().any(|i| i.is_object() || i.is_string()))) => {
                        let parts: Vec<String> = fields
                            .iter()
                            .map(|(k, v)| match v.as_array() {
                                Some(list) if list.is_empty() => format!("{k}: none"),
                                Some(list) => format!("{k}: [{}]", list.iter().map(scalar_text).collect::<Vec<_>>().join(", ")),
                                None => format!("{k}: {}", scalar_text(v)),
                            })
                            .collect();
                        let _ = writeln!(out, "{deeper}- {}", parts.join(", "));
                    }
                    Some(fields) => {
                        // The first field on the item's line, the others under it.
                        let mut first = true;
                        for (k, v) in fields {
                            let mut line = String::new();
                            write_for_people(&mut line, k, v, &format!("{deeper}  "));
                            if first {
                                line.replace_range(..deeper.len() + 2, &format!("{deeper}- "));
                                first = false;
                            }
                            out.push_str(&line);
                        }
                    }
                    None => write_for_people(out, "-", item, &deeper),
                }
            }
        }
        scalar => {
            let _ = writeln!(out, "{indent}{key}: {}", scalar_text(scalar));
        }
    }
}

fn eval(model: &Path, inputs: &Path, options: LoadOptions) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(inputs).with_context(|| format!("reading {}", inputs.display()))?;
    let tensors = parse_eval_inputs(&text).with_context(|| format!("parsing {}", inputs.display()))?;
    let policy = Policy::load(model, options)?;
    let outputs = policy.run(&tensors)?;
    Ok(json!({ "outputs": outputs }))
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // `mlagents-run MODEL --env ENV ...` is short for `mlagents-run play MODEL --env ENV ...`.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let subcommands = ["inspect", "eval", "check", "play", "compare", "help"];
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        if !first.starts_with('-') && !subcommands.contains(&first) {
            args.insert(1, "play".into());
        }
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Inspect { model, json } => inspect(&model).map(|r| print_report(&r, json)),
        Command::Eval { model, inputs, deterministic, seed, json } => {
            eval(&model, &inputs, LoadOptions { deterministic, seed, ..Default::default() }).map(|r| print_report(&r, json))
        }
        Command::Check { model, env, json } => {
            check_model(&model, &env).map(|(r, clean)| {
                print_report(&r, json);
                if !clean {
                    std::process::exit(1);
                }
            })
        }
        Command::Compare { first, second, parity, env, behavior, decisions, tolerance, json } => {
            compare(&first, &second, parity.as_deref(), env.as_deref(), behavior, decisions as usize, tolerance).map(|r| {
                if json {
                    println!("{}", serde_json::to_string_pretty(&r).expect("json"));
                } else {
                    println!(
                        "{} vs {}: {} decisions, continuous max abs error {:e}, {} discrete rows differ (tolerance {:e}): {}",
                        r.first,
                        r.second,
                        r.rows,
                        r.continuous_max_abs_error,
                        r.discrete_mismatched_rows,
                        r.tolerance,
                        if r.passed { "same" } else { "DIFFERENT" }
                    );
                }
                if !r.passed {
                    std::process::exit(1);
                }
            })
        }
        Command::Play { model, env, episodes, deterministic, seed, max_steps, parity: record, tolerance, json } => {
            let parity_report = match record.as_deref().map(|r| parity(&model, r, tolerance)) {
                Some(Err(e)) => {
                    eprintln!("mlagents-run: {e:#}");
                    std::process::exit(1);
                }
                Some(Ok(report)) => Some(report),
                None => None,
            };
            if let (Some(report), false) = (&parity_report, json) {
                print_parity(report);
            }
            // `--seed` seeds the in-graph noise, the sampling of discrete actions and the
            // environment.
            let options = LoadOptions { deterministic, seed: Some(seed as u32), ..Default::default() };
            let parity_failed = parity_report.as_ref().is_some_and(|r| !r.passed);
            let result = play(&model, &env, seed, options, episodes as usize, max_steps as usize).map(|mut r| {
                if let Some(report) = &parity_report {
                    r["parity"] = serde_json::to_value(report).expect("json");
                }
                r
            });
            let result = result.map(|r| {
                if json {
                    return print_report(&r, true);
                }
                for b in r["behaviors"].as_array().into_iter().flatten() {
                    println!(
                        "{}: {} episodes, mean reward {:.3}, std {:.3}, {} decisions/s ({})",
                        b["behavior"].as_str().unwrap_or("?"),
                        b["episodes"],
                        b["mean_reward"].as_f64().unwrap_or(f64::NAN),
                        b["std_reward"].as_f64().unwrap_or(f64::NAN),
                        b["decisions_per_second"],
                        if deterministic { "deterministic" } else { "sampled" }
                    );
                }
            });
            if result.is_ok() && parity_failed {
                eprintln!("mlagents-run: the model's outputs differ from the parity record");
                std::process::exit(1);
            }
            result
        }
    };
    if let Err(e) = result {
        eprintln!("mlagents-run: {e:#}");
        std::process::exit(1);
    }
}
