//! Stats channel (protocol.md §9.5): Unity's `StatsRecorder.Add(key, value, aggregation)`.
//! Unity to trainer. The same type records on the Unity side and collects on ours.

use super::{IncomingMessage, OutgoingMessage, SideChannel, STATS_ID};
use crate::spec::ApiVersion;
use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

/// How the trainer aggregates the values of one key over a summary period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StatsAggregation {
    Average,
    MostRecent,
    Sum,
    Histogram,
}

impl StatsAggregation {
    pub fn to_wire(self) -> i32 {
        match self {
            Self::Average => 0,
            Self::MostRecent => 1,
            Self::Sum => 2,
            Self::Histogram => 3,
        }
    }

    pub fn from_wire(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Average,
            1 => Self::MostRecent,
            2 => Self::Sum,
            3 => Self::Histogram,
            _ => return None,
        })
    }

    /// Aggregates values as the trainer's stats reporter does (histograms report their mean).
    pub fn aggregate(self, values: &[f32]) -> Option<f32> {
        if values.is_empty() {
            return None;
        }
        Some(match self {
            Self::Average | Self::Histogram => values.iter().sum::<f32>() / values.len() as f32,
            Self::MostRecent => *values.last().expect("non-empty"),
            Self::Sum => values.iter().sum(),
        })
    }
}

/// One recorded value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StatsValue {
    pub value: f32,
    pub aggregation: StatsAggregation,
}

/// Collects stats (trainer side) or records them for sending (Unity side).
#[derive(Debug, Default)]
pub struct StatsSideChannel {
    received: BTreeMap<String, Vec<StatsValue>>,
    pending: Vec<(String, StatsValue)>,
}

impl StatsSideChannel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Unity side: records a value to send.
    pub fn add(&mut self, key: &str, value: f32, aggregation: StatsAggregation) {
        self.pending.push((key.into(), StatsValue { value, aggregation }));
    }

    /// Trainer side: takes the stats received since the last call, per key in arrival order.
    pub fn get_and_reset_stats(&mut self) -> BTreeMap<String, Vec<StatsValue>> {
        std::mem::take(&mut self.received)
    }
}

impl SideChannel for StatsSideChannel {
    fn channel_id(&self) -> Uuid {
        STATS_ID
    }

    fn on_message_received(&mut self, mut msg: IncomingMessage<'_>) {
        let key = msg.read_string();
        let value = msg.read_f32();
        let wire = msg.read_i32();
        match StatsAggregation::from_wire(wire) {
            Some(aggregation) if !msg.truncated() => {
                self.received.entry(key).or_default().push(StatsValue { value, aggregation })
            }
            _ => log::warn!("stats: malformed record for key {key:?} (aggregation {wire}) skipped"),
        }
    }

    fn take_outgoing(&mut self, _api: ApiVersion) -> Vec<(Uuid, Vec<u8>)> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(k, v)| {
                let mut m = OutgoingMessage::new();
                m.write_string(&k).write_f32(v.value).write_i32(v.aggregation.to_wire());
                (STATS_ID, m.into_bytes())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{shared, SideChannelManager};
    use super::*;

    #[test]
    fn golden_record_round_trips() {
        let unity = shared(StatsSideChannel::new());
        unity.lock().unwrap().add("a/b", 2.5, StatsAggregation::Sum);
        let bytes = SideChannelManager::new(vec![unity]).unwrap().take_outgoing(ApiVersion::new(1, 5, 0));
        let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(hex, "b7f7d8a1c8cef950b78bd3e165a785200f00000003000000612f620000204002000000");
        let ours = shared(StatsSideChannel::new());
        SideChannelManager::new(vec![ours.clone()]).unwrap().process_incoming(&bytes).unwrap();
        let stats = ours.lock().unwrap().get_and_reset_stats();
        assert_eq!(stats["a/b"], vec![StatsValue { value: 2.5, aggregation: StatsAggregation::Sum }]);
    }

    #[test]
    fn aggregation_methods() {
        let v = [1.0, 2.0, 6.0];
        assert_eq!(StatsAggregation::Average.aggregate(&v), Some(3.0));
        assert_eq!(StatsAggregation::MostRecent.aggregate(&v), Some(6.0));
        assert_eq!(StatsAggregation::Sum.aggregate(&v), Some(9.0));
        assert_eq!(StatsAggregation::Histogram.aggregate(&v), Some(3.0));
        assert_eq!(StatsAggregation::Sum.aggregate(&[]), None);
    }
}
