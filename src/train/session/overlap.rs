//! `threaded: true` (0.28's trainer setting): a behavior's updates run on a thread of their
//! own while the environments keep stepping. As in 0.28, the trajectories that complete during
//! an update wait (at most [`MAX_QUEUED_TRAJECTORIES`], then the environments wait too) and are
//! taken after it, with the updated networks, in the order they came; steps are counted, and
//! summaries and checkpoints fall due, as they are taken.
//!
//! Unlike 0.28, which acts with the very network its update thread is changing (so an action
//! may come from half-updated weights), the agents act meanwhile with a copy of the actor as
//! it was when the update began ([`ActingCopy`]), and take the new one when the update is back.

use crate::policy::PolicyDescription;
use crate::train::algorithm::{Algorithm, TrainerContext};
use crate::train::error::TrainError;
use crate::train::networks::Actor;
use crate::train::stats::StatsReporter;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tch::{nn, Device};

/// Trajectories that may wait for an update before the environments wait for it too (0.28's
/// trajectory queue length for threaded trainers).
pub const MAX_QUEUED_TRAJECTORIES: usize = 20;

/// An update for the update thread: the algorithm, with what its update reads and reports to.
struct Job {
    algorithm: Box<dyn Algorithm>,
    behavior: String,
    step: u64,
    stats: StatsReporter,
    diverged: bool,
}

/// An update back from the update thread.
pub struct Finished {
    pub algorithm: Box<dyn Algorithm>,
    /// What the update reported (losses, learning rate), to add to the behavior's statistics.
    pub stats: StatsReporter,
    pub diverged: bool,
    /// Whether an update ran, or why it failed.
    pub result: Result<bool, TrainError>,
    /// How long the update thread worked on it.
    pub took: std::time::Duration,
}

/// One behavior's update thread.
pub struct UpdateThread {
    behavior: String,
    jobs: Option<mpsc::Sender<Job>>,
    finished: mpsc::Receiver<Finished>,
    thread: Option<JoinHandle<()>>,
}

impl UpdateThread {
    /// Starts the thread (named `update <behavior>`); it waits for updates.
    pub fn start(behavior: &str) -> Result<Self, TrainError> {
        let (jobs, job_receiver) = mpsc::channel::<Job>();
        let (finished_sender, finished) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("update {behavior}"))
            .spawn(move || {
                for mut job in job_receiver {
                    let started = std::time::Instant::now();
                    let mut context = TrainerContext { behavior: &job.behavior, step: job.step, stats: &mut job.stats, diverged: &mut job.diverged };
                    let result = job.algorithm.maybe_update(&mut context);
                    let done = Finished { algorithm: job.algorithm, stats: job.stats, diverged: job.diverged, result, took: started.elapsed() };
                    if finished_sender.send(done).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| TrainError::UpdateThread { behavior: behavior.into(), detail: format!("it could not be started: {e}") })?;
        Ok(Self { behavior: behavior.into(), jobs: Some(jobs), finished, thread: Some(thread) })
    }

    /// Sends the algorithm away to update at `step`; `stats` is where the update reports.
    pub fn send(&self, algorithm: Box<dyn Algorithm>, step: u64, stats: StatsReporter, diverged: bool) -> Result<(), TrainError> {
        let job = Job { algorithm, behavior: self.behavior.clone(), step, stats, diverged };
        self.jobs.as_ref().and_then(|jobs| jobs.send(job).ok()).ok_or_else(|| self.died())
    }

    /// The update, if it is back.
    pub fn try_finished(&self) -> Result<Option<Finished>, TrainError> {
        match self.finished.try_recv() {
            Ok(done) => Ok(Some(done)),
            Err(mpsc::TryRecvError::Empty) => Ok(None),
            Err(mpsc::TryRecvError::Disconnected) => Err(self.died()),
        }
    }

    /// Waits for the update.
    pub fn wait(&self) -> Result<Finished, TrainError> {
        self.finished.recv().map_err(|_| self.died())
    }

    /// The error for a thread that ended with an update in hand (libtorch failed inside it).
    fn died(&self) -> TrainError {
        TrainError::UpdateThread { behavior: self.behavior.clone(), detail: "it ended during an update (see the message above); the networks it held are lost".into() }
    }
}

impl Drop for UpdateThread {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The actor the agents act with while an update runs: a copy, in a store of its own, of the
/// actor as it was when the update began.
pub struct ActingCopy {
    store: nn::VarStore,
    pub actor: Actor,
}

impl ActingCopy {
    pub fn new(description: &PolicyDescription) -> Self {
        let store = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&store.root(), description);
        Self { store, actor }
    }

