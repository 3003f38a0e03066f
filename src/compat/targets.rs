//! The Unity packages a model can be checked against, as data (unity-import.md §1.3, §1.4,
//! §2.3, §2.5, §5.1): which inference package each ML-Agents release uses, the buckets inside
//! which the import rules do not change, the `.nn` versions each Barracuda release reads and
//! the ONNX operators each importer registers.

use super::version::PackageVersion;
use std::fmt;

/// The ML-Agents package buckets of unity-import.md §5.1 (the rules are constant inside one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum MlAgentsBucket {
    /// 1.0.0–1.0.7 and 1.1.0: API 2 only; the constants are read without a null check.
    M1,
    /// 1.0.8: the version is read first.
    M1b,
    /// 1.2.0–1.6.0: the four required constants are checked by name.
    M2,
    /// 1.7.0–1.9.1: hybrid action outputs.
    M3,
    /// 2.0.0-exp.1–2.1.0-exp.1: API 2 and 3, Barracuda.
    M4,
    /// 2.2.1-exp.1–2.3.0-exp.3: deterministic outputs, Barracuda 2.3 / 3.0.
    M5,
    /// 3.0.0-exp.1: Sentis 1.2, metadata read from the model's constants.
    M6,
    /// 3.0.0: Sentis 2.1, a probe run reads the metadata.
    M7,
    /// 4.x: Inference Engine.
    M8,
}

/// Barracuda buckets (B0–B5) and Sentis / Inference Engine buckets (S0–S4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum EngineBucket {
    B0,
    B1,
    B2,
    B3,
    B4,
    B5,
    S0,
    S1,
    S2,
    S3,
    S4,
}

impl EngineBucket {
    /// Whether the package is Barracuda (NNModel, `.nn` and ONNX) rather than Sentis or
    /// Inference Engine (ModelAsset, ONNX only).
    pub fn is_barracuda(self) -> bool {
        self <= EngineBucket::B5
    }
}

/// An inference package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnginePackage {
    Barracuda,
    Sentis,
    InferenceEngine,
}

impl EnginePackage {
    pub fn id(self) -> &'static str {
        match self {
            Self::Barracuda => "barracuda",
            Self::Sentis => "sentis",
            Self::InferenceEngine => "inference-engine",
        }
    }
}

/// One inference package release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRelease {
    pub package: EnginePackage,
    pub version: PackageVersion,
    pub bucket: EngineBucket,
}

/// What a model is checked against: an ML-Agents release (with the inference package it
/// depends on) or an inference package alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub ml_agents: Option<(PackageVersion, MlAgentsBucket)>,
    pub engine: EngineRelease,
}

impl Target {
    /// How Unity feeds entity (BufferSensor) observations under this target: Barracuda's
    /// transposed view, or as they are under Sentis and Inference Engine (poca.md §4.6).
    pub fn entity_layout(&self) -> crate::spec::EntityLayout {
        if self.engine.bucket.is_barracuda() { crate::spec::EntityLayout::Barracuda } else { crate::spec::EntityLayout::Natural }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ml_agents {
            Some((version, _)) => write!(f, "ml-agents@{version} ({}@{})", self.engine.package.id(), self.engine.version),
            None => write!(f, "{}@{}", self.engine.package.id(), self.engine.version),
        }
    }
}

