// A table read by rows goes through a hot tier or in place, as each launch chooses: it is an
// `#[auto]` argument.
use berth::prelude::*;

#[gpu_kernel]
pub fn first(table: &Rows<f32>, out: &mut [f32]) {
    out[thread::index()] = table.row(0)[0];
}

fn main() {}
