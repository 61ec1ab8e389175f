//! Small kernels that exercise the kernel language — device math, shared tiles, declared
//! block shapes, contraction — for the tests (`tests/tests/language.rs`) on both backends.

use berth::prelude::*;

/// The f32 functions [`math_f32`] evaluates, in output order.
pub const MATH_F32: &[&str] = &[
    "sqrt",
    "rsqrt",
    "cbrt",
    "exp",
    "exp2",
    "exp10",
    "exp_m1",
    "ln",
    "log2",
    "log10",
    "ln_1p",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "powf",
    "hypot",
    "atan2",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sin_cos.0",
    "sin_cos.1",
    "powi",
];

/// One input through every function of [`MATH_F32`] (the generic form serves f32 and f64).
#[inline(always)]
pub fn math_row<T: GpuFloat + core::ops::Sub<Output = T>>(x: T, y: T) -> [T; 30] {
    let (s, c) = x.sin_cos();
    // asin/acos take |x| ≤ 1: the fractional part (exact in floating point).
    let unit = x - x.trunc();
    [
        x.abs().sqrt(),
        x.abs().rsqrt(),
        x.cbrt(),
        x.exp(),
        x.exp2(),
        x.exp10(),
        x.exp_m1(),
        x.abs().ln(),
        x.abs().log2(),
        x.abs().log10(),
        x.abs().ln_1p(),
        x.sin(),
        x.cos(),
        x.tan(),
        unit.asin(),
        unit.acos(),
        x.atan(),
        x.sinh(),
        x.cosh(),
        x.tanh(),
        x.abs().powf(y),
        x.hypot(y),
        x.atan2(y),
        x.floor(),
        x.ceil(),
        x.round(),
        x.trunc(),
        s,
        c,
        x.powi(3),
    ]
}

/// `out[i * 30 + f]` = function `f` of [`MATH_F32`] at `x[i]` (`y[i]` the second argument).
#[gpu_kernel]
pub fn math_f32(x: &[f32], y: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < x.len() {
        let row = math_row(x[i], y[i]);
        for (f, v) in row.iter().enumerate() {
            // SAFETY: thread `i` (its own index) writes elements `30i .. 30i + 30`, which no
            // other thread's index reaches (`f < 30`).
            unsafe { out.write(i * 30 + f, *v) };
        }
    }
}

/// As [`math_f32`] in f64.
#[gpu_kernel]
pub fn math_f64(x: &[f64], y: &[f64], out: &mut [f64]) {
    let i = thread::index();
    if i < x.len() {
        let row = math_row(x[i], y[i]);
        for (f, v) in row.iter().enumerate() {
            // SAFETY: thread `i` (its own index) writes elements `30i .. 30i + 30`, which no
            // other thread's index reaches (`f < 30`).
            unsafe { out.write(i * 30 + f, *v) };
        }
    }
}

/// The [`FastMath`] approximations of `x[i]` in `out[i * 8 ..]`: exp2, exp, log2, ln, sin,
/// cos, rsqrt, tanh.
#[gpu_kernel]
pub fn fast_math_f32(x: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < x.len() {
        let v = x[i];
        let row = [
            v.exp2_approx(),
            v.exp_approx(),
            v.abs().log2_approx(),
            v.abs().ln_approx(),
            v.sin_approx(),
            v.cos_approx(),
            v.abs().rsqrt_approx(),
            v.tanh_approx(),
        ];
        for (f, r) in row.iter().enumerate() {
            // SAFETY: thread `i` (its own index) writes elements `8i .. 8i + 8`, which no
            // other thread's index reaches (`f < 8`).
            unsafe { out.write(i * 8 + f, *r) };
        }
    }
}

/// `out[i] = a[i] * b[i] + c[i]`: contracted to one FMA on the GPU (nvcc's default).
#[gpu_kernel]
pub fn mul_add_contracted(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = a[i] * b[i] + c[i];
    }
}

/// As [`mul_add_contracted`], kept as a multiply and an add, each rounded.
#[gpu_kernel(fp_contract = false)]
pub fn mul_add_exact(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = a[i] * b[i] + c[i];
    }
}

