//! A faster gather for the convolutions tract runs with its lazy im2col.
//!
//! tract feeds a convolution's matrix product the image's patches packed panel by panel, as
//! the kernel reads them (`LazyIm2col`): one value at a time, each through two offset tables
//! and its packing writer. On the 84 x 84 visual encoder that gather was 42% of the first
//! convolution (8x8 stride 4) and 28% of the second (4x4 stride 2) at batch 1 (perf), and it
//! is what the convolutions cost beyond onnxruntime's.
//!
//! Once tract has optimised a plan, [`speed_up_lazy_im2col`] replaces each `LazyIm2col` node
//! with a [`FastIm2col`] that writes the same panels. It learns where each packed value comes
//! from by running tract's own op once on an input holding each element's index: every value
//! must come from a k offset plus a column offset (plus one offset per group), else the node
//! is kept as it is. It then copies each run of k values that lie side by side in the input
//! (a kernel row of an NCHW image) as a block, with no table lookup per value.

use std::sync::Arc;
use tract_onnx::tract_core::ops::matmul::pack::DynPackedExoticFact;
use tract_onnx::tract_core::tract_linalg::mmm::{EagerPackedInput, MMMInputFormat, MMMInputValue, PackedMatrixStorage};
use tract_onnx::tract_core::tract_linalg::pack::PackedFormat;
use tract_onnx::tract_core::tract_linalg::WeightType;
use tract_onnx::tract_hir::internal::*;

/// The name tract 0.23 gives its lazy im2col op.
const TRACT_LAZY_IM2COL: &str = "LazyIm2col";

/// The largest input whose element indices float32 holds exactly (the probe's values are the
/// indices plus one, so that no index reads as a padding zero).
const MAX_PROBED_ELEMENTS: usize = 1 << 24;

/// Replaces every `LazyIm2col` node of an optimised plan whose panels [`FastIm2col`] can
/// write; returns how many were replaced. A node it cannot read is left to tract.
pub fn speed_up_lazy_im2col(model: &mut TypedModel) -> TractResult<usize> {
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        if model.node(id).op().name() != TRACT_LAZY_IM2COL {
            continue;
        }
        if let Some(op) = FastIm2col::probe(model, id)? {
            model.node_mut(id).op = Box::new(op);
            replaced += 1;
        }
    }
    Ok(replaced)
}

/// Where a packed panel's values come from: element offsets into the input.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct PatchOffsets {
    /// The panel format of the matrix kernel (its `r` columns per panel, k outer).
    packer: PackedFormat,
    /// Per k (channel and kernel tap), from the first.
    k: Vec<isize>,
    /// Per column (output point), from the first group's start.
    columns: Vec<isize>,
    /// Runs of k whose offsets follow one another: (first k, length).
    runs: Vec<(usize, usize)>,
}

impl PatchOffsets {
    fn new(packer: PackedFormat, k: Vec<isize>, columns: Vec<isize>) -> PatchOffsets {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for index in 0..k.len() {
            match runs.last_mut() {
                Some((first, length)) if k[*first] + *length as isize == k[index] => *length += 1,
                _ => runs.push((index, 1)),
            }
        }
        PatchOffsets { packer, k, columns, runs }
    }

    /// Writes panel `panel` (k rows of `r` values) of the input at `input` into `out`. The
    /// columns past the last output point of a last, partial panel repeat its last column:
    /// the matrix kernel computes them but tract keeps only the valid ones.
    ///
    /// # Safety
    /// `input` plus every k and column offset is inside the input; `out` holds `k · r` floats.
    unsafe fn write_panel(&self, input: *const f32, panel: usize, out: *mut f32) {
        let r = self.packer.r;
        let first = panel * r;
        let columns = &self.columns[first..(first + r).min(self.columns.len())];
        // Every panel width of tract's x86-64 and Arm float32 kernels has its own copy.
        macro_rules! by_width {
            ($($width:literal)*) => {
                match r {
                    $($width => self.write_full::<$width>(input, columns, out),)*
                    _ => self.write_any(input, columns, r, out),
                }
            };
        }
        unsafe { by_width!(1 2 3 4 5 6 8 12 16) }
    }

