//! ML-Agents' one-layer LSTM while training (`network_body.lstm.lstm`, torch's `nn.LSTM`
//! layout: gate blocks i, f, g, o; lstm.md §1.3), and the backward pass that completes its
//! gradient.
//!
//! The LSTMs ML-Agents' recurrent configurations use are small (memory 16 to 256, a few
//! steps of real data per sequence), and libtorch's sequence kernel (oneDNN) prepares a plan
//! on every call: 6 steps of 8 units cost 0.33 ms forward and backward, hundreds of times
//! their arithmetic. An LSTM this small runs here in plain Rust, forward and backward (0.14
//! ms, most of it the autograd calls around it); a larger one stays on torch's kernels. The Rust forward cannot join
//! libtorch's autograd graph, so it leaves a tape: its output is a fresh leaf, and
//! [`backward`] (which every trainer calls instead of `Tensor::backward`) reads the gradient
//! that leaf received, runs the LSTM's backward pass, and sends the gradients on to the
//! LSTM's weights and to what its input was computed from.

use super::values::{contiguous_slice, values};
use std::cell::RefCell;
use tch::{nn, Kind, Tensor};

/// Up to this many multiply-adds in a forward pass (rows × 4·hidden × (input + hidden)), the
/// LSTM runs in Rust. `examples/lstm_cost.rs` on a 2-core EPYC (AVX2), forward + backward:
/// 7 680 multiply-adds 0.14 ms in Rust / 0.33 ms on torch's kernel, 81 920: 0.28 / 0.50,
/// 786 432: 0.88 / 0.89 (the crossing), 1 572 864: 1.28 / 0.81.
const RUST_PASS_LIMIT: usize = 1 << 18;

/// The LSTM: `hidden` units reading `input` features; memories are `[h | c]`.
pub struct Lstm {
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
    hidden: i64,
    input: i64,
}

impl Lstm {
    /// ML-Agents' `lstm_layer` initialisation: Xavier-uniform weights per gate block, zero
    /// biases plus 1.0 on the forget gate of both bias vectors.
    pub fn new(p: nn::Path, input: i64, hidden: i64) -> Self {
        let xavier = |fan_in: i64| {
            let bound = (6.0 / (fan_in + hidden) as f64).sqrt();
            nn::Init::Uniform { lo: -bound, up: bound }
        };
        let weight_ih = p.var("weight_ih_l0", &[4 * hidden, input], xavier(input));
        let weight_hh = p.var("weight_hh_l0", &[4 * hidden, hidden], xavier(hidden));
        let forget_bias = |name: &str| {
            let bias = p.var(name, &[4 * hidden], nn::Init::Const(0.0));
            tch::no_grad(|| {
                let _ = bias.narrow(0, hidden, hidden).fill_(1.0);
            });
            bias
        };
        let (bias_ih, bias_hh) = (forget_bias("bias_ih_l0"), forget_bias("bias_hh_l0"));
        Self { weight_ih, weight_hh, bias_ih, bias_hh, hidden, input }
    }

    /// [`Self::forward`] from `memories`, or from zeros with one sequence per row when None.
    pub fn forward_from(&self, x: &Tensor, memories: Option<&Tensor>) -> (Tensor, Tensor) {
        match memories {
            Some(m) => self.forward(x, m),
            None => self.forward(x, &Tensor::zeros([1, x.size()[0], 2 * self.hidden], (Kind::Float, x.device()))),
        }
    }

