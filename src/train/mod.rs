//! Training groundwork that needs no libtorch: the `mlagents-learn` configuration
//! ([`config`]) and TensorBoard event files ([`tensorboard`]). The PPO trainer itself (tch,
//! behind the `train` feature) is not built yet.

pub mod config;
pub mod tensorboard;
