//! Faults: recognising errors that poison the context, naming the kernel, reading the panic
//! record the device-side panic handler leaves in mapped host memory, and marking every handle
//! on the device lost (they share its primary context, and with it the fault).

use crate::error::{Error, PanicReport, Result, describe};
use crate::launch::Kernel;
use berth_device::panic::{PanicRecord, PanicSlot, RECORD_SYMBOL, kind, state};
use cudarc::driver::{DriverError, result, sys};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Names of the sticky errors, for errors already converted to text.
const STICKY_NAMES: &[&str] = &[
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
];

/// Errors after which the context is unusable (CUDA's "sticky" errors).
fn is_sticky(code: sys::CUresult) -> bool {
    use sys::CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// Whether the context was lost, why, which kernels were in flight on which stream, and the
/// device addresses of the modules' constant strings (to resolve a panic's file name).
#[derive(Default)]
pub(crate) struct FaultState {
    lost: Mutex<Option<String>>,
    lost_flag: std::sync::atomic::AtomicBool,
    /// By stream: a short list scanned without hashing on every launch.
    in_flight: Mutex<Vec<(usize, Vec<&'static Kernel>)>>,
    strings: Mutex<Vec<(sys::CUdeviceptr, Vec<u8>)>>,
    /// Live page-locked host allocations of the context: a reset would unmap them.
    host_buffers: AtomicUsize,
    /// Live peer views reading the context's device memory in place from other contexts: a
    /// reset would free it under them.
    peer_views: AtomicUsize,
    /// Live NCCL communicators with a rank on the context: NCCL's memory there (device and
    /// pinned host) would be freed under them and their threads.
    communicators: AtomicUsize,
    /// Calls making cudarc's handle of the context right now.
    cudarc_making: AtomicUsize,
    /// Sections of driver calls on the context's handles in progress
    /// ([`FaultState::enter`]): a reset waits for them.
    calls: AtomicUsize,
    /// cudarc's handle of the context, while anything of cudarc's made from it lives (its
    /// slices, streams and modules hold it): a reset would free their memory under them.
    cudarc: Mutex<Weak<cudarc::driver::CudaContext>>,
    /// Launches of other contexts that read the memory in place through peer views since
    /// dropped, and may still run (their guards were detached or leaked): a reset waits for
    /// them, for a bounded time ([`wait_for_peer_reads`]).
    peer_reads: Mutex<Vec<Arc<dyn PendingWork>>>,
}

/// A section of driver calls in progress ([`FaultState::enter`]).
pub(crate) struct CallSection<'a>(&'a FaultState);

impl Drop for CallSection<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

/// GPU work a reset must wait for (a launch of another context reading the memory in place),
/// as the work tracker sees it.
pub(crate) trait PendingWork: Send + Sync {
    /// Known complete.
    fn is_done(&self) -> bool;
    /// Wait until it is complete, for at most `bound`: whether it is.
    fn wait_for(&self, bound: Duration) -> bool;
}

/// How long a reset waits for the launches of other devices that still read the memory in
/// place ([`wait_for_peer_reads`]) before it is refused.
pub(crate) const PEER_READS_BOUND: Duration = Duration::from_secs(2);

/// Wait, for at most `bound` in all, for `reads`: launches of other devices reading device
/// `ordinal`'s memory in place through peer views since dropped, which a reset must not free
/// under them. A launch that runs on past that (a kernel spinning on a signal nobody sets)
/// refuses the reset ([`Error::ResetRefused`], naming how many) rather than hanging it; the
/// device's contexts stay lost, and a later recovery waits again.
pub(crate) fn wait_for_peer_reads(
    ordinal: usize,
    reads: &[Arc<dyn PendingWork>],
    bound: Duration,
) -> Result<()> {
    let deadline = Instant::now() + bound;
    let running = reads
        .iter()
        .filter(|r| !r.wait_for(deadline.saturating_duration_since(Instant::now())))
        .count();
    if running > 0 {
        return Err(Error::ResetRefused {
            ordinal,
            host_buffers: 0,
            peer_views: 0,
            communicators: 0,
            cudarc_handles: 0,
            peer_reads: running,
        });
    }
    Ok(())
}

/// What a reset of a context would free under a live handle outside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Borrow {
    /// A pinned or mapped host allocation.
    HostBuffer,
    /// A peer view of its device memory, read in place by another context.
    PeerView,
    /// A device set's NCCL communicator with a rank on the context.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    Communicator,
    /// cudarc's handle of the context, being made (once made, the handle itself counts).
    Cudarc,
}

