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
//! strides 1, 2 and 4 compiled in) and writes them output by output (a convolution's channels).
//!
//! Every output is `Σ_k a[k]·w[k]` summed in k order with fused multiply-adds, then the bias
//! added, as tract and onnxruntime compute it.

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

/// One panel of packed weights: `k` rows of `vectors · lanes` output columns, the columns past
/// the layer's last output zero.
#[derive(Clone, Debug)]
struct Panel {
    /// Where the panel starts in [`PackedWeights::values`] (its bias follows the widths of
    /// the panels before it in [`PackedWeights::bias`]).
    offset: usize,
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
        let mut first_column = 0;
        let mut offset = 0;
        while first_column < n {
            let columns = (n - first_column).min(2 * lanes);
            let vectors = columns.div_ceil(lanes);
            panels.push(Panel { offset, first_column, columns, vectors });
            offset += k * vectors * lanes;
            first_column += columns;
        }
        let mut values = vec![0f32; offset];
        let mut padded_bias = vec![0f32; panels.iter().map(|p| p.vectors * lanes).sum()];
        let mut bias_offset = 0;
        for panel in &panels {
            let width = panel.vectors * lanes;
            for column in 0..panel.columns {
                for depth in 0..k {
                    values[panel.offset + depth * width + column] = weight(panel.first_column + column, depth);
                }
                if let Some(bias) = bias {
                    padded_bias[bias_offset + column] = bias[panel.first_column + column];
                }
            }
            bias_offset += width;
        }
        let bias = bias.map(|_| padded_bias);
        PackedWeights { isa, k, n, panels, values, bias }
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
    /// `rows · k` values row by row, `output` `rows · n`.
    pub fn multiply(&self, input: &[f32], rows: usize, output: &mut [f32]) {
        assert!(input.len() >= rows * self.k && output.len() >= rows * self.n, "dense layer: {rows} rows need {} inputs and {} outputs", rows * self.k, rows * self.n);
        for (first_row, tile_rows) in self.row_blocks(rows) {
            let rows = Rows { a: input[first_row * self.k..].as_ptr(), lda: self.k, offsets: None, count: tile_rows };
            // SAFETY: the block's rows of `k` inputs and of `n` outputs are inside the slices
            // (checked above).
            unsafe { self.multiply_block(rows, output[first_row * self.n..].as_mut_ptr(), None) };
        }
    }

    /// The product for rows whose inputs lie apart in memory, as a convolution's patches do,
    /// written output by output as a convolution's channels are:
    /// `output[j · ldc + r] = Σ_d a[r · lda + offsets[d]] · w[d][j] + bias[j]` for `rows` rows
    /// (at most [`Self::max_rows`]).
    ///
    /// # Safety
    /// `offsets` has `k` values, every `a + r · lda + offsets[d]` is a readable float and
    /// every `output + j · ldc + r` a writable one; `ldc · n` fits an `i32`.
    pub unsafe fn multiply_gathered(&self, a: *const f32, lda: usize, offsets: &[usize], rows: usize, output: *mut f32, ldc: usize) {
        assert!(offsets.len() == self.k && rows <= self.max_rows(), "gathered product of {rows} rows over {} offsets", offsets.len());
        self.multiply_block(Rows { a, lda, offsets: Some(offsets.as_ptr()), count: rows }, output, Some(ldc));
    }

    /// The most rows one tile takes: twice as many where every panel is one vector wide.
    pub fn max_rows(&self) -> usize {
        self.isa.max_rows() * if self.n <= self.isa.lanes() { 2 } else { 1 }
    }

    /// `rows` split into blocks of at most [`Self::max_rows`], as even as can be (16 rows are
    /// two tiles of 8, not 12 and 4): (first row, rows); none for no rows.
    pub fn row_blocks(&self, rows: usize) -> impl Iterator<Item = (usize, usize)> {
        let blocks = rows.div_ceil(self.max_rows());
        let (size, larger) = (rows / blocks.max(1), rows % blocks.max(1));
        (0..blocks).scan(0, move |first, block| {
            let length = size + usize::from(block < larger);
            let start = *first;
            *first += length;
            Some((start, length))
        })
    }

