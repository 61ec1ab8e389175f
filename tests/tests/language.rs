//! The kernel language against host references on random data (the same on every run, see
//! `berth_tests::rng`): device math within its stated error, shared tiles, declared block
//! shapes, unrolled loops, contraction, and the compute kernels of the benchmarks.
//!
//! Like `gpu/`, one source for two backends: the simulator in `cargo test`, the GPU with
//! `--features gpu` (the bundle). The measured errors are printed, so the GPU run records them.

use berth::{Error, Grid};
use berth_examples::compute::{
    Body, NBODY_BLOCK, black_scholes, black_scholes_one, nbody, nbody_capped, nbody_fast,
    sgemm_reg4, sgemm_reg8, sgemm_reg8_unchecked, sgemm_tiled,
};
use berth_examples::language::{axpy, mul_add_contracted, mul_add_exact, transpose};
use berth_examples::plain::{
    plain_nbody, plain_sgemm_reg4, plain_sgemm_reg8, plain_sgemm_tiled, plain_stencil5,
    plain_transpose,
};
use berth_fixtures::language::{
    MATH_F32, add_same_len, dot8, fast_math_f32, majority_swapped, math_f32, math_f64,
    own_every_index, per_block_sums, scale_pinned, scale_pinned_pipelined, sum_groups,
};
use berth_tests::{gpu, rng};
use rand::Rng;

fn uniform32(n: usize, lo: f32, hi: f32, r: &mut impl Rng) -> Vec<f32> {
    (0..n).map(|_| r.random_range(lo..hi)).collect()
}

/// CUDA's documented maximum error (ulp) of each function of `MATH_F32`, for f32 and f64.
/// Exact operations (sqrt, floor, …) are allowed half an ulp of the f64 reference's rounding.
fn bound(f: &str) -> (f64, f64) {
    match f {
        "sqrt" | "floor" | "ceil" | "round" | "trunc" => (0.5, 0.5),
        "cbrt" | "exp_m1" | "ln" | "log2" | "ln_1p" => (1.0, 1.0),
        "rsqrt" => (2.0, 1.0),
        "exp" | "exp2" | "exp10" | "log10" => (2.0, 1.0),
        "sin" | "cos" | "sin_cos.0" | "sin_cos.1" | "asin" | "acos" | "atan" => (2.0, 2.0),
        "cosh" | "tanh" => (2.0, 1.0),
        "tan" => (4.0, 2.0),
        "sinh" | "hypot" | "atan2" => (3.0, 2.0),
        "powf" | "powi" => (4.0, 2.0),
        other => panic!("no bound for {other}"),
    }
}

/// The f64 reference of function `f` (std's f64, within 1 ulp of f64: far below f32's).
fn reference(f: &str, x: f64, y: f64) -> f64 {
    match f {
        "sqrt" => x.abs().sqrt(),
        "rsqrt" => 1.0 / x.abs().sqrt(),
        "cbrt" => x.cbrt(),
        "exp" => x.exp(),
        "exp2" => x.exp2(),
        "exp10" => 10f64.powf(x),
        "exp_m1" => x.exp_m1(),
        "ln" => x.abs().ln(),
        "log2" => x.abs().log2(),
        "log10" => x.abs().log10(),
        "ln_1p" => x.abs().ln_1p(),
        "sin" | "sin_cos.0" => x.sin(),
        "cos" | "sin_cos.1" => x.cos(),
        "tan" => x.tan(),
        "asin" => (x - x.trunc()).asin(),
        "acos" => (x - x.trunc()).acos(),
        "atan" => x.atan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "tanh" => x.tanh(),
        "powf" => x.abs().powf(y),
        "hypot" => x.hypot(y),
        "atan2" => x.atan2(y),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "trunc" => x.trunc(),
        "powi" => x.powi(3),
        other => panic!("no reference for {other}"),
    }
}

/// Error of `got` against `want` in units of the last place of `got`'s type at `want`.
fn ulps(got: f64, want: f64, mantissa_bits: i32) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    if !got.is_finite() || !want.is_finite() {
        return f64::INFINITY;
    }
    let exp = if want == 0.0 {
        -1022
    } else {
        want.abs().log2().floor() as i32
    };
    let ulp = 2f64.powi((exp - mantissa_bits).max(-1074));
    (got - want).abs() / ulp
}

