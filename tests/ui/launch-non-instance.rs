// Launching a generic kernel with a type or a constant that is not one of its instances:
// there is no PTX entry for it.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32, f64))]
pub fn fill<T: DeviceCopy>(out: &mut [T], v: T) {
    out[thread::index()] = v;
}

#[gpu_kernel(instances(N = 4, 8))]
pub fn fill_rows<const N: usize>(out: &mut [[f32; N]]) {
    out[thread::index()] = [1.0; N];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let mut out = gpu.upload(&[0u32; 16]).unwrap();
    fill::<u32>(&gpu, Grid::cover(16), &mut out, 7).unwrap().wait().unwrap();
    let mut rows = gpu.upload(&[[0.0f32; 5]; 16]).unwrap();
    fill_rows::<5>(&gpu, Grid::cover(16), &mut rows).unwrap().wait().unwrap();
}
