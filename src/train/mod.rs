//! Training groundwork that needs no libtorch: the `mlagents-learn` configuration
//! ([`config`]), hyperparameter schedules ([`schedule`]), trajectory assembly
//! ([`trajectory`]), GAE ([`gae`]), statistics and console lines ([`stats`]) and TensorBoard
//! event files ([`tensorboard`]). The networks, optimizer and update loop (tch, behind the
//! `train` feature) are not built yet.

pub mod config;
pub mod gae;
#[cfg(feature = "train")]
pub mod ppo;
pub mod schedule;
pub mod stats;
pub mod tensorboard;
pub mod trajectory;
