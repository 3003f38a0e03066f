//! What the compatibility rules read from a model file, format by format, without running
//! it: the container (format, `.nn` version, ONNX opsets and operators), the inputs and
//! outputs with their element types, and how each ML-Agents metadata tensor is stored
//! (unity-import.md §1.6, §3).

use crate::barracuda::{self, LayerType, NnModel};
use crate::run::ModelFormat;
use crate::spec::model as names;
use prost::Message;
use std::collections::BTreeMap;
use tract_onnx::pb::{ModelProto, TensorProto};

use crate::onnx::tensor_values;
pub use crate::onnx::{FLOAT, INT32, INT64};

/// The name of an ONNX element type.
pub fn element_type_name(code: i32) -> &'static str {
    match code {
        1 => "float32",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        8 => "string",
        9 => "bool",
        10 => "float16",
        11 => "double",
        12 => "uint32",
        13 => "uint64",
        16 => "bfloat16",
        _ => "an unknown type",
    }
}

/// How a metadata tensor reaches Unity.
#[derive(Debug, Clone, PartialEq)]
pub enum MadeBy {
    /// An ONNX initializer.
    Initializer,
    /// The output of an ONNX `Constant` node.
    ConstantNode,
    /// The output of another ONNX node (`Identity` in torch 2.x exports).
    Node(String),
    /// A dataset of a `.nn` Load layer.
    LoadLayer,
}

/// One ML-Agents metadata tensor as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub made_by: MadeBy,
    /// ONNX element type (`.nn`: float).
    pub element_type: i32,
    /// Its values (through an `Identity` chain to the constant it copies), if readable.
    pub values: Option<Vec<f64>>,
    /// Whether it is a graph output (ONNX).
    pub is_output: bool,
    /// Its dims as stored.
    pub dims: Vec<i64>,
}

/// An ONNX attribute value, as far as the rules read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
    Text(String),
    Texts(Vec<String>),
    Other,
}

/// One node of an ONNX graph or one layer of a `.nn`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    /// ONNX attributes by name (`.nn`: `axis` for the layers that have one).
    pub attributes: BTreeMap<String, Attribute>,
    /// A `.nn` layer's fused activation (None: none, and for ONNX nodes).
    pub activation: Option<String>,
}

