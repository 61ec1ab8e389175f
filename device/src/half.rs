//! Half precision: the `half` crate's [`f16`](struct@f16) and [`bf16`] as kernel data, their arithmetic
//! in GPU instructions, and packed pairs ([`f16x2`], [`bf16x2`]) that do two operations in
//! one instruction.
//!
//! `f16`/`bf16` are plain 16-bit data, so they are kernel scalars and slice elements like
//! `f32`. Their own methods (`to_f32()`, `+`, …) compute in software through bit
//! manipulation on every target; in kernels prefer [`HalfExt`] (`to_f32_fast`,
//! `from_f32_fast`, `add_rn`, `mul_rn`, `fma_rn`), one PTX instruction each, and the packed
//! types for bulk work. On the host (the simulator) the same methods compute the same bits:
//! an add or multiply through `f32` rounds once to the half format (`f32` carries more than
//! twice the bits, so the double rounding is exact), and `fma_rn` rounds the exact
//! `a * b + c` once.
//!
//! ```
//! use berth_device::f16;
//! use berth_device::half::{HalfExt, f16x2};
//! let a = f16::from_f32_fast(1.5);
//! assert_eq!(a.mul_rn(a).to_f32_fast(), 2.25);
//! let v = f16x2::from_f32s(1.0, -2.0);
//! assert_eq!(v.fma(v, v).to_f32s(), (2.0, 2.0));
//! ```

use ::half::{bf16, f16};

// SAFETY: `f16` and `bf16` are `#[repr(transparent)]` wrappers of a `u16`: fixed layout, no
// pointers, the same bytes on host and device.
unsafe impl crate::DeviceCopy for f16 {}
// SAFETY: as above.
unsafe impl crate::DeviceCopy for bf16 {}

/// Fast, correctly rounded half-precision operations: one PTX instruction each on the GPU
/// (`cvt`, `add.rn`, `mul.rn`, `fma.rn` on `.f16`/`.bf16`; the `bf16` add and multiply
/// need sm_90, its conversion and fma sm_80), the same bits on the host.
///
/// ```
/// use berth_device::{bf16, half::HalfExt};
/// let x = bf16::from_f32_fast(3.0);
/// assert_eq!(x.add_rn(x).to_f32_fast(), 6.0);
/// assert_eq!(x.fma_rn(x, bf16::from_f32_fast(-9.0)).to_f32_fast(), 0.0);
/// ```
pub trait HalfExt: Copy {
    /// The value as `f32` (exact).
    ///
    /// ```
    /// use berth_device::{bf16, f16, half::HalfExt};
    /// assert_eq!(f16::from_bits(0x3e00).to_f32_fast(), 1.5);
    /// assert_eq!(bf16::from_bits(0xc020).to_f32_fast(), -2.5);
    /// ```
    fn to_f32_fast(self) -> f32;
    /// `v` rounded to nearest, ties to even.
    ///
    /// ```
    /// use berth_device::{bf16, f16, half::HalfExt};
    /// assert_eq!(f16::from_f32_fast(1.5).to_bits(), 0x3e00);
    /// // 1 + 2⁻¹¹ lies halfway between two f16 values (ulp 2⁻¹⁰ at 1): the tie goes to the even one.
    /// assert_eq!(f16::from_f32_fast(1.0 + 2f32.powi(-11)).to_f32_fast(), 1.0);
    /// assert_eq!(bf16::from_f32_fast(1.0 / 3.0).to_f32_fast(), 0.333_984_375);
    /// ```
    fn from_f32_fast(v: f32) -> Self;
    /// `self + rhs`, rounded once.
    ///
    /// ```
    /// use berth_device::{f16, half::HalfExt};
    /// let big = f16::from_f32_fast(2048.0); // f16's ulp at 2048 is 2
    /// let one = f16::from_f32_fast(1.0);
    /// assert_eq!(big.add_rn(one).to_f32_fast(), 2048.0); // 2049: a tie, to even
    /// assert_eq!(big.add_rn(one).add_rn(one).add_rn(one).to_f32_fast(), 2048.0);
    /// ```
    #[must_use]
    fn add_rn(self, rhs: Self) -> Self;
    /// `self * rhs`, rounded once.
    ///
    /// ```
    /// use berth_device::{bf16, half::HalfExt};
    /// let x = bf16::from_f32_fast(-0.75);
    /// assert_eq!(x.mul_rn(x).to_f32_fast(), 0.5625);
    /// ```
    #[must_use]
    fn mul_rn(self, rhs: Self) -> Self;
    /// `self * b + c`, rounded once.
    ///
    /// ```
    /// use berth_device::{f16, half::HalfExt};
    /// let h = |v: f32| f16::from_f32_fast(v);
    /// assert_eq!(h(1.5).fma_rn(h(2.0), h(-0.25)).to_f32_fast(), 2.75);
    /// // One rounding: (1 + 2⁻⁶)² - 1 = 2⁻⁵ + 2⁻¹² is kept whole; the rounded product (1 + 2⁻⁵ at
    /// // f16's precision near 1) has lost the 2⁻¹².
    /// let x = h(1.0 + 2f32.powi(-6));
    /// assert_eq!(x.fma_rn(x, h(-1.0)).to_f32_fast(), 2f32.powi(-5) + 2f32.powi(-12));
    /// assert_eq!(x.mul_rn(x).add_rn(h(-1.0)).to_f32_fast(), 2f32.powi(-5));
    /// ```
    #[must_use]
    fn fma_rn(self, b: Self, c: Self) -> Self;
}

