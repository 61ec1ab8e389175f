//! The simulator's race checks: which accesses of a launch conflict.
//!
//! Two accesses to one element conflict when different threads make them, at least one
//! writes, and they are not both atomic ([`conflicts`]). Between blocks an atomic at block
//! scope (`Scope::Block`, PTX `atom.cta`) counts as no atomic: it conflicts with any access
//! of another block ([`conflicts_across_blocks`]). [`Fold`] keeps, per element, just enough
//! of the accesses seen to find such a pair whatever order they come in.
//!
//! - **Shared memory** is checked as the accesses come ([`Interval`]: a map from address to
//!   fold, cleared at each barrier): tiles are small and read many times, so a log would
//!   mostly hold repeats.
//! - **Global memory** accesses (elements of `&mut [T]` arguments, atomics) are appended to a
//!   log of the block — a push, nothing more. Within a block, accesses conflict only inside
//!   one barrier interval: at each barrier the interval's entries are sorted by address and
//!   each address's accesses folded ([`check_interval`]).
//! - **Across blocks** nothing is ordered (blocks synchronise only through atomics), so any
//!   two conflicting accesses of different blocks race, whenever they happened. When a block
//!   ends its whole log becomes a few [`Run`]s ([`runs`]): maximal stretches of consecutive
//!   elements with the same kinds of access at the same call sites, whose threads advance by
//!   a fixed step — one run per block for an elementwise kernel. When the launch ends the
//!   runs of all blocks are swept in address order ([`cross_block`]).
//! - **Across the parts of one launch** queued as several (the chunks of a pipelined launch,
//!   which run at once on several streams) the same holds: a block of one part and a block of
//!   another are different blocks, whatever their coordinates. Each part keeps the runs of its
//!   accesses to the memory the parts share — everything but its own pieces of the arguments
//!   cut into parts ([`shared_part`]) — and the runs of all parts are swept once more, for
//!   conflicts between parts ([`cross_part`]).
//!
//! Elements are compared by address: accesses of different widths at different addresses
//! (a whole row of a 2D tile against one of its elements) are not compared.

use berth_device::host::{Access, At};
use std::ops::Range;

/// One logged access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) addr: usize,
    pub(crate) at: At,
    /// The thread within its block (linear index).
    pub(crate) thread: u32,
    pub(crate) bytes: u16,
    pub(crate) kind: Access,
}

impl Entry {
    pub(crate) fn new(addr: usize, bytes: usize, kind: Access, thread: usize, at: At) -> Entry {
        Entry {
            addr,
            at,
            thread: thread as u32,
            bytes: bytes.min(u16::MAX as usize) as u16,
            kind,
        }
    }
}

const KINDS: [Access; 4] = [
    Access::Read,
    Access::Write,
    Access::Atomic,
    Access::BlockAtomic,
];

fn slot(k: Access) -> usize {
    match k {
        Access::Read => 0,
        Access::Write => 1,
        Access::Atomic => 2,
        Access::BlockAtomic => 3,
    }
}

/// Whether accesses of kinds `a` and `b` by two different threads of one block race: unless
/// both read, or both are atomic (at any scope: the block is inside every scope).
pub(crate) fn conflicts(a: Access, b: Access) -> bool {
    let atomic = |k| matches!(k, Access::Atomic | Access::BlockAtomic);
    !(a == Access::Read && b == Access::Read || atomic(a) && atomic(b))
}

/// Whether accesses of kinds `a` and `b` by threads of two different blocks race: as within
/// a block ([`conflicts`]), and also when either is an atomic at block scope, which is atomic
/// only with respect to the threads of its own block.
pub(crate) fn conflicts_across_blocks(a: Access, b: Access) -> bool {
    conflicts(a, b) || a == Access::BlockAtomic || b == Access::BlockAtomic
}

/// An access as the fold sees it: who made it (`id`: a thread, or a block), where, and what
/// the caller needs to name it later (`tag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Who {
    pub(crate) id: u64,
    pub(crate) tag: u64,
    pub(crate) at: At,
}

/// The accesses to one element seen so far, as much of them as finding a conflicting pair
/// needs: per kind, up to two accesses with different `id`s. Whatever the order in which
/// accesses arrive, the one that completes a conflicting pair finds its partner: a kept
/// access of the conflicting kind with another id (the kind's slot holds the partner itself,
/// or two accesses with different ids, one of which is not the newcomer's). That holds for
/// any symmetric relation between kinds, so one fold serves both [`conflicts`] (ids are
/// threads of a block) and [`conflicts_across_blocks`] (ids are blocks); each kind the
/// relation tells apart needs its own slot.
#[derive(Default)]
pub(crate) struct Fold {
    seen: [[Option<Who>; 2]; KINDS.len()],
}

