//! Curiosity (the intrinsic curiosity module, ICM), as 0.28 builds and trains it
//! (reward-signals.md §3): a state encoder φ (a `NetworkBody` with the signal's settings), an
//! inverse model predicting the action from φ(s) and φ(s′), and a forward model predicting
//! φ(s′) from φ(s) and the action. The reward is the forward model's error
//! ½‖f(φ(s), a) − φ(s′)‖², capped so that strength × reward ≤ 1, and 0 until the first update.
//!
//! Variables are named as 0.28's `CuriosityNetwork` names them, under `reward_signals.curiosity.`.

use super::{flatten_actions, signal_description, signal_root, xavier_linear, RewardProvider, SignalBatch};
use crate::policy::PolicyDescription;
use crate::train::config::{RewardSignal, RewardSignalKind};
use crate::train::networks::adam::Adam;
use crate::train::networks::{backward, kaiming_linear, Body};
use tch::{nn, nn::Module, Device, Kind, Tensor};

/// Width of the inverse and forward models' hidden layers (0.28's constant).
const MODEL_WIDTH: i64 = 256;
/// The forward loss's share of the loss (0.28's `beta`), the inverse loss taking the rest.
const FORWARD_SHARE: f64 = 0.2;
/// 0.28's `loss_multiplier`.
const LOSS_MULTIPLIER: f64 = 10.0;
/// Added to predicted probabilities before their logarithm.
const EPSILON: f64 = 1e-10;

/// The curiosity signal's networks and optimizer.
pub struct Curiosity {
    store: nn::VarStore,
    encoder: Body,
    inverse_hidden: nn::Linear,
    continuous_prediction: Option<nn::Linear>,
    discrete_prediction: Option<nn::Linear>,
    branches: Vec<i64>,
    forward_hidden: nn::Linear,
    forward_output: nn::Linear,
    adam: Adam,
    learning_rate: f64,
    /// Rewards are 1 / strength at most (so strength × reward ≤ 1).
    reward_cap: f64,
    /// Rewards are 0 until the first update (0.28's `_has_updated_once`).
    updated_once: bool,
}

/// What the two models make of a batch.
struct Predictions {
    /// φ(s′) `[n, h]`.
    next_features: Tensor,
    /// f(φ(s), a) `[n, h]`.
    predicted_next_features: Tensor,
    /// The inverse model's continuous actions `[n, c]`, and its probabilities of every branch's
    /// choices side by side `[n, Σ branches]`.
    predicted_continuous: Option<Tensor>,
    predicted_discrete: Option<Tensor>,
}

impl Curiosity {
    /// The networks for a behavior of `description` with `signal`'s settings.
    pub fn new(description: &PolicyDescription, signal: &RewardSignal) -> Self {
        let store = nn::VarStore::new(Device::Cpu);
        let root = signal_root(&store, RewardSignalKind::Curiosity);
        let d = signal_description(description, signal);
        let h = d.hidden_units as i64;
        let encoder = Body::new(&(&root / "_state_encoder"), &d, 0);
        let inverse_hidden = kaiming_linear(&root / "inverse_model_action_encoding" / 0 / "seq_layers" / 0, 2 * h, MODEL_WIDTH, 1.0);
        let c = d.action_spec.continuous_size as i64;
        let branches: Vec<i64> = d.action_spec.discrete_branches.iter().map(|b| *b as i64).collect();
        let continuous_prediction = (c > 0).then(|| xavier_linear(&root / "continuous_action_prediction", MODEL_WIDTH, c, 1.0));
        let discrete_prediction = (!branches.is_empty()).then(|| xavier_linear(&root / "discrete_action_prediction", MODEL_WIDTH, branches.iter().sum(), 1.0));
        let actions = c + branches.iter().sum::<i64>();
        let forward_hidden = kaiming_linear(&root / "forward_model_next_state_prediction" / 0 / "seq_layers" / 0, h + actions, MODEL_WIDTH, 1.0);
        let forward_output = xavier_linear(&root / "forward_model_next_state_prediction" / 1, MODEL_WIDTH, h, 1.0);
        let adam = Adam::new(&store);
        Self {
            store,
            encoder,
            inverse_hidden,
            continuous_prediction,
            discrete_prediction,
            branches,
            forward_hidden,
            forward_output,
            adam,
            learning_rate: signal.learning_rate.unwrap_or(3e-4),
            reward_cap: 1.0 / signal.strength,
            updated_once: false,
        }
    }

