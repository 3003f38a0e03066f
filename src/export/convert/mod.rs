//! `mlagents-export convert IN.nn OUT.onnx`: migrates a legacy Barracuda `.nn` policy to an
//! ONNX policy that ML-Agents 3.x/4.x (Sentis, Inference Engine) load, with a parity record
//! proving that the ONNX computes what the `.nn` computes.
//!
//! The `.nn`'s layers are lowered exactly as the runner lowers them to run the `.nn`
//! ([`graph`]); the interface around them follows model API 3 (or 2 on request), its
//! observations ordered by [`layout`]. The parity record holds seeded inputs (observations,
//! masks, noise, uniform draws, memories carried over one agent's decisions) and the `.nn`'s
//! outputs on them computed by the runner; the converted model must pass it (max abs error
//! 1e-5, equal discrete choices) before anything is written, and both files are written
//! atomically: a conversion is whole or absent.

mod graph;
pub mod layout;

use crate::barracuda::{self, NnModel};
use crate::checkpoint::{sha256_hex, write_atomic};
use crate::onnx::export::OnnxApi;
use crate::policy::parity::{ParityRecord, PARITY_FORMAT_VERSION};
use crate::policy::{PolicyDescription, POLICY_FORMAT_VERSION};
use crate::run::{check_parity, record_outputs, ModelFormat, ParityReport};
use crate::spec::BehaviorSpec;
use layout::{LegacyLayout, ObservationTarget};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::path::{Path, PathBuf};

/// Largest difference the converted model may show against the `.nn` on the parity record.
pub const CONVERT_TOLERANCE: f32 = 1e-5;

/// Conversion choices.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    pub onnx_api: OnnxApi,
    /// The behavior's spec: the order of the observations and their split (see [`layout`]).
    pub behavior_spec: Option<BehaviorSpec>,
    /// Rows of the parity record.
    pub rows: usize,
    /// Seed of the parity record's inputs.
    pub seed: u64,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self { onnx_api: OnnxApi::V3, behavior_spec: None, rows: 64, seed: 1 }
    }
}

/// What a conversion wrote.
#[derive(Debug)]
pub struct Converted {
    pub onnx: PathBuf,
    pub parity: PathBuf,
    pub layout: LegacyLayout,
    /// The converted model checked against the parity record.
    pub report: ParityReport,
}

/// Why a conversion failed (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{path}: {detail}")]
    Input { path: String, detail: String },
    #[error("{path}: no faithful ONNX translation: {source}")]
    Lower { path: String, #[source] source: barracuda::LowerError },
    #[error("{path}: {detail}")]
    Parity { path: String, detail: String },
    #[error("writing {path}: {source}")]
    Write { path: String, #[source] source: std::io::Error },
}

/// The distribution of `vector_observation` a normalising `.nn` was trained on: its running
/// mean and the standard deviation its normaliser divides by (`sqrt(running_variance /
/// (normalization_steps + 1))`, barracuda-nn.md §8), when it records them.
fn trained_observations(nn: &NnModel, vector_size: usize) -> Option<(Vec<f32>, Vec<f32>)> {
    let values = |name: &str| nn.tensor(name).map(|t| nn.tensor_values(t));
    let (mean, variance) = (values("running_mean")?, values("running_variance")?);
    let steps = nn.constant("normalization_steps")?;
    if mean.len() != vector_size || variance.len() != vector_size {
        return None;
    }
    let std = variance.iter().map(|v| (v.max(0.0) / (steps + 1.0)).sqrt()).collect();
    Some((mean, std))
}

/// The parity record's inputs: seeded observations (vectors from the distribution the `.nn`'s
/// normaliser recorded, else uniform in [-1, 1], the range ML-Agents asks observations to be
/// normalised to; images uniform in [0, 1]), masks
/// with about one choice in five forbidden (never a whole branch), noise, uniform draws, and
/// memories that start at zero, continue from row to row, and restart mid-way (an episode
/// start).
fn record_inputs(layout: &LegacyLayout, trained: Option<(Vec<f32>, Vec<f32>)>, behavior: &str, options: &ConvertOptions) -> ParityRecord {
    let n = options.rows.max(2);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let spec = &layout.action_spec;
    let observation_shapes: Vec<Vec<usize>> = layout.observations.iter().map(ObservationTarget::shape).collect();
    let observations = layout
        .observations
        .iter()
        .map(|o| match o {
            ObservationTarget::Visual { shape, .. } => (0..n * shape.iter().product::<usize>()).map(|_| rng.random::<f32>()).collect(),
            ObservationTarget::Vector { offset, size } => (0..n * size)
                .map(|i| match &trained {
                    Some((mean, std)) => mean[offset + i % size] + std[offset + i % size] * rng.sample::<f32, _>(StandardNormal),
                    None => rng.random_range(-1.0f32..1.0),
                })
                .collect(),
        })
        .collect();
    let mut action_masks = vec![];
    for _ in 0..n {
        for size in &spec.discrete_branches {
            let mut row: Vec<f32> = (0..*size).map(|_| if rng.random::<f32>() < 0.2 { 0.0 } else { 1.0 }).collect();
            if row.iter().all(|v| *v == 0.0) {
                row[rng.random_range(0..*size)] = 1.0;
            }
            action_masks.extend(row);
        }
    }
    let m = layout.memory_size;
    // Rows 1.. continue from the row before (filled by `record_outputs`); row n/2 restarts.
    let recurrent_in = (0..n * m).map(|i| if i / m.max(1) == 0 || i / m.max(1) == n / 2 { 0.0 } else { 1.0 }).collect();
    ParityRecord {
        format_version: PARITY_FORMAT_VERSION,
        behavior: behavior.into(),
        step: 0,
        policy: PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes,
            action_spec: spec.clone(),
            hidden_units: 0,
            num_layers: 0,
            normalize: false,
            memory_size: m,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: crate::policy::ContinuousHead::default(),
        },
        files: Default::default(),
        batch: n,
        observations,
        action_masks,
        noise: (0..n * spec.continuous_size).map(|_| rng.sample::<f32, _>(StandardNormal)).collect(),
        deterministic_continuous_actions: vec![],
        continuous_actions: vec![],
        deterministic_discrete_actions: vec![],
        uniform: (0..n * spec.discrete_branches.len()).map(|_| rng.random::<f32>()).collect(),
        discrete_actions: vec![],
        recurrent_in,
        recurrent_out: vec![],
    }
}