impl Fold {
    /// Add an access; an earlier one it races with by `conflicts` (symmetric), if any.
    pub(crate) fn add(
        &mut self,
        kind: Access,
        who: Who,
        conflicts: fn(Access, Access) -> bool,
    ) -> Option<(Access, Who)> {
        for k in KINDS {
            if !conflicts(k, kind) {
                continue;
            }
            if let Some(w) = self.seen[slot(k)].iter().flatten().find(|w| w.id != who.id) {
                return Some((k, *w));
            }
        }
        let s = &mut self.seen[slot(kind)];
        match s {
            [None, _] => s[0] = Some(who),
            [Some(a), None] if a.id != who.id => s[1] = Some(who),
            _ => {}
        }
        None
    }
}

/// Two accesses that race: the one found first (`a`) and the one that completed the pair.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Race {
    pub(crate) addr: usize,
    pub(crate) bytes: usize,
    pub(crate) a: (Access, Who),
    pub(crate) b: (Access, Who),
}

/// A hasher for addresses: one multiply, high bits folded down (the table indexes with the
/// low bits, and element addresses share their low bits).
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// The accesses of one barrier interval, checked as they come: for memory where many threads
/// touch few elements many times (shared tiles), where a log would mostly hold repeats.
#[derive(Default)]
pub(crate) struct Interval {
    seen: std::collections::HashMap<usize, Fold, std::hash::BuildHasherDefault<AddrHasher>>,
}

impl Interval {
    /// Add an access by `thread`; the race it completes, if any.
    pub(crate) fn add(&mut self, e: Entry) -> Option<Race> {
        let who = Who {
            id: u64::from(e.thread),
            tag: u64::from(e.thread),
            at: e.at,
        };
        let a = self
            .seen
            .entry(e.addr)
            .or_default()
            .add(e.kind, who, conflicts)?;
        Some(Race {
            addr: e.addr,
            bytes: usize::from(e.bytes),
            a,
            b: (e.kind, who),
        })
    }

    /// Start the next interval.
    pub(crate) fn clear(&mut self) {
        self.seen.clear();
    }
}

/// Sort `log` (one barrier interval of one block) by address and find a race in it.
/// `Who::id` and `Who::tag` are the thread.
pub(crate) fn check_interval(log: &mut [Entry]) -> Option<Race> {
    log.sort_unstable_by_key(|e| e.addr);
    log.chunk_by(|a, b| a.addr == b.addr).find_map(check_group)
}

/// A race among the accesses to one address.
fn check_group(group: &[Entry]) -> Option<Race> {
    // Most elements are touched by one thread only (a read and a write of its own element).
    if group.iter().all(|e| e.thread == group[0].thread) {
        return None;
    }
    let mut fold = Fold::default();
    for e in group {
        let who = Who {
            id: u64::from(e.thread),
            tag: u64::from(e.thread),
            at: e.at,
        };
        if let Some(a) = fold.add(e.kind, who, conflicts) {
            return Some(Race {
                addr: e.addr,
                bytes: usize::from(e.bytes),
                a,
                b: (e.kind, who),
            });
        }
    }
    None
}

/// Shrink a block's log without losing what the checks need: of the current interval
/// (`log[start..]`), one entry per address, thread and kind (the fold looks no further); of
/// the earlier intervals, which only become runs, one per address and kind. Keeps a thread
/// that loops over the same elements (a persistent kernel) from growing the log without end.
/// Returns the new start of the current interval.
pub(crate) fn compact(log: &mut Vec<Entry>, start: usize) -> usize {
    let key = |e: &Entry| (e.addr, slot(e.kind), e.thread);
    let (done, current) = log.split_at_mut(start);
    done.sort_unstable_by_key(|e| (e.addr, slot(e.kind)));
    current.sort_unstable_by_key(key);
    let mut kept = 0;
    for i in 0..start {
        if kept == 0
            || (log[kept - 1].addr, slot(log[kept - 1].kind)) != (log[i].addr, slot(log[i].kind))
        {
            log[kept] = log[i];
            kept += 1;
        }
    }
    let new_start = kept;
    for i in start..log.len() {
        if kept == new_start || key(&log[kept - 1]) != key(&log[i]) {
            log[kept] = log[i];
            kept += 1;
        }
    }
    log.truncate(kept);
    new_start
}

