//! The GPU context: device selection, the module cache, fault bookkeeping and recovery.

use crate::error::{Error, Result};
use crate::fault::{FaultState, MappedPanicRecord};
use crate::launch::Kernel;
use crate::pool::{FreeLists, PoolStats};
use crate::stream::StreamHandle;
use cudarc::driver::{result, sys};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, Weak};

/// A GPU context: one device, its default stream, and the kernels loaded into it.
///
/// Cheap to clone (a shared handle). Creating one never panics: without a driver or device it
/// returns [`Error::NoDriver`] / [`Error::NoDevice`].
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The CPU simulator rather than CUDA: no handle below is a driver object.
    pub(crate) sim: bool,
    pub(crate) ordinal: usize,
    pub(crate) device: sys::CUdevice,
    pub(crate) ctx: sys::CUcontext,
    pub(crate) name: String,
    /// CUDA devices in the process: with more than one, pinned memory is made portable.
    pub(crate) device_count: usize,
    pub(crate) default_stream: StreamHandle,
    functions: Mutex<HashMap<(&'static str, &'static str), sys::CUfunction>>,
    modules: Mutex<HashMap<&'static str, sys::CUmodule>>,
    pub(crate) panic_record: Option<MappedPanicRecord>,
    pub(crate) fault: FaultState,
    /// Device staging buffers of `#[pinned_async]` arguments.
    pub(crate) staging: FreeLists<()>,
    /// Pinned host allocations, by size class and flags.
    pub(crate) pinned: FreeLists<u32>,
    /// The link, measured on first use by a pipelined launch.
    pub(crate) link: std::sync::OnceLock<crate::pipeline::LinkProfile>,
    /// Streams of pipelined launches, kept for reuse.
    streams: Mutex<Vec<StreamHandle>>,
    /// Events (timing disabled) that mark where launches end ([`crate::track`]), for reuse.
    events: Mutex<Vec<sys::CUevent>>,
    /// The simulator's streams (worker threads running queued work in order).
    pub(crate) sim_streams: crate::sim_stream::SimStreams,
    /// The placement model's constants, loaded on first use.
    pub(crate) costs: std::sync::OnceLock<crate::placement::LinkCosts>,
    pub(crate) profile: std::sync::OnceLock<crate::placement::DeviceProfile>,
    /// Random reads per second measured on one mapped allocation ([`Gpu::measure_random_reads`]),
    /// by (host address, bytes): the rate depends on the allocation's physical layout.
    pub(crate) random_rates: Mutex<HashMap<(u64, usize), f64>>,
}

// SAFETY: the raw handles (context, device, modules, functions) are driver objects usable from
// any thread once the context is made current there, which every entry point does (`bind`).
unsafe impl Send for Inner {}
// SAFETY: as above; the mutable maps are behind mutexes.
unsafe impl Sync for Inner {}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.name)
            .finish()
    }
}

/// Which backend runs a context's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A CUDA GPU.
    Cuda,
    /// The CPU simulator.
    Simulator,
}

/// (available, total) host memory, for the simulator's `memory_info`.
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

/// Every live context handle of the process: a fault, or a reset, concerns all handles on
/// the same device (they share its primary context).
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn mark_device_lost(device: sys::CUdevice, why: &str) {
    let live = LIVE.lock().expect("poisoned");
    for inner in live.iter().filter_map(Weak::upgrade) {
        if inner.device == device {
            inner.fault.mark_lost(why.to_owned());
        }
    }
}

/// A driver that still refuses after a reset has poisoned the process, not just the context.
fn unrecoverable(e: Error) -> Error {
    match e {
        Error::Driver { name, .. } if is_sticky_name(&name) => Error::ProcessPoisoned { name },
        other => other,
    }
}

/// Destroy the device's primary context (all its resources) so the next retain creates a
/// fresh one.
fn reset_primary(device: sys::CUdevice) -> Result<()> {
    // SAFETY: detaching the calling thread from any context has no preconditions; a poisoned
    // context left current would taint the next calls on this thread.
    let _ = unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
    // SAFETY: resetting the primary context destroys all its resources. Every berth object
    // on this device was marked lost and skips its driver calls, so none of them touches a
    // destroyed handle afterwards.
    unsafe { sys::cuDevicePrimaryCtxReset_v2(device) }
        .result()
        .map_err(|e| Error::driver("cuDevicePrimaryCtxReset", e))
}