    fn predict(&self, batch: &SignalBatch) -> Predictions {
        let features = self.encoder.forward(batch.obs, None, None).0;
        let next_features = self.encoder.forward(batch.next_obs, None, None).0;
        let inverse = self.inverse_hidden.forward(&Tensor::cat(&[&features, &next_features], 1)).silu();
        let predicted_continuous = self.continuous_prediction.as_ref().map(|layer| layer.forward(&inverse));
        let predicted_discrete = self.discrete_prediction.as_ref().map(|layer| {
            let logits = layer.forward(&inverse);
            let per_branch: Vec<Tensor> = logits.split_with_sizes(&self.branches, 1).iter().map(|l| l.softmax(1, Kind::Float)).collect();
            Tensor::cat(&per_branch, 1)
        });
        let actions = flatten_actions(batch.continuous, batch.discrete, &self.branches);
        let hidden = self.forward_hidden.forward(&Tensor::cat(&[&features, &actions], 1)).silu();
        let predicted_next_features = self.forward_output.forward(&hidden);
        Predictions { next_features, predicted_next_features, predicted_continuous, predicted_discrete }
    }

    /// ½‖f(φ(s), a) − φ(s′)‖² per row `[n]`.
    fn forward_error(p: &Predictions) -> Tensor {
        (&p.predicted_next_features - &p.next_features).pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float) * 0.5
    }

    /// The inverse model's error per row `[n]`: squared error of the continuous actions plus
    /// the cross-entropy of every branch's choice.
    fn inverse_error(&self, p: &Predictions, batch: &SignalBatch) -> Tensor {
        let n = batch.continuous.size()[0];
        let mut error = Tensor::zeros([n], (Kind::Float, Device::Cpu));
        if let Some(predicted) = &p.predicted_continuous {
            error += (predicted - batch.continuous).pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float);
        }
        if let Some(probabilities) = &p.predicted_discrete {
            let chosen = flatten_actions(&batch.continuous.narrow(1, 0, 0), batch.discrete, &self.branches);
            error -= ((probabilities + EPSILON).log() * chosen).sum_dim_intlist(1, false, Kind::Float);
        }
        error
    }
}

impl RewardProvider for Curiosity {
    fn evaluate(&self, batch: &SignalBatch) -> Tensor {
        if !self.updated_once {
            return Tensor::zeros([batch.continuous.size()[0]], (Kind::Float, Device::Cpu));
        }
        tch::no_grad(|| Self::forward_error(&self.predict(batch)).clamp_max(self.reward_cap))
    }

    fn update(&mut self, batch: &SignalBatch) -> Vec<(&'static str, f32)> {
        let predictions = self.predict(batch);
        let forward_loss = batch.masked_mean(&Self::forward_error(&predictions));
        let inverse_loss = batch.masked_mean(&self.inverse_error(&predictions, batch));
        let loss = (&forward_loss * FORWARD_SHARE + &inverse_loss * (1.0 - FORWARD_SHARE)) * LOSS_MULTIPLIER;
        self.adam.zero_grad();
        backward(&loss);
        self.adam.step(self.learning_rate);
        self.updated_once = true;
        vec![
            ("Losses/Curiosity Forward Loss", forward_loss.double_value(&[]) as f32),
            ("Losses/Curiosity Inverse Loss", inverse_loss.double_value(&[]) as f32),
        ]
    }

    fn update_normalizers(&mut self, observations: &[Tensor]) {
        // An observation beyond float32 leaves the normaliser as it was; the policy's own
        // normaliser reports it.
        let _ = self.encoder.update_normalizers(observations);
    }

    fn stores(&self) -> Vec<&nn::VarStore> {
        vec![&self.store]
    }

    fn adam(&self) -> &Adam {
        &self.adam
    }

    fn adam_mut(&mut self) -> &mut Adam {
        &mut self.adam
    }

    fn flags(&self) -> serde_json::Value {
        serde_json::json!({ "updated_once": self.updated_once })
    }

