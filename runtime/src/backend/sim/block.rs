//! One simulated block: its shared memory, the bookkeeping of its barriers and warp calls,
//! and the logs its threads' accesses go to — the services ([`BlockServices`]) the device
//! API calls while the block's threads run.

use crate::backend::sim::async_copy::{AsyncCopies, Misuse};
use crate::backend::sim::check::{self, Entry, Run};
use crate::backend::sim::report::{self, Args};
use crate::backend::sim::shared::{SharedMemory, Unwritten};
use crate::backend::sim::warp;
use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
use berth_device::host::{Access, At, BlockServices, Coords, MailboxRole, SharedKey};
use corosensei::Yielder;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex};

/// The first turn of each side of each mailbox (by the address of its ring) in a launch.
pub(crate) type Turns = Arc<Mutex<HashMap<(usize, MailboxRole), report::Turn>>>;

/// Two threads on one side of a mailbox: the ring, the side, the first turn and the second.
#[derive(Clone, Copy)]
pub(crate) struct TurnConflict {
    pub(crate) ring: usize,
    pub(crate) role: MailboxRole,
    pub(crate) first: report::Turn,
    pub(crate) second: report::Turn,
}

/// The shape of a launch, as the simulator's blocks see it.
#[derive(Clone, Copy)]
pub(crate) struct Dims {
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_bytes: usize,
}

impl Dims {
    pub(crate) fn threads(&self) -> usize {
        self.block.iter().map(|&d| d as usize).product()
    }
    /// The block whose linear index is `b` (x fastest).
    pub(crate) fn block_coords(&self, b: u64) -> [u32; 3] {
        let [gx, gy, _] = self.grid.map(u64::from);
        [
            (b % gx) as u32,
            ((b / gx) % gy) as u32,
            (b / (gx * gy)) as u32,
        ]
    }
    pub(crate) fn coords(&self, block: [u32; 3], t: usize) -> Coords {
        let [bx, by, _] = self.block.map(|d| d as usize);
        Coords {
            thread: [
                (t % bx) as u32,
                ((t / bx) % by) as u32,
                (t / (bx * by)) as u32,
            ],
            block,
            block_dim: self.block,
            grid_dim: self.grid,
        }
    }
}

/// Entries (24 bytes each) a block's global log holds before it is first compacted.
const COMPACT_AT: usize = 1 << 20;

/// A worker's buffers, reused from block to block.
#[derive(Default)]
pub(crate) struct Scratch {
    shared_seen: check::Interval,
    global_log: Vec<Entry>,
    pub(crate) runs: Vec<Run>,
}

const STRAY_BARRIER: &str = "berth simulator: sync_threads() outside the kernel body";

