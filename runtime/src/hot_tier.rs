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
use std::sync::Arc;

mod counter;
mod host;
mod lists;
mod miss_log;
mod policy;
mod ranking;
mod stagers;
mod stats;

use counter::Counter;
use host::{PREFETCH_AHEAD, bit, default_staging_threads, host_cores, huge_vec, prefetch};
use lists::{PINNED_LIST_MAX, PlanLists, ROOM_MAX};
use miss_log::{MissLog, Regrant};
use policy::{Plan, Policy};
pub use ranking::RefreshHold;
use ranking::{Gate, Job, Ranked, Source, Worker};
#[cfg(test)]
use stagers::copy_max;
use stagers::{Sample, Stagers};
pub use stats::{GatherReads, HotTierStats, Refresh};

/// Entries of a miss log at most, by default (4 MiB).
const LOG_MAX: usize = 1 << 20;

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

/// The fewest counted ids a gather hands to the counting thread: fewer wait in `deferred`
/// for the next gathers' (a refresh, or `count`, takes them all), so that the thread and the
/// host's threads it adds them with are woken once in a few batches, not at every one.
const HAND_OVER_IDS: usize = 1 << 14;

/// The fewest ids of each part of a batch staged in parts ([`HotTier::parts`]).
const PART_IDS: usize = 1 << 13;

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

    /// What the cost model ([`decide_gather`]) predicts for
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
    /// holds no row until a capture takes it, so a log that takes few would keep it empty);
    /// where a refresh lacked free slots for rows it chose to admit (a tier of few slots),
    /// the next lets the logs' untaken places go, so that those rows take their free slots.
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

#[cfg(test)]
mod tests;
