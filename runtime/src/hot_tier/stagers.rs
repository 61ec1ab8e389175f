//! Threads that check and write a share of each part of a batch's ids beside the gathering
//! thread ([`HotTier::staging_threads`](super::HotTier::staging_threads)).
//!
//! Staging a batch is a pass over memory: the caller's ids read, the tier's mapped memory
//! written. One core moves a few GB/s each way, so that pass is most of the host's part of a
//! gather; the cores of a host together move several times more. A waiting thread takes
//! microseconds to wake, about as long as its share of a part takes to stage, so each helper
//! spins while gathers come (for [`SPIN`] after its last share), then sleeps until the next.
//! A share its helper has not begun by the time the gathering thread is done with its own,
//! the gathering thread stages itself: a helper that sleeps, or gets no core, costs the
//! gathering thread no more than staging the part alone.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The ids a gather counts: every `every`-th, from position `first`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sample {
    pub(super) first: usize,
    pub(super) every: usize,
}

impl Sample {
    /// The sample of batch `batch` counting every `every`-th id: it starts at `batch mod
    /// every`, so that successive batches count different positions.
    pub(super) fn of_batch(batch: u64, every: usize) -> Sample {
        Sample {
            first: (batch % every as u64) as usize,
            every,
        }
    }

    /// The same sample over the positions from `start` on, counted from `start`.
    pub(super) fn from(self, start: usize) -> Sample {
        let first = match self.first.checked_sub(start) {
            Some(first) => first,
            None => (self.every - (start - self.first) % self.every) % self.every,
        };
        Sample {
            first,
            every: self.every,
        }
    }
}

/// Copy `ids` into `dst` (as long) and give the largest id (0 for none), one element at a
/// time: what [`copy_max`] does after its blocks of 16.
fn copy_max_scalar(dst: &mut [u32], ids: &[u32]) -> u32 {
    dst.iter_mut().zip(ids).fold(0, |max, (d, &id)| {
        *d = id;
        max.max(id)
    })
}

/// Copy `ids` into `dst` (as long) and give the largest id (0 for none). On x86-64 with
/// SSE2 (part of every x86-64 CPU): 16-byte loads and stores, and four running maxima.
/// Plain stores, not streaming ones: on one core of a 16-core GPU host a batch of 65,536
/// ids took 47 µs with streaming stores and 38 µs with plain ones (`bench_staging`); a
/// helper thread or more (`HotTier::staging_threads`) does more than either.
#[cfg(target_arch = "x86_64")]
pub(super) fn copy_max(dst: &mut [u32], ids: &[u32]) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpgt_epi32, _mm_loadu_si128, _mm_or_si128,
        _mm_set1_epi32, _mm_storeu_si128, _mm_xor_si128,
    };
    let n = dst.len().min(ids.len());
    let (dst, ids) = (&mut dst[..n], &ids[..n]);
    // Whole blocks of 16 elements, then the rest one by one.
    let body = n / 16 * 16;
    let (mid_dst, tail_dst) = dst.split_at_mut(body);
    let (mid_ids, tail_ids) = ids.split_at(body);
    // Unsigned order as signed order of the values with their top bit flipped.
    // SAFETY: SSE2 is part of every x86-64 CPU (this target's baseline).
    let flip = unsafe { _mm_set1_epi32(i32::MIN) };
    // Four running maxima, each over every fourth vector: one would chain every vector's
    // compare and select to the last one's, and take longer than the loads (on one host
    // measured, 37 µs for 65,536 ids against 20 µs for `memcpy`).
    let mut tops = [flip; 4];
    for (d, s) in mid_dst.chunks_exact_mut(16).zip(mid_ids.chunks_exact(16)) {
        for (k, top) in tops.iter_mut().enumerate() {
            // SAFETY: SSE2 is part of every x86-64 CPU; `s[4k..4k + 4]` is 4 readable `u32`s
            // and `d[4k..4k + 4]` 4 writable ones (16 bytes each; `loadu` and `storeu` take
            // any alignment); `d` is borrowed mutably, so nothing else reads or writes it
            // meanwhile.
            unsafe {
                let v = _mm_loadu_si128(s[4 * k..].as_ptr().cast::<__m128i>());
                _mm_storeu_si128(d[4 * k..].as_mut_ptr().cast::<__m128i>(), v);
                let f = _mm_xor_si128(v, flip);
                let above = _mm_cmpgt_epi32(f, *top);
                *top = _mm_or_si128(_mm_and_si128(above, f), _mm_andnot_si128(above, *top));
            }
        }
    }
    let mut max = 0;
    for top in tops {
        let mut lanes = [0i32; 4];
        // SAFETY: SSE2 is part of every x86-64 CPU; `lanes` is 16 writable bytes (`storeu`
        // takes any alignment).
        unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast::<__m128i>(), top) };
        for lane in lanes {
            max = max.max((lane ^ i32::MIN) as u32);
        }
    }
    max.max(copy_max_scalar(tail_dst, tail_ids))
}

