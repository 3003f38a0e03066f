//! Unity's side of the protocol: the academy loop of a player built with ML-Agents
//! (decision requests, max steps, episode ends, rewards, side channels) and the gRPC client
//! that connects to the trainer, as `Academy`/`RpcCommunicator` do (protocol.md §5).

use super::scene::{Encoding, Scene, SceneContext};
use crate::comm::convert;
use crate::comm::observation::{float_observation, png_observation};
use crate::comm::side_channel::{
    lock, shared, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, FloatPropertiesChannel,
    ParameterValue, RawBytesChannel, Sampler, SideChannelManager, StatsAggregation, StatsSideChannel, TRAINING_ANALYTICS_ID,
};
use std::sync::Mutex;
use crate::proto::unity_rl_output_proto::ListAgentInfoProto;
use crate::proto::{
    AgentInfoProto, HeaderProto, UnityMessageProto, UnityOutputProto, UnityRlCapabilitiesProto,
    UnityRlInitializationOutputProto, UnityRlOutputProto,
};
use crate::spec::{ApiVersion, ACADEMY_NAME, STATUS_OK};
use bytes::{Buf, BufMut};
use prost::Message;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use uuid::Uuid;

/// GUID of the stand-ins' echo channel: every raw message received on it is sent back.
pub const ECHO_CHANNEL_ID: Uuid = uuid::uuid!("3f07b5c2-8a5e-4d7e-9c36-2f1e5d0a9b71");

const EXCHANGE_PATH: &str = "/communicator_objects.UnityToExternalProto/Exchange";

/// A deliberate misbehaviour, for testing the trainer side (`--fault KIND@N`: at the N-th
/// exchange after the handshake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Exit the process with code 3.
    Exit(u64),
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
}

impl Fault {
    /// Parses `KIND@N`, e.g. `exit@5`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kind, at) = text.split_once('@').ok_or_else(|| format!("fault {text:?}: expected KIND@N"))?;
        let at: u64 = at.parse().map_err(|_| format!("fault {text:?}: N must be a number"))?;
        Ok(match kind {
            "exit" => Self::Exit(at),
            "hang" => Self::Hang(at),
            "garbage" => Self::Garbage(at),
            "nan-reward" => Self::NanReward(at),
            "wrong-observation-size" => Self::WrongObservationSize(at),
            "oversize" => Self::Oversize(at),
            "unknown-side-channel" => Self::UnknownSideChannel(at),
            "malformed-side-channel" => Self::MalformedSideChannel(at),
            _ => return Err(format!("unknown fault kind {kind:?}")),
        })
    }

    fn at(self) -> u64 {
        match self {
            Self::Exit(n)
            | Self::Hang(n)
            | Self::Garbage(n)
            | Self::NanReward(n)
            | Self::WrongObservationSize(n)
            | Self::Oversize(n)
            | Self::UnknownSideChannel(n)
            | Self::MalformedSideChannel(n) => n,
        }
    }
}

/// How the stand-in presents itself and where it connects.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub host: String,
    pub port: u16,
    /// Fixed seed; `None` uses the seed the trainer sends in the handshake.
    pub seed: Option<u64>,
    /// The communication API version to report (e.g. "1.5.0", "1.0.0", "0.15.0").
    pub communication_version: String,
    /// The com.unity.ml-agents package version to report.
    pub package_version: String,
    pub fault: Option<Fault>,
    /// How long to wait for the trainer to accept the connection and answer the handshake.
    pub handshake_timeout: Duration,
    /// How long to wait for the trainer's answer to each later exchange (a trainer updating
    /// a large network may take minutes).
    pub exchange_timeout: Duration,
}

/// Default of [`SimOptions::handshake_timeout`] (`--timeout-wait`).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`SimOptions::exchange_timeout`] (`--exchange-timeout`).
pub const DEFAULT_EXCHANGE_TIMEOUT: Duration = Duration::from_secs(3600);

impl SimOptions {
    pub fn new(port: u16) -> Self {
        Self {
            host: "localhost".into(),
            port,
            seed: None,
            communication_version: "1.5.0".into(),
            package_version: "2.0.1".into(),
            fault: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            exchange_timeout: DEFAULT_EXCHANGE_TIMEOUT,
        }
    }
}

