//! A device-resident hot tier over a host table read in place ([`HotTier`]): the rows read
//! most stay in device memory within a byte budget, the others are read from mapped host
//! memory by the same kernel, which looks each row up in a slot table (row → device slot, or
//! not resident).
//!
//! Counting is on the host, from the ids each gather is given: the host has them anyway (it
//! checks them against the table before anything is queued), so counting costs one increment
//! per counted id and no device memory or read-back; and the policy, which runs on the host,
//! reads the counts where they are. The counts decay (halve) at every refresh, so the tier
//! follows a hot set that drifts. Which rows were missed is found on the device instead, where
//! the gather reads the slot table anyway: each missed row is logged once (a compare-and-swap
//! on its slot table entry) into a place of a miss log, to which a refresh granted a free
//! slot; a second kernel after the gather copies the row into that slot and names it in the
//! slot table, so the next gathers read it from the tier; the next refresh that reads the log
//! settles it. Found on the host, it would cost a random read into a table of one bit per
//! row for every id of every batch.
//!
//! The ranking (which rows to admit and evict, and where) is host work that grows with the
//! rows logged and counted since the last refresh. [`HotTier::begin_refresh`] hands it to a
//! thread of its own, with everything it reads and writes (the counts, the host's records of
//! the slots, the miss logs' device buffers, which it reads once the gathers that wrote them
//! are done), and gathers go on meanwhile, logging their misses into a second log with slots
//! of its own; the first gather that finds it done queues its kernels before its own.
//!
//! Ordering is the runtime's use tracking, as for any launch: a gather reads the tier (a
//! shared use) and claims slot table entries and writes the miss log (exclusive uses); a
//! refresh reads the log (on the host) and writes the tier and the slot table (the fill and
//! update kernels). Work queued on a stream waits on the GPU for the conflicting work of
//! other streams, and host writes wait for the GPU work that reads what they overwrite, so a
//! gather in flight always reads the slot table and the tier rows it was queued against,
//! whatever is refreshed after it, and whatever guard is leaked.

use crate::args::MappedArg;
use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::host_mem::{MappedBuffer, PinnedBuffer};
use crate::launch::builder::Launch;
use crate::launch::grid::Grid;
use crate::launch::pending::Pending;
use crate::own_kernels::{
    FILL_U32, HOT_CAPTURE, HOT_FILL, HOT_GATHER, HOT_SCATTER, HOT_SLOTS, HOT_UNIT, NOT_RESIDENT,
    PENDING, probe_word,
};
use crate::placement::gather::{GatherAccess, GatherChoice, GatherDecision, decide_gather};
use crate::queue::Queue;
use berth_device::DeviceCopy;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

mod stagers;
#[cfg(test)]
use stagers::copy_max;
use stagers::{Sample, Stagers};

/// Entries of a miss log at most, by default (4 MiB).
const LOG_MAX: usize = 1 << 20;

/// With room for captures, a log holds free places up to twice the places the gathers took
/// in its role since the last ranking, and at least this many.
const FREE_PLACES_MIN: usize = 1 << 12;

/// Entries of a miss log at most with room for captures ([`HotTier::capture_room`]): 16 MiB.
const ROOM_MAX: usize = 1 << 22;

/// Words of a tier's miss counters: the gather's 32 counters, 16 words (128 bytes) apart
/// ([`HOT_GATHER`]).
const MISS_COUNTER_WORDS: usize = 32 * 16;

/// The doorkeeper of [`HotTier::admit_on_repeat`] forgets every this many refreshes.
const DOORKEEPER_REFRESHES: u64 = 16;

/// Device buffers of ids kept for gathers that may still be queued: a gather's ids live
/// until this many later gathers have been queued (then freeing them waits for it).
const IDS_IN_FLIGHT: usize = 4;

/// The most parts a batch is staged in ([`HotTier::staging_parts`]).
const MAX_STAGING_PARTS: usize = 8;

/// The parts a large batch is staged in by default ([`HotTier::staging_parts`]).
const DEFAULT_PARTS: usize = 2;

/// The most threads that stage a part together ([`HotTier::staging_threads`]).
const MAX_STAGING_THREADS: usize = 8;

/// The threads that stage a part together by default ([`HotTier::staging_threads`]): the
/// gathering thread and two helpers on a host of at least [`TWO_HELPER_CORES`] cores, one
/// helper on a host of at least [`HELPER_CORES`], else the gathering thread alone.
const DEFAULT_STAGING_THREADS: usize = 3;

/// The fewest cores of a host on which a tier has a staging helper by default.
const HELPER_CORES: usize = 4;

/// The fewest cores of a host on which a tier has two staging helpers by default.
const TWO_HELPER_CORES: usize = 16;

/// The host's cores, as the system reports them (1 where it does not).
fn host_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The staging threads a new tier has on a host of `cores` cores: a helper spins while
/// batches come, which on a host of few cores takes one from the threads that simulate or
/// rank ([`DEFAULT_STAGING_THREADS`]).
fn default_staging_threads(cores: usize) -> usize {
    if cores >= TWO_HELPER_CORES {
        DEFAULT_STAGING_THREADS
    } else if cores >= HELPER_CORES {
        2
    } else {
        1
    }
}

/// The fewest counted ids a gather hands to the counting thread: fewer wait in `deferred`
/// for the next gathers' (a refresh, or `count`, takes them all), so that the thread and the
/// host's threads it adds them with are woken once in a few batches, not at every one.
const HAND_OVER_IDS: usize = 1 << 14;

/// The fewest ids of each part of a batch staged in parts ([`HotTier::parts`]).
const PART_IDS: usize = 1 << 13;

/// Whether bit `id` of `bits` is set.
fn bit(bits: &[u64], id: u32) -> bool {
    bits[id as usize / 64] & (1 << (id % 64)) != 0
}

/// Set (`on`) or clear bit `id` of `bits`.
fn set_bit(bits: &mut [u64], id: u32, on: bool) {
    let (word, mask) = (id as usize / 64, 1u64 << (id % 64));
    if on {
        bits[word] |= mask;
    } else {
        bits[word] &= !mask;
    }
}

/// Set (with `on`) or clear bit `id` of `bits` for each id of `ids`, by the host's threads
/// together (the caller's pool): each a random write into an array far larger than the
/// caches.
fn set_bits_together(bits: &mut [u64], ids: &[u32], on: bool) {
    use rayon::prelude::*;
    let bits = atomic_bits(bits);
    ids.par_iter().for_each(|&id| {
        let (word, mask) = (&bits[id as usize / 64], 1u64 << (id % 64));
        if on {
            word.fetch_or(mask, Ordering::Relaxed);
        } else {
            word.fetch_and(!mask, Ordering::Relaxed);
        }
    });
}

/// `n` copies of `value` on huge pages where the operating system grants them. The tier's
/// per-row arrays are read and written at random, one access per counted id: with 4 KiB
/// pages almost every access to an array of many millions of rows misses the TLB, which costs
/// about 1.4 µs an access on a virtual machine (64 Mi random counters, 4,096 increments: 5.7 ms
/// with 4 KiB pages, 0.07 ms with 2 MiB ones).
fn huge_vec<T: Copy>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    // Advised before the first write, so that the pages are faulted in huge.
    #[cfg(target_os = "linux")]
    advise_huge_pages(v.spare_capacity_mut());
    v.resize(n, value);
    v
}

/// Ids per row range of [`Policy::add_all`]: fewer than two ranges' worth are added in order
/// on the calling thread.
const ADD_PER_SHARD: usize = 512;

/// The most row ranges [`Policy::add_all`] splits ids into (more than the host's threads, so
/// that the ranges a skewed law reads most are spread over them).
const ADD_SHARDS: usize = 256;

/// How many ids ahead [`Policy::add_all`] fetches an id's entries.
const PREFETCH_AHEAD: usize = 16;

/// Ask the CPU to fetch the cache line of `v[i]` (nothing where `i` is out of bounds, or on
/// other architectures): a hint, which changes no state of the program.
#[inline(always)]
fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(i) {
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 target has; it reads nothing
        // into the program and cannot fault, and `x` is a valid reference besides.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// Ask Linux to back the whole 2 MiB extents of `v` with huge pages (transparent huge pages
/// in `madvise` mode, or `always`); a refusal leaves 4 KiB pages, said at `debug` level.
#[cfg(target_os = "linux")]
fn advise_huge_pages<T>(v: &[T]) {
    const HUGE: usize = 2 << 20;
    let start = v.as_ptr() as usize;
    let (first, end) = (
        start.next_multiple_of(HUGE),
        (start + size_of_val(v)) / HUGE * HUGE,
    );
    if end <= first {
        return;
    }
    // SAFETY: [first, end) is a page-aligned range inside `v`'s allocation, borrowed here;
    // MADV_HUGEPAGE only advises how to back the pages and changes no byte of them.
    let r = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    if r != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "hot tier: no huge pages for a per-row array"
        );
    }
}

/// Run `work` on the host's threads for a tier's work beside its gathers (ranking, counting):
/// a pool of as many threads fewer than the host's cores as a tier stages with by default
/// (at least one), shared by every tier, so that the thread that stages and queues the
/// gathers and its staging helpers keep their cores. With the ranking on every core, a
/// 16-core host staged each batch in about three times its time (150 µs against 55 for
/// 65,536 ids). Where no such pool can be started, the process's own pool.
fn beside_gathers<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let cores = host_cores();
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(default_staging_threads(cores)).max(1))
            .thread_name(|i| format!("berth-hot-tier-{i}"))
            .build()
            .inspect_err(|e| tracing::debug!(error = %e, "hot tier: no pool of its own"))
            .ok()
    });
    match pool {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// Ids per host task: enough to amortise a task, few enough to spread a batch over cores.
const CHUNK: usize = 2048;

/// The share of the rows not resident that host threads gather by default, in 1/1024ths:
/// none. On the H200 machine (16 cores, a 64 GiB table of pinned 4 KiB pages) the host's
/// threads gathered random rows at 15–27 M rows/s, no faster than the GPU's reads in place,
/// and a tier gathering half its misses on the host ran slower than one leaving them all to
/// the GPU (docs/hot-tier.md).
const DEFAULT_HOST_SHARE: u32 = 0;

/// Copy row `ids[p]` of `table` into row `k` of `stage`, for each `p = pos[k]`, with the
/// host's threads.
fn copy_rows<T: DeviceCopy, M: MappedArg<T>>(
    table: &M,
    ids: &[u32],
    pos: &[u32],
    stage: &mut [T],
    width: usize,
) {
    use rayon::prelude::*;
    // Rows are copied as bytes: a `DeviceCopy` type has no padding (checked here for generic
    // ones) and no pointers, so every byte of a value is initialised, and bytes copied from a
    // value are that value.
    let () = T::__BERTH_NO_PADDING;
    let row = width * std::mem::size_of::<T>();
    let table = table.__arg();
    // SAFETY: `table.host` is the host address of the table's `table.bytes` bytes (host
    // memory the tier owns, or an immutable shared buffer), every one initialised (above);
    // nothing writes them while the tier holds the table (`HotTier::table` lends it
    // read-only), and the GPU only reads them.
    let table: &[u8] = unsafe { std::slice::from_raw_parts(table.host as *const u8, table.bytes) };
    let stage = &mut stage[..pos.len() * width];
    // SAFETY: the same memory as `stage`'s elements, borrowed from it mutably; the bytes
    // written are copies of a table row's, so the elements stay values of T (above).
    let stage: &mut [u8] = unsafe {
        std::slice::from_raw_parts_mut(
            stage.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(stage),
        )
    };
    stage
        .par_chunks_mut(row)
        .zip(pos.par_iter())
        .with_min_len(64)
        .for_each(|(dst, &p)| {
            let at = ids[p as usize] as usize * row;
            dst.copy_from_slice(&table[at..at + row]);
        });
}

/// The shape of a tier's fills ([`HOT_FILL`]): rows of `units` 16-byte units, ids below `rows`,
/// slots below `capacity`.
struct Fill {
    units: usize,
    rows: usize,
    capacity: usize,
}

impl Fill {
    /// Queue a fill of `n` rows: host rows `ids[..n]` of `table` into slots `dst[..n]` of
    /// `tier`.
    fn queue<'l, T: DeviceCopy, M: MappedArg<T>>(
        &self,
        queue: &'l impl Queue,
        table: &'l M,
        (ids, dst): (&'l DeviceBuffer<u32>, &'l DeviceBuffer<u32>),
        n: usize,
        tier: &'l mut DeviceBuffer<T>,
    ) -> Result<Pending<'l>> {
        let mut l = Launch::new(queue, &HOT_FILL, Grid::cover(n * self.units))?;
        l.scalar(&(self.units as u64));
        l.scalar(&(self.rows as u64));
        l.scalar(&(self.capacity as u64));
        l.mapped(table);
        l.device_prefix(ids, n);
        l.device_prefix(dst, n);
        l.device_mut(tier);
        l.submit()
    }
}

/// Queue a slot table update ([`HOT_SLOTS`]) of `n` entries: `slots[ids[i]] = vals[i]`, for ids
/// below `rows`.
fn update_slots<'l>(
    queue: &'l impl Queue,
    rows: usize,
    (ids, vals): (&'l DeviceBuffer<u32>, &'l DeviceBuffer<u32>),
    n: usize,
    slots: &'l mut DeviceBuffer<u32>,
) -> Result<Pending<'l>> {
    let mut l = Launch::new(queue, &HOT_SLOTS, Grid::cover(n))?;
    l.scalar(&(rows as u64));
    l.device_prefix(ids, n);
    l.device_prefix(vals, n);
    l.device_mut(slots);
    l.submit()
}

/// Rows a whole tier's fill copies per launch ([`fill_whole`]).
const WHOLE_FILL_ROWS: usize = if cfg!(test) { 1000 } else { 1 << 20 };

/// Copy every row of `table` (`rows` rows of `units` 16-byte units) into the slot of its own
/// number in `tier`, and name it there in `slots`: a tier whose budget holds the whole table.
/// A fill and a slot table update per [`WHOLE_FILL_ROWS`] rows, reading the table in order
/// (so at the link's sequential rate), through one list of row numbers that serves as the
/// rows, their slots and their entries; waited for.
fn fill_whole<T: DeviceCopy, M: MappedArg<T>>(
    gpu: &Gpu,
    table: &M,
    rows: usize,
    units: usize,
    tier: &mut DeviceBuffer<T>,
    slots: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let mut list = gpu.alloc_zeroed::<u32>(rows.min(WHOLE_FILL_ROWS))?;
    let mut ids = Vec::with_capacity(list.len());
    for start in (0..rows).step_by(WHOLE_FILL_ROWS) {
        let end = (start + WHOLE_FILL_ROWS).min(rows);
        ids.clear();
        // Row numbers fit a u32: the tier refuses tables of `PENDING` rows or more.
        ids.extend(start as u32..end as u32);
        list.copy_prefix_from(&ids)?;
        let n = ids.len();
        let fill = Fill {
            units,
            rows,
            capacity: rows,
        };
        fill.queue(gpu, table, (&list, &list), n, tier)?.wait()?;
        update_slots(gpu, rows, (&list, &list), n, slots)?.wait()?;
    }
    Ok(())
}

/// The fewest looked-up ids a window of a tier's recent gathers needs for
/// [`HotTier::decision`] to read its hit rate from them.
const RECENT_LOOKUPS: u64 = 1 << 10;

/// Rows the row probe ([`row_read_rate`]) reads a run, at most.
const ROW_PROBE_ROWS: usize = 1 << 16;
/// Bytes of rows the row probe reads a run, at most (fewer rows of wide rows), and the
/// fewest rows it reads.
const ROW_PROBE_BYTES: usize = 64 << 20;
const ROW_PROBE_MIN_ROWS: usize = 1 << 10;

/// Random rows of `table` (`rows` rows of `units` 16-byte units, `width` elements) read in
/// place per second, as a gather's misses read them ([`probe_rows`]): two runs of different
/// rows (a row read again could come from the GPU's cache), the faster kept. Without a link
/// (the simulator) the probe runs but times nothing, and the rate is the model's price of a
/// row read in place ([`mapped_row_s`](crate::placement::mapped_row_s)).
fn row_read_rate<T: DeviceCopy, M: MappedArg<T>>(
    gpu: &Gpu,
    table: &M,
    (rows, units, width): (usize, usize, usize),
) -> Result<f64> {
    let costs = crate::placement::calibration::link_costs(&gpu.inner);
    let row_bytes = units * HOT_UNIT;
    let model = 1.0
        / crate::placement::mapped_row_s(
            &costs,
            costs.random_per_s(rows.saturating_mul(row_bytes)),
            row_bytes,
        );
    if rows == 0 {
        return Ok(model);
    }
    let n = (ROW_PROBE_BYTES / row_bytes).clamp(ROW_PROBE_MIN_ROWS, ROW_PROBE_ROWS);
    let mut best = f64::INFINITY;
    for run in 0..2 {
        best = best.min(probe_rows(gpu, table, (rows, units, width), n, run)?.1);
    }
    if !gpu.inner.ops().has_link() {
        return Ok(model);
    }
    let rate = n as f64 / best.max(1e-9);
    tracing::debug!(
        rows,
        row_bytes,
        probed = n,
        rate_per_s = rate,
        model_per_s = model,
        "hot tier: random rows of the table read in place, measured"
    );
    Ok(rate)
}

/// One run of the row probe: the fill kernel ([`HOT_FILL`]) copies `n` rows of `table`,
/// spread uniformly over it (row `probe_word(run · n + i, rows)` into row `i`), into scratch
/// device memory, on `gpu`'s default stream, timed with events. The scratch rows and the
/// seconds between the events.
fn probe_rows<T: DeviceCopy, M: MappedArg<T>>(
    gpu: &Gpu,
    table: &M,
    (rows, units, width): (usize, usize, usize),
    n: usize,
    run: u64,
) -> Result<(DeviceBuffer<T>, f64)> {
    let mut scratch = gpu.alloc_zeroed::<T>(n * width)?;
    // Row numbers and slots fit a u32: the tier refuses tables of `PENDING` rows or more, and
    // `n` is at most `ROW_PROBE_ROWS`.
    let dst = gpu.upload(&(0..n as u32).collect::<Vec<u32>>())?;
    let ids: Vec<u32> = (0..n as u64)
        .map(|i| probe_word(run * n as u64 + i, rows as u64) as u32)
        .collect();
    let ids = gpu.upload(&ids)?;
    let fill = Fill {
        units,
        rows,
        capacity: n,
    };
    let (start, stop) = (gpu.event()?, gpu.event()?);
    start.record(gpu)?;
    let pending = fill.queue(gpu, table, (&ids, &dst), n, &mut scratch)?;
    stop.record(gpu)?;
    pending.wait()?;
    let s = crate::event::Event::elapsed(&start, &stop)?.as_secs_f64();
    Ok((scratch, s))
}

/// Copy `ids` into `dst` (as long), push the ids `sample` picks onto `picked`, and give the
/// position of the first id that is not below `rows`, if any. Every gather checks all its
/// ids as it stages them: one pass that copies and checks together (no early exit; on the
/// calling thread and up to `helpers` of `stagers`' threads, each a share), the ids it
/// counts picked from each share as it is done, still in the caches of the core that copied
/// it, then, only where one is out of range, the search for the first.
fn copy_checked(
    dst: &mut [u32],
    ids: &[u32],
    rows: usize,
    sample: Option<Sample>,
    picked: &mut Vec<u32>,
    stagers: &Stagers,
    helpers: usize,
) -> Option<usize> {
    let max = stagers.stage(helpers, dst, ids, sample, picked);
    let rows = u32::try_from(rows).ok()?;
    if !ids.is_empty() && max >= rows {
        ids.iter().position(|&id| id >= rows)
    } else {
        None
    }
}

/// `v` seen as atomics, for host threads that count rows together.
fn atomic_view(v: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of `u32`, and the exclusive
    // borrow of `v` is held for the view's life, so nothing else reads or writes it meanwhile.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast::<AtomicU32>(), v.len()) }
}

/// `v` as atomics, for the host's threads to set and clear bits of together.
fn atomic_bits(v: &mut [u64]) -> &[AtomicU64] {
    const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());
    // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and its alignment (checked
    // at compile time above); the exclusive borrow of `v` is held for the view's life, so
    // nothing else reads or writes it meanwhile.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast::<AtomicU64>(), v.len()) }
}

/// Hand the ids a gather picked to count ([`copy_checked`]) to `add`, and look up the
/// residency of some of them in `bits` (the host's residency): all where they are at most
/// [`HIT_LOOKUPS`], else evenly spread ones, that many. The ids counted, the ids looked up,
/// and how many of those `bits` calls resident. On one thread, while the batch's gather runs
/// (a build that spread the lookups over the host's threads gathered more slowly): each
/// lookup is a miss in the host's caches, handing the ids on is one copy.
fn count_ids(bits: &[u64], picked: &[u32], add: impl FnOnce(&[u32])) -> (u64, u64, u64) {
    add(picked);
    // Every `look`-th picked id is looked up, each one's word of `bits` fetched some lookups
    // ahead.
    let look = picked.len().div_ceil(HIT_LOOKUPS).max(1);
    let ahead = PREFETCH_AHEAD * look;
    let (mut looked, mut hits) = (0u64, 0u64);
    for (i, &id) in picked.iter().enumerate().step_by(look) {
        if let Some(&next) = picked.get(i + ahead) {
            prefetch(bits, next as usize / 64);
        }
        looked += 1;
        hits += u64::from(bit(bits, id));
    }
    (picked.len() as u64, looked, hits)
}

/// Count a batch's `picked` ids: the hits from the host's copy of the residency (`bits`),
/// the ids kept in `deferred` for the policy, handed to the counting thread once there are
/// `hand_over_ids` of them (a lost policy counts nothing); the counters and the time in
/// `stats`.
fn tally(
    policy: &mut PolicyState,
    deferred: &mut Vec<u32>,
    counter: &mut Option<Counter>,
    bits: &[u64],
    picked: &[u32],
    hand_over_ids: usize,
    stats: &mut HotTierStats,
) {
    let started = std::time::Instant::now();
    let (counted, looked, hits) = match policy {
        PolicyState::Lost => count_ids(bits, picked, |_| {}),
        _ => count_ids(bits, picked, |p| deferred.extend_from_slice(p)),
    };
    if deferred.len() >= hand_over_ids {
        hand_over(policy, deferred, counter);
    }
    stats.counted += counted;
    stats.looked_up += looked;
    stats.hits += hits;
    stats.counting += started.elapsed();
}

/// The most counted ids of one batch whose residency the host looks up for the hit
/// statistics ([`HotTierStats::looked_up`]).
const HIT_LOOKUPS: usize = 1 << 10;

/// Slots one of the host's threads looks at together when [`Policy::condemn`] searches for
/// cold rows.
const CONDEMN_CHUNK: usize = 1 << 12;

/// Free slots from which a refresh sets some apart for the rows the gathers miss while the
/// next ranking runs ([`Policy::grant`]).
const SPLIT_MIN: usize = 1 << 14;

/// Lists a refresh puts on the device through pinned memory, without waiting for the work
/// queued (longer ones, as a refresh that admits a whole tier's worth of rows makes, are
/// copied from the host's list, so that the pinned memory kept stays small).
const PINNED_LIST_MAX: usize = ROOM_MAX;

/// A list of `u32` the host rewrites for the kernels queued after it: device memory, and the
/// pinned memory its copies come from; each grown (to a power of two) when a list is longer,
/// and kept.
struct Staged<T: DeviceCopy = u32> {
    dev: DeviceBuffer<T>,
    host: PinnedBuffer<T>,
}

impl<T: DeviceCopy> Staged<T> {
    fn new(gpu: &Gpu) -> Result<Staged<T>> {
        Ok(Staged {
            dev: gpu.alloc_zeroed(0)?,
            host: gpu.pinned_zeroed(0)?,
        })
    }

    /// Put `data` at the start of the device list for the work queued next on `queue`:
    /// written into the pinned memory (waiting, on the host, only for the copy that last read
    /// it), then copied on `queue`'s stream and left queued ([`write`](Staged::write), then
    /// [`send`](Staged::send)).
    fn put(&mut self, gpu: &Gpu, queue: &impl Queue, data: &[T], pinned_max: usize) -> Result<()> {
        self.write(gpu, data, pinned_max)?;
        self.send(gpu, queue, 0, data, pinned_max)
    }

    /// [`send`](Staged::send) `data` to elements `at..` of the device list, where `written`
    /// says [`write`](Staged::write) wrote it already (on the ranking's thread); else write it
    /// first.
    fn deliver(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        at: usize,
        data: &[T],
        pinned_max: usize,
        written: bool,
    ) -> Result<()> {
        if !written {
            self.write(gpu, data, pinned_max)?;
        }
        self.send(gpu, queue, at, data, pinned_max)
    }

