// Atomics on a plain `&mut [T]`: another thread could write the element plainly at the same
// time. The argument must be declared `#[atomic]`, for the whole launch.
use berth::prelude::*;

#[gpu_kernel]
pub fn count(x: &[u32], bins: &mut [u32]) {
    let i = thread::index();
    if i < x.len() {
        bins.atomic_add(x[i] as usize % 16, 1);
    }
}

fn main() {}
