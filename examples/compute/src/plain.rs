//! CUDA kernels ported line by line, as someone new to berth writes them: `for` loops over
//! small local arrays, checked slice reads, `unsafe { out.write(k, v) }` for stores at a
//! computed index, `unsafe` shared-memory accesses and barriers — no declared block shape, no
//! `unroll!`, no matrix views. `bench/compute/reference.cu` holds the CUDA C++ they were
//! ported from (`plain_*` runs the same kernels there), and the `bench_compute` benchmark
//! runs both: the builder is meant to make these as fast as the idiomatic kernels of
//! [`compute`](crate::compute).
//!
//! Each kernel opens with the checks its `SAFETY` comments rest on: the block shape its
//! tiles assume (a launch on another shape stops with a message), and a grid of one layer
//! along z (the blocks of other layers return whole, before any barrier). They are uniform
//! over the launch and cost a few instructions at the start.

use crate::compute::Body;
use berth::prelude::*;

/// `c = a · b` (row-major `n × n`, `n` a multiple of 16) through 16×16 shared tiles: the
/// classic tiled SGEMM. Launch with `Grid::new((n / 16, n / 16), (16, 16))`.
#[gpu_kernel]
pub fn plain_sgemm_tiled(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    if block::dim_x() != 16 || block::dim_y() != 16 || block::dim_z() != 1 {
        fail("plain_sgemm_tiled: launch with blocks of 16 × 16 threads");
    }
    if block::idx_z() != 0 {
        return;
    }
    let ta = shared_array!(PLAIN_TA: [[f32; 16]; 16]);
    let tb = shared_array!(PLAIN_TB: [[f32; 16]; 16]);
    let tx = thread::idx_x();
    let ty = thread::idx_y();
    let n = n as usize;
    let row = block::idx_y() * 16 + ty;
    let col = block::idx_x() * 16 + tx;
    let mut acc = 0.0f32;
    for t in (0..n).step_by(16) {
        let va = a[row * n + t + tx];
        let vb = b[(t + ty) * n + col];
        // SAFETY: every thread of the block (16 × 16, checked above) reaches both barriers
        // the same number of times: the loop's trip count depends only on `n`, and the
        // checks above stop or return whole blocks. Each thread writes only its own
        // (ty, tx) slot of each tile; the reads come after the first barrier, the next
        // writes after the second.
        unsafe {
            ta.row(ty).write(tx, va);
            tb.row(ty).write(tx, vb);
            sync_threads();
            for k in 0..16 {
                acc += ta.row(ty).read(k) * tb.row(k).read(tx);
            }
            sync_threads();
        }
    }
    if row < n && col < n {
        // SAFETY: threads of layer 0 along z (the only one here; blocks are 16 × 16 × 1)
        // have distinct (row, col), and with `col < n` the index `row * n + col` is
        // one-to-one: no other thread touches this element.
        unsafe { c.write(row * n + col, acc) };
    }
}

