//! Writing ONNX graphs with tract-onnx's protobuf types: a small builder shared by the `.nn`
//! lowering ([`crate::barracuda::to_onnx`]) and the policy exporter ([`export`]), and reading
//! a tensor's values back ([`tensor_values`]).

mod attention;
pub mod export;
mod layers;

use tract_onnx::pb::{
    attribute_proto::AttributeType, tensor_shape_proto::dimension, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// ONNX element type codes.
pub const FLOAT: i32 = 1;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;
pub const DOUBLE: i32 = 11;

/// The values of a float, double, int32 or int64 tensor stored inline (raw or typed data),
/// as f64 one at a time; None for other element types.
pub fn tensor_values(t: &TensorProto) -> Option<Box<dyn Iterator<Item = f64> + '_>> {
    let raw = &t.raw_data;
    Some(match t.data_type {
        FLOAT if raw.is_empty() => Box::new(t.float_data.iter().map(|v| *v as f64)),
        FLOAT => Box::new(raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)),
        INT64 if raw.is_empty() => Box::new(t.int64_data.iter().map(|v| *v as f64)),
        INT64 => Box::new(raw.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64)),
        INT32 if raw.is_empty() => Box::new(t.int32_data.iter().map(|v| *v as f64)),
        INT32 => Box::new(raw.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)),
        DOUBLE if raw.is_empty() => Box::new(t.double_data.iter().copied()),
        DOUBLE => Box::new(raw.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))),
        _ => return None,
    })
}

/// A float32 initializer.
pub fn float_initializer(name: &str, dims: &[i64], data: Vec<f32>) -> TensorProto {
    TensorProto { dims: dims.to_vec(), data_type: FLOAT, float_data: data, name: name.into(), ..Default::default() }
}

/// An int64 initializer.
pub fn int64_initializer(name: &str, dims: &[i64], data: Vec<i64>) -> TensorProto {
    TensorProto { dims: dims.to_vec(), data_type: INT64, int64_data: data, name: name.into(), ..Default::default() }
}

pub fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i: v, r#type: AttributeType::Int as i32, ..Default::default() }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: name.into(), ints: v.to_vec(), r#type: AttributeType::Ints as i32, ..Default::default() }
}

pub fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f: v, r#type: AttributeType::Float as i32, ..Default::default() }
}

pub fn attr_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto { name: name.into(), s: v.as_bytes().to_vec(), r#type: AttributeType::String as i32, ..Default::default() }
}

/// A value declaration; dims <= 0 become the symbolic `batch` (first axis) or `d<i>`.
pub fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(i, d)| tract_onnx::pb::tensor_shape_proto::Dimension {
            value: Some(if *d > 0 {
                dimension::Value::DimValue(*d)
            } else {
                dimension::Value::DimParam(if i == 0 { "batch".into() } else { format!("d{i}") })
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor { elem_type, shape: Some(TensorShapeProto { dim }) })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Accumulates nodes and initializers with unique value names.
#[derive(Default)]
pub struct GraphBuilder {
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    counter: usize,
}

impl GraphBuilder {
    /// A fresh value name derived from `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        self.counter += 1;
        format!("{base}#{}", self.counter)
    }

    /// Adds a node with one output named after `base`; returns the output name.
    pub fn node(&mut self, op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>, base: &str) -> String {
        let out = self.fresh(base);
        self.node_into(op, inputs, attribute, &out);
        out
    }

    /// Adds a node whose single output has exactly the name `output`.
    pub fn node_into(&mut self, op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>, output: &str) {
        // tract tells RandomNormalLike from RandomNormal by the node name (stack.md §2).
        let name = if op.ends_with("Like") { format!("{output}_{op}") } else { format!("{output}_node") };
        self.nodes.push(NodeProto { input: inputs, output: vec![output.into()], name, op_type: op.into(), attribute, ..Default::default() });
    }

    /// Adds a node with several outputs, named exactly `outputs`.
    pub fn node_outputs(&mut self, op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>, outputs: &[String]) {
        let name = format!("{}_node", outputs[0]);
        self.nodes.push(NodeProto { input: inputs, output: outputs.to_vec(), name, op_type: op.into(), attribute, ..Default::default() });
    }

    /// A float initializer; returns its (fresh) name.
    pub fn constant(&mut self, base: &str, dims: &[i64], data: Vec<f32>) -> String {
        let name = self.fresh(base);
        self.named_constant(&name, dims, data);
        name
    }

    /// A float initializer with exactly this name.
    pub fn named_constant(&mut self, name: &str, dims: &[i64], data: Vec<f32>) {
        self.initializers.push(float_initializer(name, dims, data));
    }

    /// An int64 initializer; returns its (fresh) name.
    pub fn constant_i64(&mut self, base: &str, dims: &[i64], data: Vec<i64>) -> String {
        let name = self.fresh(base);
        self.initializers.push(int64_initializer(&name, dims, data));
        name
    }

    /// Drops the nodes and initializers no value of `outputs` depends on.
    pub fn prune(&mut self, outputs: &[String]) {
        let mut needed: std::collections::HashSet<String> = outputs.iter().cloned().collect();
        let mut kept = vec![false; self.nodes.len()];
        for (k, node) in self.nodes.iter().enumerate().rev() {
            if node.output.iter().any(|o| needed.contains(o)) {
                kept[k] = true;
                needed.extend(node.input.iter().cloned());
            }
        }
        let mut k = 0;
        self.nodes.retain(|_| {
            k += 1;
            kept[k - 1]
        });
        self.initializers.retain(|t| needed.contains(&t.name));
    }

    /// The finished model.
    pub fn finish(self, name: &str, opset: i64, inputs: Vec<ValueInfoProto>, outputs: Vec<ValueInfoProto>, producer: &str) -> ModelProto {
        ModelProto {
            ir_version: if opset <= 9 { 4 } else { 6 },
            opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
            producer_name: producer.into(),
            graph: Some(GraphProto {
                node: self.nodes,
                name: name.into(),
                initializer: self.initializers,
                input: inputs,
                output: outputs,
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}
