use berth::prelude::*;
use berth::DeviceCopy;

// Generic: its padding depends on the instance, so each instance a kernel names is checked.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Pair<A, B> {
    pub a: A,
    pub b: B,
}

// A `u8` then a `u32`: three bytes of padding, as a slice element, a mailbox item and a scalar.
#[gpu_kernel]
pub fn first_bytes(x: &[Pair<u8, u32>], out: &mut [u32]) {
    let i = thread::index();
    if i < x.len() && i < out.len() {
        out[i] = u32::from(x[i].a);
    }
}

#[gpu_kernel]
pub fn serve(#[mapped] inbox: &Inbox<Pair<u16, u64>>) {
    let _ = inbox;
}

#[gpu_kernel]
pub fn scale(p: Pair<u8, f32>, out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = p.b;
    }
}

// Instances without padding are fine.
#[gpu_kernel]
pub fn sum_words(x: &[Pair<u32, u32>], out: &mut [u32]) {
    let i = thread::index();
    if i < x.len() && i < out.len() {
        out[i] = x[i].a + x[i].b;
    }
}

fn main() {}
