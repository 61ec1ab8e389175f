//! Attention on tensor cores: `o = softmax(q · kᵀ · scale [+ causal mask]) · v` for `bf16` or
//! `f16` inputs with `f32` sums, one pass over the keys with an online softmax
//! (FlashAttention-2's forward algorithm), through warp-level `mma.sync` ([`berth::mma`]).

use berth::mma::{self, FragA, FragB, FragC, MmaInput};
use berth::prelude::*;

/// Query rows one block computes: eight warps of 16 rows.
pub const ATTN_BM: usize = 128;
/// Keys (and values) staged in shared memory per step.
pub const ATTN_BN: usize = 64;
/// Threads per block: eight warps.
pub const ATTN_THREADS: usize = 256;

/// Extra elements at the end of each shared-memory row, so that the eight rows one
/// `ldmatrix` reads fall in different banks (the row stride stays a multiple of 16 bytes).
const PAD: usize = 8;
/// The widest head dimension: fragment arrays are sized for it, and a smaller `D` leaves the
/// tail unused (constant indices throughout, so the unused entries are never built on the
/// GPU).
const D_MAX: usize = 128;
/// Shared memory holds 256 rows of `D + PAD` elements: two buffers of 128 rows, each a
/// 64-key tile of `k` then one of `v`. Buffer 1 (rows `0..128`) holds the block's queries
/// first, until they are in registers.
const BUF_ROWS: usize = 2 * ATTN_BN;

/// Pieces of a 64-row tile each thread moves, for the widest head dimension.
const MAX_PER_THREAD: usize = ATTN_BN * D_MAX / 8 / ATTN_THREADS;

/// Eight 2-byte elements, 16-byte aligned: what one vector load or store moves.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Piece([u32; 4]);

/// `x` as 16-byte pieces, where it starts 16-byte aligned (device allocations do): each
/// piece of a row moves in one vector load.
#[inline(always)]
fn pieces<T: MmaInput>(x: Slice<'_, T>) -> Option<&[Piece]> {
    // SAFETY: `T` is `f16` or `bf16` (`MmaInput` is sealed), `#[repr(transparent)]` `u16`s,
    // and a `Piece` is four `u32`s: plain integers, every bit pattern valid both ways;
    // `align_to` hands out only the aligned middle, inside the slice.
    let (head, mid, _) = unsafe { x.as_slice().align_to::<Piece>() };
    head.is_empty().then_some(mid)
}

/// The first shared-memory row of buffer `b` (0 or 1).
#[inline(always)]
const fn buffer_row(b: usize) -> usize {
    (1 - b) * BUF_ROWS
}

/// Bytes of dynamic shared memory a block of the attention kernel with head dimension `d`
/// needs: two buffers of one 64-key tile each of `k` and `v` (the first also holds the block's
/// 128 query rows at the start), in 2-byte elements, rows padded by 8 elements.
///
/// ```
/// assert_eq!(berth_examples_tensor::attention::attention_shared_bytes(128), 69_632);
/// ```
#[must_use]
pub const fn attention_shared_bytes(d: usize) -> usize {
    2 * BUF_ROWS * (d + PAD) * 2
}

