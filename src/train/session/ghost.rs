//! The networks behind a behavior's self-play state (`train::self_play`): a playing copy of
//! the actor for each team of the behavior (teams not learning play snapshots or the latest
//! weights; the learning team plays the trainable network itself), and those teams' steps
//! assembled into trajectories only to count ghost steps, as 0.28 counts them.

use crate::train::networks::memory::AgentMemories;
use crate::train::networks::{actor_weights, load_variables, Actor};
use super::trainer::BehaviorTrainer;
use crate::train::networks::acting::sample_with_memories;
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::policy::{PolicyDescription, Weights};
use crate::train::error::TrainError;
use crate::train::self_play::{GhostState, SelfPlaySettings, TeamRotation};
use crate::train::trajectory::{AgentProcessor, EndedEpisodes};
use serde_json::json;
use std::collections::BTreeMap;
use tch::{nn, Device};

/// Prefix of the self-play tensors in a checkpoint.
pub const SELF_PLAY_PREFIX: &str = "selfplay.";

/// A team's playing copy of the actor, its agents' memories (a recurrent network; kept
/// across weight swaps, as 0.28's ghost policy keeps its own), and the assembly of its steps
/// into trajectories (counted as ghost steps while the team does not learn).
struct Player {
    vs: nn::VarStore,
    actor: Actor,
    memories: AgentMemories,
    processor: AgentProcessor,
}

impl Player {
    fn new(description: &PolicyDescription, weights: &Weights, time_horizon: usize) -> Self {
        let vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&vs.root(), description);
        load_variables(&vs, weights);
        Self { vs, actor, memories: AgentMemories::new(description.memory_size), processor: AgentProcessor::new(time_horizon) }
    }
}

/// One behavior's self-play: its state and the networks of the teams it does not train.
pub struct Ghost {
    pub behavior: String,
    pub state: GhostState<Weights>,
    description: PolicyDescription,
    time_horizon: usize,
    players: BTreeMap<i32, Player>,
}

impl Ghost {
    pub fn new(trainer: &BehaviorTrainer, settings: SelfPlaySettings, initial_elo: f64) -> Self {
        Self {
            behavior: trainer.behavior.clone(),
            state: GhostState::new(settings, initial_elo),
            description: trainer.description.clone(),
            time_horizon: trainer.settings.time_horizon,
            players: BTreeMap::new(),
        }
    }

    /// A team of the behavior appears: it gets a playing copy of the trainable network.
    pub fn register_team(&mut self, team: i32, trainer: &BehaviorTrainer, rotation: &mut TeamRotation) {
        let weights = trainer.policy().1;
        self.players.insert(team, Player::new(&self.description, &weights, self.time_horizon));
        self.state.register_team(team, weights, rotation, &self.behavior);
    }

    /// Whether `team` plays a ghost (it is not the learning team).
    pub fn plays(&self, team: i32) -> bool {
        self.state.learning_team != Some(team)
    }

    /// Acts for a team that is not learning, and counts its steps as ghost steps when its
    /// trajectories end (at `time_horizon` or an episode's end); they are not trained on.
    /// Returns the actions and the returns of the team's episodes that ended. Unlike 0.28,
    /// the ghost's episode lengths and entropy are not mixed into the behavior's statistics.
    pub fn act(&mut self, team: i32, source: usize, decisions: &DecisionSteps, terminals: &TerminalSteps) -> Result<(ActionTuple, Vec<f32>), TrainError> {
        let player = self.players.get_mut(&team).ok_or_else(|| TrainError::Mismatch(format!("{}: team {team} has no playing copy", self.behavior)))?;
        let sampled = sample_with_memories(&player.actor, &self.description, &mut player.memories, source, decisions, terminals)
            .ok_or_else(|| TrainError::Mismatch(format!("{}: the opponent of team {team} produced non-finite actions (a diverged snapshot)", self.behavior)))?;
        let (trajectories, episodes) = player.processor.add_steps(source, decisions, terminals, sampled.decisions);
        self.state.ghost_step += trajectories.iter().map(|t| t.steps.len() as u64).sum::<u64>();
        Ok((sampled.actions, episodes.iter().map(|e| e.cumulative_reward).collect()))
    }

