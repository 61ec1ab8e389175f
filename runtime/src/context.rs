//! A context's state above its backend: the backend itself, the pools of device staging,
//! pinned host memory and streams, and the caches of the placement model and the pipeline
//! planner. Every handle — [`crate::gpu::Gpu`], buffers, streams, guards — shares one through
//! an `Arc`, so this sits below all of them and names none of them.

use crate::backend::{FunctionId, Ops, StreamId};
use crate::error::{Error, Result};
use crate::page_runs::PageRuns;
use crate::pipeline::plan::LinkProfile;
use crate::placement::model::{DeviceProfile, LinkCosts};
use crate::pool::{FreeLists, size_class};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// One context: a backend and what is written once above it.
pub(crate) struct Inner {
    backend: Box<dyn Ops>,
    /// Unique among the contexts of the process, never reused (unlike the address of an
    /// `Inner` or the ids of its streams once it is dropped).
    pub(crate) id: u64,
    /// The backend's default stream.
    pub(crate) default_stream: StreamId,
    /// Device staging buffers of `#[pinned_async]` arguments.
    pub(crate) staging: FreeLists<()>,
    /// Pinned host allocations, by size class and flags.
    pub(crate) pinned: FreeLists<u32>,
    /// Streams of pipelined launches, kept for reuse.
    streams: Mutex<Vec<StreamId>>,
    /// The link, measured on first use by a pipelined launch.
    pub(crate) link: OnceLock<LinkProfile>,
    /// The placement model's constants, loaded on first use.
    pub(crate) costs: OnceLock<LinkCosts>,
    /// The device's coherence attributes, read on first use (or set).
    pub(crate) profile: OnceLock<DeviceProfile>,
    /// Random reads per second measured on one mapped allocation, by (host address, bytes):
    /// the rate depends on the allocation's physical layout.
    pub(crate) random_rates: Mutex<HashMap<(u64, usize), f64>>,
    /// Whether kernels of this context read another context's memory in place, by that
    /// context's id: asked of the topology and enabled once per pair. A context made anew (a
    /// reset) has a new id, so its enablement is asked for again.
    peers: Mutex<HashMap<u64, bool>>,
    /// The runs of host pages registered for shared memory (`Gpu::share`), with their users.
    pub(crate) shared_pages: Mutex<PageRuns>,
}

impl Inner {
    pub(crate) fn new(backend: Box<dyn Ops>) -> Inner {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Inner {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            default_stream: backend.default_stream(),
            backend,
            staging: FreeLists::new(),
            pinned: FreeLists::new(),
            streams: Mutex::new(Vec::new()),
            link: OnceLock::new(),
            costs: OnceLock::new(),
            profile: OnceLock::new(),
            random_rates: Mutex::new(HashMap::new()),
            peers: Mutex::new(HashMap::new()),
            shared_pages: Mutex::new(PageRuns::default()),
        }
    }

    /// The backend of this context.
    pub(crate) fn ops(&self) -> &dyn Ops {
        &*self.backend
    }

    /// Queue a copy of `bytes` from host memory at `host` to `device` on `stream`, cut where
    /// the host range crosses the edge of memory registered by [`Gpu::share`](crate::Gpu::share):
    /// the driver refuses one copy over several registrations, or over registered and
    /// unregistered pages, which a buffer sharing a page with shared memory can be.
    ///
    /// # Safety
    /// As for [`MemoryOps::copy_h2d`](crate::backend::MemoryOps::copy_h2d).
    pub(crate) unsafe fn copy_h2d(
        &self,
        stream: StreamId,
        device: u64,
        host: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        for (at, len) in self.host_pieces(host, bytes) {
            let offset = at - host;
            // SAFETY: a part of the caller's ranges, at the same offset in both.
            unsafe {
                self.ops()
                    .copy_h2d(stream, device + offset, at, len, kernel)
            }?;
        }
        Ok(())
    }

