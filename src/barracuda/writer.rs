//! Writing a `.nn` file (barracuda-nn.md §3, §11). `write(read(bytes)) == bytes` for every
//! file the reader accepts.

use super::model::{NnModel, TensorDesc, WeightType};

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_i32(out, s.len() as i32);
    out.extend_from_slice(s.as_bytes());
}

fn put_i32s(out: &mut Vec<u8>, values: &[i32]) {
    put_i32(out, values.len() as i32);
    values.iter().for_each(|v| put_i32(out, *v));
}

fn put_strs(out: &mut Vec<u8>, values: &[String]) {
    put_i32(out, values.len() as i32);
    values.iter().for_each(|v| put_str(out, v));
}

/// Serialises a model.
pub fn write(model: &NnModel) -> Vec<u8> {
    let mut out = Vec::with_capacity(model.weights.len() + 4096);
    out.extend_from_slice(&model.version.to_le_bytes());
    put_i32(&mut out, model.inputs.len() as i32);
    for input in &model.inputs {
        put_str(&mut out, &input.name);
        put_i32s(&mut out, &input.shape);
    }
    put_strs(&mut out, &model.outputs);
    put_i32(&mut out, model.memories.len() as i32);
    for m in &model.memories {
        put_i32s(&mut out, &m.shape);
        put_str(&mut out, &m.input);
        put_str(&mut out, &m.output);
    }
    put_i32(&mut out, model.layers.len() as i32);
    for l in &model.layers {
        put_str(&mut out, &l.name);
        put_i32(&mut out, l.layer_type.code());
        put_i32(&mut out, l.activation.code());
        put_i32s(&mut out, &l.reserved_a);
        put_i32s(&mut out, &l.reserved_b);
        put_i32s(&mut out, &l.pad);
        put_i32s(&mut out, &l.stride);
        put_i32s(&mut out, &l.pool);
        put_i32(&mut out, l.axis);
        out.extend_from_slice(&l.alpha.to_le_bytes());
        out.extend_from_slice(&l.beta.to_le_bytes());
        put_i32s(&mut out, &l.reserved_c);
        put_strs(&mut out, &l.inputs);
        put_i32(&mut out, l.tensors.len() as i32);
        for t in &l.tensors {
            put_str(&mut out, &t.name);
            put_i32s(&mut out, &t.shape);
            out.extend_from_slice(&t.offset.to_le_bytes());
            put_i32(&mut out, t.item_size);
            put_i32(&mut out, t.length);
        }
    }
    let format = model.format_version();
    if format >= 20 {
        put_i32(&mut out, if model.weight_type == WeightType::Float16 { 1 } else { 0 });
    }
    if format >= 19 {
        let n = 16 - out.len() % 16;
        if model.padding.len() == n {
            out.extend_from_slice(&model.padding);
        } else {
            out.extend(std::iter::repeat_n(0u8, n));
        }
    }
    out.extend_from_slice(&model.weights);
    if let Some(t) = &model.trailer {
        put_str(&mut out, &t.ir_source);
        put_str(&mut out, &t.ir_version);
        put_str(&mut out, &t.producer_name);
        put_i32(&mut out, t.warnings.len() as i32);
        for (a, b) in &t.warnings {
            put_str(&mut out, a);
            put_str(&mut out, b);
        }
        if format >= 18 {
            put_i32(&mut out, t.metadata.len() as i32);
            for (a, b) in &t.metadata {
                put_str(&mut out, a);
                put_str(&mut out, b);
            }
        }
    }
    out
}

/// Builds the dense float32 weight blob of a model being written: tensors get offsets in the
/// order they are added (layer order, then tensor order), as Unity expects.
#[derive(Debug, Default)]
pub struct TensorBlob {
    weights: Vec<u8>,
    elements: i64,
}

impl TensorBlob {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a tensor's values; returns its descriptor (shape padded to 4 entries with
    /// leading 1s, as ML-Agents writes `[1,1,1,n]` vectors). The shape must hold exactly
    /// `values.len()` elements.
    pub fn add(&mut self, name: &str, shape: &[i32], values: &[f32]) -> Result<TensorDesc, String> {
        let mut full = vec![1; 4usize.saturating_sub(shape.len())];
        full.extend_from_slice(shape);
        let product: i64 = full.iter().map(|d| *d as i64).product();
        if full.iter().any(|d| *d <= 0) || product != values.len() as i64 {
            return Err(format!("tensor {name}: shape {full:?} does not hold {} values", values.len()));
        }
        let desc = TensorDesc { name: name.into(), shape: full, offset: self.elements, item_size: 4, length: values.len() as i32 };
        values.iter().for_each(|v| self.weights.extend_from_slice(&v.to_le_bytes()));
        self.elements += values.len() as i64;
        Ok(desc)
    }

    /// The blob bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.weights
    }
}
