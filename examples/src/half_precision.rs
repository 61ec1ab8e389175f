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

/// Values per element that [`half_ops`] writes to each output.
pub const HALF_OPS_OUT: usize = 4;

/// Every half-precision operation once per element, for checking the GPU against the host:
/// from `h = x[i]` (`f16`), `b = y[i]` (`bf16`) and `f = z[i]`, `wide[4i..]` gets `h` and `b`
/// widened and the packed pairs' sums; `halves[4i..]` gets `f` rounded to `f16`, `h + f`,
/// `h * f`, `h * h + f`; `brains[4i..]` the same in `bf16`; `pairs[i]` is
/// `(f, -f) * (h, h) + (b, b)` in `f16x2` with the last pair's `hi` from a `bf16x2` fma.
#[gpu_kernel]
pub fn half_ops(
    x: &[f16],
    y: &[bf16],
    z: &[f32],
    wide: &mut [f32],
    halves: &mut [f16],
    brains: &mut [bf16],
    pairs: &mut [f16x2],
) {
    let i = thread::index();
    if i >= x.len() || i >= y.len() || i >= z.len() || i >= pairs.len() {
        return;
    }
    let (h, b, f) = (x[i], y[i], z[i]);
    let fh = f16::from_f32_fast(f);
    let fb = bf16::from_f32_fast(f);
    let p = f16x2::from_f32s(f, -f) * f16x2::splat(h)
        + f16x2::from_f32s(b.to_f32_fast(), b.to_f32_fast());
    let q = bf16x2::from_f32s(f, h.to_f32_fast()).fma(bf16x2::splat(b), bf16x2::new(fb, fb));
    let r = (bf16x2::splat(b) + q) * q;
    let k = HALF_OPS_OUT * i;
    if k + 3 < wide.len() && k + 3 < halves.len() && k + 3 < brains.len() {
        let (p0, p1) = p.to_f32s();
        let (r0, r1) = r.to_f32s();
        // SAFETY: thread `i` (its own index) writes elements `4i .. 4i + 4` of each output,
        // which no other thread's index reaches (`HALF_OPS_OUT` is 4).
        unsafe {
            wide.write(k, h.to_f32_fast());
            wide.write(k + 1, b.to_f32_fast());
            wide.write(k + 2, p0 + p1);
            wide.write(k + 3, r0 + r1);
            halves.write(k, fh);
            halves.write(k + 1, h.add_rn(fh));
            halves.write(k + 2, h.mul_rn(fh));
            halves.write(k + 3, h.fma_rn(h, fh));
            brains.write(k, fb);
            brains.write(k + 1, b.add_rn(fb));
            brains.write(k + 2, b.mul_rn(fb));
            brains.write(k + 3, b.fma_rn(b, fb));
        }
        pairs[i] = f16x2::new(p.lo, f16::from_f32_fast(q.hi.to_f32_fast()));
    }
}
