//! The run folder `results/<run-id>/` as one training process owns it. Opening it:
//!
//! - takes an exclusive lock (`.mlagents-learn.lock`, an `flock` the kernel drops when the
//!   process ends, however it ends), so two trainers never write one run at once;
//! - `--force`: removes every file of the earlier run before anything new is written, so old
//!   checkpoints can never be pruned in place of new ones, exported or resumed; `--force` with
//!   `--initialize-from` the same run is refused before anything is removed (it would erase the
//!   checkpoints it is to start from);
//! - a new run over a folder that holds no checkpoint (an earlier start that failed before its
//!   first checkpoint) starts afresh in it; over one that holds checkpoints it is refused;
//! - `--resume`: removes the temporary files a killed process left behind
//!   (`.<file>.tmp-<pid>`, see [`crate::checkpoint::write_atomic`]).
//!
//! `configuration.yaml` is written by [`RunFolder::write_configuration`] once the run has
//! started (for `--resume`: once the checkpoints have loaded), so a failed resume leaves the
//! run's record of its configuration as it was.

use crate::checkpoint::{self, write_atomic};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Whether `path` is `dir` or inside it (both resolved; a path that does not exist is inside
/// nothing).
fn within(path: &Path, dir: &Path) -> bool {
    match (path.canonicalize(), dir.canonicalize()) {
        (Ok(path), Ok(dir)) => path.starts_with(dir),
        _ => false,
    }
}

/// Name of the lock file inside the run folder.
pub const LOCK_FILE: &str = ".mlagents-learn.lock";

/// How a training run treats an existing run folder (`--force`, `--resume`, neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    New,
    Force,
    Resume,
}

/// Why the run folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error("cannot resume: {0} does not exist (drop --resume to start a new run)")]
    NothingToResume(String),
    #[error("{0} already exists and holds checkpoints; use --resume to continue it or --force to overwrite it")]
    Exists(String),
    #[error("{0} is not a folder")]
    NotAFolder(String),
    #[error("run folder {dir} is in use by another mlagents-learn ({holder}); wait for it to end or pick another --run-id")]
    InUse { dir: String, holder: String },
    #[error("--force would remove the checkpoints of {0} before --initialize-from reads them; nothing was removed (to start a new network from this run's weights, give it another --run-id; to continue it, use --resume)")]
    ForceErasesInitialization(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RunFolderError + '_ {
    move |source| RunFolderError::Io { path: path.display().to_string(), source }
}

/// An open, locked run folder. The lock is held until this value is dropped.
#[derive(Debug)]
pub struct RunFolder {
    dir: PathBuf,
    _lock: File,
}

impl RunFolder {
    /// Opens (creating it when needed) and locks the run folder `dir` for `mode`; a run that
    /// starts from another run's checkpoints names that run's folder (`initialize_from`).
    pub fn open(dir: &Path, mode: StartMode, initialize_from: Option<&Path>) -> Result<Self, RunFolderError> {
        if let (StartMode::Force, Some(from)) = (mode, initialize_from) {
            if within(from, dir) {
                return Err(RunFolderError::ForceErasesInitialization(dir.display().to_string()));
            }
        }
        let existed = dir.exists();
        if existed && !dir.is_dir() {
            return Err(RunFolderError::NotAFolder(dir.display().to_string()));
        }
        if mode == StartMode::Resume && !existed {
            return Err(RunFolderError::NothingToResume(dir.display().to_string()));
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock = lock(dir)?;
        let folder = Self { dir: dir.to_path_buf(), _lock: lock };
        match mode {
            StartMode::Resume => folder.remove_stale_temporaries()?,
            StartMode::Force => {
                if folder.clear()? {
                    log::info!("--force: removed the earlier run's files from {}", dir.display());
                }
            }
            StartMode::New if existed => {
                if holds_checkpoints(dir) {
                    return Err(RunFolderError::Exists(dir.display().to_string()));
                }
                if folder.clear()? {
                    log::info!("{} holds no checkpoint (an earlier start that did not get far): starting afresh in it", dir.display());
                }
            }
            StartMode::New => {}
        }
        Ok(folder)
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `configuration.yaml` (atomically).
    pub fn write_configuration(&self, yaml: &str) -> Result<(), RunFolderError> {
        let path = self.dir.join("configuration.yaml");
        write_atomic(&path, yaml.as_bytes()).map_err(io(&path))
    }

    /// Removes everything in the folder but the lock. Returns whether anything was there.
    fn clear(&self) -> Result<bool, RunFolderError> {
        let mut removed = false;
        for entry in std::fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            if entry.file_name() == LOCK_FILE {
                continue;
            }
            let path = entry.path();
            let is_dir = entry.file_type().map_err(io(&path))?.is_dir();
            if is_dir { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.map_err(io(&path))?;
            removed = true;
        }
        Ok(removed)
    }

    /// Removes `.<name>.tmp-<pid>` files left by a process that was killed while writing
    /// (the lock says no other process is writing here now).
    fn remove_stale_temporaries(&self) -> Result<(), RunFolderError> {
        let mut folders = vec![self.dir.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).map_err(io(&folder))?.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if is_temporary(&entry.file_name().to_string_lossy()) {
                    std::fs::remove_file(&path).map_err(io(&path))?;
                    log::info!("removed {} (left by a process that was stopped while writing it)", path.display());
                }
            }
        }
        Ok(())
    }
}

