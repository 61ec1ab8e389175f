//! Contraction: `a * b + c` on floats fuses into one FMA in nvcc (`-fmad=true`); rustc marks
//! no float operation as contractible, and the NVPTX backend then keeps `mul.rn` + `add.rn`.
//! Every `fmul`/`fadd`/`fsub` gets the `contract` flag, except in kernels that opted out
//! ([`berth_abi::KernelAttrs::exact_fp`]) and when the crate turned it off. A float operation
//! in a form this does not know fails the build naming its function, rather than leave it
//! unfused.

use super::module::Module;
use super::{RewriteError, find_word, not_applied};

/// The float operations that contract.
const OPS: [&str; 3] = ["fmul", "fadd", "fsub"];

/// The fast-math flags an instruction may carry between its opcode and its type.
const FLAGS: [&str; 8] = [
    "fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc",
];

/// Mark the float operations of every function but those in `exact` contractible: how many.
pub(super) fn apply(m: &mut Module, exact: &[&str]) -> Result<usize, RewriteError> {
    let mut contracted = 0;
    for f in m
        .functions_mut()
        .filter(|f| !exact.contains(&f.name.as_str()))
    {
        for line in &mut f.body {
            let (l, n) = contract(line).ok_or_else(|| not_applied(&f.name, "contraction", line))?;
            contracted += n;
            *line = l;
        }
    }
    Ok(contracted)
}

/// `%x = fmul float %a, %b` → `%x = fmul contract float %a, %b` (also `fadd`, `fsub`, vectors,
/// instructions that already carry other flags), and how many it marked (0 or 1). `None` for
/// a line that names a float operation elsewhere than as an instruction's opcode.
fn contract(line: &str) -> Option<(String, usize)> {
    if !OPS
        .iter()
        .any(|op| find_word(line.trim_start(), op).is_some())
    {
        return Some((line.to_owned(), 0));
    }
    let (head, rest) = line.split_once(" = ")?;
    let (op, after) = rest.split_once(' ')?;
    if !OPS.contains(&op) {
        return None;
    }
    let flags = after
        .split(' ')
        .take_while(|w| FLAGS.contains(w))
        .collect::<Vec<_>>();
    if flags.contains(&"contract") || flags.contains(&"fast") {
        return Some((line.to_owned(), 0));
    }
    Some((format!("{head} = {op} contract {after}"), 1))
}

#[cfg(test)]
mod tests {
    use super::contract;

    #[test]
    fn every_float_operation_is_marked_once() {
        for (line, want, n) in [
            (
                "  %4 = fmul float %3, %3",
                "  %4 = fmul contract float %3, %3",
                1,
            ),
            (
                "  %b = fsub nnan <2 x float> %a, %a",
                "  %b = fsub contract nnan <2 x float> %a, %a",
                1,
            ),
            (
                "  %c = fadd fast float %a, %b",
                "  %c = fadd fast float %a, %b",
                0,
            ),
            (
                "  %c = fadd nsz contract float %a, %b",
                "  %c = fadd nsz contract float %a, %b",
                0,
            ),
            ("  %d = add i32 %a, %b", "  %d = add i32 %a, %b", 0),
            (
                "  call void @fmuladd_helper()",
                "  call void @fmuladd_helper()",
                0,
            ),
        ] {
            assert_eq!(contract(line), Some((want.to_owned(), n)), "{line}");
        }
        // An operation that is not the instruction's opcode is not one this can mark.
        assert_eq!(
            contract("  store float fmul (float 1.0, float 2.0), ptr %p"),
            None
        );
    }
}
