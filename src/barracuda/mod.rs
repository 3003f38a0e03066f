//! Barracuda `.nn` models (barracuda-nn.md): a reader for format versions 15–20 and a writer.
//! Reading then writing any file gives back the same bytes.

pub mod export;
mod lower;
mod lstm_cell;
mod model;
mod reader;
mod writer;

pub use model::{f16_to_f32, Activation, Input, Layer, LayerType, Memory, NnModel, TensorDesc, Trailer, WeightType};
pub use lower::{lower_into, to_onnx, unsqueeze_to_rank4, LowerError, LowerOptions, LoweredValues, OPSET as LOWERED_OPSET};
pub use reader::{read, read_file};
pub use writer::{write, TensorBlob};

/// The format version every Barracuda release accepts, and the one we write.
pub const FORMAT_VERSION: i64 = 16;
/// Oldest and newest versions the reader accepts.
pub const READABLE_VERSIONS: std::ops::RangeInclusive<i64> = 15..=20;

/// Why a `.nn` file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NnError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("truncated .nn file: {what} at byte {offset} needs {needed} bytes, {available} left")]
    Truncated { what: String, offset: usize, needed: usize, available: usize },
    #[error("unsupported .nn format version {0} (this reader takes 15 to 20; ML-Agents writes 16)")]
    UnsupportedVersion(i64),
    #[error("truncated or damaged .nn file: {what} {value} at byte {offset} does not fit in the {available} bytes left")]
    AbsurdLength { what: String, value: i64, offset: usize, available: usize },
    #[error("{what} at byte {offset} is not valid UTF-8")]
    BadString { what: String, offset: usize },
    #[error("layer {layer:?} has unknown layer type {code}")]
    UnknownLayerType { layer: String, code: i32 },
    #[error("layer {layer:?} has unknown activation {code}")]
    UnknownActivation { layer: String, code: i32 },
    #[error("unknown weight data type {0} (0 = float32, 1 = float16)")]
    UnknownWeightType(i32),
    #[error("tensor {tensor:?} of layer {layer:?}: {detail}")]
    BadTensor { layer: String, tensor: String, detail: String },
    #[error("{0} bytes after the weight blob are not a valid trailer")]
    BadTrailer(usize),
}
