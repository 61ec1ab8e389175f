// `#[matrix(cols = n)]` takes its column count from a scalar argument of the kernel, the same
// in every thread: a name that is not one is refused.
use berth::prelude::*;

#[gpu_kernel(block = (16, 16))]
pub fn k(width: u32, #[matrix(cols = w)] out: &mut [u32]) {
    let p = thread::index_2d();
    out[p] = width;
}

fn main() {}
