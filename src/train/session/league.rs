//! The run's self-play (self-play.md §2-§5, §10): every self-play behavior's [`Ghost`], the
//! controller that rotates the learning team, and the seeded stream swaps draw from. The
//! training loop asks it who plays a team, hands it the games the learning team finished,
//! and lets it advance after each trainer's update.

use super::ghost::Ghost;
use super::trainer::BehaviorTrainer;
use crate::checkpoint::Checkpoint;
use crate::comm::side_channel::StatsAggregation;
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::policy::Weights;
use crate::train::error::TrainError;
use crate::train::trajectory::EndedEpisodes;
use crate::train::self_play::{game_result, rate_game, GhostState, TeamRotation};
use crate::train::stats::ELO;
use rand::SeedableRng;
use std::collections::BTreeMap;

/// Every self-play behavior of a run and their shared controller.
pub struct League {
    ghosts: BTreeMap<String, Ghost>,
    rotation: TeamRotation,
    rng: rand_chacha::ChaCha8Rng,
    /// Creation time of the checkpoint the controller was restored from (the newest wins).
    rotation_restored_at: f64,
    /// Self-play behaviors that had one team when training started, with that team: they
    /// train as plain PPO until another team appears.
    dormant: BTreeMap<String, Vec<i32>>,
}

