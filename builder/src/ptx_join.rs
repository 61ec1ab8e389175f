//! The kernels' own PTX modules joined into the crate's module: one header, then each
//! module's statements in order, without the ones an earlier module already gave.
//!
//! Each kernel's module ([`crate::ir::reach::kernel_modules`]) is compiled apart, so the
//! functions and variables kernels share (the panic paths, their messages, the panic record)
//! come once per module. A statement equal to one already joined, naming the same things, is
//! that one and is dropped (read without its comments and with its labels and local frame
//! unnumbered: LLVM numbers them by the function's place in its module); a module-local symbol (not `.visible`, `.extern` or `.weak`) that
//! an earlier module defines otherwise — LLVM numbers a module's anonymous constants from 0 —
//! is renamed in its module (`name$N`), with every use of it there.

use berth_abi::ptx::{self, ReadError, Statement};
use std::collections::{HashMap, HashSet};

/// Why the kernels' modules cannot be joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// A module-scope statement of a form this does not know.
    #[error("a PTX statement not understood: `{0}`")]
    Unknown(String),
    /// A brace, parenthesis or comment is never closed.
    #[error("unbalanced PTX")]
    Unbalanced,
    /// The modules' headers (`.version`, `.target`, `.address_size`) differ.
    #[error("the kernels' PTX modules have different headers: `{0}` and `{1}`")]
    Header(String, String),
    /// Two modules define a symbol visible outside the module differently.
    #[error("two kernels' PTX modules define `{0}` differently")]
    Visible(String),
}

impl From<ReadError<'_>> for JoinError {
    fn from(e: ReadError<'_>) -> Self {
        match e {
            ReadError::Unknown(s) => JoinError::Unknown(s.to_owned()),
            ReadError::Unbalanced => JoinError::Unbalanced,
        }
    }
}

/// The crate's module made of the kernels' `modules` (in their order).
pub fn join(modules: &[String]) -> Result<String, JoinError> {
    let mut out = String::new();
    let mut header: Option<(Vec<&str>, &str)> = None;
    // What each symbol's joined definition says, in the names of the module that gave it.
    let mut defined: HashMap<String, String> = HashMap::new();
    let mut declared: HashSet<String> = HashSet::new();
    let mut fresh = 0usize;
    for module in modules {
        let (comment, statements) = parse(module)?;
        let head: Vec<&str> = statements
            .iter()
            .filter(|s| s.name.is_empty())
            .map(|s| s.text)
            .collect();
        match &header {
            None => {
                out.push_str(comment);
                for h in &head {
                    out.push_str(h);
                    out.push('\n');
                }
                header = Some((head, comment));
            }
            Some((first, _)) if *first != head => {
                return Err(JoinError::Header(first.join(" "), head.join(" ")));
            }
            Some(_) => {}
        }
        let body: Vec<&Statement> = statements.iter().filter(|s| !s.name.is_empty()).collect();
        let locals: HashSet<&str> = body
            .iter()
            .filter(|s| !s.visible && s.defines)
            .map(|s| s.name)
            .collect();
        // The local definitions that cannot be the joined ones: another text, or naming a
        // local that cannot.
        let mut renamed: HashSet<&str> = body
            .iter()
            .filter(|s| !s.visible && s.defines)
            .filter(|s| defined.get(s.name).is_some_and(|t| *t != canonical(s.text)))
            .map(|s| s.name)
            .collect();
        loop {
            let more: Vec<&str> = body
                .iter()
                .filter(|s| !s.visible && s.defines && defined.contains_key(s.name))
                .filter(|s| !renamed.contains(s.name))
                .filter(|s| {
                    ptx::symbol_spans(s.text, true)
                        .any(|(_, r)| r != s.name && locals.contains(r) && renamed.contains(r))
                })
                .map(|s| s.name)
                .collect();
            if more.is_empty() {
                break;
            }
            renamed.extend(more);
        }
        let names: HashMap<&str, String> = renamed
            .iter()
            .map(|&n| {
                let mut new = format!("{n}${fresh}");
                while defined.contains_key(&new) {
                    fresh += 1;
                    new = format!("{n}${fresh}");
                }
                fresh += 1;
                (n, new)
            })
            .collect();
        for s in body {
            let text = if names.is_empty() {
                s.text.to_owned()
            } else {
                rename(s.text, &names)
            };
            let name = names.get(s.name).map_or(s.name, String::as_str);
            let same = canonical(&text);
            if s.defines {
                match defined.get(name) {
                    Some(t) if *t == same => continue,
                    Some(_) if s.visible => return Err(JoinError::Visible(name.to_owned())),
                    _ => {}
                }
                defined.insert(name.to_owned(), same);
            } else if !declared.insert(same) {
                continue;
            }
            out.push('\n');
            out.push_str(&text);
            out.push('\n');
        }
    }
    Ok(out)
}