/// One block's accesses of one kind along a [`Run`]: element `k` of the run was accessed by
/// thread `thread + k * step`, at `at`.
#[derive(Clone, Copy, Debug, Default)]
struct Rep {
    thread: u32,
    step: i32,
    at: Option<At>,
}

/// Consecutive elements that one block accessed with the same kinds, at the same call sites,
/// by threads advancing by a fixed step per element.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    lo: usize,
    bytes: u32,
    count: u32,
    /// The block (linear index).
    block: u64,
    /// The part of a launch queued as several (0 for a launch of one part).
    part: u32,
    /// Bit `slot(kind)` for each kind of access.
    kinds: u8,
    reps: [Rep; KINDS.len()],
}

impl Run {
    fn hi(&self) -> usize {
        self.lo + self.bytes as usize * self.count as usize
    }

    /// The thread (within the block) that made the access of kind `k` to element `e` of the
    /// run, and where.
    fn who(&self, k: Access, e: usize) -> (u32, At) {
        let r = self.reps[slot(k)];
        let t = i64::from(r.thread) + i64::from(r.step) * e as i64;
        (t as u32, r.at.expect("a kind the run has"))
    }

    /// Extend the run by the element at `addr` with these accesses, if it continues it.
    fn extend(&mut self, addr: usize, bytes: u32, kinds: u8, reps: &[Rep; KINDS.len()]) -> bool {
        if addr != self.hi() || bytes != self.bytes || kinds != self.kinds || self.count == u32::MAX
        {
            return false;
        }
        let n = i64::from(self.count);
        let mut steps = [0i32; KINDS.len()];
        for s in 0..KINDS.len() {
            if kinds & (1 << s) == 0 {
                continue;
            }
            let (mine, next) = (self.reps[s], reps[s]);
            // The same call site is the same `Location` static: compare pointers, not text.
            if !same_site(mine.at, next.at) {
                return false;
            }
            let delta = i64::from(next.thread) - i64::from(mine.thread);
            let step = if n == 1 { delta } else { i64::from(mine.step) };
            if step * n != delta || i32::try_from(step).is_err() {
                return false;
            }
            steps[s] = step as i32;
        }
        for (r, s) in self.reps.iter_mut().zip(steps) {
            r.step = s;
        }
        self.count += 1;
        true
    }

    /// Elements `from..to` of the run.
    fn sub(&self, from: u32, to: u32) -> Run {
        let mut r = *self;
        r.lo = self.lo + from as usize * self.bytes as usize;
        r.count = to - from;
        for rep in &mut r.reps {
            rep.thread = (i64::from(rep.thread) + i64::from(rep.step) * i64::from(from)) as u32;
        }
        r
    }

    /// The elements whose first byte lies in `range`, as `first..last` (empty when none).
    fn within(&self, range: &Range<usize>) -> (u32, u32) {
        let bytes = self.bytes.max(1) as usize;
        let index = |a: usize| {
            if a <= self.lo {
                0
            } else {
                (a - self.lo).div_ceil(bytes).min(self.count as usize) as u32
            }
        };
        (index(range.start), index(range.end))
    }

    /// What the run is to a sweep that tells its accesses apart by part only: where, and which
    /// kinds at which call sites.
    fn shape(&self) -> (usize, u32, u32, u8, [usize; KINDS.len()]) {
        let site = |r: &Rep| r.at.map_or(0, |l| std::ptr::from_ref(l) as usize);
        (
            self.lo,
            self.bytes,
            self.count,
            self.kinds,
            self.reps.each_ref().map(site),
        )
    }
}

