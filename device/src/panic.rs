//! The panic path: a panicking kernel records where and why, then traps. It never hangs.
//!
//! The host runtime allocates one [`PanicRecord`] in mapped (zero-copy) host memory and
//! stores its device address in the module global [`RECORD_SYMBOL`] when it loads a module.
//! The first thread to panic claims the record (compare-and-swap on `state`), writes the
//! location, its coordinates and the message, publishes with a system-scope release store,
//! and executes `trap`. The trap kills the launch and poisons the context; the host then
//! reads the record, which lives in host memory and survives the context.

/// Name of the module global holding the device address of the [`PanicRecord`].
pub const RECORD_SYMBOL: &str = "__berth_panic_record";

/// `state` values of a [`PanicRecord`].
pub mod state {
    /// Nothing recorded.
    pub const EMPTY: u32 = 0;
    /// A thread is writing the record.
    pub const WRITING: u32 = 1;
    /// The record is complete.
    pub const DONE: u32 = 2;
}

/// Bytes kept of the panicking source file's path.
pub const FILE_BYTES: usize = 192;
/// Bytes kept of the panic message.
pub const MESSAGE_BYTES: usize = 384;

/// What a panicking GPU thread leaves for the host. Shared layout of device and host.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PanicRecord {
    /// See [`state`].
    pub state: u32,
    /// Source line of the panic.
    pub line: u32,
    /// Source column of the panic.
    pub column: u32,
    /// `threadIdx` of the panicking thread.
    pub thread: [u32; 3],
    /// `blockIdx` of the panicking thread.
    pub block: [u32; 3],
    /// Bytes used in `file`.
    pub file_len: u32,
    /// Bytes used in `message` (the message is cut at `MESSAGE_BYTES`).
    pub message_len: u32,
    /// Source file path (UTF-8, possibly cut).
    pub file: [u8; FILE_BYTES],
    /// Formatted panic message (UTF-8, possibly cut).
    pub message: [u8; MESSAGE_BYTES],
}

impl PanicRecord {
    /// An empty record.
    pub const EMPTY: PanicRecord = PanicRecord {
        state: state::EMPTY,
        line: 0,
        column: 0,
        thread: [0; 3],
        block: [0; 3],
        file_len: 0,
        message_len: 0,
        file: [0; FILE_BYTES],
        message: [0; MESSAGE_BYTES],
    };
}

#[cfg(target_arch = "nvptx64")]
mod gpu {
    use super::*;
    use core::sync::atomic::{AtomicU32, Ordering};

    /// Device address of the host's record; null until the runtime sets it.
    #[unsafe(no_mangle)]
    #[used]
    static mut __berth_panic_record: *mut PanicRecord = core::ptr::null_mut();

    /// Copy `src` into `dst` (cut to fit) one byte at a time. Volatile byte stores keep the
    /// loop small: the kernel's register count is the maximum over everything it may call,
    /// this handler included, and an unrolled or vectorised copy would raise it for every
    /// kernel that has a bounds check.
    #[inline(never)]
    fn copy_cut(dst: *mut u8, cap: usize, src: &[u8]) -> u32 {
        let n = if src.len() < cap { src.len() as u32 } else { cap as u32 };
        let mut i = 0u32;
        let s = src.as_ptr();
        while i < n {
            // SAFETY: `i < n <= cap`, the capacity of `dst`, and `i < src.len()`.
            unsafe { dst.add(i as usize).write_volatile(s.add(i as usize).read_volatile()) };
            i += 1;
        }
        n
    }

