//! Semantic versions as ML-Agents compares them (`major.minor.patch`).

use std::fmt;

/// A `major.minor.patch` version, e.g. a communication API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// A version string that is not `N.N.N`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot parse version {0:?} (expected major.minor.patch)")]
pub struct VersionError(pub String);

impl ApiVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self { major, minor, patch }
    }

    /// Parses the first `N.N.N` in the string (Unity package versions carry suffixes such as
    /// `-preview`); a missing patch counts as 0.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let start = text.find(|c: char| c.is_ascii_digit()).ok_or_else(|| VersionError(text.into()))?;
        let core: String =
            text[start..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let mut parts = core.split('.').filter(|p| !p.is_empty()).map(|p| p.parse::<u32>());
        let major = parts.next().and_then(|r| r.ok()).ok_or_else(|| VersionError(text.into()))?;
        let minor = parts.next().and_then(|r| r.ok()).ok_or_else(|| VersionError(text.into()))?;
        let patch = parts.next().and_then(|r| r.ok()).unwrap_or(0);
        Ok(Self { major, minor, patch })
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_versions() {
        assert_eq!(ApiVersion::parse("1.5.0").unwrap(), ApiVersion::new(1, 5, 0));
        assert_eq!(ApiVersion::parse("0.15.0-preview").unwrap(), ApiVersion::new(0, 15, 0));
        assert_eq!(ApiVersion::parse("v2.0").unwrap(), ApiVersion::new(2, 0, 0));
        assert!(ApiVersion::parse("abc").is_err());
        assert!(ApiVersion::parse("1").is_err());
    }
}
