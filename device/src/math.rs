//! Device math for `f32` and `f64`: the functions of `std`'s float types, in kernels.
//!
//! Kernels are `no_std` on the GPU, where `f32::sqrt`, `exp`, `sin`… do not exist. With
//! [`GpuFloat`] in scope (it is in the prelude) the same calls compile in kernels:
//! `x.sqrt()`, `x.exp()`, `x.sin_cos()`, `x.powf(y)`, `x.mul_add(a, b)`, plus `x.rsqrt()`.
//! On the host (the CPU simulator) the calls are `std`'s own.
//!
//! ## How each function is computed on the GPU
//! - `sqrt`, `mul_add`, `floor`, `ceil`, `trunc`, `round`, `abs`, `min`, `max`, `copysign`:
//!   single PTX instructions (`sqrt.rn`, `fma.rn`, `cvt.rmi`, …), exact (correctly rounded).
//! - The transcendental functions: NVIDIA's **libdevice** (`__nv_expf`, …, the functions
//!   behind CUDA's `expf`), linked by the builder when it finds libdevice
//!   (`pip install nvidia-cuda-nvcc`, a CUDA toolkit, or `BERTH_LIBDEVICE`). Their error is
//!   CUDA's documented bound, in ulp (units in the last place), for f32 / f64:
//!
//!   | function | f32 | f64 | | function | f32 | f64 |
//!   |---|---|---|---|---|---|---|
//!   | `rsqrt` | 2 | 1 | | `sin`, `cos`, `tan` | 2 / 2 / 4 | 2 |
//!   | `cbrt` | 1 | 1 | | `asin`, `acos`, `atan` | 2 | 2 |
//!   | `exp`, `exp2`, `exp10` | 2 | 1 | | `sinh`, `cosh`, `tanh` | 3 / 2 / 2 | 2 / 1 / 1 |
//!   | `exp_m1` | 1 | 1 | | `atan2` | 3 | 2 |
//!   | `ln`, `log2`, `log10` | 1 / 1 / 2 | 1 | | `hypot` | 3 | 2 |
//!   | `ln_1p` | 1 | 1 | | `powf` | 4 | 2 |
//!
//!   Without libdevice the builder compiles the `libm` crate's portable Rust versions
//!   instead (musl's algorithms; `exp10` through `pow`): within 1.7 ulp for these functions
//!   on the H200, and slower — Black-Scholes ran at 0.59× its libdevice build, the code
//!   using f64 arithmetic, tables in local memory and more registers
//!   (`bench/results/libm-vs-libdevice.md`).
//! - [`FastMath`] (f32): the hardware approximations nvcc's `-use_fast_math` uses
//!   (`ex2.approx`, `lg2.approx`, `sin.approx`, `rsqrt.approx`, `tanh.approx`…), with PTX's
//!   documented error, for code that prefers speed.