#[test]
fn device_math_is_within_its_stated_error() {
    let (_g, gpu) = gpu();
    let n = 4099;
    let mut r = rng();
    let x = uniform32(n, -4.0, 4.0, &mut r);
    let y = uniform32(n, 0.5, 2.0, &mut r);
    let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let mut out = gpu.upload(&vec![f32::NAN; n * 30]).unwrap();
    math_f32(&gpu, Grid::cover(n), &dx, &dy, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    // The same in f64.
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let y64: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
    let (dx, dy) = (gpu.upload(&x64).unwrap(), gpu.upload(&y64).unwrap());
    let mut out = gpu.upload(&vec![f64::NAN; n * 30]).unwrap();
    math_f64(&gpu, Grid::cover(n), &dx, &dy, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got64 = out.to_vec().unwrap();
    let mut failures = Vec::new();
    for (f, name) in MATH_F32.iter().enumerate() {
        let (b32, b64) = bound(name);
        let (mut worst32, mut worst64) = (0.0f64, 0.0f64);
        for i in 0..n {
            let want = reference(name, x64[i], y64[i]);
            // The f32 reference is the f64 one rounded; its own rounding is half an ulp.
            worst32 = worst32.max(ulps(f64::from(got[i * 30 + f]), want, 23));
            worst64 = worst64.max(ulps(got64[i * 30 + f], want, 52));
        }
        println!(
            "{name:>10}: max error {worst32:.2} ulp (f32, bound {b32}), {worst64:.2} ulp (f64, bound {b64})"
        );
        // f32: CUDA's bound plus the reference's rounding; f64: plus the host's own error.
        if worst32 > b32 + 0.5 || worst64 > b64 + 1.0 {
            failures.push(format!("{name}: {worst32:.2} / {worst64:.2} ulp"));
        }
    }
    assert!(failures.is_empty(), "beyond the stated error: {failures:?}");
}

#[test]
fn fast_math_is_within_the_hardware_error() {
    let (_g, gpu) = gpu();
    let n = 1000;
    let mut r = rng();
    let x = uniform32(n, -3.0, 3.0, &mut r);
    let dx = gpu.upload(&x).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; n * 8]).unwrap();
    fast_math_f32(&gpu, Grid::cover(n), &dx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    let names = ["exp2", "exp", "log2", "ln", "sin", "cos", "rsqrt", "tanh"];
    // PTX's stated error, loosely: relative for the exponentials, rsqrt and tanh, absolute
    // for the logarithms near 1 and for sine and cosine.
    let tol = [1e-6, 1e-5, 2e-6, 2e-6, 2e-6, 2e-6, 1e-6, 1e-3];
    for (f, name) in names.iter().enumerate() {
        let mut worst = 0.0f64;
        for (i, &v) in x.iter().enumerate() {
            let v = f64::from(v);
            let want = match *name {
                "exp2" => v.exp2(),
                "exp" => v.exp(),
                "log2" => v.abs().log2(),
                "ln" => v.abs().ln(),
                "sin" => v.sin(),
                "cos" => v.cos(),
                "rsqrt" => 1.0 / v.abs().sqrt(),
                _ => v.tanh(),
            };
            let g = f64::from(got[i * 8 + f]);
            let err = (g - want).abs() / want.abs().max(1.0);
            worst = worst.max(err);
        }
        println!("{name:>6}_approx: max error {worst:.2e}");
        assert!(worst <= tol[f], "{name}_approx: {worst:e} > {}", tol[f]);
    }
}

#[test]
fn multiply_adds_fuse_unless_the_kernel_opts_out() {
    let (_g, gpu) = gpu();
    let n = 10_007;
    let mut r = rng();
    let (a, b, c) = (
        uniform32(n, -1.0, 1.0, &mut r),
        uniform32(n, -1.0, 1.0, &mut r),
        uniform32(n, -1.0, 1.0, &mut r),
    );
    let (da, db, dc) = (
        gpu.upload(&a).unwrap(),
        gpu.upload(&b).unwrap(),
        gpu.upload(&c).unwrap(),
    );
    let mut out = gpu.upload(&vec![f32::NAN; n]).unwrap();
    mul_add_exact(&gpu, Grid::cover(n), &da, &db, &dc, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let exact = out.to_vec().unwrap();
    let unfused: Vec<f32> = (0..n).map(|i| a[i] * b[i] + c[i]).collect();
    assert_eq!(exact, unfused, "fp_contract = false keeps two roundings");
    mul_add_contracted(&gpu, Grid::cover(n), &da, &db, &dc, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let contracted = out.to_vec().unwrap();
    // The simulator runs the body as host Rust (no contraction); the GPU fuses, as nvcc.
    let want: Vec<f32> = if cfg!(feature = "gpu") {
        (0..n).map(|i| a[i].mul_add(b[i], c[i])).collect()
    } else {
        unfused.clone()
    };
    assert_eq!(contracted, want);
    if cfg!(feature = "gpu") {
        let differ = contracted
            .iter()
            .zip(&unfused)
            .filter(|(x, y)| x != y)
            .count();
        println!("fused results that differ from the unfused ones: {differ} of {n}");
        assert!(differ > 0, "no element shows a single rounding");
    }
}

#[test]
fn shared_tiles_transpose_a_matrix() {
    let (_g, gpu) = gpu();
    let (rows, cols) = (48, 80);
    let m = uniform32(rows * cols, -1.0, 1.0, &mut rng());
    let dm = gpu.upload(&m).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; rows * cols]).unwrap();
    let grid = Grid::new(((cols / 16) as u32, (rows / 16) as u32), (16, 16));
    transpose(&gpu, grid, rows as u32, cols as u32, &dm, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(got[c * rows + r], m[r * cols + c], "element ({r}, {c})");
        }
    }
}

