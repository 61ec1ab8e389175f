// `unroll!` around something that is not a `for` loop.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: &mut [f32]) {
    let mut k = 0;
    unroll! { while k < 4 { out[k] = 1.0; k += 1; } }
}

fn main() {}
