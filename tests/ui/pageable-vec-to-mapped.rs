// A `#[mapped]` argument given a plain `Vec`: its pages are not mapped for the GPU; register
// it (`gpu.register(v)`) or allocate a `MappedBuffer`.
use berth::prelude::*;

#[gpu_kernel]
pub fn lookup(#[mapped] table: &[f32], out: &mut [f32]) {
    out[thread::index()] = table[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let table = vec![1.0f32; 16];
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    lookup(&gpu, Grid::cover(1), &table, &mut out).unwrap().wait().unwrap();
}
