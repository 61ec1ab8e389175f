//! The guard of a launch in flight.

use crate::backend::StreamId;
use crate::context::Inner;
use crate::error::Result;
use crate::queue::Mode;
use crate::track::{Access, Completion, Uses};
use std::marker::PhantomData;
use std::sync::Arc;

/// A launch, copy or graph replay in flight. It keeps every buffer of the work borrowed until
/// the stream has finished it (a launch's copies back included); [`Pending::wait`] returns the
/// outcome. Dropping it without waiting also waits (a failure is then reported by the next
/// synchronise of the stream).
///
/// Work queued in a [`Scope`](crate::Scope) is the exception: dropping its guard leaves it
/// queued (the scope waits for it at its end and reports its outcome), and so does
/// [`Pending::detach`]; neither waits. A launch recorded into a [`Graph`](crate::Graph) has not run: its
/// guard holds nothing and `wait` returns at once.
#[must_use = "a launch is asynchronous: call .wait() to get its outcome (in a scope, .detach() leaves it queued)"]
pub struct Pending<'l> {
    pub(super) gpu: Arc<Inner>,
    pub(super) stream: StreamId,
    pub(super) kernel: &'static str,
    pub(super) done: bool,
    /// Queued in a scope: the scope waits for it and reports its outcome.
    pub(super) scoped: bool,
    pub(super) leases: Vec<(usize, u64)>,
    /// Where the streams will be once the launch is done; noted on every buffer it uses.
    /// `None` for a launch recorded into a graph.
    pub(super) completion: Option<Arc<Completion>>,
    /// Waits end at the work's own point on its stream, not after what was queued after it.
    pub(super) own_point: bool,
    pub(super) _borrows: PhantomData<&'l mut ()>,
}

impl Pending<'_> {
    /// The guard of a copy just queued on `stream` (given as `mode` says) that uses `uses`.
    /// In a scope the scope waits for it at its end and its guard never waits, as for a
    /// launch; but unlike a launch it records a point of its own on the stream (an event), so
    /// that a host access to its memory waits for this copy alone, not for everything the
    /// scope queued: a loop that refills pinned memory while the copies of earlier rounds
    /// and the kernels after them run keeps the stream busy.
    pub(crate) fn copy(
        gpu: &Arc<Inner>,
        stream: StreamId,
        mode: Mode<'_>,
        what: &'static str,
        uses: &[(&Uses, Access)],
    ) -> Result<Self> {
        let scoped = matches!(mode, Mode::Scope(_));
        let completion = Completion::record(gpu, &[stream])?;
        for (u, access) in uses {
            u.add(&completion, *access);
        }
        Ok(Pending::queued(gpu, stream, what, completion, scoped))
    }

    /// The guard of work just queued on `stream` that ends at `completion`.
    pub(crate) fn queued(
        gpu: &Arc<Inner>,
        stream: StreamId,
        what: &'static str,
        completion: Arc<Completion>,
        scoped: bool,
    ) -> Self {
        Pending {
            stream,
            kernel: what,
            done: false,
            scoped,
            leases: Vec::new(),
            completion: Some(completion),
            own_point: false,
            gpu: gpu.clone(),
            _borrows: PhantomData,
        }
    }

    /// Wait for the launch (and earlier work on its stream) to finish. In a scope, a failure
    /// this returns is not reported again by the scope.
    pub fn wait(mut self) -> Result<()> {
        if self.completion.is_none() {
            return Ok(());
        }
        self.done = true;
        if let Some(c) = &self.completion {
            // Launches a scope queues after this point must not count as done by this wait.
            c.seal();
        }
        let r = self.sync();
        self.release();
        r
    }

    /// Wait for the work: the stream, or (see [`Pending::ends_at_own_point`]) the work's own
    /// point on it; the failure found.
    fn sync(&self) -> Result<()> {
        if self.own_point
            && let Some(p) = self
                .completion
                .as_ref()
                .and_then(|c| c.point_on(self.stream))
        {
            return self.gpu.sync_point(self.stream, p, Some(self.kernel));
        }
        self.gpu.sync(self.stream, Some(self.kernel))
    }

    /// Have the guard's waits (`wait`, and dropping it) end once this work is done, not once
    /// the work the runtime queues after it on the same stream is: for work followed by more
    /// of the runtime's own, left queued ([`Pending::leave_queued`]), which the caller need
    /// not wait for. Sound as leaving that work queued is: the buffers it uses recorded it.
    /// A failure of the work after it is left to the next synchronise of the stream.
    pub(crate) fn ends_at_own_point<'b>(mut self) -> Pending<'b> {
        self.own_point = true;
        self.unborrow()
    }

    /// The same guard, holding borrows for `'b` instead: for the runtime, which queues more
    /// work on the same buffers before handing the guard back under the caller's borrows.
    /// Sound as leaking the guard is (every buffer the work uses recorded it, so host accesses
    /// and frees wait for it): the borrows keep the caller from waiting twice, not memory
    /// from being freed under the work.
    fn unborrow<'b>(mut self) -> Pending<'b> {
        let moved = Pending {
            gpu: self.gpu.clone(),
            stream: self.stream,
            kernel: self.kernel,
            done: self.done,
            scoped: self.scoped,
            leases: std::mem::take(&mut self.leases),
            completion: self.completion.take(),
            own_point: self.own_point,
            _borrows: PhantomData,
        };
        // This guard now holds nothing to wait for.
        self.done = true;
        moved
    }

    /// In a [`Scope`](crate::Scope), leave the work (a launch, copy or graph replay) queued
    /// without waiting: the scope waits for it at its end and reports its outcome; the
    /// buffers' borrows end now, and host access to them waits for the work first. Elsewhere
    /// the same as dropping the guard, which waits for the stream. For a launch recorded into
    /// a graph it does nothing.
    pub fn detach(self) {}

    /// Leave the work queued without waiting for it, outside a scope too: for work the
    /// runtime queues more work after, on the same stream, under a guard of its own. Sound as
    /// a leaked guard is: every buffer the work uses recorded it, so their host accesses and
    /// frees wait for it, and work queued after it on other streams is ordered after it. Work
    /// holding pooled staging waits instead, as when dropped: its staging goes back to the
    /// pool only once the stream has passed it.
    pub(crate) fn leave_queued(mut self) {
        if self.leases.is_empty() {
            self.done = true;
        }
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &'static str {
        self.kernel
    }

    /// Return staging buffers to the pool; only after the stream passed them, and never into
    /// a lost context (whose memory is gone).
    fn release(&mut self) {
        // The stream was synchronised (or stopped for good on a fault): the work is over.
        if let Some(c) = &self.completion {
            c.finished();
        }
        if self.gpu.is_lost() {
            self.leases.clear();
            return;
        }
        for (class, p) in self.leases.drain(..) {
            self.gpu.staging.put(class, (), p);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.done || self.scoped {
            return;
        }
        if let Err(e) = self.sync() {
            // Nobody asked for the outcome: keep the failure for the next synchronise of the
            // stream (a GPU fault also loses the context, which every later call reports).
            tracing::warn!(error = %e, "a dropped launch guard found its stream failed");
            self.gpu.keep_failure(self.stream, e);
        }
        self.release();
    }
}
