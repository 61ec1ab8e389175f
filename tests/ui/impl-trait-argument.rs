// An `impl Trait` argument: a kernel is not generic; name a concrete type.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(v: impl Copy, out: &mut [f32]) {
    let _ = v;
    out[thread::index()] = 1.0;
}

fn main() {}
