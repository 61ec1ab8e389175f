//! Asynchronous copies from global to shared memory (`cp.async`, sm_80 or newer): a thread
//! starts a copy of 4, 8 or 16 bytes of a kernel's `&[T]` argument into a [`Shared`] array
//! and goes on computing while the copy is in flight; it then closes the copies it started
//! into a group ([`commit`]) and later waits for groups ([`wait`], [`wait_all`]). A pipeline
//! loads the next tile with these while the warps work on the current one, without holding
//! the tile in registers.
//!
//! # The contract
//!
//! A copy writes its destination elements at some moment between the call and the completion
//! of its group; only the thread that started it can complete the group, by waiting for it.
//! So a copy is, for [the contract of plain accesses](crate::shared#the-contract-of-plain-accesses),
//! a write by the calling thread that lasts from the call to that wait:
//!
//! 1. **Nothing touches an element in flight.** From the copy until the wait that completes
//!    its group, no thread of the block reads or writes the destination elements (the calling
//!    thread included, and another copy counts as a write).
//! 2. **Other threads see it after a barrier.** A thread other than the one that copied reads
//!    or writes the elements only after a [`sync_threads`](crate::sync_threads) that comes
//!    after the copying thread's wait; the copying thread may read them right after its wait.
//! 3. **No race at the start.** As for a plain write: no other thread accesses the elements
//!    between the last barrier before the copy and the copy.
//! 4. **Waited before returning.** The calling thread waits for every copy it started before
//!    it returns from the kernel.
//! 5. **The source stays put.** Nothing writes the source elements until the copy's group is
//!    complete. A kernel's `&[T]` argument is never written during a launch, so a copy from
//!    one keeps this by construction.
//!
//! [`copy_ca`] and [`copy_cg`] are therefore `unsafe`, like [`Shared::write`];
//! [`commit`], [`wait`] and [`wait_all`] only order things and are safe. The global source
//! is an argument's `&[T]`, which nothing writes during the launch; it is bounds-checked like
//! any read of it (a copy past the end stops the thread at its line with the index and the
//! length); it must lie in global memory (on the GPU a source elsewhere, such as a local
//! array, stops the thread with a located report); and both ends must be aligned to the
//! copy's size (PTX requires it; a misaligned copy stops the thread with a located report).
//!
//! # Groups
//!
//! [`commit`] closes the copies the thread started since its last commit into a group
//! (`cp.async.commit_group`; a commit with no copy makes an empty group). [`wait::<N>`](wait)
//! (`cp.async.wait_group N`) returns once at most the `N` most recent groups of the thread
//! are still in flight: every older group is complete. [`wait_all`] commits and waits for
//! everything (`cp.async.wait_all`). Copies not yet committed belong to no group, and
//! `wait::<N>` does not wait for them.
//!
//! # On the simulator
//!
//! The simulator performs each copy as a plain copy when it is issued and records its
//! destination bytes as in flight. The record ends in two steps: the copying thread's wait
//! for the copy's group lets that thread access the bytes, and the next barrier after that
//! wait lets every thread access them. Any access to bytes whose record forbids it — a read
//! before the wait, a read by another thread after the wait but before a barrier, a write or
//! a second copy over a copy in flight — is a launch error naming the shared array, the
//! element, both threads and both lines, as a shared-memory race is; so is a thread that
//! returns while a copy it started was never waited for. The destination elements also count
//! as written by the copying thread for the ordinary race and initialisation checks.
//!
//! ```
//! use berth_device::{async_copy, shared_array, sync_threads, thread};
//! // Each thread stages four `f32` of `src` (16 bytes) and reads back its neighbour's.
//! fn stage(src: &[f32]) -> f32 {
//!     let tile = shared_array!(STAGE: [f32; 4 * 32]);
//!     let t = thread::idx_x();
//!     // SAFETY: thread `t` copies elements `4t..4t + 4`, which no other thread touches
//!     // before the barrier below; it waits for the copy before the barrier, and every
//!     // thread reaches the barrier (no branch around it).
//!     unsafe {
//!         async_copy::copy_cg::<f32, 4>(tile, 4 * t, src, 4 * t);
//!         async_copy::wait_all();
//!         sync_threads();
//!     }
//!     let n = (t + 1) % thread::count();
//!     // SAFETY: element `4n` was copied by thread `n`, which waited before the barrier;
//!     // nobody writes it after.
//!     unsafe { tile.read(4 * n) }
//! }
//! #[repr(align(16))] // a kernel's arguments are 256-byte aligned; a host array may not be
//! struct Aligned([f32; 128]);
//! let src = Aligned(core::array::from_fn(|x| x as f32));
//! assert_eq!(stage(&src.0), 0.0); // one thread outside a launch: its own first element
//! ```

