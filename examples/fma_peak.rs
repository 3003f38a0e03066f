//! One core's multiply-add peak, the yardstick `scripts/bench-policy.sh`'s figures are read
//! against: twelve independent chains of 8-lane (AVX2) and, where the CPU has it, 16-lane
//! (AVX-512) fused multiply-adds, so that neither the latency of one chain nor the loop limits
//! the FMA units. Prints the best of several runs in GFLOP/s (an FMA is two FLOP).
//! Usage: cargo run --release --example fma_peak

use std::time::Instant;

/// Multiply-adds per chain and run: long enough that the timer and the loop's start vanish.
const ITERATIONS: u64 = 20_000_000;
/// Independent chains: more than the FMA units' latency × throughput (4 × 2 on current cores).
const CHAINS: u64 = 12;
const RUNS: usize = 7;

fn main() {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            report("AVX2 (8 lanes)", 8, || unsafe { x86::avx2_chains(ITERATIONS) });
        } else {
            println!("this CPU has no AVX2 FMA");
        }
        if is_x86_feature_detected!("avx512f") {
            report("AVX-512 (16 lanes)", 16, || unsafe { x86::avx512_chains(ITERATIONS) });
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("fma_peak measures x86-64 vector units only");
}

/// Runs `chains` RUNS times and prints the fastest run's rate.
#[allow(dead_code)]
fn report(name: &str, lanes: u64, chains: impl Fn() -> f32) {
    let mut best = f64::INFINITY;
    let mut sink = 0.0f32;
    for _ in 0..RUNS {
        let start = Instant::now();
        sink += chains();
        best = best.min(start.elapsed().as_secs_f64());
    }
    let flop = (ITERATIONS * CHAINS * lanes * 2) as f64;
    println!("{name}: {:.1} GFLOP/s on one core (checksum {sink:.3})", flop / best / 1e9);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Twelve chains of `a = a * b + c` on 8-lane vectors; returns a lane so nothing is dropped.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2_chains(iterations: u64) -> f32 {
        let b = _mm256_set1_ps(0.999_999);
        let c = _mm256_set1_ps(1e-7);
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..iterations {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, b, c);
            }
        }
        let mut sum = _mm256_setzero_ps();
        for a in acc {
            sum = _mm256_add_ps(sum, a);
        }
        _mm256_cvtss_f32(sum)
    }

    /// The same on 16-lane vectors.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512_chains(iterations: u64) -> f32 {
        let b = _mm512_set1_ps(0.999_999);
        let c = _mm512_set1_ps(1e-7);
        let mut acc = [_mm512_set1_ps(1.0); 12];
        for _ in 0..iterations {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, b, c);
            }
        }
        _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, a| _mm512_add_ps(s, *a)))
    }
}
