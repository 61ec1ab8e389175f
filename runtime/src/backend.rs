//! The one interface of the two backends: the CUDA driver ([`driver::Driver`], in `driver/`)
//! and the CPU simulator ([`sim::Simulator`], in `sim/`). Everything above it — memory kinds
//! and pools, launches, collectives, graphs, events, streams, pipelines, placement probes and
//! the tracking of queued work — is written once against [`Ops`]; a context holds one
//! implementation, chosen when it is made ([`open`]), and nothing above this module asks which
//! one it is.
//!
//! [`Ops`] is four traits, one per concern, so that each backend implements them in a file per
//! concern: the context ([`ContextOps`]), memory and copies ([`MemoryOps`]), streams, completion
//! points and timed events ([`StreamOps`]), and kernels and graphs ([`KernelOps`]).
//!
//! The layers above hold no object of a backend's own. Streams and functions are ids into a
//! table the context owns ([`StreamId`], [`FunctionId`]: `Copy`, `Send` and `Sync` by
//! construction); completion points, timed events and graphs ready to replay are values of this
//! interface ([`Point`], [`EventHandle`], [`GraphExec`]) whose insides only the backends read.
//! The driver's raw handles stay in the driver backend, which keeps them in one wrapper
//! (`driver/handle.rs`). Two methods lend them out on purpose, for libraries that queue on
//! berth's context and streams (cudarc, NCCL) and for the expert escape hatch:
//! [`ContextOps::raw_context`] and [`StreamOps::raw_stream`]; on the simulator they have
//! nothing to lend. Where the simulator lacks what the hardware has, the interface says so as
//! a capability ([`ContextOps::has_link`]), not by naming the backend.
//!
//! On the simulator every address is a host address: device memory and staging are
//! 256-byte-aligned zeroed heap allocations, copies are `memcpy` jobs on the stream's worker
//! thread, and the "device pointer" of mapped or registered memory is the host pointer itself.

pub(crate) mod driver;
pub(crate) mod ids;
pub(crate) mod open;
pub(crate) mod sim;

pub(crate) use ids::{FunctionId, StreamId};

use crate::backend::driver::handle::Handle;
use crate::backend::sim::worker::{SimMark, SimStream};
use crate::error::{Error, Result};
use crate::fault::FaultState;
use crate::launch::grid::Grid;
use crate::launch::kernel::{Entry, Kernel};
use crate::launch::params::ParamBlock;
use crate::limits::DeviceLimits;
use crate::placement::model::DeviceProfile;
use cudarc::driver::{CudaContext, sys};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Which backend runs a context's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A CUDA GPU.
    Cuda,
    /// The CPU simulator.
    Simulator,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Cuda => "a CUDA GPU",
            Backend::Simulator => "the CPU simulator",
        })
    }
}

/// Who runs a device set's collectives on a backend's contexts
/// ([`ContextOps::collective_engine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CollectiveEngine {
    /// NCCL, on a stream of each member (berth's `nccl` feature; refused without it).
    Nccl,
    /// The set itself, on the host: every member's memory is host memory, read, combined and
    /// written back with the same checks and results.
    Host,
}

/// A place in one stream's queue: everything queued on it before this point. Made by
/// [`StreamOps::record_point`], given back to [`StreamOps::release_point`].
pub(crate) struct Point(pub(in crate::backend) PointRepr);

/// What a [`Point`] is on each backend.
pub(in crate::backend) enum PointRepr {
    /// A CUDA event recorded on the stream (timing disabled; from the context's pool).
    Event(Handle<sys::CUevent>),
    /// A simulated stream and its position.
    Sim(Arc<SimStream>, u64),
}

/// A timed event ([`StreamOps::event_new`]): recorded on a stream, waited for, timed against
/// another, waited for by another stream.
pub(crate) struct EventHandle(pub(in crate::backend) EventRepr);

