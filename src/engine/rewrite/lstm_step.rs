//! One-step ONNX `LSTM`s as one matrix product and one gate step of our own with the exact
//! activations of [`super::exact`].
//!
//! tract runs an ONNX `LSTM` with its `LstmEpilogue`, whose sigmoid and tanh are the
//! approximations [`super::exact`] replaces elsewhere (tanh stops at ±0.9999993): on
//! Hallway.nn's cell state that moved the memory by 1.5e-5 in one step and 1.5e-4 over six,
//! where the layers the cell was lowered from stay within 4e-6 of onnxruntime. An `LSTM` whose
//! sequence is one step by construction ([`StepRows`]: an `Unsqueeze` of rows, as a lowered
//! `.nn` cell writes it, or a batch-first reshape of one step, as torch exports it) and that
//! uses ONNX's
//! defaults (forward, sigmoid/tanh/tanh, no clip) becomes `Gemm(Concat(x, h), [W | R]ᵀ,
//! Wb + Rb)` and [`LSTM_STEP`] on the four gates, which tract runs as two products and one
//! pass, as fast as its own.

use crate::engine::kernels::exact_ops::Activation;
use crate::onnx::{attr_int, attr_ints, float_initializer, int64_initializer};
use tract_onnx::model::OnnxOpRegister;
use tract_onnx::pb;
use tract_onnx::tract_hir::internal::*;

/// The op type the rewrite writes (a prefix no ONNX domain uses).
pub const LSTM_STEP: &str = "MlAgentsLstmStep";

/// Adds [`LSTM_STEP`] to a tract-onnx op register.
pub fn register(register: &mut OnnxOpRegister) {
    register.insert(LSTM_STEP, |_, _| Ok((expand(LstmStepRules), vec![])));
}

/// Rewrites every one-step `LSTM` of the graph (see the module docs); returns how many.
pub fn one_step_lstms(graph: &mut pb::GraphProto, opset: i64) -> usize {
    let mut rewritten = 0;
    let mut nodes = Vec::with_capacity(graph.node.len());
    for node in std::mem::take(&mut graph.node) {
        match one_step(&node, &nodes, &graph.initializer, opset) {
            Some(step) => {
                graph.initializer.extend(step.initializers);
                nodes.extend(step.nodes);
                rewritten += 1;
            }
            None => nodes.push(node),
        }
    }
    graph.node = nodes;
    rewritten
}

/// The nodes and weights that replace one `LSTM`.
struct Replacement {
    nodes: Vec<pb::NodeProto>,
    initializers: Vec<pb::TensorProto>,
}

/// The replacement of `lstm` when it is a one-step `LSTM` with ONNX's defaults and float
/// weights that fit their dims; `earlier` are the nodes before it.
fn one_step(lstm: &pb::NodeProto, earlier: &[pb::NodeProto], initializers: &[pb::TensorProto], opset: i64) -> Option<Replacement> {
    if lstm.op_type != "LSTM" || !lstm.domain.is_empty() {
        return None;
    }
    let hidden = usize::try_from(lstm.attribute.iter().find(|a| a.name == "hidden_size")?.i).ok().filter(|h| *h > 0)?;
    let defaults = lstm.attribute.iter().all(|a| a.name == "hidden_size" || (a.name == "direction" && a.s == b"forward"));
    let input = |k: usize| lstm.input.get(k).filter(|name| !name.is_empty());
    let output = |k: usize| lstm.output.get(k).filter(|name| !name.is_empty()).cloned();
    // No sequence lengths and no peepholes (inputs 4 and 7).
    if !defaults || input(4).is_some() || input(7).is_some() || lstm.input.len() > 8 {
        return None;
    }
    let (x, h0, c0) = (input(0)?, input(5)?, input(6)?);
    let rows = one_step_rows(x, earlier, initializers, opset)?;
    let weights = |k: usize| input(k).and_then(|name| initializers.iter().find(|t| &t.name == name));
    let (w, r) = (weights(1)?, weights(2)?);
    let gates = 4 * hidden as i64;
    let features = *w.dims.get(2)?;
    let dims_fit = w.dims == [1, gates, features] && r.dims == [1, gates, hidden as i64] && features > 0;
    let bias = match input(3) {
        Some(_) => Some(weights(3).filter(|b| b.dims == [1, 2 * gates]).and_then(float_values)?),
        None => None,
    };
    if !dims_fit || rows.features().is_some_and(|f| f != features) {
        return None;
    }
    let (w, r, features) = (float_values(w)?, float_values(r)?, features as usize);
    let base = if lstm.name.is_empty() { x.clone() } else { lstm.name.clone() };
    Some(replacement(&base, &rows, [h0, c0], GateWeights { w: &w, r: &r, bias: bias.as_deref(), hidden, features }, [output(0), output(1), output(2)], opset))
}

