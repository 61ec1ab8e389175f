//! The CUDA driver backend, through cudarc's `result`/`sys` layers: the context (device
//! selection, the reset of a primary context poisoned by a fault, recovery), its tables of
//! streams and functions, and the device's attributes. Its memory, streams and kernels are
//! implemented in `driver/memory.rs`, `driver/streams.rs` and `driver/kernels.rs`, one launch
//! and CUDA graphs in `driver/launch.rs`, its faults in `driver/fault.rs`. Every raw handle it
//! keeps is a [`Handle`] (`driver/handle.rs`), which says once why handles may cross threads.

pub(crate) mod fault;
pub(crate) mod handle;
mod kernels;
mod launch;
mod memory;
mod streams;

use crate::backend::driver::fault::{
    Faults, MappedPanicRecord, is_sticky_name, prepare_reset, register_context,
};
use crate::backend::driver::handle::Handle;
use crate::backend::ids::Serial;
use crate::backend::{Backend, CollectiveEngine, ContextOps, FunctionId, Ops, PeerId, StreamId};
use crate::error::{Error, Result};
use crate::fault::{CallSection, FaultState, PEER_READS_BOUND, PendingWork, wait_for_peer_reads};
use crate::limits::DeviceLimits;
use crate::placement::model::DeviceProfile;
use cudarc::driver::{CudaContext, result, sys};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A context of the CUDA driver on one device: the device's primary context, its streams, the
/// modules and functions loaded into it, and how its failures become errors.
///
/// Its streams and functions are tables: the layers above hold ids into them ([`StreamId`],
/// [`FunctionId`]), which [`Driver::stream`] and [`Driver::func`] turn back into handles, and
/// refuse when they are another context's.
pub(crate) struct Driver {
    /// Carried by the ids of this context's streams and functions.
    serial: Serial,
    ordinal: usize,
    device: sys::CUdevice,
    /// How many resets of the device's primary context this process had made when this
    /// context was opened: a recovery through a handle of an older one would reset a fresh
    /// context made since, and is refused.
    generation: u64,
    ctx: Handle<sys::CUcontext>,
    name: String,
    device_count: usize,
    /// Every stream made in this context, by index: the default stream first. Only added to;
    /// read without a lock on every launch and copy.
    pub(super) streams: boxcar::Vec<StreamSlot>,
    pub(super) faults: Faults,
    /// Every function loaded, by index (a [`FunctionId`]'s). Only added to.
    pub(super) function_table: boxcar::Vec<Handle<sys::CUfunction>>,
    /// Loaded entries' indices in `function_table`, by the address of their (static)
    /// descriptor: hashing a pointer, not two names, on every launch.
    pub(super) functions: Mutex<HashMap<usize, usize>>,
    /// The same indices, read without a lock on every launch.
    pub(super) function_cache: FunctionCache,
    /// Loaded modules, by kernel crate: the crate's whole module (SASS, or its PTX where that
    /// could not be cut into kernels) under `(crate, None)`, a kernel's own PTX module under
    /// `(crate, Some(kernel))`.
    pub(super) modules: Mutex<HashMap<ModuleKey, Handle<sys::CUmodule>>>,
    /// Whether every kernel with SASS for this GPU has been loaded: on the first launch of a
    /// kernel that may wait on the host. Held while they load, so that no such kernel is
    /// launched before they are.
    pub(super) every_sass_loaded: Mutex<bool>,
    /// Events (timing disabled) that mark where queued work ends, for reuse.
    pub(super) events: Mutex<Vec<Handle<sys::CUevent>>>,
    /// The device's launch limits, read once: every launch is checked against them.
    limits: OnceLock<DeviceLimits>,
}

/// A driver that still refuses after a reset has poisoned the process, not just the context.
fn unrecoverable(e: Error) -> Error {
    match e {
        Error::Driver { name, .. } if is_sticky_name(&name) => Error::ProcessPoisoned { name },
        other => other,
    }
}

