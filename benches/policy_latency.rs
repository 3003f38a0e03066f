//! Single-decision latency of a policy on our tract runner, as deterministic play runs it (only
//! the action outputs computed): median, p10 and p90 after warm-up, at each batch size. The
//! inputs are prepared once in the runner's tensors and read in place by every run, as
//! onnxruntime reads the caller's numpy arrays in place.
//!
//! `cargo bench --bench policy_latency -- [--onnxruntime PYTHON] MODEL...` (default: 3DBall.onnx
//! and 3DBall.nn of ../shared/models; `BATCHES=1,12,64`). The files given together are measured
//! together, and with `--onnxruntime` each `.onnx` of them on onnxruntime too (PYTHON runs
//! `benches/policy_latency_onnxruntime.py --serve`): each case's engines take turns in slices of
//! [`SLICE`], in a new order each round, until each has run for [`BUDGET`]. The machines are
//! shared: a neighbour's load comes and goes over seconds, and when each engine ran its three
//! seconds in one go, the same pair of runs measured 0.7x one time and 1.2x the next; in turns,
//! every engine meets the same load. `scripts/bench-policy.sh` prints the table.

use mlagents::run::{LoadOptions, NamedTensors, Policy, PreparedInputs, TensorData};

/// The allocator `mlagents-run` uses (tract allocates per call).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use mlagents::spec::model;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How long each engine runs each case, in slices, after its warm-up.
const BUDGET: Duration = Duration::from_secs(3);

/// The same when `cargo test` runs this file (without `--bench`) to see that it works.
const SMOKE_BUDGET: Duration = Duration::from_millis(100);

/// How long an engine runs before the next takes its turn.
const SLICE: Duration = Duration::from_millis(50);

fn inputs(policy: &Policy, batch: usize) -> NamedTensors {
    let interface = policy.interface().expect("the model's interface");
    interface
        .inputs
        .iter()
        .map(|i| {
            let mut shape = vec![batch];
            shape.extend(i.dims.iter().map(|d| (*d).max(1) as usize));
            let n = shape.iter().product();
            let data = match i.name.as_str() {
                model::ACTION_MASKS => vec![1.0; n],
                // Indices into each branch (a TF-era model's one-hot input).
                model::PREV_ACTION => vec![0.0; n],
                _ => (0..n).map(|k| ((k * 37) % 100) as f32 / 100.0).collect(),
            };
            (i.name.clone(), TensorData { shape, data })
        })
        .collect()
}

/// The outputs deterministic play reads: the deterministic actions of model API 3, else
/// `action`, and a recurrent model's memories (the same names
/// `benches/policy_latency_onnxruntime.py` asks for).
fn action_outputs(policy: &Policy) -> Vec<String> {
    let has = |name: &str| policy.outputs().iter().any(|o| o == name);
    let mut outputs: Vec<String> =
        [model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::DETERMINISTIC_DISCRETE_ACTIONS].into_iter().filter(|n| has(n)).map(String::from).collect();
    if outputs.is_empty() {
        outputs.push(model::ACTION.into());
    }
    outputs.extend(policy.interface().expect("the model's interface").memories.iter().map(|m| m.output.clone()));
    outputs
}

/// onnxruntime in a Python child process, running the cases it is asked for.
struct Onnxruntime {
    child: Child,
    requests: ChildStdin,
    replies: BufReader<ChildStdout>,
}

/// What onnxruntime answers for one slice.
#[derive(serde::Deserialize)]
struct OnnxruntimeSlice {
    engine: String,
    outputs: Vec<String>,
    times_us: Vec<f64>,
}

impl Onnxruntime {
    fn start(python: &str) -> Onnxruntime {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/policy_latency_onnxruntime.py");
        let mut child = Command::new(python).arg(script).arg("--serve").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start onnxruntime's Python");
        let requests = child.stdin.take().expect("its stdin");
        let replies = BufReader::new(child.stdout.take().expect("its stdout"));
        Onnxruntime { child, requests, replies }
    }

    fn run(&mut self, model: &Path, batch: usize, slice: Duration) -> OnnxruntimeSlice {
        writeln!(self.requests, "run {} {batch} {}", model.display(), slice.as_secs_f64()).expect("ask onnxruntime");
        let mut reply = String::new();
        self.replies.read_line(&mut reply).expect("onnxruntime's reply");
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("onnxruntime's reply {reply:?}: {e}"))
    }
}