/// What an [`EventHandle`] is on each backend.
pub(in crate::backend) enum EventRepr {
    /// A CUDA event with timing enabled.
    Cuda(Handle<sys::CUevent>),
    /// Where a simulated event was last recorded (`None` before its first record).
    Sim(Mutex<Option<SimMark>>),
}

/// One launch of a recorded sequence, as a graph replays it.
pub(crate) struct GraphNode {
    pub(crate) kernel: &'static Kernel,
    pub(crate) func: FunctionId,
    pub(crate) grid: Grid,
    pub(crate) params: ParamBlock,
}

impl GraphNode {
    /// Whether `self` and `other` differ only in parameter values.
    pub(crate) fn same_shape(&self, other: &GraphNode) -> bool {
        std::ptr::eq(self.kernel, other.kernel)
            && self.func == other.func
            && self.grid == other.grid
    }
}

/// A recorded sequence made ready to replay ([`KernelOps::graph_build`]). `Send`, not `Sync`:
/// the driver does not synchronise calls on one graph, so whoever shares it serialises its
/// uses (a mutex).
pub(crate) struct GraphExec(pub(in crate::backend) GraphRepr);

/// What a [`GraphExec`] is on each backend.
pub(in crate::backend) enum GraphRepr {
    /// An instantiated CUDA graph and its kernel nodes, in recording order.
    Cuda {
        graph: Handle<sys::CUgraph>,
        exec: Handle<sys::CUgraphExec>,
        nodes: Vec<Handle<sys::CUgraphNode>>,
    },
    /// The simulator replays the recorded launches one by one.
    Replay,
}

/// What a backend keeps across the parts of one launch queued as several
/// ([`KernelOps::launch_group`]).
pub(crate) enum LaunchGroup {
    /// Nothing: the parts run as launches of their own (a GPU's case).
    Unchecked,
    /// The simulator's checks of the parts as one launch.
    Sim(Arc<crate::backend::sim::run::Parts>),
}

/// Where a context's device sits for peer access ([`ContextOps::peer_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerId {
    /// A CUDA device, by ordinal.
    Device(usize),
    /// A member of a simulated device set: the set, the member's index, and whether the set
    /// models peer links (without them, peer memory is copied, as on GPUs without peer access).
    Simulated {
        /// The set.
        set: u64,
        /// The member.
        index: usize,
        /// Whether its members read each other's memory in place.
        links: bool,
    },
}

/// `cuMemHostAlloc` flags of [`MemoryOps::alloc_host`]: memory mapped into the device's address
/// space.
pub(crate) const HOST_DEVICEMAP: u32 = sys::CU_MEMHOSTALLOC_DEVICEMAP;
/// Pinned for every context of the process, not only the allocating one.
pub(crate) const HOST_PORTABLE: u32 = sys::CU_MEMHOSTALLOC_PORTABLE;
/// Write-combined: fast for the device to read over the link, slow for the host to read.
pub(crate) const HOST_WRITECOMBINED: u32 = sys::CU_MEMHOSTALLOC_WRITECOMBINED;

/// A backend: every operation the layers above need.
pub(crate) trait Ops: ContextOps + MemoryOps + StreamOps + KernelOps {}

impl<T: ContextOps + MemoryOps + StreamOps + KernelOps> Ops for T {}

/// The device and the health of the context.
pub(crate) trait ContextOps: Send + Sync {
    /// Which backend this is: for [`crate::gpu::Gpu::backend`] and for naming the backend in
    /// messages. Outside this module nothing branches on it; the questions it would answer
    /// are methods of their own ([`ContextOps::shares_work_with`],
    /// [`ContextOps::collective_engine`]).
    fn kind(&self) -> Backend;

