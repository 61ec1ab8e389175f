// `#[pinned_async]` on a slice: this version of berth supports device-resident slices only.
use berth::prelude::*;

#[gpu_kernel]
pub fn sum(#[pinned_async] x: &[f32], out: &mut [f32]) {
    out[0] = x[0];
}

fn main() {}
