//! Tests of the runtime's layering (`docs/runtime-layers.md`), read from its source files:
//!
//! - the modules name each other in one direction only — no cycle of paths;
//! - only the driver backend (`backend/driver*.rs`) and the fault bookkeeping it uses
//!   (`fault.rs`) call the CUDA driver.
//!
//! A file names a module through a path: `crate::a::b::Item`, `super::x::Item`, or, in its
//! own `use` declarations and code, `child::Item` for a child module. A path counts as the
//! deepest module it reaches, so `crate::launch::kernel::Kernel` names `launch::kernel` and
//! `crate::launch::Grid` names `launch` (which re-exports it). The crate root is the facade:
//! a path through it (`crate::Gpu`) fails the test, which asks for the defining module.
//! Comments, string literals and `#[cfg(test)]` items are skipped: the layering is that of the
//! shipped code. Method calls are not paths and are not seen: the runtime calls across modules
//! through free functions or methods of the type's own module, so that its paths tell.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path below the crate root (`["launch", "kernel"]`); empty for the root.
type Module = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
}

/// The tokens of `src` with their line numbers; comments, literals and whitespace dropped.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let s: Vec<char> = src.chars().collect();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    while i < s.len() {
        let c = s[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i >= s.len() {
                    break;
                } else {
                    line += usize::from(s[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            i += if c == '"' { 1 } else { 2 };
            while i < s.len() && s[i] != '"' {
                line += usize::from(s[i] == '\n');
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if let Some(hashes) = raw_string(&s, i) {
            // A raw string: r"…", r#"…"#, br"…".
            i += 1 + usize::from(c == 'b') + hashes + 1;
            loop {
                if i >= s.len() {
                    break;
                }
                if s[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                line += usize::from(s[i] == '\n');
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(s[start..i].iter().collect()), line));
        } else if c.is_ascii_digit() {
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_' || s[i] == '.') {
                if s[i] == '.' && !at(i + 1).is_ascii_digit() {
                    break;
                }
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// The number of `#`s of a raw string starting at `s[i]` (`r"`, `r#"`, `br"`…), if one does.
fn raw_string(s: &[char], i: usize) -> Option<usize> {
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let mut j = i + usize::from(at(i) == 'b');
    if at(j) != 'r' {
        return None;
    }
    j += 1;
    let hashes = (j..).take_while(|&k| at(k) == '#').count();
    (at(j + hashes) == '"').then_some(hashes)
}

/// The paths a file names, each with its line and the inline module (`mod x { … }`) it is in.
/// `use` trees are expanded (`use a::{b, c::d}` is `a::b` and `a::c::d`).
fn paths(toks: &[(Tok, usize)]) -> Vec<(Vec<String>, usize, Vec<String>)> {
    let ident = |i: usize| match toks.get(i) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |i: usize, c: char| matches!(toks.get(i), Some((Tok::Punct(p), _)) if *p == c);
    let colons = |i: usize| matches!(toks.get(i), Some((Tok::Colons, _)));
    let mut out = Vec::new();
    // Inline modules: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < toks.len() {
        let line = toks[i].1;
        if punct(i, '#')
            && punct(i + 1, '[')
            && ident(i + 2) == Some("cfg")
            && punct(i + 3, '(')
            && ident(i + 4) == Some("test")
            && punct(i + 5, ')')
            && punct(i + 6, ']')
        {
            // Skip the item: to its `;`, or over its braces.
            i += 7;
            while i < toks.len() && !punct(i, ';') && !punct(i, '{') {
                i += 1;
            }
            if punct(i, '{') {
                let mut d = 0;
                while i < toks.len() {
                    if punct(i, '{') {
                        d += 1;
                    } else if punct(i, '}') {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        if punct(i, '{') {
            depth += 1;
        } else if punct(i, '}') {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if ident(i) == Some("mod") && ident(i + 1).is_some() && punct(i + 2, '{') {
            inline.push((ident(i + 1).expect("checked").to_owned(), depth + 1));
        }
        let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        if ident(i) == Some("use") {
            let mut j = i + 1;
            let mut found = Vec::new();
            use_tree(toks, &mut j, Vec::new(), &mut found);
            out.extend(found.into_iter().map(|p| (p, line, here.clone())));
            i = j;
            continue;
        }
        if ident(i).is_some() && !(i > 0 && colons(i - 1)) && colons(i + 1) {
            let mut p = Vec::new();
            let mut j = i;
            while let Some(s) = ident(j) {
                p.push(s.to_owned());
                if colons(j + 1) && ident(j + 2).is_some() {
                    j += 2;
                } else {
                    break;
                }
            }
            out.push((p, line, here.clone()));
            i = j + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// Parse one use tree at `toks[*i]` under `prefix`, pushing its full paths.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Ident(s)) if s == "as" => {
                *i += 2;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::Colons) => *i += 1,
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) | None => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        _ => use_tree(toks, i, path.clone(), out),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
            }
            _ => {
                // `,`, `}` or `;`: the end of this tree.
                if matches!(toks.get(*i).map(|t| &t.0), Some(Tok::Punct(';'))) {
                    *i += 1;
                }
                out.push(path);
                return;
            }
        }
    }
}

/// Every module file under `src`, by module path.
fn modules(src: &Path) -> BTreeMap<Module, (String, String)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("source directory") {
            let p = entry.expect("directory entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).expect("under src");
            let mut m: Module = rel
                .with_extension("")
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if m == ["lib"] || m.last().is_some_and(|l| l == "mod") {
                m.pop();
            }
            let text = std::fs::read_to_string(&p).expect("source file");
            out.insert(m, (rel.display().to_string(), text));
        }
    }
    out
}

/// The module a path in module `at` (its file module plus the inline modules around the path)
/// names, if it is one of the crate's: the deepest existing prefix of its absolute form.
fn resolve(
    path: &[String],
    at: &[String],
    known: &BTreeSet<Module>,
) -> Option<(Module, Vec<String>)> {
    let first = path.first()?;
    let abs: Vec<String> = match first.as_str() {
        "crate" => path[1..].to_vec(),
        "self" => at.iter().chain(&path[1..]).cloned().collect(),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = at.get(..at.len().checked_sub(ups)?)?;
            base.iter().chain(&path[ups..]).cloned().collect()
        }
        _ => {
            let child: Module = at.iter().chain([first]).cloned().collect();
            if !known.contains(&child) {
                return None;
            }
            at.iter().chain(path).cloned().collect()
        }
    };
    let deepest = (0..=abs.len())
        .rev()
        .map(|n| abs[..n].to_vec())
        .find(|m| known.contains(m))?;
    Some((deepest, abs))
}

/// Whether a path calls into the CUDA driver (`result::…`, `sys::cu…`), not just names a type.
fn driver_call(p: &[String]) -> bool {
    let p: Vec<&str> = p.iter().map(String::as_str).collect();
    let p = match p.as_slice() {
        ["cudarc", "driver", rest @ ..] => rest,
        other => other,
    };
    match p {
        ["result", _, ..] => true,
        ["sys", f, ..] => f.starts_with("cu"),
        _ => false,
    }
}

/// The edges between the runtime's modules, each with one place that makes it; and the
/// complaints about paths through the crate root.
type Graph = BTreeMap<Module, BTreeMap<Module, String>>;

fn graph(mods: &BTreeMap<Module, (String, String)>) -> (Graph, Vec<String>, Vec<String>) {
    let known: BTreeSet<Module> = mods.keys().cloned().collect();
    let mut edges: Graph = BTreeMap::new();
    let (mut through_root, mut calls) = (Vec::new(), Vec::new());
    for (m, (file, text)) in mods {
        if m.is_empty() {
            // The facade: it names every module and nothing names it.
            continue;
        }
        for (p, line, inline) in paths(&tokens(text)) {
            let at: Module = m.iter().chain(&inline).cloned().collect();
            let driver_side = m.first().is_some_and(|f| f == "fault")
                || (m.first().is_some_and(|f| f == "backend")
                    && m.get(1).is_some_and(|f| f.starts_with("driver")));
            if driver_call(&p) && !driver_side {
                calls.push(format!("{file}:{line}: `{}`", p.join("::")));
            }
            let Some((target, abs)) = resolve(&p, &at, &known) else {
                continue;
            };
            if target.is_empty() {
                through_root.push(format!(
                    "{file}:{line}: `{}` goes through the crate root: name the module that defines `{}`",
                    p.join("::"),
                    abs.first().map_or("", String::as_str)
                ));
            } else if &target != m {
                edges
                    .entry(m.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| format!("{file}:{line}"));
            }
        }
    }
    (edges, through_root, calls)
}

/// A cycle of `edges`, as the modules around it and where each edge comes from.
fn cycle(edges: &Graph) -> Option<Vec<String>> {
    fn visit(
        m: &Module,
        edges: &Graph,
        state: &mut BTreeMap<Module, bool>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        match state.get(m) {
            Some(true) => return None,
            Some(false) => {
                let from = stack.iter().position(|s| s == m).expect("on the stack");
                let mut c = stack[from..].to_vec();
                c.push(m.clone());
                return Some(c);
            }
            None => {}
        }
        state.insert(m.clone(), false);
        stack.push(m.clone());
        for next in edges.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(next, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(m.clone(), true);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if let Some(c) = visit(m, edges, &mut state, &mut Vec::new()) {
            return Some(
                c.windows(2)
                    .map(|w| {
                        format!(
                            "{} → {} ({})",
                            w[0].join("::"),
                            w[1].join("::"),
                            edges[&w[0]][&w[1]]
                        )
                    })
                    .collect(),
            );
        }
    }
    None
}

#[test]
fn the_runtime_modules_name_each_other_one_way_and_only_the_driver_backend_calls_the_driver() {
    let mods = modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let (edges, through_root, calls) = graph(&mods);
    assert!(
        through_root.is_empty(),
        "paths through the crate root:\n{}",
        through_root.join("\n")
    );
    if let Some(c) = cycle(&edges) {
        panic!(
            "the runtime's modules name each other in a circle (see docs/runtime-layers.md):\n{}",
            c.join("\n")
        );
    }
    assert!(
        calls.is_empty(),
        "driver calls outside the driver backend:\n{}",
        calls.join("\n")
    );
    // The check sees the layers it is meant to: the backend below the context, launches
    // above both.
    let named = |a: &[&str], b: &[&str]| {
        let (a, b): (Module, Module) = (
            a.iter().map(|s| s.to_string()).collect(),
            b.iter().map(|s| s.to_string()).collect(),
        );
        edges.get(&a).is_some_and(|e| e.contains_key(&b))
    };
    assert!(named(&["context"], &["backend"]));
    assert!(named(&["launch", "builder"], &["context"]));
    assert!(!named(&["backend"], &["context"]));
}

#[test]
fn the_checker_reads_use_trees_and_inline_modules_skips_comments_strings_and_tests_and_finds_circles()
 {
    let src = r##"
        use crate::a::{b::{C, D}, e as f};
        use super::g::*;
        mod inner { use super::h::H; }
        // crate::nope::N
        const S: &str = "crate::nope::N";
        const R: &str = r#"crate::nope::N"#;
        fn x<'a>(c: char) -> &'a str { let _ = '"'; crate::i::j(); "" }
        #[cfg(test)]
        mod tests { use crate::nope::N; }
    "##;
    let found: Vec<(String, Vec<String>)> = paths(&tokens(src))
        .into_iter()
        .map(|(p, _, at)| (p.join("::"), at))
        .collect();
    let expect = |p: &str, at: &[&str]| (p.to_owned(), at.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        found,
        vec![
            expect("crate::a::b::C", &[]),
            expect("crate::a::b::D", &[]),
            expect("crate::a::e", &[]),
            expect("super::g", &[]),
            expect("super::h::H", &["inner"]),
            expect("crate::i::j", &[]),
        ]
    );
    let known: BTreeSet<Module> = [
        vec![],
        vec!["x".to_owned()],
        vec!["x".to_owned(), "y".to_owned()],
    ]
    .into_iter()
    .collect();
    let at = ["x".to_owned(), "inner".to_owned()];
    let (m, _) = resolve(
        &["super".to_owned(), "y".to_owned(), "Z".to_owned()],
        &at,
        &known,
    )
    .unwrap();
    assert_eq!(m, ["x", "y"]);
    let m = |s: &str| -> Module { s.split("::").map(str::to_owned).collect() };
    let mut g: Graph = BTreeMap::new();
    g.entry(m("a")).or_default().insert(m("b"), "a.rs:1".into());
    g.entry(m("b"))
        .or_default()
        .insert(m("a::c"), "b.rs:2".into());
    assert_eq!(cycle(&g), None);
    g.entry(m("a::c"))
        .or_default()
        .insert(m("a"), "a/c.rs:3".into());
    assert_eq!(
        cycle(&g).unwrap(),
        ["a → b (a.rs:1)", "b → a::c (b.rs:2)", "a::c → a (a/c.rs:3)"]
    );
    assert!(driver_call(&["result".into(), "malloc_sync".into()]));
    assert!(!driver_call(&[
        "std".into(),
        "result".into(),
        "Result".into()
    ]));
    assert!(!driver_call(&["sys".into(), "CUstream".into()]));
}
