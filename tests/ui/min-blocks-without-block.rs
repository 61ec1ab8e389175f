// `min_blocks_per_sm` counts blocks of the declared shape: without `block`, there is none.
use berth::prelude::*;

#[gpu_kernel(min_blocks_per_sm = 4)]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
