// One argument cannot be both atomic and per block.
use berth::prelude::*;

#[gpu_kernel]
pub fn k(#[atomic] #[per_block] out: &mut [u32]) {
    let _ = out.len();
}

fn main() {}
