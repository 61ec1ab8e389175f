// A slice taken by value: slices are passed by reference.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: [f32]) {
    let _ = out.len();
}

fn main() {}