/// `std`'s float functions in kernels, for `f32` and `f64`. In the prelude.
///
/// ```
/// use berth_device::math::GpuFloat;
/// let (s, c) = GpuFloat::sin_cos(0.5f32);
/// assert!((s * s + c * c - 1.0).abs() < 1e-6);
/// assert_eq!(GpuFloat::rsqrt(4.0f64), 0.5);
/// ```
pub trait GpuFloat: Copy {
    /// Square root, correctly rounded.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// // In a kernel: `x.sqrt()`. (On the host `f32` has its own `sqrt`, which a method call
    /// // picks first; the trait's path names the kernel's.)
    /// assert_eq!(GpuFloat::sqrt(2.25f32), 1.5);
    /// ```
    fn sqrt(self) -> Self;
    /// `1 / sqrt(self)`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(0.25f32.rsqrt(), 2.0);
    /// assert_eq!(16.0f64.rsqrt(), 0.25);
    /// ```
    fn rsqrt(self) -> Self;
    /// Cube root.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::cbrt(-8.0f64) + 2.0).abs() < 1e-15);
    /// ```
    fn cbrt(self) -> Self;
    /// `e^self`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::exp(1.0f64) - core::f64::consts::E).abs() < 1e-15);
    /// ```
    fn exp(self) -> Self;
    /// `2^self`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::exp2(0.5f32) - core::f32::consts::SQRT_2).abs() < 1e-6);
    /// ```
    fn exp2(self) -> Self;
    /// `10^self`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::exp10(2.0f64) - 100.0).abs() < 1e-12);
    /// ```
    fn exp10(self) -> Self;
    /// `e^self - 1`, accurate near zero.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let x = 1e-10f64;
    /// // e^x - 1 ≈ x + x²/2: exact to the last digits, where `exp(x) - 1.0` keeps about six.
    /// assert!((GpuFloat::exp_m1(x) - (x + x * x / 2.0)).abs() < 1e-24);
    /// assert!((GpuFloat::exp(x) - 1.0 - x).abs() > 1e-18); // `1.0 + x` rounded in `exp(x)`
    /// ```
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::ln(core::f64::consts::E) - 1.0).abs() < 1e-15);
    /// ```
    fn ln(self) -> Self;
    /// Base-2 logarithm.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::log2(1024.0f32) - 10.0).abs() < 1e-6);
    /// ```
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::log10(1000.0f64) - 3.0).abs() < 1e-15);
    /// ```
    fn log10(self) -> Self;
    /// `ln(1 + self)`, accurate near zero.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let x = 1e-10f64;
    /// // ln(1 + x) ≈ x - x²/2, to the last digits: `1.0 + x` would already have rounded x.
    /// assert!((GpuFloat::ln_1p(x) - (x - x * x / 2.0)).abs() < 1e-24);
    /// ```
    fn ln_1p(self) -> Self;
    /// Sine (radians).
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::sin(core::f64::consts::FRAC_PI_6) - 0.5).abs() < 1e-15);
    /// ```
    fn sin(self) -> Self;
    /// Cosine (radians).
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::cos(core::f32::consts::FRAC_PI_3) - 0.5).abs() < 1e-6);
    /// ```
    fn cos(self) -> Self;
    /// Sine and cosine at once.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let (s, c) = GpuFloat::sin_cos(0.3f64);
    /// assert!((s - GpuFloat::sin(0.3f64)).abs() < 1e-15 && (s * s + c * c - 1.0).abs() < 1e-15);
    /// ```
    fn sin_cos(self) -> (Self, Self);
    /// Tangent.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::tan(core::f64::consts::FRAC_PI_4) - 1.0).abs() < 1e-15);
    /// ```
    fn tan(self) -> Self;
    /// Arcsine.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::asin(1.0f64) - core::f64::consts::FRAC_PI_2).abs() < 1e-15);
    /// ```
    fn asin(self) -> Self;
    /// Arccosine.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::acos(-1.0f32) - core::f32::consts::PI).abs() < 1e-6);
    /// ```
    fn acos(self) -> Self;
    /// Arctangent.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::atan(1.0f64) - core::f64::consts::FRAC_PI_4).abs() < 1e-15);
    /// ```
    fn atan(self) -> Self;
    /// Four-quadrant arctangent of `self / other`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// // The angle of the point (x, y) = (-1, 1): second quadrant, 3π/4.
    /// let angle = GpuFloat::atan2(1.0f64, -1.0);
    /// assert!((angle - 3.0 * core::f64::consts::FRAC_PI_4).abs() < 1e-15);
    /// ```
    fn atan2(self, other: Self) -> Self;
    /// Hyperbolic sine.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let e = core::f64::consts::E;
    /// assert!((GpuFloat::sinh(1.0f64) - (e - 1.0 / e) / 2.0).abs() < 1e-15);
    /// ```
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let e = core::f64::consts::E;
    /// assert!((GpuFloat::cosh(1.0f64) - (e + 1.0 / e) / 2.0).abs() < 1e-15);
    /// ```
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::tanh(0.5f64) - 0.462_117_157_260_009_8).abs() < 1e-15);
    /// assert_eq!(GpuFloat::tanh(20.0f32), 1.0); // saturated in f32
    /// ```
    fn tanh(self) -> Self;
    /// `self^n`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert!((GpuFloat::powf(2.0f64, 0.5) - core::f64::consts::SQRT_2).abs() < 1e-15);
    /// ```
    fn powf(self, n: Self) -> Self;
    /// `self^n` for an integer power.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(GpuFloat::powi(3.0f32, 4), 81.0);
    /// assert_eq!(GpuFloat::powi(2.0f64, -2), 0.25);
    /// ```
    fn powi(self, n: i32) -> Self;
    /// `sqrt(self² + other²)` without undue overflow.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(GpuFloat::hypot(3.0f32, 4.0), 5.0);
    /// // Squaring 3e30 would overflow f32; the result does not.
    /// assert!((GpuFloat::hypot(3e30f32, 4e30) / 5e30 - 1.0).abs() < 1e-6);
    /// ```
    fn hypot(self, other: Self) -> Self;
    /// `self * a + b` with one rounding.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// let x = 1.0 + f64::EPSILON;
    /// // x² = 1 + 2ε + ε²: the fused form keeps the ε² that a rounded product loses.
    /// assert_eq!(GpuFloat::mul_add(x, x, -(1.0 + 2.0 * f64::EPSILON)), f64::EPSILON * f64::EPSILON);
    /// assert_eq!(x * x - (1.0 + 2.0 * f64::EPSILON), 0.0);
    /// ```
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Largest integer not above `self`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!((GpuFloat::floor(1.5f32), GpuFloat::floor(-1.5f32)), (1.0, -2.0));
    /// ```
    fn floor(self) -> Self;
    /// Smallest integer not below `self`.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!((GpuFloat::ceil(1.5f32), GpuFloat::ceil(-1.5f32)), (2.0, -1.0));
    /// ```
    fn ceil(self) -> Self;
    /// Nearest integer, halves away from zero.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!((GpuFloat::round(2.5f64), GpuFloat::round(-2.5f64)), (3.0, -3.0));
    /// ```
    fn round(self) -> Self;
    /// Integer part.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!((GpuFloat::trunc(2.7f32), GpuFloat::trunc(-2.7f32)), (2.0, -2.0));
    /// ```
    fn trunc(self) -> Self;
    /// Absolute value.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!((GpuFloat::abs(-0.5f64), GpuFloat::abs(0.5f64)), (0.5, 0.5));
    /// ```
    fn abs(self) -> Self;
    /// Minimum (a NaN argument yields the other).
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(GpuFloat::min(1.0f32, -2.0), -2.0);
    /// assert_eq!(GpuFloat::min(1.0f32, f32::NAN), 1.0);
    /// ```
    fn min(self, other: Self) -> Self;
    /// Maximum (a NaN argument yields the other).
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(GpuFloat::max(1.0f64, -2.0), 1.0);
    /// assert_eq!(GpuFloat::max(f64::NAN, -2.0), -2.0);
    /// ```
    fn max(self, other: Self) -> Self;
    /// `self`'s magnitude with `sign`'s sign.
    ///
    /// ```
    /// use berth_device::math::GpuFloat;
    /// assert_eq!(GpuFloat::copysign(3.0f32, -0.0), -3.0);
    /// assert_eq!(GpuFloat::copysign(-3.0f64, 1.0), 3.0);
    /// ```
    fn copysign(self, sign: Self) -> Self;
}

