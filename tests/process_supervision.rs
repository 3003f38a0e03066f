//! Environment processes: launching with ML-Agents' arguments, a dying environment, a missing
//! executable, logs, and VecEnv over several real child processes.

mod common;

use mlagents::env::{ActionTuple, EnvError, EnvOptions, UnityEnvironment, VecEnv};
use std::time::{Duration, Instant};

#[test]
fn a_dying_environment_is_reported_at_once_with_its_exit_code() {
    let options = EnvOptions {
        additional_args: vec!["--fault".into(), "exit@3".into()],
        ..common::sim_options("Basic")
    };
    let mut env = UnityEnvironment::new(options).unwrap();
    env.reset().unwrap();
    env.step().unwrap();
    let start = Instant::now();
    let e = env.step().unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "detected by polling, not by the 30 s timeout");
    assert!(matches!(e, EnvError::ProcessExited { .. }), "{e}");
    assert!(e.to_string().contains("exited with code 3"), "{e}");
}

#[test]
fn an_environment_refused_for_its_version_fails_the_handshake() {
    let options = EnvOptions {
        additional_args: vec!["--unity-api".into(), "2.0.0".into()],
        ..common::sim_options("Basic")
    };
    let e = UnityEnvironment::new(options).err().expect("refused").to_string();
    assert!(e.contains("2.0.0"), "{e}");
}

#[test]
fn a_missing_executable_lists_what_was_tried() {
    let options = EnvOptions { env: Some("/no/such/Build".into()), base_port: Some(0), ..Default::default() };
    let e = UnityEnvironment::new(options).err().expect("missing").to_string();
    assert!(e.contains("/no/such/Build.x86_64"), "{e}");
}

#[test]
fn the_player_log_goes_to_the_log_folder() {
    let dir = std::env::temp_dir().join(format!("mlagents-log-{}", std::process::id()));
    let options = EnvOptions { log_folder: Some(dir.clone()), ..common::sim_options("Basic") };
    let mut env = UnityEnvironment::new(options).unwrap();
    env.reset().unwrap();
    env.close().unwrap();
    let log = std::fs::read_to_string(dir.join("Player-0.log")).unwrap();
    assert!(log.contains("scene Basic"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn vec_env_steps_several_processes_with_different_seeds() {
    let base = common::sim_options("3DBall");
    let mut envs = VecEnv::new(3, |w| VecEnv::worker_options(&base, w, &|_| vec![])).unwrap();
    envs.reset().unwrap();
    let ports: Vec<u16> = envs.envs().iter().map(|e| e.port()).collect();
    assert_eq!(ports.iter().collect::<std::collections::BTreeSet<_>>().len(), 3);
    let first: Vec<Vec<f32>> =
        envs.envs().iter().map(|e| e.get_steps("3DBall?team=0").unwrap().0.obs[0].data.clone()).collect();
    assert_ne!(first[0], first[1], "worker seeds differ");
    for _ in 0..100 {
        for env in envs.envs_mut() {
            let n = env.get_steps("3DBall?team=0").unwrap().0.len();
            env.set_actions("3DBall?team=0", ActionTuple { continuous: vec![0.1; 2 * n], discrete: vec![] }).unwrap();
        }
        envs.step().unwrap();
    }
    envs.close().unwrap();
}

#[test]
fn sim_scenes_are_deterministic_for_a_seed() {
    let run = || {
        let mut env = common::start("GridWorldVector");
        env.reset().unwrap();
        let mut trace = vec![];
        for k in 0..50 {
            let (d, _) = env.get_steps("GridWorld?team=0").unwrap();
            trace.extend(d.obs[0].data.iter().copied());
            let actions = (0..d.len()).map(|i| ((i + k) % 5) as i32).collect();
            let masked_ok = ActionTuple { continuous: vec![], discrete: actions };
            env.set_actions("GridWorld?team=0", masked_ok).unwrap();
            env.step().unwrap();
        }
        trace
    };
    assert_eq!(run(), run());
}

/// A base port whose next `n` ports are all free right now.
fn free_port_range(n: u16) -> u16 {
    for base in (20000..60000).step_by(97) {
        if (0..n).all(|k| std::net::TcpListener::bind(("127.0.0.1", base + k)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

#[test]
fn vec_env_workers_listen_on_consecutive_ports() {
    let base_port = free_port_range(3);
    let base = EnvOptions { base_port: Some(base_port), ..common::sim_options("Basic") };
    let mut envs = VecEnv::new(3, |w| VecEnv::worker_options(&base, w, &|_| vec![])).unwrap();
    let ports: Vec<u16> = envs.envs().iter().map(|e| e.port()).collect();
    assert_eq!(ports, vec![base_port, base_port + 1, base_port + 2]);
    envs.reset().unwrap();
    envs.step().unwrap();
    envs.close().unwrap();
}
