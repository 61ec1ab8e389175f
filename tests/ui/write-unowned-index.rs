// Writing `out[k]` at a computed index: another thread may compute the same `k`, a data race.
// Safe writes go to the thread's own index (`thread::index()`); others are `unsafe` writes.
use berth::prelude::*;

#[gpu_kernel]
pub fn scatter(idx: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < idx.len() {
        out[idx[i] as usize] = 1;
    }
}

fn main() {}