    /// As [`copy_h2d`](Inner::copy_h2d), from `device` to host memory at `host`.
    ///
    /// # Safety
    /// As for [`MemoryOps::copy_d2h`](crate::backend::MemoryOps::copy_d2h).
    pub(crate) unsafe fn copy_d2h(
        &self,
        stream: StreamId,
        host: u64,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        for (at, len) in self.host_pieces(host, bytes) {
            let offset = at - host;
            // SAFETY: a part of the caller's ranges, at the same offset in both.
            unsafe {
                self.ops()
                    .copy_d2h(stream, at, device + offset, len, kernel)
            }?;
        }
        Ok(())
    }

    /// `host..host + bytes` as pieces that each lie within one shared-memory registration or
    /// outside all of them (one piece when none is crossed, the common case).
    fn host_pieces(&self, host: u64, bytes: usize) -> impl Iterator<Item = (u64, usize)> {
        let end = host + bytes as u64;
        let cuts = self.shared_pages.lock().expect("poisoned").cuts(host, end);
        let mut at = host;
        cuts.into_iter().chain(std::iter::once(end)).map(move |b| {
            let piece = (at, (b - at) as usize);
            at = b;
            piece
        })
    }

    /// Make this context current on the calling thread; refuse if it was lost.
    pub(crate) fn bind(&self) -> Result<()> {
        self.backend.bind()
    }

    /// Check a launch of `kernel` over `grid` against the device's limits
    /// ([`DeviceLimits::check_kernel`](crate::limits::DeviceLimits::check_kernel)):
    /// [`Error::InvalidLaunch`](crate::Error::InvalidLaunch) naming the limit it exceeds. Every
    /// launch path calls it before it queues anything or touches memory, and the backends do
    /// not check again.
    pub(crate) fn check_limits(
        &self,
        kernel: &'static crate::launch::kernel::Kernel,
        grid: &crate::launch::grid::Grid,
    ) -> Result<()> {
        self.ops().device_limits()?.check_kernel(kernel, grid)
    }

    /// [`Inner::check_limits`], then what the compiled function `func` of `kernel` allows
    /// ([`KernelOps::check_function`](crate::backend::KernelOps::check_function)).
    pub(crate) fn check_launch(
        &self,
        kernel: &'static crate::launch::kernel::Kernel,
        func: FunctionId,
        grid: &crate::launch::grid::Grid,
    ) -> Result<()> {
        self.check_limits(kernel, grid)?;
        self.ops().check_function(kernel, func, grid)
    }

    /// Whether an earlier fault made this context unusable.
    pub(crate) fn is_lost(&self) -> bool {
        self.backend.fault().is_lost()
    }

    /// Wait for everything queued on `stream`; the first failure of its work (`kernel` names
    /// the launch in a fault report).
    pub(crate) fn sync(&self, stream: StreamId, kernel: Option<&str>) -> Result<()> {
        self.bind()?;
        self.backend.sync(stream, kernel)
    }

    /// Wait for the work queued on `stream` before `point`; the first failure of that work
    /// ([`StreamOps::sync_point`](crate::backend::StreamOps::sync_point)).
    pub(crate) fn sync_point(
        &self,
        stream: StreamId,
        point: &crate::backend::Point,
        kernel: Option<&str>,
    ) -> Result<()> {
        self.bind()?;
        self.backend.sync_point(stream, point, kernel)
    }

    /// Wait for everything queued on `stream` so far without taking its failure (the next
    /// synchronise still reports it). A lost context runs nothing more: returns at once.
    pub(crate) fn drain(&self, stream: StreamId) {
        let ops = self.ops();
        if let Ok(p) = ops.record_point(stream) {
            ops.wait_point(&p);
            ops.release_point(p);
        } else {
            let _ = self.sync(stream, None);
        }
    }

    /// Whether `stream` has nothing left to do: all its work ran, or it stopped on an error
    /// (the next synchronise reports it). Never blocks.
    pub(crate) fn idle(&self, stream: StreamId) -> bool {
        self.backend.idle(stream)
    }

    /// Keep `e`, a failure of `stream` that a synchronise took but nobody received, for the
    /// stream's next synchronise.
    pub(crate) fn keep_failure(&self, stream: StreamId, e: Error) {
        self.backend.keep_failure(stream, e);
    }