/// Each com.unity.ml-agents release and the inference package its `package.json` names
/// (unity-import.md §2.5, read from each tag).
const ML_AGENTS_RELEASES: &[(&str, &str)] = &[
    ("1.0.0-preview", "barracuda@0.7.0-preview"),
    ("1.0.1-preview", "barracuda@0.7.1-preview"),
    ("1.0.2-preview", "barracuda@0.7.1-preview"),
    ("1.1.0-preview", "barracuda@0.7.1-preview"),
    ("1.0.2", "barracuda@1.0.0"),
    ("1.0.3", "barracuda@1.0.1"),
    ("1.0.4", "barracuda@1.0.2"),
    ("1.0.5", "barracuda@1.0.3"),
    ("1.0.6", "barracuda@1.0.4"),
    ("1.0.7", "barracuda@1.0.4"),
    ("1.0.8", "barracuda@1.0.4"),
    ("1.2.0-preview", "barracuda@1.0.1"),
    ("1.3.0-preview", "barracuda@1.0.2"),
    ("1.4.0-preview", "barracuda@1.1.1-preview"),
    ("1.5.0-preview", "barracuda@1.1.1-preview"),
    ("1.6.0-preview", "barracuda@1.1.2-preview"),
    ("1.7.0-preview", "barracuda@1.2.1-preview"),
    ("1.7.2-preview", "barracuda@1.2.1-preview"),
    ("1.8.0-preview", "barracuda@1.3.1-preview"),
    ("1.8.1-preview", "barracuda@1.3.1-preview"),
    ("1.9.0-preview", "barracuda@1.3.2-preview"),
    ("1.9.1-preview", "barracuda@1.3.2-preview"),
    ("2.0.0-exp.1", "barracuda@1.4.0-preview"),
    ("2.0.0-pre.3", "barracuda@2.0.0-pre.3"),
    ("2.1.0-exp.1", "barracuda@2.0.0-pre.3"),
    ("2.0.0", "barracuda@2.0.0"),
    ("2.0.1", "barracuda@2.0.0"),
    ("2.2.1-exp.1", "barracuda@2.3.1-preview"),
    ("2.3.0-exp.2", "barracuda@3.0.0"),
    ("2.3.0-exp.3", "barracuda@3.0.0"),
    ("3.0.0-exp.1", "sentis@1.2.0-exp.2"),
    ("3.0.0", "sentis@2.1.0"),
    ("4.0.0", "inference-engine@2.2.1"),
];

/// The ML-Agents buckets by first release (unity-import.md §5.1); 1.1.0 (a preview of the
/// 1.0 line's API) is M1.
const ML_AGENTS_BUCKETS: &[(&str, MlAgentsBucket)] = &[
    ("1.0.0-0", MlAgentsBucket::M1),
    ("1.0.8", MlAgentsBucket::M1b),
    ("1.1.0-0", MlAgentsBucket::M1),
    ("1.2.0-0", MlAgentsBucket::M2),
    ("1.7.0-0", MlAgentsBucket::M3),
    ("2.0.0-0", MlAgentsBucket::M4),
    ("2.2.0-0", MlAgentsBucket::M5),
    ("3.0.0-0", MlAgentsBucket::M6),
    ("3.0.0", MlAgentsBucket::M7),
    ("4.0.0-0", MlAgentsBucket::M8),
];

/// Buckets of the inference packages by first release, and the first release after the
/// last one these rules know (unity-import.md §5.1).
const ENGINE_BUCKETS: &[(EnginePackage, &str, EngineBucket)] = &[
    (EnginePackage::Barracuda, "0.0.0", EngineBucket::B0),
    (EnginePackage::Barracuda, "1.0.0-0", EngineBucket::B1),
    (EnginePackage::Barracuda, "1.1.0-0", EngineBucket::B2),
    (EnginePackage::Barracuda, "1.3.0-0", EngineBucket::B3),
    (EnginePackage::Barracuda, "2.0.0-0", EngineBucket::B4),
    (EnginePackage::Barracuda, "2.3.0-0", EngineBucket::B5),
    (EnginePackage::Sentis, "1.0.0-0", EngineBucket::S0),
    (EnginePackage::Sentis, "1.2.0-0", EngineBucket::S1),
    (EnginePackage::Sentis, "1.5.0-0", EngineBucket::S2),
    (EnginePackage::InferenceEngine, "2.2.0-0", EngineBucket::S3),
    (EnginePackage::InferenceEngine, "2.4.0-0", EngineBucket::S4),
];