    /// A panel of `R` columns (at least one given; the last repeated up to `R`): each run of k
    /// is an `R` x length block of the input (a row per column) written transposed, four by
    /// four with SSE on x86-64.
    unsafe fn write_full<const R: usize>(&self, input: *const f32, columns: &[isize], out: *mut f32) {
        let columns: [isize; R] = std::array::from_fn(|j| columns[j.min(columns.len() - 1)]);
        for &(first, length) in &self.runs {
            unsafe {
                let base = input.offset(self.k[first]);
                let rows = out.add(first * R);
                // A one-column panel is a plain copy of each run.
                #[cfg(target_arch = "x86_64")]
                let done = if R > 1 { transpose_by_fours::<R>(base, &columns, length, rows) } else { 0 };
                #[cfg(not(target_arch = "x86_64"))]
                let done = 0;
                for (j, column) in columns.iter().enumerate() {
                    let from = base.offset(*column);
                    for t in done..length {
                        *rows.add(t * R + j) = *from.add(t);
                    }
                }
            }
        }
    }

    /// Any other panel width (a last, partial panel's missing columns as zeros).
    unsafe fn write_any(&self, input: *const f32, columns: &[isize], r: usize, out: *mut f32) {
        for (k, offset) in self.k.iter().enumerate() {
            for j in 0..r {
                unsafe { *out.add(k * r + j) = columns.get(j).map_or(0.0, |column| *input.offset(offset + column)) };
            }
        }
    }
}

/// Writes `rows[t·R + j] = base[columns[j] + t]` for `t` below the largest multiple of 4 not
/// over `length`, with 4 x 4 SSE transposes; returns that multiple.
///
/// # Safety
/// `base[columns[j] + t]` is readable for every `j < R` and `t < length`; `rows` holds
/// `length · R` floats.
#[cfg(target_arch = "x86_64")]
unsafe fn transpose_by_fours<const R: usize>(base: *const f32, columns: &[isize; R], length: usize, rows: *mut f32) -> usize {
    use std::arch::x86_64::*;
    let done = length / 4 * 4;
    for t in (0..done).step_by(4) {
        for j in (0..R).step_by(4) {
            let take = (R - j).min(4);
            // SAFETY (all below): the reads are the caller's; a group of fewer than four
            // columns reads its last one again, and only `take` lanes are stored.
            unsafe {
                let load = |i: usize| _mm_loadu_ps(base.offset(columns[j + i.min(take - 1)]).add(t));
                let (a, b, c, d) = (load(0), load(1), load(2), load(3));
                let (ab_low, ab_high) = (_mm_unpacklo_ps(a, b), _mm_unpackhi_ps(a, b));
                let (cd_low, cd_high) = (_mm_unpacklo_ps(c, d), _mm_unpackhi_ps(c, d));
                let transposed = [_mm_movelh_ps(ab_low, cd_low), _mm_movehl_ps(cd_low, ab_low), _mm_movelh_ps(ab_high, cd_high), _mm_movehl_ps(cd_high, ab_high)];
                for (i, row) in transposed.into_iter().enumerate() {
                    let to = rows.add((t + i) * R + j);
                    match take {
                        4 => _mm_storeu_ps(to, row),
                        2 => _mm_store_sd(to as *mut f64, _mm_castps_pd(row)),
                        _ => {
                            let mut lanes = [0f32; 4];
                            _mm_storeu_ps(lanes.as_mut_ptr(), row);
                            std::ptr::copy_nonoverlapping(lanes.as_ptr(), to, take);
                        }
                    }
                }
            }
        }
    }
    done
}

impl std::fmt::Display for PatchOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FastIm2col")
    }
}

impl MMMInputFormat for PatchOffsets {
    fn prepare_tensor(&self, _: &Tensor, _: usize, _: usize) -> TractResult<Tensor> {
        bail!("FastIm2col packs its own panels")
    }

    fn prepare_one_view(&self, _: &TensorView, _: usize, _: usize) -> TractResult<Box<dyn MMMInputValue>> {
        bail!("FastIm2col packs its own panels")
    }

    fn precursor(&self) -> WeightType {
        self.packer.precursor()
    }

    fn r(&self) -> usize {
        self.packer.r
    }

    fn k_alignment(&self) -> usize {
        1
    }

    fn mem_size(&self, k: TDim, mn: TDim) -> TDim {
        k * mn * self.packer.dt.size_of()
    }

