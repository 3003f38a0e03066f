//! MA-POCA's centralized critic as ML-Agents 0.28 builds it (poca.md §2, `POCAValueNetwork`):
//! one observation encoder applied to every agent of a group, an embedding of each agent
//! (observations only, or observations beside the agent's action), one residual
//! self-attention block pooling over the agents present, a Swish MLP, the agent count as one
//! more feature, and one value head per reward signal.
//!
//! The one network answers two questions. The *value* V(s) reads the agent and its groupmates
//! (observations only); the *baseline* b_i reads the groupmates with their actions and the
//! agent without its own, so that it marginalises what agent i did (the counterfactual of
//! POCA's advantage G − b_i).
//!
//! With memory, an LSTM follows the MLP (as in 0.28's `MultiAgentNetworkBody`); the value and
//! the baseline each run it from a memory stream of their own.
//!
//! Variables are named as 0.28 names them under `network_body`: `observation_encoder.
//! processors.{i}`, `obs_encoder.self_ent_encoder.seq_layers.0`, `obs_action_encoder.
//! self_ent_encoder.seq_layers.0`, `self_attn.fc_{q,k,v,out}`, `linear_encoder.seq_layers.
//! {0,2,…}`, `lstm.lstm.*`, `_current_max_agents`; the heads are `value_heads.value_heads.
//! <signal>`.

use super::attention::{attention_linear, ResidualSelfAttention};
use super::{kaiming_linear, value_head, Lstm, ObservationEncoder};
use crate::policy::PolicyDescription;
use crate::spec::ActionSpec;
use tch::{nn, nn::Module, Kind, Tensor};

/// A batch of agents with their groupmates: rows are agents' steps, each with up to `slots`
/// mates beside it.
pub struct GroupObservations {
    /// The agents' own observations, one tensor `[B, size]` per observation.
    pub own: Vec<Tensor>,
    /// Each mate slot's observations, one tensor `[B, size]` per observation (zeros where the
    /// slot is empty).
    pub mates: Vec<Vec<Tensor>>,
    /// Each mate slot's action `[B, A]` as [`flat_actions`] lays it out (zeros where the slot
    /// is empty): one per slot of `mates`.
    pub mate_actions: Vec<Tensor>,
    /// `[B, slots]`: 1 where a slot holds no mate.
    pub absent: Tensor,
}

/// Actions as the baseline reads them: continuous values, then a one-hot of each discrete
/// branch's choice (0.28's `AgentAction.to_flat`). `discrete` is `[B, branches]` int64.
pub fn flat_actions(spec: &ActionSpec, continuous: &Tensor, discrete: &Tensor) -> Tensor {
    let mut parts = vec![continuous.shallow_clone()];
    for (b, size) in spec.discrete_branches.iter().enumerate() {
        parts.push(discrete.select(1, b as i64).one_hot(*size as i64).to_kind(Kind::Float));
    }
    Tensor::cat(&parts, 1)
}

/// Estimates of rows by the critic, with the memories after each sequence when recurrent
/// (`[1, n_seq, m]`).
pub struct Estimated {
    pub estimates: Tensor,
    pub memories: Option<Tensor>,
}

/// 0.28's `POCAValueNetwork`.
pub struct MultiAgentCritic {
    encoder: ObservationEncoder,
    obs_encoder: nn::Linear,
    obs_action_encoder: nn::Linear,
    attention: ResidualSelfAttention,
    layers: Vec<nn::Linear>,
    lstm: Option<Lstm>,
    /// The most agents any batch has held so far (the count feature's scale); kept in the
    /// checkpoint.
    max_agents: Tensor,
    heads: Vec<nn::Linear>,
}

impl MultiAgentCritic {
    /// The critic of `d`'s behavior with one head per signal in `signals` (their names), under
    /// `root`. `hidden_units` must be a multiple of 4 (the attention's heads; the configuration
    /// checks it).
    pub fn new(root: &nn::Path, d: &PolicyDescription, signals: &[&str]) -> Self {
        let body = root / "network_body";
        let encoder = ObservationEncoder::new(&(&body / "observation_encoder"), d);
        let h = d.hidden_units as i64;
        let width = d.encoding_width() as i64;
        let actions = (d.action_spec.continuous_size + d.action_spec.mask_len()) as i64;
        let embedding = |name: &str, fan_in: i64| attention_linear(&body / name / "self_ent_encoder" / "seq_layers" / 0, fan_in, h);
        let obs_encoder = embedding("obs_encoder", width);
        let obs_action_encoder = embedding("obs_action_encoder", width + actions);
        let attention = ResidualSelfAttention::new(&body / "self_attn", h);
        let gain = (0.125 / h as f64).sqrt();
        let layers = (0..d.num_layers.max(1)).map(|l| kaiming_linear(&body / "linear_encoder" / "seq_layers" / (2 * l), h, h, gain)).collect();
        let lstm = d.is_recurrent().then(|| Lstm::new(&body / "lstm" / "lstm", h, d.memory_size as i64 / 2));
        let max_agents = body.ones_no_train("_current_max_agents", &[]);
        // The agent count is one more input of the heads.
        let heads = signals.iter().map(|name| value_head(root, name, d.head_width() + 1, 1)).collect();
        Self { encoder, obs_encoder, obs_action_encoder, attention, layers, lstm, max_agents, heads }
    }