/// Why the stand-in stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum SimExit {
    /// The trainer closed the link (status 400).
    ClosedByTrainer,
    /// The trainer sent QUIT.
    Quit,
}

/// Errors of the Unity side.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot connect to the trainer at {host}:{port}: {detail}")]
    Connect { host: String, port: u16, detail: String },
    #[error("no trainer is listening on port {port} of {host} (start mlagents-learn or mlagents-run first, or check --mlagents-port)")]
    NoTrainer { host: String, port: u16 },
    #[error("the trainer on port {port} did not answer {what} within {seconds} s (is something other than an ML-Agents trainer listening there, or is it stopped?); raise {flag}")]
    Timeout { port: u16, what: &'static str, seconds: u64, flag: &'static str },
    #[error("exchange with the trainer failed: {0}")]
    Rpc(String),
    #[error("the trainer's reply cannot be decoded: {0}")]
    Decode(String),
    #[error("the trainer refused the handshake (status {0}): another environment may already be connected to it on this port, or it does not accept this communication version")]
    Refused(i32),
    #[error("protocol error: {0}")]
    Protocol(String),
}

#[derive(Clone, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// The gRPC link to the trainer. Messages are encoded here (not by tonic) so that a fault can
/// send bytes that are not a message at all.
pub struct UnityClient {
    runtime: tokio::runtime::Runtime,
    grpc: tonic::client::Grpc<tonic::transport::Channel>,
    port: u16,
    /// The limit of the next exchanges and how to raise it.
    timeout: (Duration, &'static str, &'static str),
}

/// Whether an error or one of its causes is a refused TCP connection.
fn is_connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        cause = e.source();
    }
    false
}

impl UnityClient {
    /// Connects once, like Unity (trying each address `host` resolves to), waiting at most
    /// `timeout` for each.
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self, SimError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            SimError::Connect { host: host.into(), port, detail: e.to_string() }
        })?;
        let err = |detail: String| SimError::Connect { host: host.into(), port, detail };
        let addresses: Vec<std::net::SocketAddr> =
            std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).map_err(|e| err(e.to_string()))?.collect();
        let mut last = String::from("no address");
        let mut refused = true;
        for address in addresses {
            let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                .map_err(|e| err(e.to_string()))?
                .connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true);
            // (The timer is made inside the runtime: it needs its clock.)
            match runtime.block_on(async { tokio::time::timeout(timeout, endpoint.connect()).await }) {
                Ok(Ok(channel)) => {
                    let grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(256 << 20);
                    let timeout = (timeout, "the connection and handshake", "--timeout-wait");
                    return Ok(Self { runtime, grpc, port, timeout });
                }
                Ok(Err(e)) => {
                    refused &= is_connection_refused(&e);
                    let cause = std::error::Error::source(&e).map(|c| format!(": {c}")).unwrap_or_default();
                    last = format!("{address}: {e}{cause}");
                }
                Err(_) => return Err(SimError::Timeout { port, what: "the connection", seconds: timeout.as_secs(), flag: "--timeout-wait" }),
            }
        }
        if refused && last != "no address" {
            return Err(SimError::NoTrainer { host: host.into(), port });
        }
        Err(err(last))
    }

    /// The limit of the exchanges after the handshake.
    pub fn set_exchange_timeout(&mut self, timeout: Duration) {
        self.timeout = (timeout, "an exchange", "--exchange-timeout");
    }

    /// Sends raw bytes as an Exchange call and returns the raw reply.
    pub fn exchange_raw(&mut self, bytes: Vec<u8>) -> Result<Vec<u8>, SimError> {
        let grpc = &mut self.grpc;
        let (limit, what, flag) = self.timeout;
        let call = async {
            grpc.ready().await.map_err(|e| SimError::Rpc(e.to_string()))?;
            let path = tonic::codegen::http::uri::PathAndQuery::from_static(EXCHANGE_PATH);
            grpc.unary(tonic::Request::new(bytes), path, RawCodec)
                .await
                .map(|r| r.into_inner())
                .map_err(|s| SimError::Rpc(format!("{:?}: {}", s.code(), s.message())))
        };
        self.runtime
            .block_on(async { tokio::time::timeout(limit, call).await })
            .unwrap_or(Err(SimError::Timeout { port: self.port, what, seconds: limit.as_secs(), flag }))
    }

    /// Sends one message and decodes the reply.
    pub fn exchange(&mut self, message: &UnityMessageProto) -> Result<UnityMessageProto, SimError> {
        let reply = self.exchange_raw(message.encode_to_vec())?;
        UnityMessageProto::decode(reply.as_slice()).map_err(|e| SimError::Decode(e.to_string()))
    }
}