    /// Write `data` into the pinned memory (grown if it is shorter), waiting, on the host,
    /// only for the copy that last read it; on any thread. Nothing for a list longer than
    /// `pinned_max`.
    fn write(&mut self, gpu: &Gpu, data: &[T], pinned_max: usize) -> Result<()> {
        if data.len() > pinned_max {
            return Ok(());
        }
        if self.host.len() < data.len() {
            self.host = gpu.pinned_zeroed::<T>(data.len().next_power_of_two())?;
        }
        self.host[..data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Put `data`, which [`write`](Staged::write) wrote into the pinned memory, at elements
    /// `at..` of the device list for the work queued next on `queue`: copied on `queue`'s
    /// stream and left queued. The kernel queued next on that stream reads it after the copy;
    /// the buffers' uses record the copy, so that it follows the kernels still reading the
    /// list (on the GPU, by the stream or an event), and the next host access or the drop
    /// waits for it. A list written from 0 that is longer than the device list replaces it by
    /// a longer one (a power of two); one written from elsewhere must fit. A list longer than
    /// `pinned_max` is copied from `data` instead, the host waiting for the device list's
    /// readers.
    fn send(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        at: usize,
        data: &[T],
        pinned_max: usize,
    ) -> Result<()> {
        if at == 0 && self.dev.len() < data.len() {
            self.dev = gpu.alloc_zeroed::<T>(data.len().next_power_of_two())?;
        }
        if data.len() > pinned_max {
            return self.dev.copy_into_from(at, data);
        }
        self.dev
            .copy_into_from_pinned(queue, &self.host, data.len(), at)?
            .leave_queued();
        Ok(())
    }
}

/// A batch's ids, in mapped memory that the gather kernels read in place: each part is
/// written by the host as it is checked, while the kernels of the parts before it run.
struct BatchIds {
    host: MappedBuffer<u32>,
}

impl BatchIds {
    fn new(gpu: &Gpu) -> Result<BatchIds> {
        Ok(BatchIds {
            host: gpu.mapped_zeroed(0)?,
        })
    }

    /// Make room for a batch of `n` ids (the memory replaced by a longer one, a power of two,
    /// where it is too short), and wait, on the host, for every kernel still reading the ids
    /// it held (the gather queued [`IDS_IN_FLIGHT`] batches earlier, the capture after it,
    /// leaked guards' too): from then until the next `reserve`, only the kernels of the parts
    /// of this batch already written read it.
    fn reserve(&mut self, gpu: &Gpu, n: usize) -> Result<()> {
        if self.host.len() < n {
            self.host = gpu.mapped_zeroed::<u32>(n.next_power_of_two())?;
        }
        // A host write waits for the memory's uses.
        let _: &mut [u32] = &mut self.host;
        Ok(())
    }

    /// Write the positions `range` of `ids` (a part of the batch, written after the parts
    /// before it) to the same positions of the mapped memory, checking the ids as they are
    /// copied and picking those `sample` counts onto `picked` ([`copy_checked`]): the position
    /// in the batch of the first id that is not below `rows`, if any (then nothing of this
    /// part is to be gathered).
    fn write_checked(
        &mut self,
        ids: &[u32],
        range: std::ops::Range<usize>,
        rows: usize,
        sample: Option<Sample>,
        picked: &mut Vec<u32>,
        (stagers, helpers): (&Stagers, usize),
    ) -> Option<usize> {
        assert!(range.end <= self.host.len() && range.end <= ids.len());
        let sample = sample.map(|s| s.from(range.start));
        let start = range.start;
        let at = crate::args::MappedArg::__arg(&self.host).host as *mut u32;
        // SAFETY: `range` is within the buffer (asserted), whose host view starts at `at` and
        // lives as long as `self.host`. Since `reserve` waited for every kernel that read the
        // buffer before this batch, the only work queued on it is this batch's kernels, each
        // over a part written before this one (parts are written in order, each part's kernel
        // queued after its write), so nothing reads or writes these elements meanwhile; no
        // reference to them is live (launches take addresses), and `&mut self` keeps other
        // host access out.
        let dst = unsafe { std::slice::from_raw_parts_mut(at.add(start), range.len()) };
        copy_checked(dst, &ids[range], rows, sample, picked, stagers, helpers).map(|p| start + p)
    }
}

/// The lists of a refresh's fill (rows and their slots) and slot table update (rows and their
/// entries), on the device and in pinned memory, which the ranking's thread writes.
struct PlanLists {
    fill: (Staged, Staged),
    update: (Staged, Staged),
}

impl PlanLists {
    fn new(gpu: &Gpu) -> Result<PlanLists> {
        Ok(PlanLists {
            fill: (Staged::new(gpu)?, Staged::new(gpu)?),
            update: (Staged::new(gpu)?, Staged::new(gpu)?),
        })
    }
}

/// One gather's launch parameters.
struct Gather {
    units: usize,
    /// Elements of `T` per row.
    width: usize,
    rows: usize,
    capacity: usize,
    log_limit: usize,
    on_repeat: bool,
    /// Whether host threads gather some of this gather's rows (else `staged` is not read).
    marked: bool,
}

impl Gather {
    /// Queue the gather kernel over the positions `part` of the batch: the kernel sees those
    /// ids (read in place from mapped memory), output rows and claims.
    #[allow(clippy::too_many_arguments)]
    fn queue<'l, T: DeviceCopy, M: MappedArg<T>>(
        &self,
        queue: &'l impl Queue,
        part: std::ops::Range<usize>,
        table: &'l M,
        tier: &'l DeviceBuffer<T>,
        slots: &'l mut DeviceBuffer<u32>,
        ids: &'l MappedBuffer<u32>,
        out: &'l mut DeviceBuffer<T>,
        log_n: &'l mut DeviceBuffer<u64>,
        log: &'l mut DeviceBuffer<u32>,
        seen: &'l mut DeviceBuffer<u32>,
        claim: &'l mut DeviceBuffer<u32>,
        staged: &'l MappedBuffer<u32>,
        misses: &'l mut DeviceBuffer<u64>,
    ) -> Result<Pending<'l>> {
        let threads = part.len() * self.units;
        let mut l = Launch::new(queue, &HOT_GATHER, Grid::cover(threads))?;
        l.scalar(&(self.units as u64));
        l.scalar(&(self.rows as u64));
        l.scalar(&(self.capacity as u64));
        l.scalar(&(self.log_limit as u64));
        l.mapped(table);
        l.device(tier);
        l.device_mut(slots);
        l.mapped_range(ids, part.clone());
        l.device_range_mut(out, part.start * self.width..part.end * self.width);
        l.device_mut(log_n);
        l.device_mut(log);
        if self.on_repeat {
            l.device_mut(seen);
        } else {
            l.device_prefix(&*seen, 0);
        }
        l.device_range_mut(claim, part.clone());
        // Host threads gather rows of whole batches only (one part).
        l.mapped_prefix(staged, if self.marked { part.end } else { 0 });
        l.device_mut(misses);
        l.submit()
    }
}

/// One scatter's launch parameters: the rows host threads gathered into `stage`, into their
/// positions of `out`.
struct Scatter {
    units: usize,
    n: usize,
    marked: usize,
}

impl Scatter {
    /// Queue the scatter kernel.
    fn queue<'l, T: DeviceCopy>(
        &self,
        queue: &'l impl Queue,
        stage_pos: &'l MappedBuffer<u32>,
        stage: &'l MappedBuffer<T>,
        out: &'l mut DeviceBuffer<T>,
    ) -> Result<Pending<'l>> {
        let mut l = Launch::new(queue, &HOT_SCATTER, Grid::cover(self.marked * self.units))?;
        l.scalar(&(self.units as u64));
        l.scalar(&(self.n as u64));
        l.scalar(&(self.marked as u64));
        l.mapped_prefix(stage_pos, self.marked);
        l.mapped(stage);
        l.device_mut(out);
        l.submit()
    }
}

/// What a [`HotTier`] has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotTierStats {
    /// Batches: gathers queued, and batches of reads noted ([`HotTier::note_reads`]).
    pub gathers: u64,
    /// Rows gathered or noted (ids given to gathers and to [`HotTier::note_reads`]).
    pub rows: u64,
    /// Ids counted: every id by default, every `n`-th of each batch with
    /// [`HotTier::count_every`]; none by a tier that holds no row (nothing could become
    /// resident).
    pub counted: u64,
    /// Counted ids whose residency the host looked up for [`hits`](HotTierStats::hits):
    /// every counted id of a batch that counts at most 1,024, else 1,024 of them spread
    /// evenly over the batch (each lookup is a miss in the host's caches, on the gathering
    /// thread).
    pub looked_up: u64,
    /// Looked-up ids whose rows were resident (read from device memory), by the host's
    /// record of the residency: a row a gather's capture copied in counts from the refresh
    /// that settles it on (the gathers read it from device memory from the next batch on).
    pub hits: u64,
    /// Refreshes begun (on a tier that holds no row, refreshes called).
    pub refreshes: u64,
    /// Rows copied into the tier by refreshes whose kernels are queued.
    pub admitted: u64,
    /// Rows dropped from the tier by refreshes whose kernels are queued, and by the captures
    /// those refreshes settled.
    pub evicted: u64,
    /// Of the rows admitted, those the refreshes' fills read from the host table (the
    /// others a gather's capture copied from its output, which read them once already).
    pub filled: u64,
    /// Rows not resident that host threads gathered into pinned memory for the GPU to read
    /// in one stream ([`HotTier::host_gathers`]), rather than the GPU reading each in place.
    pub staged: u64,
    /// Host time the rankings of the refreshes applied so far took (on a thread of the
    /// tier's own, beside the gathers, for [`HotTier::begin_refresh`]).
    pub ranking: std::time::Duration,
    /// Host time reading their miss logs (waiting for the gathers queued before included).
    pub log_read: std::time::Duration,
    /// Host time queuing their fill and slot table update kernels, on the thread that
    /// applied them (a `refresh` or `finish_refresh` on a `Gpu` or a `Stream` waits for the
    /// kernels too; a gather leaves them queued before its own).
    pub apply: std::time::Duration,
    /// Host time the gathers spent counting their sampled ids for the policy (one id in
    /// [`HotTier::count_every`]), on the gathering thread after the batch's kernels are
    /// queued.
    pub counting: std::time::Duration,
    /// Host time the gathers (and [`HotTier::note_reads`]) spent staging their ids: checking
    /// them and writing them into the mapped memory the kernels read them from, after waiting
    /// for the kernels that last read it.
    pub staging: std::time::Duration,
    /// Host time of the gathers' calls, from each call to its return (the staging, the
    /// counting, queuing the kernels, and any refresh's kernels queued first), for the
    /// gathers that queued their kernels, and of [`HotTier::note_reads`]: the host's part of
    /// a batch, which [`HotTier::decision`] adds to its predictions.
    pub gathering: std::time::Duration,
}

impl HotTierStats {
    /// What the tier did after `earlier` (an earlier [`HotTier::stats`] of the same tier):
    /// each counter and time less its value then.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 8 * 16)?; // 8 rows resident at most
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// let before = tier.stats();
    /// tier.gather(&gpu, &[3, 5], &mut out)?.wait()?;
    /// let last = tier.stats().since(&before);
    /// assert_eq!((last.gathers, last.rows), (1, 2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn since(&self, earlier: &HotTierStats) -> HotTierStats {
        HotTierStats {
            gathers: self.gathers.saturating_sub(earlier.gathers),
            rows: self.rows.saturating_sub(earlier.rows),
            counted: self.counted.saturating_sub(earlier.counted),
            looked_up: self.looked_up.saturating_sub(earlier.looked_up),
            hits: self.hits.saturating_sub(earlier.hits),
            refreshes: self.refreshes.saturating_sub(earlier.refreshes),
            admitted: self.admitted.saturating_sub(earlier.admitted),
            evicted: self.evicted.saturating_sub(earlier.evicted),
            filled: self.filled.saturating_sub(earlier.filled),
            staged: self.staged.saturating_sub(earlier.staged),
            ranking: self.ranking.saturating_sub(earlier.ranking),
            log_read: self.log_read.saturating_sub(earlier.log_read),
            apply: self.apply.saturating_sub(earlier.apply),
            counting: self.counting.saturating_sub(earlier.counting),
            staging: self.staging.saturating_sub(earlier.staging),
            gathering: self.gathering.saturating_sub(earlier.gathering),
        }
    }

    /// Fraction of the looked-up ids whose rows were resident (0 before any gather): the
    /// fraction of all rows gathered when every id is counted and looked up, an estimate of
    /// it otherwise.
    pub fn hit_rate(&self) -> f64 {
        if self.looked_up == 0 {
            0.0
        } else {
            self.hits as f64 / self.looked_up as f64
        }
    }
}

/// The rows a [`HotTier`]'s gathers read, as the GPU counted them
/// ([`HotTier::gather_reads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherReads {
    /// Rows given to the gather kernels: the ids of every gather that queued its kernel
    /// (each part's, where a batch is staged in parts).
    pub rows: u64,
    /// Of them, the rows the kernels did not read from device memory: read in place from the
    /// host table, or left to the host's threads ([`HotTier::host_gathers`]).
    pub from_host: u64,
}

impl GatherReads {
    /// The reads after `earlier` (an earlier [`HotTier::gather_reads`] of the same tier).
    pub fn since(&self, earlier: &GatherReads) -> GatherReads {
        GatherReads {
            rows: self.rows.saturating_sub(earlier.rows),
            from_host: self.from_host.saturating_sub(earlier.from_host),
        }
    }

    /// The fraction of the rows read from device memory (0 before any gather).
    pub fn hit_rate(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            1.0 - self.from_host as f64 / self.rows as f64
        }
    }
}

/// What one [`HotTier::refresh`] (or [`HotTier::finish_refresh`]) changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refresh {
    /// Rows copied into the tier (the rows the captures copied in, settled, included).
    pub admitted: usize,
    /// Rows dropped from it to make room (the rows the captures evicted from the slots they
    /// took, settled, included: [`HotTier::capture_room`]).
    pub evicted: usize,
    /// Rows resident after the refresh.
    pub resident: usize,
}

/// A table of `rows × width` elements in mapped host memory, with the rows read most kept in
/// device memory within a byte budget ([`Gpu::hot_tier`]).
///
/// [`gather`](HotTier::gather) runs one kernel for a batch of row ids: each row comes from
/// the device tier if it is resident, else from host memory read in place over the link.
/// While slots are free, the rows it misses are logged, and a second kernel copies them from
/// the batch into free slots (or, with [`capture_room`](HotTier::capture_room), into the
/// slots of cold rows, which it evicts). Each gather counts its ids (on the host);
/// [`refresh`](HotTier::refresh) makes the logged rows resident, and the rows counted most
/// (as many as the budget holds), copying those in with a kernel queued after the gathers
/// already in flight, and halves every count, so the tier follows a drifting hot set.
/// [`begin_refresh`](HotTier::begin_refresh) does the same without making the caller wait for
/// the ranking: it runs on a thread of its own while later gathers go on, and the first
/// gather that finds it done queues its kernels. Nothing is written to the table while the
/// tier owns it, so a resident row always equals its host row.
///
/// The budget covers all the device memory the tier keeps: the slot table (4 bytes per row
/// of the table) and the resident rows. A budget that holds the slot table and no row, or
/// less, keeps nothing: every row is read from host memory. The device buffers of the last
/// few batches' ids (4 bytes per id), the two logs of missed rows with their places' slots
/// (up to 12 bytes a place, 24 with [`HotTier::capture_room`]; a log has a place per row the
/// tier holds, at most 1 Mi, or the room asked for up to 4 Mi), the doorkeeper of
/// [`HotTier::admit_on_repeat`] (one bit per row of the table) and the gathers' miss
/// counters ([`HotTier::gather_reads`], 4 KiB) come on top, as launch staging does.
///
/// Rows are whole 16-byte units (`width × size_of::<T>()` a multiple of 16: 4, 8, … floats),
/// which the kernel moves with one 16-byte load each.
///
/// ```
/// # fn main() -> berth_runtime::Result<()> {
/// let gpu = berth_runtime::Gpu::simulator();
/// let (rows, width) = (1000, 8);
/// let table = gpu.mapped_from(&(0..rows * width).map(|v| v as f32).collect::<Vec<_>>())?;
/// // The slot table (4000 bytes) and 100 rows of 32 bytes.
/// let mut tier = gpu.hot_tier(table, width, 4000 + 100 * 32)?;
/// assert_eq!(tier.capacity(), 100);
/// let ids = [7u32, 7, 7, 999];
/// let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width)?;
/// tier.gather(&gpu, &ids, &mut out)?.wait()?;
/// let r = tier.refresh(&gpu)?; // rows 7 and 999 were read: both fit
/// assert_eq!((r.admitted, r.resident), (2, 2));
/// tier.gather(&gpu, &ids, &mut out)?.wait()?; // all four from device memory
/// assert_eq!(tier.stats().hits, 4);
/// assert_eq!(out.to_vec()?[3 * width], (999 * width) as f32);
/// # Ok(())
/// # }
/// ```
pub struct HotTier<T: DeviceCopy, M: MappedArg<T> = MappedBuffer<T>> {
    gpu: Gpu,
    table: M,
    _elem: std::marker::PhantomData<fn() -> T>,
    width: usize,
    rows: usize,
    /// 16-byte units per row.
    units: usize,
    budget: usize,
    /// Rows the tier holds.
    capacity: usize,
    /// `capacity × width` elements: slot `s` holds row `resident[s]`.
    tier: DeviceBuffer<T>,
    /// The device's slot table: `rows` entries (none when `capacity` is 0). A row's entry is
    /// its slot, [`NOT_RESIDENT`], or [`PENDING`] once a gather has logged it as missed.
    slots: DeviceBuffer<u32>,
    /// The miss log the gathers fill: the rows they miss, each once, in the order they claim
    /// their slot table entries, each copied by the capture after its gather into the slot
    /// granted to its place and named there in the slot table. Between refreshes, the log
    /// whose slots the last refresh granted; while a ranking runs (which has that one), the
    /// log granted for that time (`next`).
    live: MissLog,
    /// The end of the places the gathers may take in `live` (`live.limit()`): its last granted
    /// one, within its buffer.
    log_limit: usize,
    /// An empty log with slots granted, for the gathers while the next ranking runs (`None`
    /// while one runs: `live` is that log then).
    next: Option<MissLog>,
    /// The logs the last ranking did not read (the one filled while it ran, or those it could
    /// not read), for the next ranking to settle.
    filled: Vec<MissLog>,
    /// The doorkeeper: one bit per row, set by a row's first miss since it was last cleared
    /// (every [`DOORKEEPER_REFRESHES`] refreshes); used only with
    /// [`admit_on_repeat`](HotTier::admit_on_repeat).
    seen: DeviceBuffer<u32>,
    /// Whether gathers log a row only at its second miss ([`HotTier::admit_on_repeat`]).
    on_repeat: bool,
    /// Places each miss log has at least, the slots of cold rows granted where the free ones
    /// are too few ([`HotTier::capture_room`]).
    capture_room: usize,
    /// For each row of the last gather, its place in the miss log if it logged it (else
    /// [`NOT_RESIDENT`]), for the capture kernel after it.
    claim: DeviceBuffer<u32>,
    /// One bit per row, set while the row is resident: what the device's slot table says
    /// once the last slot table update queued has run, in a table small enough for the
    /// host's caches, for the hit statistics read at every counted id and the host's share
    /// of the gathers. The policy keeps its own copy, which runs ahead of this one while a
    /// refresh is pending.
    resident_bits: Vec<u64>,
    /// Rows resident once the last slot table update queued has run.
    resident_count: usize,
    /// Whether the budget holds the whole table, all of it resident from the start: gathers
    /// count and log nothing, refreshes do nothing.
    whole: bool,
    /// The ranking policy's state: here between refreshes, on a thread of its own while one
    /// ranks, back with its plan until the plan's kernels are queued.
    policy: PolicyState,
    /// The ids counted while the policy was away (ranking, or counting the last batch's ids),
    /// added to its counts when it comes back.
    deferred: Vec<u32>,
    /// The ids the last gather counts, picked while it staged them ([`Sample`]).
    picked: Vec<u32>,
    /// The fewest ids in `deferred` a gather hands over ([`HAND_OVER_IDS`]).
    hand_over_ids: usize,
    /// The most parts a large batch on a `Gpu` or `Stream` is staged in
    /// ([`HotTier::staging_parts`]).
    parts: usize,
    /// The threads that stage each part, the gathering thread included
    /// ([`HotTier::staging_threads`]), and the helpers among them.
    staging_threads: usize,
    stagers: Stagers,
    /// The thread that adds the gathers' counted ids to the policy's counts, off the thread
    /// that queues the gathers (`None` where none could be started: the gathers count).
    counter: Option<Counter>,
    /// Why the last ranking could not read the log, for the next `begin_refresh` or
    /// `finish_refresh`.
    failed: Option<Error>,
    /// The gate the next refresh's policy waits at before it starts ([`HotTier::__hold_refreshes`]).
    gate: Option<Arc<Gate>>,
    /// The ids of the last gathers and notes, batch `b` in `ids.ring[b % IDS_IN_FLIGHT]` (a
    /// prefix of it), and which the last [`HotTier::note_reads`] staged:
    /// kept, and grown when a batch is longer, rather than allocated for every batch.
    ids: NotedIds,
    /// The last refresh's lists, kept the same way (`None` while a ranking has them, to
    /// write the next).
    lists: Option<PlanLists>,
    stats: HotTierStats,
    /// A batch larger than the tier was reported (once).
    reported_small: bool,
    /// Every this many ids of a batch, one is counted.
    count_every: usize,
    /// The share of the rows not resident that host threads gather ([`HotTier::host_gathers`]),
    /// in 1/1024ths.
    host_share: u32,
    /// For each position of the last gather, [`PENDING`] where host threads gather its row
    /// (mapped: the host writes it, the gather reads it).
    staged: MappedBuffer<u32>,
    /// The positions whose rows host threads gathered for the last gather, in `stage`'s order.
    stage_pos: MappedBuffer<u32>,
    /// The rows host threads gathered for the last gather, back to back.
    stage: MappedBuffer<T>,
    /// The gathers' counters of the rows they did not read from the tier
    /// ([`MISS_COUNTER_WORDS`]; [`HotTier::gather_reads`]).
    misses: DeviceBuffer<u64>,
    /// Rows given to the gather kernels queued so far.
    gathered_rows: u64,
    /// A copy of the miss counters queued when the last refresh began, and the rows gathered
    /// then (`None` while no copy is queued).
    snapshot: PinnedBuffer<u64>,
    snapshot_rows: Option<u64>,
    /// The GPU's counts when the refresh before last began (its copy is read when the last
    /// one begins): where [`HotTier::decision`]'s recent hit rate starts.
    gpu_mark: Option<GatherReads>,
    /// Random rows of the table read in place per second ([`HotTier::measure_row_reads`]),
    /// once measured.
    row_reads: std::sync::OnceLock<f64>,
    /// The counters when the refresh before last and the last refresh began: what
    /// [`HotTier::decision`] reads the tier's recent gathers from.
    window: [HotTierStats; 2],
}

impl<T: DeviceCopy, M: MappedArg<T>> std::fmt::Debug for HotTier<T, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HotTier")
            .field("rows", &self.rows)
            .field("width", &self.width)
            .field("budget", &self.budget)
            .field("capacity", &self.capacity)
            .field("resident", &self.resident_rows())
            .field("stats", &self.stats)
            .finish()
    }
}

/// The ids of the last [`HotTier::note_reads`], in mapped memory the tier keeps
/// ([`HotTier::noted_ids`]): a kernel argument (`#[mapped] ids: &[u32]`) that kernels only
/// read. The memory is the ring of the ids of the batches in flight, which the tier's gathers
/// use too.
pub struct NotedIds {
    /// Batch `b`'s ids in `ring[b % IDS_IN_FLIGHT]` (a prefix of it).
    ring: Vec<BatchIds>,
    /// The ring place and length of the ids the last `note_reads` staged, until a gather or
    /// a failed `note_reads` comes after it.
    last: Option<(usize, usize)>,
}

impl NotedIds {
    fn new(gpu: &Gpu) -> Result<NotedIds> {
        Ok(NotedIds {
            ring: (0..IDS_IN_FLIGHT)
                .map(|_| BatchIds::new(gpu))
                .collect::<Result<_>>()?,
            last: None,
        })
    }

    /// How many ids.
    pub fn len(&self) -> usize {
        self.last.map_or(0, |(_, n)| n)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids, copied.
    pub fn to_vec(&self) -> Vec<u32> {
        match self.last {
            Some((r, n)) => self.ring[r].host[..n].to_vec(),
            None => Vec::new(),
        }
    }

    fn arg(&self) -> crate::args::ArgRef<'_> {
        let (r, n) = self.last.unwrap_or((0, 0));
        let mut a = self.ring[r].host.__arg();
        a.len = n;
        a.bytes = n * std::mem::size_of::<u32>();
        // The tier's ring, which only it writes.
        a.read_only = true;
        a
    }
}

impl std::fmt::Debug for NotedIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotedIds")
            .field("len", &self.len())
            .finish()
    }
}

impl crate::args::sealed::Sealed for NotedIds {}

impl MappedArg<u32> for NotedIds {
    fn __arg(&self) -> crate::args::ArgRef<'_> {
        self.arg()
    }
}

impl<T: DeviceCopy, M: MappedArg<T>> crate::args::sealed::Sealed for HotTier<T, M> {}

/// A kernel's `#[auto] table: &Rows<T>` argument reads the tier's rows: those resident from
/// device memory, looked up in its slot table, the others from its table in place.
impl<T: DeviceCopy, M: MappedArg<T>> crate::args::RowSource<T> for HotTier<T, M> {
    fn __rows(&self) -> crate::args::RowsRef<'_> {
        crate::args::RowsRef {
            table: self.table.__arg(),
            width: self.width,
            // A tier without slots has no slot table; one with slots may hold rows its host
            // record does not count yet (a gather's capture copied them in).
            tier: (self.capacity > 0).then(|| {
                use crate::args::DeviceArg;
                (self.tier.__arg(), self.slots.__arg(), self.capacity)
            }),
            resident: self.resident_count,
        }
    }
}

/// A host table read by rows with no tier: the rows of a mapped or managed table, `width`
/// elements each, passed to a kernel's `#[auto] table: &Rows<T>` argument, which then reads
/// every row in place over the link (as a [`HotTier`] with a budget of no rows does, without
/// its counting and ranking, and without taking the table).
///
/// Where the same rows are read again and again, a [`HotTier`] over the table keeps the hot
/// ones in device memory instead, behind the same argument.
///
/// ```
/// # fn main() -> berth_runtime::Result<()> {
/// use berth_runtime::{Gpu, InPlaceRows};
/// let gpu = Gpu::new_or_simulator()?;
/// let table = gpu.managed_from(&vec![0.0f32; 1 << 20])?; // 8,192 rows of 128 floats
/// let rows = InPlaceRows::new(&table, 128)?;
/// assert_eq!((rows.rows(), rows.width()), (8192, 128));
/// // my_kernel(&gpu, grid, &rows, &ids, &mut out)?.wait()?;
/// # Ok(())
/// # }
/// ```
pub struct InPlaceRows<'a, T, M> {
    table: &'a M,
    width: usize,
    rows: usize,
    _elem: std::marker::PhantomData<fn() -> T>,
}

impl<'a, T: DeviceCopy, M: MappedArg<T>> InPlaceRows<'a, T, M> {
    /// The rows of `table`, `width` elements each.
    ///
    /// # Errors
    /// `Error::Usage` when `width` is 0 or the table is not a whole number of rows.
    pub fn new(table: &'a M, width: usize) -> Result<Self> {
        let elems = table.__arg().len;
        if width == 0 || !elems.is_multiple_of(width) {
            return Err(Error::Usage(format!(
                "a table read by rows is whole rows: {elems} elements are not rows of {width}"
            )));
        }
        Ok(InPlaceRows {
            table,
            width,
            rows: elems / width,
            _elem: std::marker::PhantomData,
        })
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

impl<T, M> std::fmt::Debug for InPlaceRows<'_, T, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlaceRows")
            .field("rows", &self.rows)
            .field("width", &self.width)
            .finish()
    }
}

impl<T: DeviceCopy, M: MappedArg<T>> crate::args::sealed::Sealed for InPlaceRows<'_, T, M> {}

/// A kernel's `#[auto] table: &Rows<T>` argument reads every row from the host table in
/// place.
impl<T: DeviceCopy, M: MappedArg<T>> crate::args::RowSource<T> for InPlaceRows<'_, T, M> {
    fn __rows(&self) -> crate::args::RowsRef<'_> {
        crate::args::RowsRef {
            table: self.table.__arg(),
            width: self.width,
            tier: None,
            resident: 0,
        }
    }
}

impl Gpu {
    /// A hot tier over `table`, `width` elements per row, keeping the rows read most in at
    /// most `budget` bytes of device memory ([`HotTier`]).
    ///
    /// # Errors
    /// `Error::Usage` when `table` is of another context, `width` is 0, the table is not a
    /// whole number of rows, a row is not a whole number of 16-byte units, or the table has
    /// more rows than a `u32` id names; a failed device allocation (`Error::OutOfMemory` when
    /// the device has less free memory than the budget asks).
    pub fn hot_tier<T: DeviceCopy, M: MappedArg<T>>(
        &self,
        table: M,
        width: usize,
        budget: usize,
    ) -> Result<HotTier<T, M>> {
        HotTier::new(self, table, width, budget)
    }
}