fn same_site(a: Option<At>, b: Option<At>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// Turn one block's whole log (every interval) into runs, appended to `out`. With
/// `one_interval` (the block met no barrier), also check it as [`check_interval`] would, in
/// the same pass; the race found, if any.
pub(crate) fn runs(
    log: &mut [Entry],
    block: u64,
    one_interval: bool,
    out: &mut Vec<Run>,
) -> Option<Race> {
    log.sort_unstable_by_key(|e| e.addr);
    let mut current: Option<Run> = None;
    for group in log.chunk_by(|a, b| a.addr == b.addr) {
        if one_interval
            && group.len() > 1
            && let Some(race) = check_group(group)
        {
            return Some(race);
        }
        let (addr, bytes) = (group[0].addr, u32::from(group[0].bytes));
        let mut kinds = 0u8;
        let mut reps = [Rep::default(); KINDS.len()];
        for e in group {
            let s = slot(e.kind);
            if kinds & (1 << s) == 0 {
                kinds |= 1 << s;
                reps[s] = Rep {
                    thread: e.thread,
                    step: 0,
                    at: Some(e.at),
                };
            }
        }
        if let Some(r) = current.as_mut()
            && r.extend(addr, bytes, kinds, &reps)
        {
            continue;
        }
        out.extend(current.take());
        current = Some(Run {
            lo: addr,
            bytes,
            count: 1,
            block,
            part: 0,
            kinds,
            reps,
        });
    }
    out.extend(current);
    None
}

/// A race between two blocks: the element, and for each side the block, the thread within
/// it, the kind of access and the call site.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CrossRace {
    pub(crate) addr: usize,
    pub(crate) bytes: usize,
    pub(crate) a: Side,
    pub(crate) b: Side,
}

/// One side of a [`CrossRace`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Side {
    /// The part of a launch queued as several (0 for a launch of one part).
    pub(crate) part: u32,
    pub(crate) block: u64,
    pub(crate) thread: u32,
    pub(crate) kind: Access,
    pub(crate) at: At,
}

/// Find two blocks whose runs overlap with conflicting accesses ([`conflicts_across_blocks`]).
pub(crate) fn cross_block(runs: &mut [Run]) -> Option<CrossRace> {
    sweep(runs, |r| r.block)
}

/// Find two parts of a launch queued as several whose runs overlap with conflicting accesses:
/// as [`cross_block`], but blocks of different parts are told apart by their part, whatever
/// their coordinates. Two blocks of one part are not compared (the part's own launch did).
pub(crate) fn cross_part(runs: &mut [Run]) -> Option<CrossRace> {
    sweep(runs, |r| u64::from(r.part))
}

/// Find two runs of different `id`s that overlap with conflicting accesses
/// ([`conflicts_across_blocks`]). The sweep visits each stretch of addresses between two run
/// boundaries once, folding the runs that cover it.
fn sweep(runs: &mut [Run], id: fn(&Run) -> u64) -> Option<CrossRace> {
    if runs.len() < 2 {
        return None;
    }
    runs.sort_unstable_by_key(|r| r.lo);
    let mut points: Vec<usize> = runs.iter().flat_map(|r| [r.lo, r.hi()]).collect();
    points.sort_unstable();
    points.dedup();
    let mut active: Vec<usize> = Vec::new();
    let mut next = 0;
    for &p in &points {
        active.retain(|&i| runs[i].hi() > p);
        while next < runs.len() && runs[next].lo == p {
            active.push(next);
            next += 1;
        }
        if active.len() < 2 || active.iter().all(|&i| id(&runs[i]) == id(&runs[active[0]])) {
            continue;
        }
        let mut fold = Fold::default();
        for &i in &active {
            let r = &runs[i];
            for k in KINDS.into_iter().filter(|&k| r.kinds & (1 << slot(k)) != 0) {
                let (_, at) = r.who(k, 0);
                let who = Who {
                    id: id(r),
                    tag: i as u64,
                    at,
                };
                if let Some((ka, wa)) = fold.add(k, who, conflicts_across_blocks) {
                    return Some(side_by_side(runs, p, (ka, wa.tag as usize), (k, i)));
                }
            }
        }
    }
    None
}

/// Keep of one part's runs what the sweep between parts needs, tagged with the part: the
/// accesses outside the part's own pieces of memory (`own`, byte ranges: its pieces of the
/// arguments cut into parts, which no other part reaches), one run per shape — the part's
/// blocks were checked against each other already, so runs that differ only in block and
/// threads (every block updating the same counters) add nothing.
pub(crate) fn shared_part(runs: &mut Vec<Run>, part: u32, own: &[Range<usize>]) {
    for range in own {
        let mut kept = Vec::with_capacity(runs.len());
        for r in runs.drain(..) {
            let (first, last) = r.within(range);
            if first >= last {
                kept.push(r);
                continue;
            }
            if first > 0 {
                kept.push(r.sub(0, first));
            }
            if last < r.count {
                kept.push(r.sub(last, r.count));
            }
        }
        *runs = kept;
    }
    runs.sort_unstable_by_key(Run::shape);
    runs.dedup_by_key(|r| r.shape());
    for r in runs.iter_mut() {
        r.part = part;
    }
}

