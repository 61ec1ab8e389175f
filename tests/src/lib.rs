//! Helpers shared by berth's integration tests, GPU tests and benchmarks: random inputs that
//! are never all-zero, and host references for the example kernels (`bench/` has its own
//! timing helpers).

use rand::{Rng, SeedableRng};
use std::cell::Cell;

/// The tests of one binary share the device: a test may reset its context, hold a gate
/// closed that another's waits would stall on, or measure memory the others move.
static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The backend under test: the GPU with `--features gpu`, else the simulator.
pub fn backend() -> berth::Gpu {
    if cfg!(feature = "gpu") {
        berth::Gpu::new().expect("a GPU is required for --features gpu")
    } else {
        berth::Gpu::simulator()
    }
}

/// [`backend`], with a guard that keeps the other tests of the binary off the device while
/// it lives (a failed test's poisoned lock is taken over).
pub fn gpu() -> (std::sync::MutexGuard<'static, ()>, berth::Gpu) {
    let guard = DEVICE.lock().unwrap_or_else(|p| p.into_inner());
    (guard, backend())
}

/// The seed [`rng`] starts from unless `BERTH_TEST_SEED` gives another.
pub const TEST_SEED: u64 = 0x62_65_72_74_68;

/// A generator of test data that draws the same numbers on every run: its seed is
/// `BERTH_TEST_SEED` (else [`TEST_SEED`]) mixed with the name of the calling thread (the
/// test's, which the test harness gives each test's thread) and how many generators that
/// thread took before. Each test, and each call within it, gets data of its own that do not
/// depend on which tests ran beside it; a failure comes back when the test runs again, and
/// `BERTH_TEST_SEED=N` draws other data.
pub fn rng() -> rand::rngs::StdRng {
    thread_local!(static TAKEN: Cell<u64> = const { Cell::new(0) });
    let taken = TAKEN.with(|t| {
        let n = t.get();
        t.set(n + 1);
        n
    });
    let base = std::env::var("BERTH_TEST_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(TEST_SEED);
    // FNV-1a of the thread's name: a hash that no toolchain or crate version changes.
    let name = std::thread::current().name().unwrap_or("").to_owned();
    let named = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    rand::rngs::StdRng::seed_from_u64(
        base ^ named.rotate_left(17) ^ taken.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
}

/// `n` random floats in `[-1, 1)`, never all zero (drawn by [`rng`]).
pub fn random_f32(n: usize) -> Vec<f32> {
    let mut rng = rng();
    let mut v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    if let Some(first) = v.first_mut()
        && *first == 0.0
    {
        *first = 0.5;
    }
    v
}

/// `n` random `u32`s, never all zero (drawn by [`rng`]).
pub fn random_u32(n: usize) -> Vec<u32> {
    let mut rng = rng();
    (0..n).map(|_| rng.random_range(1..u32::MAX)).collect()
}

/// Host saxpy as the simulator computes it: a multiply then an add, each rounded (host Rust
/// does not contract `a * x + y`).
pub fn saxpy_host(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}

/// `a * x + 1` per element (the `affine_one` kernel's result on the simulator).
pub fn affine_host(a: f32, x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| a * v + 1.0).collect()
}

/// Whether `gpu` fuses a kernel's `a * b + c` into one rounding: a GPU does (berth contracts
/// multiply-adds, as nvcc's default `-fmad=true`), the simulator does not (host Rust).
pub fn fuses(gpu: &berth::Gpu) -> bool {
    gpu.backend() == berth::Backend::Cuda
}

/// `a * b + c` as a kernel computes it on `gpu` (see [`fuses`]).
pub fn mul_add_on(gpu: &berth::Gpu, a: f32, b: f32, c: f32) -> f32 {
    if fuses(gpu) {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// [`saxpy_host`] as `gpu` computes it, bit for bit.
pub fn saxpy_on(gpu: &berth::Gpu, a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| mul_add_on(gpu, a, x, y))
        .collect()
}

/// [`affine_host`] as `gpu` computes it, bit for bit.
pub fn affine_on(gpu: &berth::Gpu, a: f32, x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| mul_add_on(gpu, a, v, 1.0)).collect()
}

/// Sum in `f64`.
pub fn sum_f64(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum()
}

/// Blocks for `block_sum` over `n` elements: enough to fill an H200 (132 SMs × 8), fewer for
/// small inputs.
pub fn reduce_blocks(n: usize) -> u32 {
    let per_block = berth_examples::REDUCE_BLOCK as usize;
    n.div_ceil(per_block).clamp(1, 132 * 8) as u32
}

/// A kernel source file that reports name: its path from the workspace root, as a report
/// gives it, and its text. Tests that check reported source locations find the line
/// ([`Source::line`]) instead of hard-coding it.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// The path, e.g. `fixtures/src/faults.rs`.
    pub path: &'static str,
    text: &'static str,
}

impl Source {
    /// The 1-based line of the first line containing `needle`.
    pub fn line(self, needle: &str) -> u32 {
        line_in(self.path, self.text, needle)
    }
}

