//! The run-wide sections (`env_settings`, `engine_settings`, `checkpoint_settings`,
//! `torch_settings`) and what `mlagents-learn`'s command line sets over them.

use super::{ConfigError, RunOptions, TrainerSettings};
use serde::{Deserialize, Serialize};

/// What `mlagents-learn`'s command line sets over the YAML (`None`/`false`/empty: not given),
/// with ML-Agents' flag names; the binary's parser takes them from here.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommandLineOverrides {
    /// A Unity build, `sim:SCENE`, or nothing to wait for the Editor on port 5004.
    #[arg(long)]
    pub env: Option<String>,
    #[arg(long)]
    pub run_id: Option<String>,
    #[arg(long)]
    pub results_dir: Option<String>,
    #[arg(long)]
    pub num_envs: Option<usize>,
    #[arg(long)]
    pub base_port: Option<u16>,
    #[arg(long)]
    pub seed: Option<i64>,
    /// How many times each environment is restarted after its player crashes or stops
    /// answering, over the whole run (-1: without limit).
    #[arg(long, allow_negative_numbers = true)]
    pub max_lifetime_restarts: Option<i64>,
    /// How many restarts of one environment `--restarts-rate-limit-period-s` may hold
    /// (-1: without limit).
    #[arg(long, allow_negative_numbers = true)]
    pub restarts_rate_limit_n: Option<i64>,
    /// The window, in seconds, of `--restarts-rate-limit-n`.
    #[arg(long, allow_negative_numbers = true)]
    pub restarts_rate_limit_period_s: Option<i64>,
    /// Overwrite an existing run folder (its earlier files are removed first).
    #[arg(long)]
    pub force: bool,
    /// Continue the run `--run-id` from its latest checkpoints (step, weights, optimizer).
    #[arg(long, alias = "load")]
    pub resume: bool,
    /// Start from the latest checkpoints of another run (its run id, or a run folder).
    #[arg(long)]
    pub initialize_from: Option<String>,
    #[arg(long)]
    pub time_scale: Option<f32>,
    #[arg(long)]
    pub width: Option<i32>,
    #[arg(long)]
    pub height: Option<i32>,
    #[arg(long)]
    pub quality_level: Option<i32>,
    #[arg(long)]
    pub target_frame_rate: Option<i32>,
    #[arg(long)]
    pub capture_frame_rate: Option<i32>,
    /// Start the environment with `-nographics -batchmode`.
    #[arg(long)]
    pub no_graphics: bool,
    /// Arguments passed to the environment executable (everything after the flag).
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    pub env_args: Vec<String>,
    /// Verbose logging.
    #[arg(long)]
    pub debug: bool,
    /// Reproduce ML-Agents 0.28 where this trainer deliberately differs from it (demonstration
    /// pairing, cloning and GAIL action scale, GAIL's gradient penalty, padding rows in the
    /// reward-signal and cloning losses, reward-signal encoders), for runs compared with 0.28's.
    #[arg(long = "compat-0-28")]
    pub compat_0_28: bool,
}

/// `env_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSettings {
    pub env_path: Option<String>,
    pub env_args: Option<Vec<String>>,
    pub base_port: u16,
    pub num_envs: usize,
    pub num_areas: usize,
    pub seed: i64,
    pub max_lifetime_restarts: i64,
    pub restarts_rate_limit_n: i64,
    pub restarts_rate_limit_period_s: i64,
}

impl Default for EnvSettings {
    fn default() -> Self {
        Self {
            env_path: None,
            env_args: None,
            base_port: 5005,
            num_envs: 1,
            num_areas: 1,
            seed: -1,
            max_lifetime_restarts: 10,
            restarts_rate_limit_n: 1,
            restarts_rate_limit_period_s: 60,
        }
    }
}

/// `engine_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSettings {
    pub width: i32,
    pub height: i32,
    pub quality_level: i32,
    pub time_scale: f32,
    pub target_frame_rate: i32,
    pub capture_frame_rate: i32,
    pub no_graphics: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self { width: 84, height: 84, quality_level: 5, time_scale: 20.0, target_frame_rate: -1, capture_frame_rate: 60, no_graphics: false }
    }
}

