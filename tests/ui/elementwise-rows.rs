// An `elementwise` kernel's chunks run at once on several streams: a table read by rows is
// not passed to them.
use berth::prelude::*;

#[gpu_kernel(elementwise)]
pub fn lookup(#[auto] table: &Rows<f32>, #[pinned_async] ids: &[u32], #[pinned_async(out)] out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = table.row(ids[i] as usize)[0];
    }
}

fn main() {}
