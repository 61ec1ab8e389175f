//! Device-side API of berth: what a `#[gpu_kernel]` body calls.
//!
//! The same source builds twice. On `nvptx64` (`no_std`) every function here is a PTX special
//! register read, a barrier or a shared-memory declaration. On the host it builds too, so the
//! ordinary host build type-checks kernel bodies; there the functions read a per-thread
//! execution context ([`host`]) that an executor (the CPU simulator) installs. Outside an
//! executor they describe a grid of one thread.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, asm_experimental_arch, core_intrinsics)
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![warn(missing_docs)]

pub mod dim;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
pub mod panic;
pub mod shared;
pub mod slice;

pub use dim::{block, grid, sync_threads, thread};
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub use shared::__host_shared;
pub use shared::{Shared, dynamic as dynamic_shared};
pub use slice::{Slice, SliceMut};

/// Scalars a kernel may take by value: plain data whose bytes mean the same on host and device.
///
/// # Safety
/// Implement only for `Copy` types with a fixed C layout (`#[repr(C)]` or `#[repr(transparent)]`,
/// or primitives), no pointers or references, and no padding whose bytes the kernel reads:
/// the launcher copies the value's bytes verbatim into the kernel's parameter space.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross to the GPU: it does not implement `DeviceCopy`",
    label = "not plain device data",
    note = "kernel scalars and slice elements are numbers, `bool`, arrays of them, or `#[repr(C)]` `Copy` structs of those that declare it: `unsafe impl berth::DeviceCopy for MyParams {{}}`",
    note = "heap types (`String`, `Vec`, `Box`) and references hold host pointers that mean nothing on the GPU"
)]
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: primitives have a fixed layout, no pointers, and identical bytes on both sides.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(
    u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, bool, usize, isize
);

// SAFETY: an array of DeviceCopy elements has the elements' layout repeated, no pointers.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}
