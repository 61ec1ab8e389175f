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
/// next slices are in flight into the other stage as asynchronous copies
/// ([`berth::async_copy`]: global to shared memory without passing through registers), so a
/// step waits for its copies and at one barrier, and the global loads' latency overlaps the
/// products.
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

    // Stage `s` of both slices, for the step whose slices start at column (of `a`) and row
    // (of `b`) `kt`: 512 16-byte chunks of each, two per thread, copied asynchronously
    // (`cp.async.cg`, global to shared without registers) and committed as one group.
    // SAFETY (for the callers): thread `tid` copies chunks `tid` and `tid + 256` of each
    // slice, which no other thread copies or writes. Every element of stage `s` was last read
    // before the barrier that precedes the call (the warps multiply the other stage after
    // it), and is read again only after the next barrier, which follows this thread's wait
    // for the group. Each group is waited for at the start of the step after it is copied.
    let copy_stage = |kt: usize, s: usize| {
        for c in [tid, tid + MMA_THREADS] {
            let (ar, ac) = (c / 4, c % 4 * 8);
            let (br, bc) = (c / 16, c % 16 * 8);
            // SAFETY: see above. The 8-element chunks are 16-byte aligned at both ends:
            // strides, stage sizes, `k`, `n` and every column are multiples of 8 elements,
            // and shared arrays and device allocations are 16-byte aligned.
            unsafe {
                async_copy::copy_cg::<T, 8>(
                    sa,
                    s * SA_LEN + ar * SA_STRIDE + ac,
                    &a,
                    (row0 + ar) * k + kt + ac,
                );
                async_copy::copy_cg::<T, 8>(
                    sb,
                    s * SB_LEN + br * SB_STRIDE + bc,
                    &b,
                    (kt + br) * n + col0 + bc,
                );
            }
        }
        async_copy::commit();
    };

    let mut acc = [[FragC::zero(); 4]; 4];
    let steps = k / MMA_BK;
    if steps > 0 {
        copy_stage(0, 0);
    }
    for step in 0..steps {
        let s = step % 2;
        // This thread's copies of stage `s` (the only group in flight) are complete; after
        // the barrier every thread's are, and every warp has finished multiplying the other
        // stage, which the copies of the next step may then overwrite.
        async_copy::wait::<0>();
        // SAFETY: every thread of the block reaches every barrier of this function the same
        // number of times: the checks above stop the whole launch or none of it, and the
        // loop's trip count depends only on `k`.
        unsafe { sync_threads() };
        if step + 1 < steps {
            copy_stage((step + 1) * MMA_BK, 1 - s);
        }
        for kk in (0..MMA_BK).step_by(16) {
            // SAFETY: all 32 lanes of each warp reach every `ldmatrix` and `mma` together (the
            // loops' bounds are the same in every lane). Stage `s` was copied by threads that
            // waited for their copies before the barrier above, and is not written until
            // after the next one (the copies above go to the other stage). Rows are 16-byte
            // aligned: both strides and every column are multiples of 8 elements.
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
