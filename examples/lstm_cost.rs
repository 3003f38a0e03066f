//! What one LSTM forward and backward pass costs in Rust (`train::networks::lstm`) and on
//! libtorch's kernel (oneDNN), at sizes around the limit below which training takes the Rust
//! pass. One libtorch thread, as small updates run.
//! Usage: cargo run --release --features train --example lstm_cost
use mlagents::train::networks::{backward, lstm::Lstm};
use std::time::Instant;
use tch::{nn, Device, Kind, Tensor};

fn main() {
    let _ = tch::set_num_threads(1);
    println!("input hidden sequences x length  multiply-adds   rust fwd+bwd   torch fwd+bwd");
    for (input, hidden, sequences, length) in [(32, 8, 1, 6), (32, 8, 1, 64), (64, 32, 1, 64), (128, 64, 1, 32), (128, 64, 4, 64), (256, 128, 16, 64)] {
        let vs = nn::VarStore::new(Device::Cpu);
        let lstm = Lstm::new(vs.root(), input, hidden);
        let weights: Vec<Tensor> = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"].iter().map(|n| vs.variables()[*n].shallow_clone()).collect();
        let rows = sequences * length;
        let x = Tensor::randn([rows, input], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let memories = Tensor::zeros([1, sequences, 2 * hidden], (Kind::Float, Device::Cpu));
        let rust = || {
            let (out, _) = lstm.forward_in_rust(&x, &memories, sequences);
            backward(&out.sum(Kind::Float));
        };
        let torch = || {
            let (h0, c0) = (memories.narrow(2, 0, hidden).contiguous(), memories.narrow(2, hidden, hidden).contiguous());
            let (out, _, _) = Tensor::lstm(&x.reshape([sequences, length, input]), &[&h0, &c0], &[&weights[0], &weights[1], &weights[2], &weights[3]], true, 1, 0.0, false, false, true);
            out.sum(Kind::Float).backward();
        };
        let time = |f: &dyn Fn()| {
            f();
            let runs = (2_000_000 / (rows * 4 * hidden * (input + hidden))).clamp(5, 2000);
            let start = Instant::now();
            for _ in 0..runs {
                f();
            }
            start.elapsed().as_secs_f64() / runs as f64 * 1e6
        };
        let multiply_adds = rows * 4 * hidden * (input + hidden);
        println!("{input:5} {hidden:6} {sequences:9} x {length:6} {multiply_adds:13} {:11.1} µs {:12.1} µs", time(&rust), time(&torch));
    }
}
