//! Self-play as ML-Agents 0.28's ghost trainer does it (self-play.md §1-§5), without the
//! networks: the `self_play` settings, the controller that rotates the learning team, one
//! behavior's ghost state (snapshot ring, ratings, the step counters and what each team plays
//! with) and the ELO update. `train::session`'s ghosts put networks behind it.
//!
//! Beyond 0.28 (§10): the first learning team is the lowest team id (0.28: hash order), swaps
//! draw from a seeded stream, and the whole state can be recorded and restored; a restored
//! state takes the configuration's `self_play` block ([`GhostState::reconfigure`]), as 0.28
//! builds its ghost trainer from the configuration it is given. Ratings are kept for the
//! snapshots there are, not for `window` slots up front (0.28 allocates `window + 1`).

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// The `self_play` block of a behavior, 0.28's defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfPlaySettings {
    /// Trainer steps between snapshots.
    pub save_steps: u64,
    /// Trainer steps between learning-team changes (default 5 × `save_steps`).
    pub team_change: u64,
    /// Ghost steps (steps of the teams not learning) between opponent swaps.
    pub swap_steps: u64,
    /// Snapshots kept.
    pub window: usize,
    /// Probability that a swap plays the latest weights rather than a snapshot.
    pub play_against_latest_model_ratio: f64,
    pub initial_elo: f64,
}

impl Default for SelfPlaySettings {
    fn default() -> Self {
        Self { save_steps: 20000, team_change: 100_000, swap_steps: 2000, window: 10, play_against_latest_model_ratio: 0.5, initial_elo: 1200.0 }
    }
}

/// The outcome 0.28 reads from an episode's last reward (plus group reward): its sign.
pub fn game_result(final_reward: f32) -> f64 {
    if final_reward > 0.0 {
        1.0
    } else if final_reward < 0.0 {
        0.0
    } else {
        0.5
    }
}

/// 0.28's rating change for a game (no K factor): `result - expected score`.
pub fn elo_change(rating: f64, opponent_rating: f64, result: f64) -> f64 {
    let a = 10f64.powf(rating / 400.0);
    let b = 10f64.powf(opponent_rating / 400.0);
    result - a / (a + b)
}

/// The run-wide controller: which team learns, and in what order the others follow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamRotation {
    pub learning_team: Option<i32>,
    /// The teams waiting for their turn, next first.
    pub queue: VecDeque<i32>,
    /// Which behavior owns each team.
    pub owners: BTreeMap<i32, String>,
    /// A team change happened and the environments are to be reset.
    #[serde(skip)]
    changed: bool,
}

impl TeamRotation {
    /// Records a team; the first one learns, later ones queue (0.28's `subscribe_team_id`).
    pub fn subscribe(&mut self, team: i32, behavior: &str) {
        if self.owners.contains_key(&team) {
            return;
        }
        self.owners.insert(team, behavior.to_string());
        match self.learning_team {
            None => self.learning_team = Some(team),
            Some(_) => self.queue.push_back(team),
        }
    }

    /// The next team learns; the current one queues last (round robin).
    pub fn change_learning_team(&mut self) {
        if let Some(current) = self.learning_team {
            self.queue.push_back(current);
            self.learning_team = self.queue.pop_front();
            self.changed = true;
        }
    }

