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

/// Parameters of [`affine_clamp`], passed by value: a user `#[repr(C)]` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// Multiplier.
    pub scale: f32,
    /// Added after scaling.
    pub offset: f32,
    /// Results are clamped to `[-limit, limit]` when clamping is on.
    pub limit: f32,
}

// SAFETY: `#[repr(C)]`, three `f32`s, no padding, no pointers.
unsafe impl DeviceCopy for Affine {}

/// `out[i] = scale * x[i] + offset`, clamped to `±limit` when `clamp` is set: a struct and a
/// `bool` by value.
#[gpu_kernel]
pub fn affine_clamp(p: Affine, clamp: bool, x: &[f32], out: &mut [f32]) {
    let i = thread::global_x();
    if i < out.len() && i < x.len() {
        let v = p.scale * x[i] + p.offset;
        out[i] = if clamp { v.clamp(-p.limit, p.limit) } else { v };
    }
}

/// As [`block_sum`], with the block's tile in dynamic shared memory: launch with
/// `Grid::new(blocks, threads).shared_bytes(threads * 4)`, any power-of-two `threads`.
#[gpu_kernel]
pub fn block_sum_dynamic(x: &[f32], partial: &mut [f32]) {
    let tile = dynamic_shared::<f32>();
    let t = thread::idx_x();
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    while i < x.len() {
        acc += x[i];
        i += thread::grid_stride_x();
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

/// A row-major `width`-wide matrix: `out[r][c] = a[r][c] + r * 1000 + c`, one thread per
/// element over a 2D grid (exercises the y indices).
#[gpu_kernel]
pub fn add_coordinates(width: u32, a: &[f32], out: &mut [f32]) {
    let c = thread::global_x();
    let r = thread::global_y();
    let w = width as usize;
    if c < w && r * w + c < out.len() {
        out[r * w + c] = a[r * w + c] + (r * 1000 + c) as f32;
    }
}

/// `out[i] = x[i] / d`: with `d == 0` the division panics inside `core` (used to test that a
/// panic other than a bounds check ends the launch with an error naming the kernel).
#[gpu_kernel]
pub fn divide(d: u32, x: &[u32], out: &mut [u32]) {
    let i = thread::global_x();
    if i < x.len() && i < out.len() {
        out[i] = x[i] / d;
    }
}

/// Copies `x` into `out`, asserting (with `gpu_assert!`) that every value is below `limit`:
/// a failing assertion comes back to the host with its file, line and message.
#[gpu_kernel]
pub fn copy_below(limit: u32, x: &[u32], out: &mut [u32]) {
    let i = thread::global_x();
    if i < x.len() && i < out.len() {
        gpu_assert!(x[i] < limit, "value not below the limit");
        out[i] = x[i];
    }
}