struct AgentState {
    id: i32,
    step_count: u32,
    last_action: Option<(Vec<f32>, Vec<i32>)>,
}

/// Runs a scene against the trainer until it closes the link.
pub fn run(mut scene: Box<dyn Scene>, options: SimOptions) -> Result<SimExit, SimError> {
    let mut client = UnityClient::connect(&options.host, options.port, options.handshake_timeout)?;
    let behaviors = scene.behaviors();
    let agent_defs = scene.agents();
    let unity_api = ApiVersion::parse(&options.communication_version).map_err(|e| SimError::Protocol(e.to_string()))?;

    // Handshake call #1: academy name, versions, capabilities.
    let capabilities = (unity_api.major >= 1).then(|| UnityRlCapabilitiesProto {
        base_rl_capabilities: true,
        concatenated_png_observations: unity_api >= ApiVersion::new(1, 1, 0),
        compressed_channel_mapping: unity_api >= ApiVersion::new(1, 2, 0),
        hybrid_actions: unity_api >= ApiVersion::new(1, 3, 0),
        training_analytics: unity_api >= ApiVersion::new(1, 4, 0),
        variable_length_observation: unity_api >= ApiVersion::new(1, 5, 0),
        multi_agent_groups: unity_api >= ApiVersion::new(1, 5, 0),
    });
    let first = UnityMessageProto {
        header: Some(ok_header()),
        unity_output: Some(UnityOutputProto {
            rl_output: None,
            rl_initialization_output: Some(UnityRlInitializationOutputProto {
                name: ACADEMY_NAME.into(),
                communication_version: options.communication_version.clone(),
                log_path: String::new(),
                brain_parameters: vec![],
                package_version: options.package_version.clone(),
                capabilities,
            }),
        }),
        unity_input: None,
    };
    let reply = client.exchange(&first)?;
    let status1 = reply.header.as_ref().map_or(0, |h| h.status);
    let init = reply.unity_input.and_then(|i| i.rl_initialization_input);
    // Call #2 is made whatever the first status was; both are checked afterwards.
    let second = client.exchange(&UnityMessageProto { header: Some(ok_header()), ..Default::default() })?;
    let status2 = second.header.as_ref().map_or(0, |h| h.status);
    if status1 != STATUS_OK || status2 != STATUS_OK {
        return Err(SimError::Refused(if status1 != STATUS_OK { status1 } else { status2 }));
    }
    let init = init.ok_or_else(|| SimError::Protocol("handshake reply without initialization input".into()))?;
    let trainer_caps = init.capabilities.unwrap_or_default();
    let hybrid_capable = trainer_caps.hybrid_actions && unity_api >= ApiVersion::new(1, 3, 0);
    let png_concat = trainer_caps.concatenated_png_observations;
    for b in &behaviors {
        if b.actions.is_hybrid() && !hybrid_capable {
            return Err(SimError::Protocol(format!(
                "behavior {} has hybrid actions, which the trainer (API {}) does not support",
                b.name, init.communication_version
            )));
        }
    }
    client.set_exchange_timeout(options.exchange_timeout);
    let seed = options.seed.unwrap_or(init.seed as u64);
    log::info!(
        "connected: trainer API {} package {}, seed {seed}",
        init.communication_version,
        init.package_version
    );

    let parameters = shared(EnvironmentParametersChannel::new());
    let stats = shared(StatsSideChannel::new());
    let engine = shared(EngineConfigurationChannel::new());
    let float_properties = shared(FloatPropertiesChannel::new());
    let echo = shared(RawBytesChannel::new(ECHO_CHANNEL_ID));
    // Unity registers the analytics channel and only records what arrives on it.
    let analytics = shared(RawBytesChannel::new(TRAINING_ANALYTICS_ID));
    let mut channels = SideChannelManager::new(vec![
        parameters.clone(),
        stats.clone(),
        engine.clone(),
        float_properties.clone(),
        echo.clone(),
        analytics.clone(),
    ])
    .map_err(SimError::Protocol)?;
    let mut ctx = SceneContext::new(agent_defs.len(), ChaCha8Rng::seed_from_u64(seed), parameters.clone(), stats.clone());
    let mut agents: Vec<AgentState> =
        (0..agent_defs.len()).map(|i| AgentState { id: i as i32, step_count: 0, last_action: None }).collect();
    let mut next_id = agent_defs.len() as i32;
    let mut announced: BTreeSet<usize> = BTreeSet::new();
    let mut pending: Vec<(usize, AgentInfoProto)> = vec![];
    let mut exchanges: u64 = 0;
    let mut pending_reply = second.unity_input.and_then(|i| i.rl_input);

    let mut reported_parameters = BTreeMap::new();
    let mut reported_engine = EngineConfig::default();
    let mut apply_side_channels = |channels: &mut SideChannelManager, bytes: &[u8]| {
        if let Err(e) = channels.process_incoming(bytes) {
            log::warn!("side channels from the trainer: {e}");
        }
        if unity_api.major == 0 {
            // Unity 0.15 took reset parameters on the float-properties channel.
            let props = lock(&float_properties);
            for key in props.list_properties() {
                if let Some(v) = props.get_property(&key) {
                    lock(&parameters).receive(&key, ParameterValue::Float(v));
                }
            }
        }
        for record in lock(&analytics).take_received() {
            log::debug!("training analytics record of {} bytes", record.len());
        }
        let received = lock(&echo).take_received();
        for message in received {
            lock(&echo).send_raw_data(message);
        }
        report_received_settings(&parameters, &engine, &stats, &mut reported_parameters, &mut reported_engine);
    };

    let mut academy_step: u64 = 0;
    let mut full_reset = true;
    let mut decided: BTreeSet<usize> = BTreeSet::new();
    loop {
        // The trainer's reply to the previous call: side channels first, then the command.
        let mut actions: BTreeMap<String, Vec<crate::proto::AgentActionProto>> = BTreeMap::new();
        if let Some(input) = pending_reply.take() {
            apply_side_channels(&mut channels, &input.side_channel);
            match input.command {
                1 => full_reset = true,
                2 => return Ok(SimExit::Quit),
                _ => actions = input.agent_actions.into_iter().map(|(k, v)| (k, v.value)).collect(),
            }
        }
        if full_reset {
            full_reset = false;
            scene.reset(&mut ctx);
            for (i, a) in agents.iter_mut().enumerate() {
                a.step_count = 0;
                a.last_action = None;
                ctx.clear_agent(i);
            }
            pending.clear();
            academy_step = 0;
            actions.clear();
            decided.clear();
        } else {
            // AgentAct: agents that decided get their action; the others repeat theirs.
            let mut cursor: BTreeMap<usize, usize> = BTreeMap::new();
            for (i, def) in agent_defs.iter().enumerate() {
                let action = if decided.contains(&i) {
                    let behavior = &behaviors[def.behavior];
                    let k = cursor.entry(def.behavior).or_insert(0);
                    let proto = actions.get(&behavior.name).and_then(|l| l.get(*k));
                    *k += 1;
                    let action = match proto {
                        Some(p) => convert::agent_action_from_proto(p, &behavior.actions),
                        None => {
                            log::error!("no action for agent {} of {}; using zeros", agents[i].id, behavior.name);
                            (vec![0.0; behavior.actions.continuous_size], vec![0; behavior.actions.discrete_size()])
                        }
                    };
                    agents[i].last_action = Some(action.clone());
                    Some(action)
                } else if def.take_actions_between_decisions {
                    agents[i].last_action.clone()
                } else {
                    None
                };
                if let Some((c, d)) = action {
                    scene.act(i, &c, &d, &mut ctx);
                }
                if ctx.take_ended(i) {
                    end_episode(i, false, &mut *scene, &mut ctx, &mut agents, &agent_defs, &mut next_id, &mut pending);
                }
                if def.max_step > 0 && agents[i].step_count >= def.max_step {
                    end_episode(i, true, &mut *scene, &mut ctx, &mut agents, &agent_defs, &mut next_id, &mut pending);
                }
            }
            scene.physics_step(&mut ctx);
            for i in 0..agent_defs.len() {
                if ctx.take_ended(i) {
                    end_episode(i, false, &mut *scene, &mut ctx, &mut agents, &agent_defs, &mut next_id, &mut pending);
                }
            }
            academy_step += 1;
        }

        // AgentPreStep + SendState: agents whose decision is due.
        let mut infos: BTreeMap<usize, Vec<AgentInfoProto>> = BTreeMap::new();
        for (b, info) in pending.drain(..) {
            infos.entry(b).or_default().push(info);
        }
        decided.clear();
        for (i, def) in agent_defs.iter().enumerate() {
            agents[i].step_count += 1;
            if academy_step.is_multiple_of(def.decision_period.max(1) as u64) && scene.wants_decision(i) {
                let info = agent_info(i, false, false, &mut *scene, &mut ctx, &agents, &agent_defs);
                infos.entry(def.behavior).or_default().push(info);
                decided.insert(i);
            }
        }
        if infos.is_empty() {
            continue;
        }

        // DecideAction: one exchange with the trainer.
        exchanges += 1;
        let fault = options.fault.filter(|f| f.at() == exchanges);
        match fault {
            Some(Fault::Exit(_)) => std::process::exit(3),
            Some(Fault::Hang(_)) => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            _ => {}
        }
        let mut output = UnityRlOutputProto::default();
        let mut new_brains = vec![];
        for (b, behavior) in behaviors.iter().enumerate() {
            let list = infos.remove(&b).unwrap_or_default();
            if !list.is_empty() && announced.insert(b) {
                new_brains.push(convert::brain_parameters_to_proto(&behavior.name, &behavior.actions, hybrid_capable));
            }
            if announced.contains(&b) {
                output.agent_infos.insert(behavior.name.clone(), ListAgentInfoProto { value: list });
            }
        }
        output.side_channel = channels.take_outgoing(unity_api);
        if !png_concat {
            downgrade_png(&mut output);
        }
        apply_fault(fault, &mut output);
        let message = UnityMessageProto {
            header: Some(ok_header()),
            unity_output: Some(UnityOutputProto {
                rl_output: Some(output),
                rl_initialization_output: (!new_brains.is_empty()).then(|| UnityRlInitializationOutputProto {
                    brain_parameters: new_brains,
                    ..Default::default()
                }),
            }),
            unity_input: None,
        };
        let reply = if let Some(Fault::Garbage(_)) = fault {
            let bytes = client.exchange_raw(vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])?;
            UnityMessageProto::decode(bytes.as_slice()).map_err(|e| SimError::Decode(e.to_string()))?
        } else {
            client.exchange(&message)?
        };
        if reply.header.as_ref().map_or(0, |h| h.status) != STATUS_OK {
            return Ok(SimExit::ClosedByTrainer);
        }
        // A reply without rl_input makes Unity skip side channels, command and actions.
        pending_reply = Some(reply.unity_input.and_then(|i| i.rl_input).unwrap_or_default());
    }
}