    /// Small decimal writer (no `core::fmt`, see `copy_cut`).
    #[inline(never)]
    fn write_u64(dst: *mut u8, cap: usize, at: u32, mut v: u64) -> u32 {
        let mut digits = [0u8; 20];
        let mut n = 0;
        loop {
            digits[19 - n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        // SAFETY: `at <= cap` (callers pass lengths returned by copy_cut for this buffer).
        at + copy_cut(unsafe { dst.add(at as usize) }, cap - at as usize, &digits[20 - n..])
    }

    /// Record an out-of-bounds index with its numbers, then trap.
    #[inline(never)]
    #[cold]
    pub(crate) fn index_failure(i: usize, len: usize, loc: &core::panic::Location<'_>) -> ! {
        if let Some(r) = claim() {
            // SAFETY: `claim` hands out the record to one thread only.
            let r = unsafe { &mut *r };
            write_location(r, loc);
            let m = r.message.as_mut_ptr();
            let mut n = copy_cut(m, MESSAGE_BYTES, b"index out of bounds: the len is ");
            n = write_u64(m, MESSAGE_BYTES, n, len as u64);
            // SAFETY: n <= MESSAGE_BYTES.
            n += copy_cut(unsafe { m.add(n as usize) }, MESSAGE_BYTES - n as usize, b" but the index is ");
            n = write_u64(m, MESSAGE_BYTES, n, i as u64);
            r.message_len = n;
            publish(r);
        }
        trap()
    }

    fn claim() -> Option<*mut PanicRecord> {
        // SAFETY: the global is written only by the host, before any launch of this module.
        let rec = unsafe { core::ptr::read_volatile(&raw const __berth_panic_record) };
        if rec.is_null() {
            return None;
        }
        // SAFETY: the runtime points the global at a live, mapped, 4-aligned PanicRecord.
        let st = unsafe { AtomicU32::from_ptr(&raw mut (*rec).state) };
        st.compare_exchange(state::EMPTY, state::WRITING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            .then_some(rec)
    }

    #[inline(never)]
    fn write_location(r: &mut PanicRecord, loc: &core::panic::Location<'_>) {
        r.line = loc.line();
        r.column = loc.column();
        r.file_len = copy_cut(r.file.as_mut_ptr(), FILE_BYTES, loc.file().as_bytes());
        r.thread = [
            crate::thread::idx_x() as u32,
            crate::thread::idx_y() as u32,
            crate::thread::idx_z() as u32,
        ];
        r.block = [
            crate::block::idx_x() as u32,
            crate::block::idx_y() as u32,
            crate::block::idx_z() as u32,
        ];
    }

    fn publish(r: &mut PanicRecord) {
        // SAFETY: `state` is a 4-aligned u32 of the claimed record. Release at system scope:
        // the host that sees DONE sees every field written before.
        let st = unsafe { AtomicU32::from_ptr(&raw mut r.state) };
        st.store(state::DONE, Ordering::Release);
    }

    fn trap() -> ! {
        core::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: trap aborts the kernel; the host reports it as a typed error.
        unsafe { core::arch::nvptx::trap() }
    }

    #[panic_handler]
    fn on_panic(info: &core::panic::PanicInfo<'_>) -> ! {
        if let Some(r) = claim() {
            // SAFETY: `claim` hands out the record to one thread only.
            let r = unsafe { &mut *r };
            if let Some(loc) = info.location() {
                write_location(r, loc);
            }
            // Only constant messages are kept: formatting (`core::fmt`) here would raise the
            // register count of every kernel to ~56 (see `copy_cut`).
            let msg = info.message().as_str().unwrap_or(
                "(a message with runtime values: the GPU keeps only constant panic messages)",
            );
            r.message_len = copy_cut(r.message.as_mut_ptr(), MESSAGE_BYTES, msg.as_bytes());
            publish(r);
        }
        trap()
    }
}

/// Report an out-of-bounds index at the caller's location and stop the kernel (on the GPU:
/// record it for the host and trap, without `core::fmt`; on the host: panic).
#[cold]
#[inline(never)]
#[track_caller]
pub fn index_out_of_bounds(i: usize, len: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    gpu::index_failure(i, len, core::panic::Location::caller());
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("index out of bounds: the len is {len} but the index is {i}")
}
