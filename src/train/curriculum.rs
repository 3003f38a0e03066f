//! The lesson manager: which lesson each environment parameter is in, when it moves on, and
//! what the environment is sent, exactly as ML-Agents 0.28's `EnvironmentParameterManager`
//! and `TrainerController.reset_env_if_ready` do (curriculum.md §2), plus what 0.28 loses:
//! the smoothing and reward buffers are recorded with each checkpoint and restored on
//! `--resume` (§9.1), and each advance says why (§9.4).
//!
//! 0.28's behaviour kept on purpose (§6): smoothing starts at 0 and is kept per parameter
//! across lessons; it is updated at every check that passes the gates; a parameter moves at
//! most one lesson per check; a behavior's reward buffer holds up to the largest
//! `min_lesson_length` of any lesson that names it (at least 1); any lesson change clears
//! every behavior's buffer.

use super::environment_parameters::{CompletionCriteria, EnvironmentParameterSettings, Measure};
use crate::checkpoint::CurriculumRecord;
use crate::comm::side_channel::ParameterValue;
use std::collections::{BTreeMap, VecDeque};

/// Tag of a parameter's lesson number in each behavior's TensorBoard summaries.
pub const LESSON_NUMBER_TAG: &str = "Environment/Lesson Number/";

/// The cumulative extrinsic rewards of a behavior's recent episodes, newest first, up to a
/// capacity (0.28's `reward_buffer` deque).
#[derive(Debug, Clone, PartialEq)]
pub struct RewardBuffer {
    capacity: usize,
    episodes: VecDeque<f32>,
}

impl RewardBuffer {
    /// An empty buffer holding up to `capacity` episodes (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), episodes: VecDeque::new() }
    }

    /// Records a finished episode, dropping the oldest beyond the capacity.
    pub fn push(&mut self, reward: f32) {
        self.episodes.push_front(reward);
        self.episodes.truncate(self.capacity);
    }

    pub fn clear(&mut self) {
        self.episodes.clear();
    }

    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// The arithmetic mean (in f64, as numpy takes it), or NaN when empty.
    pub fn mean(&self) -> f64 {
        self.episodes.iter().map(|r| *r as f64).sum::<f64>() / self.episodes.len() as f64
    }

    /// The rewards, newest first.
    pub fn to_vec(&self) -> Vec<f32> {
        self.episodes.iter().copied().collect()
    }

    /// Refills the buffer with recorded rewards (newest first), up to the capacity.
    pub fn restore(&mut self, rewards: &[f32]) {
        self.episodes = rewards.iter().copied().take(self.capacity).collect();
    }
}

/// What one check of a completion criteria found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CriteriaCheck {
    pub advance: bool,
    /// The parameter's smoothed measure after the check.
    pub smoothing: f64,
    /// The value compared with the threshold, if the gates let the check get that far.
    pub measured: Option<f64>,
}

/// 0.28's `need_increment`: progress is `step / max_steps`; reward is the buffer's mean,
/// smoothed as `0.25 * previous + 0.75 * mean` when `signal_smoothing`; both compare with `>`
/// and wait for `min_lesson_length` episodes in the buffer. Ours beyond 0.28: `Elo` compares
/// the behavior's self-play rating (`elo`, None without self-play: never passes), unsmoothed.
pub fn check_criteria(criteria: &CompletionCriteria, progress: f64, rewards: &RewardBuffer, smoothing: f64, elo: Option<f64>) -> CriteriaCheck {
    let no = |measured| CriteriaCheck { advance: false, smoothing, measured };
    if (rewards.len() as u64) < criteria.min_lesson_length {
        return no(None);
    }
    match criteria.measure {
        Measure::Progress => CriteriaCheck { advance: progress > criteria.threshold, smoothing, measured: Some(progress) },
        Measure::Elo => CriteriaCheck { advance: elo.is_some_and(|e| e > criteria.threshold), smoothing, measured: elo },
        Measure::Reward => {
            let mean = rewards.mean();
            if rewards.is_empty() || mean.is_nan() {
                return no(None);
            }
            let (measured, smoothing) = if criteria.signal_smoothing {
                let smoothed = 0.25 * smoothing + 0.75 * mean;
                (smoothed, smoothed)
            } else {
                (mean, smoothing)
            };
            CriteriaCheck { advance: measured > criteria.threshold, smoothing, measured: Some(measured) }
        }
    }
}

