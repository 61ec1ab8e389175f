//! Tests of the runtime's layering, read from its source files and checked against the layer
//! table of `docs/runtime-layers.md` (the table is this test's input):
//!
//! - every source file of `runtime/src` is in exactly one row of the table, and every file a
//!   row names exists;
//! - a file names only files of its own layer or below;
//! - the modules name each other in one direction only — no cycle of paths, also within a
//!   layer;
//! - only the driver backend (`backend/driver.rs`, `backend/driver/`) calls the CUDA driver;
//! - nothing above the backend names one backend's modules (`backend/driver/`,
//!   `backend/sim/`): it goes through the interface (`backend.rs`) and makes contexts through
//!   `backend/open.rs`;
//! - the driver's handle types (`cudarc::driver::sys`) appear above the backend only in the
//!   files that lend them to other libraries, which the document's second table lists (the
//!   table's header starts with `lends driver handles`), and each file it lists does lend some.
//!
//! Each file is parsed with `syn` ([`syn::parse_file`]; one that does not parse fails the test)
//! and a visitor collects the paths it names: `use` declarations, their groups, renames and
//! globs expanded (`use crate::a::{b::C, d as e, f::*}` names `crate::a::b::C`, `crate::a::d`
//! and `crate::a::f`), and the paths of two segments or more in expressions, types, patterns,
//! trait bounds and macro names. A file names a module through a path: `crate::a::b::Item`,
//! `super::x::Item`, or `child::Item` for a child module. A path counts as the deepest module
//! it reaches, so `crate::launch::kernel::Kernel` names `launch::kernel` and
//! `crate::launch::Grid` names `launch` (which re-exports it). The crate root is the facade: a
//! path through it (`crate::Gpu`) fails the test, which asks for the defining module.
//!
//! Comments, string literals, attributes, visibilities (`pub(in crate::a)`) and `#[cfg(test)]`
//! items, impl items, fields, variants, match arms and `let`s are skipped: the layering is that
//! of the shipped code. A macro's body is not Rust until it is expanded, so its tokens are read
//! for paths (`a::b::c`, visibilities skipped); there a `use` group is not expanded and a
//! `#[cfg(test)]` is not seen. Method calls are not paths and are not seen, except the two that
//! lend a driver handle (`.raw_stream()`, `.raw_context()`): the runtime calls across modules
//! through free functions or methods of the type's own module, so that its paths tell.
//!
//! The table is read at run time from `../docs/runtime-layers.md` (relative to the crate's
//! manifest), not compiled in: a crate packaged for crates.io has no `docs/` folder, and an
//! `include_str!` of it would stop the packaged crate's tests from compiling. Where the file is
//! missing in a packaged crate (its manifest folder holds the `Cargo.toml.orig` that packaging
//! writes), the table checks are skipped with a note; in the repository a missing or unreadable
//! table fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A module path below the crate root (`["launch", "kernel"]`); empty for the root.
type Module = Vec<String>;

/// A path a file names: its segments, its line, and the inline modules (`mod x { … }`) it is in.
type Named = (Vec<String>, usize, Vec<String>);

