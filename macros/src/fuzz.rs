//! Fuzz tests of the three macros (proptest): random token streams and mutations of valid
//! kernels, structs and loops go through each expansion, which must never panic, must report
//! every mistake as a `compile_error!` at a token of the input (never the call site when a
//! token is to blame), and, for an item that is a function, must stay valid Rust.
//!
//! The inputs are ones rustc can hand a macro: an attribute or a derive always applies to an
//! item, so its item is never empty; `unroll!` may be called with nothing.
//!
//! 2,000 cases per property, a few seconds in `cargo test`, drawn from a fixed seed: every run
//! tries the same cases. `PROPTEST_RNG_SEED=N` draws other cases and `PROPTEST_CASES=N` runs
//! more of them. A failure prints the shrunk input and the seed that found it; nothing is
//! written to disk. Add the input to `found_cases` below (or a snapshot test) with its fix.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngSeed, TestRunner};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;

/// The seed the properties draw their cases from unless `PROPTEST_RNG_SEED` gives another.
/// (`berth` in ASCII.)
const SEED: u64 = 0x62_65_72_74_68;

/// 2,000 cases from a fixed seed (or those of the `PROPTEST_*` environment variables, which
/// `ProptestConfig::default()` reads), and no failure file: a test run writes nothing.
fn config() -> ProptestConfig {
    let env = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        env.cases
    } else {
        2000
    };
    let rng_seed = match env.rng_seed {
        RngSeed::Random => RngSeed::Fixed(SEED),
        fixed => fixed,
    };
    ProptestConfig {
        cases,
        // Inputs that do not lex are skipped, not failures.
        max_global_rejects: cases * 4,
        rng_seed,
        failure_persistence: None,
        ..env
    }
}

/// Run the property `test` on `cases` (see `config`), panicking with the shrunk input and the
/// seed when it fails.
fn check_property<S: Strategy>(
    name: &str,
    cases: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = config();
    let seed = config.rng_seed;
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&cases, test) {
        panic!(
            "{name}: {e}\nseed {seed}: `PROPTEST_RNG_SEED={seed} cargo test -p berth-gpu-macros --lib \
             fuzz::{name}` draws these cases again"
        );
    }
}

// ---- token soup -------------------------------------------------------------------------

const IDENTS: &[&str] = &[
    "fn",
    "pub",
    "mut",
    "unsafe",
    "const",
    "struct",
    "enum",
    "union",
    "where",
    "impl",
    "for",
    "in",
    "self",
    "Self",
    "crate",
    "super",
    "dyn",
    "move",
    "async",
    "extern",
    "static",
    "type",
    "u8",
    "u32",
    "i64",
    "u128",
    "f32",
    "f64",
    "bool",
    "usize",
    "x",
    "y",
    "out",
    "T",
    "N",
    "Mailbox",
    "Inbox",
    "Outbox",
    "Signals",
    "Rows",
    "Job",
    "F4",
    "mapped",
    "pinned_async",
    "auto",
    "elementwise",
    "block",
    "fp_contract",
    "instances",
    "same_len",
    "repr",
    "C",
    "packed",
    "align",
    "transparent",
    "step_by",
    "break",
    "continue",
    "loop",
    "while",
    "if",
    "else",
    "return",
    "r#type",
    "_",
];

const PUNCT: &[&str] = &[
    "&", "&&", "*", ",", ";", ":", "::", "=", "==", "<", ">", "->", "=>", "#", "!", "'a", "-", "+",
    "/", ".", "..", "..=", "...", "?", "@", "|", "^", "~", "%", "$",
];

const LITERALS: &[&str] = &[
    "0",
    "1",
    "8",
    "256",
    "4_096",
    "0x10",
    "18446744073709551615",
    "340282366920938463463374607431768211455",
    "1u32",
    "8usize",
    "7i64",
    "1.5",
    "1e9",
    "2.0f32",
    "\"s\"",
    "'c'",
    "b'a'",
    "b\"x\"",
    "true",
    "false",
    "r\"raw\"",
];

