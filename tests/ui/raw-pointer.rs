// A raw pointer argument: data is passed as a slice, with its length.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: *mut f32) {
    let _ = out;
}

fn main() {}
