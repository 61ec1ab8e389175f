//! The simulator's "device": host memory standing in for device, pinned and mapped memory.
//!
//! On the simulator backend every address is a host address: device buffers, staging and
//! pinned buffers are 256-byte-aligned zeroed heap allocations, copies are `memcpy`, and
//! "device pointers" of mapped memory are the host pointers themselves. Callers branch on
//! `Inner::sim` and use these in place of the driver.

use std::alloc::Layout;

const ALIGN: usize = 256;

fn layout(bytes: usize) -> Layout {
    Layout::from_size_align(bytes.max(1), ALIGN).expect("allocation size overflows")
}

/// A zeroed allocation of `bytes` (256-aligned, like `cuMemAlloc`).
pub(crate) fn alloc(bytes: usize) -> Option<u64> {
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout(bytes)) };
    (!p.is_null()).then_some(p as u64)
}

/// Free an allocation made by [`alloc`] with the same `bytes`.
///
/// # Safety
/// `p` came from `alloc(bytes)` and is not used afterwards.
pub(crate) unsafe fn free(p: u64, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::alloc::dealloc(p as *mut u8, layout(bytes)) }
}

/// Copy `bytes` from `src` to `dst`.
///
/// # Safety
/// Both ranges are valid, live, and do not overlap.
pub(crate) unsafe fn copy(dst: u64, src: u64, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) }
}