impl FaultState {
    pub(crate) fn is_lost(&self) -> bool {
        self.lost_flag.load(Ordering::Acquire)
    }

    pub(crate) fn ensure_alive(&self) -> Result<()> {
        if !self.is_lost() {
            return Ok(());
        }
        let why = self
            .lost
            .lock()
            .expect("poisoned")
            .clone()
            .unwrap_or_default();
        Err(Error::ContextLost(why))
    }

    fn borrows(&self, kind: Borrow) -> &AtomicUsize {
        match kind {
            Borrow::HostBuffer => &self.host_buffers,
            Borrow::PeerView => &self.peer_views,
            Borrow::Communicator => &self.communicators,
            Borrow::Cudarc => &self.cudarc_making,
        }
    }

    /// Note a new handle outside the context on memory a reset would free, unless the context
    /// is lost (then it may be reset at any moment, and the handle is refused). Pairs with
    /// [`FaultState::end_borrow`].
    ///
    /// With [`prepare_reset`] this is a store-fence-load handshake on both sides: the count
    /// goes up before the lost flag is read here, and the flag is set before the counts are
    /// read there, so either this sees the context lost or the reset sees the handle.
    pub(crate) fn begin_borrow(&self, kind: Borrow) -> Result<()> {
        self.borrows(kind).fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Err(e) = self.ensure_alive() {
            self.end_borrow(kind);
            return Err(e);
        }
        Ok(())
    }

