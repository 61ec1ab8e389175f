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
    feature(
        stdarch_nvptx,
        asm_experimental_arch,
        core_intrinsics,
        link_llvm_intrinsics
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![deny(missing_docs)]

mod asm;
pub mod async_copy;
pub mod atomic;
pub mod dim;
pub mod half;
#[doc(hidden)]
pub mod hint;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
pub mod math;
pub mod matrix;
pub mod mbarrier;
pub mod mma;
pub mod own;
pub mod packed;
pub mod panic;
pub mod rows;
pub mod shared;
pub mod signal;
pub mod slice;
pub mod tma;
pub mod warp;
pub mod wgmma;

pub use ::float8::{F8E4M3, F8E5M2};
pub use ::half::{bf16, f16};
pub use atomic::AtomicSlice;
pub use dim::{block, grid, sync_threads, thread};
pub use math::{FastMath, GpuFloat};
pub use matrix::{GridMatrix, Matrix, MatrixMut, Tile, TileMut, Tiles};
pub use own::{Own, Own2};
pub use packed::{Packed, Packing};
pub use panic::fail;
pub use rows::Rows;
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub use shared::__host_shared;
#[doc(hidden)]
pub use shared::__private_shared;
pub use shared::{Shared, dynamic as dynamic_shared};
pub use signal::{Inbox, Mailbox, Outbox, Reserved, Signals, Slot};
pub use slice::{PerBlock, Slice, SliceMut, Window};

/// berth's kernel ABI, for the expansions of this crate's macros (`shared_array!` names its
/// section).
#[doc(hidden)]
pub use berth_abi as __abi;

/// Scalars a kernel may take by value: plain data whose bytes mean the same on host and device.
///
/// # Safety
/// Implement only for `Copy` types with a fixed C layout (`#[repr(C)]` or `#[repr(transparent)]`,
/// or primitives), no pointers or references, no padding (the launcher reads the value's
/// bytes, and padding bytes are uninitialised), and all-zero bytes a valid value (fresh
/// buffers are zeroed before the host can read them as `T`).
///
/// ```
/// use berth_device::DeviceCopy;
///
/// /// A kernel scalar: `#[repr(C)]`, no padding, no pointers, valid when all zero.
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Params {
///     scale: f32,
///     offset: [f32; 3],
/// }
/// // SAFETY: `#[repr(C)]` of four `f32`: no padding, no pointers, zero bytes are a value.
/// // (With the berth crate, `#[derive(DeviceCopy)]` writes this and checks the layout.)
/// unsafe impl DeviceCopy for Params {}
///
/// fn launch_arg<T: DeviceCopy>(v: T) -> usize {
///     size_of_val(&v)
/// }
/// assert_eq!(launch_arg(Params { scale: 2.0, offset: [0.0; 3] }), 16);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross to the GPU: it does not implement `DeviceCopy`",
    label = "not plain device data",
    note = "kernel scalars and slice elements are numbers, `bool`, arrays of them, or `#[repr(C)]` `Copy` structs of those: add `#[derive(DeviceCopy)]` (or `unsafe impl berth::DeviceCopy`)",
    note = "heap types (`String`, `Vec`, `Box`) and references hold host pointers that mean nothing on the GPU"
)]
pub unsafe trait DeviceCopy: Copy + 'static {
    /// Evaluated wherever a value's bytes are read as bytes (a launch's scalar parameters):
    /// `#[derive(DeviceCopy)]` on a generic struct sets it to a compile-time assertion that the
    /// instance has no padding, which a non-generic struct gets at its definition. Impls over
    /// other `DeviceCopy` types (arrays, `Slot<T>`, derived structs) evaluate their parts'
    /// checks too, so padding inside a field or element is refused as well.
    #[doc(hidden)]
    const __BERTH_NO_PADDING: () = ();
}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: primitives have a fixed layout, no pointers, and identical bytes on both sides.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(
    u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, bool, usize, isize
);
// SAFETY: the `float8` crate's 8-bit floats are `#[repr(transparent)]` wrappers of a `u8`:
// fixed layout, no pointers, every byte (zero too) a value, the same on host and device.
unsafe impl DeviceCopy for F8E4M3 {}
// SAFETY: as above.
unsafe impl DeviceCopy for F8E5M2 {}

// SAFETY: an array of DeviceCopy elements has the elements' layout repeated, no pointers, and
// no padding between elements (a size is a multiple of its alignment); padding inside an
// element is the element's check, forwarded.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {
    const __BERTH_NO_PADDING: () = T::__BERTH_NO_PADDING;
}

#[cfg(test)]
mod tests {
    use crate::{Slice, SliceMut, Window, gpu_assert, shared_array, thread};

