//! `unroll!`: a `for` loop over a literal range, written out once per iteration.
//!
//! LLVM decides alone whether to unroll a loop, and rustc offers no way to ask. A loop left
//! rolled keeps a small array it indexes (a register-blocked accumulator) in local memory;
//! written out, every index is a constant and the array lives in registers. So the macro does
//! the unrolling itself: `unroll! { for i in 0..4 { body } }` becomes four blocks, each
//! binding `i` to its value.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

/// Most iterations one `unroll!` writes out (a typo like `0..100000` would otherwise take
/// the compiler down).
const MAX_ITERATIONS: u64 = 1024;

const FORM: &str = "unroll! takes one `for` loop over a range of integer literals: `unroll! { for i in 0..8 { .. } }`";

/// Expand `unroll! { for PAT in A..B { BODY } }` (also `A..=B`, and `.step_by(S)` on a
/// parenthesised range).
pub fn unroll(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(t) => t,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let span = input
        .clone()
        .into_iter()
        .next()
        .map_or(Span::call_site(), |t| t.span());
    // An input that ends too early has no token to point at (syn would say the call site):
    // point at its first.
    let parser = |input: syn::parse::ParseStream| {
        input
            .parse::<syn::Expr>()
            .map_err(|e| syn::Error::new(if input.is_empty() { span } else { e.span() }, FORM))
    };
    let expr =
        syn::parse::Parser::parse2(parser, input).map_err(|e| syn::Error::new(e.span(), FORM))?;
    let syn::Expr::ForLoop(f) = expr else {
        return Err(syn::Error::new(span, FORM));
    };
    if let Some(label) = &f.label {
        return Err(syn::Error::new_spanned(
            label,
            "an unrolled loop has no label: nothing can `break` or `continue` it",
        ));
    }
    let (range, step) = range_and_step(&f.expr)?;
    let (start, end, inclusive, ty) = bounds(range)?;
    let end = if inclusive {
        end.checked_add(1)
    } else {
        Some(end)
    }
    .ok_or_else(|| syn::Error::new_spanned(range, "the range's end is too large"))?;
    let count = end.saturating_sub(start).div_ceil(step);
    if count > MAX_ITERATIONS {
        return Err(syn::Error::new_spanned(
            range,
            format!(
                "unroll! writes out at most {MAX_ITERATIONS} iterations; this range has {count}"
            ),
        ));
    }
    if let Some(tok) = find_break_or_continue(f.body.stmts.iter().map(|s| s.to_token_stream())) {
        return Err(syn::Error::new(
            tok,
            "`break` and `continue` cannot leave an unrolled loop: every iteration is written out; \
             use an `if` around the rest of the body",
        ));
    }
    let pat = &f.pat;
    let body = &f.body;
    // The values are written at the range, but as the macro's own tokens: lints that read
    // the source text under a literal (clippy's `zero_prefixed_literal` sees the `0` of `0..8`
    // under a generated `10`) leave them alone.
    let at = Span::mixed_site().located_at(range.span());
    let iterations = (0..count).map(|k| {
        let v = start + k * step;
        let lit = match &ty {
            Some(suffix) => syn::LitInt::new(&format!("{v}{suffix}"), at),
            None => syn::LitInt::new(&v.to_string(), at),
        };
        quote_spanned! {range.span()=>
            {
                #[allow(unused_variables, clippy::identity_op, clippy::erasing_op)]
                let #pat = #lit;
                #body
            }
        }
    });
    Ok(quote!({ #(#iterations)* }))
}

/// The range and the step of `A..B`, `(A..B)`, or `(A..B).step_by(S)`.
fn range_and_step(e: &syn::Expr) -> syn::Result<(&syn::ExprRange, u64)> {
    match e {
        syn::Expr::Range(r) => Ok((r, 1)),
        syn::Expr::Paren(p) => range_and_step(&p.expr),
        syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            let (r, _) = range_and_step(&m.receiver)?;
            let step = int_literal(&m.args[0])?.0;
            if step == 0 {
                return Err(syn::Error::new_spanned(&m.args[0], "a step is at least 1"));
            }
            Ok((r, step))
        }
        other => Err(syn::Error::new_spanned(
            other,
            "unroll! needs the trip count when it expands: loop over a range of integer \
             literals, like `0..8` or `(0..16).step_by(4)`",
        )),
    }
}

/// `(start, end, inclusive, literal suffix)` of a literal range.
fn bounds(r: &syn::ExprRange) -> syn::Result<(u64, u64, bool, Option<String>)> {
    let (Some(a), Some(b)) = (&r.start, &r.end) else {
        return Err(syn::Error::new_spanned(
            r,
            "an unrolled range has both ends: `0..8`",
        ));
    };
    let (a, sa) = int_literal(a)?;
    let (b, sb) = int_literal(b)?;
    let suffix = match (sa, sb) {
        (Some(x), Some(y)) if x != y => {
            return Err(syn::Error::new_spanned(
                r,
                "the range's ends have different types",
            ));
        }
        (x, y) => x.or(y),
    };
    Ok((
        a,
        b,
        matches!(r.limits, syn::RangeLimits::Closed(_)),
        suffix,
    ))
}

fn int_literal(e: &syn::Expr) -> syn::Result<(u64, Option<String>)> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => {
            let v = i.base10_parse::<u64>()?;
            let suffix = (!i.suffix().is_empty()).then(|| i.suffix().to_owned());
            Ok((v, suffix))
        }
        syn::Expr::Paren(p) => int_literal(&p.expr),
        other => Err(syn::Error::new_spanned(
            other,
            "unroll! needs integer literals here (the number of iterations must be known when \
             the macro expands); for a constant, write its value",
        )),
    }
}