/// `a * b + c` of values widened from a half format, rounded to `f32` by round-to-odd: the
/// exact result's truncation with its last bit set when inexact. Rounding that to a format
/// of at most 22 significant bits gives the correctly rounded result (no double-rounding
/// error), which a plain `f32`/`f64` fma followed by a second rounding does not guarantee.
#[cfg(not(target_arch = "nvptx64"))]
fn fma_round_to_odd(a: f32, b: f32, c: f32) -> f32 {
    // Half values have at most 11 (f16) or 8 (bf16) significant bits: the product is exact
    // in f64, and TwoSum gives the sum's rounding error exactly.
    let p = f64::from(a) * f64::from(b);
    let c = f64::from(c);
    let s = p + c;
    if !s.is_finite() {
        return s as f32;
    }
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    let f = s as f32;
    if f.is_infinite() {
        return f;
    }
    // The sign of f - (s + err); f - s is exact (Sterbenz: f is within an f32 ulp of s).
    let diff = (f64::from(f) - s) - err;
    if diff == 0.0 {
        return f;
    }
    // Truncate towards zero (step back if f was rounded away from zero), then mark the
    // result inexact by setting its last bit.
    let truncated = if f == 0.0 {
        // The exact value is a tiny number of the sign of -diff.
        if diff > 0.0 { 0x8000_0000 } else { 0 }
    } else if (diff > 0.0) == (f > 0.0) {
        f.to_bits() - 1
    } else {
        f.to_bits()
    };
    f32::from_bits(truncated | 1)
}

#[cfg(target_arch = "nvptx64")]
macro_rules! asm1 {
    ($ins:expr, $out:ident, $oreg:ident, $($in:expr => $ireg:ident),+) => {{
        let d: $out;
        // SAFETY: a register-only PTX arithmetic or conversion instruction.
        unsafe {
            core::arch::asm!(
                concat!($ins, " {d}", $(asm1!(@comma $in)),+, ";"),
                $(in($ireg) $in,)+
                d = out($oreg) d,
                options(pure, nomem, nostack),
            );
        }
        d
    }};
    (@comma $e:expr) => { ", {}" };
}