    fn extract_at_mn_f16(&self, _: &EagerPackedInput, _: usize, _: &mut [f16]) -> TractResult<()> {
        bail!("FastIm2col panels are not stored")
    }

    fn extract_at_mn_f32(&self, _: &EagerPackedInput, _: usize, _: &mut [f32]) -> TractResult<()> {
        bail!("FastIm2col panels are not stored")
    }
}

impl ExoticFact for PatchOffsets {
    fn buffer_sizes(&self) -> TVec<TDim> {
        tvec!(MMMInputFormat::mem_size(self, self.k.len().to_dim(), self.columns.len().to_dim()))
    }
}

/// The replacement of one `LazyIm2col` node: the panels of each group of the convolution.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct FastIm2col {
    offsets: Arc<PatchOffsets>,
    /// Per group, where its input starts.
    groups: Vec<isize>,
    /// The input's element count (the offsets were read off an input of this size).
    input_len: usize,
}

impl FastIm2col {
    /// Reads the offsets off node `id`'s panels, or `None` when they are not sums of a k, a
    /// column and a group offset (or the node is not a float32 im2col of a concrete input).
    fn probe(model: &TypedModel, id: usize) -> TractResult<Option<FastIm2col>> {
        let node = model.node(id);
        let input = model.outlet_fact(node.inputs[0])?;
        let Some(shape) = input.shape.as_concrete() else { return Ok(None) };
        let input_len: usize = shape.iter().product();
        let output = &node.outputs[0].fact;
        let packer = output.exotic_fact().and_then(|f| f.downcast_ref::<DynPackedExoticFact>()).and_then(|f| f.packers.first()).and_then(|p| p.downcast_ref::<PackedFormat>());
        let (Some(packer), Some(&[1, group_count])) = (packer, output.shape.as_concrete()) else { return Ok(None) };
        if input.datum_type != f32::datum_type() || packer.dt != f32::datum_type() || input_len > MAX_PROBED_ELEMENTS || packer.r == 0 {
            return Ok(None);
        }
        let indices = Tensor::from_shape(shape, &(1..=input_len).map(|i| i as f32).collect::<Vec<f32>>())?;
        let Some(probed) = node.op.eval_out_of_plan(tvec!(indices.into_tvalue()))? else { return Ok(None) };
        let Ok(storage) = probed[0].try_storage_as::<PackedMatrixStorage>() else { return Ok(None) };
        let values = storage.values();
        if values.len() != group_count || values.is_empty() {
            return Ok(None);
        }
        let Some((k, columns, groups)) = read_offsets(values, packer.r, input_len)? else { return Ok(None) };
        Ok(Some(FastIm2col { offsets: Arc::new(PatchOffsets::new(packer.clone(), k, columns)), groups, input_len }))
    }
}

/// The k, column and group offsets of the probe's panels (its input holds each element's
/// index plus one, so a packed value less one is the index it was read from), or `None` unless
/// every packed value comes from inside the input and is the sum of its group's, its k's and
/// its column's offset. The offsets are read off the first group's first panel and first k
/// row, then every value is checked.
fn read_offsets(groups: &[Box<dyn MMMInputValue>], r: usize, input_len: usize) -> TractResult<Option<(Vec<isize>, Vec<isize>, Vec<isize>)>> {
    let (k, columns) = (groups[0].k(), groups[0].mn());
    let layout = groups[0].scratch_panel_buffer_layout().context("a lazy im2col panel needs a buffer")?;
    ensure!(layout.size() >= k * r * 4, "a panel buffer of {} bytes for {k} x {r} floats", layout.size());
    if k == 0 || columns == 0 || groups.iter().any(|g| g.k() != k || g.mn() != columns) {
        return Ok(None);
    }
    // SAFETY: the layout is the one tract's panel writer asks for.
    let mut buffer = unsafe { Blob::for_layout(layout) };
    let (mut k_offsets, mut column_offsets, mut group_offsets) = (vec![], vec![0isize; columns], vec![]);
    let mut origin = 0;
    for (g, group) in groups.iter().enumerate() {
        for panel in 0..columns.div_ceil(r) {
            let written = group.panel_bytes(panel, Some(buffer.as_bytes_mut().as_mut_ptr()))? as *const f32;
            let width = r.min(columns - panel * r);
            // SAFETY: a panel holds k rows of r floats.
            let value = |row: usize, j: usize| unsafe { *written.add(row * r + j) } as isize - 1;
            let inside = (0..k).all(|row| (0..width).all(|j| (0..input_len as isize).contains(&value(row, j))));
            if !inside {
                return Ok(None);
            }
            if g == 0 && panel == 0 {
                origin = value(0, 0);
                k_offsets = (0..k).map(|row| value(row, 0) - origin).collect();
            }
            if panel == 0 {
                group_offsets.push(value(0, 0) - origin);
            }
            if g == 0 {
                for j in 0..width {
                    column_offsets[panel * r + j] = value(0, j);
                }
            }
            let group_offset = group_offsets[g];
            let consistent = (0..k).all(|row| (0..width).all(|j| value(row, j) == group_offset + k_offsets[row] + column_offsets[panel * r + j]));
            if !consistent {
                return Ok(None);
            }
        }
    }
    Ok(Some((k_offsets, column_offsets, group_offsets)))
}