/// A random token tree, as source text: a leaf or a group of trees.
fn soup() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => select(IDENTS),
        2 => select(PUNCT),
        1 => select(LITERALS),
    ]
    .prop_map(str::to_owned);
    leaf.prop_recursive(3, 48, 8, |inner| {
        (
            select(&[("(", ")"), ("[", "]"), ("{", "}")][..]),
            prop::collection::vec(inner, 0..8),
        )
            .prop_map(|((open, close), v)| format!("{open} {} {close}", v.join(" ")))
    })
}

/// Several token trees, or none.
fn soups() -> impl Strategy<Value = String> {
    prop::collection::vec(soup(), 0..12).prop_map(|v| v.join(" "))
}

/// One token tree or more: the item an attribute or a derive is given, which is never empty.
fn item_soups() -> impl Strategy<Value = String> {
    prop::collection::vec(soup(), 1..12).prop_map(|v| v.join(" "))
}

// ---- mutations --------------------------------------------------------------------------

/// Edits of a token sequence: the small mistakes of a hand-written item.
#[derive(Clone, Debug)]
enum Edit {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    Replace(Index, String),
    Insert(Index, String),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let leaf = prop_oneof![select(IDENTS), select(PUNCT), select(LITERALS)].prop_map(str::to_owned);
    let edit = prop_oneof![
        any::<Index>().prop_map(Edit::Delete),
        any::<Index>().prop_map(Edit::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        (any::<Index>(), leaf.clone()).prop_map(|(a, t)| Edit::Replace(a, t)),
        (any::<Index>(), leaf).prop_map(|(a, t)| Edit::Insert(a, t)),
    ];
    prop::collection::vec(edit, 0..4)
}

/// The tokens of `src` in order, a group's delimiters as tokens of their own.
fn flatten(ts: TokenStream, out: &mut Vec<String>) {
    for tt in ts {
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::None => ("", ""),
                };
                out.push(open.to_owned());
                flatten(g.stream(), out);
                out.push(close.to_owned());
            }
            other => out.push(other.to_string()),
        }
    }
}

/// `src` with `edits` applied to its tokens (an edit may unbalance delimiters: the result is
/// then skipped as not lexing).
fn mutate(src: &str, edits: &[Edit]) -> String {
    let mut toks = Vec::new();
    if let Ok(ts) = TokenStream::from_str(src) {
        flatten(ts, &mut toks);
    }
    for e in edits {
        if toks.is_empty() {
            break;
        }
        match e {
            Edit::Delete(i) => {
                toks.remove(i.index(toks.len()));
            }
            Edit::Duplicate(i) => {
                let i = i.index(toks.len());
                toks.insert(i, toks[i].clone());
            }
            Edit::Swap(a, b) => {
                let (a, b) = (a.index(toks.len()), b.index(toks.len()));
                toks.swap(a, b);
            }
            Edit::Replace(i, t) => {
                let i = i.index(toks.len());
                toks[i] = t.clone();
            }
            Edit::Insert(i, t) => {
                let i = i.index(toks.len() + 1);
                toks.insert(i, t.clone());
            }
        }
    }
    toks.join(" ")
}

// ---- kernels, structs and loops close to valid ones -------------------------------------

const TYPES: &[&str] = &[
    "f32",
    "u32",
    "bool",
    "usize",
    "u128",
    "&[f32]",
    "&mut [f32]",
    "&[u32]",
    "&mut [u32]",
    "[f32]",
    "*const f32",
    "*mut u32",
    "Vec<f32>",
    "&&[f32]",
    "&mut &mut [f32]",
    "impl Copy",
    "dyn Fn()",
    "(u32, f32)",
    "fn()",
    "&'static str",
    "!",
    "_",
    "Self",
    "[f32; 4]",
    "[[u32; 2]; 3]",
    "&[[f32; 4]]",
    "Option<u32>",
    "&Mailbox<Job>",
    "&Inbox<Job>",
    "&Outbox<Job>",
    "&Signals",
    "&mut Signals",
    "&Rows<f32>",
    "&mut Rows<F4>",
    "&Rows<[u32; 4]>",
    "Rows<f32>",
    "T",
    "&[T]",
    "&mut [T]",
    "[T; N]",
    "crate::F4",
    "&[F4]",
    "String",
    "&str",
    "()",
    "&'a [f32]",
];

