// `Shared::load` and `Shared::store` were safe accessors; plain shared-memory accesses are now
// `unsafe` `read` and `write` under a contract, and the old names say so.
use berth::prelude::*;

#[gpu_kernel]
pub fn old_names(#[per_block] out: &mut [u32]) {
    let tile = shared_array!(TILE: [u32; 32]);
    tile.store(0, thread::idx_x() as u32);
    // SAFETY: every thread of the block reaches the barrier: no branch before it.
    unsafe { sync_threads() };
    if let Some(slot) = out.mine() {
        *slot = tile.load(0);
    }
}

fn main() {}
