//! What unit tests of the layers above need of a simulated context beyond the interface: how
//! much is queued on one of its streams, a job of the test's own queued there (to hold the
//! stream, or to act when the stream gets there), and a simulated context that reports
//! another backend. The tests name the simulator here and nowhere else.

use crate::backend::sim::Simulator;
use crate::backend::{Backend, Ops, StreamId};

pub(crate) use crate::backend::sim::worker::Job;

/// The simulator behind `ops`, which a test made as a simulated context.
fn sim(ops: &dyn Ops) -> &Simulator {
    ops.simulator().expect("a simulated context")
}

/// Jobs queued on `stream` of a simulated context so far: stream operations the layers
/// above queued (a wait for another stream is one).
pub(crate) fn position(ops: &dyn Ops, stream: StreamId) -> u64 {
    sim(ops)
        .stream(stream)
        .expect("a stream of the context")
        .position()
}

/// Queue `job` on `stream` of a simulated context, after everything queued there so far.
pub(crate) fn enqueue(ops: &dyn Ops, stream: StreamId, job: Job) {
    sim(ops)
        .stream(stream)
        .expect("a stream of the context")
        .push(job);
}

/// A simulated context that reports `kind` as its backend: a stand-in for a context of
/// another backend (which cannot share its memory or work) in tests without a GPU.
pub(crate) fn posing_as(kind: Backend) -> Box<dyn Ops> {
    Box::new(Simulator::posing_as(kind))
}
