//! The matrix product of a dense layer: a batch of activation rows times constant weights,
//! plus a bias, on x86-64 vector registers.
//!
//! tract 0.23's AVX-512 tiles hold 8 to 12 accumulators and load one weight vector for every
//! 8 to 12 multiply-adds; on a Walker-sized layer (64 x 512 by 512 x 512) its `16x8` tile ran at
//! 110 GFLOP/s where onnxruntime's MLAS ran at 160 (perf and a one-layer benchmark, 2-core
//! AVX-512 Xeon). [`PackedWeights::multiply`] keeps 24 accumulators (12 activation rows by two
//! vectors of outputs) and loads two weight vectors per 24 multiply-adds, broadcasting each
//! activation straight from its row: 160 GFLOP/s on the same layer. The AVX2 variant holds 12
//! (6 rows by two 8-lane vectors, within its 16 registers); a tile one vector wide takes twice
//! the rows. [`PackedWeights::multiply_gathered`] runs the same tiles over rows whose values lie
//! apart (a convolution's patches, read in place through one offset per kernel tap; the usual
//! strides 1, 2 and 4 compiled in) and writes them output by output (a convolution's channels;
//! on AVX-512 the tile is transposed in registers and each channel's run of points stored at
//! once). The tiles ask for their weights ahead of use ([`PREFETCH_AHEAD_FLOATS`]); weights too
//! large for the second-level cache are run a group of panels at a time over chunks of rows
//! ([`PANEL_GROUP_BYTES`]).
//!
//! Every output is `Σ_k a[k]·w[k]` summed in k order with fused multiply-adds, then the bias
//! added, as tract and onnxruntime compute it.

use tract_onnx::tract_hir::internal::TractResult;

/// The environment variable that picks the runner's matrix kernels ([`Isa::for_plans`]).
pub const KERNELS_VARIABLE: &str = "MLAGENTS_MATRIX_KERNELS";

/// The vector instruction set a product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// 512-bit registers, 32 of them.
    Avx512,
    /// 256-bit registers with fused multiply-add (AVX2 and FMA), 16 of them.
    Fma,
}

impl Isa {
    /// The best instruction set of this CPU, if it has one of the two.
    pub fn detect() -> Option<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Some(Isa::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return Some(Isa::Fma);
            }
        }
        None
    }

    /// The instruction set the runner's plans use: [`Self::detect`]'s, unless the environment
    /// variable [`KERNELS_VARIABLE`] says `tract` (tract's kernels throughout, ours off) or
    /// `avx2` (the AVX2 kernels on an AVX-512 CPU), for measuring one against the other.
    pub fn for_plans() -> Option<Isa> {
        static CHOSEN: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| match std::env::var(KERNELS_VARIABLE).as_deref() {
            Ok("tract") => None,
            Ok("avx2") => Isa::detect().map(|_| Isa::Fma),
            _ => Isa::detect(),
        })
    }

    /// Float32 values per vector register.
    fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Fma => 8,
        }
    }

    /// Activation rows per tile of two vectors: two accumulators each, within the register
    /// file (a tile of one vector takes twice as many).
    fn max_rows(self) -> usize {
        match self {
            Isa::Avx512 => 12,
            Isa::Fma => 6,
        }
    }
}

/// Packed weights of at most this many bytes are run whole on each block of rows: they stay
/// in the second-level cache while the blocks pass (2 MiB a core on the Xeon measured; 512 KiB
/// to 1 MiB on AMD's Zen cores).
const WHOLE_WEIGHTS_BYTES: usize = 1 << 20;

/// Larger weights are run a group of panels of at most this many bytes at a time (one panel
/// at least) over a chunk of rows ([`ROW_CHUNK_BYTES`]), so that the group and the chunk's
/// inputs stay in the second-level cache together. Run whole on each block, the 2.6 MB of
/// the visual encoder's `2592 x 256` layer came from the third-level cache once per block of
/// 12 rows; in groups, batch 64 of that encoder took ~8% less time (2-core AVX-512 Xeon).
const PANEL_GROUP_BYTES: usize = 512 << 10;

/// The inputs of the rows a group of panels runs over before the next group (one block of
/// rows at least).
const ROW_CHUNK_BYTES: usize = 1 << 20;

/// How far ahead of the multiply-adds the tiles ask for their weights: 8 KiB, 64 depths of a
/// 16-lane panel two vectors wide. The panels stream through once per block of rows; left to
/// the hardware's prefetchers, Walker-sized layers at batch 12 (2.7 MB of weights, past the
/// second-level cache, one block) waited on the third-level cache: the requests took ~20% off
/// that batch and ~10% off batch 64 (2-core AVX-512 Xeon; 1 to 8 KiB ahead all helped).
const PREFETCH_AHEAD_FLOATS: usize = (8 << 10) / std::mem::size_of::<f32>();

/// Floats per 64-byte cache line.
const FLOATS_PER_LINE: usize = 16;

