// A placement attribute on a scalar: scalars are passed by value and have no placement.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(#[mapped] v: f32, out: &mut [f32]) {
    out[thread::index()] = v;
}

fn main() {}