/// Hardware approximations for `f32` (what nvcc's `-use_fast_math` substitutes), with
/// PTX's documented error; denormal inputs and results flush to zero. In the prelude. On the
/// host they compute the accurate functions.
///
/// | method | PTX | error (PTX ISA) |
/// |---|---|---|
/// | `exp2_approx` | `ex2.approx.ftz.f32` | 2 ulp (full range) |
/// | `exp_approx` | `ex2.approx` of `x·log2 e` | 2 + 1.5·\|x\| ulp |
/// | `log2_approx` | `lg2.approx.ftz.f32` | 2⁻²² absolute in [0.5, 2], else 4 ulp |
/// | `ln_approx` | `lg2.approx` · ln 2 | as `log2_approx`, plus one rounding |
/// | `sin_approx`, `cos_approx` | `sin/cos.approx.ftz.f32` | 2⁻²⁰·⁵ absolute in [-π, π] |
/// | `rsqrt_approx` | `rsqrt.approx.ftz.f32` | 2 ulp |
/// | `sqrt_approx` | `sqrt.approx.ftz.f32` | 2 ulp |
/// | `recip_approx` | `rcp.approx.ftz.f32` | 1 ulp |
/// | `tanh_approx` | `tanh.approx.f32` | 2⁻¹⁰·⁹⁸⁷ relative |
///
/// ```
/// use berth_device::math::FastMath;
/// assert!((2.0f32.exp2_approx() - 4.0).abs() < 1e-5);
/// ```
pub trait FastMath: Copy {
    /// `2^self`, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// // Within 2 ulp on the GPU; the accurate function on the host.
    /// assert!((0.5f32.exp2_approx() - core::f32::consts::SQRT_2).abs() < 1e-6);
    /// ```
    fn exp2_approx(self) -> Self;
    /// `e^self`, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// // Error 2 + 1.5·|x| ulp on the GPU: grows with |x|.
    /// assert!((1.0f32.exp_approx() - core::f32::consts::E).abs() < 1e-6);
    /// ```
    fn exp_approx(self) -> Self;
    /// Base-2 logarithm, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((8.0f32.log2_approx() - 3.0).abs() < 1e-6);
    /// ```
    fn log2_approx(self) -> Self;
    /// Natural logarithm, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((core::f32::consts::E.ln_approx() - 1.0).abs() < 1e-6);
    /// ```
    fn ln_approx(self) -> Self;
    /// Sine, approximate (accurate in [-π, π]).
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// // Absolute error 2⁻²⁰·⁵ (about 7e-7) in [-π, π] on the GPU.
    /// assert!((core::f32::consts::FRAC_PI_6.sin_approx() - 0.5).abs() < 1e-6);
    /// ```
    fn sin_approx(self) -> Self;
    /// Cosine, approximate (accurate in [-π, π]).
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((core::f32::consts::FRAC_PI_3.cos_approx() - 0.5).abs() < 1e-6);
    /// ```
    fn cos_approx(self) -> Self;
    /// `1 / sqrt(self)`, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((4.0f32.rsqrt_approx() - 0.5).abs() < 1e-6);
    /// ```
    fn rsqrt_approx(self) -> Self;
    /// Square root, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((2.25f32.sqrt_approx() - 1.5).abs() < 1e-6);
    /// ```
    fn sqrt_approx(self) -> Self;
    /// `1 / self`, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// assert!((8.0f32.recip_approx() - 0.125).abs() < 1e-7);
    /// ```
    fn recip_approx(self) -> Self;
    /// Hyperbolic tangent, approximate.
    ///
    /// ```
    /// use berth_device::math::FastMath;
    /// // Relative error 2⁻¹⁰·⁹⁸⁷ (about 5e-4) on the GPU: coarse, for activations.
    /// let t = 0.5f32.tanh_approx();
    /// assert!((t - 0.462_117_16).abs() < 5e-4 * 0.462_117_16);
    /// ```
    fn tanh_approx(self) -> Self;
}

