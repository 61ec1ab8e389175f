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

use crate::parse::{self, Options, Placement};
use crate::validate::{self, Arg, ArgKind, Kernel, Way};
use berth_abi::{Lowering, Part};
use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;

/// The files a kernel crate's build script exported for the descriptor to embed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Embedded<'a> {
    /// The PTX's path (`None` when there is no build script, or when the GPU build failed).
    pub ptx: Option<&'a str>,
    /// Whether this kernel carries the crate's files (the PTX, and the cubins where there are
    /// some): the crate's first kernel does, one copy per crate, in a module of its own that
    /// its descriptor points to, so that an edit to one kernel recompiles little of the host
    /// crate.
    pub carries_ptx: bool,
    /// The cubin's path and its architecture (`sm_90`), where ptxas made one.
    pub cubin: Option<(&'a str, &'a str)>,
    /// The errors of the crate's GPU build, where it failed.
    pub gpu_errors: Option<GpuErrors<'a>>,
}

/// The errors of a kernel crate's failed GPU build, as its build script handed them on.
#[derive(Clone, Copy, Debug)]
pub struct GpuErrors<'a> {
    /// The file holding them (a line naming the crate, then rustc's errors).
    pub path: &'a str,
    /// Whether this kernel is the crate's first, which reports them.
    pub first: bool,
}

#[cfg(test)]
impl<'a> Embedded<'a> {
    /// The PTX alone.
    pub fn ptx(ptx: Option<&'a str>) -> Self {
        Embedded {
            ptx,
            carries_ptx: true,
            ..Embedded::default()
        }
    }
}

/// The whole attribute: options, item, and the files the kernel crate's build script
/// exported.
pub fn gpu_kernel(args: TokenStream, item: TokenStream, files: Embedded<'_>) -> TokenStream {
    let opts = match parse::options(args) {
        Ok(o) => o,
        Err(e) => return with_item(vec![e], item),
    };
    let f: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => return with_item(vec![not_a_function(&item)], item),
    };
    let valid = validate::kernel(&f)
        .and_then(|k| validate::elementwise(&opts, &k).map(|()| k))
        .and_then(|k| validate::same_len(&opts, k))
        .and_then(|k| validate::instances(&opts, &k).map(|i| (k, i)));
    match valid {
        Ok((k, instances)) if instances.is_empty() => kernel(&opts, &k, files),
        Ok((k, instances)) => generic::kernel(&opts, &k, &instances, files),
        Err(errors) => with_item(errors, quote!(#f)),
    }
}

/// The error for an item that is not a function, at its keyword and name when it is one
/// that syn knows.
fn not_a_function(item: &TokenStream) -> syn::Error {
    fn at(keyword: &dyn ToTokens, name: &dyn ToTokens) -> TokenStream {
        quote!(#keyword #name)
    }
    let (what, at) = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(i)) => ("a struct", at(&i.struct_token, &i.ident)),
        Ok(syn::Item::Enum(i)) => ("an enum", at(&i.enum_token, &i.ident)),
        Ok(syn::Item::Union(i)) => ("a union", at(&i.union_token, &i.ident)),
        Ok(syn::Item::Trait(i)) => ("a trait", at(&i.trait_token, &i.ident)),
        Ok(syn::Item::Impl(i)) => ("an impl block", at(&i.impl_token, &i.self_ty)),
        Ok(syn::Item::Mod(i)) => ("a module", at(&i.mod_token, &i.ident)),
        Ok(syn::Item::Const(i)) => ("a const", at(&i.const_token, &i.ident)),
        Ok(syn::Item::Static(i)) => ("a static", at(&i.static_token, &i.ident)),
        Ok(syn::Item::Type(i)) => ("a type alias", at(&i.type_token, &i.ident)),
        Ok(syn::Item::ForeignMod(i)) => ("an extern block", i.abi.to_token_stream()),
        _ => ("this item", TokenStream::new()),
    };
    let msg = format!(
        "#[gpu_kernel] applies to a free function, not {what}: `#[gpu_kernel] pub fn name(args) {{ .. }}`"
    );
    // An item syn does not know is pointed at as a whole.
    match (at.is_empty(), item.is_empty()) {
        (false, _) => syn::Error::new_spanned(at, msg),
        (true, false) => syn::Error::new_spanned(item, msg),
        (true, true) => syn::Error::new(Span::call_site(), msg),
    }
}

/// Errors, followed by the item with the argument attributes removed and its body elided, so
/// one mistake does not cascade into "unknown attribute" and "cannot find function" errors
/// elsewhere. Two
/// mistakes that would not compile as a plain function either are emitted as their fix
/// (a slice by value becomes `&[T]`, `...` is dropped), so rustc does not report them again.
fn with_item(errors: Vec<syn::Error>, item: TokenStream) -> TokenStream {
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let item = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(mut f) => {
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(pt) = input {
                    pt.attrs.clear();
                    if let syn::Type::Slice(s) = &*pt.ty {
                        let span = s.bracket_token.span.join();
                        let by_ref: syn::Type = syn::parse_quote_spanned!(span=> &#s);
                        *pt.ty = by_ref;
                    }
                }
            }
            f.sig.variadic = None;
            // The body is written for the kernel's views (`SliceMut`, indexed by `Own`), not
            // for the plain slices of this stand-in: checking it here would only add errors.
            f.block = syn::parse_quote_spanned!(f.block.brace_token.span.join()=> { loop {} });
            quote!(#[allow(dead_code, unused, unreachable_code)] #f)
        }
        Err(_) => item,
    };
    quote! { #(#errs)* #item }
}

pub(crate) fn body_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__berth_body_{}", name)
}

/// The module holding the crate's files, in the module of the kernel that carries them.
fn crate_files_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__berth_crate_files_{}", name.unraw())
}

pub(crate) fn descriptor_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__BERTH_KERNEL_{}", name)
}