use crate::Shared;
use core::mem::size_of;

/// Check the copy's bounds, its source's state space and both ends' alignment; the generic
/// addresses of its two ends.
#[inline(always)]
#[track_caller]
fn ends<T, const N: usize>(dst: Shared<T>, to: usize, src: &[T], from: usize) -> (*mut T, *const T)
where
    T: Copy + Send,
{
    let bytes = N * size_of::<T>();
    if from >= src.len() || src.len() - from < N {
        // The last element the copy would read, which is past the end.
        crate::panic::index_out_of_bounds(from.saturating_add(N - 1), src.len());
    }
    if to >= dst.len() || dst.len() - to < N {
        crate::panic::index_out_of_bounds(to.saturating_add(N - 1), dst.len());
    }
    let (d, s) = (
        dst.as_ptr().wrapping_add(to),
        src.as_ptr().wrapping_add(from),
    );
    if !in_global_memory(s) {
        crate::panic::fail(
            "async_copy: the source is not in global memory (a kernel's `&[T]` argument is; a local array is not)",
        );
    }
    if !(s as usize).is_multiple_of(bytes) {
        crate::panic::fail(
            "async_copy: the global source is not aligned to the copy's size (4, 8 or 16 bytes)",
        );
    }
    if !(d as usize).is_multiple_of(bytes) {
        crate::panic::fail(
            "async_copy: the shared destination is not aligned to the copy's size (4, 8 or 16 bytes)",
        );
    }
    (d, s)
}

/// Whether the generic address `p` is in the global state space (`isspacep.global`): the
/// copies read only global memory. Always true on the host, which has one space.
#[inline(always)]
pub(crate) fn in_global_memory<T>(p: *const T) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let global: u32;
        // SAFETY: tests which state space an address lies in; reads no memory.
        unsafe {
            core::arch::asm!(
                "{{",
                ".reg .pred %berth_g;",
                "isspacep.global %berth_g, {p};",
                "selp.u32 {g}, 1, 0, %berth_g;",
                "}}",
                p = in(reg64) p,
                g = out(reg32) global,
                options(pure, nomem, nostack),
            )
        };
        global != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = p;
        true
    }
}

/// Start copying elements `from..from + N` of `src` (global memory: a kernel's `&[T]`
/// argument) to elements `to..to + N` of `dst`, caching the source in L1 and L2
/// (`cp.async.ca.shared.global`). The copy is `N * size_of::<T>()` bytes: 4, 8 or 16 (else
/// the call does not compile).
///
/// Both ranges are bounds-checked, the source must lie in global memory and both ends must
/// be aligned to the copy's size; a failing check stops the thread with a located report.
///
/// # Safety
/// The [module's contract](self#the-contract) for elements `to..to + N` of `dst`: nothing
/// touches them until this thread's wait that completes the copy's group (and, for other
/// threads, a barrier after that wait); no other thread touches them between the last
/// barrier and this call; this thread waits for the copy before it returns; nothing writes
/// the source elements until then (true of a kernel's `&[T]` argument).
///
/// ```
/// use berth_device::{async_copy, shared_array};
/// #[repr(align(16))] // a kernel's arguments are 256-byte aligned; a host array may not be
/// struct Aligned([u16; 6]);
/// let src = Aligned([1, 2, 3, 4, 5, 6]);
/// let tile = shared_array!(T: [u16; 8]);
/// // SAFETY: one thread; it reads the elements only after waiting for the copy.
/// let v = unsafe {
///     async_copy::copy_ca::<u16, 2>(tile, 2, &src.0, 4); // 4 bytes
///     async_copy::wait_all();
///     tile.read(3)
/// };
/// assert_eq!(v, 6);
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn copy_ca<T: Copy + Send, const N: usize>(
    dst: Shared<T>,
    to: usize,
    src: &[T],
    from: usize,
) {
    const {
        assert!(
            matches!(N * size_of::<T>(), 4 | 8 | 16),
            "cp.async.ca copies 4, 8 or 16 bytes"
        )
    };
    let (d, s) = ends::<T, N>(dst, to, src, from);
    // SAFETY: both ends are in bounds and aligned to the copy's size, and the source is in
    // global memory (`ends`); the rest is the caller's contract, forwarded.
    unsafe { issue::<T, N, false>(d, s) }
}

