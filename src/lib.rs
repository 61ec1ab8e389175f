//! berth: GPU kernels in Rust whose arguments' placement is part of the kernel's signature.
//!
//! Where each argument's data lives is written in the kernel's signature, checked by the
//! compiler, and carried out by the generated launcher:
//!
//! | in the kernel's signature | the launcher takes | what happens |
//! |---|---|---|
//! | `a: T` | the value | passed by value |
//! | `x: &[T]` / `&mut [T]` | `&`[`DeviceBuffer<T>`] / `&mut` | device memory, in place |
//! | `#[pinned_async] x: &[T]` | `&`[`PinnedBuffer<T>`] ([`Gpu::pinned_from`]) | copied asynchronously to pooled device staging before the kernel |
//! | `#[pinned_async] y: &mut [T]` | `&mut PinnedBuffer<T>` | copied in before and back after the kernel (`(out)`: back only) |
//! | `#[mapped] x: &[T]` / `&mut [T]` | `&`[`MappedBuffer<T>`] ([`Gpu::mapped_from`]) or `&`[`Registered<T>`] | the GPU reads and writes host memory in place, no copy |
//! | `#[auto] t: &[T]` | `&MappedBuffer<T>` and a [`Touch`] hint | per launch: read in place, copy the table, or copy the hinted range |
//! | `#[mapped] s: &Signals` / `&Inbox<T>` / `&Outbox<T>` | `&`[`SignalBuffer`] / `&`[`InboxBuffer<T>`] / `&`[`OutboxBuffer<T>`] | the host talks to a running kernel, atomics only |
//!
//! Which placement to choose, with the crossovers measured on an H200: the [`guide`]. Every
//! argument form and option of the attribute, the generated launchers, the rules for kernel
//! crates, and examples that run: [`gpu_kernel`].
//!
//! A kernel crate writes `#[gpu_kernel]` functions; its one-line build script
//! (`fn main() { berth_build::kernels() }`) compiles the crate for `nvptx64-nvidia-cuda`,
//! and the macro generates a typed host launcher around the embedded PTX:
//!
//! ```ignore
//! // A kernel crate's src/lib.rs (this very kernel is compiled, for both targets, in this
//! // repository's `examples/src/lib.rs`; a doctest has no build script to make its PTX):
//! use berth::prelude::*;
//!
//! #[gpu_kernel]
//! pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
//!     let i = thread::index();
//!     if i < y.len() {
//!         y[i] += a * x[i];
//!     }
//! }
//! ```
//!
//! ```no_run
//! // Host code: a context, device buffers, a launch, the result back.
//! use berth::{Gpu, Grid};
//! use berth_examples::saxpy;
//!
//! fn main() -> Result<(), berth::Error> {
//!     let (host_x, host_y) = (vec![1.0f32; 1000], vec![2.0f32; 1000]);
//!     let gpu = Gpu::new()?; // Err, never a panic, without a driver or GPU
//!     let x = gpu.upload(&host_x)?;
//!     let mut y = gpu.upload(&host_y)?;
//!     saxpy(&gpu, Grid::cover(host_y.len()), 2.0, &x, &mut y)?.wait()?;
//!     assert_eq!(y.to_vec()?[0], 4.0);
//!     Ok(())
//! }
//! ```
//!
//! Structs cross to the GPU with `#[derive(DeviceCopy)]`, which rejects padding: a launch
//! reads a scalar's bytes, and padding bytes are uninitialised. A generic struct is checked
//! for each instance a launch passes, at compile time:
//!
//! ```compile_fail,E0080
//! use berth::DeviceCopy;
//!
//! #[repr(C)]
//! #[derive(Clone, Copy, DeviceCopy)]
//! pub struct Pair<T> {
//!     pub tag: u8,
//!     pub value: T,
//! }
//!
//! // What a launch of a kernel taking `Pair<u32>` evaluates: three bytes of padding.
//! let () = <Pair<u32> as DeviceCopy>::__BERTH_NO_PADDING;
//! ```
//!
//! ```
//! # use berth::DeviceCopy;
//! # #[repr(C)]
//! # #[derive(Clone, Copy, DeviceCopy)]
//! # pub struct Pair<T> { pub tag: u8, pub value: T }
//! // `Pair<u8>` has none.
//! let () = <Pair<u8> as DeviceCopy>::__BERTH_NO_PADDING;
//! ```
//!
//! Padding inside an array's element or a mailbox slot is refused the same way:
//!
//! ```compile_fail,E0080
//! # use berth::DeviceCopy;
//! # #[repr(C)]
//! # #[derive(Clone, Copy, DeviceCopy)]
//! # pub struct Pair<T> { pub tag: u8, pub value: T }
//! let () = <[Pair<u32>; 2] as DeviceCopy>::__BERTH_NO_PADDING;
//! ```
//!
//! ```compile_fail,E0080
//! # use berth::DeviceCopy;
//! // A `u32` sequence number then a `u64`: four bytes of padding.
//! let () = <berth::device::Slot<u64> as DeviceCopy>::__BERTH_NO_PADDING;
//! ```
//!
//! ```
//! # use berth::DeviceCopy;
//! let () = <[berth::device::Slot<u32>; 2] as DeviceCopy>::__BERTH_NO_PADDING;
//! ```
//!
//! Layers: [`berth_device`] (re-exported as [`device`] and in the [`prelude`]) is what kernel
//! bodies call, on both targets; [`berth_runtime`] (host only) owns the context, memory,
//! streams and launches; `berth_macros` writes the glue between them. Generated code names
//! only [`__private`], which carries no stability promise.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![deny(missing_docs)]

