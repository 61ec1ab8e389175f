//! The warpgroup GEMM (`berth_examples::wgmma_gemm`: bulk tensor copies, mbarriers, `wgmma`)
//! against the host's product in `f64` of the same rounded inputs, in `bf16` and `f16`, on
//! fresh random matrices with the output poisoned first; and the shapes and maps the launcher
//! refuses.

use super::*;
use berth::{bf16, f16};
use berth_examples::wgmma_gemm::{WgmmaGemmInput, wgmma_gemm, wgmma_gemm_maps};

/// `c = a · bᵀ` (`a` m×k, `b` n×k, row-major) in `f64`, and each entry's scale: the sum of
/// its terms' magnitudes.
fn host_gemm(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let (mut c, mut mag) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            let (ra, rb) = (&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
            c[i * n + j] = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
            mag[i * n + j] = ra.iter().zip(rb).map(|(x, y)| (x * y).abs()).sum();
        }
    }
    (c, mag)
}

fn one<T: WgmmaGemmInput>(
    gpu: &Gpu,
    (m, n, k): (usize, usize, usize),
    round: impl Fn(f32) -> T,
    widen: impl Fn(T) -> f64,
) {
    let (a, b): (Vec<T>, Vec<T>) = (
        random_f32(m * k).into_iter().map(&round).collect(),
        random_f32(n * k).into_iter().map(&round).collect(),
    );
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut dc = gpu.upload(&vec![f32::NAN; m * n]).unwrap();
    let maps = wgmma_gemm_maps(gpu, &da, &db, m, n, k).unwrap();
    let stream = gpu.stream().unwrap();
    wgmma_gemm(&stream, &maps, &da, &db, &mut dc)
        .unwrap()
        .wait()
        .unwrap();
    let got = dc.to_vec().unwrap();
    let (af, bf): (Vec<f64>, Vec<f64>) = (
        a.into_iter().map(&widen).collect(),
        b.into_iter().map(&widen).collect(),
    );
    let (want, mag) = host_gemm(&af, &bf, (m, n, k));
    // Each of the k + k / 16 sums in f32 rounds by at most 2^-24 of a partial sum no larger
    // than the terms' magnitudes (the hardware sums each 16-step exactly or closer).
    let ulps = (k + k / 16 + 1) as f64 * 2f64.powi(-24);
    for i in 0..m * n {
        let tol = mag[i] * ulps + 1e-30;
        let g = f64::from(got[i]);
        assert!(
            (g - want[i]).abs() <= tol,
            "{m}×{n}×{k}: c({}, {}) is {g}, want {} (±{tol})",
            i / n,
            i % n,
            want[i]
        );
    }
}

#[test]
fn wgmma_gemm_matches_the_host_product() {
    let (_g, gpu) = gpu();
    // Two blocks along m and n each on the simulator; larger, with more steps than stages,
    // on a GPU.
    let shapes: &[(usize, usize, usize)] = if gpu.backend() == berth::Backend::Simulator {
        &[(256, 256, 128), (128, 512, 320)]
    } else {
        &[(256, 256, 128), (1024, 768, 1088), (2048, 1024, 2048)]
    };
    for &shape in shapes {
        one::<bf16>(&gpu, shape, bf16::from_f32, |x| f64::from(x.to_f32()));
        one::<f16>(&gpu, shape, f16::from_f32, |x| f64::from(x.to_f32()));
    }
}

