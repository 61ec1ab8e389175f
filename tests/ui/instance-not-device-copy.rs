// An instance type that cannot cross to the GPU: it is not `DeviceCopy`.
use berth::prelude::*;

#[derive(Clone, Copy)]
pub struct Pair {
    pub a: f32,
    pub b: f32,
}

#[gpu_kernel(instances(T = f32, Pair))]
pub fn fill<T: Copy>(out: &mut [T], v: T) {
    out[thread::index()] = v;
}

fn main() {}
