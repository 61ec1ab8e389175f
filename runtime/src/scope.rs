//! Scopes: launches queued back to back without waiting, and one wait at the end.
//!
//! `gpu.scope(|s| { … })` (or `stream.scope`) runs the closure with a [`Scope`], a queue on
//! the GPU's default stream (or that stream). Launches on it return guards that do not wait
//! when dropped: dependent launches on the same buffers go to the stream one after the other
//! with no host wait in between, and the scope waits once, when the closure returns — also
//! when it returns early with an error or panics. The scope's result carries the first
//! failure of its work, reported once.
//!
//! Soundness needs nothing from the borrow checker beyond what plain launches have: each
//! launch records its use on every allocation it touches ([`crate::track`]), and host access,
//! free and reuse wait for uses whose guards are gone. Work on the scope's own stream needs no
//! wait before a later launch of the scope (stream order runs it first). The reasoning is in
//! `docs/design-notes.md` ("Queued launches: scopes").

use crate::backend::StreamId;
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::queue::{Kept, Mode, Queue, QueueRef, ScopeState, sealed};
use crate::stream::Stream;
use std::sync::Arc;

/// A queue whose launches do not wait when their guards drop; see [`Gpu::scope`].
///
/// Only a shared reference to it exists, inside the closure: it cannot outlive the scope, and
/// several host threads may queue on it at once (`std::thread::scope` inside the closure).
pub struct Scope<'q> {
    gpu: &'q Arc<Inner>,
    stream: StreamId,
    state: ScopeState,
}

impl sealed::Sealed for Scope<'_> {}

impl Queue for Scope<'_> {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(self.gpu, self.stream, Mode::Scope(&self.state))
    }
}

impl Scope<'_> {
    /// Launches queued in the scope so far.
    pub fn launches(&self) -> u64 {
        self.state.launches()
    }

    /// Wait for everything queued so far (the scope goes on); the first failure since the
    /// last wait, which the scope then does not report again.
    pub fn wait(&self) -> Result<()> {
        // What was queued before this point, taken first: launches another thread queues
        // during the wait belong to the next one.
        let kept = self.state.take();
        let r = self.gpu.sync(self.stream, None);
        self.settled(kept);
        r
    }

    /// The stream was synchronised after `kept` was taken: its launches are done, their
    /// staging free.
    fn settled(&self, kept: Kept) {
        for c in &kept.completions {
            c.finished();
        }
        if self.gpu.is_lost() {
            return;
        }
        for (class, p) in kept.staging {
            self.gpu.staging.put(class, (), p);
        }
    }

    /// The end of the scope: wait once and settle.
    fn end(&self) -> Result<()> {
        self.wait()
    }
}

/// Waits at the end of the scope whatever way the closure leaves it (a panic included).
struct End<'a, 'q>(&'a Scope<'q>, bool);

impl Drop for End<'_, '_> {
    fn drop(&mut self) {
        if !self.1
            && let Err(e) = self.0.end()
        {
            // The closure is panicking: the panic is what the caller sees; log the failure.
            tracing::error!(error = %e, "GPU work of a scope that panicked failed");
        }
    }
}

fn run_scope<R>(
    gpu: &Arc<Inner>,
    stream: StreamId,
    f: impl FnOnce(&Scope<'_>) -> Result<R>,
) -> Result<R> {
    let _range = crate::nvtx::scope();
    gpu.bind()?;
    let scope = Scope {
        gpu,
        stream,
        state: ScopeState::default(),
    };
    let mut end = End(&scope, false);
    let r = f(end.0);
    end.1 = true;
    let waited = scope.end();
    drop(end);
    combine(r, waited)
}

/// The scope's outcome: the closure's, unless its work failed on the GPU. A fault of the
/// work is the cause of whatever the closure saw afterwards (on a GPU its own calls then
/// fail with the fault or a lost context), so it wins; the other is logged.
fn combine<R>(r: Result<R>, waited: Result<()>) -> Result<R> {
    match (r, waited) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(closure), Err(work)) => {
            let work_is_cause = matches!(
                work,
                Error::KernelPanic { .. } | Error::KernelFault { .. } | Error::Simulator { .. }
            ) && !matches!(
                closure,
                Error::KernelPanic { .. } | Error::KernelFault { .. }
            );
            let (keep, log) = if work_is_cause {
                (work, closure)
            } else {
                (closure, work)
            };
            tracing::warn!(error = %log, "a scope ended with a second error");
            Err(keep)
        }
    }
}

impl Gpu {
    /// Run `f` with a [`Scope`] on this GPU's default stream: launches queued on the scope
    /// (`kernel(s, grid, …)?.detach()`, or just dropping the guard) do not wait for each
    /// other; the scope waits once when `f` returns, returns early or panics, and returns the
    /// first failure of its work (once) or else `f`'s result.
    ///
    /// ```ignore
    /// gpu.scope(|s| {
    ///     for _ in 0..500 {
    ///         jacobi(s, grid, &a, &mut b)?.detach();
    ///         jacobi(s, grid, &b, &mut a)?.detach();
    ///     }
    ///     Ok(())
    /// })?;
    /// let result = a.to_vec()?;
    /// ```
    ///
    /// The buffers' borrows end with each launch statement; touching a buffer on the host
    /// inside the scope is allowed and waits for the launches queued on it so far.
    pub fn scope<R>(&self, f: impl FnOnce(&Scope<'_>) -> Result<R>) -> Result<R> {
        run_scope(&self.inner, self.inner.default_stream, f)
    }
}

impl Stream {
    /// As [`Gpu::scope`], on this stream.
    pub fn scope<R>(&self, f: impl FnOnce(&Scope<'_>) -> Result<R>) -> Result<R> {
        run_scope(&self.gpu, self.handle, f)
    }
}
