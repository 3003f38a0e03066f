//! A scriptable environment API like `mlagents_envs.UnityEnvironment`: behavior specs,
//! `reset`, `step`, `set_actions`, `get_steps`, side channels, `close`; process launching and
//! supervision; and [`VecEnv`], N environments stepped concurrently (`--num-envs`).
//!
//! ```no_run
//! use mlagents::env::{EnvOptions, UnityEnvironment, ActionTuple};
//! let mut env = UnityEnvironment::new(EnvOptions { env: Some("sim:3DBall".into()), ..Default::default() })?;
//! env.reset()?;
//! let behavior = env.behavior_names()[0].clone();
//! let spec = env.behavior_specs()[&behavior].clone();
//! for _ in 0..100 {
//!     let (decisions, _terminals) = env.get_steps(&behavior)?;
//!     env.set_actions(&behavior, ActionTuple::zeros(&spec.action_spec, decisions.len()))?;
//!     env.step()?;
//! }
//! env.close()?;
//! # Ok::<(), mlagents::env::EnvError>(())
//! ```

mod process;
mod steps;
mod vec_env;

pub use process::{find_sim_binary, player_arguments, resolve_executable, EnvProcess, EnvTarget, SIM_PREFIX};
pub use steps::{steps_from_proto, ActionTuple, DecisionSteps, ObservationBatch, TerminalSteps};
pub use vec_env::VecEnv;

use crate::comm::handshake::Agreement;
use crate::comm::side_channel::{SharedSideChannel, SideChannelError, SideChannelManager};
use crate::comm::{convert, BindAddress, CommError, Communicator, DEFAULT_MAX_MESSAGE_SIZE};
use crate::proto::{unity_rl_input_proto::ListAgentActionProto, CommandProto, UnityInputProto, UnityOutputProto, UnityRlInputProto};
use crate::spec::{BehaviorSpec, BASE_ENVIRONMENT_PORT, DEFAULT_EDITOR_PORT, DEFAULT_TIMEOUT_WAIT_SECS};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong with an environment. Each message says what happened and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("{0}")]
    Comm(#[from] CommError),
    #[error("the environment on port {port} did not answer within {secs} s ({during}). It may be stuck, still loading, or slower than the limit; check its log or raise --timeout-wait")]
    Timeout { port: u16, secs: u64, during: String },
    #[error("the environment on port {port} died ({during}): {detail}")]
    ProcessExited { port: u16, during: String, detail: String },
    #[error("cannot find {name}; tried: {}", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    ExecutableNotFound { name: String, tried: Vec<PathBuf> },
    #[error("cannot find the stand-in scenes binary mlagents-sim; tried: {}. Build it (`cargo build --release --bin mlagents-sim`), put it on PATH, or set MLAGENTS_SIM", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    SimNotFound { tried: Vec<PathBuf> },
    #[error("cannot start {program}: {source}")]
    Launch { program: PathBuf, source: std::io::Error },
    #[error("no behavior named {name:?}; the environment has: {known:?}")]
    UnknownBehavior { name: String, known: Vec<String> },
    #[error("invalid actions for behavior {behavior:?}: {detail}")]
    InvalidAction { behavior: String, detail: String },
    #[error("invalid data from the environment: behavior {behavior:?}, agent {agent_id}, {field}: {detail}")]
    InvalidData { behavior: String, agent_id: i32, field: String, detail: String },
    #[error("malformed side-channel data from the environment: {0}")]
    SideChannel(#[from] SideChannelError),
    #[error("invalid options: {0}")]
    Options(String),
    #[error("the environment is closed")]
    Closed,
}

/// How to start and talk to an environment (the arguments of `UnityEnvironment(...)`).
pub struct EnvOptions {
    /// A Unity build path, `sim:SCENE`, or `None` to wait for the Editor on port 5004.
    pub env: Option<String>,
    /// Worker index: the environment listens on `base_port + worker_id`.
    pub worker_id: u32,
    /// First port (`--base-port`): by default 5005 for executables and 5004 for the Editor;
    /// 0 picks a free port (worker_id is then ignored).
    pub base_port: Option<u16>,
    /// Seed sent in the handshake (Unity calls `Random.InitState(seed)`).
    pub seed: i32,
    /// Pass `-nographics -batchmode`.
    pub no_graphics: bool,
    /// Seconds to wait for each message from the environment.
    pub timeout_wait: Duration,
    /// Extra arguments for the player (`--env-args`).
    pub additional_args: Vec<String>,
    /// Folder for `Player-<worker>.log` (`-logFile`).
    pub log_folder: Option<PathBuf>,
    /// Side channels to register besides none (register the built-ins you need).
    pub side_channels: Vec<SharedSideChannel>,
    /// Where to listen; loopback unless explicitly changed.
    pub bind: BindAddress,
    /// Training areas to replicate (handshake field; Unity >= 2.x).
    pub num_areas: i32,
    /// Largest message accepted from the environment.
    pub max_message_size: usize,
    /// Let the environment's stdout/stderr through (`--debug`).
    pub debug_output: bool,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self {
            env: None,
            worker_id: 0,
            base_port: None,
            seed: 0,
            no_graphics: true,
            timeout_wait: Duration::from_secs(DEFAULT_TIMEOUT_WAIT_SECS),
            additional_args: vec![],
            log_folder: None,
            side_channels: vec![],
            bind: BindAddress::Loopback,
            num_areas: 1,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            debug_output: false,
        }
    }
}

