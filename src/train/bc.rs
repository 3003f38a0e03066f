//! Behavioral cloning (reward-signals.md §6): the actor imitates demonstrations with an Adam of
//! its own (learning rate = the trainer's × `strength`, decaying linearly to 1e-10 over `steps`
//! when `steps` > 0), `num_epoch` passes of `batch_size`-row minibatches per call, the loss the
//! mean squared error of the continuous actions plus the mean cross-entropy of the branches'.
//!
//! Where 0.28 is wrong and we are not (§11): 0.28's PPO compares its *raw* Gaussian sample with
//! the demonstration's environment action, while the environment receives a third of the
//! clipped sample, so a cloned policy acts at a third of the demonstrated strength; here the
//! sample is compared as the environment receives it (clip(·, −3, 3) / 3; SAC's tanh, as in 0.28).
//! The rows pair each observation with the action taken from it ([`crate::demo::Pairing`]),
//! where 0.28 pairs it with the previous decision's. The optimizer's state is checkpointed.

use crate::checkpoint::AdamState;
use crate::train::config::Schedule;
use crate::demo::DemoRow;
use crate::train::demonstrations::DemoTensors;
use crate::train::config::BehavioralCloningSettings;
use crate::train::networks::adam::Adam;
use crate::train::networks::Actor;
use crate::train::schedule::DecayedValue;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::{nn, Kind, Tensor};

/// Prefix of the cloning optimizer's moments in a checkpoint.
pub const BC_PREFIX: &str = "behavioral_cloning.";
/// Below this learning rate cloning stops (0.28's floor).
const LEARNING_RATE_FLOOR: f64 = 1e-10;

/// Behavioral cloning of one behavior's actor.
pub struct BehavioralCloning {
    settings: BehavioralCloningSettings,
    demonstrations: DemoTensors,
    adam: Adam,
    learning_rate: DecayedValue,
    /// The rate of the next update (0.28 applies a new rate from the update after).
    current_learning_rate: f64,
    rng: rand_chacha::ChaCha8Rng,
}

impl BehavioralCloning {
    /// Cloning of the actor whose variables are those of `store` that `is_actor` takes, on
    /// `rows` of observations of `observation_sizes` floats.
    pub fn new(store: &nn::VarStore, is_actor: impl Fn(&str) -> bool, rows: &[DemoRow], observation_sizes: &[usize], settings: &BehavioralCloningSettings, trainer_learning_rate: f64, seed: u64) -> Self {
        let initial = trainer_learning_rate * settings.strength;
        let schedule = if settings.steps > 0 { Schedule::Linear } else { Schedule::Constant };
        Self {
            settings: settings.clone(),
            demonstrations: DemoTensors::new(rows, observation_sizes),
            adam: Adam::over(store, BC_PREFIX, is_actor),
            learning_rate: DecayedValue { schedule, initial, min: LEARNING_RATE_FLOOR, max_steps: settings.steps },
            current_learning_rate: initial,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The cloning loss of the demonstration rows `index`.
    fn loss(&self, actor: &Actor, index: &Tensor) -> Tensor {
        let observations: Vec<Tensor> = self.demonstrations.observations.iter().map(|o| o.index_select(0, index)).collect();
        let (continuous, log_probabilities) = actor.imitation_outputs(&observations);
        let mut loss = Tensor::zeros([], (Kind::Float, tch::Device::Cpu));
        if let Some(continuous) = continuous {
            loss += (continuous - self.demonstrations.continuous.index_select(0, index)).pow_tensor_scalar(2).mean(Kind::Float);
        }
        if !log_probabilities.is_empty() {
            let choices = self.demonstrations.discrete.index_select(0, index);
            let per_branch: Vec<Tensor> = log_probabilities
                .iter()
                .enumerate()
                .map(|(b, log_p)| -log_p.log_softmax(1, Kind::Float).gather(1, &choices.narrow(1, b as i64, 1), false).squeeze_dim(1))
                .collect();
            loss += Tensor::stack(&per_branch, 1).mean(Kind::Float);
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
        let batch = self.settings.batch_size.min(self.demonstrations.rows).max(1);
        let possible = self.demonstrations.rows / batch;
        let limit = (self.settings.samples_per_update as usize) / batch;
        let batches = if limit == 0 { possible } else { possible.min(limit) };
        let mut losses = vec![];
        let mut order: Vec<i64> = (0..self.demonstrations.rows as i64).collect();
        for _ in 0..self.settings.num_epoch {
            order.shuffle(&mut self.rng);
            for chunk in order.chunks_exact(batch).take(batches) {
                let loss = self.loss(actor, &Tensor::from_slice(chunk));
                self.adam.zero_grad();
                loss.backward();
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