/// ONNX `LSTM` weights: `W [4h, features]`, `R [4h, h]`, bias `[8h]` (input then recurrent).
struct GateWeights<'a> {
    w: &'a [f32],
    r: &'a [f32],
    bias: Option<&'a [f32]>,
    hidden: usize,
    features: usize,
}

/// Where the `[N, features]` rows of a one-step `LSTM`'s input `X` (`[1, N, features]`) are.
enum StepRows {
    /// `X` is `Unsqueeze(rows, axes = [0])` (the `.nn` lowering's).
    Unsqueezed(String),
    /// `X` is `Transpose(Reshape(v, [-1, 1, features]), perm = [1, 0, 2])` (ML-Agents' torch
    /// export of its `batch_first` LSTM): the rows are `Reshape(v, [-1, features])`.
    Transposed { source: String, features: i64 },
}

impl StepRows {
    fn features(&self) -> Option<i64> {
        match self {
            StepRows::Unsqueezed(_) => None,
            StepRows::Transposed { features, .. } => Some(*features),
        }
    }
}

/// The rows of `x` when it is one step by construction (see [`StepRows`]).
fn one_step_rows(x: &str, earlier: &[pb::NodeProto], initializers: &[pb::TensorProto], opset: i64) -> Option<StepRows> {
    let node = producer(earlier, x)?;
    if node.op_type == "Unsqueeze" {
        let rows = node.input.first().filter(|_| unsqueezes_axis_0(node, initializers, opset))?;
        return Some(StepRows::Unsqueezed(rows.clone()));
    }
    let perm = node.attribute.iter().find(|a| a.name == "perm").map(|a| a.ints.as_slice());
    if node.op_type != "Transpose" || perm != Some(&[1, 0, 2][..]) {
        return None;
    }
    let reshape = producer(earlier, node.input.first()?).filter(|n| n.op_type == "Reshape" && n.input.len() == 2)?;
    match constant_ints(&reshape.input[1], earlier, initializers)?.as_slice() {
        [-1, 1, features] if *features > 0 => Some(StepRows::Transposed { source: reshape.input[0].clone(), features: *features }),
        _ => None,
    }
}

/// The last of `earlier` that writes `name`.
fn producer<'a>(earlier: &'a [pb::NodeProto], name: &str) -> Option<&'a pb::NodeProto> {
    earlier.iter().rev().find(|n| n.output.iter().any(|o| o == name))
}

/// The values of an int64 initializer or `Constant` node.
fn constant_ints(name: &str, earlier: &[pb::NodeProto], initializers: &[pb::TensorProto]) -> Option<Vec<i64>> {
    let tensor = initializers.iter().find(|t| t.name == name).or_else(|| {
        let node = producer(earlier, name).filter(|n| n.op_type == "Constant")?;
        node.attribute.iter().find(|a| a.name == "value")?.t.as_ref()
    })?;
    if tensor.data_type != pb::tensor_proto::DataType::Int64 as i32 {
        return None;
    }
    Some(crate::onnx::tensor_values(tensor)?.map(|v| v as i64).collect())
}

