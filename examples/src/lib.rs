//! The example kernels of berth. This crate is an ordinary library: the host build gets the
//! launchers (and type-checks every kernel body); `build.rs` builds the same source for the
//! GPU. The programs that call these kernels are in `src/bin/`; the kernels berth's own tests
//! need (wrong on purpose, failing on purpose, or covering one feature each) are in the
//! `berth-fixtures` crate (`fixtures/`).
//!
//! The compute-bound and half-precision kernels, the tensor-core kernels and the TPC-H queries' kernels are kernel
//! crates of their own (`berth-examples-compute` in `compute/`, `berth-examples-tensor` in
//! `tensor/`, `berth-examples-tpch` in `tpch/`), re-exported here under the same paths: a
//! crate's GPU build compiles the whole crate again after any edit, so kernels edited apart
//! rebuild quicker in crates apart
//! ([docs/kernel-language.md](../docs/kernel-language.md#rebuilding-after-an-edit)).

use berth::prelude::*;

// Host only: a kernel crate's GPU build cannot compile another kernel crate (what the
// builder injects for the GPU build reaches only the crate it builds).
#[cfg(not(target_arch = "nvptx64"))]
pub use berth_examples_compute::{compute, half_precision, plain};
#[cfg(not(target_arch = "nvptx64"))]
pub use berth_examples_tensor::{attention, attention_wgmma, tensor, wgmma_gemm};
#[cfg(not(target_arch = "nvptx64"))]
pub mod tpch;

#[cfg(all(feature = "cublas", not(target_arch = "nvptx64")))]
pub mod blas;
pub mod chain;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cli;
#[cfg(not(target_arch = "nvptx64"))]
pub mod graph;
pub mod language;
pub mod reexport;

/// `y[i] = a * x[i] + y[i]`.
#[gpu_kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] += a * x[i];
    }
}

/// Threads per block of [`block_sum`]; the shared array below holds one partial sum each.
pub const REDUCE_BLOCK: u32 = 256;

/// The sum of `v` over the threads of the block: each thread stores its value in its slot
/// of `tile`, then a tree reduction in shared memory, with a barrier between levels. All
/// threads get the total.
///
/// Stops the launch with a message unless the block is one-dimensional, with a power-of-two
/// number of threads no more than `tile.len()`.
///
/// # Safety
/// Every thread of the block calls it, together, and no thread accesses `tile` otherwise
/// from the barrier before the call to the barrier after it (the function ends with every
/// thread reading slot 0).
#[inline(always)]
pub unsafe fn block_tree_sum(tile: Shared<f32>, v: f32) -> f32 {
    let (t, n) = (thread::idx_x(), block::dim_x());
    if block::dim_y() * block::dim_z() != 1 || !n.is_power_of_two() || n > tile.len() {
        fail("block_tree_sum: the block must be 1D, of 2^k threads, no more than the tile");
    }
    // SAFETY: thread `t` (unique: the block is one-dimensional, checked above) writes only
    // slot `t < len`, and nothing else touches the tile in this interval (the caller's
    // contract), so after the barrier every slot below `n` is written. At each level, thread
    // `t < half` reads slots `t` and `t + half` and writes slot `t`, which no other thread
    // reads or writes at this level (the others read slots `t' + half >= half`); a barrier
    // ends each level. The last read of slot 0 follows the last barrier, after which no
    // thread of the function writes.
    unsafe {
        tile.write(t, v);
        sync_threads();
        let mut half = n / 2;
        while half > 0 {
            if t < half {
                tile.write(t, tile.read(t) + tile.read(t + half));
            }
            sync_threads();
            half /= 2;
        }
        tile.read(0)
    }
}