    /// Whether a team change asks for an environment reset (cleared when read).
    pub fn take_reset(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

/// Who a team not learning plays with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Opponent {
    /// The latest weights of the trainable network.
    Latest,
    /// A snapshot slot.
    Snapshot(usize),
}

/// 0.28's swap draw: a uniform snapshot with probability `1 - ratio`, else the latest weights.
pub fn choose_opponent(rng: &mut impl Rng, ratio: f64, snapshots: usize) -> Opponent {
    if snapshots > 0 && rng.random::<f64>() < 1.0 - ratio {
        Opponent::Snapshot(rng.random_range(0..snapshots))
    } else {
        Opponent::Latest
    }
}

/// What the networks behind a ghost state must do after an advance: load these weights into
/// these teams' playing copies.
pub type Loads<W> = Vec<(i32, W)>;

/// One behavior's self-play state: its teams, the snapshot ring, ratings and counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GhostState<W> {
    pub settings: SelfPlaySettings,
    /// Teams of this behavior, lowest first.
    pub teams: Vec<i32>,
    pub ghost_step: u64,
    pub last_save: u64,
    pub last_swap: u64,
    pub last_team_change: u64,
    /// Snapshot slots (at most `window`) and the slot the next save writes.
    pub snapshots: Vec<W>,
    pub snapshot_counter: usize,
    /// The trainable network's latest published weights.
    pub latest: Option<W>,
    /// Ratings of the snapshot slots, then (last) of the current policy. (A checkpoint of an
    /// earlier version holds `window + 1` of them, the unused slots included.)
    pub elos: Vec<f64>,
    pub current_opponent: Opponent,
    /// The learning team as this behavior last saw it.
    pub learning_team: Option<i32>,
    /// What each team not learning plays with (for the console and for resume).
    pub playing: BTreeMap<i32, Opponent>,
    /// The next advance swaps whatever the counters say (the settings that choose opponents
    /// changed on resume).
    #[serde(default)]
    pub swap_pending: bool,
}

impl<W: Clone> GhostState<W> {
    pub fn new(settings: SelfPlaySettings, initial_elo: f64) -> Self {
        Self {
            settings,
            teams: vec![],
            ghost_step: 0,
            last_save: 0,
            last_swap: 0,
            last_team_change: 0,
            snapshots: vec![],
            snapshot_counter: 0,
            latest: None,
            elos: vec![initial_elo],
            current_opponent: Opponent::Snapshot(0),
            learning_team: None,
            playing: BTreeMap::new(),
            swap_pending: false,
        }
    }

    /// The same state with no weights (snapshots empty, no latest), to record or to fill.
    pub fn clone_without_weights<V>(&self) -> GhostState<V> {
        GhostState {
            settings: self.settings.clone(),
            teams: self.teams.clone(),
            ghost_step: self.ghost_step,
            last_save: self.last_save,
            last_swap: self.last_swap,
            last_team_change: self.last_team_change,
            snapshots: vec![],
            snapshot_counter: self.snapshot_counter,
            latest: None,
            elos: self.elos.clone(),
            current_opponent: self.current_opponent,
            learning_team: self.learning_team,
            playing: self.playing.clone(),
            swap_pending: self.swap_pending,
        }
    }

    /// Takes `settings` in place of those the state was recorded with (a `--resume` under a
    /// changed `self_play` block). A smaller `window` keeps the newest snapshots with their
    /// ratings; a changed `window` or `play_against_latest_model_ratio` swaps opponents at the
    /// next advance. Returns the keys that changed, as `key: old -> new`.
    pub fn reconfigure(&mut self, settings: SelfPlaySettings) -> Vec<String> {
        let old = std::mem::replace(&mut self.settings, settings);
        let new = self.settings.clone();
        let mut changes = vec![];
        let mut note = |key: &str, before: String, after: String| {
            if before != after {
                changes.push(format!("{key}: {before} -> {after}"));
            }
        };
        note("save_steps", old.save_steps.to_string(), new.save_steps.to_string());
        note("team_change", old.team_change.to_string(), new.team_change.to_string());
        note("swap_steps", old.swap_steps.to_string(), new.swap_steps.to_string());
        note("window", old.window.to_string(), new.window.to_string());
        note("play_against_latest_model_ratio", old.play_against_latest_model_ratio.to_string(), new.play_against_latest_model_ratio.to_string());
        note("initial_elo", old.initial_elo.to_string(), new.initial_elo.to_string());
        if old.window != new.window {
            self.keep_newest_snapshots(new.window.max(1));
        }
        if old.window != new.window || old.play_against_latest_model_ratio != new.play_against_latest_model_ratio {
            self.swap_pending = true;
        }
        changes
    }

