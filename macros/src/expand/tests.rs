//! Snapshot tests of the `#[gpu_kernel]` expansion: one per argument kind and option, read
//! through `prettyplease`, and the messages of misuse. The snapshots are in `snapshots/`;
//! regenerate them with `INSTA_UPDATE=always cargo test -p berth-gpu-macros` and review the diff.

use crate::expand::{Embedded, GpuErrors};
use proc_macro2::{TokenStream, TokenTree};
use quote::quote;

/// The PTX path the snapshots embed (a build script would export the real one).
const PTX: Option<&str> = Some("/path/k.ptx");

/// Expand `#[gpu_kernel(args)] item` and pretty-print the result.
fn expand_with(args: TokenStream, item: TokenStream, ptx: Option<&str>) -> String {
    let out = crate::expand::gpu_kernel(args, item, Embedded::ptx(ptx));
    let file: syn::File = syn::parse2(out.clone())
        .unwrap_or_else(|e| panic!("the expansion is not a valid file ({e}):\n{out}"));
    prettyplease::unparse(&file)
}

/// Expand `#[gpu_kernel] item` with a PTX path.
fn expand(item: TokenStream) -> String {
    expand_with(TokenStream::new(), item, PTX)
}

/// The message of every `compile_error!` in `tokens`, in order.
fn compile_errors(tokens: TokenStream, out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tt) in tokens.iter().enumerate() {
        match tt {
            TokenTree::Ident(id) if id == "compile_error" => {
                let Some(TokenTree::Group(g)) = tokens.get(i + 2) else {
                    continue;
                };
                let msg: syn::LitStr = syn::parse2(g.stream())
                    .unwrap_or_else(|e| panic!("compile_error! without a string ({e}): {g}"));
                out.push(msg.value());
            }
            TokenTree::Group(g) => compile_errors(g.stream(), out),
            _ => {}
        }
    }
}

/// The messages of `#[gpu_kernel(args)] item`, one per line; panics when there are none.
fn errors_with(args: TokenStream, item: TokenStream) -> String {
    let out = crate::expand::gpu_kernel(args, item, Embedded::ptx(PTX));
    // The expansion must stay valid Rust whatever the mistake, so that rustc reports only the
    // macro's own errors.
    syn::parse2::<syn::File>(out.clone())
        .unwrap_or_else(|e| panic!("the error expansion is not a valid file ({e}):\n{out}"));
    let mut msgs = Vec::new();
    compile_errors(out, &mut msgs);
    assert!(!msgs.is_empty(), "expected errors");
    msgs.iter().map(|m| format!("error: {m}\n")).collect()
}

/// The messages of `#[gpu_kernel] item`.
fn errors(item: TokenStream) -> String {
    errors_with(TokenStream::new(), item)
}

#[test]
fn scalar_primitive() {
    insta::assert_snapshot!(expand(quote! {
        pub fn scale(a: f32, n: u32, bits: u64) {}
    }));
}

#[test]
fn scalar_bool() {
    insta::assert_snapshot!(expand(quote! {
        pub fn flag(enabled: bool) {}
    }));
}

#[test]
fn scalar_struct_path() {
    insta::assert_snapshot!(expand(quote! {
        pub fn with_params(p: Params, q: crate::shapes::Quad) {}
    }));
}

#[test]
fn scalar_array() {
    insta::assert_snapshot!(expand(quote! {
        pub fn matrix(m: [f32; 4], rows: [[u32; 2]; 3]) {}
    }));
}

#[test]
fn slice_shared() {
    insta::assert_snapshot!(expand(quote! {
        pub fn sum(x: &[f32]) {
            let _ = x.len();
        }
    }));
}

#[test]
fn slice_mut() {
    insta::assert_snapshot!(expand(quote! {
        pub fn fill(out: &mut [u32], v: u32) {
            out[0] = v;
        }
    }));
}

