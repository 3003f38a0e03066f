//! Behavioral cloning (reward-signals.md §6): the actor imitates demonstrations with an Adam of
//! its own (learning rate = the trainer's × `strength`, decaying linearly to 1e-10 over `steps`
//! when `steps` > 0), `num_epoch` passes of minibatches per call, the loss the mean squared
//! error of the continuous actions plus the mean cross-entropy of the branches'. A recurrent
//! actor reads the demonstrations as 0.28 does: each episode cut into sequences of
//! `sequence_length` rows (the last padded at the end), each sequence from zero memories,
//! `batch_size / sequence_length` sequences per minibatch.
//!
//! Where 0.28 is wrong and we are not (§11): 0.28's PPO compares its *raw* Gaussian sample with
//! the demonstration's environment action, while the environment receives a third of the
//! clipped sample, so a cloned policy acts at a third of the demonstrated strength; here the
//! sample is compared as the environment receives it (clip(·, −3, 3) / 3; SAC's tanh, as in 0.28).
//! Padding rows count in no loss (0.28 trains on them as zero observations with action 0). The
//! rows pair each observation with the action taken from it ([`crate::demo::Pairing`]), where
//! 0.28 pairs it with the previous decision's. `--compat-0-28` runs do all three as 0.28 does.
//! The optimizer's state is checkpointed.

use crate::checkpoint::AdamState;
use crate::demo::DemoRow;
use crate::policy::PolicyDescription;
use crate::train::config::{BehavioralCloningSettings, Schedule, TrainerSettings};
use crate::train::demonstrations::DemoTensors;
use crate::train::networks::adam::Adam;
use crate::train::networks::{backward, Actor};
use crate::train::schedule::DecayedValue;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::{nn, Kind, Tensor};

/// Prefix of the cloning optimizer's moments in a checkpoint.
pub const BC_PREFIX: &str = "behavioral_cloning.";
/// Below this learning rate cloning stops (0.28's floor).
const LEARNING_RATE_FLOOR: f64 = 1e-10;

/// The demonstrations as cloning's minibatches take them: each episode cut into sequences of
/// `length` rows from its start, the last one padded at the end with zero rows (action 0); a
/// feed-forward actor's sequences are single rows.
struct Sequences {
    /// `count × length` rows.
    tensors: DemoTensors,
    /// `[count × length]`: 1 for a demonstration's row, 0 for padding.
    real: Tensor,
    count: usize,
    length: usize,
}

impl Sequences {
    fn new(rows: &[DemoRow], observation_sizes: &[usize], length: usize) -> Self {
        let length = length.max(1);
        let padding = rows.first().map(|row| DemoRow {
            observations: row.observations.iter().map(|o| vec![0.0; o.len()]).collect(),
            continuous: vec![0.0; row.continuous.len()],
            discrete: vec![0; row.discrete.len()],
            reward: 0.0,
            done: false,
            episode_ends: false,
        });
        let mut laid_out = Vec::with_capacity(rows.len());
        let mut real = Vec::with_capacity(rows.len());
        for episode in rows.split_inclusive(|row| row.episode_ends) {
            for sequence in episode.chunks(length) {
                laid_out.extend_from_slice(sequence);
                real.extend(std::iter::repeat_n(1.0f32, sequence.len()));
                let missing = length - sequence.len();
                laid_out.extend(std::iter::repeat_n(padding.clone().expect("a sequence has a first row"), missing));
                real.extend(std::iter::repeat_n(0.0f32, missing));
            }
        }
        Self { count: laid_out.len() / length, tensors: DemoTensors::new(&laid_out, observation_sizes), real: Tensor::from_slice(&real), length }
    }

    /// The rows of the sequences `chosen`, in order.
    fn rows_of(&self, chosen: &[i64]) -> Tensor {
        let length = self.length as i64;
        Tensor::from_slice(&chosen.iter().flat_map(|s| s * length..(s + 1) * length).collect::<Vec<i64>>())
    }
}

