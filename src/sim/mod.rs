//! Stand-in Unity scenes that speak the Unity side of the ML-Agents protocol, so everything
//! is tested against a live environment on machines without Unity.
//!
//! - [`scene`]: the [`scene::Scene`] trait a scene implements (agents, observations,
//!   actions, rewards), and [`scene::SceneContext`], its view of the academy.
//! - [`academy`]: Unity's academy loop (decision periods, max steps, episode ends, rewards),
//!   one method per phase.
//! - [`client`]: the gRPC link to the trainer; [`faults`]: deliberate misbehaviours for tests.
//! - [`scenes`]: the scenes (`mlagents-sim --scene list`).

pub mod academy;
pub mod client;
pub mod faults;
pub mod math;
pub mod scene;
pub mod scenes;