    /// One block of rows by every panel, into `output`: rows of `n` outputs, or with
    /// `column_stride`, output `j` of row `r` at `j · column_stride + r`.
    ///
    /// # Safety
    /// Every input the rows read is readable and every output they write writable;
    /// `rows.count <= max_rows`.
    unsafe fn multiply_block(&self, rows: Rows, output: *mut f32, column_stride: Option<usize>) {
        let lanes = self.isa.lanes();
        // (A partial panel's tile: at most 12 rows of two 16-lane vectors or 24 of one; written
        // before it is read.)
        let mut scratch = std::mem::MaybeUninit::<[f32; 12 * 32]>::uninit();
        let scratch = scratch.as_mut_ptr() as *mut f32;
        let mut bias_offset = 0;
        for panel in &self.panels {
            let width = panel.vectors * lanes;
            let bias = self.bias.as_ref().map(|b| b[bias_offset..bias_offset + width].as_ptr());
            bias_offset += width;
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

/// The activation rows of one tile: row `r`'s depth `d` at `a + r · lda + d`, or
/// `+ offsets[d]`.
#[derive(Clone, Copy)]
struct Rows {
    a: *const f32,
    lda: usize,
    offsets: Option<*const usize>,
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
        // built in: every row's address is then one base plus a constant.
        let stride = match tile.rows.offsets.map(|_| tile.rows.lda) {
            Some(stride @ (1 | 2 | 4)) => stride,
            _ => 0,
        };
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
            let Tile { rows: Rows { a, lda, offsets, .. }, w, k, bias, store } = *tile;
            let lda = if STRIDE > 0 { STRIDE } else { lda };
            let offsets = offsets.unwrap_or(std::ptr::null());
            let mut acc = [[$zero(); V]; R];
            for depth in 0..k {
                let mut weights = [$zero(); V];
                for (v, weight) in weights.iter_mut().enumerate() {
                    *weight = $load(w.add((depth * V + v) * $lanes));
                }
                let at = if TABLE { *offsets.add(depth) } else { depth };
                for (row, acc) in acc.iter_mut().enumerate() {
                    let activation = $broadcast(*a.add(row * lda + at));
                    for (acc, weight) in acc.iter_mut().zip(&weights) {
                        *acc = $fmadd(activation, *weight, *acc);
                    }
                }
            }
            for (row, acc) in acc.iter().enumerate() {
                for (v, acc) in acc.iter().enumerate() {
                    let value = match bias {
                        Some(bias) => $add(*acc, $load(bias.add(v * $lanes))),
                        None => *acc,
                    };
                    match store {
                        Store::Rows { c, ldc } => $store(c.add(row * ldc + v * $lanes), value),
                        Store::Columns { c, stride, columns } => {
                            let first = v * $lanes;
                            $store_columns(c.add(first * stride + row), stride, columns.saturating_sub(first).min($lanes), value);
                        }
                    }
                }
            }
        }
    };
}

/// Lane `l < count` of `value` to `c + l · stride` (one scatter).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store_columns_avx512(c: *mut f32, stride: usize, count: usize, value: std::arch::x86_64::__m512) {
    use std::arch::x86_64::*;
    let index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(stride as i32));
    let mask = if count >= 16 { 0xffff } else { (1u16 << count) - 1 };
    _mm512_mask_i32scatter_ps::<4>(c, mask, index, value);
}

/// Lane `l < count` of `value` to `c + l · stride`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn store_columns_fma(c: *mut f32, stride: usize, count: usize, value: std::arch::x86_64::__m256) {
    let mut lanes = [0f32; 8];
    std::arch::x86_64::_mm256_storeu_ps(lanes.as_mut_ptr(), value);
    for (lane, value) in lanes.iter().take(count).enumerate() {
        *c.add(lane * stride) = *value;
    }
}

#[cfg(target_arch = "x86_64")]
tile_kernel!(tile_avx512, "avx512f", 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, store_columns_avx512);
#[cfg(target_arch = "x86_64")]
tile_kernel!(tile_fma, "avx2,fma", 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, store_columns_fma);

/// `count` test values between -0.5 and 0.5, a different sequence per `seed` (the kernel's,
/// the dense layers' and the convolutions' tests).
#[cfg(test)]
pub(super) fn test_values(count: usize, seed: usize) -> Vec<f32> {
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
                            packed.multiply(&a, rows, &mut out);
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

    /// Sums in k order with fused multiply-adds, then the bias: the float32 result of that
    /// order exactly (what tract's kernels compute too).
    #[test]
    fn each_output_is_the_k_ordered_fused_sum_plus_the_bias() {
        let Some(isa) = Isa::detect() else { return };
        let (rows, k, n) = (12, 300, 40);
        let (a, w, b) = operands(rows, k, n);
        let packed = PackedWeights::new(isa, k, n, |j, p| w[j * k + p], Some(&b));
        let mut out = vec![0f32; rows * n];
        packed.multiply(&a, rows, &mut out);
        for r in 0..rows {
            for j in 0..n {
                let sum = (0..k).fold(0f32, |acc, p| a[r * k + p].mul_add(w[j * k + p], acc));
                assert_eq!(out[r * n + j].to_bits(), (sum + b[j]).to_bits(), "[{r}][{j}]");
            }
        }
    }
}
