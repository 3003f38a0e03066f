//! Parsing a `.nn` file (barracuda-nn.md §3). Every count is checked against the bytes left
//! before anything is allocated, so corrupt files give errors, never panics or huge
//! allocations.

use super::model::{Activation, Input, Layer, LayerType, Memory, NnModel, TensorDesc, Trailer, WeightType};
use super::{NnError, READABLE_VERSIONS};

/// Reads a `.nn` file from disk.
pub fn read_file(path: &std::path::Path) -> Result<NnModel, NnError> {
    let bytes = std::fs::read(path).map_err(|source| NnError::Io { path: path.display().to_string(), source })?;
    read(&bytes)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], NnError> {
        if self.remaining() < n {
            return Err(NnError::Truncated { what: what.into(), offset: self.offset, needed: n, available: self.remaining() });
        }
        let s = &self.bytes[self.offset..self.offset + n];
        self.offset += n;
        Ok(s)
    }

    fn i32(&mut self, what: &str) -> Result<i32, NnError> {
        Ok(i32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    fn i64(&mut self, what: &str) -> Result<i64, NnError> {
        Ok(i64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }

    fn f32(&mut self, what: &str) -> Result<f32, NnError> {
        Ok(f32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    /// A count whose elements take at least `min_bytes` each.
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, NnError> {
        let offset = self.offset;
        let n = self.i32(what)?;
        if n < 0 || (n as usize).saturating_mul(min_bytes) > self.remaining() {
            return Err(NnError::AbsurdLength { what: what.into(), value: n as i64, offset, available: self.remaining() });
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String, NnError> {
        let n = self.count(what, 1)?;
        let offset = self.offset;
        let raw = self.take(n, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| NnError::BadString { what: what.into(), offset })
    }

    fn i32_array(&mut self, what: &str) -> Result<Vec<i32>, NnError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.i32(what)).collect()
    }

    fn string_array(&mut self, what: &str) -> Result<Vec<String>, NnError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.string(what)).collect()
    }
}

/// Parses a whole `.nn` file.
pub fn read(bytes: &[u8]) -> Result<NnModel, NnError> {
    let mut c = Cursor { bytes, offset: 0 };
    let version = c.i64("version")?;
    if !READABLE_VERSIONS.contains(&(version % 255)) {
        return Err(NnError::UnsupportedVersion(version));
    }
    let format = version % 255;
    let n_inputs = c.count("input count", 8)?;
    let mut inputs = Vec::with_capacity(n_inputs);
    for _ in 0..n_inputs {
        inputs.push(Input { name: c.string("input name")?, shape: c.i32_array("input shape")? });
    }
    let outputs = c.string_array("outputs")?;
    let n_memories = c.count("memory count", 12)?;
    let mut memories = Vec::with_capacity(n_memories);
    for _ in 0..n_memories {
        memories.push(Memory {
            shape: c.i32_array("memory shape")?,
            input: c.string("memory input")?,
            output: c.string("memory output")?,
        });
    }
    let n_layers = c.count("layer count", 60)?;
    let mut layers = Vec::with_capacity(n_layers);
    for _ in 0..n_layers {
        layers.push(read_layer(&mut c)?);
    }
    let weight_type = if format >= 20 {
        match c.i32("weight data type")? {
            0 => WeightType::Float32,
            1 => WeightType::Float16,
            other => return Err(NnError::UnknownWeightType(other)),
        }
    } else {
        WeightType::Float32
    };
    let padding = if format >= 19 { c.take(16 - c.offset % 16, "padding")?.to_vec() } else { vec![] };
    let elements = blob_elements(&layers)?;
    let blob_bytes = elements.checked_mul(weight_type.bytes()).filter(|b| *b <= c.remaining()).ok_or_else(|| {
        NnError::Truncated {
            what: "weight blob".into(),
            offset: c.offset,
            needed: elements.saturating_mul(weight_type.bytes()),
            available: c.remaining(),
        }
    })?;
    let weights = c.take(blob_bytes, "weight blob")?.to_vec();
    let trailer = if c.remaining() > 0 {
        let left = c.remaining();
        Some(read_trailer(&mut c, format).map_err(|_| NnError::BadTrailer(left))?)
    } else {
        None
    };
    if c.remaining() > 0 {
        return Err(NnError::BadTrailer(c.remaining()));
    }
    Ok(NnModel { version, inputs, outputs, memories, layers, weight_type, padding, weights, trailer })
}

fn read_layer(c: &mut Cursor<'_>) -> Result<Layer, NnError> {
    let name = c.string("layer name")?;
    let code = c.i32("layer type")?;
    let layer_type = LayerType::from_code(code).ok_or_else(|| NnError::UnknownLayerType { layer: name.clone(), code })?;
    let activation_code = c.i32("activation")?;
    let activation = Activation::from_code(activation_code)
        .ok_or_else(|| NnError::UnknownActivation { layer: name.clone(), code: activation_code })?;
    let reserved_a = c.i32_array("reserved array")?;
    let reserved_b = c.i32_array("reserved array")?;
    let pad = c.i32_array("pad")?;
    let stride = c.i32_array("stride")?;
    let pool = c.i32_array("pool")?;
    let axis = c.i32("axis")?;
    let alpha = c.f32("alpha")?;
    let beta = c.f32("beta")?;
    let reserved_c = c.i32_array("reserved array")?;
    let inputs = c.string_array("layer inputs")?;
    let n_tensors = c.count("tensor count", 24)?;
    let mut tensors = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let tensor = TensorDesc {
            name: c.string("tensor name")?,
            shape: c.i32_array("tensor shape")?,
            offset: c.i64("tensor offset")?,
            item_size: c.i32("tensor item size")?,
            length: c.i32("tensor length")?,
        };
        check_tensor(&name, &tensor)?;
        tensors.push(tensor);
    }
    Ok(Layer {
        name,
        layer_type,
        activation,
        reserved_a,
        reserved_b,
        pad,
        stride,
        pool,
        axis,
        alpha,
        beta,
        reserved_c,
        inputs,
        tensors,
    })
}

fn check_tensor(layer: &str, t: &TensorDesc) -> Result<(), NnError> {
    let bad = |detail: String| Err(NnError::BadTensor { layer: layer.into(), tensor: t.name.clone(), detail });
    if t.shape.iter().any(|d| *d <= 0) {
        return bad(format!("shape {:?} has a dimension <= 0", t.shape));
    }
    let product = t.shape.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d as i64));
    if product != Some(t.length as i64) {
        return bad(format!("length {} is not the product of its shape {:?}", t.length, t.shape));
    }
    if t.offset < 0 {
        return bad(format!("negative offset {}", t.offset));
    }
    Ok(())
}