    fn restore_flags(&mut self, flags: &serde_json::Value) {
        self.updated_once = flags.get("updated_once").and_then(serde_json::Value::as_bool).unwrap_or(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ContinuousHead, POLICY_FORMAT_VERSION};
    use crate::spec::ActionSpec;
    use crate::train::config::RunOptions;

    fn signal() -> RewardSignal {
        let options = RunOptions::from_yaml("behaviors:\n  B:\n    reward_signals:\n      curiosity: {strength: 0.01, learning_rate: 0.01, network_settings: {hidden_units: 32}}\n", "t.yaml").unwrap();
        options.behaviors["B"].reward_signals["curiosity"].clone()
    }

    fn description(action_spec: ActionSpec) -> PolicyDescription {
        PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![10]],
            action_spec,
            hidden_units: 16,
            num_layers: 1,
            normalize: false,
            memory_size: 0,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: ContinuousHead::default(),
        }
    }

    /// Five fixed rows of random observations and actions.
    fn rows(action_spec: &ActionSpec) -> (Vec<Tensor>, Vec<Tensor>, Tensor, Tensor) {
        let obs = vec![Tensor::randn([5, 10], (Kind::Float, Device::Cpu))];
        let next = vec![Tensor::randn([5, 10], (Kind::Float, Device::Cpu))];
        let continuous = Tensor::randn([5, action_spec.continuous_size as i64], (Kind::Float, Device::Cpu));
        let mut discrete = Tensor::zeros([5, 0], (Kind::Int64, Device::Cpu));
        for k in &action_spec.discrete_branches {
            discrete = Tensor::cat(&[discrete, Tensor::randint(*k as i64, [5, 1], (Kind::Int64, Device::Cpu))], 1);
        }
        (obs, next, continuous, discrete)
    }

    /// upstream `test_reward_decreases`: 0 before the first update, then the reward of a row
    /// falls as the module trains on it (continuous, discrete and hybrid actions).
    #[test]
    fn the_reward_of_a_trained_row_falls() {
        for spec in [ActionSpec::continuous(5), ActionSpec::discrete(&[2, 3]), ActionSpec::hybrid(2, &[2])] {
            tch::manual_seed(0);
            let mut curiosity = Curiosity::new(&description(spec.clone()), &signal());
            let (obs, next, continuous, discrete) = rows(&spec);
            let batch = SignalBatch { obs: &obs, next_obs: &next, continuous: &continuous, discrete: &discrete, valid: None, done: None };
            assert_eq!(Vec::<f32>::try_from(curiosity.evaluate(&batch)).unwrap(), vec![0.0; 5]);
            curiosity.update(&batch);
            let first = Vec::<f32>::try_from(curiosity.evaluate(&batch)).unwrap()[0];
            for _ in 0..20 {
                curiosity.update(&batch);
            }
            let last = Vec::<f32>::try_from(curiosity.evaluate(&batch)).unwrap()[0];
            assert!(first > 0.0 && last < first, "{spec}: {first} -> {last}");
        }
    }

    /// upstream `test_continuous_action_prediction` and `test_next_state_prediction`: the inverse
    /// model learns the actions, the forward model the next features.
    #[test]
    fn the_models_learn_what_they_predict() {
        tch::manual_seed(1);
        let spec = ActionSpec::continuous(3);
        let mut curiosity = Curiosity::new(&description(spec.clone()), &signal());
        let (obs, next, continuous, discrete) = rows(&spec);
        let batch = SignalBatch { obs: &obs, next_obs: &next, continuous: &continuous, discrete: &discrete, valid: None, done: None };
        for _ in 0..200 {
            curiosity.update(&batch);
        }
        let predictions = tch::no_grad(|| curiosity.predict(&batch));
        let action_error = (predictions.predicted_continuous.unwrap() - &continuous).pow_tensor_scalar(2).mean(Kind::Float).double_value(&[]);
        let state_error = (&predictions.predicted_next_features - &predictions.next_features).pow_tensor_scalar(2).mean(Kind::Float).double_value(&[]);
        assert!(action_error < 1e-3 && state_error < 1e-3, "action {action_error}, next state {state_error}");
    }

    /// The reward is capped at 1 / strength, and padding rows count in no loss.
    #[test]
    fn rewards_are_capped_and_padding_is_ignored() {
        tch::manual_seed(2);
        let spec = ActionSpec::discrete(&[3]);
        let mut curiosity = Curiosity::new(&description(spec.clone()), &signal());
        curiosity.reward_cap = 1e-6;
        let mut twin = Curiosity::new(&description(spec.clone()), &signal());
        crate::train::networks::load_variables(&twin.store, &crate::train::networks::variables(&curiosity.store));
        let (obs, next, continuous, discrete) = rows(&spec);
        let padding = Tensor::from_slice(&[1.0f32, 1.0, 1.0, 0.0, 0.0]);
        let batch = SignalBatch { obs: &obs, next_obs: &next, continuous: &continuous, discrete: &discrete, valid: Some(&padding), done: None };
        let stats = curiosity.update(&batch);
        assert!(Vec::<f32>::try_from(curiosity.evaluate(&batch)).unwrap().iter().all(|r| *r <= 1e-6));
        let real: Vec<Tensor> = obs.iter().map(|o| o.narrow(0, 0, 3)).collect();
        let real_next: Vec<Tensor> = next.iter().map(|o| o.narrow(0, 0, 3)).collect();
        let only_real = SignalBatch { obs: &real, next_obs: &real_next, continuous: &continuous.narrow(0, 0, 3), discrete: &discrete.narrow(0, 0, 3), valid: None, done: None };
        let fresh = twin.update(&only_real);
        for ((tag, a), (_, b)) in stats.iter().zip(&fresh) {
            assert!((a - b).abs() < 1e-5, "{tag}: {a} vs {b}");
        }
    }
}
