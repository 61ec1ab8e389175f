// An 8-bit integer product accumulates in i32: the f32 accumulator of the 16-bit products is
// another type.
use berth::mma::{FragC, int8, m16n8k32};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [i32]) {
    let a = m16n8k32::FragA::from_fn(|_, _| 1i8);
    let b = m16n8k32::FragB::from_fn(|_, _| 1u8);
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { int8::mma(a, b, FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