/// Grids of every dimensionality, with more and fewer threads than elements.
fn write_model_grids() -> [(Grid, usize); 4] {
    [
        (Grid::new(7u32, 64u32), 1000),
        (Grid::new((3u32, 2u32), (8u32, 4u32)), 500),
        (Grid::new((3u32, 2u32, 2u32), (4u32, 2u32, 3u32)), 1000),
        (Grid::new((2u32, 2u32, 2u32), (8u32, 4u32, 2u32)), 100),
    ]
}

#[test]
fn own_indices_cover_every_element_once_on_any_grid() {
    let (_g, gpu) = gpu();
    for (grid, n) in write_model_grids() {
        let seed = rng().random::<u32>();
        let mut out = gpu.upload(&vec![0xdead_beef_u32; n]).unwrap();
        let mut visits = gpu.alloc_zeroed::<u32>(n).unwrap();
        own_every_index(&gpu, grid, seed, &mut out, &mut visits)
            .unwrap()
            .wait()
            .unwrap();
        let (got, visits) = (out.to_vec().unwrap(), visits.to_vec().unwrap());
        for k in 0..n {
            assert_eq!(
                (got[k], visits[k]),
                (seed ^ k as u32, 1),
                "{grid:?}, element {k}"
            );
        }
    }
}

#[test]
fn per_block_and_atomic_outputs_on_any_grid() {
    let (_g, gpu) = gpu();
    for (grid, _) in write_model_grids() {
        let (b, t) = (grid.blocks, grid.threads);
        let (blocks, per_block) = ((b.x * b.y * b.z) as usize, (t.x * t.y * t.z) as usize);
        let n = blocks * per_block;
        let x: Vec<u32> = (0..n).map(|_| rng().random_range(0..1000)).collect();
        let dx = gpu.upload(&x).unwrap();
        let mut sums = gpu.upload(&vec![u32::MAX; blocks + 1]).unwrap();
        let mut count = gpu.alloc_zeroed::<u32>(1).unwrap();
        per_block_sums(&gpu, grid, &dx, &mut sums, &mut count)
            .unwrap()
            .wait()
            .unwrap();
        let got = sums.to_vec().unwrap();
        for blk in 0..blocks {
            let want: u32 = x[blk * per_block..(blk + 1) * per_block].iter().sum();
            assert_eq!(got[blk], want, "{grid:?}, block {blk}");
        }
        assert_eq!(
            got[blocks],
            u32::MAX,
            "{grid:?}: no block writes past the grid's count"
        );
        assert_eq!(count.to_vec().unwrap(), [n as u32], "{grid:?}");
    }
}

