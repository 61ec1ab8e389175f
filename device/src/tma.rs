//! Bulk tensor copies (the Tensor Memory Accelerator, sm_90): one thread copies a whole 2-D
//! box of a matrix in global memory into a shared tile with one instruction
//! (`cp.async.bulk.tensor.2d`), and the copy completes its bytes on an
//! [mbarrier](crate::mbarrier) that the readers wait on.
//!
//! The copy is described by a [`TensorMap`]: the matrix (its address, rows, columns and row
//! stride), the box copied at a time and the layout it takes in shared memory. The host
//! builds it (berth's runtime: `Gpu::tensor_map`, which calls the driver's
//! `cuTensorMapEncodeTiled` on a GPU) and passes it to the kernel in a `&[TensorMap]`
//! argument; the kernel also takes the matrix itself as a `&[T]` argument, and
//! [`TensorMap::source`] checks, once, that the map describes memory inside that slice and
//! the tile shape the copies write, so a copy ([`load`]) reads only what the launch lends.
//!
//! The destination is a [`SwizzledTile`]: `ROWS` rows of 128 bytes, 1024-byte aligned, in the
//! 128-byte swizzle the copy writes (the 16-byte chunk `c` of row `r` is stored at chunk
//! `c ^ (r % 8)`), which is the layout the tensor cores' matrix descriptors
//! ([`crate::wgmma`]) read without bank conflicts. Its shape is in its type, and a
//! [`TmaSource`] copies only into tiles of the shape it was checked for.
//!
//! # The contract
//!
//! A copy writes the tile's bytes between the call and the completion of the barrier phase
//! it completes on: nothing reads or writes them meanwhile, and a thread reads them (through
//! a descriptor) only after waiting for that phase. [`load`] is `unsafe` for it.
//!
//! # On the simulator
//!
//! The simulator performs the copy when it is issued (the same swizzle, zeros for the
//! rows and columns past the matrix's edge, as the hardware fills them), completes the bytes
//! on the barrier, and records them as in flight until the phase completes: a read of them
//! (through a tensor-core descriptor or a plain read) before that, or by a thread that did not
//! wait for the phase, stops the launch with a report, as do a plain write and a second copy
//! over bytes still in flight.
//!
//! ```
//! use berth_device::tma::{SwizzledTile, TensorMap};
//! // Tiles of 64 rows of 64 `bf16` (128 bytes a row): 8 KiB each.
//! assert_eq!(SwizzledTile::<berth_device::bf16, 64>::BYTES, 8192);
//! assert_eq!(core::mem::size_of::<TensorMap>(), 256);
//! ```

use crate::Shared;
use crate::mbarrier::MBarrier;
use core::marker::PhantomData;
use core::mem::size_of;

/// The description of a 2-D bulk copy (see the [module](self)): the hardware's 128-byte
/// tensor map (`CUtensorMap`, zeros on the simulator) and what the device checks and the
/// simulator performs: the matrix's address and shape, the box and the swizzle.
///
/// Only the host runtime makes one ([`TensorMap::from_parts`] is its `unsafe` constructor).
///
/// ```
/// use berth_device::tma::TensorMap;
/// assert_eq!(core::mem::align_of::<TensorMap>(), 128);
/// ```
#[repr(C, align(128))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    encoded: [u64; 16],
    base: u64,
    row_stride: u64,
    rows: u32,
    cols: u32,
    box_rows: u32,
    box_cols: u32,
    elem_bytes: u32,
    swizzle: u32,
    _pad: [u64; 11],
}

// SAFETY: `#[repr(C)]` of integers with no padding (128 + 16 + 24 + 88 = 256 bytes, a
// multiple of the 128-byte alignment), no references; the address inside is only compared
// with a slice the launch lends ([`load`]), never followed on its own.
unsafe impl crate::DeviceCopy for TensorMap {}

