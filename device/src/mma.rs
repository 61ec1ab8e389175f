//! Tensor cores: the warp-level matrix multiply-accumulate `mma.sync.aligned.m16n8k16` on
//! typed fragments, and the loads that fill them from shared memory (`ldmatrix`, or plain
//! per-lane reads); TF32 products (m16n8k8) in [`tf32`], 8-bit integer and floating-point
//! ones (m16n8k32) in [`int8`] and [`fp8`].
//!
//! One [`mma`] multiplies a 16×16 matrix A by a 16×8 matrix B and adds a 16×8 matrix C, all
//! spread over the 32 lanes of a warp: each lane holds eight elements of A ([`FragA`]), four
//! of B ([`FragB`]) and four of C and of the result D ([`FragC`], `f32`). The element type
//! of A and B ([`MmaInput`]: [`f16`](struct@crate::f16) or [`bf16`]) is a type parameter of both fragments, and
//! each operand role is its own type, so a B fragment passed as A, or an `f16` fragment
//! multiplied with a `bf16` one, does not compile. Products of two `f16` or two `bf16` are
//! exact in `f32`; the sums are `f32`.
//!
//! Which lane holds which element is the PTX ISA's layout ("Matrix Fragments for
//! `mma.m16n8k16` with floating point type"), which [`FragA::coords`], [`FragB::coords`] and
//! [`FragC::coords`] give: with `g = lane / 4` and `t = lane % 4`, A's element `i` is at row
//! `g + 8 * (i / 2 % 2)`, column `2 * t + i % 2 + 8 * (i / 4)`; B's element `i` at row (k)
//! `2 * t + i % 2 + 8 * (i / 2)`, column (n) `g`; C's element `i` at row `g + 8 * (i / 2)`,
//! column `2 * t + i % 2`.
//!
//! # Warp-wide, and `unsafe` for it
//!
//! [`mma`] and the `ldmatrix` loads are `.sync.aligned` instructions: all 32 lanes of the warp
//! must execute the same call together, and PTX leaves any other case undefined (as a block
//! barrier is). So they are `unsafe`, with that contract; the loads also read shared memory
//! under [the contract of plain accesses](crate::shared#the-contract-of-plain-accesses). The
//! CPU simulator runs them as warp collectives: a warp whose lanes do not all reach the call
//! (one returned, waits elsewhere, or the block ends in a partial warp) stops the launch with
//! a located report, and the loads' shared-memory reads take part in the race and
//! initialisation checks. Outside a simulated launch the warp has one lane, so the calls
//! report that the rest of the warp is missing.
//!
//! On the GPU these need sm_80 or newer (the builder's default target is sm_90).
//!
//! ```
//! use berth_device::f16;
//! use berth_device::mma::{FragA, FragB, FragC};
//! // The fragments a lane holds, built element by element from the layout: here the
//! // identity matrix as A.
//! let a = FragA::from_fn(|r, c| f16::from_f32(if r == c { 1.0 } else { 0.0 }));
//! let b = FragB::from_fn(|k, n| f16::from_f32((k * 8 + n) as f32));
//! let c = FragC::zero();
//! // Lane 0 holds A's (0, 0) as element 0, and B's (k 0, n 0) and (k 1, n 0).
//! assert_eq!((a.get(0).to_f32(), b.get(1).to_f32(), c.get(3)), (1.0, 8.0, 0.0));
//! ```

use crate::Shared;
use crate::{bf16, f16};
use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::f16 {}
    impl Sealed for crate::bf16 {}
}

/// The element types of A and B an [`mma`] multiplies: [`f16`](struct@crate::f16) and [`bf16`] (both with `f32`
/// accumulation).
///
/// ```
/// use berth_device::mma::MmaInput;
/// fn ptx_type<T: MmaInput>() -> &'static str {
///     T::NAME
/// }
/// assert_eq!(ptx_type::<berth_device::bf16>(), "bf16");
/// ```
pub trait MmaInput: Copy + Send + sealed::Sealed + 'static {
    /// The PTX type name (`f16`, `bf16`).
    ///
    /// ```
    /// use berth_device::mma::MmaInput;
    /// assert_eq!(<berth_device::f16 as MmaInput>::NAME, "f16");
    /// ```
    const NAME: &'static str;
    #[doc(hidden)]
    const IS_BF16: bool;
    #[doc(hidden)]
    fn to_bits(self) -> u16;
    #[doc(hidden)]
    fn from_bits(bits: u16) -> Self;
    #[doc(hidden)]
    fn widen(self) -> f32;
    /// `(lo, hi)` rounded to nearest (ties to even) and packed in one register, `lo` in the
    /// low half (`cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32`).
    #[doc(hidden)]
    fn pack_f32s(lo: f32, hi: f32) -> u32;
}

impl MmaInput for f16 {
    const NAME: &'static str = "f16";
    const IS_BF16: bool = false;
    #[inline(always)]
    fn to_bits(self) -> u16 {
        f16::to_bits(self)
    }
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        f16::from_bits(bits)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn pack_f32s(lo: f32, hi: f32) -> u32 {
        crate::half::f16x2::from_f32s(lo, hi).to_bits()
    }
}

impl MmaInput for bf16 {
    const NAME: &'static str = "bf16";
    const IS_BF16: bool = true;
    #[inline(always)]
    fn to_bits(self) -> u16 {
        bf16::to_bits(self)
    }
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        bf16::from_bits(bits)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn pack_f32s(lo: f32, hi: f32) -> u32 {
        crate::half::bf16x2::from_f32s(lo, hi).to_bits()
    }
}