/// One block's shared memory, barrier bookkeeping and access logs.
pub(crate) struct Block {
    memory: RefCell<SharedMemory>,
    /// Yielder of each thread's coroutine (coroutine mode only).
    pub(crate) yielders: RefCell<Vec<*const Yielder<(), ()>>>,
    pub(crate) current: Cell<usize>,
    coroutines: bool,
    pub(crate) barrier_at: Cell<Option<&'static Location<'static>>>,
    /// The `sync_threads()` call each thread last waited in.
    pub(crate) barrier_sites: RefCell<Vec<Option<&'static Location<'static>>>>,
    /// A barrier or warp call (its name) reached outside coroutine mode.
    pub(crate) stray_barrier: Cell<Option<(&'static str, &'static Location<'static>)>>,
    /// Each thread's pending warp call, and the result it gets when its warp meets.
    pub(crate) warp_calls: RefCell<Vec<warp::Pending>>,
    pub(crate) warp_results: RefCell<Vec<u64>>,
    /// Threads that had returned when the current round began.
    pub(crate) returned: RefCell<Vec<bool>>,
    /// Shared-memory accesses of the current barrier interval, and the first race among them.
    shared_seen: RefCell<check::Interval>,
    shared_race: Cell<Option<check::Race>>,
    /// Global-memory accesses of the block; those from `interval_start` on are the current
    /// barrier interval's.
    pub(crate) global_log: RefCell<Vec<Entry>>,
    pub(crate) interval_start: Cell<usize>,
    /// The log's length at which it is next compacted ([`check::compact`]).
    compact_at: Cell<usize>,
    /// Atomic accesses already in the log, by element ([`AtomicsSeen`]).
    atomics_seen: RefCell<AtomicsSeen>,
    /// The first read of shared memory no thread of the block had written.
    unwritten: Cell<Option<Unwritten>>,
    /// Asynchronous copies not yet visible to every thread, and the first access that
    /// reached one too early.
    copies: RefCell<AsyncCopies>,
    copy_misuse: Cell<Option<Misuse>>,
    /// The block's mbarriers and bulk tensor copies.
    pub(crate) proxy: RefCell<AsyncProxy>,
    /// Each thread that yielded in an mbarrier wait since the scheduler last looked.
    pub(crate) spinning: RefCell<Vec<bool>>,
    /// The block's place in the grid, and the launch's shape.
    block: [u32; 3],
    dims: Dims,
    /// The launch's mailbox turns, and the conflict that stopped a thread of this block.
    turns: Turns,
    pub(crate) turn_conflict: Cell<Option<TurnConflict>>,
}

impl Block {
    pub(crate) fn new(
        dims: &Dims,
        block: [u32; 3],
        turns: Turns,
        coroutines: bool,
        scratch: &mut Scratch,
    ) -> Self {
        let (mut shared_seen, mut global_log) = (
            std::mem::take(&mut scratch.shared_seen),
            std::mem::take(&mut scratch.global_log),
        );
        shared_seen.clear();
        global_log.clear();
        Block {
            memory: RefCell::new(SharedMemory::new(dims.shared_bytes)),
            yielders: RefCell::new(vec![std::ptr::null(); dims.threads()]),
            current: Cell::new(0),
            coroutines,
            barrier_at: Cell::new(None),
            barrier_sites: RefCell::new(vec![None; dims.threads()]),
            stray_barrier: Cell::new(None),
            warp_calls: RefCell::new(vec![None; dims.threads()]),
            warp_results: RefCell::new(vec![0; dims.threads()]),
            returned: RefCell::new(vec![false; dims.threads()]),
            shared_seen: RefCell::new(shared_seen),
            shared_race: Cell::new(None),
            global_log: RefCell::new(global_log),
            interval_start: Cell::new(0),
            compact_at: Cell::new(COMPACT_AT),
            atomics_seen: RefCell::new(AtomicsSeen::default()),
            unwritten: Cell::new(None),
            copies: RefCell::new(AsyncCopies::default()),
            copy_misuse: Cell::new(None),
            proxy: RefCell::new(AsyncProxy::default()),
            spinning: RefCell::new(vec![false; dims.threads()]),
            block,
            dims: *dims,
            turns,
            turn_conflict: Cell::new(None),
        }
    }

    /// A copy that the block's threads never waited for, once the block has ended: as
    /// (thread, problem).
    pub(crate) fn copy_never_waited(
        &self,
        dims: &Dims,
        block: [u32; 3],
    ) -> Option<(usize, String)> {
        let (t, at) = self.copies.borrow().never_waited()?;
        Some((
            t,
            report::async_copy_never_waited(dims.coords(block, t).thread, at),
        ))
    }

    /// Give the logs' buffers back to the worker.
    pub(crate) fn recycle(&self, scratch: &mut Scratch) {
        scratch.shared_seen = self.shared_seen.take();
        scratch.global_log = self.global_log.take();
    }

