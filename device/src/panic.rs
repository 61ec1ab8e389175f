//! The panic path: a failing kernel records where and why, then traps. It never hangs.
//!
//! The host runtime allocates one [`PanicRecord`] in mapped (zero-copy) host memory and
//! stores its device address in the module global [`RECORD_SYMBOL`] when it loads a module.
//! The first thread to fail claims the record with a compare-and-swap on a claim word in
//! *device* memory (the host link of a GPU such as the H200 has no native atomics on host
//! memory: compute-sanitizer rejects system-scope atomics there), writes what it knows into
//! the host record with plain stores, publishes with a system-scope release store of `state`
//! and traps; threads that lose the claim wait (bounded) on the claim word for the winner to
//! publish before they trap, since a trap ends the whole launch at once. The trap poisons the
//! context; the host then reads the record, which lives in host memory and survives the
//! context.
//!
//! Register pressure shapes this code. ptxas sizes a kernel's registers for everything it may
//! call; `core::fmt` (which `core`'s own bounds checks use) costs ~56, which halves occupancy
//! of simple kernels. So the bounds checks of berth's slice views ([`index_out_of_bounds`])
//! call one small cold function per failure kind, which records the index, the length and the
//! *device addresses* of the location's file name (the host resolves the address to the
//! string through the module's PTX) and traps. Inlined at every check, that path cost
//! register-heavy kernels 20–30 registers; called, a check is a compare and a branch, and
//! simple kernels stay at 24–26 registers.
//!
//! Other panics (`core`'s: a failed `assert!`, `unwrap`, division by zero, `f32::clamp`'s
//! check) build formatted messages; merely linking that formatting costs up to 255 registers
//! (float `Debug`). berth's builder therefore compiles kernels with
//! `-Cpanic=immediate-abort`: such panics trap at once, with no record, and the host reports
//! a `KernelFault` naming the kernel. The `#[panic_handler]` below (file name and constant
//! messages) serves builds made without that flag.

/// Name of the module global holding a [`PanicSlot`]: where the [`PanicRecord`] and its claim
/// word live.
///
/// ```
/// // The host finds the global by this name in the loaded module and stores the record's
/// // and the claim word's device addresses in it.
/// assert_eq!(berth_device::panic::RECORD_SYMBOL, "__berth_panic_record");
/// ```
pub const RECORD_SYMBOL: &str = berth_abi::PANIC_RECORD;

/// What the runtime stores in each module's [`RECORD_SYMBOL`] global when it loads the module.
///
/// ```
/// use berth_device::panic::PanicSlot;
/// // Two device addresses, as the runtime writes them: 16 bytes, no padding.
/// let slot = PanicSlot { record: 0x7f00_0000_1000, claim: 0x7e00_0000_0000 };
/// assert_eq!(core::mem::size_of_val(&slot), 16);
/// assert_ne!(slot.record, slot.claim);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PanicSlot {
    /// Device address of the [`PanicRecord`] (mapped host memory); null: no record.
    pub record: u64,
    /// Device address of a `u32` in device memory, [`state::EMPTY`] at first, that the
    /// first failing thread claims with an atomic compare-and-swap.
    pub claim: u64,
}

/// `state` values of a [`PanicRecord`].
pub mod state {
    /// Nothing recorded.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, state};
    /// assert_eq!(PanicRecord::EMPTY.state, state::EMPTY); // nothing failed
    /// ```
    pub const EMPTY: u32 = 0;
    /// A thread is writing the record.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, state};
    /// let rec = PanicRecord { state: state::WRITING, ..PanicRecord::EMPTY };
    /// // Claimed but not complete: the host reads the fields only once `state` is DONE.
    /// assert_ne!(rec.state, state::DONE);
    /// ```
    pub const WRITING: u32 = 1;
    /// The record is complete.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind, state};
    /// let rec = PanicRecord { state: state::DONE, kind: kind::INDEX, index: 9, len: 4, ..PanicRecord::EMPTY };
    /// assert!(rec.state == state::DONE && rec.index >= rec.len);
    /// ```
    pub const DONE: u32 = 2;
}

