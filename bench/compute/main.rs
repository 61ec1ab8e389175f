//! Compute-bound kernels against nvcc: the berth side of `bench/compute/reference.cu` (same kernels,
//! same tiling and block shapes, same measurement and checks).
//!
//! `bench_compute <kernel> <size> [repetitions=10]` — kernel: `sgemm_tiled`, `sgemm_reg4`,
//! `sgemm_reg8` (size = n), `nbody`, `nbody_fast` (size = bodies), `black_scholes` (size =
//! options), `block_sum_warp` (size = floats), `haxpy2`, `hdot` (size = f16 pairs), and the
//! plain ports of `examples/compute/src/plain.rs`: `plain_sgemm_tiled`, `plain_sgemm_reg4`,
//! `plain_sgemm_reg8` (size = n), `plain_nbody` (size = bodies), `plain_stencil5`,
//! `plain_transpose` (size = side of the square grid). One warm-up, then each launch timed
//! alone with CUDA events, median reported as one JSON line; outputs poisoned (NaN) first, results checked against a host computation in
//! `f64` on fresh random inputs (`bad` counts mismatches; `max_rel_err` the worst error).

use berth::device::half::f16x2;
use berth::{Gpu, Grid, f16};
use berth_bench::timing::{Timer, median};
use berth_examples::compute::{
    Body, NBODY_BLOCK, WARP_SUM_BLOCK, black_scholes, black_scholes_unchecked, block_sum_warp,
    nbody, nbody_fast, sgemm_reg4, sgemm_reg8, sgemm_reg8_unchecked, sgemm_tiled,
};
use berth_examples::half_precision::{HDOT_BLOCK, haxpy2, hdot};
use berth_examples::plain::{
    PLAIN_NBODY_BLOCK, TRANSPOSE_ROWS, TRANSPOSE_TILE, plain_nbody, plain_sgemm_reg4,
    plain_sgemm_reg8, plain_sgemm_tiled, plain_stencil5, plain_transpose,
};
use berth_tests::rng;
use rand::Rng;

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_compute: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kernel), Some(size)) = (args.get(1), args.get(2)) else {
        return Err("usage: bench_compute <kernel> <size> [repetitions]".into());
    };
    let size: usize = size.parse()?;
    let reps: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let gpu = Gpu::new()?;
    match kernel.as_str() {
        "sgemm_tiled"
        | "sgemm_reg4"
        | "sgemm_reg8"
        | "sgemm_reg8_unchecked"
        | "plain_sgemm_tiled"
        | "plain_sgemm_reg4"
        | "plain_sgemm_reg8" => sgemm(&gpu, kernel, size, reps),
        "nbody" | "nbody_fast" | "plain_nbody" => nbody_run(&gpu, kernel, size, reps),
        "plain_stencil5" | "plain_transpose" => grid_run(&gpu, kernel, size, reps),
        "black_scholes" | "black_scholes_unchecked" => bs_run(&gpu, kernel, size, reps),
        "block_sum_warp" => warp_sum_run(&gpu, size, reps),
        "haxpy2" | "hdot" => half_run(&gpu, kernel, size, reps),
        other => Err(format!("unknown kernel {other}").into()),
    }
}

fn uniform(n: usize, lo: f32, hi: f32, rng: &mut impl Rng) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Launch once to warm up, then `reps` times, each timed alone; the median in ms.
macro_rules! time_median {
    ($timer:expr, $reps:expr, $launch:expr) => {{
        $launch?.wait()?;
        let mut ms = Vec::with_capacity($reps);
        for _ in 0..$reps {
            ms.push($timer.time(|| $launch)?);
        }
        median(ms)
    }};
}

/// 1 when `err` is not below `tol` (NaN included), else 0.
fn off(err: f64, tol: f64) -> usize {
    usize::from(err.is_nan() || err >= tol)
}

fn report(kernel: &str, n: usize, ms: f64, work: f64, unit: &str, bad: usize, max_rel: f64) {
    println!(
        "{{\"impl\":\"berth\",\"kernel\":\"{kernel}\",\"n\":{n},\"median_ms\":{ms:.5},\"{unit}\":{:.2},\"bad\":{bad},\"max_rel_err\":{max_rel:.3e}}}",
        work / (ms * 1e-3) / 1e9
    );
}