/// The parts of a [`TensorMap`] besides the hardware's encoding.
///
/// ```
/// use berth_device::tma::MapShape;
/// let s = MapShape { rows: 256, cols: 128, row_stride: 128, box_rows: 64, box_cols: 64, elem_bytes: 2, swizzle: 128 };
/// assert_eq!(s.box_bytes(), 8192);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapShape {
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix (elements).
    pub cols: u32,
    /// Elements from one row's start to the next (at least `cols`).
    pub row_stride: u64,
    /// Rows of the box one copy writes.
    pub box_rows: u32,
    /// Columns of the box (elements).
    pub box_cols: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// The shared-memory swizzle in bytes: 0 (none) or 128.
    pub swizzle: u32,
}

impl MapShape {
    /// Bytes one copy writes.
    ///
    /// ```
    /// use berth_device::tma::MapShape;
    /// let s = MapShape { rows: 8, cols: 8, row_stride: 8, box_rows: 8, box_cols: 8, elem_bytes: 4, swizzle: 0 };
    /// assert_eq!(s.box_bytes(), 256);
    /// ```
    #[must_use]
    pub const fn box_bytes(&self) -> u32 {
        self.box_rows * self.box_cols * self.elem_bytes
    }
}

impl TensorMap {
    /// A map from the hardware's encoding and the shape it encodes, for the matrix at `base`.
    ///
    /// # Safety
    /// `encoded` is what `cuTensorMapEncodeTiled` wrote for exactly this matrix, box and
    /// swizzle (or zeros, for the simulator, which reads the shape instead), and `base` is a
    /// global-memory address aligned to 16 bytes.
    ///
    /// ```
    /// use berth_device::tma::{MapShape, TensorMap};
    /// let shape = MapShape { rows: 64, cols: 64, row_stride: 64, box_rows: 64, box_cols: 64, elem_bytes: 2, swizzle: 128 };
    /// let m = vec![0u16; 64 * 64];
    /// // SAFETY: zeros: a map for the simulator, of this matrix.
    /// let map = unsafe { TensorMap::from_parts([0; 16], m.as_ptr() as u64, shape) };
    /// assert_eq!(map.shape(), shape);
    /// ```
    #[must_use]
    pub const unsafe fn from_parts(encoded: [u64; 16], base: u64, shape: MapShape) -> TensorMap {
        TensorMap {
            encoded,
            base,
            row_stride: shape.row_stride,
            rows: shape.rows,
            cols: shape.cols,
            box_rows: shape.box_rows,
            box_cols: shape.box_cols,
            elem_bytes: shape.elem_bytes,
            swizzle: shape.swizzle,
            _pad: [0; 11],
        }
    }

    /// The matrix, box and swizzle the map describes.
    ///
    /// ```
    /// use berth_device::tma::{MapShape, TensorMap};
    /// let shape = MapShape { rows: 8, cols: 64, row_stride: 64, box_rows: 8, box_cols: 64, elem_bytes: 2, swizzle: 128 };
    /// // SAFETY: zeros: a map for the simulator.
    /// let map = unsafe { TensorMap::from_parts([0; 16], 4096, shape) };
    /// assert_eq!(map.shape().box_rows, 8);
    /// ```
    #[must_use]
    pub const fn shape(&self) -> MapShape {
        MapShape {
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            box_rows: self.box_rows,
            box_cols: self.box_cols,
            elem_bytes: self.elem_bytes,
            swizzle: self.swizzle,
        }
    }

    /// The global address of the matrix's first element.
    ///
    /// ```
    /// use berth_device::tma::{MapShape, TensorMap};
    /// let shape = MapShape { rows: 8, cols: 64, row_stride: 64, box_rows: 8, box_cols: 64, elem_bytes: 2, swizzle: 128 };
    /// // SAFETY: zeros: a map for the simulator.
    /// assert_eq!(unsafe { TensorMap::from_parts([0; 16], 4096, shape) }.base(), 4096);
    /// ```
    #[must_use]
    pub const fn base(&self) -> u64 {
        self.base
    }
}

