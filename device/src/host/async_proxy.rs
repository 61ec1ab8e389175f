//! The host's model of a block's mbarriers and of the bulk tensor copies that complete on
//! them: one [`AsyncProxy`] per block, which the executor's services hold (and a thread's own,
//! outside an executor).
//!
//! An mbarrier is a phase counter: a phase completes when every expected arrival has arrived
//! and the transaction count (bytes announced with `expect_tx`, less the bytes the copies
//! completed) is zero; then the next phase begins with the initial arrival count. The model
//! keeps each barrier's state by the address of its 8 bytes, the copies' destination bytes
//! with the phase they complete in, and, per thread and barrier, the phases that thread saw
//! complete (a `try_wait` that returned true). A read through a matrix descriptor of bytes a
//! copy wrote is then checked: the copy's phase must have completed, and the reading thread
//! must have waited for it.

use std::collections::HashMap;

/// One operation of a thread on the async proxy.
///
/// ```
/// use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
/// let mut p = AsyncProxy::default();
/// p.apply(0, AsyncOp::Init { bar: 64, count: 1 }).unwrap();
/// assert_eq!(p.apply(0, AsyncOp::TryWait { bar: 64, parity: 0 }), Ok(0)); // phase 0 runs
/// p.apply(0, AsyncOp::Arrive { bar: 64, tx: 0 }).unwrap();
/// assert_eq!(p.apply(0, AsyncOp::TryWait { bar: 64, parity: 0 }), Ok(1)); // it completed
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncOp {
    /// `mbarrier.init`: the barrier at `bar` expects `count` arrivals per phase.
    Init {
        /// The barrier's address.
        bar: usize,
        /// Arrivals per phase.
        count: u32,
    },
    /// `mbarrier.arrive` (with `expect_tx` of `tx` bytes first when `tx > 0`).
    Arrive {
        /// The barrier's address.
        bar: usize,
        /// Bytes of transactions announced before the arrival.
        tx: u32,
    },
    /// A bulk copy wrote `bytes` bytes at `dst` and completes them on `bar`.
    Copied {
        /// The barrier's address.
        bar: usize,
        /// The first destination byte.
        dst: usize,
        /// Bytes written.
        bytes: usize,
    },
    /// `mbarrier.try_wait.parity`: 1 once the phase of parity `parity` has completed.
    TryWait {
        /// The barrier's address.
        bar: usize,
        /// The parity waited for.
        parity: u32,
    },
    /// A read of `bytes` bytes at `addr`: a tensor-core operand in shared memory, or a plain
    /// read of bytes a bulk copy wrote.
    Read {
        /// The first byte.
        addr: usize,
        /// Bytes read.
        bytes: usize,
    },
    /// A plain write of `bytes` bytes at `addr` of shared memory.
    Write {
        /// The first byte.
        addr: usize,
        /// Bytes written.
        bytes: usize,
    },
}

#[derive(Clone, Copy, Debug)]
struct Barrier {
    count: u32,
    pending: u32,
    tx: i64,
    /// Phases completed so far; the running phase's parity is `phase % 2`.
    phase: u64,
}

#[derive(Clone, Copy, Debug)]
struct Copy {
    bar: usize,
    dst: usize,
    bytes: usize,
    /// The barrier phase the copy completes in.
    phase: u64,
}

/// The mbarriers and bulk copies of one block (see the module's text).
///
/// ```
/// use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
/// let mut p = AsyncProxy::default();
/// p.apply(0, AsyncOp::Init { bar: 8, count: 1 }).unwrap();
/// p.apply(0, AsyncOp::Arrive { bar: 8, tx: 256 }).unwrap();
/// p.apply(0, AsyncOp::Copied { bar: 8, dst: 1024, bytes: 256 }).unwrap();
/// // Thread 1 reads without having waited: reported.
/// assert!(p.apply(1, AsyncOp::Read { addr: 1024, bytes: 16 }).is_err());
/// assert_eq!(p.apply(1, AsyncOp::TryWait { bar: 8, parity: 0 }), Ok(1));
/// assert_eq!(p.apply(1, AsyncOp::Read { addr: 1024, bytes: 16 }), Ok(0));
/// ```
#[derive(Default, Debug)]
pub struct AsyncProxy {
    bars: HashMap<usize, Barrier>,
    copies: Vec<Copy>,
    /// Per (thread, barrier): the phases the thread saw complete.
    seen: HashMap<(usize, usize), u64>,
    /// Bumped by every change of a barrier's state: a round of waiting threads that leaves it
    /// alone cannot make progress.
    progress: u64,
}

impl AsyncProxy {
    /// A counter that changes whenever a barrier's state does.
    ///
    /// ```
    /// use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
    /// let mut p = AsyncProxy::default();
    /// let before = p.progress();
    /// p.apply(0, AsyncOp::Init { bar: 8, count: 2 }).unwrap();
    /// assert_ne!(p.progress(), before);
    /// ```
    pub fn progress(&self) -> u64 {
        self.progress
    }

    /// Whether any bulk copy has written shared memory (a plain access needs checking only
    /// then).
    ///
    /// ```
    /// use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
    /// let mut p = AsyncProxy::default();
    /// assert!(!p.has_copies());
    /// p.apply(0, AsyncOp::Init { bar: 8, count: 1 }).unwrap();
    /// p.apply(0, AsyncOp::Copied { bar: 8, dst: 1024, bytes: 16 }).unwrap();
    /// assert!(p.has_copies());
    /// ```
    pub fn has_copies(&self) -> bool {
        !self.copies.is_empty()
    }