/// One panel of packed weights: `k` rows of `vectors · lanes` output columns, the columns past
/// the layer's last output zero.
#[derive(Clone, Debug)]
struct Panel {
    /// Where the panel starts in [`PackedWeights::values`].
    offset: usize,
    /// Where its bias starts in [`PackedWeights::bias`] (after the widths of the panels
    /// before it).
    bias_offset: usize,
    /// The panel's first output column.
    first_column: usize,
    /// Its output columns that exist.
    columns: usize,
    /// Its width in vector registers: 2, or 1 for a last panel of at most one vector.
    vectors: usize,
}

/// A dense layer's weights `k x n` and bias, packed for [`Self::multiply`].
#[derive(Clone, Debug)]
pub struct PackedWeights {
    isa: Isa,
    k: usize,
    n: usize,
    panels: Vec<Panel>,
    /// The panels run together over a chunk of rows: all of them, or groups of at most
    /// [`PANEL_GROUP_BYTES`] where the weights pass [`WHOLE_WEIGHTS_BYTES`].
    panel_groups: Vec<std::ops::Range<usize>>,
    values: Vec<f32>,
    /// Per panel column, zero past the last output; `None` where the layer has none.
    bias: Option<Vec<f32>>,
}

impl PackedWeights {
    /// Packs `weight(column, k)` for `n` output columns of `k` inputs each, and the bias
    /// (`n` values) if there is one.
    pub fn new(isa: Isa, k: usize, n: usize, weight: impl Fn(usize, usize) -> f32, bias: Option<&[f32]>) -> PackedWeights {
        let lanes = isa.lanes();
        let mut panels = Vec::new();
        let (mut first_column, mut offset, mut bias_offset) = (0, 0, 0);
        while first_column < n {
            let columns = (n - first_column).min(2 * lanes);
            let vectors = columns.div_ceil(lanes);
            panels.push(Panel { offset, bias_offset, first_column, columns, vectors });
            offset += k * vectors * lanes;
            bias_offset += vectors * lanes;
            first_column += columns;
        }
        let mut values = vec![0f32; offset];
        let mut padded_bias = vec![0f32; bias_offset];
        for panel in &panels {
            let width = panel.vectors * lanes;
            for column in 0..panel.columns {
                for depth in 0..k {
                    values[panel.offset + depth * width + column] = weight(panel.first_column + column, depth);
                }
                if let Some(bias) = bias {
                    padded_bias[panel.bias_offset + column] = bias[panel.first_column + column];
                }
            }
        }
        let bias = bias.map(|_| padded_bias);
        let panel_groups = Self::group_panels(&panels, k, lanes);
        PackedWeights { isa, k, n, panels, panel_groups, values, bias }
    }

    /// All panels together, or consecutive groups of at most [`PANEL_GROUP_BYTES`] of
    /// weights (one panel at least) where they pass [`WHOLE_WEIGHTS_BYTES`].
    fn group_panels(panels: &[Panel], k: usize, lanes: usize) -> Vec<std::ops::Range<usize>> {
        let bytes = |panel: &Panel| k * panel.vectors * lanes * std::mem::size_of::<f32>();
        if panels.iter().map(bytes).sum::<usize>() <= WHOLE_WEIGHTS_BYTES {
            return vec![0..panels.len()];
        }
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let mut group_bytes = 0;
        for (index, panel) in panels.iter().enumerate() {
            match groups.last_mut() {
                Some(group) if group_bytes + bytes(panel) <= PANEL_GROUP_BYTES => group.end = index + 1,
                _ => {
                    groups.push(index..index + 1);
                    group_bytes = 0;
                }
            }
            group_bytes += bytes(panel);
        }
        groups
    }

    /// Inputs per output (the rows of the weights).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Outputs per row (the columns of the weights).
    pub fn n(&self) -> usize {
        self.n
    }

    /// `output[r][j] = Σ_k input[r][k] · w[k][j] + bias[j]` for `rows` rows; `input` holds
    /// `rows · k` values row by row, `output` `rows · n`. Each time a chunk of rows is
    /// written whole, `finished` gets the output and the range of it that is final (in
    /// order: each range starts where the last ended).
    pub fn multiply(&self, input: &[f32], rows: usize, output: &mut [f32], mut finished: impl FnMut(&mut [f32], std::ops::Range<usize>) -> TractResult<()>) -> TractResult<()> {
        assert!(input.len() >= rows * self.k && output.len() >= rows * self.n, "dense layer: {rows} rows need {} inputs and {} outputs", rows * self.k, rows * self.n);
        let blocks = RowBlocks::new(rows, self.max_rows());
        // Whole weights: a chunk is one block. Grouped: as many blocks as fit the budget.
        let chunk_blocks = match self.panel_groups.len() {
            1 => 1,
            _ => (ROW_CHUNK_BYTES / (std::mem::size_of::<f32>() * self.k * self.max_rows()).max(1)).max(1),
        };
        for chunk_start in (0..blocks.count).step_by(chunk_blocks) {
            let chunk = chunk_start..(chunk_start + chunk_blocks).min(blocks.count);
            for group in &self.panel_groups {
                for (first_row, tile_rows) in chunk.clone().map(|block| blocks.block(block)) {
                    let rows = Rows { a: input[first_row * self.k..].as_ptr(), lda: self.k, offsets: None, starts: None, count: tile_rows };
                    // SAFETY: the block's rows of `k` inputs and of `n` outputs are inside the
                    // slices (checked above).
                    unsafe { self.multiply_block(rows, output[first_row * self.n..].as_mut_ptr(), None, group.clone()) };
                }
            }
            let (first_row, _) = blocks.block(chunk.start);
            let (last_row, last_rows) = blocks.block(chunk.end - 1);
            finished(output, first_row * self.n..(last_row + last_rows) * self.n)?;
        }
        Ok(())
    }