/// A shared tile of `ROWS` rows of 128 bytes (`128 / size_of::<T>()` elements), 1024-byte
/// aligned, in the 128-byte swizzle (see the [module](self)): the destination of [`load`] and
/// the operand the [`crate::wgmma`] descriptors read.
///
/// ```
/// use berth_device::{bf16, tma::SwizzledTile};
/// assert_eq!(SwizzledTile::<bf16, 128>::COLS, 64);
/// // The chunk (8 `bf16`) holding column 9 of row 3 is chunk 1 ^ 3 = 2.
/// assert_eq!(SwizzledTile::<bf16, 128>::offset(3, 9), 3 * 128 + 2 * 16 + 2);
/// ```
pub struct SwizzledTile<T, const ROWS: usize> {
    p: *mut T,
    _t: PhantomData<T>,
}

impl<T, const ROWS: usize> Clone for SwizzledTile<T, ROWS> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize> Copy for SwizzledTile<T, ROWS> {}

impl<T: Copy + Send, const ROWS: usize> SwizzledTile<T, ROWS> {
    /// Elements per row (128 bytes).
    ///
    /// ```
    /// assert_eq!(berth_device::tma::SwizzledTile::<f32, 8>::COLS, 32);
    /// ```
    pub const COLS: usize = 128 / size_of::<T>();
    /// Bytes of the tile.
    ///
    /// ```
    /// assert_eq!(berth_device::tma::SwizzledTile::<u16, 256>::BYTES, 32 * 1024);
    /// ```
    pub const BYTES: usize = ROWS * 128;

    /// The byte offset in the tile of element `(row, col)`: the 16-byte chunk `col / COLS *
    /// 16`… of the row, swizzled by the row's place in its group of eight.
    ///
    /// ```
    /// use berth_device::tma::SwizzledTile;
    /// assert_eq!(SwizzledTile::<f32, 8>::offset(1, 0), 128 + 16); // chunk 0 ^ 1
    /// ```
    #[must_use]
    pub const fn offset(row: usize, col: usize) -> usize {
        let o = row * 128 + col * size_of::<T>();
        o ^ ((o >> 7) & 7) << 4
    }

    /// The tile at element `at` of `region` (a shared array or the dynamic shared memory,
    /// seen as `T`s): `ROWS * COLS` elements from there must be inside it and start 1024-byte
    /// aligned, else the thread stops with a located report. `ROWS` is a multiple of 8.
    ///
    /// ```
    /// use berth_device::{bf16, shared::Shared, tma::SwizzledTile};
    /// #[repr(align(1024))]
    /// struct Backing([bf16; 64 * 64]);
    /// let mut b = Backing([bf16::ZERO; 64 * 64]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let region = unsafe { Shared::from_raw(b.0.as_mut_ptr(), 64 * 64) };
    /// let tile = SwizzledTile::<bf16, 64>::new(region, 0);
    /// assert_eq!(tile.as_ptr(), b.0.as_mut_ptr());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn new(region: Shared<T>, at: usize) -> Self {
        const {
            assert!(
                ROWS.is_multiple_of(8) && ROWS > 0,
                "a swizzled tile has a multiple of 8 rows"
            )
        };
        const { assert!(128 % size_of::<T>() == 0, "elements divide a 128-byte row") };
        let n = ROWS * Self::COLS;
        if at > region.len() || region.len() - at < n {
            crate::panic::index_out_of_bounds(at.saturating_add(n - 1), region.len());
        }
        let p = region.as_ptr().wrapping_add(at);
        if !(p as usize).is_multiple_of(1024) {
            crate::panic::fail("swizzled tile: the tile must start 1024-byte aligned");
        }
        SwizzledTile { p, _t: PhantomData }
    }

    /// The generic address of the tile's first byte.
    ///
    /// ```
    /// use berth_device::{shared::Shared, tma::SwizzledTile};
    /// #[repr(align(1024))]
    /// struct Backing([u32; 8 * 32]);
    /// let mut b = Backing([0; 8 * 32]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let tile = SwizzledTile::<u32, 8>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 256) }, 0);
    /// assert!(!tile.as_ptr().is_null());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_ptr(&self) -> *mut T {
        self.p
    }
}

