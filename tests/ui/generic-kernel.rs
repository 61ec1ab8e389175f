// A generic kernel: the PTX holds one entry per kernel, so type parameters are rejected.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill<T: DeviceCopy>(out: &mut [T], v: T) {
    out[0] = v;
}

fn main() {}
