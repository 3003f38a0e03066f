//! A training run's state on disk: creating a behavior's trainer from where it starts
//! (`--resume`, `--initialize-from`, `init_path`), writing checkpoints with their exports and
//! the curriculum and self-play records, and restoring the curriculum on `--resume`.

use super::options::LearnOptions;
use super::league::League;
use super::trainer::PpoTrainer;
use crate::checkpoint;
use crate::export::{export_checkpoint, ExportOptions};
use crate::spec::BehaviorName;
use crate::train::config::RunOptions;
use crate::train::curriculum::{LessonManager, RewardBuffer};
use crate::train::error::TrainError;
use crate::train::run_logs::{read_status_values, LESSON_NUM};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Creates a behavior's trainer, loading its starting point for `--resume` or
/// `--initialize-from` (or the behavior's `init_path`).
pub(super) fn create_trainer(run: &RunOptions, options: &LearnOptions, lessons: &LessonManager, name: &str, spec: &crate::spec::BehaviorSpec, seed: u64) -> Result<PpoTrainer, TrainError> {
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
    let mut trainer = PpoTrainer::new(&brain, spec, settings, seed, tensorboard.as_deref())?;
    trainer.reward_buffer = RewardBuffer::new(lessons.reward_buffer_capacity(&brain));
    if options.resume {
        let dir = options.run_dir.as_ref().ok_or_else(|| TrainError::Mismatch("--resume needs a run folder".into()))?.join(&brain);
        let c = checkpoint::latest(&dir, &brain).map_err(|e| TrainError::checkpoint(format!("cannot resume {brain}"), e))?;
        trainer.restore(&c, true)?;
        log::info!("Resuming training of {brain} from step {} ({})", c.description.step, c.path.display());
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

/// Writes a checkpoint labelled `step` into `<run>/<Behavior>/` (with the curriculum's state
/// when the run has environment parameters), verifies it by reading it back, exports
/// `<Behavior>-<step>.onnx` / `.nn` beside it, and drops the oldest beyond `keep_checkpoints`.
pub(super) fn save_checkpoint(trainer: &PpoTrainer, lessons: &LessonManager, league: &League, run_dir: &Path, step: u64) -> Result<checkpoint::Checkpoint, TrainError> {
    let dir = run_dir.join(&trainer.behavior);
    let curriculum = (!lessons.is_empty()).then(|| lessons.record(&trainer.reward_buffer));
    let (mut description, mut tensors) = trainer.checkpoint(step, curriculum);
    if let Some((record, self_play_tensors)) = league.record(&trainer.behavior) {
        description.self_play = Some(record);
        tensors.0.extend(self_play_tensors.0);
    }
    let path = checkpoint::Checkpoint::write(&dir, description, &tensors).map_err(|source| TrainError::Checkpoint { context: None, source })?;
    let saved = checkpoint::Checkpoint::read(&path).map_err(|e| TrainError::checkpoint("checkpoint written but unreadable", e))?;
    let stem = checkpoint::stem(&trainer.behavior, step);
    export_checkpoint(&saved, &dir, &stem, ExportOptions::default(), false)?;
    checkpoint::prune(&dir, &trainer.behavior, trainer.settings.keep_checkpoints);
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
