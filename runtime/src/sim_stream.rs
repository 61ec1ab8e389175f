//! The simulator's streams: each is a worker thread running its queued work in order, so a
//! simulated kernel runs while the host goes on — as on a GPU, where launches and copies are
//! asynchronous. Host code that talks to a running kernel (signals in mapped memory) needs
//! exactly that.
//!
//! A job that fails (a panicking kernel, a simulator check) makes the stream skip the rest of
//! its queue, as a fault stops a GPU stream; the first failure is returned by the next
//! synchronise of the stream.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, mpsc};
use std::time::Instant;

/// Work for a simulated stream.
pub(crate) type Job = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

#[derive(Default)]
struct Progress {
    submitted: u64,
    done: u64,
    failure: Option<Error>,
    failed: bool,
}

/// One simulated stream: a queue and the thread draining it.
pub(crate) struct SimStream {
    tx: Mutex<mpsc::Sender<Job>>,
    progress: Arc<(Mutex<Progress>, Condvar)>,
}

impl SimStream {
    fn start() -> Arc<SimStream> {
        let (tx, rx) = mpsc::channel::<Job>();
        let progress: Arc<(Mutex<Progress>, Condvar)> = Arc::default();
        let p = progress.clone();
        std::thread::Builder::new()
            .name("berth-sim-stream".into())
            .spawn(move || {
                for job in rx {
                    let skip = p.0.lock().expect("poisoned").failed;
                    let r = if skip { Ok(()) } else { job() };
                    let mut g = p.0.lock().expect("poisoned");
                    if let Err(e) = r {
                        g.failed = true;
                        g.failure.get_or_insert(e);
                    }
                    g.done += 1;
                    p.1.notify_all();
                }
            })
            .expect("spawning a simulator stream thread");
        Arc::new(SimStream {
            tx: Mutex::new(tx),
            progress,
        })
    }

    /// Queue `job` after everything queued so far.
    pub(crate) fn push(&self, job: Job) {
        self.progress.0.lock().expect("poisoned").submitted += 1;
        let _ = self.tx.lock().expect("poisoned").send(job);
    }

    /// How many jobs were queued so far: the position of the last one, which
    /// [`SimStream::wait_until`] waits for.
    pub(crate) fn position(&self) -> u64 {
        self.progress.0.lock().expect("poisoned").submitted
    }

    /// Wait until the first `position` jobs have run (or been skipped after a failure).
    pub(crate) fn wait_until(&self, position: u64) {
        let (m, cv) = &*self.progress;
        let mut g = m.lock().expect("poisoned");
        while g.done < position {
            g = cv.wait(g).expect("poisoned");
        }
    }

    /// Whether the first `position` jobs have run (or been skipped).
    pub(crate) fn reached(&self, position: u64) -> bool {
        self.progress.0.lock().expect("poisoned").done >= position
    }

    /// Whether everything queued so far has run (or been skipped after a failure).
    fn idle(&self) -> bool {
        let g = self.progress.0.lock().expect("poisoned");
        g.done >= g.submitted
    }

    /// Wait until everything queued so far has run; `take` returns (and clears) the first
    /// failure.
    fn drain(&self, take: bool) -> Result<()> {
        let (m, cv) = &*self.progress;
        let mut g = m.lock().expect("poisoned");
        let target = g.submitted;
        while g.done < target {
            g = cv.wait(g).expect("poisoned");
        }
        if !take {
            return Ok(());
        }
        g.failed = false;
        match g.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Where a simulated event was last recorded: a stream's position, and the host clock when
/// the stream got there.
#[derive(Clone)]
pub(crate) struct SimMark {
    pub(crate) stream: Arc<SimStream>,
    pub(crate) position: u64,
    /// Unset if the stream skipped the mark after a failure.
    pub(crate) at: Arc<OnceLock<Instant>>,
}

/// The simulated streams of one context, by stream handle value.
#[derive(Default)]
pub(crate) struct SimStreams {
    streams: Mutex<HashMap<usize, Arc<SimStream>>>,
}

/// A fresh, never-dereferenced handle value for a simulated stream.
pub(crate) fn new_handle() -> *mut cudarc::driver::sys::CUstream_st {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) as *mut _
}

impl SimStreams {
    fn get(&self, handle: usize) -> Arc<SimStream> {
        self.streams
            .lock()
            .expect("poisoned")
            .entry(handle)
            .or_insert_with(SimStream::start)
            .clone()
    }

    /// Queue `job` on the stream `handle`.
    pub(crate) fn enqueue(&self, handle: usize, job: Job) {
        self.get(handle).push(job);
    }

    /// The stream `handle` and its current position (everything queued on it so far).
    pub(crate) fn position(&self, handle: usize) -> (Arc<SimStream>, u64) {
        let s = self.get(handle);
        let p = s.position();
        (s, p)
    }

    /// Wait for the stream `handle`; its first failure, if any.
    pub(crate) fn sync(&self, handle: usize) -> Result<()> {
        let s = self.streams.lock().expect("poisoned").get(&handle).cloned();
        match s {
            Some(s) => s.drain(true),
            None => Ok(()),
        }
    }

    /// Whether the stream `handle` has run everything queued on it.
    pub(crate) fn idle(&self, handle: usize) -> bool {
        let s = self.streams.lock().expect("poisoned").get(&handle).cloned();
        s.is_none_or(|s| s.idle())
    }

    /// Put back a failure taken from the stream `handle` that nobody received: the next
    /// synchronise of the stream reports it (later work is skipped until then, as after the
    /// failure itself).
    pub(crate) fn keep_failure(&self, handle: usize, e: Error) {
        let s = self.get(handle);
        let mut g = s.progress.0.lock().expect("poisoned");
        g.failed = true;
        g.failure.get_or_insert(e);
    }

    /// Wait for every stream, keeping their failures for their own synchronise.
    pub(crate) fn settle(&self) {
        let all: Vec<Arc<SimStream>> = self
            .streams
            .lock()
            .expect("poisoned")
            .values()
            .cloned()
            .collect();
        for s in all {
            let _ = s.drain(false);
        }
    }

    /// Forget a stream (its thread ends once its queue is empty).
    pub(crate) fn remove(&self, handle: usize) {
        self.streams.lock().expect("poisoned").remove(&handle);
    }
}