/// Start copying elements `from..from + N` of `src` to elements `to..to + N` of `dst`,
/// caching the source in L2 only (`cp.async.cg.shared.global`): for data read once per
/// block, such as the tiles of a matrix product. The copy is 16 bytes
/// (`N * size_of::<T>() == 16`, else the call does not compile).
///
/// Checks as for [`copy_ca`].
///
/// # Safety
/// As [`copy_ca`].
///
/// ```
/// use berth_device::{async_copy, f16, shared_array};
/// #[repr(align(16))]
/// struct Aligned([f16; 16]);
/// let src = Aligned(core::array::from_fn(|x| f16::from_f32(x as f32)));
/// let tile = shared_array!(T: [f16; 16]);
/// // SAFETY: one thread; it reads the elements only after waiting for both copies.
/// let v = unsafe {
///     async_copy::copy_cg::<f16, 8>(tile, 0, &src.0, 8);
///     async_copy::copy_cg::<f16, 8>(tile, 8, &src.0, 0);
///     async_copy::commit();
///     async_copy::wait::<0>();
///     tile.read(9)
/// };
/// assert_eq!(v.to_f32(), 1.0);
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn copy_cg<T: Copy + Send, const N: usize>(
    dst: Shared<T>,
    to: usize,
    src: &[T],
    from: usize,
) {
    const { assert!(N * size_of::<T>() == 16, "cp.async.cg copies 16 bytes") };
    let (d, s) = ends::<T, N>(dst, to, src, from);
    // SAFETY: as in `copy_ca`.
    unsafe { issue::<T, N, true>(d, s) }
}

/// [`copy_cg`] without the checks on the GPU, for a copy in a kernel's innermost loop whose
/// bounds, state space and alignment the kernel has established itself (the checks of
/// [`copy_cg`] cost more instructions than the copy). On the simulator it checks as
/// [`copy_cg`] does, so a kernel's tests still catch a copy out of bounds or misaligned.
///
/// # Safety
/// As [`copy_cg`], and also what [`copy_cg`] checks: elements `from..from + N` are inside
/// `src`, which lies in global memory (a kernel's `&[T]` argument does), `to..to + N` inside
/// `dst`, and both ends are 16-byte aligned.
///
/// ```
/// use berth_device::{async_copy, f16, shared_array};
/// #[repr(align(16))]
/// struct Aligned([f16; 8]);
/// let src = Aligned(core::array::from_fn(|x| f16::from_f32(x as f32)));
/// let tile = shared_array!(T: [f16; 8]);
/// // SAFETY: one thread; both ranges are in bounds and 16-byte aligned (the tile is, and
/// // the source is an aligned array); it reads after waiting for the copy.
/// let v = unsafe {
///     async_copy::copy_cg_unchecked::<f16, 8>(tile, 0, &src.0, 0);
///     async_copy::wait_all();
///     tile.read(5)
/// };
/// assert_eq!(v.to_f32(), 5.0);
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn copy_cg_unchecked<T: Copy + Send, const N: usize>(
    dst: Shared<T>,
    to: usize,
    src: &[T],
    from: usize,
) {
    const { assert!(N * size_of::<T>() == 16, "cp.async.cg copies 16 bytes") };
    #[cfg(target_arch = "nvptx64")]
    {
        // The destination as a 32-bit shared-memory address: the array's (which the compiler
        // computes once) plus the offset, instead of a 64-bit generic address per copy.
        let d = shared_address(dst.as_ptr()).wrapping_add((to * size_of::<T>()) as u32);
        let s = src.as_ptr().wrapping_add(from);
        // SAFETY: the caller's contract: `s` is in-bounds, 16-byte aligned global memory that
        // nothing writes, `d` in-bounds, 16-byte aligned shared memory that nothing touches
        // until the copy's group is waited for. Not `nomem`: the copy writes memory.
        unsafe {
            core::arch::asm!(
                "{{",
                ".reg .u64 %berth_s;",
                "cvta.to.global.u64 %berth_s, {s};",
                "cp.async.cg.shared.global [{d}], [%berth_s], 16;",
                "}}",
                d = in(reg32) d,
                s = in(reg64) s,
                options(nostack),
            )
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let (d, s) = ends::<T, N>(dst, to, src, from);
        // SAFETY: the caller's contract, also checked by `ends`; the rest as in `copy_ca`.
        unsafe { issue::<T, N, true>(d, s) }
    }
}

/// The 32-bit shared-state-space address of `p`, a generic address inside block-shared
/// memory (`cvta.to.shared`).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn shared_address<T>(p: *const T) -> u32 {
    let a: u32;
    // SAFETY: converts an address between state spaces; reads and writes no memory.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 %berth_t;",
            "cvta.to.shared.u64 %berth_t, {p};",
            "cvt.u32.u64 {a}, %berth_t;",
            "}}",
            p = in(reg64) p,
            a = out(reg32) a,
            options(pure, nomem, nostack),
        )
    };
    a
}