fn sgemm(gpu: &Gpu, name: &str, n: usize, reps: usize) -> Res {
    let tile = match name.trim_start_matches("plain_") {
        "sgemm_tiled" => 16,
        "sgemm_reg4" => 64,
        _ => 128,
    };
    if !n.is_multiple_of(tile) {
        return Err(format!("{name} needs n a multiple of {tile}").into());
    }
    let mut r = rng();
    let (a, b) = (
        uniform(n * n, -1.0, 1.0, &mut r),
        uniform(n * n, -1.0, 1.0, &mut r),
    );
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = gpu.upload(&vec![f32::NAN; n * n])?;
    let timer = Timer::new(gpu)?;
    let blocks = (n / tile) as u32;
    let grid = Grid::new((blocks, blocks), (16, 16));
    let nn = n as u32;
    let ms = match name {
        "sgemm_tiled" => time_median!(timer, reps, sgemm_tiled(gpu, grid, nn, &da, &db, &mut dc)),
        "sgemm_reg4" => time_median!(timer, reps, sgemm_reg4(gpu, grid, nn, &da, &db, &mut dc)),
        "sgemm_reg8" => time_median!(timer, reps, sgemm_reg8(gpu, grid, nn, &da, &db, &mut dc)),
        "plain_sgemm_tiled" => time_median!(
            timer,
            reps,
            plain_sgemm_tiled(gpu, grid, nn, &da, &db, &mut dc)
        ),
        "plain_sgemm_reg4" => time_median!(
            timer,
            reps,
            plain_sgemm_reg4(gpu, grid, nn, &da, &db, &mut dc)
        ),
        "plain_sgemm_reg8" => time_median!(
            timer,
            reps,
            plain_sgemm_reg8(gpu, grid, nn, &da, &db, &mut dc)
        ),
        _ => time_median!(
            timer,
            reps,
            sgemm_reg8_unchecked(gpu, grid, nn, &da, &db, &mut dc)
        ),
    };
    let c = dc.to_vec()?;
    let (mut bad, mut max_rel) = (0, 0.0f64);
    for _ in 0..64 {
        let (i, j) = (r.random_range(0..n), r.random_range(0..n));
        let (mut want, mut scale) = (0.0f64, 0.0f64);
        for k in 0..n {
            let p = f64::from(a[i * n + k]) * f64::from(b[k * n + j]);
            want += p;
            scale += p.abs();
        }
        let err = (f64::from(c[i * n + j]) - want).abs() / scale.max(1e-30);
        max_rel = max_rel.max(err);
        bad += off(err, 1e-5);
    }
    report(
        name,
        n,
        ms,
        2.0 * (n as f64).powi(3),
        "gflops",
        bad,
        max_rel,
    );
    Ok(())
}

fn nbody_run(gpu: &Gpu, name: &str, n: usize, reps: usize) -> Res {
    const _: () = assert!(NBODY_BLOCK == PLAIN_NBODY_BLOCK);
    if !n.is_multiple_of(NBODY_BLOCK) {
        return Err(format!("{name} needs a multiple of {NBODY_BLOCK} bodies").into());
    }
    let mut r = rng();
    let bodies: Vec<Body> = (0..n)
        .map(|_| Body {
            x: r.random_range(-1.0..1.0),
            y: r.random_range(-1.0..1.0),
            z: r.random_range(-1.0..1.0),
            m: r.random_range(0.1..1.1),
        })
        .collect();
    let db = gpu.upload(&bodies)?;
    let poison = Body {
        x: f32::NAN,
        y: f32::NAN,
        z: f32::NAN,
        m: f32::NAN,
    };
    let mut da = gpu.upload(&vec![poison; n])?;
    let timer = Timer::new(gpu)?;
    let grid = Grid::new((n / NBODY_BLOCK) as u32, NBODY_BLOCK as u32);
    let ms = match name {
        "nbody_fast" => time_median!(timer, reps, nbody_fast(gpu, grid, &db, &mut da)),
        "plain_nbody" => time_median!(timer, reps, plain_nbody(gpu, grid, &db, &mut da)),
        _ => time_median!(timer, reps, nbody(gpu, grid, &db, &mut da)),
    };
    let acc = da.to_vec()?;
    let (mut bad, mut max_rel) = (0, 0.0f64);
    for _ in 0..64 {
        let i = r.random_range(0..n);
        let (w, scale) = berth_tests::nbody_host(&bodies, i);
        let got = [acc[i].x, acc[i].y, acc[i].z];
        for k in 0..3 {
            let err = (f64::from(got[k]) - w[k]).abs() / scale.max(1e-30);
            max_rel = max_rel.max(err);
            bad += off(err, 1e-4);
        }
    }
    report(
        name,
        n,
        ms,
        20.0 * (n as f64).powi(2),
        "gflops",
        bad,
        max_rel,
    );
    Ok(())
}

