// A table read by rows is read only.
use berth::prelude::*;

#[gpu_kernel]
pub fn first(#[auto] table: &mut Rows<f32>, out: &mut [f32]) {
    out[thread::index()] = table.row(0)[0];
}

fn main() {}
