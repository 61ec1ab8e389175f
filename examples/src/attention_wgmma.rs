//! Attention on Hopper's warpgroup tensor cores: `o = softmax(q · kᵀ · scale [+ causal mask]) ·
//! v` for `bf16` or `f16` inputs with `f32` sums, one pass over the keys with an online
//! softmax, in FlashAttention-3's layout: bulk tensor copies ([`berth::tma`]) feed
//! `wgmma` ([`berth::wgmma`]) through an mbarrier ring, and the probabilities stay in
//! registers as the A operand of the second product.
//!
//! A block of three warpgroups computes 128 query rows of one matrix. Warpgroup 0 is the
//! producer: one of its threads copies the block's queries once, then each 128-key tile of
//! `k` and of `v` into one of two stages (`k` and `v` complete on separate barriers, so the
//! scores start before the values arrive). Warpgroups 1 and 2 are the consumers, 64 query
//! rows each: per tile they compute the 64×128 scores `s = q · kᵀ` (`wgmma`, both operands in
//! shared memory), update the rows' running maxima and sums, rescale the 64×D output
//! accumulator, round the probabilities to `T` in the registers that held the scores (an
//! accumulator's columns `16 j..16 j + 16` are laid out as an A operand), and add `p · v`
//! (`wgmma` with A in registers and `v` read N-major, transposed, from its row-major tile).
//! Each warp then arrives on the stage's "empty" barrier, which the producer waits on before
//! copying into the stage again. With `causal`, key tiles after the block's last query are
//! not loaded, and only the diagonal tile is masked. The producer gives registers back
//! (`setmaxnreg`) and the consumers take them.
//!
//! Operands wider than one 128-byte row (`D` = 128) are copied as blocks of 64 columns, one
//! below the other in the stage ([`berth::wgmma::DescMn`] names both blocks of `v`).

use berth::mbarrier::MBarriers;
use berth::mma::MmaInput;
use berth::prelude::*;
use berth::tma::{self, SwizzledTile, TensorMap};
use berth::wgmma::{self, Acc, RegA};

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{
    AttentionWgmmaInput, AttentionWgmmaMaps, attention_wgmma_maps, flash_attention_wgmma,
};

/// Query rows one block computes: two consumer warpgroups of 64.
pub const FA3_BM: usize = 128;
/// Keys (and values) per tile.
pub const FA3_BN: usize = 128;
/// Stages of the key/value ring.
pub const FA3_STAGES: usize = 2;
/// Threads per block: a producer warpgroup and two consumer warpgroups.
pub const FA3_THREADS: usize = 384;

/// Bytes of dynamic shared memory a block with head dimension `d` needs: the queries and two
/// stages of keys and values, `128 × d` elements of 2 bytes each, and 1024 bytes to align them
/// to the swizzle's pattern.
///
/// ```
/// assert_eq!(berth_examples::attention_wgmma::attention_wgmma_shared_bytes(128), 5 * 32_768 + 1024);
/// ```
#[must_use]
pub const fn attention_wgmma_shared_bytes(d: usize) -> usize {
    (1 + 2 * FA3_STAGES) * FA3_BM * d * 2 + 1024
}

/// Two elements stored as one 4-byte access.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(4))]
struct Pair<T>([T; 2]);

/// One block's 128 query rows; `OR` the output accumulator's registers (`D / 2`), `TR` the
/// rows of one operand's tile in shared memory (`128 · D / 64`: `D / 64` blocks of 128 rows).
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
fn attention<
    T: MmaInput + DeviceCopy + HalfExt,
    const D: usize,
    const OR: usize,
    const TR: usize,