fn is_sticky_name(name: &str) -> bool {
    crate::fault::STICKY_NAMES.contains(&name)
}

fn check_driver() -> Result<()> {
    // SAFETY: only probes whether the library can be opened; cudarc's own entry points
    // panic when it cannot, which is why this runs first.
    let present = unsafe { sys::is_culib_present() };
    if !present {
        return Err(Error::NoDriver(
            "libcuda.so not found on the library path".into(),
        ));
    }
    result::init().map_err(|e| Error::driver("cuInit", e))
}

impl Gpu {
    /// The first GPU (ordinal 0).
    pub fn new() -> Result<Gpu> {
        Gpu::with_ordinal(0)
    }

    /// The GPU with the given ordinal.
    ///
    /// If the device's primary context was poisoned by an earlier fault (in this process),
    /// every berth handle on it is marked lost and the context is reset first: a poisoned
    /// context can never run anything again.
    pub fn with_ordinal(ordinal: usize) -> Result<Gpu> {
        match Gpu::open(ordinal) {
            Err(Error::Driver { name, .. }) if is_sticky_name(&name) => {
                let device = result::device::get(ordinal as i32)
                    .map_err(|e| Error::driver("cuDeviceGet", e))?;
                mark_device_lost(device, "the primary context was reset after a fault");
                tracing::warn!(ordinal, %name, "primary context poisoned by an earlier fault: resetting it");
                reset_primary(device)?;
                Gpu::open(ordinal).map_err(unrecoverable)
            }
            other => other,
        }
    }

