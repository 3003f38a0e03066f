//! The communicator against an in-process Unity side (the stand-in academy on a thread, over
//! a real loopback gRPC connection): handshake versions, version mismatch, timeout, busy
//! port, oversize messages, malformed and unknown side channels, bad data, bad actions.

mod common;

use mlagents::comm::side_channel::{
    shared, EngineConfig, EngineConfigurationChannel, EnvironmentParametersChannel, RawBytesChannel, StatsAggregation,
    StatsSideChannel,
};
use mlagents::comm::CommError;
use mlagents::env::{ActionTuple, EnvError, EnvOptions, UnityEnvironment};
use mlagents::sim::academy::{self, Fault, SimError, SimExit, SimOptions, ECHO_CHANNEL_ID};
use mlagents::sim::scenes;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn options() -> EnvOptions {
    EnvOptions { env: None, base_port: Some(0), timeout_wait: Duration::from_secs(10), ..Default::default() }
}

/// Starts our side (listening) and an in-process Unity side playing `scene`.
fn connect(
    scene: &str,
    env_options: EnvOptions,
    configure: impl FnOnce(&mut SimOptions),
) -> (Result<UnityEnvironment, EnvError>, JoinHandle<Result<SimExit, SimError>>) {
    let pending = UnityEnvironment::listen(env_options).expect("listen");
    let mut sim = SimOptions::new(pending.port());
    sim.seed = Some(1);
    configure(&mut sim);
    let scene = scenes::build(scene).expect("scene");
    let unity = std::thread::spawn(move || academy::run(scene, sim));
    (pending.handshake(), unity)
}

#[test]
fn current_unity_gets_package_0_28_and_closes_cleanly() {
    let (env, unity) = connect("Basic", options(), |_| {});
    let mut env = env.unwrap();
    assert_eq!(env.agreement().package_version, "0.28.0");
    assert_eq!(env.agreement().communication_version, "1.5.0");
    env.reset().unwrap();
    env.step().unwrap();
    env.close().unwrap();
    assert_eq!(unity.join().unwrap().unwrap(), SimExit::ClosedByTrainer);
}

