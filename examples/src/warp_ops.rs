//! Example kernels of warp operations: shuffles, votes, matches and warp reductions, and
//! warp calls that are wrong on purpose for the simulator's checks.

use berth::prelude::*;
use berth::warp::FULL_MASK;

/// Values per thread that [`warp_lanes`] writes.
pub const WARP_LANES_OUT: usize = 12;

/// Every warp collective on `u32` values, one result each per thread into
/// `out[i * WARP_LANES_OUT..]`: `shfl_idx` from lane `(7 * lane + 3) % 32`, `shfl_up` by 3,
/// `shfl_down` by 5, `shfl_xor` with 9, the ballot of `v % 3 == 0`, `all(v % 64 != 0) |
/// any(v % 32 == 0) << 1`, `match_any(v % 4)`, `match_all` (of a constant in even blocks, of
/// `v & 1` in odd ones), the warp's wrapping sum, unsigned minimum and signed maximum, and
/// the active mask. Launch over whole warps; threads past `x` take part with `v = 0`.
#[gpu_kernel]
pub fn warp_lanes(x: &[u32], out: &mut [u32]) {
    let i = thread::index();
    let v = if i < x.len() { x[i] } else { 0 };
    let lane = warp::lane_id() as u32;
    let m = FULL_MASK;
    let odd = block::idx_x() % 2 == 1;
    let r: [u32; WARP_LANES_OUT] = [
        warp::shfl_idx(m, v, 7 * lane + 3),
        warp::shfl_up(m, v, 3),
        warp::shfl_down(m, v, 5),
        warp::shfl_xor(m, v, 9),
        warp::ballot(m, v % 3 == 0),
        u32::from(warp::all(m, v % 64 != 0)) | u32::from(warp::any(m, v % 32 == 0)) << 1,
        warp::match_any(m, v % 4),
        warp::match_all(m, if odd { v & 1 } else { 5 }),
        warp::reduce_sum(m, v),
        warp::reduce_min(m, v),
        warp::reduce_max(m, v as i32) as u32,
        warp::active_mask(),
    ];
    if i < x.len() {
        for (j, r) in r.into_iter().enumerate() {
            // SAFETY: thread `i` (its own index) writes elements `i * WARP_LANES_OUT ..` up to
            // the next multiple, which no other thread's index reaches (`j < WARP_LANES_OUT`).
            unsafe { out.write(i * WARP_LANES_OUT + j, r) };
        }
    }
}

/// 64-bit and float shuffles: `wide[i]` gets `x` of lane `31 - lane` (`f64`), `ints[i]`
/// gets `y` of lane `lane - 2` (`i64`, lanes 0 and 1 keep theirs), and lane 0 of each warp
/// writes the warp's `f32` sum, minimum and maximum of `z` to `stats[3 * warp..]`, summed
/// by butterfly shuffles (lane `l` adds lane `l ^ 16`, then `l ^ 8`, … `l ^ 1`). Launch over
/// whole warps; threads past the inputs take part with zeros.
#[gpu_kernel]
pub fn warp_wide(
    x: &[f64],
    y: &[i64],
    z: &[f32],
    wide: &mut [f64],
    ints: &mut [i64],
    stats: &mut [f32],
) {
    let i = thread::index();
    let lane = warp::lane_id() as u32;
    let xv = if i < x.len() { x[i] } else { 0.0 };
    let yv = if i < y.len() { y[i] } else { 0 };
    let zv = if i < z.len() { z[i] } else { 0.0 };
    let from_mirror = warp::shfl_idx(FULL_MASK, xv, 31 - lane);
    let from_below = warp::shfl_up(FULL_MASK, yv, 2);
    let sum = warp::reduce_sum(FULL_MASK, zv);
    let min = warp::reduce_min(FULL_MASK, zv);
    let max = warp::reduce_max(FULL_MASK, zv);
    if i < wide.len() {
        wide[i] = from_mirror;
    }
    if i < ints.len() {
        ints[i] = from_below;
    }
    let w = i / 32;
    if lane == 0 && i % 32 == 0 && 3 * w + 2 < stats.len() {
        // SAFETY: among threads whose own index `i` is a multiple of 32, `w = i / 32` is
        // unique: only this thread writes `3w .. 3w + 3`.
        unsafe {
            stats.write(3 * w, sum);
            stats.write(3 * w + 1, min);
            stats.write(3 * w + 2, max);
        }
    }
}

