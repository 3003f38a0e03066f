//! Our ONNX exports have exactly the interface the real ML-Agents 0.28 exporter writes for
//! the same behavior spec: input and output names in order, element types, fixed dims (batch
//! dims symbolic in both), opset and IR version, and the constant outputs' values. The
//! reference files were made by the real trainer (`scripts/make-reference-exports.sh`,
//! models/reference/mlagents-0.28/VERSIONS).

mod common;

use common::policy_description;
use mlagents::onnx::export::to_onnx;
use mlagents::policy::Weights;
use mlagents::run::{LoadOptions, OnnxPolicy};
use mlagents::spec::ActionSpec;
use prost::Message;
use tract_onnx::pb::{self, ModelProto};

/// Name, element type and dims (None = symbolic) of each value.
fn interface(values: &[pb::ValueInfoProto]) -> Vec<(String, i32, Vec<Option<i64>>)> {
    use pb::tensor_shape_proto::dimension::Value;
    values
        .iter()
        .map(|v| {
            let Some(pb::type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else { panic!("{} has no tensor type", v.name) };
            let dims = t.shape.as_ref().map(|s| s.dim.iter().map(|d| match &d.value { Some(Value::DimValue(v)) => Some(*v), _ => None }).collect()).unwrap_or_default();
            (v.name.clone(), t.elem_type, dims)
        })
        .collect()
}

fn constants(bytes: &[u8]) -> Vec<(String, Vec<f32>)> {
    let policy = OnnxPolicy::from_bytes(bytes, "model", LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let outputs = policy.run(&policy.neutral_inputs(1).unwrap()).unwrap();
    let mut found: Vec<(String, Vec<f32>)> =
        outputs.into_iter().filter(|(name, _)| name == "version_number" || name == "memory_size" || name.ends_with("_output_shape")).map(|(n, t)| (n, t.data)).collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn same_interface(kind: &str, actions: ActionSpec) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/reference/mlagents-0.28/{kind}.onnx"));
    let reference_bytes = std::fs::read(&path).unwrap();
    let reference = ModelProto::decode(reference_bytes.as_slice()).unwrap();
    // The reference runs were made on the 1-D stand-ins: one observation of size 1.
    let description = policy_description(actions, &[1], true);
    let ours = to_onnx(&description, &Weights::random(&description, 3)).unwrap();
    let (r, o) = (reference.graph.as_ref().unwrap(), ours.graph.as_ref().unwrap());
    assert_eq!(interface(&o.input), interface(&r.input), "{kind}: inputs");
    assert_eq!(interface(&o.output), interface(&r.output), "{kind}: outputs");
    let opsets = |m: &ModelProto| m.opset_import.iter().map(|o| (o.domain.clone(), o.version)).collect::<Vec<_>>();
    assert_eq!(opsets(&ours), opsets(&reference), "{kind}: opset");
    assert_eq!(ours.ir_version, reference.ir_version, "{kind}: IR version");
    assert_eq!(constants(&ours.encode_to_vec()), constants(&reference_bytes), "{kind}: constants");
}

#[test]
fn discrete_interface_matches_mlagents() {
    same_interface("discrete", ActionSpec { continuous_size: 0, discrete_branches: vec![2] });
}

#[test]
fn continuous_interface_matches_mlagents() {
    same_interface("continuous", ActionSpec { continuous_size: 1, discrete_branches: vec![] });
}

#[test]
fn hybrid_interface_matches_mlagents() {
    same_interface("hybrid", ActionSpec { continuous_size: 1, discrete_branches: vec![2] });
}
