//! What a kernel may be, checked on the parsed function. Every problem is collected, each
//! pointing at the offending token and saying what would be right.

use crate::parse::{self, Placement};
use quote::ToTokens;
use syn::spanned::Spanned;

/// How one argument crosses to the GPU.
#[derive(Clone)]
pub enum ArgKind {
    /// By value; the type must implement `DeviceCopy` (checked by the generated code).
    Scalar(syn::Type),
    /// Signal memory shared with the host while the kernel runs: `&Signals` (`mailbox` =
    /// `None`) or `&Mailbox<T>` (`Some(T)`); only with `#[mapped]`.
    Signal {
        /// The mailbox item type, or `None` for `Signals`.
        mailbox: Option<syn::Type>,
    },
    /// A slice; the element must implement `DeviceCopy`.
    Slice {
        /// Element type.
        elem: syn::Type,
        /// `&mut [T]` rather than `&[T]`.
        mutable: bool,
    },
}

/// One validated argument.
#[derive(Clone)]
pub struct Arg {
    /// Binding name.
    pub name: syn::Ident,
    /// Whether the binding was declared `mut` (scalars only).
    pub binding_mut: bool,
    /// What it is.
    pub kind: ArgKind,
    /// Where its data lives.
    pub placement: Placement,
    /// The type as written, for spans.
    pub ty: syn::Type,
}

/// A validated kernel.
pub struct Kernel {
    /// Outer attributes to keep (docs, lints).
    pub attrs: Vec<syn::Attribute>,
    /// Visibility of the launcher.
    pub vis: syn::Visibility,
    /// Kernel name (also the PTX entry's name).
    pub name: syn::Ident,
    /// Arguments in order.
    pub args: Vec<Arg>,
    /// The body.
    pub body: Box<syn::Block>,
}

