//! A training run's state on disk: creating a behavior's trainer from where it starts
//! (`--resume`, `--initialize-from`, `init_path`), writing checkpoints with their exports and
//! the curriculum and self-play records, and restoring the curriculum on `--resume`.

use super::options::LearnOptions;
use super::league::League;
use super::trainer::BehaviorTrainer;
use crate::checkpoint;
use crate::export::{export_checkpoint, ExportOptions};
use crate::spec::BehaviorName;
use crate::train::config::RunOptions;
use crate::train::curriculum::{LessonManager, RewardBuffer};
use crate::train::error::TrainError;
use crate::train::run_logs::{read_status_values, LESSON_NUM};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The seed of a resumed run's random streams (the environment's, action sampling, minibatch
/// order, self-play swaps): the run seed mixed with the steps its behaviors resume from. With
/// the run seed itself, a resume replayed the streams the run began with and re-collected,
/// nearly episode for episode, its first experience (bad-input report of 2 December, S5; 0.28
/// does the same). The same checkpoints and seed still give the same streams. A positive i32,
/// as the environment's seed travels.
pub(super) fn resumed_seed(seed: u64, run_dir: &Path) -> u64 {
    let steps: u64 = std::fs::read_dir(run_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| checkpoint::list(&entry.path(), &entry.file_name().to_string_lossy()).last().map(|(step, _)| *step))
        .fold(0u64, u64::wrapping_add);
    if steps == 0 {
        return seed;
    }
    // splitmix64 of the pair.
    let mut z = seed.wrapping_add(steps.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & 0x7fff_ffff
}

/// Creates a behavior's trainer, loading its starting point for `--resume` or
/// `--initialize-from` (or the behavior's `init_path`).
pub(super) fn create_trainer(run: &RunOptions, options: &LearnOptions, lessons: &LessonManager, name: &str, spec: &crate::spec::BehaviorSpec, seed: u64) -> Result<BehaviorTrainer, TrainError> {
    let brain = BehaviorName::parse(name).name;
    let settings = run
        .settings_for(&brain)
        .ok_or_else(|| {
            let named: Vec<&str> = run.behaviors.keys().map(String::as_str).collect();
            let named = if named.is_empty() { "no behavior".to_string() } else { named.join(", ") };
            TrainError::Mismatch(format!("the environment's behavior {brain} is not in the configuration, which names {named}; add it under behaviors: or give default_settings"))
        })?
        .clone();
    let tensorboard = options.run_dir.as_ref().map(|d| d.join(&brain));
    if let (Some(dir), false) = (&tensorboard, options.resume) {
        // As ML-Agents: a new (not resumed) run starts its TensorBoard files afresh.
        remove_event_files(dir);
    }
    let init_path = settings.init_path.clone();
    let mut trainer = BehaviorTrainer::new(&brain, spec, settings, seed, tensorboard.as_deref())?;
    trainer.reward_buffer = RewardBuffer::new(lessons.reward_buffer_capacity(&brain));
    if options.resume {
        let dir = options.run_dir.as_ref().ok_or_else(|| TrainError::Mismatch("--resume needs a run folder".into()))?.join(&brain);
        let c = checkpoint::latest(&dir, &brain).map_err(|e| TrainError::checkpoint(format!("cannot resume {brain}"), e))?;
        trainer.restore(&c, true)?;
        log::info!("Resuming training of {brain} from step {} ({})", c.description.step, c.path.display());
        restore_replay_buffer(&mut trainer, &dir, c.description.step)?;
    } else if let Some(from) = &options.initialize_from {
        let c = checkpoint::latest(&from.join(&brain), &brain).map_err(|e| TrainError::checkpoint(format!("cannot initialize {brain} from {}", from.display()), e))?;
        trainer.restore(&c, false)?;
        log::info!("Initializing {brain} from {}", c.path.display());
    } else if let Some(path) = init_path {
        let c = checkpoint::Checkpoint::read(Path::new(&path)).map_err(|e| TrainError::checkpoint(format!("init_path of {brain}"), e))?;
        trainer.restore(&c, false)?;
        log::info!("Initializing {brain} from {path}");
    }
    Ok(trainer)
}

fn remove_event_files(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("events.out.tfevents") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `<Behavior>-<step>.replay` beside the checkpoint of that step: the experience it kept.
fn replay_path(dir: &Path, behavior: &str, step: u64) -> PathBuf {
    dir.join(format!("{}.replay", checkpoint::stem(behavior, step)))
}

/// Writes the experience `trainer` keeps (SAC's replay buffer with `save_replay_buffer`) beside
/// the checkpoint of `step`, atomically, before that checkpoint exists; so the newest
/// checkpoint always finds its buffer, even after a kill.
fn save_replay_buffer(trainer: &BehaviorTrainer, dir: &Path, step: u64) -> Result<(), TrainError> {
    let Some(experience) = trainer.experience_to_keep() else { return Ok(()) };
    let path = replay_path(dir, &trainer.behavior, step);
    let bytes = experience.to_safetensors();
    std::fs::create_dir_all(dir).map_err(|e| TrainError::writing(dir.to_path_buf(), e))?;
    checkpoint::write_atomic(&path, &bytes).map_err(|e| TrainError::writing(path.clone(), e))?;
    let rows = experience.0.get("replay.done").map_or(0, |t| t.data.len());
    log::info!("Saved the replay buffer of {} ({rows} rows, {:.1} MB) to {}", trainer.behavior, bytes.len() as f64 / 1e6, path.display());
    Ok(())
}

/// Deletes every replay buffer of `behavior` but the one of `step` (one copy is kept, the
/// newest checkpoint's).
fn remove_older_replay_buffers(dir: &Path, behavior: &str, step: u64) {
    let kept = replay_path(dir, behavior, step);
    let prefix = format!("{behavior}-");
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".replay") && entry.path() != kept {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `--resume`: the replay buffer saved beside the checkpoint resumed from, when the trainer
/// keeps one (a damaged file is an error; a missing one is said, and the buffer starts empty).
fn restore_replay_buffer(trainer: &mut BehaviorTrainer, dir: &Path, step: u64) -> Result<(), TrainError> {
    let Some(sac) = trainer.settings.hyperparameters.sac.clone() else { return Ok(()) };
    if !sac.save_replay_buffer {
        log::info!("{}: save_replay_buffer is off, so the replay buffer starts empty and refills before updates resume (as 0.28 resumes)", trainer.behavior);
        return Ok(());
    }
    let path = replay_path(dir, &trainer.behavior, step);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            log::warn!("{}: no replay buffer beside the checkpoint of step {step} ({} is missing); the buffer starts empty", trainer.behavior, path.display());
            return Ok(());
        }
        Err(e) => return Err(TrainError::Io { what: "replay buffer", path, source: e }),
    };
    let damaged = |why: String| TrainError::Mismatch(format!("{}: the replay buffer cannot be read ({why}); move it away to resume with an empty buffer", path.display()));
    let experience = crate::policy::Weights::from_safetensors(&bytes).map_err(|e| damaged(e.to_string()))?;
    let rows = trainer.restore_experience(&experience).map_err(damaged)?;
    log::info!("{}: replay buffer restored from {} ({rows} rows)", trainer.behavior, path.display());
    Ok(())
}

/// Writes a checkpoint labelled `step` into `<run>/<Behavior>/` (with the curriculum's state
/// when the run has environment parameters), verifies it by reading it back, exports
/// `<Behavior>-<step>.onnx` / `.nn` beside it, and drops the oldest beyond `keep_checkpoints`.
pub(super) fn save_checkpoint(trainer: &BehaviorTrainer, lessons: &LessonManager, league: &League, run_dir: &Path, step: u64) -> Result<checkpoint::Checkpoint, TrainError> {
    let dir = run_dir.join(&trainer.behavior);
    let curriculum = (!lessons.is_empty()).then(|| lessons.record(&trainer.reward_buffer));
    let (mut description, mut tensors) = trainer.checkpoint(step, curriculum);
    if let Some((record, self_play_tensors)) = league.record(&trainer.behavior) {
        description.self_play = Some(record);
        tensors.0.extend(self_play_tensors.0);
    }
    save_replay_buffer(trainer, &dir, step)?;
    let path = checkpoint::Checkpoint::write(&dir, description, &tensors).map_err(|source| TrainError::Checkpoint { context: None, source })?;
    let saved = checkpoint::Checkpoint::read(&path).map_err(|e| TrainError::checkpoint("checkpoint written but unreadable", e))?;
    let stem = checkpoint::stem(&trainer.behavior, step);
    export_checkpoint(&saved, &dir, &stem, ExportOptions::default(), false)?;
    checkpoint::prune(&dir, &trainer.behavior, trainer.settings.keep_checkpoints);
    remove_older_replay_buffers(&dir, &trainer.behavior, step);
    log::info!("Exported {}", dir.join(format!("{stem}.onnx")).display());
    Ok(saved)
}

/// `--resume`: every parameter's lesson and smoothing from the newest checkpoint that
/// recorded them (each trainer restores its own reward buffer from its checkpoint); failing
/// that, the `lesson_num`s of `training_status.json`, as 0.28 resumes.
pub(super) fn restore_lessons(run_dir: &Path, lessons: &mut LessonManager) -> Result<(), TrainError> {
    if lessons.is_empty() {
        return Ok(());
    }
    let newest = std::fs::read_dir(run_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| checkpoint::latest(&entry.path(), &entry.file_name().to_string_lossy()).ok())
        .filter(|c| c.description.curriculum.is_some())
        .max_by(|a, b| a.description.creation_time.total_cmp(&b.description.creation_time));
    if let Some(c) = newest {
        let record = c.description.curriculum.as_ref().expect("filtered above");
        lessons.restore(&record.lessons, &record.smoothed, &c.path.display().to_string()).map_err(|e| TrainError::Mismatch(e.to_string()))?;
        log::info!("Curriculum restored from {} (step {}): lessons {:?}, smoothing {:?}", c.path.display(), c.description.step, record.lessons, record.smoothed);
        return Ok(());
    }
    let status = training_status_path(run_dir);
    match read_status_values(&status, LESSON_NUM).map_err(TrainError::Mismatch)? {
        Some(numbers) => {
            let numbers = numbers.into_iter().map(|(name, n)| (name, n as usize)).collect();
            lessons.restore(&numbers, &BTreeMap::new(), &status.display().to_string()).map_err(|e| TrainError::Mismatch(e.to_string()))
        }
        None => {
            log::warn!("Training status file not found. Not all functions will resume properly.");
            Ok(())
        }
    }
}

/// `run_logs/training_status.json` of a run folder (named in errors).
pub(super) fn training_status_path(run_dir: &Path) -> PathBuf {
    run_dir.join("run_logs").join("training_status.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resume draws new streams from the run seed and the steps it resumes from; a new run
    /// (nothing to resume) keeps the run seed (bad-input report of 2 December, S5).
    #[test]
    fn a_resume_continues_with_streams_of_its_own() {
        let dir = std::env::temp_dir().join(format!("mlagents-resumed-seed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("Basic")).unwrap();
        assert_eq!(resumed_seed(1, &dir), 1);
        std::fs::write(dir.join("Basic").join("Basic-998.json"), b"{}").unwrap();
        let at_998 = resumed_seed(1, &dir);
        assert_ne!(at_998, 1);
        assert_eq!(at_998, resumed_seed(1, &dir), "the same checkpoints and seed give the same streams");
        assert!(at_998 <= i32::MAX as u64);
        std::fs::write(dir.join("Basic").join("Basic-1499.json"), b"{}").unwrap();
        assert_ne!(resumed_seed(1, &dir), at_998, "a later resume draws other streams");
        assert_ne!(resumed_seed(2, &dir), resumed_seed(1, &dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
