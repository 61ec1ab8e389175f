// The column count of a `#[matrix(cols = n)]` argument is an integer count of elements.
use berth::prelude::*;

#[gpu_kernel(block = (16, 16))]
pub fn k(n: f32, #[matrix(cols = n)] out: &mut [u32]) {
    let p = thread::index_2d();
    out[p] = 1;
}

fn main() {}
