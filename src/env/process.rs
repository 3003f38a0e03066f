//! Launching and supervising environment processes the way mlagents_envs does
//! (protocol.md §6), and the `sim:SCENE` shorthand for `mlagents-sim --scene SCENE`.

use super::EnvError;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prefix that names a stand-in scene instead of a Unity build.
pub const SIM_PREFIX: &str = "sim:";

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvTarget {
    /// No executable: wait for the Unity Editor (press Play) on the editor port.
    Editor,
    /// A Unity player build (path as the user gave it, resolved like mlagents_envs).
    Executable(String),
    /// A stand-in scene of `mlagents-sim`.
    Sim(String),
}

impl EnvTarget {
    /// Parses `--env`: nothing, `sim:SCENE`, or a path.
    pub fn parse(env: Option<&str>) -> Self {
        match env {
            None | Some("") => Self::Editor,
            Some(s) => match s.strip_prefix(SIM_PREFIX) {
                Some(scene) => Self::Sim(scene.into()),
                None => Self::Executable(s.into()),
            },
        }
    }
}

/// Finds a Unity Linux player as mlagents_envs does: strip a known extension, then try
/// `<cwd>/<name>.x86_64`, `<cwd>/<name>.x86`, `<name>.x86_64`, `<name>.x86`, the path itself.
pub fn resolve_executable(name: &str) -> Result<PathBuf, EnvError> {
    let stripped = [".app", ".exe", ".x86_64", ".x86"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    let cwd = std::env::current_dir().unwrap_or_default();
    let candidates = vec![
        cwd.join(format!("{stripped}.x86_64")),
        cwd.join(format!("{stripped}.x86")),
        PathBuf::from(format!("{stripped}.x86_64")),
        PathBuf::from(format!("{stripped}.x86")),
        PathBuf::from(name),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| EnvError::ExecutableNotFound { name: name.into(), tried: candidates })
}

/// Finds the `mlagents-sim` binary: `$MLAGENTS_SIM`, beside the running executable (or one
/// folder up, for test binaries in `target/*/deps`), then `PATH`.
pub fn find_sim_binary() -> Result<PathBuf, EnvError> {
    if let Some(p) = std::env::var_os("MLAGENTS_SIM") {
        return Ok(PathBuf::from(p));
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            let candidate = dir.join("mlagents-sim");
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate);
        }
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let candidate = dir.join("mlagents-sim");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    tried.push(PathBuf::from("mlagents-sim on PATH"));
    Err(EnvError::SimNotFound { tried })
}

/// The argument list mlagents_envs passes a player (protocol.md §6), in its order.
pub fn player_arguments(
    port: u16,
    worker_id: u32,
    no_graphics: bool,
    log_folder: Option<&Path>,
    additional_args: &[String],
) -> Vec<String> {
    let mut args = Vec::new();
    if no_graphics {
        args.extend(["-nographics".to_string(), "-batchmode".to_string()]);
    }
    args.extend(["--mlagents-port".to_string(), port.to_string()]);
    if let Some(folder) = log_folder {
        if !additional_args.iter().any(|a| a.eq_ignore_ascii_case("-logfile")) {
            args.push("-logFile".into());
            args.push(folder.join(format!("Player-{worker_id}.log")).to_string_lossy().into_owned());
        }
    }
    args.extend(additional_args.iter().cloned());
    args
}

/// A running environment process, killed with its whole process group when dropped.
pub struct EnvProcess {
    child: Child,
    description: String,
    log_file: Option<PathBuf>,
    /// The last lines the process wrote to stderr (when it is not shown directly), quoted
    /// when it dies: e.g. a stand-in's "unknown scene" message.
    stderr_tail: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// How many of the last stderr lines are kept for the exit message.
const STDERR_TAIL_LINES: usize = 5;

impl EnvProcess {
    /// Starts `program args` in a new process group; output goes to `debug_output` or nowhere.
    pub fn spawn(program: &Path, args: &[String], debug_output: bool, log_file: Option<PathBuf>) -> Result<Self, EnvError> {
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).process_group(0);
        if !debug_output {
            command.stdout(Stdio::null()).stderr(Stdio::piped());
        }
        let mut child = command.spawn().map_err(|source| EnvError::Launch { program: program.to_path_buf(), source })?;
        let description = format!("{} {}", program.display(), args.join(" "));
        log::debug!("started environment (pid {}): {description}", child.id());
        let stderr_tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let tail = stderr_tail.clone();
            // Drains the pipe for the process's whole life, so it never blocks on a full pipe.
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        Ok(Self { child, description, log_file, stderr_tail })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err(description)` once the process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.describe_exit(status)),
            Err(e) => Err(format!("cannot query the environment process: {e}")),
        }
    }

    fn describe_exit(&self, status: std::process::ExitStatus) -> String {
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "exited".into(),
        };
        let log = self.log_file.as_ref().map(|l| format!("; its log: {}", l.display())).unwrap_or_default();
        // The reader may still be taking the last lines out of the pipe.
        std::thread::sleep(Duration::from_millis(50));
        let tail: Vec<String> = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        let said = if tail.is_empty() { String::new() } else { format!("; it said: {}", tail.join(" / ")) };
        format!("`{}` {how}{said}{log}", self.description)
    }

    /// Waits up to `timeout` for the process to exit by itself, then kills its group.
    pub fn close(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// Kills the process group at once and reaps the process.
    pub fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: killpg only sends a signal; the group id is our child's pid (process_group(0)).
            unsafe {
                libc::killpg(self.child.id() as libc::pid_t, libc::SIGKILL);
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for EnvProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_mlagents_order() {
        let args = player_arguments(5006, 1, true, Some(Path::new("/tmp/logs")), &["--scene".into(), "Basic".into()]);
        assert_eq!(
            args,
            ["-nographics", "-batchmode", "--mlagents-port", "5006", "-logFile", "/tmp/logs/Player-1.log", "--scene", "Basic"]
        );
        let args = player_arguments(5005, 0, false, Some(Path::new("/l")), &["-LOGFILE".into(), "x".into()]);
        assert_eq!(args, ["--mlagents-port", "5005", "-LOGFILE", "x"]);
    }

    #[test]
    fn targets_parse() {
        assert_eq!(EnvTarget::parse(None), EnvTarget::Editor);
        assert_eq!(EnvTarget::parse(Some("sim:3DBall")), EnvTarget::Sim("3DBall".into()));
        assert_eq!(EnvTarget::parse(Some("builds/Ball")), EnvTarget::Executable("builds/Ball".into()));
    }

    #[test]
    fn missing_executable_lists_what_was_tried() {
        let e = resolve_executable("/nonexistent/Build.x86_64").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/Build.x86_64") && e.contains("/nonexistent/Build.x86"), "{e}");
    }
}
