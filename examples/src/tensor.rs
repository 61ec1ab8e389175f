//! Matrix products on tensor cores: `c = a · b` with `f16` or `bf16` inputs and `f32` sums,
//! through warp-level `mma.sync` ([`berth::mma`]).

use berth::mma::{self, FragA, FragB, FragC, MmaInput};
use berth::prelude::*;

/// Rows of `c` one block of [`hgemm_f16`] / [`hgemm_bf16`] computes.
pub const MMA_BM: usize = 128;
/// Columns of `c` one block computes.
pub const MMA_BN: usize = 128;
/// The depth of one step: columns of `a` and rows of `b` staged in shared memory at a time.
pub const MMA_BK: usize = 32;
/// Threads per block: eight warps, two along M by four along N, each computing 64×32 of `c`.
pub const MMA_THREADS: usize = 256;

/// Row stride of the staged slice of `a` (`MMA_BK` plus 8 elements of padding, so that the
/// eight rows one `ldmatrix` reads fall in different shared-memory banks; 80 bytes keeps every
/// row 16-byte aligned).
const SA_STRIDE: usize = MMA_BK + 8;
/// Row stride of the staged slice of `b` (`MMA_BN` plus 8 elements of padding).
const SB_STRIDE: usize = MMA_BN + 8;
/// Elements of one staged slice of `a` / `b`; two of each, for double buffering.
const SA_LEN: usize = MMA_BM * SA_STRIDE;
const SB_LEN: usize = MMA_BK * SB_STRIDE;

