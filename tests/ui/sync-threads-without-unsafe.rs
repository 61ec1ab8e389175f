// A barrier under a thread-dependent condition: only half of the block reaches it, which is
// undefined behaviour on the GPU (`bar.sync` is aligned: the compiler may assume the whole
// warp arrives). `sync_threads` is `unsafe`, with the contract that every thread of the block
// reaches the same call.
use berth::prelude::*;

#[gpu_kernel]
pub fn half_barrier(out: &mut [u32]) {
    if thread::idx_x() < 16 {
        sync_threads();
    }
    let i = thread::index();
    if i < out.len() {
        out[i] = 1;
    }
}

fn main() {}
