//! What a set of roots reaches in a module: the functions and globals that the roots name,
//! and those name, through bodies and initialisers alike.
//!
//! The joined program holds all of `core` and of every other library, and `opt -O3` would
//! optimise each of their functions before `internalize,globaldce` drops those the exports do
//! not reach: most of the whole program's time in `opt`. Those functions are dropped first
//! ([`prune`]): the functions kept are still external while `opt` runs, so no caller-based
//! decision (inlining the last call of a local function, constants for its arguments) sees
//! fewer callers, and the module `opt` leaves is the one the whole program gives. The same
//! cut with one kernel as the root is that kernel's own module ([`kernel_modules`]).

use super::module::{Item, Module, is_ident_byte};
use std::collections::{HashMap, HashSet};

/// The names `line` refers to (`@name`, `@"name"`), its own included.
pub fn references(line: &str) -> impl Iterator<Item = &str> {
    let bytes = line.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(n) = bytes[at..].iter().position(|&b| b == b'@') {
            let start = at + n + 1;
            at = start;
            if bytes.get(start) == Some(&b'"') {
                let len = bytes[start + 1..].iter().position(|&b| b == b'"')?;
                at = start + 1 + len + 1;
                return Some(&line[start + 1..start + 1 + len]);
            }
            let len = bytes[start..]
                .iter()
                .take_while(|&&b| is_ident_byte(b))
                .count();
            at = start + len;
            if len > 0 {
                return Some(&line[start..start + len]);
            }
        }
        None
    })
}

/// The roots every cut of the module keeps besides the exports: LLVM's own globals
/// (`@llvm.used`, which keeps the panic record), and whatever the module's other lines
/// (metadata, declarations) name.
fn fixed_roots(module: &Module) -> Vec<&str> {
    module
        .items
        .iter()
        .flat_map(|i| -> Box<dyn Iterator<Item = &str> + '_> {
            match i {
                Item::Global(g) if g.name.starts_with("llvm.") => {
                    Box::new(std::iter::once(g.name.as_str()))
                }
                Item::Other(l) => Box::new(references(l)),
                _ => Box::new(std::iter::empty()),
            }
        })
        .collect()
}

/// The items of `module` that `roots` reach, by index.
fn reached<'a>(module: &'a Module, roots: impl IntoIterator<Item = &'a str>) -> Vec<bool> {
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, item) in module.items.iter().enumerate() {
        match item {
            Item::Function(f) => by_name.insert(f.name.as_str(), i),
            Item::Global(g) => by_name.insert(g.name.as_str(), i),
            Item::Other(_) => None,
        };
    }
    let mut keep = vec![false; module.items.len()];
    let mut todo: Vec<&str> = roots.into_iter().collect();
    while let Some(name) = todo.pop() {
        let Some(&i) = by_name.get(name) else {
            continue;
        };
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        match &module.items[i] {
            Item::Function(f) => {
                for l in std::iter::once(&f.header).chain(&f.body) {
                    todo.extend(references(l));
                }
            }
            Item::Global(g) => todo.extend(references(&g.line)),
            Item::Other(_) => {}
        }
    }
    keep
}

/// `module` without the functions and globals that neither `exports` nor the module's fixed
/// roots reach. The other lines (declarations, attributes, metadata) all stay.
pub fn prune(module: &Module, exports: &[String]) -> Module {
    let roots = fixed_roots(module)
        .into_iter()
        .chain(exports.iter().map(String::as_str));
    cut(module, &reached(module, roots))
}

/// Each kernel's own module, in the order of the kernels' definitions: the kernel, what it
/// reaches, and what every cut keeps (the exports that are not kernels, and the fixed roots).
/// Compiled apart and joined, they give the kernels the code of the whole program: a
/// function's code depends on what it calls, and each module holds all of that.
pub fn kernel_modules(module: &Module, exports: &[String]) -> Vec<(String, Module)> {
    let kernels: HashSet<&str> = module
        .functions()
        .filter(|f| f.is_kernel())
        .map(|f| f.name.as_str())
        .collect();
    let shared: Vec<&str> = fixed_roots(module)
        .into_iter()
        .chain(exports.iter().map(String::as_str))
        .filter(|e| !kernels.contains(e))
        .collect();
    module
        .functions()
        .filter(|f| f.is_kernel())
        .map(|k| {
            let roots = shared.iter().copied().chain([k.name.as_str()]);
            (k.name.clone(), cut(module, &reached(module, roots)))
        })
        .collect()
}

/// The module of the items `keep` says yes to, every other line but the numbered metadata,
/// and the numbered metadata those reach (the alias scopes of inlined calls are most of a
/// whole program's text, and each function names only its own).
fn cut(module: &Module, keep: &[bool]) -> Module {
    let kept = |(i, k): (&Item, &bool)| *k || matches!(i, Item::Other(_));
    let mut nodes: HashMap<&str, &str> = HashMap::new();
    for item in &module.items {
        if let Item::Other(l) = item
            && let Some(id) = numbered_metadata(l)
        {
            nodes.insert(id, l);
        }
    }
    let mut used: HashSet<&str> = HashSet::new();
    let mut todo: Vec<&str> = Vec::new();
    for item in module
        .items
        .iter()
        .zip(keep)
        .filter(|&p| kept(p))
        .map(|(i, _)| i)
    {
        let lines: Box<dyn Iterator<Item = &String>> = match item {
            Item::Function(f) => Box::new(std::iter::once(&f.header).chain(&f.body)),
            Item::Global(g) => Box::new(std::iter::once(&g.line)),
            Item::Other(l) if numbered_metadata(l).is_none() => Box::new(std::iter::once(l)),
            Item::Other(_) => Box::new(std::iter::empty()),
        };
        for l in lines {
            todo.extend(metadata_references(l));
        }
    }
    while let Some(id) = todo.pop() {
        if used.insert(id)
            && let Some(l) = nodes.get(id)
        {
            todo.extend(metadata_references(l).filter(|r| !used.contains(r)));
        }
    }
    Module {
        items: module
            .items
            .iter()
            .zip(keep)
            .filter(|&p| kept(p))
            .filter(|(i, _)| match i {
                Item::Other(l) => numbered_metadata(l).is_none_or(|id| used.contains(id)),
                _ => true,
            })
            .map(|(i, _)| i.clone())
            .collect(),
    }
}