/// The blob holds the sum of all tensor lengths; every tensor must lie inside it.
fn blob_elements(layers: &[Layer]) -> Result<usize, NnError> {
    let total: i64 = layers.iter().flat_map(|l| &l.tensors).map(|t| t.length as i64).sum();
    for l in layers {
        for t in &l.tensors {
            if t.offset + t.length as i64 > total {
                return Err(NnError::BadTensor {
                    layer: l.name.clone(),
                    tensor: t.name.clone(),
                    detail: format!("offset {} + length {} lies past the blob of {total} elements", t.offset, t.length),
                });
            }
        }
    }
    usize::try_from(total).map_err(|_| NnError::AbsurdLength { what: "weight blob".into(), value: total, offset: 0, available: 0 })
}

fn read_trailer(c: &mut Cursor<'_>, format: i64) -> Result<Trailer, NnError> {
    let mut t = Trailer {
        ir_source: c.string("ir_source")?,
        ir_version: c.string("ir_version")?,
        producer_name: c.string("producer_name")?,
        ..Default::default()
    };
    let n = c.count("warning count", 8)?;
    for _ in 0..n {
        t.warnings.push((c.string("warning layer")?, c.string("warning message")?));
    }
    if format >= 18 {
        let n = c.count("metadata count", 8)?;
        for _ in 0..n {
            t.metadata.push((c.string("metadata key")?, c.string("metadata value")?));
        }
    }
    Ok(t)
}
