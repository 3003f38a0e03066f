//! Will it run in Unity? An offline check of a model file against the Unity packages that
//! would load it (unity-import.md): the file's format and `.nn` version, the ONNX operators
//! and opsets each importer takes, and what each com.unity.ml-agents release demands of the
//! metadata, names and element types, with Unity's own messages where it prints one.
//!
//! - [`version`]: package versions and their order.
//! - [`targets`]: the per-release facts as data tables (buckets, `.nn` versions, op sets).
//! - [`facts`]: what the rules read from a model file.
//! - [`rules`]: the rules, one function per group.
//! - [`attributes`]: the operator rules that read attributes (Barracuda's silent changes).
//! - [`probe`]: the run Sentis-era ML-Agents makes at load (rule M12), on tract.

pub mod attributes;
pub mod facts;
pub mod graph_rules;
pub mod interface_rules;
pub mod nn_rules;
pub mod probe;
pub mod rules;
pub mod shapes;
pub mod targets;
pub mod version;

use crate::run::session::{CheckReport, Report};
use crate::run::ModelFormat;
use serde::Serialize;
pub use targets::{all_targets, parse_target, Target};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule (unity-import.md §5.2: F1, N1, O1, P1, M1, ...).
    pub id: &'static str,
    pub severity: Severity,
    /// What is wrong and what to do.
    pub message: String,
    /// What Unity prints for it, word for word, where it prints something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unity_message: Option<String>,
}

impl Finding {
    pub fn new(id: &'static str, severity: Severity, message: String, unity_message: Option<String>) -> Self {
        Self { id, severity, message, unity_message }
    }
}

/// The findings for one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetReport {
    pub target: String,
    /// `ok`, `warning` or `error`: the worst finding.
    pub verdict: &'static str,
    pub findings: Vec<Finding>,
}

/// `check --target`: a model against every target asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompatibilityReport {
    pub model: String,
    /// `onnx` or `nn`, from the content.
    pub format: &'static str,
    pub targets: Vec<TargetReport>,
}

impl CompatibilityReport {
    /// Whether no target has an error.
    pub fn passed(&self) -> bool {
        self.targets.iter().all(|t| t.verdict != "error")
    }

    /// The report for people: one block per target.
    pub fn text(&self) -> String {
        let mut text = format!("{} ({})\n", self.model, self.format);
        for t in &self.targets {
            text.push_str(&format!("  {}: {}\n", t.target, t.verdict));
            for f in &t.findings {
                text.push_str(&format!("    {} {:?}: {}\n", f.id, f.severity, f.message));
                if let Some(unity) = &f.unity_message {
                    text.push_str(&format!("       Unity: {}\n", unity.replace('\n', "\n              ")));
                }
            }
        }
        text
    }
}

/// `check`: the offline checks against Unity package releases (`--target`) and the checks
/// against a live environment's behavior specs (`--env`), whichever were asked for.
#[derive(Debug, Serialize)]
pub struct CheckOutput {
    #[serde(flatten)]
    pub compatibility: Option<CompatibilityReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<CheckReport>,
}

impl Report for CheckOutput {
    fn text(&self) -> String {
        let compatibility = self.compatibility.as_ref().map(|c| c.text()).unwrap_or_default();
        compatibility + &self.environment.as_ref().map(|e| e.text()).unwrap_or_default()
    }

    fn passed(&self) -> bool {
        self.compatibility.as_ref().is_none_or(|c| c.passed()) && self.environment.as_ref().is_none_or(|e| e.passed())
    }
}

impl Report for CompatibilityReport {
    fn text(&self) -> String {
        CompatibilityReport::text(self)
    }

    fn passed(&self) -> bool {
        CompatibilityReport::passed(self)
    }
}

/// Expands the `--target` arguments (`all` is one release per ML-Agents bucket); an unknown
/// target is an error that lists the known ones.
pub fn resolve_targets(names: &[String]) -> Result<Vec<Target>, String> {
    let mut targets = vec![];
    for name in names {
        if name.eq_ignore_ascii_case("all") {
            targets.extend(all_targets());
        } else {
            targets.push(parse_target(name)?);
        }
    }
    Ok(targets)
}

/// Checks the bytes of the model file `label` (its name only says what Unity would take it
/// for) against each target. An error when the content is no readable model at all.
pub fn check_bytes(bytes: &[u8], label: &str, targets: &[Target]) -> Result<CompatibilityReport, String> {
    check_model_bytes(bytes, label, targets, CheckOptions::default())
}

/// Unity's checks of the model against a behavior spec (rule M11), made once for every target.
fn spec_findings(bytes: &[u8], label: &str, spec: &crate::spec::BehaviorSpec) -> Vec<Finding> {
    let options = crate::run::LoadOptions { deterministic: true, ..Default::default() };
    let violations = crate::run::Policy::from_bytes(bytes, std::path::Path::new(label), options).and_then(|p| p.interface().map(|i| crate::run::check(i, spec)));
    let mut out = vec![];
    match violations {
        Ok(v) => interface_rules::against_spec(&v, &mut out),
        Err(e) => out.push(Finding::new("M11", Severity::Warning, format!("the model could not be checked against the behavior spec: {e}"), None)),
    }
    out
}