    /// Runs `x` (`[n_seq * L, input]`, sequence after sequence) from `memories`
    /// (`[1, n_seq, 2 * hidden]`); returns the outputs `[n_seq * L, hidden]` and the memories
    /// after each sequence `[1, n_seq, 2 * hidden]`. The memories after carry no gradient
    /// when the Rust pass ran (no loss reads them).
    pub fn forward(&self, x: &Tensor, memories: &Tensor) -> (Tensor, Tensor) {
        let sequences = memories.size()[1];
        let rows = x.size()[0];
        let multiply_adds = (rows * 4 * self.hidden * (self.input + self.hidden)) as usize;
        let whole_sequences = sequences > 0 && rows % sequences == 0;
        if multiply_adds <= RUST_PASS_LIMIT && whole_sequences && !memories.requires_grad() && x.device() == tch::Device::Cpu {
            return self.forward_in_rust(x, memories, sequences);
        }
        if rows == sequences {
            // One step per sequence (acting): torch's cell is a few small operations, where
            // the sequence kernel prepares a plan on every call.
            let m = memories.squeeze_dim(0);
            let start = [m.narrow(1, 0, self.hidden), m.narrow(1, self.hidden, self.hidden)];
            let (h, c) = Tensor::lstm_cell(x, &start, &self.weight_ih, &self.weight_hh, Some(self.bias_ih.shallow_clone()), Some(self.bias_hh.shallow_clone()));
            return (h.shallow_clone(), Tensor::cat(&[h, c], 1).unsqueeze(0));
        }
        let input = x.reshape([sequences, -1, x.size()[1]]);
        let h0 = memories.narrow(2, 0, self.hidden).contiguous();
        let c0 = memories.narrow(2, self.hidden, self.hidden).contiguous();
        let params = [&self.weight_ih, &self.weight_hh, &self.bias_ih, &self.bias_hh];
        let (output, h, c) = Tensor::lstm(&input, &[&h0, &c0], &params, true, 1, 0.0, false, false, true);
        (output.reshape([-1, self.hidden]), Tensor::cat(&[h, c], 2))
    }

    /// How many weights the LSTM has.
    pub fn weight_count(&self) -> usize {
        self.weights().iter().map(|w| w.numel()).sum()
    }

    /// One step in Rust for `n` rows (no gradient), reading the weights in place: `x`
    /// `[n, input]`, `memories` `[n, 2 hidden]` (zeros when None); the outputs `[n, hidden]`
    /// and the memories after. None when a weight is not a contiguous float tensor or the
    /// sizes do not fit.
    pub fn step_in_rust(&self, x: &[f32], memories: Option<&[f32]>, n: usize) -> Option<(Vec<f32>, Vec<f32>)> {
        let shape = Shape { hidden: self.hidden as usize, input: self.input as usize, sequences: n, length: 1 };
        let zeros = vec![0.0; n * 2 * shape.hidden];
        let memories = memories.unwrap_or(&zeros);
        if x.len() != n * shape.input || memories.len() != n * 2 * shape.hidden {
            return None;
        }
        // SAFETY: the weights are alive for this call and nothing writes them meanwhile.
        let [w_ih, w_hh, b_ih, b_hh] = self.weights().map(|w| contiguous_slice::<f32>(w).map(|s| unsafe { &*s }));
        let pass = shape.forward(x, memories, w_ih?, w_hh?, b_ih?, b_hh?);
        Some((pass.outputs, pass.final_memories))
    }

    fn weights(&self) -> [&Tensor; 4] {
        [&self.weight_ih, &self.weight_hh, &self.bias_ih, &self.bias_hh]
    }

    /// The forward pass in Rust, whatever the size ([`Self::forward`] takes it for small
    /// LSTMs; public for `examples/lstm_cost.rs`); with gradient tracking on and something to
    /// train (the weights or the input), it leaves a tape for [`backward`].
    pub fn forward_in_rust(&self, x: &Tensor, memories: &Tensor, sequences: i64) -> (Tensor, Tensor) {
        let shape = Shape { hidden: self.hidden as usize, input: self.input as usize, sequences: sequences as usize, length: (x.size()[0] / sequences.max(1)) as usize };
        let [w_ih, w_hh, b_ih, b_hh] = self.weights().map(values::<f32>);
        let pass = shape.forward(&values::<f32>(x), &values::<f32>(memories), &w_ih, &w_hh, &b_ih, &b_hh);
        let rows = (shape.sequences * shape.length) as i64;
        let output = Tensor::from_slice(&pass.outputs).reshape([rows, self.hidden]);
        let after = Tensor::from_slice(&pass.final_memories).reshape([1, sequences, 2 * self.hidden]);
        // Which of them train is read now: a caller may freeze variables for this forward pass
        // only (SAC's Q1 under the policy loss).
        let trained = [x.requires_grad(), self.weight_ih.requires_grad(), self.weight_hh.requires_grad(), self.bias_ih.requires_grad(), self.bias_hh.requires_grad()];
        if !trained.contains(&true) || !grad_mode_enabled() {
            return (output, after);
        }
        let output = output.set_requires_grad(true);
        let tape = Tape { shape, pass, input: x.shallow_clone(), output: output.shallow_clone(), weights: self.weights().map(Tensor::shallow_clone), trained, w_ih, w_hh };
        PENDING_TAPES.with(|tapes| tapes.borrow_mut().push(tape));
        (output, after)
    }
}