#[doc = include_str!("../docs/placement-guide.md")]
pub mod guide {}

pub use berth_device as device;
pub use berth_device::async_copy;
pub use berth_device::mma;
pub use berth_device::packed;
pub use berth_device::warp;
pub use berth_device::{
    AtomicSlice, DeviceCopy, FastMath, GpuFloat, Inbox, Mailbox, Matrix, MatrixMut, Outbox, Own,
    Packed, Packing, PerBlock, Rows, Shared, Signals, Slice, SliceMut, Slot, Tile, TileMut, Tiles,
    Window, bf16, f16, gpu_assert, gpu_or_host, math, shared_array,
};
pub use berth_device::{F8E4M3, F8E5M2};
pub use berth_device::{mbarrier, tma, wgmma};
#[doc = include_str!("gpu_kernel.md")]
pub use berth_macros::gpu_kernel;
pub use berth_macros::{DeviceCopy, unroll};

#[cfg(not(target_arch = "nvptx64"))]
pub use berth_runtime::{
    Backend, Cacheable, CollectiveType, DeviceArg, DeviceBuffer, DeviceCache, DeviceLimits,
    DeviceProgress, DeviceSet, Dim3, Error, Event, GatherReads, Gpu, Graph, Grid, Held, HostAccess,
    HostFlags, HostShared, HotTier, HotTierStats, InPlaceRows, InboxBuffer, LinkProfile,
    ManagedBuffer, MappedArg, MappedBuffer, NotedIds, OutboxBuffer, PanicReport, PeerPath,
    PeerView, Pending, PinnedArg, PinnedBuffer, PinnedOptions, PipelineOptions, PipelineRun,
    PipelineStats, Placed, PoolStats, Queue, RESTART_ENV, Recorder, ReduceOp, Refresh,
    RegisterError, Registered, Result, RowSource, Scope, Sharded, SharedHost, SignalBuffer, Stream,
    auto_plan, nvtx, placement, placement::Touch, ptx, raw, restart_process,
};

/// Everything a kernel crate and its host code usually need.
pub mod prelude {
    #[doc(no_inline)]
    pub use crate::gpu_kernel;
    pub use berth_device::half::{HalfExt, bf16x2, f16x2};
    pub use berth_device::signal::now_ns;
    pub use berth_device::{
        AtomicSlice, DeviceCopy, GridMatrix, Inbox, Matrix, MatrixMut, Outbox, Own, Own2, Packed,
        Packing, PerBlock, Rows, Shared, Signals, Slice, SliceMut, Slot, Tile, TileMut, Tiles,
        Window,
    };
    pub use berth_device::{FastMath, GpuFloat, bf16, f16};
    pub use berth_device::{
        async_copy, block, dynamic_shared, fail, gpu_assert, gpu_or_host, grid, mma, shared_array,
        sync_threads, thread, warp,
    };
    pub use berth_macros::{DeviceCopy, unroll};

    #[cfg(not(target_arch = "nvptx64"))]
    pub use berth_runtime::placement::Touch;
    #[cfg(not(target_arch = "nvptx64"))]
    pub use berth_runtime::{
        DeviceBuffer, Gpu, Grid, InboxBuffer, MappedBuffer, OutboxBuffer, PinnedBuffer,
        SignalBuffer, Stream,
    };
}

