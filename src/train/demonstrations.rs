//! The demonstrations a behavior's trainer learns from (reward-signals.md §5.5, §6.1): the rows
//! of `behavioral_cloning`'s and GAIL's `.demo` files, read once when the trainer is built and
//! checked against the behavior's spec, each observation paired with the action taken from it
//! ([`crate::demo::Pairing::ActionTaken`], where 0.28 pairs it with the previous decision's).

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
        let cloning = match &settings.behavioral_cloning {
            Some(_) if settings.network_settings.memory.is_some() => {
                return Err(TrainError::Unsupported(format!("behavior {behavior}: behavioral_cloning with a recurrent network (network_settings.memory) is not built yet")));
            }
            Some(cloning) => Some(rows(behavior, "behavioral_cloning", &cloning.demo_path, spec)?),
            None => None,
        };
        let gail = settings.reward_signals.values().find_map(|signal| signal.gail.as_ref());
        let gail = match gail {
            Some(gail) => Some(rows(behavior, "reward_signals.gail", &gail.demo_path, spec)?),
            None => None,
        };
        Ok(Self { cloning, gail })
    }
}

/// The rows of the recordings at `demo_path` (a file or a folder), for `part` of `behavior`.
fn rows(behavior: &str, part: &str, demo_path: &str, spec: &BehaviorSpec) -> Result<Vec<DemoRow>, TrainError> {
    let fail = |detail: String| TrainError::Mismatch(format!("{behavior}: {part}: {detail}"));
    let demos = crate::demo::read_path(Path::new(demo_path)).map_err(|e| fail(e.to_string()))?;
    for demo in &demos {
        demo.check_spec(spec).map_err(|e| fail(e.to_string()))?;
    }
    let rows = crate::demo::training_rows(&demos, Pairing::ActionTaken);
    if rows.is_empty() {
        return Err(fail(format!("{demo_path} holds no decision followed by another in its episode, so no action to imitate")));
    }
    Ok(rows)
}
