//! Cooperative stand-ins (poca.md §7.3): agents in multi-agent groups, one group per area, as
//! Unity's `SimpleMultiAgentGroup` sends them. A member that finishes early sends its terminal
//! step (done, not interrupted, as a disabled Unity agent does) and no more decisions until its
//! group's episode ends; the group's reward goes to the members still registered; a group step
//! limit interrupts every live member at once (`GroupEpisodeInterrupted`). Then every member
//! begins the next group episode: with new agent ids (agents re-enabled in Unity) or the same
//! ones (`EndGroupEpisode`).
//!
//! - [`CoopTask::Reach`] (`CoopReach1D`, upstream's `MultiAgentEnvironment` over the wire): each
//!   member reaches the side its own goal sign shows (step 0.2); an early finisher's terminal
//!   reward is min(−0.01, r) for its finishing reward r, the last finisher's is 0 with a group
//!   reward of r.
//! - [`CoopTask::Sacrifice`] (`CoopSacrifice`, DungeonEscape-like): the door at +1 opens only once
//!   a member has gone to the dragon at −1, which ends that member's episode with nothing; a
//!   member at the open door gives every member still in the episode a group reward of 1. Each
//!   member sees its position, whether the key lies ready and its slot in the group (one-hot), so
//!   one slot can learn to be the one who goes: a trainer must credit that member with what the
//!   group earns after it is gone (POCA's bootstrap), while individual rewards tell every member
//!   to go to the door.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;

use super::simple::{SUCCESS_REWARD, TIME_PENALTY};

/// The behavior every member has.
pub const COOP_BEHAVIOR: &str = "1D?team=0";
/// `CoopSacrifice`'s step along the line (four moves from the start to either end).
const SACRIFICE_STEP: f32 = 0.25;
/// `CoopSacrifice`'s group reward at the open door.
pub const DOOR_REWARD: f32 = 1.0;

/// What the group has to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoopTask {
    Reach,
    Sacrifice,
}

/// A cooperative scene's layout.
#[derive(Debug, Clone)]
pub struct CoopConfig {
    pub task: CoopTask,
    /// One continuous action (else one branch of 2: 0 left, 1 right).
    pub continuous: bool,
    /// Areas, each with one group (ids 1, 2, ...).
    pub areas: usize,
    pub group_size: usize,
    /// Academy steps after which a group's episode is interrupted (0: never).
    pub group_step_limit: u32,
    /// Members keep their agent ids from one group episode to the next.
    pub keep_ids: bool,
}

impl CoopConfig {
    /// `CoopReach1D`: upstream's two agents in one group, new ids per episode, no step limit.
    pub fn reach(continuous: bool) -> Self {
        Self { task: CoopTask::Reach, continuous, areas: 1, group_size: 2, group_step_limit: 0, keep_ids: false }
    }

    /// `CoopSacrifice`: four areas of three, 20 steps a group episode.
    pub fn sacrifice() -> Self {
        Self { task: CoopTask::Sacrifice, continuous: false, areas: 4, group_size: 3, group_step_limit: 20, keep_ids: true }
    }
}

#[derive(Debug, Clone, Default)]
struct Member {
    goal: f32,
    position: f32,
    /// In the group's episode (sends decisions).
    alive: bool,
}

#[derive(Debug, Clone, Default)]
struct Area {
    /// Academy steps since the group's episode began (counted at its members' first action of
    /// each step).
    steps: u32,
    /// The academy step last counted in `steps`.
    counted_tick: Option<u64>,
    /// CoopSacrifice: a member went to the dragon.
    key: bool,
    /// Members whose episode end the academy has not yet turned into a new episode.
    ending: usize,
    /// The group's reward so far this group episode (for the stats).
    group_return: f32,
}

/// The cooperative scenes.
pub struct CoopScene {
    config: CoopConfig,
    members: Vec<Member>,
    areas: Vec<Area>,
    /// Academy steps since the scene started.
    tick: u64,
}

impl CoopScene {
    pub fn new(config: CoopConfig) -> Self {
        let n = config.areas * config.group_size;
        Self { members: vec![Member::default(); n], areas: vec![Area::default(); config.areas], tick: 0, config }
    }

    fn area_of(&self, agent: usize) -> usize {
        agent / self.config.group_size
    }

    fn members_of(&self, area: usize) -> std::ops::Range<usize> {
        area * self.config.group_size..(area + 1) * self.config.group_size
    }

    /// The next group episode of `area`: every member back, new goals.
    fn restart(&mut self, area: usize, ctx: &mut SceneContext) {
        for m in self.members_of(area) {
            let goal = if ctx.rng.random_bool(0.5) { 1.0 } else { -1.0 };
            self.members[m] = Member { goal, position: 0.0, alive: true };
        }
        self.areas[area] = Area::default();
    }

    /// Ends `agent`'s episode (interrupted or not); it sends no decision until its group's
    /// next episode.
    fn end(&mut self, agent: usize, interrupted: bool, ctx: &mut SceneContext) {
        self.members[agent].alive = false;
        let area = self.area_of(agent);
        self.areas[area].ending += 1;
        if interrupted {
            ctx.interrupt_episode(agent);
        } else {
            ctx.end_episode(agent);
        }
    }

