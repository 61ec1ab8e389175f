// Signals are shared by host and kernel and accessed atomically: `&Signals`, not `&mut`.
use berth::prelude::*;

#[gpu_kernel]
pub fn ping(#[mapped] ctl: &mut Signals) {
    ctl.store(0, 1);
}

fn main() {}
