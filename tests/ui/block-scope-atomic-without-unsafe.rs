// A block-scoped atomic on an `#[atomic]` argument in safe code: every block reaches every
// element, and `atom.cta` is atomic only among one block's threads.
use berth::device::atomic::Scope;
use berth::prelude::*;

#[gpu_kernel]
pub fn k(#[atomic] count: &mut [u32]) {
    if !count.is_empty() {
        count.atomic_add_scoped(0, 1, Scope::Block);
    }
}

fn main() {}