/// Where a behavior's trainer stands, as the completion criteria read it.
#[derive(Debug, Clone, Copy)]
pub struct TrainerStanding<'a> {
    pub step: u64,
    pub max_steps: u64,
    pub rewards: &'a RewardBuffer,
    /// The behavior's self-play rating, if it plays itself.
    pub elo: Option<f64>,
}

/// A parameter that moved to its next lesson, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LessonChange {
    pub parameter: usize,
    pub lesson: usize,
    pub measure: Measure,
    pub measured: f64,
    pub threshold: f64,
    pub behavior: String,
    /// The behavior's step when it moved.
    pub step: u64,
    pub episodes: usize,
}

/// What one round of checks decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LessonUpdate {
    pub changes: Vec<LessonChange>,
    /// A lesson that was left asks for an environment reset (`require_reset`).
    pub must_reset: bool,
}

impl LessonUpdate {
    pub fn updated(&self) -> bool {
        !self.changes.is_empty()
    }
}

/// Why a recorded curriculum state cannot be continued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name} has environment parameter {parameter} in lesson {lesson}, but the configuration gives it {lessons} lesson(s) ({names}); resume with the run's own configuration, or start a new run")]
pub struct RestoreError {
    pub source_name: String,
    pub parameter: String,
    pub lesson: usize,
    pub lessons: usize,
    pub names: String,
}

/// Every environment parameter's current lesson and smoothed measure.
#[derive(Debug, Clone)]
pub struct LessonManager {
    parameters: Vec<EnvironmentParameterSettings>,
    lessons: Vec<usize>,
    smoothed: Vec<f64>,
}

impl LessonManager {
    /// Every parameter in its first lesson, smoothing at 0.
    pub fn new(parameters: Vec<EnvironmentParameterSettings>) -> Self {
        let n = parameters.len();
        Self { parameters, lessons: vec![0; n], smoothed: vec![0.0; n] }
    }

    pub fn is_empty(&self) -> bool {
        self.parameters.is_empty()
    }

