// A typo in a placement attribute: `#[mapp]` instead of `#[mapped]`.
use berth::prelude::*;

#[gpu_kernel]
pub fn sum(#[mapp] x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {}