    /// The number of value heads.
    pub fn heads(&self) -> usize {
        self.heads.len()
    }

    /// The running maximum of agents the count feature is scaled by.
    pub fn max_agents(&self) -> f64 {
        self.max_agents.double_value(&[])
    }

    /// Updates the observation normalisers with the agents' own observations (mates are
    /// normalised with the same statistics, as in 0.28).
    pub fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        self.encoder.update_normalizers(observations)
    }

    /// V(s) `[B, heads]`: the agent and its mates, observations only. A recurrent critic runs
    /// the rows as sequences from `memories` (`[1, n_seq, m]`; zeros when None, one sequence
    /// per row).
    pub fn values(&self, g: &GroupObservations, memories: Option<&Tensor>) -> Estimated {
        let (own, mates) = self.encode_agents(g);
        self.values_of(&own, &mates, &g.absent, memories)
    }

    /// The values and the baselines `[B, heads]` each, from one encoding of the agents; a
    /// recurrent critic runs each from its own memory stream.
    pub fn values_and_baselines(&self, g: &GroupObservations, value_memories: Option<&Tensor>, baseline_memories: Option<&Tensor>) -> (Estimated, Estimated) {
        let (own, mates) = self.encode_agents(g);
        (self.values_of(&own, &mates, &g.absent, value_memories), self.baselines_of(&own, &mates, &g.mate_actions, &g.absent, baseline_memories))
    }

    /// Every agent's observation encodings: its own `[B, 1, D]` and its mates' `[B, slots, D]`,
    /// through one pass of the encoder over all of them.
    fn encode_agents(&self, g: &GroupObservations) -> (Tensor, Tensor) {
        let rows = g.own.first().map_or(0, |o| o.size()[0]);
        let agents = 1 + g.mates.len() as i64;
        let stacked: Vec<Tensor> = (0..g.own.len()).map(|i| Tensor::cat(&std::iter::once(&g.own[i]).chain(g.mates.iter().map(|m| &m[i])).collect::<Vec<_>>(), 0)).collect();
        let encoded = self.encoder.encode(&stacked);
        let encoded = encoded.reshape([agents, rows, -1]).permute([1, 0, 2]);
        (encoded.narrow(1, 0, 1), encoded.narrow(1, 1, agents - 1))
    }

    /// The agent first, then its mates, observations only.
    fn values_of(&self, own: &Tensor, mates: &Tensor, absent: &Tensor, memories: Option<&Tensor>) -> Estimated {
        let entities = self.obs_encoder.forward(&Tensor::cat(&[own, mates], 1)).silu();
        let mask = Tensor::cat(&[own.select(2, 0).zeros_like(), absent.shallow_clone()], 1);
        self.pooled_values(&entities, &mask, memories)
    }

    /// The mates with their actions first, then the agent without its own (0.28's order).
    fn baselines_of(&self, own: &Tensor, mates: &Tensor, mate_actions: &[Tensor], absent: &Tensor, memories: Option<&Tensor>) -> Estimated {
        let own_entity = self.obs_encoder.forward(own).silu();
        let own_present = own.select(2, 0).zeros_like();
        if mate_actions.is_empty() {
            return self.pooled_values(&own_entity, &own_present, memories);
        }
        let actions = Tensor::stack(mate_actions, 1);
        let with_actions = self.obs_action_encoder.forward(&Tensor::cat(&[mates.shallow_clone(), actions], 2)).silu();
        self.pooled_values(&Tensor::cat(&[with_actions, own_entity], 1), &Tensor::cat(&[absent.shallow_clone(), own_present], 1), memories)
    }

    /// The heads' values from the agents' embeddings `[B, n, h]` and their mask `[B, n]` (1 =
    /// absent): attention pooling, the MLP, then the agent count `2·n / max − 1` beside it,
    /// where max is the most agents seen so far (updated first, as 0.28 does, by every pass).
    /// A recurrent critic runs the MLP's output through its LSTM from `memories` first.
    fn pooled_values(&self, entities: &Tensor, absent: &Tensor, memories: Option<&Tensor>) -> Estimated {
        let mut x = self.attention.forward(entities, absent);
        let count = (absent.ones_like() - absent).sum_dim_intlist(1, true, Kind::Float);
        tch::no_grad(|| {
            let most = count.max();
            if most.double_value(&[]) > self.max_agents() {
                // The variable is shared with the store (a shallow handle), so the checkpoint
                // sees the new maximum.
                self.max_agents.shallow_clone().copy_(&most);
            }
        });
        let count_feature = count * 2.0 / &self.max_agents - 1.0;
        for layer in &self.layers {
            x = layer.forward(&x).silu();
        }
        let mut after = None;
        if let Some(lstm) = &self.lstm {
            let (out, memories_after) = lstm.forward_from(&x, memories);
            x = out;
            after = Some(memories_after);
        }
        let x = Tensor::cat(&[x, count_feature], 1);
        Estimated { estimates: Tensor::cat(&self.heads.iter().map(|head| head.forward(&x)).collect::<Vec<_>>(), 1), memories: after }
    }
}
