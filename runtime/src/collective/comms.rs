//! A device set's communicators above the library that makes them (NCCL on GPUs): the member
//! streams their collectives run on, the collectives still pending there, and the rules that
//! keep a lost member from hanging the others.
//!
//! A collective's part on one member waits for the parts of every other member. A member that
//! is lost never runs its part, so the others would wait forever: a collective is queued only
//! once every member is seen alive, a group that queued parts for only some members is torn
//! down at once, and the teardown aborts the communicators (which ends parts still queued or
//! running) before waiting for any stream whenever a member is lost. A guard's wait
//! ([`wait_parts`]) polls the streams and does the same once it sees a member lost.
//!
//! Without the `nccl` feature only [`wait_parts`] is used (on the simulator a collective is
//! complete when its call returns); the rest is tested with stand-in communicators.
#![cfg_attr(not(feature = "nccl"), allow(dead_code))]

use crate::backend::StreamId;
use crate::context::Inner;
use crate::devices::DeviceSet;
use crate::error::Result;
use crate::fault::Borrow;
use crate::track::Completion;
use std::any::Any;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Each member's collective stream and the end of the work a collective queued there, in
/// member order.
pub(crate) type Members = Vec<(StreamId, Arc<Completion>)>;

/// What the collectives need of a library's communicators, one per member of the set.
pub(crate) trait Communicators: Send + 'static {
    /// One member's communicator.
    type Comm: Copy;
    /// Member `i`'s communicator.
    fn comm(&self, i: usize) -> Self::Comm;
    /// Start a group: the parts given until [`Communicators::group_end`] are queued together.
    fn group_start(&mut self) -> Result<()>;
    /// Queue the group's parts.
    fn group_end(&mut self) -> Result<()>;
    /// Tear the communicators down without waiting for their work: parts still queued or
    /// running end without completing (NCCL's abort).
    fn abort(&mut self);
    /// Tear the communicators down, their work complete.
    fn destroy(&mut self);
}

/// One member's part of a collective: its communicator and stream.
pub(crate) struct Rank<C> {
    pub(crate) comm: C,
    pub(crate) stream: StreamId,
}

/// The set's communicators and the stream of each member they queue on: one of the member
/// context's pooled streams, which live as long as the context, so a lazy completion on it
/// (which holds the context) always finds it alive. Each member's context is counted as
/// borrowed ([`Borrow::Communicator`]) while they live: the library allocates in it.
pub(crate) struct Comms<C: Communicators> {
    comms: C,
    streams: Vec<(Arc<Inner>, StreamId)>,
    /// The lazy completions of collectives queued on the streams that may still be waited
    /// for: marked done when the communicators go (after the streams are drained), so that
    /// nothing drains a stream once it is back in the pool.
    pending: Vec<Weak<Completion>>,
    /// A group queued parts for only some members, or failed: the parts queued may wait
    /// forever for the others.
    broken: bool,
}

impl<C: Communicators> Comms<C> {
    /// Communicators `comms` queuing on `streams` (member order), whose contexts the caller
    /// counted as borrowed.
    pub(crate) fn new(comms: C, streams: Vec<(Arc<Inner>, StreamId)>) -> Self {
        Comms {
            comms,
            streams,
            pending: Vec::new(),
            broken: false,
        }
    }

    /// Whether a member is lost. A member whose stream stopped on a fault that nobody has
    /// seen yet is found by synchronising it (the failure is kept for its next synchronise).
    fn any_lost(&self) -> bool {
        self.streams.iter().any(|(g, s)| member_lost(g, *s))
    }
}

/// Whether `g` is lost, looking at `stream` if it has stopped (a fault nobody has seen yet
/// shows there; the failure stays for the stream's next synchronise).
fn member_lost(g: &Inner, stream: StreamId) -> bool {
    if g.is_lost() {
        return true;
    }
    if g.idle(stream)
        && let Err(e) = g.sync(stream, None)
    {
        g.keep_failure(stream, e);
    }
    g.is_lost()
}

