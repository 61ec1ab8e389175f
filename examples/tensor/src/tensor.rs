//! Matrix products on tensor cores: `c = a · b` with `f16` or `bf16` inputs and `f32` sums,
//! through warp-level `mma.sync` ([`berth::mma`]).

use berth::async_copy;
use berth::mma::{self, FragA, FragB, FragC, MmaInput};
use berth::prelude::*;

/// Rows of `c` one block of [`hgemm_f16`] / [`hgemm_bf16`] computes.
pub const MMA_BM: usize = 128;
/// Columns of `c` one block computes.
pub const MMA_BN: usize = 128;
/// The depth of one step: columns of `a` and rows of `b` staged in shared memory at a time.
pub const MMA_BK: usize = 64;
/// Columns of `c` one warp computes (of 64 rows): each of its `mma` A fragments meets
/// `MMA_WN / 8` B fragments.
const MMA_WN: usize = 64;
/// Threads per block: four warps, two along M by two along N, each computing 64×64 of `c`.
pub const MMA_THREADS: usize = 32 * (MMA_BM / 64) * (MMA_BN / MMA_WN);
/// 16-byte chunks of one staged slice (of `a` or of `b`) each thread copies.
const CHUNKS: usize = MMA_BM * MMA_BK / 8 / MMA_THREADS;
/// Stages of the shared-memory ring: while the warps multiply one, the copies of the next
/// `MMA_STAGES - 1` slices are in flight.
pub const MMA_STAGES: usize = 3;
/// Elements of one staged slice of `a` (128×64) and of `b` (64×128).
const SA_LEN: usize = MMA_BM * MMA_BK;
const SB_LEN: usize = MMA_BK * MMA_BN;
/// Bytes of dynamic shared memory a block of [`hgemm_f16`] / [`hgemm_bf16`] needs:
/// [`MMA_STAGES`] slices of `a` and of `b`, 2-byte elements, no padding (96 KiB).
///
/// ```
/// assert_eq!(berth_examples_tensor::tensor::MMA_SHARED_BYTES, 98_304);
/// ```
pub const MMA_SHARED_BYTES: usize = MMA_STAGES * (SA_LEN + SB_LEN) * 2;
// What the copies' and loads' offsets below rely on: chunk `i` of a thread lies a multiple of
// 8 rows past its chunk 0 in both slices (so the swizzle is the same), every thread copies
// whole chunks of both slices, a row of `a`'s slice is one 128-byte line, and a warp's
// columns of `b` start at a multiple of 64.
const _: () = assert!(
    MMA_THREADS.is_multiple_of(128)
        && (MMA_BM * MMA_BK / 8).is_multiple_of(MMA_THREADS)
        && MMA_BM * MMA_BK == MMA_BK * MMA_BN
        && MMA_WN.is_multiple_of(64)
        && MMA_BK == 64
        && MMA_STAGES >= 2
);
/// Tile rows of `c` that consecutive blocks sweep together (grouped order: the blocks running
/// at once share rows of `a` and columns of `b` in L2).
const GROUP_M: usize = 8;

/// Where element `(r, c)` of a staged 128×64 slice of `a` lives (in elements from the
/// slice's start). Rows are 128 bytes, eight 16-byte chunks; chunk `c / 8` of row `r` is
/// stored at chunk `(c / 8) ^ (r % 8)` of the row, so that the eight consecutive rows one
/// `ldmatrix` reads at the same chunk fall in eight different 16-byte bank groups, and a
/// quarter-warp's eight 16-byte copies fill one whole row.
#[inline(always)]
const fn a_at(r: usize, c: usize) -> usize {
    r * MMA_BK + ((c / 8) ^ (r % 8)) * 8 + c % 8
}

/// Where element `(r, c)` of a staged 64×128 slice of `b` lives. Rows are 256 bytes,
/// sixteen chunks; chunk `c / 8` of row `r` is stored at chunk `(c / 8) ^ (r % 8)`, so that
/// the eight consecutive rows one transposed `ldmatrix` reads at the same chunk fall in eight
/// different bank groups, and a quarter-warp's eight copies fill one aligned 128 bytes of a
/// row.
#[inline(always)]
const fn b_at(r: usize, c: usize) -> usize {
    r * MMA_BN + ((c / 8) ^ (r % 8)) * 8 + c % 8
}

/// Two `f32` stored as one 8-byte access.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(8))]
struct Pair([f32; 2]);

