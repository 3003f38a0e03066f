//! PPO on tch (the `train` feature): networks ([`networks`]), one behavior's trainer
//! ([`trainer`]), self-play's networks ([`ghost`]) and the loop over environments ([`learn`]).

pub mod adam;
pub mod ghost;
pub mod league;
pub mod learn;
pub mod memory;
pub mod networks;
mod options;
mod persistence;
pub mod trainer;