/// Name both sides of a race found at byte `p`.
fn side_by_side(runs: &[Run], p: usize, a: (Access, usize), b: (Access, usize)) -> CrossRace {
    let side = |(kind, i): (Access, usize)| {
        let r = &runs[i];
        let e = (p - r.lo) / r.bytes.max(1) as usize;
        let (thread, at) = r.who(kind, e);
        (
            Side {
                part: r.part,
                block: r.block,
                thread,
                kind,
                at,
            },
            r.lo + e * r.bytes as usize,
            r.bytes as usize,
        )
    };
    let (sa, _, _) = side(a);
    let (sb, addr, bytes) = side(b);
    CrossRace {
        addr,
        bytes,
        a: sa,
        b: sb,
    }
}

#[cfg(test)]
mod tests {
    // The tests hand lists of byte ranges to the checks, some of them lists of one range.
    #![allow(clippy::single_range_in_vec_init)]
    use super::*;
    use std::panic::Location;

    #[track_caller]
    fn here() -> At {
        Location::caller()
    }

    fn e(addr: usize, thread: u32, kind: Access, at: At) -> Entry {
        Entry::new(addr, 4, kind, thread as usize, at)
    }

    #[test]
    fn the_fold_finds_a_pair_whatever_the_order() {
        use Access::*;
        let at = here();
        // Thread 1 reads, thread 2 reads, thread 1 writes: 1's write races 2's read.
        let mut log = [e(0, 1, Read, at), e(0, 2, Read, at), e(0, 1, Write, at)];
        for _ in 0..3 {
            log.rotate_left(1);
            assert!(check_interval(&mut log.clone()).is_some());
        }
        // Reads only, atomics only, or one thread alone: no race.
        assert!(check_interval(&mut [e(0, 1, Read, at), e(0, 2, Read, at)]).is_none());
        assert!(check_interval(&mut [e(0, 1, Atomic, at), e(0, 2, Atomic, at)]).is_none());
        assert!(check_interval(&mut [e(0, 3, Write, at), e(0, 3, Read, at)]).is_none());
        // Different elements: no race.
        assert!(check_interval(&mut [e(0, 1, Write, at), e(4, 2, Write, at)]).is_none());
        // An atomic and a plain read by another thread race.
        let r = check_interval(&mut [e(8, 1, Atomic, at), e(8, 2, Read, at)]).unwrap();
        assert_eq!(r.addr, 8);
        let ids = [r.a.1.id, r.b.1.id];
        assert!(ids.contains(&1) && ids.contains(&2));
    }

    #[test]
    fn an_interval_checks_accesses_as_they_come() {
        use Access::*;
        let at = here();
        let mut i = Interval::default();
        assert!(i.add(e(0, 1, Read, at)).is_none());
        assert!(i.add(e(0, 2, Read, at)).is_none());
        let r = i
            .add(e(0, 1, Write, at))
            .expect("thread 2 read what thread 1 writes");
        assert_eq!((r.a.1.id, r.b.1.id), (2, 1));
        i.clear();
        assert!(i.add(e(0, 1, Write, at)).is_none(), "a new interval");
    }

    #[test]
    fn compacting_keeps_every_race_and_every_run() {
        use Access::*;
        let (a, b) = (here(), here());
        // An earlier interval: thread 1 wrote element 0 a thousand times; the current one:
        // threads 2 and 3 read and write element 4 many times.
        let mut log: Vec<Entry> = (0..1000).map(|_| e(0, 1, Write, a)).collect();
        let start = log.len();
        for _ in 0..500 {
            log.extend([e(4, 2, Read, b), e(4, 3, Write, b)]);
        }
        let start = compact(&mut log, start);
        assert_eq!((start, log.len()), (1, 3));
        assert!(check_interval(&mut log[start..]).is_some());
        let mut out = Vec::new();
        runs(&mut log, 0, false, &mut out);
        assert_eq!(out.len(), 2, "elements 0 and 4");
    }

    #[test]
    fn an_elementwise_block_is_one_run_and_blocks_side_by_side_do_not_race() {
        use Access::*;
        let (r, w) = (here(), here());
        let mut all = Vec::new();
        for b in 0..4u64 {
            let mut log: Vec<Entry> = (0..256u32)
                .flat_map(|t| {
                    let a = (b as usize * 256 + t as usize) * 4;
                    [e(a, t, Read, r), e(a, t, Write, w)]
                })
                .collect();
            let before = all.len();
            runs(&mut log, b, false, &mut all);
            assert_eq!(all.len(), before + 1, "one run per block");
        }
        assert!(cross_block(&mut all).is_none());
    }