/// `kind` values of a [`PanicRecord`].
pub mod kind {
    /// A panic through the panic handler: `file` and `message` hold bytes.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind};
    /// let mut rec = PanicRecord { kind: kind::PANIC, message_len: 4, ..PanicRecord::EMPTY };
    /// rec.message[..4].copy_from_slice(b"boom");
    /// assert_eq!(&rec.message[..rec.message_len as usize], b"boom");
    /// ```
    pub const PANIC: u32 = 0;
    /// An out-of-bounds index: `index` and `len` are set, `file_addr` points at the file name.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind};
    /// let rec = PanicRecord { kind: kind::INDEX, index: 9, len: 4, ..PanicRecord::EMPTY };
    /// assert_eq!((rec.kind, rec.index, rec.len), (kind::INDEX, 9, 4));
    /// ```
    pub const INDEX: u32 = 1;
    /// [`fail`](super::fail) / `gpu_assert!`: `message_addr` points at a constant message.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind};
    /// let msg: &'static str = "tile too small";
    /// // On the GPU `message_addr` is a device address the host resolves through the module.
    /// let rec = PanicRecord { kind: kind::MESSAGE, message_addr_len: msg.len() as u64, ..PanicRecord::EMPTY };
    /// assert_eq!(rec.message_addr_len, 14);
    /// ```
    pub const MESSAGE: u32 = 2;
    /// An index outside the range of an `#[auto]` argument the launch made available:
    /// `index`, `len`, `lo` and `hi` are set, `file_addr` points at the file name.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind, window_message};
    /// let rec = PanicRecord { kind: kind::WINDOW, index: 7, len: 10, lo: 3, hi: 6, ..PanicRecord::EMPTY };
    /// assert!(window_message(rec.index, rec.len, rec.lo, rec.hi).starts_with("index 7 is outside 3..6"));
    /// ```
    pub const WINDOW: u32 = 3;
    /// A row and column outside a matrix or tile view: `index` is the row, `lo` the column,
    /// `len` the rows and `hi` the columns; `file_addr` points at the file name.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, kind, matrix_message};
    /// let rec = PanicRecord { kind: kind::MATRIX, index: 4, lo: 1, len: 4, hi: 8, ..PanicRecord::EMPTY };
    /// assert!(matrix_message(rec.index, rec.lo, rec.len, rec.hi).starts_with("index (4, 1) out of bounds"));
    /// ```
    pub const MATRIX: u32 = 4;
}

/// The message of a [`kind::MATRIX`] failure (the host's report and the simulator's panic).
///
/// ```
/// use berth_device::panic::matrix_message;
/// assert_eq!(
///     matrix_message(4, 1, 4, 8),
///     "index (4, 1) out of bounds: the matrix is 4 × 8 (rows × columns)"
/// );
/// ```
#[cfg(not(target_arch = "nvptx64"))]
#[must_use]
pub fn matrix_message(row: u64, col: u64, rows: u64, cols: u64) -> String {
    format!("index ({row}, {col}) out of bounds: the matrix is {rows} × {cols} (rows × columns)")
}

/// The message of a [`kind::WINDOW`] failure (the host's report and the simulator's panic).
///
/// ```
/// use berth_device::panic::window_message;
/// assert_eq!(
///     window_message(7, 10, 3, 6),
///     "index 7 is outside 3..6, the part of this `#[auto]` argument (len 10) the launch made available (its `Touch::Range` hint)"
/// );
/// ```
#[cfg(not(target_arch = "nvptx64"))]
#[must_use]
pub fn window_message(i: u64, len: u64, lo: u64, hi: u64) -> String {
    format!(
        "index {i} is outside {lo}..{hi}, the part of this `#[auto]` argument (len {len}) the launch made available (its `Touch::Range` hint)"
    )
}