/// Copy `ids` into `dst` (as long) and give the largest id (0 for none).
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn copy_max(dst: &mut [u32], ids: &[u32]) -> u32 {
    copy_max_scalar(dst, ids)
}

/// How long a helper spins for the next share after finishing one, before it sleeps: longer
/// than the time between two gathers of a loop that gathers without pause.
pub(super) const SPIN: Duration = Duration::from_millis(2);

/// The fewest ids a helper's share of a part holds: a smaller part is staged by fewer
/// threads.
pub(super) const SHARE_IDS: usize = 1 << 12;

/// One helper's share of a part: the ids at `src` (`len` of them) to copy to `dst`, picking
/// those `sample` counts.
#[derive(Clone, Copy)]
struct Share {
    src: *const u32,
    dst: *mut u32,
    len: usize,
    sample: Option<Sample>,
}

// SAFETY: a share names memory its poster keeps borrowed (the ids shared, the destination
// exclusively, disjoint from every other share's) until the helper says it is done
// ([`Stagers::stage`] waits for that, also when it unwinds).
unsafe impl Send for Share {}

/// What a helper and the thread that posts its shares hold in common.
struct Slot {
    /// The number of the last share posted, of the last one claimed (by the helper, or by
    /// the poster where the helper had not begun it), and of the last one done.
    posted: AtomicU64,
    claimed: AtomicU64,
    done: AtomicU64,
    share: Mutex<Option<Share>>,
    /// The largest id of the last share done, and the ids it picked.
    max: AtomicU32,
    picked: Mutex<Vec<u32>>,
    /// The helper sleeps (waits on `wake`, holding nothing).
    asleep: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
}