    #[test]
    fn blocks_writing_one_element_race_and_are_named() {
        use Access::*;
        let w = here();
        let mut all = Vec::new();
        // Block 0: threads 0..8 write elements 0..8; block 1: threads 0..8 write 5..13.
        runs(
            &mut (0..8)
                .map(|t| e(t as usize * 4, t, Write, w))
                .collect::<Vec<_>>(),
            0,
            false,
            &mut all,
        );
        runs(
            &mut (0..8)
                .map(|t| e((t as usize + 5) * 4, t, Write, w))
                .collect::<Vec<_>>(),
            1,
            false,
            &mut all,
        );
        let race = cross_block(&mut all).unwrap();
        assert_eq!(race.addr, 20, "element 5 is the first both touch");
        let (a, b) = if race.a.block == 0 {
            (race.a, race.b)
        } else {
            (race.b, race.a)
        };
        assert_eq!((a.block, a.thread, b.block, b.thread), (0, 5, 1, 0));
    }

    #[test]
    fn atomics_from_every_block_do_not_race_but_a_plain_read_does() {
        use Access::*;
        let (at, rd) = (here(), here());
        let mut all = Vec::new();
        for b in 0..50 {
            // Every thread of every block adds to one of 4 bins.
            let mut log: Vec<Entry> = (0..64)
                .map(|t| e((t % 4) as usize * 4, t, Atomic, at))
                .collect();
            runs(&mut log, b, false, &mut all);
        }
        assert!(cross_block(&mut all.clone()).is_none());
        runs(&mut [e(8, 7, Read, rd)], 99, false, &mut all);
        let race = cross_block(&mut all).unwrap();
        assert_eq!(race.addr, 8);
        let reader = if race.a.kind == Read { race.a } else { race.b };
        assert_eq!((reader.block, reader.thread, reader.at), (99, 7, rd));
    }

