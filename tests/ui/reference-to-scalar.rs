// A reference to a scalar: scalars are passed by value.
use berth::prelude::*;

#[gpu_kernel]
pub fn scale(a: &f32, x: &mut [f32]) {
    x[0] *= *a;
}

fn main() {}