/// The full expansion of a valid kernel.
pub fn kernel(opts: &Options, k: &Kernel, files: Embedded<'_>) -> TokenStream {
    let body_fn = body_fn(opts, k);
    let callee = body_ident(&k.name).to_token_stream();
    let entry = entry(opts, k, &callee);
    let sim = sim_entry(opts, k, &callee);
    let descriptor = descriptor(opts, k, files);
    let launcher = launcher(opts, k);
    let pipelined = opts.elementwise.map(|_| pipelined(opts, k));
    let aligns = scalar_align_checks(k);
    let padding = padding_checks(opts, k);
    let gpu_errors = gpu_build_failed(&k.name, files);
    quote! {
        #gpu_errors
        #body_fn
        #aligns
        #padding
        #entry
        #sim
        #descriptor
        #launcher
        #pipelined
    }
}

/// Where the crate's GPU build failed, its first kernel carries the one error that reports it,
/// at the kernel's name. The host build compiles the same kernel bodies, so most of the GPU
/// build's errors are its own as well, and reported by its rustc; this error must add nothing
/// to those. So it is a post-monomorphization error: a constant evaluated only when a generic
/// function that names it is instantiated, which happens at code generation (from the `#[used]`
/// static, which is always generated), and code generation happens only when the crate had no
/// other errors. That leaves it for what only the GPU build rejects. `Option::expect` panics
/// with the file's text as it is, in every edition.
pub(crate) fn gpu_build_failed(name: &syn::Ident, files: Embedded<'_>) -> TokenStream {
    let Some(GpuErrors { path, first: true }) = files.gpu_errors else {
        return TokenStream::new();
    };
    quote_spanned! {name.span()=>
        #[cfg(not(target_arch = "nvptx64"))]
        const _: () = {
            #[allow(dead_code)]
            struct GpuBuild<T>(T);
            impl<T> GpuBuild<T> {
                const FAILED: () = ::core::option::Option::<()>::None.expect(include_str!(#path));
            }
            fn gpu_build_failed<T>() {
                GpuBuild::<T>::FAILED
            }
            #[used]
            static GPU_BUILD_FAILED: fn() = gpu_build_failed::<()>;
        };
    }
}

/// A scalar's alignment is at most 16 bytes: the GPU's parameter space and a launch's
/// parameter slots promise no more (and rustc's NVPTX target refuses more, with an internal
/// error). Checked at the scalar's type, at compile time.
pub(crate) fn scalar_align_checks(k: &Kernel) -> TokenStream {
    k.args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Scalar(ty) => Some(quote_spanned! {ty.span()=>
                const _: () = ::core::assert!(
                    ::core::mem::align_of::<#ty>() <= 16,
                    "a kernel scalar is aligned to at most 16 bytes (the GPU's parameter space promises no more): pass it in a buffer (`&[T]`), or lower its `#[repr(align)]`"
                );
            }),
            _ => None,
        })
        .collect()
}

/// Every type whose values cross to the GPU as bytes — a scalar, a slice's element, a mailbox's
/// item — has no padding bytes (uninitialised memory): a generic `#[derive(DeviceCopy)]`
/// struct is checked for each instance the kernel names, at compile time, at the type. Only
/// types with generic arguments need it (a non-generic struct is checked where it is derived,
/// a primitive has no padding), and only those get it: a type that is not `DeviceCopy` at all
/// is reported once, by the launcher.
pub(crate) fn padding_checks(opts: &Options, k: &Kernel) -> TokenStream {
    let krate = &opts.krate;
    k.args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Scalar(ty) => Some(ty),
            ArgKind::Slice { elem, .. } | ArgKind::Rows { elem } => Some(elem),
            ArgKind::Signal {
                mailbox: Some((t, _)),
            } => Some(t),
            ArgKind::Signal { mailbox: None } => None,
        })
        .filter(|ty| has_generic_args(ty))
        .map(|ty| {
            let krate = respan(krate.to_token_stream(), ty.span());
            quote_spanned! {ty.span()=>
                #[cfg(not(target_arch = "nvptx64"))]
                const _: () = <#ty as #krate::DeviceCopy>::__BERTH_NO_PADDING;
            }
        })
        .collect()
}

/// Whether `ty` names a type with generic arguments anywhere (`Pair<u8, u32>`,
/// `[Pair<u8, u32>; 2]`).
fn has_generic_args(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .iter()
            .any(|s| !matches!(s.arguments, syn::PathArguments::None)),
        syn::Type::Array(a) => has_generic_args(&a.elem),
        syn::Type::Paren(p) => has_generic_args(&p.elem),
        syn::Type::Group(g) => has_generic_args(&g.elem),
        syn::Type::Tuple(t) => t.elems.iter().any(has_generic_args),
        _ => false,
    }
}

fn is_doc(a: &syn::Attribute) -> bool {
    a.path().is_ident("doc")
}

