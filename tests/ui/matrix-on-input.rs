// `#[matrix(cols = n)]` declares how threads write an output; an input is read anywhere.
use berth::prelude::*;

#[gpu_kernel(block = (16, 16))]
pub fn k(n: u32, #[matrix(cols = n)] a: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = a[i];
    }
}

fn main() {}