/// `Gemm(Concat(x, h0), K, b)` with `K = [W | R]ᵀ` (`[features + h, 4h]`), the gate
/// step, and the `LSTM`'s outputs reshaped from its `[N, h]` results.
fn replacement(base: &str, rows: &StepRows, [h0, c0]: [&String; 2], weights: GateWeights, [y, y_h, y_c]: [Option<String>; 3], opset: i64) -> Replacement {
    let GateWeights { w, r, bias, hidden, features } = weights;
    let value = |suffix: &str| format!("{base}/one_step/{suffix}");
    let mut kernel = Vec::with_capacity((features + hidden) * 4 * hidden);
    for row in 0..features + hidden {
        for gate_unit in 0..4 * hidden {
            kernel.push(if row < features { w[gate_unit * features + row] } else { r[gate_unit * hidden + row - features] });
        }
    }
    let summed_bias: Vec<f32> = (0..4 * hidden).map(|k| bias.map_or(0.0, |b| b[k] + b[4 * hidden + k])).collect();
    let node = |op: &str, inputs: Vec<String>, outputs: Vec<String>, attribute: Vec<pb::AttributeProto>| pb::NodeProto {
        op_type: op.into(),
        name: outputs[0].clone(),
        input: inputs,
        output: outputs,
        attribute,
        ..Default::default()
    };
    let mut nodes = vec![];
    // The initial states are [1, N, h]: a state of another shape stays an error, as in
    // onnxruntime (an old export feeds [N, 1, h], which only fits at batch 1).
    let squeeze_0 = |state: &String, output: String| {
        let mut squeeze = match opset {
            ..13 => node("Squeeze", vec![state.clone()], vec![output], vec![attr_ints("axes", &[0])]),
            _ => node("Squeeze", vec![state.clone(), value("axis_0")], vec![output], vec![]),
        };
        // tract names the node in its error.
        squeeze.name = format!("{base}: the LSTM's initial state {state:?} must be [1, batch, hidden]");
        squeeze
    };
    let mut shapes = vec![];
    let rows = match rows {
        StepRows::Unsqueezed(rows) => rows.clone(),
        StepRows::Transposed { source, features } => {
            shapes.push(int64_vector(&value("rows_shape"), &[-1, *features]));
            nodes.push(node("Reshape", vec![source.clone(), value("rows_shape")], vec![value("rows")], vec![]));
            value("rows")
        }
    };
    nodes.extend([
        squeeze_0(h0, value("h0")),
        squeeze_0(c0, value("c0")),
        node("Concat", vec![rows, value("h0")], vec![value("joined")], vec![attr_int("axis", 1)]),
        node("Gemm", vec![value("joined"), value("kernel"), value("bias")], vec![value("gates")], vec![]),
        node(LSTM_STEP, vec![value("gates"), value("c0")], vec![value("h"), value("c")], vec![]),
    ]);
    let hidden_dim = hidden as i64;
    for (output, from, shape) in [(y, "h", vec![1, 1, -1, hidden_dim]), (y_h, "h", vec![1, -1, hidden_dim]), (y_c, "c", vec![1, -1, hidden_dim])] {
        let Some(output) = output else { continue };
        let shape_name = value(&format!("shape_{}", shapes.len()));
        nodes.push(node("Reshape", vec![value(from), shape_name.clone()], vec![output], vec![]));
        shapes.push(int64_vector(&shape_name, &shape));
    }
    let mut initializers = vec![float_initializer(&value("kernel"), &[(features + hidden) as i64, 4 * hidden_dim], kernel), float_initializer(&value("bias"), &[4 * hidden_dim], summed_bias)];
    if opset >= 13 {
        initializers.push(int64_vector(&value("axis_0"), &[0]));
    }
    initializers.extend(shapes);
    Replacement { nodes, initializers }
}

/// Whether an `Unsqueeze` inserts exactly axis 0 (the axes an attribute before opset 13, an
/// initializer input from 13 on).
fn unsqueezes_axis_0(node: &pb::NodeProto, initializers: &[pb::TensorProto], opset: i64) -> bool {
    if node.op_type != "Unsqueeze" {
        return false;
    }
    if opset < 13 {
        return node.attribute.iter().any(|a| a.name == "axes" && a.ints == [0]);
    }
    let axes = node.input.get(1).and_then(|name| initializers.iter().find(|t| &t.name == name));
    axes.and_then(crate::onnx::tensor_values).is_some_and(|values| values.collect::<Vec<f64>>() == [0.0])
}

/// A float32 tensor's values, when it holds what its dims declare.
fn float_values(t: &pb::TensorProto) -> Option<Vec<f32>> {
    if t.data_type != pb::tensor_proto::DataType::Float as i32 {
        return None;
    }
    let values: Vec<f32> = crate::onnx::tensor_values(t)?.map(|v| v as f32).collect();
    let declared = t.dims.iter().try_fold(1usize, |n, d| n.checked_mul(usize::try_from(*d).ok()?))?;
    (declared == values.len()).then_some(values)
}

/// A one-dimensional int64 initializer.
fn int64_vector(name: &str, data: &[i64]) -> pb::TensorProto {
    int64_initializer(name, &[data.len() as i64], data.to_vec())
}

/// The op's shape rules while tract reads the graph: gates `[N, 4h]` and cell state
/// `[N, h]` in, new hidden and cell states `[N, h]` out.
#[derive(Debug, Clone, Hash)]
struct LstmStepRules;