    /// The product for rows whose inputs lie apart in memory, as a convolution's patches do,
    /// written output by output as a convolution's channels are:
    /// `output[j · ldc + r] = Σ_d a[r · lda + offsets[d]] · w[d][j] + bias[j]` for `rows` rows
    /// (at most [`Self::max_rows`]).
    ///
    /// # Safety
    /// `offsets` has `k` values, every `a + r · lda + offsets[d]` is a readable float and
    /// every `output + j · ldc + r` a writable one.
    pub unsafe fn multiply_gathered(&self, a: *const f32, lda: usize, offsets: &[usize], rows: usize, output: *mut f32, ldc: usize) {
        assert!(offsets.len() == self.k && rows <= self.max_rows(), "gathered product of {rows} rows over {} offsets", offsets.len());
        match lda {
            // Strides with kernels of their own: every row's address is one base plus a constant.
            1 | 2 | 4 => self.multiply_block(Rows { a, lda, offsets: Some(offsets.as_ptr()), starts: None, count: rows }, output, Some(ldc), 0..self.panels.len()),
            _ => {
                let starts: [usize; MAX_TILE_ROWS] = std::array::from_fn(|r| r * lda);
                self.multiply_gathered_rows(a, &starts[..rows], offsets, output, ldc)
            }
        }
    }

    /// [`Self::multiply_gathered`] for rows that start anywhere: row `r` at `a + starts[r]`
    /// (a convolution's tile of points that runs on into the next output row).
    ///
    /// # Safety
    /// `offsets` has `k` values, every `a + starts[r] + offsets[d]` is a readable float and
    /// every `output + j · ldc + r` a writable one.
    pub unsafe fn multiply_gathered_rows(&self, a: *const f32, starts: &[usize], offsets: &[usize], output: *mut f32, ldc: usize) {
        let rows = starts.len();
        assert!(offsets.len() == self.k && rows <= self.max_rows(), "gathered product of {rows} rows over {} offsets", offsets.len());
        self.multiply_block(Rows { a, lda: 0, offsets: Some(offsets.as_ptr()), starts: Some(starts.as_ptr()), count: rows }, output, Some(ldc), 0..self.panels.len());
    }

    /// Whether [`Self::multiply_gathered_rows`] runs as fast as [`Self::multiply_gathered`]
    /// at a built-in stride: with the AVX2 kernels the tile's six row starts stay in
    /// registers, and the 84 x 84 visual encoder tiled across its output rows ran 8-14% faster
    /// (full tiles; lowest 10th percentiles at batch 12 and 64);
    /// AVX-512's twelve do not fit beside the rest, and the same tiling made the 84 x 84
    /// visual encoder 13-17% slower (2-core AVX-512 Xeon).
    pub fn gathers_by_start_at_full_speed(&self) -> bool {
        self.isa == Isa::Fma
    }

    /// The most rows one tile takes: twice as many where every panel is one vector wide.
    pub fn max_rows(&self) -> usize {
        self.isa.max_rows() * if self.n <= self.isa.lanes() { 2 } else { 1 }
    }

    /// `rows` split into blocks of at most [`Self::max_rows`], as even as can be (16 rows are
    /// two tiles of 8, not 12 and 4): (first row, rows); none for no rows.
    pub fn row_blocks(&self, rows: usize) -> impl Iterator<Item = (usize, usize)> {
        let blocks = RowBlocks::new(rows, self.max_rows());
        (0..blocks.count).map(move |block| blocks.block(block))
    }

