//! SAC on tch (the `train` feature), as ML-Agents 0.28 trains it (sac.md), one
//! [`crate::train::algorithm::Algorithm`] of the session: its [`trainer::Sac`] (networks,
//! update, checkpoint state), the [`replay`] buffer, the update [`cadence`] and the [`losses`].

pub mod cadence;
pub mod losses;
pub mod replay;
pub mod trainer;
