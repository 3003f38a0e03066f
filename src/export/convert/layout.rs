//! The model API 3 meaning of a legacy `.nn` policy's interface: which `obs_i` each of its
//! observation inputs becomes, its action spec and its memories.
//!
//! A `.nn` concatenates every vector sensor into `vector_observation` and numbers its cameras
//! `visual_observation_k`; model API 3 has one `obs_i` per sensor, in the order the
//! environment reports them. Without a behavior spec the cameras come first (k in order), then
//! the whole `vector_observation` as one sensor: Unity sorts sensors by name, and its camera
//! sensors ("CameraSensor…") sort before "VectorSensor". A behavior spec gives the real order
//! and splits `vector_observation` into its sensors.

use crate::barracuda::{LayerType, NnModel};
use crate::spec::model::{self, ModelInput};
use crate::spec::{ActionSpec, BehaviorSpec};

/// Where one `obs_i` goes in the `.nn`.
#[derive(Debug, Clone, PartialEq)]
pub enum ObservationTarget {
    /// All of `input` (`visual_observation_k`), `[height, width, channels]`.
    Visual { input: String, shape: [usize; 3] },
    /// `size` values of `vector_observation`, from `offset`.
    Vector { offset: usize, size: usize },
}

impl ObservationTarget {
    /// The observation's shape as the environment sends it.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Self::Visual { shape, .. } => shape.to_vec(),
            Self::Vector { size, .. } => vec![*size],
        }
    }
}

/// One memory of the `.nn`; model API 3's `recurrent_in`/`recurrent_out` hold them side by
/// side in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPart {
    pub input: String,
    pub output: String,
    pub size: usize,
}

/// A `.nn` policy's interface in model API 3 terms.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyLayout {
    /// In `obs_i` order.
    pub observations: Vec<ObservationTarget>,
    /// Width of `vector_observation` (0 without one).
    pub vector_size: usize,
    pub action_spec: ActionSpec,
    pub memories: Vec<MemoryPart>,
    pub memory_size: usize,
    /// The other inputs the `.nn` reads (`action_masks`, `prev_action`, `epsilon`, the legacy
    /// `recurrent_in`) with their width per agent.
    pub other_inputs: Vec<(ModelInput, String, usize)>,
}

/// A `.nn` input's shape as Barracuda reads it: padded to 4 entries with 1s on the right.
fn rank4(shape: &[i32]) -> [usize; 4] {
    let mut s = [1usize; 4];
    for (k, d) in shape.iter().take(4).enumerate() {
        s[k] = (*d).max(0) as usize;
    }
    s
}

/// Reads the layout of `model`, with `spec` giving the sensors' order and split when known.
pub fn layout(model: &NnModel, spec: Option<&BehaviorSpec>) -> Result<LegacyLayout, String> {
    let mut visuals = vec![];
    let mut vector_size = 0;
    let mut other_inputs = vec![];
    for input in &model.inputs {
        if input.shape.len() > 4 {
            return Err(format!("input {} has shape {:?}, more than 4 entries", input.name, input.shape));
        }
        let [_, h, w, c] = rank4(&input.shape);
        match ModelInput::parse(&input.name) {
            Some(ModelInput::VectorObservation) => vector_size = c,
            Some(ModelInput::VisualObservation(k)) => visuals.push((k, input.name.clone(), [h, w, c])),
            Some(kind @ (ModelInput::ActionMasks | ModelInput::PreviousAction | ModelInput::Epsilon | ModelInput::RecurrentIn)) => {
                other_inputs.push((kind, input.name.clone(), h * w * c))
            }
            _ => return Err(format!("input {:?} has no model API 3 counterpart (a .nn policy reads vector_observation, visual_observation_k, action_masks, prev_action, epsilon and recurrent_in)", input.name)),
        }
    }
    visuals.sort_by_key(|(k, ..)| *k);
    let memories: Vec<MemoryPart> = model
        .memories
        .iter()
        .map(|m| MemoryPart { input: m.input.clone(), output: m.output.clone(), size: rank4(&m.shape)[3] })
        .collect();
    let memory_size = memories.iter().map(|m| m.size).sum();
    if let Some(declared) = model.constant(model::MEMORY_SIZE) {
        if declared as usize != memory_size {
            return Err(format!("memory_size is {declared}, but the memories hold {memory_size} values"));
        }
    }
    if let Some((_, name, width)) = other_inputs.iter().find(|(k, ..)| *k == ModelInput::RecurrentIn) {
        if *width != memory_size {
            return Err(format!("input {name} holds {width} values, the memories {memory_size}"));
        }
    }
    let action_spec = action_spec(model, spec)?;
    let observations = match spec {
        Some(spec) => observations_from_spec(spec, &visuals, vector_size)?,
        None => {
            let mut o: Vec<ObservationTarget> = visuals.iter().map(|(_, input, shape)| ObservationTarget::Visual { input: input.clone(), shape: *shape }).collect();
            if vector_size > 0 {
                o.push(ObservationTarget::Vector { offset: 0, size: vector_size });
            }
            o
        }
    };
    if observations.is_empty() {
        return Err("the .nn reads no observation".into());
    }
    Ok(LegacyLayout { observations, vector_size, action_spec, memories, memory_size, other_inputs })
}

