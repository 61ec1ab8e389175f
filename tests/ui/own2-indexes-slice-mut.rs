// A 2D position indexes a `#[matrix(cols = n)]` argument, not a plain `&mut [T]`: the threads
// that index it by `thread::index()` number the elements another way, and would meet it.
use berth::prelude::*;

#[gpu_kernel(block = (16, 16))]
pub fn k(out: &mut [u32]) {
    let p = thread::index_2d();
    out[p] = 1;
}

fn main() {}