impl<T: DeviceCopy, M: MappedArg<T>> HotTier<T, M> {
    fn new(gpu: &Gpu, table: M, width: usize, budget: usize) -> Result<Self> {
        let (table_gpu, elems) = {
            let a = table.__arg();
            (a.gpu.clone(), a.len)
        };
        if !Arc::ptr_eq(&table_gpu, &gpu.inner) {
            return Err(Error::Usage(
                "a hot tier's table must be mapped memory of the tier's own context".into(),
            ));
        }
        let row_bytes = width.saturating_mul(std::mem::size_of::<T>());
        if width == 0 || !row_bytes.is_multiple_of(HOT_UNIT) || !elems.is_multiple_of(width) {
            return Err(Error::Usage(format!(
                "a hot tier's rows are whole 16-byte units and its table whole rows: {width} elements of {} bytes per row, table of {} elements",
                std::mem::size_of::<T>(),
                elems
            )));
        }
        let rows = elems / width;
        if rows >= PENDING as usize {
            return Err(Error::Usage(format!(
                "a hot tier's rows are named by u32 ids below {PENDING}: {rows} rows is too many"
            )));
        }
        let slot_bytes = rows * 4;
        let capacity = (budget.saturating_sub(slot_bytes) / row_bytes).min(rows);
        let capacity = if budget < slot_bytes { 0 } else { capacity };
        if capacity == 0 {
            tracing::debug!(
                budget,
                rows,
                row_bytes,
                slot_table_bytes = slot_bytes,
                "hot tier: the budget holds no row beside the slot table: every row is read from host memory"
            );
        } else {
            tracing::debug!(
                budget,
                rows,
                row_bytes,
                capacity,
                "hot tier: rows resident at most"
            );
        }
        // Where the budget holds every row, the cost model keeps the whole table in device
        // memory: nothing to count, rank or log.
        let costs = crate::placement::calibration::link_costs(&gpu.inner);
        let whole = decide_gather(
            &costs,
            &GatherAccess {
                table_rows: rows,
                row_bytes,
                batch_rows: 1,
                capacity,
                hit_fraction: 1.0,
                admitted_per_batch: 0.0,
                random_per_s: None,
                row_reads_per_s: None,
                host_s: 0.0,
                parts: 1,
            },
        )
        .choice
            == GatherChoice::Resident;
        let mut tier = gpu.alloc_zeroed::<T>(capacity * width)?;
        let slot_len = if capacity == 0 { 0 } else { rows };
        let mut slots = gpu.alloc_zeroed::<u32>(slot_len)?;
        if whole {
            tracing::debug!(
                rows,
                table_bytes = rows * row_bytes,
                "hot tier: the budget holds the whole table: copied in once, every row read from device memory"
            );
            fill_whole(
                gpu,
                &table,
                rows,
                row_bytes / HOT_UNIT,
                &mut tier,
                &mut slots,
            )?;
        } else if slot_len > 0 {
            let mut l = Launch::new(gpu, &FILL_U32, Grid::cover(slot_len))?;
            l.scalar(&u64::from(NOT_RESIDENT));
            l.device_mut(&mut slots);
            l.submit()?.wait()?;
        }
        // A whole tier's policy holds nothing (no counts, no slots to grant).
        let (policy_capacity, log_len) = if whole {
            (0, 0)
        } else {
            (capacity, capacity.min(LOG_MAX))
        };
        let mut policy = Policy::new(policy_capacity, rows, log_len);
        // The first ranking has no slots set apart for the gathers while it runs: the tier is
        // empty, and the first plan grants them.
        let [main, _] = policy.grant(false, [0, 0]);
        let (mut live, next) = (MissLog::new(gpu, log_len)?, MissLog::new(gpu, log_len)?);
        let grant = Regrant::fresh(main, Vec::new());
        live.install(gpu, gpu, &grant, false)?;
        live.regranted(grant);
        Ok(HotTier {
            gpu: gpu.clone(),
            table,
            _elem: std::marker::PhantomData,
            width,
            rows,
            units: row_bytes / HOT_UNIT,
            budget,
            capacity,
            tier,
            slots,
            log_limit: live.limit(),
            live,
            next: Some(next),
            filled: Vec::new(),
            seen: gpu.alloc_zeroed::<u32>(if capacity == 0 || whole {
                0
            } else {
                rows.div_ceil(32)
            })?,
            on_repeat: false,
            capture_room: 0,
            claim: gpu.alloc_zeroed(0)?,
            resident_bits: huge_vec(
                if capacity == 0 { 0 } else { rows.div_ceil(64) },
                if whole { u64::MAX } else { 0 },
            ),
            resident_count: if whole { rows } else { 0 },
            whole,
            policy: PolicyState::Idle(Box::new(policy)),
            deferred: Vec::new(),
            picked: Vec::new(),
            hand_over_ids: HAND_OVER_IDS,
            parts: DEFAULT_PARTS,
            staging_threads: default_staging_threads(host_cores()),
            stagers: Stagers::default(),
            counter: if capacity == 0 || whole {
                None
            } else {
                Counter::start()
            },
            failed: None,
            gate: None,
            ids: NotedIds::new(gpu)?,
            lists: Some(PlanLists::new(gpu)?),
            stats: HotTierStats::default(),
            reported_small: false,
            count_every: 1,
            host_share: DEFAULT_HOST_SHARE,
            staged: gpu.mapped_zeroed(1)?,
            stage_pos: gpu.mapped_zeroed(1)?,
            stage: gpu.mapped_zeroed(width)?,
            misses: gpu.alloc_zeroed(MISS_COUNTER_WORDS)?,
            gathered_rows: 0,
            snapshot: gpu.pinned_zeroed(MISS_COUNTER_WORDS)?,
            snapshot_rows: None,
            gpu_mark: None,
            row_reads: std::sync::OnceLock::new(),
            window: [HotTierStats::default(); 2],
        })
    }

    /// The host table (read-only: the tier's copies stay equal to it).
    pub fn table(&self) -> &M {
        &self.table
    }

    /// The host table back, once every gather and refresh queued is done. A refresh still
    /// pending is dropped (once its ranking has ended), its kernels not queued.
    pub fn into_table(self) -> M {
        self.table
    }

    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The budget, bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Rows the tier holds at most (0: every row is read from host memory).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of device memory the tier keeps: the slot table and the rows it can hold (never
    /// above the budget).
    pub fn device_bytes(&self) -> usize {
        self.slots.bytes() + self.tier.bytes()
    }

    /// Rows resident now: once the last refresh whose kernels are queued has run (a refresh
    /// still pending counts once a gather or [`finish_refresh`](HotTier::finish_refresh)
    /// queues its kernels). Rows a gather's capture copied in since count from the refresh
    /// that settles them.
    pub fn resident_rows(&self) -> usize {
        self.resident_count
    }

    /// Whether row `id` is resident now (gathers queued from now on read it from device
    /// memory). A row a gather's capture copied in since is read from device memory too,
    /// but counts from the refresh that settles it.
    pub fn is_resident(&self, id: u32) -> bool {
        self.capacity > 0 && (id as usize) < self.rows && bit(&self.resident_bits, id)
    }

    /// The decayed read count of row `id` (0 for an id outside the table): halved by the
    /// refreshes begun so far, with the reads counted since each. While a refresh's ranking
    /// runs, this waits for it (on the host), as the ranking halves the counts.
    ///
    /// # Panics
    /// When the ranking of a pending refresh panicked: its panic, passed on.
    pub fn count(&mut self, id: u32) -> u32 {
        self.receive(true);
        self.reclaim();
        match &self.policy {
            PolicyState::Idle(p) | PolicyState::Ready(p, _) => {
                p.counts.get(id as usize).copied().unwrap_or(0)
            }
            PolicyState::Counting | PolicyState::Running(_) | PolicyState::Lost => 0,
        }
    }

    /// What the cost model ([`decide_gather`](crate::placement::decide_gather)) predicts for
    /// batches of `batch_rows` through this tier, from what the tier has seen lately (since
    /// the refresh before last began, where that window looked up 1,024 ids or more; else
    /// since the tier was made, [`HotTierStats::since`]): its hit rate, as the GPU counted it
    /// ([`gather_reads`](HotTier::gather_reads), which waits for the gathers queued before;
    /// each refresh queues a copy of the counters, read at the next, for the window's start)
    /// where the gathers read 1,024 rows or more, else as the host's record has it
    /// ([`HotTierStats::hit_rate`], which credits a row captured on its miss only from the
    /// refresh that settles it), and the rows its refreshes read from the table per gather
    /// ([`HotTierStats::filled`]), against every row read in place; `Resident` where the
    /// budget holds the whole table (the tier then holds it all from the start). A `Mapped`
    /// choice says the tier costs more than it saves at this law: its refreshes copy in more
    /// than its hits spare (a law without skew over a large table, or a hot set that moves
    /// faster than the refreshes), and a smaller `count_every` share, `admit_on_repeat`, or
    /// fewer refreshes would change that; with the context's constants
    /// ([`Gpu::link_costs`](crate::Gpu::link_costs)), calibrated or conservative, and a miss
    /// priced at the table's own rate of random rows of this width
    /// ([`measure_row_reads`](HotTier::measure_row_reads): measured at the first call, a
    /// probe that waits for the GPU's default stream, then cached; where it fails, the
    /// model's price for a table of its size). The choice is by the GPU's part of a batch;
    /// [`GatherDecision::batch_s`] and [`GatherDecision::queued_s`] add the host's part, as
    /// the gathers so far took it ([`HotTierStats::gathering`] per gather), in the parts a
    /// batch of `batch_rows` is staged in on a `Gpu` or a `Stream`.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// use berth_runtime::placement::GatherChoice;
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let whole = gpu.hot_tier(table, 4, 1 << 20)?; // holds every row
    /// assert_eq!(whole.decision(2).choice, GatherChoice::Resident);
    /// assert_eq!(whole.resident_rows(), 64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision(&self, batch_rows: usize) -> GatherDecision {
        let costs = crate::placement::calibration::link_costs(&self.gpu.inner);
        let s = &self.recent();
        decide_gather(
            &costs,
            &GatherAccess {
                table_rows: self.rows,
                row_bytes: self.units * HOT_UNIT,
                batch_rows,
                capacity: self.capacity,
                hit_fraction: self.gpu_recent().map_or(s.hit_rate(), |r| r.hit_rate()),
                admitted_per_batch: s.filled as f64 / s.gathers.max(1) as f64,
                random_per_s: None,
                row_reads_per_s: self.measure_row_reads().ok(),
                host_s: s.gathering.as_secs_f64() / s.gathers.max(1) as f64,
                parts: self.parts_for(batch_rows),
            },
        )
    }

    /// What the tier did lately, for [`decision`](HotTier::decision): since the refresh
    /// before last began, where that holds at least [`RECENT_LOOKUPS`] looked-up ids and a
    /// gather; else since the tier was made.
    fn recent(&self) -> HotTierStats {
        let recent = self.stats.since(&self.window[0]);
        if recent.looked_up >= RECENT_LOOKUPS && recent.gathers > 0 {
            recent
        } else {
            self.stats
        }
    }

    /// A refresh begins on `queue`: the last one's counters become the one before last's.
    /// The copy of the GPU's counters queued at the last one is read (it followed the gathers
    /// queued before that refresh, done by now unless the batches since were few), and
    /// another is queued after the gathers queued so far, to be read at the next.
    fn roll_window(&mut self, queue: &impl Queue) {
        self.window = [self.window[1], self.stats];
        // A host read of the pinned memory waits for the copy. Where none was queued, the
        // window's start is unknown, and the count since the tier was made serves.
        let snapshot = &self.snapshot;
        self.gpu_mark = self.snapshot_rows.take().map(|rows| GatherReads {
            rows,
            from_host: snapshot.iter().sum(),
        });
        match self.misses.copy_to_pinned(queue, &mut self.snapshot) {
            Ok(copy) => {
                copy.leave_queued();
                self.snapshot_rows = Some(self.gathered_rows);
            }
            // A queue that takes no copies (a graph being recorded): the host's record serves.
            Err(e) => tracing::debug!(error = %e, "hot tier: the GPU's hit counts were not copied"),
        }
    }

    /// The GPU's count of the recent gathers' reads, for [`decision`](HotTier::decision), over
    /// the span of [`recent`](HotTier::recent): since the refresh before last began, where
    /// the gathers since read [`RECENT_LOOKUPS`] rows or more; else since the tier was made,
    /// where they read that many; else none (the host's record serves, as where the counters
    /// cannot be read). Waits for the gathers queued before.
    fn gpu_recent(&self) -> Option<GatherReads> {
        let now = self.gather_reads().ok()?;
        match self.gpu_mark {
            Some(mark) if now.since(&mark).rows >= RECENT_LOOKUPS => Some(now.since(&mark)),
            _ if now.rows >= RECENT_LOOKUPS => Some(now),
            _ => None,
        }
    }

    /// Random rows of this tier's width read in place from its table per second: what a
    /// gather pays for each row it misses, and the price [`decision`](HotTier::decision)
    /// gives a miss. Measured at the first call and then cached: the runtime's fill kernel
    /// reads rows spread uniformly over the table (64 Ki rows, or 64 MiB of them where rows
    /// are wider than 1 KiB) into scratch device memory, twice, on the GPU's default stream
    /// (waiting for it), the faster run kept. The memory behind a table and the width of its
    /// rows decide the rate, which one random 4-byte read
    /// ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)) does not tell. On
    /// the simulator (no link) it is the model's price of a row read in place
    /// ([`mapped_row_s`](crate::placement::mapped_row_s)).
    ///
    /// # Errors
    /// A failed allocation of the scratch memory, upload or launch.
    pub fn measure_row_reads(&self) -> Result<f64> {
        if let Some(&rate) = self.row_reads.get() {
            return Ok(rate);
        }
        let rate = row_read_rate(&self.gpu, &self.table, (self.rows, self.units, self.width))?;
        Ok(*self.row_reads.get_or_init(|| rate))
    }

    /// Count the rows `ids` that a kernel of the caller's reads through the tier (an
    /// `#[auto] table: &Rows<T>` argument, to which the tier is passed), as a gather of them
    /// would count them: for the next refresh's ranking (every id, or one in
    /// [`count_every`](HotTier::count_every)) and for the hit rate that
    /// [`decision`](HotTier::decision) reads ([`HotTierStats::looked_up`],
    /// [`HotTierStats::hits`]), by the residency the kernel launched next will read. The host
    /// does not see a kernel's reads: a tier not told of them ranks only the rows its gathers
    /// read. They count as one batch ([`HotTierStats::gathers`]) of `ids.len()` rows
    /// ([`HotTierStats::rows`]).
    ///
    /// The ids are checked and written, as a gather's are, into mapped memory the tier keeps
    /// ([`noted_ids`](HotTier::noted_ids)), from which the kernel can read them in place.
    ///
    /// Call it before launching the kernel on `queue`: a refresh begun with
    /// [`begin_refresh`](HotTier::begin_refresh) whose ranking is done gets its fill and slot
    /// table update queued on `queue` first (as a gather queues them before its own kernel),
    /// so that the kernel reads what they leave; a ranking still running is not waited for.
    ///
    /// # Errors
    /// [`Error::IdOutOfRange`] naming the batch and the first position whose id is not a row
    /// of the table; a failed copy or launch of a finished refresh's kernels (the refresh
    /// stays pending). Either way nothing is counted.
    ///
    /// # Panics
    /// When the ranking of a pending refresh panicked: its panic, passed on.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 8 * 16)?; // 8 rows resident at most
    /// tier.note_reads(&gpu, &[3, 3, 9])?; // then launch the kernel that reads them:
    /// // kernel(&gpu, grid, &tier, tier.noted_ids(), &mut out)?.wait()?;
    /// assert_eq!(tier.count(3), 2);
    /// tier.refresh(&gpu)?; // rows 3 and 9 were read: both admitted
    /// assert!(tier.is_resident(3) && tier.is_resident(9));
    /// assert!(tier.note_reads(&gpu, &[64]).is_err()); // not a row
    /// # Ok(())
    /// # }
    /// ```
    pub fn note_reads(&mut self, queue: &impl Queue, ids: &[u32]) -> Result<()> {
        let called = std::time::Instant::now();
        let batch = self.stats.gathers;
        self.ids.last = None;
        // The ring place a gather of this batch would take: its `reserve` waits, on the host,
        // for the kernels that read the ids it held four batches ago.
        let ring = (batch % IDS_IN_FLIGHT as u64) as usize;
        let n = ids.len();
        self.ids.ring[ring].reserve(&self.gpu, n)?;
        let sample =
            (self.capacity > 0 && !self.whole).then(|| Sample::of_batch(batch, self.count_every));
        self.picked.clear();
        self.stagers.ensure(self.staging_threads - 1);
        let helpers = (&self.stagers, self.staging_threads - 1);
        if let Some(position) = self.ids.ring[ring].write_checked(
            ids,
            0..n,
            self.rows,
            sample,
            &mut self.picked,
            helpers,
        ) {
            return Err(Error::IdOutOfRange {
                batch,
                position,
                id: ids[position],
                rows: self.rows,
            });
        }
        self.stats.staging += called.elapsed();
        // A refresh whose ranking is done: its kernels go first, so that the kernel launched
        // next reads the slot table and rows it leaves, and these ids count after its halving.
        self.receive(false);
        self.apply(queue, false)?;
        self.stats.gathers += 1;
        self.stats.rows += n as u64;
        self.ids.last = Some((ring, n));
        if self.whole {
            // Every row is resident: each id a hit, none counted.
            self.stats.looked_up += n as u64;
            self.stats.hits += n as u64;
        } else if self.capacity > 0 {
            tally(
                &mut self.policy,
                &mut self.deferred,
                &mut self.counter,
                &self.resident_bits,
                &self.picked,
                self.hand_over_ids,
                &mut self.stats,
            );
        }
        self.stats.gathering += called.elapsed();
        Ok(())
    }

