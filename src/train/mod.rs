//! Training groundwork that needs no libtorch: the `mlagents-learn` configuration
//! ([`config`]), hyperparameter schedules ([`schedule`]), trajectory assembly
//! ([`trajectory`]), GAE ([`gae`]), statistics and console lines ([`stats`]) and TensorBoard
//! event files ([`tensorboard`]), the run folder ([`run_folder`]) and its logs ([`run_logs`]);
//! checkpoints on disk are [`crate::checkpoint`]'s. The networks,
//! optimizer and update loop are in `ppo` (tch, behind the `train` feature).

pub mod config;
pub mod curriculum;
pub mod environment_parameters;
pub mod error;
pub mod gae;
pub mod memory_cost;
#[cfg(feature = "train")]
pub mod ppo;
pub mod run_folder;
pub mod run_logs;
pub mod schedule;
pub mod self_play;
pub mod stats;
pub mod tensorboard;
pub mod trajectory;