/// The block's part of `c = a · b` (row-major: `a` is `m × k`, `b` is `k × n`, `c` is `m × n`;
/// `m` and `n` multiples of 128, `k` of 32, else the launch stops with a report).
///
/// Each step stages a 128×32 slice of `a` and a 32×128 slice of `b` in shared memory, twice
/// over: while the warps multiply one stage (`ldmatrix` into fragments, then `mma.sync`), the
/// next slices are already loaded into registers, and are stored into the other stage after,
/// so a step waits at one barrier and the global loads' latency overlaps the products.
#[inline(always)]
fn hgemm<T: MmaInput + DeviceCopy>(
    m: usize,
    n: usize,
    k: usize,
    a: Slice<T>,
    b: Slice<T>,
    mut c: SliceMut<f32>,
) {
    let sa = shared_array!(MMA_SA: [u16; 2 * SA_LEN]);
    let sb = shared_array!(MMA_SB: [u16; 2 * SB_LEN]);
    // SAFETY: two 16-byte aligned shared arrays of `u16`, valid for the whole kernel, seen as
    // the same number of `T` (`f16` and `bf16` are `#[repr(transparent)]` `u16`s).
    let (sa, sb) = unsafe {
        (
            Shared::<T>::from_raw(sa.as_ptr().cast(), 2 * SA_LEN),
            Shared::<T>::from_raw(sb.as_ptr().cast(), 2 * SB_LEN),
        )
    };
    // Blocks along x, row-major over `c`'s 128×128 tiles.
    let tiles_n = n / MMA_BN;
    let (row0, col0) = (
        block::idx_x() / tiles_n.max(1) * MMA_BM,
        block::idx_x() % tiles_n.max(1) * MMA_BN,
    );
    if !m.is_multiple_of(MMA_BM)
        || !n.is_multiple_of(MMA_BN)
        || !k.is_multiple_of(MMA_BK)
        || row0 + MMA_BM > m
        || col0 + MMA_BN > n
        || a.len() < m * k
        || b.len() < k * n
        || c.len() < m * n
        || block::dim_x() != MMA_THREADS
    {
        fail(
            "hgemm: m and n must be multiples of 128 and k of 32, the grid (m / 128) · (n / 128) blocks of 256 threads, and the slices m·k, k·n and m·n long",
        );
    }
    let tid = thread::idx_x();
    let (warp, lane) = (tid / 32, warp::lane_id());
    // This warp's 64×32 part of the block's tile.
    let (wm, wn) = (warp / 4 * 64, warp % 4 * 32);
    // This thread's share of a stage: 16 consecutive elements of one row of each slice.
    let (ar, ac) = (tid / 2, tid % 2 * 16);
    let (br, bc) = (tid / 8, tid % 8 * 16);

    let load = |kt: usize| -> ([T; 16], [T; 16]) {
        let (ga, gb) = ((row0 + ar) * k + kt + ac, (kt + br) * n + col0 + bc);
        (
            core::array::from_fn(|i| a[ga + i]),
            core::array::from_fn(|i| b[gb + i]),
        )
    };
    // SAFETY (for both stores' callers): thread `tid` writes elements `(ar, ac..ac + 16)` of
    // stage `s` of `sa` and `(br, bc..bc + 16)` of `sb`, which no other thread's `tid`
    // reaches (256 threads: 128 rows × 2 halves, 32 rows × 8 sixteenths).
    let store = |s: usize, (va, vb): ([T; 16], [T; 16])| {
        for i in 0..16 {
            // SAFETY: see above; the stage is not read until the barrier that follows.
            unsafe {
                sa.write(s * SA_LEN + ar * SA_STRIDE + ac + i, va[i]);
                sb.write(s * SB_LEN + br * SB_STRIDE + bc + i, vb[i]);
            }
        }
    };

    let mut acc = [[FragC::zero(); 4]; 4];
    store(0, load(0));
    // SAFETY: every thread of the block reaches every barrier of this function the same number
    // of times: the checks above stop the whole launch or none of it, and the loop's trip
    // count depends only on `k`.
    unsafe { sync_threads() };
    let steps = k / MMA_BK;
    for step in 0..steps {
        let s = step % 2;
        let next = if step + 1 < steps {
            Some(load((step + 1) * MMA_BK))
        } else {
            None
        };
        for kk in (0..MMA_BK).step_by(16) {
            // SAFETY: all 32 lanes of each warp reach every `ldmatrix` and `mma` together (the
            // loops' bounds are the same in every lane). Stage `s` was written before the last
            // barrier and is not written until after the next one (the stores below go to the
            // other stage). Rows are 16-byte aligned: both strides and every column are
            // multiples of 8 elements.
            unsafe {
                let af: [FragA<T>; 4] = core::array::from_fn(|i| {
                    FragA::ldmatrix(sa, SA_STRIDE, s * MMA_BM + wm + 16 * i, kk)
                });
                let [b0, b1] = FragB::ldmatrix_trans_pair(sb, SB_STRIDE, s * MMA_BK + kk, wn);
                let [b2, b3] = FragB::ldmatrix_trans_pair(sb, SB_STRIDE, s * MMA_BK + kk, wn + 16);
                let bf = [b0, b1, b2, b3];
                for (i, a) in af.iter().enumerate() {
                    for (j, b) in bf.iter().enumerate() {
                        acc[i][j] = mma::mma(*a, *b, acc[i][j]);
                    }
                }
            }
        }
        if let Some(v) = next {
            store(1 - s, v);
        }
        // SAFETY: as for the first barrier.
        unsafe { sync_threads() };
    }

    for (i, row) in acc.iter().enumerate() {
        for (j, frag) in row.iter().enumerate() {
            for (e, v) in frag.to_array().into_iter().enumerate() {
                let (r, cc) = FragC::coords(lane, e);
                let at = (row0 + wm + 16 * i + r) * n + col0 + wn + 8 * j + cc;
                // SAFETY: `(block, warp, i, j, lane, e)` names each element of `c` once: the
                // blocks tile `c` in 128×128, the warps their block's tile in 64×32, `(i, j)`
                // the warp's in 16×8, and the fragment layout gives each lane's four elements
                // of a 16×8 tile, different for every lane.
                unsafe { c.write(at, v) };
            }
        }
    }
}

/// `c = a · b` on tensor cores for `f16` `a` (`m × k`) and `b` (`k × n`), row-major, with
/// `f32` products and sums into `c` (`m × n`). `m`, `n` multiples of 128, `k` of 32. Launch
/// with `Grid::new((m / 128) * (n / 128), 256)`.
#[gpu_kernel(block = 256)]
pub fn hgemm_f16(m: u32, n: u32, k: u32, a: &[f16], b: &[f16], c: &mut [f32]) {
    hgemm(m as usize, n as usize, k as usize, a, b, c);
}

/// [`hgemm_f16`] for `bf16` inputs.
#[gpu_kernel(block = 256)]
pub fn hgemm_bf16(m: u32, n: u32, k: u32, a: &[bf16], b: &[bf16], c: &mut [f32]) {
    hgemm(m as usize, n as usize, k as usize, a, b, c);
}
