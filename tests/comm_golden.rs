//! Wire bytes checked against transcripts of the real mlagents_envs 0.28 (protocol.md §5.1,
//! §10, §13).

use mlagents::comm::handshake;
use mlagents::comm::server::close_message;
use mlagents::env::ActionTuple;
use mlagents::proto::{unity_rl_input_proto::ListAgentActionProto, UnityInputProto, UnityMessageProto, UnityRlInputProto};
use mlagents::sim::client::UnityClient;
use mlagents::spec::ActionSpec;
use prost::Message;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn step_reply_with_actions_matches_python() {
    let spec = ActionSpec::hybrid(2, &[3]);
    let actions = ActionTuple { continuous: vec![0.1, 0.2, 0.3, 0.4], discrete: vec![2, 0] };
    let mut input = UnityRlInputProto::default();
    input.agent_actions.insert("Ball?team=0".into(), ListAgentActionProto { value: actions.to_proto(&spec, 2) });
    let message = UnityMessageProto {
        header: Some(mlagents::proto::HeaderProto { status: 200, message: String::new() }),
        unity_output: None,
        unity_input: Some(UnityInputProto { rl_input: Some(input), rl_initialization_input: None }),
    };
    assert_eq!(
        hex(&message.encode_to_vec()),
        "0a0308c8011a4d0a4b0a490a0b42616c6c3f7465616d3d30123a0a1b0a0ccdcccc3dcdcc4c3e000000403208cdcccc3dcdcc4c3e3a01020a1b0a0c9a99993ecdcccc3e0000000032089a99993ecdcccc3e3a0100"
    );
}

#[test]
fn close_message_matches_python() {
    assert_eq!(hex(&close_message().encode_to_vec()), "0a03089003");
}

/// Unity's first call from the §13 transcript, replayed byte for byte to our server: the
/// answer is Python's answer, except the training-analytics flag (we send no analytics).
#[test]
fn handshake_reply_matches_python_but_for_analytics() {
    let pending = mlagents::env::UnityEnvironment::listen(mlagents::env::EnvOptions {
        base_port: Some(0),
        seed: 42,
        ..Default::default()
    })
    .unwrap();
    let port = pending.port();
    let (reply_tx, reply_rx) = std::sync::mpsc::channel();
    let unity = std::thread::spawn(move || {
        let mut client = UnityClient::connect("localhost", port, std::time::Duration::from_secs(30)).unwrap();
        let first = unhex("0a0308c801123212300a1041636164656d7953696e676c65746f6e1205312e352e303a05322e302e31420e0801100118012001280130013801");
        reply_tx.send(client.exchange_raw(first).unwrap()).unwrap();
        // The second call is held until the trainer resets or closes.
        client.exchange_raw(unhex("0a0308c801")).unwrap()
    });
    let env = pending.handshake().unwrap();
    let reply = reply_rx.recv().unwrap();
    drop(env);
    assert_eq!(hex(&unity.join().unwrap()), "0a03089003", "closing answers the held call with status 400");
    let mut python = UnityMessageProto::decode(
        unhex("0a0308c8011a251223082a1205312e352e301a06302e32382e30220e08011001180120012801300138012801").as_slice(),
    )
    .unwrap();
    let caps = python.unity_input.as_mut().unwrap().rl_initialization_input.as_mut().unwrap().capabilities.as_mut().unwrap();
    assert_eq!(*caps, mlagents::proto::UnityRlCapabilitiesProto { training_analytics: true, ..handshake::our_capabilities() });
    caps.training_analytics = false;
    assert_eq!(hex(&reply), hex(&python.encode_to_vec()));
}
