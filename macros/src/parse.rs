//! Reading the attribute's own arguments and each kernel argument's placement attributes.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};

/// Typed keywords, so a typo gets "expected one of …" instead of a generic parse error.
pub mod kw {
    syn::custom_keyword!(mapped);
    syn::custom_keyword!(atomic);
    syn::custom_keyword!(per_block);
    syn::custom_keyword!(pinned_async);
    syn::custom_keyword!(out);
    syn::custom_keyword!(auto);
    syn::custom_keyword!(matrix);
    syn::custom_keyword!(cols);
}

/// Placement keywords an argument may carry, for messages.
pub const PLACEMENTS: &str = "`#[mapped]`, `#[pinned_async]` or `#[auto]`";

/// `#[gpu_kernel(elementwise, block = (16, 16), fp_contract = false, crate = path)]`: the
/// options of the attribute itself.
pub struct Options {
    /// Path of the berth facade crate as seen from the kernel crate (`::berth` unless
    /// re-exported).
    pub krate: syn::Path,
    /// `elementwise`: the kernel may be cut into chunks (a pipelined launcher is generated).
    pub elementwise: Option<Span>,
    /// `block = (x, y, z)`: the only block shape the kernel runs with (PTX `.reqntid`).
    pub block: Option<([u32; 3], Span)>,
    /// `min_blocks_per_sm = n`: blocks of `block` that must fit on one SM at once, which
    /// bounds the registers per thread (PTX `.minnctapersm`; CUDA's second
    /// `__launch_bounds__` argument), with the span of the keyword.
    pub min_blocks: Option<(u32, Span)>,
    /// `fp_contract = false`: keep this kernel's float multiplies and adds unfused.
    pub exact_fp: bool,
    /// `instances(T = f32, f64, N = 4)`: the instances of a generic kernel (every combination
    /// of the listed values), with the span of the keyword.
    pub instances: Option<(Vec<InstanceParam>, Span)>,
    /// `same_len(a, b, c)`, any number of times: slice arguments the launcher checks are of
    /// one length, which the body then sees as one value.
    pub same_len: Vec<SameLen>,
}

/// One `same_len(a, b, ..)` group.
pub struct SameLen {
    /// The keyword, for errors about the group as a whole.
    pub span: Span,
    /// The arguments named, in order (the first one's length is the group's).
    pub names: Vec<syn::Ident>,
}

/// One generic parameter's values in `instances(..)`.
pub struct InstanceParam {
    /// The parameter's name as written.
    pub name: syn::Ident,
    /// Its values: types for a type parameter, constants for a const parameter.
    pub values: Vec<syn::GenericArgument>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            krate: syn::parse_quote!(::berth),
            elementwise: None,
            block: None,
            min_blocks: None,
            exact_fp: false,
            instances: None,
            same_len: Vec::new(),
        }
    }
}

const OPTIONS: &str = "`elementwise` (the kernel can be cut into chunks and pipelined), \
    `block = (x, y, z)` (the block shape it always runs with), `min_blocks_per_sm = n` (blocks of \
    that shape one SM must hold at once: a register limit), `fp_contract = false` (no fused \
    multiply-adds in this kernel), `instances(T = f32, f64)` (the types and constants a generic \
    kernel is built for), `same_len(a, b)` (slice arguments the launcher checks are of one \
    length) or `crate = path` (the path of the berth crate when it is re-exported)";

