// An atomic on shared memory that no thread wrote: the bins start undefined (whatever an
// earlier block left there), and the atomic reads them. Atomics on a shared array are
// `unsafe`, with the contract that a thread of the block wrote the element before.
use berth::prelude::*;

#[gpu_kernel]
pub fn histogram_uncleared(x: &[u32], #[atomic] hist: &mut [u32]) {
    let bins = shared_array!(BINS: [u32; 16]);
    let (t, i) = (thread::idx_x(), thread::global_x());
    if i < x.len() {
        bins.atomic_add(x[i] as usize % 16, 1);
    }
    // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
    unsafe { sync_threads() };
    if t < 16 && t < hist.len() {
        // SAFETY: none — nobody cleared the bins; the atomic above is what fails to compile.
        hist.atomic_add(t, unsafe { bins.read(t) });
    }
}

fn main() {}