const ARG_ATTRS: &[&str] = &[
    "",
    "",
    "#[mapped]",
    "#[pinned_async]",
    "#[pinned_async(out)]",
    "#[pinned_async(in)]",
    "#[auto]",
    "#[mapp]",
    "#[pinned_async(sideways)]",
    "#[mapped(1)]",
    "#[mapped] #[auto]",
    "#[doc = \"x\"]",
    "#[cfg(test)]",
    "#[pinned_async = 1]",
];

const PATTERNS: &[&str] = &[
    "x", "y", "out", "mut x", "_", "(a, b)", "ref x", "grid", "on", "self", "&x", "a",
];

const KERNEL_OPTIONS: &[&str] = &[
    "",
    "elementwise",
    "block = (16, 16)",
    "block = 256",
    "block = (0, 1)",
    "block = (1024, 2)",
    "block = (1, 2, 3, 4)",
    "block = 4294967296",
    "fp_contract = false",
    "fp_contract = 3",
    "instances(T = f32, f64)",
    "instances(T = f32, N = 4, 8)",
    "instances(T = , N = 4)",
    "instances()",
    "crate = ::berth",
    "crate = 1",
    "elementwise, elementwise",
    "elementwise, block = 256, fp_contract = false",
    "same_len(x, y)",
    "same_len(x, x)",
    "same_len(x, out), same_len(y, out)",
    "same_len(x)",
    "same_len",
    "same_len(1, 2)",
    "elementwise, same_len(x, y)",
];

const BODIES: &[&str] = &[
    "{}",
    "{ let i = thread::global_x(); if i < y.len() { y[i] = x[i]; } }",
    "{ unsafe { sync_threads() }; }",
    "{ return; }",
    "{ loop {} }",
];

/// A kernel: options and item, from parts that are valid, nearly valid, or not.
fn kernel() -> impl Strategy<Value = (String, String)> {
    let arg = (select(ARG_ATTRS), select(PATTERNS), select(TYPES))
        .prop_map(|(a, p, t)| format!("{a} {p}: {t}"));
    (
        prop_oneof![4 => select(KERNEL_OPTIONS).prop_map(str::to_owned), 1 => soups()],
        select(&["", "pub", "pub(crate)"][..]),
        select(&["", "unsafe", "const", "async", "extern \"C\""][..]),
        select(&["k", "saxpy", "self", "r#fn", "grid"][..]),
        select(
            &[
                "",
                "<T>",
                "<T: Copy>",
                "<'a>",
                "<const N: usize>",
                "<T, const N: usize>",
            ][..],
        ),
        prop::collection::vec(arg, 0..5),
        select(&["", ", ...", ","][..]),
        select(&["", "-> u32", "-> ()", "-> !"][..]),
        select(BODIES),
        select(&["", "#[inline]", "/// Docs.", "#[gpu_kernel]"][..]),
    )
        .prop_map(
            |(opts, vis, qual, name, generics, args, tail, ret, body, attr)| {
                (
                    opts,
                    format!(
                        "{attr} {vis} {qual} fn {name}{generics}({}{tail}) {ret} {body}",
                        args.join(", ")
                    ),
                )
            },
        )
}

const STRUCT_ATTRS: &[&str] = &[
    "",
    "#[repr(C)]",
    "#[repr(C)]",
    "#[repr(transparent)]",
    "#[repr(packed)]",
    "#[repr(C, packed)]",
    "#[repr(C, align(16))]",
    "#[repr(align(8))]",
    "#[repr(u8)]",
    "#[repr]",
    "#[repr = \"C\"]",
    "#[repr(C(1))]",
    "#[repr(align)]",
    "#[repr(align(x))]",
    "#[repr(C)] #[repr(packed(2))]",
    "#[derive(Clone)]",
];

