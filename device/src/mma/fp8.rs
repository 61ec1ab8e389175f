//! 8-bit floating-point tensor-core products:
//! `mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32`, A 16×32 and B 32×8 of
//! [`F8E4M3`](crate::F8E4M3) or [`F8E5M2`](crate::F8E5M2) (each operand its own), C and D
//! 16×8 of `f32` in the same [`FragC`] as the 16-bit products. They need sm_89 or newer
//! (the builder marks PTX that uses them as PTX ISA 8.4).
//!
//! The element types are the `float8` crate's (`F8E4M3`: 4 exponent bits, 3 significand
//! bits, no infinities, ±448 at most; `F8E5M2`: 5 and 2, IEEE-like). A product of two of them
//! is exact in `f32`; the sums are `f32`.
//!
//! The fragments are [`super::m16n8k32`]'s, as for the 8-bit integers (the layout: A's element `i` at row
//! `g + 8 * (i / 4 % 2)`, column `4 * t + i % 4 + 16 * (i / 8)`; B's at row (k)
//! `4 * t + i % 4 + 16 * (i / 4)`, column (n) `g`, with `g = lane / 4`, `t = lane % 4`)
//! holding 8-bit floats; an integer fragment given to this product does not compile.
//!
//! The product is warp-wide and `unsafe` as [`super::mma`] is.
//!
//! ```
//! use berth_device::F8E4M3;
//! use berth_device::mma::m16n8k32::{FragA, FragB};
//! let a = FragA::from_fn(|r, _| F8E4M3::from_f32(r as f32));
//! let b = FragB::from_fn(|k, _| F8E4M3::from_f32(0.75 * k as f32));
//! // Lane 0's A element 4 is row 8; its B element 5 is k 17 (12.75 rounds to 13 in E4M3).
//! assert_eq!((a.get(4).to_f32(), b.get(5).to_f32()), (8.0, 13.0));
//! ```

use super::FragC;
use super::m16n8k32::{Elem8, FragA, FragB};

/// The element types of A and B an 8-bit floating-point [`mma`] multiplies:
/// [`F8E4M3`](crate::F8E4M3) (`e4m3`) and [`F8E5M2`](crate::F8E5M2) (`e5m2`), with `f32`
/// accumulation.
///
/// ```
/// use berth_device::{F8E4M3, F8E5M2, mma::fp8::Fp8};
/// assert_eq!((F8E4M3::NAME, F8E5M2::NAME), ("e4m3", "e5m2"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an 8-bit float: `fp8::mma` multiplies fragments of `F8E4M3` or `F8E5M2`",
    label = "a fragment of `{Self}`",
    note = "8-bit integer fragments (`i8`, `u8`) are multiplied by `mma::int8::mma`, into an `i32` `int8::FragC`"
)]
pub trait Fp8: Elem8 {
    /// The PTX type name (`e4m3`, `e5m2`).
    ///
    /// ```
    /// use berth_device::{F8E5M2, mma::fp8::Fp8};
    /// assert_eq!(<F8E5M2 as Fp8>::NAME, "e5m2");
    /// ```
    const NAME: &'static str;
    #[doc(hidden)]
    const IS_E4M3: bool;
    #[doc(hidden)]
    fn widen(b: u8) -> f32;
}

impl Fp8 for crate::F8E4M3 {
    const NAME: &'static str = "e4m3";
    const IS_E4M3: bool = true;
    #[inline(always)]
    fn widen(b: u8) -> f32 {
        Self::from_bits(b).to_f32()
    }
}

impl Fp8 for crate::F8E5M2 {
    const NAME: &'static str = "e5m2";
    const IS_E4M3: bool = false;
    #[inline(always)]
    fn widen(b: u8) -> f32 {
        Self::from_bits(b).to_f32()
    }
}

/// `a × b + c`, by the warp (`mma.sync.aligned.m16n8k32.row.col.f32.{A}.{B}.f32`): each lane
/// gives its fragments and gets its part of the 16×8 result.
///
/// # Safety
/// All 32 lanes of the warp reach this call together (`.sync.aligned`; the simulator reports
/// a warp that does not).
///
/// ```should_panic
/// use berth_device::{F8E4M3, F8E5M2};
/// use berth_device::mma::{FragC, fp8, m16n8k32::{FragA, FragB}};
/// let a = FragA::from_fn(|_, _| F8E4M3::from_f32(1.5));
/// let b = FragB::from_fn(|_, _| F8E5M2::from_f32(-2.0));
/// // In a simulated launch every element of the result is 32 × -3 = -96. Outside one the
/// // warp has a single lane, which the report says.
/// // SAFETY: (not met here) all 32 lanes of the warp reach the call.
/// let d = unsafe { fp8::mma(a, b, FragC::zero()) };
/// assert_eq!(d.to_array(), [-96.0; 4]);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub unsafe fn mma<A: Fp8, B: Fp8>(a: FragA<A>, b: FragB<B>, c: FragC) -> FragC {
    let c = c.to_array();
    #[cfg(target_arch = "nvptx64")]
    {
        let [a0, a1, a2, a3] = a.regs;
        let [b0, b1] = b.regs;
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        macro_rules! mma_asm {
            ($at:literal, $bt:literal) => {
                // SAFETY: mma.sync reads and writes registers only; the caller has the whole
                // warp reach it together.
                unsafe {
                    core::arch::asm!(
                        concat!(
                            "mma.sync.aligned.m16n8k32.row.col.f32.", $at, ".", $bt,
                            ".f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                            "{{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"
                        ),
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
            };
        }
        match (A::IS_E4M3, B::IS_E4M3) {
            (true, true) => mma_asm!("e4m3", "e4m3"),
            (true, false) => mma_asm!("e4m3", "e5m2"),
            (false, true) => mma_asm!("e5m2", "e4m3"),
            (false, false) => mma_asm!("e5m2", "e5m2"),
        }
        FragC::from_array([d0, d1, d2, d3])
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        FragC::from_array(super::host::mma_fp8(
            a.regs,
            b.regs,
            c,
            A::widen,
            B::widen,
            core::panic::Location::caller(),
        ))
    }
}
