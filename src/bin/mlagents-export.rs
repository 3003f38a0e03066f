//! `mlagents-export RUN_ID [--results-dir DIR] [--behavior NAME] [--checkpoint STEP]
//! [--onnx-api 3|2] [--target PACKAGE@VERSION]`: turns a run's checkpoints into `<Behavior>.onnx`, `<Behavior>.nn` and
//! `<Behavior>.parity.json` in the run folder, without libtorch. Checkpoints are verified
//! (sha256) before anything is written; the latest usable one is taken unless `--checkpoint`
//! names a step.
//!
//! `mlagents-export convert IN.nn OUT.onnx [--onnx-api 3|2] [--behavior-spec FILE.json]`:
//! migrates a legacy Barracuda `.nn` policy to ONNX, with `OUT.parity.json` beside it.

use anyhow::{bail, Result};
use clap::Parser;
use mlagents::export::convert::{convert_nn, ConvertOptions};
use mlagents::export::{export_run, ExportOptions};
use mlagents::onnx::export::OnnxApi;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "mlagents-export", version, about = "Export a training run's checkpoints to ONNX and Barracuda .nn")]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The run id (a folder under --results-dir) or a path to a run folder.
    #[arg(required = true)]
    run_id: Option<String>,
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
    /// Export only this behavior.
    #[arg(long)]
    behavior: Option<String>,
    /// Export the checkpoint taken at this step instead of the latest.
    #[arg(long)]
    checkpoint: Option<u64>,
    /// ML-Agents model API of the ONNX file: 3 (com.unity.ml-agents 2.x) or 2 (1.x).
    #[arg(long, default_value_t = 3)]
    onnx_api: u32,
    /// The Unity package the export is for (ml-agents@2.0.1, ml-agents@3.0.0, sentis@2.1.0, …):
    /// sets how entity (BufferSensor) observations are laid out, Barracuda's transposed view
    /// for ml-agents 2.x and earlier (ML-Agents 0.28's exports, the default) or as they are for
    /// Sentis-era packages. Recorded in the ONNX file.
    #[arg(long)]
    target: Option<String>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Migrate a legacy Barracuda .nn policy to ONNX (ML-Agents 3.x/4.x load it), with a parity
    /// record proving it computes what the .nn computes.
    Convert {
        /// The .nn policy.
        input: PathBuf,
        /// The ONNX file to write; OUT.parity.json is written beside it.
        output: PathBuf,
        /// ML-Agents model API of the ONNX file: 3 (com.unity.ml-agents 2.x and later) or 2.
        #[arg(long, default_value_t = 3)]
        onnx_api: u32,
        /// The behavior's spec (JSON; `mlagents-run check MODEL --env ENV --json` prints it):
        /// the order of the observations and how vector_observation splits into sensors.
        #[arg(long)]
        behavior_spec: Option<PathBuf>,
    },
}

fn onnx_api(number: u32) -> Result<OnnxApi> {
    match number {
        3 => Ok(OnnxApi::V3),
        2 => Ok(OnnxApi::V2),
        other => bail!("--onnx-api {other}: only 3 and 2 are written"),
    }
}

fn convert(input: PathBuf, output: PathBuf, api: u32, behavior_spec: Option<PathBuf>) -> Result<()> {
    let behavior_spec = match behavior_spec {
        Some(path) => Some(mlagents::spec::BehaviorSpec::read_file(&path).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let options = ConvertOptions { onnx_api: onnx_api(api)?, behavior_spec, ..Default::default() };
    let converted = convert_nn(&input, &output, &options)?;
    let shapes: Vec<String> = converted.layout.observations.iter().map(|o| format!("{:?}", o.shape())).collect();
    say(&format!("{}: observations {}, actions {}, memory {}", input.display(), shapes.join(" "), converted.layout.action_spec, converted.layout.memory_size))?;
    let worst = converted.report.checks.iter().map(|c| c.max_abs_error).fold(0.0f32, f32::max);
    say(&format!("{}: parity with the .nn on {} rows passed (max abs error {worst:e})", converted.onnx.display(), converted.report.rows))?;
    say(&converted.parity.display().to_string())?;
    Ok(())
}

/// One line on standard output (a closed pipe ends the output quietly).
fn say(line: &str) -> Result<()> {
    mlagents::console::write_stdout_line(line).map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("mlagents-export: {}", mlagents::error_text(e.chain()));
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    if let Some(Command::Convert { input, output, onnx_api, behavior_spec }) = cli.command {
        return convert(input, output, onnx_api, behavior_spec);
    }
    let onnx_api = onnx_api(cli.onnx_api)?;
    let run_id = cli.run_id.expect("clap requires RUN_ID without a subcommand");
    let under_results = cli.results_dir.join(&run_id);
    let as_given = PathBuf::from(&run_id);
    let run_dir = if under_results.exists() || !as_given.is_dir() { under_results } else { as_given };
    let entity_layout = match &cli.target {
        Some(text) => mlagents::compat::targets::parse_target(text).map_err(anyhow::Error::msg)?.entity_layout(),
        None => Default::default(),
    };
    let exported = export_run(&run_dir, cli.behavior.as_deref(), cli.checkpoint, ExportOptions { onnx_api, entity_layout })?;
    for e in exported {
        say(&format!("{} (step {}): {}", e.behavior, e.step, e.onnx.display()))?;
        match (&e.nn, &e.nn_skipped) {
            (Some(nn), _) => say(&format!("{} (step {}): {}", e.behavior, e.step, nn.display()))?,
            (None, Some(why)) => say(&format!("{}: no .nn: {why}", e.behavior))?,
            (None, None) => {}
        }
        if let Some(p) = &e.parity {
            say(&format!("{} (step {}): {}", e.behavior, e.step, p.display()))?;
        }
    }
    Ok(())
}
