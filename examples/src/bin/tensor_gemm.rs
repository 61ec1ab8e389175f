//! tensor_gemm: berth's tensor-core GEMM (`hgemm_f16` / `hgemm_bf16`: `f16` or `bf16` in,
//! `f32` out) against cuBLAS's `cublasGemmEx` with the same types, on the same random
//! matrices in berth's buffers; prints each one's median and best time and TFLOP/s, checks
//! both against each other and sampled entries against the host, and ends with one JSON line
//! per type.
//!
//! `cargo run --release -p berth-examples --features cublas --bin tensor_gemm -- [--m 4096]
//! [--n 4096] [--k 4096] [--reps 20] [--batch 10]` (`m`, `n` multiples of 128, `k` of 64).
//! Each timed sample is `batch` launches queued back to back with one wait. On the CPU
//! simulator it runs berth's kernel alone, once, at the size given (keep it small there).

use berth::{Backend, DeviceBuffer, Error, Gpu, Grid, Pending, Queue, Stream, bf16, f16};
use berth_examples::blas::{BLayout, GemmInput, gemm_times};
use berth_examples::cli::{exit_with, init_logging, median_min};
use berth_examples::tensor::{
    MMA_BK, MMA_BM, MMA_BN, MMA_SHARED_BYTES, MMA_THREADS, hgemm_bf16, hgemm_f16,
};
use clap::Parser;
use cudarc::cublas::CudaBlas;
use rand::Rng;
use std::time::Instant;

type Failure = Box<dyn std::error::Error>;

fn main() {
    init_logging();
    exit_with("tensor_gemm", run(Args::parse()));
}

/// berth's tensor-core GEMM against cuBLAS.
#[derive(Parser)]
struct Args {
    /// Rows of `a` and `c` (a multiple of 128)
    #[arg(long, default_value_t = 4096)]
    m: usize,
    /// Columns of `b` and `c` (a multiple of 128)
    #[arg(long, default_value_t = 4096)]
    n: usize,
    /// Columns of `a`, rows of `b` (a multiple of 64)
    #[arg(long, default_value_t = 4096)]
    k: usize,
    /// Timed samples of each GEMM (after one warm-up)
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Launches queued back to back in one sample
    #[arg(long, default_value_t = 10)]
    batch: usize,
}

/// The element types both sides run.
trait Input: GemmInput + Send + Sync {
    const NAME: &'static str;
    fn round(x: f32) -> Self;
    fn widen(self) -> f32;
    /// Queue berth's kernel.
    fn launch<'l>(
        on: &'l impl Queue,
        grid: Grid,
        dims: (u32, u32, u32),
        a: &'l DeviceBuffer<Self>,
        b: &'l DeviceBuffer<Self>,
        c: &'l mut DeviceBuffer<f32>,
    ) -> berth::Result<Pending<'l>>;
}

impl Input for f16 {
    const NAME: &'static str = "f16";
    fn round(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn launch<'l>(
        on: &'l impl Queue,
        g: Grid,
        (m, n, k): (u32, u32, u32),
        a: &'l DeviceBuffer<Self>,
        b: &'l DeviceBuffer<Self>,
        c: &'l mut DeviceBuffer<f32>,
    ) -> berth::Result<Pending<'l>> {
        hgemm_f16(on, g, m, n, k, a, b, c)
    }
}

impl Input for bf16 {
    const NAME: &'static str = "bf16";
    fn round(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn launch<'l>(
        on: &'l impl Queue,
        g: Grid,
        (m, n, k): (u32, u32, u32),
        a: &'l DeviceBuffer<Self>,
        b: &'l DeviceBuffer<Self>,
        c: &'l mut DeviceBuffer<f32>,
    ) -> berth::Result<Pending<'l>> {
        hgemm_bf16(on, g, m, n, k, a, b, c)
    }
}

/// `reps` samples of berth's GEMM, each `batch` launches in one scope; per-launch seconds.
fn berth_times<T: Input>(
    stream: &Stream,
    grid: Grid,
    dims: (u32, u32, u32),
    (a, b): (&DeviceBuffer<T>, &DeviceBuffer<T>),
    c: &mut DeviceBuffer<f32>,
    (reps, batch): (usize, usize),
) -> Result<Vec<f64>, Failure> {
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = Instant::now();
        stream.scope(|s| {
            for _ in 0..batch {
                T::launch(s, grid, dims, a, b, c)?.detach();
            }
            Ok(())
        })?;
        if rep > 0 || reps == 0 {
            times.push(start.elapsed().as_secs_f64() / batch as f64);
        }
    }
    Ok(times)
}

/// `a · b` at `(i, j)` on the host, in `f64`.
fn host_entry(a: &[f32], b: &[f32], (n, k): (usize, usize), i: usize, j: usize) -> f64 {
    (0..k)
        .map(|kk| f64::from(a[i * k + kk]) * f64::from(b[kk * n + j]))
        .sum()
}

