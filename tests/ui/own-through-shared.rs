// An `Own` index cannot be handed to another thread through shared memory: the other thread
// would own the same element.
use berth::prelude::*;

#[gpu_kernel]
pub fn k(out: &mut [u32]) {
    let slots = shared_array!(SLOTS: [berth::Own; 32]);
    slots[thread::idx_x()].set(thread::index());
    sync_threads();
    let theirs = slots[(thread::idx_x() + 1) % 32].get();
    out[theirs] = 1;
}

fn main() {}
