// An `#[auto] &Rows<T>` argument takes a hot tier, which knows the rows' width and which of
// them are resident; a bare mapped table does not.
use berth::prelude::*;

#[gpu_kernel]
pub fn first(#[auto] table: &Rows<f32>, out: &mut [f32]) {
    out[thread::index()] = table.row(0)[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let table = gpu.mapped_from(&[1.0f32; 16]).unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    first(&gpu, Grid::cover(1), &table, &mut out).unwrap().wait().unwrap();
}