#[inline(always)]
fn pack<T: MmaInput>(lo: T, hi: T) -> u32 {
    u32::from(lo.to_bits()) | u32::from(hi.to_bits()) << 16
}

#[inline(always)]
fn unpack<T: MmaInput>(reg: u32, hi: bool) -> T {
    T::from_bits(if hi { (reg >> 16) as u16 } else { reg as u16 })
}

/// A lane's part of the A operand of [`mma`]: a 16×16 row-major matrix of `T`, eight
/// elements per lane in four 32-bit registers.
///
/// ```
/// use berth_device::{bf16, mma::FragA};
/// let a = FragA::from_fn(|r, c| bf16::from_f32((r * 16 + c) as f32));
/// // Lane 0's element 6 is row 8, column 8.
/// assert_eq!(FragA::<bf16>::coords(0, 6), (8, 8));
/// assert_eq!(a.get(6).to_f32(), 136.0);
/// ```
#[derive(Clone, Copy)]
pub struct FragA<T: MmaInput> {
    regs: [u32; 4],
    _t: PhantomData<T>,
}

/// A lane's part of the B operand of [`mma`]: a 16×8 matrix of `T` (k rows, n columns; PTX
/// calls the layout `.col`), four elements per lane in two 32-bit registers.
///
/// ```
/// use berth_device::{f16, mma::FragB};
/// // Lane 5 holds column 1, rows 2 and 3 (elements 0, 1) and 10, 11 (elements 2, 3).
/// assert_eq!(FragB::<f16>::coords(5, 2), (10, 1));
/// let b = FragB::from_fn(|k, n| f16::from_f32((k + n) as f32));
/// assert_eq!(b.get(3).to_f32(), 9.0); // lane 0: k 9, n 0
/// ```
#[derive(Clone, Copy)]
pub struct FragB<T: MmaInput> {
    regs: [u32; 2],
    _t: PhantomData<T>,
}

/// A lane's part of the C operand and the result D of [`mma`]: a 16×8 matrix of `f32`,
/// four elements per lane.
///
/// ```
/// use berth_device::mma::FragC;
/// let c = FragC::from_fn(|r, c| (r * 8 + c) as f32);
/// // Lane 0: rows 0 and 8, columns 0 and 1.
/// assert_eq!(c.to_array(), [0.0, 1.0, 64.0, 65.0]);
/// assert_eq!(FragC::coords(31, 3), (15, 7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FragC {
    regs: [f32; 4],
}

