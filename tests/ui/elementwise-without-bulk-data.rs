// `elementwise` on a kernel with no `#[pinned_async]` slice: there is nothing to cut into
// chunks; mark the bulk arguments `#[pinned_async]`.
use berth::prelude::*;

#[gpu_kernel(elementwise)]
pub fn double(x: &[f32], y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] = 2.0 * x[i];
    }
}

fn main() {}
