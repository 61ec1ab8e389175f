//! Graphs: a sequence of launches recorded once and replayed, as a CUDA graph on the GPU and as
//! the same jobs on a simulated stream.
//!
//! A [`Graph`] holds every buffer its launches use for its whole life ([`Graph::hold`] takes
//! `&mut` of the buffer and gives a `Copy` handle, [`Held`]), so the recorded device addresses
//! stay valid and the host cannot touch the memory between replays. Recording runs the
//! ordinary generated launchers against a [`Recorder`]: the launches are checked and their
//! parameters kept, nothing runs. Recording again with other scalars updates the instantiated
//! graph in place when the launches keep their kernels and grids (new parameter values only),
//! and rebuilds it otherwise — the launchers check every argument's type, so changing a
//! scalar is as typed as launching.

use crate::args::{ArgRef, DeviceArg, sealed as arg_sealed};
use crate::backend::{GraphExec, GraphNode};
use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::launch::kernel::Kernel;
use crate::launch::pending::Pending;
use crate::queue::{Mode, Queue, QueueRef, Recording, sealed};
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

/// A recorded sequence of launches, replayed with [`Graph::run`]; made by [`Gpu::graph`]. It
/// holds every buffer its launches use ([`Graph::hold`]) for its whole life `'b`.
pub struct Graph<'b> {
    gpu: Arc<Inner>,
    id: u64,
    /// The memory of every held buffer, used (exclusively) by each replay.
    held: Mutex<Vec<&'b Uses>>,
    nodes: Vec<GraphNode>,
    /// The recorded launches made ready to replay by the backend; `None` before the first
    /// recording with launches. Locked while it is launched: a CUDA graph exec is not to be
    /// used from two threads at once.
    exec: Mutex<Option<GraphExec>>,
    /// Invariant in `'b`: a graph can never be treated as holding its buffers for less
    /// time than it does, so `hold` always borrows for the graph's whole life.
    _held: PhantomData<fn(&'b mut ()) -> &'b mut ()>,
}

/// A device buffer held by a [`Graph`] for the graph's whole life: pass it to launches
/// recorded into that graph (as `&h` or `&mut h`; it is `Copy`). The host cannot reach the
/// buffer while it is held, and launches elsewhere refuse it (`Error::InvalidLaunch`): the
/// graph's replays, which it serialises, are the only GPU work on it.
pub struct Held<'b, T> {
    addr: u64,
    len: usize,
    bytes: usize,
    gpu: &'b Arc<Inner>,
    uses: &'b Uses,
    graph: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Held<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Held<'_, T> {}

impl<T> Held<'_, T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.addr,
            len: self.len,
            bytes: self.bytes,
            gpu: self.gpu,
            flags: None,
            host: 0,
            uses: self.uses,
            held: self.graph,
            read_only: false,
        }
    }
}

impl<T> arg_sealed::Sealed for Held<'_, T> {}

impl<T: DeviceCopy> DeviceArg<T> for Held<'_, T> {
    fn __arg(&self) -> ArgRef<'_> {
        self.arg()
    }
}

/// Launches being recorded into a graph (see [`Graph::record`]): a [`Queue`] whose launches
/// are checked and kept, not run. Their guards hold nothing.
pub struct Recorder<'r> {
    gpu: &'r Arc<Inner>,
    rec: Recording,
}

impl sealed::Sealed for Recorder<'_> {}

impl Queue for Recorder<'_> {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(self.gpu, self.gpu.default_stream, Mode::Record(&self.rec))
    }
}

impl Recorder<'_> {
    /// Launches recorded so far.
    pub fn launches(&self) -> usize {
        self.rec.len()
    }
}

/// Destroy `exec` unless its context was lost (then its handles are gone with it).
fn destroy(gpu: &Inner, exec: GraphExec) {
    if gpu.is_lost() || gpu.bind().is_err() {
        return;
    }
    gpu.ops().graph_drop(exec);
}

impl Gpu {
    /// An empty graph on this GPU. Hold the buffers its launches use
    /// ([`Graph::hold`]), record the launches ([`Graph::record`]), replay them
    /// ([`Graph::run`]); record again to change scalar arguments.
    ///
    /// ```ignore
    /// let mut graph = gpu.graph();
    /// let (mut a, mut b) = (graph.hold(&mut a_buf)?, graph.hold(&mut b_buf)?);
    /// graph.record(|r| {
    ///     for _ in 0..500 {
    ///         jacobi(r, grid, &a, &mut b)?.detach();
    ///         jacobi(r, grid, &b, &mut a)?.detach();
    ///     }
    ///     Ok(())
    /// })?;
    /// graph.run(&gpu)?.wait()?;
    /// ```
    pub fn graph<'b>(&self) -> Graph<'b> {
        Graph {
            gpu: self.inner.clone(),
            id: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed),
            held: Mutex::new(Vec::new()),
            nodes: Vec::new(),
            exec: Mutex::new(None),
            _held: PhantomData,
        }
    }
}