    /// The group's episode is over for every member still in it: its return goes to the stats.
    fn end_group(&mut self, area: usize, interrupted: bool, ctx: &mut SceneContext) {
        let live: Vec<usize> = self.members_of(area).filter(|m| self.members[*m].alive).collect();
        for m in live {
            self.end(m, interrupted, ctx);
        }
        ctx.record_stat("Coop/Group Return", self.areas[area].group_return, StatsAggregation::Average);
        ctx.record_stat("Coop/Group Episodes", 1.0, StatsAggregation::Sum);
    }

    fn act_reach(&mut self, agent: usize, delta: f32, ctx: &mut SceneContext) {
        let m = &mut self.members[agent];
        m.position = (m.position + delta.clamp(-0.2, 0.2)).clamp(-1.0, 1.0);
        if m.position.abs() < 1.0 {
            ctx.set_reward(agent, -TIME_PENALTY);
            return;
        }
        let finishing = SUCCESS_REWARD * m.position * m.goal;
        // Upstream's `final_rewards`: every member's finishing reward.
        ctx.record_stat("Coop/Final Reward", finishing, StatsAggregation::Average);
        let area = self.area_of(agent);
        let last = self.members_of(area).filter(|o| *o != agent).all(|o| !self.members[o].alive);
        if last {
            ctx.set_reward(agent, 0.0);
            ctx.add_group_reward(agent, finishing);
            self.areas[area].group_return += finishing;
            self.end_group(area, false, ctx);
        } else {
            ctx.set_reward(agent, finishing.min(-TIME_PENALTY));
            self.end(agent, false, ctx);
        }
    }

    fn act_sacrifice(&mut self, agent: usize, delta: f32, ctx: &mut SceneContext) {
        let area = self.area_of(agent);
        let m = &mut self.members[agent];
        m.position = (m.position + delta.clamp(-SACRIFICE_STEP, SACRIFICE_STEP)).clamp(-1.0, 1.0);
        if m.position <= -1.0 && !self.areas[area].key {
            self.areas[area].key = true;
            ctx.record_stat("Coop/Sacrifices", 1.0, StatsAggregation::Sum);
            self.end(agent, false, ctx);
        } else if m.position >= 1.0 && self.areas[area].key {
            let live: Vec<usize> = self.members_of(area).filter(|o| self.members[*o].alive).collect();
            for o in &live {
                ctx.add_group_reward(*o, DOOR_REWARD);
            }
            self.areas[area].group_return += DOOR_REWARD;
            self.end_group(area, false, ctx);
        }
    }
}

impl Scene for CoopScene {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        let size = match self.config.task {
            CoopTask::Reach => 1,
            CoopTask::Sacrifice => 2 + self.config.group_size,
        };
        let actions = if self.config.continuous { ActionSpec::continuous(1) } else { ActionSpec::discrete(&[2]) };
        vec![BehaviorDef { name: COOP_BEHAVIOR.into(), observations: vec![ObservationDef::floats(ObservationSpec::vector(size, "VectorSensor"))], actions }]
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..self.members.len())
            .map(|i| AgentDef { group_id: (self.area_of(i) + 1) as i32, new_id_per_episode: !self.config.keep_ids, ..AgentDef::every_step(0) })
            .collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        for area in 0..self.areas.len() {
            self.restart(area, ctx);
        }
    }

    /// Called once per ended episode: the group's next episode begins once the last of its
    /// members that were ending has been sent.
    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        let area = self.area_of(agent);
        self.areas[area].ending = self.areas[area].ending.saturating_sub(1);
        if self.areas[area].ending == 0 && self.members_of(area).all(|m| !self.members[m].alive) {
            self.restart(area, ctx);
        }
    }

    fn wants_decision(&self, agent: usize) -> bool {
        self.members[agent].alive
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let m = &self.members[agent];
        match self.config.task {
            CoopTask::Reach => vec![vec![m.goal]],
            CoopTask::Sacrifice => {
                let slot = agent % self.config.group_size;
                let mut values = vec![m.position, if self.areas[self.area_of(agent)].key { 1.0 } else { 0.0 }];
                values.extend((0..self.config.group_size).map(|s| if s == slot { 1.0 } else { 0.0 }));
                vec![values]
            }
        }
    }

    fn action_mask(&self, _agent: usize) -> Vec<bool> {
        if self.config.continuous { vec![] } else { vec![false; 2] }
    }

    fn act(&mut self, agent: usize, continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        if !self.members[agent].alive {
            return;
        }
        let tick = self.tick;
        let area_index = self.area_of(agent);
        let area = &mut self.areas[area_index];
        if area.counted_tick != Some(tick) {
            area.counted_tick = Some(tick);
            area.steps += 1;
        }
        let delta = match (continuous.first(), discrete.first()) {
            (Some(c), _) => *c,
            (None, Some(1)) => 1.0,
            _ => -1.0,
        };
        match self.config.task {
            CoopTask::Reach => self.act_reach(agent, delta, ctx),
            CoopTask::Sacrifice => self.act_sacrifice(agent, delta, ctx),
        }
    }

    fn physics_step(&mut self, ctx: &mut SceneContext) {
        let limit = self.config.group_step_limit;
        for area in 0..self.areas.len() {
            let live = self.members_of(area).any(|m| self.members[m].alive);
            if live && limit > 0 && self.areas[area].steps >= limit {
                self.end_group(area, true, ctx);
            }
        }
        self.tick += 1;
    }
}
