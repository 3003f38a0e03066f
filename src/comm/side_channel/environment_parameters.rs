//! Environment parameters channel (protocol.md §9.4): floats and seeded samplers that a scene
//! reads with `GetWithDefault(key, default)`. Trainer to Unity. For an API 0.15 Unity the
//! float values go out on the legacy float-properties channel instead.

use super::{IncomingMessage, OutgoingMessage, SideChannel, ENVIRONMENT_PARAMETERS_ID, FLOAT_PROPERTIES_ID};
use crate::spec::ApiVersion;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use uuid::Uuid;

const FLOAT: i32 = 0;
const SAMPLER: i32 = 1;
const UNIFORM: i32 = 0;
const GAUSSIAN: i32 = 1;
const MULTI_RANGE_UNIFORM: i32 = 2;

/// A sampler Unity draws a new value from at every read.
#[derive(Debug, Clone, PartialEq)]
pub enum Sampler {
    Uniform { min: f32, max: f32 },
    Gaussian { mean: f32, std_dev: f32 },
    /// Pick an interval (weighted by length), then uniform inside it.
    MultiRangeUniform { intervals: Vec<(f32, f32)> },
}

/// The value of one environment parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum ParameterValue {
    Float(f32),
    Sampled { seed: i32, sampler: Sampler },
}

/// One received parameter with its sampler state (Unity side).
#[derive(Debug, Clone)]
struct Received {
    value: ParameterValue,
    rng: ChaCha8Rng,
}

/// Sends environment parameters (trainer side) and holds those received (Unity side).
#[derive(Debug, Default)]
pub struct EnvironmentParametersChannel {
    pending: Vec<(String, ParameterValue)>,
    received: BTreeMap<String, Received>,
    malformed: usize,
}

impl EnvironmentParametersChannel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a float parameter.
    pub fn set_float_parameter(&mut self, key: &str, value: f32) {
        self.pending.push((key.into(), ParameterValue::Float(value)));
    }

    /// Queues a uniform sampler on `[min, max]`.
    pub fn set_uniform_sampler_parameters(&mut self, key: &str, min: f32, max: f32, seed: i32) {
        self.pending.push((key.into(), ParameterValue::Sampled { seed, sampler: Sampler::Uniform { min, max } }));
    }

    /// Queues a Gaussian sampler.
    pub fn set_gaussian_sampler_parameters(&mut self, key: &str, mean: f32, std_dev: f32, seed: i32) {
        self.pending.push((key.into(), ParameterValue::Sampled { seed, sampler: Sampler::Gaussian { mean, std_dev } }));
    }

    /// Queues a sampler uniform over several intervals.
    pub fn set_multirangeuniform_sampler_parameters(&mut self, key: &str, intervals: &[(f32, f32)], seed: i32) {
        let sampler = Sampler::MultiRangeUniform { intervals: intervals.to_vec() };
        self.pending.push((key.into(), ParameterValue::Sampled { seed, sampler }));
    }

    /// Queues any parameter value.
    pub fn set_parameter(&mut self, key: &str, value: ParameterValue) {
        self.pending.push((key.into(), value));
    }

    /// Unity side: the value of `key` (a new draw for samplers), or `default`.
    pub fn get_with_default(&mut self, key: &str, default: f32) -> f32 {
        match self.received.get_mut(key) {
            None => default,
            Some(r) => match &r.value {
                ParameterValue::Float(v) => *v,
                ParameterValue::Sampled { sampler, .. } => draw(sampler, &mut r.rng),
            },
        }
    }

    /// Unity side: the parameter values received so far.
    pub fn received(&self) -> BTreeMap<String, ParameterValue> {
        self.received.iter().map(|(k, r)| (k.clone(), r.value.clone())).collect()
    }

    /// Unity side: stores a value as if it had been received (the legacy float channel).
    pub fn receive(&mut self, key: &str, value: ParameterValue) {
        let seed = match &value {
            ParameterValue::Sampled { seed, .. } => *seed,
            ParameterValue::Float(_) => 0,
        };
        self.received.insert(key.into(), Received { value, rng: ChaCha8Rng::seed_from_u64(seed as u64) });
    }

    /// Number of records that could not be parsed.
    pub fn malformed_count(&self) -> usize {
        self.malformed
    }
}

fn draw(sampler: &Sampler, rng: &mut ChaCha8Rng) -> f32 {
    match sampler {
        Sampler::Uniform { min, max } => min + (max - min) * rng.random::<f32>(),
        Sampler::Gaussian { mean, std_dev } => {
            // Box-Muller.
            let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
            let u2: f32 = rng.random();
            mean + std_dev * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
        }
        Sampler::MultiRangeUniform { intervals } => {
            let total: f32 = intervals.iter().map(|(a, b)| (b - a).abs()).sum();
            if intervals.is_empty() {
                return 0.0;
            }
            let mut pick = rng.random::<f32>() * total;
            for (a, b) in intervals {
                let len = (b - a).abs();
                if pick <= len {
                    return a + pick.min(len) * (b - a).signum();
                }
                pick -= len;
            }
            intervals[intervals.len() - 1].1
        }
    }
}