    /// Keeps the `window` most recently saved snapshots, oldest first, with their ratings;
    /// opponents that pointed at a kept slot follow it, the others are swapped at the next
    /// advance.
    fn keep_newest_snapshots(&mut self, window: usize) {
        let n = self.snapshots.len();
        // The ring in the order of saving: the slot the next save writes holds the oldest.
        let saved_order: Vec<usize> = (0..n).map(|k| (self.snapshot_counter + k) % n.max(1)).collect();
        let kept = &saved_order[n.saturating_sub(window)..];
        let current = self.elo();
        let mut new_index = BTreeMap::new();
        let (mut snapshots, mut elos) = (Vec::with_capacity(kept.len()), Vec::with_capacity(kept.len() + 1));
        for (new, &old) in kept.iter().enumerate() {
            new_index.insert(old, new);
            snapshots.push(self.snapshots[old].clone());
            elos.push(self.elos[old]);
        }
        elos.push(current);
        self.snapshot_counter = snapshots.len() % window;
        self.snapshots = snapshots;
        self.elos = elos;
        if let Opponent::Snapshot(k) = self.current_opponent {
            self.current_opponent = new_index.get(&k).map_or(Opponent::Latest, |k| Opponent::Snapshot(*k));
        }
        let mut playing = BTreeMap::new();
        for (team, opponent) in std::mem::take(&mut self.playing) {
            match opponent {
                Opponent::Snapshot(k) => match new_index.get(&k) {
                    Some(k) => {
                        playing.insert(team, Opponent::Snapshot(*k));
                    }
                    None => self.swap_pending = true,
                },
                Opponent::Latest => {
                    playing.insert(team, Opponent::Latest);
                }
            }
        }
        self.playing = playing;
    }

    /// The current policy's rating.
    pub fn elo(&self) -> f64 {
        *self.elos.last().expect("window + 1 ratings")
    }

    /// The rating of the opponent this behavior last swapped in.
    pub fn opponent_elo(&self) -> f64 {
        match self.current_opponent {
            Opponent::Latest => self.elo(),
            Opponent::Snapshot(k) => self.elos[k],
        }
    }

    pub fn change_opponent_elo(&mut self, change: f64) {
        let k = match self.current_opponent {
            Opponent::Latest => self.elos.len() - 1,
            Opponent::Snapshot(k) => k,
        };
        self.elos[k] -= change;
    }

    pub fn add_elo(&mut self, change: f64) {
        *self.elos.last_mut().expect("window + 1 ratings") += change;
    }

    /// A team of this behavior appears (0.28's `create_policy`): the first one owns the
    /// trainable network, whose weights become snapshot slot 0; every team starts playing the
    /// trainable network's weights. Returns whether this team is the first.
    pub fn register_team(&mut self, team: i32, trainable: W, rotation: &mut TeamRotation, behavior: &str) -> bool {
        rotation.subscribe(team, behavior);
        let first = self.teams.is_empty();
        if !self.teams.contains(&team) {
            self.teams.push(team);
            self.teams.sort_unstable();
        }
        if first {
            self.latest = Some(trainable);
            self.save_snapshot();
            self.learning_team = rotation.learning_team;
        }
        first
    }

    fn save_snapshot(&mut self) {
        let Some(latest) = self.latest.clone() else { return };
        let window = self.settings.window.max(1);
        let (slot, rating) = (self.snapshot_counter, self.elo());
        if slot < self.snapshots.len() {
            self.snapshots[slot] = latest;
            self.elos[slot] = rating;
        } else {
            self.snapshots.push(latest);
            // The current rating stays last; a checkpoint of an earlier version has the slot.
            if slot < self.elos.len() - 1 {
                self.elos[slot] = rating;
            } else {
                self.elos.insert(slot, rating);
            }
        }
        self.snapshot_counter = (slot + 1) % window;
    }

