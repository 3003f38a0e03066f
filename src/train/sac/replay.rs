//! SAC's replay buffer (sac.md §4): one row per agent step (observations and the next
//! observations, the squashed continuous action, discrete choices, action masks, done, the
//! environment reward; for a recurrent network the actor memory of the step and the critic
//! memory its sequence starts from), stored by column; uniform sampling with replacement (of
//! whole sequences for a recurrent network: each trajectory is padded to a multiple of the
//! sequence length); after an update round the buffer keeps its newest `int(0.8 ·
//! buffer_size)` rows, rounded down to whole sequences (0.28 cuts sequences there: sac.md §9
//! row 3), once it holds more than `buffer_size`. It can be written beside a checkpoint and
//! read back exactly.

use crate::policy::{WeightTensor, Weights};
use rand::Rng;
use tch::Tensor;

/// The share of `buffer_size` a full buffer is trimmed to (0.28's `BUFFER_TRUNCATE_PERCENT`).
pub const TRIM_SHARE: f64 = 0.8;

/// Version of the saved buffer's layout (the `replay.version` tensor).
const REPLAY_FORMAT_VERSION: f32 = 1.0;

/// One step as the buffer takes it.
pub struct Transition<'a> {
    pub obs: &'a [Vec<f32>],
    pub next_obs: &'a [Vec<f32>],
    pub continuous: &'a [f32],
    pub discrete: &'a [i32],
    /// 1 = allowed.
    pub mask: &'a [f32],
    pub done: bool,
    pub reward: f32,
    /// The actor memory the step's decision read, and the critic memory its sequence starts
    /// from (recurrent networks; empty otherwise).
    pub memory: &'a [f32],
    pub critic_memory: &'a [f32],
}

/// A sampled minibatch as tensors.
pub struct ReplayBatch {
    pub obs: Vec<Tensor>,
    pub next_obs: Vec<Tensor>,
    /// `[n, c]`.
    pub continuous: Tensor,
    /// `[n, branches]` (int64).
    pub discrete: Tensor,
    /// `[n, Σ branches]`, 1 = allowed (None without discrete actions).
    pub masks: Option<Tensor>,
    /// `[n]`, 1 for a true episode end.
    pub done: Tensor,
    /// `[n]`, the environment's rewards.
    pub rewards: Tensor,
    /// Each sequence's starting actor and critic memories `[1, n_seq, m]`, and 1 for real rows
    /// (0 for padding) `[n]` (recurrent networks).
    pub memories: Option<Tensor>,
    pub critic_memories: Option<Tensor>,
    pub valid: Option<Tensor>,
}

/// The replay buffer of one behavior.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayBuffer {
    observation_sizes: Vec<usize>,
    continuous_size: usize,
    branches: usize,
    mask_len: usize,
    memory_size: usize,
    /// Rows per sampled sequence (1 for a feed-forward network).
    sequence_length: usize,
    obs: Vec<Vec<f32>>,
    next_obs: Vec<Vec<f32>>,
    continuous: Vec<f32>,
    discrete: Vec<i64>,
    masks: Vec<f32>,
    done: Vec<f32>,
    rewards: Vec<f32>,
    memory: Vec<f32>,
    critic_memory: Vec<f32>,
    valid: Vec<f32>,
}

/// What a buffer's rows hold besides observations: action sizes and, for a recurrent
/// network, the memory size and sequence length.
#[derive(Debug, Clone, Copy)]
pub struct RowShape {
    pub continuous_size: usize,
    pub branches: usize,
    pub mask_len: usize,
    pub memory_size: usize,
    pub sequence_length: usize,
}

