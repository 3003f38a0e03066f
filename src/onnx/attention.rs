//! The entity attention of an exported policy (poca.md §4.6), node for node as ML-Agents 0.28
//! exports it, with the entity layout ([`EntityLayout`]) chosen by the Unity target: each
//! entity input `[batch, K, E]` read through 0.28's `Transpose(0,2,1)` + `Reshape` for
//! Barracuda, or as it is for Sentis; the zero-entity mask (Σx² < 0.01); each observation's
//! embedding of `[self, entity]`; the shared residual self-attention (LayerNorm, four heads
//! scaled by √128, residual, LayerNorm) and its masked mean.

use super::layers::{linear, swish};
use super::{attr_int, attr_ints, GraphBuilder};
use crate::policy::{names, PolicyError, Weights, ENTITY_EMBEDDING_SIZE};
use crate::spec::EntityLayout;

/// Attention heads (0.28's default).
const HEADS: i64 = 4;
/// An entity whose squared values sum below this is padding.
const ZERO_ENTITY_THRESHOLD: f32 = 0.01;
const LAYER_NORM_EPSILON: f32 = 1e-5;
const MASKED_SCORE: f32 = -1e6;
const POOL_EPSILON: f32 = 1e-7;

/// One entity observation: its input name, `[max entities, entity size]` and observation index.
pub(super) struct EntityInput {
    pub name: String,
    pub shape: [usize; 2],
    pub index: usize,
}

/// The pooled attention encoding `[batch, 128]` of the entity inputs, beside `encoded_self`
/// (the other observations' encodings side by side, `self_size` wide; None when there are none).
pub(super) fn entity_attention(
    g: &mut GraphBuilder,
    entities: &[EntityInput],
    encoded_self: Option<String>,
    weights: &Weights,
    layout: EntityLayout,
) -> Result<String, PolicyError> {
    let e = ENTITY_EMBEDDING_SIZE as i64;
    let processed_self = match encoded_self {
        Some(x) => {
            let y = linear(g, x, weights, names::X_SELF_WEIGHT, names::X_SELF_BIAS)?;
            Some(swish(g, y))
        }
        None => None,
    };
    let (mut masks, mut embeddings) = (vec![], vec![]);
    for input in entities {
        let [k, size] = input.shape.map(|d| d as i64);
        let read = |g: &mut GraphBuilder| read_entities(g, &input.name, k, size, layout);
        // 0.28 reads the input twice, once for the mask and once for the embedding.
        let for_mask = read(g);
        masks.push(zero_entities_mask(g, for_mask));
        let mut x = read(g);
        if let Some(s) = &processed_self {
            let shape = g.constant_i64("entity_self_shape", &[3], vec![-1, 1, e]);
            let row = g.node("Reshape", vec![s.clone(), shape], vec![], "entity_self");
            let repeated = g.node("Concat", vec![row; k as usize], vec![attr_int("axis", 1)], "entity_self");
            x = g.node("Concat", vec![repeated, x], vec![attr_int("axis", 2)], "entity_embedding");
        }
        let y = matmul_linear(g, x, weights, &names::entity_embedding_weight(input.index), &names::entity_embedding_bias(input.index))?;
        embeddings.push(swish(g, y));
    }
    let n: i64 = entities.iter().map(|i| i.shape[0] as i64).sum();
    let concat = |g: &mut GraphBuilder, parts: Vec<String>, axis: i64| if parts.len() == 1 { parts[0].clone() } else { g.node("Concat", parts, vec![attr_int("axis", axis)], "entities") };
    let mask = concat(g, masks, 1);
    let embedded = concat(g, embeddings, 1);
    residual_self_attention(g, embedded, mask, n, weights)
}

/// The entities `[batch, K, E]` of an input in the given layout.
fn read_entities(g: &mut GraphBuilder, input: &str, k: i64, size: i64, layout: EntityLayout) -> String {
    match layout {
        EntityLayout::Natural => input.to_string(),
        EntityLayout::Barracuda => {
            let swapped = g.node("Transpose", vec![input.to_string()], vec![attr_ints("perm", &[0, 2, 1])], "entity_layout");
            let shape = g.constant_i64("entity_shape", &[3], vec![-1, k, size]);
            g.node("Reshape", vec![swapped, shape], vec![], "entity_layout")
        }
    }
}

/// 1 where an entity of `[batch, K, E]` is padding (Σx² < 0.01), else 0: `[batch, K]`.
fn zero_entities_mask(g: &mut GraphBuilder, entities: String) -> String {
    let two = g.constant("two", &[], vec![2.0]);
    let squares = g.node("Pow", vec![entities, two], vec![], "entity_mask");
    let sums = g.node("ReduceSum", vec![squares], vec![attr_ints("axes", &[2]), attr_int("keepdims", 0)], "entity_mask");
    let threshold = g.constant("zero_entity_threshold", &[], vec![ZERO_ENTITY_THRESHOLD]);
    let padding = g.node("Less", vec![sums, threshold], vec![], "entity_mask");
    g.node("Cast", vec![padding], vec![attr_int("to", super::FLOAT as i64)], "entity_mask")
}

/// A torch Linear on the last axis of a rank-3 tensor: `MatMul` by the stored-transposed
/// weight, then `Add` of the bias (as 0.28 exports it; Gemm takes rank 2 only).
fn matmul_linear(g: &mut GraphBuilder, x: String, weights: &Weights, weight: &str, bias: &str) -> Result<String, PolicyError> {
    let w = weights.get(weight)?;
    let b = weights.get(bias)?;
    let (out, input) = (w.shape[0], w.shape[1]);
    let transposed: Vec<f32> = (0..input).flat_map(|i| (0..out).map(move |o| (o, i))).map(|(o, i)| w.data[o * input + i]).collect();
    let w_name = g.constant(weight, &[input as i64, out as i64], transposed);
    let b_name = g.constant(bias, &[out as i64], b.data.clone());
    let product = g.node("MatMul", vec![x, w_name], vec![], weight);
    Ok(g.node("Add", vec![product, b_name], vec![], weight))
}