/// An environment listened for (and launched) but not connected yet; see
/// [`UnityEnvironment::listen`].
pub struct PendingEnvironment {
    comm: Communicator,
    process: Option<EnvProcess>,
    side_channels: SideChannelManager,
    seed: i32,
    num_areas: i32,
    timeout: Duration,
}

impl PendingEnvironment {
    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.comm.port()
    }

    /// Waits for the environment and runs the handshake. On failure the process is killed.
    pub fn handshake(self) -> Result<UnityEnvironment, EnvError> {
        let Self { mut comm, mut process, side_channels, seed, num_areas, timeout } = self;
        let port = comm.port();
        let mut alive = liveness(&mut process);
        let handshake = comm.handshake(seed, num_areas, &mut alive);
        drop(alive);
        let (init, agreement) = match handshake {
            Ok(ok) => ok,
            Err(e) => {
                comm.close();
                if let Some(p) = process.as_mut() {
                    p.kill();
                }
                return Err(contextualize(e, port, "handshake"));
            }
        };
        log::info!(
            "connected to {} (communication API {}, package {}) on port {port}",
            init.name,
            init.communication_version,
            init.package_version
        );
        Ok(UnityEnvironment {
            comm,
            process,
            side_channels,
            agreement,
            academy_name: init.name,
            specs: BTreeMap::new(),
            steps: BTreeMap::new(),
            actions: BTreeMap::new(),
            needs_reset: true,
            closed: false,
            timeout,
            caller_outgoing: Vec::new(),
            caller_incoming: None,
        })
    }
}

/// One live environment.
pub struct UnityEnvironment {
    comm: Communicator,
    process: Option<EnvProcess>,
    side_channels: SideChannelManager,
    agreement: Agreement,
    academy_name: String,
    specs: BTreeMap<String, BehaviorSpec>,
    steps: BTreeMap<String, (DecisionSteps, TerminalSteps)>,
    actions: BTreeMap<String, ActionTuple>,
    needs_reset: bool,
    closed: bool,
    timeout: Duration,
    /// Side-channel records framed by the caller, sent with the next message.
    caller_outgoing: Vec<u8>,
    /// The side-channel bytes of Unity's last message, kept when the caller frames channels.
    caller_incoming: Option<Vec<u8>>,
}

impl UnityEnvironment {
    /// Listens, launches the environment (or waits for the Editor), and runs the handshake.
    pub fn new(options: EnvOptions) -> Result<Self, EnvError> {
        Self::listen(options)?.handshake()
    }

