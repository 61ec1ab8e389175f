//! The kernel crate `cargo xtask rebuild` times edits in: a few kernels as a user's crate
//! holds them (elementwise, a reduction through shared memory, a tiled matrix product, a
//! stencil). The line marked `EDIT` is the one the benchmark changes.

use berth::prelude::*;

/// `y[i] = a * x[i] + y[i]`.
#[gpu_kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] += a * x[i];
    }
}

/// `y[i] = scale * x[i]`, the kernel the benchmark edits.
#[gpu_kernel]
pub fn scale(x: &[f32], y: &mut [f32]) {
    let scale = 2.0f32; // EDIT
    let i = thread::index();
    if i < y.len() {
        y[i] = scale * x[i];
    }
}

/// The sum of `x`, one partial sum per block of 256 threads: a grid-stride loop, then a tree
/// in shared memory.
#[gpu_kernel(block = 256)]
pub fn block_sum(x: &[f32], #[per_block] partial: &mut [f32]) {
    let tile = shared_array!(TILE: [f32; 256]);
    let t = thread::idx_x();
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    while i < x.len() {
        acc += x[i];
        i += thread::grid_stride_x();
    }
    let mut half = 128;
    // SAFETY: each thread writes only its own slot `t`; every thread of the block reaches
    // each barrier the same number of times (the loop's trip count is a constant); a slot is
    // read after the barrier that follows its write, and rewritten only after the next one.
    unsafe {
        tile.write(t, acc);
        sync_threads();
        while half > 0 {
            if t < half {
                tile.write(t, tile.read(t) + tile.read(t + half));
            }
            sync_threads();
            half /= 2;
        }
    }
    if let Some(slot) = partial.mine() {
        // SAFETY: slot 0 was last written before the last barrier.
        *slot = unsafe { tile.read(0) };
    }
}

/// `c = a · b` for row-major `n × n` matrices, `n` a multiple of 16, through 16×16 shared
/// tiles. Launch with `Grid::new((n / 16, n / 16), (16, 16))`.
#[gpu_kernel(block = (16, 16))]
pub fn sgemm_tiled(n: u32, a: &[f32], b: &[f32], #[matrix(cols = n)] c: &mut [f32]) {
    let ta = shared_array!(TA: [[f32; 16]; 16]);
    let tb = shared_array!(TB: [[f32; 16]; 16]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let n = n as usize;
    let p = thread::index_2d();
    let (row, col) = (p.y(), p.x());
    let mut acc = 0.0f32;
    let mut t = 0;
    while t < n {
        let (va, vb) = (a[row * n + t + tx], b[(t + ty) * n + col]);
        // SAFETY: every thread of the block reaches both barriers, the same number of times;
        // each writes only its own (ty, tx) slot of each tile; the reads come after the
        // first barrier, and the next writes after the second.
        unsafe {
            ta.row(ty).write(tx, va);
            tb.row(ty).write(tx, vb);
            sync_threads();
            unroll! { for k in 0..16 {
                acc += ta.row(ty).read(k) * tb.row(k).read(tx);
            } }
            sync_threads();
        }
        t += 16;
    }
    if col < n {
        c[p] = acc;
    }
}

/// One Jacobi step of a 5-point stencil over a `rows × cols` grid (borders copied).
#[gpu_kernel]
pub fn jacobi(rows: u32, cols: u32, u: &[f32], #[matrix(cols = cols)] out: &mut [f32]) {
    let p = thread::index_2d();
    let (r, c, cols) = (p.y(), p.x(), cols as usize);
    if r >= rows as usize || c >= cols {
        return;
    }
    let at = |r: usize, c: usize| u[r * cols + c];
    out[p] = if r == 0 || c == 0 || r + 1 == rows as usize || c + 1 == cols {
        at(r, c)
    } else {
        0.25 * (at(r - 1, c) + at(r + 1, c) + at(r, c - 1) + at(r, c + 1))
    };
}