    /// The copy's weights, as [`Algorithm::actor_weights`] gives them.
    pub fn weights(&self) -> crate::policy::Weights {
        crate::train::networks::actor_weights(&self.store)
    }

    /// Copies the actor's variables from `source`, the store the training actor lives in
    /// (at its root, by the same names; the store's other networks are not read).
    pub fn copy_from(&mut self, source: &nn::VarStore) {
        let sources = source.variables();
        tch::no_grad(|| {
            for (name, mut variable) in self.store.variables() {
                if let Some(s) = sources.get(&name) {
                    variable.copy_(s);
                }
            }
        });
    }
}

/// A threaded trainer's side of the overlap: its update thread, the copy of the actor that
/// acts while an update runs, and what waits for the update to come back.
pub struct Overlap {
    pub thread: UpdateThread,
    pub acting: ActingCopy,
    /// Trajectories completed during the update, in order.
    pub queued: Vec<crate::train::trajectory::Trajectory>,
    /// The learning rate when the update began (named if acting diverges meanwhile).
    pub learning_rate: f64,
    /// Episodes in progress that ended during the update (environments reset or replaced
    /// under them): the algorithm forgets them once back (after the queued trajectories).
    pub episodes_ended: Vec<crate::train::trajectory::EndedEpisodes>,
}

impl Overlap {
    pub fn new(behavior: &str, description: &PolicyDescription) -> Result<Self, TrainError> {
        Ok(Self { thread: UpdateThread::start(behavior)?, acting: ActingCopy::new(description), queued: vec![], learning_rate: 0.0, episodes_ended: vec![] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ContinuousHead, POLICY_FORMAT_VERSION};
    use crate::spec::ActionSpec;
    use crate::train::networks::Critic;
    use tch::{Kind, Tensor};

    fn deterministic_actions(actor: &Actor, observations: &Tensor) -> Vec<f32> {
        tch::no_grad(|| Vec::<f32>::try_from(actor.forward(&[observations.shallow_clone()], None, None, None, true).continuous.flatten(0, -1)).unwrap())
    }

    /// The copy acts as the training actor did when it was taken, whatever the training
    /// actor's store holds besides it, and keeps doing so while the training actor changes.
    #[test]
    fn the_acting_copy_is_the_actor_as_it_was() {
        tch::manual_seed(5);
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![3]],
            action_spec: ActionSpec::continuous(2),
            hidden_units: 8,
            num_layers: 2,
            normalize: true,
            memory_size: 0,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: ContinuousHead::default(),
        };
        let store = nn::VarStore::new(Device::Cpu);
        let training = Actor::new(&store.root(), &description);
        let _critic = Critic::new(&(store.root() / "critic"), &description);
        let mut copy = ActingCopy::new(&description);
        let observations = Tensor::randn([5, 3], (Kind::Float, Device::Cpu));
        assert_ne!(deterministic_actions(&copy.actor, &observations), deterministic_actions(&training, &observations));
        copy.copy_from(&store);
        let before = deterministic_actions(&training, &observations);
        assert_eq!(deterministic_actions(&copy.actor, &observations), before);
        assert_eq!(copy.weights().0.len(), crate::train::networks::actor_weights(&store).0.len());
        // An update changes the training actor, not the copy.
        tch::no_grad(|| store.variables().values_mut().filter(|v| v.requires_grad()).for_each(|v| {
            let _ = v.g_add_scalar_(0.1);
        }));
        assert_ne!(deterministic_actions(&training, &observations), before);
        assert_eq!(deterministic_actions(&copy.actor, &observations), before);
    }
}
