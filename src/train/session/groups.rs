//! Checks on agent groups that ML-Agents 0.28 leaves to the documentation (poca.md §8 row 9):
//! a group id (per environment process) whose agents report under two behaviors is split by
//! the trainers into two groups that each think they are the whole group, which POCA's
//! centralized critic and the group reward silently get wrong. Warned once per group.

use std::collections::{BTreeMap, BTreeSet};

/// The behavior each group of each worker was first seen under.
#[derive(Debug, Default)]
pub struct GroupBehaviors {
    first_seen: BTreeMap<(usize, i32), String>,
    warned: BTreeSet<(usize, i32)>,
}

impl GroupBehaviors {
    /// Notes the groups (`group_ids`; 0 = no group) of `behavior`'s agents on `worker`; returns
    /// the warning for each group now seen under a second behavior, once per group.
    pub fn observe(&mut self, worker: usize, behavior: &str, group_ids: impl IntoIterator<Item = i32>) -> Vec<String> {
        let mut warnings = vec![];
        for group in group_ids.into_iter().filter(|g| *g != 0) {
            let key = (worker, group);
            let first = self.first_seen.entry(key).or_insert_with(|| behavior.to_string());
            if first != behavior && self.warned.insert(key) {
                warnings.push(format!(
                    "group {group} of environment {worker} has agents of {first} and of {behavior}; the agents of one group must share one behavior \
                     (each behavior's trainer sees only its own part of the group, as if it were the whole group)"
                ));
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_under_two_behaviors_is_warned_once() {
        let mut groups = GroupBehaviors::default();
        assert!(groups.observe(0, "Blue?team=0", [1, 1, 0]).is_empty());
        assert!(groups.observe(0, "Blue?team=0", [1, 2]).is_empty());
        // Another worker's group 1 is another group.
        assert!(groups.observe(1, "Purple?team=1", [1]).is_empty());
        let warnings = groups.observe(0, "Purple?team=1", [1, 0, 1]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("group 1 of environment 0 has agents of Blue?team=0 and of Purple?team=1"), "{warnings:?}");
        assert!(groups.observe(0, "Purple?team=1", [1]).is_empty(), "once per group");
        assert!(groups.observe(0, "Purple?team=1", [0, 0]).is_empty(), "no group is no group");
    }
}
