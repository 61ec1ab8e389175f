// Launching a generic kernel with a type that is not one of its instances: there is no PTX
// entry for it.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32, f64))]
pub fn fill<T: DeviceCopy>(out: &mut [T], v: T) {
    out[0] = v;
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let mut out = gpu.upload(&[0u32; 16]).unwrap();
    fill::<u32>(&gpu, Grid::cover(16), &mut out, 7).unwrap().wait().unwrap();
}
