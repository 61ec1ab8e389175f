// The scoped atomics, like the plain ones, belong to an `#[atomic]` argument.
use berth::device::atomic::Scope;
use berth::prelude::*;

#[gpu_kernel]
pub fn flag(bins: &mut [u32]) {
    bins.atomic_cas_scoped(0, 0, 1, Scope::Device);
}

fn main() {}
