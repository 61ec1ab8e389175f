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

use crate::backend::{Point, StreamId};
use crate::context::Inner;
use crate::error::Result;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One count for identities of completions and for ordering their recording: never reused, so
/// a use list can be recognised by them. Read-modify-writes only, so that one value taken
/// before another in the count's order also happens before it ([`Completion::ends_before`]).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The next value of [`NEXT_ID`].
fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::AcqRel)
}

/// The bit of [`Completion::joins`] that says no more work may join it.
const SEALED: u64 = 1 << 63;

/// A stream made to wait for a completion: its context's id, its id's bits, and the joins the
/// wait covers.
type Waiter = (u64, u64, u64);

/// The end of one launch, copy or pipelined run: a point on each stream it used.
pub(crate) struct Completion {
    gpu: Arc<Inner>,
    /// Unique among all completions of the process, taken before any point is recorded (for a
    /// lazy completion, before it can take a point or be waited for).
    id: u64,
    /// Taken from the same count once every point is recorded; `u64::MAX` for work whose end
    /// is not fixed when it is queued (lazy, or of streams berth does not know).
    recorded: u64,
    points: SmallVec<[Point; 1]>,
    /// The stream of each point.
    streams: SmallVec<[StreamId; 1]>,
    /// Work queued in a scope or by a collective: no point is recorded when it is queued (the
    /// scope at its end, or the collective's guard, waits for its stream and marks it done); a
    /// wait before then drains its stream, which covers it and anything queued before the
    /// wait. Every launch a scope queues between two of its waits shares one such completion
    /// ([`Completion::join`]).
    lazy: bool,
    /// Launches that joined a lazy completion, and [`SEALED`] once something is about to wait
    /// for its stream and mark it done: work queued after that must not join it.
    joins: AtomicU64,
    /// Work queued by another library on streams berth does not know: no point, no stream;
    /// a wait synchronises the whole context.
    whole_context: bool,
    /// Known complete: its guard waited for it, or a host access did.
    done: AtomicBool,
    /// Streams already made to wait for this work on the GPU ([`Completion::order_before`]),
    /// each named by its context's id and its stream id (a dropped context's stream ids can be
    /// reused by another), with the count of joins the wait covers: later work on such a
    /// stream runs after it, with no new wait while no work has joined since.
    before: Mutex<SmallVec<[Waiter; 2]>>,
}

impl Completion {
    /// The point every stream in `streams` has reached once the work queued on them so far is
    /// done. On failure to record (the context is lost or out of resources), every stream is
    /// synchronised instead and the error returned: nothing is left in flight then.
    pub(crate) fn record(gpu: &Arc<Inner>, streams: &[StreamId]) -> Result<Arc<Completion>> {
        let id = next_id();
        let mut points = SmallVec::with_capacity(streams.len());
        for &s in streams {
            match gpu.ops().record_point(s) {
                Ok(p) => points.push(p),
                Err(e) => {
                    let done = Completion {
                        gpu: gpu.clone(),
                        id,
                        recorded: u64::MAX,
                        points,
                        streams: SmallVec::new(),
                        lazy: false,
                        joins: AtomicU64::new(SEALED),
                        whole_context: false,
                        done: AtomicBool::new(true),
                        before: Mutex::default(),
                    };
                    for &s in streams {
                        let _ = gpu.sync(s, None);
                    }
                    drop(done);
                    return Err(e);
                }
            }
        }
        Ok(Arc::new(Completion {
            gpu: gpu.clone(),
            id,
            recorded: next_id(),
            points,
            streams: SmallVec::from_slice(streams),
            lazy: false,
            joins: AtomicU64::new(SEALED),
            whole_context: false,
            done: AtomicBool::new(false),
            before: Mutex::default(),
        }))
    }