/// Each thread writes the ballot of its warp's active lanes and their count:
/// `out[2 * t] = ballot(active_mask(), true)`, `out[2 * t + 1]` the lanes counted by a warp
/// sum, for the block's linear thread `t` of block 0. With a block size that is not a
/// multiple of 32 the last warp is partial: only its lanes inside the block take part.
#[gpu_kernel]
pub fn warp_active(out: &mut [u32]) {
    let m = warp::active_mask();
    let b = warp::ballot(m, true);
    let n = warp::reduce_sum(m, 1u32);
    warp::sync_warp(m);
    let t = thread::linear_in_block();
    if block::idx_x() == 0 && block::idx_y() == 0 && block::idx_z() == 0 && 2 * t + 1 < out.len() {
        // SAFETY: in block 0 each thread has its own `t`, and writes elements `2t` and
        // `2t + 1` only; no other block writes.
        unsafe {
            out.write(2 * t, b);
            out.write(2 * t + 1, n);
        }
    }
}

/// Every lane votes with a mask naming only the next lane, not itself: PTX leaves that
/// undefined, so the call stops the launch with a located error on the GPU and the simulator
/// alike. Never returns normally.
#[gpu_kernel]
pub fn ballot_without_caller(out: &mut [u32]) {
    let i = thread::index();
    let next = 1u32 << ((warp::lane_id() + 1) % 32);
    let v = warp::ballot(next, true);
    if i < out.len() {
        out[i] = v;
    }
}

/// Warp calls that are wrong on purpose, for the simulator's checks (tests). Never launch
/// them on a GPU: they hang there or read undefined values.
pub mod broken {
    use berth::prelude::*;
    use berth::warp::FULL_MASK;

    /// Lanes 16..32 return; the others shuffle with a mask that names them.
    #[gpu_kernel]
    pub fn shfl_after_return(out: &mut [u32]) {
        let i = thread::index();
        if warp::lane_id() >= 16 {
            return;
        }
        let v = warp::shfl_xor(FULL_MASK, i.get() as u32, 1);
        if i < out.len() {
            out[i] = v;
        }
    }

    /// Lanes 0..16 shuffle among themselves but read lanes 16..32, outside their mask.
    #[gpu_kernel]
    pub fn shfl_outside_mask(out: &mut [u32]) {
        let i = thread::index();
        if warp::lane_id() < 16 {
            let v = warp::shfl_xor(0x0000_ffff, i.get() as u32, 16);
            if i < out.len() {
                out[i] = v;
            }
        }
    }

    /// Even lanes shuffle, odd lanes vote, all with the full mask.
    #[gpu_kernel]
    pub fn divergent_warp_calls(out: &mut [u32]) {
        let i = thread::index();
        let v = if warp::lane_id().is_multiple_of(2) {
            warp::shfl_xor(FULL_MASK, i.get() as u32, 2)
        } else {
            warp::ballot(FULL_MASK, true)
        };
        if i < out.len() {
            out[i] = v;
        }
    }

    #[inline(never)]
    fn swap_neighbours(v: u32) -> u32 {
        berth::warp::shfl_xor(FULL_MASK, v, 1)
    }

    /// Shuffles only through a helper the macro cannot see (not broken: the simulator finds
    /// `shfl.sync` in the PTX). `out[i] = i ^ 1`.
    #[gpu_kernel]
    pub fn hidden_shuffle(out: &mut [u32]) {
        let i = thread::index();
        let v = swap_neighbours(i.get() as u32);
        if i < out.len() {
            out[i] = v;
        }
    }
}