    /// Check the barrier interval that just ended and start the next: a race on shared or
    /// global memory (unless `global` is false: the caller checks it), or a read of
    /// unwritten shared memory, as (thread, problem).
    pub(crate) fn end_interval(
        &self,
        dims: &Dims,
        block: [u32; 3],
        args: &Args,
        global: bool,
    ) -> Option<(usize, String)> {
        let thread = |t: u64| dims.coords(block, t as usize).thread;
        self.shared_seen.borrow_mut().clear();
        // Copies waited for before this barrier are now visible to every thread.
        self.copies.borrow_mut().barrier();
        if let Some(m) = self.copy_misuse.take() {
            self.shared_race.take();
            let what = self.memory.borrow().describe(m.addr, m.bytes);
            let copier = (thread(m.copier as u64), m.copied_at);
            return Some((
                m.thread,
                report::async_copy_misuse(
                    &what,
                    (thread(m.thread as u64), m.kind, m.at),
                    copier,
                    m.waited,
                ),
            ));
        }
        if let Some(r) = self.shared_race.take() {
            let what = self.memory.borrow().describe(r.addr, r.bytes);
            let (a, b) = (r.a.1, r.b.1);
            return Some((
                b.id as usize,
                report::shared_race(
                    &what,
                    (thread(a.id), r.a.0, a.at),
                    (thread(b.id), r.b.0, b.at),
                ),
            ));
        }
        if global {
            let mut log = self.global_log.borrow_mut();
            let start = self.interval_start.replace(log.len());
            if let Some(r) = check::check_interval(&mut log[start..]) {
                return Some(global_race(dims, block, args, r));
            }
        }
        self.unwritten.take().map(|u| {
            let what = self.memory.borrow().describe(u.addr, u.bytes);
            (u.thread, report::unwritten(&what, u.kind, u.at))
        })
    }
}

impl Block {
    /// Yield the running thread's coroutine (at a barrier or a warp call).
    fn suspend(&self) {
        let y = self.yielders.borrow()[self.current.get()];
        // SAFETY: the yielder of the running coroutine, set when it started; it lives as
        // long as the coroutine, which is the one executing this call.
        unsafe { (*y).suspend(()) };
    }
}

// SAFETY: the barrier suspends the calling coroutine until every thread of the block has
// reached one (or panics when the threads run one after another, so never returns); shared
// arrays come from the block's own arena, distinct per key and live as long as the block,
// and `dynamic` is its dynamic array; warp calls are answered by `host::warp::exchange`
// once the lanes meet, and the active mask includes the calling lane, which has not returned.
unsafe impl BlockServices for Block {
    fn barrier(&self, at: &'static Location<'static>) {
        if !self.coroutines {
            // The body does not name sync_threads, so the threads run one after another: a
            // barrier reached from a helper cannot be honoured.
            self.stray_barrier.set(Some(("sync_threads", at)));
            panic!("{STRAY_BARRIER}");
        }
        self.barrier_at.set(Some(at));
        self.barrier_sites.borrow_mut()[self.current.get()] = Some(at);
        self.suspend();
    }

    fn warp(&self, call: berth_device::host::warp::Call, at: &'static Location<'static>) -> u64 {
        if !self.coroutines {
            self.stray_barrier.set(Some((call.op.name(), at)));
            panic!("{STRAY_BARRIER}");
        }
        let t = self.current.get();
        self.warp_calls.borrow_mut()[t] = Some((call, at));
        self.suspend();
        self.warp_results.borrow()[t]
    }

    fn async_proxy(&self, op: AsyncOp, _at: At) -> Result<u64, String> {
        let r = self.proxy.borrow_mut().apply(self.current.get(), op);
        if let (Ok(_), AsyncOp::Copied { dst, bytes, .. }) = (&r, op) {
            // The copy's bytes count as written for the initialisation check; they are kept
            // out of the race log, which knows barriers but not mbarrier phases (the proxy
            // checks the accesses to them instead).
            self.memory.borrow_mut().access(dst, bytes, Access::Write);
        }
        r
    }

