//! What the GPU may still do with an allocation. Every launch, copy or pipelined run leaves a
//! use on each allocation it touches: a [`Completion`] (where its streams will be once the work
//! is done) and whether the launch borrowed the memory shared or exclusively. Every host read,
//! host write, free and reuse of the memory first waits for the uses it conflicts with
//! ([`Uses`]).
//!
//! Normally that wait finds nothing to do: a guard keeps its memory borrowed until its work is
//! complete, so by the time the host can touch the memory again the completion is marked done.
//! A guard leaked with `mem::forget` (or an `Rc` cycle) ends the borrows without completing;
//! then the use is still pending, and the host access waits for the GPU instead of racing it.
//! The reasoning is in `docs/design-notes.md` ("Soundness when guards are leaked").

use crate::backend::Point;
use crate::gpu::Inner;
use cudarc::driver::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The end of one launch, copy or pipelined run: a point on each stream it used.
pub(crate) struct Completion {
    gpu: Arc<Inner>,
    points: Vec<Point>,
    /// Known complete: its guard waited for it, or a host access did.
    done: AtomicBool,
}

impl Completion {
    /// The point every stream in `streams` has reached once the work queued on them so far is
    /// done. On failure to record (the context is lost or out of resources), every stream is
    /// synchronised instead and the error returned: nothing is left in flight then.
    pub(crate) fn record(
        gpu: &Arc<Inner>,
        streams: &[sys::CUstream],
    ) -> crate::Result<Arc<Completion>> {
        let mut points = Vec::with_capacity(streams.len());
        for &s in streams {
            match gpu.ops().record_point(gpu, s) {
                Ok(p) => points.push(p),
                Err(e) => {
                    let done = Completion {
                        gpu: gpu.clone(),
                        points,
                        done: AtomicBool::new(true),
                    };
                    for &s in streams {
                        let _ = crate::stream::sync(gpu, s, None);
                    }
                    drop(done);
                    return Err(e);
                }
            }
        }
        Ok(Arc::new(Completion {
            gpu: gpu.clone(),
            points,
            done: AtomicBool::new(false),
        }))
    }

    /// The guard waited for its streams: the work is complete.
    pub(crate) fn finished(&self) {
        self.done.store(true, Ordering::Release);
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Wait until the work is complete. A context lost to a fault runs nothing any more, so a
    /// failed wait also counts as complete.
    fn wait(&self) {
        if self.is_done() {
            return;
        }
        tracing::debug!("waiting for GPU work whose guard was leaked");
        for p in &self.points {
            self.gpu.ops().wait_point(&self.gpu, p);
        }
        self.finished();
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        for p in self.points.drain(..) {
            self.gpu.ops().release_point(&self.gpu, p);
        }
    }
}

/// How a launch borrowed an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Shared (`&`): the GPU reads it (or, for signals, writes it only atomically).
    Shared,
    /// Exclusive (`&mut`): the GPU may write it.
    Exclusive,
}

/// The uses of one allocation that may not have finished.
#[derive(Default)]
pub(crate) struct Uses {
    /// Some use may be pending: host writes, frees and reuse look here first.
    any: AtomicBool,
    /// Some exclusive use may be pending: host reads look here first.
    exclusive: AtomicBool,
    list: Mutex<Vec<(Arc<Completion>, Access)>>,
}

impl Uses {
    /// Before the host reads the memory: wait for pending exclusive uses (the GPU writing it).
    /// One atomic load when there are none.
    pub(crate) fn before_host_read(&self) {
        if self.exclusive.load(Ordering::Acquire) {
            self.settle(false);
        }
    }

    /// Before the host writes, frees or reuses the memory: wait for every pending use.
    /// One atomic load when there are none.
    pub(crate) fn before_host_write(&self) {
        if self.any.load(Ordering::Acquire) {
            self.settle(true);
        }
    }

    /// Before GPU work with `access` is queued on the memory: work that would race it must be
    /// complete. A pending use that conflicts can only be leaked (a live guard's borrow would
    /// forbid this one), so waiting for it never waits for work still wanted concurrently.
    pub(crate) fn before_gpu(&self, access: Access) {
        match access {
            Access::Shared => self.before_host_read(),
            Access::Exclusive => self.before_host_write(),
        }
    }

    /// Note a use by queued work that ends at `done`.
    pub(crate) fn add(&self, done: &Arc<Completion>, access: Access) {
        let mut list = self.list.lock().expect("poisoned");
        list.retain(|(c, _)| !c.is_done());
        list.push((done.clone(), access));
        self.any.store(true, Ordering::Release);
        if access == Access::Exclusive {
            self.exclusive.store(true, Ordering::Release);
        }
    }

    /// Wait for the pending uses that conflict (exclusive ones, or all), forget the finished
    /// ones, and recompute the flags.
    fn settle(&self, all: bool) {
        let waits: Vec<Arc<Completion>> = self
            .list
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(c, a)| (all || *a == Access::Exclusive) && !c.is_done())
            .map(|(c, _)| c.clone())
            .collect();
        for c in &waits {
            c.wait();
        }
        let mut list = self.list.lock().expect("poisoned");
        list.retain(|(c, _)| !c.is_done());
        self.any.store(!list.is_empty(), Ordering::Release);
        let exclusive = list.iter().any(|(_, a)| *a == Access::Exclusive);
        self.exclusive.store(exclusive, Ordering::Release);
    }
}
