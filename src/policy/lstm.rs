//! The LSTM of a recurrent policy, read from torch's layout (`nn.LSTM`: gate blocks i, f, g,
//! o stacked in `weight_ih_l0 [4h, in]`, `weight_hh_l0 [4h, h]` and two bias vectors) into
//! one block per gate, which each exporter lays out its own way, and the cell in plain Rust
//! (lstm.md §1.3, §4.2, §6.3). Memories are `[h | c]`.

use super::{names, PolicyError, Weights};

/// The four gates in torch's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Input,
    Forget,
    Cell,
    Output,
}

impl Gate {
    /// Torch's order (the blocks of its weights).
    pub const TORCH_ORDER: [Gate; 4] = [Gate::Input, Gate::Forget, Gate::Cell, Gate::Output];
    /// ONNX `LSTM`'s order (i, o, f, c).
    pub const ONNX_ORDER: [Gate; 4] = [Gate::Input, Gate::Output, Gate::Forget, Gate::Cell];

    fn block(self) -> usize {
        match self {
            Gate::Input => 0,
            Gate::Forget => 1,
            Gate::Cell => 2,
            Gate::Output => 3,
        }
    }
}

/// One gate's weights.
#[derive(Debug, Clone, PartialEq)]
pub struct GateWeights {
    /// `[hidden, input]`, row-major.
    pub input: Vec<f32>,
    /// `[hidden, hidden]`, row-major.
    pub recurrent: Vec<f32>,
    pub input_bias: Vec<f32>,
    pub recurrent_bias: Vec<f32>,
}

/// The LSTM's weights, per gate.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmWeights {
    pub input_size: usize,
    pub hidden: usize,
    gates: [GateWeights; 4],
}

impl LstmWeights {
    /// Reads the torch tensors (shapes already checked by [`super::PolicyDescription::check`]).
    pub fn read(weights: &Weights) -> Result<Self, PolicyError> {
        let ih = weights.get(names::LSTM_WEIGHT_IH)?;
        let hh = weights.get(names::LSTM_WEIGHT_HH)?;
        let (b_ih, b_hh) = (weights.get(names::LSTM_BIAS_IH)?, weights.get(names::LSTM_BIAS_HH)?);
        let hidden = hh.shape[1];
        let input_size = ih.shape[1];
        let gate = |g: Gate| {
            let rows = g.block() * hidden..(g.block() + 1) * hidden;
            GateWeights {
                input: ih.data[rows.start * input_size..rows.end * input_size].to_vec(),
                recurrent: hh.data[rows.start * hidden..rows.end * hidden].to_vec(),
                input_bias: b_ih.data[rows.clone()].to_vec(),
                recurrent_bias: b_hh.data[rows].to_vec(),
            }
        };
        Ok(Self { input_size, hidden, gates: Gate::TORCH_ORDER.map(gate) })
    }

    /// One gate's weights.
    pub fn gate(&self, gate: Gate) -> &GateWeights {
        &self.gates[gate.block()]
    }

    /// One LSTM step for `n` rows: `x` `[n, input]`, `memory` `[n, 2h]` (`[h | c]`); returns
    /// the output `h'` `[n, h]` and the memory after `[n, 2h]`.
    pub fn step(&self, x: &[f32], memory: &[f32], n: usize) -> (Vec<f32>, Vec<f32>) {
        let h = self.hidden;
        let sigmoid = |v: f32| 1.0 / (1.0 + (-v).exp());
        let mut out = vec![0.0; n * h];
        let mut after = vec![0.0; n * 2 * h];
        for r in 0..n {
            let (xr, hr, cr) = (&x[r * self.input_size..(r + 1) * self.input_size], &memory[r * 2 * h..r * 2 * h + h], &memory[r * 2 * h + h..(r + 1) * 2 * h]);
            let pre = |g: Gate, k: usize| -> f32 {
                let w = self.gate(g);
                let mut acc = w.input_bias[k] + w.recurrent_bias[k];
                acc += (0..self.input_size).map(|i| xr[i] * w.input[k * self.input_size + i]).sum::<f32>();
                acc += (0..h).map(|j| hr[j] * w.recurrent[k * h + j]).sum::<f32>();
                acc
            };
            for k in 0..h {
                let (i, f, g, o) = (sigmoid(pre(Gate::Input, k)), sigmoid(pre(Gate::Forget, k)), pre(Gate::Cell, k).tanh(), sigmoid(pre(Gate::Output, k)));
                let c = f * cr[k] + i * g;
                let hn = o * c.tanh();
                out[r * h + k] = hn;
                after[r * 2 * h + k] = hn;
                after[r * 2 * h + h + k] = c;
            }
        }
        (out, after)
    }
}
