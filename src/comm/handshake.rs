//! The handshake rule (protocol.md §4): which Unity API versions we accept and what versions
//! and capabilities we answer with.

use crate::proto::UnityRlCapabilitiesProto;
use crate::spec::{ApiVersion, COMMUNICATION_API_VERSION, PACKAGE_VERSION};

/// Oldest Unity communication API we talk to.
pub const OLDEST_SUPPORTED_API: ApiVersion = ApiVersion::new(0, 15, 0);
/// Newest Unity communication API we know.
pub const NEWEST_KNOWN_API: ApiVersion = ApiVersion::new(1, 5, 0);

/// A Unity version we refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the environment speaks ML-Agents communication API {unity} (package {unity_package:?}); this tool \
     speaks {oldest} through {newest}. Rebuild the environment with a com.unity.ml-agents package \
     from 1.0 to 4.x (or 0.15)"
)]
pub struct IncompatibleVersion {
    pub unity: String,
    pub unity_package: String,
    pub oldest: ApiVersion,
    pub newest: ApiVersion,
}

/// What we answer a Unity build that passed the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// Unity's communication API version.
    pub unity_api: ApiVersion,
    /// Unity's com.unity.ml-agents package version, as sent.
    pub unity_package: String,
    /// The communication version we answer.
    pub communication_version: String,
    /// The trainer package version we answer (Unity 1.0.x refuses anything above 0.25.999).
    pub package_version: String,
    /// The side-channel formats to use: API 0.15 has the legacy formats.
    pub side_channel_api: ApiVersion,
}

/// Applies the rule: accept API 0.15.x and every 1.x (Python's semver rule), refuse the rest.
pub fn agree(unity_api: &str, unity_package: &str) -> Result<Agreement, IncompatibleVersion> {
    let refuse = || IncompatibleVersion {
        unity: unity_api.into(),
        unity_package: unity_package.into(),
        oldest: OLDEST_SUPPORTED_API,
        newest: NEWEST_KNOWN_API,
    };
    let api = ApiVersion::parse(unity_api).map_err(|_| refuse())?;
    let package_major = ApiVersion::parse(unity_package).map(|v| v.major).unwrap_or(0);
    match (api.major, api.minor) {
        (0, 15) => Ok(Agreement {
            unity_api: api,
            unity_package: unity_package.into(),
            communication_version: "0.15.0".into(),
            package_version: "0.15.1".into(),
            side_channel_api: api,
        }),
        (1, minor) => {
            if minor > NEWEST_KNOWN_API.minor {
                log::warn!("environment speaks API {api}, newer than {NEWEST_KNOWN_API}; continuing (same major)");
            }
            Ok(Agreement {
                unity_api: api,
                unity_package: unity_package.into(),
                communication_version: COMMUNICATION_API_VERSION.into(),
                // com.unity.ml-agents 1.x throws for trainer versions above 0.25.999.
                package_version: if package_major <= 1 { "0.16.1".into() } else { PACKAGE_VERSION.into() },
                side_channel_api: api,
            })
        }
        _ => Err(refuse()),
    }
}

/// The capabilities we implement (Unity adapts what it sends to them).
pub fn our_capabilities() -> UnityRlCapabilitiesProto {
    UnityRlCapabilitiesProto {
        base_rl_capabilities: true,
        concatenated_png_observations: true,
        compressed_channel_mapping: true,
        hybrid_actions: true,
        training_analytics: false,
        variable_length_observation: true,
        multi_agent_groups: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rule() {
        let a = agree("1.5.0", "2.0.1").unwrap();
        assert_eq!((a.communication_version.as_str(), a.package_version.as_str()), ("1.5.0", "0.28.0"));
        let a = agree("1.0.0", "1.0.8").unwrap();
        assert_eq!(a.package_version, "0.16.1");
        let a = agree("0.15.0", "0.15.0-preview").unwrap();
        assert_eq!((a.communication_version.as_str(), a.package_version.as_str()), ("0.15.0", "0.15.1"));
        assert!(agree("0.14.0", "0.14.0").is_err());
        assert!(agree("2.0.0", "5.0.0").is_err());
        assert!(agree("garbage", "").is_err());
        let e = agree("2.0.0", "5.0.0").unwrap_err().to_string();
        assert!(e.contains("2.0.0") && e.contains("0.15.0") && e.contains("1.5.0"), "{e}");
    }
}
