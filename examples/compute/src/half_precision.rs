//! Example kernels in half precision: `f16`/`bf16` data, packed pairs, and a dot product
//! that reads halves and accumulates in `f32`.

use berth::prelude::*;
use berth::warp::FULL_MASK;

/// `out[i] = a * x[i] + y[i]` on pairs of `f16`, one `fma.rn.f16x2` per element pair (CUDA's
/// `__hfma2`): an `f16` array of even length read two at a time.
#[gpu_kernel]
pub fn haxpy2(a: f16x2, x: &[f16x2], y: &[f16x2], out: &mut [f16x2]) {
    let i = thread::index();
    if i < out.len() && i < x.len() && i < y.len() {
        out[i] = a.fma(x[i], y[i]);
    }
}

/// Threads per block of [`hdot`].
pub const HDOT_BLOCK: u32 = 256;

/// The dot product of two `f16` vectors (as pairs), accumulated in `f32`: a grid-stride loop
/// per thread, a warp sum by shuffles, the block's warps summed through shared memory; one
/// partial sum per block into `partial[block]`. Launch with `HDOT_BLOCK` threads per block.
#[gpu_kernel]
pub fn hdot(x: &[f16x2], y: &[f16x2], #[per_block] partial: &mut [f32]) {
    let warps = shared_array!(HDOT_WARPS: [f32; 32]);
    let n = if x.len() < y.len() { x.len() } else { y.len() };
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    while i < n {
        let (x0, x1) = x[i].to_f32s();
        let (y0, y1) = y[i].to_f32s();
        acc += x0 * y0 + x1 * y1;
        i += thread::grid_stride_x();
    }
    let sum = warp::reduce_sum(FULL_MASK, acc);
    let (lane, w) = (warp::lane_id(), warp::warp_id());
    if lane == 0 {
        // SAFETY: lane 0 of warp `w` is the only thread writing slot `w` (< 32: a block has
        // at most 32 warps).
        unsafe { warps.write(w, sum) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
    if w == 0 {
        let nwarps = block::size() / 32;
        // SAFETY: slot `lane < nwarps` was written by lane 0 of warp `lane`, a full warp of
        // the block, before the barrier; nobody writes it after.
        let v = if lane < nwarps {
            unsafe { warps.read(lane) }
        } else {
            0.0
        };
        let total = warp::reduce_sum(FULL_MASK, v);
        if let Some(slot) = partial.mine() {
            *slot = total;
        }
    }
}