    /// A thread waiting on an mbarrier yields to the others (the scheduler runs it again in
    /// its next round, and reports the block when a round of waits changes nothing).
    fn spin(&self, at: At) {
        if !self.coroutines {
            self.stray_barrier.set(Some(("mbarrier wait", at)));
            panic!("{STRAY_BARRIER}");
        }
        self.spinning.borrow_mut()[self.current.get()] = true;
        self.suspend();
    }

    fn warp_active_mask(&self) -> u32 {
        let t = self.current.get();
        let (w, returned) = (t / 32, self.returned.borrow());
        (0..32)
            .filter(|l| returned.get(w * 32 + l) == Some(&false))
            .fold(0, |m, l| m | 1 << l)
    }

    fn shared(&self, key: &'static SharedKey, bytes: usize, align: usize) -> *mut u8 {
        assert!(align <= 16, "shared arrays are at most 16-byte aligned");
        self.memory.borrow_mut().array(key, bytes)
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        self.memory.borrow_mut().dynamic()
    }

    fn shared_access(&self, addr: usize, bytes: usize, access: Access, at: At) {
        let t = self.current.get();
        // Bytes of a bulk copy: read only after waiting for its phase, written only after it
        // completed.
        let checked = {
            let mut proxy = self.proxy.borrow_mut();
            if proxy.has_copies() {
                let op = if access == Access::Read {
                    AsyncOp::Read { addr, bytes }
                } else {
                    AsyncOp::Write { addr, bytes }
                };
                proxy.apply(t, op)
            } else {
                Ok(0)
            }
        };
        if let Err(problem) = checked {
            panic!("{problem} (at {}:{})", at.file(), at.line());
        }
        let race = self
            .shared_seen
            .borrow_mut()
            .add(Entry::new(addr, bytes, access, t, at));
        if race.is_some() && self.shared_race.get().is_none() {
            self.shared_race.set(race);
        }
        let copies = self.copies.borrow();
        if !copies.is_empty() && self.copy_misuse.get().is_none() {
            self.copy_misuse
                .set(copies.check(addr, bytes, access, t, at));
        }
        drop(copies);
        let unwritten = self.memory.borrow_mut().access(addr, bytes, access);
        if unwritten && self.unwritten.get().is_none() {
            self.unwritten.set(Some(Unwritten {
                addr,
                bytes,
                kind: access,
                thread: t,
                at,
            }));
        }
    }

    fn async_copy(&self, addr: usize, bytes: usize, at: At) {
        self.copies
            .borrow_mut()
            .issue(addr, bytes, self.current.get(), at);
    }

    fn async_commit(&self, _at: At) {
        self.copies.borrow_mut().commit(self.current.get());
    }

    fn async_wait(&self, pending: usize, _at: At) {
        self.copies.borrow_mut().wait(self.current.get(), pending);
    }

    /// The kernel's side of a mailbox is one thread of the launch per role: a second thread
    /// taking a role stops here (its block reports both turns).
    fn mailbox_turn(&self, ring: usize, role: MailboxRole, at: At) {
        let me = (
            self.block,
            self.dims.coords(self.block, self.current.get()).thread,
            at,
        );
        let first = *self
            .turns
            .lock()
            .expect("poisoned")
            .entry((ring, role))
            .or_insert(me);
        if (first.0, first.1) != (me.0, me.1) {
            self.turn_conflict.set(Some(TurnConflict {
                ring,
                role,
                first,
                second: me,
            }));
            panic!("berth simulator: a second thread of the launch took one side of a mailbox");
        }
    }

