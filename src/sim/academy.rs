//! Unity's side of the protocol: the academy loop of a player built with ML-Agents, as
//! Unity's `Academy` runs it (protocol.md §5): the trainer's input applied (side channels,
//! then the command), a reset or one step (agents act, physics, episode ends, max steps),
//! the decisions that are due collected, and one exchange with the trainer. Each phase is a
//! method of [`Academy`]; the link is in [`super::client`], faults in [`super::faults`].

use super::client::UnityClient;
use super::faults;
use super::scene::{AgentDef, BehaviorDef, Encoding, Scene, SceneContext};
use crate::comm::convert;
use crate::comm::observation::{float_observation, png_observation};
use crate::comm::side_channel::{
    lock, shared, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, FloatPropertiesChannel,
    ParameterValue, RawBytesChannel, Sampler, SideChannelManager, StatsAggregation, StatsSideChannel, TRAINING_ANALYTICS_ID,
};
use crate::proto::unity_rl_output_proto::ListAgentInfoProto;
use crate::proto::{
    AgentActionProto, AgentInfoProto, CommandProto, CompressionTypeProto, HeaderProto, UnityMessageProto, UnityOutputProto,
    UnityRlCapabilitiesProto, UnityRlInitializationInputProto, UnityRlInitializationOutputProto, UnityRlInputProto,
    UnityRlOutputProto,
};
use crate::spec::{ApiVersion, ACADEMY_NAME, STATUS_OK};
use prost::Message;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

pub use super::client::SimError;
pub use super::faults::Fault;

/// GUID of the stand-ins' echo channel: every raw message received on it is sent back.
pub const ECHO_CHANNEL_ID: Uuid = uuid::uuid!("3f07b5c2-8a5e-4d7e-9c36-2f1e5d0a9b71");

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
    /// `--fault-once PATH`: the fault acts only in the player that creates PATH when the fault
    /// falls due (a player started again after it, e.g. by a trainer's restart, behaves).
    pub fault_once: Option<std::path::PathBuf>,
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
            fault_once: None,
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
    /// The player ended the session itself (`--fault leave-play-mode@N`).
    LeftPlayMode,
}

/// The status the Editor sends when play mode stops.
const STATUS_LEAVE: i32 = 400;

/// Runs a scene against the trainer until it closes the link.
pub fn run(scene: Box<dyn Scene>, options: SimOptions) -> Result<SimExit, SimError> {
    Academy::connect(scene, options)?.run()
}

/// One agent as the academy tracks it.
struct AgentState {
    id: i32,
    step_count: u32,
    last_action: Option<(Vec<f32>, Vec<i32>)>,
}

/// Actions by behavior name, in the order of that behavior's agents in the last message.
type ActionsByBehavior = BTreeMap<String, Vec<AgentActionProto>>;

/// A scene connected to a trainer, and the academy's state between phases.
pub struct Academy {
    scene: Box<dyn Scene>,
    client: UnityClient,
    fault: Option<Fault>,
    /// Where the fault is claimed (`--fault-once`), until this player has claimed it.
    fault_once: Option<std::path::PathBuf>,
    unity_api: ApiVersion,
    behaviors: Vec<BehaviorDef>,
    agent_defs: Vec<AgentDef>,
    /// What the trainer can take: hybrid actions, concatenated PNG observations.
    hybrid_capable: bool,
    png_concat: bool,
    channels: SimChannels,
    ctx: SceneContext,
    agents: Vec<AgentState>,
    next_id: i32,
    /// Behaviors already announced to the trainer (their brain parameters sent).
    announced: BTreeSet<usize>,
    /// Episode ends to send with the next decisions.
    ended: Vec<(usize, AgentInfoProto)>,
    exchanges: u64,
    /// Reset commands received.
    resets: u64,
    /// The trainer's last reply, applied at the start of the next step.
    reply: Option<UnityRlInputProto>,
    academy_step: u64,
    full_reset: bool,
    /// Agents that asked for a decision in the last exchange.
    decided: BTreeSet<usize>,
}

