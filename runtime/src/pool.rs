//! Caching pools for device staging memory and pinned host memory.
//!
//! Allocation is slow on both sides (pinning costs ~0.44 s/GiB on the H200 machine, and
//! `cuMemAlloc` synchronises), so launches with `#[pinned_async]` arguments take their device
//! staging buffers from a pool, and pinned host buffers return to a pool when dropped. In a
//! steady state nothing is allocated: [`PoolStats`] counts allocations and reuses so tests can
//! assert it.
//!
//! Sizes are rounded up to size classes with four steps per power of two (at most 25% waste).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Allocation counters of the pools of one [`Gpu`](crate::Gpu).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Device staging allocations made (cuMemAlloc).
    pub device_allocations: u64,
    /// Bytes of those allocations.
    pub device_bytes: u64,
    /// Staging requests served from the pool.
    pub device_reuses: u64,
    /// Pinned host allocations made (cuMemHostAlloc).
    pub pinned_allocations: u64,
    /// Bytes of those allocations.
    pub pinned_bytes: u64,
    /// Pinned requests served from the pool.
    pub pinned_reuses: u64,
}

/// The size class holding `bytes`: 4 KiB minimum, then 4 steps per power of two. Above the
/// largest class a `usize` can name it is `usize::MAX`, which no allocator grants: the
/// allocation fails as out of memory instead of wrapping to a small class.
pub(crate) fn size_class(bytes: usize) -> usize {
    const MIN: usize = 4096;
    if bytes <= MIN {
        return MIN;
    }
    let pow = usize::BITS - 1 - (bytes - 1).leading_zeros(); // 2^pow < bytes <= 2^(pow+1)
    let base = 1usize << pow;
    let step = base / 4;
    base.saturating_add((bytes - base).div_ceil(step) * step)
}

/// A free list per (size class, kind) of raw allocations.
pub(crate) struct FreeLists<K> {
    free: Mutex<HashMap<(usize, K), Vec<u64>>>,
    pub(crate) allocations: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) reuses: AtomicU64,
}

impl<K: std::hash::Hash + Eq + Copy> FreeLists<K> {
    pub(crate) fn new() -> Self {
        FreeLists {
            free: Mutex::new(HashMap::new()),
            allocations: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            reuses: AtomicU64::new(0),
        }
    }

    /// A cached allocation of `class` bytes, or a new one from `alloc`.
    pub(crate) fn take<E>(
        &self,
        class: usize,
        kind: K,
        alloc: impl FnOnce(usize) -> Result<u64, E>,
    ) -> Result<u64, E> {
        if let Some(p) = self
            .free
            .lock()
            .expect("poisoned")
            .get_mut(&(class, kind))
            .and_then(Vec::pop)
        {
            self.reuses.fetch_add(1, Ordering::Relaxed);
            return Ok(p);
        }
        let p = alloc(class)?;
        self.allocations.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(class as u64, Ordering::Relaxed);
        Ok(p)
    }

    /// Whether an allocation of `class` and `kind` is free for reuse.
    pub(crate) fn has_free(&self, class: usize, kind: K) -> bool {
        self.free
            .lock()
            .expect("poisoned")
            .get(&(class, kind))
            .is_some_and(|v| !v.is_empty())
    }

    /// Give an allocation back for reuse.
    pub(crate) fn put(&self, class: usize, kind: K, p: u64) {
        self.free
            .lock()
            .expect("poisoned")
            .entry((class, kind))
            .or_default()
            .push(p);
    }

    /// Remove and return every cached allocation (to free them).
    pub(crate) fn drain(&self) -> Vec<(usize, K, u64)> {
        self.free
            .lock()
            .expect("poisoned")
            .drain()
            .flat_map(|((c, k), v)| v.into_iter().map(move |p| (c, k, p)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_waste_at_most_a_quarter() {
        assert_eq!(size_class(1), 4096);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 5120);
        assert_eq!(size_class(8192), 8192);
        assert_eq!(size_class(1 << 30), 1 << 30);
        assert_eq!(size_class((1 << 30) + 1), (1 << 30) + (1 << 28));
        for b in [4097usize, 10_000, 123_456, 7_777_777, 1_000_000_007] {
            let c = size_class(b);
            assert!(c >= b && (c - b) * 4 <= b, "{b} -> {c}");
        }
    }

    #[test]
    fn a_size_beyond_the_largest_class_is_no_size_not_a_small_one() {
        let top = 1usize << (usize::BITS - 1);
        assert_eq!(size_class(top), top);
        assert_eq!(size_class(top + (top >> 2) + 1), top + (top >> 1));
        let largest = top + 3 * (top >> 2);
        assert_eq!(size_class(largest), largest);
        for b in [largest + 1, usize::MAX - 1, usize::MAX] {
            assert_eq!(size_class(b), usize::MAX, "{b}");
        }
    }

    #[test]
    fn free_lists_reuse_and_count() {
        let f: FreeLists<u8> = FreeLists::new();
        let mut next = 100;
        let mut alloc = |c: usize| -> Result<u64, ()> {
            next += c as u64;
            Ok(next)
        };
        let a = f.take(4096, 0, &mut alloc).unwrap();
        f.put(4096, 0, a);
        assert_eq!(
            f.take(4096, 1, &mut alloc).unwrap(),
            4196 + 4096,
            "other kind: new"
        );
        assert_eq!(
            f.take(4096, 0, &mut alloc).unwrap(),
            a,
            "same class and kind: reused"
        );
        assert_eq!(f.allocations.load(Ordering::Relaxed), 2);
        assert_eq!(f.reuses.load(Ordering::Relaxed), 1);
        f.put(8192, 0, 7);
        assert_eq!(f.drain(), vec![(8192, 0, 7)]);
    }
}