    /// The ids the last [`note_reads`](HotTier::note_reads) was given, in mapped memory the
    /// tier keeps (written there as they were checked), for the kernel that reads their rows
    /// to take as a `#[mapped] ids: &[u32]` argument: no copy of the caller's. Empty where a
    /// gather, or a `note_reads` that failed, came after it, or none came yet. The memory is the ring of four batches' ids the gathers use: the gather or
    /// `note_reads` four batches later waits, on the host, for the kernels that read it
    /// (leaked guards' too); kernels only read it (it is lent shared, and refused where an
    /// argument is `&mut`).
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?;
    /// let mut tier = gpu.hot_tier(table, 4, 1 << 10)?;
    /// assert!(tier.noted_ids().is_empty());
    /// tier.note_reads(&gpu, &[3, 9, 3])?;
    /// assert_eq!(tier.noted_ids().to_vec(), [3, 9, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn noted_ids(&self) -> &NotedIds {
        &self.ids
    }

    /// What the tier has done so far.
    pub fn stats(&self) -> HotTierStats {
        self.stats
    }

    /// The rows the tier's gathers have read so far, and how many of them the gather kernels
    /// did not find in device memory, as the GPU counted them: unlike
    /// [`HotTierStats::hits`], a row a capture copied in counts as read from device memory
    /// from the next gather on, and every row is counted, not a sample. Waits, on the host,
    /// for the gathers queued before (on any queue), then copies the GPU's counters (4 KiB).
    /// Rows read by kernels of the caller's through the tier ([`note_reads`](HotTier::note_reads))
    /// are not counted.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 8 * 16)?; // 8 rows resident at most
    /// let mut out = gpu.alloc_zeroed::<f32>(3 * 4)?;
    /// tier.gather(&gpu, &[3, 9, 3], &mut out)?.wait()?; // rows 3 and 9 captured
    /// let before = tier.gather_reads()?;
    /// assert_eq!((before.rows, before.from_host), (3, 3));
    /// tier.gather(&gpu, &[3, 9, 5], &mut out)?.wait()?;
    /// let last = tier.gather_reads()?.since(&before);
    /// assert_eq!((last.rows, last.from_host), (3, 1)); // 3 and 9 from device memory
    /// assert_eq!(tier.stats().hits, 0); // the host counts them after a refresh
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// A failed copy, or the failure of a gather it waited for.
    pub fn gather_reads(&self) -> Result<GatherReads> {
        let counters = self.misses.to_vec()?;
        Ok(GatherReads {
            rows: self.gathered_rows,
            from_host: counters.iter().sum(),
        })
    }

    /// Queue on `queue` the gather of the rows `ids` into `out` (`ids.len() × width`
    /// elements: row `ids[b]` at `out[b × width..]`), each from device memory if resident,
    /// else from the host table, and count the ids for the next refresh. Batch `n` is the
    /// `n`-th call (from 0), failed ones included.
    ///
    /// While the tier has free slots, the gather logs the rows it misses and a second kernel,
    /// queued after it, copies them from `out` into slots granted to them and names those
    /// slots in the slot table (the gathers queued after it read these rows from device
    /// memory; [`stats`](HotTier::stats) counts them as hits once a refresh has settled
    /// them). The guard is the gather's: waiting for it (or dropping it) waits for the gather
    /// alone, and the capture runs on while the caller goes on; the next gather on the same
    /// stream follows it, host writes and frees of `out` wait for it (leaked guards' too),
    /// and a failure of it is reported by the next synchronise of the stream. Where host
    /// threads gather a share of the rows ([`host_gathers`](HotTier::host_gathers)), the
    /// guard is the last kernel's. The guard keeps `out` borrowed; in a
    /// [`Scope`](crate::Scope), dropping or detaching it leaves the kernels queued, and more
    /// gathers may follow at once (a refresh waits for them: it reads the rows they missed). The ids
    /// go into mapped memory the kernels read in place, a ring of four batches': queuing a
    /// gather also waits (on the host) for the kernels of the gather queued four batches
    /// earlier, whose memory it reuses.
    ///
    /// On a [`Gpu`] or a [`Stream`](crate::Stream), whose callers wait for each batch, a
    /// batch of 16,384 ids or more is staged in parts, two by default
    /// ([`staging_parts`](HotTier::staging_parts); not where host threads gather a share of
    /// it, [`host_gathers`](HotTier::host_gathers)): each part is checked, written and
    /// gathered by a kernel of its own while the host checks and writes the next, so the GPU
    /// starts after the first part's staging.
    ///
    /// While a refresh begun with [`begin_refresh`](HotTier::begin_refresh) ranks, the gather
    /// does not wait for it: it reads the rows resident before the refresh, logs the rows it
    /// misses into a second log (with slots a refresh set apart for that time, as many as it
    /// could), and keeps the ids it counts for the ranking's halved counts. Once the ranking is
    /// done, the next gather queues the refresh's fill and slot table update on `queue`
    /// before its own kernel (without waiting for them: the gather follows them on the same
    /// stream), and reads what they leave.
    ///
    /// # Errors
    /// [`Error::IdOutOfRange`] naming the batch and the first position whose id is not a row
    /// of the table (nothing is queued, nothing counted, a pending refresh left pending; where
    /// that position is in a later part of a batch staged in parts, the earlier parts'
    /// gathers are queued already, after the refresh's kernels if one was ready, and write
    /// their rows of `out`, and the rest is as said);
    /// [`Error::LengthMismatch`] when `out` is not `ids.len() × width` elements; a failed
    /// copy or launch of a finished refresh's kernels (nothing of this gather is queued, and
    /// the refresh stays pending, tried again by the next gather); the launch's errors
    /// (another context's `out`, a queue recording a graph, which cannot take mapped memory).
    ///
    /// # Panics
    /// When the ranking of a pending refresh panicked: its panic, passed on.
    pub fn gather<'a>(
        &'a mut self,
        queue: &'a impl Queue,
        ids: &[u32],
        out: &'a mut DeviceBuffer<T>,
    ) -> Result<Pending<'a>> {
        let batch = self.stats.gathers;
        self.stats.gathers += 1;
        self.ids.last = None;
        let called = std::time::Instant::now();
        let want = ids.len().saturating_mul(self.width);
        if out.len() != want {
            return Err(Error::LengthMismatch {
                what: format!(
                    "hot tier gather of batch {batch}: `out` holds {} ids of {} elements",
                    ids.len(),
                    self.width
                ),
                expected: want,
                got: out.len(),
            });
        }
        let threads = ids.len().saturating_mul(self.units);
        if threads as u64 > u64::from(u32::MAX) * u64::from(Grid::DEFAULT_BLOCK) {
            return Err(Error::Usage(format!(
                "hot tier gather of batch {batch}: {} ids are more than one launch covers",
                ids.len()
            )));
        }
        // The ids go into the ring slot the gather IDS_IN_FLIGHT batches ago used: its
        // `reserve` waits, on the host, for the kernels that read them.
        let ring = (batch % IDS_IN_FLIGHT as u64) as usize;
        let n = ids.len();
        let parts = self.parts(queue, n);
        // Part `k` is the positions `part(k)`: `size` each, the last one what is left.
        let size = n.div_ceil(parts);
        let part = |k: usize| k * size..((k + 1) * size).min(n);
        self.ids.ring[ring].reserve(&self.gpu, n)?;
        if self.claim.len() < n {
            self.claim = self.gpu.alloc_zeroed::<u32>(n.next_power_of_two())?;
        }
        // The ids this gather counts, picked as they are staged (none where the tier holds no
        // row); handed on only once the gather is queued.
        let sample =
            (self.capacity > 0 && !self.whole).then(|| Sample::of_batch(batch, self.count_every));
        self.picked.clear();
        let rows = self.rows;
        self.stagers.ensure(self.staging_threads - 1);
        let helpers = (&self.stagers, self.staging_threads - 1);
        let out_of_range = |position: usize| Error::IdOutOfRange {
            batch,
            position,
            id: ids[position],
            rows,
        };
        if let Some(position) =
            self.ids.ring[ring].write_checked(ids, part(0), rows, sample, &mut self.picked, helpers)
        {
            return Err(out_of_range(position));
        }
        self.stats.staging += called.elapsed();
        // A refresh whose ranking is done: its kernels go first, so that this gather reads
        // the slot table and rows it leaves.
        self.receive(false);
        self.apply(queue, false)?;
        self.report_small(batch, n);
        let capture = self.log_limit > self.live.start;
        let marked = if self.host_share > 0 {
            self.mark_misses(ids)?
        } else {
            0
        };
        self.stats.staged += marked as u64;
        let HotTier {
            table,
            tier,
            slots,
            ids: ids_in_flight,
            live,
            seen,
            on_repeat,
            claim,
            units,
            capacity,
            log_limit,
            staged,
            stage_pos,
            stage,
            misses,
            gathered_rows,
            width,
            policy,
            deferred,
            counter,
            resident_bits,
            whole,
            picked,
            hand_over_ids,
            stats,
            stagers,
            staging_threads,
            ..
        } = self;
        let gather = Gather {
            units: *units,
            width: *width,
            rows,
            capacity: *capacity,
            log_limit: *log_limit,
            on_repeat: *on_repeat,
            marked: marked > 0,
        };
        // The gather kernel over the positions `$part`, reading the ids from `$ids`; its rows
        // counted once it is queued.
        macro_rules! queue_gather {
            ($part:expr, $ids:expr) => {{
                let part: std::ops::Range<usize> = $part;
                let len = part.len() as u64;
                let queued = gather.queue(
                    queue,
                    part,
                    table,
                    tier,
                    &mut *slots,
                    $ids,
                    &mut *out,
                    &mut live.n.dev,
                    &mut live.log,
                    &mut *seen,
                    &mut *claim,
                    staged,
                    &mut *misses,
                );
                if queued.is_ok() {
                    *gathered_rows += len;
                }
                queued
            }};
        }
        // The rows the gather logs are copied from `out` into the slots granted to their
        // places in the log by a later kernel, which reads what the gather (and the scatter)
        // wrote and names each row's slot in the slot table: each guard ends before the next
        // kernel is queued (the gather's is left queued, the next kernel following it on its
        // stream; the scatter's waits on a Gpu or a Stream, after the host's threads; in a
        // Scope all stay queued, in order). If any is not queued, the refresh that settles
        // the log copies its rows from the table instead.
        let all_captured = live.captured;
        if capture {
            live.captured = false;
        }
        let batch_ids = &mut ids_in_flight.ring[ring];
        for k in 1..parts {
            // Part `k - 1`'s kernel runs while the host stages part `k`; it is left queued,
            // the next kernels following it on its stream.
            queue_gather!(part(k - 1), &batch_ids.host)?.leave_queued();
            let started = std::time::Instant::now();
            let helpers = (&*stagers, *staging_threads - 1);
            if let Some(position) =
                batch_ids.write_checked(ids, part(k), rows, sample, picked, helpers)
            {
                return Err(out_of_range(position));
            }
            stats.staging += started.elapsed();
        }
        let last = part(parts - 1);
        stats.rows += n as u64;
        let batch_ids = &batch_ids.host;
        // Counted while the batch's kernels run (after they are queued): the hits from the
        // host's copy of the residency, the counts on the counting thread (here, where there
        // is none); while the policy ranks on its thread, kept for when it is back.
        let mut count = || {
            if *capacity == 0 {
                return;
            }
            if *whole {
                // Every row is resident: each id a hit, none counted.
                stats.looked_up += n as u64;
                stats.hits += n as u64;
                return;
            }
            tally(
                policy,
                deferred,
                counter,
                resident_bits,
                picked,
                *hand_over_ids,
                stats,
            );
        };
        if !capture && marked == 0 {
            let pending = queue_gather!(last, batch_ids)?;
            count();
            stats.gathering += called.elapsed();
            return Ok(pending);
        }
        // Its borrows end here: the capture reads `out` too, and the guard goes back to the
        // caller only after it is queued, under the borrows of this call.
        let mut gathered = Some(queue_gather!(last, batch_ids)?.ends_at_own_point::<'a>());
        if marked > 0 {
            // While the GPU gathers the other rows, the host's threads gather these into
            // `stage` (which the gather does not use; writing it waits for the last scatter).
            copy_rows(table, ids, &stage_pos[..marked], &mut stage[..], *width);
            drop(gathered.take());
            let scatter = Scatter {
                units: *units,
                n,
                marked,
            };
            if !capture {
                let pending = scatter.queue(queue, stage_pos, stage, out)?;
                live.captured = all_captured;
                count();
                stats.gathering += called.elapsed();
                return Ok(pending);
            }
            drop(scatter.queue(queue, stage_pos, stage, &mut *out)?);
        }
        // Queued after the gather on its stream, ordered by it and by the buffers' uses.
        let mut l = Launch::new(queue, &HOT_CAPTURE, Grid::cover(threads))?;
        l.scalar(&(*units as u64));
        l.scalar(&(*capacity as u64));
        l.mapped_prefix(batch_ids, n);
        l.device_prefix(&*claim, n);
        l.device(&live.log);
        l.device(&live.n.dev);
        l.device_prefix(&live.grant.dev, *log_limit);
        l.device_prefix(&live.evict.dev, live.evicts.len().min(*log_limit));
        l.device(&*out);
        l.device_mut(tier);
        l.device_mut(slots);
        let captured = l.submit()?;
        live.captured = all_captured;
        count();
        stats.gathering += called.elapsed();
        let Some(gathered) = gathered else {
            return Ok(captured);
        };
        // The caller waits for the gather alone: the capture only moves rows `out` holds
        // into the tier for later batches, which its uses of the buffers order it before
        // (the next gather on this stream follows it; host writes and frees of `out`, the
        // tier, the slot table and the ids wait for it, leaked guards' too).
        captured.leave_queued();
        Ok(gathered)
    }

    /// The parts a batch of `n` ids is staged in: where the caller waits for each batch (on
    /// a [`Gpu`] or a [`Stream`](crate::Stream)), as many as
    /// [`staging_parts`](HotTier::staging_parts) says and [`PART_IDS`] ids each allow (each
    /// part's kernel queued as soon as its ids are checked and written, running while the
    /// host stages the next); else one. In a [`Scope`](crate::Scope) the host stages the next
    /// batches while the GPU gathers anyway, and more parts would only add their launches to
    /// the host's work; rows the host's threads gather are marked over the whole batch.
    fn parts(&self, queue: &impl Queue, n: usize) -> usize {
        let crate::queue::QueueRef(_, _, mode) = queue.__queue();
        if matches!(mode, crate::queue::Mode::Wait) {
            self.parts_for(n)
        } else {
            1
        }
    }

    /// The share of the rows a batch does not find resident that the host's threads gather,
    /// while the GPU reads the others in place (0 to 1; 0, the GPU reads them all, by
    /// default: see `docs/hot-tier.md` for when the host's threads pay).
    ///
    /// Each gather first looks its ids up in the host's copy of the residency (one bit per
    /// row) and marks a `share` of the rows not resident, spread evenly over the batch. The
    /// gather kernel is queued at once and skips the marked rows; meanwhile threads of the
    /// host copy those rows from the table into pinned memory, back to back, and a second
    /// kernel moves them into `out`, reading that memory in one stream. Random rows of a
    /// large table are read at a few tens of millions a second either way, over the link by
    /// the GPU or from memory by the host's cores; splitting them serves them at both rates
    /// at once. A row the host's copy calls resident but the device does not (or the
    /// reverse) is still read right: the kernel decides by the device's slot table, and only
    /// rows the host marked are left to it.
    ///
    /// ```
    /// # use berth_runtime::Gpu;
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = Gpu::new_or_simulator()?;
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?;
    /// let mut tier = gpu.hot_tier(table, 4, 1 << 10)?;
    /// tier.host_gathers(0.0); // every row not resident read in place by the GPU
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// assert_eq!(tier.stats().staged, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn host_gathers(&mut self, share: f64) {
        self.host_share = (share.clamp(0.0, 1.0) * 1024.0).round() as u32;
    }

    /// Mark the rows of `ids` the host's threads gather (a share of those the host's
    /// residency bits call not resident): `PENDING` at their positions in `staged`
    /// (`NOT_RESIDENT` elsewhere), the positions in order in `stage_pos`; the number marked.
    /// Writing either buffer waits for the kernels still reading it.
    fn mark_misses(&mut self, ids: &[u32]) -> Result<usize> {
        use rayon::prelude::*;
        let n = ids.len();
        if self.staged.len() < n {
            self.staged = self.gpu.mapped_zeroed(n.next_power_of_two())?;
        }
        let (bits, capacity, share) = (&self.resident_bits, self.capacity, self.host_share);
        let resident = |id: u32| capacity > 0 && bit(bits, id);
        // Each chunk's positions: the rows not resident, every one whose running count
        // crosses a multiple of 1024 / share is the host's.
        let positions: Vec<Vec<u32>> = self.staged[..n]
            .par_chunks_mut(CHUNK)
            .zip(ids.par_chunks(CHUNK))
            .enumerate()
            .map(|(c, (places, ids))| {
                let (mut misses, mut mine) = (0u32, Vec::new());
                for (i, (place, &id)) in places.iter_mut().zip(ids).enumerate() {
                    *place = NOT_RESIDENT;
                    if !resident(id) {
                        misses += 1;
                        if (misses * share) / 1024 != ((misses - 1) * share) / 1024 {
                            *place = PENDING;
                            mine.push((c * CHUNK + i) as u32);
                        }
                    }
                }
                mine
            })
            .collect();
        let marked: usize = positions.iter().map(Vec::len).sum();
        if marked == 0 {
            return Ok(0);
        }
        if self.stage_pos.len() < marked {
            self.stage_pos = self.gpu.mapped_zeroed(marked.next_power_of_two())?;
        }
        let mut at = 0;
        for p in positions {
            self.stage_pos[at..at + p.len()].copy_from_slice(&p);
            at += p.len();
        }
        let width = self.width;
        if self.stage.len() < marked * width {
            self.stage = self.gpu.mapped_zeroed(marked.next_power_of_two() * width)?;
        }
        Ok(marked)
    }

    /// Count every `every`-th id of each batch instead of every id (1, the default, counts
    /// them all). Counting is host work with two random reads per counted id into arrays of
    /// one entry per table row, which for a table of many millions of rows costs more than
    /// the gather itself; the rows read most are still the ones counted most when only a
    /// sample is counted, and [`HotTierStats::hit_rate`] becomes an estimate from the same
    /// sample. Which ids of a batch are counted moves from batch to batch (batch `b` counts
    /// positions `b mod every`, `b mod every + every`, …), so that every position is counted
    /// in some batches.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// use std::num::NonZeroUsize;
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_zeroed::<f32>(16 * 4)?; // 16 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 16 * 4 + 8 * 16)?; // the slot table, 8 rows
    /// tier.count_every(NonZeroUsize::new(4).expect("not zero"));
    /// let mut out = gpu.alloc_zeroed::<f32>(8 * 4)?;
    /// tier.gather(&gpu, &[3, 3, 3, 3, 5, 5, 5, 5], &mut out)?.wait()?;
    /// // Batch 0 counts positions 0 and 4.
    /// assert_eq!((tier.stats().rows, tier.stats().counted), (8, 2));
    /// assert_eq!((tier.count(3), tier.count(5)), (1, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn count_every(&mut self, every: std::num::NonZeroUsize) {
        self.count_every = every.get();
    }

    /// Admit a missed row only once it has been missed twice (`true`), rather than at its
    /// first miss (`false`, the default). Under a skewed law most of the rows a batch misses
    /// are read once in a long while: admitting each costs a copy into the tier and host work
    /// at the refresh, and takes a slot from a row read more often. A doorkeeper on the device
    /// (one bit per row, 1/32 byte per row on top of the budget, cleared every 16 refreshes)
    /// remembers the first miss; the second one is logged for admission. Rows counted most
    /// are admitted either way.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_zeroed::<f32>(16 * 4)?; // 16 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 16 * 4 + 8 * 16)?; // the slot table, 8 rows
    /// // Batch b counts only its position b: row 3 in both batches below.
    /// tier.count_every(std::num::NonZeroUsize::new(1000).expect("not zero"));
    /// tier.admit_on_repeat(true);
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 5], &mut out)?.wait()?;
    /// tier.refresh(&gpu)?;
    /// assert!(tier.is_resident(3) && !tier.is_resident(5)); // row 5 was missed once
    /// tier.gather(&gpu, &[5, 3], &mut out)?.wait()?;
    /// tier.refresh(&gpu)?;
    /// assert!(tier.is_resident(5)); // and now twice
    /// # Ok(())
    /// # }
    /// ```
    pub fn admit_on_repeat(&mut self, on: bool) {
        self.on_repeat = on;
    }

    /// The most parts a large batch gathered on a [`Gpu`] or a [`Stream`](crate::Stream) is
    /// staged in (2 by default; at most 8, more is taken as 8; each part at least 8,192
    /// ids). The host checks and writes the ids part by part, and each part's kernel is
    /// queued as soon as its ids are written, so the GPU starts after the first part's
    /// staging, not the whole batch's, and gathers one part while the host stages the next
    /// (see [`gather`](HotTier::gather)). Each part adds a launch to the host's work: 1
    /// stages every batch whole, for a loop that does not wait for each batch.
    ///
    /// ```
    /// # use berth_runtime::Gpu;
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = Gpu::new_or_simulator()?;
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?;
    /// let mut tier = gpu.hot_tier(table, 4, 1 << 10)?;
    /// tier.staging_parts(1); // whole batches
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn staging_parts(&mut self, parts: usize) {
        self.parts = parts.clamp(1, MAX_STAGING_PARTS);
    }

    /// The parts a batch of `batch_rows` ids is staged in on a `Gpu` or a `Stream`: up to
    /// [`max_staging_parts`](HotTier::max_staging_parts), each of at least 8,192 ids; 1 where
    /// host threads gather a share of the rows ([`host_gathers`](HotTier::host_gathers)). In
    /// a `Scope` a batch goes whole.
    pub fn parts_for(&self, batch_rows: usize) -> usize {
        if self.host_share == 0 {
            self.parts.min(batch_rows / PART_IDS).max(1)
        } else {
            1
        }
    }

    /// The most parts a large batch is staged in ([`staging_parts`](HotTier::staging_parts)).
    pub fn max_staging_parts(&self) -> usize {
        self.parts
    }

    /// The threads that stage each part of a batch together: the gathering thread and
    /// `threads − 1` helpers of the tier's (by default 3 on a host of 16 cores or more, 2 on
    /// one of 4 to 15, else 1: the gathering thread alone; at most 8, more is taken as 8;
    /// each thread's share at least 4,096 ids, so smaller parts use fewer). Staging is a pass over memory, the
    /// caller's ids read and the tier's mapped memory written, and one core moves only a few
    /// GB/s: with helpers, each stages a share of every part at once (on a 16-core GPU host,
    /// 65,536 ids took 38 µs on one thread, 15 µs on two and 8 µs on four). A helper spins for the next share for 2 ms after each
    /// one, then sleeps until the next gather wakes it (waking takes about as long as a
    /// share takes to stage): while batches come back to back, each helper keeps a core
    /// busy. A share its helper has not begun by the time the gathering thread is done with
    /// its own, the gathering thread stages itself, so a helper asleep or without a core
    /// costs no more than staging alone. The helpers start at the first gather that uses
    /// them and end with the tier.
    ///
    /// ```
    /// # use berth_runtime::Gpu;
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = Gpu::new_or_simulator()?;
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?;
    /// let mut tier = gpu.hot_tier(table, 4, 1 << 10)?;
    /// tier.staging_threads(3); // the gathering thread and two helpers
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn staging_threads(&mut self, threads: usize) {
        self.staging_threads = threads.clamp(1, MAX_STAGING_THREADS);
    }

    /// The threads that stage each part ([`staging_threads`](HotTier::staging_threads)).
    pub fn max_staging_threads(&self) -> usize {
        self.staging_threads
    }

    /// Give each miss log places for at least `rows` missed rows (up to 4 Mi, and the tier's
    /// slots), taking the slots of cold rows where the free ones are too few; 0, the default,
    /// grants the free slots alone. The gathers log the rows they miss only into granted
    /// places, so a full tier otherwise admits new rows only through the counted ids a
    /// refresh ranks: a hot set that moves to rows the tier never held then comes in one
    /// ranking at a time.
    ///
    /// A refresh grants such a place the slot of a resident row counted 0 and unreferenced:
    /// first those a capture admitted and nothing read since, oldest first (so that a row
    /// the law reads once takes the place of another such row, not of a row it reads now
    /// and then), then those the clock's hand finds; cold rows' slots are granted only once
    /// the free slots run short, and a log holds free slots only up to twice the places the
    /// gathers took in its role since the last refresh (a free slot granted to a place
    /// holds no row until a capture takes it, so a log that takes few would keep it empty).
    /// The row stays resident: only the capture that copies a missed row into the slot
    /// evicts it, on the device, so a place the gathers do not take costs nothing. The next
    /// refresh settles both rows (until then [`is_resident`](HotTier::is_resident) still
    /// names the row evicted). Rows the gathers miss are then read from device memory from
    /// the next gather on, at the cost of cold rows that a law that does not move might
    /// read again (`docs/hot-tier.md` measures both). A place no capture took stays with
    /// its log, its cold row with it, and the gathers' log stays theirs from one refresh to
    /// the next: a refresh adds as many places as the captures took, so the clock's hand
    /// looks at about as many resident rows, and the refresh writes about as many places to
    /// the device. The logs and their lists take 24 bytes a place of device memory beside
    /// the budget: their buffers hold twice their places, the places added following those
    /// kept until the buffers are full (then all of them move to the front, one write of
    /// the whole log). The host keeps the slots the captures filled, to grant first, 8
    /// bytes each for up to two logs' places.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&(0..64 * 4).map(|v| v as f32).collect::<Vec<_>>())?;
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 4 * 16)?; // the slot table, 4 rows
    /// tier.capture_room(2);
    /// let mut out = gpu.alloc_zeroed::<f32>(4 * 4)?;
    /// tier.gather(&gpu, &[0, 1, 2, 3], &mut out)?.wait()?;
    /// tier.refresh(&gpu)?; // rows 0 to 3 fill the tier; counted once, they are cold after
    /// tier.refresh(&gpu)?; // the halving: two of their slots go to the log
    /// let (before, mut two) = (tier.gather_reads()?, gpu.alloc_zeroed::<f32>(2 * 4)?);
    /// tier.gather(&gpu, &[40, 41], &mut two)?.wait()?; // missed, captured, two rows evicted
    /// tier.gather(&gpu, &[40, 41], &mut two)?.wait()?; // read from device memory
    /// assert_eq!(tier.gather_reads()?.since(&before).from_host, 2);
    /// assert_eq!(two.to_vec()?[..4], [160.0, 161.0, 162.0, 163.0]);
    /// tier.refresh(&gpu)?;
    /// assert!(tier.is_resident(40) && tier.is_resident(41) && tier.resident_rows() == 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn capture_room(&mut self, rows: usize) {
        self.capture_room = rows;
    }

    /// Places of the miss logs the next refresh grants: a log's length.
    fn log_len(&self) -> usize {
        self.capacity
            .min(LOG_MAX.max(self.capture_room.min(ROOM_MAX)))
    }

    /// Places of the buffers of the miss logs the next refresh makes: a log's length, twice
    /// over with room for captures (the places a log keeps are followed by those added,
    /// until the buffers are full, [`MissLog`]).
    fn log_places(&self) -> usize {
        if self.capture_room > 0 {
            2 * self.log_len()
        } else {
            self.log_len()
        }
    }

    /// Report, once, a batch with more rows than the tier holds.
    fn report_small(&mut self, batch: u64, ids: usize) {
        if ids > self.capacity && !self.reported_small {
            self.reported_small = true;
            tracing::debug!(
                batch,
                ids,
                capacity = self.capacity,
                budget = self.budget,
                "hot tier: a batch has more rows than the budget holds: the rest are read from host memory"
            );
        }
    }

    /// Make the rows counted most resident, as many as the tier holds (ties: resident rows
    /// first, then the lower id), and while slots remain free, the rows the gathers since the
    /// last refresh missed too (counted or not, in the order the gathers logged them; see
    /// [`HotTier::count_every`]); then halve every count. New rows are copied in from the
    /// host table by a kernel queued on `queue` into free slots, and the device's slot table
    /// is updated by a second kernel there, for the entries that changed only; gathers queued
    /// later read the new rows from device memory. When the free slots are too few, resident
    /// rows no longer kept leave (the least counted first), and their slots are refilled from
    /// the next refresh on: gathers queued before this refresh may still read them, and only
    /// work queued after this refresh's slot table update may overwrite them.
    ///
    /// This is [`begin_refresh`](HotTier::begin_refresh) and
    /// [`finish_refresh`](HotTier::finish_refresh) in one call: the caller's thread waits for
    /// the ranking. A batch loop that should not wait for it calls `begin_refresh` instead.
    ///
    /// The gathers log the rows they miss on the device; a refresh reads that log, so it
    /// waits (on the host) for the gathers queued before it (`begin_refresh` leaves that wait
    /// to the ranking's thread). Its own kernels are queued: on a
    /// [`Gpu`] or a [`Stream`](crate::Stream) the call returns once they are done; in a
    /// [`Scope`](crate::Scope) it returns at once, the scope waiting for them at its end.
    ///
    /// # Errors
    /// Those of [`begin_refresh`](HotTier::begin_refresh) and
    /// [`finish_refresh`](HotTier::finish_refresh); the tier stays consistent (never a
    /// resident row that differs from the table).
    pub fn refresh(&mut self, queue: &impl Queue) -> Result<Refresh> {
        self.begin_refresh(queue)?;
        Ok(self.finish_refresh(queue)?.unwrap_or(Refresh {
            resident: self.resident_count,
            ..Refresh::default()
        }))
    }

    /// Start a refresh ([`refresh`](HotTier::refresh) says what it does) without waiting for
    /// it: the call hands the miss log's device buffers, the ranking, the choice of slots
    /// and the halving of the counts to a thread of its own (which also takes the counts back
    /// from the counting thread, waiting for the ids it is adding), then returns. That thread reads
    /// the log once the gathers queued before the call are done (the caller's thread does not
    /// wait for them), then ranks. Gathers go on meanwhile, reading the slot table and the
    /// rows resident before the refresh; they count their ids (added to the halved counts
    /// once the ranking is done) and log the rows they miss into a second log, whose slots
    /// the last refresh set apart (the free slots beyond those of the first log, up to a log's
    /// length), read from device memory from the next gather on and settled by the next
    /// refresh. The first gather that finds the ranking
    /// done queues the refresh's fill and slot table update on its own queue before its
    /// gather kernel (with the runtime's ordering after the gathers in flight, as for
    /// `refresh`), and grants the free slots to the next gathers' logs;
    /// [`finish_refresh`](HotTier::finish_refresh) does it at once, waiting for the ranking
    /// if it is not done.
    ///
    /// A refresh still pending is finished first (on `queue`). On a tier that holds no row,
    /// a refresh does nothing. Where the system starts no thread, the ranking runs on the
    /// caller's (said at `debug` level), and the next gather or `finish_refresh` queues its
    /// kernels.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 16 * 16)?; // the slot table, 16 rows
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// tier.begin_refresh(&gpu)?; // ranks on another thread
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?; // does not wait for the ranking
    /// tier.finish_refresh(&gpu)?; // if the gather did not apply it yet
    /// assert!(!tier.refresh_pending() && tier.is_resident(3) && tier.is_resident(9));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// Those of finishing a pending refresh; the error of the last refresh's ranking when it
    /// could not read the miss log or clear the doorkeeper (a failed copy or launch, found
    /// since: that refresh changed nothing, and left the log to the next); `Error::Usage`
    /// when an earlier ranking panicked (the tier then reads the rows resident before it,
    /// and refreshes no more). Each error is returned once; nothing is started.
    pub fn begin_refresh(&mut self, queue: &impl Queue) -> Result<()> {
        let start = std::time::Instant::now();
        if self.refresh_pending() {
            self.finish_refresh(queue)?;
            tracing::debug!(
                finish_us = start.elapsed().as_micros(),
                "hot tier: a refresh begun with the last one pending finished that one first"
            );
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.capacity == 0 || self.whole {
            self.stats.refreshes += 1;
            self.roll_window(queue);
            return Ok(());
        }
        if matches!(self.policy, PolicyState::Lost) {
            return Err(Error::Usage(
                "a hot tier's ranking (or counting) panicked: the tier refreshes no more".into(),
            ));
        }
        // The doorkeeper forgets, for the gathers queued from now on.
        if self.on_repeat
            && !self.seen.is_empty()
            && (self.stats.refreshes + 1).is_multiple_of(DOORKEEPER_REFRESHES)
        {
            let mut l = Launch::new(queue, &FILL_U32, Grid::cover(self.seen.len()))?;
            l.scalar(&0u64);
            l.device_mut(&mut self.seen);
            l.submit()?.leave_queued();
        }
        // The counts of the ids gathered so far go into the ranking: those the counting
        // thread has (the ranking's thread waits for it to give the policy back, not this
        // one), and the ids kept since, which the ranking's thread adds first.
        let policy = match std::mem::replace(&mut self.policy, PolicyState::Lost) {
            PolicyState::Idle(policy) => Source::Here(policy),
            PolicyState::Counting => match &self.counter {
                Some(counter) => Source::Counter(counter.back.clone()),
                None => unreachable!("the policy is counted only by a counting thread"),
            },
            _ => unreachable!("a pending refresh was finished above, and a lost one refused"),
        };
        // The miss log and the logs left from the last ranking go with the ranking, which
        // reads them once the gathers queued before now are done; gathers queued meanwhile
        // log into the log granted for that time (or, where there is none, log nothing).
        let side = match self.next.take() {
            Some(log) => log,
            None => MissLog::new(&self.gpu, 0)?,
        };
        // In the order they were filled (the ranking settles a row a capture evicted before
        // one that logged it again).
        let mut logs = std::mem::take(&mut self.filled);
        logs.push(std::mem::replace(&mut self.live, side));
        let job = Job {
            policy: Some(policy),
            counted: std::mem::take(&mut self.deferred),
            room: self.capture_room,
            logs,
            lists: self
                .lists
                .take()
                .expect("the lists are here while no refresh is pending"),
            gpu: self.gpu.clone(),
            log_len: self.log_len(),
            log_places: self.log_places(),
            gate: self.gate.clone(),
        };
        self.stats.refreshes += 1;
        self.roll_window(queue);
        self.log_limit = self.live.limit();
        // The thread gets its data through a channel, so that the data stays here when no
        // thread can be started (then the ranking runs on this thread).
        let (send, recv) = std::sync::mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("berth-hot-tier".into())
            .spawn(move || recv.recv().ok().map(Job::run));
        let unsent = match spawned {
            Ok(handle) => match send.send(job) {
                Ok(()) => {
                    self.policy = PolicyState::Running(Worker {
                        handle: Some(handle),
                        gate: self.gate.clone(),
                    });
                    return Ok(());
                }
                Err(std::sync::mpsc::SendError(job)) => job,
            },
            Err(e) => {
                tracing::debug!(error = %e, "hot tier: no thread for the ranking: it runs on the caller's");
                job
            }
        };
        self.settle(unsent.run());
        Ok(())
    }

    /// Finish the pending refresh, if any: wait for its ranking (on the host) and queue its
    /// fill and slot table update on `queue`, as [`refresh`](HotTier::refresh) does; what it
    /// changed, or `None` when no refresh was pending (or a gather already applied it).
    ///
    /// # Errors
    /// A failed copy, upload or launch: the refresh stays pending, its kernels not queued
    /// yet tried again by the next gather or `finish_refresh` (until then gathers read the
    /// rows resident before it, which equal the table's). A ranking that could not read the
    /// miss log: its error, once (the refresh changed nothing, and left the log, which the
    /// gathers go on filling, to the next).
    ///
    /// # Panics
    /// When the ranking panicked: its panic, passed on (the tier then reads the rows
    /// resident before it, and [`begin_refresh`](HotTier::begin_refresh) refuses to start
    /// another).
    pub fn finish_refresh(&mut self, queue: &impl Queue) -> Result<Option<Refresh>> {
        self.receive(true);
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.apply(queue, true)
    }

    /// Whether a refresh has begun and its kernels are not queued yet (its ranking may still
    /// run): gathers read the rows resident before it meanwhile.
    pub fn refresh_pending(&self) -> bool {
        matches!(
            self.policy,
            PolicyState::Running(_) | PolicyState::Ready(..)
        )
    }

    /// Hold the rankings of the refreshes begun from now on until the returned guard is
    /// released or dropped: for tests that show what runs while a ranking is pending. While
    /// one is held, [`count`](HotTier::count) and [`finish_refresh`](HotTier::finish_refresh)
    /// wait for it: release it first. Dropping the tier releases it too.
    #[doc(hidden)]
    pub fn __hold_refreshes(&mut self) -> RefreshHold {
        let gate = Arc::new(Gate::default());
        self.gate = Some(gate.clone());
        RefreshHold { gate }
    }

    /// Take the ranking's result if it is done (or, with `block`, once it is). The ids
    /// counted meanwhile stay deferred, for the counting thread to add (see
    /// [`settle`](HotTier::settle)).
    fn receive(&mut self, block: bool) {
        let PolicyState::Running(worker) = &mut self.policy else {
            return;
        };
        let Some(handle) = worker.handle.take_if(|h| block || h.is_finished()) else {
            return;
        };
        match handle.join() {
            Ok(Some(ranked)) => self.settle(ranked),
            Ok(None) => {
                // The thread got no job: not reached, as the job is sent before the state
                // says Running.
                self.policy = PolicyState::Lost;
                self.deferred = Vec::new();
            }
            Err(panic) => {
                self.policy = PolicyState::Lost;
                self.deferred = Vec::new();
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// Take the policy back from the counting thread (waiting for the ids it counts), with
    /// the ids kept since added: the policy is then here (with a plan to apply, if a ranking
    /// is done), unless a ranking runs (or the counting panicked: then it is lost, as
    /// [`hand_over`] says).
    fn reclaim(&mut self) {
        self.take_back();
        if let PolicyState::Idle(p) | PolicyState::Ready(p, _) = &mut self.policy {
            p.add_all(&self.deferred);
            self.deferred.clear();
        }
    }

    /// Take the policy back from the counting thread, waiting for the ids it counts (the ids
    /// kept since stay kept); lost if the counting panicked.
    fn take_back(&mut self) {
        if let PolicyState::Counting = self.policy {
            self.policy = match self.counter.as_mut().and_then(Counter::wait) {
                Some(Ok(policy)) => PolicyState::Idle(policy),
                _ => {
                    self.counter = None;
                    self.deferred = Vec::new();
                    PolicyState::Lost
                }
            };
        }
    }

    /// Take back what a ranking had: the logs, and the policy; with its plan to apply (the
    /// logs, read, to be emptied and granted slots again), or, when a log could not be read,
    /// as it was (the logs, untaken, are read by the next ranking), the error kept for the
    /// next `begin_refresh` or `finish_refresh`. The ids
    /// counted while it ranked (a ranking's time of batches) stay deferred: they go to the
    /// counting thread with the policy once its plan is applied, rather than being added on
    /// the thread that queues the gathers.
    fn settle(&mut self, ranked: Ranked) {
        let Ranked {
            policy,
            logs,
            lists,
            plan,
        } = ranked;
        self.lists = Some(lists);
        let Some(policy) = policy else {
            // The counting thread that had the policy panicked: nothing is refreshed again.
            self.policy = PolicyState::Lost;
            self.counter = None;
            self.deferred = Vec::new();
            self.filled = logs;
            return;
        };
        match plan {
            Ok(mut plan) => {
                plan.logs = logs;
                self.policy = PolicyState::Ready(policy, Box::new(plan));
            }
            Err(e) => {
                // The logs stay as they are, for the next ranking; the gathers go on filling
                // the one they have.
                self.policy = PolicyState::Idle(policy);
                self.filled = logs;
                self.failed = Some(e);
            }
        }
    }

    /// Queue the ready plan's kernels on `queue` (those not queued yet) and grant the free
    /// slots to the next gathers' log; what the refresh changed. With `wait`, the kernels'
    /// guards wait for them (on a `Gpu` or a `Stream`); without, they are left queued for
    /// the gather that follows on the same queue, their buffers' uses ordering what comes
    /// after them.
    fn apply(&mut self, queue: &impl Queue, wait: bool) -> Result<Option<Refresh>> {
        if !matches!(self.policy, PolicyState::Ready(..)) {
            return Ok(None);
        }
        let PolicyState::Ready(mut policy, mut plan) =
            std::mem::replace(&mut self.policy, PolicyState::Lost)
        else {
            unreachable!("checked above")
        };
        let result = self.apply_plan(queue, &mut policy, &mut plan, wait);
        match result {
            Ok(()) => {
                self.policy = PolicyState::Idle(policy);
                // The ids counted while it ranked go to the counting thread.
                hand_over(&mut self.policy, &mut self.deferred, &mut self.counter);
                Ok(Some(plan.refresh))
            }
            Err(e) => {
                self.policy = PolicyState::Ready(policy, plan);
                Err(e)
            }
        }
    }

    /// The steps of [`apply`](HotTier::apply) not done yet, in order: the fill, the slot
    /// table update, the grant. Each is marked done in `plan` once queued, so that a failed
    /// step is tried again from where it stopped.
    fn apply_plan(
        &mut self,
        queue: &impl Queue,
        policy: &mut Policy,
        plan: &mut Plan,
        wait: bool,
    ) -> Result<()> {
        let start = std::time::Instant::now();
        if !plan.filled {
            let n = plan.fill_ids.len();
            if n > 0 {
                // The ranking's thread wrote the lists into pinned memory (or, where it could
                // not, they are written here, waiting for the previous fill if it is still
                // queued).
                let (gpu, max) = (&self.gpu, PINNED_LIST_MAX);
                let lists = self
                    .lists
                    .as_mut()
                    .expect("the lists are back with the plan");
                let fill = &mut lists.fill;
                fill.0
                    .deliver(gpu, queue, 0, &plan.fill_ids, max, plan.written)?;
                fill.1
                    .deliver(gpu, queue, 0, &plan.fill_dst, max, plan.written)?;
                let fill = &lists.fill;
                self.stats.filled += n as u64;
                let shape = Fill {
                    units: self.units,
                    rows: self.rows,
                    capacity: self.capacity,
                };
                let lists = (&fill.0.dev, &fill.1.dev);
                let fill = shape.queue(queue, &self.table, lists, n, &mut self.tier)?;
                if wait {
                    // Dropping the guard waits for the fill, except in a scope.
                    drop(fill);
                } else {
                    // A gather follows on the same queue, under a guard of its own.
                    fill.leave_queued();
                }
            }
            plan.filled = true;
        }
        let filled = start.elapsed();
        if !plan.updated {
            // The fill is queued (it wrote only granted or free slots, which no slot table
            // the device has or will have before this update names). Now the entries of the
            // device's slot table that change: the logged rows' and the admitted rows' slots
            // (the logged rows' entries were pending), and `NOT_RESIDENT` for the rows that
            // leave.
            let n = plan.update_ids.len();
            if n > 0 {
                let (gpu, max) = (&self.gpu, PINNED_LIST_MAX);
                let lists = self
                    .lists
                    .as_mut()
                    .expect("the lists are back with the plan");
                let update = &mut lists.update;
                update
                    .0
                    .deliver(gpu, queue, 0, &plan.update_ids, max, plan.written)?;
                update
                    .1
                    .deliver(gpu, queue, 0, &plan.update_vals, max, plan.written)?;
                let update = &lists.update;
                let lists = (&update.0.dev, &update.1.dev);
                let update = update_slots(queue, self.rows, lists, n, &mut self.slots)?;
                if wait {
                    // Dropping the guard waits for the update, except in a scope.
                    drop(update);
                } else {
                    update.leave_queued();
                }
            }
            // The residency the plan leaves, which the ranking's thread made from the copy
            // the last refresh gave it back; this one's goes back for the next.
            policy.shadow =
                std::mem::replace(&mut self.resident_bits, std::mem::take(&mut plan.bits));
            self.resident_count = plan.refresh.resident;
            self.stats.admitted += plan.refresh.admitted as u64;
            self.stats.evicted += plan.refresh.evicted as u64;
            plan.updated = true;
        }
        // The logs the ranking read that are granted places again, emptied of those taken and
        // granted the slots the policy granted, each to a place: one for the gathers from now
        // on, one for those while the next ranking runs. Gathers queued before the update may
        // read the slots of the rows that left: captures into them are queued after the
        // update, which the runtime orders after those gathers. The log the gathers filled
        // while the ranking ran waits for the next. Of the length the ranking's thread made
        // them (and wrote their lists for).
        while plan.logs.len() < 2 {
            plan.logs.push(MissLog::new(&self.gpu, plan.log_places)?);
        }
        for (log, r) in plan.logs.iter_mut().zip(&plan.regrants) {
            log.install(&self.gpu, queue, r, plan.written)?;
        }
        // Every step is queued: the grants go into the logs' host lists, and the vectors this
        // thread is done with go to the ranking's thread with the policy, to be freed there.
        let Plan {
            logs,
            regrants,
            fill_ids,
            fill_dst,
            update_ids,
            update_vals,
            ..
        } = plan;
        for (log, r) in logs.iter_mut().zip(std::mem::take(regrants)) {
            policy.spare.extend(log.regranted(r));
        }
        policy
            .spare
            .extend([fill_ids, fill_dst, update_ids, update_vals].map(std::mem::take));
        let (side, main) = (plan.logs.pop(), plan.logs.pop());
        let (Some(main), Some(side)) = (main, side) else {
            unreachable!("two logs, made above")
        };
        // Kept even with no slots granted (the next ranking reads nothing from it, and
        // reuses it): freeing device memory waits for the whole device.
        let side_filled = std::mem::replace(&mut self.live, main);
        self.filled.push(side_filled);
        self.next = Some(side);
        self.log_limit = self.live.limit();
        tracing::debug!(
            admitted = plan.refresh.admitted,
            evicted = plan.refresh.evicted,
            logged = plan.logged,
            displaced = plan.displaced,
            resident = plan.refresh.resident,
            candidates = plan.candidates,
            add_us = plan.add.as_micros(),
            log_read_us = plan.log_read.as_micros(),
            policy_us = plan.policy.as_micros(),
            write_us = plan.write.as_micros(),
            fill_us = filled.as_micros(),
            update_us = (start.elapsed() - filled).as_micros(),
            "hot tier refreshed"
        );
        self.stats.ranking += plan.policy;
        self.stats.log_read += plan.log_read;
        self.stats.apply += start.elapsed();
        Ok(())
    }
}

/// One miss log: the rows the gathers logged into it as missed, the slots granted to its
/// places, and whether every gather that logged into it had its capture queued.
///
/// Its places are numbered from 0: the gathers take them from `start` on, up to the last one
/// granted. With room for captures, its buffers hold twice the places a log has at most
/// ([`HotTier::log_places`]), and a refresh settles the places taken and grants new ones after
/// those not taken, which keep their slots (all of them moved to place 0 where the buffers
/// have no room after them), so that it reads and writes about as many places as the gathers
/// took, not the whole log. Without, a refresh grants every place again from 0.
struct MissLog {
    /// The number of places taken (one counter; none for a log of length 0), and the value
    /// to reset it to.
    n: Staged<u64>,
    /// The rows logged, each at the place it claimed.
    log: DeviceBuffer<u32>,
    /// The slots granted to its places, on the device (for the captures).
    grant: Staged,
    /// The same, on the host, from place 0 (those before `start` are settled).
    granted: Vec<u32>,
    /// The rows those slots hold, each evicted by the capture that takes its place, on the
    /// device (for the captures; none sent where every slot granted was free).
    evict: Staged,
    /// The same, on the host: one per place, [`NOT_RESIDENT`] for a free slot, or empty
    /// where every slot granted was free.
    evicts: Vec<u32>,
    /// The first place the gathers may take.
    start: usize,
    /// Whether every gather that may have logged rows into it had its capture queued; if not,
    /// the refresh that settles it copies its rows from the table.
    captured: bool,
}

/// What a ranking read from one miss log.
struct Logged {
    /// The rows logged (distinct, not resident when logged), in the order of their places.
    ids: Vec<u32>,
    /// The slots granted to those places.
    granted: Vec<u32>,
    /// The rows those slots held when granted, one per place ([`NOT_RESIDENT`] for a free
    /// slot; empty where every slot was free).
    evicts: Vec<u32>,
    /// Whether every row logged was copied into its slot by a capture.
    captured: bool,
    /// The places no gather took.
    untaken: Untaken,
}

/// The places of a log that no gather took, once a ranking has read it.
enum Untaken {
    /// Kept by the log, this many, for the gathers after the refresh.
    Kept(usize),
    /// Let go: their slots, and the rows those hold (as [`Logged::granted`] and
    /// [`Logged::evicts`]).
    LetGo(Vec<u32>, Vec<u32>),
}

/// How a refresh grants a log's places: the place the gathers take first, and the lists
/// written into the log's, each from a place (the host's list cut there first).
struct Regrant {
    start: usize,
    /// The slots: of the places added after those the log keeps, or, where its buffers have
    /// no room after them, of every place from 0.
    grant: (usize, Vec<u32>),
    /// The rows those slots hold, as [`MissLog::evicts`] has them (an empty list writes
    /// nothing).
    evict: (usize, Vec<u32>),
}

impl Regrant {
    /// Places from 0, the slots `granted` holding the rows `evicts` (empty where every slot
    /// is free).
    fn fresh(granted: Vec<u32>, evicts: Vec<u32>) -> Regrant {
        Regrant {
            start: 0,
            grant: (0, granted),
            evict: (0, evicts),
        }
    }
}

impl MissLog {
    /// An empty log of buffers of `places` places, none granted (0: a log the gathers
    /// cannot log into).
    fn new(gpu: &Gpu, places: usize) -> Result<MissLog> {
        let mut n = Staged::new(gpu)?;
        n.dev = gpu.alloc_zeroed::<u64>(usize::from(places > 0))?;
        let mut grant = Staged::new(gpu)?;
        grant.dev = gpu.alloc_zeroed::<u32>(places)?;
        Ok(MissLog {
            n,
            log: gpu.alloc_zeroed::<u32>(places)?,
            grant,
            granted: Vec::new(),
            evict: Staged::new(gpu)?,
            evicts: Vec::new(),
            start: 0,
            captured: true,
        })
    }

    /// The end of the places the gathers may take: its last granted one, within its buffer.
    fn limit(&self) -> usize {
        if self.n.dev.is_empty() {
            0
        } else {
            self.granted.len().min(self.log.len())
        }
    }

    /// The rows the gathers logged (distinct, not resident when logged) at the places they
    /// took, with the slots granted to those places, and the places they did not take: kept
    /// by the log if `keep`. Each host access waits for the gathers queued before that wrote
    /// the buffer; the log is left as it was.
    fn read(&self, keep: bool) -> Result<Logged> {
        let limit = self.limit();
        let n = if limit > self.start {
            let n = self.n.dev.to_vec()?[0];
            usize::try_from(n)
                .unwrap_or(usize::MAX)
                .clamp(self.start, limit)
        } else {
            self.start.min(limit)
        };
        let evicts = |r: std::ops::Range<usize>| self.evicts.get(r).unwrap_or_default().to_vec();
        let untaken = if keep {
            Untaken::Kept(limit - n)
        } else {
            Untaken::LetGo(self.granted[n..limit].to_vec(), evicts(n..limit))
        };
        Ok(Logged {
            ids: self.log.range_to_vec(self.start..n)?,
            granted: self.granted[self.start..n].to_vec(),
            evicts: evicts(self.start..n),
            captured: self.captured,
            untaken,
        })
    }

    /// The places after those up to `end` (taken, and settled), kept, with places added for
    /// the slots `granted`, holding the rows `evicts` (empty where every slot is free): after
    /// the kept ones where the buffers have room, else all of them from place 0.
    fn regrant(&self, end: usize, granted: Vec<u32>, evicts: Vec<u32>) -> Regrant {
        let limit = self.limit();
        let end = end.min(limit);
        if limit + granted.len() <= self.log.len() {
            // The host's list of rows is empty or covers every place granted.
            let evict = match (self.evicts.is_empty(), evicts.is_empty()) {
                (true, true) => (0, Vec::new()),
                (true, false) => {
                    let mut all = vec![NOT_RESIDENT; limit];
                    all.extend_from_slice(&evicts);
                    (0, all)
                }
                (false, true) => (limit, vec![NOT_RESIDENT; granted.len()]),
                (false, false) => (limit, evicts),
            };
            return Regrant {
                start: end,
                grant: (limit, granted),
                evict,
            };
        }
        let mut all = Vec::with_capacity(limit - end + granted.len());
        all.extend_from_slice(&self.granted[end..limit]);
        all.extend_from_slice(&granted);
        let kept = self.evicts.get(end..limit).unwrap_or_default();
        let rows = if kept.iter().any(|&v| v != NOT_RESIDENT) || !evicts.is_empty() {
            let mut rows = kept.to_vec();
            rows.resize(limit - end, NOT_RESIDENT);
            if evicts.is_empty() {
                rows.resize(all.len(), NOT_RESIDENT);
            } else {
                rows.extend_from_slice(&evicts);
            }
            rows
        } else {
            Vec::new()
        };
        Regrant {
            start: 0,
            grant: (0, all),
            evict: (0, rows),
        }
    }

    /// Empty the log's places taken for the work queued on `queue` from now on, and write
    /// the lists of `regrant` (which the ranking's thread wrote into the lists' pinned memory
    /// if `written`); the host's lists stay as they are until
    /// [`regranted`](MissLog::regranted).
    fn install(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        regrant: &Regrant,
        written: bool,
    ) -> Result<()> {
        if !self.n.dev.is_empty() {
            self.n.put(gpu, queue, &[regrant.start as u64], 1)?;
        }
        let (at, granted) = (regrant.grant.0, &regrant.grant.1);
        self.grant
            .deliver(gpu, queue, at, granted, PINNED_LIST_MAX, written)?;
        let (at, evicts) = (regrant.evict.0, &regrant.evict.1);
        if !evicts.is_empty() {
            if self.evict.dev.len() < self.log.len() {
                // The first rows written start at place 0: the list takes the buffers' length.
                self.evict.dev = gpu.alloc_zeroed::<u32>(self.log.len())?;
            }
            self.evict
                .deliver(gpu, queue, at, evicts, PINNED_LIST_MAX, written)?;
        }
        self.captured = true;
        Ok(())
    }

    /// The host's lists once `regrant` is installed; the vectors it is done with, to be freed
    /// on the ranking's thread.
    fn regranted(&mut self, regrant: Regrant) -> [Vec<u32>; 2] {
        self.start = regrant.start;
        let mut done = [Vec::new(), Vec::new()];
        for ((at, mut list), (mine, done)) in [regrant.grant, regrant.evict].into_iter().zip(
            [&mut self.granted, &mut self.evicts]
                .into_iter()
                .zip(&mut done),
        ) {
            if at == 0 {
                std::mem::swap(mine, &mut list);
            } else {
                mine.truncate(at);
                mine.extend_from_slice(&list);
            }
            *done = list;
        }
        done
    }
}

/// What a ranking thread is given: the policy's state and the log to read.
struct Job {
    /// The policy, or where to take it back from (taken when the job runs).
    policy: Option<Source>,
    /// Ids counted since the policy was last given the ids to count, added before it ranks.
    counted: Vec<u32>,
    /// Places each log has at least ([`HotTier::capture_room`]).
    room: usize,
    /// The logs to read and settle, in the order they were filled.
    logs: Vec<MissLog>,
    /// The tier's lists, to write the plan's into.
    lists: PlanLists,
    gpu: Gpu,
    /// Places of a miss log at most, and of its buffers.
    log_len: usize,
    log_places: usize,
    gate: Option<Arc<Gate>>,
}

/// Where a ranking takes the policy from.
enum Source {
    Here(Box<Policy>),
    /// The counting thread, once it has counted the ids it was given.
    Counter(Arc<Mutex<CountBack>>),
}

/// What a ranking thread gives back.
struct Ranked {
    /// The policy (`None` when the counting thread that had it panicked or ended).
    policy: Option<Box<Policy>>,
    /// The logs, as they were (the tier empties them once the plan is applied), or, with a
    /// plan, the two to grant its slots to.
    logs: Vec<MissLog>,
    lists: PlanLists,
    /// The plan, or why a log could not be read (the policy then untouched, but for the
    /// counted ids added).
    plan: Result<Plan>,
}

impl Job {
    /// Wait at the gate, if any, add the counted ids, read the logs, then rank (adding and
    /// ranking on the host's threads for work beside the gathers, [`beside_gathers`]; the
    /// waits outside it, so that the counting thread can finish in that pool).
    fn run(mut self) -> Ranked {
        if let Some(gate) = &self.gate {
            gate.wait();
        }
        let started = std::time::Instant::now();
        let mut policy = match self.policy.take() {
            Some(Source::Here(policy)) => policy,
            Some(Source::Counter(back)) => match Counter::take(&back) {
                Some(Ok(policy)) => policy,
                _ => {
                    return Ranked {
                        policy: None,
                        logs: self.logs,
                        lists: self.lists,
                        plan: Err(Error::Usage(
                            "a hot tier's counting thread panicked: the tier refreshes no more"
                                .into(),
                        )),
                    };
                }
            },
            None => unreachable!("a job runs once"),
        };
        let taken = started.elapsed();
        policy.spare.clear();
        beside_gathers(|| policy.add_all(&self.counted));
        let start = std::time::Instant::now();
        let (room, log_len, log_places) = (self.room, self.log_len, self.log_places);
        policy.log_len = log_len;
        // The logs granted places again: the last two filled of the buffers asked for, the
        // gathers' log until now staying theirs from the plan on, the one before it theirs
        // while the next ranking runs. With room for captures, they keep the places no
        // gather took; the others are let go.
        let targets: Vec<usize> = (0..self.logs.len())
            .rev()
            .filter(|&i| self.logs[i].log.len() == log_places && log_len > 0)
            .take(2)
            .collect();
        let mut plan = self
            .logs
            .iter()
            .enumerate()
            .map(|(i, log)| log.read(room > 0 && targets.contains(&i)))
            .collect::<Result<Vec<_>>>()
            .map(|logged| {
                let log_read = start.elapsed();
                let mut kept = [0; 2];
                for (kept, &i) in kept.iter_mut().zip(&targets) {
                    if let Untaken::Kept(k) = logged[i].untaken {
                        *kept = k;
                    }
                }
                // With room, the free slots among the places each log keeps (a sequential
                // pass over the host's list of its kept places): the plan limits them.
                policy.kept_free = [0; 2];
                for (t, &i) in targets.iter().enumerate().take(2).filter(|_| room > 0) {
                    let log = &self.logs[i];
                    let (n, limit) = (log.start + logged[i].ids.len(), log.limit());
                    policy.kept_free[t] = if log.evicts.is_empty() {
                        limit.saturating_sub(n)
                    } else {
                        log.evicts[n.min(limit)..limit]
                            .iter()
                            .filter(|&&v| v == NOT_RESIDENT)
                            .count()
                    };
                }
                let mut plan = beside_gathers(|| policy.plan(&logged, kept, room, log_read));
                plan.log_places = log_places;
                // The places the plan adds to each, after those it keeps.
                let grants = std::mem::take(&mut plan.grants);
                for (t, (granted, evicts)) in grants.into_iter().enumerate() {
                    let r = match targets.get(t) {
                        Some(&i) if matches!(logged[i].untaken, Untaken::Kept(_)) => {
                            let log = &self.logs[i];
                            log.regrant(log.start + logged[i].ids.len(), granted, evicts)
                        }
                        _ => Regrant::fresh(granted, evicts),
                    };
                    plan.regrants.push(r);
                }
                plan
            });
        if plan.is_ok() {
            // The logs granted places first, in order; the others go.
            let mut logs: Vec<Option<MissLog>> = self.logs.drain(..).map(Some).collect();
            self.logs = targets.iter().filter_map(|&i| logs[i].take()).collect();
        }
        if let Ok(plan) = &mut plan {
            // The plan's lists go into pinned memory here, so that the thread that applies
            // it only queues their copies; where that fails, that thread writes them.
            let written = std::time::Instant::now();
            plan.written = self.write(plan).is_ok();
            plan.write = written.elapsed();
            plan.add = start - started;
            tracing::debug!(
                counts_back_us = taken.as_micros(),
                add_us = (plan.add - taken).as_micros(),
                log_read_us = plan.log_read.as_micros(),
                policy_us = plan.policy.as_micros(),
                write_us = plan.write.as_micros(),
                logged = plan.logged,
                candidates = plan.candidates,
                "hot tier ranked"
            );
        }
        Ranked {
            policy: Some(policy),
            logs: self.logs,
            lists: self.lists,
            plan,
        }
    }

    /// Write the plan's lists into the pinned memory of the tier's lists and of the two logs
    /// its slots are granted to (the logs read that are granted places again, emptied of
    /// those taken by the tier once the plan is applied; new ones where there are fewer than
    /// two).
    fn write(&mut self, plan: &Plan) -> Result<()> {
        let (gpu, max) = (&self.gpu, PINNED_LIST_MAX);
        self.lists.fill.0.write(gpu, &plan.fill_ids, max)?;
        self.lists.fill.1.write(gpu, &plan.fill_dst, max)?;
        self.lists.update.0.write(gpu, &plan.update_ids, max)?;
        self.lists.update.1.write(gpu, &plan.update_vals, max)?;
        while self.logs.len() < 2 {
            self.logs.push(MissLog::new(gpu, self.log_places)?);
        }
        for (log, r) in self.logs.iter_mut().zip(&plan.regrants) {
            log.grant.write(gpu, &r.grant.1, max)?;
            if !r.evict.1.is_empty() {
                log.evict.write(gpu, &r.evict.1, max)?;
            }
        }
        Ok(())
    }
}

/// A gate a ranking thread waits at until it is opened ([`HotTier::__hold_refreshes`]).
#[derive(Default)]
struct Gate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn open(&self) {
        *self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.opened.notify_all();
    }
}

/// Holds the rankings of a [`HotTier`]'s refreshes until released or dropped
/// ([`HotTier::__hold_refreshes`]).
#[doc(hidden)]
pub struct RefreshHold {
    gate: Arc<Gate>,
}

impl RefreshHold {
    /// Let the held rankings run.
    pub fn release(self) {}
}

impl Drop for RefreshHold {
    fn drop(&mut self) {
        self.gate.open();
    }
}

/// A ranking on its thread. Dropping it (with the tier) opens its gate and waits for the
/// thread to end (a ranking at most, and the gathers before it, whose log it reads), so that
/// the log's device buffers and the host's records are freed with the tier.
struct Worker {
    handle: Option<std::thread::JoinHandle<Option<Ranked>>>,
    /// The gate the thread may wait at, opened when the tier lets go of the thread.
    gate: Option<Arc<Gate>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(gate) = &self.gate {
            gate.open();
        }
        if let Some(handle) = self.handle.take() {
            // A panic of the ranking is not passed on from a drop.
            drop(handle.join());
        }
    }
}

/// What the counting thread is given and gives back: the policy, and the ids to count (the
/// list comes back empty, for the next).
type CountJob = (Box<Policy>, Vec<u32>);

/// Where the counting thread gives the policy back.
type CountBack = std::sync::mpsc::Receiver<std::thread::Result<CountJob>>;

/// The thread that adds the ids each gather counts to the policy's counts while the gathering
/// thread goes on: a few thousand ids of a batch land in a count table as large as the table
/// has rows (4 bytes a row), each a miss in the host's caches — work that costs the thread
/// that queues the batches as much as the GPU takes for a batch mostly read from device
/// memory. Dropping it (with the tier) waits for the ids it counts.
struct Counter {
    send: Option<std::sync::mpsc::Sender<CountJob>>,
    /// Behind a lock (taken by the tier's `&mut` methods, or by a ranking's thread while the
    /// policy is away) so that the tier stays `Sync`.
    back: Arc<Mutex<CountBack>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Counter {
    /// The counting thread, or `None` where none could be started (said at `debug` level).
    fn start() -> Option<Counter> {
        let (send, jobs) = std::sync::mpsc::channel::<CountJob>();
        let (done, back) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("berth-hot-count".into())
            .spawn(move || {
                for (mut policy, mut ids) in jobs {
                    let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        beside_gathers(|| policy.add_all(&ids));
                        ids.clear();
                    }));
                    let panicked = counted.is_err();
                    if done.send(counted.map(|()| (policy, ids))).is_err() || panicked {
                        return;
                    }
                }
            });
        match spawned {
            Ok(handle) => Some(Counter {
                send: Some(send),
                back: Arc::new(Mutex::new(back)),
                handle: Some(handle),
            }),
            Err(e) => {
                tracing::debug!(error = %e, "hot tier: no thread for the counts: the gathers count");
                None
            }
        }
    }

    /// Hand `policy` and the `ids` to count to the thread; the policy back if it has ended.
    fn give(&mut self, policy: Box<Policy>, ids: Vec<u32>) -> std::result::Result<(), CountJob> {
        match &self.send {
            Some(send) => send.send((policy, ids)).map_err(|e| e.0),
            None => Err((policy, ids)),
        }
    }

    /// The policy back once its ids are counted (with the emptied list), if they are; `None`
    /// while they are not.
    fn poll(&mut self) -> Option<std::thread::Result<CountJob>> {
        let back = self.back.lock().unwrap_or_else(PoisonError::into_inner);
        match back.try_recv() {
            Ok(r) => Some(r),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Some(Err(Box::new("the hot tier's counting thread ended")))
            }
        }
    }

    /// The policy back, waiting for its ids to be counted; `None` if the thread has ended
    /// without giving it back.
    fn wait(&mut self) -> Option<std::thread::Result<Box<Policy>>> {
        Counter::take(&self.back)
    }

    /// The policy back from `back`, waiting for its ids to be counted; `None` if the thread
    /// has ended without giving it back.
    fn take(back: &Mutex<CountBack>) -> Option<std::thread::Result<Box<Policy>>> {
        let back = back.lock().unwrap_or_else(PoisonError::into_inner);
        back.recv().ok().map(|r| r.map(|(p, _)| p))
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // No more jobs: the thread ends after the one it counts.
        drop(self.send.take());
        if let Some(handle) = self.handle.take() {
            drop(handle.join());
        }
    }
}