/// What `#[gpu_kernel]` expansions refer to. Not a public API: no stability promise.
#[doc(hidden)]
pub mod __private {
    pub use berth_device::{
        AtomicSlice, GridMatrix, Inbox, Outbox, PerBlock, Rows, Signals, Slice, SliceMut, Slot,
        Window,
    };

    pub use berth_abi::param_align;

    /// Tells the optimiser that the launch is one-dimensional, at the top of a kernel's
    /// linear entry: `thread::index()` then compiles to `global_x()` without its test of the
    /// launch's shape, and the y and z extents to the constant 1.
    ///
    /// # Safety
    /// The grid and the block of the running launch extend along x alone (extent 1 along y
    /// and z).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn assume_linear_launch() {
        use berth_device::{block, grid};
        // SAFETY: the caller's contract; one assumption per extent, so that each is a fact
        // the optimiser can use on its own.
        unsafe {
            core::hint::assert_unchecked(grid::dim_y() == 1);
            core::hint::assert_unchecked(grid::dim_z() == 1);
            core::hint::assert_unchecked(block::dim_y() == 1);
            core::hint::assert_unchecked(block::dim_z() == 1);
        }
    }

    /// Tells the optimiser that the launch has extent 1 along z, at the top of a kernel's
    /// planar entry: a thread's and its block's z coordinates are the constant 0, so a guard
    /// such as `if thread::global_z() != 0 { return; }` (which makes a 2D kernel's ownership
    /// of `(x, y)` hold on any grid) and `thread::index_2d()`'s test of the z extents compile
    /// to nothing.
    ///
    /// # Safety
    /// The grid and the block of the running launch have extent 1 along z.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn assume_planar_launch() {
        use berth_device::{block, grid, thread};
        // SAFETY: the caller's contract; a coordinate is below its extent, so with extent 1
        // it is 0.
        unsafe {
            core::hint::assert_unchecked(grid::dim_z() == 1);
            core::hint::assert_unchecked(block::dim_z() == 1);
            core::hint::assert_unchecked(block::idx_z() == 0);
            core::hint::assert_unchecked(thread::idx_z() == 0);
        }
    }

    /// The column count of a `#[matrix(cols = n)]` argument, from the scalar argument `n`.
    #[inline(always)]
    pub fn matrix_cols<C: MatrixCols>(n: C) -> usize {
        n.cols()
    }

    /// The types a `#[matrix(cols = n)]` argument's column count may have.
    #[diagnostic::on_unimplemented(
        message = "the column count of a `#[matrix(cols = ..)]` argument is a `usize` or `u32`, not `{Self}`",
        label = "names an argument of type `{Self}`",
        note = "declare the argument that `#[matrix(cols = n)]` names as `n: usize` or `n: u32`"
    )]
    pub trait MatrixCols {
        /// The count as a `usize`.
        fn cols(self) -> usize;
    }
    impl MatrixCols for usize {
        #[inline(always)]
        fn cols(self) -> usize {
            self
        }
    }
    impl MatrixCols for u32 {
        #[inline(always)]
        fn cols(self) -> usize {
            self as usize
        }
    }

    /// Tells the optimiser what the launcher guarantees of the grid of a kernel that declares
    /// a block of `rank` dimensions (its last extent above 1 is axis `rank`): the grid has
    /// extent 1 along every axis the block does not extend along (z for a 2D block, y and z
    /// for a 1D one). `thread::index_2d()`'s test of the launch's z extents then folds away.
    ///
    /// # Safety
    /// The running launch's grid has extent 1 along every axis past `rank`.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn assume_grid_rank(rank: u32) {
        use berth_device::{block, grid};
        // SAFETY: the caller's contract; one assumption per extent, and a block's coordinate
        // below an extent of 1 is 0.
        unsafe {
            if rank < 3 {
                core::hint::assert_unchecked(grid::dim_z() == 1);
                core::hint::assert_unchecked(block::idx_z() == 0);
            }
            if rank < 2 {
                core::hint::assert_unchecked(grid::dim_y() == 1);
                core::hint::assert_unchecked(block::idx_y() == 0);
            }
        }
    }

    #[cfg(not(target_arch = "nvptx64"))]
    pub use berth_runtime::__private::*;
    #[cfg(not(target_arch = "nvptx64"))]
    pub use berth_runtime::{
        DeviceArg, DeviceBuffer, Gpu, Grid, InboxBuffer, MappedArg, OutboxBuffer, Pending,
        PinnedArg, PipelineOptions, PipelineRun, Queue, Result, RowSource, SignalBuffer,
        placement::Touch,
    };
    #[cfg(not(target_arch = "nvptx64"))]
    pub use inventory;
}