/// A struct (or enum, or union) for `#[derive(DeviceCopy)]`.
fn record() -> impl Strategy<Value = String> {
    let fields = prop::collection::vec(select(TYPES), 0..5);
    (
        select(STRUCT_ATTRS),
        select(&["struct", "enum", "union"][..]),
        select(&["", "<T>", "<T: Copy>", "<'a>", "<const N: usize>"][..]),
        select(&["named", "tuple", "unit"][..]),
        fields,
    )
        .prop_map(|(attr, kw, generics, shape, fields)| {
            let body = match shape {
                "named" => {
                    let f: Vec<String> = fields
                        .iter()
                        .enumerate()
                        .map(|(i, t)| format!("pub f{i}: {t}"))
                        .collect();
                    format!("{{ {} }}", f.join(", "))
                }
                "tuple" => format!("({});", fields.join(", ")),
                _ => ";".to_owned(),
            };
            format!("{attr} pub {kw} S{generics} {body}")
        })
}

const LOOPS: &[&str] = &[
    "for i in 0..4 { acc[i] += a * b[i]; }",
    "for i in 0..=7 {}",
    "for k in (1..8).step_by(2) { odd += k; }",
    "for i in (0..16).step_by(0) {}",
    "for i in 8..0 {}",
    "for i in 0..100000 {}",
    "for i in 0u8..255u8 {}",
    "for i in 0u32..4u64 {}",
    "for i in -1..3 {}",
    "for i in 0..N {}",
    "for i in .. {}",
    "for i in 0.. {}",
    "'a: for i in 0..2 { break 'a; }",
    "for i in 0..2 { break; }",
    "for i in 0..2 { continue; }",
    "for (a, b) in 0..2 {}",
    "for _ in 0..3 {}",
    "while true {}",
    "for i in 18446744073709551614..=18446744073709551615 {}",
    "for i in 18446744073709551615..=18446744073709551615 {}",
    "for i in (0..18446744073709551615).step_by(18446744073709551615) {}",
    "for i in (0..8).step_by(3).rev() {}",
    "for i in 0..4 { for j in 0..4 { break; } }",
    "for i in 0x10..0x14 {}",
    "for i in 1e3..2 {}",
];

// ---- the checks -------------------------------------------------------------------------

/// Every `compile_error!` in `tokens`: its message and the span it is reported at.
fn compile_errors(tokens: TokenStream, out: &mut Vec<(String, Span)>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tt) in tokens.iter().enumerate() {
        match tt {
            TokenTree::Ident(id) if id == "compile_error" => {
                if let Some(TokenTree::Group(g)) = tokens.get(i + 2) {
                    let msg = syn::parse2::<syn::LitStr>(g.stream())
                        .map_or_else(|_| g.to_string(), |l| l.value());
                    out.push((msg, id.span()));
                }
            }
            TokenTree::Group(g) => compile_errors(g.stream(), out),
            _ => {}
        }
    }
}

fn is_call_site(span: Span) -> bool {
    format!("{span:?}") == format!("{:?}", Span::call_site())
}

/// syn's messages for input that ends too early: reported at the end of the input, which is
/// the call site when nothing follows.
fn is_end_of_input(msg: &str) -> bool {
    msg.contains("unexpected end of input") || msg.starts_with("expected ")
}

/// Expand with `f`, catching a panic as a test failure that names the input.
fn expand_or_fail(
    what: &str,
    input: &str,
    f: impl FnOnce() -> TokenStream,
) -> Result<TokenStream, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked ({msg}) on: {input}"))
    })
}

