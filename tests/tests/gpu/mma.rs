//! Tensor-core fragments: one 16×16×16 `a × b + c` through every load path, in `f16` and
//! `bf16`, against the host's product.

use super::*;
use berth::mma::tf32;
use berth::{F8E4M3, F8E5M2};
use berth::{bf16, f16};
use berth_fixtures::mma::{
    MMA_PATHS, mma_e4m3_product, mma_e5m2_e4m3_product, mma_paths_bf16, mma_paths_f16,
    mma_s8_product, mma_stores_bf16, mma_stores_f16, mma_tf32_product, mma_u8s8_product,
};

/// `a × b + c` of 16×16 matrices (`b` K×N row-major), products and sums in `f64`.
fn product(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f64> {
    (0..256)
        .map(|i| {
            let (r, n) = (i / 16, i % 16);
            (0..16).fold(f64::from(c[i]), |s, k| {
                s + f64::from(a[r * 16 + k]) * f64::from(b[k * 16 + n])
            })
        })
        .collect()
}

/// Checks `got` (every path's result, 256 elements each) against `want`, within 2^-16 of the
/// sum of the terms' magnitudes (`scale`).
fn check(got: &[f32], want: &[f64], scale: &[f64], what: &str) {
    assert!(
        !got.is_empty() && got.len().is_multiple_of(256),
        "{what}: {} elements",
        got.len()
    );
    for path in 0..got.len() / 256 {
        for i in 0..256 {
            let g = f64::from(got[path * 256 + i]);
            let tol = scale[i] * 2f64.powi(-16) + 1e-30;
            assert!(
                (g - want[i]).abs() <= tol,
                "{what}, path {path}: element ({}, {}) is {g}, want {} (±{tol})",
                i / 16,
                i % 16,
                want[i]
            );
        }
    }
}

fn magnitudes(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f64> {
    let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    product(&abs(a), &abs(b), &abs(c))
}

#[test]
fn mma_fragments_multiply_like_the_host_through_every_load_path() {
    let (_g, gpu) = gpu();
    for round in 0..3 {
        let v = |n| -> Vec<f32> { random_f32(n).iter().map(|x| x * 2.0).collect() };
        let (a, b, c) = (v(256), v(256), v(256));
        let dc = gpu.upload(&c).unwrap();

        let (ah, bh): (Vec<f16>, Vec<f16>) = (
            a.iter().map(|&x| f16::from_f32(x)).collect(),
            b.iter().map(|&x| f16::from_f32(x)).collect(),
        );
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            ah.iter().map(|x| x.to_f32()).collect(),
            bh.iter().map(|x| x.to_f32()).collect(),
        );
        let (da, db) = (gpu.upload(&ah).unwrap(), gpu.upload(&bh).unwrap());
        let mut out = gpu.upload(&vec![f32::NAN; MMA_PATHS * 256]).unwrap();
        mma_paths_f16(&gpu, Grid::new(1, 32), &da, &db, &dc, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let want = product(&af, &bf, &c);
        check(
            &out.to_vec().unwrap(),
            &want,
            &magnitudes(&af, &bf, &c),
            &format!("f16, round {round}"),
        );

        let (ab, bb): (Vec<bf16>, Vec<bf16>) = (
            a.iter().map(|&x| bf16::from_f32(x)).collect(),
            b.iter().map(|&x| bf16::from_f32(x)).collect(),
        );
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            ab.iter().map(|x| x.to_f32()).collect(),
            bb.iter().map(|x| x.to_f32()).collect(),
        );
        let (da, db) = (gpu.upload(&ab).unwrap(), gpu.upload(&bb).unwrap());
        let mut out = gpu.upload(&vec![f32::NAN; MMA_PATHS * 256]).unwrap();
        mma_paths_bf16(&gpu, Grid::new(1, 32), &da, &db, &dc, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let want = product(&af, &bf, &c);
        check(
            &out.to_vec().unwrap(),
            &want,
            &magnitudes(&af, &bf, &c),
            &format!("bf16, round {round}"),
        );
    }
}

#[test]
fn stmatrix_stores_the_rounded_result_where_the_rows_say_plain_transposed_and_paired() {
    let (_g, gpu) = gpu();
    for round in 0..2 {
        let v = |n| -> Vec<f32> { random_f32(n).iter().map(|x| x * 2.0).collect() };
        let (a, b, c) = (v(256), v(256), v(256));
        let dc = gpu.upload(&c).unwrap();
        // One element type: the product element by element against the host's, then both
        // stored tiles, element for element the rounding of that product.
        macro_rules! stores {
            ($t:ty, $kernel:ident) => {{
                let (ah, bh): (Vec<$t>, Vec<$t>) = (
                    a.iter().map(|&x| <$t>::from_f32(x)).collect(),
                    b.iter().map(|&x| <$t>::from_f32(x)).collect(),
                );
                let (af, bf): (Vec<f32>, Vec<f32>) = (
                    ah.iter().map(|x| x.to_f32()).collect(),
                    bh.iter().map(|x| x.to_f32()).collect(),
                );
                let (da, db) = (gpu.upload(&ah).unwrap(), gpu.upload(&bh).unwrap());
                let mut out = gpu.upload(&vec![f32::NAN; 256]).unwrap();
                let mut rounded = gpu.upload(&vec![<$t>::from_f32(f32::NAN); 1024]).unwrap();
                $kernel(
                    &gpu,
                    Grid::new(1, 32),
                    &da,
                    &db,
                    &dc,
                    &mut out,
                    &mut rounded,
                )
                .unwrap()
                .wait()
                .unwrap();
                let what = format!("{}, round {round}", stringify!($t));
                let d = out.to_vec().unwrap();
                check(&d, &product(&af, &bf, &c), &magnitudes(&af, &bf, &c), &what);
                let r = rounded.to_vec().unwrap();
                for row in 0..16 {
                    for col in 0..16 {
                        let want = <$t>::from_f32(d[row * 16 + col]).to_bits();
                        assert_eq!(
                            r[row * 16 + col].to_bits(),
                            want,
                            "{what}: stmatrix, ({row}, {col})"
                        );
                        assert_eq!(
                            r[256 + (15 - row) * 16 + col].to_bits(),
                            want,
                            "{what}: stmatrix_at, rows reversed, ({row}, {col})"
                        );
                        assert_eq!(
                            r[512 + col * 16 + row].to_bits(),
                            want,
                            "{what}: stmatrix_trans, ({row}, {col}) at ({col}, {row})"
                        );
                        assert_eq!(
                            r[768 + row * 16 + col].to_bits(),
                            want,
                            "{what}: stmatrix_pair, ({row}, {col})"
                        );
                    }
                }
            }};
        }
        stores!(f16, mma_stores_f16);
        stores!(bf16, mma_stores_bf16);
    }
}

/// `x` (finite, not zero) rounded to 11 significant bits, to nearest, ties away from zero:
/// TF32's `cvt.rna`, computed apart from `berth::mma::tf32::round`.
fn to_tf32(x: f32) -> f32 {
    let x = f64::from(x);
    let ulp = 2f64.powi(x.abs().log2().floor() as i32 - 10);
    ((x / ulp).round() * ulp) as f32
}

#[test]
fn tf32_rounding_is_to_nearest_ties_away() {
    for x in random_f32(10_000).iter().map(|x| x * 8.0 - 4.0) {
        assert_eq!(tf32::round(x), to_tf32(x), "{x}");
    }
    // Ties: 1 + 2^-11 and 3 · 2^-11 above 1 lie halfway between TF32 neighbours.
    for (x, want) in [
        (1.0 + 2f32.powi(-11), 1.0 + 2f32.powi(-10)),
        (-(1.0 + 2f32.powi(-11)), -(1.0 + 2f32.powi(-10))),
        (1.0 + 3.0 * 2f32.powi(-11), 1.0 + 2.0 * 2f32.powi(-10)),
    ] {
        assert_eq!(tf32::round(x), want, "{x}");
    }
    assert_eq!(tf32::round(f32::MAX), f32::INFINITY);
    assert_eq!(tf32::round(f32::NEG_INFINITY), f32::NEG_INFINITY);
    assert!(tf32::round(f32::NAN).is_nan());
}

#[test]
fn tf32_fragments_multiply_the_rounded_values_like_the_host() {
    let (_g, gpu) = gpu();
    for round in 0..3 {
        let v = |n| -> Vec<f32> { random_f32(n).iter().map(|x| x * 4.0 - 2.0).collect() };
        let (a, b, c) = (v(256), v(256), v(256));
        let mut out = gpu.upload(&vec![f32::NAN; 512]).unwrap();
        let (da, db, dc) = (
            gpu.upload(&a).unwrap(),
            gpu.upload(&b).unwrap(),
            gpu.upload(&c).unwrap(),
        );
        mma_tf32_product(&gpu, Grid::new(1, 32), &da, &db, &dc, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        // What the tensor cores multiply: the inputs rounded to TF32 (as `cvt.rna`).
        let (ar, br): (Vec<f32>, Vec<f32>) = (
            a.iter().map(|&x| to_tf32(x)).collect(),
            b.iter().map(|&x| to_tf32(x)).collect(),
        );
        assert!(
            a.iter().zip(&ar).any(|(x, r)| x != r),
            "the random inputs are not all TF32 values already"
        );
        let (want, scale) = (product(&ar, &br, &c), magnitudes(&ar, &br, &c));
        let got = out.to_vec().unwrap();
        // The lane-addressed `ldmatrix` loads give the same fragments as the plain ones.
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got[256..]),
            bits(&got[..256]),
            "tf32, round {round}: the ldmatrix path differs from the plain loads"
        );
        // Products exact, 16 sums in the tensor cores' order and precision (as the 16-bit
        // products' test allows).
        for i in 0..256 {
            let g = f64::from(got[i]);
            let tol = scale[i] * 2f64.powi(-16) + 1e-30;
            assert!(
                (g - want[i]).abs() <= tol,
                "tf32, round {round}: element ({}, {}) is {g}, want {} (±{tol})",
                i / 16,
                i % 16,
                want[i]
            );
        }
        // And the unrounded inputs' product is further off than that, for some element: the
        // rounding is what the test sees.
        let (exact, _) = host_gemm(&a, &b, 16, 16, 16);
        let exact: Vec<f64> = exact
            .iter()
            .zip(&c)
            .map(|(x, &c)| x + f64::from(c))
            .collect();
        assert!(
            (0..256).any(|i| (exact[i] - want[i]).abs() > scale[i] * 2f64.powi(-16)),
            "tf32, round {round}: rounding the inputs changed no element beyond the tolerance"
        );
    }
}

/// `a × b + c` of `a` 16×64 and `b` 64×16 (K×N row-major) as the kernel computes it: two
/// products of 32 steps of k, each sum exact and clamped to `i32` (the `.satfinite` of each
/// 8-bit `mma`).
fn int8_product(a: &[i32], b: &[i32], c: &[i32]) -> Vec<i32> {
    (0..256)
        .map(|i| {
            let (r, n) = (i / 16, i % 16);
            [0, 32].iter().fold(c[i], |acc, &k0| {
                let s = (k0..k0 + 32).fold(i64::from(acc), |s, k| {
                    s + i64::from(a[r * 64 + k]) * i64::from(b[k * 16 + n])
                });
                s.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
            })
        })
        .collect()
}

#[test]
fn int8_fragments_multiply_exactly_and_saturate_like_the_host() {
    let (_g, gpu) = gpu();
    for round in 0..3 {
        let bytes = |n| -> Vec<u8> { random_u32(n).iter().map(|x| *x as u8).collect() };
        let (ab, bb) = (bytes(1024), bytes(1024));
        // Sums of 64 products reach about ±2^20: C near the ends of i32's range saturates
        // some elements, both ways, and the rest are random.
        let c: Vec<i32> = random_u32(256)
            .iter()
            .enumerate()
            .map(|(i, &x)| match i % 8 {
                0 => i32::MAX - (x % 1000) as i32,
                1 => i32::MIN + (x % 1000) as i32,
                _ => x as i32 >> 4,
            })
            .collect();
        let dc = gpu.upload(&c).unwrap();
        let b: Vec<i8> = bb.iter().map(|&x| x as i8).collect();
        let bw: Vec<i32> = b.iter().map(|&x| i32::from(x)).collect();
        let db = gpu.upload(&b).unwrap();

        let a: Vec<i8> = ab.iter().map(|&x| x as i8).collect();
        let mut out = gpu.upload(&vec![i32::MIN; 512]).unwrap();
        mma_s8_product(
            &gpu,
            Grid::new(1, 32),
            &gpu.upload(&a).unwrap(),
            &db,
            &dc,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        let aw: Vec<i32> = a.iter().map(|&x| i32::from(x)).collect();
        let want = int8_product(&aw, &bw, &c);
        let got = out.to_vec().unwrap();
        assert_eq!(got[..256], want, "s8 × s8, round {round}");
        assert_eq!(got[256..], want, "s8 × s8 through ldmatrix, round {round}");
        assert!(
            want.contains(&i32::MAX) && want.contains(&i32::MIN),
            "no element saturated both ways: the test does not see `.satfinite`"
        );

        let mut out = gpu.upload(&vec![i32::MIN; 512]).unwrap();
        mma_u8s8_product(
            &gpu,
            Grid::new(1, 32),
            &gpu.upload(&ab).unwrap(),
            &db,
            &dc,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        let aw: Vec<i32> = ab.iter().map(|&x| i32::from(x)).collect();
        let (got, want) = (out.to_vec().unwrap(), int8_product(&aw, &bw, &c));
        assert_eq!(got[..256], want, "u8 × s8, round {round}");
        assert_eq!(got[256..], want, "u8 × s8 through ldmatrix, round {round}");
    }
}

#[test]
fn fp8_fragments_multiply_like_the_host_in_both_formats() {
    let (_g, gpu) = gpu();
    for round in 0..3 {
        // Values over several binades of each format (E4M3 reaches ±448, E5M2 ±57344).
        let v = |n, scale: f32| -> Vec<f32> {
            random_f32(n)
                .iter()
                .map(|x| (x * 2.0 - 1.0) * scale)
                .collect()
        };
        let c = v(256, 64.0);
        let dc = gpu.upload(&c).unwrap();
        let b: Vec<F8E4M3> = v(1024, 16.0).into_iter().map(F8E4M3::from_f32).collect();
        let bw: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
        let db = gpu.upload(&b).unwrap();
        // The k-major host product of `a` (16×64) and `b` (64×16) plus `c`, and its scale.
        let host = |aw: &[f32]| {
            let (p, s) = host_gemm(aw, &bw, 16, 16, 64);
            let want: Vec<f64> = p.iter().zip(&c).map(|(p, &c)| p + f64::from(c)).collect();
            let scale: Vec<f64> = s
                .iter()
                .zip(&c)
                .map(|(s, &c)| s + f64::from(c.abs()))
                .collect();
            (want, scale)
        };
        // Both paths' results (plain loads, then `ldmatrix`) against the host's.
        let check = |got: Vec<f32>, (want, scale): (Vec<f64>, Vec<f64>), what: &str| {
            for (at, &g) in got.iter().enumerate() {
                let (g, i) = (f64::from(g), at % 256);
                let tol = scale[i] * 2f64.powi(-16) + 1e-30;
                let path = if at < 256 { "plain loads" } else { "ldmatrix" };
                assert!(
                    (g - want[i]).abs() <= tol,
                    "{what} ({path}), round {round}: element ({}, {}) is {g}, want {} (±{tol})",
                    i / 16,
                    i % 16,
                    want[i]
                );
            }
        };

        let a: Vec<F8E4M3> = v(1024, 16.0).into_iter().map(F8E4M3::from_f32).collect();
        let aw: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
        let mut out = gpu.upload(&vec![f32::NAN; 512]).unwrap();
        mma_e4m3_product(
            &gpu,
            Grid::new(1, 32),
            &gpu.upload(&a).unwrap(),
            &db,
            &dc,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        check(out.to_vec().unwrap(), host(&aw), "e4m3 × e4m3");

        let a: Vec<F8E5M2> = v(1024, 1000.0).into_iter().map(F8E5M2::from_f32).collect();
        let aw: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
        let mut out = gpu.upload(&vec![f32::NAN; 512]).unwrap();
        mma_e5m2_e4m3_product(
            &gpu,
            Grid::new(1, 32),
            &gpu.upload(&a).unwrap(),
            &db,
            &dc,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        check(out.to_vec().unwrap(), host(&aw), "e5m2 × e4m3");
    }
}

/// `a · b` (row-major `m × k` by `k × n`) on the host, in `f64`, and the sums of the terms'
/// magnitudes (the scale of the rounding error).
fn host_gemm(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut want = vec![0.0; m * n];
    let mut scale = vec![0.0; m * n];
    for r in 0..m {
        for kk in 0..k {
            let x = f64::from(a[r * k + kk]);
            for c in 0..n {
                let y = f64::from(b[kk * n + c]);
                want[r * n + c] += x * y;
                scale[r * n + c] += (x * y).abs();
            }
        }
    }
    (want, scale)
}

/// Runs `launch` on fresh random `a` (`m × k`) and `b` (`k × n`) rounded to `T` and checks
/// `c` against the host's product of the rounded values.
fn check_gemm<T: berth::DeviceCopy>(
    gpu: &berth::Gpu,
    (m, n, k): (usize, usize, usize),
    round: impl Fn(f32) -> T,
    widen: impl Fn(T) -> f32,
    launch: impl Fn(
        &berth::DeviceBuffer<T>,
        &berth::DeviceBuffer<T>,
        &mut berth::DeviceBuffer<f32>,
    ) -> Result<(), Error>,
    what: &str,
) {
    let (a, b): (Vec<T>, Vec<T>) = (
        random_f32(m * k).into_iter().map(&round).collect(),
        random_f32(k * n).into_iter().map(&round).collect(),
    );
    let (af, bf): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&x| widen(x)).collect(),
        b.iter().map(|&x| widen(x)).collect(),
    );
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut dc = gpu.upload(&vec![f32::NAN; m * n]).unwrap();
    launch(&da, &db, &mut dc).unwrap();
    let got = dc.to_vec().unwrap();
    let (want, scale) = host_gemm(&af, &bf, m, n, k);
    for i in 0..m * n {
        // The GPU's tensor cores sum in their own order and precision: k / 16 rounded steps.
        let tol = scale[i] * 2f64.powi(-14) + 1e-30;
        let g = f64::from(got[i]);
        assert!(
            (g - want[i]).abs() <= tol,
            "{what} {m}×{n}×{k}: c({}, {}) is {g}, want {} (±{tol})",
            i / n,
            i % n,
            want[i]
        );
    }
}

#[test]
fn the_tensor_core_gemm_matches_the_host() {
    use berth_examples::tensor::{
        MMA_BM, MMA_BN, MMA_SHARED_BYTES, MMA_THREADS, hgemm_bf16, hgemm_f16,
    };
    let (_g, gpu) = gpu();
    // 256×384×448: seven steps, so every slot of the three-stage ring is filled and read more
    // than once, and six blocks in the grouped order; k = 64 and 128: fewer steps than the
    // ring has slots (empty groups at the start); 1152 rows: a band of eight tile rows and a
    // band of one.
    let shapes: &[(usize, usize, usize)] = if cfg!(feature = "gpu") {
        &[
            (128, 128, 64),
            (256, 384, 128),
            (256, 384, 448),
            (1152, 256, 64),
            (1024, 512, 2048),
        ]
    } else {
        &[
            (128, 128, 64),
            (256, 128, 128),
            (256, 384, 448),
            (1152, 256, 64),
        ]
    };
    for &(m, n, k) in shapes {
        let grid = Grid::new(((m / MMA_BM) * (n / MMA_BN)) as u32, MMA_THREADS as u32)
            .shared_bytes(MMA_SHARED_BYTES as u32);
        let dims = (m as u32, n as u32, k as u32);
        check_gemm(
            &gpu,
            (m, n, k),
            f16::from_f32,
            f16::to_f32,
            |a, b, c| hgemm_f16(&gpu, grid, dims.0, dims.1, dims.2, a, b, c)?.wait(),
            "f16",
        );
        check_gemm(
            &gpu,
            (m, n, k),
            bf16::from_f32,
            bf16::to_f32,
            |a, b, c| hgemm_bf16(&gpu, grid, dims.0, dims.1, dims.2, a, b, c)?.wait(),
            "bf16",
        );
    }
}