    /// The end of work queued on `stream`, without recording a point: whoever queued it
    /// waits for the stream later and marks it done (a scope at its end, a collective's
    /// guard); a wait before then drains the stream, and ordering other work after it
    /// records a point on the stream. `stream` must stay a live stream of `gpu` as long as
    /// the completion exists, even after it is marked done (a thread may have read it as
    /// pending just before): it is the context's default stream or a pooled one (a `Stream`,
    /// a collective's), and both live as long as the context, which the completion holds. In a
    /// scope, launches join it ([`Completion::join`]) after they are queued, until something
    /// seals it to wait.
    pub(crate) fn lazy(gpu: &Arc<Inner>, stream: StreamId) -> Arc<Completion> {
        Arc::new(Completion {
            gpu: gpu.clone(),
            id: next_id(),
            recorded: u64::MAX,
            points: SmallVec::new(),
            streams: smallvec::smallvec![stream],
            lazy: true,
            joins: AtomicU64::new(0),
            whole_context: false,
            done: AtomicBool::new(false),
            before: Mutex::default(),
        })
    }

    /// The end of work another library (cudarc) queued on streams of its choosing: nothing
    /// is recorded, and a wait synchronises every stream of the context. It never counts as
    /// ordered on one stream, so berth work that conflicts with it waits on the host first.
    pub(crate) fn whole_context(gpu: &Arc<Inner>) -> Arc<Completion> {
        Arc::new(Completion {
            gpu: gpu.clone(),
            id: next_id(),
            recorded: u64::MAX,
            points: SmallVec::new(),
            streams: SmallVec::new(),
            lazy: false,
            joins: AtomicU64::new(SEALED),
            whole_context: true,
            done: AtomicBool::new(false),
            before: Mutex::default(),
        })
    }

    /// Let work already queued on this lazy completion's stream end here: `false` if it is
    /// sealed (a wait may already be past that work), and a new completion is needed.
    ///
    /// The join and [`Completion::seal`] are read-modify-writes of one atomic: a join that
    /// comes first in its order happens before the seal, so the work queued before the join
    /// is queued before the wait that follows the seal, which then covers it.
    pub(crate) fn join(&self) -> bool {
        self.joins.fetch_add(1, Ordering::AcqRel) & SEALED == 0
    }

    /// No more work may join: called before waiting for the stream and marking it done.
    pub(crate) fn seal(&self) {
        self.joins.fetch_or(SEALED, Ordering::AcqRel);
    }

