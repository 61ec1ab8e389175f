//! cuBLAS's half-precision GEMM (`cublasGemmEx`, `f32` out and accumulation) on berth's
//! buffers, timed the way the tensor-core examples time berth's kernels: the reference of
//! `tensor_gemm` and `wgmma_gemm`.

use berth::{DeviceBuffer, DeviceCopy, Stream, bf16, f16};
use cudarc::cublas::CudaBlas;
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType_t,
};
use cudarc::driver::DevicePtr;
use std::time::Instant;

/// An element type cuBLAS's `cublasGemmEx` takes as input here, with its name there.
pub trait GemmInput: DeviceCopy {
    /// cuBLAS's name of the type.
    const CUDA: cudaDataType_t;
}

impl GemmInput for f16 {
    const CUDA: cudaDataType_t = cudaDataType_t::CUDA_R_16F;
}

impl GemmInput for bf16 {
    const CUDA: cudaDataType_t = cudaDataType_t::CUDA_R_16BF;
}

/// How the row-major `b` of a product `c = a · b` (`m × n`, from `a` `m × k`) is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// `b` is `k × n`: `c = a · b`.
    KByN,
    /// `b` is `n × k` (both operands K-major): `c = a · bᵀ`.
    NByK,
}

/// `reps` samples of the row-major product of `a` (`m × k`) and `b` (laid out as `layout`
/// says) into `c` (`m × n`, `f32`), each sample `batch` calls
/// then one synchronise, after one sample untimed; per-call seconds.
///
/// # Errors
/// Buffers of other lengths than the shape says; cuBLAS's; berth's lending the buffers to
/// cudarc on `stream`.
pub fn gemm_times<T: GemmInput>(
    blas: &CudaBlas,
    stream: &Stream,
    (m, n, k): (usize, usize, usize),
    layout: BLayout,
    (a, b): (&DeviceBuffer<T>, &DeviceBuffer<T>),
    c: &mut DeviceBuffer<f32>,
    (reps, batch): (usize, usize),
) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    type Failure = Box<dyn std::error::Error>;
    if a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return Err(format!(
            "gemm_times: {m}×{n}×{k} needs buffers of {}, {} and {} elements, not {}, {} and {}",
            m * k,
            k * n,
            m * n,
            a.len(),
            b.len(),
            c.len()
        )
        .into());
    }
    let (alpha, beta) = (1.0f32, 0.0f32);
    // Column-major, cuBLAS computes `cᵀ = op(b) · aᵀ`: `a` is `k × m` with leading dimension
    // `k`; `b` is `n × k` with `n` (not transposed) or `k × n` with `k` (transposed).
    let (op_b, ldb) = match layout {
        BLayout::KByN => (cublasOperation_t::CUBLAS_OP_N, n),
        BLayout::NByK => (cublasOperation_t::CUBLAS_OP_T, k),
    };
    let timed = a.with_cudarc(stream, |a, s| {
        b.with_cudarc(stream, |b, _| {
            c.with_cudarc_mut(stream, |mut c, _| -> Result<Vec<f64>, Failure> {
                let (pa, _ra) = a.device_ptr(s);
                let (pb, _rb) = b.device_ptr(s);
                let (pc, _rc) = cudarc::driver::DevicePtrMut::device_ptr_mut(&mut c, s);
                let mut times = Vec::with_capacity(reps);
                for rep in 0..=reps {
                    let start = Instant::now();
                    for _ in 0..batch {
                        // SAFETY: column-major `cᵀ = op(b) · aᵀ` is row-major `c = a · b` (or
                        // `a · bᵀ`) with the operations and leading dimensions above; the
                        // three views hold exactly those elements (the caller's buffers are
                        // `m·k`, `k·n` and `m·n` long, checked above), of the types named
                        // (`T::CUDA` is `T`); cuBLAS queues on `s`, the stream the views were
                        // lent on.
                        unsafe {
                            cudarc::cublas::result::gemm_ex(
                                *blas.handle(),
                                op_b,
                                cublasOperation_t::CUBLAS_OP_N,
                                n as i32,
                                m as i32,
                                k as i32,
                                (&alpha) as *const f32 as *const _,
                                pb as *const _,
                                T::CUDA,
                                ldb as i32,
                                pa as *const _,
                                T::CUDA,
                                k as i32,
                                (&beta) as *const f32 as *const _,
                                pc as *mut _,
                                cudaDataType_t::CUDA_R_32F,
                                n as i32,
                                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                            )?;
                        }
                    }
                    s.synchronize()?;
                    if rep > 0 {
                        times.push(start.elapsed().as_secs_f64() / batch as f64);
                    }
                }
                Ok(times)
            })
        })
    });
    // Three lendings (berth's errors) around the timed loop (its own).
    timed.and_then(|r| r).and_then(|r| r)?
}