/// After a gather's ids are kept in `deferred`: where the policy is with the tier (or back
/// from counting the last batch's ids), hand it and them to the counting thread; count them
/// here where there is no thread. While the policy ranks (or the last ids are still being
/// counted), they wait in `deferred`. A counting thread that panicked (which indexes only
/// checked ids) leaves the policy lost: the tier refreshes no more, and says so.
fn hand_over(policy: &mut PolicyState, deferred: &mut Vec<u32>, counter: &mut Option<Counter>) {
    if let PolicyState::Counting = policy {
        match counter.as_mut().and_then(Counter::poll) {
            None if counter.is_some() => return,
            Some(Ok((p, spare))) => {
                *policy = PolicyState::Idle(p);
                if deferred.capacity() < spare.capacity() {
                    let kept = std::mem::replace(deferred, spare);
                    deferred.extend_from_slice(&kept);
                }
            }
            _ => {
                *policy = PolicyState::Lost;
                deferred.clear();
                *counter = None;
                return;
            }
        }
    }
    if deferred.is_empty() || !matches!(policy, PolicyState::Idle(_)) {
        return;
    }
    let PolicyState::Idle(p) = std::mem::replace(policy, PolicyState::Lost) else {
        unreachable!("matched above")
    };
    let ids = std::mem::take(deferred);
    let (mut p, mut ids) = match counter.as_mut() {
        Some(c) => match c.give(p, ids) {
            Ok(()) => {
                *policy = PolicyState::Counting;
                return;
            }
            Err(job) => {
                *counter = None;
                job
            }
        },
        None => (p, ids),
    };
    p.add_all(&ids);
    ids.clear();
    *deferred = ids;
    *policy = PolicyState::Idle(p);
}