    /// Continues from recorded lessons (and smoothing, when recorded). Parameters the record
    /// does not name start at lesson 0; names the configuration lacks are ignored (as 0.28
    /// does); a lesson past the end of a curriculum is an error naming `source_name`.
    pub fn restore(&mut self, lessons: &BTreeMap<String, usize>, smoothed: &BTreeMap<String, f64>, source_name: &str) -> Result<(), RestoreError> {
        for (k, parameter) in self.parameters.iter().enumerate() {
            if let Some(&lesson) = lessons.get(&parameter.name) {
                if lesson >= parameter.curriculum.len() {
                    return Err(RestoreError {
                        source_name: source_name.into(),
                        parameter: parameter.name.clone(),
                        lesson,
                        lessons: parameter.curriculum.len(),
                        names: parameter.curriculum.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", "),
                    });
                }
                self.lessons[k] = lesson;
            }
            self.smoothed[k] = smoothed.get(&parameter.name).copied().unwrap_or(0.0);
        }
        Ok(())
    }

    /// The record a checkpoint of a behavior keeps, with that behavior's reward buffer.
    pub fn record(&self, rewards: &RewardBuffer) -> CurriculumRecord {
        CurriculumRecord {
            lessons: self.lesson_numbers().into_iter().map(|(n, l)| (n.to_string(), l)).collect(),
            smoothed: self.parameters.iter().zip(&self.smoothed).map(|(p, s)| (p.name.clone(), *s)).collect(),
            reward_buffer: rewards.to_vec(),
        }
    }

    /// Each parameter's name and lesson number, in YAML order.
    pub fn lesson_numbers(&self) -> Vec<(&str, usize)> {
        self.parameters.iter().zip(&self.lessons).map(|(p, l)| (p.name.as_str(), *l)).collect()
    }

    /// What the environment is sent: every parameter's current lesson value.
    pub fn current_values(&self) -> Vec<(String, ParameterValue)> {
        self.parameters.iter().zip(&self.lessons).map(|(p, l)| (p.name.clone(), p.curriculum[*l].value.to_side_channel())).collect()
    }

    /// 0.28's lesson line: `Parameter 'p' is in lesson 'L' and has value 'Float: value=2.0'.`
    pub fn lesson_line(&self, parameter: usize) -> String {
        let p = &self.parameters[parameter];
        let lesson = &p.curriculum[self.lessons[parameter]];
        format!("Parameter '{}' is in lesson '{}' and has value '{}'.", p.name, lesson.name, lesson.value.describe())
    }

    /// Our line saying why a parameter moved on.
    pub fn change_line(&self, change: &LessonChange) -> String {
        let p = &self.parameters[change.parameter];
        let measure = match change.measure {
            Measure::Progress => "progress",
            Measure::Reward => "reward",
            Measure::Elo => "ELO",
        };
        format!(
            "Parameter '{}' moves from lesson '{}' to '{}' at step {}: {measure} of {} is {:.4} > threshold {} (over {} episodes).",
            p.name,
            p.curriculum[change.lesson - 1].name,
            p.curriculum[change.lesson].name,
            change.step,
            change.behavior,
            change.measured,
            change.threshold,
            change.episodes
        )
    }

    /// The reward buffer capacity of a behavior: the largest `min_lesson_length` of any
    /// lesson that names it, at least 1 (0.28's `get_minimum_reward_buffer_size`).
    pub fn reward_buffer_capacity(&self, behavior: &str) -> usize {
        let lengths = self.criteria().filter(|c| c.behavior == behavior).map(|c| c.min_lesson_length as usize);
        lengths.max().unwrap_or(1).max(1)
    }

    fn criteria(&self) -> impl Iterator<Item = &CompletionCriteria> {
        self.parameters.iter().flat_map(|p| p.curriculum.iter().filter_map(|l| l.completion_criteria.as_ref()))
    }

    /// One round of 0.28's `update_lessons`: each parameter (in YAML order) whose lesson has
    /// criteria and a next lesson, and whose behavior has a trainer, is checked; it moves at
    /// most one lesson. The caller clears every reward buffer when something moved.
    pub fn update(&mut self, trainers: &BTreeMap<String, TrainerStanding>) -> LessonUpdate {
        let mut update = LessonUpdate::default();
        for (k, parameter) in self.parameters.iter().enumerate() {
            let lesson = &parameter.curriculum[self.lessons[k]];
            let Some(criteria) = lesson.completion_criteria.as_ref().filter(|_| self.lessons[k] + 1 < parameter.curriculum.len()) else { continue };
            let Some(trainer) = trainers.get(&criteria.behavior) else { continue };
            let progress = trainer.step as f64 / trainer.max_steps as f64;
            let check = check_criteria(criteria, progress, trainer.rewards, self.smoothed[k], trainer.elo);
            self.smoothed[k] = check.smoothing;
            if check.advance {
                self.lessons[k] += 1;
                update.must_reset |= criteria.require_reset;
                update.changes.push(LessonChange {
                    parameter: k,
                    lesson: self.lessons[k],
                    measure: criteria.measure,
                    measured: check.measured.unwrap_or(f64::NAN),
                    threshold: criteria.threshold,
                    behavior: criteria.behavior.clone(),
                    step: trainer.step,
                    episodes: trainer.rewards.len(),
                });
            }
        }
        update
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::environment_parameters::{assign_seeds, parse, ParameterSampler};

    fn manager(yaml: &str) -> LessonManager {
        let mut parameters = parse(&serde_norway::from_str(yaml).unwrap()).unwrap();
        assign_seeds(&mut parameters, 1337);
        LessonManager::new(parameters)
    }

    fn buffer(capacity: usize, rewards: &[f32]) -> RewardBuffer {
        let mut b = RewardBuffer::new(capacity);
        rewards.iter().for_each(|r| b.push(*r));
        b
    }

    fn standing(step: u64, max_steps: u64, rewards: &RewardBuffer) -> BTreeMap<String, TrainerStanding<'_>> {
        BTreeMap::from([("fake_behavior".to_string(), TrainerStanding { step, max_steps, rewards, elo: None })])
    }

    /// test_env_param_manager.py::test_create_manager, its numbers.
    const CREATE_MANAGER: &str = "param_1:\n  curriculum:\n    - name: Lesson1\n      completion_criteria: {measure: reward, behavior: fake_behavior, threshold: 30, min_lesson_length: 100, require_reset: true}\n      value: 1\n    - name: Lesson2\n      completion_criteria: {measure: progress, behavior: fake_behavior, threshold: 0.5, min_lesson_length: 100, require_reset: false}\n      value: 2\n    - name: Lesson3\n      value: {sampler_type: uniform, sampler_parameters: {min_value: 1, max_value: 3}}\nparam_2: {sampler_type: gaussian, sampler_parameters: {mean: 4, st_dev: 5}}\nparam_3: 20\n";

    #[test]
    fn the_upstream_create_manager_case() {
        let mut m = manager(CREATE_MANAGER);
        assert_eq!(m.reward_buffer_capacity("fake_behavior"), 100);
        assert_eq!(m.reward_buffer_capacity("other"), 1);
        assert_eq!(m.lesson_numbers(), [("param_1", 0), ("param_2", 0), ("param_3", 0)]);
        let values = m.current_values();
        assert_eq!(values[0], ("param_1".into(), ParameterValue::Float(1.0)));
        assert_eq!(m.parameters[1].curriculum[0].value, ParameterSampler::Gaussian { mean: 4.0, st_dev: 5.0, seed: 1340 });
        assert_eq!(m.parameters[2].curriculum[0].value, ParameterSampler::Constant { value: 20.0, seed: 1341 });
        let few = buffer(100, &[1000.0; 99]);
        assert_eq!(m.update(&standing(500, 1000, &few)), LessonUpdate::default());
        let low = buffer(100, &[1.0; 101]);
        assert!(!m.update(&standing(500, 1000, &low)).updated());
        let high = buffer(100, &[1000.0; 101]);
        let update = m.update(&standing(500, 1000, &high));
        assert!(update.updated() && update.must_reset, "{update:?}");
        assert_eq!(m.lesson_numbers()[0], ("param_1", 1));
        // Restored from the record: same lessons.
        let record = m.record(&high);
        let mut again = manager(CREATE_MANAGER);
        again.restore(&record.lessons, &record.smoothed, "test").unwrap();
        assert_eq!(again.lesson_numbers(), m.lesson_numbers());
        // Progress 0.7 > 0.5 with 101 episodes (of zero reward): advance, no reset.
        let zeros = buffer(100, &[0.0; 101]);
        let update = m.update(&standing(700, 1000, &zeros));
        assert!(update.updated() && !update.must_reset, "{update:?}");
        assert_eq!(m.parameters[0].curriculum[m.lessons[0]].value, ParameterSampler::Uniform { min_value: 1.0, max_value: 3.0, seed: 1339 });
        assert!(m.lesson_line(0).ends_with("is in lesson 'Lesson3' and has value 'Uniform sampler: min=1.0, max=3.0'."), "{}", m.lesson_line(0));
        // The last lesson is never checked.
        assert!(!m.update(&standing(1000, 1000, &high)).updated());
    }

    /// test_curriculum_raises_all_completion_criteria_conversion: (True, True) twice, then
    /// nothing (the last lesson's criteria are ignored).
    #[test]
    fn one_lesson_per_check_and_never_past_the_last() {
        let lesson = |name: &str| format!("    - name: {name}\n      completion_criteria: {{measure: reward, behavior: fake_behavior, threshold: 30, min_lesson_length: 100, require_reset: true}}\n      value: 1\n");
        let mut m = manager(&format!("param_1:\n  curriculum:\n{}{}{}", lesson("L1"), lesson("L2"), lesson("L3")));
        let high = buffer(101, &[1000.0; 101]);
        for expected in [true, true, false] {
            let update = m.update(&standing(500, 1000, &high));
            assert_eq!((update.updated(), update.must_reset), (expected, expected));
        }
        assert_eq!(m.lesson_numbers(), [("param_1", 2)]);
    }

    /// Smoothing: 0.25 * previous + 0.75 * mean, from 0, kept across calls (the spec's worked
    /// example: buffer [1, 1, 1], threshold 0.9: 0.75 no, 0.9375 yes).
    #[test]
    fn smoothing_follows_0_28() {
        let criteria = |smoothing| CompletionCriteria {
            behavior: "B".into(),
            measure: Measure::Reward,
            min_lesson_length: 0,
            signal_smoothing: smoothing,
            threshold: 0.9,
            require_reset: false,
        };
        let ones = buffer(3, &[1.0, 1.0, 1.0]);
        let first = check_criteria(&criteria(true), 0.0, &ones, 0.0, None);
        assert_eq!((first.advance, first.smoothing), (false, 0.75));
        let second = check_criteria(&criteria(true), 0.0, &ones, first.smoothing, None);
        assert_eq!((second.advance, second.smoothing), (true, 0.9375));
        // Without smoothing the mean itself is compared and the state is untouched.
        let plain = check_criteria(&criteria(false), 0.0, &ones, 0.5, None);
        assert_eq!((plain.advance, plain.smoothing, plain.measured), (true, 0.5, Some(1.0)));
        // An empty buffer is no measure; the strict comparison: 0.9 is not > 0.9.
        assert_eq!(check_criteria(&criteria(false), 0.0, &RewardBuffer::new(3), 0.2, None), CriteriaCheck { advance: false, smoothing: 0.2, measured: None });
        assert!(!check_criteria(&criteria(false), 0.0, &buffer(1, &[0.9]), 0.0, None).advance);
        // Pitfall of 0.28 kept: a negative mean passes a threshold between m and 0.75 m at once.
        let negative = CompletionCriteria { threshold: -0.76, ..criteria(true) };
        assert!(check_criteria(&negative, 0.0, &buffer(1, &[-1.0]), 0.0, None).advance);
        // Ours: the self-play rating, strictly above the threshold; none without self-play.
        let elo = CompletionCriteria { measure: Measure::Elo, threshold: 1250.0, ..criteria(true) };
        assert_eq!(check_criteria(&elo, 0.0, &ones, 0.3, Some(1250.5)), CriteriaCheck { advance: true, smoothing: 0.3, measured: Some(1250.5) });
        assert!(!check_criteria(&elo, 0.0, &ones, 0.3, Some(1250.0)).advance && !check_criteria(&elo, 0.0, &ones, 0.3, None).advance);
    }

    /// Progress is strict (50/100 does not pass 0.5, 51/100 does) and ignores smoothing;
    /// min_lesson_length gates it on episodes; several lessons pass in consecutive checks.
    #[test]
    fn progress_is_strict_and_can_skip_lessons_in_consecutive_checks() {
        let yaml = "p:\n  curriculum:\n    - name: A\n      completion_criteria: {measure: progress, behavior: fake_behavior, threshold: 0.5}\n      value: 1\n    - name: B\n      completion_criteria: {measure: progress, behavior: fake_behavior, threshold: 0.1}\n      value: 2\n    - name: C\n      value: 3\n";
        let mut m = manager(yaml);
        let empty = RewardBuffer::new(1);
        assert!(!m.update(&standing(50, 100, &empty)).updated());
        let update = m.update(&standing(51, 100, &empty));
        assert_eq!(update.changes.len(), 1);
        assert_eq!((update.changes[0].measured, update.changes[0].lesson), (0.51, 1));
        assert!(m.update(&standing(51, 100, &empty)).updated());
        assert_eq!(m.lesson_numbers(), [("p", 2)]);
        assert!(m.change_line(&update.changes[0]).contains("from lesson 'A' to 'B' at step 51: progress of fake_behavior is 0.5100 > threshold 0.5"));
        // A behavior with no trainer: never checked.
        let mut other = manager(yaml);
        assert!(!other.update(&BTreeMap::new()).updated());
    }

    #[test]
    fn reward_buffer_keeps_the_newest_up_to_its_capacity() {
        let b = buffer(3, &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(b.to_vec(), [4.0, 3.0, 2.0]);
        assert_eq!(b.mean(), 3.0);
        let mut restored = RewardBuffer::new(2);
        restored.restore(&b.to_vec());
        assert_eq!(restored.to_vec(), [4.0, 3.0]);
        assert_eq!(RewardBuffer::new(0).capacity, 1);
    }

    /// A recorded lesson past the end of the configured curriculum is refused, naming it;
    /// smoothing comes back with the lessons.
    #[test]
    fn restoring_checks_the_lesson_exists() {
        let mut m = manager(CREATE_MANAGER);
        let lessons = BTreeMap::from([("param_1".to_string(), 3), ("gone".to_string(), 7)]);
        let e = m.restore(&lessons, &BTreeMap::new(), "training_status.json").unwrap_err();
        assert!(e.to_string().contains("param_1 in lesson 3, but the configuration gives it 3 lesson(s) (Lesson1, Lesson2, Lesson3)"), "{e}");
        let lessons = BTreeMap::from([("param_1".to_string(), 2), ("gone".to_string(), 7)]);
        m.restore(&lessons, &BTreeMap::from([("param_1".to_string(), 0.625)]), "x").unwrap();
        assert_eq!(m.lesson_numbers()[0], ("param_1", 2));
        assert_eq!(m.record(&RewardBuffer::new(1)).smoothed["param_1"], 0.625);
    }
}
