//! The contract ML-Agents and Unity agree on: behavior specs, behavior names, API versions,
//! ports, and the model interface ([`model`]: every tensor name of a policy model). Every
//! other module reads these names and numbers from here.

mod behavior;
pub mod entity_layout;
pub mod model;
mod version;

pub use behavior::{
    ActionSpec, BehaviorName, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType,
};
pub use entity_layout::EntityLayout;
pub use version::{ApiVersion, VersionError};

/// The communication API version this crate speaks (mlagents_envs 0.28 / 1.1).
pub const COMMUNICATION_API_VERSION: &str = "1.5.0";
/// The Python package version we present to Unity builds of com.unity.ml-agents >= 2.
pub const PACKAGE_VERSION: &str = "0.28.0";
/// Port used when no executable is given: the Unity Editor's training port.
pub const DEFAULT_EDITOR_PORT: u16 = 5004;
/// First port used for executables (`--base-port`); worker i listens on base + i.
pub const BASE_ENVIRONMENT_PORT: u16 = 5005;
/// Default seconds to wait for the environment (`--timeout-wait`).
pub const DEFAULT_TIMEOUT_WAIT_SECS: u64 = 60;
/// The academy name Unity sends in the handshake.
pub const ACADEMY_NAME: &str = "AcademySingleton";
pub use model::MODEL_CONSTANTS;
/// Header status of a normal message.
pub const STATUS_OK: i32 = 200;
/// Header status that closes the link.
pub const STATUS_CLOSE: i32 = 400;