/// Bytes kept of the panicking source file's path.
///
/// ```
/// use berth_device::panic::{FILE_BYTES, PanicRecord};
/// assert_eq!(PanicRecord::EMPTY.file.len(), FILE_BYTES);
/// ```
pub const FILE_BYTES: usize = 192;
/// Bytes kept of the panic message.
///
/// ```
/// use berth_device::panic::{MESSAGE_BYTES, PanicRecord};
/// assert_eq!(PanicRecord::EMPTY.message.len(), MESSAGE_BYTES);
/// ```
pub const MESSAGE_BYTES: usize = 256;

/// What a failing GPU thread leaves for the host. Shared layout of device and host.
///
/// ```
/// use berth_device::panic::{PanicRecord, kind, state};
/// /// What a host says about a finished record (file names resolved elsewhere).
/// fn describe(r: &PanicRecord) -> Option<String> {
///     (r.state == state::DONE).then(|| match r.kind {
///         kind::INDEX => format!("index {} out of bounds (len {}) at line {}", r.index, r.len, r.line),
///         kind::WINDOW => format!("index {} outside {}..{}", r.index, r.lo, r.hi),
///         _ => format!("panic at line {}", r.line),
///     })
/// }
/// assert_eq!(describe(&PanicRecord::EMPTY), None);
/// let rec = PanicRecord { state: state::DONE, kind: kind::INDEX, index: 9, len: 4, line: 12, ..PanicRecord::EMPTY };
/// assert_eq!(describe(&rec).unwrap(), "index 9 out of bounds (len 4) at line 12");
/// ```
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PanicRecord {
    /// See [`state`].
    pub state: u32,
    /// See [`kind`].
    pub kind: u32,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub column: u32,
    /// `threadIdx` of the failing thread.
    pub thread: [u32; 3],
    /// `blockIdx` of the failing thread.
    pub block: [u32; 3],
    /// Device address of the file name (kind INDEX).
    pub file_addr: u64,
    /// Length of the file name.
    pub file_len: u64,
    /// The index (kind INDEX).
    pub index: u64,
    /// The length indexed (kinds INDEX and WINDOW).
    pub len: u64,
    /// First available index (kind WINDOW); the column (kind MATRIX).
    pub lo: u64,
    /// One past the last available index (kind WINDOW); the columns (kind MATRIX).
    pub hi: u64,
    /// Device address of a constant message (kind MESSAGE).
    pub message_addr: u64,
    /// Its length in bytes.
    pub message_addr_len: u64,
    /// Bytes used in `message`.
    pub message_len: u32,
    /// Bytes used in `file` (kind PANIC).
    pub file_bytes: u32,
    /// Source file path (kind PANIC; UTF-8, possibly cut).
    pub file: [u8; FILE_BYTES],
    /// Panic message (kind PANIC; constant messages only).
    pub message: [u8; MESSAGE_BYTES],
}

impl PanicRecord {
    /// An empty record.
    ///
    /// ```
    /// use berth_device::panic::{PanicRecord, state};
    /// // What the host writes into the mapped record before a launch.
    /// let rec = PanicRecord::EMPTY;
    /// assert_eq!((rec.state, rec.line, rec.message_len), (state::EMPTY, 0, 0));
    /// ```
    pub const EMPTY: PanicRecord = PanicRecord {
        state: state::EMPTY,
        kind: kind::PANIC,
        line: 0,
        column: 0,
        thread: [0; 3],
        block: [0; 3],
        file_addr: 0,
        file_len: 0,
        index: 0,
        len: 0,
        lo: 0,
        hi: 0,
        message_addr: 0,
        message_addr_len: 0,
        message_len: 0,
        file_bytes: 0,
        file: [0; FILE_BYTES],
        message: [0; MESSAGE_BYTES],
    };
}

#[cfg(target_arch = "nvptx64")]
mod gpu {
    use super::*;
    use core::panic::Location;
    use core::sync::atomic::{AtomicU32, Ordering};

    /// Where the host's record and its claim word are; null until the runtime sets them.
    #[unsafe(export_name = berth_abi::panic_record!())]
    #[used]
    static mut PANIC_RECORD: PanicSlot = PanicSlot {
        record: 0,
        claim: 0,
    };

    /// The record and its claim word, as `claim` found them.
    #[derive(Clone, Copy)]
    pub(crate) struct Claimed {
        rec: *mut PanicRecord,
        claim: *mut u32,
    }

