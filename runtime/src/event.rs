//! Events: points in a stream's queue. The host waits for one ([`Event::wait`]), times the work
//! between two ([`Event::elapsed`]), or makes another stream wait for one
//! ([`Stream::wait_event`]) — so work on two streams is ordered without a host wait, and
//! kernels are timed without [`crate::raw`]. The runtime times its own measurements (the link,
//! the random-read probe) with the same events ([`Timing`]).
//!
//! On the simulator an event is the position of its stream's queue and the host clock read
//! when the stream got there: waits and stream ordering behave as on a GPU, and elapsed times
//! are host time.

use crate::backend::{EventHandle, StreamId};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::queue::{Queue, QueueRef};
use crate::stream::Stream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A point in a stream's queue, recorded with [`Event::record`]. Timing is enabled.
///
/// Recording again moves the event to the new point; waits and elapsed times use the latest
/// record. An event never recorded counts as complete (as in CUDA), but has no time.
pub struct Event {
    gpu: Arc<Inner>,
    handle: EventHandle,
    /// Whether `record` has succeeded once.
    recorded: AtomicBool,
}

impl Gpu {
    /// A new event of this context (timing enabled), not yet recorded.
    pub fn event(&self) -> Result<Event> {
        self.inner.bind()?;
        Ok(Event {
            gpu: self.inner.clone(),
            handle: self.inner.ops().event_new()?,
            recorded: false.into(),
        })
    }

    /// Make later work on this GPU's default stream wait until `event` is complete, without
    /// blocking the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        event.hold(self.__queue())
    }
}

impl Stream {
    /// Make later work on this stream wait until `event` (recorded on any stream of the same
    /// context) is complete, without blocking the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        event.hold(self.__queue())
    }
}

impl Event {
    /// Record the event at the end of the work queued so far on `on` (a [`Gpu`]'s default
    /// stream or a [`Stream`] of the same context).
    pub fn record(&self, on: &impl Queue) -> Result<()> {
        let QueueRef(gpu, stream, mode) = on.__queue();
        mode.not_recording("an event record")?;
        self.same_context(gpu, "record")?;
        self.gpu.bind()?;
        self.gpu.ops().event_record(&self.handle, stream)?;
        self.recorded.store(true, Ordering::Release);
        Ok(())
    }

    /// Block the host until the work before the event's latest record is done (at once if it
    /// was never recorded). A fault in that work is returned as the kernel's error.
    pub fn wait(&self) -> Result<()> {
        self.gpu.bind()?;
        self.gpu.ops().event_wait(&self.handle)
    }

    /// Whether the work before the event's latest record is done. Never blocks.
    pub fn is_complete(&self) -> Result<bool> {
        self.gpu.bind()?;
        self.gpu.ops().event_query(&self.handle)
    }

    /// The time from `start` to `stop`, both recorded on streams of one context; waits until
    /// `stop` is complete. GPU time resolves about half a microsecond; the simulator's is host
    /// time.
    pub fn elapsed(start: &Event, stop: &Event) -> Result<Duration> {
        start.same_context(&stop.gpu, "elapsed")?;
        for (e, which) in [(start, "start"), (stop, "stop")] {
            if !e.recorded.load(Ordering::Acquire) {
                return Err(Error::Usage(format!(
                    "Event::elapsed: the {which} event was never recorded (call .record(&stream) first)"
                )));
            }
        }
        start.wait()?;
        stop.wait()?;
        let secs = start.gpu.ops().event_elapsed(&start.handle, &stop.handle)?;
        if secs < 0.0 {
            return Err(Error::Usage(format!(
                "Event::elapsed: the stop event completed {:.3} ms before the start event (are they swapped?)",
                -secs * 1e3
            )));
        }
        Ok(Duration::from_secs_f64(secs))
    }

    fn same_context(&self, other: &Arc<Inner>, what: &str) -> Result<()> {
        if Arc::ptr_eq(&self.gpu, other) {
            return Ok(());
        }
        Err(Error::Usage(format!(
            "Event::{what}: the events and streams belong to different GPU contexts"
        )))
    }

    /// Make `queue`'s later work wait for this event.
    fn hold(&self, queue: QueueRef<'_>) -> Result<()> {
        let QueueRef(gpu, stream, mode) = queue;
        mode.not_recording("a wait for an event")?;
        self.same_context(gpu, "wait_event")?;
        self.gpu.bind()?;
        self.gpu.ops().stream_wait_event(stream, &self.handle)
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("recorded", &self.recorded.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.gpu.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        self.gpu.ops().event_drop(&self.handle);
    }
}

/// Two timed events that time work queued on one stream; destroyed when dropped.
pub(crate) struct Timing<'g> {
    gpu: &'g Inner,
    start: EventHandle,
    stop: EventHandle,
}

impl<'g> Timing<'g> {
    /// Two events of `gpu`, which is current.
    pub(crate) fn new(gpu: &'g Inner) -> Result<Self> {
        let ops = gpu.ops();
        let start = ops.event_new()?;
        match ops.event_new() {
            Ok(stop) => Ok(Timing { gpu, start, stop }),
            Err(e) => {
                ops.event_drop(&start);
                Err(e)
            }
        }
    }

    /// Milliseconds the device spent on what `enqueue` queues on `stream`, waiting for it.
    pub(crate) fn time(
        &self,
        stream: StreamId,
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<f64> {
        let ops = self.gpu.ops();
        ops.event_record(&self.start, stream)?;
        enqueue()?;
        ops.event_record(&self.stop, stream)?;
        ops.event_wait(&self.stop)?;
        Ok(ops.event_elapsed(&self.start, &self.stop)? * 1e3)
    }
}

impl Drop for Timing<'_> {
    fn drop(&mut self) {
        if self.gpu.is_lost() {
            return;
        }
        let ops = self.gpu.ops();
        ops.event_drop(&self.start);
        ops.event_drop(&self.stop);
    }
}
