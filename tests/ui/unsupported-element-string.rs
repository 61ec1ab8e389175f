// A slice of `String`: heap types hold host pointers and cannot cross to the GPU.
use berth::prelude::*;

#[gpu_kernel]
pub fn count(words: &[String], out: &mut [u32]) {
    out[thread::index()] = words.len() as u32;
}

fn main() {}
