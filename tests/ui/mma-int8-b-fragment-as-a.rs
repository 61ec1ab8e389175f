// A B fragment (32×8) passed as A (16×32): each operand role is its own type.
use berth::mma::{int8, m16n8k32};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [i32]) {
    let b = m16n8k32::FragB::from_fn(|_, _| 1i8);
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { int8::mma(b, b, int8::FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
