//! N environments on consecutive ports, stepped concurrently (`--num-envs`): every
//! environment gets its actions first, then all are awaited, so they simulate in parallel.

use super::{EnvError, EnvOptions, UnityEnvironment};
use crate::comm::side_channel::SharedSideChannel;

/// A vector of environments; environment i is worker i (port `base_port + i`, seed `seed + i`).
pub struct VecEnv {
    envs: Vec<UnityEnvironment>,
}

impl VecEnv {
    /// Starts `n` environments concurrently. `options_for(worker)` gives each one's options
    /// (at least `worker_id`, `seed` and their own side channels must differ).
    pub fn new(n: usize, options_for: impl Fn(u32) -> EnvOptions + Sync) -> Result<Self, EnvError> {
        if n == 0 {
            return Err(EnvError::Options("--num-envs must be at least 1".into()));
        }
        let results: Vec<Result<UnityEnvironment, EnvError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n as u32)
                .map(|worker| {
                    let options_for = &options_for;
                    s.spawn(move || UnityEnvironment::new(options_for(worker)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(EnvError::Closed))).collect()
        });
        let mut envs = Vec::with_capacity(n);
        for r in results {
            envs.push(r?);
        }
        Ok(Self { envs })
    }

    /// Options for worker `worker` derived from shared ones: the worker id, `seed + worker`,
    /// and fresh side channels from `channels(worker)`.
    pub fn worker_options(
        base: &EnvOptions,
        worker: u32,
        channels: &dyn Fn(u32) -> Vec<SharedSideChannel>,
    ) -> EnvOptions {
        EnvOptions {
            env: base.env.clone(),
            worker_id: worker,
            base_port: base.base_port,
            seed: base.seed.wrapping_add(worker as i32),
            no_graphics: base.no_graphics,
            timeout_wait: base.timeout_wait,
            additional_args: base.additional_args.clone(),
            log_folder: base.log_folder.clone(),
            side_channels: channels(worker),
            bind: base.bind.clone(),
            num_areas: base.num_areas,
            max_message_size: base.max_message_size,
            debug_output: base.debug_output,
        }
    }

    pub fn len(&self) -> usize {
        self.envs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// The environments, to read steps and set actions.
    pub fn envs(&self) -> &[UnityEnvironment] {
        &self.envs
    }

    pub fn envs_mut(&mut self) -> &mut [UnityEnvironment] {
        &mut self.envs
    }

    /// Resets every environment concurrently.
    pub fn reset(&mut self) -> Result<(), EnvError> {
        self.reset_each().into_iter().next().map_or(Ok(()), |(_, error)| Err(error))
    }

    /// Resets every environment concurrently and returns those that failed, with their worker
    /// index and error (in worker order); the others have reset.
    pub fn reset_each(&mut self) -> Vec<(usize, EnvError)> {
        std::thread::scope(|s| {
            let handles: Vec<_> = self.envs.iter_mut().map(|e| s.spawn(move || e.reset())).collect();
            handles.into_iter().enumerate().filter_map(|(w, h)| h.join().unwrap_or(Err(EnvError::Closed)).err().map(|e| (w, e))).collect()
        })
    }

    /// Steps every environment: sends all actions, then waits for all.
    pub fn step(&mut self) -> Result<(), EnvError> {
        if self.envs.iter().any(|e| e.needs_reset()) {
            return self.reset();
        }
        for env in &mut self.envs {
            env.step_send()?;
        }
        let mut first_error = None;
        for env in &mut self.envs {
            if let Err(e) = env.step_receive() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Steps every environment (or, before the first reset, resets them) and returns those
    /// that failed, with their worker index and error; the others have stepped.
    pub fn step_each(&mut self) -> Vec<(usize, EnvError)> {
        if self.envs.iter().any(|e| e.needs_reset()) {
            return self.reset_each();
        }
        let mut failures: Vec<(usize, EnvError)> = vec![];
        for (worker, env) in self.envs.iter_mut().enumerate() {
            if let Err(e) = env.step_send() {
                failures.push((worker, e));
            }
        }
        for (worker, env) in self.envs.iter_mut().enumerate() {
            if failures.iter().any(|(w, _)| *w == worker) {
                continue;
            }
            if let Err(e) = env.step_receive() {
                failures.push((worker, e));
            }
        }
        failures.sort_by_key(|(w, _)| *w);
        failures
    }

    /// Puts `env` in the place of environment `worker`, closing the one it replaces.
    pub fn replace(&mut self, worker: usize, env: UnityEnvironment) {
        let mut old = std::mem::replace(&mut self.envs[worker], env);
        if let Err(e) = old.close() {
            log::debug!("closing the replaced environment {worker}: {e}");
        }
    }

    /// Closes every environment.
    pub fn close(&mut self) -> Result<(), EnvError> {
        for env in &mut self.envs {
            env.close()?;
        }
        Ok(())
    }
}