/// Versions past the newest release each package's rules were read from.
const ENGINE_ENDS: &[(EnginePackage, &str)] =
    &[(EnginePackage::Barracuda, "3.1.0-0"), (EnginePackage::Sentis, "2.2.0-0"), (EnginePackage::InferenceEngine, "2.5.0-0")];

/// The `.nn` format versions each Barracuda release reads, by first release
/// (`ModelLoader.LoadAsync`, unity-import.md §1.3).
const NN_VERSIONS: &[(&str, &[i64])] =
    &[("0.0.0", &[16]), ("1.1.0-0", &[17, 16]), ("2.0.0-0", &[18, 16]), ("2.2.0-0", &[19, 16, 18]), ("2.3.0-0", &[20, 16, 18])];

/// `.nn` layer types that every Barracuda release declares but does not run (`// TODO: NOT
/// IMPLEMENTED` in `Model.cs` up to 3.0), then those 1.0.x and older do not run either
/// (unity-import.md §1.3). Names as Barracuda's `Layer.Type` (and [`crate::barracuda::LayerType`]).
const NN_LAYERS_NEVER_RUN: &str = "Conv3DTrans MaxPool3D AvgPool3D GlobalMaxPool3D GlobalAvgPool3D ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare Pad Squeeze Unsqueeze";
const NN_LAYERS_NOT_RUN_BEFORE_1_1: &str = "Conv3D Upsample3D Border3D";

/// `.nn` activations 1.0.x and older declare but do not run.
const NN_ACTIVATIONS_NOT_RUN_BEFORE_1_1: &str = "Softplus HardSigmoid Round Acos Acosh Asin Asinh Atan Atanh Cos Cosh Sin Sinh Tan";

/// Whether a Barracuda release runs a `.nn` layer type and a fused activation (names as
/// `Layer.Type` / `Layer.Activation`); None for Sentis and Inference Engine (no `.nn`).
pub fn runs_nn_layer(engine: &EngineRelease, layer: &str, activation: Option<&str>) -> Option<(bool, bool)> {
    if engine.package != EnginePackage::Barracuda {
        return None;
    }
    let old = engine.version < version("1.1.0-0");
    let listed = |list: &str, name: &str| list.split(' ').any(|n| n == name);
    let layer_runs = !listed(NN_LAYERS_NEVER_RUN, layer) && !(old && listed(NN_LAYERS_NOT_RUN_BEFORE_1_1, layer));
    let activation_runs = !(old && activation.is_some_and(|a| listed(NN_ACTIVATIONS_NOT_RUN_BEFORE_1_1, a)));
    Some((layer_runs, activation_runs))
}

/// The ONNX operators Barracuda's importer registers, by the release that added them
/// (unity-import.md §1.4).
const BARRACUDA_OPS: &[(&str, &str)] = &[
    ("0.3.0", "Add And AveragePool BatchNormalization Cast Concat Constant Conv ConvTranspose Div Dropout Elu Equal Flatten Gemm GlobalAveragePool GlobalMaxPool Greater Identity InstanceNormalization LeakyRelu Less MatMul Max MaxPool Mean Min Mul Not Or Pad Pow Relu Reshape Selu Sigmoid Slice Softmax Squeeze Sub Sum Swish Tanh Unsqueeze Upsample Xor"),
    ("0.3.2", "Clip Exp Log LogSoftmax Neg PRelu RandomNormal RandomNormalLike RandomUniform RandomUniformLike Reciprocal Sqrt"),
    ("0.5.0", "Abs Ceil Floor Gather OneHot ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum Resize Round Shape Transpose"),
    ("0.6.0", "LSTM Multinomial"),
    ("0.7.0", "ImageScaler"),
    ("0.7.1", "DepthToSpace Expand SpaceToDepth"),
    ("0.8.0", "LRN"),
    ("1.1.0-0", "Acos Acosh Asin Asinh Atan Atanh Cos Cosh Sin Sinh Tan TopK"),
    ("1.2.0-0", "ConstantOfShape NonMaxSuppression NonZero Split Where"),
    ("1.2.1-0", "ArgMax ArgMin LessOrEqual Tile"),
    ("1.3.0-0", "Softplus"),
    ("1.3.3-0", "Sign"),
    ("1.4.0-0", "MirrorPad Range"),
    ("2.2.0-0", "Erf HardSigmoid"),
    ("2.3.0-0", "RoiAlign ScatterND"),
];