/// Per device: the lock every reset and every opening of its primary context holds, around
/// the number of resets of it this process has made so far. One lock per device, so a reset
/// waiting for another device's reads holds up only openings of its own device.
struct ResetLocks(Mutex<Vec<(sys::CUdevice, Arc<Mutex<u64>>)>>);

impl ResetLocks {
    const fn new() -> ResetLocks {
        ResetLocks(Mutex::new(Vec::new()))
    }

    /// `device`'s lock (made on first use).
    fn of(&self, device: sys::CUdevice) -> Arc<Mutex<u64>> {
        let mut locks = self.0.lock().expect("poisoned");
        if let Some((_, lock)) = locks.iter().find(|(d, _)| *d == device) {
            return Arc::clone(lock);
        }
        let lock = Arc::new(Mutex::new(0));
        locks.push((device, Arc::clone(&lock)));
        lock
    }
}

static RESETS: ResetLocks = ResetLocks::new();

/// Destroy the device's primary context (all its resources) so the next retain creates a
/// fresh one, after [`prepare_reset`] allowed it, and count it in `resets` (the device's
/// reset count, locked by the caller). `peer_reads`: launches of other devices that read its
/// memory in place and may still run, waited for first, for a bounded time (refused after).
fn reset_primary(
    device: sys::CUdevice,
    ordinal: usize,
    peer_reads: Vec<Arc<dyn PendingWork>>,
    resets: &mut u64,
) -> Result<()> {
    wait_for_peer_reads(ordinal, &peer_reads, PEER_READS_BOUND)?;
    // SAFETY: detaching the calling thread from any context has no preconditions; a poisoned
    // context left current would taint the next calls on this thread.
    let _ = unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
    // SAFETY: resetting the primary context destroys all its resources. Every berth object
    // on this device was marked lost and skips its driver calls, so none of them touches a
    // destroyed handle afterwards.
    unsafe { sys::cuDevicePrimaryCtxReset_v2(device) }
        .result()
        .map_err(|e| Error::driver("cuDevicePrimaryCtxReset", e))?;
    *resets += 1;
    Ok(())
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

/// The number of CUDA devices in the process: `Error::NoDriver` without a driver.
pub(crate) fn device_count() -> Result<usize> {
    check_driver()?;
    let count = result::device::get_count().map_err(|e| Error::driver("cuDeviceGetCount", e))?;
    Ok(count.max(0) as usize)
}

impl Driver {
    /// The GPU with the given ordinal.
    ///
    /// If the device's primary context was poisoned by an earlier fault (in this process),
    /// every berth handle on it is marked lost and the context is reset first: a poisoned
    /// context can never run anything again.
    pub(crate) fn with_ordinal(ordinal: usize) -> Result<Driver> {
        let (device, count) = Driver::device(ordinal)?;
        // Opened under the device's reset lock: never in the middle of another thread's reset
        // of it, so the context's generation is the one it really belongs to.
        let lock = RESETS.of(device);
        let mut resets = lock.lock().expect("poisoned");
        match Driver::open(ordinal, device, count, *resets) {
            Err(Error::Driver { name, .. }) if is_sticky_name(&name) => {
                let peer_reads = prepare_reset(
                    device,
                    ordinal,
                    "the primary context was reset after a fault",
                )?;
                tracing::warn!(ordinal, %name, "primary context poisoned by an earlier fault: resetting it");
                reset_primary(device, ordinal, peer_reads, &mut resets)?;
                Driver::open(ordinal, device, count, *resets).map_err(unrecoverable)
            }
            other => other,
        }
    }

    /// The device with CUDA ordinal `ordinal`, and how many devices there are.
    fn device(ordinal: usize) -> Result<(sys::CUdevice, usize)> {
        check_driver()?;
        let count =
            result::device::get_count().map_err(|e| Error::driver("cuDeviceGetCount", e))?;
        let count = count.max(0) as usize;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let device =
            result::device::get(ordinal as i32).map_err(|e| Error::driver("cuDeviceGet", e))?;
        Ok((device, count))
    }

    /// Open the primary context of `device` (CUDA ordinal `ordinal`, of `count` devices);
    /// `generation`, the device's reset count read under its lock (held by the caller), dates
    /// it.
    fn open(
        ordinal: usize,
        device: sys::CUdevice,
        count: usize,
        generation: u64,
    ) -> Result<Driver> {
        // SAFETY: `device` is a valid device handle from cuDeviceGet.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(|e| Error::driver("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: `ctx` was just retained and is valid.
        unsafe { result::ctx::set_current(ctx) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let name = result::device::get_name(device).unwrap_or_else(|_| "unknown GPU".into());
        let default_stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| Error::driver("cuStreamCreate", e))?;
        let streams = boxcar::Vec::new();
        // Index 0: `StreamOps::default_stream`.
        streams.push(StreamSlot::new(default_stream));
        let record = MappedPanicRecord::new()?;
        let state = Arc::new(FaultState::default());
        register_context(device, &state);
        tracing::debug!(ordinal, %name, "GPU context ready");
        Ok(Driver {
            serial: Serial::take(),
            ordinal,
            device,
            generation,
            ctx: Handle(ctx),
            name,
            device_count: count,
            streams,
            faults: Faults {
                state,
                record,
                device,
                strings: Mutex::new(Vec::new()),
            },
            function_table: boxcar::Vec::new(),
            functions: Mutex::new(HashMap::new()),
            function_cache: FunctionCache::new(),
            modules: Mutex::new(HashMap::new()),
            every_sass_loaded: Mutex::new(false),
            events: Mutex::new(Vec::new()),
            limits: OnceLock::new(),
        })
    }

    /// Enter a section of driver calls on the context's handles ([`FaultState::enter`]):
    /// refused once the context is lost, and a reset waits until it ends. Every call on the
    /// context's handles (memory, streams, events, modules, graphs) is made inside one, so
    /// none reaches the driver after a reset destroyed the handle, whether or not the caller
    /// holds a section of its own.
    pub(super) fn section(&self) -> Result<CallSection<'_>> {
        self.faults.state.enter()
    }

    /// [`Driver::section`], with the context made current on the calling thread.
    pub(super) fn enter(&self) -> Result<CallSection<'_>> {
        let section = self.section()?;
        // SAFETY: `ctx` is the retained primary context, alive while `self` is.
        unsafe { result::ctx::set_current(self.ctx.0) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        Ok(section)
    }

    /// The stream `id` names: one of this context's, else a usage error (an id of another
    /// context is never handed to the driver).
    pub(super) fn stream(&self, id: StreamId) -> Result<sys::CUstream> {
        id.index_in(&self.serial)
            .and_then(|i| self.streams.get(i))
            .filter(|s| !s.destroyed.load(Ordering::Acquire))
            .map(|s| s.handle.0)
            .ok_or_else(|| self.foreign(format!("{id:?}")))
    }

    /// The function `id` names, as [`Driver::stream`] does for streams.
    pub(super) fn func(&self, id: FunctionId) -> Result<sys::CUfunction> {
        id.index_in(&self.serial)
            .and_then(|i| self.function_table.get(i))
            .map(|h| h.0)
            .ok_or_else(|| self.foreign(format!("{id:?}")))
    }

    fn foreign(&self, what: String) -> Error {
        Error::Usage(format!(
            "{what} is not one of `{}`'s (a handle of another context, or destroyed)",
            self.name
        ))
    }

    /// The id of stream `index` of this context.
    pub(super) fn stream_id(&self, index: usize) -> Result<StreamId> {
        StreamId::new(&self.serial, index)
            .ok_or_else(|| Error::Usage(format!("`{}` has made too many streams", self.name)))
    }

    /// The id of function `index` of this context.
    pub(super) fn function_id(&self, index: usize) -> Result<FunctionId> {
        FunctionId::new(&self.serial, index)
            .ok_or_else(|| Error::Usage(format!("`{}` has loaded too many functions", self.name)))
    }

    /// Our error for a failed driver call, recognising faults that poison the context.
    pub(super) fn error(
        &self,
        call: &'static str,
        e: cudarc::driver::DriverError,
        kernel_hint: Option<&str>,
    ) -> Error {
        self.faults.error(call, e, kernel_hint)
    }

    /// [`Driver::error`] of a driver result.
    pub(super) fn check<T>(
        &self,
        call: &'static str,
        r: std::result::Result<T, cudarc::driver::DriverError>,
        kernel_hint: Option<&str>,
    ) -> Result<T> {
        self.faults.check(call, r, kernel_hint)
    }
}