    #[test]
    fn views_index_and_report_out_of_bounds_like_slices() {
        let data = [1u32, 2, 3];
        // SAFETY: `data` outlives the view and is not written meanwhile.
        let s = unsafe { Slice::from_raw(data.as_ptr(), data.len()) };
        assert_eq!((s[2], s.len(), s.iter().sum::<u32>()), (3, 3, 6));
        let err = std::panic::catch_unwind(|| s[3]).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert_eq!(msg, "index out of bounds: the len is 3 but the index is 3");

        let mut out = [0u32; 2];
        // SAFETY: `out` outlives the view and nothing else touches it.
        let mut m = unsafe { SliceMut::from_raw(out.as_mut_ptr(), out.len()) };
        // Outside an executor the grid is one thread, whose own index is 0.
        m[thread::index()] = 5;
        // SAFETY: one thread: nobody else touches element 1.
        unsafe { m.write(1, 7) };
        assert_eq!(m[thread::index()], 5);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            // SAFETY: as above (and out of bounds, which `write` reports).
            m.write(2, 1)
        }))
        .unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "index out of bounds: the len is 2 but the index is 2"
        );
        assert_eq!(out, [5, 7]);
        // SAFETY: a zero-length view may dangle.
        let empty = unsafe { Slice::<f32>::from_raw(std::ptr::null(), 0) };
        assert!(empty.is_empty());
    }

    #[test]
    fn a_window_reads_only_its_available_range() {
        let staged = [30u32, 40, 50];
        // SAFETY: `staged` holds elements 3..6 of a 10-element argument, and outlives the view.
        let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
        assert_eq!(
            (w.len(), w.available(), w[4], w.get(5)),
            (10, 3..6, 40, Some(&50))
        );
        assert_eq!((w.get(2), w.get(6)), (None, None));
        assert_eq!(w.available_slice(), &staged);
        assert!(w.as_slice().is_none());
        let err = std::panic::catch_unwind(|| w[7]).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "index 7 is outside 3..6, the part of this `#[auto]` argument (len 10) the launch made available (its `Touch::Range` hint)"
        );
        let err = std::panic::catch_unwind(|| w[10]).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "index out of bounds: the len is 10 but the index is 10"
        );
        assert_eq!(&w[3..5], &[30, 40]);
        assert_eq!(&w[6..6], &[] as &[u32]);
        for (r, msg) in [
            (2..4, "index 2 is outside 3..6"),
            (4..7, "index 6 is outside 3..6"),
            (
                5..11,
                "index out of bounds: the len is 10 but the index is 11",
            ),
        ] {
            let err = std::panic::catch_unwind(|| w[r.clone()].len()).unwrap_err();
            let got = err.downcast_ref::<String>().unwrap();
            assert!(got.starts_with(msg), "{r:?}: {got}");
        }
        // SAFETY: all of `staged` is available.
        let whole = unsafe { Window::from_raw(staged.as_ptr(), 3, 0, 3) };
        assert_eq!(whole.as_slice(), Some(&staged[..]));
    }

    /// A user's macro that makes two arrays gives both one name and location: each is still
    /// its own array, of its own size.
    #[test]
    fn two_arrays_from_one_macro_invocation_are_two_arrays() {
        macro_rules! small_and_big {
            () => {
                (shared_array!(T: [u8; 4]), shared_array!(T: [u64; 64]))
            };
        }
        let (small, big) = small_and_big!();
        assert_ne!(small.as_ptr() as usize, big.as_ptr() as usize);
        // SAFETY: one thread: nobody else touches the arrays.
        unsafe {
            small.write(0, 7);
            for i in 0..64 {
                big.write(i, u64::MAX);
            }
            assert_eq!(small.read(0), 7);
        }
    }

    #[test]
    fn outside_an_executor_the_grid_is_one_thread_with_private_shared_memory() {
        assert_eq!(
            (thread::idx_x(), thread::global_x(), crate::block::dim_x()),
            (0, 0, 1)
        );
        let tile = shared_array!(T: [u64; 4]);
        // SAFETY: one thread: nobody else touches element 3, written before it is read.
        let v = unsafe {
            tile.write(3, 9);
            tile.read(3)
        };
        assert_eq!((v, tile.len()), (9, 4));
        // SAFETY: one thread: the whole block reaches the barrier.
        unsafe { crate::sync_threads() };
        assert!(crate::dynamic_shared::<f32>().is_empty());
    }

    #[test]
    #[should_panic(expected = "assertion failed: 1 + 1 == 3")]
    fn gpu_assert_panics_on_the_host_with_its_condition() {
        gpu_assert!(1 + 1 == 3);
    }
}
