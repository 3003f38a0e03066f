//! The trainer side of the ML-Agents gRPC protocol: Unity (or `mlagents-sim`) is the client,
//! we serve `communicator_objects.UnityToExternalProto/Exchange`.
//!
//! - [`server`]: the tonic server and the bridge from each call to a synchronous driver.
//! - [`communicator`]: the conversation: handshake, exchanges, close.
//! - [`handshake`]: the version rule and what we answer each Unity version.
//! - [`side_channel`]: framing and the built-in channels.
//! - [`observation`]: observation decoding (floats, PNG) and encoding.

pub mod communicator;
pub mod convert;
pub mod handshake;
pub mod observation;
pub mod server;
pub mod side_channel;

pub use communicator::{CommError, Communicator};
pub use server::{BindAddress, DEFAULT_MAX_MESSAGE_SIZE};