    fn weights_of(&self, opponent: Opponent) -> Option<W> {
        match opponent {
            Opponent::Latest => self.latest.clone(),
            Opponent::Snapshot(k) => self.snapshots.get(k).cloned(),
        }
    }

    /// The rest of 0.28's `GhostTrainer.advance` after the trainer has taken its
    /// trajectories and maybe updated (`published`: the new weights of an update), in order:
    /// team change (its own step more than `team_change` past the last), the new learning team gets the latest
    /// weights, snapshot save (`save_steps`), swap (on a team change or past `swap_steps`
    /// ghost steps). Returns the weights to load into teams' playing copies.
    pub fn advance(&mut self, step: u64, published: Option<W>, rotation: &mut TeamRotation, rng: &mut impl Rng) -> Loads<W> {
        let mut loads = vec![];
        if step.saturating_sub(self.last_team_change) > self.settings.team_change {
            rotation.change_learning_team();
            self.last_team_change = step;
        }
        let next = rotation.learning_team;
        if let Some(weights) = published {
            self.latest = Some(weights);
        }
        if self.learning_team != next {
            if let (Some(team), Some(latest)) = (next.filter(|t| self.teams.contains(t)), self.latest.clone()) {
                loads.push((team, latest));
                self.playing.remove(&team);
            }
        }
        if step.saturating_sub(self.last_save) > self.settings.save_steps {
            self.save_snapshot();
            self.last_save = step;
        }
        if self.learning_team != next || self.swap_pending || self.ghost_step.saturating_sub(self.last_swap) > self.settings.swap_steps {
            self.learning_team = next;
            self.swap_pending = false;
            loads.extend(self.swap(rng));
            self.last_swap = self.ghost_step;
        }
        loads
    }

    /// 0.28's `_swap_snapshots`: each team not learning gets a snapshot or the latest weights.
    fn swap(&mut self, rng: &mut impl Rng) -> Loads<W> {
        let mut loads = vec![];
        for team in self.teams.clone() {
            if Some(team) == self.learning_team {
                continue;
            }
            let opponent = choose_opponent(rng, self.settings.play_against_latest_model_ratio, self.snapshots.len());
            self.current_opponent = opponent;
            self.playing.insert(team, opponent);
            if let Some(weights) = self.weights_of(opponent) {
                loads.push((team, weights));
            }
        }
        loads
    }

    /// A short description of who the teams not learning play with (the console line).
    pub fn opponents_text(&self) -> String {
        let opponents: Vec<String> = self
            .playing
            .iter()
            .map(|(team, o)| match o {
                Opponent::Latest => format!("team {team} plays the latest policy"),
                Opponent::Snapshot(k) => format!("team {team} plays snapshot {k} (ELO {:.1})", self.elos[*k]),
            })
            .collect();
        opponents.join(", ")
    }
}

/// One rated game: the learner's rating change and the rating it played against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatedGame {
    pub change: f64,
    pub opponent_rating: f64,
}

