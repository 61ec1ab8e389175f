//! The `wgmma.mma_async` instructions as inline PTX, one function per shape and input type,
//! and the fences that keep reads of the accumulators after their wait. `asm!` needs every
//! accumulator register named, so each function is written out by `with_acc!` and a macro
//! per form: the operands are positional, `{0}` to `{N-1}` for the accumulator's registers.

/// `$form!` with the rest of its arguments, then the accumulator indices `[0 1 … N-2] N-1` for
/// an accumulator of `$regs` registers (32, 64 or 128).
macro_rules! with_acc {
    (32, $form:ident!($($args:tt)*)) => {
        $form!($($args)* [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30] 31);
    };
    (64, $form:ident!($($args:tt)*)) => {
        $form!($($args)* [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62] 63);
    };
    (128, $form:ident!($($args:tt)*)) => {
        $form!($($args)* [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126] 127);
    };
}
pub(super) use with_acc;

/// `wgmma.mma_async` of shape `m64n$n`k16 with both operands in shared memory (descriptors).
macro_rules! mma_ss {
    ($name:ident, $n:literal, $ty:literal, [$($i:literal)*] $last:literal) => {
        #[doc = concat!(
            "`wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
            "`: `acc = a · b + (scale_d ? acc : 0)`."
        )]
        ///
        /// # Safety
        /// As [`super::mma_async`]: the warpgroup reaches it together, the descriptors name
        /// shared-memory operands that nothing writes until the group is waited for.
        #[inline(always)]
        pub(super) unsafe fn $name(acc: &mut [f32; $n / 2], a: u64, b: u64, scale_d: u32) {
            // SAFETY: the caller's contract; the instruction reads shared memory through the
            // descriptors (not `nomem`) and writes only the accumulator registers.
            unsafe {
                core::arch::asm!(
                    "{{",
                    ".reg .pred %berth_p;",
                    "setp.ne.b32 %berth_p, {s}, 0;",
                    concat!(
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " {{",
                        $("{", $i, "}, ",)* "{", $last, "}}}, {a}, {b}, %berth_p, 1, 1, 0, 0;"
                    ),
                    "}}",
                    $(inout(reg32) acc[$i],)*
                    inout(reg32) acc[$last],
                    a = in(reg64) a,
                    b = in(reg64) b,
                    s = in(reg32) scale_d,
                    options(readonly, nostack),
                )
            }
        }
    };
}

with_acc!(32, mma_ss!(m64n64_bf16, 64, "bf16",));
with_acc!(32, mma_ss!(m64n64_f16, 64, "f16",));
with_acc!(64, mma_ss!(m64n128_bf16, 128, "bf16",));
with_acc!(64, mma_ss!(m64n128_f16, 128, "f16",));
with_acc!(128, mma_ss!(m64n256_bf16, 256, "bf16",));
with_acc!(128, mma_ss!(m64n256_f16, 256, "f16",));

/// An empty asm statement tying each of an accumulator's registers.
macro_rules! fence {
    ($name:ident, $regs:literal, [$($i:literal)*] $last:literal) => {
        #[doc = concat!(
            "Ties each of the ", $regs, " accumulator registers to an empty asm statement, so that no read\n",
            "of them moves above the `wgmma.wait_group` before it (LLVM orders asm statements with\n",
            "side effects, but not arithmetic on their register results)."
        )]
        #[inline(always)]
        pub(super) fn $name(acc: &mut [f32; $regs]) {
            // SAFETY: an empty asm statement (a PTX comment naming the registers): it reads and
            // writes nothing.
            unsafe {
                core::arch::asm!(
                    concat!("//", $(" {", $i, "}",)* " {", $last, "}"),
                    $(inout(reg32) acc[$i],)*
                    inout(reg32) acc[$last],
                    options(nostack),
                )
            }
        }
    };
}

with_acc!(32, fence!(fence_operands_32, 32,));
with_acc!(64, fence!(fence_operands_64, 64,));
with_acc!(128, fence!(fence_operands_128, 128,));
