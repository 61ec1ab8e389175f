// `instances` leaves out one of the kernel's parameters: `N` has no values.
use berth::prelude::*;

#[gpu_kernel(instances(T = f32))]
pub fn fill<T: DeviceCopy, const N: usize>(out: &mut [[T; N]], v: T) {
    out[thread::index()] = [v; N];
}

fn main() {}
