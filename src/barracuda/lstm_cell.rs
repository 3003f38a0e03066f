//! Recognising the LSTM cell of a recurrent `.nn` (lstm.md §6.2-6.3, as the TF-era exporter
//! and ours write it: `Concat(x, h)`, one Dense per gate, Sigmoid/Tanh, `c' = c·f + i·g`,
//! `h' = o·tanh(c')`), so that the runner's lowering can give tract the cell as one ONNX
//! `LSTM`: tract runs that as two matrix products and one fused gate step, where the layers
//! take eight products and a dozen element-wise steps.

use super::model::{Activation, Layer, LayerType, NnModel};
use std::collections::HashMap;

/// A recognised cell and its weights in ONNX `LSTM` layout (gates in ONNX order: input,
/// output, forget, cell).
#[derive(Debug, Clone)]
pub struct LstmCell {
    /// The cell's input (the Concat's other input) and its two memory inputs, by `.nn` name.
    pub x: String,
    pub h_in: String,
    pub c_in: String,
    /// Indices of the layers computing the new cell state and the new hidden state.
    pub c_out: usize,
    pub h_out: usize,
    pub hidden: usize,
    pub input: usize,
    /// `[4·hidden, input]`.
    pub w: Vec<f32>,
    /// `[4·hidden, hidden]`.
    pub r: Vec<f32>,
    /// `[4·hidden]`.
    pub bias: Vec<f32>,
}

/// The LSTM cells of a model. `is_channel_axis` tells whether a Concat joins on channels.
/// A layer pattern that differs in any way (another activation, a layer with tensors of its
/// own, a name produced twice, weights that do not fit their shapes) is not a cell.
pub fn find_lstm_cells(model: &NnModel, is_channel_axis: impl Fn(&Layer) -> bool) -> Vec<LstmCell> {
    let finder = Finder::new(model);
    model
        .layers
        .iter()
        .filter(|l| l.layer_type == LayerType::Concat && l.inputs.len() == 2 && is_channel_axis(l))
        .filter_map(|concat| finder.cell(concat))
        .collect()
}

/// The gate kinds, in ONNX `LSTM` order.
const ONNX_GATE_ORDER: [Gate; 4] = [Gate::Input, Gate::Output, Gate::Forget, Gate::Cell];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Input,
    Output,
    Forget,
    Cell,
}

/// Lookups over a model's layers.
struct Finder<'a> {
    model: &'a NnModel,
    /// How many layers produce each name.
    producers: HashMap<&'a str, usize>,
}

impl<'a> Finder<'a> {
    fn new(model: &'a NnModel) -> Self {
        let mut producers = HashMap::new();
        for layer in &model.layers {
            *producers.entry(layer.name.as_str()).or_insert(0) += 1;
        }
        Self { model, producers }
    }

    fn memory_size(&self, name: &str) -> Option<usize> {
        let memory = self.model.memories.iter().find(|m| m.input == name)?;
        (self.producers.get(name).is_none()).then(|| memory.shape.last().map_or(0, |d| (*d).max(0) as usize))
    }

