// A B fragment passed where the A operand goes: each operand role is its own type.
use berth::mma::{self, FragB, FragC};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [f32]) {
    let b = FragB::from_fn(|_, _| f16::from_f32(1.0));
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { mma::mma(b, b, FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
