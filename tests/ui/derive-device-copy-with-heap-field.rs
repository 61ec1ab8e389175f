// `#[derive(DeviceCopy)]` on a struct holding a `String`: host pointers mean nothing on the
// GPU; the error points at the field.
use berth::prelude::*;

#[repr(C)]
#[derive(Clone, DeviceCopy)]
pub struct Named {
    id: u32,
    name: String,
}

fn main() {}
