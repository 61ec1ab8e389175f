// A kernel that returns a value: results go into a `&mut [T]` argument instead.
use berth::prelude::*;

#[gpu_kernel]
pub fn first(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}
