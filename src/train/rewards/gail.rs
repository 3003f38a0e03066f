//! GAIL, generative adversarial imitation (reward-signals.md §5): a discriminator D, a
//! `NetworkBody` with the signal's settings (reading the action and whether the episode ended
//! too with `use_actions`), optionally a variational bottleneck (VAIL), and an estimator
//! Linear → sigmoid giving the probability that a step is the demonstrations'. The reward is
//! −ln(1 − D·(1 − 1e-7)) (always ≥ 0); the loss is the discriminator's cross-entropy between a
//! policy minibatch and as many demonstration rows drawn with replacement, plus VAIL's
//! β·(KL − 0.5) and 10 × a gradient penalty.
//!
//! Where 0.28 is wrong and we are not (§11): with `use_actions`, the policy's continuous
//! actions are fed as the environment received them (PPO's clip(a, −3, 3) / 3), as the
//! demonstrations hold them, so D cannot tell the two apart by scale alone (§11 #3); the
//! gradient penalty interpolates whole rows and takes the gradient with respect to every input
//! of D, its norm over all of a row's values (0.28: per-element interpolation, the first
//! observation only, a norm over dimension 1; §11 #4); padding rows of recurrent sequences are
//! masked out (#7); the normaliser, with `normalize`, takes the demonstrations once and the
//! policy's trajectories as they come (#5). A `--compat-0-28` run takes 0.28's raw actions
//! (#3) and gradient penalty (#4) instead (its normaliser stays ours).
//!
//! Variables are named as 0.28's `DiscriminatorNetwork` names them, under
//! `reward_signals.gail.`.

use super::{flatten_actions, signal_description, signal_root, xavier_linear, RewardProvider, SignalBatch};
use crate::demo::DemoRow;
use crate::train::demonstrations::DemoTensors;
use crate::policy::{ContinuousHead, PolicyDescription};
use crate::train::config::{RewardSignal, RewardSignalKind};
use crate::train::networks::adam::Adam;
use crate::train::networks::{backward, kaiming_linear, Body};
use tch::{nn, nn::Module, Device, Kind, Tensor};

/// Weight of the gradient penalty.
const GRADIENT_PENALTY_WEIGHT: f64 = 10.0;
/// Width of VAIL's bottleneck.
const Z_SIZE: i64 = 128;
/// Step of VAIL's β towards its KL target.
const BETA_STEP: f64 = 0.0005;
/// VAIL's target of the KL divergence (0.28's `mutual_information`).
const KL_TARGET: f64 = 0.5;
/// Keeps logarithms finite.
const EPSILON: f64 = 1e-7;
/// The PPO clip of continuous actions: the environment receives clip(a, −3, 3) / 3.
const ACTION_CLIP: f64 = crate::spec::model::ACTION_CLIP as f64;

/// VAIL's bottleneck: z = μ(h) + ε·σ, σ one learned vector, β a coefficient adjusted towards
/// the KL target (not trained by gradient).
struct Bottleneck {
    mu: nn::Linear,
    sigma: Tensor,
    beta: Tensor,
}

/// The demonstrations as D reads them.
struct Expert {
    /// Each observation `[N, size]`.
    obs: Vec<Tensor>,
    /// The actions as the environment received them, flattened, then whether the episode
    /// ended `[N, c + Σ branches + 1]` (only with `use_actions`).
    actions: Option<Tensor>,
    rows: i64,
}

/// What D makes of rows.
struct Estimate {
    /// D `[n]`.
    probability: Tensor,
    /// VAIL's μ `[n, 128]`.
    mu: Option<Tensor>,
}

/// The GAIL signal's discriminator, its optimizer and the demonstrations.
pub struct Gail {
    store: nn::VarStore,
    encoder: Body,
    bottleneck: Option<Bottleneck>,
    estimator: nn::Linear,
    adam: Adam,
    learning_rate: f64,
    branches: Vec<i64>,
    use_actions: bool,
    /// PPO's continuous actions are raw samples the environment receives a third of, clipped
    /// (false in `--compat-0-28` runs: 0.28 feeds D the raw samples).
    clipped_actions: bool,
    /// The gradient penalty as 0.28 computes it: the shape of the first observation, the only
    /// one it penalises (`--compat-0-28` runs).
    penalty_0_28: Option<Vec<i64>>,
    expert: Expert,
}