/// The operators of Sentis 1.2 to 1.5 (unity-import.md §2.3, from the converter).
const SENTIS_OPS: &str = "Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization Bernoulli Cast CastLike Ceil Celu Clip Compress Concat Constant ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DepthToSpace Div Dropout Einsum Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements GatherND Gelu Gemm GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual HardSigmoid HardSwish Hardmax Identity ImageScaler InstanceNormalization IsInf IsNaN LRN LSTM LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax MatMul Max MaxPool Mean Min Mod Mul Multinomial Neg NonMaxSuppression NonZero Not OneHot Or PRelu Pad Pow RandomNormal RandomNormalLike RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize RoiAlign Round Scatter ScatterElements ScatterND Selu Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Swish Tan Tanh ThresholdedRelu Tile TopK Transpose Trilu Unsqueeze Upsample Where Xor";

/// Operators added after Sentis 1.5, by package and first release.
const SENTIS_LATER_OPS: &[(EnginePackage, &str, &str)] = &[
    (EnginePackage::Sentis, "1.6.0-0", "GridSample"),
    (EnginePackage::InferenceEngine, "2.2.0-0", "GridSample Mish"),
    (EnginePackage::InferenceEngine, "2.4.0-0", "BitwiseAnd BitwiseNot BitwiseOr BitwiseXor BlackmanWindow HammingWindow HannWindow DFT STFT MelWeightMatrix"),
];

fn version(text: &str) -> PackageVersion {
    PackageVersion::parse(text).expect("the tables hold valid versions")
}

/// The last row whose first release is at or below `v`.
fn last_at_or_below<'a, T>(rows: impl Iterator<Item = (&'a str, T)>, v: &PackageVersion) -> Option<T> {
    rows.filter(|(first, _)| version(first) <= *v).last().map(|(_, value)| value)
}

/// An inference package release and its bucket; an error names what is known.
pub fn engine_release(package: EnginePackage, v: PackageVersion) -> Result<EngineRelease, String> {
    let end = ENGINE_ENDS.iter().find(|(p, _)| *p == package).map(|(_, e)| version(e)).expect("every package has an end");
    let bucket = last_at_or_below(ENGINE_BUCKETS.iter().filter(|(p, ..)| *p == package).map(|(_, first, b)| (*first, *b)), &v);
    match bucket {
        Some(bucket) if v < end => Ok(EngineRelease { package, version: v, bucket }),
        _ => Err(format!("{}@{v} is not a release these rules know (known: {})", package.id(), known_engine_ranges(package))),
    }
}

fn known_engine_ranges(package: EnginePackage) -> &'static str {
    match package {
        EnginePackage::Barracuda => "barracuda 0.x to 3.0.x",
        EnginePackage::Sentis => "sentis 1.0 to 2.1.x",
        EnginePackage::InferenceEngine => "inference-engine 2.2 to 2.4.x",
    }
}

/// The ML-Agents releases these rules know.
pub fn ml_agents_versions() -> Vec<&'static str> {
    ML_AGENTS_RELEASES.iter().map(|(v, _)| *v).collect()
}

fn ml_agents_target(text: &str) -> Result<Target, String> {
    let known = |v: &str| ML_AGENTS_RELEASES.iter().find(|(r, _)| *r == v);
    // "1.8.0" finds "1.8.0-preview" (the 1.x previews are known by their numbers).
    let (release, engine) = known(text).or_else(|| known(&format!("{text}-preview"))).ok_or_else(|| {
        format!("ml-agents@{text} is not a release these rules know (known: {})", ml_agents_versions().join(", "))
    })?;
    let v = version(release);
    let bucket = last_at_or_below(ML_AGENTS_BUCKETS.iter().map(|(first, b)| (*first, *b)), &v).expect("every release has a bucket");
    let Target { engine, .. } = parse_target(engine)?;
    Ok(Target { ml_agents: Some((v, bucket)), engine })
}