/// Sum of `x`, one partial sum per block into `partial[block]`: a grid-stride loop
/// accumulates, then a tree reduction in shared memory combines the block's threads.
/// Launch with `REDUCE_BLOCK` threads per block and `partial.len()` blocks.
#[gpu_kernel]
pub fn block_sum(x: &[f32], #[per_block] partial: &mut [f32]) {
    let tile = shared_array!(TILE: [f32; 256]);
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    let stride = thread::grid_stride_x();
    while i < x.len() {
        acc += x[i];
        i += stride;
    }
    // SAFETY: every thread of the block calls it once (no early exit before it), and
    // nothing else touches `tile`.
    let total = unsafe { block_tree_sum(tile, acc) };
    if let Some(slot) = partial.mine() {
        *slot = total;
    }
}

/// As [`block_sum`], with the block's tile in dynamic shared memory: launch with
/// `Grid::new(blocks, threads).shared_bytes(threads * 4)`, any power-of-two `threads`.
#[gpu_kernel]
pub fn block_sum_dynamic(x: &[f32], #[per_block] partial: &mut [f32]) {
    let tile = dynamic_shared::<f32>();
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    while i < x.len() {
        acc += x[i];
        i += thread::grid_stride_x();
    }
    // SAFETY: every thread of the block calls it once (no early exit before it), and
    // nothing else touches the dynamic shared memory.
    let total = unsafe { block_tree_sum(tile, acc) };
    if let Some(slot) = partial.mine() {
        *slot = total;
    }
}

/// saxpy on pinned host memory: `x` is copied to the GPU before the kernel, `y` there and
/// back, all asynchronously on the launch's stream from pooled staging buffers.
#[gpu_kernel]
pub fn saxpy_pinned(a: f32, #[pinned_async] x: &[f32], #[pinned_async] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] += a * x[i];
    }
}

/// Four floats loaded as one 16-byte access (`ld.v4`) when copied field by field (a copy of
/// the whole struct is two 8-byte accesses): the unit of wide, coalesced reads.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
pub struct F4 {
    /// Lane 0.
    pub x: f32,
    /// Lane 1.
    pub y: f32,
    /// Lane 2.
    pub z: f32,
    /// Lane 3.
    pub w: f32,
}

/// Threads per block of [`mapped_sum`].
pub const MAPPED_SUM_BLOCK: u32 = 256;

/// Sum of host memory read in place over the link (`#[mapped]`): a grid-stride loop of
/// 16-byte loads, then a shared-memory reduction; one partial sum per block.
#[gpu_kernel]
pub fn mapped_sum(#[mapped] x: &[F4], #[per_block] partial: &mut [f32]) {
    let tile = shared_array!(MAPPED_TILE: [f32; 256]);
    let mut acc = 0.0f32;
    let mut i = thread::global_x();
    while i < x.len() {
        let v = x[i];
        acc += (v.x + v.y) + (v.z + v.w);
        i += thread::grid_stride_x();
    }
    // SAFETY: every thread of the block calls it once (no early exit before it), and
    // nothing else touches `tile`.
    let total = unsafe { block_tree_sum(tile, acc) };
    if let Some(slot) = partial.mine() {
        *slot = total;
    }
}

#[inline(always)]
fn gather_into<T: core::ops::Index<usize, Output = f32> + ?Sized>(
    table: &T,
    idx: &[u32],
    out: &mut SliceMut<'_, f32>,
) {
    let i = thread::index();
    if i < idx.len() && i < out.len() {
        out[i] = table[idx[i.get()] as usize];
    }
}

/// `out[i] = table[idx[i]]` from a host table read in place (`#[mapped]`): only the touched
/// elements cross the link.
#[gpu_kernel]
pub fn gather_mapped(#[mapped] table: &[f32], idx: &[u32], out: &mut [f32]) {
    gather_into(&table, &idx, &mut out);
}

/// `out[i] = table[idx[i]]` from a table in device memory (the "copy it all first" strategy).
#[gpu_kernel]
pub fn gather_device(table: &[f32], idx: &[u32], out: &mut [f32]) {
    gather_into(&table, &idx, &mut out);
}

/// Compute-bound busy work: each thread runs `iters` dependent multiply-adds and writes the
/// result. Launched with few blocks it leaves most of the GPU idle, so two launches on two
/// streams can run side by side (the stream-overlap benchmark).
#[gpu_kernel]
pub fn busy(iters: u32, out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        let mut v = i.get() as f32 * 1e-6;
        let mut k = 0;
        while k < iters {
            v = v * 0.999_999 + 1e-7;
            k += 1;
        }
        out[i] = v;
    }
}

