//! cudarc on berth's memory: cuBLAS on berth's buffers, and a cudarc slice adopted by berth.

use super::*;

/// Row-major `n × n` `c = a · b` by cuBLAS (through cudarc) on berth's buffers, on `stream`.
fn cublas_sgemm(
    stream: &berth::Stream,
    n: usize,
    a: &berth::DeviceBuffer<f32>,
    b: &berth::DeviceBuffer<f32>,
    c: &mut berth::DeviceBuffer<f32>,
) {
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys::cublasOperation_t};
    let blas = CudaBlas::new(stream.cudarc_stream().unwrap()).unwrap();
    let d = n as i32;
    // Column-major `cᵀ = bᵀ · aᵀ` is row-major `c = a · b`.
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
    a.with_cudarc(stream, |a, _| {
        b.with_cudarc(stream, |b, _| {
            c.with_cudarc_mut(stream, |mut c, _| {
                // SAFETY: three views of `n × n` elements, as the sizes above say.
                unsafe { blas.gemm(cfg, &b, &a, &mut c) }.unwrap()
            })
            .unwrap()
        })
        .unwrap()
    })
    .unwrap();
}

/// cuBLAS on berth's buffers matches the host and berth's `sgemm_tiled`, and a berth launch
/// reading cuBLAS's product (with no wait in between) sees all of it.
#[test]
fn cublas_through_cudarc_on_berth_buffers_matches_host_and_sgemm_tiled() {
    use berth_examples::compute::{TILE, sgemm_tiled};
    let (_g, gpu) = gpu();
    let n = 512;
    let (a, b) = (random_f32(n * n), random_f32(n * n));
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut by_cublas = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let mut by_berth = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let mut consumed = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let stream = gpu.stream().unwrap();
    cublas_sgemm(&stream, n, &da, &db, &mut by_cublas);
    let t = TILE as u32;
    let grid = Grid::new((n as u32 / t, n as u32 / t), (t, t));
    // On the default stream: ordered after cuBLAS's work only by the recorded use.
    sgemm_tiled(&gpu, grid, n as u32, &by_cublas, &db, &mut consumed)
        .unwrap()
        .wait()
        .unwrap();
    sgemm_tiled(&gpu, grid, n as u32, &da, &db, &mut by_berth)
        .unwrap()
        .wait()
        .unwrap();
    let (c, berth_c) = (by_cublas.to_vec().unwrap(), by_berth.to_vec().unwrap());
    let host = |x: &[f32], y: &[f32], i: usize, j: usize| -> f64 {
        (0..n)
            .map(|k| f64::from(x[i * n + k]) * f64::from(y[k * n + j]))
            .sum()
    };
    let near = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-3 * want.abs().max(1.0);
    for (i, j) in [(0, 0), (1, 7), (n - 1, n - 1), (n / 2, 3), (17, n - 2)] {
        assert!(
            near(c[i * n + j], host(&a, &b, i, j)),
            "cuBLAS at ({i}, {j})"
        );
    }
    for (x, y) in c.iter().zip(&berth_c) {
        assert!(near(*y, f64::from(*x)), "sgemm_tiled {y} vs cuBLAS {x}");
    }
    let consumed = consumed.to_vec().unwrap();
    for (i, j) in [(0, 0), (5, 9), (n - 1, 0), (n / 3, n / 4)] {
        assert!(
            near(consumed[i * n + j], host(&c, &b, i, j)),
            "consumer at ({i}, {j})"
        );
    }
}

/// Memory cudarc allocated becomes a berth buffer without a copy, and kernels take it.
#[test]
fn a_cudarc_slice_adopted_by_berth_holds_its_data_and_takes_launches() {
    let (_g, gpu) = gpu();
    let n = 100_003;
    let (x, y) = (random_f32(n), random_f32(n));
    let cuda = gpu.cudarc_context().unwrap().default_stream();
    let slice = cuda.clone_htod(&y).unwrap();
    let mut dy = berth::DeviceBuffer::from_cudarc(&gpu, slice).unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);
    let dx = gpu.upload(&x).unwrap();
    saxpy(&gpu, Grid::cover(n), 2.0, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    let got = dy.to_vec().unwrap();
    assert_eq!(got, saxpy_on(&gpu, 2.0, &x, &y));
}
