//! Head-to-head play (`mlagents-run MODEL --env ENV --opponent OTHER`): one policy drives
//! every behavior of team 0, another every behavior of the other teams, and each finished
//! agent episode counts as a win, a draw or a loss by ML-Agents 0.28's rule (the sign of its
//! last reward plus group reward) unless it was interrupted.

use super::{play::PlayError, PolicyDriver};
use crate::env::UnityEnvironment;
use crate::spec::{BehaviorName, BehaviorSpec};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One team's results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TeamResult {
    /// The model that played the team.
    pub model: String,
    pub behaviors: Vec<String>,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
    /// Episodes cut by the step limit (not rated).
    pub interrupted: usize,
    /// Mean return of the team's agent episodes.
    pub mean_reward: f32,
    #[serde(skip)]
    returns: Vec<f64>,
}

impl TeamResult {
    /// Agent episodes that ended (rated or interrupted).
    pub fn episodes(&self) -> usize {
        self.wins + self.draws + self.losses + self.interrupted
    }
}

/// The rating difference (team over its opponents) that a score implies: 400·log10(s / (1 - s))
/// with s = (wins + draws / 2) / rated games, held within half a game of 0 and 1 so that a
/// clean sweep gives a finite figure. None without a rated game.
pub fn rating_difference(wins: usize, draws: usize, losses: usize) -> Option<f64> {
    let games = (wins + draws + losses) as f64;
    if games == 0.0 {
        return None;
    }
    let half = 0.5 / games;
    let score = ((wins as f64 + draws as f64 / 2.0) / games).clamp(half, 1.0 - half);
    Some(400.0 * (score / (1.0 - score)).log10())
}

/// Environment steps a match waits for a second team to appear.
pub const TEAM_WAIT_STEPS: usize = 1000;

/// Makes the driver of a behavior when it first appears (name and spec).
pub type DriverFactory<'a> = dyn FnMut(&str, &BehaviorSpec) -> Result<PolicyDriver, PlayError> + 'a;

/// Plays every behavior with its driver until team 0's agents have finished `episodes`
/// episodes (or `max_steps` environment steps); returns each team's results. A behavior gets
/// its driver from `new_driver` when it first appears; games count from the step a second
/// team is there, which the match waits for [`TEAM_WAIT_STEPS`] steps at most.
pub fn play_match(env: &mut UnityEnvironment, new_driver: &mut DriverFactory<'_>, models: &BTreeMap<i32, String>, episodes: usize, max_steps: usize) -> Result<BTreeMap<i32, TeamResult>, PlayError> {
    if env.needs_reset() {
        env.reset()?;
    }
    let mut drivers: BTreeMap<String, PolicyDriver> = BTreeMap::new();
    let mut teams: BTreeMap<i32, TeamResult> = BTreeMap::new();
    let mut running: HashMap<(String, i32), f64> = HashMap::new();
    for step in 0..max_steps {
        for name in env.behavior_names() {
            if drivers.contains_key(&name) {
                continue;
            }
            let spec = env.behavior_specs()[&name].clone();
            drivers.insert(name.clone(), new_driver(&name, &spec)?);
            let team = BehaviorName::parse(&name).team_id;
            let result = teams.entry(team).or_insert_with(|| TeamResult { model: models.get(&team).or(models.get(&1)).cloned().unwrap_or_default(), ..Default::default() });
            result.behaviors.push(name);
        }
        let counting = teams.len() >= 2;
        if !counting && step >= TEAM_WAIT_STEPS.min(max_steps.saturating_sub(1)) {
            let team = teams.keys().next().copied().unwrap_or(0);
            return Err(PlayError::LoneTeam { team, steps: step, behaviors: drivers.keys().cloned().collect() });
        }
        for (name, driver) in drivers.iter_mut() {
            let team = teams.get_mut(&BehaviorName::parse(name).team_id).expect("every driver's team is listed");
            let (decisions, terminals) = env.get_steps(name)?;
            for i in 0..terminals.len() {
                let total = running.remove(&(name.clone(), terminals.agent_id[i])).unwrap_or(0.0) + terminals.reward[i] as f64;
                if !counting {
                    continue;
                }
                team.returns.push(total);
                let last = terminals.reward[i] + terminals.group_reward[i];
                match (terminals.interrupted[i], last.partial_cmp(&0.0)) {
                    (true, _) => team.interrupted += 1,
                    (false, Some(std::cmp::Ordering::Greater)) => team.wins += 1,
                    (false, Some(std::cmp::Ordering::Less)) => team.losses += 1,
                    (false, _) => team.draws += 1,
                }
            }
            driver.end_episodes(&terminals.agent_id);
            for (i, id) in decisions.agent_id.iter().enumerate() {
                *running.entry((name.clone(), *id)).or_default() += decisions.reward[i] as f64;
            }
            let actions = driver.decide(&decisions)?;
            env.set_actions(name, actions)?;
        }
        if teams.get(&0).or(teams.values().next()).is_some_and(|t| t.episodes() >= episodes) {
            break;
        }
        env.step()?;
    }
    for team in teams.values_mut() {
        team.mean_reward = if team.returns.is_empty() { f32::NAN } else { (team.returns.iter().sum::<f64>() / team.returns.len() as f64) as f32 };
    }
    Ok(teams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rating_difference_follows_the_score() {
        assert_eq!(rating_difference(5, 0, 5), Some(0.0));
        assert!((rating_difference(3, 0, 1).unwrap() - 400.0 * 3f64.log10()).abs() < 1e-9);
        assert!(rating_difference(1, 0, 3).unwrap() < 0.0);
        // A sweep of 10 is held at 9.5 of 10.
        assert!((rating_difference(10, 0, 0).unwrap() - 400.0 * 19f64.log10()).abs() < 1e-9);
        assert_eq!(rating_difference(0, 0, 0), None);
    }
}
