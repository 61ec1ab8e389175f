//! A Hopper GEMM: `c = a · bᵀ` with `bf16` (or `f16`) `a` (`m × k`) and `b` (`n × k`), both
//! row-major, and `f32` products and sums into row-major `c` (`m × n`), on warpgroup tensor
//! cores ([`berth::wgmma`]) fed by bulk tensor copies ([`berth::tma`]).
//!
//! A block of three warpgroups computes a 128×256 tile of `c`. Warpgroup 0 is the producer:
//! one of its threads walks along `k` in steps of 64, copying the step's 128×64 slice of `a`
//! and 256×64 slice of `b` into one of four shared-memory stages with two bulk copies, which
//! complete on the stage's "full" barrier. Warpgroups 1 and 2 are the consumers, 64 rows of
//! the tile each: per step they wait on the stage's full barrier, run four
//! `wgmma.m64n256k16` (one per 16 columns of the step) into 128 `f32` accumulators per
//! thread, wait for the previous step's products (keeping this step's in flight), and arrive
//! on the previous stage's "empty" barrier (one arrival per warp), which the producer waits on
//! before copying into that stage again. The producer gives
//! registers back (`setmaxnreg`) and the consumers take them.

use berth::mbarrier::MBarriers;
use berth::mma::MmaInput;
use berth::prelude::*;
use berth::tma::{self, SwizzledTile, TensorMap};
use berth::wgmma::{self, Acc};

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{WgmmaGemmInput, WgmmaGemmMaps, wgmma_gemm, wgmma_gemm_maps};

/// Rows of `c` one block computes.
pub const WG_BM: usize = 128;
/// Columns of `c` one block computes.
pub const WG_BN: usize = 256;
/// The depth of one step (64 `bf16`: one 128-byte swizzled row).
pub const WG_BK: usize = 64;
/// Shared-memory stages of the copy ring.
pub const WG_STAGES: usize = 4;
/// Threads per block: a producer warpgroup and two consumer warpgroups.
pub const WG_THREADS: usize = 384;
/// Elements of one stage: the slices of `a` and of `b`.
const STAGE: usize = (WG_BM + WG_BN) * WG_BK;
/// Bytes one stage's two copies write.
const STAGE_BYTES: u32 = (STAGE * 2) as u32;

/// Bytes of dynamic shared memory a block needs: the stages, and 1024 bytes to align them to
/// the swizzle's 1024-byte pattern.
///
/// ```
/// assert_eq!(berth_examples_tensor::wgmma_gemm::WG_SHARED_BYTES, 4 * 49_152 + 1024);
/// ```
pub const WG_SHARED_BYTES: usize = WG_STAGES * STAGE * 2 + 1024;

