//! The renderers of `BENCHMARKS.md`'s sections, one per benchmark. Each lives in its
//! benchmark's folder, beside the berth side (`main.rs`) and the CUDA C++ reference
//! (`reference.cu`): `bench/<name>/record.rs`. `record.rs` lists which run file each renders.

#[path = "../../bench/compute/record.rs"]
pub mod compute;
#[path = "../../bench/features/record.rs"]
pub mod features;
#[path = "../../bench/first_launch/record.rs"]
pub mod first_launch;
#[path = "../../bench/kernels/record.rs"]
pub mod kernels;
#[path = "../../bench/launch/record.rs"]
pub mod launch;
#[path = "../../bench/multigpu/record.rs"]
pub mod multigpu;
#[path = "../../bench/nvtx/record.rs"]
pub mod nvtx;
#[path = "../../bench/pipeline/record.rs"]
pub mod pipeline;
#[path = "../../bench/placement/record.rs"]
pub mod placement;
#[path = "../../bench/placement/record_auto.rs"]
pub mod placement_auto;
#[path = "../../bench/signals/record.rs"]
pub mod signals;
#[path = "../../bench/tensor/record.rs"]
pub mod tensor;
#[path = "../../bench/tpch/record.rs"]
pub mod tpch;