    /// First half of [`UnityEnvironment::new`]: listens and launches the environment (if
    /// any), without waiting for it. Useful to learn the port when `base_port` is 0.
    pub fn listen(options: EnvOptions) -> Result<PendingEnvironment, EnvError> {
        let target = EnvTarget::parse(options.env.as_deref());
        let base_port = options.base_port.unwrap_or(match target {
            EnvTarget::Editor => DEFAULT_EDITOR_PORT,
            _ => BASE_ENVIRONMENT_PORT,
        });
        if target == EnvTarget::Editor && options.worker_id != 0 {
            return Err(EnvError::Options("the Editor is a single environment: worker_id must be 0".into()));
        }
        let port = if base_port == 0 {
            0
        } else {
            base_port.checked_add(options.worker_id as u16).ok_or_else(|| {
                EnvError::Options(format!("port {base_port} + worker {} is over 65535", options.worker_id))
            })?
        };
        let side_channels = SideChannelManager::new(options.side_channels).map_err(EnvError::Options)?;
        let comm = Communicator::listen(&options.bind, port, options.max_message_size, options.timeout_wait)?;
        let port = comm.port();
        let process = match &target {
            EnvTarget::Editor => {
                log::info!("listening on port {port}: press Play in the Unity Editor");
                None
            }
            EnvTarget::Executable(_) | EnvTarget::Sim(_) => {
                let (program, mut extra) = match &target {
                    EnvTarget::Sim(scene) => (find_sim_binary()?, vec!["--scene".to_string(), scene.clone()]),
                    EnvTarget::Executable(name) => (resolve_executable(name)?, vec![]),
                    EnvTarget::Editor => unreachable!("handled above"),
                };
                extra.extend(options.additional_args.iter().cloned());
                if let Some(folder) = &options.log_folder {
                    std::fs::create_dir_all(folder)
                        .map_err(|e| EnvError::Options(format!("cannot create log folder {}: {e}", folder.display())))?;
                }
                let args = player_arguments(port, options.worker_id, options.no_graphics, options.log_folder.as_deref(), &extra);
                let log_file = options.log_folder.as_ref().map(|f| f.join(format!("Player-{}.log", options.worker_id)));
                Some(EnvProcess::spawn(&program, &args, options.debug_output, log_file)?)
            }
        };
        Ok(PendingEnvironment {
            comm,
            process,
            side_channels,
            seed: options.seed,
            num_areas: options.num_areas,
            timeout: options.timeout_wait,
        })
    }

    /// The port this environment talks on.
    pub fn port(&self) -> u16 {
        self.comm.port()
    }

    /// What the handshake agreed (Unity's versions, ours).
    pub fn agreement(&self) -> &Agreement {
        &self.agreement
    }

    /// The academy name Unity reported.
    pub fn academy_name(&self) -> &str {
        &self.academy_name
    }

    /// Behavior specs seen so far (empty until the first reset; may grow later).
    pub fn behavior_specs(&self) -> &BTreeMap<String, BehaviorSpec> {
        &self.specs
    }

    /// Behavior names seen so far, sorted.
    pub fn behavior_names(&self) -> Vec<String> {
        self.specs.keys().cloned().collect()
    }

    /// Resets the environment (and sends queued side-channel messages).
    pub fn reset(&mut self) -> Result<(), EnvError> {
        self.reset_send()?;
        self.reset_receive()
    }

    /// First half of [`UnityEnvironment::reset`]: sends RESET (to reset several
    /// environments side by side).
    pub fn reset_send(&mut self) -> Result<(), EnvError> {
        self.send_input(CommandProto::Reset)
    }

    /// Second half of [`UnityEnvironment::reset`]: waits for the new episodes' decisions.
    pub fn reset_receive(&mut self) -> Result<(), EnvError> {
        self.receive("reset")?;
        self.needs_reset = false;
        Ok(())
    }

    /// Sends the actions set (zeros where none were set) and waits for the next decisions.
    /// Before the first reset, resets instead (as mlagents_envs does).
    pub fn step(&mut self) -> Result<(), EnvError> {
        if self.needs_reset {
            return self.reset();
        }
        self.step_send()?;
        self.step_receive()
    }

