//! The contents of a Barracuda `.nn` file (barracuda-nn.md §3), field for field, so that
//! reading then writing gives back the same bytes.

use std::collections::BTreeMap;

/// Layer types (barracuda-nn.md §6.1). Every code Barracuda 0.4–3.0 defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LayerType {
    Nop, Dense, MatMul, Dense3, Conv2D, DepthwiseConv2D, Conv2DTrans, Upsample2D, MaxPool2D, AvgPool2D,
    GlobalMaxPool2D, GlobalAvgPool2D, Border2D, Conv3D, Conv3DTrans, Upsample3D, MaxPool3D, AvgPool3D,
    GlobalMaxPool3D, GlobalAvgPool3D, Border3D, Activation, ScaleBias, Normalization, Lrn, Dropout,
    RandomNormal, RandomUniform, Multinomial, OneHot, TopKIndices, TopKValues, NonZero, Range, RoiAlign,
    Add, Sub, Mul, Div, Pow, Min, Max, Mean, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceMax,
    ReduceMean, ReduceMin, ReduceProd, ReduceSum, ReduceSumSquare, Greater, GreaterEqual, Less, LessEqual,
    Equal, LogicalOr, LogicalAnd, LogicalNot, LogicalXor, Where, Sign, Pad, Pad2DReflect, Pad2DSymmetric,
    Pad2DEdge, ArgMax, ArgMin, ConstantOfShape, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Gather,
    DepthToSpace, SpaceToDepth, Expand, Resample2D, Concat, StridedSlice, Tile, Shape, NonMaxSuppression,
    Lstm, ScatterNd, Load,
}

const LAYER_CODES: &[(i32, LayerType)] = {
    use LayerType::*;
    &[
        (0, Nop), (1, Dense), (2, MatMul), (3, Dense3), (20, Conv2D), (21, DepthwiseConv2D), (22, Conv2DTrans),
        (23, Upsample2D), (25, MaxPool2D), (26, AvgPool2D), (27, GlobalMaxPool2D), (28, GlobalAvgPool2D),
        (29, Border2D), (30, Conv3D), (32, Conv3DTrans), (33, Upsample3D), (35, MaxPool3D), (36, AvgPool3D),
        (37, GlobalMaxPool3D), (38, GlobalAvgPool3D), (39, Border3D), (50, Activation), (51, ScaleBias),
        (52, Normalization), (53, Lrn), (60, Dropout), (64, RandomNormal), (65, RandomUniform), (66, Multinomial),
        (67, OneHot), (68, TopKIndices), (69, TopKValues), (70, NonZero), (71, Range), (72, RoiAlign), (100, Add),
        (101, Sub), (102, Mul), (103, Div), (104, Pow), (110, Min), (111, Max), (112, Mean), (120, ReduceL1),
        (121, ReduceL2), (122, ReduceLogSum), (123, ReduceLogSumExp), (124, ReduceMax), (125, ReduceMean),
        (126, ReduceMin), (127, ReduceProd), (128, ReduceSum), (129, ReduceSumSquare), (140, Greater),
        (141, GreaterEqual), (142, Less), (143, LessEqual), (144, Equal), (145, LogicalOr), (146, LogicalAnd),
        (147, LogicalNot), (148, LogicalXor), (149, Where), (150, Sign), (159, Pad), (160, Pad2DReflect),
        (161, Pad2DSymmetric), (162, Pad2DEdge), (163, ArgMax), (164, ArgMin), (199, ConstantOfShape),
        (200, Flatten), (201, Reshape), (202, Transpose), (203, Squeeze), (204, Unsqueeze), (205, Gather),
        (206, DepthToSpace), (207, SpaceToDepth), (208, Expand), (209, Resample2D), (210, Concat),
        (211, StridedSlice), (212, Tile), (213, Shape), (214, NonMaxSuppression), (215, Lstm), (216, ScatterNd),
        (255, Load),
    ]
};