    fn open(ordinal: usize) -> Result<Gpu> {
        check_driver()?;
        let count =
            result::device::get_count().map_err(|e| Error::driver("cuDeviceGetCount", e))?;
        if ordinal >= count as usize {
            return Err(Error::NoDevice {
                ordinal,
                count: count as usize,
            });
        }
        let device =
            result::device::get(ordinal as i32).map_err(|e| Error::driver("cuDeviceGet", e))?;
        // SAFETY: `device` is a valid device handle from cuDeviceGet.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(|e| Error::driver("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: `ctx` was just retained and is valid.
        unsafe { result::ctx::set_current(ctx) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let name = result::device::get_name(device).unwrap_or_else(|_| "unknown GPU".into());
        let default_stream = StreamHandle::create()?;
        let panic_record = Some(MappedPanicRecord::new()?);
        tracing::debug!(ordinal, %name, "GPU context ready");
        let gpu = Gpu {
            inner: Arc::new(Inner {
                sim: false,
                ordinal,
                device,
                ctx,
                name,
                device_count: count as usize,
                default_stream,
                functions: Mutex::new(HashMap::new()),
                modules: Mutex::new(HashMap::new()),
                panic_record,
                fault: FaultState::default(),
                staging: FreeLists::new(),
                pinned: FreeLists::new(),
                link: std::sync::OnceLock::new(),
                streams: Mutex::new(Vec::new()),
                events: Mutex::new(Vec::new()),
                sim_streams: Default::default(),
                costs: std::sync::OnceLock::new(),
                profile: std::sync::OnceLock::new(),
                random_rates: Mutex::new(HashMap::new()),
            }),
        };
        let mut live = LIVE.lock().expect("poisoned");
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&gpu.inner));
        Ok(gpu)
    }

    /// The CPU simulator: kernels run on the host with GPU semantics (grid, blocks, barriers,
    /// shared memory) and checks the GPU cannot make. Always available.
    pub fn simulator() -> Gpu {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        tracing::info!(workers, "using the CPU simulator");
        Gpu {
            inner: Arc::new(Inner {
                sim: true,
                ordinal: 0,
                device: 0,
                ctx: std::ptr::null_mut(),
                name: format!("CPU simulator ({workers} worker threads)"),
                device_count: 1,
                default_stream: StreamHandle(crate::sim_stream::new_handle()),
                functions: Mutex::new(HashMap::new()),
                modules: Mutex::new(HashMap::new()),
                panic_record: None,
                fault: FaultState::default(),
                staging: FreeLists::new(),
                pinned: FreeLists::new(),
                link: std::sync::OnceLock::new(),
                streams: Mutex::new(Vec::new()),
                events: Mutex::new(Vec::new()),
                sim_streams: Default::default(),
                costs: std::sync::OnceLock::new(),
                profile: std::sync::OnceLock::new(),
                random_rates: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The first GPU, or the CPU simulator when there is none (no driver or no device); the
    /// reason is logged. `BERTH_BACKEND=simulator` asks for the simulator, `cuda` insists on
    /// the GPU; any other value is an [`Error::Usage`] naming the valid ones. Which one you
    /// got: [`Gpu::backend`].
    pub fn new_or_simulator() -> Result<Gpu> {
        match std::env::var("BERTH_BACKEND") {
            Ok(v) if v == "simulator" || v == "sim" => return Ok(Gpu::simulator()),
            Ok(v) if v == "cuda" || v == "gpu" => return Gpu::new(),
            Ok(v) if !v.is_empty() => {
                return Err(Error::Usage(format!(
                    "BERTH_BACKEND={v:?} is not a backend: use `simulator` (or `sim`) for the CPU \
                     simulator, `cuda` (or `gpu`) to insist on a GPU, or leave it unset for a \
                     GPU when there is one and the simulator otherwise"
                )));
            }
            _ => {}
        }
        match Gpu::new() {
            Ok(g) => Ok(g),
            Err(e @ (Error::NoDriver(_) | Error::NoDevice { .. })) => {
                tracing::info!(reason = %e, "no GPU: falling back to the CPU simulator");
                Ok(Gpu::simulator())
            }
            Err(e) => Err(e),
        }
    }

    /// Which backend runs this context's kernels.
    pub fn backend(&self) -> Backend {
        if self.inner.sim {
            Backend::Simulator
        } else {
            Backend::Cuda
        }
    }

    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        use sys::CUdevice_attribute::*;
        if self.inner.sim {
            return Err(Error::Usage(
                "the CPU simulator has no compute capability".into(),
            ));
        }
        let major = self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok((major, minor))
    }

    /// A raw device attribute.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        if self.inner.sim {
            return Err(Error::Usage(
                "the CPU simulator has no CUDA device attributes".into(),
            ));
        }
        // SAFETY: valid device handle; the attribute enum is the driver's own.
        unsafe { result::device::get_attribute(self.inner.device, attr) }
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        if self.inner.sim {
            return Ok(host_memory());
        }
        self.inner.bind()?;
        result::mem_get_info().map_err(|e| Error::driver("cuMemGetInfo", e))
    }

    /// Wait for all work on every stream of this context.
    pub fn synchronize(&self) -> Result<()> {
        if self.inner.sim {
            self.inner.sim_streams.settle();
            return Ok(());
        }
        self.inner.bind()?;
        let r = result::ctx::synchronize();
        self.inner.check("cuCtxSynchronize", r, None)
    }

    /// Allocation counters of the staging and pinned pools.
    pub fn pool_stats(&self) -> PoolStats {
        use std::sync::atomic::Ordering::Relaxed;
        let (s, p) = (&self.inner.staging, &self.inner.pinned);
        PoolStats {
            device_allocations: s.allocations.load(Relaxed),
            device_bytes: s.bytes.load(Relaxed),
            device_reuses: s.reuses.load(Relaxed),
            pinned_allocations: p.allocations.load(Relaxed),
            pinned_bytes: p.bytes.load(Relaxed),
            pinned_reuses: p.reuses.load(Relaxed),
        }
    }

    /// Free the memory cached by the pools (buffers in use are not affected).
    pub fn trim_pools(&self) -> Result<()> {
        self.inner.bind()?;
        self.inner.free_pools();
        Ok(())
    }

    /// Whether an earlier fault made this context unusable.
    pub fn is_lost(&self) -> bool {
        self.inner.fault.is_lost()
    }

    /// Tear down a context lost to a fault and return a fresh one on the same device.
    ///
    /// Every buffer, stream and module of the lost context becomes inert: dropping them
    /// frees nothing (the reset already released their memory). Calling this on a healthy
    /// context is refused, since it would destroy live allocations.
    ///
    /// Some drivers keep the whole process's CUDA state unusable after a kernel trap, reset or
    /// not (NVIDIA 580 / CUDA 13 on the H200 does: measured, see GPU-RESULTS.md). Then this
    /// returns [`Error::ProcessPoisoned`], and the recovery is a new process:
    /// [`restart_process`](crate::restart_process) re-executes the program.
    pub fn recover(self) -> Result<Gpu> {
        if self.inner.sim {
            return Err(Error::Usage(
                "the CPU simulator is never lost: nothing to recover".into(),
            ));
        }
        if !self.inner.fault.is_lost() {
            return Err(Error::Usage(
                "Gpu::recover() resets a context lost to a fault; this one is healthy, and a \
                 reset would destroy its live buffers"
                    .into(),
            ));
        }
        let ordinal = self.inner.ordinal;
        let device = self.inner.device;
        mark_device_lost(device, "the primary context was reset by Gpu::recover");
        drop(self);
        reset_primary(device)?;
        tracing::info!(ordinal, "GPU context reset after a fault");
        Gpu::open(ordinal).map_err(unrecoverable)
    }
}

