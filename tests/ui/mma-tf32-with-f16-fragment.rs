// A 16-bit A fragment (m16n8k16) given to the TF32 product (m16n8k8): another shape, another
// type.
use berth::mma::{FragA, FragC, tf32};
use berth::prelude::*;

#[gpu_kernel]
pub fn product(out: &mut [f32]) {
    let a = FragA::from_fn(|_, _| f16::from_f32(1.0));
    let b = tf32::FragB::from_fn(|_, _| 1.0);
    // SAFETY: one warp of 32 lanes reaches the call together.
    let d = unsafe { tf32::mma(a, b, FragC::zero()) };
    let i = thread::index();
    if i < out.len() {
        out[i] = d.get(0);
    }
}

fn main() {}