    /// First half of [`UnityEnvironment::step`]: answers Unity with the actions.
    pub fn step_send(&mut self) -> Result<(), EnvError> {
        self.send_input(CommandProto::Step)
    }

    /// Second half of [`UnityEnvironment::step`]: waits for Unity's next decisions.
    pub fn step_receive(&mut self) -> Result<(), EnvError> {
        self.receive("step")
    }

    /// True until the first reset.
    pub fn needs_reset(&self) -> bool {
        self.needs_reset
    }

    /// Lets the caller frame and read side channels itself (the Python drop-in keeps
    /// `mlagents_envs`' own `SideChannelManager`): from now on Unity's side-channel bytes are
    /// kept as received ([`UnityEnvironment::received_side_channel_bytes`]) instead of being
    /// dispatched to the channels registered here.
    pub fn frame_side_channels_in_caller(&mut self) {
        self.caller_incoming.get_or_insert_with(Vec::new);
    }

    /// Queues side-channel records the caller framed; they go with the next reset or step,
    /// after the registered channels' records.
    pub fn queue_side_channel_bytes(&mut self, records: &[u8]) {
        self.caller_outgoing.extend_from_slice(records);
    }

    /// The side-channel bytes of Unity's last message, once the caller frames side channels
    /// (empty otherwise).
    pub fn received_side_channel_bytes(&self) -> &[u8] {
        self.caller_incoming.as_deref().unwrap_or(&[])
    }

    /// Answers Unity with side channels and a command (STEP with the actions, RESET, QUIT).
    fn send_input(&mut self, command: CommandProto) -> Result<(), EnvError> {
        if self.closed {
            return Err(EnvError::Closed);
        }
        let mut side_channel = self.side_channels.take_outgoing(self.agreement.side_channel_api);
        side_channel.append(&mut self.caller_outgoing);
        let mut input = UnityRlInputProto {
            side_channel,
            command: command as i32,
            ..Default::default()
        };
        if command == CommandProto::Step {
            for (name, (decisions, _)) in &self.steps {
                let n = decisions.len();
                if n == 0 {
                    continue;
                }
                let spec = &self.specs[name].action_spec;
                let actions = self.actions.remove(name).unwrap_or_else(|| ActionTuple::zeros(spec, n));
                input.agent_actions.insert(name.clone(), ListAgentActionProto { value: actions.to_proto(spec, n) });
            }
        }
        self.actions.clear();
        self.comm.send(UnityInputProto { rl_input: Some(input), rl_initialization_input: None });
        Ok(())
    }

