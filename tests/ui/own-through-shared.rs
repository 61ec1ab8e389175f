// An `Own` index cannot be handed to another thread through shared memory: the other thread
// would own the same element.
use berth::prelude::*;

#[gpu_kernel]
pub fn k(out: &mut [u32]) {
    let slots = shared_array!(SLOTS: [berth::Own; 32]);
    // SAFETY: each thread writes its own slot; the reads come after the barrier.
    unsafe { slots.write(thread::idx_x(), thread::index()) };
    // SAFETY: every thread of the block reaches the barrier: no branch before it.
    unsafe { sync_threads() };
    // SAFETY: as above.
    let theirs = unsafe { slots.read((thread::idx_x() + 1) % 32) };
    out[theirs] = 1;
}

fn main() {}