impl HalfExt for f16 {
    #[inline(always)]
    fn to_f32_fast(self) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            asm1!("cvt.f32.f16", f32, reg32, self.to_bits() => reg16)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            self.to_f32()
        }
    }
    #[inline(always)]
    fn from_f32_fast(v: f32) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            f16::from_bits(asm1!("cvt.rn.f16.f32", u16, reg16, v => reg32))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_f32(v)
        }
    }
    #[inline(always)]
    fn add_rn(self, rhs: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b) = (self.to_bits(), rhs.to_bits());
            f16::from_bits(asm1!("add.rn.f16", u16, reg16, a => reg16, b => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_f32(self.to_f32() + rhs.to_f32())
        }
    }
    #[inline(always)]
    fn mul_rn(self, rhs: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b) = (self.to_bits(), rhs.to_bits());
            f16::from_bits(asm1!("mul.rn.f16", u16, reg16, a => reg16, b => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_f32(self.to_f32() * rhs.to_f32())
        }
    }
    #[inline(always)]
    fn fma_rn(self, b: f16, c: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (x, y, z) = (self.to_bits(), b.to_bits(), c.to_bits());
            f16::from_bits(asm1!("fma.rn.f16", u16, reg16, x => reg16, y => reg16, z => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_f32(fma_round_to_odd(self.to_f32(), b.to_f32(), c.to_f32()))
        }
    }
}

impl HalfExt for bf16 {
    #[inline(always)]
    fn to_f32_fast(self) -> f32 {
        // bf16 is the upper half of an f32: widening is a shift on every target.
        f32::from_bits(u32::from(self.to_bits()) << 16)
    }
    #[inline(always)]
    fn from_f32_fast(v: f32) -> bf16 {
        #[cfg(target_arch = "nvptx64")]
        {
            bf16::from_bits(asm1!("cvt.rn.bf16.f32", u16, reg16, v => reg32))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_f32(v)
        }
    }
    #[inline(always)]
    fn add_rn(self, rhs: bf16) -> bf16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b) = (self.to_bits(), rhs.to_bits());
            bf16::from_bits(asm1!("add.rn.bf16", u16, reg16, a => reg16, b => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_f32(self.to_f32() + rhs.to_f32())
        }
    }
    #[inline(always)]
    fn mul_rn(self, rhs: bf16) -> bf16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b) = (self.to_bits(), rhs.to_bits());
            bf16::from_bits(asm1!("mul.rn.bf16", u16, reg16, a => reg16, b => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_f32(self.to_f32() * rhs.to_f32())
        }
    }
    #[inline(always)]
    fn fma_rn(self, b: bf16, c: bf16) -> bf16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let (x, y, z) = (self.to_bits(), b.to_bits(), c.to_bits());
            bf16::from_bits(asm1!("fma.rn.bf16", u16, reg16, x => reg16, y => reg16, z => reg16))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_f32(fma_round_to_odd(self.to_f32(), b.to_f32(), c.to_f32()))
        }
    }
}

/// A doc example of a packed pair's method, built for each pair type: `P` is the pair,
/// `H` its element type.
macro_rules! example {
    ($name:ident, $h:ident, $body:literal) => {
        concat!(
            "```\n",
            "use berth_device::{",
            stringify!($h),
            " as H, half::",
            stringify!($name),
            " as P};\n",
            $body,
            "\n```"
        )
    };
}

