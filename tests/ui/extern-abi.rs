// An `extern "C"` kernel: the macro emits the PTX entry and its ABI itself.
use berth::prelude::*;

#[gpu_kernel]
pub extern "C" fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
