use berth::device::Slot;
use berth::DeviceCopy;

// Generic: checked per instance.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Pair<T> {
    pub tag: u8,
    pub value: T,
}

// Each struct's size is its fields' sizes added up, but a field has padding inside it:
// `Pair<u32>` three bytes after its tag, `Slot<u64>` four after its sequence number.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Outer {
    pub p: Pair<u32>,
}

#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Pairs {
    pub ps: [Pair<u32>; 2],
}

#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Message {
    pub slot: Slot<u64>,
}

// Fields without padding inside are fine.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Fine {
    pub slot: Slot<u32>,
    pub p: Pair<u8>,
    pub ps: [Pair<u8>; 3],
}

fn main() {}
