// `#[derive(DeviceCopy)]` on a struct with Rust's default layout: it needs `#[repr(C)]`.
use berth::prelude::*;

#[derive(Clone, Copy, DeviceCopy)]
pub struct Params {
    scale: f32,
    count: u32,
}

fn main() {}
