//! The miss logs: the places the gathers log the rows they miss into, each granted a slot the
//! capture after the gather copies the row into, and what a ranking reads of them.

use super::lists::{PINNED_LIST_MAX, Staged};
use crate::buffer::DeviceBuffer;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::own_kernels::NOT_RESIDENT;
use crate::queue::Queue;

/// One miss log: the rows the gathers logged into it as missed, the slots granted to its
/// places, and whether every gather that logged into it had its capture queued.
///
/// Its places are numbered from 0: the gathers take them from `start` on, up to the last one
/// granted. With room for captures, its buffers hold twice the places a log has at most
/// ([`HotTier::log_places`](super::HotTier::log_places)), and a refresh settles the places taken and grants new ones after
/// those not taken, which keep their slots (all of them moved to place 0 where the buffers
/// have no room after them), so that it reads and writes about as many places as the gathers
/// took, not the whole log. Without, a refresh grants every place again from 0.
pub(super) struct MissLog {
    /// The number of places taken (one counter; none for a log of length 0), and the value
    /// to reset it to.
    pub(super) n: Staged<u64>,
    /// The rows logged, each at the place it claimed.
    pub(super) log: DeviceBuffer<u32>,
    /// The slots granted to its places, on the device (for the captures).
    pub(super) grant: Staged,
    /// The same, on the host, from place 0 (those before `start` are settled).
    pub(super) granted: Vec<u32>,
    /// The rows those slots hold, each evicted by the capture that takes its place, on the
    /// device (for the captures; none sent where every slot granted was free).
    pub(super) evict: Staged,
    /// The same, on the host: one per place, [`NOT_RESIDENT`] for a free slot, or empty
    /// where every slot granted was free.
    pub(super) evicts: Vec<u32>,
    /// The first place the gathers may take.
    pub(super) start: usize,
    /// Whether every gather that may have logged rows into it had its capture queued; if not,
    /// the refresh that settles it copies its rows from the table.
    pub(super) captured: bool,
}

/// What a ranking read from one miss log.
pub(super) struct Logged {
    /// The rows logged (distinct, not resident when logged), in the order of their places.
    pub(super) ids: Vec<u32>,
    /// The slots granted to those places.
    pub(super) granted: Vec<u32>,
    /// The rows those slots held when granted, one per place ([`NOT_RESIDENT`] for a free
    /// slot; empty where every slot was free).
    pub(super) evicts: Vec<u32>,
    /// Whether every row logged was copied into its slot by a capture.
    pub(super) captured: bool,
    /// The places no gather took.
    pub(super) untaken: Untaken,
}

/// The places of a log that no gather took, once a ranking has read it.
pub(super) enum Untaken {
    /// Kept by the log, this many, for the gathers after the refresh.
    Kept(usize),
    /// Let go: their slots, and the rows those hold (as [`Logged::granted`] and
    /// [`Logged::evicts`]).
    LetGo(Vec<u32>, Vec<u32>),
}

/// How a refresh grants a log's places: the place the gathers take first, and the lists
/// written into the log's, each from a place (the host's list cut there first).
pub(super) struct Regrant {
    pub(super) start: usize,
    /// The slots: of the places added after those the log keeps, or, where its buffers have
    /// no room after them, of every place from 0.
    pub(super) grant: (usize, Vec<u32>),
    /// The rows those slots hold, as [`MissLog::evicts`] has them (an empty list writes
    /// nothing).
    pub(super) evict: (usize, Vec<u32>),
}

impl Regrant {
    /// Places from 0, the slots `granted` holding the rows `evicts` (empty where every slot
    /// is free).
    pub(super) fn fresh(granted: Vec<u32>, evicts: Vec<u32>) -> Regrant {
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
    pub(super) fn new(gpu: &Gpu, places: usize) -> Result<MissLog> {
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
    pub(super) fn limit(&self) -> usize {
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
    pub(super) fn read(&self, keep: bool) -> Result<Logged> {
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
    pub(super) fn regrant(&self, end: usize, granted: Vec<u32>, evicts: Vec<u32>) -> Regrant {
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
    pub(super) fn install(
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
    pub(super) fn regranted(&mut self, regrant: Regrant) -> [Vec<u32>; 2] {
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