    /// Enter a section of driver calls on the context's handles (its memory, functions and
    /// streams), refused once the context is lost. A reset waits for the sections entered
    /// before it marked the context lost ([`prepare_reset`]), so a free or a launch that found
    /// the context alive never reaches the driver after the reset, where the fresh context may
    /// have given the same addresses (or handles) to new allocations. The section ends when the
    /// returned guard drops; only berth's own code holds one. The driver backend makes every
    /// call on the context's handles (memory, streams, events, modules, graphs) inside one of
    /// its own; callers that check something about the context before those calls (a launch's
    /// function and addresses) hold one around the whole step. A wait inside one (a stream's
    /// or an event's) ends at once when the reset comes: a context is lost only to a fault
    /// that poisoned it, and every call of a poisoned context fails at once. No section waits
    /// for uses noted on the memory (those waits come before it).
    ///
    /// The same store-fence-load handshake as [`FaultState::begin_borrow`].
    pub(crate) fn enter(&self) -> Result<CallSection<'_>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let section = CallSection(self);
        self.ensure_alive()?;
        Ok(section)
    }

    /// cudarc's handle of the context: the one that lives, or a new one from `make`, noted
    /// so that a reset waits until every handle of cudarc's made from it is gone.
    pub(crate) fn cudarc_context(
        &self,
        make: impl FnOnce() -> Result<Arc<cudarc::driver::CudaContext>>,
    ) -> Result<Arc<cudarc::driver::CudaContext>> {
        // While it is being made it is counted here; once noted, its handles count themselves.
        self.begin_borrow(Borrow::Cudarc)?;
        let made = (|| {
            let mut noted = self.cudarc.lock().expect("poisoned");
            if let Some(c) = noted.upgrade() {
                return Ok(c);
            }
            let c = make()?;
            *noted = Arc::downgrade(&c);
            Ok(c)
        })();
        self.end_borrow(Borrow::Cudarc);
        made
    }

    /// How many handles of this kind are noted now.
    #[cfg(test)]
    pub(crate) fn borrowed(&self, kind: Borrow) -> usize {
        self.borrows(kind).load(Ordering::SeqCst)
    }

    /// A peer view of the memory is going: its launches that may still run (`reads`, other
    /// contexts' work) are kept for a reset to wait for. Noted before the view's own count is
    /// taken back, so a reset sees one or the other.
    pub(crate) fn note_peer_reads(&self, reads: Vec<Arc<dyn PendingWork>>) {
        let mut kept = self.peer_reads.lock().expect("poisoned");
        kept.retain(|c| !c.is_done());
        kept.extend(reads);
    }

    /// A handle noted by [`FaultState::begin_borrow`] is gone.
    pub(crate) fn end_borrow(&self, kind: Borrow) {
        self.borrows(kind).fetch_sub(1, Ordering::SeqCst);
    }

    /// Note where `module`'s constant byte arrays live on the device. Called at load, while
    /// the context is healthy: after a fault nothing can be asked of it.
    pub(crate) fn index_strings(&self, module: sys::CUmodule, ptx: &str) {
        let mut table = self.strings.lock().expect("poisoned");
        for (name, bytes) in crate::ptx::byte_globals(ptx) {
            let Ok(cname) = CString::new(name) else {
                continue;
            };
            // SAFETY: `module` is loaded in the current context.
            if let Ok((addr, _)) = unsafe { result::module::get_global(module, cname) } {
                table.push((addr, bytes));
            }
        }
    }

    /// The string of `len` bytes at device address `addr`, if it is a known constant.
    fn resolve(&self, addr: u64, len: u64) -> Option<String> {
        let table = self.strings.lock().expect("poisoned");
        table.iter().find_map(|(base, bytes)| {
            let off = addr.checked_sub(*base)? as usize;
            let s = bytes.get(off..off.checked_add(len as usize)?)?;
            Some(String::from_utf8_lossy(s).into_owned())
        })
    }

    /// `k` was queued on `stream`. Each kernel is listed once per stream: a queue of a
    /// thousand launches of two kernels names two candidates, and the list stays short.
    pub(crate) fn launched(&self, stream: sys::CUstream, k: &'static Kernel) {
        let mut in_flight = self.in_flight.lock().expect("poisoned");
        let key = stream as usize;
        let i = match in_flight.iter().position(|(s, _)| *s == key) {
            Some(i) => i,
            None => {
                in_flight.push((key, Vec::new()));
                in_flight.len() - 1
            }
        };
        let v = &mut in_flight[i].1;
        if !v.iter().any(|&x| std::ptr::eq(x, k)) {
            v.push(k);
        }
    }

    pub(crate) fn stream_idle(&self, stream: sys::CUstream) {
        let key = stream as usize;
        let mut in_flight = self.in_flight.lock().expect("poisoned");
        if let Some((_, v)) = in_flight.iter_mut().find(|(s, _)| *s == key) {
            v.clear();
        }
    }

    pub(crate) fn mark_lost(&self, why: String) {
        let mut lost = self.lost.lock().expect("poisoned");
        if lost.is_none() {
            *lost = Some(why);
        }
        self.lost_flag.store(true, Ordering::Release);
    }

    /// Classify a failed driver call. Sticky errors mark the context lost and become
    /// [`Error::KernelPanic`] (when a panic record is present) or [`Error::KernelFault`].
    pub(crate) fn classify(
        &self,
        call: &'static str,
        e: DriverError,
        record: &MappedPanicRecord,
        kernel_hint: Option<&str>,
    ) -> Error {
        // The panic record is pinned host memory of this context: counted while this may read
        // it, so that a reset of the device (by another handle) cannot unmap it meanwhile. A
        // lost context reads nothing.
        if let Err(lost) = self.begin_borrow(Borrow::HostBuffer) {
            return lost;
        }
        let err = self.classify_alive(call, e, record, kernel_hint);
        self.end_borrow(Borrow::HostBuffer);
        err
    }

    fn classify_alive(
        &self,
        call: &'static str,
        e: DriverError,
        record: &MappedPanicRecord,
        kernel_hint: Option<&str>,
    ) -> Error {
        if !is_sticky(e.0) {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                return Error::OutOfMemory {
                    bytes: 0,
                    free,
                    total,
                };
            }
            return Error::driver(call, e);
        }
        let (name, message) = describe(e);
        let candidates: Vec<&'static Kernel> = self
            .in_flight
            .lock()
            .expect("poisoned")
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let err = match record.read(|a, l| self.resolve(a, l)) {
            Some(report) => {
                let kernel = candidates
                    .iter()
                    .find(|k| {
                        k.location
                            .rsplit_once(':')
                            .is_some_and(|(f, _)| same_file(f, &report.file))
                    })
                    .map(|k| k.name.to_owned())
                    .or_else(|| kernel_hint.map(str::to_owned))
                    .unwrap_or_else(|| names(&candidates));
                Error::KernelPanic {
                    kernel,
                    report,
                    context_lost: true,
                }
            }
            None => Error::KernelFault {
                kernels: if candidates.is_empty() {
                    kernel_hint
                        .map(|k| format!("`{k}`"))
                        .unwrap_or_else(|| "(unknown)".into())
                } else {
                    names(&candidates)
                },
                name,
                message,
            },
        };
        self.mark_lost(err.to_string());
        tracing::error!(error = %err, "GPU context lost");
        err
    }
}

