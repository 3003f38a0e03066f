//! PPO on tch (the `train` feature): networks ([`networks`]), one behavior's trainer
//! ([`trainer`]) and the loop over environments ([`learn`]).

pub mod adam;
pub mod learn;
pub mod networks;
pub mod trainer;