/// Validate `f`; on any error return them all.
pub fn kernel(f: &syn::ItemFn) -> Result<Kernel, Vec<syn::Error>> {
    let mut errors = Vec::new();
    let sig = &f.sig;
    let err = |errors: &mut Vec<syn::Error>, span: proc_macro2::Span, msg: &str| {
        errors.push(syn::Error::new(span, msg));
    };
    // For nodes of several tokens: `new_spanned` underlines all of them (a node's `span()`
    // is only its first token on a stable compiler).
    let err_at = |errors: &mut Vec<syn::Error>, tokens: &dyn ToTokens, msg: &str| {
        errors.push(syn::Error::new_spanned(tokens, msg));
    };
    if let Some(t) = &sig.asyncness {
        err(
            &mut errors,
            t.span,
            "a kernel cannot be `async`: launches are already asynchronous (the launcher returns a guard to wait on); remove `async`",
        );
    }
    if let Some(t) = &sig.constness {
        err(
            &mut errors,
            t.span,
            "a kernel cannot be `const fn`; remove `const`",
        );
    }
    if let Some(t) = &sig.unsafety {
        err(
            &mut errors,
            t.span,
            "a kernel cannot be `unsafe fn`: its launcher is safe; put `unsafe` blocks inside the body instead",
        );
    }
    if let Some(abi) = &sig.abi {
        err_at(
            &mut errors,
            abi,
            "a kernel takes no `extern` ABI: #[gpu_kernel] emits the PTX entry itself; remove it",
        );
    }
    let generics = &sig.generics;
    if !generics.params.is_empty() {
        let lifetimes_only = generics
            .params
            .iter()
            .all(|p| matches!(p, syn::GenericParam::Lifetime(_)));
        let msg = if lifetimes_only {
            "a kernel takes no lifetime parameters: the launcher holds the borrows for the launch; remove them and write `&[T]` / `&mut [T]`"
        } else {
            "a kernel cannot be generic: the PTX holds one entry per kernel; write one kernel per type (a `macro_rules!` can stamp them out)"
        };
        err_at(&mut errors, &generics.params, msg);
    } else if let Some(w) = &generics.where_clause {
        err_at(
            &mut errors,
            w,
            "a kernel cannot have a `where` clause: it is not generic; remove it",
        );
    }
    if let Some(v) = &sig.variadic {
        err_at(&mut errors, v, "a kernel cannot be variadic");
    }
    if let syn::ReturnType::Type(..) = &sig.output {
        err_at(
            &mut errors,
            &sig.output,
            "a kernel returns nothing: write results into a `&mut [T]` argument",
        );
    }
    let mut args = Vec::new();
    for input in &sig.inputs {
        match input {
            syn::FnArg::Receiver(r) => err_at(
                &mut errors,
                r,
                "a kernel is a free function: `self` is not allowed; pass the data as slice or scalar arguments",
            ),
            syn::FnArg::Typed(pt) => {
                if let Some(a) = arg(pt, &mut errors) {
                    args.push(a);
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(Kernel {
            attrs: f.attrs.clone(),
            vis: f.vis.clone(),
            name: sig.ident.clone(),
            args,
            body: f.block.clone(),
        })
    } else {
        Err(errors)
    }
}

fn arg(pt: &syn::PatType, errors: &mut Vec<syn::Error>) -> Option<Arg> {
    let before = errors.len();
    let placement = parse::placement(&pt.attrs, errors);
    // When the attributes themselves are wrong (unknown, duplicate, conflicting), that is the
    // error to fix: the checks of the placement against the type below would only add noise.
    let placement_ok = errors.len() == before;
    let (name, binding_mut) = match &*pt.pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            (pi.ident.clone(), pi.mutability.is_some())
        }
        other => {
            errors.push(syn::Error::new_spanned(
                other,
                "kernel arguments are plain names (`x: &[f32]`): patterns are not allowed; destructure inside the body",
            ));
            (syn::Ident::new("_", other.span()), false)
        }
    };
    let kind = arg_kind(&pt.ty, errors);
    let placement_span = placement.span().filter(|_| placement_ok);
    if let (Some(ArgKind::Scalar(_)), Some(span)) = (&kind, placement_span) {
        errors.push(syn::Error::new(
            span,
            format!(
                "`{}` applies to slices (`&[T]` / `&mut [T]`): a scalar is passed by value and has no placement; remove the attribute",
                placement.name()
            ),
        ));
    }
    if let (Some(ArgKind::Slice { mutable: false, .. }), Placement::PinnedOut(span)) =
        (&kind, placement)
    {
        errors.push(syn::Error::new(
            span,
            "`#[pinned_async(out)]` is for outputs the kernel writes: the argument must be `&mut [T]`; for an input write `#[pinned_async]`",
        ));
    }
    if let Some(ArgKind::Signal { .. }) = &kind
        && !matches!(placement, Placement::Mapped(_))
        && placement_ok
    {
        errors.push(syn::Error::new_spanned(
            &pt.ty,
            "signals live in mapped host memory, read and written in place while the kernel runs: write `#[mapped]` before the argument",
        ));
    }
    if let (Some(ArgKind::Slice { mutable: true, .. }), Placement::Auto(span)) = (&kind, placement)
    {
        errors.push(syn::Error::new(
            span,
            "`#[auto]` chooses, per launch, between reading an input in place and copying it in: it applies to `&[T]`; for an output choose `#[mapped]` or `#[pinned_async]`",
        ));
    }
    if binding_mut && matches!(kind, Some(ArgKind::Slice { .. })) {
        errors.push(syn::Error::new(
            pt.pat.span(),
            "a slice argument cannot be bound `mut`: write `x: &mut [T]` to write through it",
        ));
    }
    if errors.len() > before {
        return None;
    }
    Some(Arg {
        name,
        binding_mut,
        kind: kind?,
        placement,
        ty: (*pt.ty).clone(),
    })
}

fn arg_kind(ty: &syn::Type, errors: &mut Vec<syn::Error>) -> Option<ArgKind> {
    match ty {
        syn::Type::Reference(r) => {
            if let Some(l) = &r.lifetime {
                errors.push(syn::Error::new(
                    l.span(),
                    "kernel arguments take no explicit lifetime: write `&[T]` / `&mut [T]`",
                ));
                return None;
            }
            if let Some(kind) = signal_kind(&r.elem) {
                if let Some(m) = &r.mutability {
                    errors.push(syn::Error::new(
                        m.span(),
                        "signals are shared by the host and the kernel and only accessed atomically: take them by shared reference (`&Signals`, `&Mailbox<T>`)",
                    ));
                    return None;
                }
                return Some(kind);
            }
            let syn::Type::Slice(s) = &*r.elem else {
                let what = if r.mutability.is_some() {
                    "&mut T"
                } else {
                    "&T"
                };
                errors.push(syn::Error::new_spanned(
                    r,
                    format!(
                        "`{what}` is not a kernel argument: pass a scalar by value (`x: T`), or data as a slice (`&[T]` / `&mut [T]`)"
                    ),
                ));
                return None;
            };
            element(&s.elem, errors).map(|elem| ArgKind::Slice {
                elem,
                mutable: r.mutability.is_some(),
            })
        }
        syn::Type::Ptr(p) => {
            let m = if p.mutability.is_some() {
                "&mut [T]"
            } else {
                "&[T]"
            };
            errors.push(syn::Error::new_spanned(
                p,
                format!(
                    "raw pointers are not kernel arguments: take `{m}` (the launcher passes a device buffer and its length, and the body indexes it with bounds checks)"
                ),
            ));
            None
        }
        syn::Type::Slice(s) => {
            errors.push(syn::Error::new_spanned(
                s,
                "a slice is passed by reference: write `&[T]` or `&mut [T]`",
            ));
            None
        }
        other => scalar(other, errors).map(ArgKind::Scalar),
    }
}

/// Scalars: a type path (primitive or a user `DeviceCopy` type) or an array of such.
fn scalar(ty: &syn::Type, errors: &mut Vec<syn::Error>) -> Option<syn::Type> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => Some(ty.clone()),
        syn::Type::Array(a) => scalar(&a.elem, errors).map(|_| ty.clone()),
        syn::Type::Paren(p) => scalar(&p.elem, errors),
        syn::Type::Group(g) => scalar(&g.elem, errors),
        syn::Type::ImplTrait(_) => {
            errors.push(syn::Error::new_spanned(ty, "a kernel cannot be generic: `impl Trait` arguments are not allowed; name a concrete type"));
            None
        }
        syn::Type::Tuple(_) => {
            errors.push(syn::Error::new_spanned(ty, "tuples have no fixed layout for the GPU: use a `#[repr(C)]` struct that implements `berth::DeviceCopy`"));
            None
        }
        _ => {
            errors.push(syn::Error::new_spanned(ty, "unsupported kernel argument type: expected a scalar (`f32`, `u32`, `bool`, a `#[repr(C)]` `DeviceCopy` struct) or a slice (`&[T]` / `&mut [T]`)"));
            None
        }
    }
}