/// The fault state of every live driver context of the process, by device: a fault, or a
/// reset, concerns all handles on the same device (they share its primary context).
static LIVE: Mutex<Vec<(sys::CUdevice, Weak<FaultState>)>> = Mutex::new(Vec::new());

/// Note a new driver context on `device`, so that a fault of any context there marks it too.
pub(crate) fn register_context(device: sys::CUdevice, state: &Arc<FaultState>) {
    let mut live = LIVE.lock().expect("poisoned");
    live.retain(|(_, w)| w.strong_count() > 0);
    live.push((device, Arc::downgrade(state)));
}

/// Mark every live context on `device` lost.
pub(crate) fn mark_device_lost(device: sys::CUdevice, why: &str) {
    let live = LIVE.lock().expect("poisoned");
    for (_, state) in live.iter().filter(|(d, _)| *d == device) {
        if let Some(state) = state.upgrade() {
            state.mark_lost(why.to_owned());
        }
    }
}

/// Mark every live context on `device` (CUDA ordinal `ordinal`) lost, and say whether its
/// primary context may now be reset: not while any of them has host buffers or peer views
/// alive, since the reset frees their memory under them ([`Error::ResetRefused`], the
/// contexts staying lost). Reading freed pinned memory is a segmentation fault on the host
/// (measured on the H200: `bench/results/diagnostics/reset-frees-pinned.txt`).
///
/// Allowed: the launches of other devices that read its memory in place through peer views
/// since dropped and may still run (their guards detached or leaked), which the reset must
/// wait for.
pub(crate) fn prepare_reset(
    device: sys::CUdevice,
    ordinal: usize,
    why: &str,
) -> Result<Vec<Arc<dyn PendingWork>>> {
    mark_device_lost(device, why);
    // See `FaultState::begin_borrow`: the lost flags are set before the counts are read.
    fence(Ordering::SeqCst);
    // Collected first and read with the registry unlocked: a context's cudarc mutex is held
    // while a failing call may mark the device lost, which takes the registry's.
    let states: Vec<Arc<FaultState>> = LIVE
        .lock()
        .expect("poisoned")
        .iter()
        .filter(|(d, _)| *d == device)
        .filter_map(|(_, state)| state.upgrade())
        .collect();
    let (mut host_buffers, mut peer_views, mut communicators, mut cudarc_handles) = (0, 0, 0, 0);
    let mut peer_reads = Vec::new();
    for state in &states {
        host_buffers += state.host_buffers.load(Ordering::SeqCst);
        peer_views += state.peer_views.load(Ordering::SeqCst);
        communicators += state.communicators.load(Ordering::SeqCst);
        cudarc_handles += state.cudarc_making.load(Ordering::SeqCst)
            + state.cudarc.lock().expect("poisoned").strong_count();
        let mut kept = state.peer_reads.lock().expect("poisoned");
        kept.retain(|c| !c.is_done());
        peer_reads.extend(kept.iter().cloned());
    }
    if host_buffers + peer_views + communicators + cudarc_handles > 0 {
        return Err(Error::ResetRefused {
            ordinal,
            host_buffers,
            peer_views,
            communicators,
            cudarc_handles,
            peer_reads: 0,
        });
    }
    // Sections of driver calls that found a context alive before it was marked lost above
    // finish before the reset (new ones are refused); they queue work or free memory and
    // never wait for the GPU, and a lost context's calls fail at once.
    while states.iter().any(|s| s.calls.load(Ordering::SeqCst) > 0) {
        std::thread::yield_now();
    }
    Ok(peer_reads)
}

