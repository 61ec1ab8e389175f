// Several mistakes in one signature: every one is reported at once.
use berth::prelude::*;

#[gpu_kernel]
pub async fn sum(x: &f32, out: *mut f32) -> f32 {
    *x
}

fn main() {}
