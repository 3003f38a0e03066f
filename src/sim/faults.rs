//! Deliberate misbehaviours of the stand-in (`mlagents-sim --fault KIND@N`), for testing how
//! the trainer side copes: a dead or hung environment, undecodable or oversized messages,
//! NaN rewards, wrong observation sizes, unknown or malformed side channels, duplicate agent
//! ids, and teams whose agents are spawned late.

use crate::proto::UnityRlOutputProto;
use bytes::BufMut;
use uuid::Uuid;

/// A deliberate misbehaviour, for testing the trainer side (`--fault KIND@N`: at the N-th
/// exchange after the handshake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Exit the process with code 3.
    Exit(u64),
    /// Exit the process with code 3 on receiving the N-th reset command (the first is the one
    /// every session starts with; the later ones a lesson change or a team change asks for).
    ExitAtReset(u64),
    /// Stop answering (sleep forever).
    Hang(u64),
    /// Send bytes that are not a protobuf message.
    Garbage(u64),
    /// Send a NaN reward.
    NanReward(u64),
    /// Send one observation value too few.
    WrongObservationSize(u64),
    /// Pad the message to 5 MiB (over gRPC's default 4 MiB limit).
    Oversize(u64),
    /// Add a record on a channel nobody registered.
    UnknownSideChannel(u64),
    /// Append a truncated side-channel record.
    MalformedSideChannel(u64),
    /// Send the first agent info twice (one agent asks for two decisions).
    DuplicateAgent(u64),
    /// From exchange N on, the first observation value of every agent is `f32::MAX` (finite,
    /// but past what training arithmetic holds).
    HugeObservation(u64),
    /// From exchange N on, every agent's reward is `f32::MAX`.
    HugeReward(u64),
    /// At exchange N the player ends the session as the Editor does when play mode stops: a
    /// message with status 400, then it leaves.
    LeavePlayMode(u64),
    /// The agents of every team but team 0 are spawned at exchange N: until then they send
    /// nothing, so their behavior (and its brain parameters) first appears then, as in Unity.
    LateTeam(u64),
}

impl Fault {
    /// Parses `KIND@N`, e.g. `exit@5`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kind, at) = text.split_once('@').ok_or_else(|| format!("fault {text:?}: expected KIND@N"))?;
        let at: u64 = at.parse().map_err(|_| format!("fault {text:?}: N must be a number"))?;
        Ok(match kind {
            "exit" => Self::Exit(at),
            "exit-at-reset" => Self::ExitAtReset(at),
            "hang" => Self::Hang(at),
            "garbage" => Self::Garbage(at),
            "nan-reward" => Self::NanReward(at),
            "wrong-observation-size" => Self::WrongObservationSize(at),
            "oversize" => Self::Oversize(at),
            "unknown-side-channel" => Self::UnknownSideChannel(at),
            "malformed-side-channel" => Self::MalformedSideChannel(at),
            "duplicate-agent" => Self::DuplicateAgent(at),
            "late-team" => Self::LateTeam(at),
            "leave-play-mode" => Self::LeavePlayMode(at),
            "huge-observation" => Self::HugeObservation(at),
            "huge-reward" => Self::HugeReward(at),
            _ => return Err(format!("unknown fault kind {kind:?}")),
        })
    }

    /// The exchange (counted from 1 after the handshake) the fault happens at.
    pub fn at(self) -> u64 {
        match self {
            Self::Exit(n)
            | Self::ExitAtReset(n)
            | Self::Hang(n)
            | Self::Garbage(n)
            | Self::NanReward(n)
            | Self::WrongObservationSize(n)
            | Self::Oversize(n)
            | Self::UnknownSideChannel(n)
            | Self::MalformedSideChannel(n)
            | Self::DuplicateAgent(n)
            | Self::HugeObservation(n)
            | Self::HugeReward(n)
            | Self::LeavePlayMode(n)
            | Self::LateTeam(n) => n,
        }
    }

    /// Whether the fault acts on exchange `exchange`: its own, or every one from it on for
    /// the faults that last.
    pub fn acts_at(self, exchange: u64) -> bool {
        match self {
            Self::HugeObservation(n) | Self::HugeReward(n) => exchange >= n,
            Self::ExitAtReset(_) => false,
            _ => exchange == self.at(),
        }
    }
}

impl Fault {
    /// Whether the fault acts on receiving reset command number `reset` (from 1).
    pub fn acts_at_reset(self, reset: u64) -> bool {
        self == Self::ExitAtReset(reset)
    }

    /// Acts on the process before the exchange, for the faults that do: exits with code 3,
    /// or stops answering (sleeps forever).
    pub fn act_on_process(self) {
        match self {
            Self::Exit(_) | Self::ExitAtReset(_) => std::process::exit(3),
            Self::Hang(_) => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            _ => {}
        }
    }

    /// The bytes to send instead of the message, for the fault that sends garbage.
    pub fn replacement_bytes(self) -> Option<Vec<u8>> {
        matches!(self, Self::Garbage(_)).then(|| vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])
    }
}

/// Changes an outgoing message as `fault` asks (faults that act on the process or the
/// bytes, not the message, leave it as it is).
pub fn apply(fault: Option<Fault>, output: &mut UnityRlOutputProto) {
    match fault {
        Some(Fault::NanReward(_)) => {
            if let Some(info) = output.agent_infos.values_mut().flat_map(|l| l.value.iter_mut()).next() {
                info.reward = f32::NAN;
            }
        }
        Some(Fault::WrongObservationSize(_)) => {
            if let Some(info) = output.agent_infos.values_mut().flat_map(|l| l.value.iter_mut()).next() {
                if let Some(crate::proto::observation_proto::ObservationData::FloatData(f)) =
                    info.observations.first_mut().and_then(|o| o.observation_data.as_mut())
                {
                    f.data.pop();
                }
            }
        }
        Some(Fault::Oversize(_)) => {
            let mut payload = Vec::new();
            payload.put_bytes(0, 5 << 20);
            crate::comm::side_channel::write_record(&mut output.side_channel, Uuid::from_u128(0xdead), &payload);
        }
        Some(Fault::UnknownSideChannel(_)) => {
            crate::comm::side_channel::write_record(&mut output.side_channel, Uuid::from_u128(0xbeef), b"who am I");
        }
        Some(Fault::MalformedSideChannel(_)) => {
            output.side_channel.extend_from_slice(&[1, 2, 3, 4, 5]);
        }
        Some(Fault::HugeObservation(_)) => {
            for info in output.agent_infos.values_mut().flat_map(|l| l.value.iter_mut()) {
                if let Some(crate::proto::observation_proto::ObservationData::FloatData(f)) = info.observations.first_mut().and_then(|o| o.observation_data.as_mut()) {
                    if let Some(first) = f.data.first_mut() {
                        *first = f32::MAX;
                    }
                }
            }
        }
        Some(Fault::HugeReward(_)) => {
            for info in output.agent_infos.values_mut().flat_map(|l| l.value.iter_mut()) {
                info.reward = f32::MAX;
            }
        }
        Some(Fault::DuplicateAgent(_)) => {
            if let Some(list) = output.agent_infos.values_mut().find(|l| l.value.iter().any(|i| !i.done)) {
                let first = list.value.iter().find(|i| !i.done).cloned().expect("found above");
                list.value.push(first);
            }
        }
        _ => {}
    }
}

