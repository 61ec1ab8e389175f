// A launch guard of a scope kept past the scope's end: the scope waits for its work and
// reports its outcome, so nothing of it may outlive the closure.
use berth::prelude::*;

#[gpu_kernel]
pub fn step(a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    if i < b.len() {
        b[i] = a[i];
    }
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let a = gpu.upload(&[1.0f32; 16]).unwrap();
    let mut b = gpu.upload(&[0.0f32; 16]).unwrap();
    let mut kept = None;
    gpu.scope(|s| {
        kept = Some(step(s, Grid::cover(16), &a, &mut b)?);
        Ok(())
    })
    .unwrap();
    drop(kept);
}
