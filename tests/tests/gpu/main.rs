//! The kernels against host references on fresh random data, at sizes that are and are not
//! multiples of the block, one module per topic (`gpu/`): launches, placements, pipelines,
//! signals, atomics, warp operations, half precision, panics and faults, cudarc interop.
//! One test binary: each links the whole runtime, which a build pays per binary.
//!
//! One test body, two backends: with `--features gpu` (staged by `cargo xtask gpu` for the
//! GPU machine) every test runs on the GPU; without it (CI, `cargo test`) the same tests run
//! on the CPU simulator, except the few marked `#[cfg(feature = "gpu")]` that test what only a
//! GPU does (sticky faults and recovery, traps without a record).

use berth::{Error, Gpu, Grid};
use berth_examples::{REDUCE_BLOCK, block_sum, saxpy};
use berth_fixtures::faults::{four_reads, strided_sum, unchecked_copy};
use berth_tests::{
    affine_on, in_child, mul_add_on, random_f32, random_u32, reduce_blocks, run_isolated, saxpy_on,
    sum_f64,
};
use berth_tests::{backend, gpu};

/// Sizes that are and are not multiples of the block; the largest only on the GPU.
const SIZES: &[usize] = if cfg!(feature = "gpu") {
    &[1, 255, 256, 257, 1000, 4099, (1 << 20) + 3, 10_000_019]
} else {
    &[1, 255, 256, 257, 1000, 4099, (1 << 20) + 3]
};

/// On the GPU, run the rest of the calling test `$name` in a child process (a trap poisons
/// the whole process) and pass or fail with it; on the simulator, just go on.
macro_rules! in_child_on_the_gpu {
    ($name:literal) => {
        if cfg!(feature = "gpu") && !in_child() {
            let (ok, out) = run_isolated(&berth_tests::test_path(module_path!(), $name));
            assert!(ok, "child failed:\n{out}");
            return;
        }
    };
}

mod async_copy;
mod atomics;
mod attention;
mod attention_wgmma;
mod auto;
mod faults;
mod half;
// cudarc is a dependency of the `gpu` feature only.
#[cfg(feature = "gpu")]
mod interop;
mod kernels;
mod launches;
mod mma;
mod pipeline;
mod placement;
mod signals;
mod warp;
mod wgmma;
