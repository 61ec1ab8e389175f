// `fp_contract` takes a boolean, not `off`.
use berth::prelude::*;

#[gpu_kernel(fp_contract = off)]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
