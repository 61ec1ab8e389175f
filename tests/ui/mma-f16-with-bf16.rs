// An f16 A fragment multiplied with a bf16 B fragment: both operands have one element type.
use berth::mma::{self, FragA, FragB, FragC};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [f32]) {
    let a = FragA::from_fn(|_, _| f16::from_f32(1.0));
    let b = FragB::from_fn(|_, _| bf16::from_f32(1.0));
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { mma::mma(a, b, FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
