//! Kernels that break the contracts only the simulator checks — two threads on one element
//! of global, mapped or shared memory through `unsafe` accessors, an atomic meeting a plain
//! access in shared memory, a read of shared memory nobody wrote — each beside its correct
//! version. `tests/tests/sim_checks.rs` runs them: the broken ones must be reported with
//! their source lines, the correct ones must pass.

use berth::prelude::*;

/// Every thread writes element 0: a race between the threads of a block, and between
/// blocks.
#[gpu_kernel]
pub fn all_write_first(out: &mut [u32]) {
    if !out.is_empty() {
        // SAFETY: none — a deliberate race, for the simulator to report.
        unsafe { *out.get_unchecked_mut(0) = thread::global_x() as u32 };
    }
}

/// The correct version: each thread writes its own element.
#[gpu_kernel]
pub fn each_writes_own(out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = i.get() as u32;
    }
}

/// Thread `i` writes its own element `i` (safely), then reads its neighbour's element
/// `i ^ 1` with no barrier between: a write and a read of one element by two threads.
#[gpu_kernel]
pub fn read_neighbour_unsynced(out: &mut [u32], seen: &mut [u32]) {
    let o = thread::index();
    let i = o.get();
    if (i | 1) < out.len() && o < seen.len() {
        out[o] = i as u32 + 1;
        // SAFETY: none — `i ^ 1 < out.len()` (checked above), but its owner writes it
        // meanwhile: a deliberate race.
        seen[o] = unsafe { *out.get_unchecked(i ^ 1) };
    }
}

/// The correct version: a barrier between the write and the read (the neighbour is in the
/// same block when blocks have an even number of threads).
#[gpu_kernel]
pub fn read_neighbour_synced(out: &mut [u32], seen: &mut [u32]) {
    let o = thread::index();
    let i = o.get();
    let inside = (i | 1) < out.len() && o < seen.len();
    if inside {
        out[o] = i as u32 + 1;
    }
    sync_threads();
    if inside {
        // SAFETY: `i ^ 1 < out.len()`; its owner is in this block and wrote it before the
        // barrier; nobody writes it after.
        seen[o] = unsafe { *out.get_unchecked(i ^ 1) };
    }
}

/// [`all_write_first`] on mapped host memory: the race is the same wherever the memory lives.
#[gpu_kernel]
pub fn mapped_all_write_first(#[mapped] out: &mut [u32]) {
    if !out.is_empty() {
        // SAFETY: none — a deliberate race, for the simulator to report.
        unsafe { *out.get_unchecked_mut(0) = thread::idx_x() as u32 };
    }
}

/// Each block's histogram of `x % 16` in shared bins, added to `hist` — but nobody clears the
/// bins first: on the GPU they hold what an earlier block left there.
#[gpu_kernel]
pub fn histogram_uncleared(x: &[u32], #[atomic] hist: &mut [u32]) {
    let bins = shared_array!(UNCLEARED_BINS: [u32; 16]);
    let (t, i) = (thread::idx_x(), thread::global_x());
    if i < x.len() {
        bins.atomic_add(x[i] as usize % 16, 1);
    }
    sync_threads();
    if t < 16 && t < hist.len() {
        hist.atomic_add(t, bins.load(t));
    }
}

/// The correct version: the bins are cleared, and a barrier orders that before the adds.
#[gpu_kernel]
pub fn histogram_cleared(x: &[u32], #[atomic] hist: &mut [u32]) {
    let bins = shared_array!(CLEARED_BINS: [u32; 16]);
    let (t, i) = (thread::idx_x(), thread::global_x());
    if t < 16 {
        bins.store(t, 0);
    }
    sync_threads();
    if i < x.len() {
        bins.atomic_add(x[i] as usize % 16, 1);
    }
    sync_threads();
    if t < 16 && t < hist.len() {
        hist.atomic_add(t, bins.load(t));
    }
}

/// Thread 0 of a block sets a shared flag with a plain write while the others add to it
/// atomically: an atomic and a plain access of one shared element.
#[gpu_kernel]
pub fn shared_flag_mixed(#[per_block] out: &mut [u32]) {
    let flag = shared_array!(MIXED_FLAG: [u32; 1]);
    if thread::idx_x() == 0 {
        flag.store(0, 1);
    } else {
        flag.atomic_add(0, 1);
    }
    sync_threads();
    if let Some(slot) = out.mine() {
        *slot = flag.load(0);
    }
}

/// Every thread writes its element of the dynamic shared array; after a barrier, thread 0
/// copies element `blockDim - 1 + skip` to `out[block]`. With `skip == 0` that is the last
/// thread's element; with `skip == 1` (and room for it) it is an element nobody wrote.
#[gpu_kernel]
pub fn dynamic_read_back(skip: u32, #[per_block] out: &mut [u32]) {
    let tile = dynamic_shared::<u32>();
    let t = thread::idx_x();
    if t < tile.len() {
        tile.store(t, t as u32 + 1);
    }
    sync_threads();
    let k = block::dim_x() - 1 + skip as usize;
    if let Some(slot) = out.mine()
        && k < tile.len()
    {
        *slot = tile.load(k);
    }
}

/// Two shared arrays of one name in one scope are two arrays (as two `static`s of one name in
/// two blocks are in Rust): `out[i] = 1 + 2`. Not broken — the simulator must keep them apart.
#[gpu_kernel]
pub fn twin_arrays_in_one_scope(out: &mut [u32]) {
    let a = shared_array!(TWIN: [u32; 4]);
    let b = shared_array!(TWIN: [u32; 64]);
    let t = thread::idx_x();
    if t < 4 {
        a.store(t, 1);
    }
    b.store(t, 2);
    sync_threads();
    let i = thread::index();
    if i < out.len() {
        out[i] = a.load(t % 4) + b.load(t);
    }
}