/// Whether an error name (already converted to text) is a sticky one.
pub(crate) fn is_sticky_name(name: &str) -> bool {
    STICKY_NAMES.contains(&name)
}

/// How one driver context turns failed driver calls into errors: its fault state, the panic
/// record its kernels fill, and the device whose other handles share a fault.
pub(crate) struct Faults {
    pub(crate) state: Arc<FaultState>,
    pub(crate) record: MappedPanicRecord,
    pub(crate) device: sys::CUdevice,
}

impl Faults {
    /// Turn a driver result into ours, recognising faults that poison the context.
    pub(crate) fn check<T>(
        &self,
        call: &'static str,
        r: std::result::Result<T, DriverError>,
        kernel_hint: Option<&str>,
    ) -> Result<T> {
        r.map_err(|e| self.error(call, e, kernel_hint))
    }

    /// Our error for a failed driver call (see [`Faults::check`]).
    pub(crate) fn error(
        &self,
        call: &'static str,
        e: DriverError,
        kernel_hint: Option<&str>,
    ) -> Error {
        let err = self.state.classify(call, e, &self.record, kernel_hint);
        if self.state.is_lost() {
            // Every handle on this device shares the primary context, and with it the fault.
            mark_device_lost(self.device, &err.to_string());
        }
        err
    }
}

fn same_file(a: &str, b: &str) -> bool {
    a == b || a.ends_with(b) || b.ends_with(a)
}

