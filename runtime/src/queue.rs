//! Where work goes: the [`Queue`] that launchers, copies, events and graph replays take, and
//! how work given to a queue is handled ([`Mode`]) — waited for by its guard, queued in a scope
//! (whose state, [`ScopeState`], is kept here), or recorded into a graph ([`Recording`]).

use crate::backend::{GraphNode, StreamId};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::pool::size_class;
use crate::track::Completion;
use std::sync::{Arc, Mutex};

pub(crate) mod sealed {
    /// Only berth's queues are queues.
    pub trait Sealed {}
}

/// Where a launch is queued: a [`Gpu`](crate::Gpu) (its default stream), a
/// [`Stream`](crate::Stream), a [`Scope`](crate::Scope) (queued without waiting; the scope
/// waits once at its end) or a [`Recorder`](crate::Recorder) (recorded into a
/// [`Graph`](crate::Graph), run later).
pub trait Queue: sealed::Sealed {
    #[doc(hidden)]
    fn __queue(&self) -> QueueRef<'_>;
}

/// The context and stream behind a [`Queue`] (opaque).
#[doc(hidden)]
pub struct QueueRef<'a>(
    pub(crate) &'a Arc<Inner>,
    pub(crate) StreamId,
    pub(crate) Mode<'a>,
);

/// How work given to a queue is handled.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    /// Queued now; its guard waits when dropped.
    Wait,
    /// Queued now in a scope, which waits for it and reports its outcome.
    Scope(&'a ScopeState),
    /// Recorded into a graph, not run.
    Record(&'a Recording),
}

impl Mode<'_> {
    /// Only launches can be recorded into a graph: copies and events need a stream.
    pub(crate) fn not_recording(&self, what: &str) -> Result<()> {
        match self {
            Mode::Record(_) => Err(Error::Usage(format!(
                "{what} cannot be recorded into a graph: only kernel launches can; queue it on a Gpu, Stream or Scope"
            ))),
            _ => Ok(()),
        }
    }
}

/// What a scope keeps for its end.
#[derive(Default)]
pub(crate) struct ScopeState {
    inner: Mutex<Kept>,
}

/// What a scope's launches left to settle once the scope has waited for its stream.
#[derive(Default)]
pub(crate) struct Kept {
    /// Where the queued work ends: the completions its launches and copies joined
    /// ([`Completion::lazy`]) and those of graph replays, each once; marked done once the
    /// scope has waited.
    pub(crate) completions: Vec<Arc<Completion>>,
    /// The completion the scope's next launch or copy joins, if not sealed since; also in
    /// `completions`.
    current: Option<Arc<Completion>>,
    /// Staging of launches already queued, by (size class, address): later launches of the
    /// scope may reuse it in stream order; back to the pool at the end.
    pub(crate) staging: Vec<(usize, u64)>,
    launches: u64,
}

impl ScopeState {
    /// A launch was just queued on the scope's `stream` (of `gpu`), with `leases` as its
    /// staging: the completion it ends at, shared with the scope's other work since its last
    /// wait. No allocation once the scope has one that is not sealed.
    pub(crate) fn joined(
        &self,
        gpu: &Arc<Inner>,
        stream: StreamId,
        leases: impl Iterator<Item = (usize, u64)>,
    ) -> Arc<Completion> {
        let mut k = self.inner.lock().expect("poisoned");
        let done = k.join(gpu, stream);
        k.staging.extend(leases);
        k.launches += 1;
        done
    }

    /// Work was queued, ending at `done` (a completion of its own).
    pub(crate) fn queued(
        &self,
        done: &Arc<Completion>,
        leases: impl Iterator<Item = (usize, u64)>,
    ) {
        let mut k = self.inner.lock().expect("poisoned");
        // Every one, to mark it done at the end: a launch queued in a scope records no point of
        // its own, and after the scope nothing may record one on its stream for it.
        k.completions.push(done.clone());
        k.staging.extend(leases);
        k.launches += 1;
    }

    /// Staging that a launch gave up part-way (already waited for).
    pub(crate) fn give_back(&self, leases: impl Iterator<Item = (usize, u64)>) {
        self.inner.lock().expect("poisoned").staging.extend(leases);
    }

    /// Staging of an earlier launch of the scope that holds `bytes`. Reusing it is ordered
    /// on the scope's stream: the copies that fill it come after every copy and kernel of
    /// the launch that had it.
    pub(crate) fn reuse_staging(&self, bytes: usize) -> Option<(usize, u64)> {
        let class = size_class(bytes);
        let mut k = self.inner.lock().expect("poisoned");
        let i = k.staging.iter().position(|&(c, _)| c == class)?;
        Some(k.staging.swap_remove(i))
    }

    /// Launches queued so far.
    pub(crate) fn launches(&self) -> u64 {
        self.inner.lock().expect("poisoned").launches
    }

    /// What was queued so far, taken, its completions sealed: launches queued later belong to
    /// the next wait.
    pub(crate) fn take(&self) -> Kept {
        let mut k = self.inner.lock().expect("poisoned");
        if let Some(c) = k.current.take() {
            c.seal();
        }
        Kept {
            completions: std::mem::take(&mut k.completions),
            current: None,
            staging: std::mem::take(&mut k.staging),
            launches: k.launches,
        }
    }
}

impl Kept {
    /// The completion that work just queued on the scope's `stream` ends at: the current one,
    /// or a new one if something sealed it since.
    fn join(&mut self, gpu: &Arc<Inner>, stream: StreamId) -> Arc<Completion> {
        match &self.current {
            // The work was queued before this join, so before any wait that seals it later.
            Some(c) if c.join() => c.clone(),
            _ => {
                let c = Completion::lazy(gpu, stream);
                let joined = c.join();
                debug_assert!(joined, "a new completion is not sealed");
                self.completions.push(c.clone());
                self.current = Some(c.clone());
                c
            }
        }
    }
}

/// The launches recorded so far into one graph, and which graph's handles they may use.
pub(crate) struct Recording {
    pub(crate) graph: u64,
    nodes: Mutex<Vec<GraphNode>>,
}

impl Recording {
    pub(crate) fn new(graph: u64) -> Self {
        Recording {
            graph,
            nodes: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn push(&self, node: GraphNode) {
        self.nodes.lock().expect("poisoned").push(node);
    }

    /// Launches recorded so far.
    pub(crate) fn len(&self) -> usize {
        self.nodes.lock().expect("poisoned").len()
    }

    /// The recorded launches, in order.
    pub(crate) fn into_nodes(self) -> Vec<GraphNode> {
        self.nodes.into_inner().expect("poisoned")
    }
}
