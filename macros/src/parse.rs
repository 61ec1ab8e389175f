//! Reading the attribute's own arguments and each kernel argument's placement attributes.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};

/// Typed keywords, so a typo gets "expected one of …" instead of a generic parse error.
pub mod kw {
    syn::custom_keyword!(mapped);
    syn::custom_keyword!(pinned_async);
}

/// Placement keywords an argument may carry, for messages.
pub const PLACEMENTS: &str = "`#[mapped]` or `#[pinned_async]`";

/// `#[gpu_kernel(crate = path)]`: the options of the attribute itself.
pub struct Options {
    /// Path of the berth facade crate as seen from the kernel crate (`::berth` unless
    /// re-exported).
    pub krate: syn::Path,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            krate: syn::parse_quote!(::berth),
        }
    }
}

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut opts = Options::default();
        let mut seen_crate = false;
        while !input.is_empty() {
            let key: syn::Ident = input
                .call(syn::ext::IdentExt::parse_any)
                .map_err(|e| syn::Error::new(e.span(), "expected `crate = path`"))?;
            if key != "crate" {
                return Err(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown option `{key}`: the only option is `crate = path` (the path of the berth crate when it is re-exported)"
                    ),
                ));
            }
            if seen_crate {
                return Err(syn::Error::new(key.span(), "`crate` is given twice"));
            }
            seen_crate = true;
            input.parse::<syn::Token![=]>()?;
            opts.krate = input.parse()?;
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(opts)
    }
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
}

impl Placement {
    /// The attribute's spelling, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Device => "device",
            Placement::Mapped(_) => "#[mapped]",
            Placement::PinnedAsync(_) => "#[pinned_async]",
        }
    }

    /// Where the attribute was written.
    pub fn span(self) -> Option<Span> {
        match self {
            Placement::Device => None,
            Placement::Mapped(s) | Placement::PinnedAsync(s) => Some(s),
        }
    }
}

/// Read an argument's attributes into a placement; every bad attribute is reported.
pub fn placement(attrs: &[syn::Attribute], errors: &mut Vec<syn::Error>) -> Placement {
    let mut found = Placement::Device;
    for attr in attrs {
        let path = attr.path();
        let this = if let Ok(kw) = syn::parse2::<kw::mapped>(attr.path().to_token_stream()) {
            Placement::Mapped(kw.span)
        } else if let Ok(kw) = syn::parse2::<kw::pinned_async>(attr.path().to_token_stream()) {
            Placement::PinnedAsync(kw.span)
        } else {
            let name = path_name(attr.path());
            errors.push(syn::Error::new_spanned(
                path,
                format!("unknown argument attribute `#[{name}]`: expected {PLACEMENTS}, or none for data already in device memory"),
            ));
            continue;
        };
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            errors.push(syn::Error::new_spanned(
                &attr.meta,
                format!(
                    "`{}` takes no arguments; write `{}`",
                    this.name(),
                    this.name()
                ),
            ));
        }
        match found {
            Placement::Device => found = this,
            prev if std::mem::discriminant(&prev) == std::mem::discriminant(&this) => {
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
