// An explicit lifetime on a slice argument: the launcher chooses the borrows.
use berth::prelude::*;

#[gpu_kernel]
pub fn copy<'a>(x: &'a [f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {}