/// `checkpoint_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointSettings {
    pub run_id: String,
    pub initialize_from: Option<String>,
    pub load_model: bool,
    pub resume: bool,
    pub force: bool,
    pub train_model: bool,
    pub inference: bool,
    pub results_dir: String,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        Self {
            run_id: "ppo".into(),
            initialize_from: None,
            load_model: false,
            resume: false,
            force: false,
            train_model: false,
            inference: false,
            results_dir: "results".into(),
        }
    }
}

/// `torch_settings`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TorchSettings {
    pub device: Option<String>,
}

impl RunOptions {
    /// Applies what `mlagents-learn`'s flags set over the YAML, as ML-Agents does: a flag given
    /// wins; `--resume` with `--initialize-from` resumes.
    pub fn apply_overrides(&mut self, flags: CommandLineOverrides) {
        let env = &mut self.env_settings;
        env.env_path = flags.env.or(env.env_path.take());
        env.num_envs = flags.num_envs.unwrap_or(env.num_envs);
        env.base_port = flags.base_port.unwrap_or(env.base_port);
        env.seed = flags.seed.unwrap_or(env.seed);
        env.max_lifetime_restarts = flags.max_lifetime_restarts.unwrap_or(env.max_lifetime_restarts);
        env.restarts_rate_limit_n = flags.restarts_rate_limit_n.unwrap_or(env.restarts_rate_limit_n);
        env.restarts_rate_limit_period_s = flags.restarts_rate_limit_period_s.unwrap_or(env.restarts_rate_limit_period_s);
        if !flags.env_args.is_empty() {
            env.env_args = Some(flags.env_args);
        }
        let checkpoints = &mut self.checkpoint_settings;
        checkpoints.run_id = flags.run_id.unwrap_or(std::mem::take(&mut checkpoints.run_id));
        checkpoints.results_dir = flags.results_dir.unwrap_or(std::mem::take(&mut checkpoints.results_dir));
        checkpoints.force |= flags.force;
        checkpoints.resume |= flags.resume;
        if flags.initialize_from.is_some() {
            checkpoints.initialize_from = flags.initialize_from;
        }
        if flags.resume && checkpoints.initialize_from.is_some() {
            log::warn!("both --resume and --initialize-from were given; resuming");
            checkpoints.initialize_from = None;
        }
        let engine = &mut self.engine_settings;
        engine.time_scale = flags.time_scale.unwrap_or(engine.time_scale);
        engine.width = flags.width.unwrap_or(engine.width);
        engine.height = flags.height.unwrap_or(engine.height);
        engine.quality_level = flags.quality_level.unwrap_or(engine.quality_level);
        engine.target_frame_rate = flags.target_frame_rate.unwrap_or(engine.target_frame_rate);
        engine.capture_frame_rate = flags.capture_frame_rate.unwrap_or(engine.capture_frame_rate);
        engine.no_graphics |= flags.no_graphics;
        self.debug |= flags.debug;
        if flags.compat_0_28 {
            self.follow_0_28();
        }
    }

    /// Every behavior follows 0.28 where it is wrong ([`TrainerSettings::follow_0_28`]).
    pub fn follow_0_28(&mut self) {
        self.compat_0_28 = true;
        self.behaviors.values_mut().chain(self.default_settings.as_mut()).for_each(TrainerSettings::follow_0_28);
    }

