//! PPO on tch (the `train` feature): its [`trainer::Ppo`] takes trajectories into its buffer
//! with GAE and runs the clipped update; it is one [`crate::train::algorithm::Algorithm`] of
//! the session ([`crate::train::session`]), on the networks of [`crate::train::networks`].

pub mod trainer;