impl Gail {
    /// The discriminator for a behavior of `description` with `signal`'s settings, and the
    /// demonstration rows it tells the policy's from; `compat_0_28` as the module says.
    pub fn new(description: &PolicyDescription, signal: &RewardSignal, demonstrations: &[DemoRow], compat_0_28: bool) -> Self {
        let store = nn::VarStore::new(Device::Cpu);
        let root = signal_root(&store, RewardSignalKind::Gail);
        let d = signal_description(description, signal);
        let use_actions = signal.gail.as_ref().is_some_and(|g| g.use_actions);
        let use_vail = signal.gail.as_ref().is_some_and(|g| g.use_vail);
        let branches: Vec<i64> = d.action_spec.discrete_branches.iter().map(|b| *b as i64).collect();
        let action_inputs = if use_actions { d.action_spec.continuous_size + d.action_spec.discrete_branches.iter().sum::<usize>() + 1 } else { 0 };
        let mut encoder = Body::new(&(&root / "encoder"), &d, action_inputs);
        let h = d.hidden_units as i64;
        let bottleneck = use_vail.then(|| Bottleneck {
            sigma: root.var("_z_sigma", &[Z_SIZE], nn::Init::Const(1.0)),
            mu: kaiming_linear(&root / "_z_mu_layer", h, Z_SIZE, 0.1),
            beta: root.zeros_no_train("_beta", &[]),
        });
        let estimator = xavier_linear(&root / "_estimator" / 0, if use_vail { Z_SIZE } else { h }, 1, 0.2);
        let expert = Expert::new(demonstrations, &d.observation_sizes(), use_actions.then_some(branches.as_slice()));
        if expert.rows > 0 {
            // A demonstration beyond float32 leaves the normaliser as it was.
            let _ = encoder.update_normalizers(&expert.obs);
        }
        let adam = Adam::new(&store);
        Self {
            store,
            encoder,
            bottleneck,
            estimator,
            adam,
            learning_rate: signal.learning_rate.unwrap_or(3e-4),
            branches,
            use_actions,
            clipped_actions: description.continuous_head == ContinuousHead::Clipped && !compat_0_28,
            penalty_0_28: compat_0_28.then(|| d.observation_shapes[0].iter().map(|x| *x as i64).collect()),
            expert,
        }
    }

    /// The policy rows' action inputs of D: the actions as the environment received them,
    /// flattened, then whether the episode ended (0 where the batch does not say).
    fn policy_actions(&self, batch: &SignalBatch) -> Option<Tensor> {
        if !self.use_actions {
            return None;
        }
        let continuous = if self.clipped_actions { batch.continuous.clamp(-ACTION_CLIP, ACTION_CLIP) / ACTION_CLIP } else { batch.continuous.shallow_clone() };
        let n = batch.continuous.size()[0];
        let done = batch.done.map_or_else(|| Tensor::zeros([n, 1], (Kind::Float, Device::Cpu)), |d| d.reshape([n, 1]));
        Some(Tensor::cat(&[flatten_actions(&continuous, batch.discrete, &self.branches), done], 1))
    }

    /// D of rows; with `noise`, VAIL's z is sampled (training), else z = μ.
    fn estimate(&self, obs: &[Tensor], actions: Option<&Tensor>, noise: bool) -> Estimate {
        let h = self.encoder.forward(obs, actions, None).0;
        match &self.bottleneck {
            Some(b) => {
                let mu = b.mu.forward(&h);
                let z = if noise { &mu + mu.randn_like() * &b.sigma } else { mu.shallow_clone() };
                Estimate { probability: self.estimator.forward(&z).sigmoid().squeeze_dim(1), mu: Some(mu) }
            }
            None => Estimate { probability: self.estimator.forward(&h).sigmoid().squeeze_dim(1), mu: None },
        }
    }

