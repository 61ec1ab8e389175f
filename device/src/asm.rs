//! `gpu_or_host!`: inline PTX in a kernel, with the simulator's equivalent beside it.

/// Two implementations of one expression: `gpu` in the kernel built for the GPU (where inline
/// PTX through `core::arch::asm!` is available), `host` everywhere else: the host build that
/// type-checks kernel bodies and the CPU simulator that runs them.
///
/// ```
/// use berth_device::gpu_or_host;
///
/// /// The bitwise majority of three words, in one `lop3.b32` on the GPU.
/// #[inline(always)]
/// fn majority(a: u32, b: u32, c: u32) -> u32 {
///     gpu_or_host! {
///         gpu => {
///             let m: u32;
///             // SAFETY: `lop3.b32` reads three registers and writes one; it touches no
///             // memory.
///             unsafe {
///                 core::arch::asm!(
///                     "lop3.b32 {m}, {a}, {b}, {c}, 0xE8;",
///                     m = out(reg32) m, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
///                     options(pure, nomem, nostack),
///                 );
///             }
///             m
///         },
///         host => (a & b) | (a & c) | (b & c),
///     }
/// }
///
/// assert_eq!(majority(0b1100, 0b1010, 0b0110), 0b1110);
/// ```
///
/// - It is an expression; each arm is one expression (a block for several statements) and
///   both must have the same type. The `gpu` arm is compiled only for the GPU and the `host`
///   arm only for the host, so each is type-checked in its own build: that they compute the
///   same is the author's to make sure, and a test on both backends is the way to check it.
/// - The kernel crate's GPU build enables `asm_experimental_arch` itself; the operands'
///   register classes are `reg16`, `reg32` and `reg64`. Every `asm!` is `unsafe` and needs a
///   `// SAFETY:` comment saying what it reads and writes.
/// - `options(pure, nomem)` lets LLVM move or drop the asm like arithmetic; leave them out
///   for an asm that reads a clock, a special register that changes, or memory.
#[macro_export]
macro_rules! gpu_or_host {
    (gpu => $gpu:expr, host => $host:expr $(,)?) => {{
        #[cfg(target_arch = "nvptx64")]
        let __berth_value = $gpu;
        #[cfg(not(target_arch = "nvptx64"))]
        let __berth_value = $host;
        __berth_value
    }};
}
