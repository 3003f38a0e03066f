//! Random network distillation (RND), as 0.28 builds and trains it (reward-signals.md §4): a
//! fixed, randomly drawn target network and a predictor of it, both `NetworkBody`s with the
//! signal's settings. The reward is the predictor's squared error ‖p(s) − t(s)‖² (no ½, no
//! cap, no normalisation); the loss is its mean, and only the predictor trains.
//!
//! Variables are named `reward_signals.rnd.target._encoder.*` and
//! `reward_signals.rnd.predictor._encoder.*` (0.28's `Module:RND-target` and `Module:RND-pred`).

use super::{signal_description, signal_root, RewardProvider, SignalBatch};
use crate::policy::PolicyDescription;
use crate::train::config::{RewardSignal, RewardSignalKind};
use crate::train::networks::adam::Adam;
use crate::train::networks::{backward, Body};
use tch::{nn, Device, Kind, Tensor};

/// The RND signal's networks and the predictor's optimizer.
pub struct Rnd {
    /// The target's variables (never trained) and the predictor's.
    target_store: nn::VarStore,
    predictor_store: nn::VarStore,
    target: Body,
    predictor: Body,
    adam: Adam,
    learning_rate: f64,
}

impl Rnd {
    /// The networks for a behavior of `description` with `signal`'s settings: the target is
    /// drawn first, then the predictor (0.28's order).
    pub fn new(description: &PolicyDescription, signal: &RewardSignal) -> Self {
        let d = signal_description(description, signal);
        let mut target_store = nn::VarStore::new(Device::Cpu);
        let target = Body::new(&(signal_root(&target_store, RewardSignalKind::Rnd) / "target" / "_encoder"), &d, 0);
        target_store.freeze();
        let predictor_store = nn::VarStore::new(Device::Cpu);
        let predictor = Body::new(&(signal_root(&predictor_store, RewardSignalKind::Rnd) / "predictor" / "_encoder"), &d, 0);
        let adam = Adam::new(&predictor_store);
        Self { target_store, predictor_store, target, predictor, adam, learning_rate: signal.learning_rate.unwrap_or(1e-4) }
    }

    /// ‖p(s) − t(s)‖² per row `[n]`.
    fn error(&self, batch: &SignalBatch) -> Tensor {
        let target = tch::no_grad(|| self.target.forward(batch.obs, None, None).0);
        let predicted = self.predictor.forward(batch.obs, None, None).0;
        (predicted - target).pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float)
    }
}

impl RewardProvider for Rnd {
    fn evaluate(&self, batch: &SignalBatch) -> Tensor {
        tch::no_grad(|| self.error(batch))
    }

    fn update(&mut self, batch: &SignalBatch) -> Vec<(&'static str, f32)> {
        let loss = batch.masked_mean(&self.error(batch));
        self.adam.zero_grad();
        backward(&loss);
        self.adam.step(self.learning_rate);
        vec![("Losses/RND Loss", loss.double_value(&[]) as f32)]
    }

    /// Both networks take the same data, so their normalisers stay equal (as in 0.28).
    fn update_normalizers(&mut self, observations: &[Tensor]) {
        let _ = self.target.update_normalizers(observations);
        let _ = self.predictor.update_normalizers(observations);
    }

    fn stores(&self) -> Vec<&nn::VarStore> {
        vec![&self.target_store, &self.predictor_store]
    }

    fn adam(&self) -> &Adam {
        &self.adam
    }

    fn adam_mut(&mut self) -> &mut Adam {
        &mut self.adam
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ContinuousHead, POLICY_FORMAT_VERSION};
    use crate::spec::ActionSpec;
    use crate::train::config::RunOptions;

    /// upstream `test_reward_decreases` for RND: the reward of a row the predictor trains on
    /// falls; the target does not move.
    #[test]
    fn the_reward_of_a_trained_row_falls_and_the_target_stays() {
        tch::manual_seed(0);
        let options = RunOptions::from_yaml("behaviors:\n  B:\n    reward_signals:\n      rnd: {learning_rate: 0.005, network_settings: {hidden_units: 32}}\n", "t.yaml").unwrap();
        let signal = options.behaviors["B"].reward_signals["rnd"].clone();
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![10], vec![3]],
            action_spec: ActionSpec::discrete(&[2]),
            hidden_units: 16,
            num_layers: 1,
            normalize: false,
            memory_size: 0,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: ContinuousHead::default(),
        };
        let mut rnd = Rnd::new(&description, &signal);
        let obs = vec![Tensor::randn([5, 10], (Kind::Float, Device::Cpu)), Tensor::randn([5, 3], (Kind::Float, Device::Cpu))];
        let (continuous, discrete) = (Tensor::zeros([5, 0], (Kind::Float, Device::Cpu)), Tensor::zeros([5, 1], (Kind::Int64, Device::Cpu)));
        let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &continuous, discrete: &discrete, valid: None, done: None };
        let target_before = crate::train::networks::variables(&rnd.target_store);
        let first = Vec::<f32>::try_from(rnd.evaluate(&batch)).unwrap()[0];
        for _ in 0..100 {
            rnd.update(&batch);
        }
        let last = Vec::<f32>::try_from(rnd.evaluate(&batch)).unwrap()[0];
        assert!(first > 0.0 && last < first * 0.5, "{first} -> {last}");
        assert_eq!(crate::train::networks::variables(&rnd.target_store), target_before);
    }
}