impl LayerType {
    pub fn from_code(code: i32) -> Option<Self> {
        LAYER_CODES.iter().find(|(c, _)| *c == code).map(|(_, t)| *t)
    }

    pub fn code(self) -> i32 {
        LAYER_CODES.iter().find(|(_, t)| *t == self).map(|(c, _)| *c).expect("every type has a code")
    }
}

/// Activations (barracuda-nn.md §6.2), fused into a layer or selected by an Activation layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Activation {
    None, Relu, Softmax, Tanh, Sigmoid, Elu, Relu6, LeakyRelu, Selu, Swish, LogSoftmax, Softplus, Softsign,
    PRelu, Hardmax, HardSigmoid, Abs, Neg, Ceil, Clip, Floor, Round, Reciprocal, Sqrt, Pow, Exp, Log, Acos,
    Acosh, Asin, Asinh, Atan, Atanh, Cos, Cosh, Sin, Sinh, Tan, Erf,
}

const ACTIVATION_CODES: &[(i32, Activation)] = {
    use Activation::*;
    &[
        (0, None), (1, Relu), (2, Softmax), (3, Tanh), (4, Sigmoid), (5, Elu), (6, Relu6), (7, LeakyRelu),
        (8, Selu), (9, Swish), (10, LogSoftmax), (11, Softplus), (12, Softsign), (13, PRelu), (20, Hardmax),
        (21, HardSigmoid), (100, Abs), (101, Neg), (102, Ceil), (103, Clip), (104, Floor), (105, Round),
        (110, Reciprocal), (111, Sqrt), (112, Pow), (113, Exp), (114, Log), (200, Acos), (201, Acosh),
        (202, Asin), (203, Asinh), (204, Atan), (205, Atanh), (206, Cos), (207, Cosh), (208, Sin), (209, Sinh),
        (210, Tan), (211, Erf),
    ]
};

impl Activation {
    pub fn from_code(code: i32) -> Option<Self> {
        ACTIVATION_CODES.iter().find(|(c, _)| *c == code).map(|(_, a)| *a)
    }

    pub fn code(self) -> i32 {
        ACTIVATION_CODES.iter().find(|(_, a)| *a == self).map(|(c, _)| *c).expect("every activation has a code")
    }
}

/// A declared model input: name and shape (4 entries, -1 = batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub name: String,
    pub shape: Vec<i32>,
}

/// A recurrent memory: `input` is fed the previous value of layer `output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    pub shape: Vec<i32>,
    pub input: String,
    pub output: String,
}

/// A constant tensor of a layer: a view into the weight blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    pub name: String,
    /// Exactly 4 entries in every real file.
    pub shape: Vec<i32>,
    /// In elements from the start of the weight blob.
    pub offset: i64,
    /// Bytes per element as written (4); not used for addressing.
    pub item_size: i32,
    /// Element count, `product(shape)`.
    pub length: i32,
}

/// One layer with every field of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub name: String,
    pub layer_type: LayerType,
    pub activation: Activation,
    pub reserved_a: Vec<i32>,
    pub reserved_b: Vec<i32>,
    pub pad: Vec<i32>,
    pub stride: Vec<i32>,
    pub pool: Vec<i32>,
    pub axis: i32,
    pub alpha: f32,
    pub beta: f32,
    pub reserved_c: Vec<i32>,
    pub inputs: Vec<String>,
    pub tensors: Vec<TensorDesc>,
}

impl Layer {
    /// A layer with the exporter's defaults: `pad [0,0,0,0]`, no stride or pool, axis -1,
    /// alpha 1, beta 0, no activation.
    pub fn new(name: &str, layer_type: LayerType, inputs: &[&str]) -> Self {
        Self {
            name: name.into(),
            layer_type,
            activation: Activation::None,
            reserved_a: vec![],
            reserved_b: vec![],
            pad: vec![0; 4],
            stride: vec![],
            pool: vec![],
            axis: -1,
            alpha: 1.0,
            beta: 0.0,
            reserved_c: vec![],
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            tensors: vec![],
        }
    }
}