fn names(ks: &[&'static Kernel]) -> String {
    let mut v: Vec<String> = ks.iter().map(|k| format!("`{}`", k.name)).collect();
    v.dedup();
    match v.len() {
        0 => "(unknown)".into(),
        1 => v.remove(0),
        _ => format!("one of {}", v.join(", ")),
    }
}

/// One [`PanicRecord`] in pinned host memory mapped into the device's address space, and the
/// word of device memory that failing threads claim it with (atomics stay off host memory).
pub(crate) struct MappedPanicRecord {
    host: *mut PanicRecord,
    device: sys::CUdeviceptr,
    claim: sys::CUdeviceptr,
}

impl MappedPanicRecord {
    pub(crate) fn new() -> Result<Self> {
        let bytes = std::mem::size_of::<PanicRecord>();
        // SAFETY: plain allocation call; the context is current (Gpu::with_ordinal).
        let host = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) }
            .map_err(|e| Error::driver("cuMemHostAlloc", e))?
            .cast::<PanicRecord>();
        // SAFETY: `host` is a fresh, suitably aligned (page-aligned) allocation of `bytes`.
        unsafe { host.write(PanicRecord::EMPTY) };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in the current context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) }
            .result()
            .map_err(|e| Error::driver("cuMemHostGetDevicePointer", e))?;
        let free_host = || {
            // SAFETY: allocated just above, not handed out.
            let _ = unsafe { result::free_host(host.cast()) };
        };
        // SAFETY: plain allocation call; the context is current.
        let claim = match unsafe { result::malloc_sync(std::mem::size_of::<u32>()) } {
            Ok(c) => c,
            Err(e) => {
                free_host();
                return Err(Error::driver("cuMemAlloc", e));
            }
        };
        // Zero bytes are `state::EMPTY`.
        const _: () = assert!(state::EMPTY == 0);
        // SAFETY: `claim` is a fresh 4-byte device allocation of this context.
        if let Err(e) = unsafe { result::memset_d8_sync(claim, state::EMPTY as u8, 4) } {
            // SAFETY: allocated just above, not handed out.
            let _ = unsafe { result::free_sync(claim) };
            free_host();
            return Err(Error::driver("cuMemsetD8", e));
        }
        Ok(MappedPanicRecord {
            host,
            device,
            claim,
        })
    }

    /// Point `module`'s panic-record global at this record. Modules without a panic path
    /// have no such global, which is fine.
    pub(crate) fn install(&self, module: sys::CUmodule) -> Result<()> {
        let name = CString::new(RECORD_SYMBOL).expect("no NUL");
        // SAFETY: `module` is loaded in the current context.
        let Ok((ptr, size)) = (unsafe { result::module::get_global(module, name) }) else {
            return Ok(());
        };
        let want = std::mem::size_of::<PanicSlot>();
        if size != want {
            return Err(Error::Module {
                kernel: RECORD_SYMBOL,
                reason: format!("panic-record global has {size} bytes, expected {want}"),
            });
        }
        let value = [self.device, self.claim];
        // SAFETY: `ptr` is the 16-byte `PanicSlot` global found above; `value` is its two
        // `u64` fields in order.
        unsafe { result::memcpy_htod_sync(ptr, &value[..]) }
            .map_err(|e| Error::driver("cuMemcpyHtoD", e))
    }

    /// The record, if a kernel completed one; `resolve` turns a device string address into
    /// the string.
    pub(crate) fn read(&self, resolve: impl Fn(u64, u64) -> Option<String>) -> Option<PanicReport> {
        // SAFETY: the record lives as long as `self`, and stays mapped while it is read (the
        // caller counts it as a borrowed host buffer, which holds a reset off); `state` is a
        // 4-aligned u32 that the device writes with a system-scope release store.
        let st = unsafe { AtomicU32::from_ptr(&raw mut (*self.host).state) };
        if st.load(Ordering::Acquire) != state::DONE {
            return None;
        }
        // SAFETY: state DONE means the writer finished; nothing writes the record again.
        let r = unsafe { self.host.read_volatile() };
        let text = |b: &[u8], n: u32| {
            String::from_utf8_lossy(&b[..(n as usize).min(b.len())]).into_owned()
        };
        let file = || {
            resolve(r.file_addr, r.file_len)
                .unwrap_or_else(|| format!("(file at device address {:#x})", r.file_addr))
        };
        let (file, message) = match r.kind {
            kind::INDEX => (
                file(),
                format!(
                    "index out of bounds: the len is {} but the index is {}",
                    r.len, r.index
                ),
            ),
            kind::WINDOW => (
                file(),
                berth_device::panic::window_message(r.index, r.len, r.lo, r.hi),
            ),
            kind::MATRIX => (
                file(),
                berth_device::panic::matrix_message(r.index, r.lo, r.len, r.hi),
            ),
            kind::MESSAGE => (
                file(),
                resolve(r.message_addr, r.message_addr_len).unwrap_or_else(|| {
                    format!("(message at device address {:#x})", r.message_addr)
                }),
            ),
            _ => (text(&r.file, r.file_bytes), text(&r.message, r.message_len)),
        };
        Some(PanicReport {
            file,
            line: r.line,
            column: r.column,
            message,
            block: r.block,
            thread: r.thread,
        })
    }

    pub(crate) fn free(&self) {
        // SAFETY: allocated by cuMemHostAlloc in this context; freed once, from Inner::drop.
        let _ = unsafe { result::free_host(self.host.cast()) };
        // SAFETY: allocated by cuMemAlloc in this context; freed once, from Inner::drop.
        let _ = unsafe { result::free_sync(self.claim) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device handle no driver hands out, so the tests' contexts share the registry with
    /// nothing real.
    fn fake_device(n: i32) -> sys::CUdevice {
        -1000 - n
    }

    /// A context's fault state, registered on `device`.
    fn context_on(device: sys::CUdevice) -> Arc<FaultState> {
        let state = Arc::new(FaultState::default());
        register_context(device, &state);
        state
    }

    /// A section of driver calls that found the context alive holds a reset up until it ends
    /// (the reset would otherwise come between its check and its calls, which could then free
    /// or use what the fresh context gave out again); once the context is marked lost, no new
    /// section is entered.
    #[test]
    fn a_reset_waits_for_driver_calls_already_past_their_check() {
        use std::sync::atomic::AtomicBool;
        let device = fake_device(40);
        let state = context_on(device);
        let section = state.enter().unwrap();
        let ended = Arc::new(AtomicBool::new(false));
        let reset = std::thread::spawn({
            let ended = ended.clone();
            move || {
                let r = prepare_reset(device, 4, "test").map(|reads| reads.len());
                (r, ended.load(Ordering::SeqCst))
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !reset.is_finished(),
            "the reset did not wait for the section"
        );
        assert!(state.is_lost());
        assert!(
            state.enter().is_err(),
            "a section was entered after the context was marked lost"
        );
        ended.store(true, Ordering::SeqCst);
        drop(section);
        let (r, after) = reset.join().unwrap();
        assert_eq!(r.unwrap(), 0);
        assert!(after, "the reset went ahead before the section ended");
    }

    /// A reset is refused while a host buffer or a peer view of any context on the device is
    /// alive, counted across contexts and named in the error; every context there stays lost,
    /// and once the handles are gone the reset is allowed.
    #[test]
    fn a_reset_is_refused_while_memory_it_would_free_is_borrowed() {
        let device = fake_device(1);
        let (a, b) = (context_on(device), context_on(device));
        a.begin_borrow(Borrow::HostBuffer).unwrap();
        a.begin_borrow(Borrow::HostBuffer).unwrap();
        b.begin_borrow(Borrow::PeerView).unwrap();
        b.begin_borrow(Borrow::Communicator).unwrap();

        let e = prepare_reset(device, 7, "test")
            .err()
            .expect("the reset is refused");
        let Error::ResetRefused {
            ordinal: 7,
            host_buffers: 2,
            peer_views: 1,
            communicators: 1,
            cudarc_handles: 0,
            peer_reads: 0,
        } = e
        else {
            panic!("expected ResetRefused for 2 host buffers, 1 view and 1 set, got {e:?}");
        };
        assert!(e.is_context_lost(), "{e}");
        // The message names what holds the reset up, and only that.
        let text = e.to_string();
        for held in [
            "2 pinned, mapped or registered host buffer(s)",
            "1 peer view(s)",
            "1 device set(s) with NCCL communicators",
            "copy out what the host buffers hold",
        ] {
            assert!(text.contains(held), "{held}: {text}");
        }
        for not_held in ["cudarc", "launch(es)", "let the launches end"] {
            assert!(!text.contains(not_held), "{not_held}: {text}");
        }
        assert!(a.is_lost() && b.is_lost());

        // Each kind alone holds the reset up.
        let counts = |e: Error| match e {
            Error::ResetRefused {
                host_buffers,
                peer_views,
                communicators,
                ..
            } => (host_buffers, peer_views, communicators),
            e => panic!("expected ResetRefused, got {e:?}"),
        };
        a.end_borrow(Borrow::HostBuffer);
        a.end_borrow(Borrow::HostBuffer);
        let e = prepare_reset(device, 7, "test")
            .err()
            .expect("the reset is refused");
        assert_eq!(counts(e), (0, 1, 1));
        b.end_borrow(Borrow::PeerView);
        let e = prepare_reset(device, 7, "test")
            .err()
            .expect("the reset is refused");
        assert_eq!(counts(e), (0, 0, 1));
        b.end_borrow(Borrow::Communicator);
        assert!(prepare_reset(device, 7, "test").unwrap().is_empty());
    }

    /// cudarc's handle of a context is counted while it is being made, so a reset that looks
    /// meanwhile is refused; one that failed to be made leaves nothing counted.
    #[test]
    fn a_cudarc_handle_being_made_holds_a_reset_off() {
        let device = fake_device(5);
        let a = context_on(device);
        let failed = a.cudarc_context(|| Err(Error::Usage("no cudarc here".into())));
        assert!(failed.is_err());
        // A reset looks while the handle is being made (on another thread: it reads the count,
        // then waits for the making to end before it reads the handle itself).
        let (tx, rx) = std::sync::mpsc::channel();
        let reset = std::thread::spawn(move || {
            rx.recv().unwrap();
            prepare_reset(device, 0, "test")
        });
        let made = a.cudarc_context(|| {
            tx.send(()).unwrap();
            // The reset has begun once it marked the context lost; what is left before it
            // reads the count is a few loads, well inside the pause.
            while !a.is_lost() {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            Err(Error::Usage("no cudarc here".into()))
        });
        assert!(made.is_err());
        let e = reset.join().unwrap().err().expect("the reset is refused");
        assert!(
            matches!(
                e,
                Error::ResetRefused {
                    cudarc_handles: 1,
                    host_buffers: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        // Lost now (the reset above marked it): no handle is made any more.
        let refused = a.cudarc_context(|| panic!("a lost context makes no cudarc handle"));
        assert!(matches!(refused, Err(Error::ContextLost(_))));
        prepare_reset(device, 0, "test").unwrap();
    }

    /// Contexts of other devices do not hold up a reset, and without peer views nothing
    /// asks for other devices to be waited for.
    #[test]
    fn a_reset_counts_only_its_own_device() {
        let (mine, other) = (fake_device(2), fake_device(3));
        let (a, b) = (context_on(mine), context_on(other));
        b.begin_borrow(Borrow::HostBuffer).unwrap();
        assert!(prepare_reset(mine, 0, "test").unwrap().is_empty());
        assert!(a.is_lost());
        assert!(!b.is_lost(), "another device's context is not touched");
        b.end_borrow(Borrow::HostBuffer);
    }

    /// Once the context is lost, a new handle is refused and not counted: the reset may
    /// already be under way.
    #[test]
    fn a_lost_context_refuses_new_borrows() {
        let device = fake_device(4);
        let a = context_on(device);
        prepare_reset(device, 0, "reset for the test").unwrap();
        for kind in [Borrow::HostBuffer, Borrow::PeerView] {
            let e = a.begin_borrow(kind).unwrap_err();
            assert!(
                matches!(e, Error::ContextLost(ref why) if why == "reset for the test"),
                "{e:?}"
            );
        }
        prepare_reset(device, 0, "again").unwrap();
    }

    /// Threads that take and drop handles while another resets: whenever the reset is
    /// allowed, no handle taken was granted (each either saw the context lost or was counted).
    #[test]
    fn borrows_racing_a_reset_are_either_refused_or_counted() {
        for round in 0..200 {
            let device = fake_device(100 + round);
            let a = Arc::new(FaultState::default());
            register_context(device, &a);
            let granted = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (a, granted) = (a.clone(), granted.clone());
                    std::thread::spawn(move || {
                        // Each thread keeps the handle it gets: a granted one is still alive
                        // when the reset looks.
                        while a.begin_borrow(Borrow::HostBuffer).is_ok() {
                            granted.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            std::thread::yield_now();
            let reset = prepare_reset(device, 0, "race");
            for t in threads {
                t.join().unwrap();
            }
            let granted = granted.load(Ordering::SeqCst);
            match reset {
                Ok(_) => assert_eq!(
                    granted, 0,
                    "round {round}: reset allowed under live handles"
                ),
                Err(Error::ResetRefused { host_buffers, .. }) => {
                    // The count it saw holds every granted handle, and at most one refused
                    // one per thread that had not yet taken its note back.
                    assert!(
                        granted <= host_buffers && host_buffers <= granted + 2,
                        "round {round}: {granted} granted, {host_buffers} counted"
                    );
                }
                Err(e) => panic!("round {round}: {e}"),
            }
            assert_eq!(
                a.host_buffers.load(Ordering::SeqCst),
                granted,
                "refused notes are taken back"
            );
        }
    }
}