impl Expansion for LstmStepRules {
    fn name(&self) -> StaticName {
        LSTM_STEP.into()
    }

    fn nboutputs(&self) -> TractResult<usize> {
        Ok(2)
    }

    fn rules<'r, 'p: 'r, 's: 'r>(&'s self, s: &mut Solver<'r>, inputs: &'p [TensorProxy], outputs: &'p [TensorProxy]) -> InferenceResult {
        check_input_arity(inputs, 2)?;
        check_output_arity(outputs, 2)?;
        s.equals(&inputs[0].rank, 2)?;
        s.equals(&inputs[1].rank, 2)?;
        s.equals(&inputs[0].shape[0], &inputs[1].shape[0])?;
        s.equals(&inputs[0].shape[1], 4 * inputs[1].shape[1].bex())?;
        for output in outputs {
            s.equals(&output.datum_type, &inputs[1].datum_type)?;
            s.equals(&output.shape, &inputs[1].shape)?;
        }
        Ok(())
    }

    fn wire(&self, prefix: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        model.wire_node(prefix, LstmStep, inputs)
    }
}

/// The gate step: with gates `[i | o | f | g]` (ONNX order) before their activations,
/// `c' = σ(f)·c + σ(i)·tanh(g)` and `h' = σ(o)·tanh(c')`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LstmStep;

impl Op for LstmStep {
    fn name(&self) -> StaticName {
        LSTM_STEP.into()
    }

    op_as_typed_op!();
}

impl EvalOp for LstmStep {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (gates, cell) = args_2!(inputs);
        ensure!(gates.datum_type() == f32::datum_type() && cell.datum_type() == f32::datum_type(), "{LSTM_STEP} takes float32 tensors");
        let gates = gates.try_as_plain_ram()?;
        let gates = gates.as_slice::<f32>()?;
        let old_cell = cell.try_as_plain_ram()?;
        let old_cell = old_cell.as_slice::<f32>()?;
        let shape = cell.shape().to_vec();
        let hidden = *shape.last().unwrap_or(&0);
        ensure!(gates.len() == 4 * old_cell.len(), "{LSTM_STEP}: {} gate values for {} cell values", gates.len(), old_cell.len());
        let mut new_hidden = Tensor::zero::<f32>(&shape)?;
        let mut new_cell = Tensor::zero::<f32>(&shape)?;
        {
            let mut h = new_hidden.try_as_plain_ram_mut()?;
            let mut c = new_cell.try_as_plain_ram_mut()?;
            step(gates, old_cell, hidden, h.as_slice_mut::<f32>()?, c.as_slice_mut::<f32>()?)?;
        }
        Ok(tvec!(new_hidden.into_tvalue(), new_cell.into_tvalue()))
    }
}

/// The gate step over every row (see [`LstmStep`]).
fn step(gates: &[f32], old_cell: &[f32], hidden: usize, new_hidden: &mut [f32], new_cell: &mut [f32]) -> TractResult<()> {
    if hidden == 0 {
        return Ok(());
    }
    let mut activated = gates.to_vec();
    for row in activated.chunks_exact_mut(4 * hidden) {
        let (sigmoids, cell_gate) = row.split_at_mut(3 * hidden);
        Activation::Sigmoid.run_f32(sigmoids)?;
        Activation::Tanh.run_f32(cell_gate)?;
    }
    let rows = activated.chunks_exact(4 * hidden).zip(old_cell.chunks_exact(hidden));
    for ((gates, old), new) in rows.zip(new_cell.chunks_exact_mut(hidden)) {
        let (input, forget, cell_gate) = (&gates[..hidden], &gates[2 * hidden..3 * hidden], &gates[3 * hidden..]);
        for k in 0..hidden {
            new[k] = old[k] * forget[k] + input[k] * cell_gate[k];
        }
    }
    new_hidden.copy_from_slice(new_cell);
    Activation::Tanh.run_f32(new_hidden)?;
    for (gates, h) in activated.chunks_exact(4 * hidden).zip(new_hidden.chunks_exact_mut(hidden)) {
        let output = &gates[hidden..2 * hidden];
        h.iter_mut().zip(output).for_each(|(h, o)| *h *= o);
    }
    Ok(())
}