    /// One block of rows by the panels `panels`, into `output`: rows of `n` outputs, or with
    /// `column_stride`, output `j` of row `r` at `j · column_stride + r`.
    ///
    /// # Safety
    /// Every input the rows read is readable and every output they write writable;
    /// `rows.count <= max_rows`.
    ///
    /// Inlined into its callers: called, it got its `rows` through the caller's stack and
    /// copied them with 16-byte loads over the caller's 8-byte stores, which the CPU cannot
    /// forward, so each call waited for every earlier store to reach the cache, a convolution
    /// tile's scattered output stores among them (~6% of the visual encoder at batch 64).
    #[inline(always)]
    unsafe fn multiply_block(&self, rows: Rows, output: *mut f32, column_stride: Option<usize>, panels: std::ops::Range<usize>) {
        let lanes = self.isa.lanes();
        // (A partial panel's tile: at most 12 rows of two 16-lane vectors or 24 of one; written
        // before it is read.)
        let mut scratch = std::mem::MaybeUninit::<[f32; 12 * 32]>::uninit();
        let scratch = scratch.as_mut_ptr() as *mut f32;
        for panel in &self.panels[panels] {
            let width = panel.vectors * lanes;
            let bias = self.bias.as_ref().map(|b| b[panel.bias_offset..panel.bias_offset + width].as_ptr());
            let w = self.values[panel.offset..panel.offset + self.k * width].as_ptr();
            let whole = panel.columns == width;
            // Where the tile goes: the output's columns (by row or by column), or the scratch
            // tile for a last, partial panel of rows.
            let store = match column_stride {
                Some(stride) => Store::Columns { c: output.add(panel.first_column * stride), stride, columns: panel.columns },
                None if whole => Store::Rows { c: output.add(panel.first_column), ldc: self.n },
                None => Store::Rows { c: scratch, ldc: width },
            };
            // `w` holds the panel's `k · width` values, `bias` its `width` values; `detect`
            // found the instruction set on this CPU before any `PackedWeights` existed.
            run_tile(self.isa, panel.vectors, &Tile { rows, w, k: self.k, bias, store });
            if column_stride.is_none() && !whole {
                for row in 0..rows.count {
                    std::ptr::copy_nonoverlapping(scratch.add(row * width), output.add(row * self.n + panel.first_column), panel.columns);
                }
            }
        }
    }
}

/// `rows` split into `count` blocks of at most a tile's rows, as even as can be: the first
/// `larger` blocks have `size + 1` rows, the others `size`.
#[derive(Clone, Copy)]
struct RowBlocks {
    count: usize,
    size: usize,
    larger: usize,
}

impl RowBlocks {
    fn new(rows: usize, max_rows: usize) -> Self {
        let count = rows.div_ceil(max_rows);
        RowBlocks { count, size: rows / count.max(1), larger: rows % count.max(1) }
    }

    /// Block `index`: (first row, rows).
    fn block(&self, index: usize) -> (usize, usize) {
        (index * self.size + index.min(self.larger), self.size + usize::from(index < self.larger))
    }
}

/// The most rows of any tile (AVX-512's one-vector tiles).
pub const MAX_TILE_ROWS: usize = 24;

/// The activation rows of one tile: row `r`'s depth `d` at `a + r · lda + d`, or
/// `+ offsets[d]`; with `starts` (and `offsets`), at `a + starts[r] + offsets[d]`.
#[derive(Clone, Copy)]
struct Rows {
    a: *const f32,
    lda: usize,
    offsets: Option<*const usize>,
    starts: Option<*const usize>,
    count: usize,
}

/// Where a tile's outputs go: row `r`'s output `j` at `c + r · ldc + j` (every column of the
/// panel), or at `c + j · stride + r` (its first `columns` only).
#[derive(Clone, Copy)]
enum Store {
    Rows { c: *mut f32, ldc: usize },
    Columns { c: *mut f32, stride: usize, columns: usize },
}

/// What one tile kernel reads and writes: its rows, a weight panel `w` of `k` rows, the
/// panel's bias, and where the outputs go.
#[derive(Clone, Copy)]
struct Tile {
    rows: Rows,
    w: *const f32,
    k: usize,
    bias: Option<*const f32>,
    store: Store,
}

