// Writing an input on the host while a launch reads it in place (`#[mapped]`): the guard
// holds a shared borrow until `wait()`.
use berth::prelude::*;

#[gpu_kernel]
pub fn lookup(#[mapped] table: &[f32], out: &mut [f32]) {
    out[thread::index()] = table[0];
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let mut table = gpu.mapped_from(&[1.0f32; 16]).unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(1).unwrap();
    let pending = lookup(&gpu, Grid::cover(1), &table, &mut out).unwrap();
    table[3] = 2.0;
    pending.wait().unwrap();
}
