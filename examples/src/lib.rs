//! The example kernels of berth. This crate is an ordinary library: the host build gets the
//! launchers (and type-checks every kernel body); `build.rs` builds the same source for the
//! GPU. The programs that call these kernels are in `src/bin/`.

use berth::prelude::*;

pub mod atomics;
pub mod chain;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cli;
pub mod compute;
pub mod half_precision;
pub mod language;
pub mod reexport;
pub mod sim_checks;
pub mod warp_ops;

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

/// Reads `x[i]` for every thread's global index `i`, without a length guard: launched over
/// more threads than elements it panics on the GPU (used to test the panic path).
#[gpu_kernel]
pub fn unchecked_copy(x: &[u32], out: &mut [u32]) {
    let i = thread::index();
    out[i] = x[i];
}

/// Parameters of [`affine_clamp`], passed by value: a user `#[repr(C)]` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
pub struct Affine {
    /// Multiplier.
    pub scale: f32,
    /// Added after scaling.
    pub offset: f32,
    /// Results are clamped to `[-limit, limit]` when clamping is on.
    pub limit: f32,
}

/// `out[i] = scale * x[i] + offset`, clamped to `±limit` when `clamp` is set: a struct and a
/// `bool` by value.
#[gpu_kernel]
pub fn affine_clamp(p: Affine, clamp: bool, x: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() && i < x.len() {
        let v = p.scale * x[i] + p.offset;
        out[i] = if clamp { v.clamp(-p.limit, p.limit) } else { v };
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

/// A row-major `width`-wide matrix: `out[r][c] = a[r][c] + r * 1000 + c`, one thread per
/// element over a 2D grid (exercises the y indices).
#[gpu_kernel]
pub fn add_coordinates(width: u32, a: &[f32], out: &mut [f32]) {
    let c = thread::global_x();
    let r = thread::global_y();
    let w = width as usize;
    if c < w && r * w + c < out.len() {
        // SAFETY: thread (c, r) of the grid is the only one with these coordinates, and
        // `c < w` makes `r * w + c` one-to-one: no other thread touches this element.
        unsafe { out.write(r * w + c, a[r * w + c] + (r * 1000 + c) as f32) };
    }
}

/// `out[i] = x[i] / d`: with `d == 0` the division panics inside `core` (used to test that a
/// panic other than a bounds check ends the launch with an error naming the kernel).
#[gpu_kernel]
pub fn divide(d: u32, x: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < x.len() && i < out.len() {
        out[i] = x[i] / d;
    }
}

/// Copies `x` into `out`, asserting (with `gpu_assert!`) that every value is below `limit`:
/// a failing assertion comes back to the host with its file, line and message.
#[gpu_kernel]
pub fn copy_below(limit: u32, x: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < x.len() && i < out.len() {
        gpu_assert!(x[i] < limit, "value not below the limit");
        out[i] = x[i];
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

/// Four floats loaded as one 16-byte access (`ld.v4`): the unit of wide, coalesced reads.
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

/// Writes `out[i] = base + i` straight into mapped host memory: the host sees it after the
/// launch, with no copy.
#[gpu_kernel]
pub fn mapped_iota(base: u32, #[mapped] out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = base.wrapping_add(i.get() as u32);
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

/// `y[i] = x[i] * scale`, asserting every input is finite: a NaN makes the launch fail with
/// its location (used to test how a pipelined launch reports the failing chunk).
#[gpu_kernel(elementwise)]
pub fn scale_finite(scale: f32, #[pinned_async] x: &[f32], #[pinned_async] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        gpu_assert!(x[i].is_finite(), "input is not finite");
        y[i] = x[i] * scale;
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

/// Every thread takes a ticket: `out[i]` = the value of `counter[0]` it incremented (so
/// `out` is a permutation of `0..n`), and `sum[0]` accumulates `x[i]` with float atomics.
#[gpu_kernel]
pub fn tickets(
    x: &[f32],
    #[atomic] counter: &mut [u32],
    #[atomic] sum: &mut [f32],
    out: &mut [u32],
) {
    let i = thread::index();
    if i < out.len() && i < x.len() {
        out[i] = counter.atomic_add(0, 1);
        sum.atomic_add(0, x[i]);
    }
}

pub mod gated;

/// Kernels that are wrong on purpose, for the simulator's checks (tests). Never launch them
/// on a GPU: `half_barrier` would hang there.
pub mod broken {
    use berth::prelude::*;

    /// Every thread of a block writes the same shared element between two barriers: a race
    /// (`shared_one_writer` in `sim_checks` is the correct version).
    #[gpu_kernel]
    pub fn shared_race(#[per_block] out: &mut [u32]) {
        let tile = shared_array!(RACE_TILE: [u32; 32]);
        // SAFETY: none — wrong on purpose: every thread of the block writes element 0 in
        // one barrier interval, a race for the simulator to report.
        unsafe { tile.write(0, thread::idx_x() as u32) };
        // SAFETY: every thread of the block reaches the barrier: no branch around it.
        unsafe { sync_threads() };
        if let Some(slot) = out.mine() {
            // SAFETY: element 0 was written before the barrier; nobody writes it after.
            *slot = unsafe { tile.read(0) };
        }
    }

    /// Only the first 16 threads of each block reach the barrier: a call that breaks
    /// `sync_threads`' contract, for the simulator to report.
    #[gpu_kernel]
    pub fn half_barrier(out: &mut [u32]) {
        if thread::idx_x() < 16 {
            // SAFETY: none — wrong on purpose: the barrier is under a thread-dependent
            // condition, so half of the block never reaches it.
            unsafe { sync_threads() };
        }
        let i = thread::index();
        if i < out.len() {
            out[i] = 1;
        }
    }

    /// Every thread reaches a barrier, but the first 16 of each block another
    /// `sync_threads()` call than the rest: on the GPU a block's threads must meet at one
    /// barrier, for the simulator to report.
    #[gpu_kernel]
    pub fn split_barrier(out: &mut [u32]) {
        if thread::idx_x() < 16 {
            // SAFETY: none — wrong on purpose: the other half of the block waits at the
            // barrier below, not this one.
            unsafe { sync_threads() };
        } else {
            // SAFETY: none — wrong on purpose, as above.
            unsafe { sync_threads() };
        }
        let i = thread::index();
        if i < out.len() {
            out[i] = 3;
        }
    }

    /// The block barrier, from a function the kernel's body calls.
    ///
    /// # Safety
    /// As [`sync_threads`]: every thread of the block that has not exited calls it, from
    /// the same call site, the same number of times.
    #[inline(never)]
    unsafe fn wait_for_block() {
        // SAFETY: every thread of the block reaches this call (the caller's contract).
        unsafe { sync_threads() };
    }

    /// Calls `sync_threads` only through a helper the macro cannot see (not broken: the
    /// simulator finds the barrier in the PTX).
    #[gpu_kernel]
    pub fn hidden_barrier(out: &mut [u32]) {
        // SAFETY: every thread of the block calls it once: it is the body's first statement,
        // under no branch.
        unsafe { wait_for_block() };
        let i = thread::index();
        if i < out.len() {
            out[i] = 2;
        }
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
    if thread::global_x() != 0 {
        return;
    }
    let patience = patience_ms as u64 * 1_000_000;
    ctl.store(worker_ctl::STATE, worker_ctl::RUNNING);
    let mut n = 0u32;
    loop {
        // Hold the reply's slot before waiting for the job: the wait for it (a link round
        // trip) overlaps the host's turnaround instead of delaying the reply.
        // SAFETY: this thread is the only one of the grid past the check above, and the
        // kernel sends on `outbox` alone (and receives on `inbox` alone).
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

/// Answers messages `first .. first + count` of `inbox` with `value + 1` in `outbox`, from one
/// GPU thread, and sets `ctl[0]` to 1 while it runs and 2 once it is done. A mailbox's message
/// numbers go on across launches: consecutive launches on one mailbox each take their range,
/// and a launch on another stream that takes the same mailbox runs after the one before it,
/// never beside it. Fails if the host posts nothing (or takes no reply) for `patience_ms`.
#[gpu_kernel]
pub fn relay(
    first: u32,
    count: u32,
    patience_ms: u32,
    #[mapped] inbox: &Inbox<u32>,
    #[mapped] outbox: &Outbox<u32>,
    #[mapped] ctl: &Signals,
) {
    if thread::global_x() != 0 {
        return;
    }
    let patience = patience_ms as u64 * 1_000_000;
    ctl.store(0, 1);
    for n in first..first.wrapping_add(count) {
        // SAFETY: this thread is the only one of the grid past the check above, and the
        // kernel receives on `inbox` alone and sends on `outbox` alone.
        let Some(v) = (unsafe { inbox.recv(n, patience) }) else {
            fail("the host posted no message in time")
        };
        // SAFETY: as above.
        if !unsafe { outbox.send(n, v.wrapping_add(1), patience) } {
            fail("the host took no reply in time")
        }
    }
    ctl.store(0, 2);
}

/// Bare flag round trips with the host, no mailbox: for `n` in `1..=rounds` one GPU thread
/// waits until the host raises `s[0]` to `n`, then answers by setting `s[1] = n`. Fails if the
/// host raises nothing for `patience_ms`.
#[gpu_kernel]
pub fn ping_pong(rounds: u32, patience_ms: u32, #[mapped] s: &Signals) {
    if thread::global_x() != 0 {
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
    gather_rows(dim4, &table, &ids, &mut out);
}

/// [`embedding_gather`] from a table in device memory (the "copy it all first" strategy).
#[gpu_kernel]
pub fn embedding_gather_device(dim4: u32, table: &[F4], ids: &[u32], out: &mut [F4]) {
    gather_rows(dim4, &table, &ids, &mut out);
}

/// [`embedding_gather`] from a host table placed by the cost model (`#[auto]`), from the
/// launch's access hint (`Touch::Rows`).
#[gpu_kernel]
pub fn embedding_gather_auto(dim4: u32, #[auto] table: &[F4], ids: &[u32], out: &mut [F4]) {
    gather_rows(dim4, &table, &ids, &mut out);
}

/// One thread per 16 bytes of output: `out[b * d + j] = table[ids[b] * d + j]`.
#[inline(always)]
fn gather_rows<T: core::ops::Index<usize, Output = F4> + ?Sized>(
    dim4: u32,
    table: &T,
    ids: &[u32],
    out: &mut SliceMut<'_, F4>,
) {
    let g = thread::index();
    let d = dim4 as usize;
    if d == 0 || g >= out.len() {
        return;
    }
    let (b, j) = (g / d, g % d);
    if b < ids.len() {
        out[g] = table[ids[b] as usize * d + j];
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