    /// Spins a losing thread makes waiting for the winner to publish (~ms, never forever).
    const WAIT_SPINS: u32 = 1 << 20;

    /// Claim the record. `Err(Some(c))` when another thread holds it (wait on `c`),
    /// `Err(None)` when there is no record.
    #[inline(always)]
    fn claim() -> Result<Claimed, Option<Claimed>> {
        // SAFETY: the global is written only by the host, before any launch of this module.
        let slot = unsafe { core::ptr::read_volatile(&raw const PANIC_RECORD) };
        if slot.record == 0 || slot.claim == 0 {
            return Err(None);
        }
        let c = Claimed {
            rec: slot.record as *mut PanicRecord,
            claim: slot.claim as *mut u32,
        };
        // The compare-and-swap is on device memory: no atomic ever touches the host record.
        match claim_word(c).compare_exchange(
            state::EMPTY,
            state::WRITING,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(c),
            Err(_) => Err(Some(c)),
        }
    }

    #[inline(always)]
    fn claim_word<'a>(c: Claimed) -> &'a AtomicU32 {
        // SAFETY: the runtime points the slot at a live, 4-aligned u32 of device memory that
        // only this module's panic path accesses, and only atomically.
        unsafe { AtomicU32::from_ptr(c.claim) }
    }

    #[inline(always)]
    fn state_of<'a>(rec: *mut PanicRecord) -> &'a AtomicU32 {
        // SAFETY: the runtime points the slot at a live, mapped, 4-aligned PanicRecord.
        unsafe { AtomicU32::from_ptr(&raw mut (*rec).state) }
    }

    #[inline(always)]
    fn write_common(r: *mut PanicRecord, k: u32, loc: &Location<'_>) {
        // SAFETY: `r` was claimed by this thread, which alone writes it until DONE; reading
        // a PTX special register has no preconditions.
        unsafe {
            (*r).kind = k;
            (*r).line = loc.line();
            (*r).column = loc.column();
            // The special registers themselves, not `crate::thread`: the coordinates' module
            // stops kernels through this one.
            use core::arch::nvptx::{
                _block_idx_x, _block_idx_y, _block_idx_z, _thread_idx_x, _thread_idx_y,
                _thread_idx_z,
            };
            (*r).thread = [
                _thread_idx_x() as u32,
                _thread_idx_y() as u32,
                _thread_idx_z() as u32,
            ];
            (*r).block = [
                _block_idx_x() as u32,
                _block_idx_y() as u32,
                _block_idx_z() as u32,
            ];
            (*r).file_addr = loc.file().as_ptr() as u64;
            (*r).file_len = loc.file().len() as u64;
        }
    }

    /// Publish (winner) or wait for the winner (loser), then trap.
    #[inline(always)]
    fn finish(claimed: Result<Claimed, Option<Claimed>>) -> ! {
        match claimed {
            Ok(c) => {
                // Release at system scope (a plain store, not a read-modify-write): the host
                // that sees DONE sees every field. Then let the losers go.
                state_of(c.rec).store(state::DONE, Ordering::Release);
                claim_word(c).store(state::DONE, Ordering::Release);
            }
            Err(Some(c)) => {
                let mut spins = 0;
                while claim_word(c).load(Ordering::Acquire) != state::DONE && spins < WAIT_SPINS {
                    spins += 1;
                }
            }
            Err(None) => {}
        }
        // SAFETY: trap aborts the kernel; the host reports it as a typed error.
        unsafe { core::arch::nvptx::trap() }
    }

    /// Record an out-of-bounds index with its numbers, then trap: one cold function that every
    /// check calls (inlined at each check, this path cost register-heavy kernels 20–30
    /// registers).
    #[inline(never)]
    #[cold]
    pub(crate) fn index_failure(i: usize, len: usize, loc: &Location<'_>) -> ! {
        let claimed = claim();
        if let Ok(Claimed { rec: r, .. }) = claimed {
            write_common(r, kind::INDEX, loc);
            // SAFETY: claimed by this thread.
            unsafe {
                (*r).index = i as u64;
                (*r).len = len as u64;
            }
        }
        finish(claimed)
    }

