//! Streams: ordered queues of GPU work. Launches go to a [`Queue`]: a [`Gpu`] (its default
//! stream) or a [`Stream`].

use crate::error::{Error, Result};
use crate::gpu::{Gpu, Inner};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// A raw stream handle, created non-blocking so it never serialises with the legacy stream.
pub(crate) struct StreamHandle(pub(crate) sys::CUstream);

impl StreamHandle {
    pub(crate) fn create() -> Result<Self> {
        result::stream::create(result::stream::StreamKind::NonBlocking)
            .map(StreamHandle)
            .map_err(|e| Error::driver("cuStreamCreate", e))
    }

    pub(crate) fn destroy(&self) {
        if self.0.is_null() {
            return;
        }
        // A simulated stream's handle is only a number (see `sim_stream::new_handle`).
        // Its owner removes it from the simulator (`SimStreams::remove`) instead.
        // SAFETY: created by `create` in this context, destroyed once by its owner's Drop.
        let _ = unsafe { result::stream::destroy(self.0) };
    }
}

/// Two CUDA events that time work queued on one stream; destroyed when dropped. Not for the
/// simulator.
pub(crate) struct Timing {
    start: sys::CUevent,
    stop: sys::CUevent,
}

impl Timing {
    pub(crate) fn new() -> Result<Self> {
        let ev = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| Error::driver("cuEventCreate", e))
        };
        let start = ev()?;
        match ev() {
            Ok(stop) => Ok(Timing { start, stop }),
            Err(e) => {
                // SAFETY: created just above, never recorded.
                let _ = unsafe { result::event::destroy(start) };
                Err(e)
            }
        }
    }

    /// Milliseconds the GPU spent on what `enqueue` queues on `stream`, waiting for it.
    pub(crate) fn time(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<f64> {
        // SAFETY: both events and `stream` belong to `gpu`'s context, which the caller made
        // current; the events outlive these calls (dropped with `self`).
        unsafe {
            gpu.check(
                "cuEventRecord",
                result::event::record(self.start, stream),
                None,
            )?;
            enqueue()?;
            gpu.check(
                "cuEventRecord",
                result::event::record(self.stop, stream),
                None,
            )?;
            gpu.check(
                "cuEventSynchronize",
                result::event::synchronize(self.stop),
                None,
            )?;
            let ms = result::event::elapsed(self.start, self.stop)
                .map_err(|e| Error::driver("cuEventElapsedTime", e))?;
            Ok(f64::from(ms))
        }
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once; the driver defers the release of an
        // event still pending on a stream.
        unsafe {
            let _ = result::event::destroy(self.start);
            let _ = result::event::destroy(self.stop);
        }
    }
}

/// A stream of the GPU: work queued on one stream runs in order; work on different streams
/// may overlap.
pub struct Stream {
    pub(crate) gpu: Arc<Inner>,
    pub(crate) handle: StreamHandle,
}

// SAFETY: a CUstream may be used from any thread once its context is current there, which
// every berth entry point ensures (`Inner::bind`).
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises work submitted to one stream from several threads.
unsafe impl Sync for Stream {}

impl Gpu {
    /// A new stream on this GPU.
    pub fn stream(&self) -> Result<Stream> {
        self.inner.bind()?;
        if self.inner.sim {
            return Ok(Stream {
                gpu: self.inner.clone(),
                handle: StreamHandle(crate::sim_stream::new_handle()),
            });
        }
        Ok(Stream {
            gpu: self.inner.clone(),
            handle: StreamHandle::create()?,
        })
    }
}

impl Stream {
    /// Wait for all work queued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        sync(&self.gpu, self.handle.0, None)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.gpu.sim {
            self.gpu.sim_streams.settle();
            self.gpu.sim_streams.remove(self.handle.0 as usize);
            return;
        }
        if self.gpu.fault.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: our stream handle, in our context.
        let _ = unsafe { result::stream::synchronize(self.handle.0) };
        self.handle.destroy();
    }
}

/// Whether `stream` has nothing left to do: all its work ran, or it stopped on an error (the
/// next synchronise reports it). Never blocks.
pub(crate) fn idle(gpu: &Inner, stream: sys::CUstream) -> bool {
    gpu.ops().idle(gpu, stream)
}

/// Wait for everything queued on `stream`; the first failure of its work (`kernel` names the
/// launch in a fault report).
pub(crate) fn sync(gpu: &Inner, stream: sys::CUstream, kernel: Option<&str>) -> Result<()> {
    gpu.bind()?;
    gpu.ops().sync(gpu, stream, kernel)
}

/// Wait for everything queued on `stream` so far without taking its failure (the next
/// synchronise still reports it). A lost context runs nothing more: returns at once.
pub(crate) fn drain(gpu: &Inner, stream: sys::CUstream) {
    let ops = gpu.ops();
    if let Ok(p) = ops.record_point(gpu, stream) {
        ops.wait_point(gpu, &p);
        ops.release_point(gpu, p);
    } else {
        let _ = sync(gpu, stream, None);
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Gpu {}
    impl Sealed for crate::Stream {}
    impl Sealed for crate::Scope<'_> {}
    impl Sealed for crate::Recorder<'_> {}
}

/// Where a launch is queued: a [`Gpu`] (its default stream), a [`Stream`], a [`Scope`]
/// (queued without waiting; the scope waits once at its end) or a [`Recorder`] (recorded
/// into a [`Graph`](crate::Graph), run later).
///
/// [`Scope`]: crate::Scope
/// [`Recorder`]: crate::Recorder
pub trait Queue: sealed::Sealed {
    #[doc(hidden)]
    fn __queue(&self) -> QueueRef<'_>;
}

/// The context and stream behind a [`Queue`] (opaque).
#[doc(hidden)]
pub struct QueueRef<'a>(
    pub(crate) &'a Arc<Inner>,
    pub(crate) sys::CUstream,
    pub(crate) Mode<'a>,
);

/// How work given to a queue is handled.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    /// Queued now; its guard waits when dropped.
    Wait,
    /// Queued now in a scope, which waits for it and reports its outcome.
    Scope(&'a crate::scope::ScopeState),
    /// Recorded into a graph, not run.
    Record(&'a crate::graph::Recording),
}

impl Mode<'_> {
    /// Only launches can be recorded into a graph: copies and events need a stream.
    pub(crate) fn not_recording(&self, what: &str) -> Result<()> {
        match self {
            Mode::Record(_) => Err(Error::Usage(format!(
                "{what} cannot be recorded into a graph: only kernel launches can; queue it on a Gpu, Stream or Scope"
            ))),
            _ => Ok(()),
        }
    }
}

impl Queue for Gpu {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(&self.inner, self.inner.default_stream.0, Mode::Wait)
    }
}

impl Queue for Stream {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(&self.gpu, self.handle.0, Mode::Wait)
    }
}
