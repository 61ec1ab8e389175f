// An `async` kernel: launches are already asynchronous.
use berth::prelude::*;

#[gpu_kernel]
pub async fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
