//! How a policy model reads a variable-length (entity, BufferSensor) observation (poca.md §4.6).
//!
//! An agent's entities arrive as `[max entities K, entity size E]`, entity-major: value `e` of
//! entity `k` at `k·E + e`. Unity feeds a rank-3 model input `[batch, K, E]` in two ways:
//! - **Barracuda** (com.unity.ml-agents 1.8–2.x) lays the input out as N, H=1, W=E, C=K, so the
//!   tensor the graph sees holds at `[k, e]` the value at flat index `e·K + k`. ML-Agents 0.28
//!   exports make up for it with `Transpose(perm 0,2,1)` then `Reshape(-1, K, E)` in front of
//!   every use of the input.
//! - **Natural** (Sentis, com.unity.ml-agents 3.x and later): the tensor is the entities as
//!   they are, and mlagents 1.1 exports read it without the transpose.
//!
//! A model made for one layout and fed the other reads scrambled entities and masks, with no
//! error. Our exports record their layout in the ONNX metadata under [`METADATA_KEY`]; other
//! models are recognised by the transpose in front of the input ([`EntityLayout::read_by`]).

use std::fmt;

/// The ONNX `metadata_props` key under which our exports record their entity layout.
pub const METADATA_KEY: &str = "mlagents.entity_layout";

/// How a model expects the entities of a rank-3 observation input laid out (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityLayout {
    /// Barracuda's transposed view; the graph transposes it back (ML-Agents 0.28 exports).
    #[default]
    Barracuda,
    /// The entities as they are (Sentis-era exports).
    Natural,
}

/// What reads a rank-3 input in a graph, as far as [`EntityLayout::read_by`] needs to know.
#[derive(Debug, Clone, Copy)]
pub struct InputReader {
    /// The reader is a `Transpose` with `perm = [0, 2, 1]`.
    pub swaps_last_axes: bool,
    /// Its output goes into a `Reshape`.
    pub feeds_reshape: bool,
}

impl EntityLayout {
    /// The name used in metadata and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Barracuda => "barracuda",
            Self::Natural => "natural",
        }
    }

    /// Reads a name written by [`Self::name`].
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "barracuda" => Ok(Self::Barracuda),
            "natural" => Ok(Self::Natural),
            other => Err(format!("entity layout {other:?}: expected barracuda (Unity ML-Agents 2.x) or natural (3.x and later)")),
        }
    }

    /// The layout a graph expects from what reads its input: Barracuda when every reader is
    /// 0.28's `Transpose(perm 0,2,1)` followed by a `Reshape`, natural otherwise.
    pub fn read_by(readers: &[InputReader]) -> Self {
        if !readers.is_empty() && readers.iter().all(|r| r.swaps_last_axes && r.feeds_reshape) {
            Self::Barracuda
        } else {
            Self::Natural
        }
    }

    /// One agent's entities (`[max_entities, entity_size]`, entity-major) as a model of this
    /// layout reads them, appended to `out`.
    pub fn arrange(self, entities: &[f32], max_entities: usize, entity_size: usize, out: &mut Vec<f32>) {
        debug_assert_eq!(entities.len(), max_entities * entity_size);
        match self {
            Self::Natural => out.extend_from_slice(entities),
            // The tensor's [k, e] holds flat index e·K + k.
            Self::Barracuda => out.extend((0..max_entities).flat_map(|k| (0..entity_size).map(move |e| entities[e * max_entities + k]))),
        }
    }

    /// The inverse of [`Self::arrange`]: one agent's entities back in entity-major order.
    pub fn restore(self, arranged: &[f32], max_entities: usize, entity_size: usize, out: &mut Vec<f32>) {
        debug_assert_eq!(arranged.len(), max_entities * entity_size);
        match self {
            Self::Natural => out.extend_from_slice(arranged),
            Self::Barracuda => {
                let start = out.len();
                out.resize(start + arranged.len(), 0.0);
                for k in 0..max_entities {
                    for e in 0..entity_size {
                        out[start + e * max_entities + k] = arranged[k * entity_size + e];
                    }
                }
            }
        }
    }

    /// [`Self::arrange`] for a batch of agents (`rows` of `max_entities · entity_size` values).
    pub fn arrange_rows(self, rows: &[f32], max_entities: usize, entity_size: usize) -> Vec<f32> {
        let width = max_entities * entity_size;
        let mut out = Vec::with_capacity(rows.len());
        if width == 0 {
            return out;
        }
        for row in rows.chunks(width) {
            self.arrange(row, max_entities, entity_size, &mut out);
        }
        out
    }
}

impl fmt::Display for EntityLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barracuda_arrangement_is_the_transposed_view_and_restores() {
        // K = 3 entities of E = 2 values: entity k holds (10k, 10k + 1).
        let entities = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        let mut arranged = vec![];
        EntityLayout::Barracuda.arrange(&entities, 3, 2, &mut arranged);
        // reshape(f, [E, K])ᵀ: [k, e] = f[e·K + k].
        assert_eq!(arranged, [0.0, 11.0, 1.0, 20.0, 10.0, 21.0]);
        // What the graph's Transpose(0,2,1) + Reshape(-1, K, E) gives back: the entities.
        let transposed: Vec<f32> = (0..2).flat_map(|e| (0..3).map(move |k| (k, e))).map(|(k, e)| arranged[k * 2 + e]).collect();
        assert_eq!(transposed, entities);
        let mut restored = vec![];
        EntityLayout::Barracuda.restore(&arranged, 3, 2, &mut restored);
        assert_eq!(restored, entities);
        let mut natural = vec![];
        EntityLayout::Natural.arrange(&entities, 3, 2, &mut natural);
        assert_eq!(natural, entities);
        assert_eq!(EntityLayout::Barracuda.arrange_rows(&[entities, entities].concat(), 3, 2), [arranged.clone(), arranged].concat());
    }

    #[test]
    fn layout_is_read_from_the_inputs_readers() {
        let quirk = InputReader { swaps_last_axes: true, feeds_reshape: true };
        let plain = InputReader { swaps_last_axes: false, feeds_reshape: false };
        assert_eq!(EntityLayout::read_by(&[quirk, quirk]), EntityLayout::Barracuda);
        assert_eq!(EntityLayout::read_by(&[quirk, plain]), EntityLayout::Natural);
        assert_eq!(EntityLayout::read_by(&[]), EntityLayout::Natural);
        assert_eq!(EntityLayout::parse("natural"), Ok(EntityLayout::Natural));
        assert!(EntityLayout::parse("nchw").unwrap_err().contains("barracuda"));
    }
}
