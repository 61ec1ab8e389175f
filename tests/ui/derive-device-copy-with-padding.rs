use berth::DeviceCopy;

// A `u8` then an `f32`: three bytes of padding between them, uninitialised memory the
// launcher would copy to the GPU.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Params {
    pub flag: u8,
    pub scale: f32,
}

// Explicit padding is fine.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Padded {
    pub flag: u8,
    pub _pad: [u8; 3],
    pub scale: f32,
}

fn main() {}
