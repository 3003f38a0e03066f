//! Training groundwork that needs no libtorch: the `mlagents-learn` configuration
//! ([`config`]), hyperparameter schedules ([`schedule`]), trajectory assembly
//! ([`trajectory`]), GAE ([`gae`]), statistics and console lines ([`stats`]) and TensorBoard
//! event files ([`tensorboard`]), the run folder ([`run_folder`]) and its logs ([`run_logs`]);
//! checkpoints on disk are [`crate::checkpoint`]'s. Behind the `train` feature (tch): the
//! session every trainer shares (`session`: environments, trajectories, lessons, self-play,
//! checkpoints, statistics), what each trainer type implements for it (`algorithm`), the
//! networks they build on (`networks`), the reward signals (`rewards`), PPO (`ppo`), what
//! POCA changes of it (`poca`) and SAC (`sac`).

#[cfg(feature = "train")]
pub mod algorithm;
#[cfg(feature = "train")]
pub mod bc;
pub mod config;
pub mod curriculum;
pub mod demonstrations;
pub mod environment_parameters;
pub mod error;
pub mod gae;
pub mod memory_cost;
#[cfg(feature = "train")]
pub mod networks;
#[cfg(feature = "train")]
pub mod ppo;
#[cfg(feature = "train")]
pub mod poca;
#[cfg(feature = "train")]
pub mod rewards;
pub mod run_folder;
pub mod run_logs;
pub mod schedule;
pub mod self_play;
#[cfg(feature = "train")]
pub mod sac;
#[cfg(feature = "train")]
pub mod session;
pub mod stats;
pub mod tensorboard;
pub mod trajectory;
