//! The simulator's streams: each is a worker thread running its queued work in order, so a
//! simulated kernel runs while the host goes on — as on a GPU, where launches and copies are
//! asynchronous. Host code that talks to a running kernel (signals in mapped memory) needs
//! exactly that.
//!
//! A job that fails (a panicking kernel, a simulator check) poisons the whole simulated context,
//! as a fault poisons a GPU's: every stream skips the rest of its queue, work queued later is
//! refused, and every later synchronise reports the fault. The failure itself goes to the first
//! synchronise of its own stream that covers it; every other wait gets
//! [`Error::ContextLost`] naming it, so no operation reports another's failure as its own.

use crate::error::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, OnceLock, mpsc};
use std::time::Instant;

/// Work for a simulated stream.
pub(crate) type Job = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

#[derive(Default)]
struct Progress {
    submitted: u64,
    done: u64,
}

/// The first failure of a simulated context's work.
struct Failure {
    /// The stream it happened on, and the job's position there.
    stream: usize,
    position: u64,
    /// The error, until the first synchronise of its stream that covers it takes it.
    error: Option<Error>,
    /// What every other wait reports ([`Error::ContextLost`]'s text).
    why: String,
}

/// Whether a simulated context is poisoned, shared by its streams.
#[derive(Default)]
pub(crate) struct SimFault {
    failure: Mutex<Option<Failure>>,
}

impl SimFault {
    /// Whether a job may run: not once the context is poisoned (then it is skipped).
    fn begin(&self) -> bool {
        self.failure.lock().expect("poisoned").is_none()
    }

    /// A job that ran ended with `r`, at `position` of stream `stream`.
    fn end(&self, stream: usize, position: u64, r: Result<()>) {
        let mut g = self.failure.lock().expect("poisoned");
        if let Err(e) = r
            && g.is_none()
        {
            tracing::error!(error = %e, "simulated context lost");
            *g = Some(Failure {
                stream,
                position,
                why: e.to_string(),
                error: Some(e),
            });
        }
    }

    /// The error for a wait that covered the first `position` jobs of `stream`: the failure
    /// itself if it happened there and nobody took it yet, else [`Error::ContextLost`] naming
    /// it; `Ok` while the context is healthy.
    pub(crate) fn report(&self, stream: usize, position: u64) -> Result<()> {
        let mut g = self.failure.lock().expect("poisoned");
        let Some(f) = &mut *g else {
            return Ok(());
        };
        if f.stream == stream
            && f.position <= position
            && let Some(e) = f.error.take()
        {
            return Err(e);
        }
        Err(Error::ContextLost(f.why.clone()))
    }

    /// The error for a wait that covered all the context's work: the failure itself if nobody
    /// took it yet, else [`Error::ContextLost`] naming it; `Ok` while the context is healthy.
    pub(crate) fn report_all(&self) -> Result<()> {
        let mut g = self.failure.lock().expect("poisoned");
        match &mut *g {
            None => Ok(()),
            Some(f) => Err(f
                .error
                .take()
                .unwrap_or_else(|| Error::ContextLost(f.why.clone()))),
        }
    }

    /// [`Error::ContextLost`] once the context is poisoned: new work is refused.
    pub(crate) fn check(&self) -> Result<()> {
        match &*self.failure.lock().expect("poisoned") {
            Some(f) => Err(Error::ContextLost(f.why.clone())),
            None => Ok(()),
        }
    }

    /// Whether a failure poisoned the context.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.failure.lock().expect("poisoned").is_some()
    }

    /// Give a failure taken from `stream` that nobody received back to it, for the next
    /// synchronise of the stream.
    fn keep(&self, stream: usize, e: Error) {
        if matches!(e, Error::ContextLost(_)) {
            return;
        }
        let mut g = self.failure.lock().expect("poisoned");
        if let Some(f) = &mut *g
            && f.stream == stream
            && f.error.is_none()
        {
            f.error = Some(e);
        }
    }
}

/// One simulated stream: a queue and the thread draining it.
pub(crate) struct SimStream {
    tx: Mutex<mpsc::Sender<Job>>,
    progress: Arc<(Mutex<Progress>, Condvar)>,
}

impl SimStream {
    fn start(index: usize, fault: Arc<SimFault>) -> Arc<SimStream> {
        let (tx, rx) = mpsc::channel::<Job>();
        let progress: Arc<(Mutex<Progress>, Condvar)> = Arc::default();
        let p = progress.clone();
        std::thread::Builder::new()
            .name("berth-sim-stream".into())
            .spawn(move || {
                let mut position = 0;
                for job in rx {
                    position += 1;
                    if fault.begin() {
                        let r = job();
                        fault.end(index, position, r);
                    }
                    let mut g = p.0.lock().expect("poisoned");
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

    /// Wait until everything queued so far has run (or been skipped); the position reached.
    fn drain(&self) -> u64 {
        let (m, cv) = &*self.progress;
        let mut g = m.lock().expect("poisoned");
        let target = g.submitted;
        while g.done < target {
            g = cv.wait(g).expect("poisoned");
        }
        target
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

/// The simulated streams of one context, by index (a [`StreamId`](crate::backend::StreamId)'s
/// in this context), and the context's fault. A stream's thread starts with its first work;
/// the threads end once the context and every completion point naming them are gone.
#[derive(Default)]
pub(crate) struct SimStreams {
    streams: boxcar::Vec<OnceLock<Arc<SimStream>>>,
    pub(crate) fault: Arc<SimFault>,
}

impl SimStreams {
    /// A new stream: its index.
    pub(crate) fn add(&self) -> usize {
        self.streams.push(OnceLock::new())
    }

    /// The stream `index`, started if it was not; `None` if there is no such stream.
    pub(crate) fn get(&self, index: usize) -> Option<&Arc<SimStream>> {
        let slot = self.streams.get(index)?;
        Some(slot.get_or_init(|| SimStream::start(index, self.fault.clone())))
    }

    /// The stream `index` if it has started (had work queued).
    fn started(&self, index: usize) -> Option<&Arc<SimStream>> {
        self.streams.get(index)?.get()
    }

    /// Wait for the stream `index`; the context's fault, if any ([`SimFault::report`]).
    pub(crate) fn sync(&self, index: usize) -> Result<()> {
        let reached = self.started(index).map_or(0, |s| s.drain());
        self.fault.report(index, reached)
    }

    /// Whether the stream `index` has run everything queued on it.
    pub(crate) fn idle(&self, index: usize) -> bool {
        self.started(index).is_none_or(|s| s.idle())
    }

    /// Put back a failure taken from the stream `index` that nobody received: the next
    /// synchronise of the stream reports it.
    pub(crate) fn keep_failure(&self, index: usize, e: Error) {
        self.fault.keep(index, e);
    }

    /// Wait for every stream, keeping a failure for its own stream's synchronise.
    pub(crate) fn settle(&self) {
        for (_, slot) in self.streams.iter() {
            if let Some(s) = slot.get() {
                s.drain();
            }
        }
    }
}