/// Threads a block may have.
const MAX_BLOCK: u64 = 1024;
/// Blocks resident on one SM, at most (compute capability 9.0).
const MAX_BLOCKS_PER_SM: u32 = 32;
/// Threads resident on one SM, at most (compute capability 7.0 to 9.0).
const MAX_THREADS_PER_SM: u32 = 2048;

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut opts = Options::default();
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            let key: syn::Ident = input
                .call(syn::ext::IdentExt::parse_any)
                .map_err(|e| syn::Error::new(e.span(), format!("expected one of {OPTIONS}")))?;
            let name = key.to_string();
            if !matches!(
                name.as_str(),
                "elementwise"
                    | "block"
                    | "min_blocks_per_sm"
                    | "fp_contract"
                    | "instances"
                    | "same_len"
                    | "crate"
            ) {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown option `{key}`: expected {OPTIONS}"),
                ));
            }
            if seen.contains(&name) && name != "same_len" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("`{key}` is given twice"),
                ));
            }
            seen.push(name.clone());
            // A value missing at the end of the options is reported at the option's name (syn
            // would point at the call site: there is no token after it). Only for parses of
            // single tokens, or that fail where they stop: an error after a value was read whole
            // keeps its own span.
            let at_key = |e: syn::Error| {
                if input.is_empty() {
                    syn::Error::new(key.span(), e.to_string())
                } else {
                    e
                }
            };
            match name.as_str() {
                "elementwise" => opts.elementwise = Some(key.span()),
                "block" => {
                    input.parse::<syn::Token![=]>().map_err(|e| {
                        at_key(syn::Error::new(e.span(), "write the block shape as `block = (x, y, z)`, `block = (x, y)` or `block = x`"))
                    })?;
                    if input.is_empty() {
                        return Err(syn::Error::new(
                            key.span(),
                            "write the block shape after `block =`: `block = (16, 16)`, `block = 256`",
                        ));
                    }
                    opts.block = Some(block_shape(input)?);
                }
                "min_blocks_per_sm" => {
                    let how = "write `min_blocks_per_sm = n`, n from 1 to 32: the blocks of the \
                               declared shape one SM must hold at once";
                    input
                        .parse::<syn::Token![=]>()
                        .map_err(|e| at_key(syn::Error::new(e.span(), how)))?;
                    let v: syn::LitInt = input
                        .parse()
                        .map_err(|e| at_key(syn::Error::new(e.span(), how)))?;
                    match v.base10_parse::<u32>() {
                        Ok(n @ 1..=MAX_BLOCKS_PER_SM) => opts.min_blocks = Some((n, key.span())),
                        _ => return Err(syn::Error::new(v.span(), how)),
                    }
                }
                "fp_contract" => {
                    input.parse::<syn::Token![=]>().map_err(|e| {
                        at_key(syn::Error::new(
                            e.span(),
                            "write `fp_contract = false` (or `true`, the default)",
                        ))
                    })?;
                    let v: syn::LitBool = input.parse().map_err(|e| {
                        at_key(syn::Error::new(
                            e.span(),
                            "`fp_contract` is `true` (the default: `a * b + c` may fuse into one FMA) \
                             or `false` (every multiply and add rounded separately): write `fp_contract = false`",
                        ))
                    })?;
                    opts.exact_fp = !v.value;
                }
                "instances" => {
                    if input.is_empty() {
                        return Err(syn::Error::new(
                            key.span(),
                            "write the instances of a generic kernel as `instances(T = f32, f64)`",
                        ));
                    }
                    opts.instances = Some((instances(input)?, key.span()));
                }
                "same_len" => opts.same_len.push(same_len(input, key.span())?),
                _ => {
                    let path = input.parse::<syn::Token![=]>().and_then(|_| input.parse());
                    opts.krate = path.map_err(|e| {
                        at_key(syn::Error::new(
                            e.span(),
                            "write the path of the berth crate: `crate = ::my_crate::berth`",
                        ))
                    })?;
                }
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        if let Some((n, span)) = opts.min_blocks {
            let Some(([x, y, z], _)) = opts.block else {
                return Err(syn::Error::new(
                    span,
                    "`min_blocks_per_sm` needs the block shape it counts: add `block = (x, y)` \
                     (the register limit is 65536 / (threads per block × blocks))",
                ));
            };
            let threads = x * y * z;
            if threads * n > MAX_THREADS_PER_SM {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "{n} blocks of {threads} threads are more than the {MAX_THREADS_PER_SM} an SM \
                         holds: at most `min_blocks_per_sm = {}` with this block",
                        MAX_THREADS_PER_SM / threads
                    ),
                ));
            }
        }
        Ok(opts)
    }
}

