//! Side channels: typed messages that travel beside observations and actions in
//! `UnityRLInputProto.side_channel` / `UnityRLOutputProto.side_channel`.
//!
//! Framing (protocol.md §9.1): a concatenation of records, each a 16-byte channel GUID in
//! .NET byte order (`Uuid::to_bytes_le`), an int32 little-endian payload length, the payload.

mod engine_config;
mod environment_parameters;
mod float_properties;
mod message;
mod raw_bytes;
mod stats;

pub use engine_config::{EngineConfig, EngineConfigurationChannel};
pub use environment_parameters::{EnvironmentParametersChannel, ParameterValue, Sampler};
pub use float_properties::FloatPropertiesChannel;
pub use message::{IncomingMessage, OutgoingMessage};
pub use raw_bytes::RawBytesChannel;
pub use stats::{StatsAggregation, StatsSideChannel, StatsValue};

use crate::spec::ApiVersion;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// GUID of the engine configuration channel.
pub const ENGINE_CONFIGURATION_ID: Uuid = uuid::uuid!("e951342c-4f7e-11ea-b238-784f4387d1f7");
/// GUID of the environment parameters channel (API >= 1.0.0).
pub const ENVIRONMENT_PARAMETERS_ID: Uuid = uuid::uuid!("534c891e-810f-11ea-a9d0-822485860400");
/// GUID of the legacy float properties channel (how API 0.15 received reset parameters).
pub const FLOAT_PROPERTIES_ID: Uuid = uuid::uuid!("60ccf7d0-4f7e-11ea-b238-784f4387d1f7");
/// GUID of the stats channel (Unity to trainer).
pub const STATS_ID: Uuid = uuid::uuid!("a1d8f7b7-cec8-50f9-b78b-d3e165a78520");
/// GUID of the training analytics channel (trainer to Unity, API >= 1.4.0).
pub const TRAINING_ANALYTICS_ID: Uuid = uuid::uuid!("b664a4a9-d86f-5a5f-95cb-e8353a7e8356");

/// A framing error in side-channel bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SideChannelError {
    #[error("side-channel record at byte {offset} is truncated: {needed} bytes needed, {available} left")]
    Truncated { offset: usize, needed: usize, available: usize },
    #[error("side-channel record at byte {offset} has a negative length {length}")]
    NegativeLength { offset: usize, length: i32 },
}

/// One framed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub channel_id: Uuid,
    pub payload: Vec<u8>,
}

/// Splits side-channel bytes into records.
pub fn parse_records(bytes: &[u8]) -> Result<Vec<Record>, SideChannelError> {
    match parse_records_partial(bytes) {
        (records, None) => Ok(records),
        (_, Some(e)) => Err(e),
    }
}

/// Splits side-channel bytes into records, returning the complete records before a framing
/// error together with the error.
pub fn parse_records_partial(bytes: &[u8]) -> (Vec<Record>, Option<SideChannelError>) {
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let available = bytes.len() - offset;
        if available < 20 {
            return (records, Some(SideChannelError::Truncated { offset, needed: 20, available }));
        }
        let mut guid = [0u8; 16];
        guid.copy_from_slice(&bytes[offset..offset + 16]);
        let length = i32::from_le_bytes(bytes[offset + 16..offset + 20].try_into().expect("4 bytes"));
        if length < 0 {
            return (records, Some(SideChannelError::NegativeLength { offset, length }));
        }
        let start = offset + 20;
        if bytes.len() - start < length as usize {
            let needed = 20 + length as usize;
            return (records, Some(SideChannelError::Truncated { offset, needed, available }));
        }
        records.push(Record {
            channel_id: Uuid::from_bytes_le(guid),
            payload: bytes[start..start + length as usize].to_vec(),
        });
        offset = start + length as usize;
    }
    (records, None)
}

