//! Compute-bound kernels, written as a CUDA C++ programmer writes them: tiled and
//! register-blocked SGEMM, all-pairs n-body, Black-Scholes. `bench/compute/reference.cu` has the same
//! algorithms in CUDA C++ (same tiling, same block shapes); the `bench_compute` benchmark
//! runs both on the GPU and compares.

use berth::prelude::*;

/// Side of the square tiles of [`sgemm_tiled`]; its block is `TILE × TILE` threads.
pub const TILE: usize = 16;

/// `c = a · b` for row-major `n × n` matrices, `n` a multiple of 16: each 16×16 block
/// computes a 16×16 tile of `c`, stepping through `a`'s rows and `b`'s columns in 16×16
/// shared-memory tiles. Launch with `Grid::new((n / 16, n / 16), (16, 16))`.
///
/// `c` is declared an `n`-column matrix: each thread writes its element `(row, col)` at its
/// position in the 2D grid, `c[p] = acc`, with no `unsafe` (the declared block keeps the
/// grid to one layer along z).
#[gpu_kernel(block = (16, 16))]
pub fn sgemm_tiled(n: u32, a: &[f32], b: &[f32], #[matrix(cols = n)] c: &mut [f32]) {
    let ta = shared_array!(TA: [[f32; TILE]; TILE]);
    let tb = shared_array!(TB: [[f32; TILE]; TILE]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let n = n as usize;
    // This thread's element of `c`: (block::idx_y() * 16 + ty, block::idx_x() * 16 + tx).
    let p = thread::index_2d();
    let (row, col) = (p.y(), p.x());
    let mut acc = 0.0f32;
    let mut t = 0;
    while t < n {
        // Both loads before the stores (see sgemm_reg4).
        let (va, vb) = (a[row * n + t + tx], b[(t + ty) * n + col]);
        // SAFETY: every thread of the block reaches both barriers, the same number of times:
        // the loop's trip count depends only on `n`. Each thread writes only its own
        // (ty, tx) slot of each tile; the reads come after the first barrier, of slots all
        // 16×16 threads wrote before it (the block is declared 16×16), and the next writes
        // wait for the second barrier.
        unsafe {
            ta.row(ty).write(tx, va);
            tb.row(ty).write(tx, vb);
            sync_threads();
            unroll! { for k in 0..16 {
                acc += ta.row(ty).read(k) * tb.row(k).read(tx);
            } }
            sync_threads();
        }
        t += TILE;
    }
    if col < n {
        c[p] = acc;
    }
}

/// Rows (and columns) of `c` one [`sgemm_reg4`] block computes.
pub const REG4_TILE: usize = 64;

/// `c = a · b` (row-major, `n` a multiple of 64), register-blocked: a 16×16 block computes a
/// 64×64 tile of `c`, each thread a 4×4 patch held in registers; `a` and `b` pass through
/// shared memory in 64×16 / 16×64 slices. Launch with
/// `Grid::new((n / 64, n / 64), (16, 16))`.
///
/// Four blocks per SM is the occupancy ptxas reaches anyway (64 registers); declaring it tells
/// ptxas the register budget before it schedules. Without it, ptxas fits in 64 registers by
/// storing the first slice elements to shared memory before the last loads are issued, which
/// waits out one global load's latency in the middle of every step.
#[gpu_kernel(block = (16, 16), min_blocks_per_sm = 4)]
pub fn sgemm_reg4(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    const BK: usize = 16;
    // `sa[k][r]`: column k of the slice of `a`, rows of the tile; `sb[k][c]`: row k of `b`'s.
    let sa = shared_array!(SA4: [[f32; REG4_TILE]; BK]);
    let sb = shared_array!(SB4: [[f32; REG4_TILE]; BK]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let tid = ty * 16 + tx;
    let n = n as usize;
    let (row0, col0) = (block::idx_y() * REG4_TILE, block::idx_x() * REG4_TILE);
    // The block's 64 rows of `a` and 64 columns of `b`, walked in step, 16 columns of `a`
    // and 16 rows of `b` at a time: checked once, here (a grid that reaches past `n`, or an
    // `n` that is not a multiple of 16, stops here); the walk's end test is the loop's only
    // comparison, and the element indices below are proved inside the tiles (`tid < 256`
    // from the declared block).
    let a_tiles = a
        .matrix(n, n)
        .submatrix(row0, 0, REG4_TILE, n)
        .tiles_across::<REG4_TILE, BK>(0);
    let b_tiles = b
        .matrix(n, n)
        .submatrix(0, col0, n, REG4_TILE)
        .tiles_down::<BK, REG4_TILE>(0);
    let mut acc = [[0.0f32; 4]; 4];
    for (ta, tb) in a_tiles.zip(b_tiles) {
        // Every load first, then the stores: a store right behind a load would wait for it
        // before the next load could start.
        let (mut va, mut vb) = ([0.0f32; 4], [0.0f32; 4]);
        unroll! { for l in 0..4 {
            let e = tid + l * 256;
            va[l] = ta[(e / BK, e % BK)];
            vb[l] = tb[(e / REG4_TILE, e % REG4_TILE)];
        } }
        // SAFETY: thread `tid` writes elements `tid + 256 l` (l < 4) of each slice, in
        // row-major order of `sb` and column-major of `sa`: distinct threads write distinct
        // elements, and the 256 threads (declared block) write all 1024. The reads come
        // after the barrier; the next writes wait for the second barrier.
        unsafe {
            unroll! { for l in 0..4 {
                let e = tid + l * 256;
                sa.row(e % BK).write(e / BK, va[l]);
                sb.row(e / REG4_TILE).write(e % REG4_TILE, vb[l]);
            } }
        }
        // SAFETY: every thread of the block reaches this barrier and the one below, the same
        // number of times: the loop's trip count (`n / 16`) depends only on `n`, and the
        // checks above stop whole blocks (they depend only on the block's index and `n`).
        unsafe { sync_threads() };
        unroll! { for k in 0..16 {
            let mut fa = [0.0f32; 4];
            let mut fb = [0.0f32; 4];
            unroll! { for i in 0..4 {
                // SAFETY: every element was written before the barrier above (see the
                // writes) and none is written again before the barrier below.
                unsafe {
                    fa[i] = sa.row(k).read(ty * 4 + i);
                    fb[i] = sb.row(k).read(tx * 4 + i);
                }
            } }
            unroll! { for i in 0..4 {
                unroll! { for j in 0..4 {
                    acc[i][j] += fa[i] * fb[j];
                } }
            } }
        } }
        // SAFETY: as for the barrier above.
        unsafe { sync_threads() };
    }
    // One check that this thread's 4×4 patch lies inside `c`; the 16 indices are constants.
    let mut cm = c.matrix_mut(n, n);
    let mut patch = cm.tile_mut::<4, 4>(row0 + ty * 4, col0 + tx * 4);
    unroll! { for i in 0..4 {
        unroll! { for j in 0..4 {
            // SAFETY: each thread of the launch (one layer along z: the launcher refuses
            // other grids for the declared 16×16 block) writes its own 4×4 patch (rows
            // `row0 + 4 ty ..`, columns `col0 + 4 tx ..`: distinct for distinct threads,
            // all inside the `n × n` matrix, where `(row, col)` names one element): no other
            // thread touches these elements.
            unsafe { patch.write(i, j, acc[i][j]) };
        } }
    } }
}

/// Rows (and columns) of `c` one [`sgemm_reg8`] block computes.
pub const REG8_TILE: usize = 128;

/// As [`sgemm_reg4`] with 8×8 patches per thread: a 16×16 block computes a 128×128 tile
/// (`n` a multiple of 128), `a` and `b` through shared memory in 128×8 / 8×128 slices.
/// Launch with `Grid::new((n / 128, n / 128), (16, 16))`.
///
/// Every global access goes through a [`Tile`] of a [`Matrix`] view: the block's bands of
/// `a` and `b`, and their walks of whole tiles ([`Matrix::tiles_across`],
/// [`Matrix::tiles_down`]), checked once before the loop; no check per step or per element.
/// A grid that reaches past `n`, an `n` that is not a multiple of 8, or a slice shorter than
/// `n²` stops the kernel with the located index.
#[gpu_kernel(block = (16, 16))]
pub fn sgemm_reg8(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: every thread of the block calls it once: nothing branches before it.
    unsafe { reg8_tiles::<true>(n as usize, a, b, &mut c) };
}

/// [`sgemm_reg8`] with its global accesses unchecked, after checking once that they are all
/// in bounds: the cost of per-access bounds checks, measured. Stops with a message when `n`
/// is not a multiple of 128, a slice is shorter than `n²` or the grid reaches past `n`.
#[gpu_kernel(block = (16, 16))]
pub fn sgemm_reg8_unchecked(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    let n = n as usize;
    let (rows, cols) = (
        (block::idx_y() + 1) * REG8_TILE,
        (block::idx_x() + 1) * REG8_TILE,
    );
    if !n.is_multiple_of(REG8_TILE) || a.len() < n * n || b.len() < n * n || c.len() < n * n {
        fail("sgemm_reg8_unchecked: n must be a multiple of 128 and every matrix n² long");
    }
    if rows > n || cols > n {
        fail("sgemm_reg8_unchecked: the grid reaches past the matrix");
    }
    // SAFETY: every thread of the block calls it once: the checks above stop whole blocks
    // (they depend only on the block's index, `n` and the lengths), and nothing else
    // branches before it.
    unsafe { reg8_tiles::<false>(n, a, b, &mut c) };
}

/// The tile loop of [`sgemm_reg8`] and [`sgemm_reg8_unchecked`], with the block's barriers.
///
/// # Safety
/// Every thread of the block that has not exited calls it together (the same call, once),
/// as [`sync_threads`]; and with `CHECKED == false`, every index the loop forms is in bounds
/// (as [`sgemm_reg8_unchecked`] checks up front).
#[inline(always)]
unsafe fn reg8_tiles<const CHECKED: bool>(
    n: usize,
    a: Slice<'_, f32>,
    b: Slice<'_, f32>,
    c: &mut SliceMut<'_, f32>,
) {
    const BK: usize = 8;
    let sa = shared_array!(SA8: [[f32; REG8_TILE]; BK]);
    let sb = shared_array!(SB8: [[f32; REG8_TILE]; BK]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let tid = ty * 16 + tx;
    let (row0, col0) = (block::idx_y() * REG8_TILE, block::idx_x() * REG8_TILE);
    let mut acc = [[0.0f32; 8]; 8];
    // One step of the k-loop once this thread's four elements of each slice are loaded:
    // into shared memory, then the block's 8 × 8 products of the slices.
    let mut step = |va: [f32; 4], vb: [f32; 4]| {
        // SAFETY: as in `sgemm_reg4`: thread `tid` writes elements `tid + 256 l` (l < 4)
        // of each 1024-element slice, distinct for distinct threads, all of them written by
        // the 256 threads (declared block); reads after the barrier, the next writes after
        // the second one.
        unsafe {
            unroll! { for l in 0..4 {
                let e = tid + l * 256;
                sa.row(e % BK).write(e / BK, va[l]);
                sb.row(e / REG8_TILE).write(e % REG8_TILE, vb[l]);
            } }
        }
        // SAFETY: every thread of the block reaches this barrier and the one below, the same
        // number of times: the whole block calls this function (its contract), and either
        // loop's trip count (`n / 8`) depends only on `n`.
        unsafe { sync_threads() };
        unroll! { for k in 0..8 {
            let mut fa = [0.0f32; 8];
            let mut fb = [0.0f32; 8];
            unroll! { for i in 0..8 {
                // SAFETY: every element was written before the barrier above and none is
                // written again before the barrier below.
                unsafe {
                    fa[i] = sa.row(k).read(ty * 8 + i);
                    fb[i] = sb.row(k).read(tx * 8 + i);
                }
            } }
            unroll! { for i in 0..8 {
                unroll! { for j in 0..8 {
                    acc[i][j] += fa[i] * fb[j];
                } }
            } }
        } }
        // SAFETY: as for the barrier above.
        unsafe { sync_threads() };
    };
    if CHECKED {
        // The block's 128 rows of `a` and 128 columns of `b`, walked in step, 8 columns of
        // `a` and 8 rows of `b` at a time: checked once, here (a grid that reaches past `n`,
        // or an `n` that is not a multiple of 8, stops here); the walk's end test is the
        // loop's only comparison, and the element indices below are proved inside the tiles
        // (`tid < 256` from the declared block).
        let a_tiles = a
            .matrix(n, n)
            .submatrix(row0, 0, REG8_TILE, n)
            .tiles_across::<REG8_TILE, BK>(0);
        let b_tiles = b
            .matrix(n, n)
            .submatrix(0, col0, n, REG8_TILE)
            .tiles_down::<BK, REG8_TILE>(0);
        for (ta, tb) in a_tiles.zip(b_tiles) {
            // Every load of the slice first, then the stores: a store right behind a load
            // would wait for it before the next load could start.
            let (mut va, mut vb) = ([0.0f32; 4], [0.0f32; 4]);
            unroll! { for l in 0..4 {
                let e = tid + l * 256;
                va[l] = ta[(e / BK, e % BK)];
                vb[l] = tb[(e / REG8_TILE, e % REG8_TILE)];
            } }
            step(va, vb);
        }
    } else {
        let mut t = 0;
        while t < n {
            let (mut va, mut vb) = ([0.0f32; 4], [0.0f32; 4]);
            unroll! { for l in 0..4 {
                let e = tid + l * 256;
                // SAFETY: the unchecked kernel checks up front that every index formed here
                // is below the slices' lengths (see `sgemm_reg8_unchecked`).
                unsafe {
                    va[l] = *a.get_unchecked((row0 + e / BK) * n + t + e % BK);
                    vb[l] = *b.get_unchecked((t + e / REG8_TILE) * n + col0 + e % REG8_TILE);
                }
            } }
            step(va, vb);
            t += BK;
        }
    }
    // Each thread of the launch (one layer along z: both callers declare 16×16 blocks, and
    // the launcher refuses other grids for them) writes its own 8×8 patch (rows `row0 + 8 ty ..`, columns
    // `col0 + 8 tx ..`: distinct for distinct threads), all inside the `n × n` matrix (the
    // checked kernel's tile check, the unchecked kernel's up-front check), where
    // `(row, col)` names one element: no other thread touches these elements.
    if CHECKED {
        // One check that the patch lies inside the matrix; the 64 indices are constants.
        let mut cm = c.matrix_mut(n, n);
        let mut patch = cm.tile_mut::<8, 8>(row0 + ty * 8, col0 + tx * 8);
        unroll! { for i in 0..8 {
            unroll! { for j in 0..8 {
                // SAFETY: as above.
                unsafe { patch.write(i, j, acc[i][j]) };
            } }
        } }
    } else {
        unroll! { for i in 0..8 {
            unroll! { for j in 0..8 {
                let at = (row0 + ty * 8 + i) * n + col0 + tx * 8 + j;
                // SAFETY: as above, and in bounds as the unchecked kernel checks up front.
                unsafe { *c.get_unchecked_mut(at) = acc[i][j] };
            } }
        } }
    }
}

/// A body of [`nbody`]: position and mass, 16 bytes (CUDA's `float4`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
pub struct Body {
    /// Position x.
    pub x: f32,
    /// Position y.
    pub y: f32,
    /// Position z.
    pub z: f32,
    /// Mass.
    pub m: f32,
}

/// Bodies per shared tile and threads per block of [`nbody`].
pub const NBODY_BLOCK: usize = 256;

/// Softening² of [`nbody`]'s force.
pub const SOFTENING2: f32 = 1e-3;

/// The acceleration `m_j · d / (|d|² + ε²)^{3/2}` that `bodies[j]` at distance `d` adds.
#[inline(always)]
fn pull(me: Body, other: Body, acc: &mut [f32; 3], fast: bool) {
    let (dx, dy, dz) = (other.x - me.x, other.y - me.y, other.z - me.z);
    let r2 = dx * dx + dy * dy + dz * dz + SOFTENING2;
    let inv = if fast {
        r2.rsqrt_approx()
    } else {
        1.0 / r2.sqrt()
    };
    let s = other.m * inv * inv * inv;
    acc[0] += dx * s;
    acc[1] += dy * s;
    acc[2] += dz * s;
}

/// All-pairs gravity: `accel[i]` (x, y, z; w unused) from every body, the bodies passing
/// through shared memory in tiles of 256; `1 / sqrt(r²)` correctly rounded. `bodies.len()`
/// a multiple of 256; launch with `Grid::new(n / 256, 256)`.
#[gpu_kernel(block = 256)]
pub fn nbody(bodies: &[Body], accel: &mut [Body]) {
    // SAFETY: every thread of the block calls it once, under no branch.
    unsafe { nbody_tiles(bodies, &mut accel, false) };
}

/// As [`nbody`], with the hardware's approximate `rsqrt` (what `rsqrtf` compiles to).
#[gpu_kernel(block = 256)]
pub fn nbody_fast(bodies: &[Body], accel: &mut [Body]) {
    // SAFETY: every thread of the block calls it once, under no branch.
    unsafe { nbody_tiles(bodies, &mut accel, true) };
}

/// [`nbody`] asking that eight of its blocks fit on an SM at once (`min_blocks_per_sm = 8`):
/// ptxas keeps it within 32 registers (`nbody` takes 38, six blocks per SM), spilling 8 bytes
/// outside its loops. On the H200 that bought nothing: occupancy is not what holds `nbody`
/// back (docs/kernel-language.md).
#[gpu_kernel(block = 256, min_blocks_per_sm = 8)]
pub fn nbody_capped(bodies: &[Body], accel: &mut [Body]) {
    // SAFETY: every thread of the block calls it once, under no branch.
    unsafe { nbody_tiles(bodies, &mut accel, false) };
}

/// The tile loop of [`nbody`], [`nbody_fast`] and [`nbody_capped`], with the block's
/// barriers.
///
/// # Safety
/// Every thread of the block that has not exited calls it together (the same call, once),
/// as [`sync_threads`].
#[inline(always)]
unsafe fn nbody_tiles(bodies: Slice<'_, Body>, accel: &mut SliceMut<'_, Body>, fast: bool) {
    let tile = shared_array!(BODIES: [Body; NBODY_BLOCK]);
    let t = thread::idx_x();
    // The kernels run with NBODY_BLOCK threads per block (declared), so this is
    // `block::idx_x() * NBODY_BLOCK + t` on their one-dimensional grids.
    let i = thread::index();
    let me = bodies[i];
    let mut acc = [0.0f32; 3];
    let mut base = 0;
    while base < bodies.len() {
        let body = bodies[base + t];
        // SAFETY: every thread of the block reaches both barriers, the same number of times:
        // the whole block calls this function (its contract), and the loop's trip count
        // depends only on `bodies.len()`. Thread `t` writes only slot `t`, and the
        // NBODY_BLOCK threads (declared block) write every slot; the reads come after the
        // first barrier, and the next writes wait for the second barrier.
        unsafe {
            tile.write(t, body);
            sync_threads();
            let mut k = 0;
            while k < NBODY_BLOCK {
                unroll! { for u in 0..4 {
                    pull(me, tile.read(k + u), &mut acc, fast);
                } }
                k += 4;
            }
            sync_threads();
        }
        base += NBODY_BLOCK;
    }
    accel[i] = Body {
        x: acc[0],
        y: acc[1],
        z: acc[2],
        m: 0.0,
    };
}

/// Black-Scholes prices of European options: for each option (spot `s`, strike `x`, years
/// `t`), the call and put under rate `r` and volatility `v`, with the cumulative normal by
/// the Abramowitz–Stegun polynomial (as in CUDA's samples). One thread per option.
///
/// The five slices are declared of one length (`same_len`): the launcher checks it, and the
/// body's `i < call.len()` then proves every access in bounds, so no access is checked again.
#[gpu_kernel(same_len(s, x, t, call, put))]
pub fn black_scholes(
    r: f32,
    v: f32,
    s: &[f32],
    x: &[f32],
    t: &[f32],
    call: &mut [f32],
    put: &mut [f32],
) {
    let i = thread::index();
    if i < call.len() {
        let (c, p) = black_scholes_one(s[i], x[i], t[i], r, v);
        call[i] = c;
        put[i] = p;
    }
}

/// [`black_scholes`] without `same_len`: each thread checks once that every slice is as long
/// as `call`, then reads and writes unchecked. Measured beside it, it is the price of a check
/// made in every thread of a one-element-per-thread kernel rather than once by the launcher.
#[gpu_kernel]
#[allow(clippy::too_many_arguments)]
pub fn black_scholes_unchecked(
    r: f32,
    v: f32,
    s: &[f32],
    x: &[f32],
    t: &[f32],
    call: &mut [f32],
    put: &mut [f32],
) {
    let n = call.len();
    if s.len() < n || x.len() < n || t.len() < n || put.len() < n {
        fail("black_scholes_unchecked: every slice must be as long as `call`");
    }
    let i = thread::index().get();
    if i < n {
        // SAFETY: `i < n`, and every slice has at least `n` elements (checked above).
        let (si, xi, ti) = unsafe {
            (
                *s.get_unchecked(i),
                *x.get_unchecked(i),
                *t.get_unchecked(i),
            )
        };
        let (c, p) = black_scholes_one(si, xi, ti, r, v);
        // SAFETY: in bounds as above; `i` is this thread's own index (`thread::index`), which
        // no other thread of the launch holds, so no other thread touches these elements.
        unsafe {
            *call.get_unchecked_mut(i) = c;
            *put.get_unchecked_mut(i) = p;
        }
    }
}

/// One option's call and put prices (see [`black_scholes`]); the host reference uses it too.
#[inline(always)]
pub fn black_scholes_one(s: f32, x: f32, t: f32, r: f32, v: f32) -> (f32, f32) {
    let sqrt_t = t.sqrt();
    let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * sqrt_t);
    let d2 = d1 - v * sqrt_t;
    let (cnd1, cnd2) = (cnd(d1), cnd(d2));
    let exp_rt = (-r * t).exp();
    (
        s * cnd1 - x * exp_rt * cnd2,
        x * exp_rt * (1.0 - cnd2) - s * (1.0 - cnd1),
    )
}

/// The standard normal distribution's cumulative function (5th-order polynomial, error
/// below 7.5e-8).
#[inline(always)]
fn cnd(d: f32) -> f32 {
    const A1: f32 = 0.319_381_54;
    const A2: f32 = -0.356_563_78;
    const A3: f32 = 1.781_477_9;
    const A4: f32 = -1.821_256;
    const A5: f32 = 1.330_274_5;
    const RSQRT2PI: f32 = 0.398_942_3;
    let k = 1.0 / (1.0 + 0.231_641_9 * d.abs());
    let c = RSQRT2PI * (-0.5 * d * d).exp() * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))));
    if d > 0.0 { 1.0 - c } else { c }
}

