//! One simulated block's asynchronous copies (`berth::async_copy`, PTX `cp.async`) that are
//! not yet visible to every thread, and the check that no access reaches their bytes too
//! early.
//!
//! The device API performs a copy when it is issued; what the GPU leaves undefined is when
//! the bytes arrive. So each copy is recorded as in flight until its thread waits for its
//! group, then as visible to that thread alone until the next barrier, then forgotten. An
//! access to bytes of a record that does not let the accessing thread see them is a misuse.
//! A copy is at most 16 bytes and aligned to its size, so it lies in one 16-byte chunk of
//! shared memory: records are kept by chunk, and an access looks at the chunks it covers.

use crate::backend::sim::check::AddrHasher;
use berth_device::host::{Access, At};
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

/// The group of a copy not yet committed.
const OPEN: u64 = u64::MAX;

/// One copy not yet visible to the whole block.
#[derive(Clone, Copy, Debug)]
struct Record {
    addr: usize,
    bytes: usize,
    thread: usize,
    /// The thread's group number ([`OPEN`] until committed).
    group: u64,
    /// Whether its thread has waited for its group.
    waited: bool,
    at: At,
}

/// A thread's groups of copies.
#[derive(Default)]
struct Groups {
    /// Groups committed so far (the next group's number).
    committed: u64,
    /// Chunks of the copies started since the last commit.
    open: Vec<usize>,
    /// Committed groups not yet waited for, oldest first: number and chunks.
    pending: VecDeque<(u64, Vec<usize>)>,
}

/// An access that reached bytes of an asynchronous copy too early.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Misuse {
    /// The access: address, size, kind, thread and site.
    pub(crate) addr: usize,
    pub(crate) bytes: usize,
    pub(crate) kind: Access,
    pub(crate) thread: usize,
    pub(crate) at: At,
    /// The copy: its thread and site, and whether that thread had waited for it.
    pub(crate) copier: usize,
    pub(crate) copied_at: At,
    pub(crate) waited: bool,
}

/// A block's asynchronous copies that not every thread may see yet.
#[derive(Default)]
pub(crate) struct AsyncCopies {
    chunks: HashMap<usize, Vec<Record>, BuildHasherDefault<AddrHasher>>,
    threads: HashMap<usize, Groups>,
    /// Chunks holding records their thread has waited for: forgotten at the next barrier.
    waited: Vec<usize>,
}

fn chunk(addr: usize) -> usize {
    addr & !15
}

impl AsyncCopies {
    /// Whether no copy is recorded (the common case: nothing to check).
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// An access by `thread` of `bytes` at `addr`: the misuse it makes, if any.
    pub(crate) fn check(
        &self,
        addr: usize,
        bytes: usize,
        kind: Access,
        thread: usize,
        at: At,
    ) -> Option<Misuse> {
        let end = addr + bytes.max(1);
        (chunk(addr)..end).step_by(16).find_map(|c| {
            let r = self.chunks.get(&c)?.iter().find(|r| {
                r.addr < end && addr < r.addr + r.bytes && !(r.waited && r.thread == thread)
            })?;
            Some(Misuse {
                addr,
                bytes,
                kind,
                thread,
                at,
                copier: r.thread,
                copied_at: r.at,
                waited: r.waited,
            })
        })
    }

    /// A copy by `thread` of `bytes` to `addr`, at `at` (checked with [`check`](Self::check)
    /// first, as a write).
    pub(crate) fn issue(&mut self, addr: usize, bytes: usize, thread: usize, at: At) {
        let c = chunk(addr);
        self.chunks.entry(c).or_default().push(Record {
            addr,
            bytes,
            thread,
            group: OPEN,
            waited: false,
            at,
        });
        self.threads.entry(thread).or_default().open.push(c);
    }