#[test]
fn a_declared_block_shape_is_checked_at_launch() {
    let (_g, gpu) = gpu();
    let m = gpu.upload(&vec![0.0f32; 256]).unwrap();
    let mut out = gpu.upload(&vec![0.0f32; 256]).unwrap();
    let Err(err) = transpose(&gpu, Grid::new(1, 256), 16, 16, &m, &mut out) else {
        panic!("a launch with the wrong block shape was accepted");
    };
    match &err {
        Error::InvalidLaunch { kernel, reason } => {
            assert_eq!(*kernel, "transpose");
            assert!(reason.contains("(16, 16, 1)"), "{reason}");
        }
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
    assert!(err.to_string().contains("`transpose`"), "{err}");
}

#[test]
fn a_generic_kernel_runs_each_instance() {
    let (_g, gpu) = gpu();
    let n = 3001;
    let mut r = rng();
    let (a, x, y) = (
        r.random_range(-2.0f32..2.0),
        uniform32(n, -1.0, 1.0, &mut r),
        uniform32(n, -1.0, 1.0, &mut r),
    );
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y).unwrap();
    axpy::<f32>(&gpu, Grid::cover(n), a, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    let got = dy.to_vec().unwrap();
    for i in 0..n {
        // One rounding (fused on the GPU) or two: within an ulp of the exact value.
        let want = f64::from(a) * f64::from(x[i]) + f64::from(y[i]);
        assert!((f64::from(got[i]) - want).abs() < 1e-6, "f32 element {i}");
    }
    // The f64 instance, its type inferred from the arguments.
    let (a64, x64, y64): (f64, Vec<f64>, Vec<f64>) = (
        f64::from(a) / 3.0,
        x.iter().map(|&v| f64::from(v) / 3.0).collect(),
        y.iter().map(|&v| f64::from(v) / 7.0).collect(),
    );
    let dx = gpu.upload(&x64).unwrap();
    let mut dy = gpu.upload(&y64).unwrap();
    axpy(&gpu, Grid::cover(n), a64, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    let got = dy.to_vec().unwrap();
    for i in 0..n {
        // Fused or not: the product's rounding and the sum's, each half an ulp of its size.
        let want = a64.mul_add(x64[i], y64[i]);
        let tolerance = f64::EPSILON * ((a64 * x64[i]).abs() + y64[i].abs());
        assert!(
            (got[i] - want).abs() <= tolerance,
            "f64 element {i}: {} vs {want}",
            got[i]
        );
    }
}

#[test]
fn a_const_generic_kernel_runs_each_instance() {
    let (_g, gpu) = gpu();
    let n = 1003;
    let mut r = rng();
    let x = uniform32(n * 8, -1.0, 1.0, &mut r);
    let dx = gpu.upload(&x).unwrap();
    for group in [4usize, 8] {
        let mut out = gpu.upload(&vec![f32::NAN; n]).unwrap();
        let launch = match group {
            4 => sum_groups::<4>(&gpu, Grid::cover(n), &dx, &mut out),
            _ => sum_groups::<8>(&gpu, Grid::cover(n), &dx, &mut out),
        };
        launch.unwrap().wait().unwrap();
        let got = out.to_vec().unwrap();
        for i in 0..n {
            let want: f64 = (0..group).map(|k| f64::from(x[i * group + k])).sum();
            assert!(
                (f64::from(got[i]) - want).abs() < 1e-5,
                "N = {group}, element {i}: {} vs {want}",
                got[i]
            );
        }
    }
}

#[test]
fn a_generic_elementwise_kernel_pipelines_each_instance() {
    let (_g, gpu) = gpu();
    let n = 100_003;
    let mut r = rng();
    let a = r.random_range(-2.0f64..2.0);
    let x: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&vec![f64::NAN; n]).unwrap();
    let opts = berth::PipelineOptions {
        chunk_bytes: Some(8 * 4096),
        streams: Some(3),
        ..Default::default()
    };
    let stats = scale_pinned_pipelined::<f64>(&gpu, opts, a, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(stats.chunks, n.div_ceil(4096));
    for i in 0..n {
        assert_eq!(py[i], a * x[i], "f64 element {i}");
    }
    // The f32 instance, launched whole.
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let px = gpu.pinned_from(&x32).unwrap();
    let mut py = gpu.pinned_from(&vec![f32::NAN; n]).unwrap();
    scale_pinned(&gpu, Grid::cover(n), a as f32, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    for i in 0..n {
        assert_eq!(py[i], a as f32 * x32[i], "f32 element {i}");
    }
}

#[test]
fn inline_ptx_and_its_host_fallback_agree() {
    let (_g, gpu) = gpu();
    let n = 2049;
    let mut r = rng();
    let mut words = || (0..n).map(|_| r.random::<u32>()).collect::<Vec<u32>>();
    let (x, y, z) = (words(), words(), words());
    let (dx, dy, dz) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&y).unwrap(),
        gpu.upload(&z).unwrap(),
    );
    let mut out = gpu.upload(&vec![0xDEAD_BEEFu32; n]).unwrap();
    majority_swapped(&gpu, Grid::cover(n), &dx, &dy, &dz, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        let want = ((x[i] & y[i]) | (x[i] & z[i]) | (y[i] & z[i])).swap_bytes();
        assert_eq!(got[i], want, "element {i}");
    }
}

#[test]
fn unrolled_loops_compute_what_the_loop_would() {
    let (_g, gpu) = gpu();
    let n = 1001;
    let mut r = rng();
    let (x, w) = (
        uniform32(n * 8, -1.0, 1.0, &mut r),
        uniform32(8, -1.0, 1.0, &mut r),
    );
    let (dx, dw) = (gpu.upload(&x).unwrap(), gpu.upload(&w).unwrap());
    let mut out = gpu.upload(&vec![f32::NAN; n]).unwrap();
    dot8(&gpu, Grid::cover(n), &dx, &dw, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        let want: f64 = (0..8)
            .map(|k| f64::from(x[i * 8 + k]) * f64::from(w[k]))
            .sum();
        assert!((f64::from(got[i]) - want).abs() < 1e-5, "element {i}");
    }
}

/// Relative error of sampled entries of `c = a · b` against f64.
fn sgemm_error(n: usize, a: &[f32], b: &[f32], c: &[f32], r: &mut impl Rng) -> f64 {
    let mut worst = 0.0f64;
    for _ in 0..200 {
        let (i, j) = (r.random_range(0..n), r.random_range(0..n));
        let (mut want, mut scale) = (0.0f64, 0.0f64);
        for k in 0..n {
            let p = f64::from(a[i * n + k]) * f64::from(b[k * n + j]);
            want += p;
            scale += p.abs();
        }
        worst = worst.max((f64::from(c[i * n + j]) - want).abs() / scale);
    }
    worst
}

/// An SGEMM launcher: grid, n, a, b, c; the launch waited for.
type Sgemm<'a> = &'a dyn Fn(
    Grid,
    u32,
    &berth::DeviceBuffer<f32>,
    &berth::DeviceBuffer<f32>,
    &mut berth::DeviceBuffer<f32>,
) -> berth::Result<()>;

/// Each SGEMM (`name`, the tile a block computes, `n`) against the host, on fresh random data
/// with the output poisoned first.
fn check_sgemms(gpu: &berth::Gpu, cases: &[(&str, usize, usize, Sgemm<'_>)]) {
    let mut r = rng();
    for &(name, tile, n, launch) in cases {
        let (a, b) = (
            uniform32(n * n, -1.0, 1.0, &mut r),
            uniform32(n * n, -1.0, 1.0, &mut r),
        );
        let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let mut dc = gpu.upload(&vec![f32::NAN; n * n]).unwrap();
        let blocks = (n / tile) as u32;
        let grid = Grid::new((blocks, blocks), (16, 16));
        launch(grid, n as u32, &da, &db, &mut dc).unwrap();
        let c = dc.to_vec().unwrap();
        assert!(
            c.iter().all(|v| v.is_finite()),
            "{name}: unwritten elements"
        );
        let err = sgemm_error(n, &a, &b, &c, &mut r);
        assert!(err < 1e-5, "{name}: relative error {err:e}");
    }
}

#[test]
fn the_sgemm_kernels_match_the_host() {
    let (_g, gpu) = gpu();
    check_sgemms(
        &gpu,
        &[
            ("sgemm_tiled", 16, 80, &|g, n, a, b, c| {
                sgemm_tiled(&gpu, g, n, a, b, c)?.wait()
            }),
            ("sgemm_reg4", 64, 128, &|g, n, a, b, c| {
                sgemm_reg4(&gpu, g, n, a, b, c)?.wait()
            }),
            ("sgemm_reg8", 128, 256, &|g, n, a, b, c| {
                sgemm_reg8(&gpu, g, n, a, b, c)?.wait()
            }),
            ("sgemm_reg8_unchecked", 128, 256, &|g, n, a, b, c| {
                sgemm_reg8_unchecked(&gpu, g, n, a, b, c)?.wait()
            }),
        ],
    );
}

/// The plain ports (`examples/compute/src/plain.rs`) compute what the host does, on fresh random data
/// with the outputs poisoned first.
#[test]
fn the_plain_sgemm_ports_match_the_host() {
    let (_g, gpu) = gpu();
    check_sgemms(
        &gpu,
        &[
            ("plain_sgemm_tiled", 16, 80, &|g, n, a, b, c| {
                plain_sgemm_tiled(&gpu, g, n, a, b, c)?.wait()
            }),
            ("plain_sgemm_reg4", 64, 128, &|g, n, a, b, c| {
                plain_sgemm_reg4(&gpu, g, n, a, b, c)?.wait()
            }),
            ("plain_sgemm_reg8", 128, 256, &|g, n, a, b, c| {
                plain_sgemm_reg8(&gpu, g, n, a, b, c)?.wait()
            }),
        ],
    );
}

#[test]
fn the_plain_nbody_stencil_and_transpose_ports_match_the_host() {
    let (_g, gpu) = gpu();
    let mut r = rng();
    let n = 2 * NBODY_BLOCK;
    let bodies: Vec<Body> = (0..n)
        .map(|_| Body {
            x: r.random_range(-1.0..1.0),
            y: r.random_range(-1.0..1.0),
            z: r.random_range(-1.0..1.0),
            m: r.random_range(0.1..1.1),
        })
        .collect();
    let db = gpu.upload(&bodies).unwrap();
    let poison = Body {
        x: f32::NAN,
        y: f32::NAN,
        z: f32::NAN,
        m: f32::NAN,
    };
    let mut da = gpu.upload(&vec![poison; n]).unwrap();
    let grid = Grid::new((n / NBODY_BLOCK) as u32, NBODY_BLOCK as u32);
    plain_nbody(&gpu, grid, &db, &mut da)
        .unwrap()
        .wait()
        .unwrap();
    for (i, a) in da.to_vec().unwrap().iter().enumerate() {
        let (w, scale) = berth_tests::nbody_host(&bodies, i);
        for (k, got) in [a.x, a.y, a.z].into_iter().enumerate() {
            let err = (f64::from(got) - w[k]).abs() / scale;
            assert!(err < 1e-4, "plain_nbody: body {i}: error {err:e}");
        }
    }

    // A grid that is not square, so that a swapped width and height shows.
    let (w, h) = (96, 40);
    let input = uniform32(w * h, -1.0, 1.0, &mut r);
    let din = gpu.upload(&input).unwrap();
    let mut dout = gpu.upload(&vec![f32::NAN; w * h]).unwrap();
    let grid = Grid::new(((w / 32) as u32, (h / 8) as u32), (32, 8));
    plain_stencil5(&gpu, grid, w as u32, h as u32, &din, &mut dout)
        .unwrap()
        .wait()
        .unwrap();
    for (i, &got) in dout.to_vec().unwrap().iter().enumerate() {
        let want = berth_tests::stencil5_host(&input, w, h, i);
        assert!(
            (f64::from(got) - want).abs() < 1e-6,
            "plain_stencil5: point {i}: {got} against {want}"
        );
    }

    let (rows, cols) = (64, 96);
    let m = uniform32(rows * cols, -1.0, 1.0, &mut r);
    let dm = gpu.upload(&m).unwrap();
    let mut dt = gpu.upload(&vec![f32::NAN; rows * cols]).unwrap();
    let grid = Grid::new(((cols / 32) as u32, (rows / 32) as u32), (32, 8));
    plain_transpose(&gpu, grid, rows as u32, cols as u32, &dm, &mut dt)
        .unwrap()
        .wait()
        .unwrap();
    let t = dt.to_vec().unwrap();
    for i in 0..rows {
        for j in 0..cols {
            assert_eq!(
                t[j * rows + i],
                m[i * cols + j],
                "plain_transpose: ({i}, {j})"
            );
        }
    }
}

/// A plain port launched on a block shape its tiles do not assume stops with its message
/// (its `SAFETY` comments rest on that check), rather than racing.
#[test]
fn a_plain_port_refuses_another_block_shape() {
    let (_g, gpu) = gpu();
    // The simulator only: on a GPU the stop is a trap, which ends the process's CUDA state.
    if cfg!(feature = "gpu") {
        return;
    }
    let n = 64;
    let a = gpu.upload(&vec![1.0f32; n * n]).unwrap();
    let mut c = gpu.upload(&vec![f32::NAN; n * n]).unwrap();
    let grid = Grid::new((2, 2), (32, 32));
    let err = plain_sgemm_tiled(&gpu, grid, n as u32, &a, &a, &mut c)
        .unwrap()
        .wait()
        .expect_err("a 32 × 32 block was accepted");
    assert!(
        err.to_string()
            .contains("launch with blocks of 16 × 16 threads"),
        "{err}"
    );
}

#[test]
fn the_nbody_kernels_match_the_host() {
    let (_g, gpu) = gpu();
    let n = 2 * NBODY_BLOCK;
    let mut r = rng();
    let bodies: Vec<Body> = (0..n)
        .map(|_| Body {
            x: r.random_range(-1.0..1.0),
            y: r.random_range(-1.0..1.0),
            z: r.random_range(-1.0..1.0),
            m: r.random_range(0.1..1.1),
        })
        .collect();
    let db = gpu.upload(&bodies).unwrap();
    for kernel in ["nbody", "nbody_fast", "nbody_capped"] {
        let mut da = gpu.upload(&vec![Body::default(); n]).unwrap();
        let grid = Grid::new((n / NBODY_BLOCK) as u32, NBODY_BLOCK as u32);
        match kernel {
            "nbody" => nbody(&gpu, grid, &db, &mut da),
            "nbody_fast" => nbody_fast(&gpu, grid, &db, &mut da),
            _ => nbody_capped(&gpu, grid, &db, &mut da),
        }
        .unwrap()
        .wait()
        .unwrap();
        let acc = da.to_vec().unwrap();
        for (i, a) in acc.iter().enumerate() {
            let (w, scale) = berth_tests::nbody_host(&bodies, i);
            let got = [a.x, a.y, a.z];
            for k in 0..3 {
                let err = (f64::from(got[k]) - w[k]).abs() / scale;
                assert!(err < 1e-4, "{kernel}: body {i}: error {err:e}");
            }
        }
    }
}

#[test]
fn black_scholes_matches_the_host() {
    let (_g, gpu) = gpu();
    let n = 10_007;
    let mut r = rng();
    let s = uniform32(n, 5.0, 30.0, &mut r);
    let x = uniform32(n, 1.0, 100.0, &mut r);
    let t = uniform32(n, 0.25, 10.0, &mut r);
    let (ds, dx, dt) = (
        gpu.upload(&s).unwrap(),
        gpu.upload(&x).unwrap(),
        gpu.upload(&t).unwrap(),
    );
    let mut call = gpu.upload(&vec![f32::NAN; n]).unwrap();
    let mut put = gpu.upload(&vec![f32::NAN; n]).unwrap();
    black_scholes(
        &gpu,
        Grid::cover(n),
        0.02,
        0.3,
        &ds,
        &dx,
        &dt,
        &mut call,
        &mut put,
    )
    .unwrap()
    .wait()
    .unwrap();
    let (call, put) = (call.to_vec().unwrap(), put.to_vec().unwrap());
    let mut worst = 0.0f32;
    for i in 0..n {
        let (c, p) = black_scholes_one(s[i], x[i], t[i], 0.02, 0.3);
        worst = worst.max((call[i] - c).abs().max((put[i] - p).abs()) / s[i]);
    }
    println!("black_scholes: worst difference from the host's f32 evaluation {worst:e} (of spot)");
    assert!(worst < 1e-5, "{worst}");
}

#[test]
fn same_len_slices_are_checked_at_every_launch() {
    let (_g, gpu) = gpu();
    let n = 10_007;
    let mut r = rng();
    let (x, y) = (
        uniform32(n, -1.0, 1.0, &mut r),
        uniform32(n, -1.0, 1.0, &mut r),
    );
    let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let mut out = gpu.upload(&vec![f32::NAN; n]).unwrap();
    add_same_len(&gpu, Grid::cover(n), &dx, &dy, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        assert_eq!(got[i], x[i] + y[i], "element {i}");
    }

    // The body reads every member with the first one's length: a shorter input, or a longer
    // output, is refused before anything is queued, and the output keeps its poison.
    let short = gpu.upload(&y[..n - 1]).unwrap();
    let mut long = gpu.upload(&vec![f32::NAN; n + 1]).unwrap();
    let check = |e: Error, got: usize, who: &str| match e {
        Error::LengthMismatch {
            what,
            expected,
            got: g,
        } => {
            assert_eq!((expected, g), (n, got), "{what}");
            assert!(what.contains("`add_same_len`") && what.contains("same_len(x, y, out)"));
            assert!(
                what.contains(&format!("`{who}` differs from `x`")),
                "{what}"
            );
        }
        e => panic!("expected LengthMismatch, got {e}"),
    };
    let mut poisoned = gpu.upload(&vec![f32::NAN; n]).unwrap();
    let e = add_same_len(&gpu, Grid::cover(n), &dx, &short, &mut poisoned).err();
    check(e.expect("a shorter `y` is refused"), n - 1, "y");
    let e = add_same_len(&gpu, Grid::cover(n), &dx, &dy, &mut long).err();
    check(e.expect("a longer `out` is refused"), n + 1, "out");
    // In a scope, and recorded into a graph, alike.
    gpu.scope(|s| {
        let e = add_same_len(s, Grid::cover(n), &dx, &short, &mut poisoned).err();
        check(e.expect("refused in a scope"), n - 1, "y");
        Ok(())
    })
    .unwrap();
    let (mut hx, mut hy, mut hout) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&y[..n - 1]).unwrap(),
        gpu.upload(&vec![f32::NAN; n]).unwrap(),
    );
    let mut graph = gpu.graph();
    let (hx, hy, mut hout) = (
        graph.hold(&mut hx).unwrap(),
        graph.hold(&mut hy).unwrap(),
        graph.hold(&mut hout).unwrap(),
    );
    let recorded = graph.record(|rec| {
        add_same_len(rec, Grid::cover(n), &hx, &hy, &mut hout)?.detach();
        Ok(())
    });
    check(recorded.expect_err("refused when recorded"), n - 1, "y");
    assert!(poisoned.to_vec().unwrap().iter().all(|v| v.is_nan()));
    assert!(long.to_vec().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn the_unchecked_sgemm_refuses_what_would_read_out_of_bounds() {
    let (_g, gpu) = gpu();
    // Checked once, up front: a matrix shorter than n² stops the kernel with its message
    // before any unchecked access (run in the simulator only: on a GPU the stop is a trap,
    // which ends the process's CUDA state).
    if cfg!(feature = "gpu") {
        return;
    }
    let n = 128;
    let a = gpu.upload(&vec![1.0f32; n * n - 1]).unwrap();
    let b = gpu.upload(&vec![1.0f32; n * n]).unwrap();
    let mut c = gpu.upload(&vec![0.0f32; n * n]).unwrap();
    let grid = Grid::new((1, 1), (16, 16));
    let err = sgemm_reg8_unchecked(&gpu, grid, n as u32, &a, &b, &mut c)
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(err.to_string().contains("every matrix n² long"), "{err}");
}

#[test]
fn shared_arrays_of_one_name_are_separate_arrays() {
    let (_g, gpu) = gpu();
    let (a, b) = (
        rng().random_range(1..1000u32),
        rng().random_range(1..1000u32),
    );
    let mut out = gpu.upload(&[u32::MAX; 3]).unwrap();
    berth_fixtures::language::same_name_arrays(&gpu, Grid::new(3, 64), a, b, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![4 * a + 64 * b; 3]);
}
