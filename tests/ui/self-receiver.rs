// A kernel written as a method: kernels are free functions and take no `self`.
use berth::prelude::*;

pub struct Scaler;

impl Scaler {
    #[gpu_kernel]
    pub fn scale(&self, x: &mut [f32]) {
        x[0] *= 2.0;
    }
}

fn main() {}
