//! ML-Agents 0.28's goal conditioning (`goal_conditioning_type: hyper`, the default, when a
//! behavior has GOAL_SIGNAL observations): the body's last layer is a hypernetwork layer whose
//! weights are computed from the goal observations' encodings (`trainers/torch/conditioning.py`).
//!
//! `ConditionalEncoder` (`network_body._body_endoder`): `num_layers` layers at `layers.{2l}`
//! (each followed by Swish), all plain linear layers (Kaiming-normal, zero bias) except the
//! last, a `HyperNetwork`: `hypernet` = Linear(goal → h) + Swish, Linear(h → h) + Swish,
//! LayerNorm without parameters (ε 1e-5), Linear(h → input · h) at indices 0, 2 and 5; the
//! layer's output is `x · reshape(hypernet(goal), [input, h]) + bias`, one matrix per row.

use super::{linear, PolicyError, Weights};

/// The module of the conditional body.
pub const MODULE: &str = "network_body._body_endoder.layers";
/// Layers in the hypernetwork (0.28's `num_layers` argument of `HyperNetwork`: 2).
pub const HYPER_LAYERS: usize = 2;
/// LayerNorm's ε.
pub const LAYER_NORM_EPSILON: f32 = 1e-5;

/// Names of a conditional body's layers.
pub mod names {
    use super::{HYPER_LAYERS, MODULE};

    /// Plain layer `l` (every layer but the last).
    pub fn plain_weight(l: usize) -> String {
        format!("{MODULE}.{}.weight", 2 * l)
    }
    pub fn plain_bias(l: usize) -> String {
        format!("{MODULE}.{}.bias", 2 * l)
    }
    /// The hypernetwork's linear layer `k` (0 and 1 with Swish, 2 the flat output after
    /// LayerNorm) of the last body layer `l`.
    pub fn hyper_weight(l: usize, k: usize) -> String {
        format!("{MODULE}.{}.hypernet.{}.weight", 2 * l, hyper_index(k))
    }
    pub fn hyper_bias(l: usize, k: usize) -> String {
        format!("{MODULE}.{}.hypernet.{}.bias", 2 * l, hyper_index(k))
    }
    /// The generated layer's own bias.
    pub fn generated_bias(l: usize) -> String {
        format!("{MODULE}.{}.bias", 2 * l)
    }
    /// Position in `hypernet` (Linear, Swish, Linear, Swish, LayerNorm, Linear).
    fn hyper_index(k: usize) -> usize {
        if k < HYPER_LAYERS { 2 * k } else { 2 * HYPER_LAYERS + 1 }
    }
}

/// A conditional body's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionalBody {
    /// Width of the concatenated encodings (and action inputs) it reads.
    pub input: usize,
    /// Width of the goal observations' encodings.
    pub goal: usize,
    pub hidden: usize,
    pub layers: usize,
}

impl ConditionalBody {
    /// Index of the hypernetwork layer (the last).
    pub fn hyper_layer(&self) -> usize {
        self.layers - 1
    }

    /// Width the hypernetwork layer reads.
    pub fn hyper_input(&self) -> usize {
        if self.layers == 1 { self.input } else { self.hidden }
    }

    /// Every weight with its shape (torch layout).
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut shapes = vec![];
        let mut width = self.input;
        for l in 0..self.hyper_layer() {
            shapes.push((names::plain_weight(l), vec![self.hidden, width]));
            shapes.push((names::plain_bias(l), vec![self.hidden]));
            width = self.hidden;
        }
        let l = self.hyper_layer();
        let mut hyper_width = self.goal;
        for k in 0..HYPER_LAYERS {
            shapes.push((names::hyper_weight(l, k), vec![self.hidden, hyper_width]));
            shapes.push((names::hyper_bias(l, k), vec![self.hidden]));
            hyper_width = self.hidden;
        }
        shapes.push((names::hyper_weight(l, HYPER_LAYERS), vec![width * self.hidden, self.hidden]));
        shapes.push((names::hyper_bias(l, HYPER_LAYERS), vec![width * self.hidden]));
        shapes.push((names::generated_bias(l), vec![self.hidden]));
        shapes
    }

    /// The body's output `[n, hidden]` for `x` (`[n, input]`) and `goal` (`[n, goal]`), in
    /// plain Rust.
    pub fn forward_reference(&self, x: &[f32], goal: &[f32], n: usize, weights: &Weights) -> Result<Vec<f32>, PolicyError> {
        let mut h = x.to_vec();
        for l in 0..self.hyper_layer() {
            h = swish(linear(&h, n, weights.get(&names::plain_weight(l))?, weights.get(&names::plain_bias(l))?));
        }
        let l = self.hyper_layer();
        let mut z = goal.to_vec();
        for k in 0..HYPER_LAYERS {
            z = swish(linear(&z, n, weights.get(&names::hyper_weight(l, k))?, weights.get(&names::hyper_bias(l, k))?));
        }
        let z = layer_norm(&z, self.hidden);
        let generated = linear(&z, n, weights.get(&names::hyper_weight(l, HYPER_LAYERS))?, weights.get(&names::hyper_bias(l, HYPER_LAYERS))?);
        let bias = &weights.get(&names::generated_bias(l))?.data;
        let (input, hidden) = (self.hyper_input(), self.hidden);
        let mut out = vec![0.0; n * hidden];
        for r in 0..n {
            let matrix = &generated[r * input * hidden..(r + 1) * input * hidden];
            for o in 0..hidden {
                let acc: f32 = (0..input).map(|i| h[r * input + i] * matrix[i * hidden + o]).sum();
                out[r * hidden + o] = acc + bias[o];
            }
        }
        Ok(swish(out))
    }
}

fn swish(mut x: Vec<f32>) -> Vec<f32> {
    x.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp());
    x
}

/// 0.28's `LayerNorm` over each row of `width` values: (x − mean) / √(var + ε).
fn layer_norm(x: &[f32], width: usize) -> Vec<f32> {
    x.chunks(width)
        .flat_map(|row| {
            let mean = row.iter().sum::<f32>() / width as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
            let scale = 1.0 / (var + LAYER_NORM_EPSILON).sqrt();
            row.iter().map(move |v| (v - mean) * scale)
        })
        .collect()
}