/// Parses `PACKAGE@VERSION`: `ml-agents@2.0.1`, `barracuda@1.0.4`, `sentis@2.1.0`,
/// `inference-engine@2.2.1` (also `ie@…`, `com.unity.…` names).
pub fn parse_target(text: &str) -> Result<Target, String> {
    let Some((package, v)) = text.split_once('@') else {
        return Err(format!("target {text:?} is not PACKAGE@VERSION ({})", TARGET_FORMS));
    };
    let package = package.trim().to_ascii_lowercase();
    let package = package.strip_prefix("com.unity.").unwrap_or(&package);
    let engine = match package {
        "ml-agents" | "mlagents" => return ml_agents_target(v.trim()),
        "barracuda" => EnginePackage::Barracuda,
        "sentis" => EnginePackage::Sentis,
        "inference-engine" | "ie" | "ai.inference" => EnginePackage::InferenceEngine,
        other => return Err(format!("unknown package {other:?} in target {text:?} ({})", TARGET_FORMS)),
    };
    let parsed = PackageVersion::parse(v.trim()).ok_or_else(|| format!("{v:?} is not a package version (e.g. 2.1.0 or 2.0.0-exp.1)"))?;
    Ok(Target { ml_agents: None, engine: engine_release(engine, parsed)? })
}

const TARGET_FORMS: &str = "ml-agents@VERSION, barracuda@VERSION, sentis@VERSION, inference-engine@VERSION, or all";

/// `all`: the newest release of each ML-Agents bucket, oldest first.
pub fn all_targets() -> Vec<Target> {
    let mut newest: Vec<Target> = vec![];
    for (release, _) in ML_AGENTS_RELEASES {
        let target = ml_agents_target(release).expect("the table's releases parse");
        let bucket = target.ml_agents.as_ref().map(|(_, b)| *b);
        match newest.iter_mut().find(|t| t.ml_agents.as_ref().map(|(_, b)| *b) == bucket) {
            Some(kept) if kept.ml_agents.as_ref().map(|(v, _)| v) < target.ml_agents.as_ref().map(|(v, _)| v) => *kept = target,
            Some(_) => {}
            None => newest.push(target),
        }
    }
    newest.sort_by_key(|t| t.ml_agents.as_ref().map(|(_, b)| *b));
    newest
}

/// The `.nn` versions a Barracuda release reads (None for Sentis / Inference Engine).
pub fn accepted_nn_versions(engine: &EngineRelease) -> Option<&'static [i64]> {
    (engine.package == EnginePackage::Barracuda).then(|| last_at_or_below(NN_VERSIONS.iter().map(|(f, v)| (*f, *v)), &engine.version).expect("0.0.0 row"))
}

