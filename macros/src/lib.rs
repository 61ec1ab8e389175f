//! `#[gpu_kernel]`: the proc-macro entry. It only forwards; the work is in plain modules that
//! take and return `proc_macro2` tokens so they can be unit-tested: `parse` reads the
//! function and its argument attributes, `validate` checks what a kernel may be and collects
//! every error at once, `expand` writes the device entry and the host launcher.

mod derive;
mod expand;
mod parse;
mod unroll;
mod validate;

use proc_macro::TokenStream;

/// Turn a Rust function into a GPU kernel with a typed host launcher. A generic kernel lists
/// its instances, `#[gpu_kernel(instances(T = f32, f64))]`, and gets one PTX entry per
/// instance and one generic launcher. See the `berth` crate and `docs/kernel-language.md`.
#[proc_macro_attribute]
pub fn gpu_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    let ptx = std::env::var("BERTH_PTX").ok();
    expand::gpu_kernel(args.into(), item.into(), ptx.as_deref()).into()
}

/// Let a `#[repr(C)]` struct of plain data cross to the GPU (kernel scalar or slice element):
/// checks the layout and every field, and implements `berth::DeviceCopy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    derive::device_copy(item.into()).into()
}

/// Write a `for` loop over a literal range out once per iteration, so indices into small
/// arrays become constants and the arrays live in registers:
/// `unroll! { for i in 0..8 { acc[i] += a * b[i]; } }` (also `0..=7`, `(0..16).step_by(4)`).
/// See the `berth` crate.
#[proc_macro]
pub fn unroll(input: TokenStream) -> TokenStream {
    unroll::unroll(input.into()).into()
}
