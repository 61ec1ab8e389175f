//! Streams on the CUDA driver: creation, synchronisation, the pooled events that mark where
//! queued work ends (completion points), and timed events.

use crate::backend::driver::handle::Handle;
use crate::backend::driver::{Driver, StreamSlot};
use crate::backend::{EventHandle, EventRepr, Point, PointRepr, StreamId, StreamOps};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::sync::atomic::Ordering;

impl Driver {
    /// An event with timing disabled, from the pool or new (the context is current).
    fn take_event(&self) -> Result<Handle<sys::CUevent>> {
        if let Some(ev) = self.events.lock().expect("poisoned").pop() {
            return Ok(ev);
        }
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(Handle)
            .map_err(|e| self.error("cuEventCreate", e, None))
    }

    /// Give back an event for reuse (recording it again later is allowed even if pending).
    fn put_event(&self, ev: Handle<sys::CUevent>) {
        self.events.lock().expect("poisoned").push(ev);
    }

    /// Make work queued on `stream` from now on wait for `ev`'s latest record. Both belong to
    /// this context, current since the caller bound it, and `ev` is alive for the call.
    fn wait_event(&self, stream: StreamId, ev: sys::CUevent) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        // SAFETY: as the function says; the driver keeps what it needs of the event until the
        // wait is over.
        let r = unsafe {
            result::stream::wait_event(stream, ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
        };
        self.check("cuStreamWaitEvent", r, None)
    }
}

fn cuda(event: &EventHandle) -> sys::CUevent {
    match &event.0 {
        EventRepr::Cuda(ev) => ev.0,
        EventRepr::Sim(_) => unreachable!("a simulated event given to the driver"),
    }
}

/// The event of a point of this backend.
fn point_event(point: &Point) -> sys::CUevent {
    match &point.0 {
        PointRepr::Event(ev) => ev.0,
        PointRepr::Sim(..) => unreachable!("a simulated point given to the driver"),
    }
}

impl StreamOps for Driver {
    fn default_stream(&self) -> StreamId {
        self.stream_id(0).expect("index 0 is an id")
    }