/// Transpose a row-major `rows × cols` matrix (both multiples of 16) through a 16×16 shared
/// tile: read rows, write columns. Launch with
/// `Grid::new((cols / 16, rows / 16), (16, 16))`.
#[gpu_kernel(block = (16, 16))]
pub fn transpose(rows: u32, cols: u32, m: &[f32], out: &mut [f32]) {
    let tile = shared_array!(T: [[f32; 16]; 16]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let (rows, cols) = (rows as usize, cols as usize);
    let (r, c) = (block::idx_y() * 16 + ty, block::idx_x() * 16 + tx);
    // SAFETY: each thread writes only its own (ty, tx) slot (the block is declared 16×16);
    // the transposed read below comes after the barrier.
    unsafe { tile.row(ty).write(tx, m[r * cols + c]) };
    // SAFETY: every thread of the block reaches the barrier: no branch or return before it.
    unsafe { sync_threads() };
    // Element (c', r') of the output: this block's tile, transposed.
    let (or, oc) = (block::idx_x() * 16 + ty, block::idx_y() * 16 + tx);
    if oc < rows {
        // SAFETY: (or, oc) is thread (c, r)'s transposed position — distinct threads have
        // distinct ones — and with `oc < rows` the index `or * rows + oc` is one-to-one: no
        // other thread touches this element. Slot (tx, ty) of the tile was written by thread
        // (ty, tx) before the barrier, and nobody writes the tile after it.
        unsafe { out.write(or * rows + oc, tile.row(tx).read(ty)) };
    }
}

/// `out[i] = Σ_k x[i*8 + k] * w[k]` with the 8-term sum written out by [`unroll!`].
#[gpu_kernel]
pub fn dot8(x: &[f32], w: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        let mut acc = [0.0f32; 2];
        unroll! { for k in 0..8 {
            acc[k % 2] += x[i * 8 + k] * w[k];
        } }
        out[i] = acc[0] + acc[1];
    }
}

/// `y[i] = a * x[i] + y[i]` in any float type listed in `instances`: one PTX entry per type
/// (`axpy_f32`, `axpy_f64`), launched as `axpy::<f32>(..)` or with the type inferred.
#[gpu_kernel(instances(T = f32, f64))]
pub fn axpy<T>(a: T, x: &[T], y: &mut [T])
where
    T: DeviceCopy + core::ops::Mul<Output = T> + core::ops::Add<Output = T>,
{
    let i = thread::index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// `out[i] = Σ_k x[i * N + k]` for a group size fixed at compile time (`sum_groups_4`,
/// `sum_groups_8`): the loop has a constant trip count, so LLVM writes it out.
#[gpu_kernel(instances(N = 4, 8))]
pub fn sum_groups<const N: usize>(x: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        let mut acc = 0.0f32;
        for k in 0..N {
            acc += x[i * N + k];
        }
        out[i] = acc;
    }
}

/// `out[i]` = the bitwise majority of `x[i]`, `y[i]`, `z[i]` with its bytes reversed: one
/// `lop3.b32` and one `prmt.b32` of inline PTX on the GPU, the same in plain Rust in the
/// simulator ([`gpu_or_host!`]).
#[gpu_kernel]
pub fn majority_swapped(x: &[u32], y: &[u32], z: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        let (a, b, c) = (x[i], y[i], z[i]);
        out[i] = gpu_or_host! {
            gpu => {
                let s: u32;
                // SAFETY: register-only bit operations: `lop3` with the truth table 0xE8
                // (a&b | a&c | b&c), `prmt` with the selector 0x0123 (bytes 3,2,1,0 of `m`);
                // no memory is read or written.
                unsafe {
                    core::arch::asm!(
                        "{{ .reg .b32 m;",
                        "lop3.b32 m, {a}, {b}, {c}, 0xE8;",
                        "prmt.b32 {s}, m, {zero}, 0x0123; }}",
                        s = out(reg32) s,
                        a = in(reg32) a,
                        b = in(reg32) b,
                        c = in(reg32) c,
                        zero = in(reg32) 0u32,
                        options(pure, nomem, nostack),
                    );
                }
                s
            },
            host => ((a & b) | (a & c) | (b & c)).swap_bytes(),
        };
    }
}

/// `y[i] = a * x[i]` on host memory, pipelined (`scale_pinned_pipelined::<f32>(..)`): a
/// generic `elementwise` kernel, its input and output declared of one length (each chunk's
/// are cut alike).
#[gpu_kernel(elementwise, instances(T = f32, f64), same_len(x, y))]
pub fn scale_pinned<T>(a: T, #[pinned_async] x: &[T], #[pinned_async(out)] y: &mut [T])
where
    T: DeviceCopy + core::ops::Mul<Output = T>,
{
    let i = thread::index();
    if i < y.len() {
        y[i] = a * x[i];
    }
}

/// `out[i] = x[i] + y[i]`, the three slices declared of one length: the launcher refuses
/// slices of different lengths, and the body's one test of `i` covers all three accesses.
#[gpu_kernel(same_len(x, y, out))]
pub fn add_same_len(x: &[f32], y: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = x[i] + y[i];
    }
}

