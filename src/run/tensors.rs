//! Named float tensors, as `mlagents-run eval` reads and writes them:
//! `{"<name>": {"shape": [...], "data": [...]}}`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A dense row-major float tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorData {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl TensorData {
    /// Checks that `data` holds `prod(shape)` values.
    pub fn validate(&self, name: &str) -> Result<(), super::RunError> {
        let expected: usize = self.shape.iter().product();
        if expected != self.data.len() {
            return Err(super::RunError::BadInput {
                name: name.into(),
                detail: format!("shape {:?} needs {expected} values, data has {}", self.shape, self.data.len()),
            });
        }
        Ok(())
    }
}

/// Tensors by name.
pub type NamedTensors = BTreeMap<String, TensorData>;
