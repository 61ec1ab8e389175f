//! What a kernel may be, checked on the parsed function. Every problem is collected, each
//! pointing at the offending token and saying what would be right.

use crate::parse::{self, Placement};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::spanned::Spanned;

/// How one argument crosses to the GPU.
#[derive(Clone)]
pub enum ArgKind {
    /// By value; the type must implement `DeviceCopy` (checked by the generated code).
    Scalar(syn::Type),
    /// Signal memory shared with the host while the kernel runs: `&Signals` (`mailbox` =
    /// `None`), `&Inbox<T>` or `&Outbox<T>` (`Some((T, way))`); only with `#[mapped]`.
    Signal {
        /// The mailbox's item type and which way its messages go, or `None` for `Signals`.
        mailbox: Option<(syn::Type, Way)>,
    },
    /// A table read a row at a time by id, through a hot tier where the launch passes one:
    /// `&Rows<T>`; only with `#[auto]`.
    Rows {
        /// Element type.
        elem: syn::Type,
    },
    /// A slice; the element must implement `DeviceCopy`.
    Slice {
        /// Element type.
        elem: syn::Type,
        /// `&mut [T]` rather than `&[T]`.
        mutable: bool,
    },
}

/// Which way a mailbox's messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `&Inbox<T>`: the host sends, the kernel receives.
    ToKernel,
    /// `&Outbox<T>`: the kernel sends, the host receives.
    FromKernel,
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
    /// `#[atomic]` / `#[per_block]`: how the body reaches a `&mut [T]` other than by the
    /// elements each thread owns.
    pub access: Option<parse::Access>,
    /// `#[matrix(cols = n)]`: the scalar argument holding the matrix's column count.
    pub matrix_cols: Option<syn::Ident>,
    /// The type as written, for spans.
    pub ty: syn::Type,
    /// `same_len(..)`: the index of the argument whose length this slice's view takes (the
    /// first of its group; the launcher checks they are equal), or `None` for its own.
    pub len_of: Option<usize>,
}

impl Arg {
    /// How the argument is passed to the PTX entry (berth's kernel ABI).
    pub fn lowering(&self) -> berth_abi::Lowering {
        match self.kind {
            ArgKind::Scalar(_) => berth_abi::Lowering::Value,
            // The memory of a signal or mailbox is passed as a slice of its cells.
            ArgKind::Signal { .. } => berth_abi::Lowering::PtrLen,
            ArgKind::Rows { .. } => berth_abi::Lowering::PtrLenTier,
            ArgKind::Slice { .. } => self.placement.abi().lowering(),
        }
    }
}

