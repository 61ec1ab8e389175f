//! 8-bit integer tensor-core products:
//! `mma.sync.aligned.m16n8k32.row.col.satfinite.s32.{s8,u8}.{s8,u8}.s32`, A 16×32 and B 32×8
//! of [`i8`] or [`u8`] (each operand its own), C and D 16×8 of `i32`.
//!
//! The products and their sums are exact; the result is clamped to `i32`'s range
//! (`.satfinite`) instead of wrapping, on the GPU and on the simulator alike.
//!
//! The layout is the PTX ISA's ("Matrix Fragments for `mma.m16n8k32`", 8-bit integers): with
//! `g = lane / 4` and `t = lane % 4`, A's element `i` (`0..16`) is at row
//! `g + 8 * (i / 4 % 2)`, column `4 * t + i % 4 + 16 * (i / 8)`; B's element `i` (`0..8`) at
//! row (k) `4 * t + i % 4 + 16 * (i / 4)`, column (n) `g`; C's element `i` (`0..4`) at row
//! `g + 8 * (i / 2)`, column `2 * t + i % 2` (as [`super::FragC`]'s). Four elements share a
//! 32-bit register. Each role and element type is its own type, so a B fragment passed as
//! A, an `f32` accumulator, or a 16-bit fragment does not compile. The A and B fragments are
//! [`super::m16n8k32`]'s, shared with the 8-bit floats of [`super::fp8`] (the same layout).
//!
//! The product is warp-wide and `unsafe` as [`super::mma`] is; it needs sm_80 or newer.
//!
//! ```
//! use berth_device::mma::int8::FragC;
//! use berth_device::mma::m16n8k32::{FragA, FragB};
//! let a = FragA::from_fn(|r, c| (r + c) as i8);
//! let b = FragB::from_fn(|k, n| (k as u8) ^ (n as u8));
//! // Lane 0's A element 9 is row 0, column 17; its B element 5 is k 17, n 0.
//! assert_eq!((a.get(9), b.get(5)), (17, 17));
//! assert_eq!(FragC::zero().to_array(), [0; 4]);
//! ```

use super::m16n8k32::{Elem8, FragA, FragB};

/// The element types of A and B an 8-bit integer [`mma`] multiplies: [`i8`] (`s8`) and
/// [`u8`] (`u8`), with `i32` accumulation.
///
/// ```
/// use berth_device::mma::int8::Int8;
/// assert_eq!((<i8 as Int8>::NAME, <u8 as Int8>::NAME), ("s8", "u8"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an 8-bit integer: `int8::mma` multiplies fragments of `i8` or `u8`",
    label = "a fragment of `{Self}`",
    note = "8-bit float fragments (`F8E4M3`, `F8E5M2`) are multiplied by `mma::fp8::mma`, into an `f32` `FragC`"
)]
pub trait Int8: Elem8 {
    /// The PTX type name (`s8`, `u8`).
    ///
    /// ```
    /// use berth_device::mma::int8::Int8;
    /// assert_eq!(<u8 as Int8>::NAME, "u8");
    /// ```
    const NAME: &'static str;
    #[doc(hidden)]
    const SIGNED: bool;
    #[doc(hidden)]
    fn widen(b: u8) -> i32;
}

impl Int8 for i8 {
    const NAME: &'static str = "s8";
    const SIGNED: bool = true;
    #[inline(always)]
    fn widen(b: u8) -> i32 {
        i32::from(b as i8)
    }
}

impl Int8 for u8 {
    const NAME: &'static str = "u8";
    const SIGNED: bool = false;
    #[inline(always)]
    fn widen(b: u8) -> i32 {
        i32::from(b)
    }
}

/// A lane's part of the C operand and the result D of [`mma`]: a 16×8 matrix of `i32`, four
/// elements per lane, laid out as [`super::FragC`].
///
/// ```
/// use berth_device::mma::int8::FragC;
/// let c = FragC::from_fn(|r, c| (r * 8 + c) as i32);
/// assert_eq!(c.to_array(), [0, 1, 64, 65]); // lane 0: rows 0 and 8, columns 0 and 1
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragC {
    regs: [i32; 4],
}

