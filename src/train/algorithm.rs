//! What a trainer type (PPO, POCA, SAC) does for one behavior, and nothing more: it
//! takes trajectories, decides when to update and updates, and says what of it a checkpoint
//! keeps. Everything else a behavior's training needs (acting, assembling trajectories,
//! statistics and summaries, counting steps, due checkpoints, the parity record, self-play)
//! is the session's, the same for every trainer type (`train::session`).

use crate::checkpoint::AdamState;
use crate::policy::Weights;
use crate::train::error::TrainError;
use crate::train::networks::Actor;
use tch::Tensor;
use crate::train::stats::StatsReporter;
use crate::train::trajectory::Trajectory;

/// Where a behavior's training stands while its algorithm takes a trajectory or updates, and
/// where the algorithm reports.
pub struct TrainerContext<'a> {
    pub behavior: &'a str,
    /// Agent steps ingested before the trajectory being taken.
    pub step: u64,
    /// The statistics of the behavior's summaries.
    pub stats: &'a mut StatsReporter,
    /// Set by the algorithm when its weights are no longer finite (they are then not saved).
    pub diverged: &'a mut bool,
}

impl TrainerContext<'_> {
    /// The error for numbers from the environment that training cannot hold.
    pub fn overflow(&self, agent: i32, what: String, detail: String) -> TrainError {
        TrainError::Overflow { behavior: self.behavior.into(), agent, step: self.step, what, detail }
    }

    /// The error for an update that went wrong before it changed the weights.
    pub fn divergence(&self, what: &str, learning_rate: f64) -> TrainError {
        TrainError::Diverged { behavior: self.behavior.into(), step: self.step, what: what.into(), learning_rate }
    }

    /// The error for weights or outputs that are no longer finite; the trainer is marked
    /// diverged.
    pub fn diverge(&mut self, what: &str, learning_rate: f64) -> TrainError {
        *self.diverged = true;
        self.divergence(what, learning_rate)
    }
}

/// A trajectory's observations as tensors, one per observation: its steps' rows, then the
/// observation after the last step (`steps + 1` rows).
pub fn trajectory_observations(t: &Trajectory, sizes: &[usize]) -> Vec<Tensor> {
    let rows = t.steps.len() as i64 + 1;
    sizes
        .iter()
        .enumerate()
        .map(|(i, size)| {
            let mut data: Vec<f32> = t.steps.iter().flat_map(|s| s.obs[i].iter().copied()).collect();
            data.extend_from_slice(&t.next_obs[i]);
            Tensor::from_slice(&data).reshape([rows, *size as i64])
        })
        .collect()
}

/// Updates the actor's and the critic's observation normalisers with a trajectory's steps
/// (`observations`: its rows, the steps' first; `critic` updates the critic's); an observation
/// whose square would take a normaliser out of float32 is an error naming it (the normalisers
/// are left as they were).
pub fn update_normalizers(actor: &mut Actor, critic: impl FnOnce(&[Tensor]) -> Result<(), usize>, observations: &[Tensor], t: &Trajectory, context: &TrainerContext) -> Result<(), TrainError> {
    let steps: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, 0, t.steps.len() as i64)).collect();
    if let Err(k) = actor.update_normalizers(&steps).and_then(|()| critic(&steps)) {
        let largest = t.steps.iter().flat_map(|s| s.obs[k].iter()).fold(0.0f32, |m, v| if v.abs() > m.abs() { *v } else { m });
        return Err(context.overflow(t.agent.1, format!("observation {k}"), format!("holds {largest:e}, whose square overflows the observation normaliser (normalize: true)")));
    }
    Ok(())
}

/// What a checkpoint keeps of an algorithm.
pub struct AlgorithmState {
    /// Its networks' variables, its optimizers' moments and whatever else it needs to resume.
    pub tensors: Weights,
    /// Its (first) optimizer's step count and constants.
    pub optimizer: AdamState,
    /// What else it needs to resume exactly (counters), recorded in the checkpoint's
    /// description.
    pub record: Option<serde_json::Value>,
}

/// A trainer type, for one behavior. It is `Send`: with `threaded: true` its updates run on a
/// thread of their own (`train::session::overlap`).
pub trait Algorithm: Send {
    /// Its `trainer_type` in the configuration (recorded in checkpoints).
    fn trainer_type(&self) -> &'static str;

    /// The network that acts, and is exported.
    fn actor(&self) -> &Actor;

    /// The store the actor's variables live in, at its root (other networks may live there
    /// under prefixes of their own); `threaded: true` copies the actor from it.
    fn actor_store(&self) -> &tch::nn::VarStore;

    /// The actor's weights, as exports and self-play's ghosts read them.
    fn actor_weights(&self) -> Weights;

    /// The learning rate at `step` (named in divergence errors).
    fn learning_rate(&self, step: u64) -> f64;

    /// Takes one trajectory: normalisers, value estimates and what the update needs of it.
    fn take_trajectory(&mut self, trajectory: Trajectory, context: &mut TrainerContext) -> Result<(), TrainError>;

    /// Whether [`Algorithm::maybe_update`] would update at `step` (`threaded: true` sends the
    /// algorithm to its update thread only then).
    fn update_due(&self, step: u64) -> bool;

    /// Updates when it is time to; returns whether an update ran.
    fn maybe_update(&mut self, context: &mut TrainerContext) -> Result<bool, TrainError>;

    /// Training has reached `max_steps`: experience kept for updates that will not come may
    /// go (PPO's buffer), and no more is taken; what checkpoints keep stays (SAC's replay
    /// buffer, for a resume with a higher `max_steps`).
    fn training_over(&mut self);

    /// The environments are reset under the episodes in progress: forgets what it kept of
    /// them (a recurrent critic's memories).
    fn end_episodes(&mut self, ended: crate::train::trajectory::EndedEpisodes);

    /// What a checkpoint holds of it.
    fn state(&self) -> AlgorithmState;

    /// The experience it keeps between updates that a checkpoint should keep too (SAC's replay
    /// buffer with `save_replay_buffer`); None when there is none to keep.
    fn experience_to_keep(&self) -> Option<Weights> {
        None
    }

    /// Takes back experience [`Algorithm::experience_to_keep`] gave; returns the rows taken.
    fn restore_experience(&mut self, _experience: &Weights) -> Result<usize, String> {
        Err(format!("{} keeps no experience in its checkpoints", self.trainer_type()))
    }

    /// Loads a checkpoint's tensors (and, when `resume`, its optimizer state and `record`);
    /// returns the variables the checkpoint had no tensor for (they keep their fresh values).
    fn restore(&mut self, tensors: &Weights, optimizer: &AdamState, record: Option<&serde_json::Value>, resume: bool) -> Result<Vec<String>, TrainError>;
}