    /// Refuse to hand this context's memory or work to `other` (or the reverse) when a
    /// different backend runs it: a CUDA device address means nothing to the simulator (which
    /// would take it for a host pointer), the simulator's memory is nothing a GPU can reach,
    /// and neither backend can wait for the other's events. `what` names the operation.
    pub(crate) fn same_backend(&self, other: &Inner, what: &str) -> Result<()> {
        if self.ops().shares_work_with(other.ops()) {
            return Ok(());
        }
        let (mine, theirs) = (self.ops().kind(), other.ops().kind());
        Err(Error::Usage(format!(
            "{what}: `{}` ({mine}) and `{}` ({theirs}) are run by different backends, which \
             cannot use each other's memory or wait for each other's work; copy through the \
             host instead (`to_vec`, then `upload`)",
            self.ops().name(),
            other.ops().name(),
        )))
    }

    /// Whether kernels of this context can read `owner`'s memory in place: asked of the
    /// topology (`cuDeviceCanAccessPeer`, never assumed) and, where it can, with peer access
    /// enabled, the first time for each owner; remembered afterwards.
    pub(crate) fn reaches(&self, owner: &Inner) -> Result<bool> {
        if let Some(&direct) = self.peers.lock().expect("poisoned").get(&owner.id) {
            return Ok(direct);
        }
        let direct = self.ops().can_access_peer(owner.ops().peer_id())?;
        if direct {
            self.bind()?;
            self.ops().enable_peer_access(owner.ops())?;
        }
        self.peers
            .lock()
            .expect("poisoned")
            .insert(owner.id, direct);
        Ok(direct)
    }

    /// The contexts whose reach [`Inner::reaches`] remembers, with the answer.
    #[cfg(test)]
    pub(crate) fn known_peers(&self) -> Vec<(u64, bool)> {
        let mut v: Vec<_> = self
            .peers
            .lock()
            .expect("poisoned")
            .iter()
            .map(|(&k, &d)| (k, d))
            .collect();
        v.sort_unstable();
        v
    }

    /// A stream (for a `Stream`, a pipelined run, a device set's collectives), from the pool
    /// or new. Streams are destroyed only with the context: one a completion names stays
    /// live as long as the completion, which holds the context.
    pub(crate) fn take_stream(&self) -> Result<StreamId> {
        if let Some(s) = self.streams.lock().expect("poisoned").pop() {
            return Ok(s);
        }
        self.backend.stream_new()
    }

    /// Give back a stream whose work is complete (and whose failures were taken).
    pub(crate) fn put_stream(&self, s: StreamId) {
        self.streams.lock().expect("poisoned").push(s);
    }

    /// Take a pooled device staging buffer of `bytes`' size class (allocating one when none is
    /// free): `(class, address)`. Out of memory is `Error::OutOfMemory` with the device's free
    /// and total memory.
    pub(crate) fn take_staging(&self, bytes: usize) -> Result<(usize, u64)> {
        let class = size_class(bytes);
        self.staging
            .take(class, (), |c| self.backend.alloc(c))
            .map(|p| (class, p))
    }

    /// Free the memory cached by the pools (memory in use is not affected). The context is
    /// current.
    pub(crate) fn free_pools(&self) {
        for (class, _, p) in self.staging.drain() {
            // SAFETY: a pooled staging allocation of `class` bytes of this context, not in use
            // (it is in the free list only after the launch using it completed).
            unsafe { self.backend.free(p, class) };
        }
        for (class, _, p) in self.pinned.drain() {
            // SAFETY: a pooled pinned allocation of `class` bytes of this context, no longer
            // referenced (it returns to the pool only after its uses completed).
            unsafe { self.backend.free_host(p, class) };
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A lost context is dead (and will be reset): its handles must not be touched.
        if self.is_lost() || self.bind().is_err() {
            return;
        }
        self.free_pools();
        for s in self.streams.get_mut().expect("poisoned").drain(..) {
            self.backend.stream_drop(s);
        }
    }
}
