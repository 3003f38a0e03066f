//! `mlagents_envs._native`: our Rust client (`mlagents::env`) as a Python module. The Python
//! package around it (`python/mlagents_envs/`) keeps `mlagents_envs` 0.28's classes, side
//! channels and exceptions; this module only talks to Unity: launching, the handshake, the
//! exchanges, decoding observations (PNG included) into numpy arrays, encoding actions.
//!
//! Errors leave as `NativeError(kind, message)`; `mlagents_envs.environment` turns each kind
//! into the exception class 0.28 raises for it.

use mlagents::comm::CommError;
use mlagents::env::{ActionTuple, EnvError, EnvOptions, ObservationBatch, UnityEnvironment};
use mlagents::spec::BehaviorSpec;
use numpy::{IntoPyArray, PyArrayMethods, PyReadonlyArray2};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

create_exception!(_native, NativeError, PyException, "An error of the Rust client: args are (kind, message).");

/// The exception kinds `mlagents_envs.environment` maps onto 0.28's classes.
fn error_kind(error: &EnvError) -> &'static str {
    match error {
        EnvError::Comm(CommError::Bind(_)) => "worker_in_use",
        EnvError::Comm(CommError::Incompatible(_)) => "environment",
        EnvError::Comm(CommError::Closed { .. }) => "communicator_stopped",
        EnvError::Comm(_) => "communication",
        EnvError::Timeout { .. } => "timeout",
        EnvError::ProcessExited { .. } => "environment",
        EnvError::ExecutableNotFound { .. } | EnvError::SimNotFound { .. } | EnvError::Launch { .. } => "environment",
        EnvError::UnknownBehavior { .. } | EnvError::InvalidAction { .. } => "action",
        EnvError::InvalidData { field, .. } if field == "reward" || field == "group_reward" => "not_finite",
        // An observation value that is not finite: "value K is NaN" / "is inf" / "is -inf".
        EnvError::InvalidData { detail, .. } if detail.ends_with(" is NaN") || detail.ends_with("inf") => "not_finite",
        EnvError::InvalidData { .. } => "observation",
        EnvError::SideChannel(_) => "environment",
        EnvError::Options(_) | EnvError::Closed => "environment",
    }
}

fn raise(error: EnvError) -> PyErr {
    NativeError::new_err((error_kind(&error), error.to_string()))
}

/// One Unity environment (a player, `sim:SCENE`, or the Editor) and its connection.
///
/// Python threads may share it: the environment sits behind a mutex, and every call that
/// waits for Unity takes that mutex with the GIL released and gives it back before taking
/// the GIL again, so that a thread holding the GIL and waiting for the mutex never waits on
/// one that needs the GIL.
#[pyclass(module = "mlagents_envs._native")]
struct Environment {
    inner: Mutex<Option<UnityEnvironment>>,
}

impl Environment {
    /// Runs `f` on the open environment (a closed one is an error).
    fn with<T>(&self, f: impl FnOnce(&mut UnityEnvironment) -> Result<T, EnvError>) -> PyResult<T> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let env = guard.as_mut().ok_or_else(|| raise(EnvError::Closed))?;
        f(env).map_err(raise)
    }

    /// Sends the framed side-channel records with RESET or STEP, waits for Unity with the
    /// GIL released, and returns Unity's side-channel bytes.
    fn exchange<'py>(&self, py: Python<'py>, side_channel: &[u8], reset: bool) -> PyResult<Bound<'py, PyBytes>> {
        let received = py.detach(|| {
            self.with(|env| {
                env.queue_side_channel_bytes(side_channel);
                if reset { env.reset() } else { env.step() }?;
                Ok(env.received_side_channel_bytes().to_vec())
            })
        })?;
        Ok(PyBytes::new(py, &received))
    }
}

/// A batch of observations as a float32 array of shape (n, *shape), without copying.
fn observation_array<'py>(py: Python<'py>, batch: ObservationBatch, n: usize) -> PyResult<Bound<'py, PyAny>> {
    let mut shape = vec![n];
    shape.extend_from_slice(&batch.shape);
    Ok(batch.data.into_pyarray(py).reshape(shape)?.into_any())
}

fn observation_list<'py>(py: Python<'py>, batches: Vec<ObservationBatch>, n: usize) -> PyResult<Bound<'py, PyList>> {
    let arrays = batches.into_iter().map(|b| observation_array(py, b, n)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, arrays)
}

