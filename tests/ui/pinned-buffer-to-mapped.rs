// A `#[mapped]` argument given a `PinnedBuffer`: page-locked, but not mapped into the GPU's
// address space; it needs a `MappedBuffer` (`gpu.mapped_from(&v)`) or `gpu.register(v)`.
use berth::prelude::*;

#[gpu_kernel]
pub fn lookup(#[mapped] table: &[f32], out: &mut [f32]) {
    out[thread::index()] = table[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let table = gpu.pinned_from(&[1.0f32; 16]).unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    lookup(&gpu, Grid::cover(1), &table, &mut out).unwrap().wait().unwrap();
}