    /// Whether this context and `other` can be handed each other's memory and work: a device
    /// address of one means something to the other's kernels (peer access permitting), and a
    /// stream of one can wait for a completion point or event of the other. Contexts of one
    /// backend can; across backends nothing is shared (a CUDA device address means nothing to
    /// the simulator, which would take it for a host pointer; the simulator's memory is
    /// nothing a GPU can reach; neither can wait for the other's events).
    fn shares_work_with(&self, other: &dyn Ops) -> bool {
        self.kind() == other.kind()
    }

    /// Who runs a device set's collectives when every member is of this backend.
    fn collective_engine(&self) -> CollectiveEngine;

    /// The device's name, e.g. "NVIDIA H200".
    fn name(&self) -> &str;

    /// The device ordinal.
    fn ordinal(&self) -> usize;

    /// Devices in the process: with more than one, pinned memory is made portable.
    fn device_count(&self) -> usize;

    /// The driver's handle of this context, lent to other code that calls the driver itself
    /// (the escape hatch, `raw.rs`): valid while this context lives and is not lost. `None`
    /// on the simulator, which has no CUDA context.
    fn raw_context(&self) -> Option<sys::CUcontext>;

    /// A raw device attribute (the escape hatch, `raw.rs`); refused on the simulator.
    fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32>;

    /// The device's copy engines: how many copies run at once, each way (the pipeline's
    /// plan). None on the simulator, whose copies are `memcpy`s on a stream's thread.
    fn copy_engines(&self) -> Result<u32>;

    /// Compute capability (major, minor).
    fn compute_capability(&self) -> Result<(i32, i32)>;

    /// (free, total) memory in bytes.
    fn memory_info(&self) -> Result<(usize, usize)>;

    /// Whether the device reads pageable host memory coherently; `None` where the device has
    /// no such attributes (the simulator), so that the default profile applies and a context
    /// may still be given another.
    fn device_profile(&self) -> Result<Option<DeviceProfile>>;

    /// The launch limits: the device's own (read once), or (the simulator) those it enforces.
    fn device_limits(&self) -> Result<DeviceLimits>;

    /// Enforce `limits` from now on (the simulator, to check launches against another GPU);
    /// `false` where the limits are the device's own, or were already used or given.
    fn set_device_limits(&self, limits: DeviceLimits) -> bool;

    /// Whether there is a host↔device link: copies over it run on copy engines, concurrently
    /// with host code, and its rates (copies, random reads of mapped memory) can be measured.
    /// The simulator's copies are `memcpy`s on a stream's thread.
    fn has_link(&self) -> bool;

    /// The CPUs of the NUMA node the device's PCI link hangs off, where the system says
    /// (Linux's sysfs); `None` otherwise, and on the simulator. Pinned memory meant for this
    /// device alone is allocated from a thread on them ([`crate::numa`]).
    fn near_cpus(&self) -> Option<Vec<usize>>;

    /// Whether the context was lost to a fault, and which kernels are in flight.
    fn fault(&self) -> &FaultState;

    /// Whether a fault made the context unusable: every later operation is refused and every
    /// later wait reports the fault, until [`ContextOps::recover`].
    fn is_lost(&self) -> bool {
        self.fault().is_lost()
    }

    /// Make the context current on the calling thread; refuse if it was lost.
    fn bind(&self) -> Result<()>;

    /// Wait for all work on every stream of the context.
    fn synchronize(&self) -> Result<()>;

    /// cudarc's handle of this context (the device's primary context, shared, not copied),
    /// made once; the simulator has none (`Error::NeedsGpu`).
    fn cudarc_context(&self) -> Result<Arc<CudaContext>>;

    /// Where this context's device sits for peer access.
    fn peer_id(&self) -> PeerId;

    /// Whether this context's kernels can access the device memory of `peer` in place, as the
    /// topology says (`cuDeviceCanAccessPeer`; a simulated set's links); `true` for the same
    /// device.
    fn can_access_peer(&self, peer: PeerId) -> Result<bool>;

    /// Map `peer`'s device memory into this context, once (later calls do nothing). Only where
    /// [`ContextOps::can_access_peer`] says so.
    fn enable_peer_access(&self, peer: &dyn Ops) -> Result<()>;