/// The register-blocked SGEMM's shared slices, products and write-back, for `R × R`
/// patches per thread (`R` = 4 or 8) of a 16×16 block's `16 R × 16 R` tile, `BK` columns
/// of `a` (rows of `b`) per step. A macro rather than a generic function: each kernel is
/// the line-by-line port, with its own constants as literals.
macro_rules! plain_register_blocked {
    ($name:literal, $n:ident, $a:ident, $b:ident, $c:ident, $sa:ident, $sb:ident, R = $r:literal, BK = $bk:literal) => {{
        const R: usize = $r;
        const BK: usize = $bk;
        const TILE: usize = 16 * R;
        if block::dim_x() != 16 || block::dim_y() != 16 || block::dim_z() != 1 {
            fail(concat!($name, ": launch with blocks of 16 × 16 threads"));
        }
        if block::idx_z() != 0 {
            return;
        }
        let sa = shared_array!($sa: [[f32; TILE]; BK]);
        let sb = shared_array!($sb: [[f32; TILE]; BK]);
        let tx = thread::idx_x();
        let ty = thread::idx_y();
        let tid = ty * 16 + tx;
        let n = $n as usize;
        let row0 = block::idx_y() * TILE;
        let col0 = block::idx_x() * TILE;
        let mut acc = [[0.0f32; R]; R];
        for t in (0..n).step_by(BK) {
            let mut va = [0.0f32; 4];
            let mut vb = [0.0f32; 4];
            for l in 0..4 {
                let e = tid + l * 256;
                va[l] = $a[(row0 + e / BK) * n + t + e % BK];
                vb[l] = $b[(t + e / TILE) * n + col0 + e % TILE];
            }
            for l in 0..4 {
                let e = tid + l * 256;
                // SAFETY: thread `tid` writes elements `tid + 256 l` (l < 4) of each slice
                // (column-major in `sa`, row-major in `sb`): distinct threads write distinct
                // elements. The reads come after the barrier, the next writes after the
                // second one.
                unsafe {
                    sa.row(e % BK).write(e / BK, va[l]);
                    sb.row(e / TILE).write(e % TILE, vb[l]);
                }
            }
            // SAFETY: every thread of the block reaches both barriers the same number of
            // times: the loop's trip count depends only on `n`, and the checks above stop
            // or return whole blocks.
            unsafe { sync_threads() };
            for k in 0..BK {
                let mut fa = [0.0f32; R];
                let mut fb = [0.0f32; R];
                for i in 0..R {
                    // SAFETY: every element was written before the barrier above, and none
                    // is written again before the barrier below.
                    unsafe {
                        fa[i] = sa.row(k).read(ty * R + i);
                        fb[i] = sb.row(k).read(tx * R + i);
                    }
                }
                for i in 0..R {
                    for j in 0..R {
                        acc[i][j] += fa[i] * fb[j];
                    }
                }
            }
            // SAFETY: as for the barrier above.
            unsafe { sync_threads() };
        }
        for i in 0..R {
            for j in 0..R {
                let row = row0 + ty * R + i;
                let col = col0 + tx * R + j;
                if row < n && col < n {
                    // SAFETY: threads of layer 0 along z (the only one here; blocks are
                    // 16 × 16 × 1) own distinct R × R patches, so distinct (row, col); with
                    // `col < n` the index `row * n + col` is one-to-one: no other thread
                    // touches this element.
                    unsafe { $c.write(row * n + col, acc[i][j]) };
                }
            }
        }
    }};
}

/// `c = a · b` (row-major, `n` a multiple of 64), register-blocked: a 16×16 block computes a
/// 64×64 tile, each thread a 4×4 patch in a local array; `a` and `b` pass through shared
/// memory 16 columns (rows) at a time. Launch with `Grid::new((n / 64, n / 64), (16, 16))`.
#[gpu_kernel]
pub fn plain_sgemm_reg4(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    plain_register_blocked!(
        "plain_sgemm_reg4",
        n,
        a,
        b,
        c,
        PLAIN_SA4,
        PLAIN_SB4,
        R = 4,
        BK = 16
    )
}

/// As [`plain_sgemm_reg4`] with 8×8 patches per thread: a 16×16 block computes a 128×128
/// tile (`n` a multiple of 128), 8 columns (rows) per step. Launch with
/// `Grid::new((n / 128, n / 128), (16, 16))`.
#[gpu_kernel]
pub fn plain_sgemm_reg8(n: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
    plain_register_blocked!(
        "plain_sgemm_reg8",
        n,
        a,
        b,
        c,
        PLAIN_SA8,
        PLAIN_SB8,
        R = 8,
        BK = 8
    )
}

/// Bodies per shared tile and threads per block of [`plain_nbody`].
pub const PLAIN_NBODY_BLOCK: usize = 256;

/// All-pairs gravity as [`compute::nbody`](crate::compute::nbody) (softening² 1e-3,
/// `1 / sqrt(r²)`): each block walks the bodies through a shared tile of 256. Launch with
/// `Grid::new(n / 256, 256)`, `n` a multiple of 256.
#[gpu_kernel]
pub fn plain_nbody(bodies: &[Body], accel: &mut [Body]) {
    if block::dim_x() != 256 || block::size() != 256 {
        fail("plain_nbody: launch with blocks of 256 threads");
    }
    let tile = shared_array!(PLAIN_BODIES: [Body; 256]);
    let t = thread::idx_x();
    let i = thread::index();
    let me = bodies[i];
    let mut acc = [0.0f32; 3];
    for base in (0..bodies.len()).step_by(256) {
        let body = bodies[base + t];
        // SAFETY: every thread of the block (256 × 1 × 1, checked above) reaches both
        // barriers the same number of times: the trip count depends only on the length.
        // Thread `t` writes only slot `t`; the reads come after the first barrier, the next
        // writes after the second.
        unsafe {
            tile.write(t, body);
            sync_threads();
            for k in (0..256).step_by(4) {
                for u in 0..4 {
                    let o = tile.read(k + u);
                    let dx = o.x - me.x;
                    let dy = o.y - me.y;
                    let dz = o.z - me.z;
                    let r2 = dx * dx + dy * dy + dz * dz + crate::compute::SOFTENING2;
                    let inv = 1.0 / r2.sqrt();
                    let s = o.m * inv * inv * inv;
                    acc[0] += dx * s;
                    acc[1] += dy * s;
                    acc[2] += dz * s;
                }
            }
            sync_threads();
        }
    }
    accel[i] = Body {
        x: acc[0],
        y: acc[1],
        z: acc[2],
        m: 0.0,
    };
}