impl Inner {
    /// Make this context current on the calling thread; refuse if it was lost.
    pub(crate) fn bind(&self) -> Result<()> {
        self.fault.ensure_alive()?;
        if self.sim {
            return Ok(());
        }
        // SAFETY: `ctx` is the retained primary context, alive while `self` is.
        unsafe { result::ctx::set_current(self.ctx) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))
    }

    /// Turn a driver result into ours, recognising faults that poison the context.
    pub(crate) fn check<T>(
        &self,
        call: &'static str,
        r: std::result::Result<T, cudarc::driver::DriverError>,
        kernel_hint: Option<&str>,
    ) -> Result<T> {
        r.map_err(|e| self.error(call, e, kernel_hint))
    }

    /// Our error for a failed driver call (see [`Inner::check`]).
    pub(crate) fn error(
        &self,
        call: &'static str,
        e: cudarc::driver::DriverError,
        kernel_hint: Option<&str>,
    ) -> Error {
        let Some(record) = &self.panic_record else {
            return Error::driver(call, e);
        };
        let err = self.fault.classify(call, e, record, kernel_hint);
        if self.fault.is_lost() {
            // Every handle on this device shares the primary context, and with it the fault.
            mark_device_lost(self.device, &err.to_string());
        }
        err
    }

    /// The function of `kernel`, loading its crate's module on first use. On the simulator
    /// there is no function (null), but the launcher is checked against its PTX entry once,
    /// as a module load would.
    pub(crate) fn function(&self, kernel: &'static Kernel) -> Result<sys::CUfunction> {
        let key = (kernel.crate_name, kernel.name);
        if let Some(f) = self.functions.lock().expect("poisoned").get(&key) {
            return Ok(*f);
        }
        if self.sim {
            crate::ptx::check_kernel(kernel)?;
            self.functions
                .lock()
                .expect("poisoned")
                .insert(key, std::ptr::null_mut());
            return Ok(std::ptr::null_mut());
        }
        let module = self.module(kernel)?;
        let cname = CString::new(kernel.name).expect("kernel names have no NUL");
        // SAFETY: `module` is a loaded module of this (current) context.
        let f =
            unsafe { result::module::get_function(module, cname) }.map_err(|e| Error::Module {
                kernel: kernel.name,
                reason: format!(
                    "entry `{}` not found in the PTX of crate `{}` ({}); rebuild the crate",
                    kernel.name,
                    kernel.crate_name,
                    crate::error::describe(e).0
                ),
            })?;
        self.functions.lock().expect("poisoned").insert(key, f);
        Ok(f)
    }

    fn module(&self, kernel: &'static Kernel) -> Result<sys::CUmodule> {
        let mut modules = self.modules.lock().expect("poisoned");
        if let Some(m) = modules.get(kernel.crate_name) {
            return Ok(*m);
        }
        // Check every entry of the PTX against its launcher before anything runs: a stale
        // PTX or a macro bug must be an error here, not memory corruption later.
        for k in crate::launch::registered_kernels().filter(|k| k.crate_name == kernel.crate_name) {
            crate::ptx::check_kernel(k)?;
        }
        crate::ptx::check_kernel(kernel)?;
        let src = CString::new(kernel.ptx).map_err(|_| Error::Module {
            kernel: kernel.name,
            reason: "the embedded PTX contains a NUL byte".into(),
        })?;
        // SAFETY: `src` is a NUL-terminated PTX image; the context is current (bind).
        let module = unsafe { result::module::load_data(src.as_ptr().cast()) }.map_err(|e| {
            let (name, message) = crate::error::describe(e);
            Error::Module {
                kernel: kernel.name,
                reason: format!(
                    "the driver rejected the PTX of crate `{}`: {name} ({message}); was it built for a newer GPU than this one (BERTH_ARCH)?",
                    kernel.crate_name
                ),
            }
        })?;
        if let Some(r) = &self.panic_record {
            r.install(module)?;
        }
        self.fault.index_strings(module, kernel.ptx);
        tracing::debug!(krate = kernel.crate_name, "PTX module loaded");
        modules.insert(kernel.crate_name, module);
        Ok(module)
    }
}