impl<T: MmaInput> FragA<T> {
    /// The `(row, column)` of element `i` (`0..8`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragA};
    /// assert_eq!(FragA::<f16>::coords(4, 0), (1, 0));
    /// assert_eq!(FragA::<f16>::coords(3, 7), (8, 15));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (g + 8 * (i / 2 % 2), 2 * t + i % 2 + 8 * (i / 4 % 2))
    }

    /// The calling lane's fragment, element `i` being `f(row, column)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragA};
    /// let a = FragA::from_fn(|r, c| f16::from_f32(if r == c { 1.0 } else { 0.0 }));
    /// assert_eq!(a.get(0).to_f32(), 1.0); // lane 0's (0, 0)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> T) -> Self {
        let lane = crate::warp::lane_id();
        let mut e = |i| {
            let (r, c) = Self::coords(lane, i);
            f(r, c)
        };
        let mut regs = [0; 4];
        for (k, reg) in regs.iter_mut().enumerate() {
            *reg = pack(e(2 * k), e(2 * k + 1));
        }
        Self {
            regs,
            _t: PhantomData,
        }
    }

    /// Element `i` (`0..8`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragA};
    /// let a = FragA::from_fn(|r, c| f16::from_f32((r + c) as f32));
    /// assert_eq!(a.get(7).to_f32(), 17.0); // lane 0's element 7: row 8, column 9
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> T {
        unpack(self.regs[i / 2], i % 2 == 1)
    }

    /// Load the calling lane's fragment of the 16×16 block whose top-left element is
    /// `(row, col)` of `tile`, a row-major matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, eight per lane.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// eight elements this lane reads (in practice: the block was written before a barrier
    /// that every lane's call comes after, and is not written until the next).
    ///
    /// ```
    /// use berth_device::{f16, mma::FragA, shared_array};
    /// let tile = shared_array!(T: [f16; 16 * 16]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, f16::from_f32(i as f32)) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let a = unsafe { FragA::load(tile, 16, 0, 0) };
    /// assert_eq!(a.get(4).to_f32(), 8.0); // lane 0, element 4: (0, 8)
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: Shared<T>, stride: usize, row: usize, col: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|r, c| unsafe { tile.read((row + r) * stride + col + c) })
    }

    /// Load the warp's fragments of the 16×16 block whose top-left element is `(row, col)` of
    /// `tile` (row-major, `stride` elements per row) with one `ldmatrix.sync.aligned.x4`:
    /// lane `l` gives the address of row `row + l % 16`, columns `col + 8 * (l / 16)..+8`.
    ///
    /// Every row start must be 16-byte aligned (`stride` and `col` multiples of 8, for a
    /// 16-byte aligned tile); a misaligned or out-of-bounds row stops the launch with a
    /// located report.
    ///
    /// # Safety
    /// - All 32 lanes of the warp reach this call together (`.sync.aligned`).
    /// - The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    ///   whole 16×16 block.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragA, shared_array};
    /// let tile = shared_array!(T: [f16; 16 * 16]);
    /// // Outside a simulated launch the warp has one lane: ldmatrix needs all 32.
    /// // SAFETY: (not met: the report says so) the whole warp reaches the call.
    /// let _ = unsafe { FragA::ldmatrix(tile, 16, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix(tile: Shared<T>, stride: usize, row: usize, col: usize) -> Self {
        let l = crate::warp::lane_id();
        let p = row_address(tile, stride, row + l % 16, col + 8 * (l / 16));
        // SAFETY: `p` is an in-bounds, 16-byte aligned row of the tile (`row_address`); the
        // whole-warp and read contracts are the caller's.
        let regs = unsafe { ldmatrix::<4, false, T>(p) };
        Self {
            regs,
            _t: PhantomData,
        }
    }

    /// [`ldmatrix`](Self::ldmatrix) with each lane naming its own row: lane `l` gives `at`,
    /// the index in `tile` of the first of the eight elements of row `l % 16`, columns
    /// `8 * (l / 16)..+8` of the 16×16 block. For layouts where the rows are not a fixed
    /// stride apart, such as a tile whose 16-byte chunks are permuted (swizzled) per row.
    ///
    /// Each lane's eight elements must be inside the tile and start 16-byte aligned (`at` a
    /// multiple of 8, for a 16-byte aligned tile). The simulator checks this (a lane whose are
    /// not stops the launch with a located report); on the GPU it is the caller's contract,
    /// unchecked, for kernels whose innermost loop would otherwise spend more instructions on
    /// the checks than on the loads.
    ///
    /// # Safety
    /// As [`ldmatrix`](Self::ldmatrix), for the 32 rows the warp names; and every lane's
    /// eight elements are inside `tile` and start 16-byte aligned.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragA, shared_array, warp};
    /// let tile = shared_array!(T: [f16; 16 * 16]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let _ = unsafe { FragA::ldmatrix_at(tile, l % 16 * 16 + 8 * (l / 16)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_at(tile: Shared<T>, at: usize) -> Self {
        // SAFETY: lane `l`'s row is in bounds and 16-byte aligned (the caller's contract,
        // checked on the simulator); the whole-warp and read contracts are the caller's.
        let regs = unsafe { ldmatrix_at::<4, false, T>(tile, at) };
        Self {
            regs,
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragB<T> {
    /// The `(k, n)` (row, column) of element `i` (`0..4`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragB};
    /// assert_eq!(FragB::<f16>::coords(0, 1), (1, 0));
    /// assert_eq!(FragB::<f16>::coords(31, 3), (15, 7));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (2 * t + i % 2 + 8 * (i / 2 % 2), g)
    }

    /// The calling lane's fragment, element `i` being `f(k, n)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// use berth_device::{bf16, mma::FragB};
    /// let b = FragB::from_fn(|k, _| bf16::from_f32(k as f32));
    /// assert_eq!(b.get(2).to_f32(), 8.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> T) -> Self {
        let lane = crate::warp::lane_id();
        let mut e = |i| {
            let (k, n) = Self::coords(lane, i);
            f(k, n)
        };
        let regs = [pack(e(0), e(1)), pack(e(2), e(3))];
        Self {
            regs,
            _t: PhantomData,
        }
    }

    /// Element `i` (`0..4`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragB};
    /// let b = FragB::from_fn(|k, n| f16::from_f32((k * 8 + n) as f32));
    /// assert_eq!(b.get(1).to_f32(), 8.0); // lane 0: (1, 0)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> T {
        unpack(self.regs[i / 2], i % 2 == 1)
    }

    /// Load the calling lane's fragment of the 16×8 block whose top-left element is `(k, n)`
    /// of `tile`, a row-major K×N matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, four per lane.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// four elements this lane reads.
    ///
    /// ```
    /// use berth_device::{f16, mma::FragB, shared_array};
    /// let tile = shared_array!(T: [f16; 16 * 8]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, f16::from_f32(i as f32)) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let b = unsafe { FragB::load(tile, 8, 0, 0) };
    /// assert_eq!(b.get(1).to_f32(), 8.0); // lane 0, element 1: k 1, n 0
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: Shared<T>, stride: usize, k: usize, n: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|kk, nn| unsafe { tile.read((k + kk) * stride + n + nn) })
    }

    /// Load the warp's fragments of the 16×8 block at `(k, n)` of a row-major K×N `tile`
    /// (`stride` elements per row) with one `ldmatrix.sync.aligned.x2.trans`: lane `l < 16`
    /// gives the address of row `k + l`, columns `n..n + 8` (lanes 16.. give the same rows;
    /// the instruction ignores them).
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix`].
    ///
    /// # Safety
    /// As [`FragA::ldmatrix`], for the 16×8 block.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragB, shared_array};
    /// let tile = shared_array!(T: [f16; 16 * 8]);
    /// // Outside a simulated launch the warp has one lane: ldmatrix needs all 32.
    /// // SAFETY: (not met: the report says so) the whole warp reaches the call.
    /// let _ = unsafe { FragB::ldmatrix_trans(tile, 8, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_trans(tile: Shared<T>, stride: usize, k: usize, n: usize) -> Self {
        let l = crate::warp::lane_id();
        let p = row_address(tile, stride, k + l % 16, n);
        // SAFETY: as in `FragA::ldmatrix`.
        let [r0, r1, _, _] = unsafe { ldmatrix::<2, true, T>(p) };
        Self {
            regs: [r0, r1],
            _t: PhantomData,
        }
    }

    /// Load the warp's fragments of the 16×8 block whose k rows are columns `k..k + 16` and
    /// whose n columns are rows `n..n + 8` of `tile`, a row-major N×K matrix (`stride`
    /// elements per row: B stored column-major), with one `ldmatrix.sync.aligned.x2`: lane
    /// `l < 16` gives the address of row `n + l % 8`, columns `k + 8 * (l / 8)..+8` (lanes
    /// 16.. give the same rows; the instruction ignores them).
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix`].
    ///
    /// # Safety
    /// As [`FragA::ldmatrix`], for the 8×16 block.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragB, shared_array};
    /// let tile = shared_array!(T: [f16; 8 * 16]);
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let _ = unsafe { FragB::ldmatrix(tile, 16, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix(tile: Shared<T>, stride: usize, n: usize, k: usize) -> Self {
        let l = crate::warp::lane_id();
        let p = row_address(tile, stride, n + l % 8, k + 8 * (l / 8 % 2));
        // SAFETY: as in `FragA::ldmatrix`.
        let [r0, r1, _, _] = unsafe { ldmatrix::<2, false, T>(p) };
        Self {
            regs: [r0, r1],
            _t: PhantomData,
        }
    }

    /// [`ldmatrix_trans_pair`](Self::ldmatrix_trans_pair) with each lane naming its own row:
    /// lane `l` gives `at`, the index in `tile` of the first of the eight elements of row
    /// (k) `l % 16`, columns (n) `8 * (l / 16)..+8` of the 16×16 block; the result is the
    /// fragments of its columns `0..8` and `8..16`. For swizzled layouts, as
    /// [`FragA::ldmatrix_at`].
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix_at`]: checked on the simulator, the
    /// caller's contract on the GPU.
    ///
    /// # Safety
    /// As [`FragA::ldmatrix_at`].
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragB, shared_array, warp};
    /// let tile = shared_array!(T: [bf16; 16 * 16]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let [_b0, _b1] = unsafe { FragB::ldmatrix_trans_pair_at(tile, l % 16 * 16 + 8 * (l / 16)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_trans_pair_at(tile: Shared<T>, at: usize) -> [Self; 2] {
        // SAFETY: as in `FragA::ldmatrix_at`.
        let [r0, r1, r2, r3] = unsafe { ldmatrix_at::<4, true, T>(tile, at) };
        [
            Self {
                regs: [r0, r1],
                _t: PhantomData,
            },
            Self {
                regs: [r2, r3],
                _t: PhantomData,
            },
        ]
    }

    /// The fragments of two neighbouring 16×8 blocks of B stored N×K (as
    /// [`ldmatrix`](Self::ldmatrix) reads one), with each lane naming its own row in one
    /// `ldmatrix.sync.aligned.x4`: lane `l` gives `at`, the index in `tile` of the first of
    /// the eight elements of row (n) `l % 8 + 8 * (l / 16)`, columns (k) `8 * (l / 8 % 2)..+8`
    /// of the 16×16 block; the result is the fragments of its rows (n) `0..8` and `8..16`.
    /// For the keys of `q · kᵀ` (`k` row-major is `kᵀ` stored N×K) and swizzled layouts.
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix_at`]: checked on the simulator, the
    /// caller's contract on the GPU.
    ///
    /// # Safety
    /// As [`FragA::ldmatrix_at`].
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragB, shared_array, warp};
    /// let tile = shared_array!(T: [bf16; 16 * 16]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let [_b0, _b1] = unsafe { FragB::ldmatrix_pair_at(tile, (l % 8 + 8 * (l / 16)) * 16 + 8 * (l / 8 % 2)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_pair_at(tile: Shared<T>, at: usize) -> [Self; 2] {
        // SAFETY: as in `FragA::ldmatrix_at`.
        let [r0, r1, r2, r3] = unsafe { ldmatrix_at::<4, false, T>(tile, at) };
        [
            Self {
                regs: [r0, r1],
                _t: PhantomData,
            },
            Self {
                regs: [r2, r3],
                _t: PhantomData,
            },
        ]
    }

    /// The fragments of two neighbouring 16×8 blocks, at `(k, n)` and `(k, n + 8)` of a
    /// row-major K×N `tile`, with one `ldmatrix.sync.aligned.x4.trans`: lane `l` gives the
    /// address of row `k + l % 16`, columns `n + 8 * (l / 16)..+8`.
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix`].
    ///
    /// # Safety
    /// As [`FragA::ldmatrix`], for the 16×16 block.
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragB, shared_array};
    /// let tile = shared_array!(T: [bf16; 16 * 16]);
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let [_b0, _b1] = unsafe { FragB::ldmatrix_trans_pair(tile, 16, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_trans_pair(
        tile: Shared<T>,
        stride: usize,
        k: usize,
        n: usize,
    ) -> [Self; 2] {
        let l = crate::warp::lane_id();
        let p = row_address(tile, stride, k + l % 16, n + 8 * (l / 16));
        // SAFETY: as in `FragA::ldmatrix`.
        let [r0, r1, r2, r3] = unsafe { ldmatrix::<4, true, T>(p) };
        [
            Self {
                regs: [r0, r1],
                _t: PhantomData,
            },
            Self {
                regs: [r2, r3],
                _t: PhantomData,
            },
        ]
    }
}

impl FragC {
    /// The `(row, column)` of element `i` (`0..4`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::mma::FragC;
    /// assert_eq!(FragC::coords(5, 2), (9, 2));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (g + 8 * (i / 2 % 2), 2 * t + i % 2)
    }

    /// All zeros: the C of a product without a sum.
    ///
    /// ```
    /// assert_eq!(berth_device::mma::FragC::zero().to_array(), [0.0; 4]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn zero() -> Self {
        Self { regs: [0.0; 4] }
    }

    /// The calling lane's fragment, element `i` being `f(row, column)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// let c = berth_device::mma::FragC::from_fn(|r, _| r as f32);
    /// assert_eq!(c.to_array(), [0.0, 0.0, 8.0, 8.0]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let lane = crate::warp::lane_id();
        Self {
            regs: core::array::from_fn(|i| {
                let (r, c) = Self::coords(lane, i);
                f(r, c)
            }),
        }
    }

    /// Element `i` (`0..4`) of the calling lane's fragment.
    ///
    /// ```
    /// let c = berth_device::mma::FragC::from_fn(|_, c| c as f32);
    /// assert_eq!(c.get(1), 1.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> f32 {
        self.regs[i]
    }

    /// The calling lane's four elements, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// assert_eq!(berth_device::mma::FragC::zero().to_array().len(), 4);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn to_array(self) -> [f32; 4] {
        self.regs
    }

    /// The fragment holding these four elements (in [`coords`](Self::coords) order).
    ///
    /// ```
    /// use berth_device::mma::FragC;
    /// assert_eq!(FragC::from_array([1.0, 2.0, 3.0, 4.0]).get(2), 3.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn from_array(regs: [f32; 4]) -> Self {
        Self { regs }
    }
}

