//! A kernel written against berth re-exported under another path, as a framework crate that
//! wraps berth would offer it to its users: `#[gpu_kernel(crate = path)]` tells the macro
//! where the berth crate is.

/// What a wrapping crate re-exports: berth itself, under its own name.
pub mod engine {
    pub use berth as gpu;
}

use engine::gpu::{self, prelude::thread};

/// `x[i] *= k`, with berth reached only through [`engine::gpu`].
#[gpu::gpu_kernel(crate = crate::reexport::engine::gpu)]
pub fn scale_through_reexport(k: f32, x: &mut [f32]) {
    let i = thread::index();
    if i < x.len() {
        x[i] *= k;
    }
}