/// Mean and population variance over the last axis, no scale or shift.
fn layer_norm(g: &mut GraphBuilder, x: String) -> String {
    let last = || vec![attr_ints("axes", &[-1]), attr_int("keepdims", 1)];
    let mean = g.node("ReduceMean", vec![x.clone()], last(), "layer_norm");
    let centred = g.node("Sub", vec![x, mean], vec![], "layer_norm");
    let two = g.constant("two", &[], vec![2.0]);
    let squares = g.node("Pow", vec![centred.clone(), two], vec![], "layer_norm");
    let variance = g.node("ReduceMean", vec![squares], last(), "layer_norm");
    let epsilon = g.constant("layer_norm_epsilon", &[], vec![LAYER_NORM_EPSILON]);
    let shifted = g.node("Add", vec![variance, epsilon], vec![], "layer_norm");
    let std = g.node("Sqrt", vec![shifted], vec![], "layer_norm");
    g.node("Div", vec![centred, std], vec![], "layer_norm")
}

/// 0.28's `ResidualSelfAttention` over `embedded` `[batch, n, 128]` with `mask` `[batch, n]`
/// (1 = padding), pooled to `[batch, 128]`.
fn residual_self_attention(g: &mut GraphBuilder, embedded: String, mask: String, n: i64, weights: &Weights) -> Result<String, PolicyError> {
    let e = ENTITY_EMBEDDING_SIZE as i64;
    let head = e / HEADS;
    let layer = |name: &str, part: &str| format!("{}.{name}.{part}", names::ATTENTION);
    let x = layer_norm(g, embedded);
    let project = |g: &mut GraphBuilder, name: &str| -> Result<String, PolicyError> {
        let y = matmul_linear(g, x.clone(), weights, &layer(name, "weight"), &layer(name, "bias"))?;
        let heads = g.constant_i64("attention_heads_shape", &[4], vec![-1, n, HEADS, head]);
        let split = g.node("Reshape", vec![y, heads], vec![], "attention");
        Ok(g.node("Transpose", vec![split], vec![attr_ints("perm", &[0, 2, 1, 3])], "attention"))
    };
    let q = project(g, "fc_q")?;
    let k = project(g, "fc_k")?;
    let v = project(g, "fc_v")?;
    // 0.28's k − 1 + 1 between the two permutations of the keys (kept: it rounds as 0.28's
    // exports do).
    let one = g.constant("one", &[], vec![1.0]);
    let lowered = g.node("Sub", vec![k, one.clone()], vec![], "attention");
    let restored = g.node("Add", vec![lowered, one.clone()], vec![], "attention");
    let keys = g.node("Transpose", vec![restored], vec![attr_ints("perm", &[0, 1, 3, 2])], "attention");
    let scores = g.node("MatMul", vec![q, keys], vec![], "attention");
    let mask_shape = g.constant_i64("attention_mask_shape", &[4], vec![-1, 1, 1, n]);
    let key_mask = g.node("Reshape", vec![mask.clone(), mask_shape], vec![], "attention");
    let keep = g.node("Sub", vec![one.clone(), key_mask.clone()], vec![], "attention");
    let kept = g.node("Mul", vec![keep, scores], vec![], "attention");
    let scale = g.constant("attention_scale", &[], vec![(e as f32).sqrt()]);
    let scaled = g.node("Div", vec![kept, scale], vec![], "attention");
    let masked_score = g.constant("masked_score", &[], vec![MASKED_SCORE]);
    let penalty = g.node("Mul", vec![key_mask, masked_score], vec![], "attention");
    let logits = g.node("Add", vec![scaled, penalty], vec![], "attention");
    let probabilities = g.node("Softmax", vec![logits], vec![attr_int("axis", 3)], "attention");
    let attended = g.node("MatMul", vec![probabilities, v], vec![], "attention");
    let entity_major = g.node("Transpose", vec![attended], vec![attr_ints("perm", &[0, 2, 1, 3])], "attention");
    let merged_shape = g.constant_i64("attention_merged_shape", &[3], vec![-1, n, e]);
    let merged = g.node("Reshape", vec![entity_major, merged_shape], vec![], "attention");
    let out = matmul_linear(g, merged, weights, &layer("fc_out", "weight"), &layer("fc_out", "bias"))?;
    let residual = g.node("Add", vec![out, x], vec![], "attention");
    let y = layer_norm(g, residual);
    // Masked mean over the entities.
    let keep = g.node("Sub", vec![one, mask], vec![], "attention_pool");
    let keep_shape = g.constant_i64("attention_pool_shape", &[3], vec![-1, n, 1]);
    let keep_column = g.node("Reshape", vec![keep.clone(), keep_shape], vec![], "attention_pool");
    let weighted = g.node("Mul", vec![y, keep_column], vec![], "attention_pool");
    let total = g.node("ReduceSum", vec![weighted], vec![attr_ints("axes", &[1]), attr_int("keepdims", 0)], "attention_pool");
    let count = g.node("ReduceSum", vec![keep], vec![attr_ints("axes", &[1]), attr_int("keepdims", 1)], "attention_pool");
    let epsilon = g.constant("pool_epsilon", &[], vec![POOL_EPSILON]);
    let denominator = g.node("Add", vec![count, epsilon], vec![], "attention_pool");
    Ok(g.node("Div", vec![total, denominator], vec![], "attention_pool"))
}
