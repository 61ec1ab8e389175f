//! The CPU simulator backend: host memory for every kind of memory, worker threads as streams
//! (`sim/worker.rs`), and kernels run by the simulator (`sim/run.rs`) as jobs on those streams.
//! Its streams and events are in `sim/streams.rs`: a [`StreamId`] is an index into the
//! context's table of worker threads, a completion point a thread and a position in its queue.
//! What unit tests above the backend need of a simulated context is in `sim/testing.rs`.
//!
//! The executor's parts: blocks and their barriers (`sim/block.rs`), warps (`sim/warp.rs`),
//! shared memory (`sim/shared.rs`), race checks (`sim/check.rs`), the wording of reports
//! (`sim/report.rs`) and caught panics (`sim/panic.rs`).

mod async_copy;
mod block;
mod check;
mod panic;
mod report;
pub(crate) mod run;
mod shared;
mod streams;
#[cfg(test)]
pub(crate) mod testing;
mod warp;
pub(crate) mod worker;

use crate::backend::ids::Serial;
use crate::backend::sim::run::Parts;
use crate::backend::sim::worker::{Job, SimStream, SimStreams};
use crate::backend::{
    Backend, CollectiveEngine, ContextOps, FunctionId, GraphExec, GraphNode, GraphRepr, KernelOps,
    LaunchGroup, MemoryOps, Ops, PeerId, StreamId,
};
use crate::error::{Error, Result};
use crate::fault::FaultState;
use crate::launch::grid::Grid;
use crate::launch::kernel::{Entry, Kernel};
use crate::launch::params::ParamBlock;
use crate::limits::DeviceLimits;
use crate::placement::model::DeviceProfile;
use cudarc::driver::{CudaContext, sys};
use std::alloc::Layout;
use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The CPU simulator: host memory, and worker threads as streams.
pub(crate) struct Simulator {
    name: String,
    /// Carried by the ids of this context's streams and functions.
    serial: Serial,
    /// The streams (worker threads running queued work in order), by index: the default
    /// stream first.
    pub(super) streams: SimStreams,
    /// Never lost; kept for the in-flight bookkeeping every backend offers.
    fault: FaultState,
    /// Kernels whose launcher was checked against its PTX entry, by (crate, name).
    checked: Mutex<HashSet<(&'static str, &'static str)>>,
    /// The limits launches are checked against: the H200's unless set before first use.
    limits: OnceLock<DeviceLimits>,
    /// Which simulated device set this context belongs to (a set of its own when made alone).
    member: Member,
    /// The backend it reports: the simulator, except in unit tests of what is refused across
    /// backends ([`Simulator::posing_as`]).
    kind: Backend,
}

/// A simulated context's place in its device set.
#[derive(Clone, Copy)]
struct Member {
    /// The set, unique in the process.
    set: u64,
    /// This device's index (its ordinal).
    index: usize,
    /// Devices in the set.
    count: usize,
    /// Whether the set's devices read each other's memory in place.
    links: bool,
}