/// Every error of `out` is at a token of the input, unless there is none (`empty`, which only
/// `unroll!()` can be) or the input ran out.
fn check_errors(
    what: &str,
    input: &str,
    empty: bool,
    out: &TokenStream,
) -> Result<(), TestCaseError> {
    let mut errors = Vec::new();
    compile_errors(out.clone(), &mut errors);
    for (msg, span) in errors {
        prop_assert!(
            !is_call_site(span) || empty || is_end_of_input(&msg),
            "{what}: the error `{msg}` is reported at the call site, not at a token, for: {input}"
        );
    }
    Ok(())
}

fn check_kernel(opts: &str, item: &str) -> Result<(), TestCaseError> {
    let (Ok(args), Ok(tokens)) = (TokenStream::from_str(opts), TokenStream::from_str(item)) else {
        return Err(TestCaseError::reject("does not lex"));
    };
    if tokens.is_empty() {
        // Edits can delete every token; rustc never gives an attribute an empty item.
        return Err(TestCaseError::reject(
            "an attribute always applies to an item",
        ));
    }
    let input = format!("#[gpu_kernel({opts})] {item}");
    let out = expand_or_fail("#[gpu_kernel]", &input, || {
        crate::expand::gpu_kernel(
            args,
            tokens.clone(),
            crate::expand::Embedded::ptx(Some("/p/k.ptx")),
        )
    })?;
    check_errors("#[gpu_kernel]", &input, false, &out)?;
    // A function in, valid Rust out: the errors and the item, so rustc adds no errors of its
    // own about the macro's output.
    if syn::parse2::<syn::ItemFn>(tokens).is_ok() {
        let file = syn::parse2::<syn::File>(out.clone());
        prop_assert!(
            file.is_ok(),
            "#[gpu_kernel] wrote invalid Rust ({:?}) for: {input}\n{out}",
            file.err()
        );
    }
    Ok(())
}

fn check_derive(item: &str) -> Result<(), TestCaseError> {
    let Ok(tokens) = TokenStream::from_str(item) else {
        return Err(TestCaseError::reject("does not lex"));
    };
    if tokens.is_empty() {
        // Edits can delete every token; rustc never derives for an empty item.
        return Err(TestCaseError::reject("a derive always applies to an item"));
    }
    let out = expand_or_fail("#[derive(DeviceCopy)]", item, || {
        crate::derive::device_copy(tokens)
    })?;
    check_errors("#[derive(DeviceCopy)]", item, false, &out)
}

fn check_unroll(input: &str) -> Result<(), TestCaseError> {
    let Ok(tokens) = TokenStream::from_str(input) else {
        return Err(TestCaseError::reject("does not lex"));
    };
    let empty = tokens.is_empty();
    let out = expand_or_fail("unroll!", input, || crate::unroll::unroll(tokens))?;
    check_errors("unroll!", input, empty, &out)?;
    let block = syn::parse2::<syn::Block>(out.clone());
    let errors_only = out.to_string().contains("compile_error");
    prop_assert!(
        block.is_ok() || errors_only,
        "unroll! wrote neither a block nor errors for: {input}\n{out}"
    );
    Ok(())
}

#[test]
fn gpu_kernel_on_token_soup() {
    check_property(
        "gpu_kernel_on_token_soup",
        (soups(), item_soups()),
        |(opts, item)| check_kernel(&opts, &item),
    );
}

#[test]
fn gpu_kernel_on_edited_kernels() {
    check_property(
        "gpu_kernel_on_edited_kernels",
        (kernel(), edits()),
        |((opts, item), edits)| check_kernel(&opts, &mutate(&item, &edits)),
    );
}

#[test]
fn device_copy_on_token_soup() {
    check_property("device_copy_on_token_soup", item_soups(), |item| {
        check_derive(&item)
    });
}

#[test]
fn device_copy_on_edited_structs() {
    check_property(
        "device_copy_on_edited_structs",
        (record(), edits()),
        |(item, edits)| check_derive(&mutate(&item, &edits)),
    );
}

#[test]
fn unroll_on_token_soup() {
    check_property("unroll_on_token_soup", soups(), |input| {
        check_unroll(&input)
    });
}

