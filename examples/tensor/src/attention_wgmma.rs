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
//! Each warp arrives on the stage's "keys empty" barrier once its scores are done and on its
//! "values empty" barrier once `p · v` is, which the producer waits on before copying into
//! the stage again. The next tile's scores are computed while the previous tile's `p · v`
//! runs, and the two consumers take turns issuing their products, so that one's softmax
//! overlaps the other's products. With `causal`, key tiles after the block's last query are
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
pub use host::{AttentionWgmmaMaps, attention_wgmma_maps, flash_attention_wgmma};

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
/// assert_eq!(berth_examples_tensor::attention_wgmma::attention_wgmma_shared_bytes(128), 5 * 32_768 + 1024);
/// ```
#[must_use]
pub const fn attention_wgmma_shared_bytes(d: usize) -> usize {
    (1 + 2 * FA3_STAGES) * FA3_BM * d * 2 + 1024
}

/// Two elements stored as one 4-byte access.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(4))]
struct Pair<T>([T; 2]);

/// The online softmax's running state of a thread's two rows: the maxima of the raw scores
/// so far, the thread's partial sums of the probabilities, and the scale (log2 units).
struct Softmax {
    m: [f32; 2],
    l: [f32; 2],
    scale_log2: f32,
}

impl Softmax {
    /// One tile: `s` holds the tile's raw scores in an accumulator's layout (64×128, the
    /// thread's two rows), and becomes the probabilities `2^(s·scale_log2 - m·scale_log2)`
    /// against the new running maxima; the sums are rescaled and grow by them. Returns the
    /// factor each row's output accumulator must be rescaled by. With `mask` (the thread's
    /// first column in each 8-column slice and its two rows, for the diagonal tile, whose keys
    /// start at the block's first query), keys after the row's query are left out.
    #[inline(always)]
    fn step(&mut self, s: &mut [f32; 64], mask: Option<(usize, [usize; 2])>) -> [f32; 2] {
        if let Some((c_lo, rows)) = mask {
            unroll! { for i in 0..64 {
                if 8 * (i / 4) + c_lo + i % 2 > rows[i / 2 % 2] {
                    s[i] = f32::NEG_INFINITY;
                }
            }}
        }
        let mut mt = [f32::NEG_INFINITY; 2];
        unroll! { for i in 0..64 {
            mt[i / 2 % 2] = mt[i / 2 % 2].max(s[i]);
        }}
        let mut base = [0.0f32; 2];
        let mut alpha = [0.0f32; 2];
        for h in 0..2 {
            // The four threads of a row (same lane / 4) hold its 128 scores between them.
            let mut mx = mt[h];
            mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 1));
            mx = mx.max(warp::shfl_xor(warp::FULL_MASK, mx, 2));
            let m_new = self.m[h].max(mx);
            // A row with no unmasked key yet keeps a maximum of -inf: subtract 0 instead, so
            // that exp2 gives 0, not NaN.
            base[h] = if m_new == f32::NEG_INFINITY {
                0.0
            } else {
                m_new * self.scale_log2
            };
            alpha[h] = GpuFloat::mul_add(self.m[h], self.scale_log2, -base[h]).exp2_approx();
            self.m[h] = m_new;
            self.l[h] *= alpha[h];
        }
        unroll! { for i in 0..64 {
            let p = GpuFloat::mul_add(s[i], self.scale_log2, -base[i / 2 % 2]).exp2_approx();
            s[i] = p;
            self.l[i / 2 % 2] += p;
        }}
        alpha
    }
}

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

    // SAFETY: every thread of the block reaches the six calls (the checks above stop all of
    // the launch or none of it), and the arrays are used for nothing else.
    let (q_full, k_full, v_full, k_empty, v_empty, turn) = unsafe {
        (
            MBarriers::init(shared_array!(FA3_Q_FULL: [u64; 1]), 1).get(0),
            MBarriers::init(shared_array!(FA3_K_FULL: [u64; FA3_STAGES]), 1),
            MBarriers::init(shared_array!(FA3_V_FULL: [u64; FA3_STAGES]), 1),
            MBarriers::init(shared_array!(FA3_K_EMPTY: [u64; FA3_STAGES]), 8),
            MBarriers::init(shared_array!(FA3_V_EMPTY: [u64; FA3_STAGES]), 8),
            MBarriers::init(shared_array!(FA3_TURN: [u64; 2]), 4),
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
                // The consumers' arrivals of the tile that last used stage `s`, for its keys
                // and then for its values (a fresh barrier's parity-1 wait returns at once:
                // the first pass). The keys are released as soon as their scores are done,
                // so the next keys are copied while the last values are still in use.
                let phase = ((j / FA3_STAGES) as u32 + 1) % 2;
                let key = (first + j * FA3_BN) as u32;
                let (kb, vb) = (k_full.get(s), v_full.get(s));
                k_empty.get(s).wait(phase);
                // SAFETY: each full barrier's one arrival per phase, announcing the bytes of
                // its copies. The stage's keys (values) were last read by the consumers'
                // products, which they waited for before their arrivals on `k_empty`
                // (`v_empty`) waited for here; they read them again only after waiting on the
                // full barrier for this phase.
                unsafe {
                    kb.arrive_expect_tx(tile_bytes);
                    for b in 0..blocks {
                        tma::load(block_of(tile_k(s), b), src_k, key, (64 * b) as u32, kb);
                    }
                }
                v_empty.get(s).wait(phase);
                // SAFETY: as above, for the values.
                unsafe {
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
    let rows = [wg * 64 + r_lo, wg * 64 + r_lo + 8];
    let scale_log2 = scale * core::f32::consts::LOG2_E;
    // Running maxima (of the raw scores) and this thread's partial sums of its two rows.
    let mut state = Softmax {
        m: [f32::NEG_INFINITY; 2],
        l: [0.0; 2],
        scale_log2,
    };
    let mut acc_o = Acc::<OR>::zero();
    // Start `s = q · kᵀ` of tile `j` (after waiting for its keys), into a fresh accumulator.
    //
    // SAFETY (for every caller): the whole warpgroup calls it together (the tile loop's bounds
    // are the same in every thread), after a `fence`. The queries and the stage's keys were
    // written by the copies whose barrier phases this thread waited for, and are not written
    // again before every warp's arrival on `k_empty` for the tile, which follows a `wait` that
    // covers these products.
    let scores = |j: usize, acc_s: &mut Acc<64>| {
        let st = j % FA3_STAGES;
        k_full.get(st).wait(((j / FA3_STAGES) % 2) as u32);
        let tk = tile_k(st);
        for kk in 0..D / 16 {
            let (b, kq) = (kk / 4, 16 * (kk % 4));
            // SAFETY: see above.
            unsafe {
                wgmma::mma_async(
                    acc_s,
                    tile_q.desc::<64>(b * FA3_BN + wg * 64, kq),
                    tk.desc::<128>(b * FA3_BN, kq),
                    kk > 0,
                );
            }
        }
        // SAFETY: see above.
        unsafe { wgmma::commit() };
    };
    // Start `o += p · v` of tile `j` (after waiting for its values).
    //
    // SAFETY (for every caller): as for `scores`, for the stage's values and `v_empty`.
    let values = |j: usize, p: &[RegA<T>; 8], acc_o: &mut Acc<OR>| {
        let st = j % FA3_STAGES;
        v_full.get(st).wait(((j / FA3_STAGES) % 2) as u32);
        let tv = tile_v(st);
        unroll! { for kc in 0..8 {
            // SAFETY: see above.
            unsafe { wgmma::mma_async_rs(acc_o, p[kc], tv.desc_mn::<D>(16 * kc, FA3_BN), true) };
        }}
        // SAFETY: see above.
        unsafe { wgmma::commit() };
    };
    let mask = |j: usize| (causal && j == qt).then_some((c_lo, rows));
    // The two consumers take turns issuing their products (a "ping-pong"): warpgroup `wg`
    // issues its `pass`-th batch after the other's `pass`-th (warpgroup 0 first), so that one
    // warpgroup's softmax runs while the other's products keep the tensor cores busy. Turn
    // barrier `wg` completes a phase on the other warpgroup's four warps' arrivals; a fresh
    // barrier's parity-1 wait returns at once (warpgroup 0's first pass).
    let my_turn = |pass: usize| turn.get(wg).wait(((pass + 1 - wg) % 2) as u32);
    let their_turn = || {
        if warp::lane_id() == 0 {
            // SAFETY: one arrival per warp of this warpgroup per pass (the phase's count is
            // four), after the warp issued its products (`.sync.aligned`: all its lanes).
            unsafe { turn.get(1 - wg).arrive() };
        }
    };
    q_full.wait(0);

    // Tile 0's scores and probabilities; then, per tile `j`, its scores are computed while the
    // previous tile's `p · v` runs, and its softmax while `p · v` finishes.
    let mut acc_s = Acc::<64>::zero();
    my_turn(0);
    // SAFETY: the whole warpgroup reaches the fence and the wait together.
    unsafe { wgmma::fence() };
    scores(0, &mut acc_s);
    their_turn();
    // SAFETY: as for the fence; after the wait the keys of tile 0 are free once every warp
    // arrives.
    unsafe {
        wgmma::wait::<0>();
        if warp::lane_id() == 0 {
            k_empty.get(0).arrive();
        }
    }
    state.step(acc_s.regs_mut(), mask(0));
    let mut p: [RegA<T>; 8] = core::array::from_fn(|kc| RegA::from_acc(acc_s.regs(), kc));
    for j in 1..n_tiles {
        let mut acc_s = Acc::<64>::zero();
        my_turn(j);
        // SAFETY: as for the first fence; it also orders the output's rescale and the new
        // probabilities (registers written since the last products) before the products.
        unsafe { wgmma::fence() };
        scores(j, &mut acc_s);
        values(j - 1, &p, &mut acc_o);
        their_turn();
        // SAFETY: the whole warpgroup reaches the waits together. `wait::<1>` leaves only
        // `p · v` in flight: the scores are ready, and tile `j`'s keys free once every warp
        // arrives.
        unsafe {
            wgmma::wait::<1>();
            if warp::lane_id() == 0 {
                k_empty.get(j % FA3_STAGES).arrive();
            }
        }
        let alpha = state.step(acc_s.regs_mut(), mask(j));
        // SAFETY: as above; after it the products of tile `j - 1` are done, and its values
        // free once every warp arrives.
        unsafe {
            wgmma::wait::<0>();
            if warp::lane_id() == 0 {
                v_empty.get((j - 1) % FA3_STAGES).arrive();
            }
        }
        let ro = acc_o.regs_mut();
        unroll! { for i in 0..64 {
            if i < OR {
                ro[i] *= alpha[i / 2 % 2];
            }
        }}
        p = core::array::from_fn(|kc| RegA::from_acc(acc_s.regs(), kc));
    }
    my_turn(n_tiles);
    // SAFETY: as for the loop's fence and waits. The last stage needs no arrival: the
    // producer copies nothing more.
    unsafe { wgmma::fence() };
    values(n_tiles - 1, &p, &mut acc_o);
    their_turn();
    // SAFETY: as above.
    unsafe { wgmma::wait::<0>() };
    let l = state.l;

    let mut inv = [0.0f32; 2];
    for h in 0..2 {
        let mut s = l[h];
        s += warp::shfl_xor(warp::FULL_MASK, s, 1);
        s += warp::shfl_xor(warp::FULL_MASK, s, 2);
        inv[h] = 1.0 / s;
    }
    let ro = acc_o.regs(); // after the last wait: ordered behind it
    let at0 = (bh * seq + row0 + rows[0]) * d + c_lo;
    #[cfg(target_arch = "nvptx64")]
    let out = o.as_mut_ptr();
    // Registers `4q`, `4q + 1` are row `rows[0]`, columns `8q + c_lo`, `+ 1`; `4q + 2`, `4q + 3`
    // the same columns of row `rows[1]` (`Acc::coords`).
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
