// `#[atomic]` on a read-only slice: there is nothing to update.
use berth::prelude::*;

#[gpu_kernel]
pub fn k(#[atomic] x: &[u32], out: &mut [u32]) {
    let _ = (x.len(), out.len());
}

fn main() {}