/// `y[i] = a * x[i] + 1`: the streaming transform. `elementwise`: element `i` of `y` depends
/// only on element `i` of `x`, so `affine_one_pipelined` can cut both into chunks and overlap
/// copies in, compute and copies out over several streams.
#[gpu_kernel(elementwise)]
pub fn affine_one(a: f32, #[pinned_async] x: &[f32], #[pinned_async(out)] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] = a * x[i] + 1.0;
    }
}

/// A compute-heavy elementwise transform: `steps` dependent multiply-adds per element
/// (`v = v * 0.9999 + 0.0001`, from `v = x[i]`), to balance compute against transfers.
#[gpu_kernel(elementwise)]
pub fn relax(steps: u32, #[pinned_async] x: &[f32], #[pinned_async(out)] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        let mut v = x[i];
        let mut k = 0;
        while k < steps {
            v = v * 0.9999 + 0.0001;
            k += 1;
        }
        y[i] = v;
    }
}

/// `bins[x[i] % bins.len()] += 1` for every element, with atomic adds: first into a
/// per-block histogram in shared memory (up to 64 bins), then one global atomic add per
/// bin and block. Any block shape.
#[gpu_kernel]
pub fn histogram(x: &[u32], #[atomic] bins: &mut [u32]) {
    let local = shared_array!(HIST: [u32; 64]);
    let t = thread::linear_in_block();
    let nbins = bins.len().min(64);
    for k in (t..nbins).step_by(block::size()) {
        // SAFETY: thread `t` clears bins `t`, `t + threads`, …: each bin by one thread; the
        // atomics come after the barrier.
        unsafe { local.write(k, 0) };
    }
    // SAFETY: every thread of the block reaches both barriers: they are outside the loops,
    // and nothing returns before them. Bin `x[i] % nbins` was cleared before the first, so
    // each atomic updates a written value.
    unsafe {
        sync_threads();
        for i in thread::grid_stride(x.len()) {
            local.atomic_add(x[i] as usize % nbins, 1);
        }
        sync_threads();
    }
    for k in (t..nbins).step_by(block::size()) {
        // SAFETY: bin `k` was cleared and added to before the barrier; nobody writes it
        // after.
        bins.atomic_add(k, unsafe { local.read(k) });
    }
}

/// A job for [`square_worker`]: `stop != 0` tells the worker to exit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
pub struct Job {
    /// The caller's id, echoed in the reply.
    pub id: u32,
    /// Non-zero: stop.
    pub stop: u32,
    /// The input.
    pub value: f32,
}

/// A reply of [`square_worker`]: `value * value + 1` of the job with the same `id`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
pub struct Reply {
    /// The job's id.
    pub id: u32,
    /// The result.
    pub value: f32,
}

/// Cells of the worker's control signals.
pub mod worker_ctl {
    /// Cell 0: the worker's state (one of the constants below).
    pub const STATE: usize = 0;
    /// Cell 1: jobs answered, published when the worker ends.
    pub const ANSWERED: usize = 1;
    /// The worker is running.
    pub const RUNNING: u32 = 1;
    /// The worker received a stop job and exited.
    pub const STOPPED: u32 = 2;
    /// The host stopped answering; the worker gave up.
    pub const HOST_GONE: u32 = 3;
}

