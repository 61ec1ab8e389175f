//! Kernels that break the contracts only the simulator checks — two threads on one element
//! of global, mapped or shared memory through `unsafe` accessors, an atomic meeting a plain
//! access in shared memory, an atomic or a read of shared memory nobody wrote, blocks sharing
//! an element through block-scoped atomics — each beside its correct version. `tests/tests/sim_checks.rs` runs them: the broken ones must be
//! reported with their source lines, the correct ones must pass.

use berth::device::atomic::Scope;
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

/// Thread `x` of a one-row block writes the 2 × 2 patch of the `2 × cols` matrix `out` whose
/// left column is `x` (`stride == 1`): neighbours overlap by a column, a race through a
/// [`TileMut`]. With `stride == 2` the patches are disjoint: the correct version.
#[gpu_kernel]
pub fn matrix_patches(stride: u32, out: &mut [u32]) {
    let x = thread::idx_x();
    let cols = out.len() / 2;
    if x * stride as usize + 2 <= cols {
        let mut m = out.matrix_mut(2, cols);
        let mut patch = m.tile_mut::<2, 2>(0, x * stride as usize);
        unroll! { for r in 0..2 {
            unroll! { for c in 0..2 {
                // SAFETY: with `stride >= 2` the patches of distinct threads are disjoint;
                // with `stride == 1` none — a deliberate race, for the simulator to report.
                unsafe { patch.write(r, c, x as u32) };
            } }
        } }
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
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
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

/// Every thread counts itself into `count[0]` with a block-scoped add: atomic among the
/// threads of a block, but the blocks share the element, and on the GPU an `atom.cta` is not
/// atomic with respect to another block (updates are lost).
#[gpu_kernel]
pub fn block_scoped_shared_counter(#[atomic] count: &mut [u32]) {
    if !count.is_empty() {
        // Wrong on purpose: every block updates element 0, so block scope is not enough — a
        // race between blocks, for the simulator to report.
        count.atomic_add_scoped(0, 1, Scope::Block);
    }
}

/// A correct version: each block counts into its own element, where block scope suffices.
#[gpu_kernel]
pub fn block_scoped_own_counter(#[atomic] count: &mut [u32]) {
    let b = block::idx_x();
    if b < count.len() {
        count.atomic_add_scoped(b, 1, Scope::Block);
    }
}

/// The other correct version: the blocks share element 0, updated at device scope.
#[gpu_kernel]
pub fn device_scoped_shared_counter(#[atomic] count: &mut [u32]) {
    if !count.is_empty() {
        count.atomic_add_scoped(0, 1, Scope::Device);
    }
}

/// Each block's histogram of `x % 16` in shared bins, added to `hist` — but nobody clears the
/// bins first: on the GPU they hold what an earlier block left there. The shared atomics
/// break their contract (the element written before the atomic).
#[gpu_kernel]
pub fn histogram_uncleared(x: &[u32], #[atomic] hist: &mut [u32]) {
    let bins = shared_array!(UNCLEARED_BINS: [u32; 16]);
    let (t, i) = (thread::idx_x(), thread::global_x());
    if i < x.len() {
        // SAFETY: none — wrong on purpose: no thread wrote the bin before this atomic, so
        // it adds to whatever the memory held, for the simulator to report.
        unsafe { bins.atomic_add(x[i] as usize % 16, 1) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
    if t < 16 && t < hist.len() {
        // SAFETY: none — wrong on purpose: nobody cleared bin `t`, so it may hold what an
        // earlier block left there (the atomics above already updated unwritten bins).
        hist.atomic_add(t, unsafe { bins.read(t) });
    }
}

/// The correct version: the bins are cleared, and a barrier orders that before the adds.
#[gpu_kernel]
pub fn histogram_cleared(x: &[u32], #[atomic] hist: &mut [u32]) {
    let bins = shared_array!(CLEARED_BINS: [u32; 16]);
    let (t, i) = (thread::linear_in_block(), thread::global_x());
    if t < 16 {
        // SAFETY: thread `t` clears only bin `t`; the atomics come after the barrier.
        unsafe { bins.write(t, 0) };
    }
    // SAFETY: every thread of the block reaches both barriers: they are outside the
    // branches. Bin `x[i] % 16` was cleared before the first, so the atomic adds to a
    // written value.
    unsafe {
        sync_threads();
        if i < x.len() {
            bins.atomic_add(x[i] as usize % 16, 1);
        }
        sync_threads();
    }
    if t < 16 && t < hist.len() {
        // SAFETY: bin `t` was cleared by thread `t` and added to before the barrier; nobody
        // writes it after.
        hist.atomic_add(t, unsafe { bins.read(t) });
    }
}

/// The correct version of `broken::shared_race`: one thread of the block writes the shared
/// element, and the barrier orders the write before every thread's read. `out[block]` = the
/// block's thread count.
#[gpu_kernel]
pub fn shared_one_writer(#[per_block] out: &mut [u32]) {
    let tile = shared_array!(ONE_WRITER_TILE: [u32; 32]);
    if thread::linear_in_block() == 0 {
        // SAFETY: only the block's first thread writes element 0; the reads come after the
        // barrier.
        unsafe { tile.write(0, block::size() as u32) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branch.
    unsafe { sync_threads() };
    // SAFETY: element 0 was written before the barrier; nobody writes it after.
    let n = unsafe { tile.read(0) };
    if let Some(slot) = out.mine() {
        *slot = n;
    }
}

/// Thread 0 of a block sets a shared flag with a plain write while the others add to it
/// atomically: an atomic and a plain access of one shared element.
#[gpu_kernel]
pub fn shared_flag_mixed(#[per_block] out: &mut [u32]) {
    let flag = shared_array!(MIXED_FLAG: [u32; 1]);
    if thread::idx_x() == 0 {
        // SAFETY: none — wrong on purpose: the other threads update the element atomically
        // in the same barrier interval, a race for the simulator to report.
        unsafe { flag.write(0, 1) };
    } else {
        // SAFETY: none — wrong on purpose, as above: the element is not written before the
        // atomic either (thread 0's write is in the same barrier interval).
        unsafe { flag.atomic_add(0, 1) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
    if let Some(slot) = out.mine() {
        // SAFETY: element 0 was written before the barrier; nobody writes it after.
        *slot = unsafe { flag.read(0) };
    }
}

/// Every thread writes its element of the dynamic shared array; after a barrier, thread 0
/// copies element `threads - 1 + skip` to `out[block]`. With `skip == 0` that is the last
/// thread's element; with `skip == 1` (and room for it) it is an element nobody wrote.
#[gpu_kernel]
pub fn dynamic_read_back(skip: u32, #[per_block] out: &mut [u32]) {
    let tile = dynamic_shared::<u32>();
    let t = thread::linear_in_block();
    if t < tile.len() {
        // SAFETY: thread `t` writes only element `t`.
        unsafe { tile.write(t, t as u32 + 1) };
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branch.
    unsafe { sync_threads() };
    let k = block::size() - 1 + skip as usize;
    if let Some(slot) = out.mine()
        && k < tile.len()
    {
        // SAFETY: with `skip == 0`, element `k` is the last thread's, written before the
        // barrier and not after. With `skip == 1` it is an element nobody wrote: wrong on
        // purpose, for the simulator to report.
        *slot = unsafe { tile.read(k) };
    }
}

/// Two shared arrays of one name in one scope are two arrays (as two `static`s of one name in
/// two blocks are in Rust): `out[i] = 1 + 2`. Not broken — the simulator must keep them apart.
#[gpu_kernel]
pub fn twin_arrays_in_one_scope(out: &mut [u32]) {
    let a = shared_array!(TWIN: [u32; 4]);
    let b = shared_array!(TWIN: [u32; 64]);
    let t = thread::linear_in_block();
    // SAFETY: thread `t` writes only element `t` of each array (bounds-checked).
    unsafe {
        if t < 4 {
            a.write(t, 1);
        }
        b.write(t, 2);
    }
    // SAFETY: every thread of the block reaches the barrier: no branch or return before it.
    unsafe { sync_threads() };
    let i = thread::index();
    if i < out.len() {
        // SAFETY: elements `t % 4` of `a` and `t` of `b` were written by threads `t % 4`
        // and `t` before the barrier (a block has at least `t + 1` threads); nobody writes
        // after.
        out[i] = unsafe { a.read(t % 4) + b.read(t) };
    }
}
