//! Barriers in shared memory (`mbarrier`, sm_90): counters of arrivals and of bytes that
//! asynchronous copies ([`crate::tma`]) complete, which threads wait on by phase.
//!
//! # Phases
//!
//! A barrier is initialised with an arrival count and runs in phases numbered 0, 1, 2, …. A
//! phase completes when the count's arrivals have arrived ([`MBarrier::arrive`]) and every
//! byte announced in it ([`MBarrier::arrive_expect_tx`]) has been written by the copies that
//! complete on the barrier; the next phase then begins with the same count. A thread waits
//! for a phase by its parity (its number modulo 2, [`MBarrier::wait`]): the wait returns once
//! the running phase's parity differs from the one asked for, so a waiter must not fall two
//! phases behind (its parity would name a later phase). A pipeline of `S` stages keeps the
//! parity of stage `s` at step `i` as `(i / S) % 2`; a fresh barrier's running phase is 0, so
//! a wait for parity 1 returns at once (which is how a producer's first pass over empty
//! stages goes through).
//!
//! Waiting is acquiring: after a wait that returned, the waiter sees every write the arriving
//! threads made before their arrival, and the bytes of the copies completed in that phase.
//!
//! # On the simulator
//!
//! The simulator keeps each barrier's count, pending arrivals, byte count and phase
//! ([`mod@crate::host::async_proxy`]); a wait that cannot return yet lets the block's other threads
//! run. It reports a barrier used before [`MBarriers::init`], more arrivals in a phase than
//! its count, a wait that no thread can end (every thread of the block waiting), and
//! tensor-core reads of copied bytes before their phase completed or by a thread that did
//! not wait for it.
//!
//! ```
//! use berth_device::{mbarrier::MBarriers, shared_array};
//! let store = shared_array!(BARS: [u64; 2]);
//! // SAFETY: every thread of the block (one here) reaches the call, and nothing else uses
//! // the array.
//! let bars = unsafe { MBarriers::init(store, 1) };
//! let full = bars.get(0);
//! // SAFETY: one arrival in a phase of one.
//! unsafe { full.arrive() };
//! full.wait(0); // phase 0 completed
//! assert!(!full.try_wait(1)); // phase 1 is running
//! ```

use crate::Shared;

/// A block's array of mbarriers, initialised ([`MBarriers::init`]).
///
/// ```
/// use berth_device::{mbarrier::MBarriers, shared_array};
/// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
/// let bars = unsafe { MBarriers::init(shared_array!(B: [u64; 4]), 128) };
/// assert_eq!(bars.len(), 4);
/// ```
#[derive(Clone, Copy)]
pub struct MBarriers {
    store: Shared<u64>,
}

/// One mbarrier of an [`MBarriers`] array.
///
/// ```
/// use berth_device::{mbarrier::MBarriers, shared_array};
/// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
/// let bars = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) };
/// assert!(bars.get(0).try_wait(1)); // the phase before phase 0 counts as complete
/// ```
#[derive(Clone, Copy)]
pub struct MBarrier {
    p: *mut u64,
}

impl MBarriers {
    /// Initialise every barrier of `store` to expect `count` arrivals per phase (thread 0 of
    /// the block does it), make the initialisation visible to the asynchronous copies, and
    /// wait at a block barrier ([`sync_threads`](crate::sync_threads)) so that no thread uses
    /// a barrier before it is ready. `count` is 1 to 2^20 - 1 (else the launch stops).
    ///
    /// # Safety
    /// - Every thread of the block reaches this call (it contains a block barrier).
    /// - No thread uses `store` otherwise, nor waits on or arrives at its barriers from an
    ///   earlier initialisation after this call begins.
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bars = unsafe { MBarriers::init(shared_array!(B: [u64; 3]), 2) };
    /// // SAFETY: two arrivals in a phase of two.
    /// unsafe {
    ///     bars.get(2).arrive();
    ///     bars.get(2).arrive();
    /// }
    /// bars.get(2).wait(0);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn init(store: Shared<u64>, count: u32) -> MBarriers {
        if count == 0 || count >= 1 << 20 {
            crate::panic::fail("mbarrier: an arrival count is 1 to 2^20 - 1");
        }
        if crate::thread::linear_in_block() == 0 {
            for i in 0..store.len() {
                let p = store.as_ptr().wrapping_add(i);
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: `p` is element `i < len` of a shared array, 8-byte aligned; the
                // caller's contract keeps every other access off it until the barrier below.
                unsafe {
                    core::arch::asm!(
                        "mbarrier.init.shared::cta.b64 [{a}], {n};",
                        a = in(reg32) shared_addr(p),
                        n = in(reg32) count,
                        options(nostack),
                    )
                };
                #[cfg(not(target_arch = "nvptx64"))]
                crate::host::async_proxy(
                    crate::host::async_proxy::AsyncOp::Init {
                        bar: p as usize,
                        count,
                    },
                    core::panic::Location::caller(),
                );
            }
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: fences order the initialisations before later accesses; no operands.
            unsafe {
                core::arch::asm!(
                    "fence.mbarrier_init.release.cluster;",
                    "fence.proxy.async.shared::cta;",
                    options(nostack),
                )
            };
        }
        // SAFETY: the caller's contract: every thread of the block reaches this call.
        unsafe { crate::sync_threads() };
        MBarriers { store }
    }

    /// The number of barriers.
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// assert_eq!(unsafe { MBarriers::init(shared_array!(B: [u64; 2]), 1) }.len(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the array holds no barrier.
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// assert!(!unsafe { MBarriers::init(shared_array!(B: [u64; 2]), 1) }.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Barrier `i` (bounds-checked: past the end stops the thread with a located report).
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bars = unsafe { MBarriers::init(shared_array!(B: [u64; 2]), 1) };
    /// let _second = bars.get(1);
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn get(&self, i: usize) -> MBarrier {
        if i >= self.store.len() {
            crate::panic::index_out_of_bounds(i, self.store.len());
        }
        MBarrier {
            p: self.store.as_ptr().wrapping_add(i),
        }
    }
}