pub(crate) fn body_fn(opts: &Options, k: &Kernel) -> TokenStream {
    let krate = &opts.krate;
    let name = body_ident(&k.name);
    let attrs = k.attrs.iter().filter(|a| !is_doc(a));
    let params = k.args.iter().map(|a| {
        let n = &a.name;
        match &a.kind {
            ArgKind::Scalar(ty) => {
                let m = a.binding_mut.then(|| quote!(mut));
                // A `#[matrix(cols = n)]` argument's view holds `n`: the body need not name it.
                let named = k.args.iter().any(|b| b.matrix_cols.as_ref() == Some(n));
                let allow = named.then(|| quote!(#[allow(unused_variables)]));
                quote!(#allow #m #n: #ty)
            }
            ArgKind::Slice {
                elem,
                mutable: false,
            } if matches!(a.placement, Placement::Auto(_)) => {
                quote!(#n: #krate::__private::Window<'_, #elem>)
            }
            ArgKind::Slice {
                elem,
                mutable: false,
            } => {
                quote!(#n: #krate::__private::Slice<'_, #elem>)
            }
            ArgKind::Slice {
                elem,
                mutable: true,
            } if a.access.is_some() => {
                let view = mut_view(a);
                quote!(mut #n: #krate::__private::#view<'_, #elem>)
            }
            ArgKind::Slice {
                elem,
                mutable: true,
            } => {
                quote!(mut #n: #krate::__private::SliceMut<'_, #elem>)
            }
            ArgKind::Signal { mailbox } => {
                let view = signal_view(krate, mailbox);
                quote!(#n: &#view)
            }
            ArgKind::Rows { elem } => quote!(#n: &#krate::__private::Rows<'_, #elem>),
        }
    });
    let body = &k.body;
    let (generics, _, where_clause) = k.generics.split_for_impl();
    quote! {
        #[doc(hidden)]
        #[inline(always)]
        #[allow(non_snake_case, unused_mut, dead_code, clippy::too_many_arguments)]
        #(#attrs)*
        fn #name #generics(#(#params),*) #where_clause #body
    }
}

/// The kernel-side view type of a signal argument.
/// The body's view type of a `&mut [T]` argument: `SliceMut`, `AtomicSlice` for
/// `#[atomic]`, `PerBlock` for `#[per_block]`.
fn mut_view(a: &Arg) -> TokenStream {
    match a.access {
        None => quote!(SliceMut),
        Some(parse::Access::Atomic(_)) => quote!(AtomicSlice),
        Some(parse::Access::PerBlock(_)) => quote!(PerBlock),
        Some(parse::Access::Matrix(_)) => quote!(GridMatrix),
    }
}

fn signal_view(krate: &syn::Path, mailbox: &Option<(syn::Type, Way)>) -> TokenStream {
    match mailbox {
        None => quote!(#krate::__private::Signals),
        Some((t, Way::ToKernel)) => quote!(#krate::__private::Inbox<#t>),
        Some((t, Way::FromKernel)) => quote!(#krate::__private::Outbox<#t>),
    }
}

/// The element type of a signal argument's memory.
fn signal_cell(krate: &syn::Path, mailbox: &Option<(syn::Type, Way)>) -> TokenStream {
    match mailbox {
        None => quote!(u32),
        Some((t, _)) => quote!(#krate::__private::Slot<#t>),
    }
}

/// The name of the entry parameter that passes `part` of argument `a`: the argument's own for
/// a value, `__berth_<name>_<suffix>` for the parts of a lowered slice.
fn param_ident(a: &Arg, part: Part) -> syn::Ident {
    match part.suffix() {
        None => a.name.clone(),
        Some(suffix) => format_ident!("__berth_{}_{}", a.name, suffix),
    }
}

/// What a pointer parameter of argument `a` points to, and whether the kernel writes through
/// it (`None` for a scalar).
fn pointee(krate: &syn::Path, a: &Arg) -> Option<(TokenStream, bool)> {
    match &a.kind {
        ArgKind::Scalar(_) => None,
        ArgKind::Slice { elem, mutable } => Some((elem.to_token_stream(), *mutable)),
        ArgKind::Signal { mailbox } => Some((signal_cell(krate, mailbox), true)),
        ArgKind::Rows { elem } => Some((elem.to_token_stream(), false)),
    }
}

/// The PTX entry of `k`, calling the body function through `body` (its name, with the
/// instance's arguments for a generic kernel).
pub(crate) fn entry(opts: &Options, k: &Kernel, body: &TokenStream) -> TokenStream {
    let krate = &opts.krate;
    let name = &k.name;
    let mut params = Vec::new();
    let mut values = Vec::new();
    // Per parameter of the entry: the alignment of what a pointer points to, 0 otherwise.
    let mut aligns = Vec::new();
    for a in &k.args {
        let pointee = pointee(krate, a);
        // The entry's parameters, as the ABI lowers the argument.
        for &part in a.lowering().parts() {
            let p = param_ident(a, part);
            match (part, &a.kind, &pointee) {
                (Part::Value, ArgKind::Scalar(ty), _) => {
                    params.push(quote!(#p: #ty));
                    aligns.push(quote!(0));
                }
                (Part::Ptr, _, Some((t, mutable))) => {
                    let m = if *mutable { quote!(mut) } else { quote!(const) };
                    params.push(quote!(#p: *#m #t));
                    aligns.push(quote!(#krate::__private::param_align::<#t>()));
                }
                // A hot tier's slot table and rows, where a launch passes one (else null).
                (Part::Slots, _, _) => {
                    params.push(quote!(#p: *const u32));
                    aligns.push(quote!(#krate::__private::param_align::<u32>()));
                }
                (Part::Tier, _, Some((t, _))) => {
                    params.push(quote!(#p: *const #t));
                    aligns.push(quote!(#krate::__private::param_align::<#t>()));
                }
                _ => {
                    params.push(quote!(#p: usize));
                    aligns.push(quote!(0));
                }
            }
        }
        // The view the body takes, rebuilt from them.
        let ptr = param_ident(a, Part::Ptr);
        let len = view_len(k, a);
        values.push(match &a.kind {
            ArgKind::Scalar(_) => param_ident(a, Part::Value).to_token_stream(),
            ArgKind::Slice { .. } if a.lowering() == Lowering::PtrLenRange => {
                let (lo, hi) = (param_ident(a, Part::Start), param_ident(a, Part::End));
                quote!(#krate::__private::Window::from_raw(#ptr, #len, #lo, #hi))
            }
            ArgKind::Slice { mutable: true, .. } if a.matrix_cols.is_some() => {
                let cols = a
                    .matrix_cols
                    .as_ref()
                    .expect("a matrix names its column count");
                quote! {
                    #krate::__private::GridMatrix::from_raw(
                        #ptr, #len, #krate::__private::matrix_cols(#cols),
                    )
                }
            }
            ArgKind::Slice { mutable: true, .. } => {
                let view = mut_view(a);
                quote!(#krate::__private::#view::from_raw(#ptr, #len))
            }
            ArgKind::Slice { .. } => quote!(#krate::__private::Slice::from_raw(#ptr, #len)),
            ArgKind::Signal { mailbox } => {
                let view = signal_view(krate, mailbox);
                let own = param_ident(a, Part::Len);
                quote!(&<#view>::from_raw(#ptr, #own))
            }
            ArgKind::Rows { .. } => {
                let own = param_ident(a, Part::Len);
                let (slots, tier) = (param_ident(a, Part::Slots), param_ident(a, Part::Tier));
                let (cap, width) = (param_ident(a, Part::Capacity), param_ident(a, Part::Width));
                quote!(&#krate::__private::Rows::from_raw(#ptr, #own, #slots, #tier, #cap, #width))
            }
        });
    }
    // What the builder's last step turns into LLVM attributes (see berth_abi::Section).
    let attrs = berth_abi::KernelAttrs {
        block: opts.block.map(|(b, _)| b),
        min_blocks: opts.min_blocks.map(|(n, _)| n),
        exact_fp: opts.exact_fp,
    };
    let section = (!attrs.is_empty()).then(|| {
        let s = berth_abi::Section::Attributes(attrs).to_string();
        quote!(#[unsafe(link_section = #s)])
    });
    // A declared block of fewer than three dimensions: the launcher refuses grids that
    // extend along the other axes, and both entries say so to the optimiser.
    let flat_grid = opts
        .block
        .map(|(b, _)| berth_abi::block_rank(b))
        .filter(|&rank| rank < 3)
        .map(|rank| {
            quote! {
                // SAFETY: the kernel declares a block of `rank` dimensions, and the launcher
                // refuses, before anything runs, a grid that extends along an axis past them
                // (`Grid::validate`, on every launch of this kernel).
                unsafe { #krate::__private::assume_grid_rank(#rank) };
            }
        });
    let general = entry_fn(
        name,
        section.as_ref(),
        &params,
        &aligns,
        body,
        &values,
        flat_grid.clone(),
    );
    // A specialised entry: the same body after a prologue of assumptions.
    let specialised = |name: &syn::Ident, assume: TokenStream| {
        entry_fn(
            name,
            section.as_ref(),
            &params,
            &aligns,
            body,
            &values,
            Some(assume),
        )
    };
    let linear = linear_ident(opts, k).map(|l| {
        let assume = quote! {
            // SAFETY: the launcher runs this entry only for launches whose grid and block
            // extend along x alone (`Grid::entry_of`).
            unsafe { #krate::__private::assume_linear_launch() };
            #flat_grid
        };
        specialised(&l, assume)
    });
    let planar = planar_ident(opts, k).map(|p| {
        let assume = quote! {
            // SAFETY: the launcher runs this entry only for launches whose grid and block
            // have extent 1 along z (`Grid::entry_of`).
            unsafe { #krate::__private::assume_planar_launch() };
        };
        specialised(&p, assume)
    });
    quote!(#general #linear #planar)
}

/// For each argument, the index of its first PTX parameter.
fn first_params(k: &Kernel) -> Vec<usize> {
    let mut next = 0usize;
    k.args
        .iter()
        .map(|a| {
            let first = next;
            next += a.lowering().parts().len();
            first
        })
        .collect()
}

/// For each argument, the index of its length among the PTX parameters (none for a scalar).
fn len_params(k: &Kernel) -> Vec<Option<usize>> {
    k.args
        .iter()
        .zip(first_params(k))
        .map(|(a, first)| Some(first + a.lowering().position(Part::Len)?))
        .collect()
}

/// The length parameter a slice's view is built with: its own, or, in a `same_len` group,
/// the first member's (equal, checked by the launcher), so the optimiser sees one value.
fn view_len(k: &Kernel, a: &Arg) -> syn::Ident {
    param_ident(a.len_of.map_or(a, |i| &k.args[i]), Part::Len)
}

/// Body names whose code a one-dimensional launch makes cheaper: `thread::index()` tests the
/// launch's shape, `count()`/`grid_stride` multiply by its y and z extents.
const SHAPE_NAMES: &[&str] = &["index", "grid_stride", "count"];

/// Body names whose code a launch without extent along z makes cheaper: the z coordinates
/// and extents (a 2D kernel's guard `global_z() != 0`), and `index_2d()`, which tests them.
const PLANAR_NAMES: &[&str] = &["global_z", "idx_z", "dim_z", "index_2d"];

/// The name of the kernel's entry specialised for launches with extent 1 along z, where it
/// gets one: its body mentions a [`PLANAR_NAMES`] name and it declares no block (a declared
/// block of one or two dimensions already tells its entries that the grid has no extent
/// along z; one of three never has a planar launch). Like the linear entry, a matter of code
/// size only: the launcher runs the general entry of a kernel without.
pub(crate) fn planar_ident(opts: &Options, k: &Kernel) -> Option<syn::Ident> {
    (opts.block.is_none() && mentions(k.body.to_token_stream(), PLANAR_NAMES)).then(|| {
        format_ident!(
            "{}",
            berth_abi::planar_entry(&k.name.unraw().to_string()).to_string()
        )
    })
}

/// The name of the kernel's second entry, specialised for one-dimensional launches, where it
/// gets one: its body mentions a [`SHAPE_NAMES`] name, and its declared block, if any, is
/// one-dimensional. Which kernels get one is a matter of code size only (a helper function
/// that reads the shape is missed): the launcher runs the general entry of a kernel without.
pub(crate) fn linear_ident(opts: &Options, k: &Kernel) -> Option<syn::Ident> {
    let block_linear = opts.block.is_none_or(|([_, y, z], _)| y == 1 && z == 1);
    (block_linear && mentions(k.body.to_token_stream(), SHAPE_NAMES)).then(|| {
        format_ident!(
            "{}",
            berth_abi::linear_entry(&k.name.unraw().to_string()).to_string()
        )
    })
}

/// One PTX entry `name` of a kernel: the lowered parameters, rebuilt into the views the body
/// takes, with `prologue` before the call.
#[allow(clippy::too_many_arguments)]
fn entry_fn(
    name: &syn::Ident,
    section: Option<&TokenStream>,
    params: &[TokenStream],
    aligns: &[TokenStream],
    body: &TokenStream,
    values: &[TokenStream],
    prologue: Option<TokenStream>,
) -> TokenStream {
    // The entry's symbol: a raw name (`r#fn`) without its `r#`.
    let palign_section = berth_abi::Section::ParamAlign(&name.unraw().to_string()).to_string();
    let count = aligns.len();
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #section
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[doc(hidden)]
        pub unsafe extern "ptx-kernel" fn #name(#(#params),*) {
            // The alignment of each pointer parameter's target, which the builder declares on
            // the PTX parameter (and then drops this static).
            #[used]
            #[unsafe(link_section = #palign_section)]
            static __BERTH_PARAM_ALIGN: [u8; #count] = [#(#aligns),*];
            #prologue
            // SAFETY: the host launcher is the only caller. It passes, for each slice, the
            // pointer and length of a live device allocation that it keeps borrowed (shared
            // for `&[T]`, exclusive for `&mut [T]`) until the launch has completed; for an
            // `#[auto]` slice, the range it made available and a pointer to its first element;
            // for a `&Rows<T>` table, the table's pointer and length and, where it passes a
            // hot tier, the tier's slot table (one entry per row: a slot below the capacity
            // holding the row, or a value at or past it), rows and capacity, none of them
            // written until the launch has completed (null slot table otherwise).
            // The members of a `same_len` group get their first member's length, which the
            // launcher checked equal to each of theirs before queueing the launch. A
            // `#[matrix(cols = n)]` argument's view takes its column count from the scalar
            // argument `n`, the same in every thread, and is the argument's only view.
            unsafe { #body(#(#values),*) }
        }
    }
}

fn sim_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("__berth_sim_{}", name)
}

/// The host entry the CPU simulator calls once per simulated thread: the same body, its
/// arguments rebuilt from the launch's parameter values as the PTX entry rebuilds them.
pub(crate) fn sim_entry(opts: &Options, k: &Kernel, body: &TokenStream) -> TokenStream {
    let krate = &opts.krate;
    let name = sim_ident(&k.name);
    let mut values = Vec::new();
    let lens = len_params(k);
    // The parameter holding the length of argument `n`'s view: its own, or its `same_len`
    // group's first member's (see `view_len`).
    let view_len = |n: usize, a: &Arg| lens[a.len_of.unwrap_or(n)].expect("a slice has a length");
    for ((n, a), first) in k.args.iter().enumerate().zip(first_params(k)) {
        // The slot of each part the ABI lowers the argument to.
        let at = |part: Part| first + a.lowering().position(part).expect("a part of the argument");
        let word = |i: usize| quote!(*(__p[#i] as *const usize));
        match &a.kind {
            ArgKind::Scalar(ty) => {
                // The slot is 16-aligned; the value's type is checked to need no more, and read
                // unaligned all the same.
                let i = at(Part::Value);
                values.push(quote!((__p[#i] as *const #ty).read_unaligned()));
            }
            ArgKind::Slice { elem, .. } if a.lowering() == Lowering::PtrLenRange => {
                let i = at(Part::Ptr);
                let (len, lo, hi) = (
                    word(view_len(n, a)),
                    word(at(Part::Start)),
                    word(at(Part::End)),
                );
                values.push(quote! {
                    #krate::__private::Window::from_raw(
                        *(__p[#i] as *const *const #elem),
                        #len,
                        #lo,
                        #hi,
                    )
                });
            }
            ArgKind::Slice { elem, mutable } => {
                let (i, len) = (at(Part::Ptr), word(view_len(n, a)));
                if let Some(cols) = &a.matrix_cols {
                    // The column count: the scalar argument's value, read as the scalar's
                    // own arm above reads it.
                    let c = k
                        .args
                        .iter()
                        .position(|b| b.name == *cols)
                        .expect("validated");
                    let ArgKind::Scalar(ty) = &k.args[c].kind else {
                        unreachable!("validated: a scalar")
                    };
                    let slot = first_params(k)[c];
                    // At the name in the attribute: a column count of the wrong type is
                    // reported there.
                    let path = respan(quote!(#krate::__private::matrix_cols), cols.span());
                    let count = quote_spanned!(cols.span()=> #path((__p[#slot] as *const #ty).read_unaligned()));
                    values.push(quote! {
                        #krate::__private::GridMatrix::from_raw(
                            *(__p[#i] as *const *mut #elem),
                            #len,
                            #count,
                        )
                    });
                } else if *mutable {
                    let view = mut_view(a);
                    values.push(quote! {
                        #krate::__private::#view::from_raw(*(__p[#i] as *const *mut #elem), #len)
                    });
                } else {
                    values.push(quote! {
                        #krate::__private::Slice::from_raw(*(__p[#i] as *const *const #elem), #len)
                    });
                }
            }
            ArgKind::Signal { mailbox } => {
                let (i, len) = (at(Part::Ptr), word(at(Part::Len)));
                let (view, cell) = (signal_view(krate, mailbox), signal_cell(krate, mailbox));
                values.push(quote! {
                    &<#view>::from_raw(*(__p[#i] as *const *mut #cell), #len)
                });
            }
            ArgKind::Rows { elem } => {
                let (i, len) = (at(Part::Ptr), word(at(Part::Len)));
                let (slots, tier) = (at(Part::Slots), at(Part::Tier));
                let (cap, width) = (word(at(Part::Capacity)), word(at(Part::Width)));
                values.push(quote! {
                    &#krate::__private::Rows::from_raw(
                        *(__p[#i] as *const *const #elem),
                        #len,
                        *(__p[#slots] as *const *const u32),
                        *(__p[#tier] as *const *const #elem),
                        #cap,
                        #width,
                    )
                });
            }
        }
    }
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        #[allow(non_snake_case)]
        unsafe fn #name(__p: &[*mut ::core::ffi::c_void]) {
            // SAFETY: the simulator passes one pointer per parameter of this kernel's layout
            // (checked against the launcher like the PTX entry's), each to a value of that
            // parameter's type, in a 16-aligned slot (scalars are read unaligned: nothing
            // here relies on their types' alignment); slices are host memory it keeps alive
            // for the launch, as is a `&Rows<T>` table's hot tier (slot table, rows)
            // where it passes one. The
            // members of a `same_len` group get their first member's length, checked equal
            // to theirs before the launch. A `#[matrix(cols = n)]` argument's view takes its
            // column count from the scalar argument `n`, the same in every thread, and is
            // the argument's only view.
            unsafe { #body(#(#values),*) }
        }
    }
}

/// Whether `tokens` name any of `idents` anywhere (the simulator runs kernels whose body
/// calls `sync_threads` or a warp operation as coroutines, the others as plain calls).
fn mentions(tokens: TokenStream, idents: &[&str]) -> bool {
    tokens.into_iter().any(|tt| match tt {
        proc_macro2::TokenTree::Ident(i) => idents.iter().any(|id| i == id),
        proc_macro2::TokenTree::Group(g) => mentions(g.stream(), idents),
        _ => false,
    })
}

/// Names whose mention makes the simulator run a kernel's threads as coroutines: the block
/// barrier, the `warp` module and its collectives (imported bare or not; `all`/`any` are too
/// common to count, the PTX fallback finds them), and the tensor cores' warp-wide calls.
const COROUTINE_NAMES: &[&str] = &[
    "sync_threads",
    "warp",
    "sync_warp",
    "shfl_idx",
    "shfl_up",
    "shfl_down",
    "shfl_xor",
    "ballot",
    "match_any",
    "match_all",
    "reduce_sum",
    "reduce_min",
    "reduce_max",
    "mma",
    "ldmatrix",
    "ldmatrix_at",
    "ldmatrix_trans",
    "ldmatrix_pair_at",
    "ldmatrix_trans_pair",
    "ldmatrix_trans_pair_at",
    "stmatrix",
    "stmatrix_at",
    "stmatrix_trans",
    "stmatrix_trans_at",
    "stmatrix_pair",
    "stmatrix_pair_at",
];

pub(crate) fn descriptor(opts: &Options, k: &Kernel, files: Embedded<'_>) -> TokenStream {
    let krate = &opts.krate;
    let name = &k.name;
    let vis = &k.vis;
    let desc = descriptor_ident(name);
    // The PTX entry's symbol: a raw name (`r#fn`) without its `r#`.
    let name_str = name.unraw().to_string();
    // The crate's files: a static in a module of its own, which the first kernel's
    // descriptor points to. rustc compiles each module of the host crate as a codegen unit of
    // its own, and a static elsewhere is only its address to the descriptor: an edit to one
    // kernel, which changes the files, compiles again the files' unit and the kernel's, not
    // the descriptor's with the rest of its module's code.
    let (files_expr, files_mod) = match (files.ptx, files.gpu_errors) {
        (Some(path), _) if files.carries_ptx => {
            // The kernels' SASS, which the runtime loads first where the GPU matches (no JIT
            // on the first launch).
            let sass_expr = match files.cubin {
                Some((path, arch)) => quote! {
                    ::core::option::Option::Some(#krate::__private::Sass {
                        arch: #arch,
                        cubins: include_bytes!(#path),
                    })
                },
                None => quote!(::core::option::Option::None),
            };
            let module = crate_files_ident(name);
            (
                quote!(::core::option::Option::Some(&#module::FILES)),
                quote! {
                    #[cfg(not(target_arch = "nvptx64"))]
                    #[doc(hidden)]
                    mod #module {
                        // The crate's path as the kernel's module names it.
                        #[allow(unused_imports)]
                        use super::*;
                        pub(super) static FILES: #krate::__private::CrateFiles =
                            #krate::__private::CrateFiles {
                                ptx: include_str!(#path),
                                sass: #sass_expr,
                            };
                    }
                },
            )
        }
        // The crate's first kernel carries them; the runtime finds them there.
        (Some(_), _) => (quote!(::core::option::Option::None), quote!()),
        // Reported by the crate's host build, or by `gpu_build_failed`.
        (None, Some(_)) => (quote!(::core::option::Option::None), quote!()),
        (None, None) => {
            let msg = "this crate has no PTX: a crate with #[gpu_kernel] functions needs a build \
                       script that builds it for the GPU.\nAdd to its Cargo.toml:\n    \
                       [build-dependencies]\n    berth-gpu-build = \"0.1\"\nand create build.rs \
                       beside it:\n    fn main() { berth_build::kernels() }";
            (
                quote_spanned!(name.span()=> { compile_error!(#msg); ::core::option::Option::None }),
                quote!(),
            )
        }
    };
    let sim = sim_ident(name);
    let uses_barrier = mentions(k.body.to_token_stream(), COROUTINE_NAMES);
    let linear = match linear_ident(opts, k) {
        Some(l) => {
            let l = l.to_string();
            quote!(::core::option::Option::Some(#l))
        }
        None => quote!(::core::option::Option::None),
    };
    let planar = match planar_ident(opts, k) {
        Some(p) => {
            let p = p.to_string();
            quote!(::core::option::Option::Some(#p))
        }
        None => quote!(::core::option::Option::None),
    };
    let block = match opts.block {
        Some(([x, y, z], _)) => quote!(::core::option::Option::Some([#x, #y, #z])),
        None => quote!(::core::option::Option::None),
    };
    // The kernel's parameters as the ABI lowers each argument, with what the runtime needs to
    // know of each (a scalar's size, what a pointer points to).
    let mut params = Vec::new();
    for a in &k.args {
        let n = a.name.to_string();
        let pointee = pointee(krate, a);
        for &part in a.lowering().parts() {
            params.push(match (part, &a.kind, &pointee) {
                (Part::Value, ArgKind::Scalar(ty), _) => {
                    quote!(#krate::__private::Param::scalar::<#ty>(#n))
                }
                (Part::Ptr, _, Some((t, mutable))) => {
                    let placement = format_ident!("{}", a.placement.abi().name());
                    quote! {
                        #krate::__private::Param::slice_ptr::<#t>(
                            #n, #mutable, #krate::__private::Placement::#placement,
                        )
                    }
                }
                _ => {
                    let part = format_ident!("{}", part.name());
                    quote!(#krate::__private::Param::word(#n, #krate::__private::Part::#part))
                }
            });
        }
    }
    // Each `same_len` group as the indices of its members' length parameters, first first.
    let lens = len_params(k);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, a) in k.args.iter().enumerate() {
        if let (Some(first), Some(len)) = (a.len_of, lens[i]) {
            let lead = lens[first].expect("a same_len member is a slice");
            match groups.iter_mut().find(|g| g[0] == lead) {
                Some(g) => g.push(len),
                None => groups.push(vec![lead, len]),
            }
        }
    }
    let same_len = groups.iter().map(|g| quote!(&[#(#g),*]));
    quote! {
        #files_mod
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        #vis static #desc: #krate::__private::Kernel = #krate::__private::Kernel {
            name: #name_str,
            crate_name: concat!(env!("CARGO_CRATE_NAME"), "@", env!("CARGO_PKG_VERSION")),
            crate_files: #files_expr,
            params: &[#(#params),*],
            location: concat!(file!(), ":", line!()),
            sim: #sim,
            uses_barrier: #uses_barrier,
            block: #block,
            linear: #linear,
            planar: #planar,
            same_len: &[#(#same_len),*],
        };
        #[cfg(not(target_arch = "nvptx64"))]
        #krate::__private::inventory::submit! {
            #krate::__private::KernelRegistration(&#desc)
        }
    }
}

/// The launcher parameter `name: &DeviceBuffer<elem>` (or `&mut`), its type at the element's
/// span: when the element is not `DeviceCopy`, the error points at the user's type rather
/// than at the attribute.
/// The trait a slice argument's memory must implement, by placement: it says, when the
/// wrong memory is passed, which kind the argument takes and how to make it.
fn arg_trait(placement: Placement) -> syn::Ident {
    let name = match placement {
        Placement::Device => "DeviceArg",
        Placement::PinnedAsync(_) | Placement::PinnedOut(_) => "PinnedArg",
        Placement::Mapped(_) | Placement::Auto(_) => "MappedArg",
    };
    syn::Ident::new(name, Span::call_site())
}

/// The launch method passing a slice argument, by placement and mutability.
fn push_method(placement: Placement, mutable: bool) -> syn::Ident {
    let name = match (placement, mutable) {
        (Placement::Device, false) => "device",
        (Placement::Device, true) => "device_mut",
        (Placement::PinnedAsync(_), false) => "pinned_in",
        (Placement::PinnedAsync(_), true) => "pinned_inout",
        (Placement::PinnedOut(_), _) => "pinned_out",
        (Placement::Mapped(_), false) => "mapped",
        (Placement::Mapped(_), true) => "mapped_mut",
        (Placement::Auto(_), _) => "auto",
    };
    syn::Ident::new(name, Span::call_site())
}

fn buffer_param(
    krate: &syn::Path,
    name: &syn::Ident,
    elem: &syn::Type,
    mutable: bool,
    placement: Placement,
) -> TokenStream {
    let span = elem.span();
    // The crate path is respanned too: a type whose tokens come from two places is reported
    // at the attribute.
    let krate = respan(krate.to_token_stream(), span);
    let m = mutable.then(|| quote!(mut));
    let tr = arg_trait(placement);
    let ty = quote_spanned!(span=> &'__l #m impl #krate::__private::#tr<#elem>);
    quote!(#name: #ty)
}

fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(g) = &tt {
                tt = Group::new(g.delimiter(), respan(g.stream(), span)).into();
            }
            tt.set_span(span);
            tt
        })
        .collect()
}

/// A name for one of the launcher's own parameters that no kernel argument uses.
fn free_name(k: &Kernel, name: &str) -> syn::Ident {
    if k.args.iter().any(|a| a.name == name) {
        format_ident!("__berth_{}", name)
    } else {
        format_ident!("{}", name)
    }
}

/// The kernel's arguments as launcher parameters, and the calls passing each to the launch
/// builder `builder` (the slice method chosen by `method` from placement and mutability).
fn args_and_pushes(
    opts: &Options,
    k: &Kernel,
    builder: &syn::Ident,
    method: fn(Placement, bool) -> syn::Ident,
) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let mut params = Vec::new();
    let mut pushes = Vec::new();
    for a in &k.args {
        let n = &a.name;
        let span = a.ty.span();
        match &a.kind {
            ArgKind::Scalar(ty) => {
                params.push(quote!(#n: #ty));
                pushes.push(quote_spanned!(span=> #builder.scalar::<#ty>(&#n);));
            }
            ArgKind::Slice { elem, mutable } => {
                params.push(buffer_param(&opts.krate, n, elem, *mutable, a.placement));
                let m = method(a.placement, *mutable);
                pushes.push(quote_spanned!(span=> #builder.#m::<#elem>(#n);));
            }
            ArgKind::Rows { elem } => {
                let krate = respan(opts.krate.to_token_stream(), elem.span());
                let ty =
                    quote_spanned!(elem.span()=> &'__l impl #krate::__private::RowSource<#elem>);
                params.push(quote!(#n: #ty));
                pushes.push(quote_spanned!(span=> #builder.rows::<#elem>(#n);));
            }
            ArgKind::Signal { mailbox: None } => {
                let krate = &opts.krate;
                params.push(quote!(#n: &'__l #krate::__private::SignalBuffer));
                pushes.push(quote_spanned!(span=> #builder.signals(#n);));
            }
            ArgKind::Signal {
                mailbox: Some((t, Way::ToKernel)),
            } => {
                let krate = &opts.krate;
                params.push(quote!(#n: &'__l #krate::__private::InboxBuffer<#t>));
                pushes.push(quote_spanned!(span=> #builder.inbox::<#t>(#n);));
            }
            ArgKind::Signal {
                mailbox: Some((t, Way::FromKernel)),
            } => {
                let krate = &opts.krate;
                params.push(quote!(#n: &'__l #krate::__private::OutboxBuffer<#t>));
                pushes.push(quote_spanned!(span=> #builder.outbox::<#t>(#n);));
            }
        }
    }
    (params, pushes)
}

/// A launcher without its name and generics: what a plain kernel's launcher function and a
/// generic kernel's per-instance trait method share.
pub(crate) struct LaunchFn {
    /// Docs for the function.
    pub doc: String,
    /// Its parameters, in order (all borrowing for `'__l`).
    pub params: Vec<TokenStream>,
    /// The parameters' names, to forward them.
    pub names: Vec<syn::Ident>,
    /// Its return type.
    pub ret: TokenStream,
    /// Its body.
    pub body: TokenStream,
}

impl LaunchFn {
    /// `vis fn name<'__l>(params) -> ret { body }` with the kernel's docs.
    fn item(&self, k: &Kernel, name: &syn::Ident, docs: TokenStream) -> TokenStream {
        let LaunchFn {
            doc,
            params,
            ret,
            body,
            ..
        } = self;
        let vis = &k.vis;
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            #docs
            #[doc = #doc]
            #[allow(clippy::too_many_arguments)]
            #vis fn #name<'__l>(#(#params),*) -> #ret #body
        }
    }
}

/// The launcher's first doc lines: the user's docs and a blank line when there are some.
pub(crate) fn launcher_docs(k: &Kernel) -> TokenStream {
    let docs: Vec<_> = k.attrs.iter().filter(|a| is_doc(a)).collect();
    let separator = (!docs.is_empty()).then(|| quote!(#[doc = ""]));
    quote!(#(#docs)* #separator)
}

fn launcher(opts: &Options, k: &Kernel) -> TokenStream {
    launch_fn(opts, k, &k.name.to_string()).item(k, &k.name, launcher_docs(k))
}

/// The plain launcher of kernel `k` (`title` names it in the docs).
pub(crate) fn launch_fn(opts: &Options, k: &Kernel, title: &str) -> LaunchFn {
    let krate = &opts.krate;
    let desc = descriptor_ident(&k.name);
    let on = free_name(k, "on");
    let grid = free_name(k, "grid");
    let (mut params, mut pushes) =
        args_and_pushes(opts, k, &format_ident!("__launch"), push_method);
    let mut names: Vec<syn::Ident> = k.args.iter().map(|a| a.name.clone()).collect();
    // Kernels with `#[auto]` slices take an access hint for the cost model (a table read by
    // rows takes none: its hot tier's form is the model's, chosen from the reads it counts).
    if k.args.iter().any(|a| {
        matches!(a.placement, Placement::Auto(_)) && matches!(a.kind, ArgKind::Slice { .. })
    }) {
        let touch = free_name(k, "touch");
        params.insert(0, quote!(#touch: #krate::__private::Touch));
        pushes.insert(0, quote!(__launch.touch(#touch);));
        names.insert(0, touch);
    }
    params.insert(0, quote!(#grid: #krate::__private::Grid));
    params.insert(0, quote!(#on: &'__l impl #krate::__private::Queue));
    names.insert(0, grid.clone());
    names.insert(0, on.clone());
    let doc = format!(
        " Launch the GPU kernel `{title}` on `{on}` (a `Gpu` or a `Stream`) over `{grid}`.\n\n \
         Asynchronous: the returned guard keeps every buffer borrowed until the work is done; \
         `wait()` on it returns the kernel's outcome (an out-of-bounds index in the kernel comes \
         back as `Error::KernelPanic` with its location, another panic as \
         `Error::KernelFault`)."
    );
    LaunchFn {
        doc,
        params,
        names,
        ret: quote!(#krate::__private::Result<#krate::__private::Pending<'__l>>),
        body: quote!({
            let mut __launch = #krate::__private::Launch::new(#on, &#desc, #grid)?;
            #(#pushes)*
            __launch.submit()
        }),
    }
}

/// The launch method of a pipelined launch, by placement and mutability.
fn pipelined_method(placement: Placement, mutable: bool) -> syn::Ident {
    let name = match (placement, mutable) {
        (Placement::PinnedAsync(_), false) => "bulk_in",
        (Placement::PinnedAsync(_), true) => "bulk_inout",
        (Placement::PinnedOut(_), _) => "bulk_out",
        (p, m) => return push_method(p, m),
    };
    syn::Ident::new(name, Span::call_site())
}

/// `<kernel>_pipelined`: the `#[pinned_async]` arguments cut into chunks over several streams.
fn pipelined(opts: &Options, k: &Kernel) -> TokenStream {
    let name = format_ident!("{}_pipelined", k.name);
    pipelined_fn(opts, k, &k.name.to_string()).item(k, &name, TokenStream::new())
}

/// The pipelined launcher of kernel `k` (`title` names it in the docs).
pub(crate) fn pipelined_fn(opts: &Options, k: &Kernel, title: &str) -> LaunchFn {
    let krate = &opts.krate;
    let desc = descriptor_ident(&k.name);
    let gpu = free_name(k, "gpu");
    let options = free_name(k, "options");
    let (mut params, pushes) =
        args_and_pushes(opts, k, &format_ident!("__pipeline"), pipelined_method);
    let mut names: Vec<syn::Ident> = k.args.iter().map(|a| a.name.clone()).collect();
    params.insert(0, quote!(#options: #krate::__private::PipelineOptions));
    params.insert(0, quote!(#gpu: &'__l #krate::__private::Gpu));
    names.insert(0, options.clone());
    names.insert(0, gpu.clone());
    let doc = format!(
        " Pipelined launch of the elementwise kernel `{title}`: its `#[pinned_async]` arguments (one \
         shared length) are cut into chunks over several streams, so that copies in, the \
         kernel and copies out of different chunks overlap; every other argument is passed \
         whole to each chunk, and thread indices are relative to the chunk. Chunk size and \
         stream count come from `{options}` or the measured link. The device footprint is the \
         ring of staging buffers (`PipelineStats::staging_bytes`)."
    );
    LaunchFn {
        doc,
        params,
        names,
        ret: quote!(#krate::__private::Result<#krate::__private::PipelineRun<'__l>>),
        body: quote!({
            let mut __pipeline = #krate::__private::Pipelined::new(#gpu, &#desc, #options)?;
            #(#pushes)*
            __pipeline.submit()
        }),
    }
}

mod generic;

#[cfg(test)]
mod tests;
