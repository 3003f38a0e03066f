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
    Other,
}

/// One node of an ONNX graph or one layer of a `.nn`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub inputs: Vec<String>,
    /// ONNX attributes by name (`.nn`: none).
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
}

impl ModelFacts {
    /// A metadata tensor's first value, if present and readable.
    pub fn constant(&self, name: &str) -> Option<f64> {
        self.metadata.get(name)?.values.as_ref()?.first().copied()
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
                attributes: BTreeMap::new(),
                activation: (l.activation != barracuda::Activation::None).then(|| format!("{:?}", l.activation)),
            })
            .collect(),
        inputs: model.inputs.iter().map(|i| (i.name.clone(), FLOAT)).collect(),
        outputs: model.outputs.iter().map(|o| (o.clone(), FLOAT)).collect(),
        metadata,
        memories: model.memories.iter().map(|m| (m.input.clone(), m.output.clone())).collect(),
        constants: BTreeMap::new(),
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
                // Old exporters leave the type unset: the field that holds a value tells.
                Ok(AttributeType::Undefined) if !a.ints.is_empty() => Attribute::Ints(a.ints.clone()),
                Ok(AttributeType::Undefined) if a.f != 0.0 => Attribute::Float(a.f),
                Ok(AttributeType::Undefined) if a.t.is_none() && a.s.is_empty() && a.g.is_none() => Attribute::Int(a.i),
                _ => Attribute::Other,
            };
            (a.name.clone(), value)
        })
        .collect();
    Operation { name: node.name.clone(), op_type: node.op_type.clone(), domain: node.domain.clone(), inputs: node.input.clone(), attributes, activation: None }
}
