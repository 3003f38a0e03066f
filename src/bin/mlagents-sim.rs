//! `mlagents-sim`: a stand-in for a Unity player built with ML-Agents. It takes the arguments
//! a player takes (`--mlagents-port N`, `-nographics`, `-batchmode`, `-logFile PATH`; other
//! player flags are ignored, as Unity ignores what it does not know) plus `--scene NAME`,
//! connects to the trainer as the gRPC client and plays the scene.
//!
//! `mlagents-sim --scene list [--json]` prints the scenes with their behavior specs.

use mlagents::sim::academy::{self, Fault, SimExit, SimOptions};
use mlagents::sim::scenes;
use mlagents::spec::DEFAULT_EDITOR_PORT;
use std::process::ExitCode;

const USAGE: &str = "usage: mlagents-sim --scene NAME [--mlagents-port N] [--seed N] [-nographics] [-batchmode] \
[-logFile PATH] [--unity-api VERSION] [--unity-package VERSION] [--fault KIND@N [--fault-once MARKER]] [--timeout-wait SECONDS] \
[--exchange-timeout SECONDS]\n       mlagents-sim --scene list [--json]";

struct Args {
    scene: Option<String>,
    options: SimOptions,
    log_file: Option<String>,
    json: bool,
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let mut args = Args { scene: None, options: SimOptions::new(DEFAULT_EDITOR_PORT), log_file: None, json: false };
    let mut i = 0;
    let value = |i: usize, flag: &str| argv.get(i + 1).cloned().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
    while i < argv.len() {
        let flag = argv[i].as_str();
        match flag {
            "--scene" => args.scene = Some(value(i, flag)?),
            "--mlagents-port" => {
                let v = value(i, flag)?;
                args.options.port = v.parse().map_err(|_| format!("--mlagents-port: {v:?} is not a port"))?;
            }
            "--seed" => {
                let v = value(i, flag)?;
                args.options.seed = Some(v.parse().map_err(|_| format!("--seed: {v:?} is not a number"))?);
            }
            "--unity-api" => {
                let v = value(i, flag)?;
                mlagents::spec::ApiVersion::parse(&v).map_err(|e| format!("--unity-api: {e}"))?;
                args.options.communication_version = v;
            }
            "--timeout-wait" | "--exchange-timeout" => {
                let v = value(i, flag)?;
                let seconds: u64 = v.parse().ok().filter(|s| *s > 0).ok_or_else(|| format!("{flag}: {v:?} is not a number of seconds (1 or more)"))?;
                let limit = std::time::Duration::from_secs(seconds);
                if flag == "--timeout-wait" { args.options.handshake_timeout = limit } else { args.options.exchange_timeout = limit }
            }
            "--unity-package" => args.options.package_version = value(i, flag)?,
            "--fault" => args.options.fault = Some(Fault::parse(&value(i, flag)?)?),
            "--fault-once" => args.options.fault_once = Some(value(i, flag)?.into()),
            "--host" => args.options.host = value(i, flag)?,
            "-logFile" | "-logfile" => args.log_file = Some(value(i, flag)?),
            "--json" => args.json = true,
            "-h" | "--help" => return Err(USAGE.into()),
            "-nographics" | "-batchmode" => {
                i += 1;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2 - usize::from(flag == "--json");
    }
    Ok(args)
}

fn list_scenes(json: bool) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let mut all = Vec::new();
    for info in scenes::SCENES {
        let scene = scenes::build(info.name).expect("listed scenes build");
        let behaviors = scene.behaviors();
        let agents = scene.agents();
        if json {
            all.push(serde_json::json!({
                "name": info.name,
                "description": info.description,
                "agents": agents.len(),
                "behaviors": behaviors.iter().map(|b| serde_json::json!({
                    "name": b.name,
                    "observations": b.observations.iter().map(|o| &o.spec).collect::<Vec<_>>(),
                    "actions": b.actions,
                    "agents": agents.iter().filter(|a| behaviors[a.behavior].name == b.name).count(),
                })).collect::<Vec<_>>(),
            }));
            continue;
        }
        let _ = writeln!(text, "{} — {}", info.name, info.description);
        for (k, b) in behaviors.iter().enumerate() {
            let n = agents.iter().filter(|a| a.behavior == k).count();
            let obs: Vec<String> = b.observations.iter().map(|o| format!("{:?} {}", o.spec.shape, o.spec.name)).collect();
            let _ = writeln!(text, "    {}: {n} agent(s); observations {}; actions: {}", b.name, obs.join(", "), b.actions);
        }
    }
    if json {
        text = serde_json::to_string_pretty(&all).expect("json") + "\n";
    }
    text
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut logger = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(path) = &args.log_file {
        match std::fs::File::create(path) {
            Ok(f) => {
                logger.target(env_logger::Target::Pipe(Box::new(f)));
            }
            Err(e) => eprintln!("cannot write log file {path}: {e}; logging to stderr"),
        }
    }
    logger.init();
    let Some(name) = args.scene else {
        eprintln!("--scene is required\n{USAGE}");
        return ExitCode::from(2);
    };
    if name == "list" {
        use std::io::Write;
        // A closed pipe (e.g. `| head`) is not an error worth a panic.
        let _ = std::io::stdout().write_all(list_scenes(args.json).as_bytes());
        return ExitCode::SUCCESS;
    }
    let Some(scene) = scenes::build(&name) else {
        let names = scenes::names();
        let hint = names.iter().find(|n| n.eq_ignore_ascii_case(&name)).map(|n| format!(" (did you mean {n}?)")).unwrap_or_default();
        eprintln!("unknown scene {name:?}{hint}; known: {}", names.join(", "));
        return ExitCode::from(2);
    };
    log::info!("scene {name}: connecting to the trainer on port {}", args.options.port);
    match academy::run(scene, args.options) {
        Ok(SimExit::ClosedByTrainer) | Ok(SimExit::Quit) | Ok(SimExit::LeftPlayMode) => {
            log::info!("trainer closed the connection; quitting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Once on the terminal; the log file (when there is one) gets it too.
            if args.log_file.is_some() {
                log::error!("{e}");
            }
            eprintln!("mlagents-sim: {e}");
            ExitCode::from(1)
        }
    }
}