#[test]
fn unroll_on_edited_loops() {
    check_property(
        "unroll_on_edited_loops",
        (select(LOOPS), edits()),
        |(input, edits)| check_unroll(&mutate(input, &edits)),
    );
}

/// Inputs the properties once failed on, checked on every run whatever the seed.
#[test]
fn found_cases() {
    let kernels = [
        // An option without its value, on a valid kernel.
        ("block", "fn k() {}"),
        // Instances of a kernel whose name is a raw identifier.
        ("instances(T = f32, f64)", "fn r#fn<T>() {}"),
        // Options that parse, on an item that is not a function.
        ("elementwise", "x"),
    ];
    for (opts, item) in kernels {
        check_kernel(opts, item).unwrap_or_else(|e| panic!("{e}"));
    }
    check_unroll("const").unwrap_or_else(|e| panic!("{e}"));
}

/// Every run draws the same cases and writes no failure file into the source tree.
#[test]
fn the_cases_are_fixed_and_nothing_is_persisted() {
    let config = config();
    assert!(matches!(config.rng_seed, RngSeed::Fixed(_)));
    assert!(config.failure_persistence.is_none());
    let draw = || {
        let mut runner = TestRunner::new(config.clone());
        (0..50)
            .map(|_| {
                item_soups()
                    .new_tree(&mut runner)
                    .expect("a case")
                    .current()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(), draw());
}

/// The item given to `#[gpu_kernel]` or `#[derive(DeviceCopy)]` is never empty.
#[test]
fn an_attribute_is_never_given_an_empty_item() {
    let mut runner = TestRunner::new(config());
    for _ in 0..2000 {
        let item = item_soups()
            .new_tree(&mut runner)
            .expect("a case")
            .current();
        let tokens = TokenStream::from_str(&item);
        assert!(tokens.is_err() || !tokens.unwrap().is_empty(), "{item:?}");
    }
}

#[test]
fn call_sites_and_tokens_are_told_apart() {
    let ts = TokenStream::from_str("pub fn k() {}").unwrap();
    let first = ts.into_iter().next().unwrap().span();
    assert!(!is_call_site(first));
    assert!(is_call_site(Span::call_site()));
}

/// The first error of `out`: its message and span.
fn first_error(out: TokenStream) -> (String, Span) {
    let mut errors = Vec::new();
    compile_errors(out, &mut errors);
    errors.into_iter().next().expect("an error")
}

#[test]
fn an_item_syn_does_not_know_is_pointed_at() {
    let item = TokenStream::from_str("struct fn k() {}").unwrap();
    let out =
        crate::expand::gpu_kernel(TokenStream::new(), item, crate::expand::Embedded::ptx(None));
    let (msg, span) = first_error(out);
    assert!(msg.contains("applies to a free function"), "{msg}");
    assert!(!is_call_site(span), "{msg}");
}

#[test]
fn an_unroll_input_that_ends_early_is_pointed_at() {
    let out = crate::unroll::unroll(TokenStream::from_str("while { }").unwrap());
    let (msg, span) = first_error(out);
    assert!(msg.starts_with("unroll! takes one `for` loop"), "{msg}");
    assert!(!is_call_site(span), "{msg}");
}

#[test]
fn an_option_missing_its_value_is_reported_at_its_name() {
    for opts in [
        "block",
        "block =",
        "fp_contract",
        "fp_contract =",
        "crate",
        "crate = ::",
        "instances",
    ] {
        let item = TokenStream::from_str("pub fn k() {}").unwrap();
        let out = crate::expand::gpu_kernel(
            TokenStream::from_str(opts).unwrap(),
            item,
            crate::expand::Embedded::ptx(None),
        );
        let (msg, span) = first_error(out);
        assert!(!is_call_site(span), "#[gpu_kernel({opts})]: {msg}");
    }
    let (msg, span) = first_error(crate::unroll::unroll(
        TokenStream::from_str("const").unwrap(),
    ));
    assert!(!is_call_site(span), "unroll!(const): {msg}");
}