impl FragC {
    /// Round the warp's 16×8 block to `T` and store it with its top-left element at
    /// `(row, col)` of `tile` (row-major, `stride` elements per row) with one
    /// `stmatrix.sync.aligned.m8n8.x2.shared.b16`: lane `l` gives the address of row
    /// `row + l % 16`, columns `col..col + 8` (the instruction reads the addresses of lanes
    /// 0–15). The usual epilogue of a tile computed by [`mma`]: the results into shared memory
    /// as 16-bit values, from where whole rows go out together.
    ///
    /// Every row start must be 16-byte aligned (`stride` and `col` multiples of 8, for a
    /// 16-byte aligned tile); a misaligned or out-of-bounds row stops the launch with a
    /// located report. Rounding is to nearest, ties to even, as
    /// [`f16::from_f32`](crate::f16::from_f32) and [`bf16::from_f32`](crate::bf16::from_f32).
    ///
    /// On the GPU this needs sm_90 (`stmatrix`); the builder's default target is sm_90.
    ///
    /// # Safety
    /// - All 32 lanes of the warp reach this call together (`.sync.aligned`).
    /// - The [contract of plain writes](crate::shared#the-contract-of-plain-accesses) for the
    ///   whole 16×8 block: no other thread reads or writes it until a barrier orders them.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragC, shared_array};
    /// let tile = shared_array!(T: [f16; 16 * 8]);
    /// // Outside a simulated launch the warp has one lane: stmatrix needs all 32.
    /// // SAFETY: (not met: the report says so) the whole warp reaches the call.
    /// unsafe { FragC::zero().stmatrix(tile, 8, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix<T: MmaInput>(
        self,
        tile: Shared<T>,
        stride: usize,
        row: usize,
        col: usize,
    ) {
        let l = crate::warp::lane_id();
        // SAFETY: the caller's contract.
        unsafe { store_strided::<2, false, T>(tile, stride, row + l % 16, col, self.packed::<T>()) }
    }

    /// [`stmatrix`](Self::stmatrix) with each lane naming its own row: lane `l` gives `at`,
    /// the index in `tile` of the first of the eight elements of row `l % 16` of the 16×8
    /// block. For layouts where the rows are not a fixed stride apart, such as a tile whose
    /// 16-byte chunks are permuted (swizzled) per row.
    ///
    /// Each lane's eight elements must be inside the tile and start 16-byte aligned (`at` a
    /// multiple of 8, for a 16-byte aligned tile). The simulator checks this (a lane whose are
    /// not stops the launch with a located report); on the GPU it is the caller's contract,
    /// unchecked.
    ///
    /// # Safety
    /// As [`stmatrix`](Self::stmatrix), for the 16 rows the warp names; and every lane's
    /// eight elements are inside `tile` and start 16-byte aligned.
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragC, shared_array, warp};
    /// let tile = shared_array!(T: [bf16; 16 * 8]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// unsafe { FragC::zero().stmatrix_at(tile, l % 16 * 8) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_at<T: MmaInput>(self, tile: Shared<T>, at: usize) {
        // SAFETY: the caller's contract.
        unsafe { store_matrices::<2, false, T>(tile, at, self.packed::<T>()) }
    }

    /// Round the warp's 16×8 block to `T` and store its transpose, an 8×16 block, with its
    /// top-left element at `(row, col)` of `tile` (row-major, `stride` elements per row):
    /// element `(r, c)` of the block at `(row + c, col + r)`, with one
    /// `stmatrix.sync.aligned.m8n8.x2.trans.shared.b16`. Lane `l` gives the address of row
    /// `row + l % 8`, columns `col + 8 * (l / 8 % 2)` onwards (the instruction reads the
    /// addresses of lanes 0–15). For a result stored column-major, or an operand the next
    /// product reads the other way round.
    ///
    /// Alignment, checks and rounding as [`stmatrix`](Self::stmatrix).
    ///
    /// # Safety
    /// As [`stmatrix`](Self::stmatrix), for the 8×16 block written.
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragC, shared_array};
    /// let tile = shared_array!(T: [f16; 8 * 16]);
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// unsafe { FragC::zero().stmatrix_trans(tile, 16, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_trans<T: MmaInput>(
        self,
        tile: Shared<T>,
        stride: usize,
        row: usize,
        col: usize,
    ) {
        let l = crate::warp::lane_id();
        let (r, c) = (row + l % 8, col + 8 * (l / 8 % 2));
        // SAFETY: the caller's contract.
        unsafe { store_strided::<2, true, T>(tile, stride, r, c, self.packed::<T>()) }
    }

    /// [`stmatrix_trans`](Self::stmatrix_trans) with each lane naming its own row: lane `l`
    /// gives `at`, the index in `tile` of the first of the eight elements of row `l % 8`,
    /// columns `8 * (l / 8 % 2)` onwards, of the stored 8×16 block (elements `l % 8` of the
    /// block's column, rows `8 * (l / 8 % 2)` onwards).
    ///
    /// # Safety
    /// As [`stmatrix_at`](Self::stmatrix_at).
    ///
    /// ```should_panic
    /// use berth_device::{f16, mma::FragC, shared_array, warp};
    /// let tile = shared_array!(T: [f16; 8 * 16]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// unsafe { FragC::zero().stmatrix_trans_at(tile, l % 8 * 16 + l / 8 % 2 * 8) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_trans_at<T: MmaInput>(self, tile: Shared<T>, at: usize) {
        // SAFETY: the caller's contract.
        unsafe { store_matrices::<2, true, T>(tile, at, self.packed::<T>()) }
    }

    /// Round the warp's 16×16 block held as two 16×8 halves (`pair[0]` columns 0–7,
    /// `pair[1]` columns 8–15: two products of [`mma`] side by side) to `T` and store it with
    /// its top-left element at `(row, col)` of `tile` (row-major, `stride` elements per row)
    /// with one `stmatrix.sync.aligned.m8n8.x4.shared.b16`, half the instructions of two
    /// [`stmatrix`](Self::stmatrix) calls. Lane `l` gives the address of row `row + l % 16`,
    /// columns `col + 8 * (l / 16)` onwards.
    ///
    /// Alignment, checks and rounding as [`stmatrix`](Self::stmatrix).
    ///
    /// # Safety
    /// As [`stmatrix`](Self::stmatrix), for the 16×16 block written.
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragC, shared_array};
    /// let tile = shared_array!(T: [bf16; 16 * 16]);
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// unsafe { FragC::stmatrix_pair([FragC::zero(); 2], tile, 16, 0, 0) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_pair<T: MmaInput>(
        pair: [Self; 2],
        tile: Shared<T>,
        stride: usize,
        row: usize,
        col: usize,
    ) {
        let l = crate::warp::lane_id();
        let ([a0, a1], [b0, b1]) = (pair[0].packed::<T>(), pair[1].packed::<T>());
        let (r, c) = (row + l % 16, col + 8 * (l / 16));
        // SAFETY: the caller's contract.
        unsafe { store_strided::<4, false, T>(tile, stride, r, c, [a0, a1, b0, b1]) }
    }

    /// [`stmatrix_pair`](Self::stmatrix_pair) with each lane naming its own row: lane `l`
    /// gives `at`, the index in `tile` of the first of the eight elements of row `l % 16`,
    /// columns `8 * (l / 16)` onwards, of the 16×16 block.
    ///
    /// # Safety
    /// As [`stmatrix_at`](Self::stmatrix_at), for the 32 rows the warp names.
    ///
    /// ```should_panic
    /// use berth_device::{bf16, mma::FragC, shared_array, warp};
    /// let tile = shared_array!(T: [bf16; 16 * 16]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// unsafe { FragC::stmatrix_pair_at([FragC::zero(); 2], tile, l % 16 * 16 + l / 16 * 8) };
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn stmatrix_pair_at<T: MmaInput>(pair: [Self; 2], tile: Shared<T>, at: usize) {
        let ([a0, a1], [b0, b1]) = (pair[0].packed::<T>(), pair[1].packed::<T>());
        // SAFETY: the caller's contract.
        unsafe { store_matrices::<4, false, T>(tile, at, [a0, a1, b0, b1]) }
    }

    /// The fragment rounded to `T`, as the two registers of `stmatrix`: register 0 holds row
    /// `g` (columns `2t`, `2t + 1`) of rows 0–7, register 1 the same of rows 8–15; each is one
    /// 8×8 matrix in `stmatrix`'s layout.
    #[inline(always)]
    fn packed<T: MmaInput>(self) -> [u32; 2] {
        let [c0, c1, c2, c3] = self.regs;
        [T::pack_f32s(c0, c1), T::pack_f32s(c2, c3)]
    }
}