/// One tile of `tile.rows.count` rows (at most the instruction set's `max_rows`) by `vectors`
/// registers of outputs.
///
/// # Safety
/// As [`PackedWeights::multiply_block`] states; the CPU has `isa`.
unsafe fn run_tile(isa: Isa, vectors: usize, tile: &Tile) {
    #[cfg(target_arch = "x86_64")]
    {
        let rows = tile.rows.count;
        // Gathered rows (a convolution's) at the usual strides get kernels with the stride
        // built in: every row's address is then one base plus a constant. Stride 0: the rows
        // start where `starts` says.
        let stride = match tile.rows.offsets.map(|_| tile.rows.lda) {
            Some(stride @ (1 | 2 | 4)) => stride,
            _ => 0,
        };
        debug_assert!(tile.rows.offsets.is_none() || (stride == 0) == tile.rows.starts.is_some());
        macro_rules! dispatch {
            ($kernel:ident, [$($rows:literal)*], [$($one_vector_rows:literal)*]) => {
                match (rows, vectors, tile.rows.offsets.is_some(), stride) {
                    $(($rows, 2, false, _) => $kernel::<$rows, 2, false, 0>(tile),
                      ($rows, 2, true, 0) => $kernel::<$rows, 2, true, 0>(tile),
                      ($rows, 2, true, 1) => $kernel::<$rows, 2, true, 1>(tile),
                      ($rows, 2, true, 2) => $kernel::<$rows, 2, true, 2>(tile),
                      ($rows, 2, true, 4) => $kernel::<$rows, 2, true, 4>(tile),)*
                    $(($one_vector_rows, 1, false, _) => $kernel::<$one_vector_rows, 1, false, 0>(tile),
                      ($one_vector_rows, 1, true, 0) => $kernel::<$one_vector_rows, 1, true, 0>(tile),
                      ($one_vector_rows, 1, true, 1) => $kernel::<$one_vector_rows, 1, true, 1>(tile),
                      ($one_vector_rows, 1, true, 2) => $kernel::<$one_vector_rows, 1, true, 2>(tile),
                      ($one_vector_rows, 1, true, 4) => $kernel::<$one_vector_rows, 1, true, 4>(tile),)*
                    _ => unreachable!("a tile of {rows} rows by {vectors} vectors"),
                }
            };
        }
        match isa {
            Isa::Avx512 => dispatch!(tile_avx512, [1 2 3 4 5 6 7 8 9 10 11 12], [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24]),
            Isa::Fma => dispatch!(tile_fma, [1 2 3 4 5 6], [1 2 3 4 5 6 7 8 9 10 11 12]),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("no vector kernels for {isa:?} on this architecture ({vectors} vectors, {:?})", tile.w);
}

/// Writes one tile kernel: `R` rows by `V` vectors of accumulators, one k step per iteration
/// (every weight vector loaded once, every activation broadcast once), the bias added at the
/// end; `TABLE`: the depths' offsets come from the rows' table; `STRIDE`, when not 0, is the
/// rows' stride (`lda`) made a constant. `$store_columns` writes the first lanes of a vector at
/// a stride.
#[cfg(target_arch = "x86_64")]
macro_rules! tile_kernel {
    ($name:ident, $features:literal, $lanes:literal, $zero:ident, $load:ident, $broadcast:ident, $fmadd:ident, $add:ident, $store:ident, $store_columns:ident) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize, const V: usize, const TABLE: bool, const STRIDE: usize>(tile: &Tile) {
            use std::arch::x86_64::*;
            let Tile { rows: Rows { a, lda, offsets, starts, .. }, w, k, bias, store } = *tile;
            let lda = if STRIDE > 0 { STRIDE } else { lda };
            let offsets = offsets.unwrap_or(std::ptr::null());
            // Gathered rows without a built-in stride start where their table says.
            let by_start = TABLE && STRIDE == 0;
            let row_starts: [*const f32; R] = std::array::from_fn(|row| if by_start { a.add(*starts.unwrap_or(std::ptr::null()).add(row)) } else { a });
            let mut acc = [[$zero(); V]; R];
            for depth in 0..k {
                // The weights `PREFETCH_AHEAD_FLOATS` on, one request per cache line
                // (`wrapping_add`: past the panels' end the request is for nothing).
                for line in 0..(V * $lanes).div_ceil(FLOATS_PER_LINE) {
                    let ahead = w.wrapping_add(depth * V * $lanes + line * FLOATS_PER_LINE + PREFETCH_AHEAD_FLOATS);
                    _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                }
                let mut weights = [$zero(); V];
                for (v, weight) in weights.iter_mut().enumerate() {
                    *weight = $load(w.add((depth * V + v) * $lanes));
                }
                let at = if TABLE { *offsets.add(depth) } else { depth };
                for (row, acc) in acc.iter_mut().enumerate() {
                    let value = if by_start { row_starts[row].add(at) } else { a.add(row * lda + at) };
                    let activation = $broadcast(*value);
                    for (acc, weight) in acc.iter_mut().zip(&weights) {
                        *acc = $fmadd(activation, *weight, *acc);
                    }
                }
            }
            if let Some(bias) = bias {
                for acc in acc.iter_mut() {
                    for (v, acc) in acc.iter_mut().enumerate() {
                        *acc = $add(*acc, $load(bias.add(v * $lanes)));
                    }
                }
            }
            match store {
                Store::Rows { c, ldc } => {
                    for (row, acc) in acc.iter().enumerate() {
                        for (v, acc) in acc.iter().enumerate() {
                            $store(c.add(row * ldc + v * $lanes), *acc);
                        }
                    }
                }
                Store::Columns { c, stride, columns } => {
                    for v in 0..V {
                        let first = v * $lanes;
                        let vectors: [_; R] = std::array::from_fn(|row| acc[row][v]);
                        $store_columns(&vectors, c.add(first * stride), stride, columns.saturating_sub(first).min($lanes));
                    }
                }
            }
        }
    };
}

/// Lane `l < count` of each row's vector `rows[r]` to `c + l · stride + r`: the rows
/// transposed in registers sixteen at a time, then each output's run of rows stored at once
/// (one masked store per output, where a scatter per row wrote sixteen places: on the 84 x 84
/// visual encoder the scatters were about a tenth of the convolutions' time).
///
/// Inlined into the tile kernels (compiled for AVX-512 F), whose accumulators it takes in
/// registers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_columns_avx512<const R: usize>(rows: &[std::arch::x86_64::__m512; R], c: *mut f32, stride: usize, count: usize) {
    use std::arch::x86_64::*;
    for first in (0..R).step_by(16) {
        let group = (R - first).min(16);
        let mut block = [_mm512_setzero_ps(); 16];
        block[..group].copy_from_slice(&rows[first..first + group]);
        let mask: __mmask16 = if group == 16 { 0xffff } else { (1 << group) - 1 };
        for (lane, column) in transpose_16x16(&block).iter().enumerate().take(count) {
            _mm512_mask_storeu_ps(c.add(lane * stride + first), mask, *column);
        }
    }
}

