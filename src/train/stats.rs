//! Training statistics as ML-Agents reports them (training.md §9): values accumulated per
//! tag between summaries, a summary at each multiple of `summary_freq` labelled with that
//! multiple, the console line, and TensorBoard scalars.

use super::tensorboard::SummaryWriter;
use crate::comm::side_channel::StatsAggregation;
use std::collections::BTreeMap;

/// Mean, population std and count of one tag's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsSummary {
    pub mean: f32,
    pub std: f32,
    pub count: usize,
}

impl StatsSummary {
    pub fn of(values: &[f32]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().map(|v| *v as f64).sum::<f64>() / n;
        let std = (values.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
        Some(Self { mean: mean as f32, std: std as f32, count: values.len() })
    }
}

/// One behavior's statistics.
#[derive(Debug)]
pub struct StatsReporter {
    behavior: String,
    summary_freq: u64,
    next_summary: u64,
    values: BTreeMap<String, (Vec<f32>, StatsAggregation)>,
    /// Appended to the console line (self-play: the learning team and the opponents).
    pub context: Option<String>,
}

/// Tag of the episode rewards on the console.
pub const CUMULATIVE_REWARD: &str = "Environment/Cumulative Reward";
/// Tag of the group rewards of agents that ended with their whole group (POCA, 0.28's tag).
pub const GROUP_CUMULATIVE_REWARD: &str = "Environment/Group Cumulative Reward";
/// Tag of a group episode's return: its members' individual rewards and its group rewards
/// (ours, once per group episode).
pub const GROUP_EPISODE_RETURN: &str = "Environment/Group Episode Return";
/// Tag of the members a group episode had (ours).
pub const GROUP_SIZE: &str = "Environment/Group Size";
/// Tag of a self-play behavior's rating (0.28's spelling).
pub const ELO: &str = "Self-play/ELO";

impl StatsReporter {
    /// Summaries come at every multiple of `summary_freq`, the first one after `step`.
    pub fn new(behavior: &str, summary_freq: u64, step: u64) -> Self {
        let freq = summary_freq.max(1);
        Self { behavior: behavior.into(), summary_freq: freq, next_summary: (step / freq + 1) * freq, values: BTreeMap::new(), context: None }
    }

    /// Records a value (averaged at the next summary unless its aggregation says otherwise).
    pub fn add(&mut self, tag: &str, value: f32, aggregation: StatsAggregation) {
        let entry = self.values.entry(tag.into()).or_insert_with(|| (vec![], aggregation));
        entry.0.push(value);
        entry.1 = aggregation;
    }

    /// Adds what another reporter of the same behavior recorded (a threaded update's losses).
    pub fn absorb(&mut self, other: StatsReporter) {
        for (tag, (values, aggregation)) in other.values {
            let entry = self.values.entry(tag).or_insert_with(|| (vec![], aggregation));
            entry.0.extend(values);
            entry.1 = aggregation;
        }
    }

    /// Whether the step count `after` (after processing a trajectory) reached the next summary:
    /// returns the multiple of `summary_freq` crossed, which labels the summary.
    pub fn due(&mut self, after: u64) -> Option<u64> {
        if after < self.next_summary {
            return None;
        }
        let label = (after / self.summary_freq) * self.summary_freq;
        self.next_summary = label + self.summary_freq;
        Some(label)
    }

    /// The console line ML-Agents 0.28 prints, e.g.
    /// `3DBall. Step: 12000. Time Elapsed: 25.831 s. Mean Reward: 1.234. Std of Reward: 0.567. Training.`
    /// (with self-play, ` ELO: 1201.234.` after it when a game was rated), then our context.
    /// With group rewards (POCA), `Mean Group Reward: x.xxx` replaces the standard deviation.
    pub fn console_line(&self, step: u64, elapsed_s: f64, training: bool) -> String {
        let rewards = self.values.get(CUMULATIVE_REWARD).and_then(|(v, _)| StatsSummary::of(v));
        let state = if training { "Training" } else { "Not Training" };
        let context = self.context.as_ref().map(|c| format!(" {c}.")).unwrap_or_default();
        match rewards {
            Some(s) => format!(
                "{}. Step: {step}. Time Elapsed: {elapsed_s:.3} s. Mean Reward: {:.3}. {}. {state}.{}{context}",
                self.behavior,
                s.mean,
                match self.mean(GROUP_CUMULATIVE_REWARD) {
                    Some(group) => format!("Mean Group Reward: {group:.3}"),
                    None => format!("Std of Reward: {:.3}", s.std),
                },
                self.mean(ELO).map(|e| format!(" ELO: {e:.3}.")).unwrap_or_default()
            ),
            None => format!(
                "{}. Step: {step}. Time Elapsed: {elapsed_s:.3} s. No episode was completed since last summary. {state}.{context}",
                self.behavior
            ),
        }
    }

    /// Mean of the values of `tag` accumulated since the last summary.
    pub fn mean(&self, tag: &str) -> Option<f32> {
        self.values.get(tag).and_then(|(v, _)| StatsSummary::of(v)).map(|s| s.mean)
    }

    /// Drops the values accumulated since the last summary.
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// Writes every tag aggregated by its method (histograms as histograms, and their mean)
    /// and clears them.
    pub fn write(&mut self, writer: &mut SummaryWriter, step: u64) -> std::io::Result<()> {
        for (tag, (values, aggregation)) in std::mem::take(&mut self.values) {
            if aggregation == StatsAggregation::Histogram {
                writer.add_histogram(&tag, &values, step as i64)?;
            }
            if let Some(v) = aggregation.aggregate(&values) {
                writer.add_scalar(&tag, v, step as i64)?;
            }
        }
        writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_match_mlagents() {
        let mut r = StatsReporter::new("3DBall", 12000, 0);
        assert_eq!(
            r.console_line(12000, 25.8314, true),
            "3DBall. Step: 12000. Time Elapsed: 25.831 s. No episode was completed since last summary. Training."
        );
        r.add(CUMULATIVE_REWARD, 1.0, StatsAggregation::Average);
        r.add(CUMULATIVE_REWARD, 2.0, StatsAggregation::Average);
        assert_eq!(
            r.console_line(24000, 50.0, false),
            "3DBall. Step: 24000. Time Elapsed: 50.000 s. Mean Reward: 1.500. Std of Reward: 0.500. Not Training."
        );
        r.add(GROUP_CUMULATIVE_REWARD, 1.25, StatsAggregation::Average);
        assert_eq!(
            r.console_line(24000, 50.0, true),
            "3DBall. Step: 24000. Time Elapsed: 50.000 s. Mean Reward: 1.500. Mean Group Reward: 1.250. Training."
        );
    }

    #[test]
    fn summaries_are_labelled_with_the_multiple_crossed() {
        let mut r = StatsReporter::new("B", 1000, 0);
        assert_eq!(r.due(999), None);
        assert_eq!(r.due(1012), Some(1000));
        assert_eq!(r.due(1500), None);
        assert_eq!(r.due(3100), Some(3000));
        let mut resumed = StatsReporter::new("B", 1000, 2500);
        assert_eq!(resumed.due(2900), None);
        assert_eq!(resumed.due(3000), Some(3000));
    }
}
