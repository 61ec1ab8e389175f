//! The A and B fragments of the m16n8k32 products, whose elements are 8 bits wide: 8-bit
//! integers ([`super::int8`]) and 8-bit floats ([`super::fp8`]) share the layout, so they
//! share these types, each product taking the element types it multiplies.
//!
//! ```
//! use berth_device::F8E4M3;
//! use berth_device::mma::m16n8k32::{FragA, FragB};
//! let a = FragA::from_fn(|r, _| r as i8);
//! let b = FragB::from_fn(|k, _| F8E4M3::from_f32(k as f32));
//! assert_eq!(a.get(4), 8); // lane 0, element 4: row 8
//! assert_eq!(b.get(4).to_f32(), 16.0); // lane 0, element 4: k 16
//! ```

use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i8 {}
    impl Sealed for u8 {}
    impl Sealed for crate::F8E4M3 {}
    impl Sealed for crate::F8E5M2 {}
}

/// An element of an 8-bit A or B fragment: [`i8`], [`u8`], [`F8E4M3`](crate::F8E4M3) or
/// [`F8E5M2`](crate::F8E5M2). Sealed; the products bound their operands by
/// [`Int8`](super::int8::Int8) or [`Fp8`](super::fp8::Fp8).
///
/// ```
/// use berth_device::mma::m16n8k32::{Elem8, FragA};
/// // Code over any 8-bit fragment: lane 0's element 8 is row 0, column 16.
/// fn first_of_second_half<T: Elem8>(a: &FragA<T>) -> T {
///     a.get(8)
/// }
/// assert_eq!(first_of_second_half(&FragA::from_fn(|_, c| c as u8)), 16);
/// ```
pub trait Elem8: Copy + Send + sealed::Sealed + 'static {
    #[doc(hidden)]
    fn to_byte(self) -> u8;
    #[doc(hidden)]
    fn from_byte(b: u8) -> Self;
}

impl Elem8 for i8 {
    #[inline(always)]
    fn to_byte(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        b as i8
    }
}

impl Elem8 for u8 {
    #[inline(always)]
    fn to_byte(self) -> u8 {
        self
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        b
    }
}

impl Elem8 for crate::F8E4M3 {
    #[inline(always)]
    fn to_byte(self) -> u8 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        Self::from_bits(b)
    }
}

impl Elem8 for crate::F8E5M2 {
    #[inline(always)]
    fn to_byte(self) -> u8 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        Self::from_bits(b)
    }
}

/// The register of four elements `e(4 r)..e(4 r + 4)`, the first in the low byte.
#[inline(always)]
fn pack<T: Elem8>(mut e: impl FnMut(usize) -> T, r: usize) -> u32 {
    u32::from_le_bytes(core::array::from_fn(|j| e(4 * r + j).to_byte()))
}

/// A lane's part of the A operand of an 8-bit product ([`int8::mma`](super::int8::mma),
/// [`fp8::mma`](super::fp8::mma)): a 16×32 row-major matrix of `T`, sixteen
/// elements per lane in four 32-bit registers.
///
/// ```
/// use berth_device::mma::m16n8k32::FragA;
/// assert_eq!(FragA::<i8>::coords(6, 13), (9, 25));
/// let a = FragA::from_fn(|r, c| (r * 32 + c) as u8);
/// assert_eq!(a.get(4), 0); // lane 0: row 8, column 0 (256 as u8)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragA<T: Elem8> {
    pub(super) regs: [u32; 4],
    _t: PhantomData<T>,
}

/// A lane's part of the B operand of an 8-bit product ([`int8::mma`](super::int8::mma),
/// [`fp8::mma`](super::fp8::mma)): a 32×8 matrix of `T` (k rows, n columns;
/// PTX's `.col`), eight elements per lane in two 32-bit registers.
///
/// ```
/// use berth_device::mma::m16n8k32::FragB;
/// assert_eq!(FragB::<u8>::coords(6, 5), (25, 1));
/// let b = FragB::from_fn(|k, _| k as i8);
/// assert_eq!(b.get(7), 19); // lane 0: k 19, n 0
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragB<T: Elem8> {
    pub(super) regs: [u32; 2],
    _t: PhantomData<T>,
}