    fn bar(&mut self, bar: usize, what: &str) -> Result<&mut Barrier, String> {
        self.bars.get_mut(&bar).ok_or_else(|| {
            format!("{what} on the mbarrier at {bar:#x}, which was never initialised")
        })
    }

    /// Apply `op` for thread `thread` of the block: the result of a `TryWait` (1 or 0), the
    /// running phase's number after an `Arrive`, else 0; or what was wrong with it.
    ///
    /// # Errors
    /// A barrier used before its initialisation, more arrivals than a phase expects, a copy
    /// over bytes another copy still has in flight, and a read of a copy's bytes before its
    /// phase completed or by a thread that did not wait for that phase.
    ///
    /// ```
    /// use berth_device::host::async_proxy::{AsyncOp, AsyncProxy};
    /// let mut p = AsyncProxy::default();
    /// assert!(p.apply(0, AsyncOp::Arrive { bar: 8, tx: 0 }).unwrap_err().contains("never initialised"));
    /// ```
    pub fn apply(&mut self, thread: usize, op: AsyncOp) -> Result<u64, String> {
        match op {
            AsyncOp::Init { bar, count } => {
                if count == 0 || count >= 1 << 20 {
                    return Err(format!(
                        "mbarrier init with {count} arrivals (1 to 2^20 - 1)"
                    ));
                }
                self.bars.insert(
                    bar,
                    Barrier {
                        count,
                        pending: count,
                        tx: 0,
                        phase: 0,
                    },
                );
                self.copies.retain(|c| c.bar != bar);
                self.seen.retain(|&(_, b), _| b != bar);
                self.progress += 1;
                Ok(0)
            }
            AsyncOp::Arrive { bar, tx } => {
                let b = self.bar(bar, "an arrival")?;
                if b.pending == 0 {
                    return Err(format!(
                        "more arrivals on the mbarrier at {bar:#x} than its phase expects ({})",
                        b.count
                    ));
                }
                b.tx += i64::from(tx);
                b.pending -= 1;
                let phase = b.phase;
                self.complete(bar);
                self.progress += 1;
                Ok(phase)
            }
            AsyncOp::Copied { bar, dst, bytes } => {
                let phase = self.bar(bar, "a bulk copy completing")?.phase;
                if let Some(c) = self.copies.iter().find(|c| {
                    overlaps(c.dst, c.bytes, dst, bytes) && self.bars[&c.bar].phase <= c.phase
                }) {
                    return Err(format!(
                        "a bulk copy writes shared bytes {dst:#x}..{:#x} while an earlier bulk copy to {:#x}..{:#x} is still in flight (its mbarrier phase has not completed)",
                        dst + bytes,
                        c.dst,
                        c.dst + c.bytes
                    ));
                }
                self.copies
                    .retain(|c| !(dst <= c.dst && c.dst + c.bytes <= dst + bytes));
                self.copies.push(Copy {
                    bar,
                    dst,
                    bytes,
                    phase,
                });
                self.bar(bar, "a bulk copy completing")?.tx -= bytes as i64;
                self.complete(bar);
                self.progress += 1;
                Ok(0)
            }
            AsyncOp::TryWait { bar, parity } => {
                let b = *self.bar(bar, "a wait")?;
                if (b.phase % 2) as u32 == parity % 2 {
                    return Ok(0);
                }
                let seen = self.seen.entry((thread, bar)).or_default();
                *seen = (*seen).max(b.phase);
                Ok(1)
            }
            AsyncOp::Read { addr, bytes } => {
                for c in self
                    .copies
                    .iter()
                    .filter(|c| overlaps(c.dst, c.bytes, addr, bytes))
                {
                    if self.bars[&c.bar].phase <= c.phase {
                        return Err(format!(
                            "a tensor-core read of shared bytes {addr:#x}..{:#x} that a bulk copy is still writing: its mbarrier ({:#x}) phase has not completed",
                            addr + bytes,
                            c.bar
                        ));
                    }
                    if self
                        .seen
                        .get(&(thread, c.bar))
                        .is_none_or(|&s| s <= c.phase)
                    {
                        return Err(format!(
                            "a read of shared bytes {addr:#x}..{:#x} by a thread that did not wait on the mbarrier ({:#x}) phase that completes the bulk copy writing them",
                            addr + bytes,
                            c.bar
                        ));
                    }
                }
                Ok(0)
            }
            AsyncOp::Write { addr, bytes } => {
                if let Some(c) = self.copies.iter().find(|c| {
                    overlaps(c.dst, c.bytes, addr, bytes) && self.bars[&c.bar].phase <= c.phase
                }) {
                    return Err(format!(
                        "a write of shared bytes {addr:#x}..{:#x} that a bulk copy is still writing: its mbarrier ({:#x}) phase has not completed",
                        addr + bytes,
                        c.bar
                    ));
                }
                Ok(0)
            }
        }
    }

    /// Complete the running phase of `bar` if it has nothing left to wait for.
    fn complete(&mut self, bar: usize) {
        let b = self.bars.get_mut(&bar).expect("checked by the caller");
        if b.pending == 0 && b.tx == 0 {
            b.phase += 1;
            b.pending = b.count;
        }
    }
}

fn overlaps(a: usize, an: usize, b: usize, bn: usize) -> bool {
    a < b + bn && b < a + an
}
