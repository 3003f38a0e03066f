//! `mlagents-run`: inspect and evaluate ML-Agents policies (`.onnx` and `.nn`, both on tract).
//!
//! - `mlagents-run inspect MODEL [--json]`: format and version, ML-Agents constants, inputs and
//!   outputs with shapes, layer/op histogram, sha256.
//! - `mlagents-run eval MODEL --inputs FILE.json [--deterministic] [--seed N] [--json]`: runs
//!   the model once on `{"inputs": {"<name>": {"shape": [...], "data": [...]}}}` and prints
//!   `{"outputs": {...}}` for every output.
//!
//! Not built yet: `check` against an environment, playing a live environment.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mlagents::barracuda;
use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, Policy, TensorData};
use serde_json::json;
use sha2::Digest;
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
}

/// ML-Agents constant outputs (ONNX) or tensors (.nn).
const CONSTANTS: &[&str] = &[
    "version_number",
    "memory_size",
    "is_continuous_control",
    "action_output_shape",
    "continuous_action_output_shape",
    "discrete_action_output_shape",
];

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn is_nn(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("nn"))
}

fn inspect_nn(path: &Path, bytes: &[u8]) -> Result<serde_json::Value> {
    let model = barracuda::read(bytes).with_context(|| format!("reading {}", path.display()))?;
    let constants: BTreeMap<&str, f32> =
        CONSTANTS.iter().filter_map(|c| model.constant(c).map(|v| (*c, v))).collect();
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
        "sha256": sha256(bytes),
    }))
}

fn inspect_onnx(path: &Path, bytes: &[u8]) -> Result<serde_json::Value> {
    let label = path.display().to_string();
    let policy = OnnxPolicy::from_bytes(bytes, &label, LoadOptions { deterministic: true, seed: None })?;
    let proto = policy.proto();
    let graph = proto.graph.as_ref().context("no graph")?;
    let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.node {
        *histogram.entry(node.op_type.clone()).or_default() += 1;
    }
    // The constants are graph outputs: read them from one run at batch 1 on neutral inputs.
    let inputs: NamedTensors = policy
        .inputs()
        .iter()
        .map(|i| {
            let shape: Vec<usize> = i.dims.iter().map(|d| d.unwrap_or(1)).collect();
            let fill = if i.name == "action_masks" { 1.0 } else { 0.0 };
            let n = shape.iter().product();
            (i.name.clone(), TensorData { shape, data: vec![fill; n] })
        })
        .collect();
    let outputs = policy.run(&inputs)?;
    let constants: BTreeMap<&str, f32> = CONSTANTS
        .iter()
        .filter_map(|c| outputs.get(*c).and_then(|t| t.data.first()).map(|v| (*c, *v)))
        .collect();
    let dims = |d: &Option<usize>| d.map_or(json!("batch"), |v| json!(v));
    Ok(json!({
        "file": label,
        "format": "onnx",
        "ir_version": proto.ir_version,
        "opset": proto.opset_import.iter().map(|o| o.version).max(),
        "producer": format!("{} {}", proto.producer_name, proto.producer_version),
        "constants": constants,
        "inputs": policy.inputs().iter().map(|i| json!({"name": i.name, "shape": i.dims.iter().map(dims).collect::<Vec<_>>()})).collect::<Vec<_>>(),
        "outputs": policy.outputs().iter().map(|o| json!({"name": o, "shape_at_batch_1": outputs.get(o).map(|t| t.shape.clone())})).collect::<Vec<_>>(),
        "nodes": graph.node.len(),
        "histogram": histogram,
        "sha256": sha256(bytes),
    }))
}

fn print_report(report: &serde_json::Value, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(report).expect("json"));
        return;
    }
    let obj = report.as_object().expect("object");
    for (k, v) in obj {
        match v {
            serde_json::Value::Array(items) if !items.is_empty() => {
                println!("{k}:");
                items.iter().for_each(|i| println!("  {i}"));
            }
            _ => println!("{k}: {v}"),
        }
    }
}

fn eval(model: &Path, inputs: &Path, options: LoadOptions) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(inputs).with_context(|| format!("reading {}", inputs.display()))?;
    #[derive(serde::Deserialize)]
    struct InputFile {
        inputs: NamedTensors,
    }
    let file: InputFile = serde_json::from_str(&text).with_context(|| format!("parsing {}", inputs.display()))?;
    let policy = Policy::load(model, options)?;
    let outputs = policy.run(&file.inputs)?;
    Ok(json!({ "outputs": outputs }))
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { model, json } => std::fs::read(&model)
            .with_context(|| format!("reading {}", model.display()))
            .and_then(|bytes| if is_nn(&model) { inspect_nn(&model, &bytes) } else { inspect_onnx(&model, &bytes) })
            .map(|r| print_report(&r, json)),
        Command::Eval { model, inputs, deterministic, seed, json } => {
            eval(&model, &inputs, LoadOptions { deterministic, seed }).map(|r| print_report(&r, json))
        }
    };
    if let Err(e) = result {
        eprintln!("mlagents-run: {e:#}");
        std::process::exit(1);
    }
}