fn one<T: Input>(
    gpu: &Gpu,
    blas: Option<&CudaBlas>,
    stream: &Stream,
    (m, n, k): (usize, usize, usize),
    (reps, batch): (usize, usize),
) -> Result<bool, Failure> {
    let mut rng = rand::rng();
    let mut random = |len: usize| -> Vec<T> {
        (0..len)
            .map(|_| T::round(rng.random_range(-1.0..1.0)))
            .collect()
    };
    let (a, b) = (random(m * k), random(k * n));
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut by_berth = gpu.upload(&vec![f32::NAN; m * n])?;
    let grid = Grid::new(((m / MMA_BM) * (n / MMA_BN)) as u32, MMA_THREADS as u32)
        .shared_bytes(MMA_SHARED_BYTES as u32);
    let dims = (m as u32, n as u32, k as u32);
    let flops = 2.0 * (m * n * k) as f64;
    let (med, best) = median_min(berth_times(
        stream,
        grid,
        dims,
        (&da, &db),
        &mut by_berth,
        (reps, batch),
    )?);
    let c_berth = by_berth.to_vec()?;
    let (af, bf): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&x| x.widen()).collect(),
        b.iter().map(|&x| x.widen()).collect(),
    );
    let off_host = (0..256)
        .filter(|_| {
            let (i, j) = (rng.random_range(0..m), rng.random_range(0..n));
            let want = host_entry(&af, &bf, (n, k), i, j);
            let got = f64::from(c_berth[i * n + j]);
            // A NaN (an entry never written) is off too.
            (got - want).abs() > 1e-3 * want.abs().max(1.0) || got.is_nan()
        })
        .count();
    let kernel = "hgemm";
    print!(
        "tensor_gemm {} {kernel}: {m}×{n}×{k}: berth median {:.3} ms ({:.1} TFLOP/s, best {:.1})",
        T::NAME,
        med * 1e3,
        flops / med / 1e12,
        flops / best / 1e12
    );
    let Some(blas) = blas else {
        println!("; {off_host} of 256 sampled entries off the host's");
        return Ok(off_host == 0);
    };
    let mut by_cublas = gpu.upload(&vec![f32::NAN; m * n])?;
    let (cmed, cbest) = median_min(gemm_times(
        blas,
        stream,
        (m, n, k),
        BLayout::KByN,
        (&da, &db),
        &mut by_cublas,
        (reps, batch),
    )?);
    let c_cublas = by_cublas.to_vec()?;
    let worst = c_cublas
        .iter()
        .zip(&c_berth)
        .map(|(x, y)| (x - y).abs() / x.abs().max(1.0))
        .fold(
            0.0f32,
            |w, d| if d.is_nan() { f32::INFINITY } else { w.max(d) },
        );
    println!(
        ", cuBLAS median {:.3} ms ({:.1} TFLOP/s, best {:.1}): berth at {:.3}× cuBLAS's \
         throughput; largest relative difference {worst:.2e}; {off_host} of 256 sampled \
         entries off the host's",
        cmed * 1e3,
        flops / cmed / 1e12,
        flops / cbest / 1e12,
        cmed / med
    );
    println!(
        "{{\"bench\":\"tensor_gemm\",\"kernel\":\"{kernel}\",\"type\":\"{}\",\"m\":{m},\"n\":{n},\"k\":{k},\"batch\":{batch},\"berth_tflops\":{:.1},\"berth_best_tflops\":{:.1},\"cublas_tflops\":{:.1},\"cublas_best_tflops\":{:.1},\"ratio\":{:.3},\"worst_rel_diff\":{worst:e},\"off_host\":{off_host}}}",
        T::NAME,
        flops / med / 1e12,
        flops / best / 1e12,
        flops / cmed / 1e12,
        flops / cbest / 1e12,
        cmed / med
    );
    Ok(worst < 1e-3 && off_host == 0)
}

fn run(args: Args) -> Result<bool, Failure> {
    let (m, n, k) = (args.m, args.n, args.k);
    if m == 0 || n == 0 || k == 0 || m % MMA_BM != 0 || n % MMA_BN != 0 || k % MMA_BK != 0 {
        return Err(format!(
            "--m {m} --n {n} --k {k}: m and n must be positive multiples of {MMA_BM}, k of {MMA_BK}"
        )
        .into());
    }
    let gpu = Gpu::new_or_simulator()?;
    let stream = gpu.stream()?;
    let blas = match gpu.cudarc_context() {
        Ok(_) => {
            // SAFETY: only checks whether the library can be opened; cudarc's cuBLAS calls
            // panic when it cannot, which is why this runs first.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err(
                    "libcublas not found on the library path (cudarc loads it at run time)".into(),
                );
            }
            Some(CudaBlas::new(stream.cudarc_stream()?)?)
        }
        Err(Error::NeedsGpu { .. }) if gpu.backend() == Backend::Simulator => None,
        Err(e) => return Err(e.into()),
    };
    let (reps, batch) = if blas.is_some() {
        (args.reps.max(1), args.batch.max(1))
    } else {
        (0, 1)
    };
    println!("tensor_gemm: on {}", gpu.name());
    let shape = (m, n, k);
    let ok_f16 = one::<f16>(&gpu, blas.as_ref(), &stream, shape, (reps, batch))?;
    let ok_bf16 = one::<bf16>(&gpu, blas.as_ref(), &stream, shape, (reps, batch))?;
    Ok(ok_f16 && ok_bf16)
}
