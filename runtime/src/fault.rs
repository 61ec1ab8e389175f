//! The fault state both backends share: whether a context was lost and why, which kernels are
//! in flight on which stream, the handles outside the context on memory a reset would free, and
//! the sections of driver calls a reset waits for. The driver's own side (its sticky errors,
//! the mapped panic record, the registry of contexts by device and the reset) is in
//! `backend/driver/fault.rs`.

use crate::backend::ids::StreamId;
use crate::error::{Error, Result};
use crate::launch::Kernel;
use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Whether the context was lost, why, which kernels were in flight on which stream, and what a
/// reset would have to wait for or would free under a live handle.
#[derive(Default)]
pub(crate) struct FaultState {
    lost: Mutex<Option<String>>,
    lost_flag: std::sync::atomic::AtomicBool,
    /// By stream: a short list scanned without hashing on every launch.
    in_flight: Mutex<Vec<(StreamId, Vec<&'static Kernel>)>>,
    /// Live page-locked host allocations of the context: a reset would unmap them.
    host_buffers: AtomicUsize,
    /// Live peer views reading the context's device memory in place from other contexts: a
    /// reset would free it under them.
    peer_views: AtomicUsize,
    /// Live NCCL communicators with a rank on the context: NCCL's memory there (device and
    /// pinned host) would be freed under them and their threads.
    communicators: AtomicUsize,
    /// Calls making cudarc's handle of the context right now.
    cudarc_making: AtomicUsize,
    /// Sections of driver calls on the context's handles in progress
    /// ([`FaultState::enter`]): a reset waits for them.
    calls: AtomicUsize,
    /// cudarc's handle of the context, while anything of cudarc's made from it lives (its
    /// slices, streams and modules hold it): a reset would free their memory under them.
    cudarc: Mutex<Weak<cudarc::driver::CudaContext>>,
    /// Launches of other contexts that read the memory in place through peer views since
    /// dropped, and may still run (their guards were detached or leaked): a reset waits for
    /// them, for a bounded time ([`wait_for_peer_reads`]).
    peer_reads: Mutex<Vec<Arc<dyn PendingWork>>>,
}

/// A section of driver calls in progress ([`FaultState::enter`]).
pub(crate) struct CallSection<'a>(&'a FaultState);

impl Drop for CallSection<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

/// GPU work a reset must wait for (a launch of another context reading the memory in place),
/// as the work tracker sees it.
pub(crate) trait PendingWork: Send + Sync {
    /// Known complete.
    fn is_done(&self) -> bool;
    /// Wait until it is complete, for at most `bound`: whether it is.
    fn wait_for(&self, bound: Duration) -> bool;
}

/// How long a reset waits for the launches of other devices that still read the memory in
/// place ([`wait_for_peer_reads`]) before it is refused.
pub(crate) const PEER_READS_BOUND: Duration = Duration::from_secs(2);

/// Wait, for at most `bound` in all, for `reads`: launches of other devices reading device
/// `ordinal`'s memory in place through peer views since dropped, which a reset must not free
/// under them. A launch that runs on past that (a kernel spinning on a signal nobody sets)
/// refuses the reset ([`Error::ResetRefused`], naming how many) rather than hanging it; the
/// device's contexts stay lost, and a later recovery waits again.
pub(crate) fn wait_for_peer_reads(
    ordinal: usize,
    reads: &[Arc<dyn PendingWork>],
    bound: Duration,
) -> Result<()> {
    let deadline = Instant::now() + bound;
    let running = reads
        .iter()
        .filter(|r| !r.wait_for(deadline.saturating_duration_since(Instant::now())))
        .count();
    if running > 0 {
        return Err(Error::ResetRefused {
            ordinal,
            host_buffers: 0,
            peer_views: 0,
            communicators: 0,
            cudarc_handles: 0,
            peer_reads: running,
        });
    }
    Ok(())
}

/// What a reset of a context would free under a live handle outside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Borrow {
    /// A pinned or mapped host allocation.
    HostBuffer,
    /// A peer view of its device memory, read in place by another context.
    PeerView,
    /// A device set's NCCL communicator with a rank on the context.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    Communicator,
    /// cudarc's handle of the context, being made (once made, the handle itself counts).
    Cudarc,
}

impl FaultState {
    pub(crate) fn is_lost(&self) -> bool {
        self.lost_flag.load(Ordering::Acquire)
    }

    pub(crate) fn ensure_alive(&self) -> Result<()> {
        if !self.is_lost() {
            return Ok(());
        }
        let why = self
            .lost
            .lock()
            .expect("poisoned")
            .clone()
            .unwrap_or_default();
        Err(Error::ContextLost(why))
    }

    fn borrows(&self, kind: Borrow) -> &AtomicUsize {
        match kind {
            Borrow::HostBuffer => &self.host_buffers,
            Borrow::PeerView => &self.peer_views,
            Borrow::Communicator => &self.communicators,
            Borrow::Cudarc => &self.cudarc_making,
        }
    }

    /// Note a new handle outside the context on memory a reset would free, unless the context
    /// is lost (then it may be reset at any moment, and the handle is refused). Pairs with
    /// [`FaultState::end_borrow`].
    ///
    /// With [`prepare_reset`] this is a store-fence-load handshake on both sides: the count
    /// goes up before the lost flag is read here, and the flag is set before the counts are
    /// read there, so either this sees the context lost or the reset sees the handle.
    pub(crate) fn begin_borrow(&self, kind: Borrow) -> Result<()> {
        self.borrows(kind).fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Err(e) = self.ensure_alive() {
            self.end_borrow(kind);
            return Err(e);
        }
        Ok(())
    }