impl FragC {
    /// The `(row, column)` of element `i` (`0..4`) of lane `lane`'s fragment (as
    /// [`super::FragC::coords`]).
    ///
    /// ```
    /// assert_eq!(berth_device::mma::int8::FragC::coords(5, 2), (9, 2));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(lane: usize, i: usize) -> (usize, usize) {
        super::FragC::coords(lane, i)
    }

    /// All zeros: the C of a product without a sum.
    ///
    /// ```
    /// assert_eq!(berth_device::mma::int8::FragC::zero().get(3), 0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn zero() -> Self {
        Self { regs: [0; 4] }
    }

    /// The calling lane's fragment, element `i` being `f(row, column)` at
    /// [`coords`](Self::coords)`(lane, i)`.
    ///
    /// ```
    /// let c = berth_device::mma::int8::FragC::from_fn(|r, _| r as i32);
    /// assert_eq!(c.to_array(), [0, 0, 8, 8]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> i32) -> Self {
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
    /// assert_eq!(berth_device::mma::int8::FragC::from_fn(|_, c| c as i32).get(1), 1);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> i32 {
        self.regs[i]
    }

    /// The calling lane's four elements, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// assert_eq!(berth_device::mma::int8::FragC::zero().to_array(), [0; 4]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn to_array(self) -> [i32; 4] {
        self.regs
    }

    /// The fragment holding these four elements (in [`coords`](Self::coords) order).
    ///
    /// ```
    /// use berth_device::mma::int8::FragC;
    /// assert_eq!(FragC::from_array([1, 2, 3, 4]).get(2), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn from_array(regs: [i32; 4]) -> Self {
        Self { regs }
    }
}

/// `a × b + c`, by the warp
/// (`mma.sync.aligned.m16n8k32.row.col.satfinite.s32.{A}.{B}.s32`): each lane gives its
/// fragments and gets its part of the 16×8 result, each element the exact sum clamped to
/// `i32`'s range.
///
/// # Safety
/// All 32 lanes of the warp reach this call together (`.sync.aligned`; the simulator reports
/// a warp that does not).
///
/// ```should_panic
/// use berth_device::mma::int8::{self, FragC};
/// use berth_device::mma::m16n8k32::{FragA, FragB};
/// let a = FragA::from_fn(|_, _| -1i8);
/// let b = FragB::from_fn(|_, _| 3u8);
/// // In a simulated launch every element of the result is 32 × -3 = -96. Outside one the
/// // warp has a single lane, which the report says.
/// // SAFETY: (not met here) all 32 lanes of the warp reach the call.
/// let d = unsafe { int8::mma(a, b, FragC::zero()) };
/// assert_eq!(d.to_array(), [-96; 4]);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub unsafe fn mma<A: Int8, B: Int8>(a: FragA<A>, b: FragB<B>, c: FragC) -> FragC {
    #[cfg(target_arch = "nvptx64")]
    {
        let [a0, a1, a2, a3] = a.regs;
        let [b0, b1] = b.regs;
        let [c0, c1, c2, c3] = c.regs;
        let (d0, d1, d2, d3): (i32, i32, i32, i32);
        macro_rules! mma_asm {
            ($at:literal, $bt:literal) => {
                // SAFETY: mma.sync reads and writes registers only; the caller has the whole
                // warp reach it together.
                unsafe {
                    core::arch::asm!(
                        concat!(
                            "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.", $at, ".", $bt,
                            ".s32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
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
        match (A::SIGNED, B::SIGNED) {
            (true, true) => mma_asm!("s8", "s8"),
            (true, false) => mma_asm!("s8", "u8"),
            (false, true) => mma_asm!("u8", "s8"),
            (false, false) => mma_asm!("u8", "u8"),
        }
        FragC {
            regs: [d0, d1, d2, d3],
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        FragC {
            regs: super::host::mma_int8(
                a.regs,
                b.regs,
                c.regs,
                A::widen,
                B::widen,
                core::panic::Location::caller(),
            ),
        }
    }
}
