//! `mlagents-export RUN_ID [--results-dir DIR] [--behavior NAME] [--checkpoint STEP]
//! [--onnx-api 3|2]`: turns a run's checkpoints into `<Behavior>.onnx`, `<Behavior>.nn` and
//! `<Behavior>.parity.json` in the run folder, without libtorch. Checkpoints are verified
//! (sha256) before anything is written; the latest usable one is taken unless `--checkpoint`
//! names a step.

use anyhow::{bail, Result};
use clap::Parser;
use mlagents::export::{export_run, ExportOptions};
use mlagents::onnx::export::OnnxApi;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "mlagents-export", version, about = "Export a training run's checkpoints to ONNX and Barracuda .nn")]
struct Cli {
    /// The run id (a folder under --results-dir) or a path to a run folder.
    run_id: String,
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
    let onnx_api = match cli.onnx_api {
        3 => OnnxApi::V3,
        2 => OnnxApi::V2,
        other => bail!("--onnx-api {other}: only 3 and 2 are written"),
    };
    let under_results = cli.results_dir.join(&cli.run_id);
    let as_given = PathBuf::from(&cli.run_id);
    let run_dir = if under_results.exists() || !as_given.is_dir() { under_results } else { as_given };
    let exported = export_run(&run_dir, cli.behavior.as_deref(), cli.checkpoint, ExportOptions { onnx_api })?;
    for e in exported {
        println!("{} (step {}): {}", e.behavior, e.step, e.onnx.display());
        match (&e.nn, &e.nn_skipped) {
            (Some(nn), _) => println!("{} (step {}): {}", e.behavior, e.step, nn.display()),
            (None, Some(why)) => println!("{}: no .nn: {why}", e.behavior),
            (None, None) => {}
        }
        if let Some(p) = &e.parity {
            println!("{} (step {}): {}", e.behavior, e.step, p.display());
        }
    }
    Ok(())
}