/// Slice elements: anything a scalar may be, and nothing with pointers inside.
fn element(ty: &syn::Type, errors: &mut Vec<syn::Error>) -> Option<syn::Type> {
    match ty {
        syn::Type::Reference(_) | syn::Type::Ptr(_) | syn::Type::Slice(_) => {
            errors.push(syn::Error::new_spanned(
                ty,
                "unsupported slice element: elements are plain data (`f32`, `u32`, a `#[repr(C)]` `DeviceCopy` struct); references and pointers mean nothing on the GPU",
            ));
            None
        }
        syn::Type::Path(p) if p.path.is_ident("str") => {
            errors.push(syn::Error::new_spanned(
                ty,
                "unsupported slice element `str`: pass bytes as `&[u8]`",
            ));
            None
        }
        other => scalar(other, errors),
    }
}

/// `#[gpu_kernel(elementwise)]`: the kernel must have bulk data to cut into chunks.
pub fn elementwise(opts: &crate::parse::Options, k: &Kernel) -> Result<(), Vec<syn::Error>> {
    let Some(span) = opts.elementwise else {
        return Ok(());
    };
    let bulk = k.args.iter().any(|a| {
        matches!(a.kind, ArgKind::Slice { .. })
            && matches!(
                a.placement,
                Placement::PinnedAsync(_) | Placement::PinnedOut(_)
            )
    });
    if bulk {
        Ok(())
    } else {
        Err(vec![syn::Error::new(
            span,
            "an `elementwise` kernel is cut into chunks along its `#[pinned_async]` slices, and this one has none: \
             mark the bulk inputs `#[pinned_async]` and outputs `#[pinned_async]` / `#[pinned_async(out)]` (all of one length), \
             or remove `elementwise`",
        )])
    }
}

/// `Signals` or `Mailbox<T>` (by the last path segment), as a signal argument.
fn signal_kind(ty: &syn::Type) -> Option<ArgKind> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident == "Signals" && last.arguments.is_none() {
        return Some(ArgKind::Signal { mailbox: None });
    }
    if last.ident == "Mailbox"
        && let syn::PathArguments::AngleBracketed(a) = &last.arguments
        && let [syn::GenericArgument::Type(t)] = a.args.iter().collect::<Vec<_>>().as_slice()
    {
        return Some(ArgKind::Signal {
            mailbox: Some(t.clone()),
        });
    }
    None
}