/// Whether libtorch records operations for autograd on this thread now.
fn grad_mode_enabled() -> bool {
    // SAFETY: sets the thread's grad mode and at once back to what it was.
    unsafe {
        let previous = torch_sys::at_grad_set_enabled(1);
        torch_sys::at_grad_set_enabled(previous);
        previous != 0
    }
}

/// Adds `gradient` to a variable's gradient in place; false when the variable has no
/// gradient yet (or one this cannot write), for the caller to deliver it through autograd.
fn add_to_gradient(variable: &Tensor, gradient: &[f32]) -> bool {
    let grad = variable.grad();
    match contiguous_slice::<f32>(&grad) {
        // SAFETY: a variable's gradient is its own buffer (autograd accumulates into it in
        // place), alive while `grad` is, and no other thread touches it during an update.
        Some(slot) if slot.len() == gradient.len() => {
            for (g, d) in unsafe { &mut *slot }.iter_mut().zip(gradient) {
                *g += d;
            }
            true
        }
        _ => false,
    }
}

/// The sizes of one Rust pass.
#[derive(Clone, Copy)]
struct Shape {
    hidden: usize,
    input: usize,
    sequences: usize,
    length: usize,
}

/// What a Rust forward pass computed, and kept for its backward pass.
struct ForwardPass {
    /// Each row's input, `[rows, input]`.
    inputs: Vec<f32>,
    /// Each sequence's starting memory `[h | c]`.
    initial_memories: Vec<f32>,
    /// h of every row, `[rows, hidden]`.
    outputs: Vec<f32>,
    /// Each sequence's memory after its last step.
    final_memories: Vec<f32>,
    /// Each row's gate activations `[σ(i) | σ(f) | tanh(g) | σ(o)]`, `[rows, 4 hidden]`.
    gates: Vec<f32>,
    /// c of every row, `[rows, hidden]`.
    cells: Vec<f32>,
}