impl Slot {
    /// A slot with nothing posted.
    fn new() -> Slot {
        Slot {
            posted: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
            done: AtomicU64::new(0),
            share: Mutex::new(None),
            max: AtomicU32::new(0),
            picked: Mutex::new(Vec::new()),
            asleep: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// Run shares as they are posted until told to stop.
    fn serve(&self) {
        let mut seen = 0u64;
        loop {
            let mut since = Instant::now();
            let mut spins = 0u32;
            loop {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                if self.posted.load(Ordering::Acquire) != seen {
                    break;
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) && since.elapsed() > SPIN {
                    let mut g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
                    self.asleep.store(true, Ordering::SeqCst);
                    while self.posted.load(Ordering::SeqCst) == seen
                        && !self.stop.load(Ordering::SeqCst)
                    {
                        g = self.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
                    }
                    self.asleep.store(false, Ordering::SeqCst);
                    since = Instant::now();
                }
                std::hint::spin_loop();
            }
            seen = self.posted.load(Ordering::Acquire);
            self.claim_and_run(seen);
        }
    }

    /// Claim share `number` (the one posted last) and run it, unless it was claimed
    /// already: whether this call ran it.
    fn claim_and_run(&self, number: u64) -> bool {
        if self
            .claimed
            .compare_exchange(number - 1, number, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let share = self
            .share
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // A share that panicked (none should) reports the largest id there is, so that its
        // poster searches the ids itself for one out of range.
        let mut max = u32::MAX;
        if let Some(Share {
            src,
            dst,
            len,
            sample,
        }) = share
        {
            // SAFETY: the poster keeps `len` ids at `src` borrowed, and `len` elements at
            // `dst` exclusively (no other share, and not the poster's own, overlaps them),
            // until `done` says this share is over (see `Share`'s `Send`); the claim above
            // lets one thread alone run it.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(src, len),
                    std::slice::from_raw_parts_mut(dst, len),
                )
            };
            let mut picked = self.picked.lock().unwrap_or_else(PoisonError::into_inner);
            picked.clear();
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let max = copy_max(dst, src);
                if let Some(Sample { first, every }) = sample {
                    picked.extend(src.iter().skip(first).step_by(every));
                }
                max
            }));
            max = run.unwrap_or(u32::MAX);
        }
        self.max.store(max, Ordering::Relaxed);
        self.done.store(number, Ordering::Release);
        true
    }

    /// Post `share` to the helper, waking it if it sleeps; its number.
    fn post(&self, share: Share) -> u64 {
        *self.share.lock().unwrap_or_else(PoisonError::into_inner) = Some(share);
        let number = self.posted.fetch_add(1, Ordering::SeqCst) + 1;
        if self.asleep.load(Ordering::SeqCst) {
            let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_one();
        }
        number
    }

    /// Have the last share posted done: by this thread where the helper has not begun it
    /// (asleep, or not running), else by the helper, waited for.
    fn finish(&self) {
        let posted = self.posted.load(Ordering::Acquire);
        if posted > 0 && !self.claim_and_run(posted) {
            self.wait();
        }
    }

    /// Wait until every share posted is done.
    fn wait(&self) {
        let posted = self.posted.load(Ordering::Acquire);
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) != posted {
            // A helper that is not running (more threads than cores) gets the core.
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }
}

/// A tier's helpers.
#[derive(Default)]
pub(super) struct Stagers {
    helpers: Vec<(Arc<Slot>, std::thread::JoinHandle<()>)>,
}

/// Waits, when dropped, for every share posted to `slots`: the memory the shares name stays
/// borrowed until then, also when the caller unwinds.
struct Joined<'s>(&'s [(Arc<Slot>, std::thread::JoinHandle<()>)]);

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        for (slot, _) in self.0 {
            slot.finish();
        }
    }
}

impl Stagers {
    /// Have `helpers` threads at hand (started where there are fewer; none stopped where
    /// there are more, until the tier goes). Where one cannot be started, the ones started
    /// do the work (said at `debug` level).
    pub(super) fn ensure(&mut self, helpers: usize) {
        while self.helpers.len() < helpers {
            let slot = Arc::new(Slot::new());
            let served = slot.clone();
            match std::thread::Builder::new()
                .name(format!("berth-hot-stage-{}", self.helpers.len()))
                .spawn(move || served.serve())
            {
                Ok(thread) => self.helpers.push((slot, thread)),
                Err(e) => {
                    tracing::debug!(error = %e, "hot tier: a staging thread could not start");
                    return;
                }
            }
        }
    }

