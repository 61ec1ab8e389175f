//! The expansion of a generic kernel, `#[gpu_kernel(instances(T = f32, f64))] fn scale<T>(..)`.
//!
//! The body function stays generic (the host build type-checks it once, and once more per
//! instance when the entries call it). Each instance is a plain kernel named
//! `<kernel>_<value>…` (`scale_f32`): its own PTX entry, simulator entry and descriptor, with
//! the parameters replaced by the instance's values in every argument type. The launcher
//! `scale::<T>(..)` is generic too; it forwards to a hidden trait, implemented once per
//! instance, so a type that is not an instance is a compile error at the call naming the
//! instances that exist.

use super::{
    Embedded, LaunchFn, body_fn, body_ident, descriptor, entry, gpu_build_failed, launch_fn,
    launcher_docs, padding_checks, pipelined_fn, scalar_align_checks, sim_entry,
};
use crate::parse::Options;
use crate::validate::{ArgKind, Instance, Kernel};
use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};

/// The full expansion of a valid generic kernel with its instances.
pub fn kernel(
    opts: &Options,
    k: &Kernel,
    instances: &[Instance],
    files: Embedded<'_>,
) -> TokenStream {
    let body_fn = body_fn(opts, k);
    let tr = trait_ident(k);
    let mut items = Vec::new();
    let mut impls = Vec::new();
    for (i, inst) in instances.iter().enumerate() {
        let ki = instantiate(k, inst);
        let callee = callee(k, inst);
        items.push(scalar_align_checks(&ki));
        items.push(padding_checks(opts, &ki));
        items.push(entry(opts, &ki, &callee));
        items.push(sim_entry(opts, &ki, &callee));
        // The crate's PTX and cubins, where this kernel carries them, go with the first
        // instance only: one copy per crate, as for plain kernels.
        let files = if i == 0 {
            files
        } else {
            Embedded {
                cubin: None,
                carries_ptx: false,
                ..files
            }
        };
        items.push(descriptor(opts, &ki, files));
        impls.push(instance_impl(opts, &ki, inst, &tr));
    }
    let launcher = launcher(opts, k, instances, &tr);
    let gpu_errors = gpu_build_failed(&k.name, files);
    quote! {
        #gpu_errors
        #body_fn
        #(#items)*
        #launcher
        #(#impls)*
    }
}

/// `__berth_instance_<kernel>`: the trait implemented once per instance.
fn trait_ident(k: &Kernel) -> syn::Ident {
    format_ident!("__berth_instance_{}", k.name)
}