impl<T: Elem8> FragA<T> {
    /// The `(row, column)` of element `i` (`0..16`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragA;
    /// assert_eq!(FragA::<i8>::coords(0, 4), (8, 0));
    /// assert_eq!(FragA::<i8>::coords(31, 15), (15, 31));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (g + 8 * (i / 4 % 2), 4 * t + i % 4 + 16 * (i / 8 % 2))
    }

    /// The calling lane's fragment, element `i` being `f(row, column)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragA;
    /// let a = FragA::from_fn(|r, c| if r == c { 1i8 } else { 0 });
    /// assert_eq!(a.get(0), 1); // lane 0's (0, 0)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> T) -> Self {
        let lane = crate::warp::lane_id();
        let mut e = |i| {
            let (r, c) = Self::coords(lane, i);
            f(r, c)
        };
        Self {
            regs: core::array::from_fn(|r| pack(&mut e, r)),
            _t: PhantomData,
        }
    }

    /// Element `i` (`0..16`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragA;
    /// assert_eq!(FragA::from_fn(|r, _| r as u8).get(5), 8); // lane 0: row 8
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> T {
        T::from_byte(self.regs[i / 4].to_le_bytes()[i % 4])
    }

    /// Load the calling lane's fragment of the 16×32 block whose top-left element is
    /// `(row, col)` of `tile`, a row-major matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, sixteen per lane.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// sixteen elements this lane reads.
    ///
    /// ```
    /// use berth_device::{mma::m16n8k32::FragA, shared_array};
    /// let tile = shared_array!(T: [i8; 16 * 32]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, (i % 100) as i8) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let a = unsafe { FragA::load(tile, 32, 0, 0) };
    /// assert_eq!(a.get(8), 16); // lane 0, element 8: (0, 16)
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: crate::Shared<T>, stride: usize, row: usize, col: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|r, c| unsafe { tile.read((row + r) * stride + col + c) })
    }

    /// Load the warp's fragments of the 16×32 block with one `ldmatrix.sync.aligned.x4`,
    /// each lane naming its own row: lane `l` gives `at`, the index in `tile` of the first
    /// of the sixteen elements of row `l % 16`, columns `16 (l / 16)..+16` of the block (the
    /// same 16-byte rows as [`mma::FragA::ldmatrix_at`](super::FragA::ldmatrix_at) names
    /// for a 16×16 block of 2-byte elements).
    ///
    /// Each lane's sixteen elements must be inside the tile and start 16-byte aligned (`at`
    /// a multiple of 16, for a 16-byte aligned tile): checked on the simulator (a lane whose
    /// are not stops the launch with a located report), the caller's contract on the GPU.
    ///
    /// # Safety
    /// - All 32 lanes of the warp reach this call together (`.sync.aligned`).
    /// - Every lane's sixteen elements are inside `tile` and start 16-byte aligned.
    /// - The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    ///   whole block.
    ///
    /// ```should_panic
    /// use berth_device::{mma::m16n8k32::FragA, shared_array, warp};
    /// let tile = shared_array!(T: [i8; 16 * 32]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let _ = unsafe { FragA::ldmatrix_at(tile, l % 16 * 32 + 16 * (l / 16)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_at(tile: crate::Shared<T>, at: usize) -> Self {
        // SAFETY: lane `l`'s 16 bytes are in bounds and 16-byte aligned (the caller's
        // contract, checked on the simulator); the whole-warp and read contracts are the
        // caller's.
        let regs = unsafe { super::ldmatrix_at::<4, false, T>(tile, at) };
        Self {
            regs,
            _t: PhantomData,
        }
    }
}

impl<T: Elem8> FragB<T> {
    /// The `(k, n)` (row, column) of element `i` (`0..8`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragB;
    /// assert_eq!(FragB::<i8>::coords(0, 4), (16, 0));
    /// assert_eq!(FragB::<i8>::coords(31, 7), (31, 7));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (4 * t + i % 4 + 16 * (i / 4 % 2), g)
    }

    /// The calling lane's fragment, element `i` being `f(k, n)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragB;
    /// assert_eq!(FragB::from_fn(|k, _| k as u8).get(3), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> T) -> Self {
        let lane = crate::warp::lane_id();
        let mut e = |i| {
            let (k, n) = Self::coords(lane, i);
            f(k, n)
        };
        Self {
            regs: core::array::from_fn(|r| pack(&mut e, r)),
            _t: PhantomData,
        }
    }

    /// Element `i` (`0..8`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::mma::m16n8k32::FragB;
    /// assert_eq!(FragB::from_fn(|k, n| (k + n) as i8).get(4), 16);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> T {
        T::from_byte(self.regs[i / 4].to_le_bytes()[i % 4])
    }

    /// Load the calling lane's fragment of the 32×8 block whose top-left element is `(k, n)`
    /// of `tile`, a row-major K×N matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, eight per lane.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// eight elements this lane reads.
    ///
    /// ```
    /// use berth_device::{mma::m16n8k32::FragB, shared_array};
    /// let tile = shared_array!(T: [u8; 32 * 8]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, i as u8) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let b = unsafe { FragB::load(tile, 8, 0, 0) };
    /// assert_eq!(b.get(1), 8); // lane 0, element 1: k 1, n 0
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: crate::Shared<T>, stride: usize, k: usize, n: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|kk, nn| unsafe { tile.read((k + kk) * stride + n + nn) })
    }

    /// Load the fragments of two neighbouring 32×8 blocks of B stored N×K (rows n, columns
    /// k: a row-major `n × k` matrix), n `0..8` and `8..16` of a 16×32 block, with one
    /// `ldmatrix.sync.aligned.x4`, each lane naming its own row: lane `l` gives `at`, the
    /// index in `tile` of the first of the sixteen elements of row (n) `l % 8 + 8 (l / 16)`,
    /// columns (k) `16 (l / 8 % 2)..+16` (the same 16-byte rows as
    /// [`mma::FragB::ldmatrix_pair_at`](super::FragB::ldmatrix_pair_at) names for 2-byte
    /// elements).
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix_at`]: checked on the simulator, the
    /// caller's contract on the GPU.
    ///
    /// # Safety
    /// As [`FragA::ldmatrix_at`].
    ///
    /// ```should_panic
    /// use berth_device::{mma::m16n8k32::FragB, shared_array, warp};
    /// let tile = shared_array!(T: [u8; 16 * 32]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let [_b0, _b1] =
    ///     unsafe { FragB::ldmatrix_pair_at(tile, (l % 8 + 8 * (l / 16)) * 32 + 16 * (l / 8 % 2)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_pair_at(tile: crate::Shared<T>, at: usize) -> [Self; 2] {
        // SAFETY: as in `FragA::ldmatrix_at`.
        let [r0, r1, r2, r3] = unsafe { super::ldmatrix_at::<4, false, T>(tile, at) };
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
