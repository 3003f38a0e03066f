//! # mlagents-rs
//!
//! Train, export and run Unity ML-Agents policies without the Python stack.
//!
//! ```text
//!  Unity build / Editor / mlagents-sim      (gRPC client: the Unity side)
//!             │  UnityToExternalProto/Exchange  (proto/, API 1.5.0)
//!             ▼
//!    comm  ──►  env (UnityEnvironment: reset/step/specs/side channels, VecEnv)
//!             │
//!             ├──► train (PPO, SAC) ──► export (ONNX / .nn)  ──► run (tract)
//! ```
//!
//! Modules:
//! - [`spec`]: the contract ML-Agents and Unity agree on (behavior specs, names, versions).
//! - [`comm`]: the gRPC server (our side), handshake, version rule, side channels, conversions.
//! - [`env`]: a scriptable environment API like `mlagents_envs.UnityEnvironment`, process
//!   launching and supervision, and [`env::VecEnv`].
//! - [`sim`]: stand-in Unity scenes that speak the Unity side of the protocol.
//! - [`checkpoint`]: checkpoint files (written atomically, verified by sha256), no libtorch.
//! - [`train`]: configuration, PPO and SAC (feature `train`), the run folder and run logs.
//! - [`export`]: checkpoints to ONNX / `.nn` / parity records, without libtorch.
//! - [`engine`]: a tract model in, a plan that computes the same numbers faster out (graph and
//!   plan rewrites, our kernels); knows nothing of ML-Agents.
//! - [`run`]: the tract runner for `.onnx` and `.nn` policies.
//! - [`compat`]: will a model load in Unity: checks against each Unity package release.
//! - [`console`]: standard output for the binaries (a closed pipe ends it quietly).

pub mod barracuda;
pub mod checkpoint;
pub mod comm;
pub mod compat;
pub mod console;
pub mod demo;
pub mod engine;
pub mod export;
pub mod onnx;
pub mod policy;
pub mod run;
pub mod env;
pub mod sim;
pub mod spec;
pub mod train;

/// An error and its causes as one line for people: each cause is appended after `: ` unless
/// the message so far already says it (library errors name their cause in their own message
/// and also expose it as [`std::error::Error::source`]).
pub fn error_text<'a>(chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut text = String::new();
    for error in chain {
        let message = error.to_string();
        if text.is_empty() {
            text = message;
        } else if !text.contains(&message) {
            text = format!("{text}: {message}");
        }
    }
    text
}

/// The generated ML-Agents communicator messages (package `communicator_objects`).
pub mod proto {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("communicator_objects");
}
