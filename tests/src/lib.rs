//! Helpers shared by berth's integration tests, GPU tests and benchmarks: random inputs that
//! are never all-zero, and host references for the example kernels.

use rand::Rng;

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

/// Element `i` of the benchmarks' streamed input: splitmix64 of `i`, scaled to `[-1, 1)`. A
/// pure function of `i`, the same as `x_at` in `bench/stream_input.h` (the CUDA references'), so
/// both sides stream identical data and any element can be checked without keeping the input.
pub fn stream_input_at(i: usize) -> f32 {
    let mut z = 0x243F_6A88_85A3_08D3u64.wrapping_add(
        (i as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 40) as f32 * (2.0 / 16_777_216.0) - 1.0
}

/// The median of the benchmarks' timings (the upper middle one for an even count).
pub fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` random floats in `[-1, 1)`, never all zero.
pub fn random_f32(n: usize) -> Vec<f32> {
    let mut rng = rand::rng();
    let mut v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    if let Some(first) = v.first_mut()
        && *first == 0.0
    {
        *first = 0.5;
    }
    v
}

/// `n` random `u32`s, never all zero.
pub fn random_u32(n: usize) -> Vec<u32> {
    let mut rng = rand::rng();
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

/// GPU timing for the benchmarks: CUDA events around work enqueued on the default stream.
pub mod timing {
    use berth::Gpu;
    use berth::raw::{result, sys};

    type BoxError = Box<dyn std::error::Error>;

    /// A pair of timing events on a GPU's default stream.
    pub struct Timer {
        start: sys::CUevent,
        stop: sys::CUevent,
        stream: sys::CUstream,
    }

    impl Timer {
        /// Events on `gpu`'s default stream.
        pub fn new(gpu: &Gpu) -> Result<Self, BoxError> {
            let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
            Ok(Timer {
                start: result::event::create(flags)?,
                stop: result::event::create(flags)?,
                stream: gpu.raw_default_stream(),
            })
        }

        /// Milliseconds the GPU work `f` enqueues takes. The stop event is recorded right
        /// after `f` returns its guard, as the CUDA C++ reference records it after its launch,
        /// so the time includes berth's host-side launch work but not the wait.
        pub fn time<'a>(
            &self,
            f: impl FnOnce() -> berth::Result<berth::Pending<'a>>,
        ) -> Result<f32, BoxError> {
            // SAFETY: both events and the stream belong to the current context.
            unsafe { result::event::record(self.start, self.stream) }?;
            let pending = f()?;
            // SAFETY: as above.
            unsafe { result::event::record(self.stop, self.stream) }?;
            pending.wait()?;
            // SAFETY: as above.
            unsafe {
                result::event::synchronize(self.stop)?;
                Ok(result::event::elapsed(self.start, self.stop)?)
            }
        }
    }

    /// The median of `v` (the mean of the middle two for an even count).
    pub fn median(mut v: Vec<f32>) -> f64 {
        v.sort_by(f32::total_cmp);
        let n = v.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => f64::from(v[n / 2]),
            _ => (f64::from(v[n / 2 - 1]) + f64::from(v[n / 2])) / 2.0,
        }
    }
}

/// The 1-based line of the first line of `examples/src/lib.rs` containing `needle`: tests
/// that check reported source locations find the line instead of hard-coding it.
pub fn example_line(needle: &str) -> u32 {
    line_in(
        "examples/src/lib.rs",
        include_str!("../../examples/src/lib.rs"),
        needle,
    )
}

/// [`example_line`] of another source file: the 1-based line of the first line of `src`
/// (the text of `file`) containing `needle`.
pub fn line_in(file: &str, src: &str, needle: &str) -> u32 {
    src.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("`{needle}` not found in {file}"))
}
pub mod warp_ref;

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

#[cfg(test)]
mod tests {
    /// The values `bench/stream_input.h`'s `x_at` gives (splitmix64, the top 24 bits scaled).
    #[test]
    fn the_streamed_input_matches_the_cuda_references() {
        let got = [super::stream_input_at(0), super::stream_input_at(12345)];
        let want = [-0.650_849_6_f32, 0.574_077_6];
        assert_eq!(got, want);
    }
}