fn encode(key: &str, value: &ParameterValue) -> Vec<u8> {
    let mut m = OutgoingMessage::new();
    m.write_string(key);
    match value {
        ParameterValue::Float(v) => {
            m.write_i32(FLOAT).write_f32(*v);
        }
        ParameterValue::Sampled { seed, sampler } => {
            m.write_i32(SAMPLER).write_i32(*seed);
            match sampler {
                Sampler::Uniform { min, max } => {
                    m.write_i32(UNIFORM).write_f32(*min).write_f32(*max);
                }
                Sampler::Gaussian { mean, std_dev } => {
                    m.write_i32(GAUSSIAN).write_f32(*mean).write_f32(*std_dev);
                }
                Sampler::MultiRangeUniform { intervals } => {
                    let flat: Vec<f32> = intervals.iter().flat_map(|(a, b)| [*a, *b]).collect();
                    m.write_i32(MULTI_RANGE_UNIFORM).write_f32_list(&flat);
                }
            }
        }
    }
    m.into_bytes()
}

fn decode(msg: &mut IncomingMessage<'_>) -> Option<(String, ParameterValue)> {
    let key = msg.read_string();
    let value = match msg.read_i32() {
        FLOAT => ParameterValue::Float(msg.read_f32()),
        SAMPLER => {
            let seed = msg.read_i32();
            let sampler = match msg.read_i32() {
                UNIFORM => Sampler::Uniform { min: msg.read_f32(), max: msg.read_f32() },
                GAUSSIAN => Sampler::Gaussian { mean: msg.read_f32(), std_dev: msg.read_f32() },
                MULTI_RANGE_UNIFORM => {
                    let flat = msg.read_f32_list();
                    if !flat.len().is_multiple_of(2) {
                        return None;
                    }
                    Sampler::MultiRangeUniform { intervals: flat.chunks(2).map(|p| (p[0], p[1])).collect() }
                }
                _ => return None,
            };
            ParameterValue::Sampled { seed, sampler }
        }
        _ => return None,
    };
    (!msg.truncated()).then_some((key, value))
}

impl SideChannel for EnvironmentParametersChannel {
    fn channel_id(&self) -> Uuid {
        ENVIRONMENT_PARAMETERS_ID
    }

    fn on_message_received(&mut self, mut msg: IncomingMessage<'_>) {
        match decode(&mut msg) {
            Some((key, value)) => self.receive(&key, value),
            None => {
                self.malformed += 1;
                log::warn!("environment parameters: malformed record of {} bytes skipped", msg.raw().len());
            }
        }
    }

    fn take_outgoing(&mut self, api: ApiVersion) -> Vec<(Uuid, Vec<u8>)> {
        let pending = std::mem::take(&mut self.pending);
        if api.major == 0 {
            return pending
                .into_iter()
                .filter_map(|(key, value)| match value {
                    ParameterValue::Float(v) => {
                        let mut m = OutgoingMessage::new();
                        m.write_string(&key).write_f32(v);
                        Some((FLOAT_PROPERTIES_ID, m.into_bytes()))
                    }
                    ParameterValue::Sampled { .. } => {
                        log::error!("environment parameter {key:?}: samplers need Unity API >= 1.0.0; not sent");
                        None
                    }
                })
                .collect();
        }
        pending.iter().map(|(k, v)| (ENVIRONMENT_PARAMETERS_ID, encode(k, v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Golden payloads of protocol.md §9.4.
    #[test]
    fn payloads_match_golden_bytes() {
        assert_eq!(hex(&encode("k", &ParameterValue::Float(1.5))), "010000006b000000000000c03f");
        let u = ParameterValue::Sampled { seed: 7, sampler: Sampler::Uniform { min: 0.0, max: 2.0 } };
        assert_eq!(hex(&encode("u", &u)), "01000000750100000007000000000000000000000000000040");
        let g = ParameterValue::Sampled { seed: 7, sampler: Sampler::Gaussian { mean: 1.0, std_dev: 0.5 } };
        assert_eq!(hex(&encode("g", &g)), "01000000670100000007000000010000000000803f0000003f");
        let m = ParameterValue::Sampled {
            seed: 7,
            sampler: Sampler::MultiRangeUniform { intervals: vec![(0.0, 1.0), (2.0, 3.0)] },
        };
        assert_eq!(hex(&encode("m", &m)), "010000006d01000000070000000200000004000000000000000000803f0000004000004040");
        for v in [ParameterValue::Float(1.5), u, g, m] {
            let bytes = encode("x", &v);
            assert_eq!(decode(&mut IncomingMessage::new(&bytes)), Some(("x".into(), v)));
        }
    }

    #[test]
    fn samplers_draw_within_range_and_are_seeded() {
        let mut a = EnvironmentParametersChannel::new();
        a.receive("u", ParameterValue::Sampled { seed: 3, sampler: Sampler::Uniform { min: 1.0, max: 2.0 } });
        let mut b = EnvironmentParametersChannel::new();
        b.receive("u", ParameterValue::Sampled { seed: 3, sampler: Sampler::Uniform { min: 1.0, max: 2.0 } });
        for _ in 0..100 {
            let x = a.get_with_default("u", 0.0);
            assert!((1.0..=2.0).contains(&x));
            assert_eq!(x, b.get_with_default("u", 0.0));
        }
        a.receive("m", ParameterValue::Sampled { seed: 1, sampler: Sampler::MultiRangeUniform { intervals: vec![(0.0, 1.0), (5.0, 6.0)] } });
        for _ in 0..100 {
            let x = a.get_with_default("m", -1.0);
            assert!((0.0..=1.0).contains(&x) || (5.0..=6.0).contains(&x), "{x}");
        }
        assert_eq!(a.get_with_default("missing", 4.0), 4.0);
    }

    #[test]
    fn malformed_records_are_counted_not_fatal() {
        let mut c = EnvironmentParametersChannel::new();
        c.on_message_received(IncomingMessage::new(&[1, 0, 0, 0, b'k', 9, 9, 9, 9]));
        assert_eq!(c.malformed_count(), 1);
        assert!(c.received().is_empty());
    }
}
