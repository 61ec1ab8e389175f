//! The host's side of a tier's work: bit arrays of one bit a row, per-row arrays on huge
//! pages, prefetches, and the threads that rank and count beside the gathers.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The threads that stage a part together by default ([`HotTier::staging_threads`](super::HotTier::staging_threads)): the
/// gathering thread and two helpers on a host of at least [`TWO_HELPER_CORES`] cores, one
/// helper on a host of at least [`HELPER_CORES`], else the gathering thread alone.
pub(super) const DEFAULT_STAGING_THREADS: usize = 3;

/// The fewest cores of a host on which a tier has a staging helper by default.
pub(super) const HELPER_CORES: usize = 4;

/// The fewest cores of a host on which a tier has two staging helpers by default.
pub(super) const TWO_HELPER_CORES: usize = 16;

/// The host's cores, as the system reports them (1 where it does not).
pub(super) fn host_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The staging threads a new tier has on a host of `cores` cores: a helper spins while
/// batches come, which on a host of few cores takes one from the threads that simulate or
/// rank ([`DEFAULT_STAGING_THREADS`]).
pub(super) fn default_staging_threads(cores: usize) -> usize {
    if cores >= TWO_HELPER_CORES {
        DEFAULT_STAGING_THREADS
    } else if cores >= HELPER_CORES {
        2
    } else {
        1
    }
}

/// Whether bit `id` of `bits` is set.
pub(super) fn bit(bits: &[u64], id: u32) -> bool {
    bits[id as usize / 64] & (1 << (id % 64)) != 0
}

/// Set (`on`) or clear bit `id` of `bits`.
pub(super) fn set_bit(bits: &mut [u64], id: u32, on: bool) {
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
pub(super) fn set_bits_together(bits: &mut [u64], ids: &[u32], on: bool) {
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
pub(super) fn huge_vec<T: Copy>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    // Advised before the first write, so that the pages are faulted in huge.
    #[cfg(target_os = "linux")]
    advise_huge_pages(v.spare_capacity_mut());
    v.resize(n, value);
    v
}

/// How many ids ahead [`Policy::add_all`](super::policy::Policy::add_all) fetches an id's entries.
pub(super) const PREFETCH_AHEAD: usize = 16;

/// Ask the CPU to fetch the cache line of `v[i]` (nothing where `i` is out of bounds, or on
/// other architectures): a hint, which changes no state of the program.
#[inline(always)]
pub(super) fn prefetch<T>(v: &[T], i: usize) {
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
pub(super) fn advise_huge_pages<T>(v: &[T]) {
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
pub(super) fn beside_gathers<R: Send>(work: impl FnOnce() -> R + Send) -> R {
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

/// `v` seen as atomics, for host threads that count rows together.
pub(super) fn atomic_view(v: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of `u32`, and the exclusive
    // borrow of `v` is held for the view's life, so nothing else reads or writes it meanwhile.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast::<AtomicU32>(), v.len()) }
}

/// `v` as atomics, for the host's threads to set and clear bits of together.
pub(super) fn atomic_bits(v: &mut [u64]) -> &[AtomicU64] {
    const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());
    // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and its alignment (checked
    // at compile time above); the exclusive borrow of `v` is held for the view's life, so
    // nothing else reads or writes it meanwhile.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast::<AtomicU64>(), v.len()) }
}