    /// The gradient penalty: D on rows interpolated between each policy row and an expert row
    /// (one mixing weight per row, for every input), then the mean over rows of
    /// (‖∇D‖ − 1)², the gradient taken with respect to all of the row's inputs.
    ///
    /// 0.28's (`penalty_0_28`): a mixing weight per value, the gradient of the first
    /// observation only, its norm over the observation's first dimension (an image's height),
    /// then the mean of (‖∇D‖ − 1)² over rows and the other dimensions, padding rows included.
    fn gradient_penalty(&self, batch: &SignalBatch, policy_actions: Option<&Tensor>, expert_obs: &[Tensor], expert_actions: Option<&Tensor>) -> Tensor {
        let n = batch.continuous.size()[0];
        let weight = Tensor::rand([n], (Kind::Float, Device::Cpu));
        let mix = |policy: &Tensor, expert: &Tensor| {
            let w = match self.penalty_0_28 {
                Some(_) => policy.rand_like(),
                None => {
                    let mut shape = vec![n];
                    shape.resize(policy.dim(), 1);
                    weight.reshape(shape.as_slice())
                }
            };
            (policy * &w + expert * (w.neg() + 1.0)).detach().set_requires_grad(true)
        };
        let obs: Vec<Tensor> = batch.obs.iter().zip(expert_obs).map(|(p, e)| mix(p, e)).collect();
        let actions = policy_actions.zip(expert_actions).map(|(p, e)| mix(p, e));
        let estimate = self.estimate(&obs, actions.as_ref(), true).probability.sum(Kind::Float);
        let mut inputs: Vec<&Tensor> = obs.iter().collect();
        inputs.extend(actions.as_ref());
        let gradients = Tensor::run_backward(&[estimate], &inputs, true, true);
        if let Some(shape) = &self.penalty_0_28 {
            let first = gradients[0].reshape([n, shape[0], -1]);
            let norm = (first.pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float) + EPSILON).sqrt();
            return (norm - 1.0).pow_tensor_scalar(2).mean(Kind::Float);
        }
        let squared: Tensor = gradients.iter().map(|g| g.pow_tensor_scalar(2).reshape([n, -1]).sum_dim_intlist(1, false, Kind::Float)).fold(Tensor::zeros([n], (Kind::Float, Device::Cpu)), |sum, g| sum + g);
        batch.masked_mean(&((squared + EPSILON).sqrt() - 1.0).pow_tensor_scalar(2))
    }
}

impl Expert {
    fn new(rows: &[DemoRow], observation_sizes: &[usize], branches: Option<&[i64]>) -> Self {
        let demonstrations = DemoTensors::new(rows, observation_sizes);
        let actions = branches.map(|branches| Tensor::cat(&[flatten_actions(&demonstrations.continuous, &demonstrations.discrete, branches), demonstrations.done.unsqueeze(1)], 1));
        Self { obs: demonstrations.observations, actions, rows: demonstrations.rows as i64 }
    }
}

impl RewardProvider for Gail {
    fn evaluate(&self, batch: &SignalBatch) -> Tensor {
        tch::no_grad(|| {
            let d = self.estimate(batch.obs, self.policy_actions(batch).as_ref(), false).probability;
            -(d * -(1.0 - EPSILON) + 1.0).log()
        })
    }