impl Op for FastIm2col {
    fn name(&self) -> StaticName {
        "FastIm2col".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastIm2col {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        ensure!(input.datum_type() == f32::datum_type() && input.len() == self.input_len, "FastIm2col was built for {} float32 values, got {:?}", self.input_len, input);
        let values = self.groups.iter().map(|group| Box::new(Panels { input: input.clone(), offsets: self.offsets.clone(), group: *group }) as Box<dyn MMMInputValue>).collect();
        let output = PackedMatrixStorage::new_batched(&[1, self.groups.len()], values).into_tensor(f32::datum_type());
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for FastIm2col {
    fn output_facts(&self, _: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let fact = DynPackedExoticFact {
            k: self.offsets.k.len().to_dim(),
            mn: self.offsets.columns.len().to_dim(),
            packers: vec![Box::new(self.offsets.packer.clone())],
        };
        Ok(tvec!(f32::fact([1, self.groups.len()]).with_exotic_fact(fact)))
    }

    as_op!();
}

/// One group's panels, written when the matrix kernel asks for them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Panels {
    input: TValue,
    offsets: Arc<PatchOffsets>,
    group: isize,
}

// SAFETY: as tract's own lazy im2col input: the value lives inside one evaluation of the plan,
// on the thread that runs it, and only reads its input.
unsafe impl Send for Panels {}
unsafe impl Sync for Panels {}

impl std::hash::Hash for Panels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.input.as_bytes(), &self.offsets, self.group).hash(state);
    }
}

impl std::fmt::Display for Panels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FastIm2col panels of group at {}", self.group)
    }
}

impl MMMInputValue for Panels {
    fn format(&self) -> &dyn MMMInputFormat {
        &*self.offsets
    }

    fn scratch_panel_buffer_layout(&self) -> Option<std::alloc::Layout> {
        Some(self.offsets.packer.single_panel_layout(self.offsets.k.len(), 4))
    }

    fn panel_bytes(&self, panel: usize, buffer: Option<*mut u8>) -> TractResult<*const u8> {
        let out = buffer.context("FastIm2col writes into the kernel's panel buffer")?;
        // Called between tract's matrix kernel calls, which leave the wide registers dirty
        // (the copy below is SSE).
        crate::engine::vector_state::clear_upper_vector_state();
        ensure!(panel < self.panels_count(), "panel {panel} of {}", self.panels_count());
        // SAFETY: the offsets were read off tract's in-bounds reads of an input of the same
        // length (checked in eval); the buffer has the layout asked for above, k · r floats.
        unsafe {
            let input = self.input.as_ptr::<f32>()?.offset(self.group);
            self.offsets.write_panel(input, panel, out as *mut f32);
        }
        Ok(out)
    }

    fn mn(&self) -> usize {
        self.offsets.columns.len()
    }

    fn k(&self) -> usize {
        self.offsets.k.len()
    }

    fn exotic_fact(&self) -> &dyn ExoticFact {
        &*self.offsets
    }

    fn extract_at_mn_f16(&self, _: usize, _: &mut [f16]) -> TractResult<()> {
        bail!("FastIm2col panels are not stored")
    }

    fn extract_at_mn_f32(&self, _: usize, _: &mut [f32]) -> TractResult<()> {
        bail!("FastIm2col panels are not stored")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_int, attr_ints, value_info, GraphBuilder, FLOAT};

