// Dropping a buffer while the launch that copies it back is in flight: the launch's guard
// borrows it until `wait()`.
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
    drop(y);
    pending.wait().unwrap();
}
