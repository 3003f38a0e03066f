//! The legacy float-properties channel (protocol.md §9.8): string key + float32 value, both
//! directions. API 0.15 Unity builds receive reset parameters on it.

use super::{IncomingMessage, OutgoingMessage, SideChannel, FLOAT_PROPERTIES_ID};
use crate::spec::ApiVersion;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Key/value floats shared with Unity.
#[derive(Debug, Default)]
pub struct FloatPropertiesChannel {
    properties: BTreeMap<String, f32>,
    pending: Vec<(String, f32)>,
}

impl FloatPropertiesChannel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a property locally and queues it for the other side.
    pub fn set_property(&mut self, key: &str, value: f32) {
        self.properties.insert(key.into(), value);
        self.pending.push((key.into(), value));
    }

    /// The last value set or received for `key`.
    pub fn get_property(&self, key: &str) -> Option<f32> {
        self.properties.get(key).copied()
    }

    /// Every property known.
    pub fn list_properties(&self) -> Vec<String> {
        self.properties.keys().cloned().collect()
    }
}

impl SideChannel for FloatPropertiesChannel {
    fn channel_id(&self) -> Uuid {
        FLOAT_PROPERTIES_ID
    }

    fn on_message_received(&mut self, mut msg: IncomingMessage<'_>) {
        let key = msg.read_string();
        let value = msg.read_f32();
        if msg.truncated() {
            log::warn!("float properties: truncated record of {} bytes skipped", msg.raw().len());
            return;
        }
        self.properties.insert(key, value);
    }

    fn take_outgoing(&mut self, _api: ApiVersion) -> Vec<(Uuid, Vec<u8>)> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(k, v)| {
                let mut m = OutgoingMessage::new();
                m.write_string(&k).write_f32(v);
                (FLOAT_PROPERTIES_ID, m.into_bytes())
            })
            .collect()
    }
}
