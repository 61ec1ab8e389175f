//! The driver's side of faults: the CUDA errors that poison a context ("sticky"), the panic
//! record kernels fill in mapped host memory, a failed driver call turned into the fault that
//! names its kernel, and the registry of every driver context by device, so that a fault or a
//! reset concerns all handles on the device together (they share its primary context).

use crate::error::{Error, PanicReport, Result};
use crate::fault::{Borrow, FaultState, PendingWork};
use crate::launch::Kernel;
use berth_device::panic::{PanicRecord, PanicSlot, RECORD_SYMBOL, kind, state};
use cudarc::driver::{DriverError, result, sys};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::sync::{Arc, Mutex, Weak};

impl Error {
    /// The error of a failed driver call `call` that no context's fault explains (a device
    /// that is not there, a refused argument): [`Error::NoDevice`] or [`Error::Driver`].
    pub(crate) fn driver(call: &'static str, e: DriverError) -> Error {
        if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE {
            return Error::NoDevice {
                ordinal: 0,
                count: 0,
            };
        }
        let (name, message) = describe(e);
        Error::Driver {
            call,
            name,
            message,
        }
    }
}

/// The driver's name and description of a failed call's result.
pub(crate) fn describe(e: DriverError) -> (String, String) {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let message = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    (name, message)
}

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
pub(crate) fn is_sticky(code: sys::CUresult) -> bool {
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
        let held = state.held_for_reset();
        host_buffers += held.host_buffers;
        peer_views += held.peer_views;
        communicators += held.communicators;
        cudarc_handles += held.cudarc_handles;
        peer_reads.extend(state.pending_peer_reads());
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
    while states.iter().any(|s| s.in_call()) {
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
    /// Where the loaded modules' constant byte arrays live on the device (to resolve a panic's
    /// file name).
    pub(crate) strings: Mutex<Vec<StringGlobal>>,
}

/// A loaded module's constant byte array: where it lives on the device, and where its bytes
/// are declared. The bytes are read from the PTX only when a fault names the array.
pub(crate) struct StringGlobal {
    addr: sys::CUdeviceptr,
    size: usize,
    name: String,
    /// The crate's PTX, which declares the array (a kernel's module is cut out of it).
    ptx: &'static str,
    /// The array's bytes, read from `ptx` when a fault first names the array.
    bytes: std::sync::OnceLock<Option<Vec<u8>>>,
}

impl Faults {
    /// Note where `module`'s constant byte arrays (`names`, declared in `ptx`) live on the
    /// device. Called at load, while the context is healthy: after a fault nothing can be
    /// asked of it. A name the module does not hold is skipped.
    pub(crate) fn index_strings<'n>(
        &self,
        module: sys::CUmodule,
        names: impl IntoIterator<Item = &'n str>,
        ptx: &'static str,
    ) {
        let mut table = self.strings.lock().expect("poisoned");
        for name in names {
            let Ok(cname) = CString::new(name) else {
                continue;
            };
            // SAFETY: `module` is loaded in the current context.
            if let Ok((addr, size)) = unsafe { result::module::get_global(module, cname) } {
                table.push(StringGlobal {
                    addr,
                    size,
                    name: name.to_owned(),
                    ptx,
                    bytes: std::sync::OnceLock::new(),
                });
            }
        }
    }

    /// The string of `len` bytes at device address `addr`, if it lies in a known constant.
    fn resolve(&self, addr: u64, len: u64) -> Option<String> {
        let table = self.strings.lock().expect("poisoned");
        let g = table.iter().find(|g| {
            addr.checked_sub(g.addr)
                .and_then(|off| off.checked_add(len))
                .is_some_and(|end| end <= g.size as u64)
        })?;
        let bytes = g
            .bytes
            .get_or_init(|| crate::ptx::byte_global(g.ptx, &g.name))
            .as_deref()?;
        let off = (addr - g.addr) as usize;
        let s = bytes.get(off..off.checked_add(len as usize)?)?;
        Some(String::from_utf8_lossy(s).into_owned())
    }

    /// Classify a failed driver call. Sticky errors mark the context lost and become
    /// [`Error::KernelPanic`] (when a panic record is present) or [`Error::KernelFault`].
    fn classify(&self, call: &'static str, e: DriverError, kernel_hint: Option<&str>) -> Error {
        // The panic record is pinned host memory of this context: counted while this may read
        // it, so that a reset of the device (by another handle) cannot unmap it meanwhile. A
        // lost context reads nothing.
        // Only the copy of the record is taken under the borrow: resolving its strings may
        // read the PTX, and a recovery waits for the borrows to end.
        if let Err(lost) = self.state.begin_borrow(Borrow::HostBuffer) {
            return lost;
        }
        let record = self.record.take_copy();
        self.state.end_borrow(Borrow::HostBuffer);
        self.classify_alive(call, e, kernel_hint, record)
    }

    fn classify_alive(
        &self,
        call: &'static str,
        e: DriverError,
        kernel_hint: Option<&str>,
        record: Option<PanicRecord>,
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
        let candidates = self.state.in_flight_kernels();
        let err = match record.map(|r| report(&r, |a, l| self.resolve(a, l))) {
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
        self.state.mark_lost(err.to_string());
        tracing::error!(error = %err, "GPU context lost");
        err
    }
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

    /// Our error for a failed driver call whose own failures have a meaning of their own
    /// (`otherwise`: a module the driver rejects, an entry it does not find, a configuration
    /// it refuses): a sticky error is not one of those but a fault of earlier work surfacing
    /// here, and is reported as that fault, naming its kernel ([`Faults::error`]).
    pub(crate) fn sticky_or(
        &self,
        call: &'static str,
        e: DriverError,
        otherwise: impl FnOnce(DriverError) -> Error,
    ) -> Error {
        if is_sticky(e.0) || self.state.is_lost() {
            self.error(call, e, None)
        } else {
            otherwise(e)
        }
    }

    /// Our error for a failed driver call (see [`Faults::check`]).
    pub(crate) fn error(
        &self,
        call: &'static str,
        e: DriverError,
        kernel_hint: Option<&str>,
    ) -> Error {
        let err = self.classify(call, e, kernel_hint);
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

// SAFETY: the record is pinned host memory this value allocates and frees (once, by its
// context's drop) and nothing else of Rust's points to. Rust only reads it, from any thread: an
// atomic load of its state, then, once the device has stored `DONE` with a system-scope
// release (after which nothing writes it again), a volatile read of the whole record. Reads
// from several threads at once are reads of memory nobody writes any more.
unsafe impl Send for MappedPanicRecord {}
// SAFETY: as above.
unsafe impl Sync for MappedPanicRecord {}

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
    pub(crate) fn install(&self, module: sys::CUmodule, faults: &Faults) -> Result<()> {
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
            .map_err(|e| faults.error("cuMemcpyHtoD", e, None))
    }

    /// A copy of the record, if a kernel completed one.
    pub(crate) fn take_copy(&self) -> Option<PanicRecord> {
        // SAFETY: the record lives as long as `self`, and stays mapped while it is read (the
        // caller counts it as a borrowed host buffer, which holds a reset off); `state` is a
        // 4-aligned u32 that the device writes with a system-scope release store.
        let st = unsafe { AtomicU32::from_ptr(&raw mut (*self.host).state) };
        if st.load(Ordering::Acquire) != state::DONE {
            return None;
        }
        // SAFETY: state DONE means the writer finished; nothing writes the record again.
        Some(unsafe { self.host.read_volatile() })
    }

    pub(crate) fn free(&self) {
        // SAFETY: allocated by cuMemHostAlloc in this context; freed once, from Inner::drop.
        let _ = unsafe { result::free_host(self.host.cast()) };
        // SAFETY: allocated by cuMemAlloc in this context; freed once, from Inner::drop.
        let _ = unsafe { result::free_sync(self.claim) };
    }
}

/// The report of a completed panic record `r`; `resolve` turns a device string address into
/// the string.
fn report(r: &PanicRecord, resolve: impl Fn(u64, u64) -> Option<String>) -> PanicReport {
    let text =
        |b: &[u8], n: u32| String::from_utf8_lossy(&b[..(n as usize).min(b.len())]).into_owned();
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
            resolve(r.message_addr, r.message_addr_len)
                .unwrap_or_else(|| format!("(message at device address {:#x})", r.message_addr)),
        ),
        _ => (text(&r.file, r.file_bytes), text(&r.message, r.message_len)),
    };
    PanicReport {
        file,
        line: r.line,
        column: r.column,
        message,
        block: r.block,
        thread: r.thread,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

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
                a.held_for_reset().host_buffers,
                granted,
                "refused notes are taken back"
            );
        }
    }

    /// Reads of the owner's memory by another context's work, still running when the view
    /// they went through is dropped, are kept on the owner's fault state; a reset of the owner
    /// is handed them and waits for them, for a bounded time: a read that runs on past the
    /// bound refuses the reset (naming how many) instead of hanging it, and one that ends
    /// within it lets the reset go ahead. Done reads are not kept. Both kinds of completion
    /// are covered: a recorded one, and a lazy one (a scope's or a collective's), which the
    /// wait seals.
    #[test]
    fn a_reset_waits_a_bounded_time_for_peer_reads_still_running() {
        use crate::backend::sim::testing;
        use crate::context::Inner;
        use crate::fault::wait_for_peer_reads;
        use crate::track::{Access, Completion, Uses};
        use std::sync::mpsc;
        use std::time::Instant;
        let simulated = || Arc::new(Inner::new(crate::backend::open::simulator()));
        let owner = simulated();
        let reader = simulated();
        let side = reader.ops().stream_new().unwrap();
        // A job on each of the reader's streams that runs until released.
        let hold = |stream| {
            let (release, held) = mpsc::channel::<()>();
            testing::enqueue(
                reader.ops(),
                stream,
                Box::new(move || {
                    let _ = held.recv();
                    Ok(())
                }),
            );
            release
        };
        let (release_recorded, release_lazy) = (hold(reader.default_stream), hold(side));
        let recorded = Completion::record(&reader, &[reader.default_stream]).unwrap();
        let lazy = Completion::lazy(&reader, side);
        assert!(lazy.join());
        let uses = Uses::default();
        uses.add(&recorded, Access::Shared);
        uses.add(&lazy, Access::Shared);
        let own = Completion::record(&owner, &[owner.default_stream]).unwrap();
        uses.add(&own, Access::Exclusive);
        let elsewhere = uses.pending_elsewhere(owner.id);
        assert_eq!(elsewhere.len(), 2, "only the other context's work");

        // The owner's fault state, registered under a device no driver hands out.
        let device = -2000;
        let state = Arc::new(FaultState::default());
        register_context(device, &state);
        state.note_peer_reads(elsewhere);
        let pending = prepare_reset(device, 3, "test").unwrap();
        assert_eq!(pending.len(), 2);

        let bound = Duration::from_millis(150);
        let start = Instant::now();
        let e = wait_for_peer_reads(3, &pending, bound).unwrap_err();
        let waited = start.elapsed();
        assert!(
            matches!(
                e,
                Error::ResetRefused {
                    ordinal: 3,
                    peer_reads: 2,
                    host_buffers: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.is_context_lost());
        assert!(
            e.to_string().contains("2 launch(es) of other devices"),
            "{e}"
        );
        assert!(
            waited >= bound && waited < bound * 10,
            "the bound is the whole wait's, not each read's: {waited:?}"
        );
        assert!(!recorded.is_done() && !lazy.is_done());
        assert!(!lazy.join(), "the wait sealed the lazy completion");

        // Still kept for the next reset, which goes ahead once the reads end within its bound.
        let pending = prepare_reset(device, 3, "again").unwrap();
        assert_eq!(pending.len(), 2, "running reads are kept");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            release_recorded.send(()).unwrap();
            release_lazy.send(()).unwrap();
        });
        wait_for_peer_reads(3, &pending, Duration::from_secs(30)).unwrap();
        releaser.join().unwrap();
        assert!(recorded.is_done() && lazy.is_done());
        assert!(
            prepare_reset(device, 3, "once more").unwrap().is_empty(),
            "done reads are not kept"
        );
    }
}
