//! The gRPC server (our side of `UnityToExternalProto/Exchange`) and the bridge from each
//! unary call to a synchronous driver: every request is handed over with a one-shot reply
//! slot, and the call stays open until the driver answers (protocol.md §11.2).

use crate::proto::unity_to_external_proto_server::{UnityToExternalProto, UnityToExternalProtoServer};
use crate::proto::{HeaderProto, UnityMessageProto};
use crate::spec::STATUS_CLOSE;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::oneshot;
use tonic::codegen::http;

/// Largest message we accept from Unity (tonic's default is 4 MiB; visual observations need more).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BindAddress {
    /// 127.0.0.1 and ::1 (Unity dials `localhost`, which may resolve to either).
    #[default]
    Loopback,
    /// One explicit address, e.g. 0.0.0.0 to serve other hosts.
    Explicit(IpAddr),
}

/// What the server hands the driver.
#[derive(Debug)]
pub enum Incoming {
    /// A request; answer it through `reply` (dropping `reply` answers with status 400).
    /// `peer` is the caller's address: one Unity process makes every call over one connection.
    Message { message: Box<UnityMessageProto>, reply: oneshot::Sender<UnityMessageProto>, peer: Option<SocketAddr> },
    /// A call the server answered with an error before it reached us (e.g. undecodable
    /// bytes or a message over the size limit).
    CallFailed { code: tonic::Code, message: String },
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("port {port} is already in use on {address} (another environment or trainer?); pick another with --base-port")]
    PortInUse { port: u16, address: IpAddr },
    #[error("cannot listen on {address}:{port}: {source}")]
    Io { port: u16, address: IpAddr, source: std::io::Error },
}

/// The shared runtime that drives every server in the process.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mlagents-grpc")
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

struct Bridge {
    to_driver: mpsc::Sender<Incoming>,
}

#[tonic::async_trait]
impl UnityToExternalProto for Bridge {
    async fn exchange(
        &self,
        request: tonic::Request<UnityMessageProto>,
    ) -> Result<tonic::Response<UnityMessageProto>, tonic::Status> {
        let (reply, answer) = oneshot::channel();
        let peer = request.remote_addr();
        let message = Box::new(request.into_inner());
        if self.to_driver.send(Incoming::Message { message, reply, peer }).is_err() {
            return Ok(tonic::Response::new(close_message()));
        }
        Ok(tonic::Response::new(answer.await.unwrap_or_else(|_| close_message())))
    }
}

/// The reply that closes the link (`header.status = 400`, no body).
pub fn close_message() -> UnityMessageProto {
    UnityMessageProto {
        header: Some(HeaderProto { status: STATUS_CLOSE, message: String::new() }),
        ..Default::default()
    }
}

/// A listening server. Dropping it stops listening.
pub struct Server {
    port: u16,
    from_server: mpsc::Receiver<Incoming>,
    shutdown: Vec<oneshot::Sender<()>>,
    stopped: Vec<mpsc::Receiver<()>>,
}

impl Server {
    /// Binds (before any environment starts: Unity connects once and never retries) and serves.
    /// Port 0 picks a free port (the same one on every address); see [`Server::port`].
    pub fn bind(bind: &BindAddress, mut port: u16, max_message_size: usize) -> Result<Self, BindError> {
        let addresses: Vec<IpAddr> = match bind {
            BindAddress::Loopback => vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)],
            BindAddress::Explicit(a) => vec![*a],
        };
        let mut listeners = Vec::new();
        for address in &addresses {
            match std::net::TcpListener::bind(SocketAddr::new(*address, port)) {
                Ok(l) => {
                    if port == 0 {
                        port = l.local_addr().map_err(|source| BindError::Io { port, address: *address, source })?.port();
                    }
                    listeners.push(l)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    return Err(BindError::PortInUse { port, address: *address })
                }
                // A machine without IPv6 loopback still serves IPv4.
                Err(e) if address.is_ipv6() && *bind == BindAddress::Loopback => {
                    log::debug!("not listening on [::1]:{port}: {e}");
                }
                Err(source) => return Err(BindError::Io { port, address: *address, source }),
            }
        }
        let (to_driver, from_server) = mpsc::channel();
        let mut shutdown = Vec::new();
        let mut stopped = Vec::new();
        for listener in listeners {
            let address = listener.local_addr().map(|a| a.ip()).unwrap_or(addresses[0]);
            listener.set_nonblocking(true).map_err(|source| BindError::Io { port, address, source })?;
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (done_tx, done_rx) = mpsc::channel();
            let bridge = Bridge { to_driver: to_driver.clone() };
            let failures = to_driver.clone();
            let service = UnityToExternalProtoServer::new(bridge)
                .max_decoding_message_size(max_message_size)
                .max_encoding_message_size(max_message_size);
            let _guard = runtime().enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|source| BindError::Io { port, address, source })?;
            runtime().spawn(async move {
                let report = tower::util::MapResponseLayer::new(move |response: http::Response<tonic::body::Body>| {
                    report_failed_call(&failures, &response);
                    response
                });
                let result = tonic::transport::Server::builder()
                    .layer(report)
                    .add_service(service)
                    .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)), async {
                        let _ = stop_rx.await;
                    })
                    .await;
                if let Err(e) = result {
                    log::warn!("gRPC server on port {port} stopped: {e}");
                }
                let _ = done_tx.send(());
            });
            shutdown.push(stop_tx);
            stopped.push(done_rx);
        }
        Ok(Self { port, from_server, shutdown, stopped })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits up to `timeout` for the next request or failed call.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Incoming, mpsc::RecvTimeoutError> {
        self.from_server.recv_timeout(timeout)
    }

    /// Stops listening and waits (briefly) until the port is free again.
    pub fn shutdown(&mut self) {
        for s in self.shutdown.drain(..) {
            let _ = s.send(());
        }
        for done in self.stopped.drain(..) {
            let _ = done.recv_timeout(Duration::from_secs(2));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Tells the driver about calls answered with an error before they reached the bridge.
fn report_failed_call(to_driver: &mpsc::Sender<Incoming>, response: &http::Response<tonic::body::Body>) {
    let Some(status) = response.headers().get("grpc-status") else { return };
    let code = status.to_str().ok().and_then(|s| s.parse::<i32>().ok()).unwrap_or(2);
    if code == 0 {
        return;
    }
    let message = response
        .headers()
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    let _ = to_driver.send(Incoming::CallFailed { code: tonic::Code::from_i32(code), message });
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
