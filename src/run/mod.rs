//! Running ML-Agents policies on tract: ONNX models (model API v1-v3) through tract-onnx, one
//! optimized plan per batch size; named float tensors in and out. What a policy's graph is
//! (its inputs, sampling, noise, seeds and metadata) is decided here; the plans that compute it
//! come from [`crate::engine`], through its one door.
//!
//! `.nn` models are read by [`crate::barracuda`] and lowered onto tract ([`NnPolicy`]).
//!
//! Formats in front, one core behind: a [`Policy`] holds either format's front and one
//! [`ModelInterface`] (inputs, outputs, constants, memories); playing ([`play`]), Unity's
//! checks ([`check`]), parity and [`session`] (what `mlagents-run`'s subcommands do) read the
//! interface and never match on the format.

mod check;
mod interface;
mod nn;
mod onnx;
mod parity;
mod play;
pub mod session;
pub mod versus;
mod text;
mod tensors;

pub use check::check;
pub use interface::{DeclaredInput, DeclaredOutput, FileVersion, MemorySlot, ModelInterface};
pub use nn::NnPolicy;
pub use onnx::{bounded_elements, MAX_INPUT_ELEMENTS};
pub use play::{play, play_recording, DecisionTimes, PlayError, PlayReport, PolicyDriver};
pub use onnx::{LoadOptions, OnnxInput, OnnxPolicy, PreparedInputs, NOISE_INPUT, UNIFORM_INPUT};
pub use parity::{check_parity, compare_models, record_outputs, record_steps, CompareReport, OutputCheck, ParityReport};
pub use tensors::{parse_eval_inputs, NamedTensors, TensorData};

/// Why a model cannot be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("cannot read {path}: {source}")]
    Io { path: String, #[source] source: std::io::Error },
    #[error("{path} is not an ONNX model: {detail}")]
    NotOnnx { path: String, detail: String },
    #[error("{path}: {detail}")]
    InvalidGraph { path: String, detail: String },
    #[error("{path}: input {name} declares {elements} values per call at batch {batch}; refusing to allocate more than {limit}")]
    TooLarge { path: String, name: String, elements: String, batch: usize, limit: usize },
    #[error("tract cannot build a plan for {path} for inputs of shapes {shapes}: {detail}")]
    Plan { path: String, shapes: String, detail: String },
    #[error("cannot lower {path} onto tract: {detail}")]
    Lower { path: String, detail: String },
    #[error("input {name:?}: {detail}")]
    BadInput { name: String, detail: String },
    #[error("the model needs input {name:?} (inputs: {known:?})")]
    MissingInput { name: String, known: Vec<String> },
    #[error("running {path} failed: {detail}")]
    Eval { path: String, detail: String },
    #[error("{path}: these inputs were prepared by another policy (prepare them with the policy that runs them)")]
    ForeignInputs { path: String },
}

/// A loaded policy: the format's engine in front (each format read and lowered its own way),
/// one [`ModelInterface`] behind it that everything else reads.
pub struct Policy {
    engine: Engine,
    interface: std::sync::OnceLock<ModelInterface>,
}

/// The engine of each format.
#[allow(clippy::large_enum_variant)] // a handful of policies per process
enum Engine {
    Onnx(OnnxPolicy),
    Nn(NnPolicy),
}

impl From<OnnxPolicy> for Policy {
    fn from(policy: OnnxPolicy) -> Self {
        Self { engine: Engine::Onnx(policy), interface: Default::default() }
    }
}

impl From<NnPolicy> for Policy {
    fn from(policy: NnPolicy) -> Self {
        Self { engine: Engine::Nn(policy), interface: Default::default() }
    }
}

/// The two model formats the runner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelFormat {
    Onnx,
    /// Barracuda `.nn` (named `barracuda` in reports).
    #[serde(rename = "barracuda")]
    Nn,
}

impl ModelFormat {
    /// The format a file's content shows: a Barracuda `.nn` starts with its int64 format
    /// version (15 to 20), an ONNX model with the protobuf tag of `ir_version` (0x08). `None`
    /// when the content shows neither (the file name then decides, and the reader reports).
    pub fn of_content(bytes: &[u8]) -> Option<Self> {
        let version = bytes.get(..8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")));
        if version.is_some_and(|v| (0..1 << 16).contains(&v) && crate::barracuda::READABLE_VERSIONS.contains(&(v % 255))) {
            Some(Self::Nn)
        } else if bytes.first() == Some(&0x08) {
            Some(Self::Onnx)
        } else {
            None
        }
    }

    /// The format a file name suggests (`.nn`, else ONNX).
    pub fn of_name(path: &std::path::Path) -> Self {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("nn")) { Self::Nn } else { Self::Onnx }
    }
}