>(
    seq: usize,
    causal: bool,
    scale: f32,
    (q, k, v): (Slice<T>, Slice<T>, Slice<T>),
    maps: Slice<TensorMap>,
    mut o: SliceMut<T>,
) {
    let d = D;
    let blocks = d / 64;
    let smem = dynamic_shared::<T>();
    let tiles = seq / FA3_BM;
    let (bh, qt) = (block::idx_x() / tiles.max(1), block::idx_x() % tiles.max(1));
    // Causal blocks with more key tiles first: the last query tile of each matrix is the
    // heaviest.
    let qt = if causal { tiles.max(1) - 1 - qt } else { qt };
    let len = seq * d;
    if seq == 0
        || !seq.is_multiple_of(FA3_BM)
        || TR != FA3_BN * blocks
        || D != 2 * OR
        || q.len() != k.len()
        || q.len() != v.len()
        || q.len() != o.len()
        || (bh + 1) * len > q.len()
        || maps.len() < 3
        || block::dim_x() != FA3_THREADS
        || smem.len() * 2 < attention_wgmma_shared_bytes(d)
    {
        fail(
            "flash_attention_wgmma: seq must be a positive multiple of 128, q, k, v and o batch·heads·seq·d long, three tensor maps, the grid batch·heads·(seq / 128) blocks of 384 threads with attention_wgmma_shared_bytes(d) of dynamic shared memory",
        );
    }
    // The tiles start at the first 1024-byte boundary of the dynamic shared memory: the
    // queries, then per stage the keys and the values, each `TR` rows of 64 elements.
    let skip = (1024 - smem.as_ptr() as usize % 1024) % 1024 / 2;
    let tile_elems = TR * 64;
    let tile_q = SwizzledTile::<T, TR>::new(smem, skip);
    let tile_k = |s: usize| SwizzledTile::<T, TR>::new(smem, skip + (1 + 2 * s) * tile_elems);
    let tile_v = |s: usize| SwizzledTile::<T, TR>::new(smem, skip + (2 + 2 * s) * tile_elems);
    // Block `b` (columns `64 b..64 b + 64`) of a tile, the destination of one copy.
    let block_of = |tile: SwizzledTile<T, TR>, b: usize| {
        let at = (tile.as_ptr() as usize - smem.as_ptr() as usize) / 2 + b * FA3_BN * 64;
        SwizzledTile::<T, FA3_BN>::new(smem, at)
    };
    let tile_bytes = (tile_elems * 2) as u32;

    // SAFETY: every thread of the block reaches the four calls (the checks above stop all of
    // the launch or none of it), and the arrays are used for nothing else.
    let (q_full, k_full, v_full, empty) = unsafe {
        (
            MBarriers::init(shared_array!(FA3_Q_FULL: [u64; 1]), 1).get(0),
            MBarriers::init(shared_array!(FA3_K_FULL: [u64; FA3_STAGES]), 1),
            MBarriers::init(shared_array!(FA3_V_FULL: [u64; FA3_STAGES]), 1),
            MBarriers::init(shared_array!(FA3_EMPTY: [u64; FA3_STAGES]), 8),
        )
    };
    let row0 = qt * FA3_BM;
    // The matrix's first row in the `[batch·heads·seq, D]` view the tensor maps describe.
    let first = bh * seq;
    let n_tiles = if causal { qt + 1 } else { tiles };
    let t = thread::linear_in_block();
    let group = t / 128;
    if group == 0 {
        // SAFETY: the whole warpgroup runs this branch (its condition is the warpgroup), and
        // 128·24 + 256·240 registers fit the register file.
        unsafe { wgmma::release_registers::<24>() };
        if t == 0 {
            let (src_q, src_k, src_v) = (
                maps[0].source::<T, FA3_BN>(&q),
                maps[1].source::<T, FA3_BN>(&k),
                maps[2].source::<T, FA3_BN>(&v),
            );
            // SAFETY: the barrier's one arrival, announcing the bytes of the copies below;
            // the consumers read the queries only after waiting on it, and nothing writes
            // them again.
            unsafe {
                q_full.arrive_expect_tx(tile_bytes);
                for b in 0..blocks {
                    let dst = block_of(tile_q, b);
                    tma::load(dst, src_q, (first + row0) as u32, (64 * b) as u32, q_full);
                }
            }
            for j in 0..n_tiles {
                let s = j % FA3_STAGES;
                // The consumers' arrivals of the tile that last used stage `s` (a fresh
                // barrier's parity-1 wait returns at once: the first pass).
                empty.get(s).wait(((j / FA3_STAGES) as u32 + 1) % 2);
                let key = (first + j * FA3_BN) as u32;
                // SAFETY: each barrier's one arrival per phase, announcing the bytes of its
                // copies. The stage was last read by the consumers' products, which they
                // waited for before their arrivals on `empty` waited above; they read it
                // again only after waiting on the full barriers for this phase.
                unsafe {
                    let (kb, vb) = (k_full.get(s), v_full.get(s));
                    kb.arrive_expect_tx(tile_bytes);
                    for b in 0..blocks {
                        tma::load(block_of(tile_k(s), b), src_k, key, (64 * b) as u32, kb);
                    }
                    vb.arrive_expect_tx(tile_bytes);
                    for b in 0..blocks {
                        tma::load(block_of(tile_v(s), b), src_v, key, (64 * b) as u32, vb);
                    }
                }
            }
        }
        return;
    }
    // SAFETY: as for the producer's release, for each consumer warpgroup.
    unsafe { wgmma::claim_registers::<240>() };
    let wg = group - 1;
    let tg = t % 128;
    // This thread's two rows (of the block's 128) and its first column in each 8-column slice.
    let (r_lo, c_lo) = Acc::<64>::coords(tg, 0);
    let (qrow0, qrow1) = (wg * 64 + r_lo, wg * 64 + r_lo + 8);
    let scale_log2 = scale * core::f32::consts::LOG2_E;
    // Running maxima (of the scaled scores, in log2 units) and this thread's partial sums of
    // its two rows.
    let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
    let mut acc_o = Acc::<OR>::zero();
    q_full.wait(0);
    for j in 0..n_tiles {
        let st = j % FA3_STAGES;
        let parity = ((j / FA3_STAGES) % 2) as u32;
        k_full.get(st).wait(parity);
        let tk = tile_k(st);
        let mut acc_s = Acc::<64>::zero();
        // SAFETY: the whole warpgroup runs this loop together (its bounds are the same in
        // every thread). The queries and the stage's keys were written by the copies whose
        // barrier phases this thread waited for; the keys are not written again before every
        // warp's arrival on `empty` for this tile, which follows the waits below.
        unsafe {
            wgmma::fence();
            for kk in 0..d / 16 {
                let (b, kq) = (kk / 4, 16 * (kk % 4));
                wgmma::mma_async(
                    &mut acc_s,
                    tile_q.desc::<64>(b * FA3_BN + wg * 64, kq),
                    tk.desc::<128>(b * FA3_BN, kq),
                    kk > 0,
                );
            }
            wgmma::commit();
            wgmma::wait::<0>();
        }
        // Scale, mask (the diagonal tile only: its keys and the block's queries start at the
        // same row), the tile's row maxima.
        let masked = causal && j == qt;
        let s = acc_s.regs_mut();
        let mut mt = [f32::NEG_INFINITY; 2];
        unroll! { for i in 0..64 {
            let key = 8 * (i / 4) + c_lo + i % 2;
            let row = if i / 2 % 2 == 0 { qrow0 } else { qrow1 };
            let y = if masked && key > row {
                f32::NEG_INFINITY
            } else {
                s[i] * scale_log2
            };
            s[i] = y;
            mt[i / 2 % 2] = mt[i / 2 % 2].max(y);
        }}
        let mut base = [0.0f32; 2];
        let mut alpha = [0.0f32; 2];
        for h in 0..2 {
            // The four threads of a row (same `l / 4`) hold its 128 scores between them.
            let mut mx = mt[h];
            mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 1));
            mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 2));
            let m_new = m[h].max(mx);
            // A row with no unmasked key yet keeps a maximum of -inf: subtract 0 instead, so
            // that exp2 gives 0, not NaN.
            base[h] = if m_new == f32::NEG_INFINITY {
                0.0
            } else {
                m_new
            };
            alpha[h] = (m[h] - base[h]).exp2_approx();
            m[h] = m_new;
            l[h] *= alpha[h];
        }
        unroll! { for i in 0..64 {
            let p = (s[i] - base[i / 2 % 2]).exp2_approx();
            s[i] = p;
            l[i / 2 % 2] += p;
        }}
        // The output's rescale: after the last tile's `wait`, before the `fence` below.
        let ro = acc_o.regs_mut();
        unroll! { for i in 0..64 {
            if i < OR {
                ro[i] *= alpha[i / 2 % 2];
            }
        }}
        let p: [RegA<T>; 8] = core::array::from_fn(|kc| RegA::from_acc(acc_s.regs(), kc));
        v_full.get(st).wait(parity);
        let tv = tile_v(st);
        // SAFETY: as for the scores, for the stage's values: written by the copies whose phase
        // this thread waited for, not written again before this warp's arrival below, which
        // follows the wait that covers these products.
        unsafe {
            wgmma::fence();
            unroll! { for kc in 0..8 {
                wgmma::mma_async_rs(&mut acc_o, p[kc], tv.desc_mn::<D>(16 * kc, FA3_BN), true);
            }}
            wgmma::commit();
            wgmma::wait::<0>();
            if warp::lane_id() == 0 {
                empty.get(st).arrive();
            }
        }
    }

    let mut inv = [0.0f32; 2];
    for h in 0..2 {
        let mut s = l[h];
        s += warp::shfl_xor(warp::FULL_MASK, s, 1);
        s += warp::shfl_xor(warp::FULL_MASK, s, 2);
        inv[h] = 1.0 / s;
    }
    let ro = acc_o.regs(); // after the last wait: ordered behind it
    let at0 = (bh * seq + row0 + qrow0) * d + c_lo;
    #[cfg(target_arch = "nvptx64")]
    let out = o.as_mut_ptr();
    // Registers `4q`, `4q + 1` are row `qrow0`, columns `8q + c_lo`, `+ 1`; `4q + 2`, `4q + 3`
    // the same columns of row `qrow1` (`Acc::coords`).
    unroll! { for qq in 0..32 {
        if qq < OR / 4 {
            for h in 0..2 {
                let at = at0 + h * 8 * d + 8 * qq;
                let (x, y) = (
                    T::from_f32_fast(ro[4 * qq + 2 * h] * inv[h]),
                    T::from_f32_fast(ro[4 * qq + 2 * h + 1] * inv[h]),
                );
                // SAFETY: `(block, warpgroup, thread, qq, h)` names each pair of elements of
                // `o` once: the blocks cover the matrices' 128-row tiles once each, the
                // consumers their block's 64-row halves, and the accumulator layout gives each
                // thread of a warpgroup distinct pairs of its 64×D. The pair is inside `o`
                // (its row is below `(bh + 1) · seq` and its columns below `d`, and `o` holds
                // batch·heads·seq·d elements, checked above) and 4-byte aligned (`c_lo` and
                // `d` even, the buffer 256-byte aligned).
                gpu_or_host! {
                    gpu => unsafe { out.add(at).cast::<Pair<T>>().write(Pair([x, y])) },
                    host => unsafe {
                        o.write(at, x);
                        o.write(at + 1, y);
                    },
                }
            }
        }
    }}
}

/// Attention over `[batch·heads, seq, D]` row-major `q`, `k`, `v` into `o` on warpgroup tensor
/// cores (sm_90a): `o = softmax(q · kᵀ · scale) · v` per matrix, with keys after the query
/// masked out when `causal`. `T` is `bf16` or `f16`, `D` 64 or 128, `seq` a multiple of 128;
/// `maps` the tensor maps of `q`, `k` and `v` ([`attention_wgmma_maps`]). Launch through
/// [`flash_attention_wgmma`], which checks the arguments and sizes the grid and shared memory.
#[gpu_kernel(instances(T = bf16, f16, D = 64, 128), block = 384)]
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_wgmma_kernel<T, const D: usize>(
    seq: u32,
    causal: bool,
    scale: f32,
    q: &[T],
    k: &[T],
    v: &[T],
    maps: &[TensorMap],
    o: &mut [T],
) where
    T: MmaInput + DeviceCopy + HalfExt,
{
    if D == 64 {
        attention::<T, 64, 32, 128>(seq as usize, causal, scale, (q, k, v), maps, o);
    } else {
        attention::<T, 128, 64, 256>(seq as usize, causal, scale, (q, k, v), maps, o);
    }
}