impl Drop for Onnxruntime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One engine on one file: ours (the policy's index) or onnxruntime.
enum Engine {
    Ours(usize),
    Onnxruntime,
}

/// One engine's part of a case: what it ran and every run's time.
struct Contestant {
    engine: Engine,
    model: PathBuf,
    name: String,
    outputs: Vec<String>,
    times: Vec<f64>,
    spent: Duration,
}

impl Contestant {
    fn done(&self, budget: Duration) -> bool {
        self.spent >= budget
    }

    fn report(&mut self, batch: usize) {
        let times = &mut self.times;
        times.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!(
            "{{\"engine\": \"{}\", \"model\": \"{}\", \"outputs\": {:?}, \"batch\": {batch}, \"runs\": {}, \"median_us\": {:.2}, \"p10_us\": {:.2}, \"p90_us\": {:.2}}}",
            self.name,
            self.model.file_name().unwrap().to_string_lossy(),
            self.outputs,
            times.len(),
            at(0.5),
            at(0.1),
            at(0.9)
        );
    }
}

/// Runs of our policy for `slice`: each run's time in µs.
fn our_runs(policy: &Policy, feed: &PreparedInputs, slice: Duration) -> Vec<f64> {
    let start = Instant::now();
    let mut times = Vec::new();
    while start.elapsed() < slice {
        let t = Instant::now();
        policy.run_prepared(feed).expect("run");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times
}

/// A permutation of `0..n` from the state of a xorshift generator.
fn shuffled(n: usize, state: &mut u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        order.swap(i, (*state % (i as u64 + 1)) as usize);
    }
    order
}

fn main() {
    mlagents::engine::allocator::keep_freed_memory();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let budget = if arguments.iter().any(|a| a == "--bench") { BUDGET } else { SMOKE_BUDGET };
    let arguments: Vec<String> = arguments.into_iter().filter(|a| a != "--bench").collect();
    let mut onnxruntime = None;
    let mut models = Vec::new();
    let mut arguments = arguments.into_iter();
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--onnxruntime" => onnxruntime = Some(Onnxruntime::start(&arguments.next().expect("--onnxruntime PYTHON"))),
            _ => models.push(PathBuf::from(argument)),
        }
    }
    if models.is_empty() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/models");
        models = vec![dir.join("onnx/3DBall.onnx"), dir.join("nn/3DBall.nn")];
    }
    let batches: Vec<usize> = std::env::var("BATCHES").ok().map(|b| b.split(',').filter_map(|x| x.parse().ok()).collect()).unwrap_or(vec![1, 12, 64]);
    let policies: Vec<Policy> = models
        .iter()
        .map(|model| {
            let mut policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() }).expect("load");
            let outputs = action_outputs(&policy);
            policy.keep_outputs(&outputs.iter().map(String::as_str).collect::<Vec<_>>()).expect("action outputs");
            policy
        })
        .collect();
    let mut order_state = 0x9E37_79B9_7F4A_7C15u64;
    for &batch in &batches {
        let feeds: Vec<PreparedInputs> = policies.iter().map(|p| p.prepare(&inputs(p, batch)).expect("inputs")).collect();
        let mut contestants: Vec<Contestant> = Vec::new();
        for (index, (policy, model)) in policies.iter().zip(&models).enumerate() {
            let ours = Contestant { engine: Engine::Ours(index), model: model.clone(), name: "mlagents-rs (tract)".into(), outputs: action_outputs(policy), times: Vec::new(), spent: Duration::ZERO };
            contestants.push(ours);
            if onnxruntime.is_some() && model.extension().is_some_and(|extension| extension == "onnx") {
                contestants.push(Contestant { engine: Engine::Onnxruntime, model: model.clone(), name: String::new(), outputs: Vec::new(), times: Vec::new(), spent: Duration::ZERO });
            }
        }
        let mut turn = |contestant: &mut Contestant, slice: Duration| match contestant.engine {
            Engine::Ours(index) => our_runs(&policies[index], &feeds[index], slice),
            Engine::Onnxruntime => {
                let reply = onnxruntime.as_mut().expect("onnxruntime").run(&contestant.model, batch, slice);
                (contestant.name, contestant.outputs) = (reply.engine, reply.outputs);
                reply.times_us
            }
        };
        // One untimed turn each to warm up; then rounds of turns, each in a new order, until
        // every engine has run for its budget.
        for contestant in &mut contestants {
            turn(contestant, budget / 10);
        }
        loop {
            let waiting: Vec<usize> = (0..contestants.len()).filter(|&c| !contestants[c].done(budget)).collect();
            if waiting.is_empty() {
                break;
            }
            for c in shuffled(waiting.len(), &mut order_state).into_iter().map(|i| waiting[i]) {
                let contestant = &mut contestants[c];
                let start = Instant::now();
                let times = turn(contestant, SLICE.min(budget - contestant.spent));
                contestant.spent += start.elapsed();
                contestant.times.extend(times);
            }
        }
        for contestant in &mut contestants {
            contestant.report(batch);
        }
    }
}