/// A file removed when dropped.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads a `.nn` file, saying so when the content is another format.
fn read_nn(input: &Path) -> Result<(Vec<u8>, NnModel), ConvertError> {
    let path = input.display().to_string();
    let bad = |detail: String| ConvertError::Input { path: path.clone(), detail };
    let bytes = std::fs::read(input).map_err(|e| bad(e.to_string()))?;
    if ModelFormat::of_content(&bytes) == Some(ModelFormat::Onnx) && barracuda::read(&bytes).is_err() {
        return Err(bad("this is an ONNX model, not a Barracuda .nn; there is nothing to convert (check it with `mlagents-run check`)".into()));
    }
    let model = barracuda::read(&bytes).map_err(|e| bad(e.to_string()))?;
    Ok((bytes, model))
}

/// Converts `input` (a `.nn`) to `output` (`.onnx`) and writes the parity record beside it
/// (`<output stem>.parity.json`), after checking the converted model against the record.
pub fn convert_nn(input: &Path, output: &Path, options: &ConvertOptions) -> Result<Converted, ConvertError> {
    let out_label = output.display().to_string();
    if output.extension().is_none_or(|e| !e.eq_ignore_ascii_case("onnx")) {
        return Err(ConvertError::Input { path: out_label, detail: "the output must be named .onnx: Unity picks the importer by the file's extension".into() });
    }
    let (nn_bytes, nn) = read_nn(input)?;
    let in_label = input.display().to_string();
    let layout = layout::layout(&nn, options.behavior_spec.as_ref()).map_err(|detail| ConvertError::Input { path: in_label.clone(), detail })?;
    if options.onnx_api == OnnxApi::V2 && layout.memory_size > 0 {
        return Err(ConvertError::Input {
            path: in_label,
            detail: "com.unity.ml-agents 2.x and later refuse version-2 models that use memory; convert to API 3 (--onnx-api 3)".into(),
        });
    }
    let graph = graph::converted_graph(&nn, &layout, options.onnx_api).map_err(|source| ConvertError::Lower { path: in_label.clone(), source })?;
    let onnx_bytes = prost::Message::encode_to_vec(&graph);
    let stem = output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "policy".into());
    let parity_path = output.with_file_name(format!("{stem}.parity.json"));
    let mut record = record_inputs(&layout, trained_observations(&nn, layout.vector_size), &stem, options);
    let parity_error = |detail: String| ConvertError::Parity { path: in_label.clone(), detail };
    record_outputs(input, &mut record).map_err(|e| parity_error(format!("running the .nn: {e}")))?;
    let file_name = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    record.files = [(file_name(input), sha256_hex(&nn_bytes)), (file_name(output), sha256_hex(&onnx_bytes))].into_iter().collect();
    // Check the converted bytes before they replace anything at `output`.
    let staging = Staging(output.with_file_name(format!(".{}.converting-{}", file_name(output), std::process::id())));
    std::fs::write(&staging.0, &onnx_bytes).map_err(|source| ConvertError::Write { path: staging.0.display().to_string(), source })?;
    let report = check_parity(&staging.0, &record, CONVERT_TOLERANCE).map_err(|e| parity_error(format!("running the converted model: {e}")))?;
    drop(staging);
    if !report.passed {
        let failed: Vec<String> = report.checks.iter().filter(|c| !c.passed).map(|c| format!("{} (max abs error {}, {} rows differ)", c.output, c.max_abs_error, c.mismatched_rows)).collect();
        let failed = failed.join(", ");
        return Err(parity_error(format!("the converted model differs from the .nn: {failed}; nothing written")));
    }
    let parity_bytes = serde_json::to_vec_pretty(&record).expect("plain data serialises");
    write_atomic(output, &onnx_bytes).map_err(|source| ConvertError::Write { path: out_label.clone(), source })?;
    if let Err(source) = write_atomic(&parity_path, &parity_bytes) {
        let _ = std::fs::remove_file(output);
        return Err(ConvertError::Write { path: parity_path.display().to_string(), source });
    }
    Ok(Converted { onnx: output.to_path_buf(), parity: parity_path, layout, report: ParityReport { model: out_label, ..report } })
}