    /// Enter a section of driver calls on the context's handles (its memory, functions and
    /// streams), refused once the context is lost. A reset waits for the sections entered
    /// before it marked the context lost ([`prepare_reset`]), so a free or a launch that found
    /// the context alive never reaches the driver after the reset, where the fresh context may
    /// have given the same addresses (or handles) to new allocations. The section ends when the
    /// returned guard drops; only berth's own code holds one. The driver backend makes every
    /// call on the context's handles (memory, streams, events, modules, graphs) inside one of
    /// its own; callers that check something about the context before those calls (a launch's
    /// function and addresses) hold one around the whole step. A wait inside one (a stream's
    /// or an event's) ends at once when the reset comes: a context is lost only to a fault
    /// that poisoned it, and every call of a poisoned context fails at once. No section waits
    /// for uses noted on the memory (those waits come before it).
    ///
    /// The same store-fence-load handshake as [`FaultState::begin_borrow`].
    pub(crate) fn enter(&self) -> Result<CallSection<'_>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let section = CallSection(self);
        self.ensure_alive()?;
        Ok(section)
    }

    /// cudarc's handle of the context: the one that lives, or a new one from `make`, noted
    /// so that a reset waits until every handle of cudarc's made from it is gone.
    pub(crate) fn cudarc_context(
        &self,
        make: impl FnOnce() -> Result<Arc<cudarc::driver::CudaContext>>,
    ) -> Result<Arc<cudarc::driver::CudaContext>> {
        // While it is being made it is counted here; once noted, its handles count themselves.
        self.begin_borrow(Borrow::Cudarc)?;
        let made = (|| {
            let mut noted = self.cudarc.lock().expect("poisoned");
            if let Some(c) = noted.upgrade() {
                return Ok(c);
            }
            let c = make()?;
            *noted = Arc::downgrade(&c);
            Ok(c)
        })();
        self.end_borrow(Borrow::Cudarc);
        made
    }

    /// How many handles of this kind are noted now.
    #[cfg(test)]
    pub(crate) fn borrowed(&self, kind: Borrow) -> usize {
        self.borrows(kind).load(Ordering::SeqCst)
    }

    /// A peer view of the memory is going: its launches that may still run (`reads`, other
    /// contexts' work) are kept for a reset to wait for. Noted before the view's own count is
    /// taken back, so a reset sees one or the other.
    pub(crate) fn note_peer_reads(&self, reads: Vec<Arc<dyn PendingWork>>) {
        let mut kept = self.peer_reads.lock().expect("poisoned");
        kept.retain(|c| !c.is_done());
        kept.extend(reads);
    }

    /// A handle noted by [`FaultState::begin_borrow`] is gone.
    pub(crate) fn end_borrow(&self, kind: Borrow) {
        self.borrows(kind).fetch_sub(1, Ordering::SeqCst);
    }

    /// `k` was queued on `stream`. Each kernel is listed once per stream: a queue of a
    /// thousand launches of two kernels names two candidates, and the list stays short.
    pub(crate) fn launched(&self, stream: StreamId, k: &'static Kernel) {
        let mut in_flight = self.in_flight.lock().expect("poisoned");
        let i = match in_flight.iter().position(|(s, _)| *s == stream) {
            Some(i) => i,
            None => {
                in_flight.push((stream, Vec::new()));
                in_flight.len() - 1
            }
        };
        let v = &mut in_flight[i].1;
        if !v.iter().any(|&x| std::ptr::eq(x, k)) {
            v.push(k);
        }
    }

    pub(crate) fn stream_idle(&self, stream: StreamId) {
        let mut in_flight = self.in_flight.lock().expect("poisoned");
        if let Some((_, v)) = in_flight.iter_mut().find(|(s, _)| *s == stream) {
            v.clear();
        }
    }

    pub(crate) fn mark_lost(&self, why: String) {
        let mut lost = self.lost.lock().expect("poisoned");
        if lost.is_none() {
            *lost = Some(why);
        }
        self.lost_flag.store(true, Ordering::Release);
    }

    /// The kernels queued on any stream since it was last idle: the candidates for a fault.
    pub(crate) fn in_flight_kernels(&self) -> Vec<&'static Kernel> {
        self.in_flight
            .lock()
            .expect("poisoned")
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    }

    /// The handles outside the context on memory a reset would free, now.
    pub(crate) fn held_for_reset(&self) -> HeldForReset {
        HeldForReset {
            host_buffers: self.host_buffers.load(Ordering::SeqCst),
            peer_views: self.peer_views.load(Ordering::SeqCst),
            communicators: self.communicators.load(Ordering::SeqCst),
            cudarc_handles: self.cudarc_making.load(Ordering::SeqCst)
                + self.cudarc.lock().expect("poisoned").strong_count(),
        }
    }

    /// The launches of other contexts noted by [`FaultState::note_peer_reads`] that may still
    /// run (those known complete are dropped).
    pub(crate) fn pending_peer_reads(&self) -> Vec<Arc<dyn PendingWork>> {
        let mut kept = self.peer_reads.lock().expect("poisoned");
        kept.retain(|c| !c.is_done());
        kept.clone()
    }

    /// Whether a section of driver calls ([`FaultState::enter`]) is in progress.
    pub(crate) fn in_call(&self) -> bool {
        self.calls.load(Ordering::SeqCst) > 0
    }
}

/// What a reset of a context would free under live handles ([`FaultState::held_for_reset`]).
pub(crate) struct HeldForReset {
    pub(crate) host_buffers: usize,
    pub(crate) peer_views: usize,
    pub(crate) communicators: usize,
    /// cudarc's handles of the context: being made, or alive.
    pub(crate) cudarc_handles: usize,
}