/// A fresh simulated set's identity.
pub(crate) fn new_set_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Simulator {
    /// A simulated context with one worker per core for its kernels' blocks.
    pub(crate) fn new() -> Simulator {
        Simulator::member_of(new_set_id(), 0, 1, false)
    }

    /// Device `index` of the simulated device set `set` of `count` devices; `links`: whether
    /// the set's devices read each other's memory in place (else peer memory is copied).
    pub(crate) fn member_of(set: u64, index: usize, count: usize, links: bool) -> Simulator {
        let workers = run::host_threads();
        tracing::info!(workers, index, count, "using the CPU simulator");
        let name = if count > 1 {
            format!("CPU simulator device {index} of {count} ({workers} worker threads)")
        } else {
            format!("CPU simulator ({workers} worker threads)")
        };
        let streams = SimStreams::default();
        // Index 0: `StreamOps::default_stream`.
        streams.add();
        Simulator {
            member: Member {
                set,
                index,
                count,
                links,
            },
            name,
            serial: Serial::take(),
            streams,
            fault: FaultState::default(),
            checked: Mutex::new(HashSet::new()),
            limits: OnceLock::new(),
            kind: Backend::Simulator,
        }
    }

    /// A simulated context that reports `kind` as its backend: a stand-in for a context of
    /// another backend in tests without a GPU.
    #[cfg(test)]
    pub(crate) fn posing_as(kind: Backend) -> Simulator {
        Simulator {
            kind,
            ..Simulator::new()
        }
    }

    /// The index of stream `id` in this context's table; `None` for another context's.
    fn index(&self, id: StreamId) -> Option<usize> {
        id.index_in(&self.serial)
    }

    /// The stream `id` names, started if it was not: one of this context's, else a usage
    /// error.
    pub(super) fn stream(&self, id: StreamId) -> Result<&Arc<SimStream>> {
        self.index(id)
            .and_then(|i| self.streams.get(i))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{id:?} is not one of `{}`'s (a stream of another context)",
                    self.name
                ))
            })
    }

    /// The id of stream `index` of this context.
    fn stream_id(&self, index: usize) -> Result<StreamId> {
        StreamId::new(&self.serial, index)
            .ok_or_else(|| Error::Usage(format!("`{}` has made too many streams", self.name)))
    }

    /// Queue `job` on the stream `stream`.
    /// Queue a run of `kernel` over `grid` on `stream`, as part `part.1` of the launch
    /// `part.0` when it is one part of several.
    ///
    /// # Safety
    /// As for [`KernelOps::launch`] (for a part, [`KernelOps::launch_part`]).
    unsafe fn queue_launch(
        &self,
        kernel: &'static Kernel,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
        part: Option<(Arc<Parts>, usize)>,
    ) -> Result<()> {
        // The launch was checked against the device's limits before anything of it was
        // queued (`Inner::check_limits`), as the GPU's driver would refuse it. A lost context
        // refuses it, as the GPU's does.
        self.streams.fault.check()?;
        // The job runs later, on the stream's thread: it takes its own copy of the values (as
        // `cuLaunchKernel` does); what they address stays borrowed by the launch's guard.
        let mut values = ParamBlock::new(kernel.params);
        for (i, (p, &ptr)) in kernel.params.iter().zip(params.iter()).enumerate() {
            // SAFETY: `params[i]` points to a value of parameter i's size (caller's contract).
            values.set(i, unsafe {
                std::slice::from_raw_parts(ptr.cast::<u8>(), p.size)
            });
        }
        let grid = *grid;
        let job = move || {
            let mut values = values;
            let mut ptrs = values.pointers();
            let part = part.as_ref().map(|(parts, i)| (&**parts, *i));
            // SAFETY: forwarded: one pointer per parameter of `kernel`, to live values (for a
            // part, a slice at each of the parts' own slots).
            unsafe { crate::backend::sim::run::run(kernel, &grid, &mut ptrs, part) }
        };
        self.enqueue(stream, Box::new(job))
    }

    fn enqueue(&self, stream: StreamId, job: Job) -> Result<()> {
        self.stream(stream)?.push(job);
        Ok(())
    }

    /// Queue a memcpy on a simulated stream.
    ///
    /// # Safety
    /// As for [`MemoryOps::copy_h2d`]: both ranges valid and left alone until the stream ran it.
    unsafe fn copy(&self, stream: StreamId, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY (of the job): the caller's contract; it runs before the stream passes it.
        let job = move || {
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
            Ok(())
        };
        self.enqueue(stream, Box::new(job))
    }
}

/// (available, total) host memory, the simulator's device memory.
fn host_memory() -> (usize, usize) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("MemAvailable:"), field("MemTotal:"))
}

impl ContextOps for Simulator {
    fn kind(&self) -> Backend {
        self.kind
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn ordinal(&self) -> usize {
        self.member.index
    }

    fn device_count(&self) -> usize {
        self.member.count
    }

    fn raw_context(&self) -> Option<sys::CUcontext> {
        None
    }

    fn collective_engine(&self) -> CollectiveEngine {
        CollectiveEngine::Host
    }

    fn attribute(&self, _attr: sys::CUdevice_attribute) -> Result<i32> {
        Err(Error::Usage(
            "the CPU simulator has no CUDA device attributes".into(),
        ))
    }

    fn copy_engines(&self) -> Result<u32> {
        Ok(0)
    }

    fn compute_capability(&self) -> Result<(i32, i32)> {
        Err(Error::Usage(
            "the CPU simulator has no compute capability".into(),
        ))
    }

    fn memory_info(&self) -> Result<(usize, usize)> {
        Ok(host_memory())
    }

    fn device_profile(&self) -> Result<Option<DeviceProfile>> {
        Ok(None)
    }

    fn device_limits(&self) -> Result<DeviceLimits> {
        Ok(*self.limits.get_or_init(|| DeviceLimits::H200))
    }

    fn set_device_limits(&self, limits: DeviceLimits) -> bool {
        self.limits.set(limits).is_ok()
    }

    fn has_link(&self) -> bool {
        false
    }

    fn near_cpus(&self) -> Option<Vec<usize>> {
        None
    }

    fn fault(&self) -> &FaultState {
        &self.fault
    }

    fn bind(&self) -> Result<()> {
        self.fault.ensure_alive()
    }

    fn synchronize(&self) -> Result<()> {
        self.streams.settle();
        self.streams.fault.report_all()
    }

    fn cudarc_context(&self) -> Result<Arc<CudaContext>> {
        Err(Error::NeedsGpu {
            what: "cudarc interop",
        })
    }

    fn peer_id(&self) -> PeerId {
        PeerId::Simulated {
            set: self.member.set,
            index: self.member.index,
            links: self.member.links,
        }
    }

    fn can_access_peer(&self, peer: PeerId) -> Result<bool> {
        Ok(match peer {
            PeerId::Simulated { set, index, links } if set == self.member.set => {
                index == self.member.index || (links && self.member.links)
            }
            _ => false,
        })
    }

    fn enable_peer_access(&self, peer: &dyn Ops) -> Result<()> {
        if self.can_access_peer(peer.peer_id())? {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "simulated device {} has no peer link to `{}`",
                self.member.index,
                peer.name()
            )))
        }
    }

    fn is_lost(&self) -> bool {
        self.streams.fault.is_poisoned()
    }

    fn recover(&self) -> Result<Box<dyn Ops>> {
        if !self.streams.fault.is_poisoned() {
            return Err(Error::Usage(
                "Gpu::recover: the simulated context is not lost (only a context lost to a \
                 fault is recovered)"
                    .into(),
            ));
        }
        let Member {
            set,
            index,
            count,
            links,
        } = self.member;
        let fresh = Simulator {
            kind: self.kind,
            ..Simulator::member_of(set, index, count, links)
        };
        if let Some(limits) = self.limits.get() {
            fresh.set_device_limits(*limits);
        }
        Ok(Box::new(fresh))
    }

    #[cfg(test)]
    fn simulator(&self) -> Option<&Simulator> {
        Some(self)
    }
}

