// `unroll!` over a range whose end is only known at run time.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: &mut [f32], n: u32) {
    unroll! { for k in 0..n { out[k as usize] = 1.0; } }
}

fn main() {}