#[test]
fn wgmma_gemm_refuses_other_shapes_and_other_buffers() {
    let (_g, gpu) = gpu();
    let (m, n, k) = (128, 256, 64);
    let a = gpu.upload(&vec![bf16::ZERO; m * k]).unwrap();
    let b = gpu.upload(&vec![bf16::ZERO; n * k]).unwrap();
    let other = gpu.upload(&vec![bf16::ZERO; m * k]).unwrap();
    let mut c = gpu.alloc_zeroed::<f32>(m * n).unwrap();
    for (mm, nn, kk) in [(64, 256, 64), (128, 128, 64), (128, 256, 32)] {
        let e = wgmma_gemm_maps(&gpu, &a, &b, mm, nn, kk).err();
        assert!(
            matches!(e, Some(Error::InvalidLaunch { .. })),
            "{mm}×{nn}×{kk}: {e:?}"
        );
    }
    let maps = wgmma_gemm_maps(&gpu, &a, &b, m, n, k).unwrap();
    let stream = gpu.stream().unwrap();
    let e = wgmma_gemm(&stream, &maps, &other, &b, &mut c).err();
    assert!(
        matches!(&e, Some(Error::InvalidLaunch { reason, .. }) if reason.contains("other buffers")),
        "{e:?}"
    );
}

/// Each `wgmma` shape (N = 64, 128, 256) of one warpgroup, in `bf16` and `f16`, against the
/// host: `a` 64×64, `b` 256×64, both brought by bulk copies.
#[test]
fn every_wgmma_shape_multiplies_like_the_host() {
    use berth_fixtures::wgmma::{WGMMA_SHAPES_SHARED, wgmma_shapes};
    let (_g, gpu) = gpu();
    fn run<T: berth::DeviceCopy + berth::mma::MmaInput>(
        gpu: &Gpu,
        round: impl Fn(f32) -> T,
        widen: impl Fn(T) -> f64,
        launch: impl FnOnce(
            &Gpu,
            &berth::DeviceBuffer<T>,
            &berth::DeviceBuffer<T>,
            &berth::DeviceBuffer<berth::tma::TensorMap>,
            &mut berth::DeviceBuffer<f32>,
        ),
    ) {
        let a: Vec<T> = random_f32(64 * 64).into_iter().map(&round).collect();
        let b: Vec<T> = random_f32(256 * 64).into_iter().map(&round).collect();
        let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let maps = [
            gpu.tensor_map(&da, 64, 64, 64).unwrap(),
            gpu.tensor_map(&db, 256, 64, 256).unwrap(),
        ];
        let maps = gpu.upload(&maps).unwrap();
        let mut out = gpu.upload(&vec![f32::NAN; 64 * 448]).unwrap();
        launch(gpu, &da, &db, &maps, &mut out);
        let got = out.to_vec().unwrap();
        let (af, bf): (Vec<f64>, Vec<f64>) = (
            a.into_iter().map(&widen).collect(),
            b.into_iter().map(&widen).collect(),
        );
        let mut at = 0;
        for n in [64, 128, 256] {
            let (want, mag) = host_gemm(&af, &bf[..n * 64], (64, n, 64));
            for i in 0..64 * n {
                let tol = mag[i] * 80.0 * 2f64.powi(-24) + 1e-30;
                let g = f64::from(got[at + i]);
                assert!(
                    (g - want[i]).abs() <= tol,
                    "m64n{n}k16: ({}, {}) is {g}, want {} (±{tol})",
                    i / n,
                    i % n,
                    want[i]
                );
            }
            at += 64 * n;
        }
    }
    let grid = Grid::new(1, 128).shared_bytes(WGMMA_SHAPES_SHARED);
    run(
        &gpu,
        bf16::from_f32,
        |x| f64::from(x.to_f32()),
        |g, a, b, m, o| {
            wgmma_shapes::<bf16>(g, grid, a, b, m, o)
                .unwrap()
                .wait()
                .unwrap()
        },
    );
    run(
        &gpu,
        f16::from_f32,
        |x| f64::from(x.to_f32()),
        |g, a, b, m, o| {
            wgmma_shapes::<f16>(g, grid, a, b, m, o)
                .unwrap()
                .wait()
                .unwrap()
        },
    );
}

