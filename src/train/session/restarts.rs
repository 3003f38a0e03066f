//! Environment restarts (0.28's `env_settings.max_lifetime_restarts`, `restarts_rate_limit_n`
//! and `restarts_rate_limit_period_s`): a player that exits, is killed or stops answering is
//! replaced while its worker has restarts left, over the run and within the rate window.

use crate::comm::CommError;
use crate::env::EnvError;
use crate::train::config::EnvSettings;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Whether an environment error is its player failing (it exited or was killed, the
/// connection broke, it stopped answering), which a new player may mend. A player that breaks
/// the protocol (malformed messages, wrong sizes, NaN rewards) would break it again, and an
/// Editor leaving play mode is a stop: neither is restarted.
pub fn is_player_failure(error: &EnvError) -> bool {
    matches!(error, EnvError::ProcessExited { .. } | EnvError::Timeout { .. } | EnvError::Comm(CommError::ProcessGone(_) | CommError::Timeout { .. }))
}

/// The restarts each worker has had, against the limits.
pub struct RestartQuota {
    /// Restarts allowed per worker over the run (-1: no limit).
    lifetime_limit: i64,
    /// Restarts allowed per worker within `window` (-1: no limit).
    rate_limit: i64,
    /// None: the window never closes (`restarts_rate_limit_period_s` -1).
    window: Option<Duration>,
    restarts: Vec<u64>,
    recent: Vec<VecDeque<Instant>>,
}

impl RestartQuota {
    pub fn new(settings: &EnvSettings, workers: usize) -> Self {
        Self {
            lifetime_limit: settings.max_lifetime_restarts,
            rate_limit: settings.restarts_rate_limit_n,
            window: u64::try_from(settings.restarts_rate_limit_period_s).ok().map(Duration::from_secs),
            restarts: vec![0; workers],
            recent: vec![VecDeque::new(); workers],
        }
    }

    /// Takes one restart of `worker` at `now` from its quota and returns how many it has had;
    /// or says which limit it has reached.
    pub fn take(&mut self, worker: usize, now: Instant) -> Result<u64, String> {
        let recent = &mut self.recent[worker];
        if let Some(window) = self.window {
            while recent.front().is_some_and(|t| now.duration_since(*t) >= window) {
                recent.pop_front();
            }
        }
        if self.lifetime_limit >= 0 && self.restarts[worker] >= self.lifetime_limit as u64 {
            return Err(format!("it was restarted {} times, max_lifetime_restarts ({})", self.restarts[worker], self.lifetime_limit));
        }
        if self.rate_limit >= 0 && recent.len() as u64 >= self.rate_limit as u64 {
            let window = self.window.map_or("the run".to_string(), |w| format!("{} s", w.as_secs()));
            return Err(format!("it was restarted {} times within {window}, restarts_rate_limit_n ({})", recent.len(), self.rate_limit));
        }
        recent.push_back(now);
        self.restarts[worker] += 1;
        Ok(self.restarts[worker])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(lifetime: i64, rate: i64, period: i64) -> EnvSettings {
        EnvSettings { max_lifetime_restarts: lifetime, restarts_rate_limit_n: rate, restarts_rate_limit_period_s: period, ..Default::default() }
    }

    /// 0.28's defaults: one restart a minute per worker, ten in all; workers count apart.
    #[test]
    fn defaults_allow_one_restart_a_minute_and_ten_in_all() {
        let mut quota = RestartQuota::new(&EnvSettings::default(), 2);
        let start = Instant::now();
        assert_eq!(quota.take(0, start), Ok(1));
        assert!(quota.take(0, start + Duration::from_secs(59)).unwrap_err().contains("restarts_rate_limit_n (1)"));
        assert_eq!(quota.take(1, start + Duration::from_secs(59)), Ok(1));
        for k in 2..=10 {
            assert_eq!(quota.take(0, start + Duration::from_secs(60 * k)), Ok(k));
        }
        assert!(quota.take(0, start + Duration::from_secs(6000)).unwrap_err().contains("max_lifetime_restarts (10)"));
    }

    /// -1 lifts a limit; a rate window of -1 never closes.
    #[test]
    fn minus_one_lifts_a_limit() {
        let start = Instant::now();
        let mut unlimited = RestartQuota::new(&settings(-1, -1, 60), 1);
        for k in 1..=50 {
            assert_eq!(unlimited.take(0, start), Ok(k));
        }
        let mut never_closes = RestartQuota::new(&settings(-1, 2, -1), 1);
        assert!(never_closes.take(0, start).is_ok() && never_closes.take(0, start + Duration::from_secs(1000)).is_ok());
        assert!(never_closes.take(0, start + Duration::from_secs(100_000)).unwrap_err().contains("within the run"));
        let mut none = RestartQuota::new(&settings(0, -1, 60), 1);
        assert!(none.take(0, start).is_err());
    }

    #[test]
    fn only_player_failures_are_restarted() {
        let exited = EnvError::ProcessExited { port: 5005, during: "step".into(), detail: "exited with code 3".into() };
        assert!(is_player_failure(&exited));
        assert!(is_player_failure(&EnvError::Timeout { port: 5005, secs: 60, during: "step".into() }));
        assert!(!is_player_failure(&EnvError::Comm(CommError::Protocol { port: 5005, detail: "bad".into() })));
        assert!(!is_player_failure(&EnvError::Comm(CommError::Closed { port: 5005, status: 400 })));
        assert!(!is_player_failure(&EnvError::InvalidData { behavior: "b".into(), agent_id: 0, field: "reward".into(), detail: "NaN".into() }));
    }
}
