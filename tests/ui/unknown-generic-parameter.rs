// `instances` names a parameter the kernel does not have.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32, U = f64))]
pub fn fill<T: DeviceCopy>(out: &mut [T], v: T) {
    out[thread::index()] = v;
}

fn main() {}