/// A persistent worker: one GPU thread stays resident, takes jobs from `inbox`, answers each
/// with `value * value + 1` in `outbox`, and exits on a stop job. If the host posts no job (or
/// takes no reply) for `patience_ms`, it records `HOST_GONE` and fails, so a lost partner ends
/// the launch with an error instead of a hang.
#[gpu_kernel]
pub fn square_worker(
    patience_ms: u32,
    #[mapped] inbox: &Inbox<Job>,
    #[mapped] outbox: &Outbox<Reply>,
    #[mapped] ctl: &Signals,
) {
    // One thread of the whole launch (thread 0 of block 0, whatever the grid's and the
    // block's shape) serves; every other returns.
    if thread::index() != 0 {
        return;
    }
    let patience = patience_ms as u64 * 1_000_000;
    ctl.store(worker_ctl::STATE, worker_ctl::RUNNING);
    let mut n = 0u32;
    loop {
        // Hold the reply's slot before waiting for the job: the wait for it (a link round
        // trip) overlaps the host's turnaround instead of delaying the reply.
        // SAFETY: this thread is the only one of the launch past the check above (the
        // launch's thread numbers are distinct), and the kernel sends on `outbox` alone (and
        // receives on `inbox` alone).
        let Some(reply_slot) = (unsafe { outbox.reserve(n, patience) }) else {
            ctl.store(worker_ctl::ANSWERED, n);
            ctl.store(worker_ctl::STATE, worker_ctl::HOST_GONE);
            fail("the host took no reply in time");
        };
        // SAFETY: as for `reserve` above: the kernel's only receiver on `inbox`.
        let Some(job) = (unsafe { inbox.recv(n, patience) }) else {
            ctl.store(worker_ctl::ANSWERED, n);
            ctl.store(worker_ctl::STATE, worker_ctl::HOST_GONE);
            fail("the host posted no job in time")
        };
        if job.stop != 0 {
            ctl.store(worker_ctl::ANSWERED, n);
            ctl.store(worker_ctl::STATE, worker_ctl::STOPPED);
            return;
        }
        reply_slot.publish(Reply {
            id: job.id,
            value: job.value * job.value + 1.0,
        });
        // The count is published when the worker ends, not per job: a system-scope release
        // store per job would wait for the reply to reach the host first and cost throughput.
        n = n.wrapping_add(1);
    }
}

/// Bare flag round trips with the host, no mailbox: for `n` in `1..=rounds` one GPU thread
/// waits until the host raises `s[0]` to `n`, then answers by setting `s[1] = n`. Fails if the
/// host raises nothing for `patience_ms`.
#[gpu_kernel]
pub fn ping_pong(rounds: u32, patience_ms: u32, #[mapped] s: &Signals) {
    // One thread of the whole launch (thread 0 of block 0, whatever the grid's and the
    // block's shape) serves; every other returns.
    if thread::index() != 0 {
        return;
    }
    let patience = patience_ms as u64 * 1_000_000;
    let mut n = 1;
    while n <= rounds {
        if s.wait(0, |v| v == n, patience).is_none() {
            fail("the host raised no ping in time");
        }
        s.store(1, n);
        n += 1;
    }
}

/// A long-running sum that reports live progress: `rounds` passes over `x` per block (the
/// result is `rounds × sum(x)`), one partial sum per block, and each block, once done, adds 1
/// to `progress[0]` for the host to watch.
#[gpu_kernel]
pub fn sum_with_progress(
    rounds: u32,
    x: &[f32],
    #[per_block] partial: &mut [f32],
    #[mapped] progress: &Signals,
) {
    let tile = shared_array!(PROGRESS_TILE: [f32; 256]);
    let mut acc = 0.0f32;
    let mut r = 0;
    while r < rounds {
        let mut i = thread::global_x();
        while i < x.len() {
            acc += x[i];
            i += thread::grid_stride_x();
        }
        r += 1;
    }
    // SAFETY: every thread of the block calls it once (no early exit before it), and
    // nothing else touches `tile`.
    let total = unsafe { block_tree_sum(tile, acc) };
    if let Some(slot) = partial.mine() {
        *slot = total;
        progress.add(0, 1);
    }
}

/// Sparse embedding lookup: `out[b] = table[ids[b]]` for rows of `dim4` × 4 floats, reading
/// the table in place from host memory (`#[mapped]`). One thread per 16 bytes of output:
/// consecutive threads read consecutive parts of one row, so each row is fetched with wide,
/// coalesced reads, and only the rows asked for cross the link.
#[gpu_kernel]
pub fn embedding_gather(dim4: u32, #[mapped] table: &[F4], ids: &[u32], out: &mut [F4]) {
    let d = dim4 as usize;
    gather_rows(d, &ids, &mut out, |id, j| &table[id * d + j]);
}

