// A destructuring pattern as a kernel argument: arguments are plain names.
use berth::prelude::*;

#[gpu_kernel]
pub fn add([a, b]: [f32; 2], out: &mut [f32]) {
    out[thread::index()] = a + b;
}

fn main() {}