/// Issue the copy of `N` elements from `s` to `d`.
///
/// # Safety
/// `s` is `N` readable elements of global memory that nothing writes until the copy is
/// complete, `d` `N` elements of block-shared memory; both aligned to `N * size_of::<T>()`, which is 4, 8
/// or 16 (16 when `CG`); the module's contract holds for the destination.
#[inline(always)]
#[track_caller]
unsafe fn issue<T: Copy, const N: usize, const CG: bool>(d: *mut T, s: *const T) {
    #[cfg(target_arch = "nvptx64")]
    {
        macro_rules! cp {
            ($ins:literal) => {
                // SAFETY: the caller's contract: `s` is in-bounds, aligned global memory that
                // nothing writes, `d` in-bounds, aligned shared memory that nothing touches
                // until the copy's group is waited for. Not `nomem`: the copy writes memory,
                // so LLVM keeps it in order with the other accesses.
                unsafe {
                    core::arch::asm!(
                        "{{",
                        ".reg .u64 %berth_d;",
                        ".reg .u64 %berth_s;",
                        "cvta.to.shared.u64 %berth_d, {d};",
                        "cvta.to.global.u64 %berth_s, {s};",
                        $ins,
                        "}}",
                        d = in(reg64) d,
                        s = in(reg64) s,
                        options(nostack),
                    )
                }
            };
        }
        match (CG, N * size_of::<T>()) {
            (true, _) => cp!("cp.async.cg.shared.global [%berth_d], [%berth_s], 16;"),
            (false, 16) => cp!("cp.async.ca.shared.global [%berth_d], [%berth_s], 16;"),
            (false, 8) => cp!("cp.async.ca.shared.global [%berth_d], [%berth_s], 8;"),
            _ => cp!("cp.async.ca.shared.global [%berth_d], [%berth_s], 4;"),
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // The simulator copies at issue; its checks keep the destination in flight until the
        // wait (and, for other threads, a barrier).
        let at = core::panic::Location::caller();
        for i in 0..N {
            crate::host::shared_access(
                d.wrapping_add(i) as usize,
                size_of::<T>(),
                crate::host::Access::Write,
                at,
            );
        }
        crate::host::async_copy(d as usize, N * size_of::<T>(), at);
        // SAFETY: both ends are valid for `N` elements and do not overlap (global and shared
        // memory); the caller's contract keeps other threads off the destination.
        unsafe { core::ptr::copy_nonoverlapping(s, d, N) };
    }
}

/// Close the copies this thread started since its last commit into a group
/// (`cp.async.commit_group`); a commit with no copy makes an empty group, which a
/// [`wait`] counts like any other.
///
/// ```
/// use berth_device::{async_copy, shared_array};
/// #[repr(align(16))]
/// struct Aligned([u32; 4]);
/// let src = Aligned([7; 4]);
/// let tile = shared_array!(T: [u32; 4]);
/// // SAFETY: one thread; it reads after waiting for the group.
/// let v = unsafe {
///     async_copy::copy_cg::<u32, 4>(tile, 0, &src.0, 0);
///     async_copy::commit(); // group 1
///     async_copy::commit(); // group 2, empty
///     async_copy::wait::<0>();
///     tile.read(0)
/// };
/// assert_eq!(v, 7);
/// ```
#[inline(always)]
#[track_caller]
pub fn commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: closes this thread's group of copies; reads and writes no memory itself, but
    // is kept in order with the copies and waits around it (not `nomem`).
    unsafe {
        core::arch::asm!("cp.async.commit_group;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::async_commit(core::panic::Location::caller());
}

/// Wait until at most the `N` most recent groups of this thread's copies are in flight
/// (`cp.async.wait_group N`): every older group is complete, and this thread may read what
/// it copied. Other threads may read it after a barrier that follows this wait. Copies not
/// yet [committed](commit) are not waited for.
///
/// ```
/// use berth_device::{async_copy, shared_array};
/// #[repr(align(16))]
/// struct Aligned([u64; 4]);
/// let src = Aligned([1, 2, 3, 4]);
/// let tile = shared_array!(T: [u64; 4]);
/// // SAFETY: one thread. Each element is read only once the group of its copy is complete.
/// let (a, b) = unsafe {
///     async_copy::copy_ca::<u64, 2>(tile, 0, &src.0, 0);
///     async_copy::commit();
///     async_copy::copy_ca::<u64, 2>(tile, 2, &src.0, 2);
///     async_copy::commit();
///     async_copy::wait::<1>(); // the first group is complete, the second may not be
///     let a = tile.read(1);
///     async_copy::wait::<0>();
///     (a, tile.read(3))
/// };
/// assert_eq!((a, b), (2, 4));
/// ```
#[inline(always)]
#[track_caller]
pub fn wait<const N: usize>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: waits for this thread's copies; it touches no memory itself but orders the
    // shared-memory reads after it behind the copies (not `nomem`).
    unsafe {
        core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::async_wait(N, core::panic::Location::caller());
}

/// Commit the copies not yet committed and wait for every copy of this thread
/// (`cp.async.wait_all`, which is `commit_group` then `wait_group 0`).
///
/// ```
/// use berth_device::{async_copy, shared_array};
/// let src = [3.5f32; 8];
/// let tile = shared_array!(T: [f32; 8]);
/// // SAFETY: one thread; it reads after waiting.
/// let v = unsafe {
///     async_copy::copy_ca::<f32, 1>(tile, 5, &src, 0);
///     async_copy::wait_all();
///     tile.read(5)
/// };
/// assert_eq!(v, 3.5);
/// ```
#[inline(always)]
#[track_caller]
pub fn wait_all() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `wait`.
    unsafe {
        core::arch::asm!("cp.async.wait_all;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let at = core::panic::Location::caller();
        crate::host::async_commit(at);
        crate::host::async_wait(0, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(align(16))]
    struct Aligned([u32; 8]);

    fn message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("the copy must fail");
        (err.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| err.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    }

    #[test]
    fn copies_outside_either_end_or_misaligned_fail() {
        let src = Aligned([1, 2, 3, 4, 5, 6, 7, 8]);
        let tile = crate::shared_array!(T: [u32; 8]);
        // SAFETY (each call): one thread, which waits before it reads (where the copy is
        // made at all).
        let past_source = message(|| unsafe { copy_cg::<u32, 4>(tile, 0, &src.0, 6) });
        assert_eq!(
            past_source,
            "index out of bounds: the len is 8 but the index is 9"
        );
        let past_tile = message(|| unsafe { copy_ca::<u32, 2>(tile, 7, &src.0, 0) });
        assert_eq!(
            past_tile,
            "index out of bounds: the len is 8 but the index is 8"
        );
        let misaligned = message(|| unsafe { copy_cg::<u32, 4>(tile, 0, &src.0, 1) });
        assert!(
            misaligned.contains("global source is not aligned"),
            "{misaligned}"
        );
        let misaligned = message(|| unsafe { copy_ca::<u32, 2>(tile, 1, &src.0, 0) });
        assert!(
            misaligned.contains("shared destination is not aligned"),
            "{misaligned}"
        );
        // SAFETY: as above.
        let v = unsafe {
            copy_ca::<u32, 2>(tile, 6, &src.0, 2);
            wait_all();
            tile.read(7)
        };
        assert_eq!(v, 4);
    }
}