/// [`embedding_gather`] from a table in device memory (the "copy it all first" strategy).
#[gpu_kernel]
pub fn embedding_gather_device(dim4: u32, table: &[F4], ids: &[u32], out: &mut [F4]) {
    let d = dim4 as usize;
    gather_rows(d, &ids, &mut out, |id, j| &table[id * d + j]);
}

/// [`embedding_gather`] from a host table placed by the cost model (`#[auto]`), from the
/// launch's access hint (`Touch::Rows`).
#[gpu_kernel]
pub fn embedding_gather_auto(dim4: u32, #[auto] table: &[F4], ids: &[u32], out: &mut [F4]) {
    let d = dim4 as usize;
    gather_rows(d, &ids, &mut out, |id, j| &table[id * d + j]);
}

/// [`embedding_gather`] through a hot tier: the kernel reads each row by its id
/// (`#[auto] table: &Rows<F4>`), from the tier's device memory where the row is resident
/// there, else from the host table in place; the ids are read in place too. One thread per 16
/// bytes of output.
#[gpu_kernel]
pub fn embedding_gather_rows(#[auto] table: &Rows<F4>, #[mapped] ids: &[u32], out: &mut [F4]) {
    gather_rows(table.width(), &ids, &mut out, |id, j| &table.row(id)[j]);
}

/// An embedding bag with sum pooling, read through a hot tier: bag `b` sums the rows of
/// `ids[b * bag..(b + 1) * bag]`, `out[b] = Σ table[id]`, rows of `table.width()` groups of
/// four floats. Each row is read where the tier keeps it (device memory, else the host table in
/// place) and never written anywhere: the batch of rows a gather would write, and the pooling
/// read again, is never made. One thread per 16 bytes of output, summing its column of the bag
/// in order, four rows at a time (four reads in flight).
#[gpu_kernel]
pub fn embedding_bag_rows(
    bag: u32,
    #[auto] table: &Rows<F4>,
    #[mapped] ids: &[u32],
    out: &mut [F4],
) {
    let g = thread::index();
    let (d, n) = (table.width(), bag as usize);
    if d == 0 || g >= out.len() {
        return;
    }
    let (b, j) = (g.get() / d, g.get() % d);
    let first = b * n;
    let end = (first + n).min(ids.len());
    out[g] = pool(first, end, |i| &table.row(ids[i] as usize)[j]);
}

/// [`embedding_bag_rows`] as a newcomer writes it (the `bag_sum` of `docs/hot-tier.md`, body
/// for body): a plain `for` loop over the bag's ids, one row read and added at a time. Its
/// trip count is known only at run time, so LLVM leaves the loop rolled and each thread has
/// one 16-byte read in flight; [`embedding_bag_rows`] is the tuned form, which issues four
/// rows' reads before it adds the first. The sums are the same, added in the same order.
#[gpu_kernel]
pub fn embedding_bag_plain(
    bag: u32,
    #[auto] table: &Rows<F4>,
    #[mapped] ids: &[u32],
    out: &mut [F4],
) {
    let g = thread::index();
    let (d, n) = (table.width(), bag as usize);
    if d == 0 || g >= out.len() {
        return;
    }
    let (b, j) = (g.get() / d, g.get() % d);
    let mut acc = [0.0f32; 4];
    for i in b * n..(b * n + n).min(ids.len()) {
        // The row's elements: from device memory where the tier holds the row, else from
        // the host table in place. An id past the table stops the kernel with its location.
        let r = &table.row(ids[i] as usize)[j];
        let (x, y, z, w) = (r.x, r.y, r.z, r.w);
        acc = [acc[0] + x, acc[1] + y, acc[2] + z, acc[3] + w];
    }
    out[g] = F4 {
        x: acc[0],
        y: acc[1],
        z: acc[2],
        w: acc[3],
    };
}