    fn update(&mut self, batch: &SignalBatch) -> Vec<(&'static str, f32)> {
        if self.expert.rows == 0 {
            return vec![];
        }
        let n = batch.continuous.size()[0];
        let drawn = Tensor::randint(self.expert.rows, [n], (Kind::Int64, Device::Cpu));
        let expert_obs: Vec<Tensor> = self.expert.obs.iter().map(|o| o.index_select(0, &drawn)).collect();
        let expert_actions = self.expert.actions.as_ref().map(|a| a.index_select(0, &drawn));
        let policy_actions = self.policy_actions(batch);
        let policy = self.estimate(batch.obs, policy_actions.as_ref(), true);
        let expert = self.estimate(&expert_obs, expert_actions.as_ref(), true);
        let discriminator_loss = -((&expert.probability + EPSILON).log().mean(Kind::Float) + batch.masked_mean(&(policy.probability.neg() + (1.0 + EPSILON)).log()));
        let mut loss = discriminator_loss.shallow_clone();
        let mut stats = vec![
            ("Losses/GAIL Loss", discriminator_loss.double_value(&[]) as f32),
            ("Policy/GAIL Policy Estimate", batch.masked_mean(&policy.probability).double_value(&[]) as f32),
            ("Policy/GAIL Expert Estimate", expert.probability.mean(Kind::Float).double_value(&[]) as f32),
        ];
        if let (Some(b), Some(mu_policy), Some(mu_expert)) = (&self.bottleneck, &policy.mu, &expert.mu) {
            let variance = b.sigma.pow_tensor_scalar(2);
            let shared = (&variance - 1.0 - (&variance + EPSILON).log()).sum(Kind::Float);
            let half_square = |mu: &Tensor| mu.pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float) * 0.5;
            let kl = shared + half_square(mu_expert).mean(Kind::Float) + batch.masked_mean(&half_square(mu_policy));
            let kl_value = kl.double_value(&[]);
            // The loss reads β before its adjustment (a number: β takes no gradient).
            let beta_before = b.beta.double_value(&[]);
            loss = loss + (kl - KL_TARGET) * beta_before;
            let beta = (beta_before + BETA_STEP * (kl_value - KL_TARGET)).max(0.0);
            let _ = tch::no_grad(|| b.beta.shallow_clone().fill_(beta));
            stats.push(("Policy/GAIL Beta", beta as f32));
            stats.push(("Losses/GAIL KL Loss", kl_value as f32));
        }
        let penalty = self.gradient_penalty(batch, policy_actions.as_ref(), &expert_obs, expert_actions.as_ref());
        stats.push(("Policy/GAIL Grad Mag Loss", (GRADIENT_PENALTY_WEIGHT * penalty.double_value(&[])) as f32));
        loss = loss + penalty * GRADIENT_PENALTY_WEIGHT;
        self.adam.zero_grad();
        backward(&loss);
        self.adam.step(self.learning_rate);
        stats
    }

    fn update_normalizers(&mut self, observations: &[Tensor]) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::POLICY_FORMAT_VERSION;
    use crate::spec::ActionSpec;
    use crate::train::config::RunOptions;

    fn signal(options: &str) -> RewardSignal {
        let yaml = format!("behaviors:\n  B:\n    reward_signals:\n      gail: {{demo_path: x.demo, learning_rate: 0.005{options}}}\n");
        RunOptions::from_yaml(&yaml, "t.yaml").unwrap().behaviors["B"].reward_signals["gail"].clone()
    }

    fn description(action_spec: ActionSpec) -> PolicyDescription {
        PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![6]],
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

    /// 1000 copies of one random row: the demonstrations' or the policy's.
    fn repeated_row(spec: &ActionSpec, seed: u64) -> DemoRow {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        DemoRow {
            observations: vec![(0..6).map(|_| rng.random_range(-1.0..1.0)).collect()],
            continuous: (0..spec.continuous_size).map(|_| rng.random_range(-1.0..1.0)).collect(),
            discrete: spec.discrete_branches.iter().map(|k| rng.random_range(0..*k as i32)).collect(),
            reward: 0.0,
            done: false,
            episode_ends: false,
        }
    }

    /// The mean reward GAIL gives 1000 copies of `row` (policy side: its continuous actions
    /// taken as PPO's raw ones, three times the environment's).
    fn mean_reward(gail: &Gail, row: &DemoRow) -> f32 {
        let obs = vec![Tensor::from_slice(&row.observations[0]).reshape([1, 6]).repeat([1000, 1])];
        let continuous = (Tensor::from_slice(&row.continuous).reshape([1, -1]) * ACTION_CLIP).repeat([1000, 1]);
        let discrete = Tensor::from_slice(&row.discrete.iter().map(|d| *d as i64).collect::<Vec<_>>()).reshape([1, -1]).repeat([1000, 1]);
        let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &continuous, discrete: &discrete, valid: None, done: None };
        let rewards = gail.evaluate(&batch);
        assert!(rewards.min().double_value(&[]) >= 0.0, "GAIL rewards are never negative");
        rewards.mean(Kind::Float).double_value(&[]) as f32
    }

    /// upstream `test_reward_decreases` (and its VAIL variant): trained on one expert row and one
    /// policy row, the expert's reward rises, the policy's falls, the expert's ends above.
    #[test]
    fn the_discriminator_tells_the_expert_from_the_policy() {
        for (spec, options, updates) in [
            (ActionSpec::continuous(2), "", 20),
            (ActionSpec::discrete(&[2, 3]), ", use_actions: true", 20),
            (ActionSpec::hybrid(2, &[2]), ", use_actions: true", 20),
            (ActionSpec::continuous(2), ", use_vail: true", 300),
        ] {
            tch::manual_seed(0);
            let (expert, policy) = (repeated_row(&spec, 1), repeated_row(&spec, 2));
            let mut gail = Gail::new(&description(spec.clone()), &signal(options), &vec![expert.clone(); 1000], false);
            let (expert_before, policy_before) = (mean_reward(&gail, &expert), mean_reward(&gail, &policy));
            let obs = vec![Tensor::from_slice(&policy.observations[0]).reshape([1, 6]).repeat([64, 1])];
            let continuous = (Tensor::from_slice(&policy.continuous).reshape([1, -1]) * ACTION_CLIP).repeat([64, 1]);
            let discrete = Tensor::from_slice(&policy.discrete.iter().map(|d| *d as i64).collect::<Vec<_>>()).reshape([1, -1]).repeat([64, 1]);
            let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &continuous, discrete: &discrete, valid: None, done: None };
            let mut stats = vec![];
            for _ in 0..updates {
                stats = gail.update(&batch);
            }
            let (expert_after, policy_after) = (mean_reward(&gail, &expert), mean_reward(&gail, &policy));
            assert!(expert_after > expert_before && policy_after < policy_before && expert_after > policy_after, "{spec}{options}: expert {expert_before} -> {expert_after}, policy {policy_before} -> {policy_after}");
            let tags: Vec<&str> = stats.iter().map(|(tag, _)| *tag).collect();
            assert!(tags.contains(&"Losses/GAIL Loss") && tags.contains(&"Policy/GAIL Grad Mag Loss"), "{tags:?}");
            assert_eq!(tags.contains(&"Policy/GAIL Beta"), options.contains("vail"), "{tags:?}");
            assert!(stats.iter().all(|(_, v)| v.is_finite()), "{stats:?}");
        }
    }

    /// With `use_actions`, the policy-side action input of D for an expert row whose action a
    /// PPO policy took as its raw sample (three times the environment's): that input, and the
    /// raw sample.
    fn policy_input_for_the_expert_action(compat_0_28: bool) -> (Tensor, Tensor, Gail) {
        let spec = ActionSpec::continuous(2);
        let expert = repeated_row(&spec, 1);
        let gail = Gail::new(&description(spec), &signal(", use_actions: true"), std::slice::from_ref(&expert), compat_0_28);
        let obs = vec![Tensor::from_slice(&expert.observations[0]).reshape([1, 6])];
        let raw = Tensor::from_slice(&expert.continuous).reshape([1, 2]) * ACTION_CLIP;
        let discrete = Tensor::zeros([1, 0], (Kind::Int64, Device::Cpu));
        let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &raw, discrete: &discrete, valid: None, done: None };
        (gail.policy_actions(&batch).unwrap(), raw, gail)
    }

    /// With `use_actions`, a PPO policy acting as the demonstrations did looks like the expert
    /// to D: the two inputs are the same.
    #[test]
    fn policy_actions_are_read_in_the_environments_space() {
        tch::manual_seed(3);
        let (policy_input, _, gail) = policy_input_for_the_expert_action(false);
        assert!(policy_input.allclose(gail.expert.actions.as_ref().unwrap(), 1e-6, 1e-6, false), "{policy_input} vs {:?}", gail.expert.actions);
    }

    /// `--compat-0-28` feeds D PPO's raw actions, as 0.28 does (three times the expert's here).
    #[test]
    fn compat_0_28_reads_raw_policy_actions() {
        let (policy_input, raw, _) = policy_input_for_the_expert_action(true);
        assert!(policy_input.narrow(1, 0, 2).allclose(&raw, 1e-6, 1e-6, false));
    }

    /// Both penalties against the gradient of D taken directly, on rows where the policy's and
    /// the expert's inputs are equal (so every interpolation is the same point): ours is the
    /// norm over the observation and the actions, 0.28's over the observation alone.
    #[test]
    fn the_gradient_penalties_match_the_gradient_of_d() {
        let spec = ActionSpec::hybrid(1, &[3]);
        let expert = repeated_row(&spec, 5);
        for compat in [false, true] {
            tch::manual_seed(6);
            let gail = Gail::new(&description(spec.clone()), &signal(", use_actions: true"), std::slice::from_ref(&expert), compat);
            let obs = vec![gail.expert.obs[0].repeat([4, 1])];
            let actions = gail.expert.actions.as_ref().unwrap().repeat([4, 1]);
            let continuous = actions.narrow(1, 0, 1) * if compat { 1.0 } else { ACTION_CLIP };
            let discrete = Tensor::from_slice(&[i64::from(expert.discrete[0])]).reshape([1, 1]).repeat([4, 1]);
            let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &continuous, discrete: &discrete, valid: None, done: None };
            let policy_actions = gail.policy_actions(&batch).unwrap();
            assert!(policy_actions.allclose(&actions, 1e-6, 1e-6, false));
            let penalty = gail.gradient_penalty(&batch, Some(&policy_actions), &obs, Some(&actions)).double_value(&[]);
            let x = obs[0].detach().set_requires_grad(true);
            let a = actions.detach().set_requires_grad(true);
            let d = gail.estimate(std::slice::from_ref(&x), Some(&a), false).probability.sum(Kind::Float);
            let g = Tensor::run_backward(&[d], &[&x, &a], false, false);
            let squared = g[0].pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float);
            let squared = if compat { squared } else { squared + g[1].pow_tensor_scalar(2).sum_dim_intlist(1, false, Kind::Float) };
            let expected = ((squared + EPSILON).sqrt() - 1.0).pow_tensor_scalar(2).mean(Kind::Float).double_value(&[]);
            assert!((penalty - expected).abs() < 1e-5, "compat {compat}: {penalty} vs {expected}");
        }
    }

    /// The gradient penalty is (‖∇D‖ − 1)²: below 1 for an untrained D (a small gradient), 1
    /// for a D whose gradient is zero.
    #[test]
    fn the_gradient_penalty_is_one_where_d_is_flat() {
        tch::manual_seed(4);
        let spec = ActionSpec::discrete(&[2]);
        let expert = repeated_row(&spec, 1);
        let gail = Gail::new(&description(spec), &signal(", use_actions: true"), std::slice::from_ref(&expert), false);
        let obs = vec![Tensor::randn([8, 6], (Kind::Float, Device::Cpu))];
        let discrete = Tensor::ones([8, 1], (Kind::Int64, Device::Cpu));
        let continuous = Tensor::zeros([8, 0], (Kind::Float, Device::Cpu));
        let batch = SignalBatch { obs: &obs, next_obs: &obs, continuous: &continuous, discrete: &discrete, valid: None, done: None };
        let expert_obs = vec![gail.expert.obs[0].repeat([8, 1])];
        let expert_actions = gail.expert.actions.as_ref().unwrap().repeat([8, 1]);
        let policy_actions = gail.policy_actions(&batch).unwrap();
        let penalty = gail.gradient_penalty(&batch, Some(&policy_actions), &expert_obs, Some(&expert_actions)).double_value(&[]);
        assert!(penalty > 0.0 && penalty < 1.0, "an untrained D has a small gradient: {penalty}");
        tch::no_grad(|| {
            for (_, mut variable) in gail.store.variables() {
                let _ = variable.zero_();
            }
        });
        let flat = gail.gradient_penalty(&batch, Some(&policy_actions), &expert_obs, Some(&expert_actions)).double_value(&[]);
        assert!((flat - 1.0).abs() < 1e-3, "{flat}");
    }
}
