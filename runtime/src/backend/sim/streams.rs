//! Streams of the CPU simulator: worker threads running queued work in order
//! (`worker.rs`). A completion point or an event is a stream's queue position; an event
//! also notes the host clock when the stream gets there, so waits and stream ordering behave as
//! on a GPU and elapsed times are host time.

use crate::backend::sim::Simulator;
use crate::backend::sim::worker::{SimMark, SimStream};
use crate::backend::{EventHandle, EventRepr, Point, PointRepr, StreamId, StreamOps};
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

fn mark(event: &EventHandle) -> Option<SimMark> {
    match &event.0 {
        EventRepr::Sim(m) => m.lock().expect("poisoned").clone(),
        EventRepr::Cuda(_) => unreachable!("a CUDA event given to the simulator"),
    }
}

/// The stream and position of a point of this backend.
fn sim_point(point: &Point) -> (&Arc<SimStream>, u64) {
    match &point.0 {
        PointRepr::Sim(stream, position) => (stream, *position),
        PointRepr::Event(_) => unreachable!("a CUDA point given to the simulator"),
    }
}

impl Simulator {
    /// Make later jobs of `stream` wait until `other` has run its first `position` jobs.
    fn wait_for(&self, stream: StreamId, other: Arc<SimStream>, position: u64) -> Result<()> {
        // The position is one already queued on `other`: waiting for it from a job queued
        // later cannot form a cycle.
        let job = move || {
            other.wait_until(position);
            Ok(())
        };
        self.enqueue(stream, Box::new(job))
    }
}

impl StreamOps for Simulator {
    fn default_stream(&self) -> StreamId {
        self.stream_id(0).expect("index 0 is an id")
    }

    fn stream_new(&self) -> Result<StreamId> {
        self.stream_id(self.streams.add())
    }

    fn stream_drop(&self, _stream: StreamId) {
        // Its thread ends with the context (once nothing names it any more).
        self.streams.settle();
    }

    fn sync(&self, stream: StreamId, _kernel: Option<&str>) -> Result<()> {
        match self.index(stream) {
            Some(i) => self.streams.sync(i),
            None => self.stream(stream).map(|_| ()),
        }
    }

    fn idle(&self, stream: StreamId) -> bool {
        self.index(stream).is_none_or(|i| self.streams.idle(i))
    }

    fn keep_failure(&self, stream: StreamId, e: Error) {
        if let Some(i) = self.index(stream) {
            self.streams.keep_failure(i, e);
        }
    }

    fn record_point(&self, stream: StreamId) -> Result<Point> {
        let s = self.stream(stream)?;
        Ok(Point(PointRepr::Sim(s.clone(), s.position())))
    }

    fn wait_point(&self, point: &Point) {
        let (stream, position) = sim_point(point);
        stream.wait_until(position);
    }

    fn sync_point(&self, stream: StreamId, point: &Point, _kernel: Option<&str>) -> Result<()> {
        let (s, position) = sim_point(point);
        s.wait_until(position);
        match self.index(stream) {
            Some(i) => self.streams.fault.report(i, position),
            None => self.stream(stream).map(|_| ()),
        }
    }

    fn point_reached(&self, point: &Point) -> bool {
        let (stream, position) = sim_point(point);
        stream.reached(position)
    }

    fn stream_wait_point(&self, stream: StreamId, point: &Point) -> Result<()> {
        let (other, position) = sim_point(point);
        self.wait_for(stream, other.clone(), position)
    }

    fn release_point(&self, _point: Point) {}

    fn event_new(&self) -> Result<EventHandle> {
        Ok(EventHandle(EventRepr::Sim(Mutex::new(None))))
    }

    fn event_record(&self, event: &EventHandle, stream: StreamId) -> Result<()> {
        let EventRepr::Sim(last) = &event.0 else {
            unreachable!("a CUDA event given to the simulator")
        };
        let stream = self.stream(stream)?;
        let at: Arc<OnceLock<Instant>> = Arc::default();
        let stamp = at.clone();
        let job = move || {
            let _ = stamp.set(Instant::now());
            Ok(())
        };
        stream.push(Box::new(job));
        *last.lock().expect("poisoned") = Some(SimMark {
            stream: stream.clone(),
            position: stream.position(),
            at,
        });
        Ok(())
    }

    fn event_wait(&self, event: &EventHandle) -> Result<()> {
        if let Some(m) = mark(event) {
            m.stream.wait_until(m.position);
        }
        self.streams.fault.check()
    }

    fn event_query(&self, event: &EventHandle) -> Result<bool> {
        Ok(mark(event).is_none_or(|m| m.stream.reached(m.position)))
    }

    fn event_elapsed(&self, start: &EventHandle, stop: &EventHandle) -> Result<f64> {
        let at = |e: &EventHandle| mark(e).and_then(|m| m.at.get().copied());
        let (Some(a), Some(b)) = (at(start), at(stop)) else {
            return Err(Error::Usage(
                "Event::elapsed: a failure on the event's stream skipped it, so it has no time \
                 (the stream's synchronise reports the failure)"
                    .into(),
            ));
        };
        Ok(match b.checked_duration_since(a) {
            Some(d) => d.as_secs_f64(),
            None => -(a - b).as_secs_f64(),
        })
    }

    fn stream_wait_event(&self, stream: StreamId, event: &EventHandle) -> Result<()> {
        match mark(event) {
            Some(m) => self.wait_for(stream, m.stream, m.position),
            None => Ok(()),
        }
    }

    fn event_drop(&self, _event: &EventHandle) {}

    fn raw_stream(&self, _stream: StreamId) -> Option<sys::CUstream> {
        None
    }
}