/// `(x, y, z)`, `(x, y)` or `x`: positive integer literals, at most 1024 threads in all.
fn block_shape(input: ParseStream) -> syn::Result<([u32; 3], Span)> {
    let bad = |span: Span| {
        syn::Error::new(
            span,
            "a block shape is one to three positive integer literals: `block = (16, 16)`, `block = 256`",
        )
    };
    let mut whole = None;
    let dims: Vec<syn::LitInt> = if input.peek(syn::token::Paren) {
        let content;
        let paren = syn::parenthesized!(content in input);
        whole = Some(paren.span.join());
        let list =
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated(&content)?;
        if list.is_empty() || list.len() > 3 {
            return Err(bad(paren.span.join()));
        }
        list.into_iter()
            .map(|e| match e {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => Ok(i),
                other => Err(bad(syn::spanned::Spanned::span(&other))),
            })
            .collect::<syn::Result<_>>()?
    } else {
        let e: syn::Expr = input.parse()?;
        match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => vec![i],
            other => return Err(bad(syn::spanned::Spanned::span(&other))),
        }
    };
    let mut shape = [1u32; 3];
    let mut span = dims[0].span();
    for (d, lit) in dims.iter().enumerate() {
        let v: u32 = lit.base10_parse().map_err(|_| bad(lit.span()))?;
        if v == 0 {
            return Err(syn::Error::new(
                lit.span(),
                "a block dimension is at least 1",
            ));
        }
        shape[d] = v;
        span = span.join(lit.span()).unwrap_or(span);
    }
    // The whole `(x, y, z)`: joining the literals' spans works on nightly compilers only.
    let span = whole.unwrap_or(span);
    let total: u64 = shape.iter().map(|&v| u64::from(v)).product();
    if total > MAX_BLOCK || shape[2] > 64 {
        return Err(syn::Error::new(
            span,
            format!(
                "a block has at most {MAX_BLOCK} threads (and z at most 64); this shape has {total}: \
                 make the product of the dimensions at most {MAX_BLOCK}"
            ),
        ));
    }
    Ok((shape, span))
}

/// `(T = f32, f64, N = 4, 8)`: each parameter's name, `=`, and its values up to the next
/// `name =`.
fn instances(input: ParseStream) -> syn::Result<Vec<InstanceParam>> {
    const FORM: &str = "write the instances of a generic kernel as `instances(T = f32, f64)`; \
        with several parameters, `instances(T = f32, f64, N = 4, 8)` builds every combination";
    let content;
    let paren = syn::parenthesized!(content in input);
    let mut params: Vec<InstanceParam> = Vec::new();
    if content.is_empty() {
        return Err(syn::Error::new(paren.span.join(), FORM));
    }
    while !content.is_empty() {
        let name: syn::Ident = content
            .parse()
            .map_err(|e| syn::Error::new(e.span(), FORM))?;
        content
            .parse::<syn::Token![=]>()
            .map_err(|e| syn::Error::new(e.span(), FORM))?;
        if let Some(prev) = params.iter().find(|p| p.name == name) {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "`{}` is given twice in `instances`: list all its values once, `{} = a, b`",
                    prev.name, prev.name
                ),
            ));
        }
        let mut values = Vec::new();
        loop {
            if content.is_empty() || (content.peek(syn::Ident) && content.peek2(syn::Token![=])) {
                break;
            }
            values.push(content.parse::<syn::GenericArgument>()?);
            if content.is_empty() {
                break;
            }
            content.parse::<syn::Token![,]>()?;
        }
        if values.is_empty() {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "`{name}` has no values: write `{name} = f32, f64` (types) or `{name} = 4, 8` (constants)"
                ),
            ));
        }
        params.push(InstanceParam { name, values });
    }
    Ok(params)
}

/// `(a, b, c)`: two or more argument names.
fn same_len(input: ParseStream, span: Span) -> syn::Result<SameLen> {
    const FORM: &str = "write the slice arguments of one length as `same_len(x, y, out)`: the \
        launcher checks that they are, and the body sees one length for all of them";
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(span, FORM));
    }
    let content;
    let paren = syn::parenthesized!(content in input);
    let list =
        syn::punctuated::Punctuated::<syn::Ident, syn::Token![,]>::parse_terminated(&content)
            .map_err(|e| syn::Error::new(e.span(), FORM))?;
    let names: Vec<syn::Ident> = list.into_iter().collect();
    if names.len() < 2 {
        return Err(syn::Error::new(
            paren.span.join(),
            "`same_len` ties two or more slice arguments together: `same_len(x, y)`",
        ));
    }
    Ok(SameLen { span, names })
}

/// Parse the attribute's arguments.
pub fn options(args: TokenStream) -> syn::Result<Options> {
    syn::parse2(args)
}

