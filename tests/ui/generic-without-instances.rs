// A generic kernel without `instances`: the PTX holds one entry per instance, so the
// attribute must list the types it is built for.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill<T: DeviceCopy>(out: &mut [T], v: T) {
    out[thread::index()] = v;
}

fn main() {}
