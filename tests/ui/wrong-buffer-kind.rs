// Host code passing a `Vec<f32>` where the launcher wants a `&DeviceBuffer<f32>`: upload it
// first with `gpu.upload(&v)`.
use berth::prelude::*;

#[gpu_kernel]
pub fn sum(x: &[f32], out: &mut [f32]) {
    out[thread::index()] = x[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let x = vec![1.0f32; 16];
    let mut out = gpu.upload(&[0.0f32]).unwrap();
    sum(&gpu, Grid::cover(16), &x, &mut out).unwrap().wait().unwrap();
}
