//! The register-A forms of `wgmma.mma_async` (A from registers, B through a descriptor, with
//! B's transpose bit a const parameter) as inline PTX, one function per shape and input type,
//! written out by `with_acc!` (in `ops`) like the shared-memory forms.

use super::ops::with_acc;

/// `wgmma.mma_async` of shape `m64n$n`k16 with A in registers and B through a descriptor.
macro_rules! mma_rs {
    ($name:ident, $n:literal, $ty:literal, [$($i:literal)*] $last:literal) => {
        #[doc = concat!(
            "`wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
            "` with A in registers: `acc = a · b +\n(scale_d ? acc : 0)`, B N-major when `TB` is 1."
        )]
        ///
        /// # Safety
        /// As [`super::mma_async_rs`]: the warpgroup reaches it together, the descriptor names a
        /// shared-memory operand that nothing writes until the group is waited for.
        #[inline(always)]
        pub(super) unsafe fn $name<const TB: u32>(
            acc: &mut [f32; $n / 2],
            a: [u32; 4],
            b: u64,
            scale_d: u32,
        ) {
            // SAFETY: the caller's contract; the instruction reads shared memory through the
            // descriptor (not `nomem`), the A registers, and writes only the accumulator registers.
            unsafe {
                core::arch::asm!(
                    "{{",
                    ".reg .pred %berth_p;",
                    "setp.ne.b32 %berth_p, {s}, 0;",
                    concat!(
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " {{",
                        $("{", $i, "}, ",)* "{", $last, "}}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, %berth_p, 1, 1, {tb};"
                    ),
                    "}}",
                    $(inout(reg32) acc[$i],)*
                    inout(reg32) acc[$last],
                    a0 = in(reg32) a[0],
                    a1 = in(reg32) a[1],
                    a2 = in(reg32) a[2],
                    a3 = in(reg32) a[3],
                    b = in(reg64) b,
                    s = in(reg32) scale_d,
                    tb = const TB,
                    options(readonly, nostack),
                )
            }
        }
    };
}

with_acc!(32, mma_rs!(rs_m64n64_bf16, 64, "bf16",));
with_acc!(32, mma_rs!(rs_m64n64_f16, 64, "f16",));
with_acc!(64, mma_rs!(rs_m64n128_bf16, 128, "bf16",));
with_acc!(64, mma_rs!(rs_m64n128_f16, 128, "f16",));
with_acc!(128, mma_rs!(rs_m64n256_bf16, 256, "bf16",));
with_acc!(128, mma_rs!(rs_m64n256_f16, 256, "f16",));