const ALIGN: usize = 256;

fn layout(bytes: usize) -> Layout {
    Layout::from_size_align(bytes.max(1), ALIGN).expect("allocation size overflows")
}

impl MemoryOps for Simulator {
    fn tensor_map(&self, _base: u64, _shape: &berth_device::tma::MapShape) -> Result<[u64; 16]> {
        Ok([0; 16])
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        self.streams.fault.check()?;
        let out_of_memory = || {
            let (free, total) = host_memory();
            Error::OutOfMemory { bytes, free, total }
        };
        // A size no allocation can have is out of memory too, as on a GPU.
        if Layout::from_size_align(bytes.max(1), ALIGN).is_err() {
            return Err(out_of_memory());
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout(bytes)) };
        if p.is_null() {
            return Err(out_of_memory());
        }
        Ok(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize) {
        // SAFETY: the caller's contract: `ptr` came from `alloc(bytes)`, same layout.
        unsafe { std::alloc::dealloc(ptr as *mut u8, layout(bytes)) }
    }

    fn alloc_host(&self, bytes: usize, _flags: u32) -> Result<u64> {
        // Host memory is host memory: the same zeroed, aligned allocation as device memory.
        self.alloc(bytes)
    }

    unsafe fn free_host(&self, ptr: u64, bytes: usize) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_host(bytes, _)`, which is
        // `alloc(bytes)`.
        unsafe { self.free(ptr, bytes) }
    }

    fn mapped_address(&self, host: u64) -> Result<u64> {
        Ok(host)
    }

    fn alloc_managed_host(&self, bytes: usize) -> Result<u64> {
        // Host memory the simulated device reads in place, like every host allocation here.
        self.alloc(bytes)
    }

    unsafe fn free_managed(&self, ptr: u64, bytes: usize) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_managed_host(bytes)`, which is
        // `alloc(bytes)`.
        unsafe { self.free(ptr, bytes) }
    }

    unsafe fn register(&self, host: *mut c_void, _bytes: usize) -> Result<u64> {
        Ok(host as u64)
    }

    unsafe fn unregister(&self, _host: *mut c_void) {}

    unsafe fn copy_h2d(
        &self,
        stream: StreamId,
        device: u64,
        host: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        self.streams.fault.check()?;
        // SAFETY: the caller's contract.
        unsafe { self.copy(stream, device, host, bytes) }
    }

    unsafe fn copy_d2h(
        &self,
        stream: StreamId,
        host: u64,
        device: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        self.streams.fault.check()?;
        // SAFETY: the caller's contract.
        unsafe { self.copy(stream, host, device, bytes) }
    }

    unsafe fn copy_peer(
        &self,
        stream: StreamId,
        dst: u64,
        _from: &dyn Ops,
        src: u64,
        bytes: usize,
        _what: &str,
    ) -> Result<()> {
        self.streams.fault.check()?;
        // SAFETY: the caller's contract; every simulated device's memory is host memory.
        unsafe { self.copy(stream, dst, src, bytes) }
    }

    unsafe fn zero(
        &self,
        stream: StreamId,
        device: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        self.streams.fault.check()?;
        // SAFETY (of the job): the caller's contract; device memory is host memory here.
        let job = move || {
            unsafe { std::ptr::write_bytes(device as *mut u8, 0, bytes) };
            Ok(())
        };
        self.enqueue(stream, Box::new(job))
    }

    unsafe fn fill_u32(
        &self,
        stream: StreamId,
        device: u64,
        value: u32,
        count: usize,
        _kernel: &str,
    ) -> Result<()> {
        self.streams.fault.check()?;
        // SAFETY (of the job): the caller's contract: `count` aligned words of host memory,
        // left alone until the stream ran it.
        let job = move || {
            let words = unsafe { std::slice::from_raw_parts_mut(device as *mut u32, count) };
            words.fill(value);
            Ok(())
        };
        self.enqueue(stream, Box::new(job))
    }

    unsafe fn write_flag(&self, stream: StreamId, host: u64, _device: u64) -> bool {
        let job = move || {
            // SAFETY: the caller's contract: a live, aligned u32 that the host reads only
            // atomically until the stream has passed this job.
            unsafe { AtomicU32::from_ptr(host as *mut u32) }.store(1, Ordering::Release);
            Ok(())
        };
        self.enqueue(stream, Box::new(job)).is_ok()
    }
}

