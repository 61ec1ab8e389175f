//! The thread that adds the ids each gather counts to the policy's counts while the gathering
//! thread goes on.

use super::host::beside_gathers;
use super::policy::Policy;
use std::sync::{Arc, Mutex, PoisonError};

/// What the counting thread is given and gives back: the policy, and the ids to count (the
/// list comes back empty, for the next).
pub(super) type CountJob = (Box<Policy>, Vec<u32>);

/// Where the counting thread gives the policy back.
pub(super) type CountBack = std::sync::mpsc::Receiver<std::thread::Result<CountJob>>;

/// The thread that adds the ids each gather counts to the policy's counts while the gathering
/// thread goes on: a few thousand ids of a batch land in a count table as large as the table
/// has rows (4 bytes a row), each a miss in the host's caches — work that costs the thread
/// that queues the batches as much as the GPU takes for a batch mostly read from device
/// memory. Dropping it (with the tier) waits for the ids it counts.
pub(super) struct Counter {
    pub(super) send: Option<std::sync::mpsc::Sender<CountJob>>,
    /// Behind a lock (taken by the tier's `&mut` methods, or by a ranking's thread while the
    /// policy is away) so that the tier stays `Sync`.
    pub(super) back: Arc<Mutex<CountBack>>,
    pub(super) handle: Option<std::thread::JoinHandle<()>>,
}

impl Counter {
    /// The counting thread, or `None` where none could be started (said at `debug` level).
    pub(super) fn start() -> Option<Counter> {
        let (send, jobs) = std::sync::mpsc::channel::<CountJob>();
        let (done, back) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("berth-hot-count".into())
            .spawn(move || {
                for (mut policy, mut ids) in jobs {
                    let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        beside_gathers(|| policy.add_all(&ids));
                        ids.clear();
                    }));
                    let panicked = counted.is_err();
                    if done.send(counted.map(|()| (policy, ids))).is_err() || panicked {
                        return;
                    }
                }
            });
        match spawned {
            Ok(handle) => Some(Counter {
                send: Some(send),
                back: Arc::new(Mutex::new(back)),
                handle: Some(handle),
            }),
            Err(e) => {
                tracing::debug!(error = %e, "hot tier: no thread for the counts: the gathers count");
                None
            }
        }
    }

    /// Hand `policy` and the `ids` to count to the thread; the policy back if it has ended.
    pub(super) fn give(
        &mut self,
        policy: Box<Policy>,
        ids: Vec<u32>,
    ) -> std::result::Result<(), CountJob> {
        match &self.send {
            Some(send) => send.send((policy, ids)).map_err(|e| e.0),
            None => Err((policy, ids)),
        }
    }

    /// The policy back once its ids are counted (with the emptied list), if they are; `None`
    /// while they are not.
    pub(super) fn poll(&mut self) -> Option<std::thread::Result<CountJob>> {
        let back = self.back.lock().unwrap_or_else(PoisonError::into_inner);
        match back.try_recv() {
            Ok(r) => Some(r),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Some(Err(Box::new("the hot tier's counting thread ended")))
            }
        }
    }

    /// The policy back, waiting for its ids to be counted; `None` if the thread has ended
    /// without giving it back.
    pub(super) fn wait(&mut self) -> Option<std::thread::Result<Box<Policy>>> {
        Counter::take(&self.back)
    }

    /// The policy back from `back`, waiting for its ids to be counted; `None` if the thread
    /// has ended without giving it back.
    pub(super) fn take(back: &Mutex<CountBack>) -> Option<std::thread::Result<Box<Policy>>> {
        let back = back.lock().unwrap_or_else(PoisonError::into_inner);
        back.recv().ok().map(|r| r.map(|(p, _)| p))
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // No more jobs: the thread ends after the one it counts.
        drop(self.send.take());
        if let Some(handle) = self.handle.take() {
            drop(handle.join());
        }
    }
}