/// The sensors of `spec` in its order: each camera is the next `visual_observation_k`, each
/// vector sensor the next slice of `vector_observation`.
fn observations_from_spec(spec: &BehaviorSpec, visuals: &[(usize, String, [usize; 3])], vector_size: usize) -> Result<Vec<ObservationTarget>, String> {
    let (mut next_visual, mut offset, mut out) = (0, 0, vec![]);
    for (i, o) in spec.observation_specs.iter().enumerate() {
        match o.shape[..] {
            [size] => {
                out.push(ObservationTarget::Vector { offset, size });
                offset += size;
            }
            [h, w, c] => {
                let (_, input, shape) = visuals.get(next_visual).ok_or_else(|| format!("observation {i} ({}) is a camera, but the .nn has only {} visual input(s)", o.name, visuals.len()))?;
                if *shape != [h, w, c] {
                    return Err(format!("observation {i} ({}) is [{h}, {w}, {c}], but {input} is {shape:?}", o.name));
                }
                out.push(ObservationTarget::Visual { input: input.clone(), shape: *shape });
                next_visual += 1;
            }
            _ => return Err(format!("observation {i} ({}) of shape {:?}: a .nn has no input for it", o.name, o.shape)),
        }
    }
    if offset != vector_size {
        return Err(format!("the behavior spec's vector observations sum to {offset}, the .nn's vector_observation holds {vector_size}"));
    }
    if next_visual != visuals.len() {
        return Err(format!("the behavior spec has {next_visual} camera(s), the .nn {} visual input(s)", visuals.len()));
    }
    Ok(out)
}

/// The action spec: continuous (`is_continuous_control` 1) of `action_output_shape` actions,
/// or discrete with that many choices in all, split into branches by the behavior spec, else
/// by the slices the network takes of `action_masks`, else one branch.
fn action_spec(model: &NnModel, spec: Option<&BehaviorSpec>) -> Result<ActionSpec, String> {
    let constant = |name: &str| model.constant(name).ok_or_else(|| format!("the .nn has no {name} constant, so its actions cannot be told"));
    let continuous = constant(model::IS_CONTINUOUS_CONTROL)? != 0.0;
    let total = constant(model::ACTION_OUTPUT_SHAPE)?;
    if !(total >= 1.0 && total.fract() == 0.0 && total <= 1e6) {
        return Err(format!("action_output_shape is {total}, not a count of actions"));
    }
    let total = total as usize;
    let found = if continuous {
        ActionSpec::continuous(total)
    } else {
        match spec {
            Some(s) if !s.action_spec.discrete_branches.is_empty() => ActionSpec::discrete(&s.action_spec.discrete_branches),
            _ => ActionSpec::discrete(&mask_branches(model, total).unwrap_or_else(|| vec![total])),
        }
    };
    if let Some(s) = spec {
        if s.action_spec != found || found.mask_len() + found.continuous_size != total {
            return Err(format!("the behavior spec's actions ({}) are not the .nn's ({} with action_output_shape {total})", s.action_spec, if continuous { "continuous" } else { "discrete" }));
        }
    }
    Ok(found)
}

/// The branch sizes the discrete head's slices of `action_masks` show (one StridedSlice per
/// branch over the channel axis), when they tile `0..total`.
fn mask_branches(model: &NnModel, total: usize) -> Option<Vec<usize>> {
    let mut ranges: Vec<(i32, i32)> = model
        .layers
        .iter()
        .filter(|l| l.layer_type == LayerType::StridedSlice && l.inputs.first().map(String::as_str) == Some(model::ACTION_MASKS))
        .filter_map(|l| Some((*l.pad.get(3)?, *l.pool.get(3)?)))
        .collect();
    ranges.sort();
    let mut next = 0i32;
    let mut sizes = vec![];
    for (start, end) in ranges {
        if start != next || end <= start {
            return None;
        }
        sizes.push((end - start) as usize);
        next = end;
    }
    (next as usize == total && !sizes.is_empty()).then_some(sizes)
}
