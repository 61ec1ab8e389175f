// Signals live in mapped host memory: the argument needs `#[mapped]`.
use berth::prelude::*;

#[gpu_kernel]
pub fn ping(ctl: &Signals) {
    ctl.store(0, 1);
}

fn main() {}