impl<C: Communicators> Drop for Comms<C> {
    fn drop(&mut self) {
        // Where a member is lost, or a group left parts without their peers, the parts
        // queued on the other members wait forever: abort first, which ends them, and only
        // then wait for the streams.
        let abort = self.broken || self.any_lost();
        if abort {
            self.comms.abort();
        }
        for (g, s) in &self.streams {
            // The communicators' work must be over before they go (a lost context runs
            // nothing more).
            if g.bind().is_ok() {
                g.drain(*s);
            }
        }
        for c in self.pending.drain(..).filter_map(|w| w.upgrade()) {
            // Its stream was drained above: the work it ends is complete.
            c.finished();
        }
        if !abort {
            self.comms.destroy();
        }
        for (g, s) in self.streams.drain(..) {
            g.ops().fault().end_borrow(Borrow::Communicator);
            // Idle, and no completion of this set waits for it any more.
            g.put_stream(s);
        }
    }
}

/// The communicators of `slot`, if they are `Comms<C>`.
fn comms_in<C: Communicators>(slot: &mut Option<Box<dyn Any + Send>>) -> Option<&mut Comms<C>> {
    slot.as_mut().and_then(|b| b.downcast_mut::<Comms<C>>())
}

/// Queue one collective for every member of `set` inside one group, with the communicators
/// kept in `slot` (made by `make` first if there are none): `queue(i, rank)` queues member
/// `i`'s part, and `done(i, completion)` notes the end of member `i`'s part, a lazy completion
/// of its stream, on the buffers used. Each member's stream and completion, for the guard.
///
/// Every member must be alive first: with one lost, nothing is queued, the communicators are
/// torn down (aborted), and the error names the member. Should a part fail to be queued, the
/// others are queued already (at the group's end): the communicators are torn down at once,
/// aborting them, so that no part waits for one that never comes, and the first failure is
/// returned.
pub(crate) fn queue_collective<C: Communicators>(
    set: &DeviceSet,
    slot: &mut Option<Box<dyn Any + Send>>,
    make: impl FnOnce() -> Result<Comms<C>>,
    mut queue: impl FnMut(usize, &Rank<C::Comm>) -> Result<()>,
    mut done: impl FnMut(usize, &Arc<Completion>),
) -> Result<Members> {
    if comms_in::<C>(slot).is_none() {
        *slot = Some(Box::new(make()?));
    }
    let c = comms_in::<C>(slot).expect("made above");
    let lost = c.streams.iter().enumerate().find_map(|(i, (g, _))| {
        let e = g.ops().fault().ensure_alive().err()?;
        Some(set.on_device(i, e))
    });
    if let Some(e) = lost {
        *slot = None;
        return Err(e);
    }
    c.comms.group_start()?;
    let mut first = Ok(());
    for (i, &(_, stream)) in c.streams.iter().enumerate() {
        let rank = Rank {
            comm: c.comms.comm(i),
            stream,
        };
        if let Err(e) = queue(i, &rank) {
            first = first.and(Err(set.on_device(i, e)));
        }
    }
    let end = c.comms.group_end();
    // The parts are queued now (at the group's end), or none is, which a wait for the
    // stream covers alike: note their end on the buffers, even after a failure.
    let mut members = Vec::with_capacity(set.len());
    c.pending
        .retain(|w| w.upgrade().is_some_and(|p| !p.is_done()));
    for (i, (g, &(_, stream))) in set.iter().zip(&c.streams).enumerate() {
        let completion = Completion::lazy(&g.inner, stream);
        done(i, &completion);
        c.pending.push(Arc::downgrade(&completion));
        members.push((stream, completion));
    }
    match first.and(end) {
        Ok(()) => Ok(members),
        Err(e) => {
            // Aborted, the streams drained and the completions marked done.
            c.broken = true;
            *slot = None;
            Err(e)
        }
    }
}