#[cfg(not(target_arch = "nvptx64"))]
mod imp {
    use super::{FastMath, GpuFloat};

    macro_rules! host_float {
        ($t:ident) => {
            impl GpuFloat for $t {
                #[inline(always)]
                fn rsqrt(self) -> Self {
                    1.0 / $t::sqrt(self)
                }
                #[inline(always)]
                fn exp10(self) -> Self {
                    $t::powf(10.0, self)
                }
                #[inline(always)]
                fn sin_cos(self) -> (Self, Self) {
                    $t::sin_cos(self)
                }
                host_float!(@unary $t: sqrt cbrt exp exp2 exp_m1 ln log2 log10 ln_1p sin cos tan
                    asin acos atan sinh cosh tanh floor ceil round trunc abs);
                host_float!(@binary $t: atan2 powf hypot min max copysign);
                #[inline(always)]
                fn powi(self, n: i32) -> Self {
                    $t::powi(self, n)
                }
                #[inline(always)]
                fn mul_add(self, a: Self, b: Self) -> Self {
                    $t::mul_add(self, a, b)
                }
            }
        };
        (@unary $t:ident: $($f:ident)*) => { $(
            #[inline(always)]
            fn $f(self) -> Self {
                $t::$f(self)
            }
        )* };
        (@binary $t:ident: $($f:ident)*) => { $(
            #[inline(always)]
            fn $f(self, other: Self) -> Self {
                $t::$f(self, other)
            }
        )* };
    }
    host_float!(f32);
    host_float!(f64);

