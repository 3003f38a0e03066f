//! `results/<run-id>/run_logs/`: `training_status.json` (the checkpoints of each behavior,
//! as ML-Agents 0.28 lists them) and `timers.json` (where the time went, and gauges of the
//! mean reward), training.md §10.

use crate::checkpoint::{self, write_atomic, Checkpoint};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Stats format ML-Agents 0.28 writes in the metadata.
pub const STATS_FORMAT_VERSION: &str = "0.3.0";

fn checkpoint_entry(run_dir: &Path, behavior: &str, c: &Checkpoint) -> Value {
    let dir = run_dir.join(behavior);
    let stem = checkpoint::stem(behavior, c.description.step);
    json!({
        "steps": c.description.step,
        "file_path": dir.join(format!("{stem}.onnx")).display().to_string(),
        "reward": c.description.reward,
        "creation_time": c.description.creation_time,
        "auxillary_file_paths": [
            dir.join(format!("{stem}.safetensors")).display().to_string(),
            dir.join(format!("{stem}.json")).display().to_string(),
        ],
    })
}

/// The key 0.28 keeps a parameter's lesson under (`StatusType.LESSON_NUM`).
pub const LESSON_NUM: &str = "lesson_num";
/// The key 0.28 keeps a self-play behavior's rating under (`StatusType.ELO`).
pub const ELO: &str = "elo";

/// Writes `run_logs/training_status.json` from the checkpoints on disk (so a run that
/// crashed still gets a true list when it is resumed). `final_steps` names each behavior's
/// final checkpoint, once the run has ended; `lessons` gives each environment parameter's
/// lesson number (`{"<param>": {"lesson_num": N}}`, as 0.28 keeps it), `elos` each self-play
/// behavior's rating (`{"<behavior>": {"elo": x, ...}}`).
pub fn write_training_status(run_dir: &Path, behaviors: &[String], final_steps: &BTreeMap<String, u64>, lessons: &[(&str, usize)], elos: &BTreeMap<String, f64>) -> std::io::Result<()> {
    let mut root = Map::new();
    for (parameter, lesson) in lessons {
        root.insert(parameter.to_string(), json!({ LESSON_NUM: lesson }));
    }
    for behavior in behaviors {
        let dir = run_dir.join(behavior);
        let checkpoints: Vec<Checkpoint> = checkpoint::list(&dir, behavior).iter().filter_map(|(_, p)| Checkpoint::read(p).ok()).collect();
        let mut entry = Map::new();
        entry.insert("checkpoints".into(), Value::Array(checkpoints.iter().map(|c| checkpoint_entry(run_dir, behavior, c)).collect()));
        if let Some(step) = final_steps.get(behavior) {
            if let Some(c) = checkpoints.iter().find(|c| c.description.step == *step) {
                let mut last = checkpoint_entry(run_dir, behavior, c);
                last["file_path"] = json!(run_dir.join(format!("{behavior}.onnx")).display().to_string());
                entry.insert("final_checkpoint".into(), last);
            }
        }
        if let Some(elo) = elos.get(behavior) {
            entry.insert(ELO.into(), json!(elo));
        }
        root.insert(behavior.clone(), Value::Object(entry));
    }
    root.insert(
        "metadata".into(),
        json!({"stats_format_version": STATS_FORMAT_VERSION, "mlagents_version": "0.28.0", "mlagents_rs_version": env!("CARGO_PKG_VERSION"), "torch_version": "2.13.0 (libtorch via tch)"}),
    );
    let logs = run_dir.join("run_logs");
    std::fs::create_dir_all(&logs)?;
    write_atomic(&logs.join("training_status.json"), &serde_json::to_vec_pretty(&Value::Object(root)).expect("json"))
}

/// The values a `training_status.json` keeps under `key` in each entry (`lesson_num` of
/// parameters, `elo` of behaviors; 0.28's or ours), or None when the file does not exist. A
/// file that is not JSON, or has no `metadata` (0.28's check), is an error.
pub fn read_status_values(path: &Path, key: &str) -> Result<Option<BTreeMap<String, f64>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let root = root.as_object().ok_or_else(|| format!("{} is not a JSON object", path.display()))?;
    if !root.contains_key("metadata") {
        return Err(format!("{}: Metadata not found, resuming from an incompatible version of ML-Agents.", path.display()));
    }
    Ok(Some(root.iter().filter_map(|(name, entry)| Some((name.clone(), entry.get(key)?.as_f64()?))).collect()))
}