    /// The one layer of this type, without tensors or a fused activation, whose inputs are
    /// `a` and `b` in either order.
    fn binary(&self, layer_type: LayerType, a: &str, b: &str) -> Option<(usize, &'a Layer)> {
        let mut found = self.model.layers.iter().enumerate().filter(|(_, l)| {
            l.layer_type == layer_type
                && l.tensors.is_empty()
                && l.activation == Activation::None
                && (l.inputs == [a, b] || l.inputs == [b, a])
                && self.producers[l.name.as_str()] == 1
        });
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    /// A gate's activation and the name of its activated value.
    fn activated(&self, dense: &'a Layer) -> Option<(Activation, &'a str)> {
        if self.producers[dense.name.as_str()] != 1 {
            return None;
        }
        if dense.activation != Activation::None {
            return Some((dense.activation, dense.name.as_str()));
        }
        let mut readers = self.model.layers.iter().filter(|l| l.inputs == [dense.name.as_str()] && l.layer_type == LayerType::Activation);
        let reader = readers.next()?;
        (readers.next().is_none() && self.producers[reader.name.as_str()] == 1).then_some((reader.activation, reader.name.as_str()))
    }

    fn cell(&self, concat: &'a Layer) -> Option<LstmCell> {
        let h_position = concat.inputs.iter().position(|i| self.memory_size(i).is_some())?;
        let (h_in, x) = (&concat.inputs[h_position], &concat.inputs[1 - h_position]);
        if self.producers.get(x.as_str()).copied().unwrap_or(0) > 1 || self.producers[concat.name.as_str()] != 1 || !concat.tensors.is_empty() {
            return None;
        }
        let dense: Vec<&Layer> = self.model.layers.iter().filter(|l| l.layer_type == LayerType::Dense && l.inputs == [concat.name.as_str()]).collect();
        let [_, _, _, _] = dense.as_slice() else { return None };
        let mut gates: Vec<(Activation, &str, &Layer)> = vec![];
        for layer in &dense {
            let (activation, value) = self.activated(layer)?;
            gates.push((activation, value, layer));
        }
        // The tanh gate is the cell gate; the sigmoid gate multiplied with it the input gate,
        // the one multiplied with the memory the forget gate, the one multiplied with
        // tanh(c') the output gate.
        let cell_gate = gates.iter().position(|g| g.0 == Activation::Tanh)?;
        let sigmoids: Vec<usize> = (0..4).filter(|k| gates[*k].0 == Activation::Sigmoid).collect();
        if sigmoids.len() != 3 {
            return None;
        }
        let c_in = self.model.memories.iter().map(|m| m.input.as_str()).find(|m| *m != h_in && self.memory_size(m).is_some() && sigmoids.iter().any(|s| self.binary(LayerType::Mul, m, gates[*s].1).is_some()))?;
        let (input_gate, written) = sigmoids.iter().find_map(|s| self.binary(LayerType::Mul, gates[*s].1, gates[cell_gate].1).map(|w| (*s, w)))?;
        let (forget_gate, kept) = sigmoids.iter().filter(|s| **s != input_gate).find_map(|s| self.binary(LayerType::Mul, c_in, gates[*s].1).map(|k| (*s, k)))?;
        let (c_out, new_c) = self.binary(LayerType::Add, &kept.1.name, &written.1.name)?;
        let tanh_c = self.activated_reader(&new_c.name, Activation::Tanh)?;
        let output_gate = *sigmoids.iter().find(|s| **s != input_gate && **s != forget_gate)?;
        let (h_out, _) = self.binary(LayerType::Mul, gates[output_gate].1, tanh_c)?;
        let mut by_kind = [(Gate::Cell, cell_gate), (Gate::Input, input_gate), (Gate::Forget, forget_gate), (Gate::Output, output_gate)];
        by_kind.sort_by_key(|(kind, _)| ONNX_GATE_ORDER.iter().position(|k| k == kind));
        let kernels: Vec<&Layer> = by_kind.iter().map(|(_, k)| gates[*k].2).collect();
        let hidden = self.memory_size(h_in)?;
        if self.memory_size(c_in)? != hidden {
            return None;
        }
        let (w, r, bias, input) = onnx_weights(self.model, &kernels, hidden, h_position)?;
        Some(LstmCell { x: x.clone(), h_in: h_in.clone(), c_in: c_in.into(), c_out, h_out, hidden, input, w, r, bias })
    }

    /// The name of the one Activation layer of this kind reading `name`.
    fn activated_reader(&self, name: &str, activation: Activation) -> Option<&'a str> {
        let mut readers = self.model.layers.iter().filter(|l| l.inputs == [name] && l.layer_type == LayerType::Activation && l.activation == activation);
        let reader = readers.next()?;
        (readers.next().is_none() && self.producers[reader.name.as_str()] == 1).then_some(reader.name.as_str())
    }
}

/// The gates' Dense kernels (`[input + hidden, hidden]` each, the memory's rows at
/// `h_position` of the Concat) and biases as ONNX `W`, `R` and bias, and the input size.
fn onnx_weights(model: &NnModel, kernels: &[&Layer], hidden: usize, h_position: usize) -> Option<(Vec<f32>, Vec<f32>, Vec<f32>, usize)> {
    let rows = usize::try_from(kernels[0].tensors.first()?.shape.first().copied()?).ok()?;
    let input = rows.checked_sub(hidden).filter(|i| *i > 0)?;
    let (mut w, mut r, mut bias) = (Vec::with_capacity(4 * hidden * input), Vec::with_capacity(4 * hidden * hidden), vec![]);
    for layer in kernels {
        let [kernel, layer_bias] = layer.tensors.as_slice() else { return None };
        if kernel.shape.len() != 4 || kernel.shape[0] as i64 != rows as i64 || kernel.shape[3] as i64 != hidden as i64 {
            return None;
        }
        let values = model.tensor_values(kernel);
        let layer_bias = model.tensor_values(layer_bias);
        if values.len() != rows * hidden || layer_bias.len() != hidden {
            return None;
        }
        let x_rows = if h_position == 0 { hidden..rows } else { 0..input };
        let h_rows = if h_position == 0 { 0..hidden } else { input..rows };
        // The kernel is [rows, hidden]; W and R hold one row per hidden unit.
        for unit in 0..hidden {
            w.extend(x_rows.clone().map(|row| values[row * hidden + unit]));
            r.extend(h_rows.clone().map(|row| values[row * hidden + unit]));
        }
        bias.extend(layer_bias);
    }
    Some((w, r, bias, input))
}
