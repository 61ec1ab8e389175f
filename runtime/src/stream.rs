//! Streams: ordered queues of GPU work. A [`Gpu`] queues on its default stream, a [`Stream`]
//! on its own; both are [`Queue`]s.

use crate::backend::StreamId;
use crate::context::Inner;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::queue::{Mode, Queue, QueueRef, sealed};
use cudarc::driver::CudaStream;
use std::sync::{Arc, OnceLock};

/// A stream of the GPU: work queued on one stream runs in order; work on different streams
/// may overlap.
pub struct Stream {
    pub(crate) gpu: Arc<Inner>,
    pub(crate) handle: StreamId,
    /// cudarc's view of the stream, made on first use by interop; shared with cudarc, so the
    /// handle is destroyed only when this is the last reference (see `Drop`).
    pub(crate) cudarc: OnceLock<Arc<CudaStream>>,
}

impl Gpu {
    /// A new stream on this GPU (from the context's pool of idle streams when it has one).
    pub fn stream(&self) -> Result<Stream> {
        self.inner.bind()?;
        Ok(Stream {
            gpu: self.inner.clone(),
            handle: self.inner.take_stream()?,
            cudarc: OnceLock::new(),
        })
    }
}

impl Stream {
    /// Wait for all work queued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.sync(self.handle, None)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(mut c) = self.cudarc.take()
            && Arc::get_mut(&mut c).is_none()
        {
            // cudarc still holds the stream (a clone of its handle, a slice allocated on it):
            // destroying it now would leave cudarc a dangling handle. Leak it instead.
            tracing::warn!(stream = ?self.handle, "stream still held by cudarc when dropped: not destroyed");
            return;
        }
        if self.gpu.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        // Back to the context's pool, not destroyed: a stream berth has named stays a live
        // stream of its context as long as the context, so a completion still naming it (work
        // a scope queued here, marked done by the scope while another thread is about to
        // order its own work after it) never reaches a destroyed handle. Its work is waited
        // for first, and a failure nobody received is dropped with it, so the next user starts
        // on a clean stream.
        if self.gpu.sync(self.handle, None).is_ok() {
            self.gpu.put_stream(self.handle);
        }
    }
}

impl sealed::Sealed for Gpu {}
impl sealed::Sealed for Stream {}

impl Queue for Gpu {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(&self.inner, self.inner.default_stream, Mode::Wait)
    }
}

impl Queue for Stream {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(&self.gpu, self.handle, Mode::Wait)
    }
}

#[cfg(test)]
mod tests {
    use crate::gpu::Gpu;

    #[test]
    fn a_dropped_stream_goes_back_to_the_pool_and_is_never_destroyed() {
        let gpu = Gpu::simulator();
        let a = gpu.stream().unwrap();
        let handle = a.handle;
        drop(a);
        let b = gpu.stream().unwrap();
        assert_eq!(b.handle, handle, "the dropped stream was not reused");
        let c = gpu.stream().unwrap();
        assert_ne!(c.handle, handle, "one stream handed out twice");
    }

    /// Threads taking and dropping streams at once: no stream is held by two of them, and the
    /// pool never holds more streams than were alive at once.
    #[test]
    fn streams_taken_and_dropped_by_several_threads_are_never_shared() {
        use std::collections::HashSet;
        use std::sync::Mutex;
        const THREADS: usize = 8;
        let gpu = Gpu::simulator();
        let live = Mutex::new(HashSet::new());
        let seen = Mutex::new(HashSet::new());
        std::thread::scope(|t| {
            for _ in 0..THREADS {
                t.spawn(|| {
                    for _ in 0..200 {
                        let s = gpu.stream().unwrap();
                        let h = s.handle;
                        assert!(live.lock().unwrap().insert(h), "a stream held twice");
                        seen.lock().unwrap().insert(h);
                        std::thread::yield_now();
                        assert!(live.lock().unwrap().remove(&h));
                        drop(s);
                    }
                });
            }
        });
        let made = seen.lock().unwrap().len();
        assert!(
            (1..=THREADS).contains(&made),
            "{made} streams made for {THREADS} threads"
        );
    }
}