#[test]
fn unity_1_0_gets_an_old_package_version_and_deprecated_action_fields_work() {
    let (env, unity) = connect("Basic", options(), |s| {
        s.communication_version = "1.0.0".into();
        s.package_version = "1.0.8".into();
    });
    let mut env = env.unwrap();
    assert_eq!(env.agreement().package_version, "0.16.1", "Unity 1.0.x refuses trainers above 0.25.999");
    env.reset().unwrap();
    // Walk right: 7 moves reach the large goal; the old Unity reads field 1 only.
    let mut ended = false;
    for _ in 0..8 {
        env.set_actions("Basic?team=0", ActionTuple { continuous: vec![], discrete: vec![2] }).unwrap();
        env.step().unwrap();
        let (_, t) = env.get_steps("Basic?team=0").unwrap();
        ended |= !t.is_empty() && (t.reward[0] - 0.99).abs() < 1e-5;
    }
    assert!(ended, "the deprecated action encoding reached the scene");
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn unity_0_15_talks_with_legacy_side_channels() {
    let engine = shared(EngineConfigurationChannel::new());
    let params = shared(EnvironmentParametersChannel::new());
    let stats = shared(StatsSideChannel::new());
    engine.lock().unwrap().set_configuration(EngineConfig { time_scale: Some(7.0), ..Default::default() });
    params.lock().unwrap().set_float_parameter("gravity", 5.0);
    let opts = EnvOptions { side_channels: vec![engine, params, stats.clone()], ..options() };
    let (env, unity) = connect("3DBall", opts, |s| {
        s.communication_version = "0.15.0".into();
        s.package_version = "0.15.0-preview".into();
    });
    let mut env = env.unwrap();
    assert_eq!(env.agreement().communication_version, "0.15.0");
    env.reset().unwrap();
    env.step().unwrap();
    let received = stats.lock().unwrap().get_and_reset_stats();
    assert_eq!(received["Sim/Parameter/gravity"][0].value, 5.0, "{received:?}");
    assert_eq!(received["Sim/Engine/Time Scale"][0].value, 7.0);
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn incompatible_versions_are_refused_with_a_clear_error() {
    for (api, package) in [("2.0.0", "5.0.0"), ("0.14.0", "0.14.0")] {
        let (env, unity) = connect("Basic", options(), |s| {
            s.communication_version = api.into();
            s.package_version = package.into();
        });
        let e = env.err().expect("refused").to_string();
        assert!(e.contains(api) && e.contains("0.15.0") && e.contains("1.5.0"), "{e}");
        assert!(matches!(unity.join().unwrap(), Err(SimError::Refused(400))));
    }
}

#[test]
fn side_channels_travel_both_ways() {
    let engine = shared(EngineConfigurationChannel::new());
    let params = shared(EnvironmentParametersChannel::new());
    let stats = shared(StatsSideChannel::new());
    let echo = shared(RawBytesChannel::new(ECHO_CHANNEL_ID));
    engine.lock().unwrap().set_configuration(EngineConfig::mlagents_learn_default());
    {
        let mut p = params.lock().unwrap();
        p.set_float_parameter("mass", 2.0);
        p.set_uniform_sampler_parameters("scale", 1.0, 3.0, 4);
        p.set_gaussian_sampler_parameters("g", 1.0, 0.1, 4);
        p.set_multirangeuniform_sampler_parameters("m", &[(0.0, 1.0), (3.0, 5.0)], 4);
    }
    echo.lock().unwrap().send_raw_data(b"ping".to_vec());
    let opts = EnvOptions { side_channels: vec![engine, params, stats.clone(), echo.clone()], ..options() };
    let (env, unity) = connect("Simple1DDiscrete", opts, |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    let mut all: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for _ in 0..30 {
        env.step().unwrap();
        for (k, v) in stats.lock().unwrap().get_and_reset_stats() {
            all.entry(k).or_default().extend(v);
        }
    }
    assert_eq!(all["Sim/Parameter/mass"][0].value, 2.0);
    assert_eq!(all["Sim/Parameter/scale"][0].value, 2.0, "uniform [1, 3] reported by its mean");
    assert_eq!(all["Sim/Parameter/g"][0].value, 1.0);
    assert_eq!(all["Sim/Parameter/m"][0].value, 2.25);
    assert_eq!(all["Sim/Engine/Time Scale"][0].value, 20.0);
    assert_eq!(all["Sim/Engine/Width"][0].value, 84.0);
    assert_eq!(all["Sim/Engine/Capture Frame Rate"][0].value, 60.0);
    // Stats of every aggregation method arrive with their method.
    assert_eq!(all["Simple/Episodes"][0].aggregation, StatsAggregation::Sum);
    assert_eq!(all["Simple/Episode Return"][0].aggregation, StatsAggregation::Average);
    assert_eq!(all["Simple/Return Histogram"][0].aggregation, StatsAggregation::Histogram);
    assert_eq!(all["Simple/Last Goal"][0].aggregation, StatsAggregation::MostRecent);
    assert_eq!(echo.lock().unwrap().take_received(), vec![b"ping".to_vec()]);
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn a_silent_environment_times_out() {
    let opts = EnvOptions { timeout_wait: Duration::from_secs(1), ..options() };
    let (env, _unity) = connect("Basic", opts, |s| s.fault = Some(Fault::Hang(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let start = Instant::now();
    let e = env.step().unwrap_err();
    assert!(matches!(e, EnvError::Timeout { secs: 1, .. }), "{e}");
    assert!(e.to_string().contains("--timeout-wait"));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(matches!(env.step(), Err(EnvError::Closed)), "a failed environment stays failed");
}

#[test]
fn a_handshake_that_never_comes_times_out() {
    let opts = EnvOptions { timeout_wait: Duration::from_millis(300), ..options() };
    let pending = UnityEnvironment::listen(opts).unwrap();
    let e = pending.handshake().err().expect("nobody connects");
    assert!(matches!(e, EnvError::Timeout { .. }), "{e}");
}

#[test]
fn a_busy_port_is_named_with_a_hint() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let e = UnityEnvironment::listen(EnvOptions { base_port: Some(port), ..options() }).err().expect("busy");
    let text = e.to_string();
    assert!(text.contains(&port.to_string()) && text.contains("--base-port"), "{text}");
}

#[test]
fn messages_over_grpc_default_4_mib_are_accepted() {
    let (env, unity) = connect("Basic", options(), |s| s.fault = Some(Fault::Oversize(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    env.step().unwrap(); // 5 MiB message, an unknown channel inside: skipped
    env.step().unwrap();
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn messages_over_our_limit_are_a_clear_error() {
    let opts = EnvOptions { max_message_size: 1 << 20, ..options() };
    let (env, unity) = connect("Basic", opts, |s| s.fault = Some(Fault::Oversize(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let e = env.step().unwrap_err();
    assert!(matches!(e, EnvError::Comm(CommError::CallFailed { .. })), "{e}");
    assert!(e.to_string().contains("length too large") || e.to_string().contains("limit"), "{e}");
    assert!(unity.join().unwrap().is_err());
}

#[test]
fn garbage_bytes_are_a_clear_error_not_a_hang() {
    let (env, unity) = connect("Basic", options(), |s| s.fault = Some(Fault::Garbage(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let start = Instant::now();
    let e = env.step().unwrap_err();
    assert!(matches!(e, EnvError::Comm(CommError::CallFailed { .. })), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(unity.join().unwrap().is_err());
}

#[test]
fn an_unknown_side_channel_is_skipped() {
    let (env, unity) = connect("Basic", options(), |s| s.fault = Some(Fault::UnknownSideChannel(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    env.step().unwrap();
    env.step().unwrap();
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn a_truncated_side_channel_record_is_a_clear_error() {
    let (env, _unity) = connect("Basic", options(), |s| s.fault = Some(Fault::MalformedSideChannel(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let e = env.step().unwrap_err();
    assert!(matches!(e, EnvError::SideChannel(_)), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn nan_rewards_name_the_behavior_agent_and_field() {
    let (env, _unity) = connect("Basic", options(), |s| s.fault = Some(Fault::NanReward(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let e = env.step().unwrap_err().to_string();
    assert!(e.contains("Basic?team=0") && e.contains("agent 0") && e.contains("reward") && e.contains("NaN"), "{e}");
}

#[test]
fn wrong_observation_sizes_name_the_observation() {
    let (env, _unity) = connect("3DBall", options(), |s| s.fault = Some(Fault::WrongObservationSize(2)));
    let mut env = env.unwrap();
    env.reset().unwrap();
    let e = env.step().unwrap_err().to_string();
    assert!(e.contains("3DBall?team=0") && e.contains("observation 0") && e.contains("7 values"), "{e}");
}

#[test]
fn bad_user_actions_are_refused_before_sending() {
    let (env, unity) = connect("3DBall", options(), |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    let short = ActionTuple { continuous: vec![0.0; 23], discrete: vec![] };
    let e = env.set_actions("3DBall?team=0", short).unwrap_err().to_string();
    assert!(e.contains("3DBall?team=0") && e.contains("23") && e.contains("24"), "{e}");
    let e = env.set_actions("Nope", ActionTuple::default()).unwrap_err().to_string();
    assert!(e.contains("Nope") && e.contains("3DBall?team=0"), "{e}");
    env.step().unwrap(); // nothing was queued: zeros go out
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn out_of_range_discrete_actions_are_refused() {
    let (env, _unity) = connect("Basic", options(), |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    let e = env.set_actions("Basic?team=0", ActionTuple { continuous: vec![], discrete: vec![3] }).unwrap_err();
    assert!(e.to_string().contains("outside 0..3"), "{e}");
}

#[test]
fn set_action_for_agent_fills_one_row() {
    let (env, unity) = connect("3DBall", options(), |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    let (d, _) = env.get_steps("3DBall?team=0").unwrap();
    env.set_action_for_agent("3DBall?team=0", d.agent_id[3], ActionTuple { continuous: vec![1.0, -1.0], discrete: vec![] })
        .unwrap();
    let e = env.set_action_for_agent("3DBall?team=0", 999, ActionTuple { continuous: vec![1.0, -1.0], discrete: vec![] });
    assert!(e.unwrap_err().to_string().contains("999"));
    env.step().unwrap();
    env.close().unwrap();
    unity.join().unwrap().unwrap();
}

#[test]
fn quit_command_makes_unity_quit() {
    let (env, unity) = connect("Basic", options(), |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    env.quit().unwrap();
    assert_eq!(unity.join().unwrap().unwrap(), SimExit::Quit);
}

#[test]
fn a_second_environment_on_the_port_is_refused_without_disturbing_the_first() {
    let (env, unity) = connect("Basic", options(), |_| {});
    let mut env = env.unwrap();
    env.reset().unwrap();
    env.step().unwrap();
    // A second player started on the same port by mistake.
    let mut intruder = SimOptions::new(env.port());
    intruder.seed = Some(2);
    let refused = std::thread::spawn(move || academy::run(scenes::build("Basic").unwrap(), intruder));
    let started = Instant::now();
    // Keep training while the intruder knocks: every step still works.
    while !refused.is_finished() && started.elapsed() < Duration::from_secs(10) {
        env.step().unwrap();
    }
    let e = refused.join().unwrap().unwrap_err();
    assert!(matches!(e, SimError::Refused(400)), "{e}");
    assert!(e.to_string().contains("another environment"), "{e}");
    for _ in 0..20 {
        env.step().unwrap();
    }
    env.close().unwrap();
    assert_eq!(unity.join().unwrap().unwrap(), SimExit::ClosedByTrainer);
}

#[test]
fn the_stand_in_says_when_no_trainer_listens_or_one_never_answers() {
    // Nothing listening: named at once.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut sim = SimOptions::new(free);
    sim.host = "127.0.0.1".into();
    let e = academy::run(scenes::build("Basic").unwrap(), sim).unwrap_err();
    assert!(matches!(e, SimError::NoTrainer { .. }), "{e}");
    // Something that accepts TCP and never answers: a limit, and the flag that raises it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut sim = SimOptions::new(silent.local_addr().unwrap().port());
    sim.host = "127.0.0.1".into();
    sim.handshake_timeout = Duration::from_millis(500);
    let started = Instant::now();
    let e = academy::run(scenes::build("Basic").unwrap(), sim).unwrap_err();
    assert!(matches!(e, SimError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("--timeout-wait"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