/// The block's part of `c = a · b` (row-major: `a` is `m × k`, `b` is `k × n`, `c` is `m × n`;
/// `m` and `n` multiples of 128, `k` of 64, else the launch stops with a report).
///
/// Each step multiplies a 128×64 slice of `a` by a 64×128 slice of `b`, staged in a ring of
/// [`MMA_STAGES`] slots in dynamic shared memory (swizzled, see [`a_at`] and [`b_at`]) by
/// asynchronous copies ([`berth::async_copy`]: global to shared memory without passing
/// through registers). The copies of the slices `MMA_STAGES - 1` steps ahead are in flight
/// while the warps multiply, so a step waits only for the oldest group
/// (`cp.async.wait_group MMA_STAGES - 2`) and passes one barrier. Each warp computes 64×64 of
/// the 128×128 tile, in four 16-deep sub-steps a step; the fragments of the next sub-step
/// (across steps too) are loaded with `ldmatrix` before the products of the current one.
#[inline(always)]
fn hgemm<T: MmaInput + DeviceCopy>(
    m: usize,
    n: usize,
    k: usize,
    a: Slice<T>,
    b: Slice<T>,
    mut c: SliceMut<f32>,
) {
    let raw = dynamic_shared::<u16>();
    // SAFETY: the dynamic shared array is 16-byte aligned and `raw.len()` `u16`s long, valid
    // for the whole kernel; `f16` and `bf16` are `#[repr(transparent)]` `u16`s.
    let smem = unsafe { Shared::<T>::from_raw(raw.as_ptr().cast(), raw.len()) };
    let (tiles_m, tiles_n) = (m / MMA_BM, n / MMA_BN);
    let pid = block::idx_x();
    if !m.is_multiple_of(MMA_BM)
        || !n.is_multiple_of(MMA_BN)
        || !k.is_multiple_of(MMA_BK)
        || pid >= tiles_m * tiles_n
        || a.len() < m * k
        || b.len() < k * n
        || c.len() < m * n
        || smem.len() * 2 < MMA_SHARED_BYTES
        || block::dim_x() != MMA_THREADS
        || !(a.as_ptr() as usize).is_multiple_of(16)
        || !(b.as_ptr() as usize).is_multiple_of(16)
        || !(c.as_mut_ptr() as usize).is_multiple_of(8)
    {
        fail(
            "hgemm: m and n must be multiples of 128 and k of 64, the grid (m / 128) · (n / 128) blocks of 128 threads with MMA_SHARED_BYTES of dynamic shared memory, and the slices m·k, k·n and m·n long, a and b 16-byte aligned, c 8-byte aligned",
        );
    }
    // Grouped order: blocks `GROUP_M · tiles_n` apart start a new band of `GROUP_M` tile rows,
    // which the blocks between sweep column by column.
    let band = pid / (GROUP_M * tiles_n);
    let first_m = band * GROUP_M;
    let rows_in_band = (tiles_m - first_m).min(GROUP_M);
    let in_band = pid - band * GROUP_M * tiles_n;
    let (row0, col0) = (
        (first_m + in_band % rows_in_band) * MMA_BM,
        in_band / rows_in_band * MMA_BN,
    );
    let tid = thread::idx_x();
    let (warp, lane) = (tid / 32, warp::lane_id());
    // This warp's 64×MMA_WN part of the block's tile.
    let warps_n = MMA_BN / MMA_WN;
    let (wm, wn) = (warp / warps_n * 64, warp % warps_n * MMA_WN);
    let (sa0, sb0) = (0, MMA_STAGES * SA_LEN);

    // This thread's chunks of each slice: chunks `tid + MMA_THREADS · i` (`i < CHUNKS`), 16
    // bytes each. A row of `a`'s slice is eight chunks, of `b`'s sixteen: chunk `i` of `a` is
    // row `tid / 8 + MMA_THREADS / 8 · i`, columns `tid % 8 · 8..+8`; of `b`, row
    // `tid / 16 + MMA_THREADS / 16 · i`, columns `tid % 16 · 8..+8`. The rows of chunk `i` are
    // a multiple of 8 past those of chunk 0, so their swizzle is the same and chunk `i` lands
    // `8 · MMA_THREADS · i` elements past chunk 0 in both slices.
    let (ar, ac) = (tid / 8, tid % 8 * 8);
    let (br, bc) = (tid / 16, tid % 16 * 8);
    let (a_from, a_to) = ((row0 + ar) * k + ac, a_at(ar, ac));
    let (b_from, b_to) = (br * n + col0 + bc, b_at(br, bc));
    let (a_rows, b_rows) = (MMA_THREADS / 8, MMA_THREADS / 16);
    // Stage `kt / MMA_BK % MMA_STAGES` of both slices, for the step whose slices start at
    // column (of `a`) and row (of `b`) `kt`, copied asynchronously (`cp.async.cg`) and
    // committed as one group; with `kt` past `k`, an empty group (so that every step commits one and the wait
    // below counts steps).
    // SAFETY (for the callers): thread `tid` copies its own chunks of the stage, which no
    // other thread copies or writes. Every element of the stage was last read (by
    // `ldmatrix`) in the step `MMA_STAGES` before, before the barrier that precedes the call,
    // and is read again only after a barrier that follows this thread's wait for the group.
    // The last wait of the loop completes every group that holds a copy.
    let copy_stage = |kt: usize| {
        if kt < k {
            let s = kt / MMA_BK % MMA_STAGES;
            for i in 0..CHUNKS {
                // SAFETY: see above. In bounds: `row0 + 128 <= m`, `col0 + 128 <= n` (the
                // grouped order maps block `pid < tiles_m · tiles_n` to a tile inside `c`),
                // `kt + 64 <= k`, the slices are at least `m·k` and `k·n` long, and each stage
                // offset plus `a_at` / `b_at` (a permutation of the chunks of a slice) stays
                // inside its `SA_LEN` / `SB_LEN` of the `MMA_SHARED_BYTES` checked above. Both
                // slices are kernel arguments, which lie in global memory. Aligned: `a` and
                // `b` start 16-byte aligned (checked), `k`, `n`, `kt`, `col0` and the chunk
                // columns are multiples of 8 elements, as are the shared offsets.
                unsafe {
                    async_copy::copy_cg_unchecked::<T, 8>(
                        smem,
                        sa0 + s * SA_LEN + a_to + 8 * MMA_THREADS * i,
                        &a,
                        a_from + a_rows * i * k + kt,
                    );
                    async_copy::copy_cg_unchecked::<T, 8>(
                        smem,
                        sb0 + s * SB_LEN + b_to + 8 * MMA_THREADS * i,
                        &b,
                        b_from + (kt + b_rows * i) * n,
                    );
                }
            }
        }
        async_copy::commit();
    };

    // Lane `lane`'s row of each `ldmatrix` (relative to its stage): for the A fragment `i` of
    // sub-step `kk`, row `wm + 16 i + lane % 16`, columns `16 kk + 8 (lane / 16)..+8`, which
    // `a_at` puts at `a_at(lane % 16, 16 kk + 8 (lane / 16)) + (wm + 16 i) · MMA_BK` (the swizzle
    // of a row depends on its row modulo 8 only); for the B pair `j`, row (k)
    // `16 kk + lane % 16`, columns (n) `wn + 16 j + 8 (lane / 16)..+8`, at `b_at` of those:
    // chunk `wn / 8 + 2 j + lane / 16`, whose low three bits (`2 j + lane / 16`, as `wn` is a
    // multiple of 64 elements) the row flips by `lane % 8`.
    let (lr, lh) = (lane % 16, lane / 16 * 8);
    let a_lane: [usize; MMA_BK / 16] = core::array::from_fn(|kk| a_at(lr, 16 * kk + lh));
    let b_flip = (lane / 16) ^ (lane % 8);
    let b_lane = |kk: usize, j: usize| (16 * kk + lr) * MMA_BN + wn + ((2 * j) ^ b_flip) * 8;
    // The warp's fragments of sub-step `kk` (`< MMA_BK / 16`) of stage `s`.
    // SAFETY (for the callers): all 32 lanes of each warp make every call together (its
    // arguments are the same in every lane but the lane's own row). The stage was copied by
    // threads that waited for their copies before a barrier that precedes the call, and is
    // not written until after the barrier that follows the warp's last read of it. Rows are
    // inside their stage (`a_at` and `b_at` of coordinates inside the slice) and 16-byte
    // aligned: every offset is a multiple of 8 elements of the 16-byte aligned array.
    let load = |s: usize, kk: usize| {
        let (a_base, b_base) = (sa0 + s * SA_LEN + wm * MMA_BK, sb0 + s * SB_LEN);
        // SAFETY: see above.
        unsafe {
            let af: [FragA<T>; 4] = core::array::from_fn(|i| {
                FragA::ldmatrix_at(smem, a_base + 16 * i * MMA_BK + a_lane[kk])
            });
            let pairs: [[FragB<T>; 2]; MMA_WN / 16] = core::array::from_fn(|j| {
                FragB::ldmatrix_trans_pair_at(smem, b_base + b_lane(kk, j))
            });
            let bf: [FragB<T>; MMA_WN / 8] = core::array::from_fn(|j| pairs[j / 2][j % 2]);
            (af, bf)
        }
    };

    let mut acc = [[FragC::zero(); MMA_WN / 8]; 4];
    let mut product = |(af, bf): ([FragA<T>; 4], [FragB<T>; MMA_WN / 8])| {
        for (i, a) in af.iter().enumerate() {
            for (j, b) in bf.iter().enumerate() {
                // SAFETY: all 32 lanes of each warp reach every `mma` together (no branch
                // depends on the lane).
                acc[i][j] = unsafe { mma::mma(*a, *b, acc[i][j]) };
            }
        }
    };

    let steps = k / MMA_BK;
    // Prologue: the first `MMA_STAGES - 1` slices in flight, one group each.
    for st in 0..MMA_STAGES - 1 {
        copy_stage(st * MMA_BK);
    }
    // The first group is complete (at most `MMA_STAGES - 2` newer ones in flight); after the
    // barrier every thread's copies of stage 0 are.
    async_copy::wait::<{ MMA_STAGES - 2 }>();
    // SAFETY: every thread of the block reaches every barrier of this function the same
    // number of times: the checks above stop the whole launch or none of it, and the loop's
    // trip count depends only on `k`.
    unsafe { sync_threads() };
    let mut cur = load(0, 0);
    for step in 0..steps {
        let s = step % MMA_STAGES;
        // The slot of step `step + MMA_STAGES - 1` was last read in step `step - 1`, before
        // the barrier at that step's end.
        copy_stage((step + MMA_STAGES - 1) * MMA_BK);
        for kk in 1..MMA_BK / 16 {
            let next = load(s, kk);
            product(cur);
            cur = next;
        }
        // Step `step + 1`'s group is complete (the groups of the `MMA_STAGES - 2` steps after
        // it may not be); after the barrier every thread's are, and every warp has finished
        // reading stage `s`.
        async_copy::wait::<{ MMA_STAGES - 2 }>();
        // SAFETY: as the barrier before the loop.
        unsafe { sync_threads() };
        let next = if step + 1 < steps {
            load((step + 1) % MMA_STAGES, 0)
        } else {
            cur
        };
        product(cur);
        cur = next;
    }
    // Every group holding a copy completed at a wait above; this one is for the empty ones.
    async_copy::wait::<0>();

    #[cfg(target_arch = "nvptx64")]
    let out = c.as_mut_ptr();
    for (i, row) in acc.iter().enumerate() {
        for (j, frag) in row.iter().enumerate() {
            // Registers 0, 1 are row `r` columns `cc`, `cc + 1`; 2, 3 the same columns of row
            // `r + 8` (`FragC::coords`).
            let v = frag.to_array();
            let (r, cc) = FragC::coords(lane, 0);
            for h in 0..2 {
                let at = (row0 + wm + 16 * i + r + 8 * h) * n + col0 + wn + 8 * j + cc;
                let (x, y) = (v[2 * h], v[2 * h + 1]);
                // SAFETY: `(block, warp, i, j, lane, h)` names each pair of elements of `c`
                // once: the blocks tile `c` in 128×128 (the grouped order is a one-to-one map
                // of `0..tiles_m · tiles_n` onto the tiles), the warps their block's tile in
                // 64×64, `(i, j)` the warp's in 16×8, and the fragment layout gives each
                // lane two pairs of a 16×8 tile, different for every lane. The pair is inside
                // `c` (row `< m`, columns `col0 + wn + 8 j + cc + 1 < n`, `c.len() >= m · n`,
                // checked above) and 8-byte aligned (`cc` and `n` even, `c` 8-byte aligned,
                // checked above).
                gpu_or_host! {
                    gpu => unsafe { out.add(at).cast::<Pair>().write(Pair([x, y])) },
                    host => unsafe {
                        c.write(at, x);
                        c.write(at + 1, y);
                    },
                }
            }
        }
    }
}

/// `c = a · b` on tensor cores for `f16` `a` (`m × k`) and `b` (`k × n`), row-major, with
/// `f32` products and sums into `c` (`m × n`). `m`, `n` multiples of 128, `k` of 64. Launch
/// with `Grid::new((m / 128) * (n / 128), 128).shared_bytes(MMA_SHARED_BYTES as u32)`.
#[gpu_kernel(block = 128)]
pub fn hgemm_f16(m: u32, n: u32, k: u32, a: &[f16], b: &[f16], c: &mut [f32]) {
    hgemm(m as usize, n as usize, k as usize, a, b, c);
}

/// [`hgemm_f16`] for `bf16` inputs.
#[gpu_kernel(block = 128)]
pub fn hgemm_bf16(m: u32, n: u32, k: u32, a: &[bf16], b: &[bf16], c: &mut [f32]) {
    hgemm(m as usize, n as usize, k as usize, a, b, c);
}