/// A statement as [`join`] compares it: without its comments and blank lines, and with the numbers LLVM gives
/// its labels (`$L__BB3_1`) and local frame (`__local_depot3`) by the function's place in
/// its module left out; both are local to the function's body.
fn canonical(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.find("//").map_or(line, |at| &line[..at]).trim_end();
        if line.is_empty() {
            continue;
        }
        let mut rest = line;
        while let Some(at) = ["$L__", "__local_depot"]
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, p.len())))
            .min()
        {
            let (at, len) = at;
            let after = &rest[at + len..];
            let alpha = after.bytes().take_while(u8::is_ascii_alphabetic).count();
            let digits = after[alpha..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            out.push_str(&rest[..at + len + alpha]);
            rest = &after[alpha + digits..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// The module's `.entry` statements as [`join`] compares them, by name.
#[cfg(test)]
pub(crate) fn entries(ptx: &str) -> Vec<(String, String)> {
    let (_, statements) = parse(ptx).expect("PTX");
    statements
        .iter()
        .filter(|s| s.text.contains(".entry"))
        .map(|s| (s.name.to_owned(), canonical(s.text)))
        .collect()
}

/// The comment that opens `ptx` (up to its first statement), and its statements.
fn parse(ptx: &str) -> Result<(&str, Vec<Statement<'_>>), JoinError> {
    let statements = ptx::statements(ptx).collect::<Result<Vec<_>, _>>()?;
    let comment = statements.first().map_or(ptx, |s| &ptx[..s.start]);
    Ok((comment, statements))
}

/// `text` with the symbols `names` maps renamed.
fn rename(text: &str, names: &HashMap<&str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    // Comments are read too: a name in one is renamed with the others.
    for (at, sym) in ptx::symbol_spans(text, true) {
        if let Some(new) = names.get(sym) {
            out.push_str(&text[last..at]);
            out.push_str(new);
            last = at + sym.len();
        }
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 7.8\n.target sm_90\n.address_size 64\n\n";
    const FAIL: &str = ".func fail()\n.noreturn\n{\n\ttrap;\n}";
    const RECORD: &str = ".visible .global .align 8 .b8 berth_panic[64];";

    fn module(body: &str) -> String {
        format!("{HEAD}\t// .globl\tk\n.func fail()\n.noreturn;\n{RECORD}\n{body}\n{FAIL}\n")
    }

    #[test]
    fn what_two_modules_share_comes_once() {
        let a = module(".visible .entry a()\n{\n\tcall.uni fail, ();\n}");
        let b = module(".visible .entry b()\n{\n\tcall.uni fail, ();\n}");
        let joined = join(&[a, b]).unwrap();
        assert!(joined.starts_with(HEAD), "{joined}");
        assert_eq!(joined.matches(".version").count(), 1, "{joined}");
        assert_eq!(joined.matches(FAIL).count(), 1, "{joined}");
        assert_eq!(joined.matches(RECORD).count(), 1, "{joined}");
        assert_eq!(
            joined.matches(".func fail()\n.noreturn;").count(),
            1,
            "{joined}"
        );
        let (a_at, b_at) = (
            joined.find(".entry a").unwrap(),
            joined.find(".entry b").unwrap(),
        );
        assert!(a_at < b_at && joined.find(FAIL).unwrap() > a_at);
    }

    #[test]
    fn a_local_defined_otherwise_is_renamed_with_what_names_it() {
        let a = format!(
            "{HEAD}.global .align 1 .b8 anon_0[2] = {{97, 0}};\n\
             .global .align 8 .u64 anon_1[1] = {{generic(anon_0)}};\n\
             .visible .entry a()\n{{\n\tmov.u64 %rd1, anon_1;\n}}\n"
        );
        let b = format!(
            "{HEAD}.global .align 1 .b8 anon_0[2] = {{98, 0}};\n\
             .global .align 8 .u64 anon_1[1] = {{generic(anon_0)}};\n\
             .visible .entry b()\n{{\n\tmov.u64 %rd1, anon_1;\n}}\n"
        );
        let joined = join(&[a.clone(), b]).unwrap();
        assert!(
            joined.contains("anon_0$0[2] = {98, 0};") || joined.contains("anon_0$1[2] = {98, 0};"),
            "{joined}"
        );
        let b_entry = &joined[joined.find(".entry b").unwrap()..];
        assert!(b_entry.contains("mov.u64 %rd1, anon_1$"), "{joined}");
        assert!(joined.contains("{generic(anon_0$"), "{joined}");
        // The same module twice: everything once.
        let twice = join(&[a.clone(), a.clone()]).unwrap();
        assert_eq!(twice, join(&[a]).unwrap());
    }

    #[test]
    fn functions_alike_but_for_their_labels_and_comments_are_one() {
        let f = |n: u32, comment: &str| {
            format!(
                ".func fail(){comment}\n{{\n\t.local .align 8 .b8 __local_depot{n}[8];\n$L__BB{n}_1:\n\tbra.uni $L__BB{n}_1;\n}}"
            )
        };
        let a = format!(
            "{HEAD}{}\n.visible .entry a()\n{{\n\tcall.uni fail, ();\n}}\n",
            f(0, "")
        );
        let b = format!(
            "{HEAD}.visible .entry b()\n{{\n\tcall.uni fail, ();\n}}\n{}\n",
            f(1, "\n// -- Begin function fail")
        );
        let joined = join(&[a, b]).unwrap();
        assert_eq!(joined.matches(".func fail()").count(), 1, "{joined}");
        assert!(!joined.contains("fail$"), "{joined}");
        // Another body is another function.
        let c = format!(
            "{HEAD}.func fail()\n{{\n\ttrap;\n}}\n.visible .entry c()\n{{\n\tcall.uni fail, ();\n}}\n"
        );
        let joined = join(&[joined, c]).unwrap();
        assert!(joined.contains("call.uni fail$0, ();"), "{joined}");
    }

    #[test]
    fn modules_that_disagree_are_errors() {
        let a = module(".visible .entry a()\n{\n\tret;\n}");
        let other = a.replace("sm_90", "sm_80");
        assert!(matches!(
            join(&[a.clone(), other]),
            Err(JoinError::Header(..))
        ));
        let record = a.replace("[64]", "[32]");
        assert_eq!(
            join(&[a, record]),
            Err(JoinError::Visible("berth_panic".into()))
        );
    }
}
