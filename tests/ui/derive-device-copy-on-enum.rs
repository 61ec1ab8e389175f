// `#[derive(DeviceCopy)]` on an enum: not every bit pattern is a value.
use berth::prelude::*;

#[repr(u32)]
#[derive(Clone, Copy, DeviceCopy)]
pub enum Mode {
    Fast,
    Exact,
}

fn main() {}