/// The gradients of a Rust backward pass.
struct Gradients {
    input: Vec<f32>,
    weight_ih: Vec<f32>,
    weight_hh: Vec<f32>,
    bias: Vec<f32>,
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// Σ a·b with eight partial sums (which the compiler turns into vector lanes).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (chunks_a, chunks_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = chunks_a.remainder().iter().zip(chunks_b.remainder()).map(|(x, y)| x * y).sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for k in 0..8 {
            lanes[k] += ca[k] * cb[k];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// y += a·x.
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

impl Shape {
    /// Runs every sequence from its memory (torch's `nn.LSTM` equations).
    fn forward(&self, inputs: &[f32], memories: &[f32], w_ih: &[f32], w_hh: &[f32], b_ih: &[f32], b_hh: &[f32]) -> ForwardPass {
        let (h_size, rows) = (self.hidden, self.sequences * self.length);
        let mut outputs = vec![0.0; rows * h_size];
        let mut gates = vec![0.0; rows * 4 * h_size];
        let mut cells = vec![0.0; rows * h_size];
        let mut final_memories = memories.to_vec();
        let bias: Vec<f32> = b_ih.iter().zip(b_hh).map(|(a, b)| a + b).collect();
        for s in 0..self.sequences {
            let memory = &mut final_memories[s * 2 * h_size..(s + 1) * 2 * h_size];
            let (h, c) = memory.split_at_mut(h_size);
            for t in 0..self.length {
                let r = s * self.length + t;
                let x = &inputs[r * self.input..(r + 1) * self.input];
                let g = &mut gates[r * 4 * h_size..(r + 1) * 4 * h_size];
                for (j, gate) in g.iter_mut().enumerate() {
                    let z = bias[j] + dot(&w_ih[j * self.input..(j + 1) * self.input], x) + dot(&w_hh[j * h_size..(j + 1) * h_size], h);
                    *gate = if (2 * h_size..3 * h_size).contains(&j) { z.tanh() } else { sigmoid(z) };
                }
                for k in 0..h_size {
                    let (i, f, gg, o) = (g[k], g[h_size + k], g[2 * h_size + k], g[3 * h_size + k]);
                    c[k] = f * c[k] + i * gg;
                    h[k] = o * c[k].tanh();
                }
                outputs[r * h_size..(r + 1) * h_size].copy_from_slice(h);
                cells[r * h_size..(r + 1) * h_size].copy_from_slice(c);
            }
        }
        ForwardPass { inputs: inputs.to_vec(), initial_memories: memories.to_vec(), outputs, final_memories, gates, cells }
    }