/// The paths the Rust source `src` names ([`Paths`]), or why it does not parse.
fn paths(src: &str) -> syn::Result<Vec<Named>> {
    let mut found = Paths::default();
    found.visit_file(&syn::parse_file(src)?);
    Ok(found.found)
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The method calls that lend a driver handle; noted as the paths `.raw_stream`, `.raw_context`.
const LENDING_METHODS: [&str; 2] = ["raw_stream", "raw_context"];

/// A visitor collecting the paths of two segments or more (`use` trees expanded, one path a
/// leaf: `use a::{b, c::d as e, f::*}` is `a::b`, `a::c::d` and `a::f`), the lending method
/// calls, and the paths in macro bodies; attributes, visibilities and `#[cfg(test)]` items are
/// skipped.
#[derive(Default)]
struct Paths {
    inline: Vec<String>,
    found: Vec<Named>,
}

impl Paths {
    fn push(&mut self, path: Vec<String>, at: Span) {
        self.found
            .push((path, at.start().line, self.inline.clone()));
    }

    fn use_tree(&mut self, tree: &syn::UseTree, mut prefix: Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
            }
            syn::UseTree::Name(n) if n.ident == "self" => self.push(prefix, n.ident.span()),
            syn::UseTree::Name(syn::UseName { ident })
            | syn::UseTree::Rename(syn::UseRename { ident, .. }) => {
                prefix.push(ident.to_string());
                self.push(prefix, ident.span());
            }
            syn::UseTree::Glob(g) => self.push(prefix, g.star_token.span),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix.clone());
                }
            }
        }
    }

    /// The paths (`a::b::c`) and lending method calls (`.raw_stream`) in a macro's tokens, which
    /// are not parsed as Rust (they need not be): visibilities are skipped, a `use` group there
    /// is not expanded and a `#[cfg(test)]` there is not seen.
    fn macro_tokens(&mut self, tokens: TokenStream) {
        let toks: Vec<TokenTree> = tokens.into_iter().collect();
        let colons = |i: usize| {
            matches!((toks.get(i), toks.get(i + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && b.as_char() == ':')
        };
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => self.macro_tokens(g.stream()),
                TokenTree::Punct(p) if p.as_char() == '.' => {
                    if let Some(TokenTree::Ident(m)) = toks.get(i + 1)
                        && LENDING_METHODS.iter().any(|l| m == l)
                    {
                        self.push(vec![format!(".{m}")], m.span());
                    }
                }
                TokenTree::Ident(v) if v == "pub" => {
                    // A visibility, `pub(in crate::a)`, names nothing.
                    if let Some(TokenTree::Group(g)) = toks.get(i + 1)
                        && g.delimiter() == proc_macro2::Delimiter::Parenthesis
                    {
                        i += 1;
                    }
                }
                TokenTree::Ident(first) => {
                    let mut path = vec![first.to_string()];
                    while colons(i + 1)
                        && let Some(TokenTree::Ident(next)) = toks.get(i + 3)
                    {
                        path.push(next.to_string());
                        i += 3;
                    }
                    if path.len() > 1 {
                        self.push(path, first.span());
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// `Visit` methods that skip a `#[cfg(test)]` node.
macro_rules! unless_test {
    ($($visit:ident: $node:ty),* $(,)?) => {$(
        fn $visit(&mut self, node: &'ast $node) {
            if !test_only(&node.attrs) {
                visit::$visit(self, node);
            }
        }
    )*};
}

impl<'ast> Visit<'ast> for Paths {
    unless_test!(
        visit_item_const: syn::ItemConst, visit_item_enum: syn::ItemEnum,
        visit_item_fn: syn::ItemFn, visit_item_impl: syn::ItemImpl,
        visit_item_macro: syn::ItemMacro, visit_item_static: syn::ItemStatic,
        visit_item_struct: syn::ItemStruct, visit_item_trait: syn::ItemTrait,
        visit_item_type: syn::ItemType, visit_item_union: syn::ItemUnion,
        visit_impl_item_const: syn::ImplItemConst, visit_impl_item_fn: syn::ImplItemFn,
        visit_impl_item_type: syn::ImplItemType, visit_trait_item_fn: syn::TraitItemFn,
        visit_field: syn::Field, visit_variant: syn::Variant, visit_arm: syn::Arm,
        visit_local: syn::Local,
    );

    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        if test_only(&node.attrs) {
            return;
        }
        self.inline.push(node.ident.to_string());
        visit::visit_item_mod(self, node);
        self.inline.pop();
    }

    fn visit_item_use(&mut self, node: &'ast syn::ItemUse) {
        if !test_only(&node.attrs) {
            self.use_tree(&node.tree, Vec::new());
        }
    }

    fn visit_path(&mut self, node: &'ast syn::Path) {
        if node.segments.len() > 1 {
            let path = node.segments.iter().map(|s| s.ident.to_string()).collect();
            self.push(path, node.segments[0].ident.span());
        }
        visit::visit_path(self, node);
    }

    fn visit_expr_method_call(&mut self, node: &'ast syn::ExprMethodCall) {
        if LENDING_METHODS.iter().any(|l| node.method == l) {
            self.push(vec![format!(".{}", node.method)], node.method.span());
        }
        visit::visit_expr_method_call(self, node);
    }

    fn visit_macro(&mut self, node: &'ast syn::Macro) {
        self.visit_path(&node.path);
        self.macro_tokens(node.tokens.clone());
    }

    /// `pub(in crate::a)` says who may see an item; it names nothing.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    /// Attributes (`#[derive(..)]`, doc comments, lint levels) name no module of the crate.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}
}

/// The paths of `file`'s source `text`; a file that does not parse fails the test.
fn file_paths(file: &str, text: &str) -> Vec<Named> {
    paths(text).unwrap_or_else(|e| {
        let at = e.span().start();
        panic!("{file}:{}:{}: {e}", at.line, at.column + 1)
    })
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

/// Whether a path names the CUDA driver's handle types or constants (`cudarc::driver::sys`, or
/// `sys::…` after importing it), or is a call of a backend method that lends a driver handle
/// (`.raw_stream`, `.raw_context`, noted by [`paths`]).
fn driver_handle(p: &[String]) -> bool {
    p.first()
        .is_some_and(|s| s == "sys" || s == ".raw_stream" || s == ".raw_context")
        || p.windows(2).any(|w| w[0] == "driver" && w[1] == "sys")
}

/// The edges between the runtime's modules, each with one place that makes it.
type Graph = BTreeMap<Module, BTreeMap<Module, String>>;

/// What reading the sources found: the edges, and the places that break a rule of
/// `docs/runtime-layers.md` whatever the table says.
#[derive(Default)]
struct Scan {
    edges: Graph,
    /// Paths through the crate root.
    through_root: Vec<String>,
    /// Calls into the CUDA driver outside the driver backend.
    calls: Vec<String>,
    /// Paths naming the driver's handle types outside `backend/`: (file, where and what).
    handles: Vec<(String, String)>,
    /// Paths naming one backend's own modules (`backend::driver`, `backend::sim`) outside
    /// `backend/`.
    backends: Vec<String>,
}

fn graph(mods: &BTreeMap<Module, (String, String)>) -> Scan {
    graph_with(mods, &BTreeMap::new())
}

/// The items the crate root of `mods` re-exports from a module of the crate (`pub use
/// dim::thread;` in the root: `thread` → `dim`), for a crate whose modules name each other
/// through the root (the device crate).
fn root_reexports(mods: &BTreeMap<Module, (String, String)>) -> BTreeMap<String, Module> {
    let known: BTreeSet<Module> = mods.keys().cloned().collect();
    let Some((_, root)) = mods.get(&Module::new()) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (p, _, inline) in file_paths("the crate root", root) {
        if !inline.is_empty() || p.len() < 2 {
            continue;
        }
        if let Some((target, _)) = resolve(&p[..p.len() - 1], &[], &known)
            && !target.is_empty()
        {
            out.insert(p[p.len() - 1].clone(), target);
        }
    }
    out
}

/// [`graph`], with a path through the crate root to an item of `reexports` counted as naming
/// the module the root re-exports it from.
fn graph_with(
    mods: &BTreeMap<Module, (String, String)>,
    reexports: &BTreeMap<String, Module>,
) -> Scan {
    let known: BTreeSet<Module> = mods.keys().cloned().collect();
    let mut scan = Scan::default();
    for (m, (file, text)) in mods {
        if m.is_empty() {
            // The facade: it names every module and nothing names it.
            continue;
        }
        let in_backend = m.first().is_some_and(|f| f == "backend");
        let driver_side = in_backend && m.get(1).is_some_and(|f| f == "driver");
        for (p, line, inline) in file_paths(file, text) {
            let at: Module = m.iter().chain(&inline).cloned().collect();
            if driver_call(&p) && !driver_side {
                scan.calls
                    .push(format!("{file}:{line}: `{}`", p.join("::")));
            }
            if driver_handle(&p) && !in_backend {
                scan.handles
                    .push((file.clone(), format!("{file}:{line}: `{}`", p.join("::"))));
            }
            let Some((mut target, abs)) = resolve(&p, &at, &known) else {
                continue;
            };
            if target.is_empty()
                && let Some(m) = abs.first().and_then(|item| reexports.get(item))
            {
                target = m.clone();
            }
            let one_backend = target.first().is_some_and(|f| f == "backend")
                && target.get(1).is_some_and(|f| f == "driver" || f == "sim");
            if one_backend && !in_backend {
                scan.backends.push(format!(
                    "{file}:{line}: `{}` names the `{}` backend",
                    p.join("::"),
                    target[1]
                ));
            }
            if target.is_empty() {
                scan.through_root.push(format!(
                    "{file}:{line}: `{}` goes through the crate root: name the module that defines `{}`",
                    p.join("::"),
                    abs.first().map_or("", String::as_str)
                ));
            } else if &target != m {
                scan.edges
                    .entry(m.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| format!("{file}:{line}"));
            }
        }
    }
    scan
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

/// One row of the layer table: its layer, the files it names (relative to `runtime/src`) and
/// the line of the document it is on.
#[derive(Debug, PartialEq)]
struct Row {
    layer: u32,
    files: Vec<String>,
    line: usize,
}

/// The body rows of the first markdown table in `md` whose header's first cell is `header`:
/// each row's cells and its line; `None` if there is no such table.
fn markdown_table(md: &str, header: &str) -> Option<Vec<(Vec<String>, usize)>> {
    let mut rows = None::<Vec<(Vec<String>, usize)>>;
    for (n, text) in md.lines().enumerate() {
        let text = text.trim();
        if !text.starts_with('|') {
            if rows.is_some() {
                break;
            }
            continue;
        }
        let cells: Vec<String> = text
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect();
        match &mut rows {
            None if cells.first().is_some_and(|c| c == header) => rows = Some(Vec::new()),
            None => {}
            Some(_)
                if cells
                    .iter()
                    .all(|c| c.chars().all(|ch| ch == '-' || ch == ':')) => {}
            Some(rows) => rows.push((cells, n + 1)),
        }
    }
    rows
}

/// The files a cell names in backticks (`` `a/b.rs` ``); an error unless they are `.rs` files
/// and there is one at least.
fn cell_files(cell: &str, line: usize) -> Result<Vec<String>, String> {
    let files: Vec<String> = cell
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    if files.is_empty() || files.iter().any(|f| !f.ends_with(".rs")) {
        return Err(format!(
            "line {line}: the files cell names `.rs` files in backticks, got `{files:?}`"
        ));
    }
    Ok(files)
}

/// The rows of the layer table in `md`: the first markdown table whose header's first cell is
/// `layer`. A row's first cell starts with its layer number (`3. handle`) or is empty (the
/// layer of the row above); its second cell names files in backticks (`` `a/b.rs` ``).
fn table(md: &str) -> Result<Vec<Row>, String> {
    let body = markdown_table(md, "layer").unwrap_or_default();
    let mut rows = Vec::new();
    let mut layer = None;
    for (cells, line) in body {
        let [first, files, ..] = cells.as_slice() else {
            return Err(format!(
                "line {line}: a row needs a layer cell and a files cell"
            ));
        };
        if !first.is_empty() {
            let digits: String = first.chars().take_while(char::is_ascii_digit).collect();
            layer = Some(digits.parse::<u32>().map_err(|_| {
                format!("line {line}: the layer cell `{first}` does not start with a number")
            })?);
        }
        let layer =
            layer.ok_or_else(|| format!("line {line}: the table's first row has no layer"))?;
        let files = cell_files(files, line)?;
        rows.push(Row { layer, files, line });
    }
    if rows.is_empty() {
        return Err("no layer table (a markdown table whose header starts with `layer`)".into());
    }
    Ok(rows)
}

/// The files that lend driver handles, read from the table of `md` whose header's first cell
/// is `lends driver handles`: each row's first cell names one file in backticks.
fn lenders(md: &str) -> Result<Vec<String>, String> {
    let body = markdown_table(md, "lends driver handles").ok_or(
        "no table of the files that lend driver handles (its header starts with \
         `lends driver handles`)",
    )?;
    let mut files = Vec::new();
    for (cells, line) in body {
        files.extend(cell_files(&cells[0], line)?);
    }
    Ok(files)
}

/// The driver handles named outside the backend by files the lenders' table does not list,
/// and the files it lists that hold none.
fn against_lenders(lenders: &[String], handles: &[(String, String)]) -> Vec<String> {
    let mut problems: Vec<String> = handles
        .iter()
        .filter(|(file, _)| !lenders.contains(file))
        .map(|(_, place)| {
            format!(
                "{place}: a driver handle above the backend, in a file the table of lenders in \
                 docs/runtime-layers.md does not list (use the backend's ids, or lend the handle \
                 from a listed file)"
            )
        })
        .collect();
    for l in lenders {
        if !handles.iter().any(|(file, _)| file == l) {
            problems.push(format!(
                "docs/runtime-layers.md lists `{l}` as lending driver handles, and it names none"
            ));
        }
    }
    problems
}

/// What is wrong between the table and the sources: a source file in no row or in two, a row
/// naming a file that does not exist, a file naming a file of a higher layer (with the line
/// that does).
fn against_table(
    rows: &[Row],
    mods: &BTreeMap<Module, (String, String)>,
    edges: &Graph,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut layer_of: BTreeMap<&str, u32> = BTreeMap::new();
    let files: BTreeSet<&str> = mods.values().map(|(f, _)| f.as_str()).collect();
    for row in rows {
        for f in &row.files {
            if !files.contains(f.as_str()) {
                problems.push(format!(
                    "docs/runtime-layers.md:{}: `{f}` is no file of runtime/src",
                    row.line
                ));
            } else if layer_of.insert(f, row.layer).is_some() {
                problems.push(format!(
                    "docs/runtime-layers.md:{}: `{f}` is in two rows",
                    row.line
                ));
            }
        }
    }
    for f in &files {
        if !layer_of.contains_key(f) {
            problems.push(format!(
                "runtime/src/{f} is in no row of the layer table (docs/runtime-layers.md)"
            ));
        }
    }
    let file = |m: &Module| mods.get(m).map(|(f, _)| f.as_str());
    for (from, targets) in edges {
        let Some(from_file) = file(from) else {
            continue;
        };
        let Some(&low) = layer_of.get(from_file) else {
            continue;
        };
        for (to, place) in targets {
            let Some(to_file) = file(to) else { continue };
            if let Some(&high) = layer_of.get(to_file).filter(|&&l| l > low) {
                problems.push(format!(
                    "{place}: `{from_file}` (layer {low}) names `{to_file}` (layer {high})"
                ));
            }
        }
    }
    problems
}

/// `docs/runtime-layers.md`; `None` (with a note) in a packaged crate, which has no `docs/`
/// folder.
fn documented(manifest: &Path) -> Option<String> {
    let doc = manifest.join("../docs/runtime-layers.md");
    match std::fs::read_to_string(&doc) {
        Ok(md) => Some(md),
        Err(_) if manifest.join("Cargo.toml.orig").exists() => {
            eprintln!("note: a packaged crate has no docs/runtime-layers.md: tables not checked");
            None
        }
        Err(e) => panic!("{}: {e}", doc.display()),
    }
}

/// The layer table of `docs/runtime-layers.md` ([`documented`]).
fn documented_rows(manifest: &Path) -> Option<Vec<Row>> {
    let md = documented(manifest)?;
    Some(table(&md).unwrap_or_else(|e| panic!("docs/runtime-layers.md: {e}")))
}

#[test]
fn every_runtime_file_is_in_the_documented_layer_table_and_names_no_higher_layer() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(md) = documented(manifest) else {
        return;
    };
    let rows = table(&md).unwrap_or_else(|e| panic!("docs/runtime-layers.md: {e}"));
    let lenders = lenders(&md).unwrap_or_else(|e| panic!("docs/runtime-layers.md: {e}"));
    let mods = modules(&manifest.join("src"));
    let scan = graph(&mods);
    let mut problems = against_table(&rows, &mods, &scan.edges);
    problems.extend(against_lenders(&lenders, &scan.handles));
    assert!(
        problems.is_empty(),
        "the sources and the tables of docs/runtime-layers.md disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_table_is_skipped_only_in_a_packaged_crate() {
    let root = std::env::temp_dir().join(format!("berth-layers-{}", std::process::id()));
    let manifest = root.join("crate");
    std::fs::create_dir_all(&manifest).unwrap();
    // In the repository (no `Cargo.toml.orig`) a missing table fails.
    let missing = std::panic::catch_unwind(|| documented_rows(&manifest));
    assert!(missing.is_err());
    // A packaged crate has no docs/ folder: skipped.
    std::fs::write(manifest.join("Cargo.toml.orig"), "").unwrap();
    assert_eq!(documented_rows(&manifest), None);
    // Where the table is there, it is read, packaged or not.
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/runtime-layers.md"),
        "| layer | files |\n|---|---|\n| 0. x | `a.rs` |\n",
    )
    .unwrap();
    let rows = documented_rows(&manifest).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(
        rows,
        vec![Row {
            layer: 0,
            files: vec!["a.rs".into()],
            line: 3
        }]
    );
}

#[test]
fn the_table_check_finds_missing_unknown_doubled_files_and_upward_names() {
    let md = "intro\n\n| layer | files | concept |\n|---|---|---|\n\
              | 0. low | `a.rs`, `gone.rs` | x |\n| | `b/c.rs` | y |\n\
              | 1. high | `b.rs`, `a.rs` | z |\n\nafter\n\n| layer | other |\n";
    let rows = table(md).unwrap();
    assert_eq!(
        rows,
        vec![
            Row {
                layer: 0,
                files: vec!["a.rs".into(), "gone.rs".into()],
                line: 5
            },
            Row {
                layer: 0,
                files: vec!["b/c.rs".into()],
                line: 6
            },
            Row {
                layer: 1,
                files: vec!["b.rs".into(), "a.rs".into()],
                line: 7
            },
        ]
    );
    let m = |s: &str| -> Module { s.split("::").map(str::to_owned).collect() };
    let mods: BTreeMap<Module, (String, String)> = [
        (m("a"), ("a.rs".to_owned(), String::new())),
        (m("b"), ("b.rs".to_owned(), "\nuse self::c::Y;".to_owned())),
        (
            m("b::c"),
            (
                "b/c.rs".to_owned(),
                "// b\n\n\nfn f() -> super::X { todo!() }".to_owned(),
            ),
        ),
        (m("d"), ("d.rs".to_owned(), String::new())),
    ]
    .into_iter()
    .collect();
    let edges = graph(&mods).edges;
    assert_eq!(
        cycle(&edges).unwrap(),
        ["b → b::c (b.rs:2)", "b::c → b (b/c.rs:4)"]
    );
    assert_eq!(
        against_table(&rows, &mods, &edges),
        [
            "docs/runtime-layers.md:5: `gone.rs` is no file of runtime/src",
            "docs/runtime-layers.md:7: `a.rs` is in two rows",
            "runtime/src/d.rs is in no row of the layer table (docs/runtime-layers.md)",
            "b/c.rs:4: `b/c.rs` (layer 0) names `b.rs` (layer 1)",
        ]
    );
    assert!(table("| layer | files |\n|---|---|\n| low | `a.rs` |\n").is_err());
    assert!(table("| layer | files |\n|---|---|\n| | `a.rs` |\n").is_err());
    assert!(table("| layer | files |\n|---|---|\n| 0. x | a.rs |\n").is_err());
    assert!(table("no table\n").is_err());
}

#[test]
fn the_runtime_modules_name_each_other_one_way_and_only_the_driver_backend_calls_the_driver() {
    let mods = modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let Scan {
        edges,
        through_root,
        calls,
        backends,
        ..
    } = graph(&mods);
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
    assert!(
        backends.is_empty(),
        "code above the backend names one backend (it goes through the interface, `backend.rs`, \
         and makes contexts through `backend/open.rs`):\n{}",
        backends.join("\n")
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
    assert!(named(&["gpu"], &["backend", "open"]));
    assert!(named(&["backend", "open"], &["backend", "sim"]));
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
        pub(in crate::nope) struct V(pub(in super::nope) u8);
        fn y(o: &O) -> S { o.raw_stream(s) }
        #[cfg(test)]
        mod tests { use crate::nope::N; }
        #[derive(crate::nope::D)]
        struct W { #[cfg(test)] t: crate::nope::N, u: <T as super::k::K>::A }
        impl W { #[cfg(test)] fn t() { crate::nope::n(); } fn u() -> super::l::L { S } }
        fn z() { assert!(self::m::n(a::b), "{}", f(c.raw_context()).d::e); vec![::o::P; 1]; }
        macro_rules! q { () => { pub(in crate::nope) fn r() -> crate::r::R {} } }
    "##;
    let found: Vec<(String, Vec<String>)> = paths(src)
        .unwrap()
        .into_iter()
        .map(|(p, _, at)| (p.join("::"), at))
        .collect();
    assert!(paths("fn f( {}").is_err());
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
            expect(".raw_stream", &[]),
            expect("super::k::K::A", &[]),
            expect("super::l::L", &[]),
            expect("self::m::n", &[]),
            expect("a::b", &[]),
            expect(".raw_context", &[]),
            expect("d::e", &[]),
            expect("o::P", &[]),
            expect("crate::r::R", &[]),
        ]
    );
    let lines: Vec<usize> = paths(src).unwrap().iter().map(|(_, l, _)| *l).collect();
    assert_eq!(
        lines,
        [2, 2, 2, 3, 4, 8, 10, 14, 15, 16, 16, 16, 16, 16, 17]
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

#[test]
fn the_checker_finds_driver_handles_outside_the_listed_lenders_and_backends_named_above_them() {
    let md = "| layer | files |\n|---|---|\n| 0. x | `a.rs` |\n\ntext\n\n\
              | lends driver handles | to |\n|---|---|\n| `lend.rs` | cudarc |\n| `gone.rs` | NCCL |\n";
    assert_eq!(lenders(md).unwrap(), ["lend.rs", "gone.rs"]);
    assert!(lenders("| layer | files |\n|---|---|\n| 0. x | `a.rs` |\n").is_err());
    assert!(lenders("| lends driver handles | to |\n|---|---|\n| lend.rs | x |\n").is_err());
    let m = |s: &str| -> Module { s.split("::").map(str::to_owned).collect() };
    let src = |s: &str| s.to_owned();
    let mods: BTreeMap<Module, (String, String)> = [
        (
            m("backend"),
            ("backend.rs".into(), src("use cudarc::driver::sys;")),
        ),
        (m("backend::sim"), ("backend/sim.rs".into(), String::new())),
        (
            m("backend::driver"),
            ("backend/driver.rs".into(), src("fn f(s: sys::CUstream) {}")),
        ),
        (
            m("lend"),
            (
                "lend.rs".into(),
                src("use cudarc::driver::{CudaContext, sys};"),
            ),
        ),
        (
            m("up"),
            (
                "up.rs".into(),
                src("use crate::backend::sim::Simulator;\n\
                     fn f(s: cudarc::driver::sys::CUstream) {}\n\
                     #[cfg(test)]\nmod tests { use crate::backend::driver::Driver; }"),
            ),
        ),
    ]
    .into_iter()
    .collect();
    let scan = graph(&mods);
    assert_eq!(
        scan.handles,
        [
            (
                "lend.rs".to_owned(),
                "lend.rs:1: `cudarc::driver::sys`".to_owned()
            ),
            (
                "up.rs".to_owned(),
                "up.rs:2: `cudarc::driver::sys::CUstream`".to_owned()
            ),
        ],
        "the backend's own files may name them"
    );
    assert_eq!(
        scan.backends,
        ["up.rs:1: `crate::backend::sim::Simulator` names the `sim` backend"],
        "test code may name a backend"
    );
    let problems = against_lenders(&lenders(md).unwrap(), &scan.handles);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("up.rs:2: `cudarc::driver::sys::CUstream`: a driver handle"));
    assert!(problems[1].contains("lists `gone.rs` as lending driver handles, and it names none"));
    assert!(driver_handle(&["sys".into(), "CUevent".into()]));
    assert!(driver_handle(&[".raw_context".into()]));
    assert!(!driver_handle(&[
        "crate".into(),
        "backend".into(),
        "StreamId".into()
    ]));
}

/// The device crate's modules name each other one way too: in particular its host side
/// (`host.rs`, the warp calls' model in `host/warp.rs`) calls nothing of the kernel-facing
/// `warp.rs`, which calls into it. Read from the workspace's `device/src` (a packaged crate has
/// none: skipped there).
#[test]
fn the_device_crate_modules_name_each_other_one_way() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = manifest.join("../device/src");
    if !src.exists() && manifest.join("Cargo.toml.orig").exists() {
        eprintln!("note: a packaged crate has no device crate beside it: not checked");
        return;
    }
    let mods = modules(&src);
    let reexports = root_reexports(&mods);
    let m = |s: &str| -> Module { s.split("::").map(str::to_owned).collect() };
    assert_eq!(reexports.get("thread"), Some(&m("dim")));
    let edges = graph_with(&mods, &reexports).edges;
    if let Some(c) = cycle(&edges) {
        panic!(
            "the device crate's modules name each other in a circle:\n{}",
            c.join("\n")
        );
    }
    let named = |a: &str, b: &str| edges.get(&m(a)).is_some_and(|e| e.contains_key(&m(b)));
    assert!(named("warp", "host") && named("warp", "host::warp") && named("host", "host::warp"));
    assert!(!named("host", "warp") && !named("host::warp", "warp"));
}
