// `mut x: &[f32]` to write through a slice: the type `&mut [f32]` is what allows writes.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(mut out: &[f32]) {
    let _ = out.len();
}

fn main() {}