/// Fill a 4-element shared array named `BUF` with `v` and sum it.
///
/// # Safety
/// Every thread of the block that has not exited calls it together (the same call, once):
/// it has a block barrier inside, as [`sync_threads`].
#[inline(always)]
unsafe fn small_buf_sum(v: u32) -> u32 {
    let buf = shared_array!(BUF: [u32; 4]);
    let t = thread::idx_x();
    if t < 4 {
        // SAFETY: thread `t` writes only slot `t`.
        unsafe { buf.write(t, v) };
    }
    // SAFETY: every thread of the block reaches the barrier: the whole block calls this
    // function (its contract), and the barrier is outside the branch.
    unsafe { sync_threads() };
    // SAFETY: slots 0..4 were written by threads 0..4 (the block is declared 64 threads)
    // before the barrier; nobody writes them after.
    (0..4).map(|k| unsafe { buf.read(k) }).sum()
}

/// Fill a 64-element shared array also named `BUF` with `v` and sum it.
///
/// # Safety
/// As [`small_buf_sum`]: the whole block calls it together.
#[inline(always)]
unsafe fn large_buf_sum(v: u32) -> u32 {
    let buf = shared_array!(BUF: [u32; 64]);
    let t = thread::idx_x();
    // SAFETY: thread `t` writes only slot `t` (bounds-checked).
    unsafe { buf.write(t, v) };
    // SAFETY: every thread of the block reaches the barrier: the whole block calls this
    // function (its contract), and nothing branches before the barrier.
    unsafe { sync_threads() };
    // SAFETY: slots 0..64 were written by the block's 64 threads (declared) before the
    // barrier; nobody writes them after.
    (0..64).map(|k| unsafe { buf.read(k) }).sum()
}

/// Two shared arrays of one name and different sizes in one module: each use of
/// `shared_array!` is its own array, so neither overruns the other. Launch with blocks of 64
/// threads; `out[block] = 4·a + 64·b`.
#[gpu_kernel(block = 64)]
pub fn same_name_arrays(a: u32, b: u32, #[per_block] out: &mut [u32]) {
    // SAFETY: every thread of the block calls both, once each, under no branch.
    let (small, large) = unsafe { (small_buf_sum(a), large_buf_sum(b)) };
    if let Some(slot) = out.mine() {
        *slot = small + large;
    }
}

/// `out[i] = seed ^ i` for every index `i` a thread owns in its grid-stride loop, and
/// `visits[i] += 1`: with any grid shape (3D blocks and grids included) each element is visited
/// by exactly one thread, once.
#[gpu_kernel]
pub fn own_every_index(seed: u32, out: &mut [u32], visits: &mut [u32]) {
    for i in thread::grid_stride(out.len()) {
        out[i] = seed ^ i.get() as u32;
        if let Some(v) = visits.get_mut(i) {
            *v += 1;
        }
    }
}

/// One value per block of any grid shape: `sums[b]` = the sum of `x` over the threads of
/// block `b` (blocks numbered x-fastest), through shared-memory atomics and a `#[per_block]`
/// output; `count[0]` counts the launch's threads through an `#[atomic]` output.
#[gpu_kernel]
pub fn per_block_sums(x: &[u32], #[per_block] sums: &mut [u32], #[atomic] count: &mut [u32]) {
    let acc = shared_array!(BLOCK_ACC: [u32; 1]);
    if thread::linear_in_block() == 0 {
        // SAFETY: only the block's first thread writes; the atomics come after the barrier.
        unsafe { acc.write(0, 0) };
    }
    // SAFETY: every thread of the block reaches both barriers: they are outside the
    // branches. Element 0 was cleared before the first, so the atomic adds to a written
    // value.
    unsafe {
        sync_threads();
        let i = thread::index();
        if i < x.len() {
            acc.atomic_add(0, x[i]);
        }
        count.atomic_add(0, 1);
        sync_threads();
    }
    if let Some(slot) = sums.mine() {
        // SAFETY: element 0 was written (cleared, then added to) before the barrier; nobody
        // writes it after.
        *slot = unsafe { acc.read(0) };
    }
}
