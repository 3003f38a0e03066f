//! Engine configuration channel (protocol.md §9.3): resolution, quality level, time scale,
//! target and capture frame rates. Trainer to Unity; one typed record per setting for
//! API >= 1.0.0, a single 5-field record for API 0.15.

use super::{IncomingMessage, OutgoingMessage, SideChannel, ENGINE_CONFIGURATION_ID};
use crate::spec::ApiVersion;
use uuid::Uuid;

const SCREEN_RESOLUTION: i32 = 0;
const QUALITY_LEVEL: i32 = 1;
const TIME_SCALE: i32 = 2;
const TARGET_FRAME_RATE: i32 = 3;
const CAPTURE_FRAME_RATE: i32 = 4;

/// Engine settings. `None` leaves a setting as Unity has it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EngineConfig {
    pub width: Option<i32>,
    pub height: Option<i32>,
    pub quality_level: Option<i32>,
    pub time_scale: Option<f32>,
    pub target_frame_rate: Option<i32>,
    pub capture_frame_rate: Option<i32>,
}

impl EngineConfig {
    /// What `mlagents-learn` sends by default: 84x84, quality 5, time scale 20, target frame
    /// rate -1, capture frame rate 60.
    pub fn mlagents_learn_default() -> Self {
        Self {
            width: Some(84),
            height: Some(84),
            quality_level: Some(5),
            time_scale: Some(20.0),
            target_frame_rate: Some(-1),
            capture_frame_rate: Some(60),
        }
    }
}

/// Sends engine settings to Unity; on the Unity side, holds the settings received.
#[derive(Debug, Default)]
pub struct EngineConfigurationChannel {
    pending: Option<EngineConfig>,
    received: EngineConfig,
    unknown_types: Vec<i32>,
}

impl EngineConfigurationChannel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues settings; they reach Unity with the next reset or step.
    pub fn set_configuration(&mut self, config: EngineConfig) {
        let p = self.pending.get_or_insert_with(EngineConfig::default);
        macro_rules! merge { ($($f:ident),*) => { $( if config.$f.is_some() { p.$f = config.$f; } )* } }
        merge!(width, height, quality_level, time_scale, target_frame_rate, capture_frame_rate);
    }

    /// Settings received so far (Unity side).
    pub fn received(&self) -> EngineConfig {
        self.received
    }

    /// Setting types received that this channel does not know (Unity logs a warning).
    pub fn unknown_types(&self) -> &[i32] {
        &self.unknown_types
    }
}

impl SideChannel for EngineConfigurationChannel {
    fn channel_id(&self) -> Uuid {
        ENGINE_CONFIGURATION_ID
    }

    fn on_message_received(&mut self, mut msg: IncomingMessage<'_>) {
        if msg.raw().len() == 20 {
            // API 0.15 layout: width, height, quality, time scale, target frame rate.
            self.received.width = Some(msg.read_i32());
            self.received.height = Some(msg.read_i32());
            self.received.quality_level = Some(msg.read_i32());
            self.received.time_scale = Some(msg.read_f32());
            self.received.target_frame_rate = Some(msg.read_i32());
            return;
        }
        match msg.read_i32() {
            SCREEN_RESOLUTION => {
                self.received.width = Some(msg.read_i32());
                self.received.height = Some(msg.read_i32());
            }
            QUALITY_LEVEL => self.received.quality_level = Some(msg.read_i32()),
            TIME_SCALE => self.received.time_scale = Some(msg.read_f32()),
            TARGET_FRAME_RATE => self.received.target_frame_rate = Some(msg.read_i32()),
            CAPTURE_FRAME_RATE => self.received.capture_frame_rate = Some(msg.read_i32()),
            other => {
                log::warn!("engine configuration: unknown setting type {other}");
                self.unknown_types.push(other);
            }
        }
    }

    fn take_outgoing(&mut self, api: ApiVersion) -> Vec<(Uuid, Vec<u8>)> {
        let Some(c) = self.pending.take() else { return vec![] };
        let id = ENGINE_CONFIGURATION_ID;
        if api.major == 0 {
            let d = EngineConfig::mlagents_learn_default();
            let mut m = OutgoingMessage::new();
            m.write_i32(c.width.or(d.width).unwrap_or(84))
                .write_i32(c.height.or(d.height).unwrap_or(84))
                .write_i32(c.quality_level.or(d.quality_level).unwrap_or(5))
                .write_f32(c.time_scale.or(d.time_scale).unwrap_or(20.0))
                .write_i32(c.target_frame_rate.or(d.target_frame_rate).unwrap_or(-1));
            return vec![(id, m.into_bytes())];
        }
        // One typed record per setting that is set: int32 type, then its values.
        let ints = |kind: i32, values: &[i32]| {
            let mut m = OutgoingMessage::new();
            m.write_i32(kind);
            values.iter().for_each(|v| {
                m.write_i32(*v);
            });
            (id, m.into_bytes())
        };
        let mut out = Vec::new();
        if c.width.is_some() || c.height.is_some() {
            out.push(ints(SCREEN_RESOLUTION, &[c.width.unwrap_or(84), c.height.unwrap_or(84)]));
        }
        if let Some(q) = c.quality_level {
            out.push(ints(QUALITY_LEVEL, &[q]));
        }
        if let Some(t) = c.time_scale {
            let mut m = OutgoingMessage::new();
            m.write_i32(TIME_SCALE).write_f32(t);
            out.push((id, m.into_bytes()));
        }
        if let Some(r) = c.target_frame_rate {
            out.push(ints(TARGET_FRAME_RATE, &[r]));
        }
        if let Some(r) = c.capture_frame_rate {
            out.push(ints(CAPTURE_FRAME_RATE, &[r]));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::SideChannelManager;
    use super::*;
    use crate::comm::side_channel::shared;

    /// The golden bytes of protocol.md §9.3 (what mlagents-learn sends: 84, 84, 5, 20, -1, 60).
    #[test]
    fn matches_mlagents_learn_golden_bytes() {
        let golden = "2c3451e97e4fea11b238784f4387d1f70c0000000000000054000000540000002c3451e97e4fea11b238784f4387d1f70800000001000000050000002c3451e97e4fea11b238784f4387d1f708000000020000000000a0412c3451e97e4fea11b238784f4387d1f70800000003000000ffffffff2c3451e97e4fea11b238784f4387d1f708000000040000003c000000";
        let channel = shared(EngineConfigurationChannel::new());
        channel.lock().unwrap().set_configuration(EngineConfig::mlagents_learn_default());
        let mut manager = SideChannelManager::new(vec![channel]).unwrap();
        let bytes = manager.take_outgoing(ApiVersion::new(1, 5, 0));
        assert_eq!(hex(&bytes), golden);
        // Unity side: the same bytes are understood.
        let unity = shared(EngineConfigurationChannel::new());
        SideChannelManager::new(vec![unity.clone()]).unwrap().process_incoming(&bytes).unwrap();
        assert_eq!(unity.lock().unwrap().received(), EngineConfig::mlagents_learn_default());
    }

    #[test]
    fn legacy_api_gets_one_record() {
        let mut c = EngineConfigurationChannel::new();
        c.set_configuration(EngineConfig { time_scale: Some(3.0), ..Default::default() });
        let out = c.take_outgoing(ApiVersion::new(0, 15, 0));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1.len(), 20);
        let mut unity = EngineConfigurationChannel::new();
        unity.on_message_received(IncomingMessage::new(&out[0].1));
        assert_eq!(unity.received().time_scale, Some(3.0));
        assert_eq!(unity.received().width, Some(84));
    }

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