/// Where an argument's data lives, from its attributes.
#[derive(Clone, Copy, Debug)]
pub enum Placement {
    /// No attribute: memory already on the device.
    Device,
    /// `#[mapped]`: pinned host memory mapped into the GPU's address space.
    Mapped(Span),
    /// `#[pinned_async]`: page-locked host memory copied asynchronously.
    PinnedAsync(Span),
    /// `#[pinned_async(out)]`: an output in page-locked host memory, copied back only.
    PinnedOut(Span),
    /// `#[auto]`: host memory read in place or copied in, chosen per launch by the cost model.
    Auto(Span),
}

impl Placement {
    /// The attribute's spelling, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Device => "device",
            Placement::Mapped(_) => "#[mapped]",
            Placement::PinnedAsync(_) => "#[pinned_async]",
            Placement::PinnedOut(_) => "#[pinned_async(out)]",
            Placement::Auto(_) => "#[auto]",
        }
    }

    /// The placement as the kernel's descriptor records it.
    pub fn abi(self) -> berth_abi::Placement {
        match self {
            Placement::Device => berth_abi::Placement::Device,
            Placement::Mapped(_) => berth_abi::Placement::Mapped,
            Placement::PinnedAsync(_) => berth_abi::Placement::PinnedAsync,
            Placement::PinnedOut(_) => berth_abi::Placement::PinnedOut,
            Placement::Auto(_) => berth_abi::Placement::Auto,
        }
    }

    /// Where the attribute was written.
    pub fn span(self) -> Option<Span> {
        match self {
            Placement::Device => None,
            Placement::Mapped(s)
            | Placement::PinnedAsync(s)
            | Placement::PinnedOut(s)
            | Placement::Auto(s) => Some(s),
        }
    }
}

/// How the body reaches a `&mut [T]` argument, from its attributes.
#[derive(Clone, Copy, Debug)]
pub enum Access {
    /// `#[atomic]`: only through atomics, from any thread.
    Atomic(Span),
    /// `#[per_block]`: one element per block, written by the block's first thread.
    PerBlock(Span),
    /// `#[matrix(cols = n)]`: a row-major matrix of `n` columns (a scalar argument), whose
    /// element `(row, col)` the thread at 2D position `(col, row)` owns.
    Matrix(Span),
}

impl Access {
    /// The attribute's spelling, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Access::Atomic(_) => "#[atomic]",
            Access::PerBlock(_) => "#[per_block]",
            Access::Matrix(_) => "#[matrix]",
        }
    }
}

/// `cols = name` inside `#[matrix(..)]`.
struct MatrixCols(syn::Ident);

impl Parse for MatrixCols {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        input.parse::<kw::cols>()?;
        input.parse::<syn::Token![=]>()?;
        let name = input.parse::<syn::Ident>()?;
        if !input.is_empty() {
            return Err(input.error("expected `)` after the column count's argument"));
        }
        Ok(MatrixCols(name))
    }
}

/// Take `#[atomic]` / `#[per_block]` / `#[matrix(cols = n)]` out of an argument's
/// attributes: the access (one at most), the argument `#[matrix]` names as its column
/// count, and the other attributes, which name the placement.
pub fn access(
    attrs: &[syn::Attribute],
    errors: &mut Vec<syn::Error>,
) -> (Option<Access>, Option<syn::Ident>, Vec<syn::Attribute>) {
    let mut found: Option<Access> = None;
    let mut cols = None;
    let mut rest = Vec::new();
    for attr in attrs {
        let path = attr.path().to_token_stream();
        let this = if let Ok(kw) = syn::parse2::<kw::atomic>(path.clone()) {
            Access::Atomic(kw.span)
        } else if let Ok(kw) = syn::parse2::<kw::per_block>(path.clone()) {
            Access::PerBlock(kw.span)
        } else if let Ok(kw) = syn::parse2::<kw::matrix>(path) {
            let this = Access::Matrix(kw.span);
            let parsed = match &attr.meta {
                syn::Meta::List(list) => syn::parse2::<MatrixCols>(list.tokens.clone()).ok(),
                _ => None,
            };
            match parsed {
                Some(MatrixCols(name)) => {
                    if found.is_none() {
                        cols = Some(name);
                    }
                }
                None => errors.push(syn::Error::new_spanned(
                    &attr.meta,
                    "`#[matrix]` names the kernel argument that holds the matrix's column count: `#[matrix(cols = n)]`",
                )),
            }
            if let Some(prev) = found {
                errors.push(syn::Error::new_spanned(
                    attr.path(),
                    format!(
                        "`{}` and `{}` exclude each other: keep one",
                        prev.name(),
                        this.name()
                    ),
                ));
            } else {
                found = Some(this);
            }
            continue;
        } else {
            rest.push(attr.clone());
            continue;
        };
        if let Some(Access::Matrix(_)) = found {
            errors.push(syn::Error::new_spanned(
                attr.path(),
                format!(
                    "`#[matrix]` and `{}` exclude each other: keep one",
                    this.name()
                ),
            ));
            continue;
        }
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            errors.push(syn::Error::new_spanned(
                &attr.meta,
                format!("`{0}` takes no arguments; write `{0}`", this.name()),
            ));
        }
        match found {
            None => found = Some(this),
            Some(prev) if prev.name() == this.name() => errors.push(syn::Error::new_spanned(
                attr.path(),
                format!("duplicate `{}`: write it once", this.name()),
            )),
            Some(prev) => errors.push(syn::Error::new_spanned(
                attr.path(),
                format!(
                    "`{}` and `{}` exclude each other: an argument is updated by atomics from any thread, or written once per block by its first thread; keep one",
                    prev.name(),
                    this.name()
                ),
            )),
        }
    }
    (found, cols, rest)
}

