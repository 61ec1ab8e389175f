// Reading a buffer on the host while the launch that writes it is in flight: wait first.
use berth::prelude::*;

#[gpu_kernel]
pub fn scale(a: f32, #[pinned_async] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] *= a;
    }
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let mut y = gpu.pinned_from(&[1.0f32; 16]).unwrap();
    let pending = scale(&gpu, Grid::cover(16), 2.0, &mut y).unwrap();
    println!("{}", y[0]);
    pending.wait().unwrap();
}
