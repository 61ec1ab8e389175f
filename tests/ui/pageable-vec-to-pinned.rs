// A `#[pinned_async]` argument given a pageable `Vec`: it needs a `PinnedBuffer`
// (`gpu.pinned_from(&v)`); berth never makes the slow synchronous copy silently.
use berth::prelude::*;

#[gpu_kernel]
pub fn scale(#[pinned_async] x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let x = vec![1.0f32; 16];
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    scale(&gpu, Grid::cover(16), &x, &mut out).unwrap().wait().unwrap();
}