/// Hierarchical timers (one level below the root) and gauges, as `timers.json` holds them.
#[derive(Debug)]
pub struct Timers {
    started: Instant,
    blocks: BTreeMap<&'static str, (Duration, u64)>,
    gauges: BTreeMap<String, (f64, f64, f64, u64)>,
}

impl Default for Timers {
    fn default() -> Self {
        Self { started: Instant::now(), blocks: BTreeMap::new(), gauges: BTreeMap::new() }
    }
}

impl Timers {
    /// Times `f` under `name`.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let value = f();
        let entry = self.blocks.entry(name).or_default();
        entry.0 += start.elapsed();
        entry.1 += 1;
        value
    }

    /// Adds time spent elsewhere (another thread) under `name`, as `count` calls.
    pub fn add(&mut self, name: &'static str, spent: std::time::Duration, count: u64) {
        let entry = self.blocks.entry(name).or_default();
        entry.0 += spent;
        entry.1 += count;
    }

    /// Records a gauge value (last value, min, max, count are kept).
    pub fn gauge(&mut self, name: &str, value: f64) {
        let g = self.gauges.entry(name.into()).or_insert((value, value, value, 0));
        *g = (value, g.1.min(value), g.2.max(value), g.3 + 1);
    }

    /// The timers as JSON.
    pub fn to_json(&self) -> Value {
        let total = self.started.elapsed().as_secs_f64();
        let timed: f64 = self.blocks.values().map(|(d, _)| d.as_secs_f64()).sum();
        let children: Map<String, Value> = self
            .blocks
            .iter()
            .map(|(name, (d, count))| (name.to_string(), json!({"total": d.as_secs_f64(), "count": count, "self": d.as_secs_f64()})))
            .collect();
        let gauges: Map<String, Value> = self
            .gauges
            .iter()
            .map(|(name, (value, min, max, count))| (name.clone(), json!({"value": value, "min": min, "max": max, "count": count})))
            .collect();
        json!({
            "name": "root",
            "gauges": gauges,
            "metadata": {"timer_format_version": "0.1.0", "start_time_seconds": format!("{:.0}", checkpoint::now() - total), "mlagents_rs_version": env!("CARGO_PKG_VERSION")},
            "total": total,
            "count": 1,
            "self": (total - timed).max(0.0),
            "children": children,
        })
    }

    /// Writes `run_logs/timers.json`.
    pub fn write(&self, run_dir: &Path) -> std::io::Result<()> {
        let logs = run_dir.join("run_logs");
        std::fs::create_dir_all(&logs)?;
        write_atomic(&logs.join("timers.json"), &serde_json::to_vec_pretty(&self.to_json()).expect("json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lessons and ratings are written as 0.28 keeps them (`{"<param>": {"lesson_num": N}}`,
    /// `{"<behavior>": {"elo": x}}`) and read back; a missing file is None; a file without metadata gets 0.28's message.
    #[test]
    fn lessons_and_ratings_round_trip_through_training_status() {
        let dir = std::env::temp_dir().join(format!("mlagents-run-logs-{}", std::process::id()));
        let path = dir.join("run_logs/training_status.json");
        assert_eq!(read_status_values(&path, LESSON_NUM), Ok(None));
        let elos = BTreeMap::from([("B".to_string(), 1234.5)]);
        write_training_status(&dir, &["B".into()], &BTreeMap::new(), &[("wall", 2), ("mass", 0)], &elos).unwrap();
        let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["wall"], json!({"lesson_num": 2}));
        assert_eq!(json["B"]["elo"], json!(1234.5));
        assert_eq!(read_status_values(&path, LESSON_NUM).unwrap().unwrap(), BTreeMap::from([("wall".to_string(), 2.0), ("mass".to_string(), 0.0)]));
        assert_eq!(read_status_values(&path, ELO).unwrap().unwrap(), elos);
        std::fs::write(&path, r#"{"wall": {"lesson_num": 1}}"#).unwrap();
        assert!(read_status_values(&path, LESSON_NUM).unwrap_err().contains("Metadata not found"));
        std::fs::write(&path, "{").unwrap();
        assert!(read_status_values(&path, LESSON_NUM).unwrap_err().contains("not JSON"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
