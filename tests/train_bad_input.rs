//! The run folder and the training loop under bad input, through the real `mlagents-learn`
//! (a child process on the stand-in Simple1DDiscrete): `--force` over an earlier run, a failed
//! resume, two trainers on one run folder, a failed start, a diverging learning rate, a
//! process killed while writing.
#![cfg(feature = "train")]

mod common;

use common::{finish, spawn_learn, temp_dir};
use mlagents::checkpoint;
use std::time::Duration;

/// A short Simple1DDiscrete configuration.
fn config(dir: &std::path::Path, name: &str, max_steps: u64, extra: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("behaviors:\n  1D:\n    hyperparameters: {{batch_size: 16, buffer_size: 64}}\n    max_steps: {max_steps}\n    summary_freq: 500\n    checkpoint_interval: 250\n{extra}env_settings: {{base_port: 0}}\n"),
    )
    .unwrap();
    path
}

fn steps(dir: &std::path::Path) -> Vec<u64> {
    checkpoint::list(dir, "1D").into_iter().map(|(s, _)| s).collect()
}

fn interrupt(child: &std::process::Child) {
    // SAFETY: sends a signal to our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
}

/// Waits until `path` exists (or 60 s).
fn wait_for(path: &std::path::Path) {
    let started = std::time::Instant::now();
    while !path.exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `--force` starts a clean run: none of the earlier run's checkpoints survive to be pruned in
/// place of the new ones, exported or resumed.
#[test]
fn force_starts_a_clean_run() {
    let dir = temp_dir("force-clean");
    let (ok, log) = finish(spawn_learn(&config(&dir, "long.yaml", 1500, ""), "f", &dir, &["--seed", "1"]));
    assert!(ok, "{log}");
    assert!(steps(&dir.join("f/1D")).iter().any(|s| *s > 1000));
    let (ok, log) = finish(spawn_learn(&config(&dir, "short.yaml", 400, ""), "f", &dir, &["--seed", "2", "--force"]));
    assert!(ok, "{log}");
    let after = steps(&dir.join("f/1D"));
    assert!(!after.is_empty() && after.iter().all(|s| *s <= 450), "checkpoints after --force: {after:?}");
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("f/run_logs/training_status.json")).unwrap()).unwrap();
    let listed: Vec<u64> = status["1D"]["checkpoints"].as_array().unwrap().iter().map(|c| c["steps"].as_u64().unwrap()).collect();
    assert_eq!(listed, after, "the status lists other checkpoints than the folder holds");
    let export = std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-export")).args(["f", "--results-dir"]).arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&export.stdout);
    assert!(export.status.success() && said.contains(&format!("(step {})", after.last().unwrap())), "{said}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A resume whose network does not fit the checkpoint names the field, and leaves the run's
/// configuration.yaml as it was.
#[test]
fn a_failed_resume_names_the_difference_and_keeps_the_configuration() {
    let dir = temp_dir("resume-mismatch");
    let small = config(&dir, "small.yaml", 300, "    network_settings: {hidden_units: 16}\n");
    let (ok, log) = finish(spawn_learn(&small, "r", &dir, &[]));
    assert!(ok, "{log}");
    let before = std::fs::read_to_string(dir.join("r/configuration.yaml")).unwrap();
    let wide = config(&dir, "wide.yaml", 900, "    network_settings: {hidden_units: 32}\n");
    let (ok, log) = finish(spawn_learn(&wide, "r", &dir, &["--resume"]));
    assert!(!ok, "{log}");
    assert!(log.contains("hidden_units: checkpoint 16, this run 32"), "{log}");
    assert!(!log.contains("PolicyDescription"), "{log}");
    assert_eq!(std::fs::read_to_string(dir.join("r/configuration.yaml")).unwrap(), before);
    let _ = std::fs::remove_dir_all(dir);
}

/// One trainer per run folder: a second (resuming or forcing) is refused naming the first's
/// process, and touches nothing; a process killed mid-run leaves a training status that lists
/// its checkpoints, and the temporary files it was writing are removed on resume.
#[test]
fn one_trainer_per_run_folder_and_what_a_kill_leaves() {
    let dir = temp_dir("lock");
    let long = config(&dir, "long.yaml", 10_000_000, "");
    let first = spawn_learn(&long, "dup", &dir, &[]);
    wait_for(&dir.join("dup/run_logs/training_status.json"));
    for flag in ["--resume", "--force"] {
        let (ok, log) = finish(spawn_learn(&long, "dup", &dir, &[flag]));
        assert!(!ok, "{flag}: {log}");
        assert!(log.contains(&format!("in use by another mlagents-learn (PID {})", first.id())), "{flag}: {log}");
    }
    assert!(!steps(&dir.join("dup/1D")).is_empty(), "a refused --force removed the running trainer's files");
    // kill -9: what is on disk still says which checkpoints exist.
    // SAFETY: sends a signal to our own child.
    unsafe {
        libc::kill(first.id() as libc::pid_t, libc::SIGKILL);
    }
    let _ = finish(first);
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("dup/run_logs/training_status.json")).unwrap()).unwrap();
    assert!(!status["1D"]["checkpoints"].as_array().unwrap().is_empty(), "{status}");
    let stale = dir.join("dup/1D/.1D-7.safetensors.tmp-99999");
    std::fs::write(&stale, b"half a checkpoint").unwrap();
    let resumed = spawn_learn(&long, "dup", &dir, &["--resume"]);
    std::thread::sleep(Duration::from_secs(3));
    interrupt(&resumed);
    let (ok, log) = finish(resumed);
    assert!(ok, "{log}");
    assert!(!stale.exists(), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A start that fails before training (a busy port) leaves nothing that blocks the retry.
#[test]
fn a_failed_start_does_not_block_the_retry() {
    let dir = temp_dir("failed-start");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let short = config(&dir, "short.yaml", 300, "");
    let (ok, log) = finish(spawn_learn(&short, "retry", &dir, &["--base-port", &port]));
    assert!(!ok && log.contains("already in use"), "{log}");
    let (ok, log) = finish(spawn_learn(&short, "retry", &dir, &[]));
    assert!(ok, "{log}");
    assert!(!log.contains("already exists"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A learning rate that makes training diverge stops it with a message that says so: no
/// panic from inside libtorch; a non-finite one is refused with its line before anything
/// starts.
#[test]
fn a_diverging_learning_rate_is_an_error_not_a_panic() {
    let dir = temp_dir("diverge");
    let huge = dir.join("huge.yaml");
    std::fs::write(&huge, "behaviors:\n  1D:\n    hyperparameters: {batch_size: 16, buffer_size: 64, learning_rate: 1.0e30}\n    max_steps: 20000\nenv_settings: {base_port: 0}\n").unwrap();
    let (ok, log) = finish(spawn_learn(&huge, "huge", &dir, &[]));
    assert!(!ok, "{log}");
    assert!(log.contains("diverged") && log.contains("learning_rate"), "{log}");
    assert!(!log.contains("panicked") && !log.contains("frame #"), "{log}");
    let nan = dir.join("nan.yaml");
    std::fs::write(&nan, "behaviors:\n  1D:\n    hyperparameters:\n      learning_rate: .nan\n").unwrap();
    let (ok, log) = finish(spawn_learn(&nan, "nan", &dir, &[]));
    assert!(!ok && log.contains("learning_rate") && log.contains("line 4"), "{log}");
    assert!(!dir.join("nan").exists(), "a refused configuration created the run folder");
    let _ = std::fs::remove_dir_all(dir);
}

/// D1 and U5 (report of 2 December): `--force --initialize-from X --run-id X` removed run X's
/// checkpoints and then failed to read them; it is refused and nothing is removed.
/// `--initialize-from` a run of another network says what to change, not "use
/// --initialize-from".
#[test]
fn initializing_from_a_run_is_checked_before_anything_is_removed() {
    let dir = temp_dir("force-initialize");
    let base = config(&dir, "base.yaml", 300, "");
    let (ok, log) = finish(spawn_learn(&base, "fi", &dir, &[]));
    assert!(ok, "{log}");
    let before = steps(&dir.join("fi/1D"));
    let (ok, log) = finish(spawn_learn(&base, "fi", &dir, &["--force", "--initialize-from", "fi"]));
    assert!(!ok && log.contains("nothing was removed"), "{log}");
    assert_eq!(steps(&dir.join("fi/1D")), before);
    assert!(dir.join("fi/1D.onnx").exists());
    let wide = config(&dir, "wide.yaml", 300, "    network_settings: {hidden_units: 24}\n");
    let (ok, log) = finish(spawn_learn(&wide, "init_wide", &dir, &["--initialize-from", "fi"]));
    assert!(!ok && log.contains("--initialize-from needs the same network") && log.contains("hidden_units"), "{log}");
    assert!(!log.contains("start a new network with --initialize-from"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

/// S7 and U4 (report of 2 December): an agent asking for two decisions in one message, an
/// observation whose square overflows the normaliser and rewards whose returns overflow stop
/// training naming the agent and the value, not the learning rate.
#[test]
fn data_training_cannot_hold_is_named_where_it_comes_from() {
    let dir = temp_dir("overflow");
    let cases = [
        ("duplicate", "duplicate-agent@5", "", "asks for two decisions in one step"),
        ("observation", "huge-observation@5", "    network_settings: {normalize: true}\n", "observation 0 of agent"),
        ("reward", "huge-reward@5", "", "the rewards of agent"),
    ];
    for (name, fault, extra, expected) in cases {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!("behaviors:\n  1D:\n    hyperparameters: {{batch_size: 16, buffer_size: 64}}\n    max_steps: 2000\n{extra}env_settings: {{base_port: 0, env_args: [--fault, {fault}]}}\n"),
        )
        .unwrap();
        let (ok, log) = finish(spawn_learn(&path, name, &dir, &[]));
        assert!(!ok && log.contains(expected), "{name}: {log}");
        assert!(!log.contains("lower learning_rate") && !log.contains("panicked"), "{name}: {log}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