/// Applies one rated game of the learning behavior (0.28's `compute_elo_rating_changes`): the
/// opponent's rating is that of the opponent its owner last swapped in; every team not learning
/// loses the change from that opponent's rating, then the learner gains it.
pub fn rate_game<W: Clone>(ghosts: &mut BTreeMap<String, &mut GhostState<W>>, rotation: &TeamRotation, learner: &str, result: f64) -> RatedGame {
    let others: Vec<String> = rotation.owners.iter().filter(|(team, _)| Some(**team) != rotation.learning_team).map(|(_, owner)| owner.clone()).collect();
    let rating = ghosts[learner].elo();
    let opponent = others.iter().filter_map(|o| ghosts.get(o)).map(|g| g.opponent_elo()).last().unwrap_or(0.0);
    let change = elo_change(rating, opponent, result);
    for owner in &others {
        if let Some(g) = ghosts.get_mut(owner) {
            g.change_opponent_elo(change);
        }
    }
    if let Some(g) = ghosts.get_mut(learner) {
        g.add_elo(change);
    }
    RatedGame { change, opponent_rating: opponent }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn settings(save: u64, swap: u64, team_change: u64, ratio: f64) -> SelfPlaySettings {
        SelfPlaySettings { save_steps: save, team_change, swap_steps: swap, window: 3, play_against_latest_model_ratio: ratio, initial_elo: 1200.0 }
    }

    #[test]
    fn elo_follows_0_28() {
        assert_eq!(elo_change(1200.0, 1200.0, 1.0), 0.5);
        assert!((elo_change(1400.0, 1200.0, 1.0) - (1.0 - 1.0 / (1.0 + 10f64.powf(-0.5)))).abs() < 1e-12);
        assert_eq!((game_result(1.06), game_result(-1.0), game_result(0.0)), (1.0, 0.0, 0.5));
        // Symmetric game against the latest policy: the change is undone (§4.4).
        let mut rotation = TeamRotation::default();
        let mut ghosts = BTreeMap::from([("1D".to_string(), GhostState::<u8>::new(settings(10, 10, 100, 1.0), 1200.0))]);
        let g = ghosts.get_mut("1D").unwrap();
        g.register_team(0, 0, &mut rotation, "1D");
        g.register_team(1, 0, &mut rotation, "1D");
        g.current_opponent = Opponent::Latest;
        let rate = |ghosts: &mut BTreeMap<String, GhostState<u8>>| {
            let mut states: BTreeMap<String, &mut GhostState<u8>> = ghosts.iter_mut().map(|(b, g)| (b.clone(), g)).collect();
            rate_game(&mut states, &rotation, "1D", 1.0)
        };
        rate(&mut ghosts);
        assert_eq!(ghosts["1D"].elo(), 1200.0);
        // Against snapshot 0: the learner gains what the snapshot loses.
        ghosts.get_mut("1D").unwrap().current_opponent = Opponent::Snapshot(0);
        let game = rate(&mut ghosts);
        assert_eq!(game, RatedGame { change: 0.5, opponent_rating: 1200.0 });
        assert_eq!((ghosts["1D"].elo(), ghosts["1D"].elos[0]), (1200.5, 1199.5));
    }

    #[test]
    fn teams_rotate_round_robin_from_the_first_subscribed() {
        let mut r = TeamRotation::default();
        for team in [0, 1, 2] {
            r.subscribe(team, "B");
        }
        r.subscribe(1, "B");
        let mut order = vec![r.learning_team.unwrap()];
        for _ in 0..4 {
            r.change_learning_team();
            assert!(r.take_reset() && !r.take_reset());
            order.push(r.learning_team.unwrap());
        }
        assert_eq!(order, [0, 1, 2, 0, 1]);
    }

    /// Two teams of one behavior (window 3, snapshots every 10 steps, the given ratio) after
    /// four saves of weights 101-104, the rating up by one before each.
    fn four_saves(ratio: f64) -> (GhostState<u8>, TeamRotation, rand_chacha::ChaCha8Rng) {
        let mut rotation = TeamRotation::default();
        let mut g = GhostState::new(settings(10, 1000, 1000, ratio), 1200.0);
        g.register_team(0, 100, &mut rotation, "B");
        g.register_team(1, 100, &mut rotation, "B");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        for (k, step) in [11u64, 22, 33, 44].into_iter().enumerate() {
            g.add_elo(1.0);
            g.advance(step, Some(101 + k as u8), &mut rotation, &mut rng);
        }
        (g, rotation, rng)
    }

    #[test]
    fn snapshots_fill_a_ring_of_window_slots_with_their_rating() {
        let (g, ..) = four_saves(1.0);
        // Slot 0 held the initial weights until the third save; the fourth overwrote slot 1.
        assert_eq!(g.snapshots, [103, 104, 102]);
        assert_eq!(g.snapshot_counter, 2);
        assert_eq!(g.elos[..3], [1203.0, 1204.0, 1202.0]);
    }

    /// A resume under a changed block (bad-input report of 2 December, S2): the new window
    /// keeps the newest snapshots with their ratings, and the next advance swaps under the
    /// new ratio; nothing is sized by the window up front (P1).
    #[test]
    fn a_changed_block_takes_effect_on_the_restored_state() {
        let (mut g, mut rotation, mut rng) = four_saves(0.0);
        assert_eq!((g.snapshots.clone(), g.snapshot_counter), (vec![103, 104, 102], 2));
        g.current_opponent = Opponent::Snapshot(2);
        g.playing = BTreeMap::from([(1, Opponent::Snapshot(0))]);
        let changes = g.reconfigure(SelfPlaySettings { window: 2, play_against_latest_model_ratio: 1.0, ..g.settings.clone() });
        assert_eq!(changes, ["window: 3 -> 2", "play_against_latest_model_ratio: 0 -> 1"]);
        // Saved in the order 102, 103, 104: the two newest stay, oldest first.
        assert_eq!((g.snapshots.clone(), g.snapshot_counter), (vec![103, 104], 0));
        assert_eq!(g.elos, [1203.0, 1204.0, 1204.0]);
        assert_eq!((g.current_opponent, g.playing.clone()), (Opponent::Latest, BTreeMap::from([(1, Opponent::Snapshot(0))])));
        assert!(g.swap_pending);
        let loads = g.advance(45, None, &mut rotation, &mut rng);
        assert_eq!((loads, g.playing[&1], g.swap_pending), (vec![(1, 104)], Opponent::Latest, false));
        // The same block again changes nothing.
        assert!(g.reconfigure(g.settings.clone()).is_empty() && !g.swap_pending);
        let huge = GhostState::<u8>::new(SelfPlaySettings { window: 1_000_000_000, ..SelfPlaySettings::default() }, 1200.0);
        assert_eq!(huge.elos.len(), 1);
    }

    /// With ratio r, a swap plays the latest weights about r of the time, otherwise a uniform
    /// snapshot; the draws are a function of the seed.
    #[test]
    fn swaps_choose_latest_by_the_ratio() {
        let draws = |seed| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            (0..10_000).map(|_| choose_opponent(&mut rng, 0.3, 4)).collect::<Vec<_>>()
        };
        let d = draws(7);
        assert_eq!(d, draws(7));
        let latest = d.iter().filter(|o| **o == Opponent::Latest).count() as f64 / 1e4;
        assert!((latest - 0.3).abs() < 0.02, "{latest}");
        for k in 0..4 {
            let n = d.iter().filter(|o| **o == Opponent::Snapshot(k)).count() as f64 / 1e4;
            assert!((n - 0.175).abs() < 0.02, "slot {k}: {n}");
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        assert_eq!(choose_opponent(&mut rng, 0.0, 0), Opponent::Latest);
    }

    /// A team change: the new learner gets the latest weights, the old one a swap; the
    /// environments are to be reset. Ghost steps drive swaps between changes.
    #[test]
    fn team_change_and_swaps_follow_the_order_of_0_28() {
        let mut rotation = TeamRotation::default();
        let mut g = GhostState::new(settings(1000, 5, 50, 1.0), 1200.0);
        g.register_team(0, 1, &mut rotation, "B");
        g.register_team(1, 1, &mut rotation, "B");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        assert_eq!(g.advance(50, Some(2), &mut rotation, &mut rng), vec![]);
        g.ghost_step = 6;
        assert_eq!(g.advance(50, None, &mut rotation, &mut rng), vec![(1, 2)]);
        assert!(!rotation.take_reset());
        let loads = g.advance(51, Some(3), &mut rotation, &mut rng);
        assert!(rotation.take_reset());
        assert_eq!(rotation.learning_team, Some(1));
        assert_eq!(loads, vec![(1, 3), (0, 3)]);
        assert_eq!(g.last_team_change, 51);
    }
}