impl ReplayBuffer {
    pub fn new(observation_sizes: Vec<usize>, shape: RowShape) -> Self {
        let columns = observation_sizes.len();
        Self {
            observation_sizes,
            continuous_size: shape.continuous_size,
            branches: shape.branches,
            mask_len: shape.mask_len,
            memory_size: shape.memory_size,
            sequence_length: shape.sequence_length.max(1),
            obs: vec![vec![]; columns],
            next_obs: vec![vec![]; columns],
            continuous: vec![],
            discrete: vec![],
            masks: vec![],
            done: vec![],
            rewards: vec![],
            memory: vec![],
            critic_memory: vec![],
            valid: vec![],
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Appends one row.
    pub fn push(&mut self, t: Transition) {
        for (i, column) in self.obs.iter_mut().enumerate() {
            column.extend_from_slice(&t.obs[i]);
        }
        for (i, column) in self.next_obs.iter_mut().enumerate() {
            column.extend_from_slice(&t.next_obs[i]);
        }
        self.continuous.extend_from_slice(t.continuous);
        self.discrete.extend(t.discrete.iter().map(|d| *d as i64));
        self.masks.extend_from_slice(t.mask);
        self.done.push(if t.done { 1.0 } else { 0.0 });
        self.rewards.push(t.reward);
        if self.memory_size > 0 {
            self.memory.extend_from_slice(t.memory);
            self.critic_memory.extend_from_slice(t.critic_memory);
            self.valid.push(1.0);
        }
    }

    /// Pads the rows to a whole number of sequences (after each trajectory of a recurrent
    /// network): zero observations, actions, rewards and memories, every action allowed, not
    /// done, and marked as padding.
    pub fn pad_to_sequence(&mut self) {
        while self.len() % self.sequence_length != 0 {
            for (column, size) in self.obs.iter_mut().zip(&self.observation_sizes) {
                column.resize(column.len() + size, 0.0);
            }
            for (column, size) in self.next_obs.iter_mut().zip(&self.observation_sizes) {
                column.resize(column.len() + size, 0.0);
            }
            self.continuous.resize(self.continuous.len() + self.continuous_size, 0.0);
            self.discrete.resize(self.discrete.len() + self.branches, 0);
            self.masks.resize(self.masks.len() + self.mask_len, 1.0);
            self.done.push(0.0);
            self.rewards.push(0.0);
            self.memory.resize(self.memory.len() + self.memory_size, 0.0);
            self.critic_memory.resize(self.critic_memory.len() + self.memory_size, 0.0);
            self.valid.push(0.0);
        }
    }

    /// Keeps the newest `keep` rows.
    pub fn keep_newest(&mut self, keep: usize) {
        let drop = self.len().saturating_sub(keep);
        if drop == 0 {
            return;
        }
        for (column, size) in self.obs.iter_mut().zip(&self.observation_sizes) {
            column.drain(..drop * size);
        }
        for (column, size) in self.next_obs.iter_mut().zip(&self.observation_sizes) {
            column.drain(..drop * size);
        }
        self.continuous.drain(..drop * self.continuous_size);
        self.discrete.drain(..drop * self.branches);
        self.masks.drain(..drop * self.mask_len);
        self.done.drain(..drop);
        self.rewards.drain(..drop);
        if self.memory_size > 0 {
            self.memory.drain(..drop * self.memory_size);
            self.critic_memory.drain(..drop * self.memory_size);
            self.valid.drain(..drop);
        }
    }

    /// After an update round: more than `buffer_size` rows are trimmed to the newest
    /// `int(0.8 · buffer_size)`, rounded down to whole sequences.
    pub fn trim(&mut self, buffer_size: usize) {
        if self.len() > buffer_size {
            let keep = (TRIM_SHARE * buffer_size as f64) as usize;
            self.keep_newest(keep - keep % self.sequence_length);
        }
    }

    /// `batch_size` rows drawn uniformly with replacement: single rows, or for a recurrent
    /// network `batch_size / sequence_length` whole sequences (at least one).
    pub fn sample(&self, batch_size: usize, rng: &mut impl Rng) -> ReplayBatch {
        let l = self.sequence_length;
        let sequences = (batch_size / l).max(1);
        let rows: Vec<usize> = (0..sequences).flat_map(|_| {
            let start = rng.random_range(0..self.len() / l) * l;
            start..start + l
        }).collect();
        self.rows(&rows)
    }

    /// The given rows as tensors.
    pub fn rows(&self, rows: &[usize]) -> ReplayBatch {
        let n = rows.len() as i64;
        let gather = |column: &[f32], width: usize| -> Tensor {
            let data: Vec<f32> = rows.iter().flat_map(|r| &column[r * width..(r + 1) * width]).copied().collect();
            Tensor::from_slice(&data).reshape([n, width as i64])
        };
        let discrete: Vec<i64> = rows.iter().flat_map(|r| &self.discrete[r * self.branches..(r + 1) * self.branches]).copied().collect();
        let batch = ReplayBatch {
            obs: self.obs.iter().zip(&self.observation_sizes).map(|(c, s)| gather(c, *s)).collect(),
            next_obs: self.next_obs.iter().zip(&self.observation_sizes).map(|(c, s)| gather(c, *s)).collect(),
            continuous: gather(&self.continuous, self.continuous_size),
            discrete: Tensor::from_slice(&discrete).reshape([n, self.branches as i64]),
            masks: (self.mask_len > 0).then(|| gather(&self.masks, self.mask_len)),
            done: gather(&self.done, 1).reshape([n]),
            rewards: gather(&self.rewards, 1).reshape([n]),
            memories: None,
            critic_memories: None,
            valid: None,
        };
        if self.memory_size == 0 {
            return batch;
        }
        let starts: Vec<usize> = rows.iter().step_by(self.sequence_length).copied().collect();
        let at_starts = |column: &[f32]| -> Tensor {
            let m = self.memory_size;
            let data: Vec<f32> = starts.iter().flat_map(|r| &column[r * m..(r + 1) * m]).copied().collect();
            Tensor::from_slice(&data).reshape([1, starts.len() as i64, m as i64])
        };
        ReplayBatch { memories: Some(at_starts(&self.memory)), critic_memories: Some(at_starts(&self.critic_memory)), valid: Some(gather(&self.valid, 1).reshape([n])), ..batch }
    }

    /// The buffer as named tensors (`replay.*`), for a file beside a checkpoint.
    pub fn to_weights(&self) -> Weights {
        let mut out = Weights::default();
        let n = self.len();
        let mut put = |name: String, width: usize, data: Vec<f32>| {
            out.0.insert(format!("replay.{name}"), WeightTensor { shape: vec![n, width], data });
        };
        for (i, (column, size)) in self.obs.iter().zip(&self.observation_sizes).enumerate() {
            put(format!("obs.{i}"), *size, column.clone());
        }
        for (i, (column, size)) in self.next_obs.iter().zip(&self.observation_sizes).enumerate() {
            put(format!("next_obs.{i}"), *size, column.clone());
        }
        put("continuous".into(), self.continuous_size, self.continuous.clone());
        // Choices are small integers: exact in float32.
        put("discrete".into(), self.branches, self.discrete.iter().map(|d| *d as f32).collect());
        put("masks".into(), self.mask_len, self.masks.clone());
        put("done".into(), 1, self.done.clone());
        put("rewards".into(), 1, self.rewards.clone());
        if self.memory_size > 0 {
            put("memory".into(), self.memory_size, self.memory.clone());
            put("critic_memory".into(), self.memory_size, self.critic_memory.clone());
            put("valid".into(), 1, self.valid.clone());
        }
        out.0.insert("replay.version".into(), WeightTensor { shape: vec![1], data: vec![REPLAY_FORMAT_VERSION] });
        out
    }

    /// Reads a buffer written by [`ReplayBuffer::to_weights`] into an empty buffer of the same
    /// sizes; a file of another layout or other sizes is an error that says which.
    pub fn from_weights(&self, weights: &Weights) -> Result<Self, String> {
        let version = weights.0.get("replay.version").and_then(|v| v.data.first().copied());
        if version != Some(REPLAY_FORMAT_VERSION) {
            return Err(format!("replay buffer layout {version:?}, this trainer reads {REPLAY_FORMAT_VERSION}"));
        }
        let rows = weights.0.get("replay.done").map(|t| t.data.len()).ok_or("no replay.done")?;
        let column = |name: String, width: usize| -> Result<Vec<f32>, String> {
            let t = weights.0.get(&format!("replay.{name}")).ok_or_else(|| format!("no replay.{name}"))?;
            if t.shape != [rows, width] || t.data.len() != rows * width {
                return Err(format!("replay.{name} has shape {:?}, this behavior needs [{rows}, {width}]", t.shape));
            }
            Ok(t.data.clone())
        };
        let sizes = &self.observation_sizes;
        Ok(Self {
            obs: sizes.iter().enumerate().map(|(i, s)| column(format!("obs.{i}"), *s)).collect::<Result<_, _>>()?,
            next_obs: sizes.iter().enumerate().map(|(i, s)| column(format!("next_obs.{i}"), *s)).collect::<Result<_, _>>()?,
            continuous: column("continuous".into(), self.continuous_size)?,
            discrete: column("discrete".into(), self.branches)?.into_iter().map(|d| d as i64).collect(),
            masks: column("masks".into(), self.mask_len)?,
            done: column("done".into(), 1)?,
            rewards: column("rewards".into(), 1)?,
            memory: if self.memory_size > 0 { column("memory".into(), self.memory_size)? } else { vec![] },
            critic_memory: if self.memory_size > 0 { column("critic_memory".into(), self.memory_size)? } else { vec![] },
            valid: if self.memory_size > 0 { column("valid".into(), 1)? } else { vec![] },
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const SHAPE: RowShape = RowShape { continuous_size: 1, branches: 1, mask_len: 3, memory_size: 0, sequence_length: 1 };

    fn buffer_of(rows: usize) -> ReplayBuffer {
        let mut buffer = ReplayBuffer::new(vec![2], SHAPE);
        for r in 0..rows {
            let v = r as f32;
            buffer.push(Transition { obs: &[vec![v, -v]], next_obs: &[vec![v + 1.0, -v - 1.0]], continuous: &[v / 100.0], discrete: &[(r % 3) as i32], mask: &[1.0, 0.0, 1.0], done: r % 5 == 4, reward: v * 10.0, memory: &[], critic_memory: &[] });
        }
        buffer
    }

    /// Above `buffer_size` rows, an update round keeps the newest `int(0.8 · buffer_size)`,
    /// every column trimmed alike; at or below it nothing changes (sac.md §4.2).
    #[test]
    fn trimming_keeps_the_newest_rows() {
        let mut buffer = buffer_of(12);
        buffer.trim(12);
        assert_eq!(buffer.len(), 12);
        buffer.trim(11);
        assert_eq!(buffer.len(), 8, "int(0.8 * 11) = 8");
        let batch = buffer.rows(&[0, 7]);
        assert_eq!(Vec::<f32>::try_from(batch.obs[0].flatten(0, -1)).unwrap(), vec![4.0, -4.0, 11.0, -11.0]);
        assert_eq!(Vec::<f32>::try_from(batch.next_obs[0].flatten(0, -1)).unwrap(), vec![5.0, -5.0, 12.0, -12.0]);
        assert_eq!(Vec::<f32>::try_from(&batch.rewards).unwrap(), vec![40.0, 110.0]);
        assert_eq!(Vec::<f32>::try_from(&batch.done).unwrap(), vec![1.0, 0.0]);
        assert_eq!(Vec::<i64>::try_from(batch.discrete.flatten(0, -1)).unwrap(), vec![1, 2]);
        assert_eq!(Vec::<f32>::try_from(batch.continuous.flatten(0, -1)).unwrap(), vec![0.04, 0.11]);
    }

    /// Samples are uniform with replacement over every row.
    #[test]
    fn sampling_draws_every_row_with_replacement() {
        let buffer = buffer_of(4);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let batch = buffer.sample(400, &mut rng);
        let rewards = Vec::<f32>::try_from(&batch.rewards).unwrap();
        for r in 0..4 {
            let count = rewards.iter().filter(|v| **v == r as f32 * 10.0).count();
            assert!((60..=140).contains(&count), "row {r} drawn {count} times of 400");
        }
    }

    /// The buffer written as tensors reads back as the same buffer; other sizes are refused.
    #[test]
    fn the_buffer_reads_back_exactly() {
        let buffer = buffer_of(7);
        let empty = ReplayBuffer::new(vec![2], SHAPE);
        assert_eq!(empty.from_weights(&buffer.to_weights()).unwrap(), buffer);
        let other = ReplayBuffer::new(vec![3], SHAPE);
        assert!(other.from_weights(&buffer.to_weights()).unwrap_err().contains("replay.obs.0"));
    }

    /// A recurrent buffer: trajectories padded to whole sequences, whole sequences sampled
    /// (with their starting memories and the padding marked), trimming on the sequence grid.
    #[test]
    fn recurrent_rows_come_in_whole_sequences() {
        let shape = RowShape { memory_size: 2, sequence_length: 4, ..SHAPE };
        let mut buffer = ReplayBuffer::new(vec![1], shape);
        for (trajectory, length) in [5usize, 3, 6].into_iter().enumerate() {
            for k in 0..length {
                let v = (trajectory * 10 + k) as f32;
                buffer.push(Transition { obs: &[vec![v]], next_obs: &[vec![v + 1.0]], continuous: &[0.0], discrete: &[0], mask: &[1.0; 3], done: false, reward: v, memory: &[v, -v], critic_memory: &[k as f32, 0.5] });
            }
            buffer.pad_to_sequence();
        }
        assert_eq!(buffer.len(), 8 + 4 + 8);
        let batch = buffer.rows(&[4, 5, 6, 7]);
        assert_eq!(Vec::<f32>::try_from(batch.valid.as_ref().unwrap()).unwrap(), vec![1.0, 0.0, 0.0, 0.0]);
        assert_eq!(Vec::<f32>::try_from(batch.memories.as_ref().unwrap().flatten(0, -1)).unwrap(), vec![4.0, -4.0]);
        assert_eq!(Vec::<f32>::try_from(batch.critic_memories.as_ref().unwrap().flatten(0, -1)).unwrap(), vec![4.0, 0.5]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let sampled = buffer.sample(12, &mut rng);
        assert_eq!(sampled.memories.as_ref().unwrap().size(), [1, 3, 2]);
        let rewards = Vec::<f32>::try_from(&sampled.rewards).unwrap();
        for sequence in rewards.chunks(4) {
            assert!([0.0, 4.0, 10.0, 20.0, 24.0].contains(&sequence[0]), "{rewards:?}: sequences start on the grid");
        }
        buffer.trim(14);
        assert_eq!(buffer.len(), 8, "int(0.8 * 14) = 11, down to whole sequences of 4");
        assert_eq!(buffer.from_weights(&buffer.to_weights()).unwrap(), buffer);
    }
}
