// A kernel crate without the build script that builds it for the GPU (no `BERTH_PTX`): the
// launcher has no PTX to embed. The test runs this case with `BERTH_PTX` unset.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: &mut [f32]) {
    out[thread::index()] = 1.0;
}

fn main() {}
