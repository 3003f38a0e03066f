//! Unity package versions (`2.0.1`, `2.3.0-exp.3`, `1.0.2-preview`) and their order: a
//! pre-release sorts before its release, its dot-separated parts compare as numbers when both
//! are numbers and as text otherwise (semantic versioning, as Unity's package manager orders
//! them).

use std::cmp::Ordering;
use std::fmt;

/// A package version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageVersion {
    pub numbers: [u64; 3],
    /// The pre-release tag (`exp.1`, `preview`), empty for a release.
    pub pre_release: String,
}

impl PackageVersion {
    /// Parses `MAJOR.MINOR.PATCH[-TAG]` (a missing minor or patch is 0: `4` is `4.0.0`).
    pub fn parse(text: &str) -> Option<Self> {
        let (numbers_text, pre_release) = match text.split_once('-') {
            Some((n, tag)) if !tag.is_empty() => (n, tag.to_string()),
            Some(_) => return None,
            None => (text, String::new()),
        };
        let parts: Vec<&str> = numbers_text.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return None;
        }
        let mut numbers = [0; 3];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            *slot = part.parse().ok()?;
        }
        Some(Self { numbers, pre_release })
    }
}

impl fmt::Display for PackageVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c] = self.numbers;
        write!(f, "{a}.{b}.{c}")?;
        if !self.pre_release.is_empty() {
            write!(f, "-{}", self.pre_release)?;
        }
        Ok(())
    }
}

fn compare_pre_release(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (mut left, mut right) = (a.split('.'), b.split('.'));
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(p), Ok(q)) => p.cmp(&q),
                    _ => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

impl Ord for PackageVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers.cmp(&other.numbers).then_with(|| compare_pre_release(&self.pre_release, &other.pre_release))
    }
}

impl PartialOrd for PackageVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> PackageVersion {
        PackageVersion::parse(text).unwrap_or_else(|| panic!("{text}"))
    }

    #[test]
    fn pre_releases_sort_before_their_release() {
        let ordered = ["1.0.0-preview", "1.0.0", "1.0.8", "1.1.0-preview", "2.0.0-exp.1", "2.0.0-pre.3", "2.0.0", "2.3.0-exp.2", "2.3.0-exp.3", "3.0.0-exp.1", "3.0.0", "4"];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert!(v("2.0.0-exp.10") > v("2.0.0-exp.9"));
        assert_eq!(v("4").to_string(), "4.0.0");
    }

    #[test]
    fn malformed_versions_are_refused() {
        for text in ["", "a.b", "1..2", "1.2.3.4", "1.2-", "-exp", "1.x"] {
            assert!(PackageVersion::parse(text).is_none(), "{text}");
        }
    }
}
