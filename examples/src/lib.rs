//! The example kernels of berth. This crate is an ordinary library: the host build gets the
//! launchers (and type-checks every kernel body); `build.rs` builds the same source for the
//! GPU. The programs that call these kernels are in `src/bin/`.

use berth::prelude::*;

/// `y[i] = a * x[i] + y[i]`.
#[gpu_kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = thread::global_x();
    if i < y.len() {
        y[i] += a * x[i];
    }
}

/// Threads per block of [`block_sum`]; the shared array below holds one partial sum each.
pub const REDUCE_BLOCK: u32 = 256;

/// Sum of `x`, one partial sum per block into `partial[block]`: a grid-stride loop
/// accumulates, then a tree reduction in shared memory combines the block's threads.
/// Launch with `REDUCE_BLOCK` threads per block and `partial.len()` blocks.
#[gpu_kernel]
pub fn block_sum(x: &[f32], partial: &mut [f32]) {
    let tile = shared_array!(TILE: [f32; 256]);
    let t = thread::idx_x();
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    let stride = thread::grid_stride_x();
    while i < x.len() {
        acc += x[i];
        i += stride;
    }
    tile.store(t, acc);
    sync_threads();
    let mut half = block::dim_x() / 2;
    while half > 0 {
        if t < half {
            tile.store(t, tile.load(t) + tile.load(t + half));
        }
        sync_threads();
        half /= 2;
    }
    if t == 0 {
        partial[block::idx_x()] = tile.load(0);
    }
}

/// Reads `x[i]` for every thread's global index `i`, without a length guard: launched over
/// more threads than elements it panics on the GPU (used to test the panic path).
#[gpu_kernel]
pub fn unchecked_copy(x: &[u32], out: &mut [u32]) {
    let i = thread::global_x();
    out[i] = x[i];
}