macro_rules! packed {
    (
        $(#[$doc:meta])* $name:ident, $h:ident, $suffix:literal, $cvt2:literal
    ) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[repr(C, align(4))]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name {
            /// The first element (low 16 bits of the packed register).
            pub lo: $h,
            /// The second element (high 16 bits).
            pub hi: $h,
        }

        // SAFETY: two 16-bit plain values, 4-aligned, no padding, no pointers.
        unsafe impl crate::DeviceCopy for $name {}

        impl $name {
            /// The pair `(lo, hi)`.
            ///
            #[doc = example!($name, $h, "let p = P::new(H::from_f32(1.5), H::from_f32(-0.5));\nassert_eq!((p.lo, p.hi), (H::from_f32(1.5), H::from_f32(-0.5)));")]
            #[inline(always)]
            #[must_use]
            pub const fn new(lo: $h, hi: $h) -> Self {
                Self { lo, hi }
            }

            /// Both elements `v`.
            ///
            #[doc = example!($name, $h, "assert_eq!(P::splat(H::from_f32(2.0)).to_f32s(), (2.0, 2.0));")]
            #[inline(always)]
            #[must_use]
            pub const fn splat(v: $h) -> Self {
                Self { lo: v, hi: v }
            }

            /// The packed bits: `lo` in the low half.
            ///
            #[doc = example!($name, $h, "let p = P::new(H::from_f32(1.5), H::from_f32(-0.5));\nlet (lo, hi) = (u32::from(p.lo.to_bits()), u32::from(p.hi.to_bits()));\nassert_eq!(p.to_bits(), lo | hi << 16);")]
            #[inline(always)]
            #[must_use]
            pub const fn to_bits(self) -> u32 {
                self.lo.to_bits() as u32 | (self.hi.to_bits() as u32) << 16
            }

            /// The pair whose packed bits are `b` (`lo` in the low half).
            ///
            #[doc = example!($name, $h, "let p = P::from_f32s(0.25, -3.0);\nassert_eq!(P::from_bits(p.to_bits()), p);")]
            #[inline(always)]
            #[must_use]
            pub const fn from_bits(b: u32) -> Self {
                Self {
                    lo: $h::from_bits(b as u16),
                    hi: $h::from_bits((b >> 16) as u16),
                }
            }

            /// `(lo, hi)` rounded from `f32` to nearest, ties to even, in one `cvt.rn`
            /// (`cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32`, sm_80+).
            ///
            #[doc = example!($name, $h, "assert_eq!(P::from_f32s(0.25, 3.0), P::new(H::from_f32(0.25), H::from_f32(3.0)));")]
            #[inline(always)]
            #[must_use]
            pub fn from_f32s(lo: f32, hi: f32) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // cvt's first source goes to the high half.
                    Self::from_bits(asm1!($cvt2, u32, reg32, hi => reg32, lo => reg32))
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    Self::new($h::from_f32_fast(lo), $h::from_f32_fast(hi))
                }
            }

            /// `(lo, hi)` as `f32` (exact).
            ///
            #[doc = example!($name, $h, "assert_eq!(P::from_f32s(-0.5, 3.0).to_f32s(), (-0.5, 3.0));")]
            #[inline(always)]
            #[must_use]
            pub fn to_f32s(self) -> (f32, f32) {
                (self.lo.to_f32_fast(), self.hi.to_f32_fast())
            }

            /// Element-wise `self * b + c`, rounded once (`fma.rn` on the pair).
            ///
            #[doc = example!($name, $h, "let p = P::from_f32s(1.5, 2.0);\nassert_eq!(p.fma(p, P::splat(H::from_f32(-0.25))).to_f32s(), (2.0, 3.75));")]
            #[inline(always)]
            #[must_use]
            pub fn fma(self, b: Self, c: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let (x, y, z) = (self.to_bits(), b.to_bits(), c.to_bits());
                    Self::from_bits(asm1!(concat!("fma.rn.", $suffix), u32, reg32, x => reg32, y => reg32, z => reg32))
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    Self::new(self.lo.fma_rn(b.lo, c.lo), self.hi.fma_rn(b.hi, c.hi))
                }
            }
        }

        impl core::ops::Add for $name {
            type Output = Self;
            /// Element-wise `self + rhs`, rounded once (`add.rn` on the pair).
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let (a, b) = (self.to_bits(), rhs.to_bits());
                    Self::from_bits(asm1!(concat!("add.rn.", $suffix), u32, reg32, a => reg32, b => reg32))
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    Self::new(self.lo.add_rn(rhs.lo), self.hi.add_rn(rhs.hi))
                }
            }
        }

        impl core::ops::Mul for $name {
            type Output = Self;
            /// Element-wise `self * rhs`, rounded once (`mul.rn` on the pair).
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let (a, b) = (self.to_bits(), rhs.to_bits());
                    Self::from_bits(asm1!(concat!("mul.rn.", $suffix), u32, reg32, a => reg32, b => reg32))
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    Self::new(self.lo.mul_rn(rhs.lo), self.hi.mul_rn(rhs.hi))
                }
            }
        }
    };
}