impl ContextOps for Driver {
    fn kind(&self) -> Backend {
        Backend::Cuda
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn device_count(&self) -> usize {
        self.device_count
    }

    fn raw_context(&self) -> Option<sys::CUcontext> {
        Some(self.ctx.0)
    }

    fn collective_engine(&self) -> CollectiveEngine {
        CollectiveEngine::Nccl
    }

    fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        // SAFETY: valid device handle; the attribute enum is the driver's own.
        unsafe { result::device::get_attribute(self.device, attr) }
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))
    }

    fn copy_engines(&self) -> Result<u32> {
        let n = self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?;
        Ok(n.max(0) as u32)
    }

    fn compute_capability(&self) -> Result<(i32, i32)> {
        use sys::CUdevice_attribute::*;
        let major = self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok((major, minor))
    }

    fn memory_info(&self) -> Result<(usize, usize)> {
        let _section = self.enter()?;
        result::mem_get_info().map_err(|e| self.faults.error("cuMemGetInfo", e, None))
    }

    fn device_profile(&self) -> Result<Option<DeviceProfile>> {
        use sys::CUdevice_attribute::*;
        Ok(Some(DeviceProfile {
            pageable_memory_access: self.attribute(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)?
                != 0,
            uses_host_page_tables: self
                .attribute(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES)?
                != 0,
        }))
    }

    fn device_limits(&self) -> Result<DeviceLimits> {
        if let Some(l) = self.limits.get() {
            return Ok(*l);
        }
        use sys::CUdevice_attribute::*;
        let a = |attr| self.attribute(attr).map(|v| v.max(0) as u32);
        let limits = DeviceLimits {
            shared_per_block: a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_per_block_optin: a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            threads_per_block: a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            block_dim: [
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            grid_dim: [
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
        };
        Ok(*self.limits.get_or_init(|| limits))
    }

    fn set_device_limits(&self, _limits: DeviceLimits) -> bool {
        false
    }

    fn has_link(&self) -> bool {
        true
    }

    fn near_cpus(&self) -> Option<Vec<usize>> {
        use sys::CUdevice_attribute::*;
        let id = |a| self.attribute(a).ok().and_then(|v| u32::try_from(v).ok());
        let pci = crate::numa::pci_name(
            id(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            id(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            id(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
        );
        let sysfs = std::path::Path::new("/sys");
        crate::numa::cpus_of(sysfs, crate::numa::node_of(sysfs, &pci)?)
    }

    fn fault(&self) -> &FaultState {
        &self.faults.state
    }

    fn bind(&self) -> Result<()> {
        self.faults.state.ensure_alive()?;
        // SAFETY: `ctx` is the retained primary context, alive while `self` is.
        unsafe { result::ctx::set_current(self.ctx.0) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))
    }

    fn synchronize(&self) -> Result<()> {
        let _section = self.enter()?;
        let r = result::ctx::synchronize();
        self.check("cuCtxSynchronize", r, None)
    }

    fn cudarc_context(&self) -> Result<Arc<CudaContext>> {
        self.bind()?;
        // Shared while any handle of cudarc's lives, and noted by the context's fault state:
        // a reset frees cudarc's memory too, so it waits for them to go.
        self.faults.state.cudarc_context(|| {
            // Retains the same primary context berth runs in (one more reference, released
            // when cudarc's last handle goes), so memory and streams are valid on both sides.
            CudaContext::new(self.ordinal)
                .map_err(|e| self.error("cuDevicePrimaryCtxRetain", e, None))
        })
    }

    fn peer_id(&self) -> PeerId {
        PeerId::Device(self.ordinal)
    }

    fn can_access_peer(&self, peer: PeerId) -> Result<bool> {
        let PeerId::Device(ordinal) = peer else {
            return Ok(false);
        };
        if ordinal == self.ordinal {
            return Ok(true);
        }
        let other =
            result::device::get(ordinal as i32).map_err(|e| Error::driver("cuDeviceGet", e))?;
        let mut can = 0;
        // SAFETY: both are valid device handles from cuDeviceGet; `can` is a live out-pointer.
        let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.device, other) };
        r.result()
            .map_err(|e| Error::driver("cuDeviceCanAccessPeer", e))?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, peer: &dyn Ops) -> Result<()> {
        let Some(peer_ctx) = peer.raw_context() else {
            return Err(Error::Usage(format!(
                "`{}` has no CUDA context for `{}` to reach",
                peer.name(),
                self.name
            )));
        };
        if peer_ctx == self.ctx.0 {
            return Ok(());
        }
        let _section = self.enter()?;
        // SAFETY: this context is current; `peer_ctx` is the live primary context of another
        // device (the caller holds it). Enabling twice is reported, not undefined.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer_ctx, 0) };
        match r {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(())
            }
            e => Err(self.error(
                "cuCtxEnablePeerAccess",
                cudarc::driver::DriverError(e),
                None,
            )),
        }
    }

    fn recover(&self) -> Result<Box<dyn Ops>> {
        if !self.faults.state.is_lost() {
            return Err(Error::Usage(
                "Gpu::recover() resets a context lost to a fault; this one is healthy, and a \
                 reset would destroy its live buffers"
                    .into(),
            ));
        }
        let (ordinal, device) = (self.ordinal, self.device);
        // The check, the reset and the fresh context are one step: two recoveries never reset
        // each other's fresh contexts.
        let lock = RESETS.of(device);
        let mut resets = lock.lock().expect("poisoned");
        if *resets != self.generation {
            return Err(Error::Usage(format!(
                "Gpu::recover(): device {ordinal}'s context was already reset since this one was \
                 lost (by a recovery through another handle, or by a new Gpu); use the Gpu that \
                 made, or Gpu::new()"
            )));
        }
        let peer_reads = prepare_reset(
            device,
            ordinal,
            "the primary context was reset by Gpu::recover",
        )?;
        reset_primary(device, ordinal, peer_reads, &mut resets)?;
        tracing::info!(ordinal, "GPU context reset after a fault");
        let fresh =
            Driver::open(ordinal, device, self.device_count, *resets).map_err(unrecoverable)?;
        Ok(Box::new(fresh))
    }
}