fn spec_tuple<'py>(py: Python<'py>, spec: &BehaviorSpec) -> PyResult<Bound<'py, PyTuple>> {
    let observations = spec
        .observation_specs
        .iter()
        .map(|o| {
            let shape = PyTuple::new(py, &o.shape)?;
            let properties = PyTuple::new(py, o.dimension_properties.iter().map(|p| p.to_wire()))?;
            let kind = match o.observation_type {
                mlagents::spec::ObservationType::Default => 0,
                mlagents::spec::ObservationType::GoalSignal => 1,
            };
            (shape, properties, kind, o.name.as_str()).into_pyobject(py)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let branches = PyTuple::new(py, &spec.action_spec.discrete_branches)?;
    (PyList::new(py, observations)?, (spec.action_spec.continuous_size, branches)).into_pyobject(py)
}

#[pymethods]
impl Environment {
    /// Listens, launches `file_name` (None: waits for the Editor) and runs the handshake,
    /// with the GIL released.
    #[new]
    #[pyo3(signature = (file_name, worker_id, base_port, seed, no_graphics, timeout_wait, additional_args, log_folder, num_areas))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        file_name: Option<String>,
        worker_id: u32,
        base_port: Option<u16>,
        seed: i32,
        no_graphics: bool,
        timeout_wait: f64,
        additional_args: Vec<String>,
        log_folder: Option<PathBuf>,
        num_areas: i32,
    ) -> PyResult<Self> {
        if !(timeout_wait.is_finite() && timeout_wait >= 0.0) {
            return Err(raise(EnvError::Options(format!("timeout_wait must be a number of seconds >= 0, not {timeout_wait}"))));
        }
        let options = EnvOptions {
            env: file_name,
            worker_id,
            base_port,
            seed,
            no_graphics,
            timeout_wait: Duration::from_secs_f64(timeout_wait),
            additional_args,
            log_folder,
            num_areas,
            ..Default::default()
        };
        let mut env = py.detach(|| UnityEnvironment::new(options)).map_err(raise)?;
        env.frame_side_channels_in_caller();
        Ok(Self { inner: Mutex::new(Some(env)) })
    }

    /// The port the environment talks on.
    #[getter]
    fn port(&self) -> PyResult<u16> {
        self.with(|env| Ok(env.port()))
    }

    /// (academy name, Unity's communication API version, Unity's package version).
    fn academy(&self) -> PyResult<(String, String, String)> {
        self.with(|env| {
            let agreement = env.agreement();
            Ok((env.academy_name().to_string(), agreement.unity_api.to_string(), agreement.unity_package.clone()))
        })
    }

    /// Sends RESET with the framed side-channel records; returns Unity's side-channel bytes.
    fn reset<'py>(&self, py: Python<'py>, side_channel: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        self.exchange(py, side_channel, true)
    }

    /// Sends the actions set (zeros for the rest) with the framed side-channel records and
    /// waits for the next decisions (the first call resets); returns Unity's side-channel bytes.
    fn step<'py>(&self, py: Python<'py>, side_channel: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        self.exchange(py, side_channel, false)
    }

    /// How many behaviors have a spec so far (specs are only ever added, so a caller that
    /// keeps them converted needs to read them again only when this grows).
    #[getter]
    fn behavior_count(&self) -> PyResult<usize> {
        self.with(|env| Ok(env.behavior_specs().len()))
    }

    /// {name: ([(shape, dimension properties, observation type, name)], (continuous size,
    /// discrete branches))} for every behavior seen so far.
    fn behavior_specs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let specs = PyDict::new(py);
        for (name, spec) in self.with(|env| Ok(env.behavior_specs().clone()))? {
            specs.set_item(name, spec_tuple(py, &spec)?)?;
        }
        Ok(specs)
    }

    /// The last message's steps of one behavior: ((obs, reward, agent_id, action_mask,
    /// group_id, group_reward), (obs, reward, interrupted, agent_id, group_id, group_reward)),
    /// numpy arrays with 0.28's dtypes; action_mask is None or one (n, branch) bool array per
    /// branch, True where the action is not allowed.
    fn get_steps<'py>(&self, py: Python<'py>, behavior: &str) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyTuple>)> {
        let (decisions, terminals) = self.with(|env| env.get_steps(behavior))?;
        let n = decisions.len();
        let mask = match decisions.action_mask {
            Some(branches) if n > 0 => {
                let arrays = branches
                    .into_iter()
                    .map(|flags| {
                        let size = flags.len() / n;
                        flags.into_pyarray(py).reshape([n, size]).map(|a| a.into_any())
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, arrays)?.into_any()
            }
            _ => py.None().into_bound(py),
        };
        let decision = (
            observation_list(py, decisions.obs, n)?,
            decisions.reward.into_pyarray(py),
            decisions.agent_id.into_pyarray(py),
            mask,
            decisions.group_id.into_pyarray(py),
            decisions.group_reward.into_pyarray(py),
        )
            .into_pyobject(py)?;
        let m = terminals.len();
        let terminal = (
            observation_list(py, terminals.obs, m)?,
            terminals.reward.into_pyarray(py),
            terminals.interrupted.into_pyarray(py),
            terminals.agent_id.into_pyarray(py),
            terminals.group_id.into_pyarray(py),
            terminals.group_reward.into_pyarray(py),
        )
            .into_pyobject(py)?;
        Ok((decision, terminal))
    }

    /// Sets the actions of every deciding agent of `behavior`: (n, continuous size) float32
    /// and (n, branches) int32, in the order of the decision steps' agent ids.
    fn set_actions(&self, behavior: &str, continuous: PyReadonlyArray2<'_, f32>, discrete: PyReadonlyArray2<'_, i32>) -> PyResult<()> {
        let actions = ActionTuple { continuous: continuous.as_array().iter().copied().collect(), discrete: discrete.as_array().iter().copied().collect() };
        self.with(|env| env.set_actions(behavior, actions))
    }

    /// Closes the connection, waits for the player to exit (killing it after the grace
    /// period). Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            taken.map_or(Ok(()), |mut env| env.close())
        })
        .map_err(raise)
    }

    /// False once closed (or after an error that killed the player).
    #[getter]
    fn is_open(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// Steps (or with `reset`, resets) several environments in one call, with the GIL released:
/// each gets its framed side-channel records and its actions first, then all are awaited,
/// so their players simulate side by side. An environment not reset yet is reset (as `step`
/// does). Returns each environment's side-channel bytes from Unity; the first error is
/// raised once every environment sent to has been awaited (none is left mid-exchange).
#[pyfunction]
#[pyo3(signature = (environments, side_channels, reset=false))]
fn step_all<'py>(py: Python<'py>, environments: Vec<PyRef<'py, Environment>>, side_channels: Vec<Vec<u8>>, reset: bool) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if environments.len() != side_channels.len() {
        return Err(raise(EnvError::Options(format!(
            "{} environments but {} side-channel buffers",
            environments.len(),
            side_channels.len()
        ))));
    }
    let mutexes: Vec<&Mutex<Option<UnityEnvironment>>> = environments.iter().map(|e| &e.inner).collect();
    // The same environment twice would wait on its own lock forever.
    for (i, m) in mutexes.iter().enumerate() {
        if mutexes[..i].iter().any(|other| std::ptr::eq(*other, *m)) {
            return Err(raise(EnvError::Options(format!("environment {i} is given twice; each environment steps once per call"))));
        }
    }
    let received = py.detach(|| -> Result<Vec<Vec<u8>>, EnvError> {
        let mut guards: Vec<_> = mutexes.iter().map(|m| m.lock().unwrap_or_else(|p| p.into_inner())).collect();
        let mut first_error = None;
        // Send to every environment first (a reset is a whole exchange), then await them.
        let mut awaiting = Vec::with_capacity(guards.len());
        for (guard, records) in guards.iter_mut().zip(&side_channels) {
            let Some(env) = guard.as_mut() else {
                first_error.get_or_insert(EnvError::Closed);
                awaiting.push(None);
                continue;
            };
            env.queue_side_channel_bytes(records);
            let resetting = reset || env.needs_reset();
            let result = if resetting { env.reset_send() } else { env.step_send() };
            awaiting.push(result.is_ok().then_some(resetting));
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        let mut received = Vec::with_capacity(guards.len());
        for (guard, awaiting) in guards.iter_mut().zip(awaiting) {
            let Some(env) = guard.as_mut() else {
                received.push(Vec::new());
                continue;
            };
            let result = match awaiting {
                Some(true) => env.reset_receive(),
                Some(false) => env.step_receive(),
                None => Ok(()),
            };
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
            received.push(env.received_side_channel_bytes().to_vec());
        }
        first_error.map_or(Ok(received), Err)
    });
    Ok(received.map_err(raise)?.iter().map(|bytes| PyBytes::new(py, bytes)).collect())
}

/// The player's arguments after the executable, as ML-Agents builds them (the ones the
/// Rust client launches players with).
#[pyfunction]
#[pyo3(signature = (port, worker_id, no_graphics, log_folder, additional_args))]
fn player_arguments(port: u16, worker_id: u32, no_graphics: bool, log_folder: Option<PathBuf>, additional_args: Vec<String>) -> Vec<String> {
    mlagents::env::player_arguments(port, worker_id, no_graphics, log_folder.as_deref(), &additional_args)
}

/// The executable a Unity build name resolves to (ML-Agents' rules, as the Rust client
/// applies them), or None.
#[pyfunction]
fn resolve_executable(name: &str) -> Option<PathBuf> {
    mlagents::env::resolve_executable(name).ok()
}

/// The module `mlagents_envs._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_class::<Environment>()?;
    m.add_function(wrap_pyfunction!(step_all, m)?)?;
    m.add_function(wrap_pyfunction!(player_arguments, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_executable, m)?)?;
    Ok(())
}