    /// Record a failure described by four numbers (kinds WINDOW and MATRIX), then trap.
    #[inline(never)]
    #[cold]
    pub(crate) fn four_failure(
        k: u32,
        index: usize,
        len: usize,
        lo: usize,
        hi: usize,
        loc: &Location<'_>,
    ) -> ! {
        let claimed = claim();
        if let Ok(Claimed { rec: r, .. }) = claimed {
            write_common(r, k, loc);
            // SAFETY: claimed by this thread.
            unsafe {
                (*r).index = index as u64;
                (*r).len = len as u64;
                (*r).lo = lo as u64;
                (*r).hi = hi as u64;
            }
        }
        finish(claimed)
    }

    /// Record a constant message, then trap. Calls nothing.
    #[inline(never)]
    #[cold]
    pub(crate) fn message_failure(msg: &'static str, loc: &Location<'_>) -> ! {
        let claimed = claim();
        if let Ok(Claimed { rec: r, .. }) = claimed {
            write_common(r, kind::MESSAGE, loc);
            // SAFETY: claimed by this thread.
            unsafe {
                (*r).message_addr = msg.as_ptr() as u64;
                (*r).message_addr_len = msg.len() as u64;
            }
        }
        finish(claimed)
    }

    /// Copy `src` into `dst` (cut to `cap`), a byte at a time: small code, few registers.
    #[inline(never)]
    fn copy_cut(dst: *mut u8, cap: usize, src: &[u8]) -> u32 {
        let n = if src.len() < cap {
            src.len() as u32
        } else {
            cap as u32
        };
        let s = src.as_ptr();
        let mut i = 0u32;
        while i < n {
            // SAFETY: `i < n <= cap`, the capacity of `dst`, and `i < src.len()`.
            unsafe {
                dst.add(i as usize)
                    .write_volatile(s.add(i as usize).read_volatile())
            };
            i += 1;
        }
        n
    }

    #[panic_handler]
    fn on_panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let claimed = claim();
        if let Ok(Claimed { rec: r, .. }) = claimed {
            if let Some(loc) = info.location() {
                write_common(r, kind::PANIC, loc);
                // SAFETY: claimed by this thread.
                unsafe {
                    (*r).file_bytes =
                        copy_cut((*r).file.as_mut_ptr(), FILE_BYTES, loc.file().as_bytes());
                }
            }
            // Only constant messages are kept: `core::fmt` here would cost every kernel ~56
            // registers (see the module docs).
            let msg = info.message().as_str().unwrap_or(
                "(a panic message with runtime values; the GPU keeps only constant messages)",
            );
            // SAFETY: claimed by this thread.
            unsafe {
                (*r).message_len =
                    copy_cut((*r).message.as_mut_ptr(), MESSAGE_BYTES, msg.as_bytes());
            }
        }
        finish(claimed)
    }
}

/// Report an out-of-bounds index at the caller's location and stop the kernel (on the GPU:
/// record it for the host and trap, calling nothing; on the host: panic).
///
/// ```
/// use berth_device::panic::index_out_of_bounds;
/// /// A bounds-checked read for a custom view, failing like berth's own views.
/// #[track_caller]
/// fn at(v: &[u32], i: usize) -> u32 {
///     if i >= v.len() {
///         index_out_of_bounds(i, v.len())
///     }
///     v[i]
/// }
/// assert_eq!(at(&[1, 2], 1), 2);
/// // On the host it panics; on the GPU it records the numbers and traps.
/// let err = std::panic::catch_unwind(|| at(&[1, 2], 2)).unwrap_err();
/// assert_eq!(err.downcast_ref::<String>().unwrap(), "index out of bounds: the len is 2 but the index is 2");
/// ```
#[inline(always)]
#[track_caller]
pub fn index_out_of_bounds(i: usize, len: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    gpu::index_failure(i, len, core::panic::Location::caller());
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("index out of bounds: the len is {len} but the index is {i}")
}