    /// 0.28's advance after the trainer's update: team change, snapshot, swap; the teams that
    /// now play a ghost get their weights.
    pub fn advance(&mut self, trainer: &BehaviorTrainer, updated: bool, rotation: &mut TeamRotation, rng: &mut rand_chacha::ChaCha8Rng) {
        let published = updated.then(|| trainer.policy().1);
        for (team, weights) in self.state.advance(trainer.step, published, rotation, rng) {
            if let Some(player) = self.players.get(&team) {
                load_variables(&player.vs, &weights);
            }
        }
    }

    /// The environments are reset: the ghost teams' episodes in progress are dropped.
    pub fn end_episodes(&mut self, ended: EndedEpisodes) {
        for player in self.players.values_mut() {
            player.processor.drop_episodes_in_progress(ended);
            player.memories.forget_episodes(ended);
        }
    }

    /// What a checkpoint keeps of self-play beyond 0.28 (self-play.md §10.1): the state and
    /// the controller as JSON, the snapshots, latest weights and each team's playing weights
    /// as tensors (`selfplay.snapshot.<k>.*`, `selfplay.latest.*`, `selfplay.team.<t>.*`).
    pub fn record(&self, rotation: &TeamRotation) -> (serde_json::Value, Weights) {
        let mut tensors = Weights::default();
        let mut put = |prefix: String, weights: &Weights| {
            for (name, t) in &weights.0 {
                tensors.0.insert(format!("{SELF_PLAY_PREFIX}{prefix}.{name}"), t.clone());
            }
        };
        for (k, snapshot) in self.state.snapshots.iter().enumerate() {
            put(format!("snapshot.{k}"), snapshot);
        }
        if let Some(latest) = &self.state.latest {
            put("latest".into(), latest);
        }
        for (team, player) in &self.players {
            put(format!("team.{team}"), &actor_weights(&player.vs));
        }
        // The weights are among the tensors; the record marks where they are (1 = present).
        let state: GhostState<u8> = GhostState { snapshots: vec![1; self.state.snapshots.len()], latest: self.state.latest.as_ref().map(|_| 1), ..self.state.clone_without_weights() };
        (json!({ "state": state, "rotation": rotation }), tensors)
    }

    /// Continues from a checkpoint's record (after every team has registered): the state,
    /// the snapshots and what each team plays, under the configuration's `self_play` block
    /// (`GhostState::reconfigure`; what changed is logged). Returns the controller recorded
    /// with it.
    pub fn restore(&mut self, record: &serde_json::Value, tensors: &Weights) -> Result<TeamRotation, String> {
        let state: GhostState<u8> = serde_json::from_value(record["state"].clone()).map_err(|e| format!("self-play state: {e}"))?;
        let rotation: TeamRotation = serde_json::from_value(record["rotation"].clone()).map_err(|e| format!("self-play controller: {e}"))?;
        let take = |prefix: String| -> Result<Weights, String> {
            let start = format!("{SELF_PLAY_PREFIX}{prefix}.");
            let weights = Weights(tensors.0.iter().filter_map(|(n, t)| n.strip_prefix(&start).map(|n| (n.to_string(), t.clone()))).collect());
            if weights.0.is_empty() {
                return Err(format!("no tensors {start}*"));
            }
            Ok(weights)
        };
        let snapshots = (0..state.snapshots.len()).map(|k| take(format!("snapshot.{k}"))).collect::<Result<Vec<_>, _>>()?;
        let latest = state.latest.map(|_| take("latest".into())).transpose()?;
        for (team, player) in &self.players {
            let weights = take(format!("team.{team}"))?;
            let skipped = load_variables(&player.vs, &weights);
            if !skipped.is_empty() {
                return Err(format!("team {team}'s playing weights do not fit the network ({skipped:?})"));
            }
        }
        let configured = self.state.settings.clone();
        self.state = GhostState { snapshots, latest, ..state.clone_without_weights() };
        let changes = self.state.reconfigure(configured);
        if !changes.is_empty() {
            log::info!("Self-play of {}: the configuration changed since the checkpoint ({}); training goes on with the new settings", self.behavior, changes.join(", "));
        }
        Ok(rotation)
    }
}