    /// Replace a context lost to a fault by a fresh one on the same device: refused for a
    /// healthy one (a reset would destroy its live buffers) and where there is nothing to
    /// recover.
    fn recover(&self) -> Result<Box<dyn Ops>>;

    /// The simulator behind this context, for the simulator's test helpers
    /// (`sim/testing.rs`); `None` on every other backend.
    #[cfg(test)]
    fn simulator(&self) -> Option<&sim::Simulator> {
        None
    }
}

/// Memory, copies and stream memory operations. Addresses are `u64`: device addresses, or host
/// addresses where the memory is host memory.
pub(crate) trait MemoryOps {
    /// `bytes` (> 0) of device memory: uninitialised on the driver, zeroed on the simulator.
    fn alloc(&self, bytes: usize) -> Result<u64>;

    /// The hardware's tensor map (`CUtensorMap`) of the 2-D matrix at device address `base`
    /// with `shape` (checked by the caller: [`crate::tensor_map`]); zeros on the simulator,
    /// which reads the shape itself.
    fn tensor_map(&self, base: u64, shape: &berth_device::tma::MapShape) -> Result<[u64; 16]>;

    /// Free device memory from [`MemoryOps::alloc`].
    ///
    /// # Safety
    /// 1. `ptr` came from `alloc(bytes)` of this context and is freed once.
    /// 2. No queued work uses it any more.
    unsafe fn free(&self, ptr: u64, bytes: usize);

    /// `bytes` (> 0) of page-locked host memory with `cuMemHostAlloc` `flags`, uninitialised.
    fn alloc_host(&self, bytes: usize, flags: u32) -> Result<u64>;

    /// Free host memory from [`MemoryOps::alloc_host`].
    ///
    /// # Safety
    /// 1. `ptr` came from `alloc_host(bytes, _)` of this context and is freed once.
    /// 2. Nothing uses it any more.
    unsafe fn free_host(&self, ptr: u64, bytes: usize);

    /// The device address of host memory allocated with `DEVICEMAP`.
    fn mapped_address(&self, host: u64) -> Result<u64>;

    /// `bytes` (> 0) of unified (managed) memory kept in host memory: its preferred location
    /// the host, mapped for this device, which reads and writes it in place without migrating
    /// it; one address for the host and the device. Uninitialised on the driver (no page
    /// placed until first touched), zeroed on the simulator. `Error::Usage` where the device
    /// cannot use managed memory while the host does (no concurrent managed access).
    fn alloc_managed_host(&self, bytes: usize) -> Result<u64>;

    /// Free memory from [`MemoryOps::alloc_managed_host`].
    ///
    /// # Safety
    /// 1. `ptr` came from `alloc_managed_host(bytes)` of this context and is freed once.
    /// 2. Nothing uses it any more.
    unsafe fn free_managed(&self, ptr: u64, bytes: usize);

    /// Page-lock `bytes` (> 0) of existing host memory at `host` and map it into the device's
    /// address space; its device address.
    ///
    /// # Safety
    /// 1. `host..host + bytes` is live host memory that stays allocated, at the same place,
    ///    until [`MemoryOps::unregister`] — except bytes that no device work reaches (other
    ///    allocations on the same pages), which may be freed meanwhile: registering
    ///    page-locks and maps, and reads or writes nothing.
    unsafe fn register(&self, host: *mut c_void, bytes: usize) -> Result<u64>;

    /// Undo [`MemoryOps::register`].
    ///
    /// # Safety
    /// 1. `host` was registered with this context and is unregistered once.
    /// 2. No queued work uses the memory any more.
    unsafe fn unregister(&self, host: *mut c_void);