/// Read an argument's attributes into a placement; every bad attribute is reported.
pub fn placement(attrs: &[syn::Attribute], errors: &mut Vec<syn::Error>) -> Placement {
    let mut found = Placement::Device;
    for attr in attrs {
        let path = attr.path();
        let this = if let Ok(kw) = syn::parse2::<kw::mapped>(attr.path().to_token_stream()) {
            Placement::Mapped(kw.span)
        } else if let Ok(kw) = syn::parse2::<kw::auto>(attr.path().to_token_stream()) {
            Placement::Auto(kw.span)
        } else if let Ok(kw) = syn::parse2::<kw::pinned_async>(attr.path().to_token_stream()) {
            Placement::PinnedAsync(kw.span)
        } else {
            let name = path_name(attr.path());
            errors.push(syn::Error::new_spanned(
                path,
                format!("unknown argument attribute `#[{name}]`: expected {PLACEMENTS}, or none for data already in device memory (and, on a `&mut [T]`, `#[atomic]`, `#[per_block]` or `#[matrix(cols = n)]` for how the body writes it)"),
            ));
            continue;
        };
        let this = match (&attr.meta, this) {
            (syn::Meta::Path(_), this) => this,
            (syn::Meta::List(list), Placement::PinnedAsync(span))
                if syn::parse2::<kw::out>(list.tokens.clone()).is_ok() =>
            {
                Placement::PinnedOut(span)
            }
            (meta, Placement::PinnedAsync(span)) => {
                errors.push(syn::Error::new_spanned(
                    meta,
                    "`#[pinned_async]` takes one optional argument: `#[pinned_async(out)]` for an \
                     output the kernel only writes (copied back, not copied in)",
                ));
                Placement::PinnedAsync(span)
            }
            (meta, this) => {
                errors.push(syn::Error::new_spanned(
                    meta,
                    format!(
                        "`{}` takes no arguments; write `{}`",
                        this.name(),
                        this.name()
                    ),
                ));
                this
            }
        };
        let same = |a: Placement, b: Placement| {
            let id = |p| match p {
                Placement::PinnedOut(s) => Placement::PinnedAsync(s),
                p => p,
            };
            std::mem::discriminant(&id(a)) == std::mem::discriminant(&id(b))
        };
        match found {
            Placement::Device => found = this,
            prev if same(prev, this) => {
                errors.push(syn::Error::new_spanned(
                    path,
                    format!("duplicate `{}`: write it once", this.name()),
                ));
            }
            prev => {
                errors.push(syn::Error::new_spanned(
                    path,
                    format!(
                        "an argument has one placement: `{}` and `{}` exclude each other; \
                         `#[mapped]` lets the GPU read host memory in place, `#[pinned_async]` copies it; keep one",
                        prev.name(),
                        this.name()
                    ),
                ));
            }
        }
    }
    found
}

fn path_name(p: &syn::Path) -> String {
    p.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}
