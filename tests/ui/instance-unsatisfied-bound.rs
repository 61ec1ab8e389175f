// An instance type that does not satisfy the kernel's bounds: `bool` has no `*`.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32, bool))]
pub fn scale<T: DeviceCopy + core::ops::Mul<Output = T>>(a: T, x: &mut [T]) {
    x[0] = a * x[0];
}

fn main() {}