    /// `thread` closes its open copies into a group.
    pub(crate) fn commit(&mut self, thread: usize) {
        let g = self.threads.entry(thread).or_default();
        let (n, chunks) = (g.committed, std::mem::take(&mut g.open));
        g.committed += 1;
        for c in &chunks {
            for r in self.chunks.get_mut(c).into_iter().flatten() {
                if r.thread == thread && r.group == OPEN {
                    r.group = n;
                }
            }
        }
        g.pending.push_back((n, chunks));
    }

    /// `thread` waits until at most `pending` of its groups are in flight.
    pub(crate) fn wait(&mut self, thread: usize, pending: usize) {
        let Some(g) = self.threads.get_mut(&thread) else {
            return;
        };
        while g.pending.len() > pending {
            let Some((n, chunks)) = g.pending.pop_front() else {
                break;
            };
            for c in chunks {
                for r in self.chunks.get_mut(&c).into_iter().flatten() {
                    if r.thread == thread && r.group == n {
                        r.waited = true;
                    }
                }
                self.waited.push(c);
            }
        }
    }

    /// A barrier: every copy waited for before it is now visible to the whole block.
    pub(crate) fn barrier(&mut self) {
        for c in self.waited.drain(..) {
            if let Some(rs) = self.chunks.get_mut(&c) {
                rs.retain(|r| !r.waited);
                if rs.is_empty() {
                    self.chunks.remove(&c);
                }
            }
        }
    }

    /// A copy whose thread never waited for it: (thread, site).
    pub(crate) fn never_waited(&self) -> Option<(usize, At)> {
        self.chunks
            .values()
            .flatten()
            .find(|r| !r.waited)
            .map(|r| (r.thread, r.at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;

    #[test]
    fn a_copy_is_hidden_until_the_wait_and_from_others_until_a_barrier() {
        let (copy, read) = (Location::caller(), Location::caller());
        let mut c = AsyncCopies::default();
        c.issue(0x1010, 16, 3, copy);
        // Any byte of it, by anyone, before the wait.
        let m = c
            .check(0x1014, 2, Access::Read, 3, read)
            .expect("in flight");
        assert!(!m.waited && m.copier == 3);
        assert!(c.check(0x1000, 16, Access::Read, 1, read).is_none());
        assert!(c.check(0x101e, 4, Access::Write, 1, read).is_some());
        // Not committed: a wait does not complete it.
        c.wait(3, 0);
        assert!(c.check(0x1010, 2, Access::Read, 3, read).is_some());
        c.commit(3);
        c.wait(3, 0);
        assert!(c.check(0x1010, 2, Access::Read, 3, read).is_none());
        let m = c
            .check(0x1010, 2, Access::Read, 4, read)
            .expect("no barrier yet");
        assert!(m.waited);
        c.barrier();
        assert!(c.is_empty() && c.never_waited().is_none());
    }

    #[test]
    fn wait_group_n_leaves_the_n_most_recent_groups_in_flight() {
        let at = Location::caller();
        let mut c = AsyncCopies::default();
        for (k, addr) in [0x100, 0x110, 0x120].into_iter().enumerate() {
            c.issue(addr, 8, 0, at);
            c.issue(addr + 8, 8, 0, at);
            c.commit(0);
            assert_eq!(c.threads[&0].committed, k as u64 + 1);
        }
        c.wait(0, 1);
        assert!(c.check(0x100, 16, Access::Read, 0, at).is_none());
        assert!(c.check(0x118, 4, Access::Read, 0, at).is_none());
        assert!(c.check(0x120, 4, Access::Read, 0, at).is_some());
        // A barrier forgets the waited ones only.
        c.barrier();
        assert!(c.check(0x100, 16, Access::Read, 5, at).is_none());
        assert!(c.check(0x128, 8, Access::Read, 5, at).is_some());
        assert_eq!(c.never_waited().map(|w| w.0), Some(0));
        c.wait(0, 0);
        c.barrier();
        assert!(c.is_empty());
    }
}