    fn stream_new(&self) -> Result<StreamId> {
        let _section = self.section()?;
        // Non-blocking, so it never serialises with the legacy stream.
        let s = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| self.faults.error("cuStreamCreate", e, None))?;
        self.stream_id(self.streams.push(StreamSlot::new(s)))
    }

    fn stream_drop(&self, id: StreamId) {
        // A lost context's streams go with its reset.
        let (Ok(stream), Ok(_section)) = (self.stream(id), self.section()) else {
            return;
        };
        if let Some(i) = id.index_in(&self.serial)
            && let Some(slot) = self.streams.get(i)
            && slot.destroyed.swap(true, Ordering::AcqRel)
        {
            return;
        }
        // SAFETY: a stream of this (current) context, destroyed once by its owner; the
        // driver would release it once idle anyway, the synchronise keeps the order plain.
        unsafe {
            let _ = result::stream::synchronize(stream);
            let _ = result::stream::destroy(stream);
        }
    }

    fn sync(&self, id: StreamId, kernel: Option<&str>) -> Result<()> {
        let stream = self.stream(id)?;
        let _section = self.section()?;
        // SAFETY: `stream` belongs to this context, which the caller made current.
        let r = unsafe { result::stream::synchronize(stream) };
        self.check("cuStreamSynchronize", r, kernel)?;
        self.faults.state.stream_idle(id);
        Ok(())
    }

    fn idle(&self, stream: StreamId) -> bool {
        let (Ok(stream), Ok(_section)) = (self.stream(stream), self.enter()) else {
            return true;
        };
        // SAFETY: `stream` belongs to this context, which is current.
        let r = unsafe { sys::cuStreamQuery(stream) };
        r != sys::CUresult::CUDA_ERROR_NOT_READY
    }

    fn keep_failure(&self, _stream: StreamId, _e: Error) {
        // A failure after work was queued is a fault: the context is lost, and every later
        // call reports it.
    }

    fn record_point(&self, stream: StreamId) -> Result<Point> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        let ev = self.take_event()?;
        // SAFETY: `ev` and `stream` belong to this context, current since the caller's
        // launch or copy bound it.
        let r = unsafe { result::event::record(ev.0, stream) };
        if let Err(e) = r {
            self.put_event(ev);
            return Err(self.error("cuEventRecord", e, None));
        }
        Ok(Point(PointRepr::Event(ev)))
    }

    fn wait_point(&self, point: &Point) {
        let ev = point_event(point);
        if let Ok(_section) = self.enter() {
            // SAFETY: `ev` is an event of this (current) context, alive while `point` is.
            let _ = unsafe { result::event::synchronize(ev) };
        }
    }

    fn sync_point(&self, _stream: StreamId, point: &Point, kernel: Option<&str>) -> Result<()> {
        let ev = point_event(point);
        let _section = self.section()?;
        // SAFETY: `ev` is an event of this (current) context, alive while `point` is.
        let r = unsafe { result::event::synchronize(ev) };
        // A failure after work was queued is a fault, sticky to the context: the event's
        // synchronise reports it as the stream's would.
        self.check("cuEventSynchronize", r, kernel)
    }

    fn point_reached(&self, point: &Point) -> bool {
        let ev = point_event(point);
        let Ok(_section) = self.enter() else {
            return true;
        };
        // SAFETY: `ev` is an event of this (current) context, alive while `point` is.
        let r = unsafe { sys::cuEventQuery(ev) };
        r != sys::CUresult::CUDA_ERROR_NOT_READY
    }

    fn stream_wait_point(&self, stream: StreamId, point: &Point) -> Result<()> {
        // The event is alive while `point` is (its completion holds it). The wait is for the
        // record the event has now: recording it again later, once it is back in the pool,
        // does not move it.
        self.wait_event(stream, point_event(point))
    }

    fn release_point(&self, point: Point) {
        if let PointRepr::Event(ev) = point.0
            && !self.faults.state.is_lost()
        {
            self.put_event(ev);
        }
    }

    fn event_new(&self) -> Result<EventHandle> {
        let _section = self.section()?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| self.error("cuEventCreate", e, None))?;
        Ok(EventHandle(EventRepr::Cuda(Handle(ev))))
    }

    fn event_record(&self, event: &EventHandle, stream: StreamId) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        // SAFETY: the event and `stream` belong to this (current) context and are alive.
        let r = unsafe { result::event::record(cuda(event), stream) };
        self.check("cuEventRecord", r, None)
    }

    fn event_wait(&self, event: &EventHandle) -> Result<()> {
        let _section = self.section()?;
        // SAFETY: an event of this (current) context.
        let r = unsafe { result::event::synchronize(cuda(event)) };
        self.check("cuEventSynchronize", r, None)
    }

    fn event_query(&self, event: &EventHandle) -> Result<bool> {
        let _section = self.section()?;
        // SAFETY: an event of this (current) context.
        match unsafe { result::event::query(cuda(event)) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(self.error("cuEventQuery", e, None)),
        }
    }

    fn event_elapsed(&self, start: &EventHandle, stop: &EventHandle) -> Result<f64> {
        let _section = self.section()?;
        // SAFETY: both are complete events of this (current) context, timing enabled.
        let ms = unsafe { result::event::elapsed(cuda(start), cuda(stop)) }
            .map_err(|e| self.error("cuEventElapsedTime", e, None))?;
        Ok(f64::from(ms) * 1e-3)
    }

    fn stream_wait_event(&self, stream: StreamId, event: &EventHandle) -> Result<()> {
        self.wait_event(stream, cuda(event))
    }

    fn event_drop(&self, event: &EventHandle) {
        // A lost context's events go with its reset.
        let Ok(_section) = self.section() else {
            return;
        };
        // SAFETY: created by `event_new`, destroyed once (the caller's contract); the driver
        // releases an event still pending on a stream once it completes.
        let _ = unsafe { result::event::destroy(cuda(event)) };
    }

    fn raw_stream(&self, stream: StreamId) -> Option<sys::CUstream> {
        self.stream(stream).ok()
    }
}