/// The transpose of sixteen vectors of sixteen lanes: lane `r` of result `l` is lane `l` of
/// `rows[r]`. Pairs of rows interleaved, then pairs of pairs, then 128-bit blocks twice.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_16x16(rows: &[std::arch::x86_64::__m512; 16]) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    // pairs[2i], pairs[2i + 1]: in each 128-bit block b, rows 2i and 2i + 1 at lanes 4b, 4b + 1
    // and at 4b + 2, 4b + 3, interleaved.
    let pairs: [__m512; 16] = std::array::from_fn(|i| {
        let (even, odd) = (rows[i & !1], rows[i | 1]);
        if i % 2 == 0 { _mm512_unpacklo_ps(even, odd) } else { _mm512_unpackhi_ps(even, odd) }
    });
    // quads[4q + m]: in each block b, lane 4b + m of rows 4q to 4q + 3.
    let quads: [__m512; 16] = std::array::from_fn(|i| {
        let (q, m) = (i / 4, i % 4);
        let (low, high) = (pairs[4 * q + m / 2], pairs[4 * q + 2 + m / 2]);
        if m % 2 == 0 { _mm512_shuffle_ps::<0x44>(low, high) } else { _mm512_shuffle_ps::<0xEE>(low, high) }
    });
    let mut columns = [_mm512_setzero_ps(); 16];
    for m in 0..4 {
        // Blocks [0, 2] and [1, 3] of rows 0-3 and 4-7, then of 8-11 and 12-15, ...
        let (a, b, c, d) = (quads[m], quads[4 + m], quads[8 + m], quads[12 + m]);
        let (ab_even, ab_odd) = (_mm512_shuffle_f32x4::<0x88>(a, b), _mm512_shuffle_f32x4::<0xDD>(a, b));
        let (cd_even, cd_odd) = (_mm512_shuffle_f32x4::<0x88>(c, d), _mm512_shuffle_f32x4::<0xDD>(c, d));
        // ... so that block b of every quad lands in the column of lane 4b + m.
        columns[m] = _mm512_shuffle_f32x4::<0x88>(ab_even, cd_even);
        columns[4 + m] = _mm512_shuffle_f32x4::<0x88>(ab_odd, cd_odd);
        columns[8 + m] = _mm512_shuffle_f32x4::<0xDD>(ab_even, cd_even);
        columns[12 + m] = _mm512_shuffle_f32x4::<0xDD>(ab_odd, cd_odd);
    }
    columns
}

/// Lane `l < count` of each row's vector `rows[r]` to `c + l · stride + r`: the rows
/// transposed in registers eight at a time, then each output's run of rows stored in at most
/// three pieces (4, 2 and 1 values; a row at a time through memory, the stores were about a
/// twelfth of the 84 x 84 visual encoder's convolutions with the AVX2 kernels).
///
/// Inlined into the tile kernels (compiled for AVX2 and FMA), whose accumulators it takes in
/// registers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_columns_fma<const R: usize>(rows: &[std::arch::x86_64::__m256; R], c: *mut f32, stride: usize, count: usize) {
    use std::arch::x86_64::*;
    for first in (0..R).step_by(8) {
        let group = (R - first).min(8);
        let mut block = [_mm256_setzero_ps(); 8];
        block[..group].copy_from_slice(&rows[first..first + group]);
        for (lane, column) in transpose_8x8(&block).iter().enumerate().take(count) {
            store_first_lanes(c.add(lane * stride + first), *column, group);
        }
    }
}

/// The first `count` (at most 8) lanes of `values` to `c`, and nothing past them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_first_lanes(c: *mut f32, values: std::arch::x86_64::__m256, count: usize) {
    use std::arch::x86_64::*;
    if count == 8 {
        _mm256_storeu_ps(c, values);
        return;
    }
    let (mut c, mut rest, mut part) = (c, count, _mm256_castps256_ps128(values));
    if rest >= 4 {
        _mm_storeu_ps(c, part);
        (c, rest, part) = (c.add(4), rest - 4, _mm256_extractf128_ps::<1>(values));
    }
    if rest >= 2 {
        _mm_storel_epi64(c as *mut __m128i, _mm_castps_si128(part));
        (c, rest, part) = (c.add(2), rest - 2, _mm_movehl_ps(part, part));
    }
    if rest == 1 {
        _mm_store_ss(c, part);
    }
}

