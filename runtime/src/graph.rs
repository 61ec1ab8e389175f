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

use crate::error::{Error, Result};
use crate::gpu::{Gpu, Inner};
use crate::launch::{Grid, Kernel, ParamBlock, Pending};
use crate::stream::{Mode, Queue, QueueRef};
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use cudarc::driver::{result, sys};
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
    nodes: Vec<Node>,
    /// The instantiated CUDA graph (the GPU only); `None` before the first recording with
    /// launches. Locked while it is launched: a graph exec is not to be used from two
    /// threads at once.
    exec: Mutex<Option<Exec>>,
    /// Invariant in `'b`: a graph can never be treated as holding its buffers for less
    /// time than it does, so `hold` always borrows for the graph's whole life.
    _held: PhantomData<fn(&'b mut ()) -> &'b mut ()>,
}

// SAFETY: the raw handles (functions, the graph and its exec) are driver objects usable from
// any thread once the context is current there (every entry binds it); the exec is behind a
// mutex; `Uses` is thread-safe.
unsafe impl Send for Graph<'_> {}
// SAFETY: as above.
unsafe impl Sync for Graph<'_> {}

/// One recorded launch.
pub(crate) struct Node {
    pub(crate) kernel: &'static Kernel,
    pub(crate) func: sys::CUfunction,
    pub(crate) grid: Grid,
    pub(crate) params: ParamBlock,
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

    pub(crate) fn arg(&self) -> crate::args::ArgRef<'_> {
        crate::args::ArgRef {
            addr: self.addr,
            len: self.len,
            bytes: self.bytes,
            gpu: self.gpu,
            flags: None,
            host: 0,
            uses: self.uses,
            held: self.graph,
        }
    }
}

/// Launches being recorded into a graph (see [`Graph::record`]): a [`Queue`] whose launches
/// are checked and kept, not run. Their guards hold nothing.
pub struct Recorder<'r> {
    gpu: &'r Arc<Inner>,
    rec: Recording,
}

// SAFETY: see `Graph`; the recorded nodes are behind a mutex.
unsafe impl Send for Recorder<'_> {}
// SAFETY: as above.
unsafe impl Sync for Recorder<'_> {}

/// The nodes recorded so far, and which graph's handles they may use.
pub(crate) struct Recording {
    pub(crate) graph: u64,
    nodes: Mutex<Vec<Node>>,
}

impl Recording {
    pub(crate) fn push(&self, node: Node) {
        self.nodes.lock().expect("poisoned").push(node);
    }
}

impl Queue for Recorder<'_> {
    fn __queue(&self) -> QueueRef<'_> {
        QueueRef(self.gpu, self.gpu.default_stream.0, Mode::Record(&self.rec))
    }
}

impl Recorder<'_> {
    /// Launches recorded so far.
    pub fn launches(&self) -> usize {
        self.rec.nodes.lock().expect("poisoned").len()
    }
}

/// An instantiated CUDA graph and its kernel nodes, in recording order.
struct Exec {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    nodes: Vec<sys::CUgraphNode>,
}