/// Whether the release's importer registers `op` (None: not known for this release).
pub fn imports_op(engine: &EngineRelease, op: &str) -> Option<bool> {
    match engine.package {
        EnginePackage::Barracuda => {
            Some(BARRACUDA_OPS.iter().filter(|(first, _)| version(first) <= engine.version).any(|(_, ops)| ops.split(' ').any(|o| o == op)))
        }
        _ if engine.bucket == EngineBucket::S0 => None,
        package => {
            let later = SENTIS_LATER_OPS.iter().filter(|(p, first, _)| *p == package && version(first) <= engine.version);
            Some(SENTIS_OPS.split(' ').chain(later.flat_map(|(_, _, ops)| ops.split(' '))).any(|o| o == op))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(text: &str) -> (Option<MlAgentsBucket>, EngineBucket) {
        let t = parse_target(text).unwrap();
        (t.ml_agents.map(|(_, b)| b), t.engine.bucket)
    }

    #[test]
    fn releases_fall_in_the_buckets_of_the_spec() {
        use EngineBucket::*;
        use MlAgentsBucket::*;
        assert_eq!(bucket("ml-agents@1.0.7"), (Some(M1), B1));
        assert_eq!(bucket("ml-agents@1.0.8"), (Some(M1b), B1));
        assert_eq!(bucket("ml-agents@1.1.0"), (Some(M1), B0));
        assert_eq!(bucket("ml-agents@1.6.0"), (Some(M2), B2));
        assert_eq!(bucket("ml-agents@1.8.0"), (Some(M3), B3));
        assert_eq!(bucket("ml-agents@2.0.1"), (Some(M4), B4));
        assert_eq!(bucket("ml-agents@2.3.0-exp.3"), (Some(M5), B5));
        assert_eq!(bucket("ml-agents@3.0.0-exp.1"), (Some(M6), S1));
        assert_eq!(bucket("ml-agents@3.0.0"), (Some(M7), S2));
        assert_eq!(bucket("ml-agents@4.0.0"), (Some(M8), S3));
        assert_eq!(bucket("barracuda@1.0.4"), (None, B1));
        assert_eq!(bucket("sentis@2.1.0"), (None, S2));
        assert_eq!(bucket("inference-engine@2.2.1"), (None, S3));
        assert_eq!(bucket("ie@2.4.0"), (None, S4));
    }

    #[test]
    fn unknown_targets_name_what_is_known() {
        let error = parse_target("ml-agents@2.0.2").unwrap_err();
        assert!(error.contains("2.0.1") && error.contains("4.0.0"), "{error}");
        assert!(parse_target("barracuda@3.1.0").unwrap_err().contains("3.0.x"));
        assert!(parse_target("tensorflow@1.0").unwrap_err().contains("unknown package"));
        assert!(parse_target("ml-agents").unwrap_err().contains("PACKAGE@VERSION"));
    }

    #[test]
    fn all_is_one_release_per_bucket() {
        let all: Vec<String> = all_targets().iter().map(|t| t.to_string()).collect();
        assert_eq!(all.len(), 9, "{all:?}");
        assert_eq!(all[0], "ml-agents@1.1.0-preview (barracuda@0.7.1-preview)");
        assert_eq!(all[8], "ml-agents@4.0.0 (inference-engine@2.2.1)");
    }

    #[test]
    fn op_tables_follow_the_releases() {
        let engine = |t: &str| parse_target(t).unwrap().engine;
        assert_eq!(imports_op(&engine("barracuda@1.2.0"), "ArgMax"), Some(false));
        assert_eq!(imports_op(&engine("barracuda@1.2.1-preview"), "ArgMax"), Some(true));
        assert_eq!(imports_op(&engine("barracuda@3.0.0"), "GreaterOrEqual"), Some(false));
        assert_eq!(imports_op(&engine("sentis@2.1.0"), "GreaterOrEqual"), Some(true));
        assert_eq!(imports_op(&engine("inference-engine@2.2.1"), "Mish"), Some(true));
        assert_eq!(imports_op(&engine("sentis@2.1.0"), "Mish"), Some(false));
        assert_eq!(accepted_nn_versions(&engine("barracuda@2.2.1")), Some(&[19, 16, 18][..]));
        assert_eq!(accepted_nn_versions(&engine("sentis@2.1.0")), None);
        assert_eq!(runs_nn_layer(&engine("barracuda@3.0.0"), "Squeeze", None), Some((false, true)));
        assert_eq!(runs_nn_layer(&engine("barracuda@1.0.4"), "Conv3D", Some("Softplus")), Some((false, false)));
        assert_eq!(runs_nn_layer(&engine("barracuda@1.3.0"), "Conv3D", Some("Softplus")), Some((true, true)));
        assert_eq!(runs_nn_layer(&engine("barracuda@1.0.4"), "Dense", Some("Relu")), Some((true, true)));
    }
}