    /// Copy `ids` into `dst` (as long), push the ids `sample` picks onto `picked` (in
    /// `ids`' order), and give the largest id (0 for none): on the calling thread and up to
    /// `helpers` of the tier's helpers, each a share of at least [`SHARE_IDS`] ids.
    pub(super) fn stage(
        &self,
        helpers: usize,
        dst: &mut [u32],
        ids: &[u32],
        sample: Option<Sample>,
        picked: &mut Vec<u32>,
    ) -> u32 {
        let n = dst.len().min(ids.len());
        let (dst, ids) = (&mut dst[..n], &ids[..n]);
        let threads = (n / SHARE_IDS).clamp(1, helpers.min(self.helpers.len()) + 1);
        debug_assert!(threads == 1 || n >= 16 * threads);
        // The caller's share first, then each helper's, every one a multiple of 16 ids (the
        // vector copy's block) but the last.
        let share = if threads == 1 {
            n
        } else {
            (n / threads) / 16 * 16
        };
        let used = &self.helpers[..threads - 1];
        let joined = Joined(used);
        let (own_dst, mut rest_dst) = dst.split_at_mut(share.min(n));
        for (k, (slot, _)) in used.iter().enumerate() {
            let start = (k + 1) * share;
            let len = if k + 2 == threads { n - start } else { share };
            let (this, later) = std::mem::take(&mut rest_dst).split_at_mut(len);
            rest_dst = later;
            slot.post(Share {
                src: ids[start..].as_ptr(),
                dst: this.as_mut_ptr(),
                len,
                sample: sample.map(|s| s.from(start)),
            });
        }
        let mut max = copy_max(own_dst, &ids[..own_dst.len()]);
        if let Some(Sample { first, every }) = sample {
            picked.extend(ids[..own_dst.len()].iter().skip(first).step_by(every));
        }
        drop(joined);
        for (slot, _) in used {
            max = max.max(slot.max.load(Ordering::Relaxed));
            picked.extend_from_slice(&slot.picked.lock().unwrap_or_else(PoisonError::into_inner));
        }
        max
    }
}

impl Drop for Stagers {
    fn drop(&mut self) {
        for (slot, _) in &self.helpers {
            slot.stop.store(true, Ordering::SeqCst);
            let _g = slot.lock.lock().unwrap_or_else(PoisonError::into_inner);
            slot.wake.notify_one();
        }
        for (_, thread) in self.helpers.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shares posted to helpers that spin and to helpers that sleep (after [`SPIN`] without
    /// work) are staged whole, in order; dropping the helpers ends their threads.
    #[test]
    fn helpers_that_spin_or_sleep_stage_their_shares() {
        let ids: Vec<u32> = (0..50_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 8)
            .collect();
        let mut stagers = Stagers::default();
        stagers.ensure(3);
        for round in 0..4 {
            if round >= 2 {
                std::thread::sleep(SPIN * 3);
            }
            for helpers in [0, 1, 2, 3] {
                let (mut dst, mut picked) = (vec![0u32; ids.len()], Vec::new());
                let sample = Sample::of_batch(round, 5);
                let max = stagers.stage(helpers, &mut dst, &ids, Some(sample), &mut picked);
                assert_eq!(dst, ids, "round {round}, {helpers} helpers");
                assert_eq!(max, ids.iter().copied().max().unwrap());
                let want: Vec<u32> = ids
                    .iter()
                    .copied()
                    .skip(round as usize % 5)
                    .step_by(5)
                    .collect();
                assert_eq!(picked, want, "round {round}, {helpers} helpers");
            }
        }
        drop(stagers);
    }

    /// A share whose helper never runs is staged by the posting thread: a helper thread that
    /// only waits to be stopped.
    #[test]
    fn a_share_its_helper_has_not_begun_is_staged_by_the_caller() {
        let ids: Vec<u32> = (0..20_000u32).map(|i| i.wrapping_mul(40_503)).collect();
        let slot = Arc::new(Slot::new());
        let idle = slot.clone();
        let thread = std::thread::spawn(move || {
            while !idle.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let stagers = Stagers {
            helpers: vec![(slot, thread)],
        };
        for round in 0..3 {
            let (mut dst, mut picked) = (vec![0u32; ids.len()], Vec::new());
            let max = stagers.stage(
                1,
                &mut dst,
                &ids,
                Some(Sample::of_batch(round, 3)),
                &mut picked,
            );
            assert_eq!(dst, ids, "round {round}");
            assert_eq!(max, ids.iter().copied().max().unwrap());
            let want: Vec<u32> = ids
                .iter()
                .copied()
                .skip(round as usize % 3)
                .step_by(3)
                .collect();
            assert_eq!(picked, want, "round {round}");
        }
    }
}