impl Exec {
    fn destroy(&self, gpu: &Inner) {
        if gpu.fault.is_lost() || gpu.bind().is_err() {
            return;
        }
        // SAFETY: created by `build` in this (current) context and destroyed once; the
        // driver frees an exec still running once it completes.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
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

/// Whether two recorded launches differ only in parameter values.
fn same_shape(a: &Node, b: &Node) -> bool {
    std::ptr::eq(a.kernel, b.kernel) && a.func == b.func && a.grid == b.grid
}

impl<'b> Graph<'b> {
    /// Hold `buffer` for the graph's whole life and return the handle that launches recorded
    /// into this graph take in its place. Memory of another context is refused.
    pub fn hold<T: DeviceCopy>(
        &self,
        buffer: &'b mut crate::DeviceBuffer<T>,
    ) -> Result<Held<'b, T>> {
        let buffer: &'b crate::DeviceBuffer<T> = buffer;
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
            rec: Recording {
                graph: self.id,
                nodes: Mutex::new(Vec::new()),
            },
        };
        f(&recorder)?;
        let nodes = recorder.rec.nodes.into_inner().expect("poisoned");
        if !self.gpu.sim {
            let exec = self.exec.get_mut().expect("poisoned");
            let reuse = exec.is_some()
                && nodes.len() == self.nodes.len()
                && nodes.iter().zip(&self.nodes).all(|(a, b)| same_shape(a, b));
            if reuse {
                let e = exec.as_ref().expect("checked");
                update(&self.gpu, e, &nodes, &self.nodes)?;
            } else {
                let new = if nodes.is_empty() {
                    None
                } else {
                    Some(build(&self.gpu, &nodes)?)
                };
                if let Some(old) = std::mem::replace(exec, new) {
                    old.destroy(&self.gpu);
                }
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
        gpu.fault.ensure_alive()?;
        // Held until the replay's uses are noted: replays from several threads are serialised
        // here, so each one sees the previous one's uses.
        let held = self.held.lock().expect("poisoned");
        for u in held.iter() {
            u.before_gpu(Access::Exclusive, Some(stream));
        }
        if gpu.sim {
            for n in &self.nodes {
                let mut params = n.params.clone();
                let mut ptrs = params.pointers();
                // SAFETY: each node's parameters were checked against its kernel when it was
                // recorded; slices address memory this graph holds for its whole life, which
                // the returned guard borrows until the replay is done (and host access waits
                // for it if the guard is leaked).
                unsafe {
                    crate::launch::launch_raw(gpu, n.kernel, n.func, &n.grid, stream, &mut ptrs)
                }?;
            }
        } else if let Some(e) = self.exec.lock().expect("poisoned").as_ref() {
            // SAFETY: `e.exec` was instantiated in this (current) context; what its nodes
            // address is held by this graph, borrowed by the returned guard.
            let r = unsafe { result::graph::launch(e.exec, stream) };
            gpu.check("cuGraphLaunch", r, Some("graph"))?;
        }
        let mut seen: Vec<&'static Kernel> = Vec::new();
        for n in &self.nodes {
            if !seen.iter().any(|k| std::ptr::eq(*k, n.kernel)) {
                seen.push(n.kernel);
                gpu.fault.launched(stream, n.kernel);
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
            e.destroy(&self.gpu);
        }
    }
}

/// The driver's description of kernel node `n` (its parameter values are copied by the call
/// that takes it).
fn node_params(n: &Node, ptrs: &mut [*mut std::ffi::c_void]) -> sys::CUDA_KERNEL_NODE_PARAMS {
    let (g, t) = (n.grid.blocks, n.grid.threads);
    sys::CUDA_KERNEL_NODE_PARAMS {
        func: n.func,
        gridDimX: g.x,
        gridDimY: g.y,
        gridDimZ: g.z,
        blockDimX: t.x,
        blockDimY: t.y,
        blockDimZ: t.z,
        sharedMemBytes: n.grid.shared_bytes,
        kernelParams: ptrs.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A CUDA graph of `nodes`, each after the previous one, instantiated.
fn build(gpu: &Inner, nodes: &[Node]) -> Result<Exec> {
    let mut graph = std::ptr::null_mut();
    // SAFETY: plain creation in the current context.
    let r = unsafe { sys::cuGraphCreate(&mut graph, 0) }.result();
    gpu.check("cuGraphCreate", r, None)?;
    let mut exec = Exec {
        graph,
        exec: std::ptr::null_mut(),
        nodes: Vec::with_capacity(nodes.len()),
    };
    let fail = |exec: &Exec, e: Error| {
        // SAFETY: the graph was created above and is destroyed once, here.
        let _ = unsafe { result::graph::destroy(exec.graph) };
        e
    };
    for n in nodes {
        if let Err(e) = crate::launch::prepare(n.kernel, n.func, &n.grid) {
            return Err(fail(&exec, e));
        }
        let mut block = n.params.clone();
        let mut ptrs = block.pointers();
        let p = node_params(n, &mut ptrs);
        let mut node = std::ptr::null_mut();
        let deps = exec.nodes.last().copied();
        let (dep_ptr, dep_n) = match &deps {
            Some(d) => (d as *const sys::CUgraphNode, 1),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `graph` is live; `p` describes a function of this context with one pointer
        // per parameter (checked at recording) to values that live through the call, which
        // copies them; `dep_ptr` points to `dep_n` nodes of this graph.
        let r = unsafe { sys::cuGraphAddKernelNode_v2(&mut node, exec.graph, dep_ptr, dep_n, &p) }
            .result();
        if let Err(e) = r {
            return Err(fail(&exec, launch_error(gpu, n, "cuGraphAddKernelNode", e)));
        }
        exec.nodes.push(node);
    }
    // SAFETY: a complete graph of this context.
    let r = unsafe { result::graph::instantiate(exec.graph, sys::CUgraphInstantiate_flags(0)) };
    match r {
        Ok(x) => {
            exec.exec = x;
            Ok(exec)
        }
        Err(e) => Err(fail(&exec, gpu.error("cuGraphInstantiate", e, None))),
    }
}

/// Give the instantiated graph the parameter values of `new` where they differ from `old`
/// (same kernels and grids).
fn update(gpu: &Inner, exec: &Exec, new: &[Node], old: &[Node]) -> Result<()> {
    for ((n, o), &node) in new.iter().zip(old).zip(&exec.nodes) {
        if n.params == o.params {
            continue;
        }
        let mut block = n.params.clone();
        let mut ptrs = block.pointers();
        let p = node_params(n, &mut ptrs);
        // SAFETY: `node` is the kernel node of `exec` recorded for the same kernel and grid;
        // the values `p` points to live through the call, which copies them.
        let r = unsafe { sys::cuGraphExecKernelNodeSetParams_v2(exec.exec, node, &p) }.result();
        if let Err(e) = r {
            return Err(launch_error(gpu, n, "cuGraphExecKernelNodeSetParams", e));
        }
    }
    Ok(())
}

fn launch_error(
    gpu: &Inner,
    n: &Node,
    call: &'static str,
    e: cudarc::driver::DriverError,
) -> Error {
    use sys::CUresult::*;
    if matches!(
        e.0,
        CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    ) {
        let (name, message) = crate::error::describe(e);
        return Error::InvalidLaunch {
            kernel: n.kernel.name,
            reason: format!(
                "the driver refused the configuration {:?}: {name} ({message})",
                n.grid
            ),
        };
    }
    gpu.error(call, e, Some(n.kernel.name))
}