/// What a loaded module holds: a kernel crate's kernels, or one kernel of it.
pub(super) type ModuleKey = (&'static str, Option<&'static str>);

impl Drop for Driver {
    fn drop(&mut self) {
        if self.faults.state.is_lost() {
            // The context is dead (and will be reset): its handles must not be touched.
            return;
        }
        let Ok(section) = self.enter() else {
            return;
        };
        for (_, m) in self.modules.lock().expect("poisoned").drain() {
            // SAFETY: each module was loaded in this context and is unloaded once.
            let _ = unsafe { result::module::unload(m.0) };
        }
        if let Some(default) = self.streams.get(0) {
            // SAFETY: created in `open` in this context, destroyed once, here. The other
            // streams went with the context's pool (`StreamOps::stream_drop`).
            let _ = unsafe { result::stream::destroy(default.handle.0) };
        }
        for ev in self.events.lock().expect("poisoned").drain(..) {
            // SAFETY: pooled events of this context, no longer referenced; destroyed once.
            let _ = unsafe { result::event::destroy(ev.0) };
        }
        self.faults.record.free();
        drop(section);
        // SAFETY: balances the retain in `open`.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

/// One stream of a [`Driver`]'s table.
pub(super) struct StreamSlot {
    pub(super) handle: Handle<sys::CUstream>,
    /// Destroyed ([`StreamOps::stream_drop`](crate::backend::StreamOps::stream_drop)): its id
    /// is refused from then on.
    pub(super) destroyed: AtomicBool,
}

impl StreamSlot {
    fn new(s: sys::CUstream) -> StreamSlot {
        StreamSlot {
            handle: Handle(s),
            destroyed: AtomicBool::new(false),
        }
    }
}

/// Slots of the lock-free function cache (a power of two).
const CACHE_SLOTS: usize = 64;
const _: () = assert!(CACHE_SLOTS.is_power_of_two());
/// Slots probed from a descriptor's home slot before giving up on the cache.
const CACHE_PROBES: usize = 8;

/// The functions already loaded (their indices in the function table), by the address of
/// their (static) kernel descriptor, read without a lock on every launch: an open-addressed
/// table filled once per kernel (under the functions map's mutex, so by one writer at a time)
/// and never emptied while the context lives. A kernel that finds no free slot near its home
/// stays in the map only.
pub(crate) struct FunctionCache {
    /// Descriptor address (0: free), published after the function.
    keys: [AtomicUsize; CACHE_SLOTS],
    functions: [AtomicUsize; CACHE_SLOTS],
}

impl FunctionCache {
    pub(crate) fn new() -> Self {
        FunctionCache {
            keys: std::array::from_fn(|_| AtomicUsize::new(0)),
            functions: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    fn home(key: usize) -> usize {
        // Descriptors are statics a few dozen bytes apart: mix the bits above the alignment.
        // The top bits of a multiplicative hash: one of `CACHE_SLOTS` (a power of two).
        (key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize)
            >> (usize::BITS - CACHE_SLOTS.trailing_zeros())
    }

    /// The cached function index of the descriptor at `key`.
    pub(super) fn get(&self, key: usize) -> Option<usize> {
        let home = Self::home(key);
        for i in 0..CACHE_PROBES {
            let slot = (home + i) % CACHE_SLOTS;
            match self.keys[slot].load(Ordering::Acquire) {
                // The Acquire above sees the function stored before the key was published.
                k if k == key => {
                    return Some(self.functions[slot].load(Ordering::Relaxed));
                }
                0 => return None,
                _ => {}
            }
        }
        None
    }

    /// Cache the function index `f` for `key`. Callers hold the functions map's mutex: one
    /// writer at a time.
    pub(super) fn insert(&self, key: usize, f: usize) {
        let home = Self::home(key);
        for i in 0..CACHE_PROBES {
            let slot = (home + i) % CACHE_SLOTS;
            match self.keys[slot].load(Ordering::Relaxed) {
                k if k == key => return,
                0 => {
                    self.functions[slot].store(f, Ordering::Relaxed);
                    self.keys[slot].store(key, Ordering::Release);
                    return;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_reset_lock_holds_up_only_that_device() {
        let locks = ResetLocks::new();
        let zero = locks.of(0);
        let mut held = zero.lock().unwrap();
        *held += 1;
        // Another device opens and resets while device 0's reset is under way.
        let one = locks.of(1);
        *one.try_lock().expect("device 1's lock is free") += 2;
        // Device 0's own openings wait for it.
        assert!(locks.of(0).try_lock().is_err());
        drop(held);
        assert_eq!(*locks.of(0).lock().unwrap(), 1);
        assert_eq!(*locks.of(1).lock().unwrap(), 2);
        assert!(Arc::ptr_eq(&zero, &locks.of(0)));
    }

    #[test]
    fn the_function_cache_finds_what_it_was_given_and_nothing_else() {
        let cache = FunctionCache::new();
        let keys: Vec<usize> = (0..200).map(|i| 0x5555_0000 + 48 * i).collect();
        for &k in &keys {
            assert!(cache.get(k).is_none());
            cache.insert(k, k + 1);
        }
        let mut hits = 0;
        for &k in &keys {
            // A key is either absent (its neighbourhood was full) or maps to its own function.
            if let Some(f) = cache.get(k) {
                assert_eq!(f, k + 1);
                hits += 1;
            }
        }
        assert!(hits >= CACHE_SLOTS / 2, "only {hits} cached");
        assert!(cache.get(0x7777_0008).is_none());
    }
}
