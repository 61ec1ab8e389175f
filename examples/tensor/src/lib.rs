//! berth's example kernels on tensor cores, a kernel crate of their own (a crate's GPU build
//! compiles the whole crate again after any edit, so kernels edited apart rebuild quicker in
//! crates apart): matrix products through warp-level `mma.sync` ([`tensor`]) and through
//! warpgroup `wgmma` fed by bulk tensor copies ([`wgmma_gemm`]), and flash attention written
//! both ways ([`attention`], [`attention_wgmma`]). The programs that launch them are in
//! `berth-examples`, which re-exports these modules.

pub mod attention;
pub mod attention_wgmma;
pub mod tensor;
pub mod wgmma_gemm;
