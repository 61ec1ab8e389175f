//! TF32 tensor-core products: `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`, A 16×8
//! and B 8×8 of TF32 (an `f32` whose significand is cut to 10 explicit bits), C and D 16×8
//! `f32` in the same [`FragC`] as the 16-bit products.
//!
//! The fragments round their `f32` elements to TF32 as they are built (to nearest, ties away
//! from zero: PTX's `cvt.rna.tf32.f32`, [`round`]), so what the tensor core multiplies is
//! what the fragment holds, on the GPU and on the simulator alike. A product of two TF32
//! values is exact in `f32`; the sums are `f32`.
//!
//! The layout is the PTX ISA's ("Matrix Fragments for `mma.m16n8k8`", `.tf32`): with
//! `g = lane / 4` and `t = lane % 4`, A's element `i` (`0..4`) is at row `g + 8 * (i % 2)`,
//! column `t + 4 * (i / 2)`; B's element `i` (`0..2`) at row (k) `t + 4 * i`, column (n) `g`.
//! A's and B's types are their own, so a 16-bit fragment, or a TF32 B passed as A, does not
//! compile.
//!
//! The product is warp-wide and `unsafe` as [`super::mma`] is; it needs sm_80 or newer.
//!
//! ```
//! use berth_device::mma::tf32::{self, FragA, FragB};
//! // Lane 0's elements: A's (0, 0), (8, 0), (0, 4), (8, 4); B's (0, 0), (4, 0).
//! let a = FragA::from_fn(|r, c| (r * 8 + c) as f32);
//! let b = FragB::from_fn(|k, n| (k * 8 + n) as f32);
//! assert_eq!((a.get(1), a.get(2), b.get(1)), (64.0, 4.0, 32.0));
//! // 1 + 2^-12 is not a TF32 value: the fragment holds it rounded.
//! assert_eq!(tf32::round(1.0 + 1.0 / 4096.0), 1.0);
//! ```

use super::FragC;

/// `x` rounded to TF32 (10 explicit significand bits; to nearest, ties away from zero, as
/// `cvt.rna.tf32.f32`), as an `f32` whose 13 low significand bits are zero. Infinities and
/// zeros are kept; a NaN stays a NaN; values that round above `f32::MAX` become infinite.
///
/// ```
/// use berth_device::mma::tf32::round;
/// assert_eq!(round(1.0 + 1.0 / 2048.0), 1.0 + 1.0 / 1024.0); // a tie, away from zero
/// assert_eq!(round(-(1.0 + 1.0 / 2048.0)), -(1.0 + 1.0 / 1024.0));
/// assert_eq!(round(3.0), 3.0);
/// assert!(round(f32::NAN).is_nan());
/// ```
#[inline(always)]
#[must_use]
pub fn round(x: f32) -> f32 {
    f32::from_bits(round_bits(x))
}

/// [`round`]'s bits: on the GPU one `cvt.rna.tf32.f32`, its 13 low bits then cleared (the
/// PTX ISA gives the result's value in TF32, not those bits).
#[inline(always)]
fn round_bits(x: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a register-to-register conversion (sm_80+, which every berth build of
        // these instructions targets).
        unsafe {
            core::arch::asm!(
                "cvt.rna.tf32.f32 {r}, {x};",
                r = out(reg32) r,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            )
        };
        r & !0x1fff
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let bits = x.to_bits();
        if x.is_nan() {
            // A quiet NaN of the same sign, its payload's low bits dropped.
            return (bits | 0x0040_0000) & !0x1fff;
        }
        // Half of the dropped part added to the magnitude, then dropped: to nearest, ties
        // away from zero; a carry out of the significand raises the exponent (to infinity
        // past the largest finite value), as the rounding does.
        bits.wrapping_add(0x1000) & !0x1fff
    }
}

/// A lane's part of the A operand of [`mma`]: a 16×8 row-major matrix of TF32, four
/// elements per lane.
///
/// ```
/// use berth_device::mma::tf32::FragA;
/// assert_eq!(FragA::coords(5, 3), (9, 5));
/// let a = FragA::from_fn(|r, c| (r + c) as f32);
/// assert_eq!(a.to_array(), [0.0, 8.0, 4.0, 12.0]); // lane 0
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FragA {
    regs: [f32; 4],
}

/// A lane's part of the B operand of [`mma`]: an 8×8 matrix of TF32 (k rows, n columns;
/// PTX's `.col`), two elements per lane.
///
/// ```
/// use berth_device::mma::tf32::FragB;
/// assert_eq!(FragB::coords(5, 1), (5, 1));
/// let b = FragB::from_fn(|k, n| (k * 8 + n) as f32);
/// assert_eq!(b.to_array(), [0.0, 32.0]); // lane 0: k 0 and 4, n 0
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FragB {
    regs: [f32; 2],
}