    impl FastMath for f32 {
        fn exp2_approx(self) -> Self {
            self.exp2()
        }
        fn exp_approx(self) -> Self {
            self.exp()
        }
        fn log2_approx(self) -> Self {
            self.log2()
        }
        fn ln_approx(self) -> Self {
            self.ln()
        }
        fn sin_approx(self) -> Self {
            self.sin()
        }
        fn cos_approx(self) -> Self {
            self.cos()
        }
        fn rsqrt_approx(self) -> Self {
            1.0 / self.sqrt()
        }
        fn sqrt_approx(self) -> Self {
            self.sqrt()
        }
        fn recip_approx(self) -> Self {
            1.0 / self
        }
        fn tanh_approx(self) -> Self {
            self.tanh()
        }
    }
}

#[cfg(target_arch = "nvptx64")]
mod imp {
    use super::{FastMath, GpuFloat};
    use core::intrinsics as i;

    /// libdevice's functions, linked by the builder (`--cfg berth_libdevice`).
    #[cfg(berth_libdevice)]
    mod lib {
        unsafe extern "C" {
            pub fn __nv_rsqrtf(x: f32) -> f32;
            pub fn __nv_cbrtf(x: f32) -> f32;
            pub fn __nv_expf(x: f32) -> f32;
            pub fn __nv_exp2f(x: f32) -> f32;
            pub fn __nv_exp10f(x: f32) -> f32;
            pub fn __nv_expm1f(x: f32) -> f32;
            pub fn __nv_logf(x: f32) -> f32;
            pub fn __nv_log2f(x: f32) -> f32;
            pub fn __nv_log10f(x: f32) -> f32;
            pub fn __nv_log1pf(x: f32) -> f32;
            pub fn __nv_sinf(x: f32) -> f32;
            pub fn __nv_cosf(x: f32) -> f32;
            pub fn __nv_sincosf(x: f32, s: *mut f32, c: *mut f32);
            pub fn __nv_tanf(x: f32) -> f32;
            pub fn __nv_asinf(x: f32) -> f32;
            pub fn __nv_acosf(x: f32) -> f32;
            pub fn __nv_atanf(x: f32) -> f32;
            pub fn __nv_atan2f(y: f32, x: f32) -> f32;
            pub fn __nv_sinhf(x: f32) -> f32;
            pub fn __nv_coshf(x: f32) -> f32;
            pub fn __nv_tanhf(x: f32) -> f32;
            pub fn __nv_powf(x: f32, y: f32) -> f32;
            pub fn __nv_powif(x: f32, n: i32) -> f32;
            pub fn __nv_hypotf(x: f32, y: f32) -> f32;
            pub fn __nv_roundf(x: f32) -> f32;

            pub fn __nv_rsqrt(x: f64) -> f64;
            pub fn __nv_cbrt(x: f64) -> f64;
            pub fn __nv_exp(x: f64) -> f64;
            pub fn __nv_exp2(x: f64) -> f64;
            pub fn __nv_exp10(x: f64) -> f64;
            pub fn __nv_expm1(x: f64) -> f64;
            pub fn __nv_log(x: f64) -> f64;
            pub fn __nv_log2(x: f64) -> f64;
            pub fn __nv_log10(x: f64) -> f64;
            pub fn __nv_log1p(x: f64) -> f64;
            pub fn __nv_sin(x: f64) -> f64;
            pub fn __nv_cos(x: f64) -> f64;
            pub fn __nv_sincos(x: f64, s: *mut f64, c: *mut f64);
            pub fn __nv_tan(x: f64) -> f64;
            pub fn __nv_asin(x: f64) -> f64;
            pub fn __nv_acos(x: f64) -> f64;
            pub fn __nv_atan(x: f64) -> f64;
            pub fn __nv_atan2(y: f64, x: f64) -> f64;
            pub fn __nv_sinh(x: f64) -> f64;
            pub fn __nv_cosh(x: f64) -> f64;
            pub fn __nv_tanh(x: f64) -> f64;
            pub fn __nv_pow(x: f64, y: f64) -> f64;
            pub fn __nv_powi(x: f64, n: i32) -> f64;
            pub fn __nv_hypot(x: f64, y: f64) -> f64;
            pub fn __nv_round(x: f64) -> f64;
        }
    }