    /// Backpropagates `d_outputs` (`[rows, hidden]`) through every sequence.
    fn backward(&self, pass: &ForwardPass, d_outputs: &[f32], w_ih: &[f32], w_hh: &[f32]) -> Gradients {
        let (h_size, n_in) = (self.hidden, self.input);
        let mut grads = Gradients {
            input: vec![0.0; self.sequences * self.length * n_in],
            weight_ih: vec![0.0; 4 * h_size * n_in],
            weight_hh: vec![0.0; 4 * h_size * h_size],
            bias: vec![0.0; 4 * h_size],
        };
        let mut d_gates = vec![0.0f32; 4 * h_size];
        for s in 0..self.sequences {
            let initial = &pass.initial_memories[s * 2 * h_size..(s + 1) * 2 * h_size];
            let (mut d_h_next, mut d_c_next) = (vec![0.0f32; h_size], vec![0.0f32; h_size]);
            for t in (0..self.length).rev() {
                let r = s * self.length + t;
                let (h_prev, c_prev) = if t == 0 {
                    initial.split_at(h_size)
                } else {
                    (&pass.outputs[(r - 1) * h_size..r * h_size], &pass.cells[(r - 1) * h_size..r * h_size])
                };
                let g = &pass.gates[r * 4 * h_size..(r + 1) * 4 * h_size];
                for k in 0..h_size {
                    let (i, f, gg, o) = (g[k], g[h_size + k], g[2 * h_size + k], g[3 * h_size + k]);
                    let tanh_c = pass.cells[r * h_size + k].tanh();
                    let d_h = d_outputs[r * h_size + k] + d_h_next[k];
                    let d_c = d_c_next[k] + d_h * o * (1.0 - tanh_c * tanh_c);
                    d_gates[k] = d_c * gg * i * (1.0 - i);
                    d_gates[h_size + k] = d_c * c_prev[k] * f * (1.0 - f);
                    d_gates[2 * h_size + k] = d_c * i * (1.0 - gg * gg);
                    d_gates[3 * h_size + k] = d_h * tanh_c * o * (1.0 - o);
                    d_c_next[k] = d_c * f;
                }
                d_h_next.iter_mut().for_each(|v| *v = 0.0);
                let x = &pass.inputs[r * n_in..(r + 1) * n_in];
                let d_x = &mut grads.input[r * n_in..(r + 1) * n_in];
                for (j, d) in d_gates.iter().enumerate() {
                    grads.bias[j] += d;
                    axpy(&mut grads.weight_ih[j * n_in..(j + 1) * n_in], *d, x);
                    axpy(&mut grads.weight_hh[j * h_size..(j + 1) * h_size], *d, h_prev);
                    axpy(d_x, *d, &w_ih[j * n_in..(j + 1) * n_in]);
                    axpy(&mut d_h_next, *d, &w_hh[j * h_size..(j + 1) * h_size]);
                }
            }
        }
        grads
    }
}

/// A Rust forward pass that awaits its backward pass.
struct Tape {
    shape: Shape,
    pass: ForwardPass,
    /// The LSTM's input, with the graph it came from.
    input: Tensor,
    /// The leaf that stood for the LSTM's output in the loss.
    output: Tensor,
    /// weight_ih, weight_hh, bias_ih, bias_hh.
    weights: [Tensor; 4],
    /// Whether the input and each weight took gradient when the forward pass ran.
    trained: [bool; 5],
    w_ih: Vec<f32>,
    w_hh: Vec<f32>,
}

thread_local! {
    /// The Rust passes recorded on this thread since the last [`backward`].
    static PENDING_TAPES: RefCell<Vec<Tape>> = const { RefCell::new(Vec::new()) };
}

/// `loss.backward()`, completed through the LSTMs that ran in Rust: each tape whose output
/// received a gradient runs its backward pass, and another backward pass sends the results to
/// the weights and on through the graph the LSTM's input came from. Tapes go last first: an
/// LSTM's input may come from an earlier one's output (SAC's policy loss reaches the actor's
/// LSTM through Q1's), whose gradient is whole only once the later ones have passed it on.
/// The graph is kept until the last pass: what an input was computed from may also reach the
/// loss by another path. The tapes are consumed: those whose output the loss did not read
/// are dropped.
pub fn backward(loss: &Tensor) {
    let mut tapes = PENDING_TAPES.with(|tapes| std::mem::take(&mut *tapes.borrow_mut()));
    if tapes.is_empty() {
        loss.backward();
        return;
    }
    run_backward(loss, true);
    while let Some(tape) = tapes.pop() {
        let d_output = tape.output.grad();
        if !d_output.defined() {
            continue;
        }
        let grads = tape.shape.backward(&tape.pass, &values::<f32>(&d_output), &tape.w_ih, &tape.w_hh);
        let [w_ih, w_hh, b_ih, b_hh] = &tape.weights;
        let terms = [(&tape.input, grads.input), (w_ih, grads.weight_ih), (w_hh, grads.weight_hh), (b_ih, grads.bias.clone()), (b_hh, grads.bias)];
        let mut onward: Option<Tensor> = None;
        for (k, (tensor, gradient)) in terms.into_iter().enumerate() {
            // The weights' gradients are added in place once they exist (after the first
            // update); the input's, and a first gradient, go through autograd.
            if !tape.trained[k] || (k > 0 && add_to_gradient(tensor, &gradient)) {
                continue;
            }
            // d/dT Σ T·G = G: the backward of this sum delivers G to T.
            let term = (tensor * Tensor::from_slice(&gradient).reshape(tensor.size())).sum(Kind::Float);
            onward = Some(match onward {
                Some(sum) => sum + term,
                None => term,
            });
        }
        if let Some(onward) = onward {
            run_backward(&onward, !tapes.is_empty());
        }
    }
}

/// `loss.backward()`, keeping the graph when `keep_graph` (torch's `retain_graph=True`, which
/// tch has no call for); panics on libtorch's error as `Tensor::backward` does.
fn run_backward(loss: &Tensor, keep_graph: bool) {
    // SAFETY: `loss` outlives the call; libtorch hands over its error message as a C string
    // it allocated with malloc, freed here once copied.
    unsafe {
        torch_sys::at_backward(loss.as_ptr() as *mut _, i32::from(keep_graph), 0);
        let error = torch_sys::get_and_reset_last_err();
        if !error.is_null() {
            let message = std::ffi::CStr::from_ptr(error).to_string_lossy().into_owned();
            libc::free(error as *mut libc::c_void);
            panic!("backward pass: {message}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// The Rust pass and torch's kernel on the same weights: outputs, memories after, and
    /// every gradient (weights, input, and a layer below the input) agree.
    #[test]
    fn the_rust_pass_computes_what_torchs_lstm_does() {
        tch::manual_seed(7);
        let vs = nn::VarStore::new(Device::Cpu);
        let (input, hidden, sequences, length) = (5i64, 3i64, 2i64, 4i64);
        let below = nn::linear(vs.root() / "below", 6, input, Default::default());
        let lstm = Lstm::new(vs.root() / "lstm", input, hidden);
        let data = Tensor::randn([sequences * length, 6], (Kind::Float, Device::Cpu));
        let memories = Tensor::randn([1, sequences, 2 * hidden], (Kind::Float, Device::Cpu));
        let weight_of_output = Tensor::randn([sequences * length, hidden], (Kind::Float, Device::Cpu));
        let run = |rust: bool| {
            for v in vs.variables().values() {
                let mut grad = v.grad();
                if grad.defined() {
                    let _ = grad.zero_();
                }
            }
            let x = nn::Module::forward(&below, &data);
            let (out, after) = if rust {
                lstm.forward_in_rust(&x, &memories, sequences)
            } else {
                let input = x.reshape([sequences, length, input]);
                let h0 = memories.narrow(2, 0, hidden).contiguous();
                let c0 = memories.narrow(2, hidden, hidden).contiguous();
                let (o, h, c) = Tensor::lstm(&input, &[&h0, &c0], &lstm.weights(), true, 1, 0.0, false, false, true);
                (o.reshape([-1, hidden]), Tensor::cat(&[h, c], 2))
            };
            backward(&(&out * &weight_of_output).sum(Kind::Float));
            let mut read = vec![values::<f32>(&out), values::<f32>(&after)];
            let mut named: Vec<_> = vs.variables().into_iter().collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            read.extend(named.iter().map(|(_, v)| values::<f32>(&v.grad())));
            read
        };
        // The first Rust run finds no gradients yet (they go through autograd), the second
        // adds to the ones torch's run left.
        let first = run(true);
        let torch = run(false);
        for rust in [first, run(true)] {
            for (k, (a, b)) in torch.iter().zip(&rust).enumerate() {
                assert_eq!(a.len(), b.len());
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "tensor {k}: torch {x} vs rust {y}");
                }
            }
        }
    }

    /// An LSTM whose input also reaches the loss by another path (as in SAC's networks): the
    /// gradient below the input is the sum of both paths, as torch's kernel gives it.
    #[test]
    fn an_input_that_reaches_the_loss_twice_gets_both_gradients() {
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let below = nn::linear(vs.root() / "below", 4, 3, Default::default());
        let lstm = Lstm::new(vs.root() / "lstm", 3, 2);
        let data = Tensor::randn([5, 4], (Kind::Float, Device::Cpu));
        let memories = Tensor::zeros([1, 1, 4], (Kind::Float, Device::Cpu));
        let gradient_below = |rust: bool| {
            let mut grad = vs.variables()["below.weight"].grad();
            if grad.defined() {
                let _ = grad.zero_();
            }
            let x = nn::Module::forward(&below, &data);
            let out = if rust {
                lstm.forward_in_rust(&x, &memories, 1).0
            } else {
                let (h0, c0) = (memories.narrow(2, 0, 2).contiguous(), memories.narrow(2, 2, 2).contiguous());
                Tensor::lstm(&x.reshape([1, 5, 3]), &[&h0, &c0], &lstm.weights(), true, 1, 0.0, false, false, true).0.reshape([5, 2])
            };
            backward(&(out.sum(Kind::Float) + x.pow_tensor_scalar(2).sum(Kind::Float)));
            values::<f32>(&vs.variables()["below.weight"].grad())
        };
        let (torch, rust) = (gradient_below(false), gradient_below(true));
        for (a, b) in torch.iter().zip(&rust) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "torch {a} vs rust {b}");
        }
    }