impl League {
    /// A league whose swaps draw from a stream seeded with the run seed.
    pub fn new(seed: u64) -> Self {
        Self { ghosts: BTreeMap::new(), rotation: TeamRotation::default(), rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5e1f_91a7), rotation_restored_at: f64::NEG_INFINITY, dormant: BTreeMap::new() }
    }

    /// Whether `behavior` plays itself.
    pub fn has(&self, behavior: &str) -> bool {
        self.ghosts.contains_key(behavior)
    }

    /// A team of a behavior appears. With `self_play` settings, the behavior gets a ghost
    /// (its rating starts at `initial_elo`) and the team a playing copy; teams register lowest
    /// id first, so the first learning team is the lowest.
    ///
    /// A team of a behavior that trained alone so far (agents spawned later bring their team
    /// later, as in Unity) starts self-play at this step: the earlier teams register first, so
    /// the lowest still learns, and the trainable network's weights become snapshot 0.
    pub fn register(&mut self, trainer: &BehaviorTrainer, team: i32, initial_elo: Option<f64>) {
        let Some(settings) = trainer.settings.self_play.clone() else { return };
        let earlier = self.dormant.remove(&trainer.behavior).unwrap_or_default();
        if !earlier.is_empty() {
            log::info!(
                "team {team} of {} appeared at step {} after it trained alone as plain PPO; self-play starts now (team {} learns first)",
                trainer.behavior,
                trainer.step,
                earlier.iter().chain([&team]).min().expect("a team")
            );
        }
        let elo = initial_elo.unwrap_or(settings.initial_elo);
        let ghost = self.ghosts.entry(trainer.behavior.clone()).or_insert_with(|| Ghost::new(trainer, settings, elo));
        for team in earlier.into_iter().chain([team]) {
            ghost.register_team(team, trainer, &mut self.rotation);
        }
    }

    /// After the first behaviors have registered: a self-play behavior with a single team
    /// (and no other self-play behavior to play) trains as plain PPO, as 0.28 in effect does,
    /// until another team appears ([`Self::register`]).
    pub fn drop_lonely_behaviors(&mut self) {
        if self.rotation.owners.len() > 1 {
            return;
        }
        for (behavior, ghost) in std::mem::take(&mut self.ghosts) {
            log::warn!("{behavior} has a self_play block but the environment has only one team so far; it trains as plain PPO until another team appears");
            self.dormant.insert(behavior, ghost.state.teams.clone());
        }
        self.rotation = TeamRotation::default();
    }

    /// Whether a team of `behavior` plays a ghost (a snapshot or the latest weights) rather
    /// than the trainable network.
    pub fn ghost_plays(&self, behavior: &str, team: i32) -> bool {
        self.ghosts.get(behavior).is_some_and(|g| g.plays(team))
    }

    /// Acts for a ghost team (its steps count as ghost steps, untrained); returns the actions
    /// and the returns of the team's episodes that ended.
    pub fn act(&mut self, behavior: &str, team: i32, source: usize, decisions: &DecisionSteps, terminals: &TerminalSteps) -> Result<(ActionTuple, Vec<f32>), TrainError> {
        let ghost = self.ghosts.get_mut(behavior).ok_or_else(|| TrainError::Mismatch(format!("{behavior} does not play itself")))?;
        ghost.act(team, source, decisions, terminals)
    }

    /// Rates the games the learning team of `behavior` finished (each episode that ended on
    /// its own: the sign of its last reward), recording `Self-play/ELO` (after the game) and
    /// `Self-play/Opponent ELO` (the rating the game was played against) for each.
    pub fn rate(&mut self, behavior: &str, final_rewards: &[f32], trainer: &mut BehaviorTrainer) {
        if !self.has(behavior) {
            return;
        }
        for reward in final_rewards {
            let mut states: BTreeMap<String, &mut GhostState<Weights>> = self.ghosts.iter_mut().map(|(b, g)| (b.clone(), &mut g.state)).collect();
            let game = rate_game(&mut states, &self.rotation, behavior, game_result(*reward));
            trainer.add_environment_stat(ELO, states[behavior].elo() as f32, StatsAggregation::Average);
            trainer.add_environment_stat("Self-play/Opponent ELO", game.opponent_rating as f32, StatsAggregation::Average);
        }
    }

    /// The rest of 0.28's ghost advance for `behavior` after its trainer's update; records the
    /// learning team and sets the console context.
    pub fn advance(&mut self, behavior: &str, trainer: &mut BehaviorTrainer, updated: bool) {
        let Some(ghost) = self.ghosts.get_mut(behavior) else { return };
        ghost.advance(trainer, updated, &mut self.rotation, &mut self.rng);
        if let Some(team) = self.rotation.learning_team {
            trainer.add_environment_stat("Self-play/Learning Team", team as f32, StatsAggregation::MostRecent);
            let opponents = ghost.state.opponents_text();
            trainer.set_summary_context(Some(format!("Learning team: {team}{}", if opponents.is_empty() { String::new() } else { format!("; {opponents}") })));
        }
    }

    /// Whether a team change asks for an environment reset (cleared when read).
    pub fn take_reset(&mut self) -> bool {
        self.rotation.take_reset()
    }

    /// The environments are reset: the ghost teams' episodes in progress are dropped.
    pub fn end_episodes(&mut self, ended: EndedEpisodes) {
        self.ghosts.values_mut().for_each(|g| g.end_episodes(ended));
    }

    /// Each self-play behavior's current rating (for `training_status.json`).
    pub fn elos(&self) -> BTreeMap<String, f64> {
        self.ghosts.iter().map(|(b, g)| (b.clone(), g.state.elo())).collect()
    }

    /// What a checkpoint of `behavior` keeps of self-play (JSON record and tensors).
    pub fn record(&self, behavior: &str) -> Option<(serde_json::Value, Weights)> {
        self.ghosts.get(behavior).map(|g| g.record(&self.rotation))
    }

    /// `--resume`: continues `behavior`'s self-play from its checkpoint's record (every team
    /// registered first); the controller comes from the newest checkpoint restored. A
    /// checkpoint without a record (a run of 0.28's kind) keeps the fresh state.
    pub fn restore(&mut self, behavior: &str, checkpoint: &Checkpoint) -> Result<(), TrainError> {
        let (Some(ghost), Some(record)) = (self.ghosts.get_mut(behavior), checkpoint.description.self_play.as_ref()) else { return Ok(()) };
        let rotation = ghost.restore(record, &checkpoint.tensors).map_err(|e| TrainError::Mismatch(format!("{}: cannot resume self-play: {e}", checkpoint.path.display())))?;
        if checkpoint.description.creation_time > self.rotation_restored_at {
            self.rotation = rotation;
            self.rotation_restored_at = checkpoint.description.creation_time;
        }
        log::info!(
            "Self-play of {behavior} restored from {}: learning team {:?}, ELO {:.3}, {} snapshot(s), ghost step {}",
            checkpoint.path.display(),
            self.rotation.learning_team,
            ghost.state.elo(),
            ghost.state.snapshots.len(),
            ghost.state.ghost_step
        );
        Ok(())
    }
}