/// The backend a Sentis-era ML-Agents user picks (`BehaviorParameters.InferenceDevice`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    #[default]
    Cpu,
    /// GPU compute shaders.
    Compute,
    /// GPU pixel shaders.
    Pixel,
}

/// What a check knows beyond the model: the behavior it serves (rule M11) and the backend it
/// runs on (rule P10).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions<'a> {
    pub behavior_spec: Option<&'a crate::spec::BehaviorSpec>,
    pub device: Device,
}

/// [`check_bytes`] with what else is known: the behavior spec (M11) and the device (P10).
pub fn check_model_bytes(bytes: &[u8], label: &str, targets: &[Target], options: CheckOptions<'_>) -> Result<CompatibilityReport, String> {
    if bytes.is_empty() {
        return Err(format!("{label}: the file is empty"));
    }
    let named = ModelFormat::of_name(std::path::Path::new(label));
    let format = ModelFormat::of_content(bytes).unwrap_or(named);
    let model_facts = facts::read(bytes, format).map_err(|e| format!("{label}: {e}"))?;
    let container = rules::Container { format, named, leading_int64: bytes.get(..8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))) };
    let inferred = shapes::infer(bytes, &model_facts);
    let against_spec = options.behavior_spec.map(|spec| spec_findings(bytes, label, spec));
    // The probe run is the same for every target that makes it, and whether the graph
    // computes at all the same for every other: each is run once.
    let mut probe_findings: Option<Vec<Finding>> = None;
    let mut run_failure: Option<Option<probe::RunFailure>> = None;
    let mut reports = vec![];
    for target in targets {
        let mut findings = vec![];
        rules::container(&container, &model_facts, target, &mut findings);
        rules::nn_layers(&model_facts, target, &mut findings);
        rules::operators(&model_facts, target, &mut findings);
        rules::opsets(&model_facts, target, &mut findings);
        attributes::barracuda_attributes(&model_facts, &inferred, target, &mut findings);
        graph_rules::structure(&model_facts, target, &mut findings);
        graph_rules::operator_inputs(&model_facts, target, &mut findings);
        shapes::shape_rules(&model_facts, &inferred, target, &mut findings);
        graph_rules::backend_limits(&model_facts, target, options.device, &mut findings);
        nn_rules::nn_file(&model_facts, target, &mut findings);
        if let Some((_, bucket)) = &target.ml_agents {
            rules::ml_agents(&model_facts, *bucket, &mut findings);
            nn_rules::nn_interface(&model_facts, *bucket, &mut findings);
            interface_rules::input_shapes(&model_facts, *bucket, &mut findings);
            interface_rules::variable_length_layout(&model_facts, *bucket, &mut findings);
            findings.extend(against_spec.iter().flatten().cloned());
            if *bucket >= targets::MlAgentsBucket::M7 && format == ModelFormat::Onnx {
                findings.extend(probe_findings.get_or_insert_with(|| probe::probe(bytes, label, &model_facts)).iter().cloned());
            }
        }
        let probed = target.ml_agents.as_ref().is_some_and(|(_, bucket)| *bucket >= targets::MlAgentsBucket::M7);
        if format == ModelFormat::Onnx && !probed {
            match run_failure.get_or_insert_with(|| probe::run_failure(bytes, label)) {
                Some(failure) if failure.at_batch_1() => findings.push(Finding::new("O6", Severity::Error, format!("{}; the graph does not compute", failure.message(false)), None)),
                Some(failure) => findings.push(Finding::new("O6", Severity::Warning, format!("{}; it computes for one agent only", failure.message(false)), None)),
                None => {}
            }
        }
        let verdict = match findings.iter().map(|f| f.severity).max() {
            Some(Severity::Error) => "error",
            Some(Severity::Warning) => "warning",
            _ => "ok",
        };
        reports.push(TargetReport { target: target.to_string(), verdict, findings });
    }
    Ok(CompatibilityReport { model: label.to_string(), format: if format == ModelFormat::Nn { "nn" } else { "onnx" }, targets: reports })
}

/// [`check_bytes`] on a file.
pub fn check_file(path: &std::path::Path, targets: &[Target]) -> Result<CompatibilityReport, String> {
    check_file_with(path, targets, CheckOptions::default())
}

/// [`check_model_bytes`] on a file.
pub fn check_file_with(path: &std::path::Path, targets: &[Target], options: CheckOptions<'_>) -> Result<CompatibilityReport, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    check_model_bytes(&bytes, &path.display().to_string(), targets, options)
}