impl Policy {
    /// Loads a model, `.nn` or ONNX as its content shows (a file whose name says otherwise
    /// is read all the same, with a warning).
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let bytes = std::fs::read(path).map_err(|source| RunError::Io { path: path.display().to_string(), source })?;
        Self::from_bytes(&bytes, path, options)
    }

    /// A model from the bytes of the file at `path` (whose name is only a hint).
    pub fn from_bytes(bytes: &[u8], path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let label = path.display().to_string();
        if bytes.is_empty() {
            return Err(RunError::Read { path: label, detail: "the file is empty (0 bytes)".into() });
        }
        let named = ModelFormat::of_name(path);
        let format = ModelFormat::of_content(bytes).unwrap_or(named);
        if format != named {
            let (is, ext) = if format == ModelFormat::Nn { ("a Barracuda .nn model", ".nn") } else { ("an ONNX model", ".onnx") };
            log::warn!("{label} is {is}; reading it as such (rename it to {ext})");
        }
        Ok(match format {
            ModelFormat::Nn => NnPolicy::from_bytes(bytes, &label, options)?.into(),
            ModelFormat::Onnx => OnnxPolicy::from_bytes(bytes, &label, options)?.into(),
        })
    }

    /// The model's format.
    pub fn format(&self) -> ModelFormat {
        match &self.engine {
            Engine::Onnx(_) => ModelFormat::Onnx,
            Engine::Nn(_) => ModelFormat::Nn,
        }
    }

    /// What the model declares, worked out on first use and kept (an ONNX model's constants
    /// take one run at batch 1, which leaves its random streams as they were).
    pub fn interface(&self) -> Result<&ModelInterface, RunError> {
        if let Some(interface) = self.interface.get() {
            return Ok(interface);
        }
        let interface = match &self.engine {
            Engine::Onnx(p) => p.interface()?,
            Engine::Nn(p) => p.interface(),
        };
        Ok(self.interface.get_or_init(|| interface))
    }

    /// Runs the model on named inputs; returns every output.
    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        match &self.engine {
            Engine::Onnx(p) => p.run(inputs),
            Engine::Nn(p) => p.run(inputs),
        }
    }

    /// Checks named inputs against the model and copies them into the runner's own tensors,
    /// laid out as the plan reads them. Inputs that several runs read (a benchmark, a
    /// comparison) are prepared once; [`Self::run`] prepares each call's.
    pub fn prepare(&self, inputs: &NamedTensors) -> Result<PreparedInputs, RunError> {
        match &self.engine {
            Engine::Onnx(p) => p.prepare(&tensors::views(inputs)),
            Engine::Nn(p) => p.prepare(inputs),
        }
    }

    /// Runs the model on inputs [`Self::prepare`] made, reading them in place; returns every
    /// output. Inputs prepared by another policy are refused.
    pub fn run_prepared(&self, inputs: &PreparedInputs) -> Result<NamedTensors, RunError> {
        match &self.engine {
            Engine::Onnx(p) => p.run_prepared(inputs),
            Engine::Nn(p) => p.run_prepared(inputs),
        }
    }

    /// Computes only the named outputs from now on, so that the work only other outputs need
    /// is not done (e.g. the sampling branch in deterministic play). The interface is read
    /// first, so it still describes the whole model.
    pub fn keep_outputs(&mut self, names: &[&str]) -> Result<(), RunError> {
        self.interface()?;
        match &mut self.engine {
            Engine::Onnx(p) => p.keep_outputs(names),
            Engine::Nn(p) => p.keep_outputs(names),
        }
    }

    /// The names of the outputs [`Self::run`] returns.
    pub fn outputs(&self) -> &[String] {
        match &self.engine {
            Engine::Onnx(p) => p.outputs(),
            Engine::Nn(p) => p.outputs(),
        }
    }

    /// Weights and constants holding NaN or infinities, each as `name (count values)` (read
    /// from the weights alone, without running the model).
    pub fn non_finite_weights(&self) -> Vec<String> {
        let found = match &self.engine {
            Engine::Onnx(p) => p.non_finite_weights(),
            Engine::Nn(p) => p.non_finite_weights(),
        };
        interface::describe_non_finite(found)
    }

    /// Whether the (possibly rewritten) graph declares an input of this name.
    pub fn declares_input(&self, name: &str) -> bool {
        match &self.engine {
            Engine::Onnx(p) => p.inputs().iter().any(|i| i.name == name),
            Engine::Nn(p) => p.declares_input(name),
        }
    }
}
