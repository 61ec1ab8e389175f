//! Events: points in a stream's queue. The host waits for one ([`Event::wait`]), times the work
//! between two ([`Event::elapsed`]), or makes another stream wait for one
//! ([`Stream::wait_event`]) — so work on two streams is ordered without a host wait, and
//! kernels are timed without [`crate::raw`].
//!
//! On the simulator an event is the position of its stream's queue and the host clock read
//! when the stream got there: waits and stream ordering behave as on a GPU, and elapsed times
//! are host time.

use crate::error::{Error, Result};
use crate::gpu::{Gpu, Inner};
use crate::sim_stream::SimStream;
use crate::stream::{Queue, QueueRef, Stream};
use cudarc::driver::{result, sys};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A point in a stream's queue, recorded with [`Event::record`]. Timing is enabled.
///
/// Recording again moves the event to the new point; waits and elapsed times use the latest
/// record. An event never recorded counts as complete (as in CUDA), but has no time.
pub struct Event {
    gpu: Arc<Inner>,
    kind: Kind,
    /// Whether `record` has succeeded once.
    recorded: std::sync::atomic::AtomicBool,
}

enum Kind {
    Cuda(sys::CUevent),
    Sim(Mutex<Option<SimMark>>),
}

/// Where a simulated event was last recorded.
#[derive(Clone)]
struct SimMark {
    stream: Arc<SimStream>,
    position: u64,
    /// The host clock when the stream reached the event (unset if the stream skipped it
    /// after a failure).
    at: Arc<OnceLock<Instant>>,
}

// SAFETY: a CUevent is a driver handle usable from any thread once its context is current
// there (every method binds it); the simulated state is behind a mutex.
unsafe impl Send for Event {}
// SAFETY: as above; the driver serialises calls on one event.
unsafe impl Sync for Event {}

impl Gpu {
    /// A new event of this context (timing enabled), not yet recorded.
    pub fn event(&self) -> Result<Event> {
        self.inner.bind()?;
        let kind = if self.inner.sim {
            Kind::Sim(Mutex::new(None))
        } else {
            let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| self.inner.error("cuEventCreate", e, None))?;
            Kind::Cuda(ev)
        };
        Ok(Event {
            gpu: self.inner.clone(),
            kind,
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
        match &self.kind {
            Kind::Cuda(ev) => {
                // SAFETY: `ev` and `stream` belong to this (current) context and are alive.
                let r = unsafe { result::event::record(*ev, stream) };
                self.gpu.check("cuEventRecord", r, None)?;
            }
            Kind::Sim(mark) => {
                let at: Arc<OnceLock<Instant>> = Arc::default();
                let stamp = at.clone();
                let job = move || {
                    let _ = stamp.set(Instant::now());
                    Ok(())
                };
                self.gpu.sim_streams.enqueue(stream as usize, Box::new(job));
                let (stream, position) = self.gpu.sim_streams.position(stream as usize);
                *mark.lock().expect("poisoned") = Some(SimMark {
                    stream,
                    position,
                    at,
                });
            }
        }
        self.recorded
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Block the host until the work before the event's latest record is done (at once if it
    /// was never recorded). A fault in that work is returned as the kernel's error.
    pub fn wait(&self) -> Result<()> {
        self.gpu.bind()?;
        match &self.kind {
            Kind::Cuda(ev) => {
                // SAFETY: `ev` is an event of this (current) context.
                let r = unsafe { result::event::synchronize(*ev) };
                self.gpu.check("cuEventSynchronize", r, None)
            }
            Kind::Sim(_) => {
                if let Some(m) = self.sim_mark() {
                    m.stream.wait_until(m.position);
                }
                Ok(())
            }
        }
    }

    /// Whether the work before the event's latest record is done. Never blocks.
    pub fn is_complete(&self) -> Result<bool> {
        self.gpu.bind()?;
        match &self.kind {
            Kind::Cuda(ev) => {
                // SAFETY: `ev` is an event of this (current) context.
                match unsafe { result::event::query(*ev) } {
                    Ok(()) => Ok(true),
                    Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                    Err(e) => Err(self.gpu.error("cuEventQuery", e, None)),
                }
            }
            Kind::Sim(_) => Ok(self.sim_mark().is_none_or(|m| m.stream.reached(m.position))),
        }
    }

    /// The time from `start` to `stop`, both recorded on streams of one context; waits until
    /// `stop` is complete. GPU time resolves about half a microsecond; the simulator's is host
    /// time.
    pub fn elapsed(start: &Event, stop: &Event) -> Result<Duration> {
        start.same_context(&stop.gpu, "elapsed")?;
        for (e, which) in [(start, "start"), (stop, "stop")] {
            if !e.recorded.load(std::sync::atomic::Ordering::Acquire) {
                return Err(Error::Usage(format!(
                    "Event::elapsed: the {which} event was never recorded (call .record(&stream) first)"
                )));
            }
        }
        start.wait()?;
        stop.wait()?;
        let secs = match (&start.kind, &stop.kind) {
            (Kind::Cuda(a), Kind::Cuda(b)) => {
                // SAFETY: both are complete events of this (current) context, timing enabled.
                let ms = unsafe { result::event::elapsed(*a, *b) }
                    .map_err(|e| start.gpu.error("cuEventElapsedTime", e, None))?;
                f64::from(ms) * 1e-3
            }
            _ => {
                let at = |e: &Event| e.sim_mark().and_then(|m| m.at.get().copied());
                let (Some(a), Some(b)) = (at(start), at(stop)) else {
                    return Err(Error::Usage(
                        "Event::elapsed: a failure on the event's stream skipped it, so it has \
                         no time (the stream's synchronise reports the failure)"
                            .into(),
                    ));
                };
                match b.checked_duration_since(a) {
                    Some(d) => d.as_secs_f64(),
                    None => -(a - b).as_secs_f64(),
                }
            }
        };
        if secs < 0.0 {
            return Err(Error::Usage(format!(
                "Event::elapsed: the stop event completed {:.3} ms before the start event (are they swapped?)",
                -secs * 1e3
            )));
        }
        Ok(Duration::from_secs_f64(secs))
    }

    fn sim_mark(&self) -> Option<SimMark> {
        match &self.kind {
            Kind::Sim(m) => m.lock().expect("poisoned").clone(),
            Kind::Cuda(_) => None,
        }
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
        match &self.kind {
            Kind::Cuda(ev) => {
                // SAFETY: `stream` and `ev` belong to this (current) context and are alive
                // (the driver keeps what it needs of the event until the wait is over).
                let r = unsafe {
                    result::stream::wait_event(
                        stream,
                        *ev,
                        sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                };
                self.gpu.check("cuStreamWaitEvent", r, None)
            }
            Kind::Sim(_) => {
                if let Some(m) = self.sim_mark() {
                    // The mark is an earlier position of some stream: waiting for it from a
                    // later job cannot form a cycle.
                    let job = move || {
                        m.stream.wait_until(m.position);
                        Ok(())
                    };
                    gpu.sim_streams.enqueue(stream as usize, Box::new(job));
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field(
                "recorded",
                &self.recorded.load(std::sync::atomic::Ordering::Relaxed),
            )
            .finish()
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Kind::Cuda(ev) = self.kind {
            if self.gpu.fault.is_lost() || self.gpu.bind().is_err() {
                return;
            }
            // SAFETY: created in `Gpu::event`, destroyed once; the driver releases an event
            // still pending on a stream once it completes.
            let _ = unsafe { result::event::destroy(ev) };
        }
    }
}
