//! Host references of the warp example kernels (`berth_examples::warp_ops`), written from
//! CUDA's definitions of the operations, not from the simulator's code.

use berth_fixtures::warp_ops::WARP_LANES_OUT;

/// The 32 values of warp `w`, zero past the end of `x`.
fn lanes<T: Copy + Default>(x: &[T], w: usize) -> [T; 32] {
    std::array::from_fn(|l| x.get(w * 32 + l).copied().unwrap_or_default())
}

/// Mask of the lanes whose `f(lane)` holds.
fn mask(f: impl Fn(usize) -> bool) -> u32 {
    (0..32).filter(|&l| f(l)).fold(0, |m, l| m | 1 << l)
}

/// What `warp_lanes` writes for `x`, launched with `block` threads per block.
pub fn warp_lanes(x: &[u32], block: usize) -> Vec<u32> {
    let mut out = vec![0; x.len() * WARP_LANES_OUT];
    for w in 0..x.len().div_ceil(32) {
        let v = lanes(x, w);
        let odd = (w * 32 / block) % 2 == 1;
        let key = |l: usize| if odd { v[l] & 1 } else { 5 };
        let same = (0..32).all(|l| key(l) == key(0));
        for l in 0..32 {
            let i = w * 32 + l;
            if i >= x.len() {
                break;
            }
            let r: [u32; WARP_LANES_OUT] = [
                v[(7 * l + 3) % 32],
                if l >= 3 { v[l - 3] } else { v[l] },
                if l + 5 < 32 { v[l + 5] } else { v[l] },
                v[l ^ 9],
                mask(|o| v[o] % 3 == 0),
                u32::from(v.iter().all(|&o| o % 64 != 0))
                    | u32::from(v.iter().any(|&o| o % 32 == 0)) << 1,
                mask(|o| v[o] % 4 == v[l] % 4),
                if same { u32::MAX } else { 0 },
                v.iter().fold(0u32, |s, &o| s.wrapping_add(o)),
                *v.iter().min().unwrap(),
                v.iter().map(|&o| o as i32).max().unwrap() as u32,
                u32::MAX,
            ];
            out[i * WARP_LANES_OUT..(i + 1) * WARP_LANES_OUT].copy_from_slice(&r);
        }
    }
    out
}

/// A butterfly reduction as the GPU runs it: lane `l` combines with lane `l ^ 16`, then
/// `l ^ 8`, … `l ^ 1`; lane 0's result.
pub fn butterfly(v: [f32; 32], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut v = v;
    let mut k = 16;
    while k > 0 {
        v = std::array::from_fn(|l| f(v[l], v[l ^ k]));
        k /= 2;
    }
    v[0]
}

/// What `warp_wide` writes: `(wide, ints, stats)` for `n` elements of each input.
pub fn warp_wide(x: &[f64], y: &[i64], z: &[f32]) -> (Vec<f64>, Vec<i64>, Vec<f32>) {
    let n = x.len();
    let (mut wide, mut ints, mut stats) = (vec![0.0; n], vec![0; n], Vec::new());
    for w in 0..n.div_ceil(32) {
        let (xv, yv, zv) = (lanes(x, w), lanes(y, w), lanes(z, w));
        for l in (0..32).filter(|l| w * 32 + l < n) {
            wide[w * 32 + l] = xv[31 - l];
            ints[w * 32 + l] = if l >= 2 { yv[l - 2] } else { yv[l] };
        }
        stats.extend([
            butterfly(zv, |a, b| a + b),
            butterfly(zv, f32::min),
            butterfly(zv, f32::max),
        ]);
    }
    (wide, ints, stats)
}

/// What `warp_active` writes for a block of `block` threads: per thread, the mask of its
/// warp's lanes inside the block and their count.
pub fn warp_active(block: usize) -> Vec<u32> {
    (0..block)
        .flat_map(|t| {
            let live = (block - t / 32 * 32).min(32);
            let m = if live == 32 {
                u32::MAX
            } else {
                (1 << live) - 1
            };
            [m, live as u32]
        })
        .collect()
}
