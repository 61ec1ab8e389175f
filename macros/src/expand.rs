//! Writing the expansion of a validated kernel.
//!
//! One `#[gpu_kernel] fn k(..) { body }` becomes:
//! - `__berth_body_k`: the body, as a function whose `&mut [T]` arguments are
//!   `SliceMut<T>` views (see `berth_device::slice` for why); built for both targets, so the
//!   host build type-checks every kernel body;
//! - on nvptx64, the PTX entry `k`: slices lowered to pointer + length, views rebuilt;
//! - on the host, the static descriptor `__BERTH_KERNEL_k` (name, embedded PTX, parameter
//!   layout, registered for whole-crate checks) and the typed launcher `k`.
//!
//! Generated code names only `<berth>::__private::…`.

use crate::parse::{self, Options};
use crate::validate::{self, Arg, ArgKind, Kernel};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

/// The whole attribute: options, item, and the PTX path the kernel crate's build script
/// exported (`None` when there is no build script).
pub fn gpu_kernel(args: TokenStream, item: TokenStream, ptx: Option<&str>) -> TokenStream {
    let opts = match parse::options(args) {
        Ok(o) => o,
        Err(e) => return with_item(vec![e], item),
    };
    let f: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[gpu_kernel] applies to a free function: `#[gpu_kernel] pub fn name(args) { .. }`",
            );
            return with_item(vec![e], item);
        }
    };
    match validate::kernel(&f) {
        Ok(k) => kernel(&opts, &k, ptx),
        Err(errors) => with_item(errors, quote!(#f)),
    }
}

/// Errors, followed by the item with the argument attributes removed, so one mistake does
/// not cascade into "unknown attribute" and "cannot find function" errors elsewhere.
fn with_item(errors: Vec<syn::Error>, item: TokenStream) -> TokenStream {
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let item = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(mut f) => {
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(pt) = input {
                    pt.attrs.clear();
                }
            }
            quote!(#[allow(dead_code, unused)] #f)
        }
        Err(_) => item,
    };
    quote! { #(#errs)* #item }
}

fn body_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__berth_body_{}", name)
}

fn descriptor_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__BERTH_KERNEL_{}", name)
}

/// The full expansion of a valid kernel.
pub fn kernel(opts: &Options, k: &Kernel, ptx: Option<&str>) -> TokenStream {
    let body_fn = body_fn(opts, k);
    let entry = entry(opts, k);
    let descriptor = descriptor(opts, k, ptx);
    let launcher = launcher(opts, k);
    quote! {
        #body_fn
        #entry
        #descriptor
        #launcher
    }
}

fn is_doc(a: &syn::Attribute) -> bool {
    a.path().is_ident("doc")
}

