// `#[auto]` chooses between reading an input in place and copying it in: not for outputs.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(#[auto] out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