/// The 5-point stencil (`plain_stencil5`) or the transpose (`plain_transpose`) of a
/// `side × side` grid; GB/s counts one read and one write of each point; every output is
/// checked against the host.
fn grid_run(gpu: &Gpu, name: &str, side: usize, reps: usize) -> Res {
    if !side.is_multiple_of(TRANSPOSE_TILE) {
        return Err(format!("{name} needs a side that is a multiple of {TRANSPOSE_TILE}").into());
    }
    let n = side * side;
    let input = uniform(n, -1.0, 1.0, &mut rng());
    let din = gpu.upload(&input)?;
    let mut dout = gpu.upload(&vec![f32::NAN; n])?;
    let timer = Timer::new(gpu)?;
    let s = side as u32;
    let stencil = name == "plain_stencil5";
    let ms = if stencil {
        let grid = Grid::new((s / 32, s / 8), (32, 8));
        time_median!(
            timer,
            reps,
            plain_stencil5(gpu, grid, s, s, &din, &mut dout)
        )
    } else {
        let (t, rows) = (TRANSPOSE_TILE as u32, TRANSPOSE_ROWS as u32);
        let grid = Grid::new((s / t, s / t), (t, rows));
        time_median!(
            timer,
            reps,
            plain_transpose(gpu, grid, s, s, &din, &mut dout)
        )
    };
    let out = dout.to_vec()?;
    let (mut bad, mut max_err) = (0, 0.0f64);
    for (i, &got) in out.iter().enumerate() {
        let want = if stencil {
            berth_tests::stencil5_host(&input, side, side, i)
        } else {
            f64::from(input[(i % side) * side + i / side])
        };
        let err = (f64::from(got) - want).abs();
        max_err = max_err.max(err);
        bad += off(err, 1e-6);
    }
    report(name, side, ms, 8.0 * n as f64, "gbps", bad, max_err);
    Ok(())
}

/// The standard normal CDF in f64: Φ(d) = erfc(-d/√2)/2, with Numerical Recipes' erfc
/// (relative error below 1.2e-7: ample against the kernel's polynomial, within 7.5e-8).
fn cnd_f64(d: f64) -> f64 {
    let x = -d / std::f64::consts::SQRT_2;
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    let erfc = if x >= 0.0 { r } else { 2.0 - r };
    0.5 * erfc
}

fn bs_run(gpu: &Gpu, name: &str, n: usize, reps: usize) -> Res {
    let (rate, vol) = (0.02f32, 0.30f32);
    let mut r = rng();
    let s = uniform(n, 5.0, 30.0, &mut r);
    let x = uniform(n, 1.0, 100.0, &mut r);
    let t = uniform(n, 0.25, 10.0, &mut r);
    let (ds, dx, dt) = (gpu.upload(&s)?, gpu.upload(&x)?, gpu.upload(&t)?);
    let mut dcall = gpu.upload(&vec![f32::NAN; n])?;
    let mut dput = gpu.upload(&vec![f32::NAN; n])?;
    let timer = Timer::new(gpu)?;
    let grid = Grid::cover_with_block(n, 256);
    let ms = if name == "black_scholes" {
        time_median!(
            timer,
            reps,
            black_scholes(gpu, grid, rate, vol, &ds, &dx, &dt, &mut dcall, &mut dput)
        )
    } else {
        time_median!(
            timer,
            reps,
            black_scholes_unchecked(gpu, grid, rate, vol, &ds, &dx, &dt, &mut dcall, &mut dput)
        )
    };
    let (call, put) = (dcall.to_vec()?, dput.to_vec()?);
    let (mut bad, mut max_err) = (0, 0.0f64);
    let (rr, v) = (f64::from(rate), f64::from(vol));
    for i in 0..n {
        let (sp, k, tt) = (f64::from(s[i]), f64::from(x[i]), f64::from(t[i]));
        let sq = tt.sqrt();
        let d1 = ((sp / k).ln() + (rr + 0.5 * v * v) * tt) / (v * sq);
        let d2 = d1 - v * sq;
        let (c1, c2) = (cnd_f64(d1), cnd_f64(d2));
        let e = (-rr * tt).exp();
        let (wc, wp) = (sp * c1 - k * e * c2, k * e * (1.0 - c2) - sp * (1.0 - c1));
        let err = (f64::from(call[i]) - wc)
            .abs()
            .max((f64::from(put[i]) - wp).abs())
            / sp;
        max_err = max_err.max(err);
        bad += off(err, 1e-5);
    }
    report(name, n, ms, n as f64, "goptions", bad, max_err);
    Ok(())
}