    /// The guard waited for its streams (after sealing the completion): the work is complete.
    pub(crate) fn finished(&self) {
        self.done.store(true, Ordering::Release);
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The point this work ends at on `stream`, where it recorded one.
    pub(crate) fn point_on(&self, stream: StreamId) -> Option<&Point> {
        let i = self.streams.iter().position(|&s| s == stream)?;
        self.points.get(i)
    }

    /// Whether all of the work is on `stream` alone: work queued on `stream` later runs after
    /// it, with no wait needed.
    fn only_on(&self, stream: StreamId) -> bool {
        self.streams.len() == 1 && self.streams[0] == stream
    }

    /// Whether all of this work comes before every point `later` stands for, on the one stream
    /// both are on alone: a use ending here is covered by a wait for `later`.
    ///
    /// Proven only for recorded work: its points were all recorded before `later` took its
    /// identity ([`NEXT_ID`]'s order, whose read-modify-writes make that a happens-before), so
    /// on the shared stream they precede `later`'s points, recorded (or, lazy, drained or
    /// recorded) after that. A lazy completion may be joined by work queued after `later`'s
    /// point, and two recordings of several threads on one stream may land in either order, so
    /// neither counts.
    fn ends_before(&self, later: &Completion) -> bool {
        later.streams.len() == 1
            && self.only_on(later.streams[0])
            && Arc::ptr_eq(&self.gpu, &later.gpu)
            && self.recorded < later.id
    }

    /// Make work queued on `stream` of `gpu` from now on wait for this work on the GPU, without
    /// blocking the host: `false` if that cannot be done (work of streams berth does not know,
    /// a lost context or a failed driver call), and the host must wait instead.
    ///
    /// `gpu` may be another context than this work's, another device's (a peer view's launch
    /// after work pending on the owner's device, or the owner's launch after a peer's): a
    /// stream may wait for an event of any context of its backend. `gpu` is current again on
    /// return.
    ///
    /// A lazy completion has no point: one is recorded on its stream now, after everything
    /// queued there so far, this work included. Work that joins it later is not covered, but
    /// such work checks its own conflicts when it is queued.
    fn order_before(&self, gpu: &Arc<Inner>, stream: StreamId) -> bool {
        // A lost context's events may be destroyed (its primary context reset): nothing may
        // name them, and its work runs no more, which the host's wait finds at once. Points of
        // one backend mean nothing to another (a CUDA event to the simulator): the host waits.
        if self.whole_context || self.gpu.is_lost() || !gpu.ops().shares_work_with(self.gpu.ops()) {
            return false;
        }
        // Read before the point is recorded: work that joined by now was queued before it.
        let joins = self.joins.load(Ordering::Acquire) & !SEALED;
        let key = (gpu.id, stream.bits(), joins);
        if self.before.lock().expect("poisoned").contains(&key) {
            return true;
        }
        let ordered = if self.lazy {
            self.order_lazy_before(gpu, stream)
        } else {
            self.points
                .iter()
                .all(|p| gpu.ops().stream_wait_point(stream, p).is_ok())
        };
        if ordered {
            let mut before = self.before.lock().expect("poisoned");
            before.retain(|w| (w.0, w.1) != (key.0, key.1));
            before.push(key);
        }
        ordered
    }

    /// [`Completion::order_before`] for a lazy completion: a point recorded on its stream now,
    /// waited for by `stream` of `gpu`. Recording needs this work's context current (an event
    /// taken from its pool may be created there); `gpu` is made current again after.
    fn order_lazy_before(&self, gpu: &Arc<Inner>, stream: StreamId) -> bool {
        let foreign = !Arc::ptr_eq(&self.gpu, gpu);
        if foreign && self.gpu.bind().is_err() {
            // Lost since: the host's wait finds nothing to wait for.
            let _ = gpu.bind();
            return false;
        }
        let point = self.gpu.ops().record_point(self.streams[0]);
        if foreign && gpu.bind().is_err() {
            if let Ok(p) = point {
                self.gpu.ops().release_point(p);
            }
            return false;
        }
        match point {
            Ok(p) => {
                let r = gpu.ops().stream_wait_point(stream, &p);
                self.gpu.ops().release_point(p);
                r.is_ok()
            }
            Err(_) => false,
        }
    }

    /// Wait until the work is complete. A context lost to a fault runs nothing any more, so a
    /// failed wait also counts as complete.
    pub(crate) fn wait(&self) {
        if self.is_done() {
            return;
        }
        tracing::debug!("waiting for GPU work whose guard was dropped or leaked");
        if self.whole_context {
            // A lost context runs nothing more; its failure stays for the next synchronise.
            let _ = self.gpu.ops().synchronize();
            self.finished();
            return;
        }
        if self.lazy {
            // Everything queued on the stream so far, this work included (sealed first, so
            // that nothing queued after the drain starts can join it). A lost context runs
            // nothing more.
            self.seal();
            if self.gpu.bind().is_ok() {
                self.gpu.drain(self.streams[0]);
            }
        }
        for p in &self.points {
            self.gpu.ops().wait_point(p);
        }
        self.finished();
    }

    /// [`Completion::wait`] for at most `bound`: whether the work is complete. Polls its
    /// points (a lazy completion is sealed and given one on its stream), sleeping a little
    /// longer between polls, up to a millisecond. Work of streams berth does not know has no
    /// point to poll and counts as running unless already known complete.
    pub(crate) fn wait_for(&self, bound: Duration) -> bool {
        if self.is_done() {
            return true;
        }
        if self.whole_context {
            return false;
        }
        let ops = self.gpu.ops();
        let own = if self.lazy {
            self.seal();
            // A lost context runs nothing more: nothing to wait for.
            if self.gpu.bind().is_err() {
                self.finished();
                return true;
            }
            match ops.record_point(self.streams[0]) {
                Ok(p) => Some(p),
                Err(_) => return false,
            }
        } else {
            None
        };
        let points = own.as_ref().map_or(&self.points[..], std::slice::from_ref);
        let deadline = Instant::now() + bound;
        let mut pause = Duration::from_micros(20);
        let reached = loop {
            if points.iter().all(|p| ops.point_reached(p)) {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(1));
        };
        if let Some(p) = own {
            ops.release_point(p);
        }
        if reached {
            self.finished();
        }
        reached
    }
}

impl crate::fault::PendingWork for Completion {
    fn is_done(&self) -> bool {
        Completion::is_done(self)
    }
    fn wait_for(&self, bound: Duration) -> bool {
        Completion::wait_for(self, bound)
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        for p in self.points.drain(..) {
            self.gpu.ops().release_point(p);
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

/// [`Uses::ordered`] when the pending uses are not all on one stream (or there are none).
const MIXED: u64 = u64::MAX;

/// The uses of one allocation that may not have finished.
pub(crate) struct Uses {
    /// Some use may be pending: host writes, frees and reuse look here first.
    any: AtomicBool,
    /// Some exclusive use may be pending: host reads look here first.
    exclusive: AtomicBool,
    /// The stream every use in the list is on alone, or [`MIXED`]: GPU work queued there
    /// needs no wait, without looking at the list.
    ordered: AtomicU64,
    /// `id << 1 | exclusive` of the one completion the list holds, or 0: noting the same use
    /// again (a scope's launches share a completion) changes nothing, without the lock.
    sole: AtomicU64,
    list: Mutex<Vec<(Arc<Completion>, Access)>>,
}

impl Default for Uses {
    fn default() -> Self {
        Uses {
            any: AtomicBool::new(false),
            exclusive: AtomicBool::new(false),
            ordered: AtomicU64::new(MIXED),
            sole: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
        }
    }
}

/// [`Uses::sole`]'s value for one use.
fn sole_key(c: &Completion, access: Access) -> u64 {
    c.id << 1 | u64::from(access == Access::Exclusive)
}

impl Uses {
    /// Before the host reads the memory: wait for pending exclusive uses (the GPU writing it).
    /// One atomic load when there are none.
    pub(crate) fn before_host_read(&self) {
        if self.exclusive.load(Ordering::Acquire) {
            self.settle(false, None);
        }
    }

    /// Before the host writes, frees or reuses the memory: wait for every pending use.
    /// One atomic load when there are none.
    pub(crate) fn before_host_write(&self) {
        if self.any.load(Ordering::Acquire) {
            self.settle(true, None);
        }
    }

    /// Before GPU work with `access` is queued on `stream` of `gpu` (or, with `None`, on
    /// streams not named): work that would race it must be complete, or ordered before it on
    /// the GPU. A pending use that conflicts belongs to a guard that was detached or leaked,
    /// to a launch queued in a scope (whose borrow ended with its statement) or to a
    /// collective, so ordering after it never holds back work still wanted concurrently.
    ///
    /// Work queued earlier on the same stream needs nothing: the stream runs it first, which is
    /// what lets a scope queue dependent launches back to back. Work of other streams, of this
    /// context or another device's, is waited for by the stream itself (an event wait, no host
    /// wait), so a launch after a detached collective, on another stream's scope, or reading a
    /// peer's buffer that the peer's work still writes, is queued at once. Work of streams
    /// berth does not know (memory used by another library) is waited for on the host. `gpu`
    /// of `on` is current on return, as the caller bound it.
    pub(crate) fn before_gpu(&self, access: Access, on: Option<(&Arc<Inner>, StreamId)>) {
        let flag = match access {
            Access::Shared => &self.exclusive,
            Access::Exclusive => &self.any,
        };
        if flag.load(Ordering::Acquire) {
            if on.is_some_and(|(_, s)| self.ordered.load(Ordering::Acquire) == s.bits()) {
                // Every pending use is on this stream, which runs it first: what `settle`
                // would find without waiting for anything.
                return;
            }
            self.settle(access == Access::Exclusive, on);
        }
    }

    /// Note a use by queued work that ends at `done`. Earlier uses proven to end before it on
    /// its one stream are folded into it ([`Completion::ends_before`]), keeping the strongest
    /// access, so a queue of launches on one buffer keeps one entry; so is an earlier note of
    /// the same completion. Uses by lazy completions, and recordings that raced this one, stay.
    ///
    /// Noting again the one use the list holds, with no stronger access, changes nothing and
    /// takes no lock: a scope's launches share one completion. The list holds that completion
    /// until it is done, and a completion that work joined is done only once the work is.
    pub(crate) fn add(&self, done: &Arc<Completion>, access: Access) {
        let sole = self.sole.load(Ordering::Acquire);
        if sole == sole_key(done, Access::Exclusive) || sole == sole_key(done, access) {
            return;
        }
        let mut list = self.list.lock().expect("poisoned");
        let mut access = access;
        list.retain(|(c, a)| {
            if c.is_done() {
                return false;
            }
            if c.id == done.id || c.ends_before(done) {
                if *a == Access::Exclusive {
                    access = Access::Exclusive;
                }
                return false;
            }
            true
        });
        list.push((done.clone(), access));
        self.any.store(true, Ordering::Release);
        if access == Access::Exclusive {
            self.exclusive.store(true, Ordering::Release);
        }
        self.summarise(&list);
    }

    /// The pending uses by work of contexts other than the one with id `owner`: launches on
    /// other devices that read the memory in place through a peer view.
    pub(crate) fn pending_elsewhere(&self, owner: u64) -> Vec<Arc<dyn crate::fault::PendingWork>> {
        self.list
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(c, _)| !c.is_done() && c.gpu.id != owner)
            .map(|(c, _)| c.clone() as Arc<dyn crate::fault::PendingWork>)
            .collect()
    }

    /// Recompute the lock-free summaries of `list` (held locked by the caller).
    fn summarise(&self, list: &[(Arc<Completion>, Access)]) {
        let ordered = match list.first() {
            Some((c, _)) if c.streams.len() == 1 => {
                let s = c.streams[0];
                if list.iter().all(|(c, _)| c.only_on(s)) {
                    s.bits()
                } else {
                    MIXED
                }
            }
            _ => MIXED,
        };
        self.ordered.store(ordered, Ordering::Release);
        let sole = match list {
            [(c, a)] => sole_key(c, *a),
            _ => 0,
        };
        self.sole.store(sole, Ordering::Release);
    }

    /// Wait for the pending uses that conflict (exclusive ones, or all; none of those queued on
    /// the stream of `on`, which stream order completes first, and those of other streams of
    /// its context by a wait of that stream), forget the finished ones, and recompute the
    /// flags.
    fn settle(&self, all: bool, on: Option<(&Arc<Inner>, StreamId)>) {
        let waits: SmallVec<[Arc<Completion>; 4]> = self
            .list
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(c, a)| (all || *a == Access::Exclusive) && !c.is_done())
            .filter(|(c, _)| !on.is_some_and(|(_, s)| c.only_on(s)))
            .map(|(c, _)| c.clone())
            .collect();
        let mut waited = false;
        for c in &waits {
            if on.is_some_and(|(gpu, stream)| c.order_before(gpu, stream)) {
                continue;
            }
            c.wait();
            waited = true;
        }
        if let Some((gpu, _)) = on
            && waited
        {
            // A host wait binds the waited work's context; the new work is queued on `gpu`.
            let _ = gpu.bind();
        }
        if on.is_some() && !waited {
            // Everything pending is ordered before the new work on the GPU (or by its stream):
            // nothing was waited for, so nothing finished to clean up.
            return;
        }
        self.forget_finished();
    }

    /// Forget the uses known to be complete and recompute the flags.
    fn forget_finished(&self) {
        let mut list = self.list.lock().expect("poisoned");
        list.retain(|(c, _)| !c.is_done());
        self.any.store(!list.is_empty(), Ordering::Release);
        let exclusive = list.iter().any(|(_, a)| *a == Access::Exclusive);
        self.exclusive.store(exclusive, Ordering::Release);
        self.summarise(&list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::testing::{self, Job};

    /// A simulated context.
    fn simulated() -> Arc<Inner> {
        Arc::new(Inner::new(crate::backend::open::simulator()))
    }

    #[test]
    fn a_use_by_unknown_streams_is_waited_for_by_any_conflicting_access_then_forgotten() {
        let gpu = simulated();
        let uses = Uses::default();
        uses.add(&Completion::whole_context(&gpu), Access::Exclusive);
        assert!(uses.exclusive.load(Ordering::Acquire));
        // Not ordered by any one stream, even the default one: the launch waits for it.
        let c = uses.list.lock().unwrap()[0].0.clone();
        assert!(!c.only_on(gpu.default_stream));
        uses.before_gpu(Access::Shared, Some((&gpu, gpu.default_stream)));
        assert!(c.is_done());
        assert!(!uses.any.load(Ordering::Acquire));
        assert!(uses.list.lock().unwrap().is_empty());
    }

    /// Jobs queued on a simulated stream so far.
    fn position(gpu: &Inner, stream: StreamId) -> u64 {
        testing::position(gpu.ops(), stream)
    }

    /// Queue `job` on a simulated stream.
    fn enqueue(gpu: &Inner, stream: StreamId, job: Job) {
        testing::enqueue(gpu.ops(), stream, job);
    }

    #[test]
    fn a_use_on_another_stream_is_waited_for_by_the_stream_once_until_work_joins_it() {
        let gpu = simulated();
        let (side, main) = (gpu.ops().stream_new().unwrap(), gpu.default_stream);
        let uses = Uses::default();
        let c = Completion::lazy(&gpu, side);
        assert!(c.join());
        uses.add(&c, Access::Exclusive);
        let start = position(&gpu, main);
        uses.before_gpu(Access::Shared, Some((&gpu, main)));
        assert!(
            !c.is_done(),
            "the host waited for work the stream can wait for"
        );
        assert_eq!(
            position(&gpu, main),
            start + 1,
            "one wait queued on the stream"
        );
        assert_eq!(
            c.before.lock().unwrap().as_slice(),
            [(gpu.id, main.bits(), 1)]
        );
        // Nothing joined since: the stream waits for it already.
        uses.before_gpu(Access::Exclusive, Some((&gpu, main)));
        assert_eq!(
            position(&gpu, main),
            start + 1,
            "a second wait for the same work"
        );
        // Work that joins later is not covered by that wait.
        assert!(c.join());
        uses.before_gpu(Access::Shared, Some((&gpu, main)));
        assert_eq!(position(&gpu, main), start + 2);
        assert_eq!(
            c.before.lock().unwrap().as_slice(),
            [(gpu.id, main.bits(), 2)]
        );
        // The side stream's own work needs nothing.
        uses.before_gpu(Access::Exclusive, Some((&gpu, side)));
        assert!(!c.is_done());
        // Another context's stream waits for it too, on the GPU, and is told apart from this
        // context's streams by its context.
        let other = simulated();
        let theirs = position(&other, other.default_stream);
        uses.before_gpu(Access::Shared, Some((&other, other.default_stream)));
        assert!(!c.is_done(), "the host waited for another context's stream");
        assert_eq!(position(&other, other.default_stream), theirs + 1);
        assert_eq!(
            c.before.lock().unwrap().as_slice(),
            [
                (gpu.id, main.bits(), 2),
                (other.id, other.default_stream.bits(), 2)
            ]
        );
        uses.before_gpu(Access::Exclusive, Some((&other, other.default_stream)));
        assert_eq!(position(&other, other.default_stream), theirs + 1);
        // A host access waits for it and forgets it.
        uses.before_host_write();
        assert!(c.is_done());
        assert!(uses.list.lock().unwrap().is_empty());
    }

    /// A point (an event) of one context waited for by another context's stream: the stream
    /// runs nothing queued after the wait until the first stream has passed the point.
    #[test]
    fn another_contexts_stream_waits_for_a_recorded_use_on_the_gpu() {
        use std::sync::mpsc;
        use std::time::Duration;
        let mine = simulated();
        let other = simulated();
        // A job on `mine` held until the test lets it go, then the use that ends after it.
        let (release, held) = mpsc::channel::<()>();
        let job = move || {
            let _ = held.recv();
            Ok(())
        };
        enqueue(&mine, mine.default_stream, Box::new(job));
        let c = Completion::record(&mine, &[mine.default_stream]).unwrap();
        let uses = Uses::default();
        uses.add(&c, Access::Exclusive);
        // Should the host wait for the held job, it is let go after 2 s, and the test fails.
        let fallback = release.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            let _ = fallback.send(());
        });
        uses.before_gpu(Access::Shared, Some((&other, other.default_stream)));
        assert!(!c.is_done(), "the host waited");
        // A job queued on the other context after the wait runs only once `mine` has passed.
        let (ran, seen) = mpsc::channel::<()>();
        let job = move || {
            let _ = ran.send(());
            Ok(())
        };
        enqueue(&other, other.default_stream, Box::new(job));
        assert!(
            seen.recv_timeout(Duration::from_millis(200)).is_err(),
            "the other context's stream ran past the wait"
        );
        release.send(()).unwrap();
        seen.recv_timeout(Duration::from_secs(10))
            .expect("the other context's stream never resumed");
    }

    /// A job for a simulated stream that runs until the returned sender sends (or is dropped),
    /// then sets the returned flag.
    fn held_job() -> (std::sync::mpsc::Sender<()>, Arc<AtomicBool>, Job) {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let job = move || {
            let _ = held.recv();
            flag.store(true, Ordering::Release);
            Ok(())
        };
        (release, ran, Box::new(job))
    }

    /// Two threads launching on one stream: one records its completion, the other then queues
    /// its work, records after it and notes its use first. The later note of the earlier
    /// completion must not fold the other use into it: a host write waits for both.
    #[test]
    fn a_use_recorded_later_on_the_same_stream_is_not_folded_into_an_earlier_point() {
        let gpu = simulated();
        let s = gpu.default_stream;
        let early = Completion::record(&gpu, &[s]).unwrap();
        let (release, ran, job) = held_job();
        enqueue(&gpu, s, job);
        let late = Completion::record(&gpu, &[s]).unwrap();
        let uses = Uses::default();
        uses.add(&late, Access::Shared);
        uses.add(&early, Access::Shared);
        assert_eq!(uses.list.lock().unwrap().len(), 2, "a use was folded away");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            release.send(()).unwrap();
        });
        uses.before_host_write();
        assert!(
            ran.load(Ordering::Acquire),
            "the host went ahead while the later use still ran"
        );
        assert!(late.is_done() && early.is_done());
        releaser.join().unwrap();
        // Recorded one after the other, the later one covers the earlier: one entry.
        let (a, b) = (
            Completion::record(&gpu, &[s]).unwrap(),
            Completion::record(&gpu, &[s]).unwrap(),
        );
        uses.add(&a, Access::Exclusive);
        uses.add(&b, Access::Shared);
        let list = uses.list.lock().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].0.id, list[0].1), (b.id, Access::Exclusive));
    }

    /// A scope's lazy completion, noted on a buffer, is joined by work queued after another
    /// thread recorded a point on the same stream; that thread's note must not fold the lazy
    /// use into its point.
    #[test]
    fn a_lazy_use_is_not_folded_into_a_point_recorded_on_its_stream() {
        let gpu = simulated();
        let s = gpu.default_stream;
        let uses = Uses::default();
        let lazy = Completion::lazy(&gpu, s);
        assert!(lazy.join());
        uses.add(&lazy, Access::Shared);
        let point = Completion::record(&gpu, &[s]).unwrap();
        let (release, ran, job) = held_job();
        enqueue(&gpu, s, job);
        assert!(lazy.join());
        uses.add(&lazy, Access::Shared);
        uses.add(&point, Access::Shared);
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            release.send(()).unwrap();
        });
        uses.before_host_write();
        assert!(
            ran.load(Ordering::Acquire),
            "the host went ahead while work of the lazy use still ran"
        );
        assert!(lazy.is_done());
        releaser.join().unwrap();
        // A point recorded before a lazy completion began is covered by it.
        let before = Completion::record(&gpu, &[s]).unwrap();
        let lazy = Completion::lazy(&gpu, s);
        assert!(lazy.join());
        uses.add(&before, Access::Exclusive);
        uses.add(&lazy, Access::Shared);
        let list = uses.list.lock().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].0.id, list[0].1), (lazy.id, Access::Exclusive));
    }

    /// A use pending on one backend, before work queued on a context of another: the other
    /// backend's stream cannot wait for its point (a CUDA event means nothing to the
    /// simulator), so the host waits. A simulated context posing as a CUDA one stands in for
    /// the GPU.
    #[test]
    fn a_use_on_another_backend_is_waited_for_by_the_host() {
        use crate::backend::Backend;
        let sim = simulated();
        let cuda = Arc::new(Inner::new(testing::posing_as(Backend::Cuda)));
        for (mine, theirs) in [(&sim, &cuda), (&cuda, &sim)] {
            let uses = Uses::default();
            let recorded = Completion::record(mine, &[mine.default_stream]).unwrap();
            let lazy = Completion::lazy(mine, mine.ops().stream_new().unwrap());
            assert!(lazy.join());
            uses.add(&recorded, Access::Exclusive);
            uses.add(&lazy, Access::Exclusive);
            let start = position(theirs, theirs.default_stream);
            uses.before_gpu(Access::Shared, Some((theirs, theirs.default_stream)));
            assert!(recorded.is_done() && lazy.is_done(), "not waited for");
            assert_eq!(
                position(theirs, theirs.default_stream),
                start,
                "a stream of another backend was made to wait for a point"
            );
        }
    }

    #[test]
    fn a_use_by_unknown_streams_is_never_waited_for_by_a_stream() {
        let gpu = simulated();
        let uses = Uses::default();
        let c = Completion::whole_context(&gpu);
        uses.add(&c, Access::Shared);
        let start = position(&gpu, gpu.default_stream);
        uses.before_gpu(Access::Exclusive, Some((&gpu, gpu.default_stream)));
        assert!(c.is_done());
        assert_eq!(position(&gpu, gpu.default_stream), start);
    }

    #[test]
    fn a_shared_use_by_unknown_streams_does_not_hold_up_host_reads() {
        let gpu = simulated();
        let uses = Uses::default();
        let c = Completion::whole_context(&gpu);
        uses.add(&c, Access::Shared);
        uses.before_host_read();
        assert!(!c.is_done(), "a read waited for readers");
        uses.before_host_write();
        assert!(c.is_done());
    }
}