/// A [`TensorMap`] checked against the `&[T]` it describes and against the tile shape its
/// copies write ([`TensorMap::source`]): what [`load`] copies from, with no check left to do
/// per copy.
///
/// ```
/// use berth_device::{bf16, tma::{MapShape, TensorMap}};
/// let m = vec![bf16::ZERO; 64 * 64];
/// let shape = MapShape { rows: 64, cols: 64, row_stride: 64, box_rows: 64, box_cols: 64, elem_bytes: 2, swizzle: 128 };
/// // SAFETY: zeros: a map for the simulator, of `m`.
/// let map = unsafe { TensorMap::from_parts([0; 16], m.as_ptr() as u64, shape) };
/// let _src = map.source::<bf16, 64>(&m);
/// ```
pub struct TmaSource<'a, T, const ROWS: usize> {
    map: &'a TensorMap,
    src: &'a [T],
}

impl<T, const ROWS: usize> Clone for TmaSource<'_, T, ROWS> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize> Copy for TmaSource<'_, T, ROWS> {}

impl TensorMap {
    /// This map as the source of copies of `src` into [`SwizzledTile<T, ROWS>`]s.
    ///
    /// Checked (a failure stops the thread with a located report): `src` is the matrix the
    /// map describes (its address, and every row inside the slice), the map lies in global
    /// memory (a kernel's `&[TensorMap]` argument), its box is `ROWS` × `COLS` elements of
    /// `T` with the 128-byte swizzle.
    ///
    /// ```should_panic
    /// use berth_device::{bf16, tma::{MapShape, TensorMap}};
    /// let m = vec![bf16::ZERO; 64 * 64];
    /// let shape = MapShape { rows: 64, cols: 64, row_stride: 64, box_rows: 64, box_cols: 64, elem_bytes: 2, swizzle: 128 };
    /// // SAFETY: zeros: a map for the simulator, of `m`.
    /// let map = unsafe { TensorMap::from_parts([0; 16], m.as_ptr() as u64, shape) };
    /// let other = vec![bf16::ZERO; 64 * 64];
    /// let _ = map.source::<bf16, 64>(&other); // not the matrix the map describes
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn source<'a, T: Copy + Send, const ROWS: usize>(
        &'a self,
        src: &'a [T],
    ) -> TmaSource<'a, T, ROWS> {
        let s = self.shape();
        let rows_fit = s.rows == 0
            || (u64::from(s.rows) - 1)
                .checked_mul(s.row_stride)
                .and_then(|x| x.checked_add(u64::from(s.cols)))
                .is_some_and(|end| end <= src.len() as u64);
        if self.base != src.as_ptr() as u64
            || !rows_fit
            || s.row_stride < u64::from(s.cols)
            || s.elem_bytes as usize != size_of::<T>()
        {
            crate::panic::fail(
                "tma: the tensor map does not describe the `&[T]` given (its address, shape or element size)",
            );
        }
        if s.box_rows as usize != ROWS
            || s.box_cols as usize != SwizzledTile::<T, ROWS>::COLS
            || s.swizzle != 128
        {
            crate::panic::fail(
                "tma: the tensor map's box is not the tile's shape (ROWS rows of 128 bytes, 128-byte swizzle)",
            );
        }
        if !crate::async_copy::in_global_memory(self as *const TensorMap) {
            crate::panic::fail(
                "tma: the tensor map is not in global memory (pass it in a kernel's `&[TensorMap]` argument)",
            );
        }
        TmaSource { map: self, src }
    }
}