/// Blocks of the reductions: enough to fill an H200 (132 SMs × 8), as `block_sum`.
const REDUCE_BLOCKS: u32 = 132 * 8;

fn warp_sum_run(gpu: &Gpu, n: usize, reps: usize) -> Res {
    let x = uniform(n, -1.0, 1.0, &mut rng());
    let dx = gpu.upload(&x)?;
    let mut partial = gpu.upload(&vec![f32::NAN; REDUCE_BLOCKS as usize])?;
    let timer = Timer::new(gpu)?;
    let grid = Grid::new(REDUCE_BLOCKS, WARP_SUM_BLOCK);
    let ms = time_median!(timer, reps, block_sum_warp(gpu, grid, &dx, &mut partial));
    let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
    let err = (got - want).abs() / scale;
    report(
        "block_sum_warp",
        n,
        ms,
        4.0 * n as f64,
        "gbps",
        off(err, 1e-5),
        err,
    );
    Ok(())
}

fn half_pairs(n: usize, r: &mut impl Rng) -> Vec<f16x2> {
    (0..n)
        .map(|_| {
            f16x2::new(
                f16::from_f32(r.random_range(-1.0..1.0)),
                f16::from_f32(r.random_range(-1.0..1.0)),
            )
        })
        .collect()
}

fn half_run(gpu: &Gpu, name: &str, n: usize, reps: usize) -> Res {
    let mut r = rng();
    let (x, y) = (half_pairs(n, &mut r), half_pairs(n, &mut r));
    let (dx, dy) = (gpu.upload(&x)?, gpu.upload(&y)?);
    let timer = Timer::new(gpu)?;
    if name == "haxpy2" {
        let a = f16x2::new(f16::from_f32(0.75), f16::from_f32(-1.25));
        let nan = f16x2::new(f16::NAN, f16::NAN);
        let mut out = gpu.upload(&vec![nan; n])?;
        let grid = Grid::cover_with_block(n, 256);
        let ms = time_median!(timer, reps, haxpy2(gpu, grid, a, &dx, &dy, &mut out));
        let got = out.to_vec()?;
        let (mut bad, mut worst) = (0, 0.0f64);
        for i in 0..n {
            // One rounding to f16 of the exact a·x + y: within half an f16 ulp (2^-11).
            let w0 = 0.75 * f64::from(x[i].lo.to_f32()) + f64::from(y[i].lo.to_f32());
            let w1 = -1.25 * f64::from(x[i].hi.to_f32()) + f64::from(y[i].hi.to_f32());
            let e = ((f64::from(got[i].lo.to_f32()) - w0).abs() / w0.abs().max(6.1e-5))
                .max((f64::from(got[i].hi.to_f32()) - w1).abs() / w1.abs().max(6.1e-5));
            worst = worst.max(e);
            bad += off(e, 1.0 / 2048.0 + f64::EPSILON);
        }
        report(name, n, ms, 12.0 * n as f64, "gbps", bad, worst);
    } else {
        let mut partial = gpu.upload(&vec![f32::NAN; REDUCE_BLOCKS as usize])?;
        let grid = Grid::new(REDUCE_BLOCKS, HDOT_BLOCK);
        let ms = time_median!(timer, reps, hdot(gpu, grid, &dx, &dy, &mut partial));
        let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
        let (mut want, mut scale) = (0.0f64, 0.0f64);
        for (a, b) in x.iter().zip(&y) {
            for (p, q) in [(a.lo, b.lo), (a.hi, b.hi)] {
                let v = f64::from(p.to_f32()) * f64::from(q.to_f32());
                want += v;
                scale += v.abs();
            }
        }
        let err = (got - want).abs() / scale.max(1.0);
        report(name, n, ms, 8.0 * n as f64, "gbps", off(err, 1e-5), err);
    }
    Ok(())
}
