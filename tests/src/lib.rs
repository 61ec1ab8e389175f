//! Helpers shared by berth's integration tests, GPU tests and benchmarks: random inputs that
//! are never all-zero, and host references for the example kernels.

use rand::Rng;

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

/// Host saxpy exactly as the GPU computes it: a multiply then an add, each rounded (Rust does
/// not contract `a * x + y` into a fused multiply-add on either side).
pub fn saxpy_host(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
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