    /// Enqueue a copy of `bytes` from host memory to device memory on `stream`.
    ///
    /// # Safety
    /// 1. Both ranges are valid for `bytes`, stay alive and are written by nobody else until
    ///    the stream has passed the copy.
    /// 2. On the driver, `host` is pinned unless the caller synchronises the stream before the
    ///    host memory changes.
    unsafe fn copy_h2d(
        &self,
        stream: StreamId,
        device: u64,
        host: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Enqueue a copy of `bytes` from device memory to host memory on `stream`.
    ///
    /// # Safety
    /// As for [`MemoryOps::copy_h2d`], with the host memory borrowed exclusively.
    unsafe fn copy_d2h(
        &self,
        stream: StreamId,
        host: u64,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Enqueue a copy of `bytes` from device memory at `src` of the context `from` to device
    /// memory at `dst` of this context, on `stream` (of this context).
    ///
    /// # Safety
    /// 1. `dst` is device memory of this context and `src` of `from`, both valid for `bytes`,
    ///    alive until the stream has passed the copy.
    /// 2. Nothing writes `src`, or uses `dst`, meanwhile.
    unsafe fn copy_peer(
        &self,
        stream: StreamId,
        dst: u64,
        from: &dyn Ops,
        src: u64,
        bytes: usize,
        what: &str,
    ) -> Result<()>;

    /// Enqueue zeroing `bytes` of device memory at `device` on `stream`.
    ///
    /// # Safety
    /// 1. `device` is device memory of at least `bytes`, alive until the stream has passed the
    ///    memset.
    /// 2. Nothing else uses it meanwhile.
    unsafe fn zero(&self, stream: StreamId, device: u64, bytes: usize, kernel: &str) -> Result<()>;

    /// Enqueue setting `count` 4-byte words of device memory at `device` to `value` on `stream`.
    ///
    /// # Safety
    /// As for [`MemoryOps::zero`], for `4 × count` bytes at a 4-aligned `device`.
    unsafe fn fill_u32(
        &self,
        stream: StreamId,
        device: u64,
        value: u32,
        count: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Enqueue a stream memory operation on `stream`: once the stream gets there (all earlier
    /// work on it, copies included, done), store 1 into the `u32` of mapped host memory at
    /// `host` (device address `device`) with release semantics at system scope. `false` where
    /// the device cannot do it (nothing queued then).
    ///
    /// # Safety
    /// 1. `host` is a 4-aligned `u32` of mapped memory of this context, alive until the stream
    ///    has passed the operation.
    /// 2. The host accesses it only atomically meanwhile.
    unsafe fn write_flag(&self, stream: StreamId, host: u64, device: u64) -> bool;
}

/// Streams, the completion points that track queued work, and timed events.
pub(crate) trait StreamOps {
    /// The context's default stream (alive as long as the backend).
    fn default_stream(&self) -> StreamId;

    /// A new stream, which never serialises with the default stream.
    fn stream_new(&self) -> Result<StreamId>;

    /// Wait for `stream`'s work and destroy it. Called in a live context only.
    fn stream_drop(&self, stream: StreamId);

    /// Wait for everything queued on `stream`; the first failure of its work (`kernel` names
    /// the launch in a fault report).
    fn sync(&self, stream: StreamId, kernel: Option<&str>) -> Result<()>;

    /// Whether `stream` has nothing left to do: all its work ran, or it stopped on an error
    /// (the next synchronise reports it). Never blocks.
    fn idle(&self, stream: StreamId) -> bool;

    /// Keep `e`, a failure of `stream` that a synchronise took but nobody received, for the
    /// stream's next synchronise. On a GPU the failures that happen after work was queued are
    /// faults, which lose the context: every later call reports them already.
    fn keep_failure(&self, stream: StreamId, e: Error);

    /// The point `stream` reaches once the work queued on it so far is done.
    fn record_point(&self, stream: StreamId) -> Result<Point>;

    /// Block the host until `point` is reached. A context lost to a fault runs nothing any
    /// more, so a failed wait returns too.
    fn wait_point(&self, point: &Point);

    /// Wait for the work queued on `stream` before `point` (a point of `stream`), not for
    /// what was queued after it; the first failure of that work, as [`StreamOps::sync`]
    /// reports it (a failure of later work is left to the next synchronise).
    fn sync_point(&self, stream: StreamId, point: &Point, kernel: Option<&str>) -> Result<()>;

    /// Whether `point` is reached; a context lost to a fault runs nothing any more, so its
    /// points count as reached. Never blocks.
    fn point_reached(&self, point: &Point) -> bool;

    /// Make work queued on `stream` from now on wait until `point` is reached, without
    /// blocking the host. `point` may be of another stream of this context; the wait holds
    /// for the work queued before the point even if the point's event is recorded again.
    fn stream_wait_point(&self, stream: StreamId, point: &Point) -> Result<()>;

    /// A point is no longer needed.
    fn release_point(&self, point: Point);

    /// A timed event, not yet recorded.
    fn event_new(&self) -> Result<EventHandle>;

    /// Move `event` to the end of the work queued so far on `stream`.
    fn event_record(&self, event: &EventHandle, stream: StreamId) -> Result<()>;

    /// Block the host until `event`'s latest record is reached (at once if never recorded).
    fn event_wait(&self, event: &EventHandle) -> Result<()>;

    /// Whether `event`'s latest record is reached. Never blocks.
    fn event_query(&self, event: &EventHandle) -> Result<bool>;

    /// Seconds from `start` to `stop`, both recorded and reached (negative if `stop` came
    /// first).
    fn event_elapsed(&self, start: &EventHandle, stop: &EventHandle) -> Result<f64>;

    /// Make work queued on `stream` from now on wait until `event` is reached, without
    /// blocking the host.
    fn stream_wait_event(&self, stream: StreamId, event: &EventHandle) -> Result<()>;

    /// Destroy `event`, which is not used again. Called in a live context only.
    fn event_drop(&self, event: &EventHandle);

    /// The driver's handle of `stream`, lent to a library that queues work on it itself
    /// (cudarc, NCCL) or to the escape hatch: it stays a valid stream of this context while
    /// the context lives and is not lost (streams are destroyed only with their context), and
    /// work queued on it runs in order with berth's. `None` on the simulator, whose streams
    /// are threads, and for a stream of another context.
    fn raw_stream(&self, stream: StreamId) -> Option<sys::CUstream>;
}

/// Kernels: function lookup, launches and graphs.
pub(crate) trait KernelOps {
    /// The function of `kernel`'s `entry`, loading its crate's module on first use; the
    /// launcher is checked against its PTX entries then. On the simulator the id names the
    /// entry only: one simulator entry runs both PTX entries' body.
    fn function(&self, kernel: &'static Kernel, entry: Entry) -> Result<FunctionId>;

    /// Refuse a block `func` (of `kernel`) cannot run with, as compiled: more threads than
    /// its registers per thread leave room for ([`Error::InvalidLaunch`]). Called with the
    /// device's own limits already checked, before anything of the launch is queued, so a
    /// refusal has no side effect. The simulator has no compiled function: nothing to refuse.
    fn check_function(
        &self,
        _kernel: &'static Kernel,
        _func: FunctionId,
        _grid: &Grid,
    ) -> Result<()> {
        Ok(())
    }

    /// Enqueue `kernel` over `grid` on `stream` with the parameter values `params` point to.
    /// Callers check the launch against the device's limits first
    /// ([`Inner::check_limits`](crate::context::Inner::check_limits)), before anything of
    /// theirs is queued: the simulator does not check again, and the GPU's driver refuses
    /// only what it would have refused anyway.
    ///
    /// # Safety
    /// 1. `func` is `function(kernel, entry)` of this context, for `Entry::General` or for
    ///    `grid.entry_of(kernel)` (the linear entry assumes a one-dimensional launch).
    /// 2. `params` has one pointer per parameter of `kernel`, each to a value of that
    ///    parameter's size; the values are copied before this returns.
    /// 3. All memory the values address stays alive, and is used by nothing that would race
    ///    the kernel, until the stream has passed it.
    unsafe fn launch(
        &self,
        kernel: &'static Kernel,
        func: FunctionId,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
    ) -> Result<()>;

    /// Begin a launch of `kernel` queued as `parts` launches that run at once, on several
    /// streams (the chunks of a pipelined launch); [`KernelOps::launch_part`] queues each.
    /// Every part passes its own piece of the slice arguments whose pointers are at the
    /// parameter slots of `own` (slot, element size), and the same memory in every other slice
    /// argument, which the parts then share as the blocks of one launch do. The simulator
    /// checks the parts' accesses to that memory against each other as it checks the blocks
    /// of a launch; a GPU keeps nothing.
    fn launch_group(
        &self,
        _kernel: &'static Kernel,
        _parts: usize,
        _own: &[(usize, usize)],
    ) -> LaunchGroup {
        LaunchGroup::Unchecked
    }

    /// [`KernelOps::launch`] of part `part` of `group`.
    ///
    /// # Safety
    /// As for [`KernelOps::launch`], and: `group` came from `launch_group` of this context for
    /// `kernel`; `part` is below its parts and queued once; `params` has a slice (pointer and
    /// length) at each slot of the group's `own`, of memory no other part reaches while this
    /// one runs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_part(
        &self,
        _group: &LaunchGroup,
        _part: usize,
        kernel: &'static Kernel,
        func: FunctionId,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller's contract includes `launch`'s.
        unsafe { self.launch(kernel, func, grid, stream, params) }
    }

    /// Make the recorded launches `nodes` (each after the previous one) ready to replay.
    fn graph_build(&self, nodes: &[GraphNode]) -> Result<GraphExec>;

    /// Give `exec`, built from `old`, the parameter values of `new` (the same kernels and
    /// grids: [`GraphNode::same_shape`]).
    fn graph_update(&self, exec: &GraphExec, new: &[GraphNode], old: &[GraphNode]) -> Result<()>;

    /// Enqueue a replay of `exec`, built from (or updated to) `nodes`, on `stream`.
    ///
    /// # Safety
    /// 1. Every node's parameters were checked against its kernel.
    /// 2. The memory they address stays alive, and is used by nothing that would race the
    ///    replay, until the stream has passed it.
    unsafe fn graph_launch(
        &self,
        exec: &GraphExec,
        nodes: &[GraphNode],
        stream: StreamId,
    ) -> Result<()>;

    /// Destroy `exec`. Called in a live context only.
    fn graph_drop(&self, exec: GraphExec);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the layers above hold of a backend, and what holds it, crosses threads by
    /// construction: no `unsafe impl` outside the driver's handle wrapper makes it so. A graph
    /// ready to replay is `Send` only: whoever shares it serialises its uses.
    #[test]
    fn handles_and_what_holds_them_cross_threads_by_construction() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<StreamId>();
        send_sync::<FunctionId>();
        send_sync::<Point>();
        send_sync::<EventHandle>();
        send_sync::<GraphNode>();
        send::<GraphExec>();
        send_sync::<driver::Driver>();
        send_sync::<sim::Simulator>();
        send_sync::<crate::context::Inner>();
        send_sync::<crate::track::Completion>();
        send_sync::<crate::gpu::Gpu>();
        send_sync::<crate::stream::Stream>();
        send_sync::<crate::event::Event>();
        send_sync::<crate::buffer::DeviceBuffer<f32>>();
        send_sync::<crate::scope::Scope<'static>>();
        send_sync::<crate::graph::Graph<'static>>();
        send_sync::<crate::graph::Recorder<'static>>();
        send::<crate::host_mem::PinnedBuffer<f32>>();
    }
}