/// A validated kernel.
pub struct Kernel {
    /// Outer attributes to keep (docs, lints).
    pub attrs: Vec<syn::Attribute>,
    /// Visibility of the launcher.
    pub vis: syn::Visibility,
    /// Kernel name (also the PTX entry's name, or its prefix for a generic kernel).
    pub name: syn::Ident,
    /// Type and const parameters (no lifetimes), with bounds and `where` clause.
    pub generics: syn::Generics,
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
    let lifetimes: Vec<_> = generics.lifetimes().collect();
    if !lifetimes.is_empty() {
        err_at(
            &mut errors,
            &quote::quote!(#(#lifetimes),*),
            "a kernel takes no lifetime parameters: the launcher holds the borrows for the launch; remove them and write `&[T]` / `&mut [T]`",
        );
    } else if generics.params.is_empty()
        && let Some(w) = &generics.where_clause
    {
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
    for a in &args {
        let Some(cols) = &a.matrix_cols else { continue };
        match args.iter().find(|b| b.name == *cols) {
            Some(Arg {
                kind: ArgKind::Scalar(_),
                ..
            }) => {}
            found => {
                let what = if found.is_some() {
                    "is not a scalar argument"
                } else {
                    "is not an argument of this kernel"
                };
                errors.push(syn::Error::new(
                    cols.span(),
                    format!(
                        "`{cols}` {what}: `#[matrix(cols = n)]` names a scalar argument (`n: usize` or `n: u32`) \
                         holding the column count, so that every thread of the launch sees the same one"
                    ),
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(Kernel {
            attrs: f.attrs.clone(),
            vis: f.vis.clone(),
            name: sig.ident.clone(),
            generics: generics.clone(),
            args,
            body: f.block.clone(),
        })
    } else {
        Err(errors)
    }
}

fn arg(pt: &syn::PatType, errors: &mut Vec<syn::Error>) -> Option<Arg> {
    let before = errors.len();
    let (access, matrix_cols, attrs) = parse::access(&pt.attrs, errors);
    let placement = parse::placement(&attrs, errors);
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
    if let Some(ArgKind::Rows { .. }) = &kind
        && !matches!(placement, Placement::Auto(_))
        && placement_ok
    {
        errors.push(syn::Error::new_spanned(
            &pt.ty,
            "a `&Rows<T>` table is read a row at a time, through a hot tier's device memory or in place, as each launch chooses: write `#[auto]` before the argument",
        ));
    }
    if let (Some(ArgKind::Slice { mutable: true, .. }), Placement::Auto(span)) = (&kind, placement)
    {
        errors.push(syn::Error::new(
            span,
            "`#[auto]` chooses, per launch, between reading an input in place and copying it in: it applies to `&[T]`; for an output choose `#[mapped]` or `#[pinned_async]`",
        ));
    }
    if let Some(access) = access {
        match (&kind, access) {
            (Some(ArgKind::Slice { mutable: true, .. }), _) | (None, _) => {}
            (Some(_), parse::Access::Atomic(span)) => errors.push(syn::Error::new(
                span,
                "`#[atomic]` applies to `&mut [T]` (`T` one of u32, i32, u64, i64, f32, f64): the body then updates any element with atomics; remove it here",
            )),
            (Some(_), parse::Access::PerBlock(span)) => errors.push(syn::Error::new(
                span,
                "`#[per_block]` applies to `&mut [T]` outputs with one element per block; remove it here",
            )),
            (Some(_), parse::Access::Matrix(span)) => errors.push(syn::Error::new(
                span,
                "`#[matrix(cols = n)]` applies to `&mut [T]` outputs that threads write at their 2D position; an input is read at any index (`a[r * n + c]`, or `a.matrix(rows, n)[p]`): remove it here",
            )),
        }
        if let (Placement::PinnedOut(p), parse::Access::Atomic(_)) = (placement, access) {
            errors.push(syn::Error::new(
                p,
                "an `#[atomic]` argument is updated in place, so its starting values must reach the GPU: write `#[pinned_async]` (copied in and back), not `#[pinned_async(out)]`",
            ));
        }
    }
    if binding_mut && matches!(kind, Some(ArgKind::Slice { .. })) {
        errors.push(syn::Error::new(
            pt.pat.span(),
            "a slice argument cannot be bound `mut`: write `x: &mut [T]` to write through it",
        ));
    }
    if binding_mut && matches!(kind, Some(ArgKind::Rows { .. })) {
        errors.push(syn::Error::new(
            pt.pat.span(),
            "a `&Rows<T>` table is read only: remove `mut`",
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
        access,
        matrix_cols,
        ty: (*pt.ty).clone(),
        len_of: None,
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
            if is_two_way_mailbox(&r.elem) {
                errors.push(syn::Error::new(
                    r.elem.span(),
                    "say which way the kernel's messages go: `&Inbox<T>` (the host sends, the kernel receives) or `&Outbox<T>` (the kernel sends, the host receives)",
                ));
                return None;
            }
            if let Some(kind) = signal_kind(&r.elem) {
                if let Some(m) = &r.mutability {
                    errors.push(syn::Error::new(
                        m.span(),
                        "signals are shared by the host and the kernel and only accessed atomically: take them by shared reference (`&Signals`, `&Inbox<T>`, `&Outbox<T>`)",
                    ));
                    return None;
                }
                return Some(kind);
            }
            if let Some(elem) = rows_elem(&r.elem) {
                if let Some(m) = &r.mutability {
                    errors.push(syn::Error::new(
                        m.span(),
                        "a `Rows<T>` table is read only: take it by shared reference (`&Rows<T>`)",
                    ));
                    return None;
                }
                return element(&elem, errors).map(|elem| ArgKind::Rows { elem });
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
    if !bulk {
        return Err(vec![syn::Error::new(
            span,
            "an `elementwise` kernel is cut into chunks along its `#[pinned_async]` slices, and this one has none: \
             mark the bulk inputs `#[pinned_async]` and outputs `#[pinned_async]` / `#[pinned_async(out)]` (all of one length), \
             or remove `elementwise`",
        )]);
    }
    let mailboxes: Vec<syn::Error> = k
        .args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Signal {
                mailbox: Some((_, way)),
            } => Some((a, *way)),
            _ => None,
        })
        .map(|(a, way)| {
            let role = match way {
                Way::ToKernel => "receiver",
                Way::FromKernel => "sender",
            };
            syn::Error::new_spanned(
                &a.ty,
                format!(
                    "`{}` is a mailbox passed whole to every chunk of this `elementwise` kernel, and chunks run at the same time on several streams: \
                     every chunk would be the kernel's {role} at once, and a mailbox has one on each side; \
                     report progress through `&Signals` (atomic cells), or remove `elementwise` and launch the kernel once",
                    a.name
                ),
            )
        })
        .collect();
    if !mailboxes.is_empty() {
        return Err(mailboxes);
    }
    let tables: Vec<syn::Error> = k
        .args
        .iter()
        .filter(|a| matches!(a.kind, ArgKind::Rows { .. }))
        .map(|a| {
            syn::Error::new_spanned(
                &a.ty,
                format!(
                    "`{}` is a table read by rows, which an `elementwise` kernel's chunks cannot share: \
                     gather its rows first (`HotTier::gather`) and pass them `#[pinned_async]` or in device memory, \
                     or remove `elementwise` and launch the kernel once",
                    a.name
                ),
            )
        })
        .collect();
    if !tables.is_empty() {
        return Err(tables);
    }
    let matrices: Vec<syn::Error> = k
        .args
        .iter()
        .filter(|a| matches!(a.access, Some(crate::parse::Access::Matrix(_))))
        .map(|a| {
            syn::Error::new_spanned(
                &a.ty,
                format!(
                    "`{}` is a `#[matrix]` argument, written by the threads at its 2D positions, and an `elementwise` kernel runs in \
                     chunks of one-dimensional launches: remove `elementwise` and launch the kernel on a 2D grid",
                    a.name
                ),
            )
        })
        .collect();
    if !matrices.is_empty() {
        return Err(matrices);
    }
    let whole_outputs: Vec<syn::Error> = k
        .args
        .iter()
        .filter(|a| {
            matches!(a.kind, ArgKind::Slice { mutable: true, .. })
                && !matches!(a.access, Some(crate::parse::Access::Atomic(_)))
                && !matches!(
                    a.placement,
                    Placement::PinnedAsync(_) | Placement::PinnedOut(_)
                )
        })
        .map(|a| {
            syn::Error::new_spanned(
                &a.ty,
                format!(
                    "`{}` is passed whole to every chunk of this `elementwise` kernel, and chunks run at the same time on several streams: \
                     their threads would write the same elements; mark it `#[pinned_async]` / `#[pinned_async(out)]` to cut it with the others, \
                     `#[atomic]` if the kernel only updates it atomically, or remove `elementwise` (chunks are launches of their own: one element per block or per thread of a chunk would meet another chunk's)",
                    a.name
                ),
            )
        })
        .collect();
    if !whole_outputs.is_empty() {
        return Err(whole_outputs);
    }
    Ok(())
}

/// Check each `same_len(..)` group (every name a distinct slice argument, in one group at
/// most; in an `elementwise` kernel, all cut into chunks or none) and tie its members'
/// lengths to the first one's.
pub fn same_len(opts: &parse::Options, mut k: Kernel) -> Result<Kernel, Vec<syn::Error>> {
    let mut errors = Vec::new();
    let mut grouped: Vec<(usize, &syn::Ident)> = Vec::new();
    for group in &opts.same_len {
        let mut members = Vec::new();
        for name in &group.names {
            let Some(i) = k.args.iter().position(|a| a.name == *name) else {
                let slices: Vec<String> = k
                    .args
                    .iter()
                    .filter(|a| matches!(a.kind, ArgKind::Slice { .. }))
                    .map(|a| format!("`{}`", a.name))
                    .collect();
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`{name}` is not an argument of this kernel; `same_len` names slice arguments ({})",
                        if slices.is_empty() { "it has none".to_owned() } else { slices.join(", ") }
                    ),
                ));
                continue;
            };
            if !matches!(k.args[i].kind, ArgKind::Slice { .. }) {
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`{name}` is not a slice; `same_len` ties the lengths of `&[T]` and `&mut [T]` arguments"
                    ),
                ));
                continue;
            }
            if let Some((_, prev)) = grouped.iter().find(|(j, _)| *j == i) {
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`{prev}` is already named in a `same_len` group: list each argument once, \
                         in one group (`same_len(a, b, c)` ties all three)"
                    ),
                ));
                continue;
            }
            grouped.push((i, name));
            members.push(i);
        }
        if opts.elementwise.is_some() {
            let chunked = |i: &usize| {
                matches!(
                    k.args[*i].placement,
                    Placement::PinnedAsync(_) | Placement::PinnedOut(_)
                )
            };
            if members.iter().any(chunked) && !members.iter().all(chunked) {
                errors.push(syn::Error::new(
                    group.span,
                    "in an `elementwise` kernel, the `#[pinned_async]` arguments are cut into chunks \
                     and the others passed whole to every chunk: a `same_len` group names arguments \
                     of one kind only",
                ));
                continue;
            }
        }
        if let Some((&first, rest)) = members.split_first() {
            for &i in rest {
                k.args[i].len_of = Some(first);
            }
        }
    }
    if errors.is_empty() {
        Ok(k)
    } else {
        Err(errors)
    }
}