/// Behavioral cloning of one behavior's actor.
pub struct BehavioralCloning {
    settings: BehavioralCloningSettings,
    demonstrations: Sequences,
    /// The width of the actor's memories (0 for a feed-forward actor).
    memory_size: i64,
    /// Trains as 0.28 does (`--compat-0-28`): PPO's raw samples, padding rows in the loss.
    compat_0_28: bool,
    adam: Adam,
    learning_rate: DecayedValue,
    /// The rate of the next update (0.28 applies a new rate from the update after).
    current_learning_rate: f64,
    rng: rand_chacha::ChaCha8Rng,
}

impl BehavioralCloning {
    /// Cloning of the actor described by `description`, whose variables are those of `store`
    /// that `is_actor` takes, on the demonstration `rows`, as the trainer's `settings` ask
    /// (None without a `behavioral_cloning` block).
    pub fn for_trainer(store: &nn::VarStore, is_actor: impl Fn(&str) -> bool, rows: Option<&[DemoRow]>, description: &PolicyDescription, settings: &TrainerSettings, seed: u64) -> Option<Self> {
        let (rows, cloning) = rows.zip(settings.behavioral_cloning.as_ref())?;
        let trainer_learning_rate = settings.hyperparameters.learning_rate;
        let initial = trainer_learning_rate * cloning.strength;
        let schedule = if cloning.steps > 0 { Schedule::Linear } else { Schedule::Constant };
        let sequence_length = settings.network_settings.memory.map_or(1, |m| m.sequence_length);
        Some(Self {
            settings: cloning.clone(),
            demonstrations: Sequences::new(rows, &description.observation_sizes(), sequence_length),
            memory_size: description.memory_size as i64,
            compat_0_28: settings.compat_0_28,
            adam: Adam::over(store, BC_PREFIX, is_actor),
            learning_rate: DecayedValue { schedule, initial, min: LEARNING_RATE_FLOOR, max_steps: cloning.steps },
            current_learning_rate: initial,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        })
    }

    /// The cloning loss of the demonstration sequences `chosen`.
    fn loss(&self, actor: &Actor, chosen: &[i64]) -> Tensor {
        let demonstrations = &self.demonstrations.tensors;
        let index = self.demonstrations.rows_of(chosen);
        let observations: Vec<Tensor> = demonstrations.observations.iter().map(|o| o.index_select(0, &index)).collect();
        let memories = (self.memory_size > 0).then(|| Tensor::zeros([1, chosen.len() as i64, self.memory_size], (Kind::Float, tch::Device::Cpu)));
        let (continuous, log_probabilities) = actor.imitation_outputs(&observations, memories.as_ref(), self.compat_0_28);
        let real = (self.demonstrations.length > 1 && !self.compat_0_28).then(|| self.demonstrations.real.index_select(0, &index));
        let mean_over_rows = |per_row: Tensor| match &real {
            Some(real) => (per_row * real).sum(Kind::Float) / real.sum(Kind::Float).clamp_min(1.0),
            None => per_row.mean(Kind::Float),
        };
        let mut loss = Tensor::zeros([], (Kind::Float, tch::Device::Cpu));
        if let Some(continuous) = continuous {
            let squared = (continuous - demonstrations.continuous.index_select(0, &index)).pow_tensor_scalar(2);
            loss += mean_over_rows(squared.mean_dim(1, false, Kind::Float));
        }
        if !log_probabilities.is_empty() {
            let choices = demonstrations.discrete.index_select(0, &index);
            let per_branch: Vec<Tensor> = log_probabilities
                .iter()
                .enumerate()
                .map(|(b, log_p)| -log_p.log_softmax(1, Kind::Float).gather(1, &choices.narrow(1, b as i64, 1), false).squeeze_dim(1))
                .collect();
            loss += mean_over_rows(Tensor::stack(&per_branch, 1).mean_dim(1, false, Kind::Float));
        }
        loss
    }