/// One Jacobi step of the 2D heat equation, 5-point stencil on a row-major `h × w` grid:
/// `out = 0.5 · centre + 0.125 · (left + right + up + down)` inside, the border copied.
/// Launch with `Grid::new((w / 32, h / 8), (32, 8))` (any 2D shape that covers the grid).
#[gpu_kernel]
pub fn plain_stencil5(w: u32, h: u32, input: &[f32], out: &mut [f32]) {
    if thread::global_z() != 0 {
        return;
    }
    let x = thread::global_x();
    let y = thread::global_y();
    let (w, h) = (w as usize, h as usize);
    if x < w && y < h {
        let i = y * w + x;
        let v = if x == 0 || y == 0 || x == w - 1 || y == h - 1 {
            input[i]
        } else {
            0.5 * input[i] + 0.125 * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
        };
        // SAFETY: threads of layer 0 along z (the only one here) have distinct (x, y), and
        // with `x < w` the index `y * w + x` is one-to-one: no other thread touches it.
        unsafe { out.write(i, v) };
    }
}

/// Side of [`plain_transpose`]'s shared tile; its blocks are 32 × [`TRANSPOSE_ROWS`].
pub const TRANSPOSE_TILE: usize = 32;
/// Rows of threads in a [`plain_transpose`] block: each thread moves 32 / 8 = 4 elements.
pub const TRANSPOSE_ROWS: usize = 8;

/// `out = mᵀ` for a row-major `rows × cols` matrix (both multiples of 32) through a padded
/// 32×33 shared tile, blocks of 32×8 threads each moving four elements (the CUDA samples'
/// transpose). Launch with `Grid::new((cols / 32, rows / 32), (32, 8))`.
#[gpu_kernel]
pub fn plain_transpose(rows: u32, cols: u32, m: &[f32], out: &mut [f32]) {
    if block::dim_x() != 32 || block::dim_y() != 8 || block::dim_z() != 1 {
        fail("plain_transpose: launch with blocks of 32 × 8 threads");
    }
    if block::idx_z() != 0 {
        return;
    }
    let tile = shared_array!(PLAIN_T: [[f32; 33]; 32]);
    let (rows, cols) = (rows as usize, cols as usize);
    let tx = thread::idx_x();
    let ty = thread::idx_y();
    let x = block::idx_x() * 32 + tx;
    let y = block::idx_y() * 32 + ty;
    for j in (0..32).step_by(8) {
        // SAFETY: thread (tx, ty) writes slots (ty + j, tx), j = 0, 8, 16, 24: distinct
        // threads of the 32 × 8 block (checked above) write distinct slots. The reads come
        // after the barrier.
        unsafe { tile.row(ty + j).write(tx, m[(y + j) * cols + x]) };
    }
    // SAFETY: every thread of the block reaches the barrier: nothing before it returns
    // part of a block.
    unsafe { sync_threads() };
    let x = block::idx_y() * 32 + tx;
    let y = block::idx_x() * 32 + ty;
    for j in (0..32).step_by(8) {
        if x < rows {
            // SAFETY: threads of layer 0 along z (the only one here; blocks are 32 × 8 × 1)
            // write distinct (y + j, x), and with `x < rows` the index is one-to-one: no
            // other thread touches this element. The tile was written before the barrier
            // and is not written after it.
            unsafe { out.write((y + j) * rows + x, tile.row(tx).read(ty + j)) };
        }
    }
}
