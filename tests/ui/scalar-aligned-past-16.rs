// A scalar aligned to 32 bytes: the GPU's parameter space promises 16 at most.
use berth::prelude::*;

#[repr(C, align(32))]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Wide {
    pub v: [f32; 8],
}

#[gpu_kernel]
pub fn k(w: Wide, out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = w.v[0];
    }
}

fn main() {}