#[test]
fn pinned_async_in_and_in_out() {
    insta::assert_snapshot!(expand(quote! {
        pub fn saxpy(a: f32, #[pinned_async] x: &[f32], #[pinned_async] y: &mut [f32]) {}
    }));
}

#[test]
fn mapped_read_and_write() {
    insta::assert_snapshot!(expand(quote! {
        pub fn lookup(#[mapped] table: &[f32], ids: &[u32], #[mapped] out: &mut [f32]) {}
    }));
}

#[test]
fn elementwise_pipelined_launcher() {
    insta::assert_snapshot!(expand_with(
        quote!(elementwise),
        quote! {
            pub fn affine(a: f32, #[pinned_async] x: &[f32], #[pinned_async(out)] y: &mut [f32], lut: &[f32]) {}
        },
        Some("/path/k.ptx"),
    ));
}

#[test]
fn error_elementwise_and_out() {
    insta::assert_snapshot!(errors_with(
        quote!(elementwise),
        quote! {
            pub fn k(#[pinned_async(out)] x: &[f32], #[pinned_async(in)] y: &mut [f32], z: &mut [f32]) {}
        },
    ));
    insta::assert_snapshot!(
        "elementwise_without_bulk",
        errors_with(
            quote!(elementwise),
            quote! { pub fn k(x: &[f32], y: &mut [f32]) {} }
        )
    );
}

#[test]
fn signals_and_mailboxes() {
    insta::assert_snapshot!(expand(quote! {
        pub fn worker(
            #[mapped] inbox: &Inbox<Job>,
            #[mapped] outbox: &Outbox<Reply>,
            #[mapped] ctl: &Signals,
            out: &mut [u32],
        ) {}
    }));
}

#[test]
fn auto_placement_takes_a_hint() {
    insta::assert_snapshot!(expand(quote! {
        pub fn lookup(#[auto] table: &[f32], ids: &[u32], out: &mut [f32]) {}
    }));
}

#[test]
fn rows_through_a_hot_tier() {
    insta::assert_snapshot!(expand(quote! {
        pub fn bag(#[auto] table: &Rows<f32>, ids: &[u32], out: &mut [f32]) {}
    }));
}

#[test]
fn saxpy_with_docs() {
    insta::assert_snapshot!(expand(quote! {
        /// `y[i] = a * x[i] + y[i]`.
        #[inline]
        pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
            let i = thread::global_x();
            if i < y.len() {
                y[i] = a * x[i] + y[i];
            }
        }
    }));
}

#[test]
fn mut_scalar_binding() {
    insta::assert_snapshot!(expand(quote! {
        pub fn countdown(mut n: u32, out: &mut [u32]) {
            while n > 0 {
                n -= 1;
            }
            out[0] = n;
        }
    }));
}

#[test]
fn crate_option() {
    insta::assert_snapshot!(expand_with(
        quote!(crate = my::berth),
        quote! {
            pub fn k(a: f32, x: &[f32], y: &mut [f32]) {}
        },
        PTX,
    ));
}

#[test]
fn launcher_names_clash() {
    insta::assert_snapshot!(expand(quote! {
        pub fn clash(grid: u32, on: &[f32], out: &mut [f32]) {}
    }));
}

#[test]
fn no_ptx() {
    insta::assert_snapshot!(expand_with(
        TokenStream::new(),
        quote! {
            pub fn k(x: &[f32]) {}
        },
        None,
    ));
}

#[test]
fn no_ptx_message() {
    let out = crate::expand::gpu_kernel(
        TokenStream::new(),
        quote!(
            pub fn k(x: &[f32]) {}
        ),
        Embedded::default(),
    );
    let mut msgs = Vec::new();
    compile_errors(out, &mut msgs);
    insta::assert_snapshot!(msgs.join("\n"));
}

/// Expand `item` for a crate whose GPU build failed, as its first kernel or a later one.
fn expand_after_failed_gpu_build(args: TokenStream, item: TokenStream, first: bool) -> String {
    let files = Embedded {
        gpu_errors: Some(GpuErrors {
            path: "/out/k.gpu-errors.txt",
            first,
        }),
        ..Embedded::default()
    };
    let out = crate::expand::gpu_kernel(args, item, files);
    let mut msgs = Vec::new();
    compile_errors(out.clone(), &mut msgs);
    assert_eq!(msgs, Vec::<String>::new(), "no error at expansion");
    let file: syn::File = syn::parse2(out.clone())
        .unwrap_or_else(|e| panic!("the expansion is not a valid file ({e}):\n{out}"));
    prettyplease::unparse(&file)
}

#[test]
fn failed_gpu_build_first_kernel() {
    // The first kernel carries the one post-monomorphization error holding the GPU build's
    // errors; no kernel says that the crate has no build script, and none embeds PTX.
    let text = expand_after_failed_gpu_build(
        TokenStream::new(),
        quote! {
            pub fn k(x: &[f32]) {}
        },
        true,
    );
    assert_eq!(text.matches("include_str!").count(), 1, "{text}");
    assert!(
        text.contains("crate_files: ::core::option::Option::None,"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn failed_gpu_build_later_kernel() {
    // A later kernel of the crate adds nothing: the crate's errors are reported once.
    let text = expand_after_failed_gpu_build(
        TokenStream::new(),
        quote! {
            pub fn k(x: &[f32]) {}
        },
        false,
    );
    assert!(!text.contains("include_str!"), "{text}");
    assert!(!text.contains("GpuBuild"), "{text}");
    assert!(
        text.contains("crate_files: ::core::option::Option::None,"),
        "{text}"
    );
    // The rest of the expansion is that of a later kernel of a crate whose GPU build
    // succeeded.
    let later = Embedded {
        carries_ptx: false,
        ..Embedded::ptx(PTX)
    };
    let out = crate::expand::gpu_kernel(
        TokenStream::new(),
        quote! {
            pub fn k(x: &[f32]) {}
        },
        later,
    );
    let with_ptx = prettyplease::unparse(&syn::parse2(out).unwrap());
    assert_eq!(text, with_ptx);
}

#[test]
fn only_the_crates_first_kernel_embeds_the_ptx() {
    // Embedded once per crate: a later kernel's descriptor names none, and the runtime finds
    // the crate's from the first (a copy per descriptor would be one per codegen unit, all
    // compiled again whenever one kernel changes).
    let later = Embedded {
        carries_ptx: false,
        ..Embedded::ptx(PTX)
    };
    let text = crate::expand::gpu_kernel(
        TokenStream::new(),
        quote!(
            pub fn k(x: &[f32]) {}
        ),
        later,
    )
    .to_string();
    assert!(!text.contains("include_str"), "{text}");
    assert!(
        text.contains("crate_files : :: core :: option :: Option :: None"),
        "{text}"
    );
    let first = expand(quote!(
        pub fn k(x: &[f32]) {}
    ));
    assert_eq!(first.matches("include_str!").count(), 1, "{first}");
    // In a static of its own, in a module of its own (a codegen unit of its own in the host
    // build), which the descriptor points to: the descriptor does not change with the files.
    assert!(
        first.contains("mod __berth_crate_files_k {")
            && first.contains("static FILES: ::berth::__private::CrateFiles")
            && first.contains(
                "crate_files: ::core::option::Option::Some(&__berth_crate_files_k::FILES),"
            ),
        "{first}"
    );
    // A generic kernel's first instance carries it, the others do not.
    let generic = expand_with(
        quote!(instances(T = f32, f64, u32)),
        quote!(
            pub fn g<T: Copy>(x: &[T]) {}
        ),
        PTX,
    );
    assert_eq!(generic.matches("include_str!").count(), 1, "{generic}");
    assert_eq!(
        generic
            .matches("crate_files: ::core::option::Option::None,")
            .count(),
        2,
        "{generic}"
    );
}

#[test]
fn failed_gpu_build_generic_kernel() {
    // A generic kernel's instances each have a descriptor, but the crate's error is one.
    let text = expand_after_failed_gpu_build(
        quote!(instances(T = f32, u32)),
        quote! {
            pub fn fill<T: Copy>(x: T, out: &mut [T]) {}
        },
        true,
    );
    assert_eq!(text.matches("include_str!").count(), 1, "{text}");
    assert_eq!(text.matches("static GPU_BUILD_FAILED").count(), 1, "{text}");
    assert_eq!(
        text.matches("crate_files: ::core::option::Option::None,")
            .count(),
        2,
        "{text}"
    );
}

#[test]
fn error_signature() {
    // Every problem of the signature is reported at once.
    insta::assert_snapshot!(errors(quote! {
        pub async unsafe extern "C" fn k<T>(self, x: T) -> u32 {}
    }));
}

#[test]
fn error_lifetimes_and_where() {
    insta::assert_snapshot!(errors(quote! {
        pub fn k<'a>(x: &'a [f32]) {}
    }));
    insta::assert_snapshot!(
        "error_where",
        errors(quote! {
            pub const fn k(x: &[f32]) where f32: Copy {}
        })
    );
}

#[test]
fn error_arguments() {
    insta::assert_snapshot!(errors(quote! {
        pub fn k(
            (a, b): (u32, u32),
            r: &f32,
            w: &mut f32,
            p: *const f32,
            q: *mut f32,
            s: &[&u32],
            t: &[str],
            l: &'a [f32],
            u: [f32],
            i: impl Copy,
            mut m: &mut [f32],
        ) {}
    }));
}

#[test]
fn error_placements() {
    insta::assert_snapshot!(errors(quote! {
        pub fn k(
            #[mapp] a: &[f32],
            #[mapped] #[mapped] b: &[f32],
            #[mapped] #[pinned_async] c: &[f32],
            #[mapped] d: f32,
            #[mapped(x)] e: &[f32],
            #[pinned_async] f: &mut [f32],
        ) {}
    }));
}

#[test]
fn error_options() {
    insta::assert_snapshot!(errors_with(
        quote!(foo),
        quote!(
            pub fn k() {}
        )
    ));
    insta::assert_snapshot!(
        "error_options_twice",
        errors_with(
            quote!(crate = a, crate = b),
            quote!(
                pub fn k() {}
            )
        )
    );
}

#[test]
fn block_shape_and_exact_arithmetic() {
    // The entry carries the attributes for the builder's last step; the descriptor the shape
    // for the launch check.
    insta::assert_snapshot!(expand_with(
        quote!(block = (16, 16), fp_contract = false),
        quote!(
            pub fn tile(x: &[f32], y: &mut [f32]) {}
        ),
        Some("/k.ptx")
    ));
}

#[test]
fn min_blocks_per_sm_joins_the_block_shape() {
    // `.minnctapersm` rides in the entry's section beside `.reqntid`.
    let out = expand_with(
        quote!(block = 256, min_blocks_per_sm = 8),
        quote!(
            pub fn k(y: &mut [f32]) {}
        ),
        Some("/k.ptx"),
    );
    assert!(
        out.contains(r#"link_section = "berth:reqntid=256,1,1;minctasm=8""#),
        "{out}"
    );
}

#[test]
fn linear_entry_for_a_kernel_that_asks_for_its_index() {
    // A body that names `index` gets a second PTX entry for one-dimensional launches, whose
    // prologue tells the optimiser the launch's shape; the descriptor names it. The declared
    // one-dimensional block keeps it (the grid may still be two-dimensional).
    insta::assert_snapshot!(expand_with(
        quote!(block = 256),
        quote!(
            pub fn copy(x: &[f32], y: &mut [f32]) {
                let i = thread::index();
                if i < y.len() {
                    y[i] = x[i];
                }
            }
        ),
        Some("/k.ptx")
    ));
}

#[test]
fn no_linear_entry_without_a_shape_question_or_for_a_two_dimensional_block() {
    let linear = |args: TokenStream, item: TokenStream| {
        let out = crate::expand::gpu_kernel(args, item, Embedded::ptx(PTX)).to_string();
        (
            out.contains("__berth_1d"),
            out.contains("assume_linear_launch"),
        )
    };
    let body = quote!(
        pub fn k(y: &mut [f32]) {
            for i in thread::grid_stride(y.len()) {
                y[i] = 0.0;
            }
        }
    );
    assert_eq!(linear(TokenStream::new(), body.clone()), (true, true));
    assert_eq!(linear(quote!(block = (16, 16)), body), (false, false));
    let global_x = quote!(
        pub fn k(y: &mut [f32]) {
            let i = thread::global_x();
            let _ = i;
        }
    );
    assert_eq!(linear(TokenStream::new(), global_x), (false, false));
}

#[test]
fn planar_entry_for_a_kernel_that_reads_z_and_declares_no_block() {
    // (entry, prologue, descriptor's name of it)
    let planar = |args: TokenStream, item: TokenStream| {
        let out = crate::expand::gpu_kernel(args, item, Embedded::ptx(PTX)).to_string();
        (
            out.contains("pub unsafe extern \"ptx-kernel\" fn k__berth_2d"),
            out.contains("assume_planar_launch"),
            out.contains("planar : :: core :: option :: Option :: Some (\"k__berth_2d\")"),
        )
    };
    let guarded = quote!(
        pub fn k(w: u32, y: &mut [f32]) {
            if thread::global_z() != 0 {
                return;
            }
            let i = thread::global_y() * w as usize + thread::global_x();
            if i < y.len() {
                unsafe { y.write(i, 0.0) };
            }
        }
    );
    assert_eq!(
        planar(TokenStream::new(), guarded.clone()),
        (true, true, true)
    );
    // A declared block already tells the entries the grid's z extent (or has one of its own).
    assert_eq!(
        planar(quote!(block = (16, 16)), guarded),
        (false, false, false)
    );
    for body in [
        quote!(
            pub fn k(y: &mut [f32]) {
                if block::idx_z() == 0 {
                    let _ = y;
                }
            }
        ),
        quote!(
            pub fn k(y: &mut [f32]) {
                let p = thread::index_2d();
                let _ = (p, y);
            }
        ),
    ] {
        assert_eq!(planar(TokenStream::new(), body), (true, true, true));
    }
    let flat = quote!(
        pub fn k(y: &mut [f32]) {
            let i = thread::global_x();
            let _ = (i, y);
        }
    );
    assert_eq!(planar(TokenStream::new(), flat), (false, false, false));
}

#[test]
fn error_block_shapes() {
    for (args, name) in [
        (quote!(block = (0, 16)), "error_block_zero"),
        (quote!(block = (32, 32, 2)), "error_block_too_large"),
        (quote!(block = (16, n)), "error_block_not_literal"),
        (quote!(block = (1, 2, 3, 4)), "error_block_four"),
        (quote!(block), "error_block_no_value"),
        (quote!(fp_contract = off), "error_fp_contract_value"),
        (quote!(block = 32, block = 64), "error_block_twice"),
        (
            quote!(min_blocks_per_sm = 2),
            "error_min_blocks_without_block",
        ),
        (
            quote!(block = (16, 16), min_blocks_per_sm = 9),
            "error_min_blocks_too_many_threads",
        ),
        (
            quote!(block = 64, min_blocks_per_sm = 0),
            "error_min_blocks_zero",
        ),
        (
            quote!(block = 32, min_blocks_per_sm = 33),
            "error_min_blocks_too_many",
        ),
        (
            quote!(block = 32, min_blocks_per_sm),
            "error_min_blocks_no_value",
        ),
    ] {
        insta::assert_snapshot!(
            name,
            errors_with(
                args,
                quote!(
                    pub fn k() {}
                )
            )
        );
    }
}

#[test]
fn error_not_a_function() {
    insta::assert_snapshot!(errors(quote! {
        pub struct S {
            x: f32,
        }
    }));
}

#[test]
fn error_keeps_item() {
    // On error the function is still emitted, without its argument attributes, so that
    // calls to it do not add "cannot find function" errors; a slice taken by value is emitted
    // as `&[T]` so that rustc does not also report it as unsized.
    let out = crate::expand::gpu_kernel(
        TokenStream::new(),
        quote!(
            pub fn k(#[mapp] x: &[f32], y: [f32]) -> u32 {
                0
            }
        ),
        Embedded::ptx(PTX),
    );
    let file: syn::File = syn::parse2(out).expect("valid file");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}

#[test]
fn derive_device_copy() {
    let out = crate::derive::device_copy(quote! {
        #[repr(C, align(16))]
        pub struct Affine<T> { scale: T, offset: [f32; 3] }
    });
    let file: syn::File = syn::parse2(out).expect("the derive's output parses");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}

#[test]
fn generic_instances() {
    insta::assert_snapshot!(expand_with(
        quote!(instances(T = f32, f64)),
        quote! {
            /// `y = a * x + y`.
            pub fn axpy<T: Copy + core::ops::Mul<Output = T> + core::ops::Add<Output = T>>(
                a: T,
                x: &[T],
                y: &mut [T],
            ) {
                let i = thread::global_x();
                if i < y.len() {
                    y[i] = a * x[i] + y[i];
                }
            }
        },
        PTX,
    ));
}

#[test]
fn const_generic_instances() {
    insta::assert_snapshot!(expand_with(
        quote!(instances(T = f32, N = 2, 4), block = 64),
        quote! {
            pub fn sum_rows<T, const N: usize>(x: &[[T; N]], out: &mut [T]) where T: Copy {}
        },
        PTX,
    ));
}

#[test]
fn error_generics() {
    insta::assert_snapshot!(
        "error_generic_without_instances",
        errors(quote! {
            pub fn scale<T: Copy, const N: usize>(x: &mut [T]) {}
        })
    );
    insta::assert_snapshot!(
        "error_instances_not_generic",
        errors_with(
            quote!(instances(T = f32)),
            quote! {
                pub fn scale(x: &mut [f32]) {}
            }
        )
    );
    insta::assert_snapshot!(
        "error_instances_names",
        errors_with(
            quote!(instances(U = f32, N = [u8; 2])),
            quote! {
                pub fn scale<T: Copy, const N: usize, const M: u32>(x: &mut [T]) {}
            }
        )
    );
    insta::assert_snapshot!(
        "error_instances_form",
        errors_with(
            quote!(instances(T)),
            quote! {
                pub fn scale<T: Copy>(x: &mut [T]) {}
            }
        )
    );
    insta::assert_snapshot!(
        "error_instances_same_name",
        errors_with(
            quote!(instances(T = f32, crate::f32)),
            quote! {
                pub fn scale<T: Copy>(x: &mut [T]) {}
            }
        )
    );
}

#[test]
fn embedded_sass() {
    // Where ptxas made the kernels' cubins, the crate's files hold them with the architecture.
    let out = crate::expand::gpu_kernel(
        TokenStream::new(),
        quote!(
            pub fn k(x: &[f32]) {}
        ),
        Embedded {
            ptx: PTX,
            cubin: Some(("/path/k.cubins", "sm_90")),
            carries_ptx: true,
            ..Embedded::default()
        },
    );
    let text = out.to_string();
    assert!(
        text.contains(
            "sass : :: core :: option :: Option :: Some (:: berth :: __private :: Sass { arch : \"sm_90\" , cubins : include_bytes ! (\"/path/k.cubins\") , })"
        ),
        "{text}"
    );
}

#[test]
fn a_generic_kernel_carrying_the_cubin_embeds_it_once() {
    // The first instance's descriptor carries the crate's cubins; the others do not.
    let out = crate::expand::gpu_kernel(
        quote!(instances(T = f32, f64, u32)),
        quote!(
            pub fn k<T: Copy>(x: &[T]) {}
        ),
        Embedded {
            ptx: PTX,
            cubin: Some(("/path/k.cubins", "sm_90")),
            carries_ptx: true,
            ..Embedded::default()
        },
    );
    let text = out.to_string();
    assert_eq!(text.matches("include_bytes !").count(), 1, "{text}");
    assert_eq!(
        text.matches("crate_files : :: core :: option :: Option :: None")
            .count(),
        2,
        "{text}"
    );
}

#[test]
fn same_len_ties_the_views_to_one_length() {
    // Every member's view takes the first member's length (entry and simulator alike), and
    // the descriptor lists the group's length parameters for the launcher's check. The
    // `#[auto]` member's length is its second parameter of four; `z` is in no group.
    insta::assert_snapshot!(expand_with(
        quote!(same_len(x, y, w)),
        quote!(
            pub fn k(a: f32, x: &[f32], #[auto] w: &[f32], y: &mut [f32], z: &[f32]) {
                let i = thread::index();
                if i < y.len() {
                    y[i] = a * x[i] + w[i] + z[0];
                }
            }
        ),
        PTX
    ));
}

#[test]
fn error_same_len() {
    // A name that is no argument, a scalar, a signal, a name given twice, a group of one, and
    // the form without a list.
    insta::assert_snapshot!(errors_with(
        quote!(same_len(x, q, a), same_len(y, x), same_len(ctl, y)),
        quote!(
            pub fn k(a: f32, x: &[f32], y: &mut [f32], #[mapped] ctl: &Signals) {}
        )
    ));
    insta::assert_snapshot!(
        "error_same_len_one",
        errors_with(
            quote!(same_len(x)),
            quote!(
                pub fn k(x: &[f32]) {}
            )
        )
    );
    insta::assert_snapshot!(
        "error_same_len_form",
        errors_with(
            quote!(same_len = x),
            quote!(
                pub fn k(x: &[f32]) {}
            )
        )
    );
    // In an elementwise kernel the chunked arguments and the whole ones cannot share a group.
    insta::assert_snapshot!(
        "error_same_len_elementwise",
        errors_with(
            quote!(elementwise, same_len(x, table, y)),
            quote!(
                pub fn k(
                    #[pinned_async] x: &[f32],
                    table: &[f32],
                    #[pinned_async(out)] y: &mut [f32],
                ) {
                }
            )
        )
    );
}

/// The descriptor's `name` is the PTX entry's symbol, which a raw identifier gives without its
/// `r#` (the driver looks the entry up by that name).
#[test]
fn a_raw_kernel_name_names_the_entry_without_its_prefix() {
    let out = expand(quote! {
        pub fn r#type(x: &mut [f32]) {}
    });
    assert!(out.contains(r#"name: "type","#), "{out}");
    assert!(!out.contains(r##""r#type""##), "{out}");
}

/// An instance of a generic kernel with a raw name is named from the name's text: `fn_f32`,
/// an identifier, where `r#fn_f32` is none.
#[test]
fn instances_of_a_raw_kernel_name_are_identifiers() {
    let out = expand_with(
        quote!(instances(T = f32, f64)),
        quote! {
            pub fn r#fn<T: Copy>(x: &mut [T]) {}
        },
        PTX,
    );
    assert!(out.contains(r#"name: "fn_f32","#), "{out}");
    assert!(out.contains(r#"name: "fn_f64","#), "{out}");
}