#[allow(clippy::too_many_arguments)]
fn end_episode(
    i: usize,
    interrupted: bool,
    scene: &mut dyn Scene,
    ctx: &mut SceneContext,
    agents: &mut [AgentState],
    defs: &[super::scene::AgentDef],
    next_id: &mut i32,
    pending: &mut Vec<(usize, AgentInfoProto)>,
) {
    let info = agent_info(i, true, interrupted, scene, ctx, agents, defs);
    pending.push((defs[i].behavior, info));
    agents[i].step_count = 0;
    agents[i].last_action = None;
    if defs[i].new_id_per_episode {
        agents[i].id = *next_id;
        *next_id += 1;
    }
    scene.episode_begin(i, ctx);
    ctx.clear_agent(i);
}

fn agent_info(
    i: usize,
    done: bool,
    interrupted: bool,
    scene: &mut dyn Scene,
    ctx: &mut SceneContext,
    agents: &[AgentState],
    defs: &[super::scene::AgentDef],
) -> AgentInfoProto {
    let behaviors = scene.behaviors();
    let behavior = &behaviors[defs[i].behavior];
    let values = scene.observe(i);
    let observations = behavior
        .observations
        .iter()
        .zip(values)
        .map(|(def, data)| match def.encoding {
            Encoding::Floats => float_observation(&def.spec, data),
            Encoding::Png => png_observation(&def.spec, &data),
        })
        .collect();
    let (reward, group_reward) = ctx.take_reward(i);
    AgentInfoProto {
        reward,
        done,
        max_step_reached: interrupted,
        id: agents[i].id,
        action_mask: if done { vec![] } else { scene.action_mask(i) },
        observations,
        group_id: defs[i].group_id,
        group_reward,
    }
}

