//! `mlagents-learn CONFIG.yaml --run-id ID --env ENV`: PPO and SAC training as ML-Agents' trainer
//! runs it (the `train` feature): the YAML configuration, `--env`, `--num-envs`,
//! `--base-port`, `--seed`, `--results-dir`, `--force`, `--resume`, `--initialize-from`,
//! `--timeout-wait`, the engine settings (`--time-scale`, `--width`, ... , `--no-graphics`),
//! `--env-args`, `--debug`; console summaries, TensorBoard files, checkpoints every
//! `checkpoint_interval` with their ONNX and `.nn` exports, run logs, and Ctrl-C/SIGTERM
//! (finish the step, checkpoint, close, export, exit 0). Vector observations and images (the
//! `simple` encoder).

use anyhow::{bail, Result};
use mlagents::train::run_folder::{RunFolder, StartMode};
use clap::Parser;
use mlagents::train::config::{CommandLineOverrides, RunOptions};
use mlagents::train::session::{learn_observed, LearnObserver, LearnOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::path::PathBuf;
use std::time::Duration;

/// mimalloc for every allocation in the process, libtorch's included (the `override` build
/// replaces `malloc` and `free` themselves): an update makes thousands of small tensors, and
/// glibc's allocator was an eighth of the trainer's time.
#[cfg(feature = "train")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "mlagents-learn", version, about = "Train ML-Agents behaviors with PPO or SAC")]
struct Cli {
    /// The trainer configuration (ML-Agents 0.28 `behaviors:` YAML).
    config: PathBuf,
    /// Seconds to wait for an environment's answer.
    #[arg(long, default_value_t = 60)]
    timeout_wait: u64,
    /// The flags that override the YAML (defined once, in the configuration module).
    #[command(flatten)]
    overrides: CommandLineOverrides,
}

/// Set by SIGINT/SIGTERM: training stops after the current step, checkpoints, closes the
/// environments and exports. A second signal exits at once (status 130; files being written
/// are temporary files until renamed, so nothing is left torn).
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    if STOP_REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installed before the environments start, so a stop asked for while they start is not lost.
fn install_stop_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, request_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, request_stop as *const () as libc::sighandler_t);
    }
}

/// Summary lines on stdout and, on a terminal, a progress bar on stderr: steps of all
/// behaviors, steps per second and the time left.
struct Console {
    bar: indicatif::ProgressBar,
}

impl Console {
    fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr_with_hz(4));
        let style = indicatif::ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} steps  {msg}  ETA {eta}").expect("valid template");
        bar.set_style(style);
        Self { bar }
    }
}

impl LearnObserver for Console {
    fn summary(&mut self, line: &str) {
        // Training goes on when nobody reads the summaries any more (`| head`).
        self.bar.suspend(|| {
            let _ = mlagents::console::write_stdout_line(&format!("[INFO] {line}"));
        });
    }

    fn progress(&mut self, done: u64, total: u64, gained: u64) {
        if self.bar.length() != Some(total) {
            self.bar.set_length(total);
            self.bar.set_position(done);
            self.bar.reset_eta();
        }
        let elapsed = self.bar.elapsed().as_secs_f64();
        if elapsed > 0.0 {
            self.bar.set_message(format!("{:.0} steps/s", gained as f64 / elapsed));
        }
        self.bar.set_position(done);
    }

    fn finished(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("mlagents-learn: {}", mlagents::error_text(e.chain()));
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let level = if cli.overrides.debug { "debug" } else { "info" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    let mut run = RunOptions::from_file(&cli.config)?;
    // Flags given on the command line override the YAML; configuration.yaml records the result.
    run.apply_overrides(cli.overrides);
    run.check_run_settings(&cli.config.display().to_string())?;
    // configuration.yaml records the seeds the run uses.
    run.resolve_seeds();
    let env = run.env_settings.env_path.clone();
    let run_id = &run.checkpoint_settings.run_id;
    if run_id.trim().is_empty() {
        bail!("--run-id is empty: name the run (its folder is <results-dir>/<run-id>)");
    }
    if run_id.contains(['/', '\\']) || run_id.split(['/', '\\']).any(|part| part == "..") {
        log::warn!("--run-id {run_id:?} is a path: the run folder is {}", PathBuf::from(&run.checkpoint_settings.results_dir).join(run_id).display());
    }
    let results_dir = PathBuf::from(&run.checkpoint_settings.results_dir);
    let run_dir = results_dir.join(&run.checkpoint_settings.run_id);
    let resume = run.checkpoint_settings.resume;
    if resume && run.checkpoint_settings.force {
        log::warn!("both --resume and --force were given; resuming (as mlagents-learn does)");
    }
    let initialize_from = run.checkpoint_settings.initialize_from.as_ref().filter(|_| !resume).map(|from| {
        let as_path = PathBuf::from(from);
        if as_path.is_dir() && from.contains(std::path::MAIN_SEPARATOR) { as_path } else { results_dir.join(from) }
    });
    if let Some(from) = &initialize_from {
        if !from.is_dir() {
            bail!("--initialize-from: run folder {} does not exist", from.display());
        }
    }
    let mode = match (resume, run.checkpoint_settings.force) {
        (true, _) => StartMode::Resume,
        (false, true) => StartMode::Force,
        (false, false) => StartMode::New,
    };
    // Held (locked) until the end of the process.
    let folder = RunFolder::open(&run_dir, mode, initialize_from.as_deref())?;
    let options = LearnOptions {
        env,
        run_dir: Some(folder.path().to_path_buf()),
        timeout_wait: Duration::from_secs(cli.timeout_wait),
        resume,
        initialize_from,
        configuration_yaml: Some(run.to_yaml()),
        stop: Some(&STOP_REQUESTED),
    };
    install_stop_handlers();
    let results = learn_observed(&run, &options, &mut Console::new())?;
    for (behavior, r) in results {
        let tail = &r.episode_returns[r.episode_returns.len().saturating_sub(100)..];
        let returns = match tail.len() {
            0 => "no episode ended in this session".to_string(),
            n => format!("mean return of the last {n} episodes {:.3}", tail.iter().sum::<f32>() / n as f32),
        };
        let exported = r.onnx.as_ref().map_or_else(|| "nothing exported".to_string(), |p| format!("exported {}", p.display()));
        let _ = mlagents::console::write_stdout_line(&format!("{behavior}: {} steps, {returns}, {exported}", r.steps));
    }
    Ok(())
}
