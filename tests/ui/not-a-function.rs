// `#[gpu_kernel]` on a struct: it applies to free functions.
use berth::prelude::*;

#[gpu_kernel]
pub struct Kernel {
    pub x: f32,
}

fn main() {}