    /// Every sequence of up to four accesses (of every kind, by three threads or blocks):
    /// the fold finds a race exactly when some two of them conflict, and the pair it names
    /// does, whatever the order.
    #[test]
    fn the_fold_finds_a_pair_under_either_relation_for_every_sequence() {
        let at = here();
        let accesses: Vec<(Access, u64)> = KINDS
            .into_iter()
            .flat_map(|k| (0..3).map(move |id| (k, id)))
            .collect();
        let n = accesses.len();
        for rule in [conflicts, conflicts_across_blocks] {
            for len in 1..=4u32 {
                for code in 0..n.pow(len) {
                    let seq: Vec<(Access, u64)> =
                        (0..len).map(|d| accesses[code / n.pow(d) % n]).collect();
                    let expected = seq
                        .iter()
                        .enumerate()
                        .any(|(i, a)| seq[i + 1..].iter().any(|b| a.1 != b.1 && rule(a.0, b.0)));
                    let mut fold = Fold::default();
                    let found = seq.iter().find_map(|&(k, id)| {
                        let who = Who { id, tag: id, at };
                        fold.add(k, who, rule).map(|(ka, wa)| (ka, wa.id, k, id))
                    });
                    assert_eq!(found.is_some(), expected, "{seq:?}");
                    if let Some((ka, ia, kb, ib)) = found {
                        assert!(ia != ib && rule(ka, kb), "{seq:?}");
                        assert!(seq.contains(&(ka, ia)), "{seq:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn within_a_block_a_block_scoped_atomic_is_an_atomic() {
        use Access::*;
        let at = here();
        for (a, b) in [(BlockAtomic, BlockAtomic), (BlockAtomic, Atomic)] {
            assert!(check_interval(&mut [e(0, 1, a, at), e(0, 2, b, at)]).is_none());
            assert!(check_interval(&mut [e(0, 1, b, at), e(0, 2, a, at)]).is_none());
        }
        for plain in [Read, Write] {
            for log in [
                [e(0, 1, BlockAtomic, at), e(0, 2, plain, at)],
                [e(0, 2, plain, at), e(0, 1, BlockAtomic, at)],
            ] {
                let r = check_interval(&mut log.clone()).expect("a plain access and an atomic");
                let kinds = [r.a.0, r.b.0];
                assert!(kinds.contains(&BlockAtomic) && kinds.contains(&plain));
            }
        }
        // Shared memory's interval check, too.
        let mut i = Interval::default();
        assert!(i.add(e(0, 1, BlockAtomic, at)).is_none());
        assert!(i.add(e(0, 2, Atomic, at)).is_none());
        assert!(i.add(e(0, 3, Write, at)).is_some());
    }

    /// Block `b`'s threads `0..threads` each make an access of `kind` to element `elem(b)`.
    fn block_log(
        b: u64,
        threads: u32,
        kind: Access,
        at: At,
        elem: impl Fn(u64) -> usize,
        out: &mut Vec<Run>,
    ) -> Option<Race> {
        let mut log: Vec<Entry> = (0..threads).map(|t| e(elem(b) * 4, t, kind, at)).collect();
        runs(&mut log, b, false, out)
    }

    #[test]
    fn blocks_updating_one_element_at_block_scope_race() {
        use Access::*;
        let at = here();
        let mut all = Vec::new();
        for b in 0..4 {
            assert!(block_log(b, 32, BlockAtomic, at, |_| 0, &mut all).is_none());
        }
        let race = cross_block(&mut all).expect("four blocks on element 0 at block scope");
        assert_eq!(
            (race.addr, race.a.kind, race.b.kind),
            (0, BlockAtomic, BlockAtomic)
        );
        assert_ne!(race.a.block, race.b.block);
        // Each block on its own element: no race.
        let mut all = Vec::new();
        for b in 0..4 {
            block_log(b, 32, BlockAtomic, at, |b| b as usize, &mut all);
        }
        assert!(cross_block(&mut all).is_none());
        // All of them at device scope on element 0: no race.
        let mut all = Vec::new();
        for b in 0..4 {
            block_log(b, 32, Atomic, at, |_| 0, &mut all);
        }
        assert!(cross_block(&mut all).is_none());
    }

    #[test]
    fn a_block_scoped_atomic_races_with_any_access_of_another_block_in_either_order() {
        use Access::*;
        let (blk, other) = (here(), here());
        for kind in KINDS {
            for block_scoped_first in [true, false] {
                // Block 0 updates element 2 at block scope and at device scope (within the
                // block no race); block 1 makes an access of `kind` to it. The block that
                // comes first in the sweep also touches element 1, so its run starts lower.
                let (from0, from1) = if block_scoped_first { (1, 2) } else { (2, 1) };
                let mut all = Vec::new();
                let mut log: Vec<Entry> = (from0..=2)
                    .flat_map(|x| [e(x * 4, 0, BlockAtomic, blk), e(x * 4, 1, Atomic, other)])
                    .collect();
                assert!(runs(&mut log, 0, true, &mut all).is_none());
                let mut log: Vec<Entry> = (from1..=2).map(|x| e(x * 4, 5, kind, other)).collect();
                runs(&mut log, 1, true, &mut all);
                let race = cross_block(&mut all).unwrap_or_else(|| panic!("{kind:?}"));
                let (mine, theirs) = if race.a.block == 0 {
                    (race.a, race.b)
                } else {
                    (race.b, race.a)
                };
                assert_eq!(race.addr, 8);
                assert_eq!((theirs.block, theirs.thread, theirs.kind), (1, 5, kind));
                assert_eq!(mine.block, 0);
                assert!(
                    conflicts_across_blocks(mine.kind, kind),
                    "{kind:?}: {mine:?}"
                );
                if kind == Atomic {
                    assert_eq!((mine.thread, mine.kind, mine.at), (0, BlockAtomic, blk));
                }
                // The block that came second in the sweep completed the pair.
                assert_eq!(race.b.block, u64::from(block_scoped_first));
            }
        }
    }

    /// Block `b` of part `part`: threads `0..n` write elements `lo..lo + n` (thread `t`
    /// element `lo + t`) and update `counter` with `kind`; the part's runs as the sweep
    /// between parts gets them, without the elements at `own`.
    fn part_log(
        part: u32,
        blocks: u64,
        (lo, n): (usize, u32),
        (counter, kind): (usize, Access),
        own: &[Range<usize>],
        (w, c): (At, At),
    ) -> Vec<Run> {
        let mut out = Vec::new();
        for b in 0..blocks {
            let mut log: Vec<Entry> = (0..n)
                .flat_map(|t| {
                    let mine = (lo + b as usize * n as usize + t as usize) * 4;
                    [e(mine, t, Access::Write, w), e(counter * 4, t, kind, c)]
                })
                .collect();
            assert!(runs(&mut log, b, true, &mut out).is_none());
        }
        assert!(cross_block(&mut out).is_none() || kind == Access::BlockAtomic);
        shared_part(&mut out, part, own);
        out
    }

    #[test]
    fn a_parts_own_pieces_are_cut_out_and_its_repeats_kept_once() {
        use Access::*;
        let (w, c) = (here(), here());
        // Element 1000 is a counter every block updates; each block writes 8 elements of a
        // piece 0..64 that is the part's own, and the run of block 0 reaches past it (elements
        // 60..70 by threads 0..10, with the piece ending at element 64).
        let own = std::slice::from_ref(&(0..64 * 4));
        let mut all = part_log(0, 4, (0, 8), (1000, Atomic), own, (w, c));
        assert_eq!(
            all.len(),
            1,
            "the counter, once for the four blocks: {all:?}"
        );
        let mut log: Vec<Entry> = (0..10)
            .map(|t| e((60 + t) * 4, t as u32, Write, w))
            .collect();
        let mut straddling = Vec::new();
        runs(&mut log, 0, true, &mut straddling);
        shared_part(&mut straddling, 1, own);
        assert_eq!(straddling.len(), 1);
        let r = straddling[0];
        assert_eq!((r.lo, r.count, r.part), (64 * 4, 6, 1), "elements 64..70");
        assert_eq!(r.who(Write, 0).0, 4, "element 64 was thread 4's");
        // A piece in the middle of a run leaves both ends.
        let mut log: Vec<Entry> = (0..10).map(|t| e(t * 4, t as u32, Write, w)).collect();
        let mut cut = Vec::new();
        runs(&mut log, 0, true, &mut cut);
        shared_part(&mut cut, 0, std::slice::from_ref(&(3 * 4..5 * 4)));
        let pieces: Vec<(usize, u32, u32)> = cut
            .iter()
            .map(|r| (r.lo / 4, r.count, r.who(Write, 0).0))
            .collect();
        assert_eq!(pieces, [(0, 3, 0), (5, 5, 5)]);
        all.append(&mut straddling);
        assert!(cross_part(&mut all).is_none(), "different elements");
    }

    #[test]
    fn parts_sharing_an_element_race_unless_both_are_atomics_at_device_scope() {
        use Access::*;
        let (w, c) = (here(), here());
        let piece = |p: usize| std::iter::once(p * 32 * 4..(p + 1) * 32 * 4).collect::<Vec<_>>();
        // Each part writes its own piece and updates element 1000: at device scope, no race.
        let mut all: Vec<Run> = (0..3)
            .flat_map(|p| part_log(p as u32, 2, (p * 32, 16), (1000, Atomic), &piece(p), (w, c)))
            .collect();
        assert!(cross_part(&mut all).is_none());
        // Part 3's block 0 updates its block's slot (element 2000 + block) at block scope, as
        // does part 1: within each part no two blocks meet, between them block 0 and block 0
        // do.
        let slot = |p: u32, own: &[Range<usize>]| {
            let mut out = Vec::new();
            for b in 0..2u64 {
                runs(
                    &mut [e((2000 + b as usize) * 4, 0, BlockAtomic, c)],
                    b,
                    true,
                    &mut out,
                );
            }
            assert!(cross_block(&mut out).is_none());
            shared_part(&mut out, p, own);
            out
        };
        let mut one = slot(1, &piece(1));
        assert!(cross_part(&mut one.clone()).is_none(), "one part alone");
        all.append(&mut one);
        all.append(&mut slot(3, &piece(3)));
        let race = cross_part(&mut all).expect("two parts on one slot at block scope");
        assert_eq!(
            (race.addr, race.a.kind, race.b.kind),
            (2000 * 4, BlockAtomic, BlockAtomic)
        );
        let mut parts = [race.a.part, race.b.part];
        parts.sort_unstable();
        assert_eq!(parts, [1, 3]);
        assert_eq!((race.a.block, race.b.block), (0, 0));
        // A plain write by one part and a device-scope atomic by another race too.
        let mut all = part_log(0, 1, (0, 4), (1000, Atomic), &[], (w, c));
        all.extend(part_log(1, 1, (1000, 1), (2000, Atomic), &[], (w, c)));
        let race = cross_part(&mut all).expect("a write and an atomic");
        assert_eq!(race.addr, 1000 * 4);
        let kinds = [race.a.kind, race.b.kind];
        assert!(
            kinds.contains(&Write) && kinds.contains(&Atomic),
            "{race:?}"
        );
    }
}