impl Academy {
    /// Connects to the trainer and makes the two handshake calls.
    pub fn connect(scene: Box<dyn Scene>, options: SimOptions) -> Result<Self, SimError> {
        let mut client = UnityClient::connect(&options.host, options.port, options.handshake_timeout)?;
        let unity_api = ApiVersion::parse(&options.communication_version).map_err(|e| SimError::Protocol(e.to_string()))?;
        let (init, reply) = handshake(&mut client, &options, unity_api)?;
        let behaviors = scene.behaviors();
        let agent_defs = scene.agents();
        let trainer_caps = init.capabilities.unwrap_or_default();
        let hybrid_capable = trainer_caps.hybrid_actions && unity_api >= ApiVersion::new(1, 3, 0);
        if let Some(b) = behaviors.iter().find(|b| b.actions.is_hybrid() && !hybrid_capable) {
            return Err(SimError::Protocol(format!(
                "behavior {} has hybrid actions, which the trainer (API {}) does not support",
                b.name, init.communication_version
            )));
        }
        client.set_exchange_timeout(options.exchange_timeout);
        let seed = options.seed.unwrap_or(init.seed as u64);
        log::info!("connected: trainer API {} package {}, seed {seed}", init.communication_version, init.package_version);
        let channels = SimChannels::new(unity_api)?;
        let ctx = SceneContext::new(agent_defs.len(), ChaCha8Rng::seed_from_u64(seed), channels.parameters.clone(), channels.stats.clone());
        let agents = (0..agent_defs.len()).map(|i| AgentState { id: i as i32, step_count: 0, last_action: None }).collect();
        Ok(Self {
            scene,
            client,
            fault: options.fault,
            fault_once: options.fault_once.clone(),
            unity_api,
            next_id: agent_defs.len() as i32,
            behaviors,
            agent_defs,
            hybrid_capable,
            png_concat: trainer_caps.concatenated_png_observations,
            channels,
            ctx,
            agents,
            announced: BTreeSet::new(),
            ended: vec![],
            exchanges: 0,
            resets: 0,
            reply,
            academy_step: 0,
            full_reset: true,
            decided: BTreeSet::new(),
        })
    }

    /// The academy loop, until the trainer quits or closes the link.
    pub fn run(mut self) -> Result<SimExit, SimError> {
        loop {
            let Some(actions) = self.apply_input() else { return Ok(SimExit::Quit) };
            if self.full_reset {
                self.reset();
            } else {
                self.act_and_step(&actions);
            }
            let infos = self.collect_decisions();
            if infos.is_empty() {
                continue;
            }
            if let Some(exit) = self.exchange(infos)? {
                return Ok(exit);
            }
        }
    }

    /// The trainer's last reply: side channels first, then the command. `None` on QUIT;
    /// otherwise the actions it sent (none after a reset or without a reply).
    fn apply_input(&mut self) -> Option<ActionsByBehavior> {
        let Some(input) = self.reply.take() else { return Some(BTreeMap::new()) };
        self.channels.receive(&input.side_channel);
        match CommandProto::try_from(input.command) {
            Ok(CommandProto::Reset) => {
                self.resets += 1;
                if let Some(fault) = self.fault.filter(|f| f.acts_at_reset(self.resets)).filter(|_| self.claim_fault()) {
                    fault.act_on_process();
                }
                self.full_reset = true;
                Some(BTreeMap::new())
            }
            Ok(CommandProto::Quit) => None,
            _ => Some(input.agent_actions.into_iter().map(|(k, v)| (k, v.value)).collect()),
        }
    }

    /// A full reset: the scene, every agent's count and action, and the academy's step.
    fn reset(&mut self) {
        self.full_reset = false;
        self.scene.reset(&mut self.ctx);
        for (i, a) in self.agents.iter_mut().enumerate() {
            a.step_count = 0;
            a.last_action = None;
            self.ctx.clear_agent(i);
        }
        self.ended.clear();
        self.academy_step = 0;
        self.decided.clear();
    }

