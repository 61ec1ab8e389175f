// A `#[pinned_async]` argument given a `DeviceBuffer`: data already on the GPU goes to an
// argument without a placement attribute.
use berth::prelude::*;

#[gpu_kernel]
pub fn scale(#[pinned_async] x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let x = gpu.upload(&[1.0f32; 16]).unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    scale(&gpu, Grid::cover(16), &x, &mut out).unwrap().wait().unwrap();
}