/// Element type of the weight blob (version 20 stores it; earlier versions are float32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightType {
    Float32,
    Float16,
}

impl WeightType {
    pub fn bytes(self) -> usize {
        match self {
            Self::Float32 => 4,
            Self::Float16 => 2,
        }
    }
}

/// The optional trailer Unity's C# writer appends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trailer {
    pub ir_source: String,
    pub ir_version: String,
    pub producer_name: String,
    pub warnings: Vec<(String, String)>,
    /// Version 18+ only.
    pub metadata: Vec<(String, String)>,
}

/// A whole `.nn` model.
#[derive(Debug, Clone, PartialEq)]
pub struct NnModel {
    /// As stored (16 for every ML-Agents file; 15–20 are read).
    pub version: i64,
    pub inputs: Vec<Input>,
    pub outputs: Vec<String>,
    pub memories: Vec<Memory>,
    pub layers: Vec<Layer>,
    pub weight_type: WeightType,
    /// Version 19+: the zero padding before the blob, as read (recomputed when empty).
    pub padding: Vec<u8>,
    /// The weight blob, raw little-endian bytes.
    pub weights: Vec<u8>,
    pub trailer: Option<Trailer>,
}

impl NnModel {
    /// The version as Unity compares it (the stored value modulo 255).
    pub fn format_version(&self) -> i64 {
        self.version % 255
    }

    /// Every tensor of every layer, in file order.
    pub fn tensors(&self) -> impl Iterator<Item = (&Layer, &TensorDesc)> {
        self.layers.iter().flat_map(|l| l.tensors.iter().map(move |t| (l, t)))
    }

    /// Finds a tensor by name (first match, as Unity does).
    pub fn tensor(&self, name: &str) -> Option<&TensorDesc> {
        self.tensors().map(|(_, t)| t).find(|t| t.name == name)
    }

    /// The values of a tensor as float32.
    pub fn tensor_values(&self, tensor: &TensorDesc) -> Vec<f32> {
        let n = tensor.length.max(0) as usize;
        let start = tensor.offset.max(0) as usize;
        match self.weight_type {
            WeightType::Float32 => (start..start + n)
                .map(|i| f32::from_le_bytes(self.weights[4 * i..4 * i + 4].try_into().expect("4 bytes")))
                .collect(),
            WeightType::Float16 => (start..start + n)
                .map(|i| f16_to_f32(u16::from_le_bytes([self.weights[2 * i], self.weights[2 * i + 1]])))
                .collect(),
        }
    }

    /// An ML-Agents constant (`version_number`, `memory_size`, ...): element 0 of the first
    /// tensor with that name, as Unity reads it.
    pub fn constant(&self, name: &str) -> Option<f32> {
        self.tensor(name).and_then(|t| self.tensor_values(t).first().copied())
    }

    /// Layer counts per type.
    pub fn layer_histogram(&self) -> BTreeMap<LayerType, usize> {
        let mut h = BTreeMap::new();
        for l in &self.layers {
            *h.entry(l.layer_type).or_default() += 1;
        }
        h
    }
}

/// IEEE half to single precision.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = ((h >> 10) & 0x1f) as i32;
    let mantissa = (h & 0x3ff) as f32;
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (code, t) in LAYER_CODES {
            assert_eq!(LayerType::from_code(*code), Some(*t));
            assert_eq!(t.code(), *code);
        }
        for (code, a) in ACTIVATION_CODES {
            assert_eq!(Activation::from_code(*code), Some(*a));
        }
        assert_eq!(LayerType::from_code(4), None);
        assert_eq!(Activation::from_code(14), None);
    }

    #[test]
    fn half_precision() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    }
}