    /// A convolution of `[1, C, H, W]` (or of `[1, H, W, C]` through a transpose, as tract sees a
    /// `.nn` model's), weights and bias set.
    struct Case {
        input: [usize; 4],
        output_channels: usize,
        kernel: [usize; 2],
        strides: [usize; 2],
        pads: [usize; 4],
        group: usize,
        channels_last: bool,
    }

    fn values(n: usize, salt: usize) -> Vec<f32> {
        (0..n).map(|k| ((k * 7919 + salt * 104_729) % 211) as f32 / 211.0 - 0.5).collect()
    }

    fn graph(case: &Case) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let [_, c, _, _] = case.input;
        let o = case.output_channels;
        let [kh, kw] = case.kernel;
        let w = g.constant("W", &[o as i64, (c / case.group) as i64, kh as i64, kw as i64], values(o * c / case.group * kh * kw, 1));
        let b = g.constant("B", &[o as i64], values(o, 2));
        let x = if case.channels_last { g.node("Transpose", vec!["x".into()], vec![attr_ints("perm", &[0, 3, 1, 2])], "x_nchw") } else { "x".to_string() };
        let to_i64 = |v: &[usize]| v.iter().map(|d| *d as i64).collect::<Vec<_>>();
        let attributes = vec![attr_ints("kernel_shape", &to_i64(&case.kernel)), attr_ints("strides", &to_i64(&case.strides)), attr_ints("pads", &to_i64(&case.pads)), attr_int("group", case.group as i64)];
        g.node_into("Conv", vec![x, w, b], attributes, "y");
        let [n, c, h, w] = case.input;
        let dims: Vec<i64> = if case.channels_last { to_i64(&[n, h, w, c]) } else { to_i64(&case.input) };
        g.finish("conv", 11, vec![value_info("x", FLOAT, &dims)], vec![value_info("y", FLOAT, &[])], "test")
    }

    /// The convolution's output on tract's plan, with or without the fast gather, and how many
    /// nodes were replaced.
    fn run(case: &Case, fast: bool) -> TractResult<(Vec<f32>, usize)> {
        let model = tract_onnx::onnx().model_for_proto_model(&graph(case))?;
        let mut plan = model.into_optimized()?;
        let replaced = if fast { speed_up_lazy_im2col(&mut plan)? } else { 0 };
        let input_len = case.input.iter().product();
        let [n, c, h, w] = case.input;
        let shape = if case.channels_last { [n, h, w, c] } else { case.input };
        let x = Tensor::from_shape(&shape, &values(input_len, 3))?;
        let outputs = plan.into_runnable()?.run(tvec![x.into_tvalue()])?;
        Ok((outputs[0].try_as_plain_ram()?.as_slice::<f32>()?.to_vec(), replaced))
    }

    fn check(case: Case) {
        let (tract, _) = run(&case, false).unwrap();
        let (fast, replaced) = run(&case, true).unwrap();
        assert_eq!(replaced, 1, "one lazy im2col replaced");
        assert_eq!(tract.len(), fast.len());
        let differing = tract.iter().zip(&fast).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differing, 0, "the same panels give the same products, value for value");
    }

    /// The simple encoder's two convolutions (runs of 8 and 4 k values, a last panel of 4 of
    /// the kernel's 6 columns).
    #[test]
    fn simple_encoder_convolutions_compute_what_tract_computes() {
        check(Case { input: [1, 3, 84, 84], output_channels: 16, kernel: [8, 8], strides: [4, 4], pads: [0; 4], group: 1, channels_last: false });
        check(Case { input: [1, 16, 20, 20], output_channels: 32, kernel: [4, 4], strides: [2, 2], pads: [0; 4], group: 1, channels_last: false });
    }

    /// Padding (tract pads the input first), runs of 3 and 5 (a remainder after fours),
    /// groups, and a channels-last input.
    #[test]
    fn padded_grouped_and_channels_last_convolutions_compute_what_tract_computes() {
        check(Case { input: [1, 5, 9, 11], output_channels: 7, kernel: [3, 3], strides: [1, 1], pads: [1, 1, 1, 1], group: 1, channels_last: false });
        check(Case { input: [1, 4, 10, 13], output_channels: 6, kernel: [3, 5], strides: [2, 1], pads: [0, 2, 1, 0], group: 2, channels_last: false });
        check(Case { input: [1, 3, 12, 12], output_channels: 8, kernel: [4, 4], strides: [2, 2], pads: [0; 4], group: 1, channels_last: true });
    }

    /// The runs: offsets that follow one another form one.
    #[test]
    fn runs_join_consecutive_offsets() {
        let packer = PackedFormat { dt: f32::datum_type(), r: 6, alignment_bytes: 32, end_padding_record: 0 };
        let offsets = PatchOffsets::new(packer, vec![0, 1, 2, 10, 11, 30], vec![0, 4]);
        assert_eq!(offsets.runs, vec![(0, 3), (3, 2), (5, 1)]);
    }

    /// Every panel width's block copy writes what the value-by-value writer writes in every
    /// valid column, for runs of every length from 1 to 9 and a last, partial panel (the
    /// widths tract picks depend on the CPU, so each is checked here on any machine).
    #[test]
    fn every_panel_width_writes_what_the_value_by_value_writer_writes() {
        let mut k = vec![];
        for length in 1..=9isize {
            k.extend((0..length).map(|t| length * 100 + t));
        }
        let input: Vec<f32> = (0..2000).map(|i| i as f32).collect();
        for r in [1, 2, 3, 4, 5, 6, 8, 12, 16] {
            let packer = PackedFormat { dt: f32::datum_type(), r, alignment_bytes: 32, end_padding_record: 0 };
            let columns: Vec<isize> = (0..3 * r as isize + 1).map(|c| c * 3).collect();
            let offsets = PatchOffsets::new(packer, k.clone(), columns.clone());
            for panel in 0..columns.len().div_ceil(r) {
                let (mut fast, mut reference) = (vec![f32::NAN; k.len() * r], vec![f32::NAN; k.len() * r]);
                let panel_columns = &columns[panel * r..((panel + 1) * r).min(columns.len())];
                // SAFETY: offsets up to 9 · 100 + 8 plus columns up to 3 · 48 stay inside the
                // 2000 values; each buffer holds k · r floats.
                unsafe {
                    offsets.write_panel(input.as_ptr(), panel, fast.as_mut_ptr());
                    offsets.write_any(input.as_ptr(), panel_columns, r, reference.as_mut_ptr());
                }
                let valid = |panel: &[f32]| -> Vec<f32> { panel.chunks(r).flat_map(|row| row[..panel_columns.len()].to_vec()).collect() };
                assert_eq!(valid(&fast), valid(&reference), "panel {panel} of width {r}");
                assert!(fast.iter().all(|v| !v.is_nan()), "every value of the panel written");
            }
        }
    }

    /// The probe reads back the offsets of panels written from them, and refuses panels with a
    /// value from outside the input (a padding zero) or one that breaks the sum.
    #[test]
    fn the_probe_reads_offsets_back_and_refuses_what_does_not_add_up() {
        let packer = PackedFormat { dt: f32::datum_type(), r: 6, alignment_bytes: 32, end_padding_record: 0 };
        let offsets = Arc::new(PatchOffsets::new(packer, vec![0, 1, 2, 3, 40, 41], (0..9).map(|c| c * 2).collect()));
        let groups = vec![0isize, 100];
        let input_len = 200;
        let panels_of = |values: Vec<f32>| -> Vec<Box<dyn MMMInputValue>> {
            let input = Tensor::from_shape(&[input_len], &values).unwrap().into_tvalue();
            groups.iter().map(|g| Box::new(Panels { input: input.clone(), offsets: offsets.clone(), group: *g }) as Box<dyn MMMInputValue>).collect()
        };
        let indices: Vec<f32> = (1..=input_len).map(|i| i as f32).collect();
        let read = read_offsets(&panels_of(indices.clone()), 6, input_len).unwrap();
        assert_eq!(read, Some((offsets.k.clone(), offsets.columns.clone(), groups.clone())));
        let mut padded = indices.clone();
        padded[141] = 0.0;
        assert_eq!(read_offsets(&panels_of(padded), 6, input_len).unwrap(), None, "a zero is no index");
        let mut swapped = indices;
        swapped.swap(42, 43);
        assert_eq!(read_offsets(&panels_of(swapped), 6, input_len).unwrap(), None, "not a sum of offsets");
    }
}