/// `__berth_body_k::<f32, 4>`, at the span of the instance's first value: when a value does
/// not satisfy the parameter's bounds, rustc reports it there.
fn callee(k: &Kernel, inst: &Instance) -> TokenStream {
    let span = inst
        .values
        .first()
        .and_then(|(_, v)| v.clone().into_iter().next())
        .map_or(k.name.span(), |t| t.span());
    let body = syn::Ident::new(&body_ident(&k.name).to_string(), span);
    let values = inst.values.iter().map(|(_, v)| v);
    quote_spanned!(span=> #body::<#(#values),*>)
}

/// Kernel `k` with the instance's values in place of its parameters, named after it.
fn instantiate(k: &Kernel, inst: &Instance) -> Kernel {
    let ty = |t: &syn::Type| -> syn::Type {
        syn::parse2(substitute(t.to_token_stream(), inst)).expect("a substituted type")
    };
    let args = k
        .args
        .iter()
        .map(|a| {
            let mut a = a.clone();
            a.kind = match &a.kind {
                ArgKind::Scalar(t) => ArgKind::Scalar(ty(t)),
                ArgKind::Slice { elem, mutable } => ArgKind::Slice {
                    elem: ty(elem),
                    mutable: *mutable,
                },
                ArgKind::Signal { mailbox } => ArgKind::Signal {
                    mailbox: mailbox.as_ref().map(|(t, way)| (ty(t), *way)),
                },
                ArgKind::Rows { elem } => ArgKind::Rows { elem: ty(elem) },
            };
            a.ty = ty(&a.ty);
            a
        })
        .collect();
    Kernel {
        attrs: k.attrs.clone(),
        vis: k.vis.clone(),
        name: inst.name.clone(),
        generics: syn::Generics::default(),
        args,
        body: k.body.clone(),
    }
}

/// Every mention of a parameter in `tokens` replaced by its value (a type in an invisible
/// group, so `&[T]` with `T = crate::V` stays one type).
fn substitute(tokens: TokenStream, inst: &Instance) -> TokenStream {
    tokens
        .into_iter()
        .map(|tt| match tt {
            TokenTree::Ident(id) => match inst.values.iter().find(|(p, _)| *p == id) {
                Some((_, v)) => Group::new(Delimiter::None, v.clone()).into(),
                None => TokenTree::Ident(id),
            },
            TokenTree::Group(g) => {
                let mut n = Group::new(g.delimiter(), substitute(g.stream(), inst));
                n.set_span(g.span());
                n.into()
            }
            other => other,
        })
        .collect()
}

/// The generic parameters as the trait and the launcher declare them: names and const types,
/// no bounds (the trait's implementations are the instances, which satisfy them).
fn bare_params(k: &Kernel) -> Vec<TokenStream> {
    k.generics
        .params
        .iter()
        .map(|p| match p {
            syn::GenericParam::Type(t) => t.ident.to_token_stream(),
            syn::GenericParam::Const(c) => {
                let (n, ty) = (&c.ident, &c.ty);
                quote!(const #n: #ty)
            }
            syn::GenericParam::Lifetime(l) => l.lifetime.to_token_stream(),
        })
        .collect()
}

/// The parameters' names, as the trait's arguments.
fn param_names(k: &Kernel) -> Vec<syn::Ident> {
    k.generics
        .params
        .iter()
        .map(|p| match p {
            syn::GenericParam::Type(t) => t.ident.clone(),
            syn::GenericParam::Const(c) => c.ident.clone(),
            syn::GenericParam::Lifetime(l) => l.lifetime.ident.clone(),
        })
        .collect()
}

/// The hidden trait (one method per launcher), and the generic launchers forwarding to it.
fn launcher(opts: &Options, k: &Kernel, instances: &[Instance], tr: &syn::Ident) -> TokenStream {
    let vis = &k.vis;
    let name = &k.name;
    let params = bare_params(k);
    let names = param_names(k);
    let list: Vec<String> = instances.iter().map(|i| format!("`{}`", i.name)).collect();
    let listing = list.join(", ");
    let shown: Vec<String> = names.iter().map(|n| format!("{n} = {{{n}}}")).collect();
    let message = format!(
        "the kernel `{name}` has no instance with {}",
        shown.join(", ")
    );
    let note = format!(
        "its instances are {} (PTX entries {}); add the missing one to `#[gpu_kernel(instances(..))]`",
        instances
            .iter()
            .map(|i| {
                let vals: Vec<String> =
                    i.values.iter().map(|(p, v)| format!("{p} = {v}")).collect();
                format!("`{}`", vals.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
            .replace('{', "{{")
            .replace('}', "}}"),
        listing
    );
    let mut methods = vec![(
        format_ident!("__launch"),
        name.clone(),
        launch_fn(opts, k, &name.to_string()),
    )];
    if opts.elementwise.is_some() {
        methods.push((
            format_ident!("__pipelined"),
            format_ident!("{}_pipelined", name),
            pipelined_fn(opts, k, &name.to_string()),
        ));
    }
    let decls = methods.iter().map(|(m, _, f)| {
        let LaunchFn { params, ret, .. } = f;
        quote! {
            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            fn #m<'__l>(#(#params),*) -> #ret;
        }
    });
    let instance_doc = format!(
        "\n\n Instances (the type and constant arguments it can be launched with): {}.",
        instances
            .iter()
            .map(|i| {
                let vals: Vec<String> = i.values.iter().map(|(_, v)| v.to_string()).collect();
                format!("`{name}::<{}>`", vals.join(", "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let wrappers = methods.iter().map(|(m, fname, f)| {
        let LaunchFn {
            doc,
            params: fparams,
            names: fnames,
            ret,
            ..
        } = f;
        let doc = format!("{doc}{instance_doc}");
        let docs = if fname == name {
            launcher_docs(k)
        } else {
            TokenStream::new()
        };
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            #docs
            #[doc = #doc]
            #[allow(clippy::too_many_arguments)]
            #vis fn #fname<'__l, #(#params),*>(#(#fparams),*) -> #ret
            where
                (): #tr<#(#names),*>,
            {
                <() as #tr<#(#names),*>>::#m(#(#fnames),*)
            }
        }
    });
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #[diagnostic::on_unimplemented(
            message = #message,
            label = "not an instance of this kernel",
            note = #note
        )]
        #vis trait #tr<#(#params),*> {
            #(#decls)*
        }
        #(#wrappers)*
    }
}

/// The trait's implementation for one instance: its launchers, as a plain kernel's.
fn instance_impl(opts: &Options, ki: &Kernel, inst: &Instance, tr: &syn::Ident) -> TokenStream {
    let values = inst.values.iter().map(|(_, v)| v);
    let mut methods = vec![(format_ident!("__launch"), launch_fn(opts, ki, ""))];
    if opts.elementwise.is_some() {
        methods.push((format_ident!("__pipelined"), pipelined_fn(opts, ki, "")));
    }
    let methods = methods.iter().map(|(m, f)| {
        let LaunchFn {
            params, ret, body, ..
        } = f;
        quote! {
            #[allow(clippy::too_many_arguments)]
            fn #m<'__l>(#(#params),*) -> #ret #body
        }
    });
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        impl #tr<#(#values),*> for () {
            #(#methods)*
        }
    }
}
