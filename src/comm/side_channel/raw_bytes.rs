//! A raw-bytes channel on a user-chosen GUID (protocol.md §9.7): opaque payloads, both ways.

use super::{IncomingMessage, SideChannel};
use crate::spec::ApiVersion;
use uuid::Uuid;

/// Sends and receives opaque byte messages.
#[derive(Debug)]
pub struct RawBytesChannel {
    id: Uuid,
    received: Vec<Vec<u8>>,
    pending: Vec<Vec<u8>>,
}

impl RawBytesChannel {
    pub fn new(id: Uuid) -> Self {
        Self { id, received: vec![], pending: vec![] }
    }

    /// Queues a message for the other side.
    pub fn send_raw_data(&mut self, data: Vec<u8>) {
        self.pending.push(data);
    }

    /// Takes the messages received since the last call.
    pub fn take_received(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.received)
    }
}

impl SideChannel for RawBytesChannel {
    fn channel_id(&self) -> Uuid {
        self.id
    }

    fn on_message_received(&mut self, msg: IncomingMessage<'_>) {
        self.received.push(msg.raw().to_vec());
    }

    fn take_outgoing(&mut self, _api: ApiVersion) -> Vec<(Uuid, Vec<u8>)> {
        std::mem::take(&mut self.pending).into_iter().map(|p| (self.id, p)).collect()
    }
}