    /// One academy step: agents that decided take their action (the others repeat theirs,
    /// if they act between decisions), episodes that ended or reached max steps end, physics
    /// steps.
    fn act_and_step(&mut self, actions: &ActionsByBehavior) {
        let mut cursor: BTreeMap<usize, usize> = BTreeMap::new();
        for i in 0..self.agent_defs.len() {
            if let Some((c, d)) = self.action_of(i, actions, &mut cursor) {
                self.scene.act(i, &c, &d, &mut self.ctx);
            }
            if let Some(interrupted) = self.ctx.take_ended(i) {
                self.end_episode(i, interrupted);
            }
            let max_step = self.agent_defs[i].max_step;
            if max_step > 0 && self.agents[i].step_count >= max_step {
                self.end_episode(i, true);
            }
        }
        self.scene.physics_step(&mut self.ctx);
        for i in 0..self.agent_defs.len() {
            if let Some(interrupted) = self.ctx.take_ended(i) {
                self.end_episode(i, interrupted);
            }
        }
        self.academy_step += 1;
    }

    /// The action agent `i` takes this step: the trainer's (the next of its behavior's list)
    /// when it decided, else its last one when it acts between decisions.
    fn action_of(&mut self, i: usize, actions: &ActionsByBehavior, cursor: &mut BTreeMap<usize, usize>) -> Option<(Vec<f32>, Vec<i32>)> {
        let def = &self.agent_defs[i];
        if !self.decided.contains(&i) {
            return if def.take_actions_between_decisions { self.agents[i].last_action.clone() } else { None };
        }
        let behavior = &self.behaviors[def.behavior];
        let k = cursor.entry(def.behavior).or_insert(0);
        let proto = actions.get(&behavior.name).and_then(|l| l.get(*k));
        *k += 1;
        let action = match proto {
            Some(p) => convert::agent_action_from_proto(p, &behavior.actions),
            None => {
                log::error!("no action for agent {} of {}; using zeros", self.agents[i].id, behavior.name);
                (vec![0.0; behavior.actions.continuous_size], vec![0; behavior.actions.discrete_size()])
            }
        };
        self.agents[i].last_action = Some(action.clone());
        Some(action)
    }

    /// Ends agent `i`'s episode: its last info is queued, its counts cleared, a new id given
    /// where the scene asks for one, and the scene begins its next episode.
    fn end_episode(&mut self, i: usize, interrupted: bool) {
        let info = self.agent_info(i, true, interrupted);
        self.ended.push((self.agent_defs[i].behavior, info));
        self.agents[i].step_count = 0;
        self.agents[i].last_action = None;
        if self.agent_defs[i].new_id_per_episode {
            self.agents[i].id = self.next_id;
            self.next_id += 1;
        }
        self.scene.episode_begin(i, &mut self.ctx);
        self.ctx.clear_agent(i);
    }

    /// AgentPreStep and SendState: the infos to send by behavior, episode ends first, then
    /// the agents whose decision is due.
    fn collect_decisions(&mut self) -> BTreeMap<usize, Vec<AgentInfoProto>> {
        let mut infos: BTreeMap<usize, Vec<AgentInfoProto>> = BTreeMap::new();
        let unspawned = self.unspawned_behaviors();
        for (b, info) in self.ended.drain(..) {
            if !unspawned.contains(&b) {
                infos.entry(b).or_default().push(info);
            }
        }
        self.decided.clear();
        for i in 0..self.agent_defs.len() {
            if unspawned.contains(&self.agent_defs[i].behavior) {
                continue;
            }
            self.agents[i].step_count += 1;
            let period = self.agent_defs[i].decision_period.max(1) as u64;
            if self.academy_step.is_multiple_of(period) && self.scene.wants_decision(i) {
                let info = self.agent_info(i, false, false);
                infos.entry(self.agent_defs[i].behavior).or_default().push(info);
                self.decided.insert(i);
            }
        }
        infos
    }

    /// The behaviors whose agents are not spawned yet (`--fault late-team@N`: every team but
    /// team 0 until the N-th exchange).
    fn unspawned_behaviors(&self) -> BTreeSet<usize> {
        match self.fault {
            Some(Fault::LateTeam(n)) if self.exchanges + 1 < n => {
                self.behaviors.iter().enumerate().filter(|(_, b)| crate::spec::BehaviorName::parse(&b.name).team_id != 0).map(|(k, _)| k).collect()
            }
            _ => BTreeSet::new(),
        }
    }