impl TypedOp for LstmStep {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let cell = inputs[1].without_value();
        Ok(tvec!(cell.clone(), cell))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_string, value_info, GraphBuilder, FLOAT};

    fn values(n: usize, salt: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|k| ((k * 7919 + salt * 104_729) % 211) as f32 / 211.0 * scale - scale / 2.0).collect()
    }

    /// How the test graph makes the `LSTM`'s `X` (`[1, N, 3]`) from its input `x`.
    #[derive(Clone, Copy, PartialEq)]
    enum Feed {
        /// `x` is `X` (a sequence of unknown length).
        Direct,
        /// `Unsqueeze(x [N, 3], axes = [0])`, as the `.nn` lowering writes.
        Unsqueezed,
        /// `Transpose(Reshape(x [N, 3], [-1, 1, 3]), [1, 0, 2])`, as ML-Agents exports.
        Transposed,
    }

    /// An `LSTM` of hidden size 2 with every weight and both biases set, and the extra
    /// attributes.
    fn lstm_graph(feed: Feed, extra: Vec<pb::AttributeProto>) -> pb::ModelProto {
        let mut g = GraphBuilder::default();
        let (hidden, features) = (2i64, 3i64);
        let w = g.constant("W", &[1, 4 * hidden, features], values(24, 1, 2.0));
        let r = g.constant("R", &[1, 4 * hidden, hidden], values(16, 2, 2.0));
        let b = g.constant("B", &[1, 8 * hidden], values(16, 3, 1.0));
        let x = match feed {
            Feed::Direct => "x".to_string(),
            Feed::Unsqueezed => g.node("Unsqueeze", vec!["x".into()], vec![attr_ints("axes", &[0])], "x_seq"),
            Feed::Transposed => {
                let shape = g.constant_i64("shape", &[3], vec![-1, 1, features]);
                let batch_first = g.node("Reshape", vec!["x".into(), shape], vec![], "x_batch_first");
                g.node("Transpose", vec![batch_first], vec![attr_ints("perm", &[1, 0, 2])], "x_seq")
            }
        };
        let mut attributes = vec![attr_int("hidden_size", hidden)];
        attributes.extend(extra);
        let outputs = ["Y".to_string(), "Y_h".into(), "Y_c".into()];
        g.node_outputs("LSTM", vec![x, w, r, b, String::new(), "h0".into(), "c0".into()], attributes, &outputs);
        let x_dims: &[i64] = if feed == Feed::Direct { &[1, -1, features] } else { &[-1, features] };
        // The states' shapes are left to what a run gives.
        let unshaped = |name: &str| {
            let mut info = value_info(name, FLOAT, &[]);
            if let Some(pb::type_proto::Value::TensorType(tensor)) = info.r#type.as_mut().and_then(|t| t.value.as_mut()) {
                tensor.shape = None;
            }
            info
        };
        let inputs = vec![value_info("x", FLOAT, x_dims), unshaped("h0"), unshaped("c0")];
        g.finish("lstm", 11, inputs, outputs.iter().map(|o| value_info(o, FLOAT, &[])).collect(), "test")
    }

    /// Only a one-step `LSTM` with ONNX's defaults is rewritten.
    #[test]
    fn only_one_step_default_lstms_are_rewritten() {
        let count = |mut proto: pb::ModelProto| one_step_lstms(proto.graph.as_mut().unwrap(), 11);
        assert_eq!(count(lstm_graph(Feed::Unsqueezed, vec![])), 1);
        assert_eq!(count(lstm_graph(Feed::Transposed, vec![])), 1);
        assert_eq!(count(lstm_graph(Feed::Unsqueezed, vec![attr_string("direction", "forward")])), 1);
        assert_eq!(count(lstm_graph(Feed::Direct, vec![])), 0, "a sequence of unknown length");
        assert_eq!(count(lstm_graph(Feed::Unsqueezed, vec![attr_string("direction", "reverse")])), 0);
        assert_eq!(count(lstm_graph(Feed::Unsqueezed, vec![pb::AttributeProto { name: "clip".into(), f: 1.0, r#type: 1, ..Default::default() }])), 0);
        let mut peepholes = lstm_graph(Feed::Unsqueezed, vec![]);
        peepholes.graph.as_mut().unwrap().node.iter_mut().find(|n| n.op_type == "LSTM").unwrap().input.push("W".into());
        assert_eq!(count(peepholes), 0, "peephole weights");
        let mut transposed_weights = lstm_graph(Feed::Unsqueezed, vec![]);
        let w = transposed_weights.graph.as_mut().unwrap().initializer.iter_mut().find(|t| t.name.starts_with('W')).unwrap();
        w.dims = vec![1, 3, 8];
        assert_eq!(count(transposed_weights), 0, "W's dims are not [1, 4h, features]");
    }

    /// Runs a graph fed one step (`x` is `[N, 3]`) on tract (with the runner's ops) at batch 2.
    fn run_lstm(proto: &pb::ModelProto, states: [usize; 2]) -> TractResult<Vec<Vec<f32>>> {
        use tract_onnx::prelude::*;
        let mut framework = tract_onnx::onnx();
        register(&mut framework.op_register);
        crate::engine::kernels::exact_ops::register(&mut framework.op_register);
        let x = Tensor::from_shape(&[2, 3], &[0.3f32, -0.7, 0.5, -1.1, 0.2, 0.9])?;
        let h0 = Tensor::from_shape(&[states[0], states[1], 2], &[0.1f32, -0.4, 0.6, 0.2])?;
        let c0 = Tensor::from_shape(&[states[0], states[1], 2], &[-0.5f32, 0.8, 0.3, -0.9])?;
        let mut model = framework.model_for_proto_model(proto)?;
        model.set_input_fact(0, f32::fact([2, 3]).into())?;
        model.set_input_fact(1, f32::fact([states[0], states[1], 2]).into())?;
        model.set_input_fact(2, f32::fact([states[0], states[1], 2]).into())?;
        let plan = model.into_optimized()?.into_runnable()?;
        let outputs = plan.run(tvec![x.into_tvalue(), h0.into_tvalue(), c0.into_tvalue()])?;
        outputs.iter().map(|t| Ok(t.try_as_plain_ram()?.as_slice::<f32>()?.to_vec())).collect()
    }

    /// The rewritten step gives tract's own `LSTM` outputs (both biases, every output) to
    /// within its activations' approximation, on inputs away from saturation, for both ways
    /// of feeding one step; initial states of another shape than `[1, N, h]` stay an error.
    #[test]
    fn the_rewritten_step_computes_the_lstm() {
        for feed in [Feed::Unsqueezed, Feed::Transposed] {
            let proto = lstm_graph(feed, vec![]);
            let mut rewritten = proto.clone();
            assert_eq!(one_step_lstms(rewritten.graph.as_mut().unwrap(), 11), 1);
            let (expected, got) = (run_lstm(&proto, [1, 2]).unwrap(), run_lstm(&rewritten, [1, 2]).unwrap());
            assert_eq!(expected.len(), 3);
            for (e, g) in expected.iter().zip(&got) {
                assert_eq!(e.len(), g.len());
                for (a, b) in e.iter().zip(g) {
                    assert!((a - b).abs() < 1e-5, "tract's LSTM {e:?}, the rewritten step {g:?}");
                }
            }
            assert!(run_lstm(&rewritten, [2, 1]).is_err(), "states [N, 1, h] at batch 2");
        }
    }

    /// The step's activations are exact where tract's saturate: against float64 on gates
    /// from -30 to 30.
    #[test]
    fn the_step_is_exact_at_saturation() {
        let hidden = 5;
        let gates: Vec<f32> = (0..2 * 4 * hidden).map(|k| k as f32 * 1.5 - 30.0).collect();
        let cell: Vec<f32> = (0..2 * hidden).map(|k| k as f32 * 3.0 - 15.0).collect();
        let (mut h, mut c) = (vec![0.0; cell.len()], vec![0.0; cell.len()]);
        step(&gates, &cell, hidden, &mut h, &mut c).unwrap();
        let sigmoid = |x: f32| 1.0 / (1.0 + (-(x as f64)).exp());
        for row in 0..2 {
            for k in 0..hidden {
                let g = |gate: usize| gates[row * 4 * hidden + gate * hidden + k];
                let new_c = sigmoid(g(2)) * cell[row * hidden + k] as f64 + sigmoid(g(0)) * (g(3) as f64).tanh();
                let new_h = sigmoid(g(1)) * new_c.tanh();
                let (got_c, got_h) = (c[row * hidden + k] as f64, h[row * hidden + k] as f64);
                assert!((got_c - new_c).abs() <= 1e-6 * new_c.abs().max(1.0), "c {got_c} vs {new_c}");
                assert!((got_h - new_h).abs() <= 1e-6 * new_h.abs().max(1e-3), "h {got_h} vs {new_h}");
            }
        }
    }
}