/// Whether a file name is one of [`write_atomic`]'s temporary names.
fn is_temporary(name: &str) -> bool {
    name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether any behavior folder inside `dir` holds a checkpoint description.
fn holds_checkpoints(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        entry.path().is_dir() && !checkpoint::list(&entry.path(), &name).is_empty()
    })
}

/// Takes the folder's exclusive lock and records this process's id in it.
fn lock(dir: &Path) -> Result<File, RunFolderError> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io(&path))?;
    // SAFETY: flock on a file descriptor we own; no memory is shared.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(&path)(error));
        }
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = match holder.trim() {
            "" => "a process that has not written its id yet".to_string(),
            pid => format!("PID {pid}"),
        };
        return Err(RunFolderError::InUse { dir: dir.display().to_string(), holder });
    }
    let write_pid = |file: &mut File| -> std::io::Result<()> {
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())
    };
    write_pid(&mut file).map_err(io(&path))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mlagents-runfolder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn fake_checkpoint(dir: &Path, behavior: &str, step: u64) {
        let folder = dir.join(behavior);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{behavior}-{step}.json")), b"{}").unwrap();
    }

    #[test]
    fn force_removes_the_earlier_run_before_anything_is_written() {
        let dir = temp_dir("force");
        fake_checkpoint(&dir, "Basic", 2001);
        std::fs::write(dir.join("configuration.yaml"), b"old").unwrap();
        let folder = RunFolder::open(&dir, StartMode::Force, None).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from(LOCK_FILE)]);
        drop(folder);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_run_is_refused_over_checkpoints_and_starts_afresh_over_a_failed_start() {
        let dir = temp_dir("new");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("configuration.yaml"), b"from a start that failed").unwrap();
        drop(RunFolder::open(&dir, StartMode::New, None).unwrap());
        assert!(!dir.join("configuration.yaml").exists());
        fake_checkpoint(&dir, "Basic", 10);
        let err = RunFolder::open(&dir, StartMode::New, None).unwrap_err();
        assert!(matches!(err, RunFolderError::Exists(_)), "{err}");
        assert!(err.to_string().contains("--resume") && err.to_string().contains("--force"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_process_at_a_time_and_the_holder_is_named() {
        let dir = temp_dir("lock");
        let first = RunFolder::open(&dir, StartMode::New, None).unwrap();
        // flock locks belong to the open file description: a second open in this process
        // conflicts as another process would.
        let err = RunFolder::open(&dir, StartMode::Force, None).unwrap_err();
        assert!(matches!(&err, RunFolderError::InUse { holder, .. } if holder == &format!("PID {}", std::process::id())), "{err}");
        assert!(dir.join(LOCK_FILE).exists(), "a refused --force removes nothing");
        drop(first);
        drop(RunFolder::open(&dir, StartMode::Resume, None).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resume_needs_the_folder_and_removes_stale_temporaries() {
        let dir = temp_dir("resume");
        assert!(matches!(RunFolder::open(&dir, StartMode::Resume, None), Err(RunFolderError::NothingToResume(_))));
        fake_checkpoint(&dir, "Basic", 5);
        let stale = dir.join("Basic").join(".Basic-792.safetensors.tmp-1184");
        std::fs::write(&stale, b"half").unwrap();
        let kept = dir.join("Basic").join(".notes.tmp-draft");
        std::fs::write(&kept, b"not ours").unwrap();
        drop(RunFolder::open(&dir, StartMode::Resume, None).unwrap());
        assert!(!stale.exists());
        assert!(kept.exists());
        assert!(dir.join("Basic").join("Basic-5.json").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `--force --initialize-from X --run-id X` removed X's checkpoints and then failed to
    /// read them (bad-input report of 2 December, D1): refused, and nothing is removed.
    #[test]
    fn force_refuses_to_erase_the_run_it_initializes_from() {
        let dir = temp_dir("force-init");
        fake_checkpoint(&dir, "Basic", 998);
        let spelled_otherwise = dir.join("Basic").join("..");
        for from in [dir.as_path(), spelled_otherwise.as_path()] {
            let err = RunFolder::open(&dir, StartMode::Force, Some(from)).unwrap_err();
            assert!(matches!(err, RunFolderError::ForceErasesInitialization(_)), "{err}");
            assert!(err.to_string().contains("nothing was removed"), "{err}");
        }
        assert!(dir.join("Basic").join("Basic-998.json").exists());
        let other = temp_dir("force-init-other");
        fake_checkpoint(&other, "Basic", 5);
        drop(RunFolder::open(&dir, StartMode::Force, Some(&other)).unwrap());
        assert!(!dir.join("Basic").exists(), "another run's checkpoints do not protect this one");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }

    #[test]
    fn a_file_in_place_of_the_folder_is_named() {
        let dir = temp_dir("file");
        std::fs::write(&dir, b"").unwrap();
        assert!(matches!(RunFolder::open(&dir, StartMode::New, None), Err(RunFolderError::NotAFolder(_))));
        std::fs::remove_file(&dir).unwrap();
    }
}