    /// One LSTM reading another's output (as SAC's policy loss reaches the actor's LSTM
    /// through Q1's): every gradient is torch's.
    #[test]
    fn chained_lstms_get_torchs_gradients() {
        tch::manual_seed(4);
        let vs = nn::VarStore::new(Device::Cpu);
        let (first, second) = (Lstm::new(vs.root() / "first", 3, 2), Lstm::new(vs.root() / "second", 2, 3));
        let data = Tensor::randn([4, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let torch_lstm = |lstm: &Lstm, x: &Tensor, hidden: i64| {
            let zeros = Tensor::zeros([1, 1, hidden], (Kind::Float, Device::Cpu));
            Tensor::lstm(&x.reshape([1, 4, -1]), &[&zeros, &zeros], &lstm.weights(), true, 1, 0.0, false, false, true).0.reshape([4, hidden])
        };
        let memories = |hidden: i64| Tensor::zeros([1, 1, 2 * hidden], (Kind::Float, Device::Cpu));
        let gradients = |rust: bool| {
            for v in vs.variables().values() {
                let mut grad = v.grad();
                if grad.defined() {
                    let _ = grad.zero_();
                }
            }
            let (a, b) = if rust {
                let a = first.forward_in_rust(&data, &memories(2), 1).0;
                let b = second.forward_in_rust(&(&a * 2.0), &memories(3), 1).0;
                (a, b)
            } else {
                let a = torch_lstm(&first, &data, 2);
                let b = torch_lstm(&second, &(&a * 2.0), 3);
                (a, b)
            };
            backward(&(b.sum(Kind::Float) + a.sum(Kind::Float)));
            let mut named: Vec<_> = vs.variables().into_iter().collect();
            named.sort_by(|x, y| x.0.cmp(&y.0));
            named.iter().flat_map(|(_, v)| values::<f32>(&v.grad())).collect::<Vec<f32>>()
        };
        let (torch, rust) = (gradients(false), gradients(true));
        assert_eq!(torch.len(), rust.len());
        for (a, b) in torch.iter().zip(&rust) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "torch {a} vs rust {b}");
        }
    }