packed! {
    /// Two [`f16`](struct@f16) in one 32-bit register: `+`, `*` and `fma` work on both at once
    /// (`add.rn.f16x2`, `mul.rn.f16x2`, `fma.rn.f16x2`). In memory: `lo` then `hi`, 4-aligned,
    /// so a `&[f16x2]` reads an even-length `f16` array two at a time.
    ///
    /// ```
    /// use berth_device::{f16, half::f16x2};
    /// let a = f16x2::new(f16::from_f32(0.5), f16::from_f32(3.0));
    /// assert_eq!((a + a).to_f32s(), (1.0, 6.0));
    /// assert_eq!((a * a).to_bits(), f16x2::from_f32s(0.25, 9.0).to_bits());
    /// ```
    f16x2, f16, "f16x2", "cvt.rn.f16x2.f32"
}

packed! {
    /// Two [`bf16`] in one 32-bit register: `+`, `*` (sm_90) and `fma` (sm_80) on both at
    /// once (`add.rn.bf16x2`, `mul.rn.bf16x2`, `fma.rn.bf16x2`). Layout as [`f16x2`].
    ///
    /// ```
    /// use berth_device::half::bf16x2;
    /// let a = bf16x2::from_f32s(2.0, -0.5);
    /// assert_eq!(a.fma(a, a).to_f32s(), (6.0, -0.25));
    /// ```
    bf16x2, bf16, "bf16x2", "cvt.rn.bf16x2.f32"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The correctly rounded `a * b + c` by exact rational arithmetic on integers: every
    /// half value is an integer times 2^-24 (f16), so scale to integers and round once.
    fn exact_fma_f16(a: f16, b: f16, c: f16) -> f16 {
        let (a, b, c) = (a.to_f32(), b.to_f32(), c.to_f32());
        let scale = |v: f32| (f64::from(v) * f64::from(1u32 << 24)) as i128;
        // a*b*2^48 + c*2^48, all exact integers.
        let num = scale(a) * scale(b) + (scale(c) << 24);
        // Round num / 2^48 to f16 by trying the neighbours of its f64 approximation.
        let approx = f16::from_f64(num as f64 / 2f64.powi(48));
        let dist = |h: f16| {
            let n = scale(h.to_f32()) << 24;
            (n - num).abs()
        };
        let mut best = approx;
        for cand in [
            f16::from_bits(approx.to_bits().wrapping_sub(1)),
            f16::from_bits(approx.to_bits().wrapping_add(1)),
        ] {
            if !cand.is_finite() || cand.is_nan() {
                continue;
            }
            let (d, db) = (dist(cand), dist(best));
            if d < db || (d == db && cand.to_bits().is_multiple_of(2)) {
                best = cand;
            }
        }
        best
    }

    #[test]
    fn fma_rounds_once_where_a_double_rounding_would_not() {
        // Exhaustive over a slice of f16: a few thousand finite triples, normal and subnormal.
        let vals: Vec<f16> = (0..=0xffffu16)
            .step_by(257)
            .map(f16::from_bits)
            .filter(|v| v.is_finite() && v.to_f32().abs() < 200.0)
            .collect();
        let mut checked = 0;
        for &a in &vals {
            for &b in vals.iter().step_by(3) {
                for &c in vals.iter().step_by(5) {
                    let want = exact_fma_f16(a, b, c);
                    let got = a.fma_rn(b, c);
                    if want.to_f32().abs() < 60000.0 {
                        assert_eq!(got.to_bits(), want.to_bits(), "{a} * {b} + {c}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
        // a * b + c = (1 + 2^-10 + 2^-11) - 2^-31: just below the midpoint of two f16 values.
        // An f32 fma rounds it onto the midpoint, and the tie then goes the wrong way.
        let (a, b, c) = (
            f16::from_f32(2f32.powi(-6) * (1.0 + 2f32.powi(-10))),
            f16::from_f32(2f32.powi(-5) * (1.0 - 2f32.powi(-10))),
            f16::from_f32(1.0 + 2f32.powi(-10)),
        );
        let twice = f16::from_f32(a.to_f32().mul_add(b.to_f32(), c.to_f32()));
        assert_eq!(a.fma_rn(b, c), c);
        assert_eq!(exact_fma_f16(a, b, c), c);
        assert_ne!(twice, c, "the f32 fma rounded twice is off here");
    }

    /// The correctly rounded `a * b + c` in bf16 for values that are multiples of 2^-40 below
    /// 2^20 (exact integers after scaling by 2^40), by the nearest of the neighbours.
    fn exact_fma_bf16(a: bf16, b: bf16, c: bf16) -> bf16 {
        let scale = |v: bf16| (f64::from(v.to_f32()) * 2f64.powi(40)) as i128;
        let num = scale(a) * scale(b) + (scale(c) << 40);
        let approx = bf16::from_f32((num as f64 / 2f64.powi(80)) as f32);
        let dist = |h: bf16| ((scale(h) << 40) - num).abs();
        let mut best = approx;
        for d in [-2i32, -1, 1, 2] {
            let cand = bf16::from_bits((i32::from(approx.to_bits()) + d) as u16);
            let scaled = f64::from(cand.to_f32()) * 2f64.powi(40);
            if !cand.is_finite() || scaled.fract() != 0.0 {
                continue; // not a multiple of 2^-40: far from any result in range
            }
            let (dc, db) = (dist(cand), dist(best));
            if dc < db || (dc == db && cand.to_bits().is_multiple_of(2)) {
                best = cand;
            }
        }
        best
    }

    #[test]
    fn bf16_fma_rounds_once() {
        // bf16 values with exponents in [-12, 12]: every product and sum is an exact integer
        // times 2^-80 well inside i128.
        let vals: Vec<bf16> = (0..=0xffffu16)
            .step_by(29)
            .map(bf16::from_bits)
            .filter(|v| {
                let a = v.to_f32().abs();
                a == 0.0 || (2f32.powi(-12)..4096.0).contains(&a)
            })
            .collect();
        let mut checked = 0;
        for &a in &vals {
            for &b in vals.iter().step_by(7) {
                for &c in vals.iter().step_by(11) {
                    let want = exact_fma_bf16(a, b, c);
                    assert_eq!(a.fma_rn(b, c).to_bits(), want.to_bits(), "{a} * {b} + {c}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn add_and_mul_match_f32_rounded_once() {
        for (x, y) in [
            (0.1f32, 0.2f32),
            (65000.0, 1000.0),
            (1e-7, 3e-7),
            (-2.5, 2.5),
        ] {
            let (a, b) = (f16::from_f32(x), f16::from_f32(y));
            assert_eq!(a.add_rn(b), f16::from_f32(a.to_f32() + b.to_f32()));
            assert_eq!(a.mul_rn(b), f16::from_f32(a.to_f32() * b.to_f32()));
            let p = f16x2::new(a, b);
            assert_eq!((p + p).lo, a.add_rn(a));
            assert_eq!(f16x2::from_bits(p.to_bits()), p);
        }
        assert_eq!(bf16::from_f32_fast(1.0).to_f32_fast(), 1.0);
    }
}