/// Report an index outside the available range `lo..hi` of an `#[auto]` argument of `len`
/// elements at the caller's location, and stop the kernel.
///
/// ```
/// use berth_device::panic::outside_window;
/// let err = std::panic::catch_unwind(|| outside_window(7, 10, 3, 6)).unwrap_err();
/// assert!(err.downcast_ref::<String>().unwrap().starts_with("index 7 is outside 3..6"));
/// ```
#[inline(always)]
#[track_caller]
pub fn outside_window(i: usize, len: usize, lo: usize, hi: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    gpu::four_failure(
        kind::WINDOW,
        i,
        len,
        lo,
        hi,
        core::panic::Location::caller(),
    );
    #[cfg(not(target_arch = "nvptx64"))]
    panic!(
        "{}",
        window_message(i as u64, len as u64, lo as u64, hi as u64)
    )
}

/// Report element `(row, col)` as outside a `rows × cols` matrix (or tile) at the caller's
/// location, and stop the kernel.
///
/// ```
/// use berth_device::panic::outside_matrix;
/// let err = std::panic::catch_unwind(|| outside_matrix(2, 9, 4, 8)).unwrap_err();
/// assert!(err.downcast_ref::<String>().unwrap().starts_with("index (2, 9) out of bounds"));
/// ```
#[inline(always)]
#[track_caller]
pub fn outside_matrix(row: usize, col: usize, rows: usize, cols: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    gpu::four_failure(
        kind::MATRIX,
        row,
        rows,
        col,
        cols,
        core::panic::Location::caller(),
    );
    #[cfg(not(target_arch = "nvptx64"))]
    panic!(
        "{}",
        matrix_message(row as u64, col as u64, rows as u64, cols as u64)
    )
}

/// Stop the kernel with `msg`, reported with the caller's location (on the GPU: recorded for
/// the host as `Error::KernelPanic` and trapped, without `core::fmt`; on the host: a panic).
/// Prefer this, or [`gpu_assert!`](crate::gpu_assert), to `panic!`/`assert!` in kernels: on
/// the GPU those abort without saying where.
///
/// ```
/// use berth_device::fail;
/// fn tile_side(n: usize) -> usize {
///     if n > 32 {
///         fail("tile side above 32");
///     }
///     n
/// }
/// assert_eq!(tile_side(16), 16);
/// let err = std::panic::catch_unwind(|| tile_side(64)).unwrap_err();
/// assert_eq!(err.downcast_ref::<String>().unwrap(), "tile side above 32");
/// ```
#[inline(always)]
#[track_caller]
pub fn fail(msg: &'static str) -> ! {
    #[cfg(target_arch = "nvptx64")]
    gpu::message_failure(msg, core::panic::Location::caller());
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("{msg}")
}

/// `assert!` for kernels: on failure the host gets `Error::KernelPanic` with this file, line
/// and message (a string literal; `core::fmt` is too costly on the GPU).
/// `gpu_assert!(i < n)` or `gpu_assert!(i < n, "index past the tile")`.
///
/// ```
/// use berth_device::gpu_assert;
/// fn checked(i: usize, n: usize) -> usize {
///     gpu_assert!(i < n, "index past the tile");
///     gpu_assert!(n.is_power_of_two());
///     i
/// }
/// assert_eq!(checked(3, 8), 3);
/// let err = std::panic::catch_unwind(|| checked(9, 8)).unwrap_err();
/// assert_eq!(err.downcast_ref::<String>().unwrap(), "index past the tile");
/// let err = std::panic::catch_unwind(|| checked(1, 6)).unwrap_err();
/// assert_eq!(err.downcast_ref::<String>().unwrap(), "assertion failed: n.is_power_of_two()");
/// ```
#[macro_export]
macro_rules! gpu_assert {
    ($cond:expr $(,)?) => {
        if !$cond {
            $crate::panic::fail(concat!("assertion failed: ", stringify!($cond)))
        }
    };
    ($cond:expr, $msg:literal $(,)?) => {
        if !$cond {
            $crate::panic::fail($msg)
        }
    };
}
