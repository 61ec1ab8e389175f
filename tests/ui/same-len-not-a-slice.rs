// `same_len` ties the lengths of slice arguments; a scalar has none, and a name that is not an
// argument is a typo.
use berth::prelude::*;

#[gpu_kernel(same_len(x, n, out, y2))]
pub fn k(n: u32, x: &[f32], y: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() && i < n as usize {
        out[i] = x[i] + y[i];
    }
}

fn main() {}