/// The number of the metadata node a line defines (`!12 = …`), if it defines one.
fn numbered_metadata(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('!')?;
    let len = rest.bytes().take_while(u8::is_ascii_digit).count();
    (len > 0 && rest[len..].starts_with(" = ")).then(|| &rest[..len])
}

/// The numbered metadata nodes `line` refers to (`!12`), its own included.
fn metadata_references(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices('!').filter_map(move |(at, _)| {
        let rest = &line[at + 1..];
        let len = rest.bytes().take_while(u8::is_ascii_digit).count();
        (len > 0).then(|| &rest[..len])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = "target triple = \"nvptx64-nvidia-cuda\"\n\
        @llvm.used = appending global [1 x ptr] [ptr @record], section \"llvm.metadata\"\n\
        @record = global [4 x i8] zeroinitializer\n\
        @table = internal constant [2 x ptr] [ptr @helper, ptr @\"quoted.name\"]\n\
        @unused = internal constant i32 7\n\
        define ptx_kernel void @a() {\n  call void @shared(), !alias.scope !1\n  ret void\n}\n\
        define ptx_kernel void @b() {\n  %p = load ptr, ptr @table, !noalias !3\n  call void @shared()\n  ret void\n}\n\
        define void @shared() {\n  ret void\n}\n\
        define void @helper() {\n  ret void\n}\n\
        define void @\"quoted.name\"() {\n  ret void\n}\n\
        define void @core_unused() {\n  call void @helper()\n  ret void\n}\n\
        declare void @external()\n\
        !llvm.module.flags = !{!0}\n\
        !0 = !{i32 7, !\"x\", i32 1}\n\
        !1 = !{!2}\n\
        !2 = distinct !{!2, !\"scope of a\"}\n\
        !3 = !{!4}\n\
        !4 = distinct !{!4, !\"scope of b\"}\n";

    fn names(m: &Module) -> Vec<&str> {
        m.items
            .iter()
            .filter_map(|i| match i {
                Item::Function(f) => Some(f.name.as_str()),
                Item::Global(g) => Some(g.name.as_str()),
                Item::Other(_) => None,
            })
            .collect()
    }

    #[test]
    fn references_are_the_names_after_at_signs() {
        let line = "  %x = call i32 @f(ptr @\"a b\", ptr @g.1, i32 0) ; @";
        assert_eq!(references(line).collect::<Vec<_>>(), ["f", "a b", "g.1"]);
    }

    #[test]
    fn pruning_keeps_what_the_exports_and_llvm_used_reach_in_order() {
        let m = Module::parse(IR);
        let pruned = prune(&m, &["a".into(), "b".into()]);
        assert_eq!(
            names(&pruned),
            [
                "llvm.used",
                "record",
                "table",
                "a",
                "b",
                "shared",
                "helper",
                "quoted.name"
            ]
        );
        // Every other line stays, in its place.
        assert!(pruned.to_string().starts_with("target triple"));
        assert!(pruned.to_string().contains("declare void @external()"));
    }

    #[test]
    fn each_kernel_module_holds_the_kernel_what_it_reaches_and_the_shared_roots() {
        let m = Module::parse(IR);
        let cuts = kernel_modules(&m, &["a".into(), "b".into(), "record".into()]);
        let got: Vec<(&str, Vec<&str>)> =
            cuts.iter().map(|(k, m)| (k.as_str(), names(m))).collect();
        assert_eq!(
            got,
            [
                ("a", vec!["llvm.used", "record", "a", "shared"]),
                (
                    "b",
                    vec![
                        "llvm.used",
                        "record",
                        "table",
                        "b",
                        "shared",
                        "helper",
                        "quoted.name"
                    ]
                ),
            ]
        );
    }

    #[test]
    fn a_cut_keeps_the_metadata_its_items_name_and_the_named_metadata() {
        let m = Module::parse(IR);
        let cuts = kernel_modules(&m, &["a".into(), "b".into()]);
        let a = cuts[0].1.to_string();
        assert!(a.contains("!llvm.module.flags = !{!0}\n!0 = "), "{a}");
        assert!(a.contains("!1 = !{!2}\n!2 = distinct"), "{a}");
        assert!(!a.contains("!3 = ") && !a.contains("!4 = "), "{a}");
        let b = cuts[1].1.to_string();
        assert!(b.contains("!3 = !{!4}\n!4 = distinct"), "{b}");
        assert!(!b.contains("!1 = ") && !b.contains("!2 = "), "{b}");
        // The whole program pruned keeps both.
        let all = prune(&m, &["a".into(), "b".into()]).to_string();
        assert!(all.contains("!2 = ") && all.contains("!4 = "), "{all}");
    }
}
