// Two threads of a block may write one element of shared memory between two barriers (here
// every thread writes element 0): a data race. Plain shared accesses are `unsafe`, with the
// contract that no other thread touches a written element until a barrier.
use berth::prelude::*;

#[gpu_kernel]
pub fn last_writer_wins(#[per_block] out: &mut [u32]) {
    let tile = shared_array!(TILE: [u32; 32]);
    tile.write(0, thread::idx_x() as u32);
    // SAFETY: every thread of the block reaches the barrier: no branch before it.
    unsafe { sync_threads() };
    if let Some(slot) = out.mine() {
        *slot = tile.read(0);
    }
}

fn main() {}
