// An `elementwise` kernel's chunks run at once on several streams: an output passed whole to
// each of them would be written by all of them.
use berth::prelude::*;

#[gpu_kernel(elementwise)]
pub fn k(#[pinned_async] x: &[f32], #[pinned_async(out)] y: &mut [f32], total: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] = x[i];
        total[i] = x[i];
    }
}

fn main() {}