    #[cfg(not(berth_libdevice))]
    type L32 = libm::Libm<f32>;
    #[cfg(not(berth_libdevice))]
    type L64 = libm::Libm<f64>;

    /// Portable versions where the `libm` crate's own is less accurate than 1 ulp.
    #[cfg(not(berth_libdevice))]
    mod portable {
        /// `10^x` as `pow` (musl's `exp10f` measured 3.3 ulp on the H200; this one 1).
        pub fn exp10_f32(x: f32) -> f32 {
            libm::pow(10.0, f64::from(x)) as f32
        }
        /// `10^x` as `pow` (musl's `exp10` measured 3 ulp).
        pub fn exp10_f64(x: f64) -> f64 {
            libm::pow(10.0, x)
        }
    }

    /// One function body per build: libdevice's when linked, else the `libm` crate's.
    macro_rules! pick {
        ($nv:ident, $libm:path, $($a:expr),*) => {{
            #[cfg(berth_libdevice)]
            // SAFETY: libdevice's functions are pure math on their arguments.
            let r = unsafe { lib::$nv($($a),*) };
            #[cfg(not(berth_libdevice))]
            let r = $libm($($a),*);
            r
        }};
    }

    macro_rules! device_float {
        ($t:ident, $sqrt:ident, $fma:ident, $floor:ident, $ceil:ident, $trunc:ident,
         rsqrt = $rsqrt:ident, sincos = $sincos:ident, round = $round:ident, powi = $powi:ident,
         $(($f:ident, $nv:ident, $libm:path),)* ; $(($f2:ident, $nv2:ident, $libm2:path),)*) => {
            impl GpuFloat for $t {
                #[inline(always)]
                fn sqrt(self) -> Self {
                    i::$sqrt(self)
                }
                #[inline(always)]
                fn rsqrt(self) -> Self {
                    #[cfg(berth_libdevice)]
                    // SAFETY: pure math.
                    let r = unsafe { lib::$rsqrt(self) };
                    #[cfg(not(berth_libdevice))]
                    let r = 1.0 / self.sqrt();
                    r
                }
                #[inline(always)]
                fn sin_cos(self) -> (Self, Self) {
                    #[cfg(berth_libdevice)]
                    {
                        let (mut s, mut c) = (0.0, 0.0);
                        // SAFETY: writes one value through each valid pointer.
                        unsafe { lib::$sincos(self, &mut s, &mut c) };
                        (s, c)
                    }
                    #[cfg(not(berth_libdevice))]
                    {
                        (self.sin(), self.cos())
                    }
                }
                #[inline(always)]
                fn round(self) -> Self {
                    pick!($round, libm::Libm::<$t>::round, self)
                }
                #[inline(always)]
                fn powi(self, n: i32) -> Self {
                    #[cfg(berth_libdevice)]
                    // SAFETY: pure math.
                    let r = unsafe { lib::$powi(self, n) };
                    #[cfg(not(berth_libdevice))]
                    let r = libm::Libm::<$t>::pow(self, n as $t);
                    r
                }
                #[inline(always)]
                fn mul_add(self, a: Self, b: Self) -> Self {
                    i::$fma(self, a, b)
                }
                #[inline(always)]
                fn floor(self) -> Self {
                    i::$floor(self)
                }
                #[inline(always)]
                fn ceil(self) -> Self {
                    i::$ceil(self)
                }
                #[inline(always)]
                fn trunc(self) -> Self {
                    i::$trunc(self)
                }
                #[inline(always)]
                fn abs(self) -> Self {
                    $t::abs(self)
                }
                #[inline(always)]
                fn min(self, other: Self) -> Self {
                    $t::min(self, other)
                }
                #[inline(always)]
                fn max(self, other: Self) -> Self {
                    $t::max(self, other)
                }
                #[inline(always)]
                fn copysign(self, sign: Self) -> Self {
                    $t::copysign(self, sign)
                }
                $(
                    #[inline(always)]
                    fn $f(self) -> Self {
                        pick!($nv, $libm, self)
                    }
                )*
                $(
                    #[inline(always)]
                    fn $f2(self, other: Self) -> Self {
                        pick!($nv2, $libm2, self, other)
                    }
                )*
            }
        };
    }