impl<'b> Graph<'b> {
    /// Hold `buffer` for the graph's whole life and return the handle that launches recorded
    /// into this graph take in its place. Memory of another context is refused.
    pub fn hold<T: DeviceCopy>(&self, buffer: &'b mut DeviceBuffer<T>) -> Result<Held<'b, T>> {
        let buffer: &'b DeviceBuffer<T> = buffer;
        if !Arc::ptr_eq(&buffer.gpu, &self.gpu) {
            return Err(Error::Usage(
                "Graph::hold: the buffer belongs to a different GPU context".into(),
            ));
        }
        self.held.lock().expect("poisoned").push(&buffer.uses);
        Ok(Held {
            addr: buffer.ptr,
            len: buffer.len(),
            bytes: buffer.bytes(),
            gpu: &buffer.gpu,
            uses: &buffer.uses,
            graph: self.id,
            _t: PhantomData,
        })
    }

    /// Launches recorded.
    pub fn launches(&self) -> usize {
        self.nodes.len()
    }

    /// Record the launches `f` makes on the [`Recorder`] (generated launchers, given this
    /// graph's [`Held`] handles and any scalars), replacing the previous recording. On the
    /// GPU the graph is instantiated here; recording again with the same kernels and grids
    /// only updates the parameters of the instantiated graph. If `f` or a launch fails, the
    /// previous recording stays.
    pub fn record(&mut self, f: impl FnOnce(&Recorder<'_>) -> Result<()>) -> Result<()> {
        self.gpu.bind()?;
        let recorder = Recorder {
            gpu: &self.gpu,
            rec: Recording::new(self.id),
        };
        f(&recorder)?;
        let nodes = recorder.rec.into_nodes();
        let ops = self.gpu.ops();
        let exec = self.exec.get_mut().expect("poisoned");
        let reuse = exec.is_some()
            && nodes.len() == self.nodes.len()
            && nodes.iter().zip(&self.nodes).all(|(a, b)| a.same_shape(b));
        if reuse {
            let e = exec.as_ref().expect("checked");
            ops.graph_update(e, &nodes, &self.nodes)?;
        } else {
            let new = if nodes.is_empty() {
                None
            } else {
                Some(ops.graph_build(&nodes)?)
            };
            if let Some(old) = std::mem::replace(exec, new) {
                destroy(&self.gpu, old);
            }
        }
        self.nodes = nodes;
        Ok(())
    }

    /// Replay the recorded launches on `on` (a `Gpu`, `Stream` or `Scope` of the same
    /// context), after any earlier work there. The guard keeps the graph borrowed until the
    /// replay is done; in a scope it does not wait when dropped, like a launch.
    pub fn run<'g>(&'g self, on: &'g impl Queue) -> Result<Pending<'g>> {
        let QueueRef(gpu, stream, mode) = on.__queue();
        if let Mode::Record(_) = mode {
            return Err(Error::Usage(
                "a graph cannot be recorded into another graph: run it on a Gpu, Stream or Scope"
                    .into(),
            ));
        }
        if !Arc::ptr_eq(gpu, &self.gpu) {
            return Err(Error::Usage(
                "Graph::run: the queue belongs to a different GPU context".into(),
            ));
        }
        gpu.bind()?;
        // Held until the replay's uses are noted: replays from several threads are serialised
        // here, so each one sees the previous one's uses.
        let held = self.held.lock().expect("poisoned");
        for u in held.iter() {
            u.before_gpu(Access::Exclusive, Some((gpu, stream)));
        }
        let _range = crate::nvtx::graph(self.nodes.len());
        if let Some(e) = self.exec.lock().expect("poisoned").as_ref() {
            // SAFETY: each node's parameters were checked against its kernel when it was
            // recorded; slices address memory this graph holds for its whole life, which the
            // returned guard borrows until the replay is done (and host access waits for it if
            // the guard is leaked).
            unsafe { gpu.ops().graph_launch(e, &self.nodes, stream) }?;
        }
        let mut seen: Vec<&'static Kernel> = Vec::new();
        for n in &self.nodes {
            if !seen.iter().any(|k| std::ptr::eq(*k, n.kernel)) {
                seen.push(n.kernel);
                gpu.ops().fault().launched(stream, n.kernel);
            }
        }
        let completion = Completion::record(gpu, &[stream])?;
        for u in held.iter() {
            u.add(&completion, Access::Exclusive);
        }
        let scoped = if let Mode::Scope(scope) = mode {
            scope.queued(&completion, std::iter::empty());
            true
        } else {
            false
        };
        Ok(Pending::queued(gpu, stream, "graph", completion, scoped))
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if let Some(e) = self.exec.get_mut().expect("poisoned").take() {
            destroy(&self.gpu, e);
        }
    }
}