    /// Checks the run-wide settings once command-line flags have overridden the YAML: engine
    /// settings (`--time-scale`, `--width`, ...), `--num-envs`. `file` names the configuration.
    pub fn check_run_settings(&self, file: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { file: file.into(), message };
        let e = &self.engine_settings;
        if !(e.time_scale.is_finite() && e.time_scale > 0.0) {
            return Err(invalid(format!("time_scale is {} (engine_settings.time_scale or --time-scale); it must be a finite number above 0", e.time_scale)));
        }
        for (key, value) in [("width", e.width), ("height", e.height)] {
            if value < 1 {
                return Err(invalid(format!("{key} is {value} (engine_settings.{key} or --{key}); it must be at least 1")));
            }
        }
        if self.env_settings.num_envs < 1 {
            return Err(invalid("num_envs is 0 (env_settings.num_envs or --num-envs); it must be at least 1".into()));
        }
        let env = &self.env_settings;
        for (key, value) in [("max_lifetime_restarts", env.max_lifetime_restarts), ("restarts_rate_limit_n", env.restarts_rate_limit_n), ("restarts_rate_limit_period_s", env.restarts_rate_limit_period_s)] {
            if value < -1 {
                return Err(invalid(format!("{key} is {value} (env_settings.{key} or --{}); it must be -1 (no limit) or at least 0", key.replace('_', "-"))));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::config::VisualEncoder;

    #[test]
    fn flags_override_the_yaml_and_are_recorded() {
        let yaml = "behaviors:\n  B: {}\nenv_settings: {env_path: builds/Old, seed: 3}\nengine_settings: {time_scale: 5}\n";
        let mut o = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        o.apply_overrides(CommandLineOverrides {
            env: Some("sim:3DBall".into()),
            run_id: Some("r".into()),
            resume: true,
            initialize_from: Some("other".into()),
            width: Some(128),
            ..Default::default()
        });
        assert_eq!(o.env_settings.env_path.as_deref(), Some("sim:3DBall"));
        assert_eq!((o.env_settings.seed, o.engine_settings.time_scale, o.engine_settings.width), (3, 5.0, 128));
        assert_eq!(o.checkpoint_settings.run_id, "r");
        assert!(o.checkpoint_settings.resume && o.checkpoint_settings.initialize_from.is_none(), "resume wins");
        assert!(o.to_yaml().contains("sim:3DBall"), "configuration.yaml records --env");
    }

    #[test]
    fn compat_0_28_gives_inheriting_signals_the_simple_encoder_and_reads_back() {
        let yaml = "behaviors:\n  B:\n    network_settings: {vis_encode_type: resnet}\n    reward_signals:\n      curiosity: {strength: 0.1}\n      rnd: {network_settings: {vis_encode_type: nature_cnn}}\n";
        let mut o = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        let encoder = |o: &RunOptions, signal: &str| o.behaviors["B"].reward_signals[signal].network_settings.vis_encode_type;
        assert_eq!((encoder(&o, "curiosity"), o.behaviors["B"].compat_0_28), (VisualEncoder::Resnet, false), "by default a signal takes the policy's encoder");
        assert!(!o.to_yaml().contains("compat_0_28"), "0.28's configuration.yaml has no such key");
        o.apply_overrides(CommandLineOverrides { compat_0_28: true, ..Default::default() });
        assert!(o.behaviors["B"].compat_0_28);
        assert_eq!(encoder(&o, "curiosity"), VisualEncoder::Simple, "0.28 gives a signal `simple` whatever the policy's");
        assert_eq!(encoder(&o, "rnd"), VisualEncoder::NatureCnn, "a signal's own choice stays");
        let again = RunOptions::from_yaml(&o.to_yaml(), "configuration.yaml").unwrap();
        assert!(again.compat_0_28 && again.behaviors["B"].compat_0_28, "configuration.yaml records the switch");
        assert_eq!(again, o);
    }

    #[test]
    fn run_settings_are_checked_after_the_flags() {
        let mut o = RunOptions::from_yaml("behaviors:\n  B: {}\n", "t.yaml").unwrap();
        o.check_run_settings("t.yaml").unwrap();
        for time_scale in [f32::NAN, -1.0, 0.0, f32::INFINITY] {
            o.engine_settings.time_scale = time_scale;
            assert!(o.check_run_settings("t.yaml").unwrap_err().to_string().contains("time_scale"));
        }
        o.engine_settings.time_scale = 20.0;
        o.env_settings.num_envs = 0;
        assert!(o.check_run_settings("t.yaml").unwrap_err().to_string().contains("--num-envs"));
    }
}