/// The transpose of eight vectors of eight lanes: lane `r` of result `l` is lane `l` of
/// `rows[r]`. Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_8x8(rows: &[std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    // pairs[2i], pairs[2i + 1]: in each half h, rows 2i and 2i + 1 at lanes 4h, 4h + 1 and at
    // 4h + 2, 4h + 3, interleaved.
    let pairs: [__m256; 8] = std::array::from_fn(|i| {
        let (even, odd) = (rows[i & !1], rows[i | 1]);
        if i % 2 == 0 { _mm256_unpacklo_ps(even, odd) } else { _mm256_unpackhi_ps(even, odd) }
    });
    // quads[4q + m]: in each half h, lane 4h + m of rows 4q to 4q + 3.
    let quads: [__m256; 8] = std::array::from_fn(|i| {
        let (q, m) = (i / 4, i % 4);
        let (low, high) = (pairs[4 * q + m / 2], pairs[4 * q + 2 + m / 2]);
        if m % 2 == 0 { _mm256_shuffle_ps::<0x44>(low, high) } else { _mm256_shuffle_ps::<0xEE>(low, high) }
    });
    // Lane m of every row from the low halves, lane 4 + m from the high ones.
    std::array::from_fn(|l| if l < 4 { _mm256_permute2f128_ps::<0x20>(quads[l], quads[4 + l]) } else { _mm256_permute2f128_ps::<0x31>(quads[l - 4], quads[l]) })
}

#[cfg(target_arch = "x86_64")]
tile_kernel!(tile_avx512, "avx512f", 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, store_columns_avx512);
#[cfg(target_arch = "x86_64")]
tile_kernel!(tile_fma, "avx2,fma", 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, store_columns_fma);

