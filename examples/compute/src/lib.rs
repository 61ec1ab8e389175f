//! berth's compute-bound example kernels, a kernel crate of their own (a crate's GPU build
//! compiles the whole crate again after any edit, so kernels edited apart rebuild quicker in
//! crates apart): SGEMM, n-body, Black-Scholes and a block sum written with berth's idioms
//! ([`compute`]), the same kernels ported line for line from CUDA ([`plain`]), and
//! half-precision arithmetic ([`half_precision`]). The benchmarks run them against nvcc;
//! `berth-examples` re-exports these modules.

pub mod compute;
pub mod half_precision;
pub mod plain;
