//! What a behavior's settings make the trainer allocate, against the machine's memory.
//!
//! Every size a configuration gives turns into memory somewhere: `window` snapshots of the
//! actor, `buffer_size` steps of experience, `time_horizon` steps of an agent's trajectory in
//! progress, `hidden_units` x `num_layers` (and `memory_size`) of weights with their gradients
//! and Adam moments. `self_play.window: 1000000000` was accepted and grew the trainer to 22 GB
//! until the kernel killed it without a word (bad-input report of 2 December, P1). Each cost
//! is estimated here from below and refused, naming the key and the bytes, when it alone is
//! more than the machine's memory: first from the configuration alone (observations of one
//! float), then again when the behavior's observations are known.

/// The sizes of a behavior's settings that turn into memory (the configuration fills them,
/// [`super::config::TrainerSettings::sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sizes {
    pub buffer_size: usize,
    pub time_horizon: usize,
    pub hidden_units: usize,
    pub num_layers: usize,
    /// `memory_size` of the recurrent memory, if any.
    pub memory_size: Option<usize>,
    /// `self_play.window`, with self-play.
    pub window: Option<usize>,
}

/// The least a buffered step costs beyond its observation floats: its action, log
/// probabilities, advantage, return, mask and the bookkeeping of its vectors.
const STEP_OVERHEAD_BYTES: u64 = 64;

/// What one step and the networks of a behavior are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BehaviorShape {
    /// Observation floats of one step (all sensors).
    pub observation_floats: u64,
    /// Parameters of the actor (the critic has about as many).
    pub actor_parameters: u64,
}

impl BehaviorShape {
    /// The least any behavior with these sizes has: one observation float, and the hidden
    /// layers (and LSTM) with one input and one output.
    pub fn least(sizes: &Sizes) -> Self {
        let (h, layers) = (sizes.hidden_units as u64, sizes.num_layers as u64);
        let mut parameters = h.saturating_mul(h).saturating_mul(layers.saturating_sub(1)).saturating_add(h.saturating_mul(3));
        if let Some(memory_size) = sizes.memory_size {
            // An LSTM of m/2 units on the body's h outputs: 4 gates of (h + m/2 + 2) x m/2.
            let units = memory_size as u64 / 2;
            parameters = parameters.saturating_add(4u64.saturating_mul(units).saturating_mul(h.saturating_add(units).saturating_add(2)));
        }
        Self { observation_floats: 1, actor_parameters: parameters }
    }
}

/// One key's memory: the key as the YAML names it, its value, the bytes it needs at least,
/// and what for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cost {
    pub key: &'static str,
    pub value: String,
    pub bytes: u64,
    pub what: String,
}

/// The memory each of `sizes` needs at least, for a behavior of `shape`.
pub fn costs(sizes: &Sizes, shape: BehaviorShape) -> Vec<Cost> {
    let step_bytes = shape.observation_floats.saturating_mul(4).saturating_add(STEP_OVERHEAD_BYTES);
    let weights_bytes = shape.actor_parameters.saturating_mul(4);
    let mut costs = vec![
        Cost {
            key: "buffer_size",
            value: sizes.buffer_size.to_string(),
            bytes: (sizes.buffer_size as u64).saturating_mul(step_bytes),
            what: format!("its steps of experience ({} bytes a step at least)", step_bytes),
        },
        Cost {
            key: "time_horizon",
            value: sizes.time_horizon.to_string(),
            bytes: (sizes.time_horizon as u64).saturating_mul(step_bytes),
            what: "one agent's trajectory in progress".into(),
        },
        Cost {
            key: "hidden_units",
            value: sizes.hidden_units.to_string(),
            // Actor and critic, each with its gradients and Adam's two moments.
            bytes: weights_bytes.saturating_mul(8),
            what: format!("the actor's and the critic's {} weights with their gradients and optimizer state", shape.actor_parameters),
        },
    ];
    if let Some(window) = sizes.window {
        costs.push(Cost {
            key: "window",
            value: window.to_string(),
            bytes: (window as u64).saturating_mul(weights_bytes),
            what: format!("its snapshots of the actor ({weights_bytes} bytes each at least)"),
        });
    }
    costs
}

/// The first cost above `available` bytes, if any.
pub fn beyond(costs: Vec<Cost>, available: u64) -> Option<Cost> {
    costs.into_iter().find(|c| c.bytes > available)
}

/// The machine's memory in bytes (None where it cannot be read).
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysinfo only writes the struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    Some((info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1))))
}

/// Bytes as a person reads them: `22.4 GB`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 40 => format!("{:.1} TB", b as f64 / (1u64 << 40) as f64),
        b if b >= 1 << 30 => format!("{:.1} GB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b => format!("{b} bytes"),
    }
}

/// The rule a cost breaks, as a configuration error states it.
pub fn rule(cost: &Cost, available: u64) -> String {
    format!("it needs at least {} ({} bytes) for {}, more than this machine's {} of memory", human(cost.bytes), cost.bytes, cost.what, human(available))
}
