// `#[pinned_async(out)]` on a read-only slice: `out` marks outputs the kernel writes.
use berth::prelude::*;

#[gpu_kernel]
pub fn copy(#[pinned_async(out)] x: &[f32], #[pinned_async(out)] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] = x[i];
    }
}

fn main() {}