    device_float!(f32, sqrtf32, fmaf32, floorf32, ceilf32, truncf32,
        rsqrt = __nv_rsqrtf, sincos = __nv_sincosf, round = __nv_roundf, powi = __nv_powif,
        (cbrt, __nv_cbrtf, L32::cbrt), (exp, __nv_expf, L32::exp), (exp2, __nv_exp2f, L32::exp2),
        (exp10, __nv_exp10f, portable::exp10_f32), (exp_m1, __nv_expm1f, L32::expm1), (ln, __nv_logf, L32::log),
        (log2, __nv_log2f, L32::log2), (log10, __nv_log10f, L32::log10), (ln_1p, __nv_log1pf, L32::log1p),
        (sin, __nv_sinf, L32::sin), (cos, __nv_cosf, L32::cos), (tan, __nv_tanf, L32::tan),
        (asin, __nv_asinf, L32::asin), (acos, __nv_acosf, L32::acos), (atan, __nv_atanf, L32::atan),
        (sinh, __nv_sinhf, L32::sinh), (cosh, __nv_coshf, L32::cosh), (tanh, __nv_tanhf, L32::tanh), ;
        (atan2, __nv_atan2f, L32::atan2), (powf, __nv_powf, L32::pow), (hypot, __nv_hypotf, L32::hypot),);
    device_float!(f64, sqrtf64, fmaf64, floorf64, ceilf64, truncf64,
        rsqrt = __nv_rsqrt, sincos = __nv_sincos, round = __nv_round, powi = __nv_powi,
        (cbrt, __nv_cbrt, L64::cbrt), (exp, __nv_exp, L64::exp), (exp2, __nv_exp2, L64::exp2),
        (exp10, __nv_exp10, portable::exp10_f64), (exp_m1, __nv_expm1, L64::expm1), (ln, __nv_log, L64::log),
        (log2, __nv_log2, L64::log2), (log10, __nv_log10, L64::log10), (ln_1p, __nv_log1p, L64::log1p),
        (sin, __nv_sin, L64::sin), (cos, __nv_cos, L64::cos), (tan, __nv_tan, L64::tan),
        (asin, __nv_asin, L64::asin), (acos, __nv_acos, L64::acos), (atan, __nv_atan, L64::atan),
        (sinh, __nv_sinh, L64::sinh), (cosh, __nv_cosh, L64::cosh), (tanh, __nv_tanh, L64::tanh), ;
        (atan2, __nv_atan2, L64::atan2), (powf, __nv_pow, L64::pow), (hypot, __nv_hypot, L64::hypot),);

    /// One PTX instruction on an f32.
    macro_rules! approx {
        ($($f:ident => $ins:literal,)*) => { $(
            #[inline(always)]
            fn $f(self) -> Self {
                let r: f32;
                // SAFETY: an arithmetic instruction on registers; touches no memory.
                unsafe {
                    core::arch::asm!(
                        concat!($ins, " {r}, {x};"),
                        r = out(reg32) r,
                        x = in(reg32) self,
                        options(pure, nomem, nostack),
                    );
                }
                r
            }
        )* };
    }

    impl FastMath for f32 {
        approx! {
            exp2_approx => "ex2.approx.ftz.f32",
            log2_approx => "lg2.approx.ftz.f32",
            sin_approx => "sin.approx.ftz.f32",
            cos_approx => "cos.approx.ftz.f32",
            rsqrt_approx => "rsqrt.approx.ftz.f32",
            sqrt_approx => "sqrt.approx.ftz.f32",
            recip_approx => "rcp.approx.ftz.f32",
            tanh_approx => "tanh.approx.f32",
        }
        #[inline(always)]
        fn exp_approx(self) -> Self {
            (self * core::f32::consts::LOG2_E).exp2_approx()
        }
        #[inline(always)]
        fn ln_approx(self) -> Self {
            self.log2_approx() * core::f32::consts::LN_2
        }
    }
}