    /// Whether the fault due now may act: always, unless `--fault-once` names a marker, which
    /// only the first player to create it gets (this one then keeps the fault).
    fn claim_fault(&mut self) -> bool {
        let Some(marker) = &self.fault_once else { return true };
        let claimed = std::fs::OpenOptions::new().write(true).create_new(true).open(marker).is_ok();
        if claimed {
            self.fault_once = None;
        } else {
            self.fault = None;
        }
        claimed
    }

    /// DecideAction: sends the infos (and any fault due now) and keeps the reply for the next
    /// step; `Some` when the trainer closed the link.
    fn exchange(&mut self, infos: BTreeMap<usize, Vec<AgentInfoProto>>) -> Result<Option<SimExit>, SimError> {
        self.exchanges += 1;
        let fault = self.fault.filter(|f| f.acts_at(self.exchanges)).filter(|_| self.claim_fault());
        if let Some(fault) = fault {
            fault.act_on_process();
        }
        let mut message = self.build_output(infos, fault);
        if let Some(Fault::LeavePlayMode(_)) = fault {
            message.header = Some(HeaderProto { status: STATUS_LEAVE, message: "play mode stopped".into() });
            // The trainer answers a close; the player is gone either way.
            let _ = self.client.exchange(&message);
            return Ok(Some(SimExit::LeftPlayMode));
        }
        let reply = match fault.and_then(Fault::replacement_bytes) {
            Some(bytes) => {
                let reply = self.client.exchange_raw(bytes)?;
                UnityMessageProto::decode(reply.as_slice()).map_err(|e| SimError::Decode(e.to_string()))?
            }
            None => self.client.exchange(&message)?,
        };
        if reply.header.as_ref().map_or(0, |h| h.status) != STATUS_OK {
            return Ok(Some(SimExit::ClosedByTrainer));
        }
        // A reply without rl_input makes Unity skip side channels, command and actions.
        self.reply = Some(reply.unity_input.and_then(|i| i.rl_input).unwrap_or_default());
        Ok(None)
    }

    /// The message to the trainer: the infos of announced behaviors (brain parameters of
    /// those seen for the first time), the outgoing side channels.
    fn build_output(&mut self, mut infos: BTreeMap<usize, Vec<AgentInfoProto>>, fault: Option<Fault>) -> UnityMessageProto {
        let mut output = UnityRlOutputProto::default();
        let mut new_brains = vec![];
        for (b, behavior) in self.behaviors.iter().enumerate() {
            let list = infos.remove(&b).unwrap_or_default();
            if !list.is_empty() && self.announced.insert(b) {
                new_brains.push(convert::brain_parameters_to_proto(&behavior.name, &behavior.actions, self.hybrid_capable));
            }
            if self.announced.contains(&b) {
                output.agent_infos.insert(behavior.name.clone(), ListAgentInfoProto { value: list });
            }
        }
        output.side_channel = self.channels.manager.take_outgoing(self.unity_api);
        if !self.png_concat {
            downgrade_png(&mut output);
        }
        faults::apply(fault, &mut output);
        UnityMessageProto {
            header: Some(ok_header()),
            unity_output: Some(UnityOutputProto {
                rl_output: Some(output),
                rl_initialization_output: (!new_brains.is_empty())
                    .then(|| UnityRlInitializationOutputProto { brain_parameters: new_brains, ..Default::default() }),
            }),
            unity_input: None,
        }
    }

    /// Agent `i`'s info: observations as its behavior encodes them, reward, mask, ids.
    fn agent_info(&mut self, i: usize, done: bool, interrupted: bool) -> AgentInfoProto {
        let def = &self.agent_defs[i];
        let behavior = &self.behaviors[def.behavior];
        let values = self.scene.observe(i);
        let observations = behavior
            .observations
            .iter()
            .zip(values)
            .map(|(def, data)| match def.encoding {
                Encoding::Floats => float_observation(&def.spec, data),
                Encoding::Png => png_observation(&def.spec, &data),
            })
            .collect();
        let (reward, group_reward) = self.ctx.take_reward(i);
        AgentInfoProto {
            reward,
            done,
            max_step_reached: interrupted,
            id: self.agents[i].id,
            action_mask: if done { vec![] } else { self.scene.action_mask(i) },
            observations,
            group_id: def.group_id,
            group_reward,
        }
    }
}