/// Threads per block of [`block_sum_warp`].
pub const WARP_SUM_BLOCK: u32 = 256;

/// Sum of `x`, one partial sum per block into `partial[block]`, reduced with warp shuffles:
/// a grid-stride loop accumulates, each warp folds its 32 values with butterfly shuffles,
/// the warps' sums meet in shared memory and the first warp folds them. Launch with
/// [`WARP_SUM_BLOCK`] threads per block and `partial.len()` blocks.
#[gpu_kernel(block = 256)]
pub fn block_sum_warp(x: &[f32], #[per_block] partial: &mut [f32]) {
    let sums = shared_array!(WARP_SUMS: [f32; 8]);
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    let stride = thread::grid_stride_x();
    while i < x.len() {
        acc += x[i];
        i += stride;
    }
    let total = warp::reduce_sum(warp::FULL_MASK, acc);
    let (lane, w) = (warp::lane_id(), warp::warp_id());
    if lane == 0 {
        // SAFETY: lane 0 of warp `w` is the only thread writing slot `w`.
        unsafe { sums.write(w, total) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
    if w == 0 {
        // SAFETY: slot `lane < 8` was written by lane 0 of warp `lane` (the declared block
        // has 8 warps) before the barrier; nobody writes it after.
        let v = if lane < 8 {
            unsafe { sums.read(lane) }
        } else {
            0.0
        };
        let total = warp::reduce_sum(warp::FULL_MASK, v);
        if let Some(slot) = partial.mine() {
            *slot = total;
        }
    }
}
