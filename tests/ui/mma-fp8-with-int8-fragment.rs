// An 8-bit integer fragment given to the 8-bit float product: same layout, other arithmetic.
use berth::mma::{FragC, fp8, m16n8k32};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [f32]) {
    let a = m16n8k32::FragA::from_fn(|_, _| 1i8);
    let b = m16n8k32::FragB::from_fn(|_, _| berth::F8E4M3::from_f32(1.0));
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { fp8::mma(a, b, FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
