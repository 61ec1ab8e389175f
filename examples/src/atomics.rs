//! Example kernels of atomics: 64-bit integers, floats (add, min, max) in global and shared
//! memory, and the scoped family.

use berth::device::atomic::Scope;
use berth::prelude::*;

/// Every thread folds its element of each input into slots with atomics: `ints[0..3]` the
/// wrapping sum, max and min of `x` (`u64`), `signed[0..3]` those of `y` (`i64`),
/// `floats[0..3]` the sum, max and min of `z` (`f64`; the sum through a per-block shared
/// `f64` first), `singles[0..2]` the max and min of `w` (`f32`, through per-block shared
/// slots). Initialise min slots high and max slots low.
#[gpu_kernel]
pub fn atomics_wide(
    x: &[u64],
    y: &[i64],
    z: &[f64],
    w: &[f32],
    #[atomic] ints: &mut [u64],
    #[atomic] signed: &mut [i64],
    #[atomic] floats: &mut [f64],
    #[atomic] singles: &mut [f32],
) {
    let block_f64 = shared_array!(ATOM_BLOCK_F64: [f64; 1]);
    let block_f32 = shared_array!(ATOM_BLOCK_F32: [f32; 2]);
    let t = thread::linear_in_block();
    if t == 0 {
        // SAFETY: only the block's first thread writes; the atomics come after the barrier.
        unsafe {
            block_f64.write(0, 0.0);
            block_f32.write(0, f32::NEG_INFINITY);
            block_f32.write(1, f32::INFINITY);
        }
    }
    // SAFETY: every thread of the block reaches this barrier: it is outside the branches.
    unsafe { sync_threads() };
    let i = thread::index();
    if i < x.len() && i < y.len() && i < z.len() && i < w.len() {
        ints.atomic_add(0, x[i]);
        ints.atomic_max(1, x[i]);
        ints.atomic_min(2, x[i]);
        signed.atomic_add(0, y[i]);
        signed.atomic_max(1, y[i]);
        signed.atomic_min(2, y[i]);
        // SAFETY: the block's first thread wrote the shared elements before the barrier
        // above, so the shared atomics update written values.
        unsafe {
            block_f64.atomic_add(0, z[i]);
            floats.atomic_max(1, z[i]);
            floats.atomic_min(2, z[i]);
            block_f32.atomic_max(0, w[i]);
            block_f32.atomic_min(1, w[i]);
        }
    }
    // SAFETY: every thread of the block reaches this barrier: it is outside the branches.
    unsafe { sync_threads() };
    if t == 0 {
        // SAFETY: the elements were written (initialised, then updated) before the
        // barrier; nobody writes them after.
        unsafe {
            floats.atomic_add(0, block_f64.read(0));
            singles.atomic_max(0, block_f32.read(0));
            singles.atomic_min(1, block_f32.read(1));
        }
    }
}

/// The scoped family: `per_block[b]` counts block `b`'s threads with block-scope adds and
/// `last[b]` gets the index of one of them by block-scope exchange; `total[0..3]` is the sum
/// (system scope), max (device scope) and min (system scope) of `x`; `owner[k]` is claimed
/// by compare-and-swap (system scope) by a thread with `x[i] % owner.len() == k`, which
/// writes `i + 1`; `fsum[0]` sums `x[i] % 8` in `f32` (device scope), `dsum[0]` in `f64`
/// (system scope) and `dsum[1 + b]` per block (block scope).
#[gpu_kernel]
pub fn atomics_scoped(
    x: &[u32],
    #[atomic] per_block: &mut [u32],
    #[atomic] last: &mut [i32],
    #[atomic] total: &mut [u64],
    #[atomic] owner: &mut [i64],
    #[atomic] fsum: &mut [f32],
    #[atomic] dsum: &mut [f64],
) {
    let (i, b) = (thread::index(), block::idx_x());
    if i < x.len() && b < per_block.len() && b < last.len() && !owner.is_empty() {
        per_block.atomic_add_scoped(b, 1, Scope::Block);
        last.atomic_exchange_scoped(b, i.get() as i32, Scope::Block);
        total.atomic_add_scoped(0, u64::from(x[i]), Scope::System);
        total.atomic_max_scoped(1, u64::from(x[i]), Scope::Device);
        total.atomic_min_scoped(2, u64::from(x[i]), Scope::System);
        let k = x[i] as usize % owner.len();
        owner.atomic_cas_scoped(k, 0, i.get() as i64 + 1, Scope::System);
        let v = x[i] % 8;
        fsum.atomic_add_scoped(0, v as f32, Scope::Device);
        dsum.atomic_add_scoped(0, f64::from(v), Scope::System);
        if 1 + b < dsum.len() {
            dsum.atomic_add_scoped(1 + b, f64::from(v), Scope::Block);
        }
    }
}