fn body_fn(opts: &Options, k: &Kernel) -> TokenStream {
    let krate = &opts.krate;
    let name = body_ident(&k.name);
    let attrs = k.attrs.iter().filter(|a| !is_doc(a));
    let params = k.args.iter().map(|a| {
        let n = &a.name;
        match &a.kind {
            ArgKind::Scalar(ty) => {
                let m = a.binding_mut.then(|| quote!(mut));
                quote!(#m #n: #ty)
            }
            ArgKind::Slice { elem, mutable: false } => {
                quote!(#n: #krate::__private::Slice<'_, #elem>)
            }
            ArgKind::Slice { elem, mutable: true } => {
                quote!(mut #n: #krate::__private::SliceMut<'_, #elem>)
            }
        }
    });
    let body = &k.body;
    quote! {
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, unused_mut, dead_code, clippy::too_many_arguments)]
        #(#attrs)*
        fn #name(#(#params),*) #body
    }
}

fn lowered(a: &Arg) -> (syn::Ident, syn::Ident) {
    (
        format_ident!("__berth_{}_ptr", a.name),
        format_ident!("__berth_{}_len", a.name),
    )
}

fn entry(opts: &Options, k: &Kernel) -> TokenStream {
    let krate = &opts.krate;
    let name = &k.name;
    let body = body_ident(name);
    let mut params = Vec::new();
    let mut values = Vec::new();
    for a in &k.args {
        let n = &a.name;
        match &a.kind {
            ArgKind::Scalar(ty) => {
                params.push(quote!(#n: #ty));
                values.push(quote!(#n));
            }
            ArgKind::Slice { elem, mutable } => {
                let (p, l) = lowered(a);
                if *mutable {
                    params.push(quote!(#p: *mut #elem, #l: usize));
                    values.push(quote!(#krate::__private::SliceMut::from_raw(#p, #l)));
                } else {
                    params.push(quote!(#p: *const #elem, #l: usize));
                    values.push(quote!(#krate::__private::Slice::from_raw(#p, #l)));
                }
            }
        }
    }
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[doc(hidden)]
        pub unsafe extern "ptx-kernel" fn #name(#(#params),*) {
            // SAFETY: the host launcher is the only caller. It passes, for each slice, the
            // pointer and length of a live device allocation that it keeps borrowed (shared
            // for `&[T]`, exclusive for `&mut [T]`) until the launch has completed.
            unsafe { #body(#(#values),*) }
        }
    }
}

fn descriptor(opts: &Options, k: &Kernel, ptx: Option<&str>) -> TokenStream {
    let krate = &opts.krate;
    let name = &k.name;
    let desc = descriptor_ident(name);
    let name_str = name.to_string();
    let ptx_expr = match ptx {
        Some(path) => quote!(include_str!(#path)),
        None => {
            let msg = "this crate has no PTX: a crate with #[gpu_kernel] functions needs a build \
                       script that builds it for the GPU.\nAdd to its Cargo.toml:\n    \
                       [build-dependencies]\n    berth-build = \"0.1\"\nand create build.rs \
                       beside it:\n    fn main() { berth_build::kernels() }";
            quote_spanned!(name.span()=> { compile_error!(#msg); "" })
        }
    };
    let mut params = Vec::new();
    for a in &k.args {
        let n = a.name.to_string();
        match &a.kind {
            ArgKind::Scalar(ty) => params.push(quote! {
                #krate::__private::Param::scalar::<#ty>(#n)
            }),
            ArgKind::Slice { elem, mutable } => {
                params.push(quote!(#krate::__private::Param::slice_ptr::<#elem>(#n, #mutable)));
                params.push(quote!(#krate::__private::Param::slice_len(#n)));
            }
        }
    }
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        static #desc: #krate::__private::Kernel = #krate::__private::Kernel {
            name: #name_str,
            crate_name: env!("CARGO_CRATE_NAME"),
            ptx: #ptx_expr,
            params: &[#(#params),*],
            location: concat!(file!(), ":", line!()),
        };
        #[cfg(not(target_arch = "nvptx64"))]
        #krate::__private::inventory::submit! {
            #krate::__private::KernelRegistration(&#desc)
        }
    }
}

fn launcher(opts: &Options, k: &Kernel) -> TokenStream {
    let krate = &opts.krate;
    let name = &k.name;
    let vis = &k.vis;
    let desc = descriptor_ident(name);
    let docs = k.attrs.iter().filter(|a| is_doc(a));
    let taken = |s: &str| k.args.iter().any(|a| a.name == s);
    let on = if taken("on") { format_ident!("__berth_on") } else { format_ident!("on") };
    let grid = if taken("grid") { format_ident!("__berth_grid") } else { format_ident!("grid") };
    let mut params = Vec::new();
    let mut pushes = Vec::new();
    for a in &k.args {
        let n = &a.name;
        let span = a.ty.span();
        match &a.kind {
            ArgKind::Scalar(ty) => {
                params.push(quote!(#n: #ty));
                pushes.push(quote_spanned!(span=> __launch.scalar::<#ty>(&#n);));
            }
            ArgKind::Slice { elem, mutable: false } => {
                params.push(quote!(#n: &'__l #krate::__private::DeviceBuffer<#elem>));
                pushes.push(quote_spanned!(span=> __launch.device::<#elem>(#n);));
            }
            ArgKind::Slice { elem, mutable: true } => {
                params.push(quote!(#n: &'__l mut #krate::__private::DeviceBuffer<#elem>));
                pushes.push(quote_spanned!(span=> __launch.device_mut::<#elem>(#n);));
            }
        }
    }
    let doc = format!(
        " Launch the GPU kernel `{name}` on `{on}` (a `Gpu` or a `Stream`) over `{grid}`.\n\n \
         Asynchronous: the returned guard keeps every buffer borrowed until the work is done; \
         `wait()` on it returns the kernel's outcome (a panic in the kernel comes back as \
         `Error::KernelPanic`)."
    );
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #(#docs)*
        #[doc = ""]
        #[doc = #doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<'__l>(
            #on: &'__l impl #krate::__private::Queue,
            #grid: #krate::__private::Grid,
            #(#params),*
        ) -> #krate::__private::Result<#krate::__private::Pending<'__l>> {
            let mut __launch = #krate::__private::Launch::new(#on, &#desc, #grid)?;
            #(#pushes)*
            __launch.submit()
        }
    }
}

#[cfg(test)]
mod tests;
