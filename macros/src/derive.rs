//! `#[derive(DeviceCopy)]`: the checked way to let a struct cross to the GPU by value or as a
//! slice element. It requires a fixed layout (`#[repr(C)]` or `#[repr(transparent)]`), checks
//! every field is `DeviceCopy` (errors point at the field's type) and that a non-generic
//! struct has no padding, neither between its fields nor inside them (the launcher copies a
//! value's bytes, and padding bytes are uninitialised), and writes the `unsafe impl` the user would otherwise write by hand.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

/// Expand the derive on `input`.
pub fn device_copy(input: TokenStream) -> TokenStream {
    let item: syn::DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    match expand(&item) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn has_fixed_layout(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("repr")).any(|a| {
        let mut fixed = false;
        let _ = a.parse_nested_meta(|m| {
            if m.path.is_ident("C") || m.path.is_ident("transparent") {
                fixed = true;
            }
            // Skip the arguments of `align(N)` / `packed(N)`.
            if m.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in m.input);
                let _: TokenStream = content.parse()?;
            }
            Ok(())
        });
        fixed
    })
}

fn expand(item: &syn::DeriveInput) -> syn::Result<TokenStream> {
    let name = &item.ident;
    let fields = match &item.data {
        syn::Data::Struct(s) => &s.fields,
        syn::Data::Enum(e) => {
            return Err(syn::Error::new(
                e.enum_token.span(),
                "DeviceCopy cannot be derived for an enum: not every bit pattern is a valid value; \
                 pass a `#[repr(u32)]`-style integer field and convert on each side",
            ));
        }
        syn::Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span(),
                "DeviceCopy cannot be derived for a union; implement it by hand (`unsafe impl`) if its every field is plain data",
            ));
        }
    };
    if !has_fixed_layout(&item.attrs) {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "`{name}` needs a fixed layout to cross to the GPU: add `#[repr(C)]` (Rust's default layout may reorder fields differently on host and device)"
            ),
        ));
    }
    if let Some(p) = item.generics.lifetimes().next() {
        return Err(syn::Error::new(
            p.span(),
            "DeviceCopy types hold no references: remove the lifetime parameter",
        ));
    }
    let (impl_g, ty_g, where_g) = item.generics.split_for_impl();
    let checks = fields.iter().map(|f| {
        let ty = &f.ty;
        quote_spanned!(ty.span()=> __berth_assert_device_copy::<#ty>();)
    });
    let params = item.generics.type_params().map(|p| {
        let id = &p.ident;
        quote!(#id: ::berth::DeviceCopy)
    });
    let extra_where = if item.generics.type_params().next().is_some() {
        let preds: Vec<TokenStream> = params.collect();
        match where_g {
            Some(w) => quote!(#w, #(#preds),*),
            None => quote!(where #(#preds),*),
        }
    } else {
        quote!(#where_g)
    };
    // Padding bytes are uninitialised: the launcher copies a value's bytes, so a type with
    // padding would expose them. The size must be the fields' sizes added up (checked at
    // compile time; generic structs are checked per instance by the launcher's own bytes).
    let msg = format!(
        "`{name}` has padding bytes (its size is more than its fields' sizes added up): \
         padding is uninitialised memory, which must not be copied to the GPU; make it \
         explicit with a field such as `_pad: [u8; N]` (or reorder the fields)"
    );
    let sizes = fields.iter().map(|f| {
        let t = &f.ty;
        quote!(::core::mem::size_of::<#t>())
    });
    let total = quote!(0usize #(.wrapping_add(#sizes))*);
    let generic = !item.generics.params.is_empty();
    let padding_check = (!generic).then(|| {
        quote_spanned! {name.span()=>
            const _: () = ::core::assert!(::core::mem::size_of::<#name>() == #total, #msg);
        }
    });
    // A generic struct's padding depends on its parameters: the assertion is the impl's
    // `__BERTH_NO_PADDING`, evaluated for each instance a launch passes by value (with the
    // fields' own, for nested generic structs).
    let instance_check = generic.then(|| {
        let nested = fields.iter().map(|f| {
            let t = &f.ty;
            quote!(<#t as ::berth::DeviceCopy>::__BERTH_NO_PADDING;)
        });
        quote_spanned! {name.span()=>
            const __BERTH_NO_PADDING: () = {
                #(#nested)*
                ::core::assert!(::core::mem::size_of::<Self>() == #total, #msg)
            };
        }
    });
    let check_fn = syn::Ident::new("__berth_assert_device_copy", Span::call_site());
    // Every field is `DeviceCopy` (the error points at its type). A non-generic struct's
    // fields are also checked for padding inside them (`Pair<u32>`: a `u8` then a `u32`),
    // which the sizes adding up does not show: their own checks, evaluated at the definition.
    let field_checks = if generic {
        quote! {
            const _: () = {
                fn #check_fn<T: ::berth::DeviceCopy>() {}
                #[allow(dead_code)]
                fn __berth_check #impl_g () #extra_where {
                    #(#checks)*
                }
            };
        }
    } else {
        // One helper per field, spanned at the field's type, so that both a missing impl and
        // an evaluation failure point there.
        let checks = fields.iter().map(|f| {
            let ty = &f.ty;
            quote_spanned! {ty.span()=> {
                const fn #check_fn<T: ::berth::DeviceCopy>() {
                    T::__BERTH_NO_PADDING
                }
                #check_fn::<#ty>();
            }}
        });
        quote! {
            const _: () = { #(#checks)* };
        }
    };
    Ok(quote! {
        // SAFETY: `#[repr(C)]`/`#[repr(transparent)]` (checked by the derive) gives host and
        // device one layout; every field is `DeviceCopy` (checked below), so the value is
        // plain data without pointers; it has no padding (checked at compile time below, or for
        // a generic struct per instance before a launch reads its bytes), so all its bytes are
        // initialised.
        unsafe impl #impl_g ::berth::DeviceCopy for #name #ty_g #extra_where {
            #instance_check
        }

        #padding_check

        #field_checks
    })
}
