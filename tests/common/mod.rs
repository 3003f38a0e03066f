//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mlagents::env::{EnvOptions, UnityEnvironment};
use std::time::Duration;

/// Options for a stand-in scene on a free port, with a short timeout.
pub fn sim_options(scene: &str) -> EnvOptions {
    EnvOptions {
        env: Some(format!("sim:{scene}")),
        base_port: Some(0),
        seed: 7,
        timeout_wait: Duration::from_secs(30),
        ..Default::default()
    }
}

/// Starts a stand-in scene as a child process.
pub fn start(scene: &str) -> UnityEnvironment {
    UnityEnvironment::new(sim_options(scene)).unwrap_or_else(|e| panic!("starting sim:{scene}: {e}"))
}