/// Without the concatenated-PNG capability, images of more than 3 channels go uncompressed.
fn downgrade_png(output: &mut UnityRlOutputProto) {
    for list in output.agent_infos.values_mut() {
        for info in &mut list.value {
            for obs in &mut info.observations {
                if obs.compression_type == 1 && obs.shape.len() == 3 && obs.shape[2] > 3 {
                    if let Ok(values) = crate::comm::observation::decode(obs) {
                        obs.compression_type = 0;
                        obs.compressed_channel_mapping.clear();
                        obs.observation_data = Some(crate::proto::observation_proto::ObservationData::FloatData(
                            crate::proto::observation_proto::FloatData { data: values },
                        ));
                    }
                }
            }
        }
    }
}

fn apply_fault(fault: Option<Fault>, output: &mut UnityRlOutputProto) {
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
        _ => {}
    }
}

/// Reports, as stats, the environment parameters and engine settings that changed, so the
/// trainer side can see what the scene received (`Sim/Parameter/<key>`: the float value, or
/// a sampler's mean; `Sim/Engine/<setting>`).
fn report_received_settings(
    parameters: &Mutex<EnvironmentParametersChannel>,
    engine: &Mutex<EngineConfigurationChannel>,
    stats: &Mutex<StatsSideChannel>,
    reported_parameters: &mut BTreeMap<String, ParameterValue>,
    reported_engine: &mut EngineConfig,
) {
    let mut stats = lock(stats);
    for (key, value) in lock(parameters).received() {
        if reported_parameters.get(&key) == Some(&value) {
            continue;
        }
        let mean = match &value {
            ParameterValue::Float(v) => *v,
            ParameterValue::Sampled { sampler, .. } => match sampler {
                Sampler::Uniform { min, max } => (min + max) / 2.0,
                Sampler::Gaussian { mean, .. } => *mean,
                Sampler::MultiRangeUniform { intervals } => {
                    intervals.iter().map(|(a, b)| (a + b) / 2.0).sum::<f32>() / intervals.len().max(1) as f32
                }
            },
        };
        stats.add(&format!("Sim/Parameter/{key}"), mean, StatsAggregation::MostRecent);
        reported_parameters.insert(key, value);
    }
    let received = lock(engine).received();
    if received != *reported_engine {
        let settings = [
            ("Width", received.width.map(|v| v as f32)),
            ("Height", received.height.map(|v| v as f32)),
            ("Quality Level", received.quality_level.map(|v| v as f32)),
            ("Time Scale", received.time_scale),
            ("Target Frame Rate", received.target_frame_rate.map(|v| v as f32)),
            ("Capture Frame Rate", received.capture_frame_rate.map(|v| v as f32)),
        ];
        for (name, value) in settings {
            if let Some(v) = value {
                stats.add(&format!("Sim/Engine/{name}"), v, StatsAggregation::MostRecent);
            }
        }
        *reported_engine = received;
    }
}

fn ok_header() -> HeaderProto {
    HeaderProto { status: STATUS_OK, message: String::new() }
}
