//! Barracuda `.nn` policies on tract: the model is lowered to an ONNX graph
//! ([`crate::barracuda::to_onnx`]) and run by the same [`OnnxPolicy`] machinery. Inputs may be
//! given as ML-Agents feeds them (`vector_observation` `[N, size]`, `action_masks`
//! `[N, sum of branches]`, visual `[N, H, W, C]`) or in Barracuda's rank 4; missing memory
//! inputs are zeros (a new episode). Outputs of shape `[N, 1, 1, C]` come back as `[N, C]`.

use super::onnx::{LoadOptions, OnnxPolicy, NOISE_INPUT};
use super::{NamedTensors, RunError, TensorData};
use crate::barracuda::{self, LowerOptions, NnModel};

/// A loaded `.nn` policy.
pub struct NnPolicy {
    model: NnModel,
    inner: OnnxPolicy,
}

impl NnPolicy {
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let label = path.display().to_string();
        let model = barracuda::read_file(path).map_err(|e| RunError::Read { path: label.clone(), detail: e.to_string() })?;
        Self::from_model(model, &label, options)
    }

    pub fn from_model(mut model: NnModel, label: &str, options: LoadOptions) -> Result<Self, RunError> {
        // Barracuda pads shorter shapes with 1s on the right (its TensorShape constructor).
        for shape in model.inputs.iter_mut().map(|i| &mut i.shape).chain(model.memories.iter_mut().map(|m| &mut m.shape)) {
            if shape.len() > 4 {
                return Err(RunError::Lower { path: label.into(), detail: format!("input or memory shape {shape:?} has more than 4 entries") });
            }
            shape.resize(4, 1);
        }
        let lowered = barracuda::to_onnx(&model, LowerOptions { deterministic: options.deterministic, seed: options.seed })
            .map_err(|e| RunError::Lower { path: label.into(), detail: e.to_string() })?;
        // The lowering already did what the ONNX rewrites do.
        let inner = OnnxPolicy::from_proto(lowered, label, LoadOptions { noise_input: options.noise_input, ..Default::default() })?;
        Ok(Self { model, inner })
    }

    /// Whether the lowered graph declares an input of this name.
    pub fn declares_input(&self, name: &str) -> bool {
        self.inner.inputs().iter().any(|i| i.name == name)
    }

    /// The parsed model.
    pub fn model(&self) -> &NnModel {
        &self.model
    }

    /// Output names: the model's outputs, then its memory outputs.
    pub fn outputs(&self) -> &[String] {
        self.inner.outputs()
    }

    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        let batch = inputs.values().next().and_then(|t| t.shape.first()).copied().unwrap_or(1);
        let mut fed = NamedTensors::new();
        let declared = self.model.inputs.iter().map(|i| (&i.name, &i.shape));
        let memories = self.model.memories.iter().map(|m| (&m.input, &m.shape));
        for (name, shape) in declared.chain(memories) {
            let rank4 = |t: &TensorData| -> Result<TensorData, RunError> {
                t.validate(name)?;
                if t.shape.len() == 4 {
                    return Ok(t.clone());
                }
                let n = t.shape.first().copied().unwrap_or(1);
                let per_row: usize = t.shape.iter().skip(1).product();
                let (h, w) = (shape[1].max(1) as usize, shape[2].max(1) as usize);
                if !per_row.is_multiple_of(h * w) {
                    return Err(RunError::BadInput { name: name.clone(), detail: format!("shape {:?} does not fit {shape:?}", t.shape) });
                }
                Ok(TensorData { shape: vec![n, h, w, per_row / (h * w)], data: t.data.clone() })
            };
            match inputs.get(name.as_str()) {
                Some(t) => {
                    fed.insert(name.clone(), rank4(t)?);
                }
                None if self.model.memories.iter().any(|m| &m.input == name) => {
                    let size = shape[3].max(1) as usize;
                    fed.insert(name.clone(), TensorData { shape: vec![batch, 1, 1, size], data: vec![0.0; batch * size] });
                }
                None => {
                    return Err(RunError::MissingInput {
                        name: name.clone(),
                        known: self.model.inputs.iter().map(|i| i.name.clone()).collect(),
                    })
                }
            }
        }
        if let Some(noise) = inputs.get(NOISE_INPUT) {
            // The lowered graph is NHWC: [N, C] noise becomes [N, 1, 1, C].
            let mut noise = noise.clone();
            if noise.shape.len() == 2 {
                noise.shape = vec![noise.shape[0], 1, 1, noise.shape[1]];
            }
            fed.insert(NOISE_INPUT.into(), noise);
        }
        let mut out = self.inner.run(&fed)?;
        for t in out.values_mut() {
            if t.shape.len() == 4 && t.shape[1] == 1 && t.shape[2] == 1 {
                t.shape = vec![t.shape[0], t.shape[3]];
            }
        }
        Ok(out)
    }
}