/// [`store_matrices`] with this lane's row at row `row`, column `col` of `tile` (row-major,
/// `stride` elements per row), checked in bounds and 16-byte aligned on the GPU too (the
/// stride forms keep their checks; the simulator's are in `store_matrices`).
///
/// # Safety
/// The whole warp reaches the call together; the write contract holds for every row the
/// warp names.
#[inline(always)]
#[track_caller]
unsafe fn store_strided<const N: usize, const TRANS: bool, T: Copy + Send>(
    tile: Shared<T>,
    stride: usize,
    row: usize,
    col: usize,
    regs: [u32; N],
) {
    #[cfg(target_arch = "nvptx64")]
    checked_row::<true, T>(tile, stride, row, col);
    // SAFETY: the row is checked in bounds and aligned (above on the GPU, by
    // `store_matrices` on the simulator); the rest is the caller's contract.
    unsafe { store_matrices::<N, TRANS, T>(tile, row * stride + col, regs) }
}

/// `stmatrix.sync.aligned.m8n8.xN[.trans].shared.b16` of the registers `regs` (one 8×8
/// matrix each) with this lane's row at element `at` of `tile`: on the simulator after the
/// checks of [`row_address`]; on the GPU without them, from the 32-bit shared address of the
/// tile plus the offset.
///
/// # Safety
/// Element `at` starts 16 in-bounds bytes of `tile`, 16-byte aligned; the whole warp reaches
/// the call together; the write contract holds for every row the warp names.
#[inline(always)]
#[track_caller]
unsafe fn store_matrices<const N: usize, const TRANS: bool, T: Copy + Send>(
    tile: Shared<T>,
    at: usize,
    regs: [u32; N],
) {
    const {
        assert!(
            N == 2 || N == 4,
            "stmatrix stores two or four matrices here"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    {
        let a = crate::async_copy::shared_address(tile.as_ptr())
            .wrapping_add((at * core::mem::size_of::<T>()) as u32);
        let r = |i: usize| regs[i % N];
        macro_rules! st {
            ($ins:literal, 2) => {
                // SAFETY: the caller's contract: `a` is an aligned row in shared memory, the
                // whole warp is here, and no other thread touches the rows meanwhile.
                unsafe {
                    core::arch::asm!($ins, a = in(reg32) a, r0 = in(reg32) r(0),
                        r1 = in(reg32) r(1), options(nostack))
                }
            };
            ($ins:literal, 4) => {
                // SAFETY: as above.
                unsafe {
                    core::arch::asm!($ins, a = in(reg32) a, r0 = in(reg32) r(0),
                        r1 = in(reg32) r(1), r2 = in(reg32) r(2), r3 = in(reg32) r(3),
                        options(nostack))
                }
            };
        }
        match (N, TRANS) {
            (2, false) => st!(
                "stmatrix.sync.aligned.m8n8.x2.shared.b16 [{a}], {{{r0}, {r1}}};",
                2
            ),
            (2, true) => st!(
                "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [{a}], {{{r0}, {r1}}};",
                2
            ),
            (_, false) => st!(
                "stmatrix.sync.aligned.m8n8.x4.shared.b16 [{a}], {{{r0}, {r1}, {r2}, {r3}}};",
                4
            ),
            (_, true) => st!(
                "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{a}], {{{r0}, {r1}, {r2}, {r3}}};",
                4
            ),
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let p = checked_row::<true, T>(tile, 0, 0, at);
        let mut all = [0u32; 4];
        all[..N].copy_from_slice(&regs);
        // SAFETY: `p` is checked in bounds and aligned; the rest is the caller's contract.
        unsafe {
            host::stmatrix(
                p.cast_mut().cast(),
                TRANS,
                all,
                N,
                core::panic::Location::caller(),
            );
        }
    }
}

/// `a × b + c`, by the warp (`mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.f32`): each
/// lane gives its fragments and gets its part of the 16×8 result.
///
/// # Safety
/// All 32 lanes of the warp reach this call together (`.sync.aligned`; the simulator reports
/// a warp that does not).
///
/// ```should_panic
/// use berth_device::{f16, mma::{self, FragA, FragB, FragC}};
/// let a = FragA::from_fn(|_, _| f16::from_f32(1.0));
/// let b = FragB::from_fn(|_, _| f16::from_f32(2.0));
/// // In a simulated launch every element of the result is 16 × 2 = 32. Outside one the
/// // warp has a single lane, which the report says.
/// // SAFETY: (not met here) all 32 lanes of the warp reach the call.
/// let d = unsafe { mma::mma(a, b, FragC::zero()) };
/// assert_eq!(d.to_array(), [32.0; 4]);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub unsafe fn mma<T: MmaInput>(a: FragA<T>, b: FragB<T>, c: FragC) -> FragC {
    #[cfg(target_arch = "nvptx64")]
    {
        let [a0, a1, a2, a3] = a.regs;
        let [b0, b1] = b.regs;
        let [c0, c1, c2, c3] = c.regs;
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        macro_rules! mma_asm {
            ($ty:literal) => {
                // SAFETY: mma.sync reads and writes registers only; the caller has the whole
                // warp reach it together.
                unsafe {
                    core::arch::asm!(
                        concat!(
                            "mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 ",
                            "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                            "{{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"
                        ),
                        d0 = out(reg32) d0, d1 = out(reg32) d1,
                        d2 = out(reg32) d2, d3 = out(reg32) d3,
                        a0 = in(reg32) a0, a1 = in(reg32) a1,
                        a2 = in(reg32) a2, a3 = in(reg32) a3,
                        b0 = in(reg32) b0, b1 = in(reg32) b1,
                        c0 = in(reg32) c0, c1 = in(reg32) c1,
                        c2 = in(reg32) c2, c3 = in(reg32) c3,
                        options(nomem, nostack),
                    )
                }
            };
        }
        if T::IS_BF16 {
            mma_asm!("bf16");
        } else {
            mma_asm!("f16");
        }
        FragC {
            regs: [d0, d1, d2, d3],
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        FragC {
            regs: host::mma(
                a.regs,
                b.regs,
                c.regs,
                |bits| T::from_bits(bits).widen(),
                core::panic::Location::caller(),
            ),
        }
    }
}

/// The generic address of row `row`, column `col` of `tile` (row-major, `stride` per row),
/// after checking that the row's 16 bytes (eight 2-byte elements, sixteen 1-byte, four
/// 4-byte) are inside the tile and start 16-byte aligned, as `ldmatrix` needs.
#[inline(always)]
#[track_caller]
pub(crate) fn row_address<T: Copy + Send>(
    tile: Shared<T>,
    stride: usize,
    row: usize,
    col: usize,
) -> *const T {
    checked_row::<false, T>(tile, stride, row, col)
}

/// [`row_address`] for a load (`STORE` false: `ldmatrix`) or a store (`stmatrix`), whose
/// reports name it.
#[inline(always)]
#[track_caller]
fn checked_row<const STORE: bool, T: Copy + Send>(
    tile: Shared<T>,
    stride: usize,
    row: usize,
    col: usize,
) -> *const T {
    let first = row * stride + col;
    if first + 16 / core::mem::size_of::<T>() > tile.len() {
        crate::panic::fail(if STORE {
            "stmatrix: a row of the block is outside the shared tile"
        } else {
            "ldmatrix: a row of the block is outside the shared tile"
        });
    }
    let p = tile.as_ptr().wrapping_add(first);
    if !(p as usize).is_multiple_of(16) {
        crate::panic::fail(if STORE {
            "stmatrix: a row of the block is not 16-byte aligned (the stride and column must put every row at a multiple of 16 bytes)"
        } else {
            "ldmatrix: a row of the block is not 16-byte aligned (the stride and column must put every row at a multiple of 16 bytes)"
        });
    }
    p
}

/// `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` with this lane's row at element `at`
/// of `tile`: on the simulator after the checks of [`row_address`]; on the GPU without them,
/// from the 32-bit shared address of the tile (computed once) plus the offset.
///
/// # Safety
/// Element `at` starts 16 in-bounds bytes of `tile`, 16-byte aligned; the whole warp
/// reaches the call together; the read contract holds for every row the warp names.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn ldmatrix_at<const N: usize, const TRANS: bool, T: Copy + Send>(
    tile: Shared<T>,
    at: usize,
) -> [u32; 4] {
    const { assert!(N == 4, "the lane-addressed loads are `.x4`") };
    #[cfg(target_arch = "nvptx64")]
    {
        let a = crate::async_copy::shared_address(tile.as_ptr())
            .wrapping_add((at * core::mem::size_of::<T>()) as u32);
        let mut r = [0u32; 4];
        macro_rules! ld {
            ($ins:literal) => {
                // SAFETY: the caller's contract: `a` is an aligned row in shared memory, the
                // whole warp is here, and the rows are not being written.
                unsafe {
                    core::arch::asm!(
                        $ins,
                        a = in(reg32) a,
                        r0 = out(reg32) r[0],
                        r1 = out(reg32) r[1],
                        r2 = out(reg32) r[2],
                        r3 = out(reg32) r[3],
                        options(readonly, nostack),
                    )
                }
            };
        }
        if TRANS {
            ld!(
                "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];"
            );
        } else {
            ld!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];");
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let p = row_address(tile, 0, 0, at);
        // SAFETY: `p` is checked in bounds and aligned; the rest is the caller's contract.
        unsafe { ldmatrix::<N, TRANS, T>(p) }
    }
}

/// `ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16` from this lane's row address `p`; the
/// first `N` registers of the result are loaded.
///
/// # Safety
/// `p` is a 16-byte aligned address of eight elements inside block-shared memory; the whole
/// warp reaches the call together; the read contract holds for every row the warp names.
#[inline(always)]
#[track_caller]
unsafe fn ldmatrix<const N: usize, const TRANS: bool, T>(p: *const T) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut r = [0u32; 4];
        macro_rules! ld {
            ($ins:literal, $($reg:ident = $i:literal),+) => {
                // SAFETY: the caller's contract: `p` is an aligned row in shared memory, the
                // whole warp is here, and the rows are not being written.
                unsafe {
                    core::arch::asm!(
                        "{{",
                        ".reg .u64 %berth_s;",
                        "cvta.to.shared.u64 %berth_s, {p};",
                        $ins,
                        "}}",
                        p = in(reg64) p,
                        $($reg = out(reg32) r[$i],)+
                        options(readonly, nostack),
                    )
                }
            };
        }
        match (N, TRANS) {
            (4, false) => ld!(
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [%berth_s];",
                r0 = 0,
                r1 = 1,
                r2 = 2,
                r3 = 3
            ),
            (4, true) => ld!(
                "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [%berth_s];",
                r0 = 0,
                r1 = 1,
                r2 = 2,
                r3 = 3
            ),
            (2, false) => ld!(
                "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{r0}, {r1}}}, [%berth_s];",
                r0 = 0,
                r1 = 1
            ),
            _ => ld!(
                "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{r0}, {r1}}}, [%berth_s];",
                r0 = 0,
                r1 = 1
            ),
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded from the caller.
        unsafe { host::ldmatrix(p.cast(), N, TRANS, core::panic::Location::caller()) }
    }
}

pub mod fp8;
#[cfg(not(target_arch = "nvptx64"))]
mod host;
pub mod int8;
pub mod m16n8k32;
pub mod tf32;