/// The register-A `wgmma` of one warpgroup, in `bf16` and `f16`, against the host: K-major
/// and N-major (transposed) B for each N, and a product's accumulator rounded to `T` as the
/// next product's A (`RegA::from_acc`).
#[test]
fn register_a_wgmma_multiplies_like_the_host() {
    use berth_fixtures::wgmma::{WGMMA_RS_SHARED, wgmma_register_a};
    let (_g, gpu) = gpu();
    fn run<T: berth::DeviceCopy + berth::mma::MmaInput>(
        gpu: &Gpu,
        round: impl Fn(f32) -> T,
        widen: impl Fn(T) -> f64,
        launch: impl FnOnce(
            &Gpu,
            [&berth::DeviceBuffer<T>; 3],
            &berth::DeviceBuffer<berth::tma::TensorMap>,
            &mut berth::DeviceBuffer<f32>,
        ),
    ) {
        let a: Vec<T> = random_f32(64 * 64).into_iter().map(&round).collect();
        let b: Vec<T> = random_f32(256 * 64).into_iter().map(&round).collect();
        let v: Vec<T> = random_f32(64 * 256).into_iter().map(&round).collect();
        let (da, db, dv) = (
            gpu.upload(&a).unwrap(),
            gpu.upload(&b).unwrap(),
            gpu.upload(&v).unwrap(),
        );
        let maps = [
            gpu.tensor_map(&db, 256, 64, 256).unwrap(),
            gpu.tensor_map(&dv, 64, 256, 64).unwrap(),
        ];
        let maps = gpu.upload(&maps).unwrap();
        let mut out = gpu.upload(&vec![f32::NAN; 64 * 576]).unwrap();
        launch(gpu, [&da, &db, &dv], &maps, &mut out);
        let got = out.to_vec().unwrap();
        let wide = |x: Vec<T>| -> Vec<f64> { x.into_iter().map(&widen).collect() };
        let (af, bf, vf) = (wide(a), wide(b), wide(v));
        // `v` transposed (n × k), so that `a · v[.., ..n]` is `host_gemm` of `a` and its rows.
        let vt: Vec<f64> = (0..256 * 64).map(|i| vf[i % 64 * 256 + i / 64]).collect();
        let check = |what: &str, at: usize, n: usize, (want, mag): (Vec<f64>, Vec<f64>)| {
            for i in 0..64 * n {
                let tol = mag[i] * 80.0 * 2f64.powi(-24) + 1e-30;
                let g = f64::from(got[at + i]);
                assert!(
                    (g - want[i]).abs() <= tol,
                    "{what} m64n{n}k16: ({}, {}) is {g}, want {} (±{tol})",
                    i / n,
                    i % n,
                    want[i]
                );
            }
        };
        check(
            "K-major",
            0,
            64,
            host_gemm(&af, &bf[..64 * 64], (64, 64, 64)),
        );
        let mut at = 64 * 64;
        for n in [64, 128, 256] {
            check("N-major", at, n, host_gemm(&af, &vt[..n * 64], (64, n, 64)));
            at += 64 * n;
        }
        // The first product as the kernel has it (checked above), rounded to `T`: the A of
        // the last product.
        let p: Vec<f64> = got[..64 * 64].iter().map(|&x| widen(round(x))).collect();
        check(
            "accumulator as A",
            at,
            64,
            host_gemm(&p, &vt[..64 * 64], (64, 64, 64)),
        );
    }
    let grid = Grid::new(1, 128).shared_bytes(WGMMA_RS_SHARED);
    run(
        &gpu,
        bf16::from_f32,
        |x| f64::from(x.to_f32()),
        |g, [a, b, v], m, o| {
            wgmma_register_a::<bf16>(g, grid, a, b, v, m, o)
                .unwrap()
                .wait()
                .unwrap()
        },
    );
    run(
        &gpu,
        f16::from_f32,
        |x| f64::from(x.to_f32()),
        |g, [a, b, v], m, o| {
            wgmma_register_a::<f16>(g, grid, a, b, v, m, o)
                .unwrap()
                .wait()
                .unwrap()
        },
    );
}
