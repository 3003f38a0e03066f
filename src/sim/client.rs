//! The Unity player's gRPC link to the trainer (`RpcCommunicator`'s client side): one
//! connection, raw bytes per Exchange call (so that a fault can send bytes that are not a
//! message at all), the handshake and exchange time limits.

use crate::proto::UnityMessageProto;
use bytes::{Buf, BufMut};
use prost::Message;
use std::time::Duration;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

const EXCHANGE_PATH: &str = "/communicator_objects.UnityToExternalProto/Exchange";

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

/// A codec that passes bytes through: messages are encoded by the caller.
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

/// The gRPC link to the trainer.
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