    /// One cloning update at agent step `step` (0.28: once per PPO update, after its epochs);
    /// returns the mean loss of its minibatches (0 once the learning rate has decayed away, as
    /// 0.28 reports it).
    pub fn update(&mut self, actor: &Actor, step: u64) -> f32 {
        let next = self.learning_rate.value(step);
        if self.current_learning_rate <= LEARNING_RATE_FLOOR {
            return 0.0;
        }
        // 0.28's arithmetic, in rows of the laid-out demonstrations (padding included):
        // `batch_size / sequence_length` sequences a minibatch, as many minibatches as the
        // demonstrations (or `samples_per_update`) hold.
        let length = self.demonstrations.length;
        let rows = self.demonstrations.count * length;
        let sequences = (self.settings.batch_size.min(rows) / length).max(1);
        let possible = rows / sequences;
        let limit = (self.settings.samples_per_update as usize) / sequences;
        let batches = if limit == 0 { possible } else { possible.min(limit) } / length;
        let mut losses = vec![];
        let mut order: Vec<i64> = (0..self.demonstrations.count as i64).collect();
        for _ in 0..self.settings.num_epoch {
            order.shuffle(&mut self.rng);
            for chosen in order.chunks_exact(sequences).take(batches) {
                let loss = self.loss(actor, chosen);
                self.adam.zero_grad();
                backward(&loss);
                self.adam.step(self.current_learning_rate);
                losses.push(loss.double_value(&[]) as f32);
            }
        }
        self.current_learning_rate = next;
        if losses.is_empty() { 0.0 } else { losses.iter().sum::<f32>() / losses.len() as f32 }
    }

    /// The optimizer's moments (named under [`BC_PREFIX`]) and its step count and rate.
    pub fn state(&self) -> (crate::policy::Weights, serde_json::Value) {
        (self.adam.moments(), serde_json::json!({ "adam": self.adam.state(), "learning_rate": self.current_learning_rate }))
    }

    /// Takes back what [`Self::state`] gave.
    pub fn restore(&mut self, tensors: &crate::policy::Weights, record: Option<&serde_json::Value>) {
        let Some(record) = record else {
            log::warn!("the checkpoint has no behavioral cloning state; its optimizer starts fresh");
            return;
        };
        if let Some(adam) = record.get("adam").and_then(|a| serde_json::from_value::<AdamState>(a.clone()).ok()) {
            self.adam.restore(&adam, tensors);
        }
        if let Some(rate) = record.get("learning_rate").and_then(serde_json::Value::as_f64) {
            self.current_learning_rate = rate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: f32, episode_ends: bool) -> DemoRow {
        DemoRow { observations: vec![vec![value, -value]], continuous: vec![value], discrete: vec![1], reward: 0.0, done: episode_ends, episode_ends }
    }

    /// Episodes of 3 and 5 rows in sequences of 4: each episode from its start, its last
    /// sequence padded at the end with zero rows of action 0, never two episodes in one.
    #[test]
    fn demonstrations_are_cut_into_padded_sequences_per_episode() {
        let rows: Vec<DemoRow> = (1..=8).map(|k| row(k as f32, k == 3 || k == 8)).collect();
        let sequences = Sequences::new(&rows, &[2], 4);
        assert_eq!((sequences.count, sequences.length), (3, 4));
        let values: Vec<f32> = Vec::try_from(sequences.tensors.continuous.reshape([-1])).unwrap();
        assert_eq!(values, [1., 2., 3., 0., 4., 5., 6., 7., 8., 0., 0., 0.]);
        let real: Vec<f32> = Vec::try_from(&sequences.real).unwrap();
        assert_eq!(real, [1., 1., 1., 0., 1., 1., 1., 1., 1., 0., 0., 0.]);
        let discrete: Vec<i64> = Vec::try_from(sequences.tensors.discrete.reshape([-1])).unwrap();
        assert_eq!(discrete, [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0]);
        let observations: Vec<f32> = Vec::try_from(sequences.tensors.observations[0].narrow(0, 8, 2).reshape([-1])).unwrap();
        assert_eq!(observations, [8., -8., 0., 0.]);
        let picked: Vec<i64> = Vec::try_from(&sequences.rows_of(&[2, 0])).unwrap();
        assert_eq!(picked, [8, 9, 10, 11, 0, 1, 2, 3]);
        let single = Sequences::new(&rows, &[2], 1);
        assert_eq!((single.count, single.tensors.rows), (8, 8), "a feed-forward actor's rows, unpadded");
    }
}