impl FragA {
    /// The `(row, column)` of element `i` (`0..4`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragA;
    /// assert_eq!(FragA::coords(0, 1), (8, 0));
    /// assert_eq!(FragA::coords(31, 3), (15, 7));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (g + 8 * (i % 2), t + 4 * (i / 2 % 2))
    }

    /// The calling lane's fragment, element `i` being `f(row, column)` at
    /// [`coords`](Self::coords)`(lane, i)`, rounded to TF32.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragA;
    /// let a = FragA::from_fn(|r, c| if r == c { 1.0 } else { 0.0 });
    /// assert_eq!(a.get(0), 1.0); // lane 0's (0, 0)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let lane = crate::warp::lane_id();
        Self {
            regs: core::array::from_fn(|i| {
                let (r, c) = Self::coords(lane, i);
                round(f(r, c))
            }),
        }
    }

    /// Element `i` (`0..4`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragA;
    /// assert_eq!(FragA::from_fn(|_, c| c as f32).get(3), 4.0); // lane 0: (8, 4)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> f32 {
        self.regs[i]
    }

    /// The calling lane's four elements, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragA;
    /// assert_eq!(FragA::from_fn(|_, _| 2.0).to_array(), [2.0; 4]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn to_array(self) -> [f32; 4] {
        self.regs
    }

    /// Load the calling lane's fragment of the 16×8 block whose top-left element is
    /// `(row, col)` of `tile`, a row-major matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, four per lane, each rounded to TF32.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// four elements this lane reads.
    ///
    /// ```
    /// use berth_device::{mma::tf32::FragA, shared_array};
    /// let tile = shared_array!(T: [f32; 16 * 8]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, i as f32) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let a = unsafe { FragA::load(tile, 8, 0, 0) };
    /// assert_eq!(a.get(1), 64.0); // lane 0, element 1: (8, 0)
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: crate::Shared<f32>, stride: usize, row: usize, col: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|r, c| unsafe { tile.read((row + r) * stride + col + c) })
    }

    /// Load the warp's fragments of the 16×8 block with one `ldmatrix.sync.aligned.x4`, each
    /// lane naming its own row: lane `l` gives `at`, the index in `tile` of the first of the
    /// four elements of row `l % 16`, columns `4 (l / 16)..+4` of the block; each element is
    /// rounded to TF32 as it arrives.
    ///
    /// Each lane's four elements must be inside the tile and start 16-byte aligned (`at` a
    /// multiple of 4, for a 16-byte aligned tile): checked on the simulator, the caller's
    /// contract on the GPU.
    ///
    /// # Safety
    /// - All 32 lanes of the warp reach this call together (`.sync.aligned`).
    /// - Every lane's four elements are inside `tile` and start 16-byte aligned.
    /// - The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    ///   whole block.
    ///
    /// ```should_panic
    /// use berth_device::{mma::tf32::FragA, shared_array, warp};
    /// let tile = shared_array!(T: [f32; 16 * 8]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let _ = unsafe { FragA::ldmatrix_at(tile, l % 16 * 8 + 4 * (l / 16)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_at(tile: crate::Shared<f32>, at: usize) -> Self {
        // SAFETY: lane `l`'s 16 bytes are in bounds and 16-byte aligned (the caller's
        // contract, checked on the simulator); the whole-warp and read contracts are the
        // caller's.
        let regs = unsafe { super::ldmatrix_at::<4, false, f32>(tile, at) };
        Self {
            regs: regs.map(|r| round(f32::from_bits(r))),
        }
    }
}