    /// Weights frozen for one forward pass only (SAC's Q1 under the policy loss) take no
    /// gradient from it, though they train again by the time of the backward pass; the input
    /// still does.
    #[test]
    fn weights_frozen_during_the_forward_pass_take_no_gradient() {
        let vs = nn::VarStore::new(Device::Cpu);
        let lstm = Lstm::new(vs.root(), 2, 2);
        let x = Tensor::ones([3, 2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        for w in lstm.weights() {
            let _ = w.set_requires_grad(false);
        }
        let out = lstm.forward_from(&x, None).0;
        for w in lstm.weights() {
            let _ = w.set_requires_grad(true);
        }
        backward(&out.sum(Kind::Float));
        assert!(lstm.weights().iter().all(|w| !w.grad().defined()));
        assert!(values::<f32>(&x.grad()).iter().any(|g| *g != 0.0));
    }

    /// A step without gradient tracking leaves no tape; one whose output the loss does not
    /// read is dropped at the next backward.
    #[test]
    fn tapes_are_kept_only_for_gradients() {
        let vs = nn::VarStore::new(Device::Cpu);
        let lstm = Lstm::new(vs.root(), 2, 2);
        let x = Tensor::ones([3, 2], (Kind::Float, Device::Cpu));
        let _ = tch::no_grad(|| lstm.forward_from(&x, None));
        assert_eq!(PENDING_TAPES.with(|t| t.borrow().len()), 0);
        let _unused = lstm.forward_from(&x, None);
        assert_eq!(PENDING_TAPES.with(|t| t.borrow().len()), 1);
        let w = vs.root().var("w", &[1], nn::Init::Const(1.0));
        backward(&w.sum(Kind::Float));
        assert_eq!(PENDING_TAPES.with(|t| t.borrow().len()), 0);
        assert!(!vs.variables()["weight_ih_l0"].grad().defined());
    }
}