/// The pooling of [`embedding_bag_rows`] over rows gathered first (a gather's output, `bag`
/// rows a bag of `dim4` groups of four floats): `out[b * dim4 + j] = Σ_k rows[(b * bag + k) *
/// dim4 + j]`, summed in the same order. One thread per 16 bytes of output.
#[gpu_kernel]
pub fn embedding_bag_sum(bag: u32, dim4: u32, rows: &[F4], out: &mut [F4]) {
    let g = thread::index();
    let (d, n) = (dim4 as usize, bag as usize);
    if d == 0 || g >= out.len() {
        return;
    }
    let (b, j) = (g.get() / d, g.get() % d);
    let first = b * n;
    let end = (first + n).min(rows.len() / d);
    out[g] = pool(first, end, |i| &rows[i * d + j]);
}

/// `Σ row(i)` for `i` in `first..end`, in order, four at a time: the four rows' reads are
/// issued before the first is added, so four are in flight. Each row is read field by field
/// (one 16-byte load; a copy of the whole struct is two 8-byte ones).
#[inline(always)]
fn pool<'r>(first: usize, end: usize, row: impl Fn(usize) -> &'r F4) -> F4 {
    let mut acc = [0.0f32; 4];
    let mut i = first;
    while i + 4 <= end {
        let (r0, r1, r2, r3) = (row(i), row(i + 1), row(i + 2), row(i + 3));
        let v = [
            [r0.x, r0.y, r0.z, r0.w],
            [r1.x, r1.y, r1.z, r1.w],
            [r2.x, r2.y, r2.z, r2.w],
            [r3.x, r3.y, r3.z, r3.w],
        ];
        for r in v {
            acc[0] += r[0];
            acc[1] += r[1];
            acc[2] += r[2];
            acc[3] += r[3];
        }
        i += 4;
    }
    while i < end {
        let r = row(i);
        let r = [r.x, r.y, r.z, r.w];
        acc[0] += r[0];
        acc[1] += r[1];
        acc[2] += r[2];
        acc[3] += r[3];
        i += 1;
    }
    F4 {
        x: acc[0],
        y: acc[1],
        z: acc[2],
        w: acc[3],
    }
}

/// One thread per 16 bytes of output: `out[b * d + j] = unit(ids[b], j)`, the `j`-th group of
/// four of row `ids[b]`, for rows of `d` groups.
#[inline(always)]
fn gather_rows<'t>(
    d: usize,
    ids: &[u32],
    out: &mut SliceMut<'_, F4>,
    unit: impl Fn(usize, usize) -> &'t F4,
) {
    let g = thread::index();
    if d == 0 || g >= out.len() {
        return;
    }
    let (b, j) = (g / d, g % d);
    if b < ids.len() {
        // Field by field: the four loads merge into one 16-byte access (`ld.global.v4.b32`),
        // where a copy of the whole struct is lowered to two 8-byte ones.
        let r = unit(ids[b] as usize, j);
        out[g] = F4 {
            x: r.x,
            y: r.y,
            z: r.z,
            w: r.w,
        };
    }
}

/// Latency probe: one thread follows `steps` links of `next` (a random cycle) in mapped host
/// memory, each read depending on the last, and writes where it ended. Time / `steps` is one
/// round trip over the link (the calibration's `mapped_latency_s`).
#[gpu_kernel]
pub fn mapped_chase(#[mapped] next: &[u32], steps: u32, out: &mut [u32]) {
    let me = thread::index();
    if me != 0 || next.is_empty() || out.is_empty() {
        return;
    }
    let mut i = 0usize;
    let mut s = 0;
    while s < steps {
        i = next[i] as usize;
        s += 1;
    }
    out[me] = i as u32;
}

/// `out[i] = table[idx[i]]` from a host table placed by the cost model (`#[auto]`): each
/// launch reads it in place or copies it in whole, from the launch's access hint.
#[gpu_kernel]
pub fn gather_auto(#[auto] table: &[f32], idx: &[u32], out: &mut [f32]) {
    gather_into(&table, &idx, &mut out);
}