/// Where the ranking policy's state is.
enum PolicyState {
    /// With the tier, no refresh pending.
    Idle(Box<Policy>),
    /// On the counting thread ([`Counter`]), no refresh pending.
    Counting,
    /// On the ranking's thread.
    Running(Worker),
    /// Back, with a plan whose kernels are not all queued yet.
    Ready(Box<Policy>, Box<Plan>),
    /// Lost with a ranking that panicked (or for the moment of a swap): the device's slot
    /// table and the host's residency are left as the last plan applied them.
    Lost,
}

/// The host's records of the tier's slots and the counts: what the ranking reads and
/// writes, owned by the thread that ranks.
struct Policy {
    capacity: usize,
    /// Places of a miss log: the most slots granted to one.
    log_len: usize,
    /// Free slots from which a plan sets some apart for the gathers while the next ranking
    /// runs.
    split_min: usize,
    /// Decayed reads of each row.
    counts: Vec<u32>,
    /// The rows whose count is not zero.
    touched: Vec<u32>,
    /// One bit per row, set while the row is resident once the plans made so far are
    /// applied.
    bits: Vec<u64>,
    /// The row in each slot, or [`NOT_RESIDENT`].
    resident: Vec<u32>,
    /// Slots holding no row that no slot table the device has or will have names (once the
    /// last plan is applied): the fill writes only these.
    free: Vec<u32>,
    /// Slots granted to miss logs and not yet given back by a plan that settled them: the
    /// gathers' captures may have filled them.
    reserved: usize,
    /// Where the search for rows to evict starts: a slot.
    hand: usize,
    /// Of the places the two logs granted again keep, those whose slots are free (set by the
    /// ranking before each plan; with room for captures, a log's free places are limited).
    kept_free: [usize; 2],
    /// With room for captures, the free places a log may hold at least
    /// ([`FREE_PLACES_MIN`]).
    free_min: usize,
    /// One bit per slot, set while the slot is granted to a miss log with the row it holds
    /// ([`Policy::condemn`]): the row stays resident (no plan evicts it or moves it) until
    /// the capture that takes the place evicts it on the device, and the plan that settles
    /// the log learns which.
    condemned: Vec<u64>,
    /// Slots whose rows a capture admitted (with room for captures), oldest first, with
    /// those rows, as many as two logs' places at most: the first victims for the next
    /// places, unless read since.
    probation: std::collections::VecDeque<(u32, u32)>,
    /// One bit per row, set when the row is counted and cleared when it is admitted or the
    /// hand passes its slot: a resident row counted since (counts decay at every refresh,
    /// far sooner than the hand comes round) is passed over once, as a clock's reference bit
    /// does.
    referenced: Vec<u64>,
    /// One bit per row, all clear between calls: the members of a set being built.
    mark: Vec<u64>,
    /// The tier's residency before the last plan was applied, given back by its apply (empty
    /// before the first), and that plan's slot table update (rows and entries).
    shadow: Vec<u64>,
    last_update: (Vec<u32>, Vec<u32>, Vec<u32>),
    /// Vectors the batch loop's thread is done with (an applied plan's lists, the grants
    /// its logs had), freed by the next ranking on its own thread: freeing a large vector
    /// unmaps its pages, which interrupts every core that ran the process.
    spare: Vec<Vec<u32>>,
}

/// What a ranking decided: the kernels to queue, and what they change.
struct Plan {
    /// Rows to copy from the table, and their slots.
    fill_ids: Vec<u32>,
    fill_dst: Vec<u32>,
    /// Slot table entries to write, and their values.
    update_ids: Vec<u32>,
    update_vals: Vec<u32>,
    refresh: Refresh,
    logged: usize,
    displaced: usize,
    candidates: usize,
    log_read: std::time::Duration,
    policy: std::time::Duration,
    /// The slots the policy grants to places added to the gathers' log from the plan on,
    /// and to their log while the next ranking runs, each with the rows those slots hold, one
    /// per place ([`NOT_RESIDENT`] for a free slot; empty where every slot is free).
    grants: [(Vec<u32>, Vec<u32>); 2],
    /// How those two logs are granted their places (the ranking's thread makes them from
    /// `grants`).
    regrants: Vec<Regrant>,
    /// The places of the buffers of the logs made for it.
    log_places: usize,
    /// The logs the ranking read that are granted places again, in that order.
    logs: Vec<MissLog>,
    /// The host's residency once the plan is applied (one bit per row), for the tier.
    bits: Vec<u64>,
    /// Whether the ranking's thread wrote the lists and grants into pinned memory.
    written: bool,
    /// How long the ranking's thread took to add the counted ids it was given, and to write
    /// the lists.
    add: std::time::Duration,
    write: std::time::Duration,
    /// Whether the fill is queued.
    filled: bool,
    /// Whether the slot table update is queued.
    updated: bool,
}

impl Policy {
    fn new(capacity: usize, rows: usize, log_len: usize) -> Policy {
        let rows = if capacity == 0 { 0 } else { rows };
        let free: Vec<u32> = (0..capacity as u32).rev().collect();
        Policy {
            capacity,
            log_len,
            split_min: SPLIT_MIN,
            counts: huge_vec(rows, 0),
            touched: Vec::new(),
            bits: huge_vec(rows.div_ceil(64), 0),
            resident: vec![NOT_RESIDENT; capacity],
            free,
            reserved: 0,
            hand: 0,
            kept_free: [0; 2],
            free_min: FREE_PLACES_MIN,
            condemned: vec![0; capacity.div_ceil(64)],
            probation: std::collections::VecDeque::new(),
            referenced: huge_vec(rows.div_ceil(64), 0),
            mark: huge_vec(rows.div_ceil(64), 0),
            shadow: Vec::new(),
            last_update: (Vec::new(), Vec::new(), Vec::new()),
            spare: Vec::new(),
        }
    }

    /// Grant free slots to two miss logs, the gathers' until the next ranking begins and
    /// (with `side`) theirs while it runs, which hold `kept` places already: up to `log_len`
    /// places each, the free slots split evenly between them when there are fewer; with fewer
    /// than `split_min` free slots, all to the first (a tier that small has few misses to log
    /// while a ranking runs).
    fn grant(&mut self, side: bool, kept: [usize; 2]) -> [Vec<u32>; 2] {
        let len = self.log_len;
        self.grant_by(side, kept, [len, len])
    }

    /// [`grant`](Policy::grant), each log's places (those it keeps and the free slots
    /// granted) up to `most` of it rather than a log's length.
    fn grant_by(&mut self, side: bool, kept: [usize; 2], most: [usize; 2]) -> [Vec<u32>; 2] {
        let free = self.free.len();
        let most = most.map(|m| m.min(self.log_len));
        let side = if side && free >= self.split_min {
            (free / 2).min(most[1].saturating_sub(kept[1]))
        } else {
            0
        };
        let side = self.free.split_off(free - side);
        let main = self.free.len().min(most[0].saturating_sub(kept[0]));
        let main = self.free.split_off(self.free.len() - main);
        self.reserved += main.len() + side.len();
        [main, side]
    }

    /// Add places to the two logs granted `grants` (the first's first), which hold `kept`
    /// places already, each up to `room` places (and the log's length): the slots of
    /// resident rows counted 0 that the clock's hand finds unreferenced (each passed once if
    /// referenced, the bit looked at first), not already condemned. Each is condemned with
    /// its row, which stays resident. For each log, the rows its new places' slots hold, one
    /// per place ([`NOT_RESIDENT`] for the free ones), or none where no place was added. The
    /// hand looks at the slots a window at a time, each window by the host's threads
    /// together, and at most once round the tier; a log keeps the places no capture took, so
    /// it looks for about as many rows as the captures took.
    fn condemn(
        &mut self,
        grants: [&mut Vec<u32>; 2],
        kept: [usize; 2],
        room: usize,
    ) -> [Vec<u32>; 2] {
        let mut wants = [0; 2];
        for ((want, granted), kept) in wants.iter_mut().zip(&grants).zip(kept) {
            *want = room.min(self.log_len).saturating_sub(kept + granted.len());
        }
        let want = wants[0] + wants[1];
        if want == 0 || self.capacity == 0 {
            return [Vec::new(), Vec::new()];
        }
        use rayon::prelude::*;
        let capacity = self.capacity;
        let (counts, resident) = (&self.counts, &self.resident);
        let referenced = atomic_bits(&mut self.referenced);
        let mut looked = 0;
        let mut found: Vec<(u32, u32)> = Vec::new();
        // Rows admitted by captures and not read since go first, oldest first: a row the law
        // reads once then takes the place of another such row, not of a row it reads now and
        // then. Those read since leave the list (the hand passes them as it does any row).
        while found.len() < want {
            let Some((s, id)) = self.probation.pop_front() else {
                break;
            };
            if resident[s as usize] != id || bit(&self.condemned, s) {
                continue;
            }
            let read = referenced[id as usize / 64].load(Ordering::Relaxed) & (1u64 << (id % 64));
            if read == 0 && counts[id as usize] == 0 {
                // Condemned at once, so that the hand below passes it.
                set_bit(&mut self.condemned, s, true);
                found.push((s, id));
            }
        }
        while found.len() < want && looked < capacity {
            let short = want - found.len();
            let window = (short + short / 4)
                .max(CONDEMN_CHUNK)
                .min(capacity - looked);
            let start = (self.hand + looked) % capacity;
            let condemned = &self.condemned;
            // Slots `start..start + window`, round the tier.
            let taken: Vec<Vec<(u32, u32)>> = (0..window.div_ceil(CONDEMN_CHUNK))
                .into_par_iter()
                .map(|c| {
                    let mut taken = Vec::new();
                    let end = ((c + 1) * CONDEMN_CHUNK).min(window);
                    for i in c * CONDEMN_CHUNK..end {
                        if i + PREFETCH_AHEAD < end {
                            let id = resident[(start + i + PREFETCH_AHEAD) % capacity];
                            if id != NOT_RESIDENT {
                                prefetch(referenced, id as usize / 64);
                                prefetch(counts, id as usize);
                            }
                        }
                        let s = (start + i) % capacity;
                        let id = resident[s];
                        if id == NOT_RESIDENT || bit(condemned, s as u32) {
                            continue;
                        }
                        // Passed once if referenced (the bit cleared only where set: most
                        // are clear, and a load costs less than an atomic write).
                        let (word, mask) = (&referenced[id as usize / 64], 1u64 << (id % 64));
                        if word.load(Ordering::Relaxed) & mask != 0 {
                            word.fetch_and(!mask, Ordering::Relaxed);
                        } else if counts[id as usize] == 0 {
                            taken.push((s as u32, id));
                        }
                    }
                    taken
                })
                .collect();
            looked += window;
            for t in taken {
                found.extend_from_slice(&t);
            }
        }
        found.truncate(want);
        self.hand = (self.hand + looked) % capacity;
        for &(s, _) in &found {
            set_bit(&mut self.condemned, s, true);
        }
        let mut found = found.into_iter();
        let mut evicts = [Vec::new(), Vec::new()];
        for ((granted, want), evicts) in grants.into_iter().zip(wants).zip(&mut evicts) {
            let places = granted.len();
            for (s, id) in found.by_ref().take(want) {
                granted.push(s);
                evicts.push(id);
            }
            if !evicts.is_empty() {
                // One per place: the free slots first.
                evicts.splice(0..0, std::iter::repeat_n(NOT_RESIDENT, places));
            }
        }
        evicts
    }

    /// Count one more read of each row of `ids` ([`add`](Policy::add) for each, in any
    /// order). Each id is a random access into arrays of one entry per row, far larger than
    /// the caches, which one thread waits for about as long as a batch takes: the ids are
    /// split by row range, the ranges added by the host's threads together (a few ids in
    /// order on this thread), each id's entries fetched some ids ahead.
    fn add_all(&mut self, ids: &[u32]) {
        let shards = (ids.len() / ADD_PER_SHARD).min(ADD_SHARDS);
        if shards < 2 || self.counts.len() < 64 * shards {
            for (i, &id) in ids.iter().enumerate() {
                if let Some(&next) = ids.get(i + PREFETCH_AHEAD) {
                    prefetch(&self.counts, next as usize);
                    prefetch(&self.referenced, next as usize / 64);
                }
                self.add(id);
            }
            return;
        }
        use rayon::prelude::*;
        // Whole words of `referenced` per shard.
        let shard = self.counts.len().div_ceil(shards).next_multiple_of(64);
        let mut buckets = vec![Vec::new(); self.counts.len().div_ceil(shard)];
        for &id in ids {
            buckets[id as usize / shard].push(id);
        }
        let touched: Vec<Vec<u32>> = self
            .counts
            .par_chunks_mut(shard)
            .zip(self.referenced.par_chunks_mut(shard / 64))
            .zip(buckets.par_iter())
            .enumerate()
            .map(|(b, ((counts, referenced), ids))| {
                let base = (b * shard) as u32;
                let mut touched = Vec::new();
                for (i, &id) in ids.iter().enumerate() {
                    if let Some(&next) = ids.get(i + PREFETCH_AHEAD) {
                        prefetch(counts, (next - base) as usize);
                        prefetch(referenced, (next - base) as usize / 64);
                    }
                    let local = id - base;
                    let c = &mut counts[local as usize];
                    if *c == 0 {
                        touched.push(id);
                    }
                    *c = c.saturating_add(1);
                    set_bit(referenced, local, true);
                }
                touched
            })
            .collect();
        for t in touched {
            self.touched.extend_from_slice(&t);
        }
    }

    /// Count one more read of row `id`, noting it in `touched` if it was counted 0, and
    /// mark it referenced.
    fn add(&mut self, id: u32) {
        let c = &mut self.counts[id as usize];
        if *c == 0 {
            self.touched.push(id);
        }
        *c = c.saturating_add(1);
        set_bit(&mut self.referenced, id, true);
    }

