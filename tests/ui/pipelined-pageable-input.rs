// The pipelined launcher of an elementwise kernel takes pinned memory for the bulk arguments,
// like the plain launcher: a `Vec` is refused with the same guidance.
use berth::prelude::*;

#[gpu_kernel(elementwise)]
pub fn double(#[pinned_async] x: &[f32], #[pinned_async(out)] y: &mut [f32]) {
    let i = thread::index();
    if i < y.len() {
        y[i] = 2.0 * x[i];
    }
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let x = vec![1.0f32; 16];
    let mut y = gpu.pinned_zeroed::<f32>(16).unwrap();
    double_pipelined(&gpu, Default::default(), &x, &mut y).unwrap().wait().unwrap();
}
