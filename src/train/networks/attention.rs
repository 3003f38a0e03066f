//! Entity attention as ML-Agents 0.28 builds it (poca.md §4): the part of an observation
//! encoder that reads variable-length (entity) observations, `[max entities, entity size]`
//! buffers whose padding entities are zeros. Each entity observation has an
//! [`EntityEmbedding`] (Linear + Swish of the processed self encoding beside each entity), all
//! of them share one [`ResidualSelfAttention`] (LayerNorm, 4-head attention over the unmasked
//! entities, residual, LayerNorm, masked mean), and the pooled 128 values follow the other
//! observations' encodings. An entity whose squared values sum below 0.01 counts as padding
//! (0.28's rule, which also masks real entities that small: issue #5684).
//!
//! Variables are named as 0.28's `ObservationEncoder` names them: `processors.{i}.
//! self_ent_encoder.seq_layers.0`, `x_self_encoder.seq_layers.0`, `rsa.fc_{q,k,v,out}`.

use tch::{nn, nn::Module, Kind, Tensor};

/// The width of every entity embedding and of the pooled encoding (0.28's fixed
/// `ATTENTION_EMBEDDING_SIZE`).
pub const ATTENTION_EMBEDDING_SIZE: i64 = 128;
/// Attention heads.
const HEADS: i64 = 4;
/// An entity whose squared values sum below this is padding.
const ZERO_ENTITY_THRESHOLD: f64 = 0.01;
/// LayerNorm's ε (0.28's parameter-free `LayerNorm`).
const LAYER_NORM_EPSILON: f64 = 1e-5;
/// What masked keys score before the softmax.
const MASKED_SCORE: f64 = -1e6;
/// Keeps the masked mean finite when every entity is masked.
const POOL_EPSILON: f64 = 1e-7;

/// 1 where an entity (`[B, N, E]`) is padding, else 0 `[B, N]`.
pub fn zero_entities_mask(entities: &Tensor) -> Tensor {
    tch::no_grad(|| entities.pow_tensor_scalar(2).sum_dim_intlist(2, false, Kind::Float).lt(ZERO_ENTITY_THRESHOLD).to_kind(Kind::Float))
}

/// 0.28's `LinearEncoder` layer for attention: weights N(0, 1)·√(0.125 / out), bias 0.
pub fn attention_linear(p: nn::Path, fan_in: i64, fan_out: i64) -> nn::Linear {
    let config = nn::LinearConfig { ws_init: nn::Init::Randn { mean: 0.0, stdev: (0.125 / fan_out as f64).sqrt() }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, fan_in, fan_out, config)
}

/// Mean and population variance over the last axis, no scale or shift.
fn layer_norm(x: &Tensor) -> Tensor {
    let mean = x.mean_dim(-1, true, Kind::Float);
    let centred = x - mean;
    let variance = (&centred * &centred).mean_dim(-1, true, Kind::Float);
    centred / (variance + LAYER_NORM_EPSILON).sqrt()
}

/// One entity observation's embedding: Linear + Swish of `[self, entity]` for each entity.
pub struct EntityEmbedding {
    encoder: nn::Linear,
    max_entities: i64,
    entity_size: i64,
}

impl EntityEmbedding {
    /// For entities of `entity_size` values, at most `max_entities`, beside a processed self
    /// encoding of `self_size` values (0 when the agent has no other observation).
    pub fn new(p: nn::Path, self_size: i64, max_entities: i64, entity_size: i64) -> Self {
        let encoder = attention_linear(p / "self_ent_encoder" / "seq_layers" / 0, self_size + entity_size, ATTENTION_EMBEDDING_SIZE);
        Self { encoder, max_entities, entity_size }
    }

    /// `entities` as `[B, N, E]` from an observation batch `[B, N·E]`.
    pub fn entities(&self, observation: &Tensor) -> Tensor {
        observation.reshape([-1, self.max_entities, self.entity_size])
    }

    /// The embeddings `[B, N, 128]` of `entities` `[B, N, E]`, each beside `processed_self`
    /// `[B, 128]` when given.
    pub fn forward(&self, processed_self: Option<&Tensor>, entities: &Tensor) -> Tensor {
        let input = match processed_self {
            Some(x) => Tensor::cat(&[x.unsqueeze(1).expand([-1, self.max_entities, -1], false), entities.shallow_clone()], 2),
            None => entities.shallow_clone(),
        };
        self.encoder.forward(&input).silu()
    }
}