    fn receive(&mut self, during: &str) -> Result<(), EnvError> {
        let port = self.port();
        let mut alive = liveness(&mut self.process);
        let result = self.comm.receive(&mut alive);
        drop(alive);
        match result.map_err(|e| contextualize(e, port, during)).and_then(|o| self.update_state(o)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    fn update_state(&mut self, output: UnityOutputProto) -> Result<(), EnvError> {
        let rl = output.rl_output.unwrap_or_default();
        if let Some(init) = &output.rl_initialization_output {
            for brain in &init.brain_parameters {
                if self.specs.contains_key(&brain.brain_name) {
                    continue;
                }
                // A spec needs the observation shapes of one agent in the same message.
                if let Some(first) = rl.agent_infos.get(&brain.brain_name).and_then(|l| l.value.first()) {
                    self.specs.insert(brain.brain_name.clone(), convert::behavior_spec_from_proto(brain, first));
                }
            }
        }
        match &mut self.caller_incoming {
            Some(kept) => kept.clone_from(&rl.side_channel),
            None => self.side_channels.process_incoming(&rl.side_channel)?,
        }
        let mut steps = BTreeMap::new();
        for (name, spec) in &self.specs {
            let infos = rl.agent_infos.get(name).map(|l| l.value.as_slice()).unwrap_or(&[]);
            steps.insert(name.clone(), steps_from_proto(name, spec, infos)?);
        }
        for name in rl.agent_infos.keys() {
            if !self.specs.contains_key(name) && !rl.agent_infos[name].value.is_empty() {
                log::warn!("agents of behavior {name:?} arrived before its brain parameters; ignored");
            }
        }
        self.steps = steps;
        Ok(())
    }

    /// The agents that need a decision and those whose episode ended, for one behavior.
    pub fn get_steps(&self, behavior: &str) -> Result<(DecisionSteps, TerminalSteps), EnvError> {
        self.steps_ref(behavior).map(|(d, t)| (d.clone(), t.clone()))
    }

    /// Like [`UnityEnvironment::get_steps`], without copying.
    pub fn steps_ref(&self, behavior: &str) -> Result<(&DecisionSteps, &TerminalSteps), EnvError> {
        self.steps.get(behavior).map(|(d, t)| (d, t)).ok_or_else(|| self.unknown(behavior))
    }

    fn unknown(&self, behavior: &str) -> EnvError {
        EnvError::UnknownBehavior { name: behavior.into(), known: self.behavior_names() }
    }

    /// Sets the actions of every agent of `behavior` that needs a decision, in the order of
    /// [`DecisionSteps::agent_id`].
    pub fn set_actions(&mut self, behavior: &str, actions: ActionTuple) -> Result<(), EnvError> {
        let spec = self.specs.get(behavior).ok_or_else(|| self.unknown(behavior))?;
        let n = self.steps.get(behavior).map_or(0, |(d, _)| d.len());
        actions.validate(behavior, &spec.action_spec, n)?;
        self.actions.insert(behavior.into(), actions);
        Ok(())
    }

    /// Sets one agent's action (others get zeros unless set).
    pub fn set_action_for_agent(&mut self, behavior: &str, agent_id: i32, action: ActionTuple) -> Result<(), EnvError> {
        let spec = self.specs.get(behavior).ok_or_else(|| self.unknown(behavior))?.action_spec.clone();
        let decisions = &self.steps[behavior].0;
        let index = decisions.index_of(agent_id).ok_or_else(|| EnvError::InvalidAction {
            behavior: behavior.into(),
            detail: format!("agent {agent_id} is not waiting for a decision"),
        })?;
        action.validate(behavior, &spec, 1)?;
        let n = decisions.len();
        let all = self.actions.entry(behavior.into()).or_insert_with(|| ActionTuple::zeros(&spec, n));
        let (c, d) = (spec.continuous_size, spec.discrete_size());
        all.continuous[index * c..(index + 1) * c].copy_from_slice(&action.continuous);
        all.discrete[index * d..(index + 1) * d].copy_from_slice(&action.discrete);
        Ok(())
    }

    /// Closes the link (status 400), waits for the process to exit, then kills it.
    pub fn close(&mut self) -> Result<(), EnvError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.comm.close();
        if let Some(mut p) = self.process.take() {
            p.close(self.timeout.min(Duration::from_secs(10)));
        }
        Ok(())
    }

    /// Asks Unity to quit with the QUIT command (instead of closing the link with status
    /// 400, as [`UnityEnvironment::close`] does), then waits for the process like `close`.
    pub fn quit(&mut self) -> Result<(), EnvError> {
        if self.closed {
            return Ok(());
        }
        self.send_input(CommandProto::Quit)?;
        self.close()
    }

    /// Kills the environment at once (after an error).
    fn abort(&mut self) {
        self.closed = true;
        self.comm.close();
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }
}

impl Drop for UnityEnvironment {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn liveness(process: &mut Option<EnvProcess>) -> impl FnMut() -> Result<(), String> + '_ {
    move || process.as_mut().map_or(Ok(()), |p| p.check_alive())
}

/// Turns communicator errors into environment errors that say when they happened.
fn contextualize(e: CommError, port: u16, during: &str) -> EnvError {
    match e {
        CommError::Timeout { secs, .. } => EnvError::Timeout { port, secs, during: during.into() },
        CommError::ProcessGone(detail) => EnvError::ProcessExited { port, during: during.into(), detail },
        other => EnvError::Comm(other),
    }
}