/// The block's 128×256 tile of `c = a · bᵀ`; `maps` holds the tensor maps of `a` (boxes of
/// 128 rows) and `b` (256 rows), `m`, `n` multiples of 128 and 256, `k` of 64.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gemm<T: MmaInput + DeviceCopy>(
    m: usize,
    n: usize,
    k: usize,
    a: Slice<T>,
    b: Slice<T>,
    maps: Slice<TensorMap>,
    mut c: SliceMut<f32>,
) {
    let smem = dynamic_shared::<T>();
    let tiles_m = m / WG_BM;
    let tiles_n = n / WG_BN;
    if m == 0
        || n == 0
        || k == 0
        || !m.is_multiple_of(WG_BM)
        || !n.is_multiple_of(WG_BN)
        || !k.is_multiple_of(WG_BK)
        || block::idx_x() >= tiles_m * tiles_n
        || c.len() < m * n
        || maps.len() < 2
        || block::dim_x() != WG_THREADS
        || smem.len() * 2 < WG_SHARED_BYTES
    {
        fail(
            "wgmma_gemm: m, n, k must be positive multiples of 128, 256 and 64, the grid (m / 128)·(n / 256) blocks of 384 threads with WG_SHARED_BYTES of dynamic shared memory, c m·n long and two tensor maps",
        );
    }
    // The stages start at the first 1024-byte boundary of the dynamic shared memory.
    let skip = (1024 - smem.as_ptr() as usize % 1024) % 1024 / 2;
    let tile_a = |s: usize| SwizzledTile::<T, WG_BM>::new(smem, skip + s * STAGE);
    let tile_b = |s: usize| SwizzledTile::<T, WG_BN>::new(smem, skip + s * STAGE + WG_BM * WG_BK);

    // Tiles in groups of 8 rows of tiles, column by column inside a group, so the blocks
    // running at once share slices of `a` and `b` in L2.
    const GROUP: usize = 8;
    let bid = block::idx_x();
    let per_group = GROUP * tiles_n;
    let first_m = bid / per_group * GROUP;
    let rows_in_group = (tiles_m - first_m).min(GROUP);
    let (tile_m, tile_n) = (
        first_m + bid % per_group % rows_in_group,
        bid % per_group / rows_in_group,
    );
    let (row0, col0) = (tile_m * WG_BM, tile_n * WG_BN);

    // SAFETY: every thread of the block reaches both calls (the checks above stop all of the
    // launch or none of it), and the arrays are used for nothing else.
    let (full, empty) = unsafe {
        (
            MBarriers::init(shared_array!(WG_FULL: [u64; WG_STAGES]), 1),
            MBarriers::init(shared_array!(WG_EMPTY: [u64; WG_STAGES]), 8),
        )
    };
    let steps = k / WG_BK;
    let t = thread::linear_in_block();
    let group = t / 128;
    if group == 0 {
        // SAFETY: the whole warpgroup runs this branch (its condition is the warpgroup), and
        // 128·40 + 256·232 registers fit the register file.
        unsafe { wgmma::release_registers::<40>() };
        if t == 0 {
            let (src_a, src_b) = (
                maps[0].source::<T, WG_BM>(&a),
                maps[1].source::<T, WG_BN>(&b),
            );
            for step in 0..steps {
                let s = step % WG_STAGES;
                // The consumers' arrivals of the step that last used stage `s` (a fresh
                // barrier's parity-1 wait returns at once: the first pass).
                empty.get(s).wait(((step / WG_STAGES) as u32 + 1) % 2);
                let bar = full.get(s);
                // SAFETY: the stage's one arrival per phase, announcing the bytes of the two
                // copies below. The stage was last read by the consumers' products, which
                // they waited for before their arrivals on the empty barrier waited above;
                // the consumers read it again only after waiting on `bar` for this phase.
                unsafe {
                    bar.arrive_expect_tx(STAGE_BYTES);
                    tma::load(tile_a(s), src_a, row0 as u32, (step * WG_BK) as u32, bar);
                    tma::load(tile_b(s), src_b, col0 as u32, (step * WG_BK) as u32, bar);
                }
            }
        }
        return;
    }
    // SAFETY: as for the producer's release, for each consumer warpgroup.
    unsafe { wgmma::claim_registers::<232>() };
    let half = (group - 1) * 64;
    let mut acc = Acc::<128>::zero();
    for step in 0..steps {
        let s = step % WG_STAGES;
        full.get(s).wait(((step / WG_STAGES) % 2) as u32);
        let (ta, tb) = (tile_a(s), tile_b(s));
        // SAFETY: the whole warpgroup runs this loop together (its bounds are the same in
        // every thread). Stage `s` was written by the copies whose phase of `full` this thread
        // waited for, and is not written again before this warp's arrival on `empty` for it,
        // which follows a wait that covers these products: the next step's `wait::<1>`
        // (which leaves only that step's group in flight), or the one after the loop.
        unsafe {
            wgmma::fence();
            for kk in 0..WG_BK / 16 {
                wgmma::mma_async(
                    &mut acc,
                    ta.desc::<64>(half, 16 * kk),
                    tb.desc::<256>(0, 16 * kk),
                    step > 0 || kk > 0,
                );
            }
            wgmma::commit();
            // The previous step's products are done: its stage may be copied into again,
            // while this step's run on.
            wgmma::wait::<1>();
            if step > 0 && warp::lane_id() == 0 {
                empty.get((step - 1) % WG_STAGES).arrive();
            }
        }
    }
    // SAFETY: the whole warpgroup reaches it. The accumulators are read below, after it.
    unsafe { wgmma::wait::<0>() };
    let tg = t % 128;
    let regs = acc.regs(); // after the last wait: ordered behind it
    // Registers `4q`, `4q + 1` are row `r` columns `8q + c0`, `+ 1`; `4q + 2`, `4q + 3` the same
    // columns of row `r + 8` (`Acc::coords`).
    let (r, c0) = Acc::<128>::coords(tg, 0);
    let first = (row0 + half + r) * n + col0 + c0;
    #[cfg(target_arch = "nvptx64")]
    let out = c.as_mut_ptr();
    // Unrolled (a rolled loop would index the accumulators, which puts them in local memory),
    // a pair of neighbouring columns per store.
    unroll! { for q in 0..32 {
        for h in 0..2 {
            let at = first + h * 8 * n + 8 * q;
            let (x, y) = (regs[4 * q + 2 * h], regs[4 * q + 2 * h + 1]);
            // SAFETY: `(block, warpgroup, thread, q, h)` names each pair of elements of `c`
            // once: the blocks tile `c` in 128×256 (the grouped order is a bijection of the
            // block indices), the consumers their block's tile in 64-row halves, and the
            // accumulator layout gives each thread of a warpgroup distinct pairs of its 64×256.
            // The pair is inside `c`: its row `row0 + half + r + 8h < m` and its columns
            // `col0 + c0 + 8q + 1 < n` (the tile is inside the matrix, and `c.len() >= m * n`,
            // checked above), and 8-byte aligned (`c0` and `n` even, the buffer 256-byte
            // aligned).
            gpu_or_host! {
                gpu => unsafe { out.add(at).cast::<Pair>().write(Pair([x, y])) },
                host => unsafe {
                    c.write(at, x);
                    c.write(at + 1, y);
                },
            }
        }
    }}
}

/// Two `f32` stored as one 8-byte access.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(8))]
struct Pair([f32; 2]);

/// `c = a · bᵀ` for `a` (`m × k`) and `b` (`n × k`) of `T`, row-major, `f32` out (`m × n`):
/// launch through [`wgmma_gemm`], which makes the grid and the shared memory.
#[gpu_kernel(instances(T = bf16, f16), block = 384)]
pub fn wgmma_gemm_kernel<T>(
    m: u32,
    n: u32,
    k: u32,
    a: &[T],
    b: &[T],
    maps: &[TensorMap],
    c: &mut [f32],
) where
    T: MmaInput + DeviceCopy,
{
    gemm(m as usize, n as usize, k as usize, a, b, maps, c);
}
