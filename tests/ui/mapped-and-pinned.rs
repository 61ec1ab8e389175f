// Two placements on one argument: `#[mapped]` and `#[pinned_async]` exclude each other.
use berth::prelude::*;

#[gpu_kernel]
pub fn sum(#[mapped] #[pinned_async] x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {}