impl FragB {
    /// The `(k, n)` (row, column) of element `i` (`0..2`) of lane `lane`'s fragment.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragB;
    /// assert_eq!(FragB::coords(0, 1), (4, 0));
    /// assert_eq!(FragB::coords(31, 1), (7, 7));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        let (g, t) = (lane / 4 % 8, lane % 4);
        (t + 4 * (i % 2), g)
    }

    /// The calling lane's fragment, element `i` being `f(k, n)` at
    /// [`coords`](Self::coords)`(lane, i)`, rounded to TF32.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragB;
    /// assert_eq!(FragB::from_fn(|k, _| k as f32).get(1), 4.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let lane = crate::warp::lane_id();
        Self {
            regs: core::array::from_fn(|i| {
                let (k, n) = Self::coords(lane, i);
                round(f(k, n))
            }),
        }
    }

    /// Element `i` (`0..2`) of the calling lane's fragment.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragB;
    /// assert_eq!(FragB::from_fn(|k, n| (k + n) as f32).get(0), 0.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> f32 {
        self.regs[i]
    }

    /// The calling lane's two elements, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// use berth_device::mma::tf32::FragB;
    /// assert_eq!(FragB::from_fn(|_, _| 0.5).to_array(), [0.5; 2]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn to_array(self) -> [f32; 2] {
        self.regs
    }

    /// Load the calling lane's fragment of the 8×8 block whose top-left element is `(k, n)`
    /// of `tile`, a row-major K×N matrix of `stride` elements per row, with plain
    /// (bounds-checked) shared-memory reads, two per lane, each rounded to TF32.
    ///
    /// # Safety
    /// The [contract of plain reads](crate::shared#the-contract-of-plain-accesses) for the
    /// two elements this lane reads.
    ///
    /// ```
    /// use berth_device::{mma::tf32::FragB, shared_array};
    /// let tile = shared_array!(T: [f32; 8 * 8]);
    /// for i in 0..tile.len() {
    ///     // SAFETY: one thread: nobody else touches the tile.
    ///     unsafe { tile.write(i, i as f32) };
    /// }
    /// // SAFETY: every element was written above, by this thread.
    /// let b = unsafe { FragB::load(tile, 8, 0, 0) };
    /// assert_eq!(b.get(1), 32.0); // lane 0, element 1: k 4, n 0
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn load(tile: crate::Shared<f32>, stride: usize, k: usize, n: usize) -> Self {
        // SAFETY: each read is bounds-checked by `Shared::read`; the rest is the caller's
        // contract, forwarded.
        Self::from_fn(|kk, nn| unsafe { tile.read((k + kk) * stride + n + nn) })
    }

    /// Load the fragments of two neighbouring 8×8 blocks of B stored N×K (rows n, columns k:
    /// a row-major `n × k` matrix), n `0..8` and `8..16` of a 16×8 block, with one
    /// `ldmatrix.sync.aligned.x4`, each lane naming its own row: lane `l` gives `at`, the
    /// index in `tile` of the first of the four elements of row (n) `l % 8 + 8 (l / 16)`,
    /// columns (k) `4 (l / 8 % 2)..+4`; each element is rounded to TF32 as it arrives.
    ///
    /// Alignment and bounds as for [`FragA::ldmatrix_at`]: checked on the simulator, the
    /// caller's contract on the GPU.
    ///
    /// # Safety
    /// As [`FragA::ldmatrix_at`].
    ///
    /// ```should_panic
    /// use berth_device::{mma::tf32::FragB, shared_array, warp};
    /// let tile = shared_array!(T: [f32; 16 * 8]);
    /// let l = warp::lane_id();
    /// // SAFETY: (not met: the warp has one lane here, which the report says) the whole
    /// // warp reaches the call.
    /// let [_b0, _b1] =
    ///     unsafe { FragB::ldmatrix_pair_at(tile, (l % 8 + 8 * (l / 16)) * 8 + 4 * (l / 8 % 2)) };
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub unsafe fn ldmatrix_pair_at(tile: crate::Shared<f32>, at: usize) -> [Self; 2] {
        // SAFETY: as in `FragA::ldmatrix_at`.
        let [r0, r1, r2, r3] = unsafe { super::ldmatrix_at::<4, false, f32>(tile, at) };
        let f = |r: u32| round(f32::from_bits(r));
        [
            Self {
                regs: [f(r0), f(r1)],
            },
            Self {
                regs: [f(r2), f(r3)],
            },
        ]
    }
}

/// `a × b + c`, by the warp (`mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`): each
/// lane gives its fragments and gets its part of the 16×8 result.
///
/// # Safety
/// All 32 lanes of the warp reach this call together (`.sync.aligned`; the simulator reports
/// a warp that does not).
///
/// ```should_panic
/// use berth_device::mma::{tf32::{self, FragA, FragB}, FragC};
/// let a = FragA::from_fn(|_, _| 1.0);
/// let b = FragB::from_fn(|_, _| 2.0);
/// // In a simulated launch every element of the result is 8 × 2 = 16. Outside one the
/// // warp has a single lane, which the report says.
/// // SAFETY: (not met here) all 32 lanes of the warp reach the call.
/// let d = unsafe { tf32::mma(a, b, FragC::zero()) };
/// assert_eq!(d.to_array(), [16.0; 4]);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub unsafe fn mma(a: FragA, b: FragB, c: FragC) -> FragC {
    let c = c.to_array();
    #[cfg(target_arch = "nvptx64")]
    {
        let [a0, a1, a2, a3] = a.regs;
        let [b0, b1] = b.regs;
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        // SAFETY: mma.sync reads and writes registers only; the caller has the whole warp
        // reach it together.
        unsafe {
            core::arch::asm!(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \
                 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
                 {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1,
                d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a0, a1 = in(reg32) a1,
                a2 = in(reg32) a2, a3 = in(reg32) a3,
                b0 = in(reg32) b0, b1 = in(reg32) b1,
                c0 = in(reg32) c[0], c1 = in(reg32) c[1],
                c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                options(nomem, nostack),
            )
        }
        FragC::from_array([d0, d1, d2, d3])
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        FragC::from_array(super::host::mma_tf32(
            a.regs,
            b.regs,
            c,
            core::panic::Location::caller(),
        ))
    }
}
