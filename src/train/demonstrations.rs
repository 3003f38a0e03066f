//! The demonstrations a behavior's trainer learns from (reward-signals.md §5.5, §6.1): the rows
//! of `behavioral_cloning`'s and GAIL's `.demo` files, read once when the trainer is built and
//! checked against the behavior's spec, each observation paired with the action taken from it
//! ([`crate::demo::Pairing::ActionTaken`]; 0.28 pairs it with the previous decision's, as
//! `--compat-0-28` runs do).

use crate::demo::{DemoRow, Pairing};
use crate::spec::BehaviorSpec;
use crate::train::config::TrainerSettings;
use crate::train::error::TrainError;
use std::path::Path;

/// A behavior's demonstration rows, for each part of its trainer that reads them.
#[derive(Default)]
pub struct Demonstrations {
    /// `behavioral_cloning`'s.
    pub cloning: Option<Vec<DemoRow>>,
    /// The GAIL reward signal's.
    pub gail: Option<Vec<DemoRow>>,
}

impl Demonstrations {
    /// Reads the demonstrations `settings` name for `behavior`; a file that cannot be read,
    /// was recorded for another spec, or holds no action to imitate is an error naming it.
    pub fn load(behavior: &str, settings: &TrainerSettings, spec: &BehaviorSpec) -> Result<Self, TrainError> {
        let pairing = if settings.compat_0_28 { Pairing::Compat0_28 } else { Pairing::ActionTaken };
        let cloning = match &settings.behavioral_cloning {
            Some(cloning) => Some(rows(behavior, "behavioral_cloning", &cloning.demo_path, spec, pairing)?),
            None => None,
        };
        let gail = settings.reward_signals.values().find_map(|signal| signal.gail.as_ref());
        let gail = match gail {
            Some(gail) => Some(rows(behavior, "reward_signals.gail", &gail.demo_path, spec, pairing)?),
            None => None,
        };
        Ok(Self { cloning, gail })
    }
}

/// The rows of the recordings at `demo_path` (a file or a folder), for `part` of `behavior`.
fn rows(behavior: &str, part: &str, demo_path: &str, spec: &BehaviorSpec, pairing: Pairing) -> Result<Vec<DemoRow>, TrainError> {
    let fail = |detail: String| TrainError::Mismatch(format!("{behavior}: {part}: {detail}"));
    let demos = crate::demo::read_path(Path::new(demo_path)).map_err(|e| fail(e.to_string()))?;
    for demo in &demos {
        demo.check_spec(spec).map_err(|e| fail(e.to_string()))?;
    }
    let rows = crate::demo::training_rows(&demos, pairing);
    if rows.is_empty() {
        return Err(fail(format!("{demo_path} holds no decision followed by another in its episode, so no action to imitate")));
    }
    Ok(rows)
}

/// Demonstration rows as tensors, for the networks that train on them.
#[cfg(feature = "train")]
pub struct DemoTensors {
    /// Each observation `[N, size]`.
    pub observations: Vec<tch::Tensor>,
    /// The continuous actions as the environment received them `[N, c]`.
    pub continuous: tch::Tensor,
    /// The branches' choices `[N, branches]` (int64).
    pub discrete: tch::Tensor,
    /// `[N]`, 1 where the episode ended with the row's step.
    pub done: tch::Tensor,
    pub rows: usize,
}

#[cfg(feature = "train")]
impl DemoTensors {
    /// `rows`, their observations of `observation_sizes` floats each.
    pub fn new(rows: &[DemoRow], observation_sizes: &[usize]) -> Self {
        use tch::Tensor;
        let n = rows.len() as i64;
        let width = |of: fn(&DemoRow) -> usize| rows.first().map_or(0, of) as i64;
        let floats = |values: Vec<f32>, width: i64| Tensor::from_slice(&values).reshape([n, width]);
        Self {
            observations: observation_sizes.iter().enumerate().map(|(i, size)| floats(rows.iter().flat_map(|r| r.observations[i].iter().copied()).collect(), *size as i64)).collect(),
            continuous: floats(rows.iter().flat_map(|r| r.continuous.iter().copied()).collect(), width(|r| r.continuous.len())),
            discrete: Tensor::from_slice(&rows.iter().flat_map(|r| r.discrete.iter().map(|d| i64::from(*d))).collect::<Vec<i64>>()).reshape([n, width(|r| r.discrete.len())]),
            done: Tensor::from_slice(&rows.iter().map(|r| if r.done { 1.0f32 } else { 0.0 }).collect::<Vec<f32>>()),
            rows: rows.len(),
        }
    }
}
