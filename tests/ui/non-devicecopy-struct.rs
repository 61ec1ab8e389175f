// A struct scalar without `unsafe impl DeviceCopy`.
use berth::prelude::*;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Params {
    pub scale: f32,
    pub offset: f32,
}

#[gpu_kernel]
pub fn affine(p: Params, x: &mut [f32]) {
    let i = thread::index();
    x[i] = x[i] * p.scale + p.offset;
}

fn main() {}