    fn global_access(&self, addr: usize, bytes: usize, access: Access, at: At) {
        if matches!(access, Access::Atomic | Access::BlockAtomic)
            && self.atomics_seen.borrow_mut().seen(addr, bytes, access, at)
        {
            return;
        }
        let t = self.current.get();
        let mut log = self.global_log.borrow_mut();
        log.push(Entry::new(addr, bytes, access, t, at));
        if log.len() >= self.compact_at.get() {
            let start = check::compact(&mut log, self.interval_start.get());
            self.interval_start.set(start);
            self.compact_at.set((2 * log.len()).max(COMPACT_AT));
        }
    }
}

/// Atomic accesses of one block already in its global log, by element: a repeat adds nothing
/// to the checks, so it is not logged. Within a block, atomics conflict with no atomic, and
/// the element of an `#[atomic]` argument is reached by atomics alone (there are no plain
/// accesses to it for one to conflict with); across blocks, the checks keep one access per
/// element, kind and block ([`check::runs`]). Kernels that make every thread update a few
/// counters (a ticket counter, a histogram) would otherwise log one entry per update.
/// Direct-mapped: a slot holds the last atomic access whose element hashed to it.
struct AtomicsSeen([Option<(usize, u16, Access, At)>; ATOMICS_SEEN]);

/// Slots of [`AtomicsSeen`] (a power of two).
const ATOMICS_SEEN: usize = 64;

impl Default for AtomicsSeen {
    fn default() -> Self {
        AtomicsSeen([None; ATOMICS_SEEN])
    }
}

impl AtomicsSeen {
    /// Whether this access (element, width, kind, call site) is already logged; notes it if
    /// not.
    fn seen(&mut self, addr: usize, bytes: usize, kind: Access, at: At) -> bool {
        let key = (addr, bytes.min(usize::from(u16::MAX)) as u16, kind, at);
        // Elements are at least 4 bytes apart; fold the higher bits in for strided counters.
        let slot = &mut self.0[((addr >> 2) ^ (addr >> 8)) % ATOMICS_SEEN];
        if slot.is_some_and(|s| {
            s.0 == key.0 && s.1 == key.1 && s.2 == key.2 && std::ptr::eq(s.3, key.3)
        }) {
            return true;
        }
        *slot = Some(key);
        false
    }
}

/// A race between two threads of `block` on global memory, as (thread, problem).
pub(crate) fn global_race(
    dims: &Dims,
    block: [u32; 3],
    args: &Args,
    r: check::Race,
) -> (usize, String) {
    let thread = |t: u64| dims.coords(block, t as usize).thread;
    let (a, b) = (r.a.1, r.b.1);
    (
        b.id as usize,
        report::global_race_in_block(
            &args.describe(r.addr, r.bytes),
            (thread(a.id), r.a.0, a.at),
            (thread(b.id), r.b.0, b.at),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::AtomicsSeen;
    use berth_device::host::Access;
    use std::panic::Location;

    /// A repeat of a logged atomic access (element, width, kind and call site) is seen;
    /// any difference, or an element that took its slot since, logs it again.
    #[test]
    fn an_atomic_access_is_logged_once_per_element_kind_and_site() {
        // Two call sites (different lines).
        let here = Location::caller();
        let there = Location::caller();
        let mut seen = AtomicsSeen::default();
        assert!(!seen.seen(0x1000, 4, Access::Atomic, here));
        assert!(seen.seen(0x1000, 4, Access::Atomic, here));
        assert!(!seen.seen(0x1000, 4, Access::BlockAtomic, here));
        assert!(!seen.seen(0x1000, 4, Access::BlockAtomic, there));
        assert!(!seen.seen(0x1000, 8, Access::BlockAtomic, there));
        // Two counters in different slots are both remembered.
        assert!(!seen.seen(0x2004, 4, Access::Atomic, here));
        assert!(seen.seen(0x2004, 4, Access::Atomic, here));
        // An element mapping to the same slot evicts the other, which is then logged again.
        let clash = (0..1 << 20)
            .map(|k| 0x1000 + 4 * k)
            .find(|&a| {
                a != 0x1000 && ((a >> 2) ^ (a >> 8)) % 64 == ((0x1000 >> 2) ^ (0x1000 >> 8)) % 64
            })
            .unwrap();
        assert!(!seen.seen(clash, 8, Access::BlockAtomic, there));
        assert!(!seen.seen(0x1000, 8, Access::BlockAtomic, there));
    }
}
