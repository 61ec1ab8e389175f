// A block shape that is not made of literals: it is fixed when the kernel is compiled.
use berth::prelude::*;

#[gpu_kernel(block = (16, n))]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