/// The two handshake calls: academy name, versions and capabilities, then an empty message;
/// both statuses are checked after the second call, as Unity does. Returns the trainer's
/// initialization input and its reply to the second call.
fn handshake(
    client: &mut UnityClient,
    options: &SimOptions,
    unity_api: ApiVersion,
) -> Result<(UnityRlInitializationInputProto, Option<UnityRlInputProto>), SimError> {
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
    Ok((init, second.unity_input.and_then(|i| i.rl_input)))
}

/// The side channels a Unity player registers, and what the stand-in last reported of the
/// settings received on them.
struct SimChannels {
    manager: SideChannelManager,
    unity_api: ApiVersion,
    parameters: Arc<Mutex<EnvironmentParametersChannel>>,
    stats: Arc<Mutex<StatsSideChannel>>,
    engine: Arc<Mutex<EngineConfigurationChannel>>,
    float_properties: Arc<Mutex<FloatPropertiesChannel>>,
    echo: Arc<Mutex<RawBytesChannel>>,
    /// Unity registers the analytics channel and only records what arrives on it.
    analytics: Arc<Mutex<RawBytesChannel>>,
    reported_parameters: BTreeMap<String, ParameterValue>,
    reported_engine: EngineConfig,
}

impl SimChannels {
    fn new(unity_api: ApiVersion) -> Result<Self, SimError> {
        let parameters = shared(EnvironmentParametersChannel::new());
        let stats = shared(StatsSideChannel::new());
        let engine = shared(EngineConfigurationChannel::new());
        let float_properties = shared(FloatPropertiesChannel::new());
        let echo = shared(RawBytesChannel::new(ECHO_CHANNEL_ID));
        let analytics = shared(RawBytesChannel::new(TRAINING_ANALYTICS_ID));
        let manager = SideChannelManager::new(vec![
            parameters.clone(),
            stats.clone(),
            engine.clone(),
            float_properties.clone(),
            echo.clone(),
            analytics.clone(),
        ])
        .map_err(SimError::Protocol)?;
        Ok(Self {
            manager,
            unity_api,
            parameters,
            stats,
            engine,
            float_properties,
            echo,
            analytics,
            reported_parameters: BTreeMap::new(),
            reported_engine: EngineConfig::default(),
        })
    }

    /// Applies the trainer's side-channel records: parameters (on the float-properties
    /// channel for Unity 0.15), echoes, analytics; then reports the settings received.
    fn receive(&mut self, bytes: &[u8]) {
        if let Err(e) = self.manager.process_incoming(bytes) {
            log::warn!("side channels from the trainer: {e}");
        }
        if self.unity_api.major == 0 {
            // Unity 0.15 took reset parameters on the float-properties channel.
            let props = lock(&self.float_properties);
            for key in props.list_properties() {
                if let Some(v) = props.get_property(&key) {
                    lock(&self.parameters).receive(&key, ParameterValue::Float(v));
                }
            }
        }
        for record in lock(&self.analytics).take_received() {
            log::debug!("training analytics record of {} bytes", record.len());
        }
        let received = lock(&self.echo).take_received();
        for message in received {
            lock(&self.echo).send_raw_data(message);
        }
        report_received_settings(&self.parameters, &self.engine, &self.stats, &mut self.reported_parameters, &mut self.reported_engine);
    }
}

/// Without the concatenated-PNG capability, images of more than 3 channels go uncompressed.
fn downgrade_png(output: &mut UnityRlOutputProto) {
    for list in output.agent_infos.values_mut() {
        for info in &mut list.value {
            for obs in &mut info.observations {
                if obs.compression_type == CompressionTypeProto::Png as i32 && obs.shape.len() == 3 && obs.shape[2] > 3 {
                    if let Ok(values) = crate::comm::observation::decode(obs) {
                        obs.compression_type = CompressionTypeProto::None as i32;
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