    /// Rank the counted rows and settle the logged ones (`logs`, in the order they were
    /// filled: each row in the slot granted to its place, copied there by the gathers'
    /// captures if `captured`, each of which evicted the row its slot held), choose the rows
    /// to admit and evict and their slots, grant the free slots to the next gathers' logs,
    /// which keep `keeps` places (and the slots of cold rows, up to `room` places a log:
    /// [`condemn`](Policy::condemn)), and halve every count. Host work only: the plan's kernels are queued by the tier.
    fn plan(
        &mut self,
        logs: &[Logged],
        keeps: [usize; 2],
        room: usize,
        log_read: std::time::Duration,
    ) -> Plan {
        let start = std::time::Instant::now();
        // The logged rows: each is in the slot granted to its place in its log (the gathers'
        // captures copied it there and named it in the slot table, or the fill does when a
        // capture was not queued). The slots granted to places not taken are free again, and
        // so are those of rows resident already (admitted by a plan made while their log was
        // filled, in another slot, which the device's slot table names since). Gathers may
        // have read these slots, but every one of them is queued before this plan's fill,
        // the first work to write them.
        let mut logged = Vec::new();
        let mut granted = Vec::new();
        let mut uncaptured = std::collections::HashSet::new();
        // The rows the captures evicted from the slots granted with them (a condemned row
        // stays in its slot until then, so its entry named the slot), and whether their
        // log's captures all ran (else the device may still name them).
        let mut left = Vec::new();
        for log in logs {
            let n = log.ids.len().min(log.granted.len());
            // Each place taken: a free slot, reserved until now, or a cold row's, whose row
            // its capture evicted (settled before the rows the log names, of which a later
            // one may be that row, logged again). Each row's words are fetched some places
            // ahead: random reads into per-row and per-slot arrays far larger than the caches.
            for (i, &s) in log.granted[..n].iter().enumerate() {
                if let (Some(&victim), Some(&ahead)) = (
                    log.evicts.get(i + PREFETCH_AHEAD),
                    log.granted.get(i + PREFETCH_AHEAD),
                ) && victim != NOT_RESIDENT
                {
                    prefetch(&self.bits, victim as usize / 64);
                    prefetch(&self.resident, ahead as usize);
                }
                match log.evicts.get(i) {
                    Some(&victim) if victim != NOT_RESIDENT => {
                        set_bit(&mut self.condemned, s, false);
                        set_bit(&mut self.bits, victim, false);
                        self.resident[s as usize] = NOT_RESIDENT;
                        left.push((victim, log.captured));
                    }
                    _ => self.reserved -= 1,
                }
            }
            // The places no gather took stay with their log, or, let go, leave a free slot
            // free again and a cold row resident, no longer condemned.
            if let Untaken::LetGo(granted, evicts) = &log.untaken {
                for (i, &s) in granted.iter().enumerate() {
                    match evicts.get(i) {
                        Some(&victim) if victim != NOT_RESIDENT => {
                            set_bit(&mut self.condemned, s, false);
                        }
                        _ => {
                            self.reserved -= 1;
                            self.free.push(s);
                        }
                    }
                }
            }
            for (i, (&id, &s)) in log.ids[..n].iter().zip(&log.granted).enumerate() {
                if let Some(&next) = log.ids[..n].get(i + PREFETCH_AHEAD) {
                    prefetch(&self.bits, next as usize / 64);
                }
                if bit(&self.bits, id) {
                    self.free.push(s);
                    continue;
                }
                // Resident from here on (unless given up below, for a counted row).
                set_bit(&mut self.bits, id, true);
                logged.push(id);
                granted.push(s);
                if !log.captured {
                    uncaptured.insert(id);
                }
            }
        }
        let logged = &logged[..];
        // The rows the policy keeps: the counted most, resident first among equals (a
        // logged row they name keeps its slot).
        let counts = &self.counts;
        let bits = &self.bits;
        let rank = |&id: &u32| (std::cmp::Reverse(counts[id as usize]), !bit(bits, id), id);
        // Each row's rank is read once (two random reads into per-row arrays far larger than
        // the caches), by the host's threads together: the sorts below compare the keys.
        use rayon::prelude::*;
        let mut ranked: Vec<_> = self.touched.par_iter().map(|id| (rank(id), *id)).collect();
        if ranked.len() > self.capacity {
            ranked.select_nth_unstable(self.capacity - 1);
            ranked.truncate(self.capacity);
        }
        let chosen: Vec<u32> = ranked.iter().map(|&(_, id)| id).collect();
        // Not resident: the second key is `!bit(bits, id)`. In no order: where the free slots
        // are too few for all of them, the most counted are found when it is known (below).
        ranked.retain(|&((_, out, _), _)| out);
        let mut admit = ranked;
        // The counted rows come first: where the free slots are too few for them, logged rows
        // the policy did not choose give theirs up, the least counted first. Their slots are
        // free at once: the gathers that may have read them are queued before this plan's
        // fill, and the slot table update after it names them no more. (The chosen rows are
        // marked only where there are logged rows to tell apart and the free slots are too few
        // for the rows to admit: each mark is a random write, made by the host's threads
        // together.)
        let over = admit.len().saturating_sub(self.free.len());
        let with_logged = !logged.is_empty() && over > 0;
        if with_logged {
            set_bits_together(&mut self.mark, &chosen, true);
        }
        let mark = &self.mark;
        // Each logged row's keys, read once (a random read of its mark, count and residency),
        // by the host's threads together: the order "chosen rows first, then the others from
        // most to least counted", which tells the rows that give their slots up.
        let keyed: Option<Vec<_>> = with_logged.then(|| {
            logged
                .par_iter()
                .copied()
                .zip(granted.par_iter().copied())
                .map(|(id, s)| ((!bit(mark, id), rank(&id)), id, s))
                .collect()
        });
        let unchosen = keyed
            .as_ref()
            .map_or(0, |k| k.iter().filter(|((out, _), _, _)| *out).count());
        let displace = over.min(unchosen);
        let kept = logged.len() - displace;
        // The logged rows with their slots, those that keep them first. When every one keeps
        // its slot (free slots enough for the counted rows), in the log's order; else the
        // `displace` last of that order give theirs up (the order found only where it
        // splits).
        let pairs: Vec<(u32, u32)> = match keyed {
            Some(mut keyed) if displace > 0 => {
                keyed.select_nth_unstable(kept);
                keyed.into_iter().map(|(_, id, s)| (id, s)).collect()
            }
            _ => logged
                .iter()
                .copied()
                .zip(granted.iter().copied())
                .collect(),
        };
        if with_logged {
            set_bits_together(&mut self.mark, &chosen, false);
        }
        let mut ids = Vec::with_capacity(2 * logged.len());
        let mut vals = Vec::with_capacity(ids.capacity());
        for (i, &(id, s)) in pairs[..kept].iter().enumerate() {
            if let Some(&(next, slot)) = pairs[..kept].get(i + PREFETCH_AHEAD) {
                prefetch(&self.referenced, next as usize / 64);
                prefetch(&self.resident, slot as usize);
            }
            set_bit(&mut self.referenced, id, false);
            self.resident[s as usize] = id;
            ids.push(id);
            vals.push(s);
        }
        if room > 0 {
            self.probation
                .extend(pairs[..kept].iter().map(|&(id, s)| (s, id)));
            // As many as two logs' places: the most one refresh grants.
            let over = self.probation.len().saturating_sub(2 * self.log_len);
            self.probation.drain(..over);
        }
        for &(id, s) in &pairs[kept..] {
            set_bit(&mut self.bits, id, false);
            self.free.push(s);
            ids.push(id);
            vals.push(NOT_RESIDENT);
        }
        let (mut fill_ids, mut fill_dst): (Vec<u32>, Vec<u32>) = if uncaptured.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            pairs[..kept]
                .iter()
                .copied()
                .filter(|(id, _)| uncaptured.contains(id))
                .unzip()
        };
        let (counts, bits) = (&self.counts, &self.bits);
        // Room: resident rows not kept leave, rows counted 0 first, as many as the free slots
        // lack; their slots are refilled from the next refresh on. Rows whose slots are
        // granted to a log (condemned) stay.
        let must = admit.len().saturating_sub(self.free.len());
        let short = must;
        let mut evict = Vec::new();
        if short > 0 {
            // The logged rows just settled stay (the gathers have only now asked for them),
            // and so do the chosen rows that are resident: every one of those is counted, so
            // the hand, which takes only rows counted 0, passes them anyway; they are marked
            // only where the least counted rows must leave too.
            let stay: Vec<u32> = pairs[..kept].iter().map(|&(id, _)| id).collect();
            for &id in &stay {
                set_bit(&mut self.mark, id, true);
            }
            let resident = &self.resident;
            // Rows counted 0 first, found by a hand that goes round the slots from where it
            // stopped last time: with a large tier nearly every resident row is one, so this
            // looks at about as many slots as rows leave, not at every slot. A row counted
            // since it was admitted or the hand last passed it stays this time (its mark
            // cleared): rows read again while resident outlive rows read once, as in a clock.
            let capacity = self.capacity;
            let referenced = &mut self.referenced;
            let mut looked = 0;
            let (mark, condemned) = (&self.mark, &self.condemned);
            while evict.len() < short && looked < capacity {
                let s = (self.hand + looked) % capacity;
                looked += 1;
                let id = resident[s];
                if id != NOT_RESIDENT
                    && counts[id as usize] == 0
                    && !bit(mark, id)
                    && !bit(condemned, s as u32)
                {
                    if bit(referenced, id) {
                        set_bit(referenced, id, false);
                    } else {
                        evict.push(s as u32);
                    }
                }
            }
            self.hand = (self.hand + looked) % capacity;
            if evict.len() < must {
                // Then the least counted of the others.
                let chosen_resident: Vec<u32> =
                    chosen.iter().copied().filter(|&id| bit(bits, id)).collect();
                for &id in &chosen_resident {
                    set_bit(&mut self.mark, id, true);
                }
                let (mark, condemned) = (&self.mark, &self.condemned);
                let leaves = |s: usize| {
                    let id = resident[s];
                    id != NOT_RESIDENT && !bit(mark, id) && !bit(condemned, s as u32)
                };
                let mut taken = vec![false; capacity];
                for &s in &evict {
                    taken[s as usize] = true;
                }
                let mut rest: Vec<u32> = (0..capacity as u32)
                    .filter(|&s| leaves(s as usize) && !taken[s as usize])
                    .collect();
                rest.sort_unstable_by_key(|&s| {
                    let id = resident[s as usize];
                    (counts[id as usize], std::cmp::Reverse(id))
                });
                rest.truncate(must - evict.len());
                evict.extend(rest);
                for &id in &chosen_resident {
                    set_bit(&mut self.mark, id, false);
                }
            }
            for &id in &stay {
                set_bit(&mut self.mark, id, false);
            }
        }
        // The most counted of the rows to admit, where the free slots are too few for all.
        if admit.len() > self.free.len() {
            if let Some(n) = self.free.len().checked_sub(1) {
                admit.select_nth_unstable(n);
            }
            admit.truncate(self.free.len());
        }
        let admit: Vec<u32> = admit.into_iter().map(|(_, id)| id).collect();
        let dst: Vec<u32> = self.free[self.free.len() - admit.len()..].to_vec();
        self.free.truncate(self.free.len() - admit.len());
        fill_ids.extend_from_slice(&admit);
        fill_dst.extend_from_slice(&dst);
        for (&id, &s) in admit.iter().zip(&dst) {
            set_bit(&mut self.bits, id, true);
            set_bit(&mut self.referenced, id, false);
            self.resident[s as usize] = id;
            ids.push(id);
            vals.push(s);
        }
        // The evicted rows' slots: gathers queued before the plan's slot table update may
        // still read them, so they are granted or filled only by work queued after it (the
        // tier queues the plan's kernels, then grants).
        let mut emptied = Vec::with_capacity(evict.len());
        for &s in &evict {
            let id = self.resident[s as usize];
            set_bit(&mut self.bits, id, false);
            self.resident[s as usize] = NOT_RESIDENT;
            emptied.push(s);
            ids.push(id);
            vals.push(NOT_RESIDENT);
        }
        self.free.append(&mut emptied);
        // The rows the captures evicted, unless admitted again since. The device's slot
        // table says so already (the captures' compare-and-swap), but where a log's captures
        // may not all have run: there the update says it; the tier's residency learns it
        // with the update either way.
        let mut gone = Vec::new();
        let taken = left.len();
        for (id, captured) in left {
            if bit(&self.bits, id) {
                continue;
            }
            if captured {
                gone.push(id);
            } else {
                ids.push(id);
                vals.push(NOT_RESIDENT);
            }
        }
        // The next gathers' logs: free slots, each to a place, then cold rows' slots, after
        // the places they keep. With room, the logs keep the places no capture took, and a
        // free slot granted to a place holds no row until a capture takes it: each log holds
        // free places up to twice the places the gathers took in its role since the last
        // ranking (the gathers' log until it began, `logs`' last, and those filled while the
        // last ranking ran), so that a log that takes few does not keep them empty.
        let most = if room > 0 {
            let main = logs.last().map_or(0, |l| l.ids.len());
            let side: usize = logs.iter().rev().skip(1).map(|l| l.ids.len()).sum();
            let free = [main, side].map(|t| (2 * t).max(self.free_min));
            [0, 1].map(|t| keeps[t] - self.kept_free[t].min(keeps[t]) + free[t])
        } else {
            [self.log_len; 2]
        };
        let [mut grant_main, mut grant_side] = self.grant_by(true, keeps, most);
        // Cold rows' slots only where the free ones run short: while the tier fills, the
        // captures fill free slots.
        let room = if self.free.len() >= room { 0 } else { room };
        let [evict_main, evict_side] =
            self.condemn([&mut grant_main, &mut grant_side], keeps, room);
        // The tier's residency once this plan is applied: the copy the last plan's apply gave
        // back (the residency before it), brought up to this plan by both plans' updates.
        let mut bits = std::mem::take(&mut self.shadow);
        if bits.len() == self.bits.len() {
            // Each update names a row once: its bits are set and cleared by the host's
            // threads together, one update after the other.
            let view = atomic_bits(&mut bits);
            let (last_ids, last_vals, last_gone) = &self.last_update;
            for (ids, vals, gone) in [(last_ids, last_vals, last_gone), (&ids, &vals, &gone)] {
                ids.par_iter().zip(vals.par_iter()).for_each(|(&id, &s)| {
                    let (word, mask) = (&view[id as usize / 64], 1u64 << (id % 64));
                    if s == NOT_RESIDENT {
                        word.fetch_and(!mask, Ordering::Relaxed);
                    } else {
                        word.fetch_or(mask, Ordering::Relaxed);
                    }
                });
                // Rows no update names (each row gone names no row the update sets).
                gone.par_iter().for_each(|&id| {
                    view[id as usize / 64].fetch_and(!(1u64 << (id % 64)), Ordering::Relaxed);
                });
            }
        } else {
            bits = self.bits.clone();
        }
        self.last_update = (ids.clone(), vals.clone(), gone);
        let candidates = self.touched.len();
        self.halve();
        Plan {
            fill_ids,
            fill_dst,
            update_ids: ids,
            update_vals: vals,
            refresh: Refresh {
                admitted: kept + admit.len(),
                evicted: evict.len() + taken,
                resident: self.capacity - self.free.len() - self.reserved,
            },
            logged: logged.len(),
            displaced: displace,
            candidates,
            log_read,
            policy: start.elapsed(),
            grants: [(grant_main, evict_main), (grant_side, evict_side)],
            regrants: Vec::new(),
            log_places: 0,
            logs: Vec::new(),
            bits,
            written: false,
            add: std::time::Duration::ZERO,
            write: std::time::Duration::ZERO,
            filled: false,
            updated: false,
        }
    }

    /// Halve each count, and forget the rows it leaves at 0, in one pass spread over the
    /// host's threads: each is a random read and write into an array far larger than the
    /// caches, which many cores serve at once.
    fn halve(&mut self) {
        use rayon::prelude::*;
        let counts = atomic_view(&mut self.counts);
        let keep: Vec<bool> = self
            .touched
            .par_iter()
            .map(|&id| {
                let c = &counts[id as usize];
                let halved = c.load(Ordering::Relaxed) / 2;
                c.store(halved, Ordering::Relaxed);
                halved > 0
            })
            .collect();
        let mut k = keep.iter();
        self.touched.retain(|_| *k.next().unwrap_or(&false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroUsize;

    /// A tier of `slots` slots over a mapped table of `rows` rows of `width` floats, each
    /// element its own index; and that table.
    fn numbered_tier(
        gpu: &Gpu,
        rows: usize,
        width: usize,
        slots: usize,
    ) -> (HotTier<f32>, Vec<f32>) {
        let host: Vec<f32> = (0..rows * width).map(|v| v as f32).collect();
        let table = gpu.mapped_from(&host).unwrap();
        let t = gpu
            .hot_tier(table, width, rows * 4 + slots * width * 4)
            .unwrap();
        (t, host)
    }

    /// The device's slot table after a refresh: every resident row's slot, as the host's
    /// table says, and `NOT_RESIDENT` everywhere else — no entry left `PENDING`.
    fn assert_tables_agree(t: &mut HotTier<f32>) {
        t.reclaim();
        let PolicyState::Idle(policy) = &t.policy else {
            panic!("a refresh is pending")
        };
        assert_eq!(
            policy.bits, t.resident_bits,
            "the policy's and the tier's residency"
        );
        let device = t.slots.to_vec().unwrap();
        let mut host = vec![NOT_RESIDENT; t.rows];
        for (s, &id) in policy.resident.iter().enumerate() {
            if id != NOT_RESIDENT {
                host[id as usize] = s as u32;
            }
        }
        // The rows logged since (in the gathers' log, or in a log filled while the last
        // ranking ran), not settled by a refresh yet: named by the captures with their
        // granted slots (or pending where a capture was not queued), each slot holding its
        // row, unless a refresh admitted the row meanwhile; and the rows those slots held,
        // evicted by the captures (which the host still calls resident).
        let rows = t.rows;
        let tier = t.tier.to_vec().unwrap();
        let table = t.table.to_vec();
        let mut logged = vec![false; rows];
        for log in t.filled.iter().chain(std::iter::once(&t.live)) {
            let read = log.read(true).unwrap();
            for (i, &s) in read.granted.iter().enumerate().take(read.ids.len()) {
                let v = read.evicts.get(i).copied().unwrap_or(NOT_RESIDENT);
                if v == NOT_RESIDENT || host[v as usize] != s {
                    continue;
                }
                if device[v as usize] == s {
                    assert!(
                        !read.captured,
                        "row {v}: not evicted by its place's capture"
                    );
                    continue;
                }
                host[v as usize] = NOT_RESIDENT;
                logged[v as usize] = true;
            }
            for (&id, &s) in read.ids.iter().zip(&read.granted) {
                if host[id as usize] != NOT_RESIDENT {
                    continue;
                }
                logged[id as usize] = true;
                let d = device[id as usize];
                if d == PENDING {
                    assert!(!read.captured, "row {id}: pending in a captured log");
                    continue;
                }
                assert_eq!(d, s, "row {id}: a logged row in its granted slot");
                let w = t.width;
                assert_eq!(tier[s as usize * w..][..w], table[id as usize * w..][..w]);
                host[id as usize] = s;
            }
        }
        assert_eq!(device, host, "device and host slot tables");
        for (id, &s) in device.iter().enumerate() {
            assert!(
                s == NOT_RESIDENT || (s as usize) < t.capacity,
                "row {id}: {s:#x}"
            );
            if !logged[id] {
                assert_eq!(s != NOT_RESIDENT, t.is_resident(id as u32), "row {id}");
            }
        }
    }

    #[test]
    fn missed_rows_are_logged_once_and_every_claim_is_settled_by_the_refresh() {
        let gpu = Gpu::simulator();
        let (rows, width) = (64usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
        assert_eq!(t.capacity(), 4);
        // Counting only position `b mod 1000` of batch `b`: the log decides what is admitted.
        t.count_every(NonZeroUsize::new(1000).unwrap());
        // Ten distinct rows missed, each many times, by one launch: four slots are free, so
        // four claims are logged and the other six given back.
        assert_eq!(t.log_limit - t.live.start, 4);
        let ids: Vec<u32> = (0..200).map(|i| 10 + (i % 10)).collect();
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        // The capture copied each logged row into its slot and named the slot in the table.
        let device = t.slots.to_vec().unwrap();
        let named: Vec<usize> = (0..rows).filter(|&id| device[id] != NOT_RESIDENT).collect();
        assert_eq!(named.len(), 4, "{named:?}");
        assert!(
            named
                .iter()
                .all(|&id| (10..20).contains(&id) && device[id] < 4)
        );
        let tier = t.tier.to_vec().unwrap();
        for &id in &named {
            let slot = device[id] as usize;
            assert_eq!(tier[slot * width..][..width], host[id * width..][..width]);
        }
        // Claims past the limit count too (and are given back): threads that saw the
        // counter below the limit may still claim.
        let n = t.live.n.dev.to_vec().unwrap()[0];
        assert!((4..=ids.len() as u64).contains(&n), "{n}");
        let mut logged = t.live.log.prefix_to_vec(4).unwrap();
        logged.sort_unstable();
        assert_eq!(
            logged.iter().map(|&id| id as usize).collect::<Vec<_>>(),
            named
        );
        // Gathers read them from the tier from the next batch on.
        let before = out.to_vec().unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        assert_eq!(out.to_vec().unwrap(), before);
        // Row 10 was counted (position 0 of batch 0); it and three logged rows are admitted.
        let r = t.refresh(&gpu).unwrap();
        assert_eq!((r.admitted, r.resident), (4, 4));
        assert!(t.is_resident(10));
        assert_tables_agree(&mut t);
        assert_eq!(t.live.n.dev.to_vec().unwrap(), [0]);
        // The tier is full: misses are no longer logged, and the gathers stay right.
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        assert!(t.slots.to_vec().unwrap().iter().all(|&s| s != PENDING));
        let got = out.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            let row = &host[id as usize * width..][..width];
            assert_eq!(&got[b * width..][..width], row, "position {b}");
        }
        t.refresh(&gpu).unwrap();
        assert_tables_agree(&mut t);
    }

    /// The guard of a gather whose misses are captured waits for the gather alone: `wait`
    /// returns while the capture into the tier is held at a gate, a host write of `out`
    /// (on another stream than the gather's) then waits for the capture, which reads `out`,
    /// and the rows the capture moved into the tier are the gathered ones.
    #[test]
    fn a_gathers_wait_ends_before_its_capture_and_a_write_of_out_waits_for_it() {
        use crate::own_kernels::capture_gate;
        use std::sync::atomic::AtomicBool;
        let gpu = Gpu::simulator();
        let stream = gpu.stream().unwrap();
        let (rows, width) = (64usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
        let ids: Vec<u32> = (0..200).map(|i| 10 + (i % 10)).collect();
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        let held = capture_gate::hold(t.tier.device_ptr());
        let (waited, written) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                t.gather(&stream, &ids, &mut out).unwrap().wait().unwrap();
                waited.store(true, Ordering::SeqCst);
                out.copy_from(&vec![-1.0; ids.len() * width]).unwrap();
                written.store(true, Ordering::SeqCst);
            });
            let started = std::time::Instant::now();
            while !waited.load(Ordering::SeqCst) && started.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let returned = waited.load(Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            let early = written.load(Ordering::SeqCst);
            drop(held);
            worker.join().unwrap();
            assert!(returned, "the gather's wait waited for its capture");
            assert!(
                !early,
                "a write of `out` did not wait for the capture reading it"
            );
        });
        let device = t.slots.to_vec().unwrap();
        let named: Vec<usize> = (0..rows).filter(|&id| device[id] != NOT_RESIDENT).collect();
        assert_eq!(named.len(), 4, "{named:?}");
        let tier = t.tier.to_vec().unwrap();
        for &id in &named {
            let slot = device[id] as usize;
            assert_eq!(tier[slot * width..][..width], host[id * width..][..width]);
        }
        // The next gather, on the same stream, reads them from the tier.
        let mut again = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        t.gather(&stream, &ids, &mut again).unwrap().wait().unwrap();
        let got = again.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            assert_eq!(
                got[b * width..][..width],
                host[id as usize * width..][..width]
            );
        }
    }

    /// When a gather's capture was not queued, the refresh copies the logged rows from the
    /// table instead of trusting their slots.
    #[test]
    fn without_a_capture_the_fill_copies_the_logged_rows() {
        let gpu = Gpu::simulator();
        let (rows, width) = (64usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 8);
        let ids: Vec<u32> = (20..28).collect();
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        // As if the capture had failed: the granted slots hold something else.
        t.live.captured = false;
        t.tier.copy_from(&vec![-1.0; t.tier.len()]).unwrap();
        assert_eq!(t.refresh(&gpu).unwrap().admitted, 8);
        assert_tables_agree(&mut t);
        out.copy_from(&vec![-2.0; out.len()]).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        assert_eq!(t.stats().hits, 8);
        let got = out.to_vec().unwrap();
        assert_eq!(got, host[20 * width..28 * width]);
    }

    /// Refreshes begun while gathers go on: once each is finished, the device's slot table,
    /// the host's residency and the policy's records agree, through admissions and
    /// evictions; the ids counted while a ranking ran are in the counts.
    #[test]
    fn tables_agree_after_refreshes_that_ranked_while_gathers_ran() {
        let gpu = Gpu::simulator();
        let (rows, width) = (500usize, 4usize);
        let (mut t, _) = numbered_tier(&gpu, rows, width, 24);
        let mut out = gpu.alloc_zeroed::<f32>(60 * width).unwrap();
        for k in 0..12u32 {
            // A hot set of 20 rows that moves by 7 rows every refresh.
            let ids: Vec<u32> = (0..60).map(|i| (k * 7 + i % 20) % rows as u32).collect();
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            let hold = t.__hold_refreshes();
            t.begin_refresh(&gpu).unwrap();
            let before = matches!(t.policy, PolicyState::Running(_));
            assert!(before && t.deferred.is_empty());
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            assert_eq!(t.deferred.len(), ids.len());
            let got = out.to_vec().unwrap();
            for (b, &id) in ids.iter().enumerate() {
                assert_eq!(got[b * width], (id as usize * width) as f32, "position {b}");
            }
            hold.release();
            t.finish_refresh(&gpu).unwrap().unwrap();
            assert!(t.deferred.is_empty());
            assert_tables_agree(&mut t);
            assert_eq!(
                t.resident_rows(),
                t.resident_bits
                    .iter()
                    .map(|w| w.count_ones() as usize)
                    .sum::<usize>()
            );
        }
        assert!(t.stats().evicted > 0, "{:?}", t.stats());
    }

    /// The free slots go to the gathers' log up to a log's length; from `split_min` free
    /// slots on, half of them are set apart for the log of the gathers while the next
    /// ranking runs; every slot granted is counted reserved, none twice.
    #[test]
    fn free_slots_are_split_between_the_two_logs_from_a_threshold_on() {
        let mut p = Policy::new(3 * SPLIT_MIN, 3 * SPLIT_MIN, SPLIT_MIN);
        let [main, side] = p.grant(true, [0, 0]);
        assert_eq!((main.len(), side.len()), (SPLIT_MIN, SPLIT_MIN));
        assert_eq!((p.free.len(), p.reserved), (SPLIT_MIN, 2 * SPLIT_MIN));
        let mut all: Vec<u32> = main.iter().chain(&side).chain(&p.free).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 3 * SPLIT_MIN);
        // Fewer free slots than the threshold: all to the gathers' log.
        p.free.pop();
        let [main, side] = p.grant(true, [0, 0]);
        assert_eq!(
            (main.len(), side.len(), p.free.len()),
            (SPLIT_MIN - 1, 0, 0)
        );
        let mut q = Policy::new(SPLIT_MIN + 10, SPLIT_MIN + 10, 4 * SPLIT_MIN);
        let [main, side] = q.grant(true, [0, 0]);
        assert_eq!(
            (main.len(), side.len()),
            (SPLIT_MIN / 2 + 5, SPLIT_MIN / 2 + 5)
        );
        let mut r = Policy::new(100, 100, 100);
        assert_eq!(r.grant(true, [0, 0])[1].len(), 0);
    }

    /// Many ids added by the host's threads together, split by row range, leave the same
    /// counts, touched rows and reference bits as the same ids added one by one; ids at both
    /// ends of every range, repeated, and counts at their ceiling included.
    #[test]
    fn where_the_free_slots_are_too_few_the_most_counted_rows_are_admitted() {
        // Eight slots, no log. Rows 10 to 15, read once, come in and are counted 0 after the
        // halving; then rows counted 1, 2, 3 and 4 times, first counted in that order: the
        // two free slots go to the two most counted, and two of rows 10 to 15 leave, whose
        // slots the next plan fills with the next most counted.
        let mut p = Policy::new(8, 16, 0);
        let [main, side] = p.grant(true, [0, 0]);
        assert!(main.is_empty() && side.is_empty());
        p.add_all(&[10, 11, 12, 13, 14, 15]);
        let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
        assert_eq!(plan.refresh.admitted, 6);
        p.add_all(&[2, 5, 3, 9, 9, 3, 9, 5, 9, 3]);
        let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
        let mut filled = plan.fill_ids.clone();
        filled.sort_unstable();
        assert_eq!(filled, [3, 9]);
        assert_eq!(plan.refresh.evicted, 2);
        // Counts now 2 (9), 1 (3), 1 (5), 0 (2): row 5 fills a slot of the two that left.
        let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
        assert_eq!(plan.fill_ids, [5]);
        assert!(bit(&p.bits, 5) && !bit(&p.bits, 2));
    }

    #[test]
    fn adding_many_ids_at_once_equals_adding_them_one_by_one() {
        let rows = 64 * ADD_SHARDS * 3 + 17;
        let shard = rows.div_ceil(ADD_SHARDS).next_multiple_of(64);
        let mut ids: Vec<u32> = (0..(ADD_PER_SHARD * ADD_SHARDS) as u64 * 2)
            .map(|i| ((i * 2_654_435_761) % rows as u64) as u32)
            .collect();
        for b in 0..rows.div_ceil(shard) {
            for id in [b * shard, (b * shard + shard - 1).min(rows - 1)] {
                ids.extend([id as u32; 3]);
            }
        }
        ids.push(rows as u32 - 1);
        let (mut one, mut all) = (Policy::new(8, rows, 0), Policy::new(8, rows, 0));
        for p in [&mut one, &mut all] {
            p.counts[5] = u32::MAX - 1;
            p.touched.push(5);
        }
        ids.extend([5, 5, 5]);
        for &id in &ids {
            one.add(id);
        }
        all.add_all(&ids);
        assert_eq!(one.counts[5], u32::MAX);
        assert!(one.counts == all.counts && one.referenced == all.referenced);
        let (mut a, mut b) = (one.touched.clone(), all.touched.clone());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        // A few ids go the one-by-one way, with the same result.
        let few = &ids[..100];
        for &id in few {
            one.add(id);
        }
        all.add_all(few);
        assert!(one.counts == all.counts && one.referenced == all.referenced);
    }

    /// The counting thread adds every counted id once, in whatever state the gathers find
    /// it, and a refresh ranks with all of them.
    #[test]
    fn the_counting_thread_counts_every_id_once() {
        let gpu = Gpu::simulator();
        let (rows, width) = (512usize, 4usize);
        let mut t = small_tier(&gpu, rows, 8);
        assert!(t.counter.is_some());
        // Handed over every other batch of 64 ids, kept in between.
        t.hand_over_ids = 100;
        let mut expect = vec![0u32; rows];
        let mut out = gpu.alloc_zeroed::<f32>(64 * width).unwrap();
        let mut handed = 0;
        for k in 0..200u32 {
            let ids: Vec<u32> = (0..64).map(|i| (k * 31 + i * i) % rows as u32).collect();
            gather_counted(&gpu, &mut t, &ids, &mut out, &mut expect);
            handed += usize::from(matches!(t.policy, PolicyState::Counting));
        }
        assert!(handed > 0, "no batch was counted on the thread");
        for id in 0..rows as u32 {
            assert_eq!(t.count(id), expect[id as usize], "row {id}");
        }
        assert!(t.deferred.is_empty());
        // A tier dropped while its counts are on the thread waits for them.
        t.gather(
            &gpu,
            &[1, 2, 3],
            &mut gpu.alloc_zeroed::<f32>(3 * width).unwrap(),
        )
        .unwrap()
        .wait()
        .unwrap();
        drop(t);
    }

    /// A refresh begun while the counting thread has the counts takes them from it on the
    /// ranking's thread: every id counted before the refresh is in the counts the ranking
    /// halves, once.
    #[test]
    fn a_refresh_begun_while_the_counting_thread_has_the_counts_ranks_with_all_of_them() {
        let gpu = Gpu::simulator();
        let (rows, width) = (512usize, 4usize);
        let mut t = small_tier(&gpu, rows, 8);
        t.hand_over_ids = 100;
        let mut expect = vec![0u32; rows];
        let mut out = gpu.alloc_zeroed::<f32>(64 * width).unwrap();
        let mut begun = 0;
        for k in 0..100u32 {
            let ids: Vec<u32> = (0..64).map(|i| (k * 17 + i * i) % rows as u32).collect();
            gather_counted(&gpu, &mut t, &ids, &mut out, &mut expect);
            if k % 7 == 6 && matches!(t.policy, PolicyState::Counting) {
                t.begin_refresh(&gpu).unwrap();
                t.finish_refresh(&gpu).unwrap();
                begun += 1;
                for e in &mut expect {
                    *e /= 2;
                }
            }
        }
        assert!(
            begun > 0,
            "no refresh began while the counting thread had the counts"
        );
        for id in 0..rows as u32 {
            assert_eq!(t.count(id), expect[id as usize], "row {id}");
        }
    }

    /// Staging parts and threads out of range are taken as the nearest allowed; a new tier
    /// has three staging threads on a host of 16 cores or more, two on one of 4 to 15, one
    /// elsewhere.
    #[test]
    fn staging_parts_and_threads_are_kept_in_range() {
        let gpu = Gpu::simulator();
        let (mut t, _) = numbered_tier(&gpu, 64, 4, 4);
        for (cores, threads) in [(1, 1), (3, 1), (4, 2), (15, 2), (16, 3), (192, 3)] {
            assert_eq!(default_staging_threads(cores), threads, "{cores} cores");
        }
        assert_eq!(
            t.max_staging_threads(),
            default_staging_threads(host_cores())
        );
        assert_eq!(t.max_staging_parts(), DEFAULT_PARTS);
        for (asked, kept) in [(0, 1), (1, 1), (3, 3), (8, 8), (100, 8)] {
            t.staging_threads(asked);
            assert_eq!(t.max_staging_threads(), kept, "threads {asked}");
            t.staging_parts(asked);
            assert_eq!(t.max_staging_parts(), kept, "parts {asked}");
        }
    }

    /// A tier can be shared with threads that read its state, and moved to another.
    #[test]
    fn a_tier_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<HotTier<f32>>();
    }

    #[test]
    fn hits_are_looked_up_for_every_counted_id_up_to_a_cap_then_for_an_even_share() {
        // Even rows resident.
        let bits = vec![0x5555_5555_5555_5555u64; 1 << 10];
        let ids: Vec<u32> = (0..65_536u32).map(|i| (i * 7919) % 65_536).collect();
        let mut stagers = Stagers::default();
        stagers.ensure(3);
        for (every, batch, helpers) in [
            (1, 0, 0),
            (16, 3, 0),
            (64, 5, 0),
            (16, 1 << 20, 0),
            (7, 9, 0),
            (1, 0, 3),
            (16, 3, 1),
            (64, 5, 2),
            (7, 9, 3),
        ] {
            let (mut dst, mut picked) = (vec![0u32; ids.len()], vec![99]);
            picked.clear();
            let sample = Sample::of_batch(batch, every);
            assert_eq!(
                copy_checked(
                    &mut dst,
                    &ids,
                    1 << 16,
                    Some(sample),
                    &mut picked,
                    &stagers,
                    helpers
                ),
                None
            );
            assert_eq!(dst, ids);
            let first = (batch % every as u64) as usize;
            let want: Vec<u32> = ids[first..].iter().copied().step_by(every).collect();
            assert_eq!(picked, want, "every {every}, {helpers} helpers");
            let mut added = Vec::new();
            let (counted, looked, hits) = count_ids(&bits, &picked, |p| added.extend_from_slice(p));
            assert_eq!(added, want, "every {every}");
            assert_eq!(counted, want.len() as u64);
            let look = want.len().div_ceil(HIT_LOOKUPS);
            let looked_ids: Vec<u32> = want.iter().copied().step_by(look).collect();
            assert!(looked as usize <= HIT_LOOKUPS && looked as usize > HIT_LOOKUPS / 2);
            assert_eq!(looked, looked_ids.len() as u64);
            assert_eq!(
                hits,
                looked_ids.iter().filter(|&&id| id % 2 == 0).count() as u64
            );
        }
        // A small batch: every counted id looked up.
        let mut picked = Vec::new();
        let mut dst = vec![0u32; 4000];
        copy_checked(
            &mut dst,
            &ids[..4000],
            1 << 16,
            Some(Sample::of_batch(2, 4)),
            &mut picked,
            &stagers,
            0,
        );
        let (counted, looked, hits) = count_ids(&bits, &picked, |_| {});
        assert_eq!((counted, looked), (1000, 1000));
        let even = ids[2..4000]
            .iter()
            .step_by(4)
            .filter(|&&id| id % 2 == 0)
            .count();
        assert_eq!(hits, even as u64);
        // Batches shorter than the first position counted pick nothing.
        picked.clear();
        copy_checked(
            &mut dst[..3],
            &ids[..3],
            1 << 16,
            Some(Sample::of_batch(5, 8)),
            &mut picked,
            &stagers,
            3,
        );
        assert!(picked.is_empty());
    }

    /// The vector copy equals the plain one: every alignment of the
    /// destination, every length around the vectors' width, the largest id anywhere, ids with
    /// the top bit set (unsigned order).
    #[test]
    fn the_vector_copy_copies_every_id_and_finds_the_largest() {
        let mut x = 0x9e37_79b9u32;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut buf = vec![0u32; 200];
        for offset in 0..4 {
            for len in (0..70usize).chain([100, 195]) {
                for top in [0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
                    // The largest id in every lane of every running maximum, head and tail.
                    for at in (0..len.max(1)).step_by(if len > 70 { 3 } else { 1 }) {
                        let mut ids: Vec<u32> = (0..len).map(|_| next() % 1000).collect();
                        if len > 0 {
                            ids[at] = top;
                        }
                        buf.fill(7);
                        let dst = &mut buf[offset..offset + len];
                        let max = copy_max(dst, &ids);
                        assert_eq!(dst, &ids[..], "offset {offset}, len {len}");
                        let want = ids.iter().copied().max().unwrap_or(0);
                        assert_eq!(max, want, "offset {offset}, len {len}, top {top} at {at}");
                        assert!(buf[..offset].iter().all(|&v| v == 7));
                        assert!(buf[offset + len..].iter().all(|&v| v == 7));
                    }
                }
            }
        }
    }

    #[test]
    fn the_first_id_out_of_range_is_found_wherever_it_is() {
        // The copy is whole whatever the check finds, on the calling thread alone or with
        // helpers staging shares of it (an id out of range in any share).
        let mut stagers = Stagers::default();
        stagers.ensure(3);
        let first_checked = |ids: &[u32], rows: usize| -> Option<usize> {
            let mut dst = vec![7u32; ids.len()];
            let first = copy_checked(&mut dst, ids, rows, None, &mut Vec::new(), &stagers, 0);
            assert_eq!(dst, ids);
            // Picking ids to count, and helpers, change neither the copy nor the check.
            for helpers in [0, 1, 3] {
                let (mut again, mut picked) = (vec![7u32; ids.len()], Vec::new());
                let sample = Some(Sample::of_batch(3, 16));
                assert_eq!(
                    copy_checked(
                        &mut again,
                        ids,
                        rows,
                        sample,
                        &mut picked,
                        &stagers,
                        helpers
                    ),
                    first,
                    "{helpers} helpers"
                );
                assert_eq!(again, ids);
                let want: Vec<u32> = ids.iter().copied().skip(3).step_by(16).collect();
                assert_eq!(picked, want, "{helpers} helpers");
            }
            first
        };
        let mut ids: Vec<u32> = (0..100_000).map(|i| i % 100).collect();
        assert_eq!(first_checked(&ids, 100), None);
        assert_eq!(first_checked(&ids, 99), Some(99));
        for at in [0, 4095, 4096, 50_001, 99_999] {
            let kept = ids[at];
            ids[at] = 100;
            assert_eq!(first_checked(&ids, 100), Some(at), "at {at}");
            ids[at] = u32::MAX;
            assert_eq!(first_checked(&ids, 100), Some(at), "at {at}");
            ids[at] = kept;
        }
        assert_eq!(first_checked(&[], 0), None);
        assert_eq!(first_checked(&[0], 0), Some(0));
        assert_eq!(first_checked(&[u32::MAX], 1 << 33), None);
    }

    #[test]
    fn logged_rows_the_counted_ones_displace_are_given_back() {
        let gpu = Gpu::simulator();
        let (rows, width) = (64usize, 4usize);
        let table = gpu.mapped_zeroed::<f32>(rows * width).unwrap();
        let mut t = gpu
            .hot_tier(table, width, rows * 4 + 2 * width * 4)
            .unwrap();
        // Every id counted: rows 1 and 2 (three reads each) take both slots, and rows 3 and
        // 4, logged as missed too, are left out.
        let ids = [3u32, 4, 1, 1, 1, 2, 2, 2];
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        let device = t.slots.to_vec().unwrap();
        assert_eq!(device.iter().filter(|&&s| s != NOT_RESIDENT).count(), 2);
        let r = t.refresh(&gpu).unwrap();
        assert_eq!(r.admitted, 2);
        assert!(t.is_resident(1) && t.is_resident(2));
        assert!(!t.is_resident(3) && !t.is_resident(4));
        assert_tables_agree(&mut t);
    }

    /// A tier of `slots` rows over a table of `rows` rows of 4 floats, on `gpu`.
    fn small_tier(gpu: &Gpu, rows: usize, slots: usize) -> HotTier<f32> {
        let table = gpu.mapped_zeroed::<f32>(rows * 4).unwrap();
        gpu.hot_tier(table, 4, rows * 4 + slots * 4 * 4).unwrap()
    }

    /// Gather `ids` into `out` and wait, each id counted in `expect` (what the tier's counts
    /// should hold).
    fn gather_counted(
        gpu: &Gpu,
        t: &mut HotTier<f32>,
        ids: &[u32],
        out: &mut DeviceBuffer<f32>,
        expect: &mut [u32],
    ) {
        for &id in ids {
            expect[id as usize] += 1;
        }
        t.gather(gpu, ids, out).unwrap().wait().unwrap();
    }

    /// Gather `ids` from a [`small_tier`], then refresh it.
    fn gather_and_refresh(gpu: &Gpu, t: &mut HotTier<f32>, ids: &[u32]) -> Refresh {
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * 4).unwrap();
        t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
        t.refresh(gpu).unwrap()
    }

    #[test]
    fn the_row_probe_reads_the_rows_it_names_and_the_simulator_prices_them_by_the_model() {
        let gpu = Gpu::simulator();
        let (rows, width) = (3_000, 8);
        let (t, host) = numbered_tier(&gpu, rows, width, 64);
        let units = width * 4 / HOT_UNIT;
        for run in 0..2 {
            let (scratch, _) =
                probe_rows(&gpu, &t.table, (rows, units, width), 1_024, run).unwrap();
            let got = scratch.to_vec().unwrap();
            for i in 0..1_024 {
                let id = probe_word(run * 1_024 + i as u64, rows as u64) as usize;
                assert!(id < rows);
                assert_eq!(
                    got[i * width..][..width],
                    host[id * width..][..width],
                    "row {i}"
                );
            }
        }
        // No link to time: the model's price of a row read in place, cached.
        let costs = crate::placement::calibration::link_costs(&gpu.inner);
        let model = 1.0
            / crate::placement::mapped_row_s(
                &costs,
                costs.random_per_s(rows * width * 4),
                width * 4,
            );
        assert_eq!(t.measure_row_reads().unwrap(), model);
        assert_eq!(t.row_reads.get(), Some(&model));
        // The decision prices every row read in place at it.
        let d = t.decision(4_096);
        assert!(
            (d.mapped_s - (costs.fixed_s + 4_096.0 / model)).abs() < 1e-12,
            "{d:?}"
        );
    }

    #[test]
    fn the_decision_reads_the_gathers_since_the_refresh_before_last() {
        let gpu = Gpu::simulator();
        let (rows, width) = (3_000, 8);
        // 64 slots: the 64 hot rows fill them, and nothing is left for the cold ones.
        let (mut t, _) = numbered_tier(&gpu, rows, width, 64);
        let hot: Vec<u32> = (0..4_096u32).map(|i| i % 64 * 40).collect();
        // Odd rows: none of them hot.
        let cold: Vec<u32> = (0..4_096u32).map(|i| 1 + i % 900 * 2).collect();
        let mut out = gpu.alloc_zeroed::<f32>(4_096 * width).unwrap();
        for round in 0..3 {
            for _ in 0..4 {
                t.gather(&gpu, &hot, &mut out).unwrap().wait().unwrap();
            }
            if round < 2 {
                t.refresh(&gpu).unwrap();
            }
        }
        assert_eq!(t.resident_rows(), 64);
        // Before any refresh the window is the tier's whole life; here it is the gathers
        // since the first refresh began, all of them hits.
        assert_eq!(t.recent(), t.stats().since(&t.window[0]));
        assert_eq!(t.recent().hit_rate(), 1.0);
        assert!(t.stats().hit_rate() < 1.0);
        assert_eq!(t.decision(4_096).choice, GatherChoice::Tier);
        // Two refreshes with no gather between them, then the cold rows: the window holds
        // only those, which all miss, and the model reads in place.
        t.refresh(&gpu).unwrap();
        t.refresh(&gpu).unwrap();
        assert_eq!(
            t.recent(),
            t.stats(),
            "an empty window: the tier's whole life"
        );
        for _ in 0..2 {
            t.gather(&gpu, &cold, &mut out).unwrap().wait().unwrap();
        }
        let recent = t.recent();
        assert_eq!((recent.gathers, recent.looked_up), (2, 2_048));
        assert_eq!(recent.hits, 0);
        // The GPU's count over the same span: every row of the two batches missed.
        let counted = t.gpu_recent().expect("8,192 rows counted");
        assert_eq!((counted.rows, counted.from_host), (8_192, 8_192));
        assert!(t.stats().hit_rate() > 0.5, "{:?}", t.stats());
        let d = t.decision(4_096);
        assert_eq!(d.choice, GatherChoice::Mapped, "{d:?}");
        assert!((d.host_s - recent.gathering.as_secs_f64() / 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_decision_adds_the_host_part_the_gathers_took() {
        let gpu = Gpu::simulator();
        let (rows, width) = (3_000, 8);
        let (mut t, _) = numbered_tier(&gpu, rows, width, 64);
        assert_eq!(t.stats().gathering, std::time::Duration::ZERO);
        assert_eq!(t.decision(4_096).host_s, 0.0);
        let ids: Vec<u32> = (0..4_096u32).map(|i| i * 7 % rows as u32).collect();
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        for _ in 0..3 {
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        }
        // A gather refused for an id out of range queues nothing and adds no time.
        let before = t.stats().gathering;
        assert!(t.gather(&gpu, &[rows as u32], &mut out).is_err());
        let s = t.stats();
        assert_eq!(s.gathering, before);
        assert!(s.gathering > std::time::Duration::ZERO);
        assert!(s.gathering >= s.staging, "{s:?}");
        let d = t.decision(4_096);
        let per_gather = s.gathering.as_secs_f64() / s.gathers as f64;
        assert!((d.host_s - per_gather).abs() < 1e-12, "{d:?}");
        // 4,096 ids go whole; 65,536 in the default two parts (8,192 ids a part at least).
        assert_eq!((d.parts, t.parts_for(4_096)), (1, 1));
        assert_eq!(t.parts_for(65_536), 2);
        t.staging_parts(8);
        assert_eq!(t.parts_for(65_536), 8);
        assert_eq!(t.parts_for(20_000), 2);
        assert!(d.batch_s() >= d.gpu_s().max(d.host_s));
    }

    #[test]
    fn a_budget_that_holds_the_table_keeps_all_of_it_from_the_start() {
        let gpu = Gpu::simulator();
        // 2,500 rows: three launches of the whole tier's fill in tests.
        let (rows, width) = (2_500, 8);
        let (mut t, host) = numbered_tier(&gpu, rows, width, rows);
        assert_eq!(t.capacity(), rows);
        assert_eq!(t.resident_rows(), rows);
        assert!((0..rows as u32).all(|id| t.is_resident(id)));
        assert_eq!(t.decision(512).choice, GatherChoice::Resident);
        // Every row is in its own slot, named there, and equal to the table's.
        assert_eq!(
            t.slots.to_vec().unwrap(),
            (0..rows as u32).collect::<Vec<_>>()
        );
        assert_eq!(t.tier.to_vec().unwrap(), host);
        // Spread over the table, repeats included (a multiplicative hash of the position).
        let ids: Vec<u32> = (0..512u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32 % rows as u32)
            .collect();
        for _ in 0..3 {
            let mut out = gpu.upload(&vec![f32::NAN; ids.len() * width]).unwrap();
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            let got = out.to_vec().unwrap();
            for (b, &id) in ids.iter().enumerate() {
                let row = id as usize * width;
                assert_eq!(
                    got[b * width..][..width],
                    host[row..row + width],
                    "position {b}"
                );
            }
            assert_eq!(
                t.refresh(&gpu).unwrap(),
                Refresh {
                    admitted: 0,
                    evicted: 0,
                    resident: rows,
                }
            );
        }
        let s = t.stats();
        assert_eq!((s.counted, s.admitted, s.filled), (0, 0, 0));
        assert_eq!((s.looked_up, s.hits), (3 * 512, 3 * 512));
        assert_eq!(s.hit_rate(), 1.0);
        assert_eq!(t.count(ids[0]), 0);
        // Ids out of range are refused as by any tier.
        let mut out = gpu.alloc_zeroed::<f32>(2 * width).unwrap();
        let e = t.gather(&gpu, &[1, rows as u32], &mut out).map(drop);
        assert!(
            matches!(e, Err(Error::IdOutOfRange { position: 1, .. })),
            "{e:?}"
        );

        // A row less than the table: an empty tier that fills as the gathers ask.
        let (mut t, _) = numbered_tier(&gpu, rows, width, rows - 1);
        assert_eq!(t.resident_rows(), 0);
        assert_ne!(t.decision(512).choice, GatherChoice::Resident);
        gather_and_refresh_numbered(&gpu, &mut t, &ids, width);
        assert!(t.resident_rows() > 0);
        assert!(t.stats().counted > 0);
    }

    /// Gather `ids` from a [`numbered_tier`] of `width` into an output poisoned first, and
    /// check each row against the host's `table`.
    fn gather_checked(gpu: &Gpu, t: &mut HotTier<f32>, table: &[f32], ids: &[u32], width: usize) {
        let mut out = gpu.upload(&vec![-1.0f32; ids.len() * width]).unwrap();
        t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
        let got = out.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            let row = &table[id as usize * width..][..width];
            assert_eq!(&got[b * width..][..width], row, "position {b}");
        }
    }

    /// Gather `ids` from a [`numbered_tier`] of `width` and refresh it.
    fn gather_and_refresh_numbered(gpu: &Gpu, t: &mut HotTier<f32>, ids: &[u32], width: usize) {
        let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
        t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
        t.refresh(gpu).unwrap();
    }

    #[test]
    fn a_row_read_again_while_resident_outlives_a_row_read_once() {
        // Rows 5 and 9 take the tier's two slots; one of them is read again while resident;
        // by the time row 7 needs a slot, both are counted 0 (halved twice). The row read
        // again stays, whichever slot the hand reaches first: each row in turn.
        for again in [5u32, 9] {
            let gpu = Gpu::simulator();
            let mut t = small_tier(&gpu, 64, 2);
            let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_and_refresh(&gpu, t, ids);
            assert_eq!(gather(&mut t, &[5, 9]).admitted, 2);
            gather(&mut t, &[again]);
            assert_eq!(t.count(again), 0);
            // The slot freed for row 7 is filled from the next refresh on.
            assert_eq!(gather(&mut t, &[7]).evicted, 1);
            let once = 5 + 9 - again;
            assert!(t.is_resident(again) && !t.is_resident(once));
            assert_eq!(gather(&mut t, &[7]).admitted, 1);
            assert!(t.is_resident(again) && t.is_resident(7));
            assert_tables_agree(&mut t);
        }
    }

    /// Rows missed while a ranking runs are logged into the log granted for that time: read
    /// from the tier from the next gather on, settled by the refresh after the next, and
    /// their slots never handed to another row meanwhile.
    #[test]
    fn rows_missed_while_a_ranking_runs_are_read_from_the_tier_at_once() {
        let gpu = Gpu::simulator();
        let (rows, width) = (64usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 16);
        t.count_every(NonZeroUsize::new(1000).unwrap());
        let mut out = gpu.alloc_zeroed::<f32>(4 * width).unwrap();
        t.gather(&gpu, &[0, 1, 2, 3], &mut out)
            .unwrap()
            .wait()
            .unwrap();
        // Logs of six places (as a tier of millions of rows has logs of far fewer places than
        // its free slots).
        t.reclaim();
        let PolicyState::Idle(p) = &mut t.policy else {
            unreachable!("no refresh begun")
        };
        p.log_len = 6;
        p.split_min = 0;
        assert_eq!(t.refresh(&gpu).unwrap().admitted, 4);
        // Twelve slots free: six for the gathers' log, six for theirs while a ranking runs.
        assert_eq!(t.log_limit - t.live.start, 6);
        let hold = t.__hold_refreshes();
        t.begin_refresh(&gpu).unwrap();
        assert_eq!(t.log_limit - t.live.start, 6);
        let ids = [30u32, 31, 30, 2];
        let hits = t.stats().hits;
        for _ in 0..2 {
            out.copy_from(&vec![-1.0; out.len()]).unwrap();
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            let got = out.to_vec().unwrap();
            for (b, &id) in ids.iter().enumerate() {
                assert_eq!(
                    got[b * width..][..width],
                    host[id as usize * width..][..width]
                );
            }
        }
        let device = t.slots.to_vec().unwrap();
        let tier = t.tier.to_vec().unwrap();
        for id in [30usize, 31] {
            let s = device[id] as usize;
            assert!(s < t.capacity(), "row {id}: {s:#x}");
            assert_eq!(tier[s * width..][..width], host[id * width..][..width]);
        }
        // The host counts a hit only for rows a refresh settled (one counted id a batch).
        assert_eq!(t.stats().hits - hits, 0);
        hold.release();
        t.finish_refresh(&gpu).unwrap().unwrap();
        assert!(!t.is_resident(30) && t.filled.len() == 1);
        assert_tables_agree(&mut t);
        // Rows the gathers missed since are logged into the new log's slots, none of them
        // the slots of rows 30 and 31.
        t.gather(&gpu, &[40, 41, 42, 41], &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let device = t.slots.to_vec().unwrap();
        let mut named: Vec<u32> = [30, 31, 40, 41, 42].map(|id| device[id]).to_vec();
        named.sort_unstable();
        named.dedup();
        assert_eq!(named.len(), 5);
        assert_tables_agree(&mut t);
        t.refresh(&gpu).unwrap();
        for id in [30, 31, 40, 41, 42] {
            assert!(t.is_resident(id), "row {id}");
        }
        assert_tables_agree(&mut t);
    }

    /// With room for captures, a log holds free places up to twice the places the gathers
    /// took in its role since the last ranking (a free place holds no row until a capture
    /// takes it), and no cold row's slot is granted while free slots are left; without room
    /// the free slots are split evenly.
    #[test]
    fn with_room_free_slots_go_to_the_log_whose_role_takes_places() {
        for room in [0, 8] {
            let mut p = Policy::new(64, 256, 32);
            p.split_min = 0;
            p.free_min = 2;
            for s in 0..40u32 {
                p.resident[s as usize] = s;
                set_bit(&mut p.bits, s, true);
            }
            p.free = (40..64).rev().collect();
            // Four free slots granted to each log: the gathers took three of the first's
            // (its role, the gathers' log) and none of the other's.
            let main_slots = p.free.split_off(20);
            let side_slots = p.free.split_off(16);
            p.reserved = 8;
            let logged = |ids: Vec<u32>, granted: &[u32], kept| Logged {
                granted: granted[..ids.len()].to_vec(),
                ids,
                evicts: Vec::new(),
                captured: true,
                untaken: Untaken::Kept(kept),
            };
            let logs = [
                logged(Vec::new(), &side_slots, 4),
                logged(vec![100, 101, 102], &main_slots, 1),
            ];
            p.kept_free = [1, 4];
            let plan = p.plan(&logs, [1, 4], room, std::time::Duration::ZERO);
            let [(main, main_rows), (side, side_rows)] = &plan.grants;
            if room == 0 {
                assert_eq!((main.len(), side.len()), (8, 8));
                continue;
            }
            // The first may hold 2 × 3 free places (it keeps one), the other 2 (it keeps 4).
            assert_eq!((main.len(), side.len()), (5, 0));
            assert!(
                main_rows.is_empty() && side_rows.is_empty(),
                "free slots only"
            );
            assert_eq!(p.free.len(), 11, "the free slots not granted stay free");
            assert!(p.condemned.iter().all(|&w| w == 0), "no cold row condemned");
            for id in [100, 101, 102] {
                assert!(bit(&p.bits, id), "row {id} settled");
            }
        }
    }

    /// With room for captures, the rows captures admitted and nothing read since are the
    /// first cold rows granted, oldest first, before the clock's hand looks; a row read
    /// since leaves the list and is not granted.
    #[test]
    fn rows_captured_and_not_read_since_are_granted_first() {
        let mut p = Policy::new(8, 64, 8);
        p.free.clear();
        for s in 0..8u32 {
            p.resident[s as usize] = s;
            set_bit(&mut p.bits, s, true);
        }
        p.probation.extend([(5, 5), (6, 6), (7, 7)]);
        p.add(7);
        let (mut main, mut side) = (Vec::new(), Vec::new());
        let [main_rows, side_rows] = p.condemn([&mut main, &mut side], [0, 0], 2);
        assert_eq!((main, main_rows), (vec![5, 6], vec![5, 6]));
        assert_eq!((side, side_rows), (vec![0, 1], vec![0, 1]));
        assert!(p.probation.is_empty());
        for s in [0, 1, 5, 6] {
            assert!(bit(&p.condemned, s), "slot {s}");
        }
        assert!(!bit(&p.condemned, 7));
    }

    /// Room for captures under a hot set that moves while rankings run: every gather reads
    /// its rows right, and after each refresh the host's and the device's tables agree,
    /// rows evicted by the captures of the log filled while the ranking ran included (some
    /// of them asked for again, and logged again, in the same log or the next).
    #[test]
    fn with_room_for_captures_gathers_stay_right_and_tables_agree_while_rankings_run() {
        let gpu = Gpu::simulator();
        let (rows, width) = (500usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 48);
        t.capture_room(6);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as u32
        };
        let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_checked(&gpu, t, &host, ids, width);
        let (mut evicted, mut granted_while_ranking) = (0, 0);
        for k in 0..40u32 {
            // A hot set of 16 rows that moves wholly every 8 refreshes, and cold rows.
            let base = (k / 8) * 100;
            let batch = |next: &mut dyn FnMut() -> u32| -> Vec<u32> {
                (0..24)
                    .map(|_| match next() % 4 {
                        0 => next() % rows as u32,
                        _ => base + next() % 16,
                    })
                    .collect()
            };
            let ids = batch(&mut next);
            gather(&mut t, &ids);
            if k % 3 == 0 {
                evicted += t.refresh(&gpu).unwrap().evicted;
            } else {
                let hold = t.__hold_refreshes();
                t.begin_refresh(&gpu).unwrap();
                if t.live.evicts[t.live.start.min(t.live.evicts.len())..]
                    .iter()
                    .any(|&id| id != NOT_RESIDENT)
                {
                    granted_while_ranking += 1;
                }
                for _ in 0..2 {
                    let ids = batch(&mut next);
                    gather(&mut t, &ids);
                }
                hold.release();
                evicted += t.finish_refresh(&gpu).unwrap().unwrap().evicted;
            }
            assert_tables_agree(&mut t);
        }
        assert!(
            evicted > 0 && granted_while_ranking > 0,
            "{evicted} {granted_while_ranking}"
        );
    }

    /// Room for captures: cold rows' slots are granted to the log, their rows stay resident
    /// until a capture takes the place, and the refresh after settles both rows; places not
    /// taken stay with the gathers' log and keep their rows; counted rows are never granted.
    #[test]
    fn room_for_captures_evicts_cold_rows_only_at_the_captures_that_take_their_slots() {
        let gpu = Gpu::simulator();
        let (rows, width) = (64usize, 4usize);
        let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
        t.capture_room(2);
        let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_checked(&gpu, t, &host, ids, width);
        // The places a log's gathers may take, and the rows their slots hold.
        let window = |log: &MissLog| {
            let rows = log.evicts.get(log.start..).unwrap_or_default().to_vec();
            (log.limit() - log.start, rows)
        };
        // Rows 0 and 1 counted four times, rows 2 and 3 once: after the refresh those are
        // counted 2, these 0 (counted when the refresh granted, so not granted yet).
        gather(&mut t, &[0, 1, 0, 1, 0, 1, 0, 1, 2, 3]);
        assert_eq!(t.refresh(&gpu).unwrap().admitted, 4);
        assert_eq!(t.log_limit - t.live.start, 0);
        // Now rows 2 and 3 are cold: their slots go to the log, and they stay resident.
        let r = t.refresh(&gpu).unwrap();
        assert_eq!((r.evicted, r.resident), (0, 4));
        assert_eq!(t.log_limit - t.live.start, 2);
        let (_, granted) = window(&t.live);
        let mut cold = granted.clone();
        cold.sort_unstable();
        assert_eq!(cold, [2, 3]);
        assert!(t.is_resident(2) && t.is_resident(3));
        assert_tables_agree(&mut t);
        // No capture takes a place: the next refresh leaves the rows resident (read or not),
        // and their places with the log, which stays the gathers'.
        gather(&mut t, &[0, 1, 2, 3]);
        let r = t.refresh(&gpu).unwrap();
        assert_eq!((r.evicted, r.admitted, r.resident), (0, 0, 4));
        assert_tables_agree(&mut t);
        assert_eq!(window(&t.live), (2, granted.clone()));
        let first = granted[0];
        // Row 40 takes the first place, evicting its row on the device; that row, asked for
        // again, takes the second, evicting the other; then both are read from the tier.
        let before = t.gather_reads().unwrap();
        gather(&mut t, &[40]);
        let slots = t.slots.to_vec().unwrap();
        assert_eq!(slots[first as usize], NOT_RESIDENT);
        assert!(slots[40] < 4);
        assert!(
            t.is_resident(first),
            "the host learns it at the next refresh"
        );
        assert_tables_agree(&mut t);
        gather(&mut t, &[first]);
        gather(&mut t, &[first, 40, 0, 1]);
        assert_eq!(t.gather_reads().unwrap().since(&before).from_host, 2);
        assert_tables_agree(&mut t);
        let r = t.refresh(&gpu).unwrap();
        assert_eq!((r.admitted, r.evicted, r.resident), (2, 2, 4));
        let other = 5 - first; // rows 2 and 3
        assert!(t.is_resident(first) && t.is_resident(40) && !t.is_resident(other));
        assert_tables_agree(&mut t);
        gather(&mut t, &[first, 40, 0, 1, other]);
    }
}