macro_rules! source {
    ($path:literal) => {
        Source {
            path: $path,
            text: include_str!(concat!("../../", $path)),
        }
    };
}

/// The example kernels' `lib.rs`.
pub const EXAMPLES: Source = source!("examples/src/lib.rs");
/// The example compute kernels.
pub const COMPUTE: Source = source!("examples/compute/src/compute.rs");
/// The example chains of dependent launches.
pub const CHAIN: Source = source!("examples/src/chain.rs");
/// The fixture kernels that fail on purpose.
pub const FAULTS: Source = source!("fixtures/src/faults.rs");
/// The fixture kernels that are wrong on purpose.
pub const BROKEN: Source = source!("fixtures/src/broken.rs");
/// The fixture kernels of warp operations.
pub const WARP_OPS: Source = source!("fixtures/src/warp_ops.rs");
/// The fixture kernels of the simulator's checks.
pub const SIM_CHECKS: Source = source!("fixtures/src/sim_checks.rs");
/// The fixture kernels of arguments and launch shapes.
pub const ARGS: Source = source!("fixtures/src/args.rs");

/// The 1-based line of the first line of `src` (the text of `file`) containing `needle`.
pub fn line_in(file: &str, src: &str, needle: &str) -> u32 {
    src.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("`{needle}` not found in {file}"))
}
pub mod warp_ref;

/// The name libtest gives the test function `name` of the module whose `module_path!()` is
/// `module`, for [`run_isolated`]: the module path without the crate, then the function
/// (`faults::name` for a test in `tests/gpu/faults.rs`).
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// Set in a child process running one test of its binary (see [`run_isolated`]).
pub const CHILD_ENV: &str = "BERTH_TEST_CHILD";

/// Whether this process is such a child.
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Run the test `name` of the current test binary in a child process (a kernel fault poisons
/// the CUDA state of the whole process on the GPU machine's driver); its output, and whether
/// it passed.
pub fn run_isolated(name: &str) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env_remove(berth::RESTART_ENV)
        // Under compute-sanitizer the child runs unsanitized (`--target-processes
        // application-only`), but it inherits the sanitizer's NVTX injection library, which
        // berth's NVTX ranges would load; it then waits for a sanitizer that never serves it.
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("--- child `{name}` ---\n{text}--- end of child ---");
    (out.status.success() && text.contains("1 passed"), text)
}

/// The acceleration the `compute::nbody` kernels compute for body `i`, in f64, and the sum of
/// the magnitudes of its terms (the scale a relative error is measured against).
pub fn nbody_host(bodies: &[berth_examples::compute::Body], i: usize) -> ([f64; 3], f64) {
    let me = bodies[i];
    let (mut w, mut scale) = ([0.0f64; 3], 0.0f64);
    for o in bodies {
        let d = [
            f64::from(o.x) - f64::from(me.x),
            f64::from(o.y) - f64::from(me.y),
            f64::from(o.z) - f64::from(me.z),
        ];
        let r2 = d[0] * d[0]
            + d[1] * d[1]
            + d[2] * d[2]
            + f64::from(berth_examples::compute::SOFTENING2);
        let s = f64::from(o.m) / (r2 * r2.sqrt());
        for k in 0..3 {
            w[k] += d[k] * s;
            scale += (d[k] * s).abs();
        }
    }
    (w, scale)
}

/// Point `i` of one step of the 5-point stencil of `berth_examples::plain::plain_stencil5` on
/// a row-major `h × w` grid, in f64: half the point plus an eighth of each neighbour inside,
/// the point itself on the border.
pub fn stencil5_host(input: &[f32], w: usize, h: usize, i: usize) -> f64 {
    let (x, y) = (i % w, i / w);
    let at = |k: usize| f64::from(input[k]);
    if x == 0 || y == 0 || x == w - 1 || y == h - 1 {
        at(i)
    } else {
        0.5 * at(i) + 0.125 * (at(i - 1) + at(i + 1) + at(i - w) + at(i + w))
    }
}

#[cfg(test)]
mod tests {
    /// What a test thread named `name` draws: two batches of floats and one of integers.
    fn drawn_by(name: &str) -> (Vec<f32>, Vec<f32>, Vec<u32>) {
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(|| {
                (
                    super::random_f32(64),
                    super::random_f32(64),
                    super::random_u32(64),
                )
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// A test draws the same data on every run, whatever ran before it or beside it on other
    /// threads; each of its calls draws data of its own, and each test other data.
    #[test]
    fn test_data_are_the_same_on_every_run() {
        let first = drawn_by("one::test");
        // Another test drawing meanwhile, and in between.
        let beside = std::thread::spawn(|| drawn_by("another::test"));
        let again = drawn_by("one::test");
        let other = beside.join().unwrap();
        assert_eq!(first, again);
        assert_ne!(first.0, first.1, "each call draws data of its own");
        assert_ne!(first.0, other.0, "each test draws data of its own");
    }
}
