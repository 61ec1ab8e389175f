// The same placement attribute written twice on one argument.
use berth::prelude::*;

#[gpu_kernel]
pub fn sum(#[mapped] #[mapped] x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {}