/// The 32-bit shared-memory address of the generic pointer `p` into shared memory.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn shared_addr<T>(p: *const T) -> u32 {
    let a: u32;
    // SAFETY: converts an address; reads no memory.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 %berth_a;",
            "cvta.to.shared.u64 %berth_a, {p};",
            "cvt.u32.u64 {a}, %berth_a;",
            "}}",
            p = in(reg64) p,
            a = out(reg32) a,
            options(pure, nomem, nostack),
        )
    };
    a
}

impl MBarrier {
    /// Arrive: one of the running phase's arrivals (`mbarrier.arrive`, release: the phase's
    /// waiters see what this thread wrote before).
    ///
    /// # Safety
    /// No phase gets more arrivals than the barrier's count (PTX leaves it undefined; the
    /// simulator reports it).
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bar = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) }.get(0);
    /// // SAFETY: the phase's one arrival.
    /// unsafe { bar.arrive() };
    /// assert!(bar.try_wait(0));
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive(&self) {
        // SAFETY: forwarded.
        unsafe { self.arrive_expect_tx(0) }
    }

    /// Announce `bytes` bytes that asynchronous copies will complete on this barrier in the
    /// running phase, then arrive (`mbarrier.arrive.expect_tx`): the phase completes once
    /// those bytes are written as well. The usual producer step: this, then the copies.
    ///
    /// `bytes` is below 2^20 (the transaction count's range; else the thread stops with a
    /// located report).
    ///
    /// # Safety
    /// As [`arrive`](Self::arrive); and the copies that complete on this barrier in the phase
    /// write exactly the announced bytes (more would complete a later phase early).
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bar = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) }.get(0);
    /// // SAFETY: the phase's one arrival, announcing 128 bytes no copy writes (yet).
    /// unsafe { bar.arrive_expect_tx(128) };
    /// assert!(!bar.try_wait(0)); // waits for the bytes
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive_expect_tx(&self, bytes: u32) {
        if bytes >= 1 << 20 {
            crate::panic::fail("mbarrier: a phase's transaction count is below 2^20 bytes");
        }
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `p` is an initialised barrier in shared memory (`MBarriers::init`); the
        // arrival count is the caller's contract. Not `nomem`: it releases this thread's
        // writes.
        unsafe {
            core::arch::asm!(
                "{{",
                ".reg .b64 %berth_st;",
                "mbarrier.arrive.expect_tx.shared::cta.b64 %berth_st, [{a}], {n};",
                "}}",
                a = in(reg32) shared_addr(self.p),
                n = in(reg32) bytes,
                options(nostack),
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::async_proxy(
            crate::host::async_proxy::AsyncOp::Arrive {
                bar: self.p as usize,
                tx: bytes,
            },
            core::panic::Location::caller(),
        );
    }

    /// Whether the phase of parity `parity` (0 or 1) has completed
    /// (`mbarrier.try_wait.parity`, acquire): true once the running phase's parity is the
    /// other one. The hardware may suspend the thread a little while before answering false.
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bar = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) }.get(0);
    /// assert!(!bar.try_wait(0) && bar.try_wait(1));
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn try_wait(&self, parity: u32) -> bool {
        #[cfg(target_arch = "nvptx64")]
        {
            let done: u32;
            // SAFETY: `p` is an initialised barrier in shared memory; the wait reads it. Not
            // `nomem`: it acquires the writes released by the phase's arrivals and copies.
            unsafe {
                core::arch::asm!(
                    "{{",
                    ".reg .pred %berth_p;",
                    "mbarrier.try_wait.parity.shared::cta.b64 %berth_p, [{a}], {par};",
                    "selp.u32 {d}, 1, 0, %berth_p;",
                    "}}",
                    a = in(reg32) shared_addr(self.p),
                    par = in(reg32) parity & 1,
                    d = out(reg32) done,
                    options(nostack),
                )
            };
            done != 0
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            crate::host::async_proxy(
                crate::host::async_proxy::AsyncOp::TryWait {
                    bar: self.p as usize,
                    parity: parity & 1,
                },
                core::panic::Location::caller(),
            ) != 0
        }
    }

    /// Wait until the phase of parity `parity` has completed (a loop of
    /// [`try_wait`](Self::try_wait)).
    ///
    /// ```
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// // SAFETY: every thread of the block reaches the call; the array is used for nothing else.
    /// let bar = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) }.get(0);
    /// bar.wait(1); // returns at once: the phase before phase 0
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self, parity: u32) {
        while !self.try_wait(parity) {
            #[cfg(not(target_arch = "nvptx64"))]
            crate::host::spin(core::panic::Location::caller());
        }
    }

    /// The barrier's 32-bit shared-memory address, for instructions that complete on it.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub(crate) fn addr(&self) -> u32 {
        shared_addr(self.p)
    }

    /// The barrier's host address (the simulator's key for it).
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    pub(crate) fn addr(&self) -> usize {
        self.p as usize
    }
}
