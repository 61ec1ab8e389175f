//! cublas_gemm: cuBLAS through cudarc on berth's memory, without copies. berth uploads two
//! random matrices, cuBLAS multiplies them in place on berth's buffers (lent to cudarc for a
//! closure), then a berth kernel consumes cuBLAS's product; both are checked: berth's own
//! `sgemm_tiled` against cuBLAS within a tolerance, and sampled entries against the host.
//!
//! `cargo run --release -p berth-examples --features cublas --bin cublas_gemm -- [--n 1024]`
//! (`n` a multiple of 16). On the CPU simulator there is no CUDA context for cudarc: it says
//! so and exits successfully.

use berth::{Backend, DeviceBuffer, Error, Gpu, Grid, Stream};
use berth_examples::cli::{exit_with, init_logging};
use berth_examples::compute::{TILE, sgemm_tiled};
use clap::Parser;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use rand::Rng;

type Failure = Box<dyn std::error::Error>;

fn main() {
    init_logging();
    exit_with("cublas_gemm", run(Args::parse()));
}

/// cuBLAS through cudarc on berth's buffers, checked against berth's `sgemm_tiled` and the
/// host.
#[derive(Parser)]
struct Args {
    /// Rows and columns of the square matrices (a multiple of 16)
    #[arg(long, default_value_t = 1024)]
    n: usize,
}

/// `c = a · b` (row-major `n × n`) by cuBLAS on berth's buffers, queued on `stream`.
fn cublas_sgemm(
    blas: &CudaBlas,
    stream: &Stream,
    n: usize,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
) -> Result<(), Failure> {
    let d = n as i32;
    // cuBLAS is column-major: row-major `c = a · b` is column-major `cᵀ = bᵀ · aᵀ`, so the
    // operands go in swapped and untransposed.
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: d,
        n: d,
        k: d,
        alpha: 1.0f32,
        lda: d,
        ldb: d,
        beta: 0.0f32,
        ldc: d,
    };
    let queued = a.with_cudarc(stream, |a, _| {
        b.with_cudarc(stream, |b, _| {
            c.with_cudarc_mut(stream, |mut c, _| {
                // SAFETY: the three views hold `n × n` elements each, which the leading
                // dimensions and sizes above describe; `blas` queues on `stream`.
                unsafe { blas.gemm(cfg, &b, &a, &mut c) }
            })
        })
    });
    // Three lendings (berth's errors) around cuBLAS's call (its own).
    queued.and_then(|r| r).and_then(|r| r)??;
    Ok(())
}

/// `a · b` at `(i, j)`, in f64 on the host.
fn host_entry(a: &[f32], b: &[f32], n: usize, i: usize, j: usize) -> f64 {
    (0..n)
        .map(|k| f64::from(a[i * n + k]) * f64::from(b[k * n + j]))
        .sum()
}

/// How many of 256 random entries of `got` differ from the host's `a · b` by more than a
/// relative 1e-3 (f32 sums of `n` products).
fn host_mismatches(got: &[f32], a: &[f32], b: &[f32], n: usize) -> usize {
    let mut rng = rand::rng();
    (0..256)
        .filter(|_| {
            let (i, j) = (rng.random_range(0..n), rng.random_range(0..n));
            let want = host_entry(a, b, n, i, j);
            (f64::from(got[i * n + j]) - want).abs() > 1e-3 * want.abs().max(1.0)
        })
        .count()
}

fn run(args: Args) -> Result<bool, Failure> {
    let n = args.n;
    if n == 0 || !n.is_multiple_of(TILE) {
        return Err(format!("--n {n}: must be a positive multiple of {TILE}").into());
    }
    let gpu = Gpu::new_or_simulator()?;
    let ctx = match gpu.cudarc_context() {
        Ok(ctx) => ctx,
        Err(e @ Error::NeedsGpu { .. }) if gpu.backend() == Backend::Simulator => {
            println!("cublas_gemm: needs a GPU ({e}); nothing to run here");
            return Ok(true);
        }
        Err(e) => return Err(e.into()),
    };
    println!(
        "cublas_gemm: {n}×{n} SGEMM on {} (cudarc context of device {})",
        gpu.name(),
        ctx.ordinal()
    );

    let mut rng = rand::rng();
    let mut random =
        |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(-1.0..1.0)).collect() };
    let (a, b) = (random(n * n), random(n * n));
    let da = gpu.upload(&a)?;
    let db = gpu.upload(&b)?;
    let mut by_cublas = gpu.alloc_zeroed::<f32>(n * n)?;
    let mut by_berth = gpu.alloc_zeroed::<f32>(n * n)?;
    let mut consumed = gpu.alloc_zeroed::<f32>(n * n)?;

    // SAFETY: only checks whether the library can be opened; cudarc's cuBLAS calls panic
    // when it cannot, which is why this runs first.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err("libcublas not found on the library path (cudarc loads it at run time)".into());
    }
    let stream = gpu.stream()?;
    let blas = CudaBlas::new(stream.cudarc_stream()?)?;
    let start = std::time::Instant::now();
    cublas_sgemm(&blas, &stream, n, &da, &db, &mut by_cublas)?;
    let grid = Grid::new(
        ((n / TILE) as u32, (n / TILE) as u32),
        (TILE as u32, TILE as u32),
    );
    // berth's own kernel, and one that consumes cuBLAS's product (`(a · b) · b`): the launch
    // waits for cuBLAS's work on the buffer it reads.
    sgemm_tiled(&stream, grid, n as u32, &da, &db, &mut by_berth)?.wait()?;
    sgemm_tiled(&stream, grid, n as u32, &by_cublas, &db, &mut consumed)?.wait()?;
    println!(
        "cublas_gemm: cuBLAS, berth's sgemm_tiled and the consuming launch in {:.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    // `to_vec` waits for any work still using the buffer (cuBLAS's included).
    let c_blas = by_cublas.to_vec()?;
    let c_berth = by_berth.to_vec()?;
    let c_consumed = consumed.to_vec()?;
    let worst = c_blas
        .iter()
        .zip(&c_berth)
        .map(|(x, y)| (x - y).abs() / x.abs().max(1.0))
        .fold(0.0f32, f32::max);
    let vs_host = host_mismatches(&c_blas, &a, &b, n);
    let consumed_vs_host = host_mismatches(&c_consumed, &c_blas, &b, n);
    println!(
        "cublas_gemm: cuBLAS vs sgemm_tiled: largest relative difference {worst:.2e}; \
         {vs_host} of 256 sampled entries of cuBLAS's product and {consumed_vs_host} of the \
         consuming kernel's off the host's"
    );
    Ok(worst < 1e-3 && vs_host == 0 && consumed_vs_host == 0)
}