/// `Signals`, `Inbox<T>` or `Outbox<T>` (by the last path segment), as a signal argument.
fn signal_kind(ty: &syn::Type) -> Option<ArgKind> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident == "Signals" && last.arguments.is_none() {
        return Some(ArgKind::Signal { mailbox: None });
    }
    let way = if last.ident == "Inbox" {
        Way::ToKernel
    } else if last.ident == "Outbox" {
        Way::FromKernel
    } else {
        return None;
    };
    let item = one_type_argument(&last.arguments)?;
    Some(ArgKind::Signal {
        mailbox: Some((item, way)),
    })
}

/// The element type of `Rows<T>` (by the last path segment).
fn rows_elem(ty: &syn::Type) -> Option<syn::Type> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Rows" {
        return None;
    }
    one_type_argument(&last.arguments)
}

/// `Mailbox<T>` (by the last path segment): a ring with no direction, which a kernel does not
/// take.
fn is_two_way_mailbox(ty: &syn::Type) -> bool {
    let syn::Type::Path(p) = ty else { return false };
    p.path
        .segments
        .last()
        .is_some_and(|last| last.ident == "Mailbox" && one_type_argument(&last.arguments).is_some())
}

/// `T` of `<T>`.
fn one_type_argument(args: &syn::PathArguments) -> Option<syn::Type> {
    let syn::PathArguments::AngleBracketed(a) = args else {
        return None;
    };
    match a.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(t)] => Some(t.clone()),
        _ => None,
    }
}