/// One block's 128 query rows of attention for one of the `batch·heads` matrices (`q`, `k`,
/// `v`, `o` all `[batch·heads, seq, D]` row-major).
///
/// The block stages its queries in shared memory once and keeps them in registers as `mma`
/// A fragments; then, per 64-key step, it stages `k` and `v`, each warp computes its 16×64 of
/// `s = q · kᵀ` (`f32`), updates the running row maxima and sums, rescales its 16×D output
/// accumulator, rounds the probabilities to `T` in registers (an `mma` C fragment pair is an
/// A fragment's layout) and adds `p · v`. The output is the accumulator over the row sum.
/// With `causal`, steps whose keys all come after the block's last query are not run, and a
/// warp skips a step whose keys all come after its own last query.
#[inline(always)]
fn attention<T: MmaInput + DeviceCopy + HalfExt, const D: usize>(
    seq: usize,
    causal: bool,
    scale: f32,
    q: Slice<T>,
    k: Slice<T>,
    v: Slice<T>,
    mut o: SliceMut<T>,
) {
    let sd = D + PAD;
    let raw = dynamic_shared::<u16>();
    // SAFETY: the dynamic shared array is 16-byte aligned and `raw.len()` `u16`s long, valid
    // for the whole kernel; `f16` and `bf16` are `#[repr(transparent)]` `u16`s.
    let smem = unsafe { Shared::<T>::from_raw(raw.as_ptr().cast(), raw.len()) };

    let tiles = seq / ATTN_BM;
    let (bh, qt) = (block::idx_x() / tiles.max(1), block::idx_x() % tiles.max(1));
    // Causal blocks with more key steps first: the last query tile of each matrix is the
    // heaviest.
    let qt = if causal { tiles.max(1) - 1 - qt } else { qt };
    let (len, row0) = (seq * D, qt * ATTN_BM);
    if seq == 0
        || seq > i32::MAX as usize
        || !seq.is_multiple_of(ATTN_BM)
        || !D.is_multiple_of(16)
        || D > D_MAX
        || q.len() != k.len()
        || q.len() != v.len()
        || q.len() != o.len()
        || (bh + 1) * len > q.len()
        || smem.len() < 2 * BUF_ROWS * sd
        || block::dim_x() != ATTN_THREADS
    {
        fail(
            "flash_attention: seq must be a positive multiple of 128 below 2^31, q, k, v and o batch·heads·seq·d long, the grid batch·heads·(seq / 128) blocks of 256 threads with attention_shared_bytes(d) of dynamic shared memory",
        );
    }
    let base = bh * len;
    let tid = thread::idx_x();
    let (warp, lane) = (tid / 32, warp::lane_id());
    let (g, t) = (lane / 4, lane % 4);
    // This warp's first query row (within the matrix) and the lane's two rows.
    let wq = row0 + warp * 16;
    let (qi0, qi1) = (wq + g, wq + g + 8);

    let (Some(q8), Some(k8), Some(v8)) = (pieces(q), pieces(k), pieces(v)) else {
        fail("flash_attention: q, k and v must start 16-byte aligned (device allocations do)");
    };
    // SAFETY: the dynamic shared array is 16-byte aligned and `raw.len()` `u16`s long, so it
    // holds `raw.len() / 8` whole pieces (the same memory as `smem`).
    let smem8 = unsafe { Shared::<Piece>::from_raw(raw.as_ptr().cast(), raw.len() / 8) };

    // A thread's share of a 64-row tile of `k` or `v`: pieces `tid + 256 j` (8 elements of a
    // row each) for `j < per_thread`; `from`, `to`, `D` and the row stride are multiples of
    // 8, so every piece is 16-byte aligned at both ends.
    let per_row = D / 8;
    let per_thread = ATTN_BN * per_row / ATTN_THREADS;
    let piece = |j: usize| {
        let c = tid + j * ATTN_THREADS;
        (c / per_row, c % per_row * 8)
    };
    let fetch = |src8: &[Piece], from: usize| -> [Piece; MAX_PER_THREAD] {
        // The tile's 64 rows, checked once; each piece's index in it is below its length
        // (`r < ATTN_BN`, `col < D`), which the compiler sees from the block's shape.
        let tile = &src8[from / 8..from / 8 + ATTN_BN * per_row];
        let mut out = [Piece([0; 4]); MAX_PER_THREAD];
        for (j, x) in out.iter_mut().enumerate().take(per_thread) {
            let (r, col) = piece(j);
            *x = tile[(r * D + col) / 8];
        }
        out
    };
    // SAFETY (for every caller): piece `tid + 256 j` of a tile is written by thread `tid`
    // alone, once per staging; a barrier separates every staging from every earlier read of
    // its rows (the last step's products, or the queries' fragment loads before the loop's
    // first staging into buffer 1) and from every later read (the next step's products).
    let put = |to: usize, vals: [Piece; MAX_PER_THREAD]| {
        for (j, x) in vals.into_iter().enumerate().take(per_thread) {
            let (r, col) = piece(j);
            // SAFETY: see above.
            unsafe { smem8.write((to + r * sd + col) / 8, x) };
        }
    };
    let stage = |src8: &[Piece], from: usize, rows: usize, to: usize| {
        for half in 0..rows / ATTN_BN {
            put(
                to + half * ATTN_BN * sd,
                fetch(src8, from + half * ATTN_BN * D),
            );
        }
    };

    stage(q8, base + row0 * D, ATTN_BM, buffer_row(1) * sd);
    stage(k8, base, ATTN_BN, buffer_row(0) * sd);
    stage(v8, base, ATTN_BN, (buffer_row(0) + ATTN_BN) * sd);
    // SAFETY: every thread of the block reaches every barrier of this function the same
    // number of times: the checks above depend only on the block's index and the launch's
    // arguments, so they stop the whole block or none of it, and the loop's trip count
    // depends only on `seq`, `causal` and the block's index.
    unsafe { sync_threads() };
    let nq = D / 16;
    let mut qf = [FragA::<T>::from_fn(|_, _| T::from_f32_fast(0.0)); D_MAX / 16];
    for (kk, f) in qf.iter_mut().enumerate().take(nq) {
        // SAFETY: the whole warp reaches each load (the bounds are the same in every lane);
        // the queries were staged before the barrier above and are not overwritten until
        // after the next; row starts are 16-byte aligned (the stride and every column are
        // multiples of 8).
        *f = unsafe { FragA::ldmatrix(smem, sd, buffer_row(1) + warp * 16, kk * 16) };
    }
    // SAFETY: as for the first barrier. After it, buffer 1 is free for keys and values.
    unsafe { sync_threads() };

    let steps = if causal {
        (row0 + ATTN_BM) / ATTN_BN
    } else {
        seq / ATTN_BN
    };
    let scale_log2 = scale * core::f32::consts::LOG2_E;
    // Where this lane's rows of the step's `ldmatrix` loads start, from the first row and
    // column of the 16×16 block read: for the keys (B of `q · kᵀ`, stored N×K: one
    // `ldmatrix_pair_at` per 16 keys), row `l % 8 + 8 (l / 16)`, column `8 (l / 8 % 2)`; for
    // the values (B of `p · v`, stored K×N: one `ldmatrix_trans_pair_at` per 16 columns),
    // row `l % 16`, column `8 (l / 16)`. Computed once: the loads add only constants.
    let key_at = (lane % 8 + 8 * (lane / 16)) * sd + 8 * (lane / 8 % 2);
    let val_at = lane % 16 * sd + 8 * (lane / 16);
    // Running maxima (of the scaled scores, in log2 units) and this lane's partial sums of
    // rows `qi0`, `qi1`.
    let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
    let mut acc = [FragC::zero(); D_MAX / 8];
    for step in 0..steps {
        // Step `step` reads buffer `step % 2`, staged during the step before (or before the
        // loop). The next tiles are loaded into registers first, so that their loads are in
        // flight during the products, and stored into the other buffer after them; the step
        // before read that buffer. One barrier per step separates both.
        let (kr, vr) = (buffer_row(step % 2), buffer_row(step % 2) + ATTN_BN);
        let next = if step + 1 < steps {
            let from = base + (step + 1) * ATTN_BN * D;
            Some((fetch(k8, from), fetch(v8, from)))
        } else {
            None
        };
        let k0 = step * ATTN_BN;
        // Warp-uniform: the warp's last query comes before every key of the step.
        if !(causal && k0 > wq + 15) {
            let mut s = [FragC::zero(); ATTN_BN / 8];
            for (kk, a) in qf.iter().enumerate().take(nq) {
                for j in 0..ATTN_BN / 16 {
                    // SAFETY: the whole warp reaches each load and product (the condition
                    // above is the same in every lane of the warp, the bounds are constants);
                    // the keys of buffer `step % 2` were staged before the last barrier and
                    // are not written until after the next (this step stages into the other
                    // buffer). Each lane's eight elements are inside the tile and 16-byte
                    // aligned: its row is at most `kr + 63 < 2 BUF_ROWS` (`kr` is 0 or
                    // `BUF_ROWS`), its columns `kk 16 + 8 (l / 8 % 2)..+8` end by `D < sd`,
                    // `smem` holds `2 BUF_ROWS` rows of `sd` (checked above), and `sd` and
                    // every column are multiples of 8 in a 16-byte aligned array.
                    unsafe {
                        let [b0, b1] =
                            FragB::ldmatrix_pair_at(smem, (kr + j * 16) * sd + kk * 16 + key_at);
                        s[2 * j] = mma::mma(*a, b0, s[2 * j]);
                        s[2 * j + 1] = mma::mma(*a, b1, s[2 * j + 1]);
                    }
                }
            }
            // Scale, mask, and the step's row maxima.
            let masked = causal && k0 + ATTN_BN - 1 > wq;
            // Element `e` of fragment `j` is key `k0 + j 8 + 2 t + e % 2`, masked past query
            // `qi`: past `qi - k0 - 2 t` counted from the step's first key and the lane's
            // column (in 32 bits: keys and queries are below `seq <= i32::MAX`, checked
            // above).
            let last = [qi0, qi1].map(|qi| qi as i32 - k0 as i32 - 2 * t as i32);
            let mut x = [[0.0f32; 4]; ATTN_BN / 8];
            let mut mt = [f32::NEG_INFINITY; 2];
            for (j, sj) in s.iter().enumerate() {
                for (e, val) in sj.to_array().into_iter().enumerate() {
                    let y = if masked && (j * 8 + e % 2) as i32 > last[e / 2] {
                        f32::NEG_INFINITY
                    } else {
                        val * scale_log2
                    };
                    x[j][e] = y;
                    mt[e / 2] = mt[e / 2].max(y);
                }
            }
            let mut alpha = [0.0f32; 2];
            let mut base_m = [0.0f32; 2];
            for r in 0..2 {
                // The four lanes of a row (same `g`) hold its 64 scores between them.
                let mut mx = mt[r];
                mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 1));
                mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 2));
                let m_new = m[r].max(mx);
                // A row with no unmasked key yet keeps a maximum of -inf: subtract 0 instead,
                // so that exp2 gives 0, not NaN.
                base_m[r] = if m_new == f32::NEG_INFINITY {
                    0.0
                } else {
                    m_new
                };
                alpha[r] = (m[r] - base_m[r]).exp2_approx();
                m[r] = m_new;
                l[r] *= alpha[r];
            }
            for c in acc.iter_mut().take(D / 8) {
                let a = c.to_array();
                *c = FragC::from_array([
                    a[0] * alpha[0],
                    a[1] * alpha[0],
                    a[2] * alpha[1],
                    a[3] * alpha[1],
                ]);
            }
            let mut p = [[0.0f32; 4]; ATTN_BN / 8];
            for (j, xj) in x.iter().enumerate() {
                for e in 0..4 {
                    let y = (xj[e] - base_m[e / 2]).exp2_approx();
                    p[j][e] = y;
                    l[e / 2] += y;
                }
            }
            for kc in 0..ATTN_BN / 16 {
                // The A fragment of keys `16 kc..16 kc + 16`: its element at (row, column) is
                // C fragment `2 kc + column / 8`'s element `2 (row / 8) + column % 2`, the
                // same lane's.
                let pa = FragA::<T>::from_fn(|r, c| {
                    T::from_f32_fast(p[2 * kc + c / 8][2 * (r / 8) + c % 2])
                });
                for n in 0..D / 16 {
                    // SAFETY: as for the keys' loads, for the values' tile: its rows are at
                    // most `vr + 63 = kr + 127 < 2 BUF_ROWS`, its columns
                    // `n 16 + 8 (l / 16)..+8` end by `D`.
                    unsafe {
                        let [b0, b1] = FragB::ldmatrix_trans_pair_at(
                            smem,
                            (vr + kc * 16) * sd + n * 16 + val_at,
                        );
                        acc[2 * n] = mma::mma(pa, b0, acc[2 * n]);
                        acc[2 * n + 1] = mma::mma(pa, b1, acc[2 * n + 1]);
                    }
                }
            }
        }
        if let Some((nk, nv)) = next {
            let nr = buffer_row((step + 1) % 2);
            put(nr * sd, nk);
            put((nr + ATTN_BN) * sd, nv);
        }
        // SAFETY: as for the first barrier.
        unsafe { sync_threads() };
    }

    let mut inv = [0.0f32; 2];
    for r in 0..2 {
        let mut s = l[r];
        s += warp::shfl_xor(warp::FULL_MASK, s, 1);
        s += warp::shfl_xor(warp::FULL_MASK, s, 2);
        inv[r] = 1.0 / s;
    }
    for (n, frag) in acc.iter().enumerate().take(D / 8) {
        for (e, val) in frag.to_array().into_iter().enumerate() {
            let (r, c) = FragC::coords(lane, e);
            let at = base + (wq + r) * D + n * 8 + c;
            // SAFETY: `(block, warp, n, lane, e)` names each element of `o` once: the blocks
            // cover the matrices' 128-row tiles once each, the warps their block's 16-row
            // strips, `n` the strip's 8-column pieces, and the fragment layout gives each
            // lane four different elements of a 16×8 piece.
            unsafe { o.write(at, T::from_f32_fast(val * inv[e / 2])) };
        }
    }
}

/// Attention over `[batch·heads, seq, D]` row-major `q`, `k`, `v` into `o` on tensor cores:
/// `o = softmax(q · kᵀ · scale) · v` per matrix, with keys after the query masked out when
/// `causal`. `T` is `bf16` or `f16`, `D` 64 or 128; `seq` a multiple of 128. Launch through
/// [`flash_attention`], which checks the arguments and sizes the grid and shared memory.
#[gpu_kernel(instances(T = bf16, f16, D = 64, 128), block = 256)]
pub fn flash_attention_kernel<T, const D: usize>(
    seq: u32,
    causal: bool,
    scale: f32,
    q: &[T],
    k: &[T],
    v: &[T],
    o: &mut [T],
) where
    T: MmaInput + DeviceCopy + HalfExt,
{
    attention::<T, D>(seq as usize, causal, scale, q, k, v, o);
}

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{AttentionInput, flash_attention};