/// Appends one framed record.
pub fn write_record(out: &mut Vec<u8>, channel_id: Uuid, payload: &[u8]) {
    out.extend_from_slice(&channel_id.to_bytes_le());
    out.extend_from_slice(&(payload.len() as i32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A side channel: receives records addressed to its id and queues records to send.
/// Mirrors `mlagents_envs.side_channel.SideChannel`; the same types serve the trainer side
/// and the Unity side (the stand-in scenes).
pub trait SideChannel: Send {
    /// The channel GUID.
    fn channel_id(&self) -> Uuid;
    /// Called for every record addressed to this channel, in order.
    fn on_message_received(&mut self, message: IncomingMessage<'_>);
    /// Takes the records queued for sending, each with the channel id to frame it with
    /// (normally [`SideChannel::channel_id`]; the API version lets a channel use an older
    /// format or channel for an older Unity).
    fn take_outgoing(&mut self, api: ApiVersion) -> Vec<(Uuid, Vec<u8>)>;
}

/// A side channel shared between the environment and the user who reads or writes it.
pub type SharedSideChannel = Arc<Mutex<dyn SideChannel>>;

/// Wraps a channel for sharing; keep the returned `Arc` to use the channel's own methods.
pub fn shared<C: SideChannel + 'static>(channel: C) -> Arc<Mutex<C>> {
    Arc::new(Mutex::new(channel))
}

/// Routes incoming records to registered channels and gathers outgoing ones.
/// Unknown channel ids are logged once per id and skipped.
#[derive(Default)]
pub struct SideChannelManager {
    channels: Vec<SharedSideChannel>,
    warned: HashSet<Uuid>,
}

impl SideChannelManager {
    /// Registers channels; an id registered twice is an error.
    pub fn new(channels: Vec<SharedSideChannel>) -> Result<Self, String> {
        let mut seen = HashSet::new();
        for c in &channels {
            let id = lock(c).channel_id();
            if !seen.insert(id) {
                return Err(format!("side channel {id} is registered twice"));
            }
        }
        Ok(Self { channels, warned: HashSet::new() })
    }

    /// Registers one more channel unless its id is already taken.
    pub fn register(&mut self, channel: SharedSideChannel) -> Result<(), String> {
        let id = lock(&channel).channel_id();
        if self.channels.iter().any(|c| lock(c).channel_id() == id) {
            return Err(format!("side channel {id} is registered twice"));
        }
        self.channels.push(channel);
        Ok(())
    }

    /// Dispatches received side-channel bytes. A framing error is returned; the records
    /// before it have been delivered.
    pub fn process_incoming(&mut self, bytes: &[u8]) -> Result<(), SideChannelError> {
        let (records, error) = parse_records_partial(bytes);
        for record in records {
            match self.channels.iter().find(|c| lock(c).channel_id() == record.channel_id) {
                Some(c) => lock(c).on_message_received(IncomingMessage::new(&record.payload)),
                None => {
                    if self.warned.insert(record.channel_id) {
                        log::warn!(
                            "unknown side channel {} ({} bytes): skipped; further records on it are skipped silently",
                            record.channel_id,
                            record.payload.len()
                        );
                    }
                }
            }
        }
        error.map_or(Ok(()), Err)
    }

    /// Frames everything the channels queued.
    pub fn take_outgoing(&mut self, api: ApiVersion) -> Vec<u8> {
        let mut out = Vec::new();
        for c in &self.channels {
            for (id, payload) in lock(c).take_outgoing(api) {
                write_record(&mut out, id, &payload);
            }
        }
        out
    }
}

/// Locks a channel, recovering from a poisoned mutex (a user thread that panicked while
/// holding it must not take the environment down).
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_is_written_in_dotnet_byte_order() {
        let mut out = Vec::new();
        write_record(&mut out, ENGINE_CONFIGURATION_ID, &[]);
        assert_eq!(&out[..16], &[0x2c, 0x34, 0x51, 0xe9, 0x7e, 0x4f, 0xea, 0x11, 0xb2, 0x38, 0x78, 0x4f, 0x43, 0x87, 0xd1, 0xf7]);
    }

    #[test]
    fn truncated_records_are_errors() {
        let mut out = Vec::new();
        write_record(&mut out, STATS_ID, &[1, 2, 3]);
        assert!(parse_records(&out).is_ok());
        assert!(matches!(parse_records(&out[..out.len() - 1]), Err(SideChannelError::Truncated { .. })));
        assert!(matches!(parse_records(&out[..10]), Err(SideChannelError::Truncated { .. })));
        let mut neg = out.clone();
        neg[16..20].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(matches!(parse_records(&neg), Err(SideChannelError::NegativeLength { .. })));
    }

    #[test]
    fn records_before_a_framing_error_are_delivered() {
        let raw = shared(RawBytesChannel::new(uuid::uuid!("00000000-0000-0000-0000-000000000001")));
        let mut m = SideChannelManager::new(vec![raw.clone()]).unwrap();
        let mut bytes = Vec::new();
        write_record(&mut bytes, raw.lock().unwrap().channel_id(), b"hello");
        bytes.extend_from_slice(&[1, 2, 3]);
        assert!(m.process_incoming(&bytes).is_err());
        assert_eq!(raw.lock().unwrap().take_received(), vec![b"hello".to_vec()]);
    }
}
