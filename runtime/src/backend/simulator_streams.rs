//! Streams of the CPU simulator: worker threads running queued work in order
//! (`sim_stream.rs`). A completion point or an event is a stream's queue position; an event
//! also notes the host clock when the stream gets there, so waits and stream ordering behave as
//! on a GPU and elapsed times are host time.

use crate::backend::simulator::Simulator;
use crate::backend::{EventHandle, Point, StreamOps};
use crate::error::{Error, Result};
use crate::sim_stream::{SimMark, SimStream, new_handle};
use cudarc::driver::sys;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

fn mark(event: &EventHandle) -> Option<SimMark> {
    match event {
        EventHandle::Sim(m) => m.lock().expect("poisoned").clone(),
        EventHandle::Cuda(_) => unreachable!("a CUDA event given to the simulator"),
    }
}

impl Simulator {
    /// Make later jobs of `stream` wait until `other` has run its first `position` jobs.
    fn wait_for(&self, stream: sys::CUstream, other: Arc<SimStream>, position: u64) {
        // The position is one already queued on `other`: waiting for it from a job queued
        // later cannot form a cycle.
        let job = move || {
            other.wait_until(position);
            Ok(())
        };
        self.streams.enqueue(stream as usize, Box::new(job));
    }
}

impl StreamOps for Simulator {
    fn default_stream(&self) -> sys::CUstream {
        self.default_stream
    }

    fn stream_new(&self) -> Result<sys::CUstream> {
        Ok(new_handle())
    }

    fn stream_drop(&self, stream: sys::CUstream) {
        self.streams.settle();
        self.streams.remove(stream as usize);
    }

    fn sync(&self, stream: sys::CUstream, _kernel: Option<&str>) -> Result<()> {
        self.streams.sync(stream as usize)
    }

    fn idle(&self, stream: sys::CUstream) -> bool {
        self.streams.idle(stream as usize)
    }

    fn keep_failure(&self, stream: sys::CUstream, e: Error) {
        self.streams.keep_failure(stream as usize, e);
    }

    fn record_point(&self, stream: sys::CUstream) -> Result<Point> {
        let (s, position) = self.streams.position(stream as usize);
        Ok(Point::Sim(s, position))
    }

    fn wait_point(&self, point: &Point) {
        if let Point::Sim(stream, position) = point {
            stream.wait_until(*position);
        }
    }

    fn point_reached(&self, point: &Point) -> bool {
        let Point::Sim(stream, position) = point else {
            unreachable!("a CUDA point given to the simulator")
        };
        stream.reached(*position)
    }

    fn stream_wait_point(&self, stream: sys::CUstream, point: &Point) -> Result<()> {
        let Point::Sim(other, position) = point else {
            unreachable!("a CUDA point given to the simulator")
        };
        self.wait_for(stream, other.clone(), *position);
        Ok(())
    }

    fn release_point(&self, _point: Point) {}

    fn event_new(&self) -> Result<EventHandle> {
        Ok(EventHandle::Sim(Mutex::new(None)))
    }

    fn event_record(&self, event: &EventHandle, stream: sys::CUstream) -> Result<()> {
        let EventHandle::Sim(last) = event else {
            unreachable!("a CUDA event given to the simulator")
        };
        let at: Arc<OnceLock<Instant>> = Arc::default();
        let stamp = at.clone();
        let job = move || {
            let _ = stamp.set(Instant::now());
            Ok(())
        };
        self.streams.enqueue(stream as usize, Box::new(job));
        let (stream, position) = self.streams.position(stream as usize);
        *last.lock().expect("poisoned") = Some(SimMark {
            stream,
            position,
            at,
        });
        Ok(())
    }

    fn event_wait(&self, event: &EventHandle) -> Result<()> {
        if let Some(m) = mark(event) {
            m.stream.wait_until(m.position);
        }
        Ok(())
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

    fn stream_wait_event(&self, stream: sys::CUstream, event: &EventHandle) -> Result<()> {
        if let Some(m) = mark(event) {
            self.wait_for(stream, m.stream, m.position);
        }
        Ok(())
    }

    fn event_drop(&self, _event: &EventHandle) {}
}
