// An instance type that does not satisfy the kernel's bounds: `bool` has no `*`.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32, bool))]
pub fn scale<T: DeviceCopy + core::ops::Mul<Output = T>>(a: T, x: &mut [T]) {
    let i = thread::index();
    x[i] = a * x[i];
}

fn main() {}
