// `continue` inside `unroll!`: every iteration is written out, so there is no loop to
// continue.
use berth::prelude::*;

#[gpu_kernel]
pub fn fill(out: &mut [f32]) {
    unroll! { for k in 0..4 {
        if k == 2 {
            continue;
        }
        out[k] = 1.0;
    } }
}

fn main() {}
