// A tuple scalar: tuples have no fixed layout; a `#[repr(C)]` struct does.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(v: (f32, f32), out: &mut [f32]) {
    out[thread::index()] = v.0 + v.1;
}

fn main() {}
