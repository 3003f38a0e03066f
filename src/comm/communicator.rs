//! The conversation with one environment (protocol.md §5): the two-call handshake, then one
//! exchange per reset/step, each answering Unity's held call and waiting for its next one,
//! and the status-400 close.

use super::handshake::{self, Agreement, IncompatibleVersion};
use super::server::{close_message, BindAddress, BindError, Incoming, Server};
use crate::proto::{
    HeaderProto, UnityInputProto, UnityMessageProto, UnityOutputProto, UnityRlInitializationInputProto,
    UnityRlInitializationOutputProto,
};
use crate::spec::{STATUS_CLOSE, STATUS_OK};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often to check that the environment process is still alive while waiting.
const LIVENESS_POLL: Duration = Duration::from_millis(100);

/// What went wrong talking to an environment.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("no message from the environment on port {port} within {secs} s")]
    Timeout { port: u16, secs: u64 },
    #[error("the environment on port {port} closed the connection (it sent status {status})")]
    Closed { port: u16, status: i32 },
    #[error(transparent)]
    Incompatible(#[from] IncompatibleVersion),
    #[error("the environment on port {port} made a call the server rejected ({code:?}): {message}")]
    CallFailed { port: u16, code: tonic::Code, message: String },
    #[error("protocol violation by the environment on port {port}: {detail}")]
    Protocol { port: u16, detail: String },
    #[error("the environment process is gone: {0}")]
    ProcessGone(String),
}

/// A check run while waiting: `Err(description)` when the environment process has died.
pub type LivenessCheck<'a> = &'a mut dyn FnMut() -> Result<(), String>;

/// One environment's connection, from listening to close.
pub struct Communicator {
    server: Server,
    held: Option<oneshot::Sender<UnityMessageProto>>,
    timeout: Duration,
    closed: bool,
    /// The address of the environment that made the first call: calls from any other
    /// (a second player or Editor started on this port by mistake) are refused with status
    /// 400 and do not disturb the conversation.
    peer: Option<std::net::SocketAddr>,
}

impl Communicator {
    /// Binds the port and starts serving; call before launching the environment.
    pub fn listen(bind: &BindAddress, port: u16, max_message_size: usize, timeout: Duration) -> Result<Self, CommError> {
        let server = Server::bind(bind, port, max_message_size)?;
        Ok(Self { server, held: None, timeout, closed: false, peer: None })
    }

    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// Runs the handshake: waits for Unity's first call, applies the version rule, answers with
    /// our versions and capabilities, then waits for Unity's second (empty) call and holds it:
    /// the first [`Communicator::exchange`] answers it. On a refused version, the link is
    /// closed with status 400.
    pub fn handshake(
        &mut self,
        seed: i32,
        num_areas: i32,
        alive: LivenessCheck<'_>,
    ) -> Result<(UnityRlInitializationOutputProto, Agreement), CommError> {
        let first = self.wait_next(alive)?;
        let port = self.port();
        let init = first
            .unity_output
            .and_then(|o| o.rl_initialization_output)
            .ok_or_else(|| CommError::Protocol { port, detail: "first call has no initialization output".into() })?;
        let agreement = handshake::agree(&init.communication_version, &init.package_version);
        let (communication_version, package_version) = match &agreement {
            Ok(a) => (a.communication_version.clone(), a.package_version.clone()),
            Err(_) => (crate::spec::COMMUNICATION_API_VERSION.into(), crate::spec::PACKAGE_VERSION.into()),
        };
        let reply = UnityMessageProto {
            header: Some(ok_header()),
            unity_output: None,
            unity_input: Some(UnityInputProto {
                rl_input: None,
                rl_initialization_input: Some(UnityRlInitializationInputProto {
                    seed,
                    communication_version,
                    package_version,
                    capabilities: Some(handshake::our_capabilities()),
                    num_areas,
                }),
            }),
        };
        self.answer(reply);
        match agreement {
            Ok(agreement) => {
                self.wait_next(alive)?;
                Ok((init, agreement))
            }
            Err(e) => {
                // As mlagents_envs: answer Unity's second call with status 400.
                self.close_with_grace(self.timeout.min(Duration::from_secs(5)));
                Err(e.into())
            }
        }
    }

    /// Answers the held call with `input` and waits for Unity's next output.
    pub fn exchange(&mut self, input: UnityInputProto, alive: LivenessCheck<'_>) -> Result<UnityOutputProto, CommError> {
        self.send(input);
        self.receive(alive)
    }

    /// Answers the held call (the first half of an exchange).
    pub fn send(&mut self, input: UnityInputProto) {
        self.answer(UnityMessageProto { header: Some(ok_header()), unity_output: None, unity_input: Some(input) });
    }

    /// Waits for Unity's next output (the second half of an exchange).
    pub fn receive(&mut self, alive: LivenessCheck<'_>) -> Result<UnityOutputProto, CommError> {
        let port = self.port();
        let message = self.wait_next(alive)?;
        message.unity_output.ok_or_else(|| CommError::Protocol { port, detail: "a step reply carries no output".into() })
    }

    fn answer(&mut self, message: UnityMessageProto) {
        if let Some(reply) = self.held.take() {
            // Unity may already be gone; the error surfaces at the next wait.
            let _ = reply.send(message);
        }
    }

    /// Waits for Unity's next call and holds it.
    fn wait_next(&mut self, alive: LivenessCheck<'_>) -> Result<UnityMessageProto, CommError> {
        let port = self.port();
        if self.closed {
            return Err(CommError::Closed { port, status: STATUS_CLOSE });
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(CommError::Timeout { port, secs: self.timeout.as_secs() });
            }
            match self.server.recv_timeout(LIVENESS_POLL.min(deadline - now)) {
                Ok(Incoming::Message { message, reply, peer }) => {
                    match (self.peer, peer) {
                        (Some(ours), Some(theirs)) if ours != theirs => {
                            log::warn!("a second environment ({theirs}) tried to connect on port {port}, which serves {ours}; it was refused");
                            let _ = reply.send(close_message());
                            continue;
                        }
                        (None, _) => self.peer = peer,
                        _ => {}
                    }
                    let status = message.header.as_ref().map_or(STATUS_OK, |h| h.status);
                    if status != STATUS_OK {
                        let _ = reply.send(close_message());
                        self.closed = true;
                        return Err(CommError::Closed { port, status });
                    }
                    self.held = Some(reply);
                    return Ok(*message);
                }
                Ok(Incoming::CallFailed { code, message }) => {
                    return Err(CommError::CallFailed { port, code, message });
                }
                Err(RecvTimeoutError::Timeout) => alive().map_err(CommError::ProcessGone)?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CommError::Protocol { port, detail: "the gRPC server stopped".into() })
                }
            }
        }
    }

    /// Closes the link: answers the held call with status 400 (or answers the next call so if
    /// none is held and Unity calls within `grace`), then stops listening.
    pub fn close_with_grace(&mut self, grace: Duration) {
        if !self.closed {
            match self.held.take() {
                Some(reply) => {
                    let _ = reply.send(close_message());
                }
                None if !grace.is_zero() => {
                    if let Ok(Incoming::Message { reply, .. }) = self.server.recv_timeout(grace) {
                        let _ = reply.send(close_message());
                    }
                }
                None => {}
            }
            self.closed = true;
        }
        self.server.shutdown();
    }

    /// Closes the link at once (see [`Communicator::close_with_grace`]).
    pub fn close(&mut self) {
        self.close_with_grace(Duration::ZERO);
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.close();
    }
}

fn ok_header() -> HeaderProto {
    HeaderProto { status: STATUS_OK, message: String::new() }
}