impl Operation {
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.attributes.get(name) {
            Some(Attribute::Int(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn float(&self, name: &str) -> Option<f32> {
        match self.attributes.get(name) {
            Some(Attribute::Float(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.attributes.get(name) {
            Some(Attribute::Text(v)) => Some(v),
            _ => None,
        }
    }
}

/// How an ONNX initializer is stored (rules O4, O5).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTensor {
    pub name: String,
    pub element_type: i32,
    pub dims: Vec<i64>,
    /// Its data lives in an external file.
    pub external: bool,
    /// Its data is in the `double_data` field.
    pub double_data: bool,
}

/// What the rules read.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFacts {
    pub format: ModelFormat,
    /// `.nn`: the version as Unity compares it (stored value modulo 255).
    pub nn_version: Option<i64>,
    /// ONNX: every `opset_import` entry (domain, version).
    pub opset_imports: Vec<(String, i64)>,
    pub operations: Vec<Operation>,
    /// Inputs and outputs with their element types (`.nn`: float), in file order.
    pub inputs: Vec<(String, i32)>,
    pub outputs: Vec<(String, i32)>,
    /// The ML-Agents metadata tensors found, by name.
    pub metadata: BTreeMap<String, Metadata>,
    /// `.nn` memories (input, output).
    pub memories: Vec<(String, String)>,
    /// ONNX: the dims of every constant tensor (initializers and `Constant` outputs).
    pub constants: BTreeMap<String, Vec<i64>>,
    /// The declared dims of each input and output (None: symbolic or unknown; `.nn`: the
    /// declared shape, batch first).
    pub input_dims: BTreeMap<String, Vec<Option<i64>>>,
    pub output_dims: BTreeMap<String, Vec<Option<i64>>>,
    /// ONNX: how each initializer is stored.
    pub initializers: Vec<StoredTensor>,
    /// ONNX: model-local functions and sparse initializers (rule O4).
    pub functions: usize,
    pub sparse_initializers: usize,
    /// `.nn`: each Load-layer dataset's name and shape (rules N2, N5).
    pub nn_datasets: Vec<(String, Vec<i32>)>,
    /// `.nn`: the names (layers, inputs, outputs, tensors, memories) that are not ASCII.
    pub non_ascii_names: Vec<String>,
}

impl ModelFacts {
    /// A metadata tensor's first value, if present and readable.
    pub fn constant(&self, name: &str) -> Option<f64> {
        self.metadata.get(name)?.values.as_ref()?.first().copied()
    }

    /// ONNX: the opset of the default domain.
    pub fn default_opset(&self) -> Option<i64> {
        self.opset_imports.iter().filter(|(d, _)| d.is_empty() || d == "ai.onnx").map(|(_, v)| *v).max()
    }

    pub fn has_output(&self, name: &str) -> bool {
        self.outputs.iter().any(|(o, _)| o == name)
    }

    pub fn output_type(&self, name: &str) -> Option<i32> {
        self.outputs.iter().find(|(o, _)| o == name).map(|(_, t)| *t)
    }
}

/// The facts of a model file's bytes in `format`; an error says why they cannot be read.
pub fn read(bytes: &[u8], format: ModelFormat) -> Result<ModelFacts, String> {
    match format {
        ModelFormat::Nn => barracuda::read(bytes).map(|m| nn_facts(&m)).map_err(|e| e.to_string()),
        ModelFormat::Onnx => ModelProto::decode(bytes).map(|m| onnx_facts(&m)).map_err(|e| format!("not a readable ONNX model: {e}")),
    }
}

fn nn_facts(model: &NnModel) -> ModelFacts {
    let mut metadata = BTreeMap::new();
    for layer in model.layers.iter().filter(|l| l.layer_type == LayerType::Load) {
        for tensor in layer.tensors.iter().filter(|t| names::MODEL_CONSTANTS.contains(&t.name.as_str())) {
            metadata.entry(tensor.name.clone()).or_insert_with(|| Metadata {
                made_by: MadeBy::LoadLayer,
                element_type: FLOAT,
                values: Some(model.tensor_values(tensor).into_iter().map(f64::from).collect()),
                is_output: model.outputs.contains(&tensor.name),
                dims: tensor.shape.iter().map(|d| *d as i64).collect(),
            });
        }
    }
    ModelFacts {
        format: ModelFormat::Nn,
        nn_version: Some(model.format_version()),
        opset_imports: vec![],
        operations: model
            .layers
            .iter()
            .map(|l| Operation {
                name: l.name.clone(),
                op_type: format!("{:?}", l.layer_type),
                domain: String::new(),
                inputs: l.inputs.clone(),
                outputs: vec![l.name.clone()],
                attributes: has_axis(l.layer_type).then(|| ("axis".to_string(), Attribute::Int(l.axis as i64))).into_iter().collect(),
                activation: (l.activation != barracuda::Activation::None).then(|| format!("{:?}", l.activation)),
            })
            .collect(),
        inputs: model.inputs.iter().map(|i| (i.name.clone(), FLOAT)).collect(),
        outputs: model.outputs.iter().map(|o| (o.clone(), FLOAT)).collect(),
        metadata,
        memories: model.memories.iter().map(|m| (m.input.clone(), m.output.clone())).collect(),
        constants: BTreeMap::new(),
        input_dims: model.inputs.iter().map(|i| (i.name.clone(), i.shape.iter().map(|d| (*d > 0).then_some(*d as i64)).collect())).collect(),
        output_dims: BTreeMap::new(),
        initializers: vec![],
        functions: 0,
        sparse_initializers: 0,
        nn_datasets: model.layers.iter().filter(|l| l.layer_type == LayerType::Load).flat_map(|l| l.tensors.iter().map(|t| (t.name.clone(), t.shape.clone()))).collect(),
        non_ascii_names: nn_names(model).filter(|n| !n.is_ascii()).map(str::to_string).collect(),
    }
}

/// `.nn` layers whose `axis` field means something (barracuda-nn.md §7).
fn has_axis(kind: LayerType) -> bool {
    matches!(kind, LayerType::Concat | LayerType::Gather | LayerType::ReduceSum | LayerType::ReduceMean | LayerType::ReduceMax | LayerType::ReduceMin | LayerType::ReduceProd)
}

/// Every string of a `.nn` that names something.
fn nn_names(model: &NnModel) -> impl Iterator<Item = &str> {
    let layers = model.layers.iter().flat_map(|l| std::iter::once(l.name.as_str()).chain(l.inputs.iter().map(String::as_str)).chain(l.tensors.iter().map(|t| t.name.as_str())));
    let memories = model.memories.iter().flat_map(|m| [m.input.as_str(), m.output.as_str()]);
    model.inputs.iter().map(|i| i.name.as_str()).chain(model.outputs.iter().map(String::as_str)).chain(memories).chain(layers)
}

/// A value's declared dims (None where symbolic or absent).
fn declared_dims(v: &tract_onnx::pb::ValueInfoProto) -> Vec<Option<i64>> {
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(tract_onnx::pb::type_proto::Value::TensorType(t)) => t
            .shape
            .iter()
            .flat_map(|s| s.dim.iter())
            .map(|d| match d.value {
                Some(Value::DimValue(v)) if v > 0 => Some(v),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

fn stored_tensor(t: &TensorProto) -> StoredTensor {
    StoredTensor {
        name: t.name.clone(),
        element_type: t.data_type,
        dims: t.dims.clone(),
        external: t.data_location == Some(1) || !t.external_data.is_empty(),
        double_data: !t.double_data.is_empty(),
    }
}

fn onnx_facts(model: &ModelProto) -> ModelFacts {
    let graph = model.graph.clone().unwrap_or_default();
    let element_type = |v: &tract_onnx::pb::ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(tract_onnx::pb::type_proto::Value::TensorType(t)) => t.elem_type,
        _ => 0,
    };
    let initializers: BTreeMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    // Every tensor a node makes: (node index, position among its outputs).
    let producers: BTreeMap<&str, usize> = graph.node.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i))).collect();
    let constant_of = |node: &tract_onnx::pb::NodeProto| node.attribute.iter().find(|a| a.name == "value").and_then(|a| a.t.clone());
    // The constant a tensor holds, through Identity nodes.
    let resolve = |name: &str| -> Option<TensorProto> {
        let mut name = name.to_string();
        for _ in 0..graph.node.len() + 1 {
            if let Some(t) = initializers.get(name.as_str()) {
                return Some((*t).clone());
            }
            let node = &graph.node[*producers.get(name.as_str())?];
            match node.op_type.as_str() {
                "Constant" => return constant_of(node),
                "Identity" => name = node.input.first()?.clone(),
                _ => return None,
            }
        }
        None
    };
    let outputs: Vec<(String, i32)> = graph.output.iter().map(|o| (o.name.clone(), element_type(o))).collect();
    let mut metadata = BTreeMap::new();
    for name in names::MODEL_CONSTANTS {
        let made_by = if initializers.contains_key(name) {
            MadeBy::Initializer
        } else if let Some(i) = producers.get(name) {
            match graph.node[*i].op_type.as_str() {
                "Constant" => MadeBy::ConstantNode,
                op => MadeBy::Node(op.to_string()),
            }
        } else {
            continue;
        };
        let tensor = resolve(name);
        let declared = outputs.iter().find(|(o, _)| o == name).map(|(_, t)| *t).filter(|t| *t != 0);
        metadata.insert(name.to_string(), Metadata {
            made_by,
            element_type: tensor.as_ref().map(|t| t.data_type).or(declared).unwrap_or(0),
            values: tensor.as_ref().and_then(tensor_values).map(Iterator::collect),
            is_output: outputs.iter().any(|(o, _)| o == name),
            dims: tensor.map(|t| t.dims).unwrap_or_default(),
        });
    }
    let initializer_names: Vec<&str> = initializers.keys().copied().collect();
    ModelFacts {
        format: ModelFormat::Onnx,
        nn_version: None,
        opset_imports: model.opset_import.iter().map(|o| (o.domain.clone(), o.version)).collect(),
        operations: graph.node.iter().map(operation).collect(),
        inputs: graph.input.iter().filter(|i| !initializer_names.contains(&i.name.as_str())).map(|i| (i.name.clone(), element_type(i))).collect(),
        outputs,
        metadata,
        memories: vec![],
        constants: graph
            .initializer
            .iter()
            .map(|t| (t.name.clone(), t.dims.clone()))
            .chain(graph.node.iter().filter(|n| n.op_type == "Constant").filter_map(|n| Some((n.output.first()?.clone(), constant_of(n)?.dims))))
            .collect(),
        input_dims: graph.input.iter().map(|i| (i.name.clone(), declared_dims(i))).collect(),
        output_dims: graph.output.iter().map(|o| (o.name.clone(), declared_dims(o))).collect(),
        initializers: graph.initializer.iter().map(stored_tensor).collect(),
        functions: model.functions.len(),
        sparse_initializers: graph.sparse_initializer.len(),
        nn_datasets: vec![],
        non_ascii_names: vec![],
    }
}

fn operation(node: &tract_onnx::pb::NodeProto) -> Operation {
    use tract_onnx::pb::attribute_proto::AttributeType;
    let attributes = node
        .attribute
        .iter()
        .map(|a| {
            let value = match AttributeType::try_from(a.r#type) {
                Ok(AttributeType::Int) => Attribute::Int(a.i),
                Ok(AttributeType::Float) => Attribute::Float(a.f),
                Ok(AttributeType::Ints) => Attribute::Ints(a.ints.clone()),
                Ok(AttributeType::String) => Attribute::Text(String::from_utf8_lossy(&a.s).into_owned()),
                Ok(AttributeType::Strings) => Attribute::Texts(a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()),
                // Old exporters leave the type unset: the field that holds a value tells.
                Ok(AttributeType::Undefined) if !a.ints.is_empty() => Attribute::Ints(a.ints.clone()),
                Ok(AttributeType::Undefined) if a.f != 0.0 => Attribute::Float(a.f),
                Ok(AttributeType::Undefined) if a.t.is_none() && a.s.is_empty() && a.g.is_none() => Attribute::Int(a.i),
                _ => Attribute::Other,
            };
            (a.name.clone(), value)
        })
        .collect();
    Operation {
        name: node.name.clone(),
        op_type: node.op_type.clone(),
        domain: node.domain.clone(),
        inputs: node.input.clone(),
        outputs: node.output.clone(),
        attributes,
        activation: None,
    }
}
