// An unknown option of the attribute: the only option is `crate = path`.
use berth::prelude::*;

#[gpu_kernel(foo)]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