/// Wait for each member's part of a collective (`members`, in member order), without waiting
/// forever for a member that is lost: the streams are polled, and once a member is seen lost
/// while parts still run, the set's communicators are torn down (aborted, which ends the
/// parts waiting for it). The outcome per member; every part is marked done.
pub(crate) fn wait_parts(set: &DeviceSet, members: Members, what: &str) -> Vec<Result<()>> {
    let mut out: Vec<Option<Result<()>>> = (0..members.len()).map(|_| None).collect();
    for (_, done) in &members {
        // Nothing queued on the stream after this point counts as done by this wait.
        done.seal();
    }
    // Yielding between polls for the first 2 ms, as the driver's default blocking wait spins
    // or yields (a short collective ends microseconds after its last part is ready), then
    // sleeping a little longer each time, up to a millisecond.
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    loop {
        for (((stream, _), g), r) in members.iter().zip(set.iter()).zip(&mut out) {
            if r.is_none() && g.inner.idle(*stream) {
                *r = Some(g.inner.sync(*stream, Some(what)));
            }
        }
        if out.iter().all(Option::is_some) {
            break;
        }
        if set.iter().any(|g| g.inner.is_lost()) {
            // Aborted: the parts still queued or running end.
            let comms = set.collectives.lock().expect("poisoned").take();
            drop(comms);
            break;
        }
        if start.elapsed() < Duration::from_millis(2) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
    let results = members
        .iter()
        .zip(set.iter())
        .zip(out)
        .map(|(((stream, _), g), r)| r.unwrap_or_else(|| g.inner.sync(*stream, Some(what))))
        .collect();
    for (_, done) in &members {
        // The stream passed the part, or stopped for good, or the part was aborted.
        done.finished();
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::Mutex;
    use std::sync::mpsc::{Sender, channel};

    /// What the stand-in communicators and the parts did, in order.
    type Log = Arc<Mutex<Vec<&'static str>>>;

    /// The senders that end parts still held.
    type Held = Arc<Mutex<Vec<Sender<()>>>>;

    /// Communicators that log their calls; aborting them ends the parts still held.
    struct Fake {
        log: Log,
        held: Held,
    }

    impl Communicators for Fake {
        type Comm = ();
        fn comm(&self, _: usize) {}
        fn group_start(&mut self) -> Result<()> {
            self.log.lock().unwrap().push("group start");
            Ok(())
        }
        fn group_end(&mut self) -> Result<()> {
            self.log.lock().unwrap().push("group end");
            Ok(())
        }
        fn abort(&mut self) {
            self.log.lock().unwrap().push("abort");
            for part in self.held.lock().unwrap().drain(..) {
                let _ = part.send(());
            }
        }
        fn destroy(&mut self) {
            self.log.lock().unwrap().push("destroy");
        }
    }

    /// A simulated set of two, stand-in communicators on a stream of each member (counted as
    /// borrowed), the log, and the senders that end held parts.
    fn fixture() -> (DeviceSet, Comms<Fake>, Log, Held) {
        let set = DeviceSet::simulated(2);
        let (log, held) = (Log::default(), Arc::default());
        let streams = set
            .iter()
            .map(|g| {
                g.inner
                    .ops()
                    .fault()
                    .begin_borrow(Borrow::Communicator)
                    .unwrap();
                (g.inner.clone(), g.inner.take_stream().unwrap())
            })
            .collect();
        let fake = Fake {
            log: log.clone(),
            held: Arc::clone(&held),
        };
        (set, Comms::new(fake, streams), log, held)
    }

    /// Queue on `stream` of `g` a part that runs until the communicators are aborted (or, should
    /// nothing abort them, for 3 s, logging that), then logs its end.
    fn hold_part(g: &Inner, stream: StreamId, log: &Log, held: &Mutex<Vec<Sender<()>>>) {
        let (release, wait) = channel::<()>();
        held.lock().unwrap().push(release);
        let log = log.clone();
        let job = move || {
            if wait.recv_timeout(Duration::from_secs(3)).is_err() {
                log.lock().unwrap().push("nothing aborted the part");
            }
            log.lock().unwrap().push("part ended");
            Ok(())
        };
        crate::backend::sim::testing::enqueue(g.ops(), stream, Box::new(job));
    }

    fn borrows(set: &DeviceSet) -> Vec<usize> {
        set.iter()
            .map(|g| g.inner.ops().fault().borrowed(Borrow::Communicator))
            .collect()
    }

    /// A member lost while a part of the other's still runs (waiting for the lost one):
    /// tearing the communicators down aborts them before it waits for any stream, and does not
    /// destroy them.
    #[test]
    fn a_lost_member_aborts_the_communicators_before_any_stream_is_waited_for() {
        let (set, comms, log, held) = fixture();
        let (g0, s0) = (&set.gpus()[0].inner, comms.streams[0].1);
        hold_part(g0, s0, &log, &held);
        set.gpus()[1].inner.ops().fault().mark_lost("lost".into());
        drop(comms);
        assert_eq!(*log.lock().unwrap(), ["abort", "part ended"]);
        assert_eq!(borrows(&set), [0, 0]);
    }

    /// With every member alive, the streams are waited for first and the communicators
    /// destroyed.
    #[test]
    fn healthy_communicators_are_destroyed_after_their_work() {
        let (set, comms, log, _held) = fixture();
        drop(comms);
        assert_eq!(*log.lock().unwrap(), ["destroy"]);
        assert_eq!(borrows(&set), [0, 0]);
    }

    /// Nothing is queued while a member is lost: the error names it, and the communicators are
    /// aborted and gone (so the lost member can be reset).
    #[test]
    fn a_collective_is_not_queued_while_a_member_is_lost() {
        let (set, comms, log, _held) = fixture();
        let mut slot: Option<Box<dyn Any + Send>> = Some(Box::new(comms));
        set.gpus()[1].inner.ops().fault().mark_lost("lost".into());
        let mut queued = 0;
        let Err(e) = queue_collective::<Fake>(
            &set,
            &mut slot,
            || unreachable!("made already"),
            |_, _| {
                queued += 1;
                Ok(())
            },
            |_, _| {},
        ) else {
            panic!("queued with a member lost")
        };
        assert!(
            matches!(&e, Error::OnDevice { device: 1, source, .. } if source.is_context_lost()),
            "{e:?}"
        );
        assert_eq!(queued, 0, "a part was queued");
        assert!(slot.is_none());
        assert_eq!(*log.lock().unwrap(), ["abort"]);
        assert_eq!(borrows(&set), [0, 0]);
    }

    /// A group whose part for one member could not be queued has queued the other's, which
    /// waits for it forever: the communicators are aborted at once, and the parts' ends,
    /// noted on the buffers, are done by the time the error comes back.
    #[test]
    fn a_group_that_queued_only_some_parts_is_aborted_at_once() {
        let (set, comms, log, held) = fixture();
        let mut slot: Option<Box<dyn Any + Send>> = Some(Box::new(comms));
        let mut ends = Vec::new();
        let Err(e) = queue_collective::<Fake>(
            &set,
            &mut slot,
            || unreachable!("made already"),
            |i, rank| match i {
                0 => {
                    hold_part(&set.gpus()[0].inner, rank.stream, &log, &held);
                    Ok(())
                }
                _ => Err(Error::Usage("refused for the test".into())),
            },
            |_, c| ends.push(c.clone()),
        ) else {
            panic!("queued with a part refused")
        };
        assert!(matches!(e, Error::OnDevice { device: 1, .. }), "{e:?}");
        assert!(slot.is_none());
        assert_eq!(
            *log.lock().unwrap(),
            ["group start", "group end", "abort", "part ended"]
        );
        assert!(ends.len() == 2 && ends.iter().all(|c| c.is_done()));
        assert_eq!(borrows(&set), [0, 0]);
    }

    /// A member lost while the parts run (its part fails): the guard's wait sees it and aborts
    /// the set's communicators, which ends the other member's part, instead of waiting for
    /// that part forever. The failure names the lost member.
    #[test]
    fn a_guard_wait_ends_when_a_member_is_lost_while_the_parts_run() {
        let (set, comms, log, held) = fixture();
        let mut slot = set.collectives.lock().unwrap();
        *slot = Some(Box::new(comms));
        let lost = set.gpus()[1].inner.clone();
        let members = queue_collective::<Fake>(
            &set,
            &mut slot,
            || unreachable!("made already"),
            |i, rank| {
                let g = &set.gpus()[i].inner;
                if i == 0 {
                    hold_part(g, rank.stream, &log, &held);
                } else {
                    let lost = lost.clone();
                    let fault = move || {
                        lost.ops().fault().mark_lost("a fault in the part".into());
                        Ok(())
                    };
                    crate::backend::sim::testing::enqueue(g.ops(), rank.stream, Box::new(fault));
                }
                Ok(())
            },
            |_, _| {},
        )
        .unwrap();
        drop(slot);
        let ends: Vec<_> = members.iter().map(|(_, c)| c.clone()).collect();
        let e = super::super::Collective::new(&set, "test", members)
            .wait()
            .unwrap_err();
        assert!(
            matches!(&e, Error::OnDevice { device: 1, source, .. } if source.is_context_lost()),
            "{e:?}"
        );
        assert_eq!(
            *log.lock().unwrap(),
            ["group start", "group end", "abort", "part ended"]
        );
        assert!(ends.iter().all(|c| c.is_done()));
        assert!(set.collectives.lock().unwrap().is_none());
        assert_eq!(borrows(&set), [0, 0]);
    }
}