impl KernelOps for Simulator {
    fn function(&self, kernel: &'static Kernel, entry: Entry) -> Result<FunctionId> {
        // One simulator entry runs the body of every PTX entry.
        let key = (kernel.crate_name, kernel.name);
        if !self.checked.lock().expect("poisoned").contains(&key) {
            // As a module load would, once: a stale PTX or a macro bug is an error here.
            crate::ptx::check_kernel(kernel)?;
            self.checked.lock().expect("poisoned").insert(key);
        }
        // The id names the entry: the simulator has no function table.
        FunctionId::new(&self.serial, entry.number())
            .ok_or_else(|| Error::Usage("a simulator entry's id".into()))
    }

    unsafe fn launch(
        &self,
        kernel: &'static Kernel,
        _func: FunctionId,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: forwarded (`launch`'s contract).
        unsafe { self.queue_launch(kernel, grid, stream, params, None) }
    }

    fn launch_group(
        &self,
        _kernel: &'static Kernel,
        parts: usize,
        own: &[(usize, usize)],
    ) -> LaunchGroup {
        // One part is a launch like any other; more than `u32::MAX` cannot be numbered.
        if parts < 2 || u32::try_from(parts).is_err() {
            return LaunchGroup::Unchecked;
        }
        LaunchGroup::Sim(Arc::new(Parts::new(parts, own)))
    }

    unsafe fn launch_part(
        &self,
        group: &LaunchGroup,
        part: usize,
        kernel: &'static Kernel,
        _func: FunctionId,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let part = match group {
            LaunchGroup::Sim(parts) => Some((parts.clone(), part)),
            LaunchGroup::Unchecked => None,
        };
        // SAFETY: forwarded (`launch_part`'s contract).
        unsafe { self.queue_launch(kernel, grid, stream, params, part) }
    }

    fn graph_build(&self, _nodes: &[GraphNode]) -> Result<GraphExec> {
        Ok(GraphExec(GraphRepr::Replay))
    }

    fn graph_update(
        &self,
        _exec: &GraphExec,
        _new: &[GraphNode],
        _old: &[GraphNode],
    ) -> Result<()> {
        Ok(())
    }

    unsafe fn graph_launch(
        &self,
        _exec: &GraphExec,
        nodes: &[GraphNode],
        stream: StreamId,
    ) -> Result<()> {
        for n in nodes {
            let mut params = n.params.clone();
            let mut ptrs = params.pointers();
            // SAFETY: forwarded from the caller: each node's parameters were checked against
            // its kernel, and what they address outlives the replay.
            unsafe { self.launch(n.kernel, n.func, &n.grid, stream, &mut ptrs) }?;
        }
        Ok(())
    }

    fn graph_drop(&self, _exec: GraphExec) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The questions the layers above ask of a backend instead of its kind: simulated contexts
    /// share memory and work with each other and with no other backend, and run a set's
    /// collectives on the host.
    #[test]
    fn simulated_contexts_share_work_only_with_each_other_and_run_collectives_on_the_host() {
        let (a, b) = (Simulator::new(), Simulator::new());
        let cuda = Simulator::posing_as(Backend::Cuda);
        assert!(a.shares_work_with(&b));
        assert!(!a.shares_work_with(&cuda));
        assert!(!cuda.shares_work_with(&a));
        assert_eq!(a.collective_engine(), CollectiveEngine::Host);
    }
}
