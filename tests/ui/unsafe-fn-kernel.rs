// An `unsafe fn` kernel: the launcher is safe; `unsafe` blocks go inside the body.
use berth::prelude::*;

#[gpu_kernel]
pub unsafe fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