/// Start copying the box whose top-left element is `(row, col)` of `src`'s matrix into `dst`
/// (`cp.async.bulk.tensor.2d…mbarrier::complete_tx::bytes`), completing its bytes
/// (`SwizzledTile::<T, ROWS>::BYTES`, the zeros past the matrix's edge included) on `bar`.
/// The usual step: [`MBarrier::arrive_expect_tx`] of the bytes of every copy of the stage,
/// then the copies, by one thread. Rows and columns past the matrix's edge are read as zeros.
///
/// # Safety
/// The [module's contract](self#the-contract): nothing touches the tile's bytes until the
/// phase of `bar` that the copy completes in has completed, and a thread reads them only
/// after waiting for it; the bytes announced on `bar` for that phase count this copy's.
///
/// ```
/// use berth_device::{bf16, mbarrier::MBarriers, shared::Shared, shared_array};
/// use berth_device::tma::{self, MapShape, SwizzledTile, TensorMap};
/// // A 16×64 matrix of bf16, copied as two boxes of 8 rows.
/// let m: Vec<bf16> = (0..16 * 64).map(|x| bf16::from_f32(x as f32)).collect();
/// let shape = MapShape { rows: 16, cols: 64, row_stride: 64, box_rows: 8, box_cols: 64, elem_bytes: 2, swizzle: 128 };
/// // SAFETY: zeros: a map for the simulator, of `m`.
/// let map = unsafe { TensorMap::from_parts([0; 16], m.as_ptr() as u64, shape) };
/// #[repr(align(1024))]
/// struct Backing([bf16; 8 * 64]);
/// let mut b = Backing([bf16::ZERO; 8 * 64]);
/// // SAFETY: a host test: one thread; the array outlives the handle.
/// let tile = SwizzledTile::<bf16, 8>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 512) }, 0);
/// // SAFETY: every thread (one) reaches the call; the array is used for nothing else.
/// let bar = unsafe { MBarriers::init(shared_array!(B: [u64; 1]), 1) }.get(0);
/// // SAFETY: one arrival announcing the copy's bytes; nothing touches the tile meanwhile.
/// unsafe {
///     bar.arrive_expect_tx(1024);
///     tma::load(tile, map.source(&m), 8, 0, bar);
/// }
/// bar.wait(0);
/// // Row 8 + 1 of the matrix, column 0, is at chunk 0 ^ 1 of the tile's row 1.
/// assert_eq!(b.0[(128 + 16) / 2].to_f32(), (9 * 64) as f32);
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn load<T: Copy + Send, const ROWS: usize>(
    dst: SwizzledTile<T, ROWS>,
    src: TmaSource<'_, T, ROWS>,
    row: u32,
    col: u32,
    bar: MBarrier,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the map describes global memory inside `src.src`, which the launch lends
        // and nothing writes, with this tile's box and swizzle (`TensorMap::source`); the
        // destination is a whole tile of shared memory, aligned for the swizzle; the barrier
        // is initialised (`MBarrier` exists only after `init`); the rest is the caller's
        // contract. Not `nomem`: the copy writes shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c}, {r}}}], [{b}];",
                d = in(reg32) crate::mbarrier::shared_addr(dst.p),
                m = in(reg64) src.map as *const TensorMap,
                c = in(reg32) col,
                r = in(reg32) row,
                b = in(reg32) bar.addr(),
                options(nostack),
            )
        };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let s = src.map.shape();
        let es = size_of::<T>();
        for r in 0..ROWS {
            for c in 0..SwizzledTile::<T, ROWS>::COLS {
                let (gr, gc) = (u64::from(row) + r as u64, u64::from(col) + c as u64);
                let to = (dst.p as *mut u8).wrapping_add(SwizzledTile::<T, ROWS>::offset(r, c));
                if gr < u64::from(s.rows) && gc < u64::from(s.cols) {
                    let i = (gr * s.row_stride + gc) as usize;
                    // SAFETY: `i` is inside `src` (the map's rows fit it: `TensorMap::source`);
                    // the destination is inside the tile, which the caller's contract keeps
                    // untouched by anyone else.
                    unsafe {
                        core::ptr::copy_nonoverlapping((&raw const src.src[i]).cast::<u8>(), to, es)
                    };
                } else {
                    // SAFETY: as above; the hardware fills the box past the edge with zeros.
                    unsafe { core::ptr::write_bytes(to, 0, es) };
                }
            }
        }
        crate::host::async_proxy(
            crate::host::async_proxy::AsyncOp::Copied {
                bar: bar.addr(),
                dst: dst.p as usize,
                bytes: SwizzledTile::<T, ROWS>::BYTES,
            },
            core::panic::Location::caller(),
        );
    }
}
