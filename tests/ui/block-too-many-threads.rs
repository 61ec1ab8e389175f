// A block shape of 2048 threads: a block has at most 1024.
use berth::prelude::*;

#[gpu_kernel(block = (32, 32, 2))]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
