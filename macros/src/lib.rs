//! `#[gpu_kernel]`: the proc-macro entry. It only forwards; the work is in plain modules that
//! take and return `proc_macro2` tokens so they can be unit-tested: `parse` reads the
//! function and its argument attributes, `validate` checks what a kernel may be and collects
//! every error at once, `expand` writes the device entry and the host launcher.
#![deny(missing_docs)]

mod derive;
mod expand;
#[cfg(test)]
mod fuzz;
mod parse;
mod unroll;
mod validate;

use proc_macro::TokenStream;

/// `berth-gpu-macros` is the proc-macro half of berth: depend on `berth` and use this attribute
/// as `berth::gpu_kernel` (also in `berth::prelude`). Without `berth`'s build script
/// (`berth_build::kernels()`), which sets `BERTH_PTX`, every kernel is a compile error that says
/// what to add. Where the crate's GPU build failed, the build script sets
/// `BERTH_GPU_BUILD_ERRORS` instead: the kernels embed no PTX, and the crate's first kernel
/// reports the GPU build's errors, as one error at code generation, if the host build has
/// none of its own.
#[proc_macro_attribute]
pub fn gpu_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    let ptx = std::env::var(berth_abi::PTX_ENV).ok();
    let cubin = std::env::var(berth_abi::CUBIN_ENV).ok();
    let cubin_arch = std::env::var(berth_abi::CUBIN_ARCH_ENV).ok();
    let cubin = cubin.filter(|path| first_embedding(path));
    let carries_ptx = ptx.as_deref().is_some_and(first_embedding);
    // Where the GPU build failed, its build script says so instead of giving the PTX.
    let gpu_errors = std::env::var(berth_abi::GPU_BUILD_ERRORS_ENV).ok();
    let files = expand::Embedded {
        ptx: ptx.as_deref(),
        carries_ptx,
        cubin: cubin.as_deref().zip(cubin_arch.as_deref()),
        gpu_errors: gpu_errors.as_deref().map(|path| expand::GpuErrors {
            path,
            first: first_embedding(path),
        }),
    };
    expand::gpu_kernel(args.into(), item.into(), files).into()
}

/// Whether no kernel of this compilation has embedded the file at `path` yet. Only the first
/// kernel of a crate carries the crate's cubins (the runtime finds them from any kernel of the
/// crate): an embedded image is emitted once per codegen unit that refers to it, and half a
/// megabyte per kernel descriptor would grow every binary by several copies. Likewise only the
/// first reports the errors of a failed GPU build, so they are reported once.
fn first_embedding(path: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.iter().any(|p| p == path) {
        return false;
    }
    seen.push(path.to_owned());
    true
}

/// Let a `#[repr(C)]` struct of plain data cross to the GPU (kernel scalar or slice element):
/// checks the layout and every field, and implements `berth::DeviceCopy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    derive::device_copy(item.into()).into()
}

/// Write a `for` loop over a literal range out once per iteration, so indices into small
/// arrays become constants and the arrays live in registers (rustc has no unroll pragma, and
/// LLVM leaves small loops over local arrays rolled, in local memory). Also `0..=7` and
/// `(0..16).step_by(4)`; the bounds are integer literals, and the body cannot `break` or
/// `continue` the loop. It works in any function, on the host too:
///
/// ```
/// use berth_macros::unroll;
/// let (a, b) = (2.0f32, [1.0f32, 2.0, 3.0, 4.0]);
/// let mut acc = [0.0f32; 4];
/// unroll! { for i in 0..4 {
///     acc[i] += a * b[i];
/// } }
/// assert_eq!(acc, [2.0, 4.0, 6.0, 8.0]);
/// let mut odd = 0;
/// unroll! { for k in (1..8).step_by(2) { odd += k; } }
/// assert_eq!(odd, 1 + 3 + 5 + 7);
/// ```
#[proc_macro]
pub fn unroll(input: TokenStream) -> TokenStream {
    unroll::unroll(input.into()).into()
}
