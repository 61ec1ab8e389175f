// A slice of references: a reference means nothing on the GPU.
use berth::prelude::*;

#[gpu_kernel]
pub fn copy(x: &[&u32], out: &mut [u32]) {
    out[thread::index()] = *x[0];
}

fn main() {}