/// A `break` or `continue` that would leave the loop itself: not inside a nested loop or
/// closure, whose own `break`/`continue` are fine.
fn find_break_or_continue(tokens: impl Iterator<Item = TokenStream>) -> Option<Span> {
    for ts in tokens {
        let mut skip_next_group = false;
        for tt in ts {
            match &tt {
                TokenTree::Ident(i) if i == "break" || i == "continue" => {
                    // A labelled `break 'outer` still leaves this loop.
                    return Some(i.span());
                }
                TokenTree::Ident(i) if i == "for" || i == "while" || i == "loop" => {
                    skip_next_group = true;
                }
                TokenTree::Punct(p) if p.as_char() == '|' => {
                    // A closure's body is its own scope for `break`/`continue` errors anyway.
                    skip_next_group = true;
                }
                TokenTree::Group(g) => {
                    if skip_next_group && g.delimiter() == proc_macro2::Delimiter::Brace {
                        skip_next_group = false;
                        continue;
                    }
                    if let Some(s) = find_break_or_continue(std::iter::once(g.stream())) {
                        return Some(s);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(t: TokenStream) -> String {
        let f: syn::File = syn::parse2(quote!(fn f() { #t })).unwrap();
        prettyplease::unparse(&f)
    }

    #[test]
    fn writes_out_each_iteration() {
        let out = unroll(quote!(for i in 0..3 {
            acc[i] += a * b[i];
        }));
        insta::assert_snapshot!(pretty(out));
    }

    #[test]
    fn steps_inclusive_ranges_and_suffixes() {
        let out = pretty(unroll(quote!(for k in (0u32..=8).step_by(4) {
            f(k);
        })));
        assert!(out.contains("let k = 0u32;") && out.contains("let k = 4u32;"));
        assert!(
            out.contains("let k = 8u32;") && !out.contains("12u32"),
            "{out}"
        );
    }

    #[test]
    fn nested_loops_may_break() {
        let out = pretty(unroll(quote!(for i in 0..2 {
            for j in 0..n {
                if j > i {
                    break;
                }
            }
        })));
        assert_eq!(out.matches("let i =").count(), 2);
    }

    #[test]
    fn misuse_is_a_spanned_error() {
        for (input, msg) in [
            (quote!(let x = 1;), "unroll! takes one `for` loop"),
            (quote!(for i in 0..n {}), "needs integer literals"),
            (quote!(for i in v.iter() {}), "needs the trip count"),
            (quote!(for i in 0.. {}), "has both ends"),
            (
                quote!(for i in 0..4 {
                    if i == 2 {
                        continue;
                    }
                }),
                "`break` and `continue`",
            ),
            (quote!(for i in 0..5000 {}), "at most 1024"),
            (quote!('a: for i in 0..4 {}), "no label"),
        ] {
            let out = unroll(input).to_string();
            assert!(out.contains("compile_error") && out.contains(msg), "{out}");
        }
    }
}