/// One instance of a generic kernel: its PTX entry's name and each generic parameter's value,
/// in the order the parameters are declared.
pub struct Instance {
    /// `<kernel>_<value>_<value>`: the PTX entry, descriptor and simulator entry name.
    pub name: syn::Ident,
    /// Parameter name and the value it takes (as written, with its span).
    pub values: Vec<(syn::Ident, proc_macro2::TokenStream)>,
}

/// Check `instances(..)` against the kernel's generic parameters and list every instance
/// (the combinations of the listed values). A kernel that is not generic has none.
pub fn instances(opts: &parse::Options, k: &Kernel) -> Result<Vec<Instance>, Vec<syn::Error>> {
    let mut errors = Vec::new();
    let params: Vec<&syn::GenericParam> = k.generics.params.iter().collect();
    let param_name = |p: &syn::GenericParam| match p {
        syn::GenericParam::Type(t) => t.ident.clone(),
        syn::GenericParam::Const(c) => c.ident.clone(),
        syn::GenericParam::Lifetime(l) => l.lifetime.ident.clone(),
    };
    let names: Vec<String> = params
        .iter()
        .map(|p| format!("`{}`", param_name(p)))
        .collect();
    let Some((listed, keyword)) = &opts.instances else {
        if params.is_empty() {
            return Ok(Vec::new());
        }
        let example: Vec<String> = params
            .iter()
            .map(|p| match p {
                syn::GenericParam::Const(c) => format!("{} = 4, 8", c.ident),
                other => format!("{} = f32, f64", param_name(other)),
            })
            .collect();
        return Err(vec![syn::Error::new_spanned(
            &k.generics.params,
            format!(
                "a generic kernel is built once per instance, and the PTX holds one entry per instance: \
                 list them in the attribute, `#[gpu_kernel(instances({}))]`",
                example.join(", ")
            ),
        )]);
    };
    if params.is_empty() {
        return Err(vec![syn::Error::new(
            *keyword,
            format!(
                "`instances` lists the instances of a generic kernel, and `{}` has no generic parameters; remove it",
                k.name
            ),
        )]);
    }
    for p in listed {
        if !params.iter().any(|q| param_name(q) == p.name) {
            errors.push(syn::Error::new(
                p.name.span(),
                format!(
                    "`{}` is not a generic parameter of `{}`: its parameters are {}",
                    p.name,
                    k.name,
                    names.join(", ")
                ),
            ));
        }
    }
    // Each declared parameter's values, checked against its kind.
    let mut columns: Vec<Vec<(syn::Ident, proc_macro2::TokenStream, String)>> = Vec::new();
    for q in &params {
        let name = param_name(q);
        let Some(p) = listed.iter().find(|p| p.name == name) else {
            let hint = match q {
                syn::GenericParam::Const(_) => format!("{name} = 4, 8"),
                _ => format!("{name} = f32, f64"),
            };
            errors.push(syn::Error::new(
                name.span(),
                format!("`{name}` has no instances: add `{hint}` to `instances(..)`"),
            ));
            continue;
        };
        let mut column = Vec::new();
        for v in &p.values {
            let ok = match (q, v) {
                (syn::GenericParam::Type(_), syn::GenericArgument::Type(_)) => true,
                (syn::GenericParam::Const(_), syn::GenericArgument::Const(_)) => true,
                // A bare name is parsed as a type; as a const parameter's value it names a
                // constant, as in `f::<SIZE>()`.
                (syn::GenericParam::Const(_), syn::GenericArgument::Type(syn::Type::Path(tp))) => {
                    tp.qself.is_none() && tp.path.segments.iter().all(|s| s.arguments.is_none())
                }
                _ => false,
            };
            if !ok {
                let msg = match q {
                    syn::GenericParam::Const(c) => format!(
                        "`{name}` is a const parameter (`{}`): its instances are constants, `{name} = 4, 8`",
                        c.ty.to_token_stream()
                    ),
                    _ => format!(
                        "`{name}` is a type parameter: its instances are types, `{name} = f32, f64`"
                    ),
                };
                errors.push(syn::Error::new_spanned(v, msg));
                continue;
            }
            column.push((name.clone(), v.to_token_stream(), suffix(v)));
        }
        columns.push(column);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Every combination, the first parameter varying slowest.
    let mut combos: Vec<Vec<(syn::Ident, proc_macro2::TokenStream, String)>> = vec![Vec::new()];
    for column in &columns {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                column.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push(v.clone());
                    c
                })
            })
            .collect();
    }
    let mut out: Vec<Instance> = Vec::new();
    for combo in combos {
        let suffix: Vec<&str> = combo.iter().map(|(_, _, s)| s.as_str()).collect();
        // A raw name (`r#fn`) gives its plain text: `r#fn_f32` would not be an identifier.
        let name = format!("{}_{}", k.name.unraw(), suffix.join("_"));
        let at = combo.last().map(|(_, v, _)| v.clone()).unwrap_or_default();
        if out.iter().any(|i| i.name == name) {
            errors.push(syn::Error::new_spanned(
                at,
                format!("two instances would both be named `{name}` (the PTX entry's name): list each value once"),
            ));
            continue;
        }
        out.push(Instance {
            name: syn::Ident::new(&name, k.name.span()),
            values: combo.into_iter().map(|(n, v, _)| (n, v)).collect(),
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The part of an instance's name that a value gives: a type's last path segment (`f32`,
/// `Vec3` for `crate::Vec3`, `Pair_f32` for `Pair<f32>`), a constant's digits and letters.
fn suffix(v: &syn::GenericArgument) -> String {
    let text = match v {
        syn::GenericArgument::Type(syn::Type::Path(tp)) if tp.qself.is_none() => tp
            .path
            .segments
            .last()
            .map(|s| s.to_token_stream().to_string())
            .unwrap_or_default(),
        other => other.to_token_stream().to_string(),
    };
    let text = text.replace('-', " neg ");
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}