impl Inner {
    /// Keep `e`, a failure of `stream` that a synchronise took but nobody received, for the
    /// stream's next synchronise. On a GPU the failures that happen after a launch was queued
    /// are faults, which lose the context: every later call reports them already.
    pub(crate) fn keep_failure(&self, stream: sys::CUstream, e: Error) {
        if self.sim {
            self.sim_streams.keep_failure(stream as usize, e);
        }
    }

    /// An event with timing disabled, from the pool or new (the context is current).
    pub(crate) fn take_event(&self) -> Result<sys::CUevent> {
        if let Some(ev) = self.events.lock().expect("poisoned").pop() {
            return Ok(ev);
        }
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| self.error("cuEventCreate", e, None))
    }

    /// Give back an event for reuse (recording it again later is allowed even if pending).
    pub(crate) fn put_event(&self, ev: sys::CUevent) {
        self.events.lock().expect("poisoned").push(ev);
    }

    /// A stream for a pipelined launch, from the pool or new. On the simulator too: each new
    /// handle starts a worker thread that lives as long as the context.
    pub(crate) fn take_stream(&self) -> Result<StreamHandle> {
        if let Some(s) = self.streams.lock().expect("poisoned").pop() {
            return Ok(s);
        }
        if self.sim {
            return Ok(StreamHandle(crate::sim_stream::new_handle()));
        }
        StreamHandle::create()
    }

    /// Give back a stream whose work is complete.
    pub(crate) fn put_stream(&self, s: StreamHandle) {
        self.streams.lock().expect("poisoned").push(s);
    }

    fn free_pools(&self) {
        let ops = self.ops();
        for (class, _, p) in self.staging.drain() {
            // SAFETY: a pooled staging allocation of `class` bytes of this context, not in use
            // (it is in the free list only after the launch using it completed).
            unsafe { ops.free(p, class) };
        }
        for (class, _, p) in self.pinned.drain() {
            // SAFETY: a pooled pinned allocation of `class` bytes of this context, no longer
            // referenced (it returns to the pool only after its uses completed).
            unsafe { ops.free_host(p, class) };
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.sim {
            self.free_pools();
            return;
        }
        if self.fault.is_lost() {
            // The context is dead (and will be reset): its handles must not be touched.
            return;
        }
        if self.bind().is_err() {
            return;
        }
        for (_, m) in self.modules.get_mut().expect("poisoned").drain() {
            // SAFETY: each module was loaded in this context and is unloaded once.
            let _ = unsafe { result::module::unload(m) };
        }
        self.default_stream.destroy();
        for ev in self.events.get_mut().expect("poisoned").drain(..) {
            // SAFETY: pooled events of this context, no longer referenced; destroyed once.
            let _ = unsafe { result::event::destroy(ev) };
        }
        for s in self.streams.get_mut().expect("poisoned").drain(..) {
            s.destroy();
        }
        self.free_pools();
        if let Some(r) = &self.panic_record {
            r.free();
        }
        // SAFETY: balances the retain in `with_ordinal`.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}