/// 0.28's `ResidualSelfAttention` with its masked mean pooling.
pub struct ResidualSelfAttention {
    fc_q: nn::Linear,
    fc_k: nn::Linear,
    fc_v: nn::Linear,
    fc_out: nn::Linear,
}

impl ResidualSelfAttention {
    /// Over embeddings of `e` values (4 heads of `e / 4`).
    pub fn new(p: nn::Path, e: i64) -> Self {
        Self { fc_q: attention_linear(&p / "fc_q", e, e), fc_k: attention_linear(&p / "fc_k", e, e), fc_v: attention_linear(&p / "fc_v", e, e), fc_out: attention_linear(&p / "fc_out", e, e) }
    }

    /// The pooled encoding `[B, e]` of the embeddings `[B, N, e]`, `mask` `[B, N]` (1 =
    /// padding). A row with every entity masked pools to zeros.
    pub fn forward(&self, embeddings: &Tensor, mask: &Tensor) -> Tensor {
        let (b, n, e) = embeddings.size3().expect("embeddings are [B, N, E]");
        let head = e / HEADS;
        let x = layer_norm(embeddings);
        let split = |t: Tensor| t.reshape([b, n, HEADS, head]).permute([0, 2, 1, 3]);
        let q = split(self.fc_q.forward(&x));
        // 0.28 nudges the keys through k − 1 + 1 between its two permutations (an export
        // workaround); kept, since it rounds the keys as the exported graphs do.
        let k = ((split(self.fc_k.forward(&x)) - 1.0) + 1.0).permute([0, 1, 3, 2]);
        let v = split(self.fc_v.forward(&x));
        let key_mask = mask.reshape([b, 1, 1, n]);
        // Scaled by √(heads · head size), as 0.28 does (not √head size).
        let scores = q.matmul(&k) * (key_mask.ones_like() - &key_mask) / (e as f64).sqrt() + &key_mask * MASKED_SCORE;
        let attended = scores.softmax(-1, Kind::Float).matmul(&v).permute([0, 2, 1, 3]).reshape([b, n, e]);
        let y = layer_norm(&(self.fc_out.forward(&attended) + x));
        let keep = (mask.ones_like() - mask).unsqueeze(2);
        (y * &keep).sum_dim_intlist(1, false, Kind::Float) / (keep.sum_dim_intlist(1, false, Kind::Float) + POOL_EPSILON)
    }
}

/// The entity part of an observation encoder: a self encoder for the other observations'
/// encodings (when there are any), one embedding per entity observation, one shared attention.
pub struct EntityAttention {
    x_self_encoder: Option<nn::Linear>,
    embeddings: Vec<EntityEmbedding>,
    rsa: ResidualSelfAttention,
}

impl EntityAttention {
    /// Under the observation encoder's path `encoder`: `self_size` values of the other
    /// observations' encodings (0: none), and each entity observation's processor index and
    /// `[max entities, entity size]`.
    pub fn new(encoder: &nn::Path, self_size: i64, entity_observations: &[(usize, [i64; 2])]) -> Self {
        let x_self_encoder = (self_size > 0).then(|| attention_linear(encoder / "x_self_encoder" / "seq_layers" / 0, self_size, ATTENTION_EMBEDDING_SIZE));
        let embedded_self = if self_size > 0 { ATTENTION_EMBEDDING_SIZE } else { 0 };
        let embeddings = entity_observations.iter().map(|(index, [max, size])| EntityEmbedding::new(encoder / "processors" / *index, embedded_self, *max, *size)).collect();
        Self { x_self_encoder, embeddings, rsa: ResidualSelfAttention::new(encoder / "rsa", ATTENTION_EMBEDDING_SIZE) }
    }

    /// The pooled encoding `[B, 128]` of the entity observations (each `[B, N·E]`, in the
    /// order given to [`Self::new`]) beside `encoded_self`, the other observations' encodings.
    pub fn forward(&self, encoded_self: Option<&Tensor>, entity_observations: &[Tensor]) -> Tensor {
        let processed_self = self.x_self_encoder.as_ref().zip(encoded_self).map(|(layer, x)| layer.forward(x).silu());
        let entities: Vec<Tensor> = self.embeddings.iter().zip(entity_observations).map(|(e, o)| e.entities(o)).collect();
        let mask = Tensor::cat(&entities.iter().map(zero_entities_mask).collect::<Vec<_>>(), 1);
        let embedded: Vec<Tensor> = self.embeddings.iter().zip(&entities).map(|(e, x)| e.forward(processed_self.as_ref(), x)).collect();
        self.rsa.forward(&Tensor::cat(&embedded, 1), &mask)
    }
}