/// `count` test values between -0.5 and 0.5, a different sequence per `seed` (the kernel's,
/// the dense layers' and the convolutions' tests).
#[cfg(test)]
pub(crate) fn test_values(count: usize, seed: usize) -> Vec<f32> {
    (0..count).map(|i| ((i * 7919 + seed) % 1000) as f32 / 1000.0 - 0.5).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows x k` activations and `n x k` weights (output-major, as ONNX's Gemm with transB
    /// holds them) of values between -0.5 and 0.5, and `n` biases.
    fn operands(rows: usize, k: usize, n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        (test_values(rows * k, 1), test_values(n * k, 2), test_values(n, 3))
    }

    /// Every tile shape (rows 0-25 against 6, 12 and 24 per tile, whole, one-vector and partial
    /// panels, k of 0, 1 and 37) against a float64 product, within float32 rounding of the sum.
    #[test]
    fn products_match_a_float64_reference_for_every_tile_shape() {
        let Some(native) = Isa::detect() else { return };
        let isas: Vec<Isa> = if native == Isa::Avx512 { vec![Isa::Avx512, Isa::Fma] } else { vec![native] };
        for isa in isas {
            for rows in 0..=25 {
                for n in [1, 7, 8, 16, 17, 32, 39, 64] {
                    for k in [0, 1, 37] {
                        for with_bias in [false, true] {
                            let (a, w, b) = operands(rows, k, n);
                            let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], with_bias.then_some(&b[..]));
                            let mut out = vec![f32::NAN; rows * n];
                            packed.multiply(&a, rows, &mut out, |_, _| Ok(())).unwrap();
                            for r in 0..rows {
                                for j in 0..n {
                                    let exact: f64 = (0..k).map(|p| a[r * k + p] as f64 * w[j * k + p] as f64).sum::<f64>() + if with_bias { b[j] as f64 } else { 0.0 };
                                    let got = out[r * n + j] as f64;
                                    assert!((got - exact).abs() <= 1e-5, "{isa:?} rows {rows} n {n} k {k} bias {with_bias}: [{r}][{j}] {got} vs {exact}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Gathered rows (each depth at its own offset, rows `lda` apart: the strides with kernels
    /// of their own and another) written output by output, for every tile height and panel
    /// shape, against a float64 product.
    #[test]
    fn gathered_products_are_written_by_column() {
        let Some(native) = Isa::detect() else { return };
        let isas: Vec<Isa> = if native == Isa::Avx512 { vec![Isa::Avx512, Isa::Fma] } else { vec![native] };
        let (k, stride) = (23, 50);
        let offsets: Vec<usize> = (0..k).map(|d| d * 5 + d % 3).collect();
        for isa in isas {
            for lda in [1, 2, 3, 4] {
                for n in [1, 9, 16, 20, 33] {
                    let (input, w, b) = operands(40, 5 * k, n);
                    let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], Some(&b));
                    for rows in 1..=packed.max_rows() {
                        let mut out = vec![f32::NAN; stride * n];
                        // SAFETY: reads reach (rows - 1) · 4 + 22 · 5 + 1 < 4600 values, writes
                        // (n - 1) · 50 + rows - 1 < 50 · n.
                        unsafe { packed.multiply_gathered(input.as_ptr(), lda, &offsets, rows, out.as_mut_ptr(), stride) };
                        for j in 0..n {
                            for r in 0..stride {
                                let got = out[j * stride + r];
                                if r >= rows {
                                    assert!(got.is_nan(), "{isa:?} lda {lda} n {n} rows {rows}: wrote [{j}][{r}]");
                                    continue;
                                }
                                let exact: f64 = (0..k).map(|d| input[r * lda + offsets[d]] as f64 * w[j * k + d] as f64).sum::<f64>() + b[j] as f64;
                                assert!((got as f64 - exact).abs() <= 1e-5, "{isa:?} lda {lda} n {n} rows {rows}: [{j}][{r}] {got} vs {exact}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Gathered rows that start anywhere (a tile of points running on into the next output
    /// row: a jump after the third row), for every tile height and panel shape, against a
    /// float64 product.
    #[test]
    fn gathered_rows_read_from_their_own_starts() {
        let Some(native) = Isa::detect() else { return };
        let isas: Vec<Isa> = if native == Isa::Avx512 { vec![Isa::Avx512, Isa::Fma] } else { vec![native] };
        let (k, stride) = (23, 50);
        let offsets: Vec<usize> = (0..k).map(|d| d * 5 + d % 3).collect();
        let all_starts: Vec<usize> = (0..MAX_TILE_ROWS).map(|r| if r < 3 { 2 * r } else { 40 + 2 * r }).collect();
        for isa in isas {
            for n in [1, 9, 16, 20, 33] {
                let (input, w, b) = operands(200, 5 * k, n);
                let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], Some(&b));
                for rows in 1..=packed.max_rows() {
                    let starts = &all_starts[..rows];
                    let mut out = vec![f32::NAN; stride * n];
                    // SAFETY: reads reach 40 + 2 · 23 + 22 · 5 + 1 < 23000 values, writes
                    // (n - 1) · 50 + rows - 1 < 50 · n.
                    unsafe { packed.multiply_gathered_rows(input.as_ptr(), starts, &offsets, out.as_mut_ptr(), stride) };
                    for j in 0..n {
                        for r in 0..stride {
                            let got = out[j * stride + r];
                            if r >= rows {
                                assert!(got.is_nan(), "{isa:?} n {n} rows {rows}: wrote [{j}][{r}]");
                                continue;
                            }
                            let exact: f64 = (0..k).map(|d| input[starts[r] + offsets[d]] as f64 * w[j * k + d] as f64).sum::<f64>() + b[j] as f64;
                            assert!((got as f64 - exact).abs() <= 1e-5, "{isa:?} n {n} rows {rows}: [{j}][{r}] {got} vs {exact}");
                        }
                    }
                }
            }
        }
    }

    /// Weights past [`WHOLE_WEIGHTS_BYTES`] run in groups of panels over chunks of rows: every
    /// output is still the k-ordered fused sum plus the bias, and each chunk is reported
    /// finished, in order, once all its outputs are written.
    #[test]
    fn large_weights_run_in_groups_of_panels_over_chunks_of_rows() {
        let Some(native) = Isa::detect() else { return };
        let isas: Vec<Isa> = if native == Isa::Avx512 { vec![Isa::Avx512, Isa::Fma] } else { vec![native] };
        // 6000 x 50 floats (1.5 MB: panels of 768 KB or 384 KB, the last partial); 61 rows
        // are two chunks (of three blocks of 12, or seven of 6).
        let (k, n) = (6000, 50);
        for isa in isas {
            let (a, w, b) = operands(61, k, n);
            let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], Some(&b));
            assert!(packed.panel_groups.len() > 1, "{isa:?}: {:?}", packed.panel_groups);
            for rows in [1, 13, 61] {
                let mut out = vec![f32::NAN; rows * n];
                let (mut reported, mut chunks) = (0, 0);
                packed
                    .multiply(&a, rows, &mut out, |out, finished| {
                        assert_eq!(finished.start, reported, "{isa:?} rows {rows}: chunks out of order");
                        assert!(out[finished.clone()].iter().all(|x| !x.is_nan()), "{isa:?} rows {rows}: {finished:?} reported before it was written");
                        reported = finished.end;
                        chunks += 1;
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(reported, rows * n, "{isa:?} rows {rows}");
                assert_eq!(chunks, if rows == 61 { 2 } else { 1 }, "{isa:?} rows {rows}");
                for r in 0..rows {
                    for j in 0..n {
                        let sum = (0..k).fold(0f32, |acc, p| a[r * k + p].mul_add(w[j * k + p], acc));
                        assert_eq!(out[r * n + j].to_bits(), (sum + b[j]).to_bits(), "{isa:?} rows {rows}: [{r}][{j}]");
                    }
                }
            }
        }
    }

    /// Sums in k order with fused multiply-adds, then the bias: the float32 result of that
    /// order exactly (what tract's kernels compute too).
    #[test]
    fn each_output_is_the_k_ordered_fused_sum_plus_the_bias() {
        let Some(isa) = Isa::detect() else { return };
        let (rows, k, n) = (12, 300, 40);
        let (a, w, b) = operands(rows, k, n);
        let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], Some(&b));
        let mut out = vec![0f32; rows * n];
        packed.multiply(&a, rows, &mut out, |_, _| Ok(())).unwrap();
        for r in 0..rows {
            for j in 0..n {
                let sum = (0..k).fold(0f32, |acc, p| a[r * k + p].mul_add(w[j * k + p], acc));
                assert_eq!(out[r * n + j].to_bits(), (sum + b[j]).to_bits(), "[{r}][{j}]");
            }
        }
    }
}
