//! Checks that the documents state counts that are true of the tree, rust-analyzer's "tidy"
//! style: a number in the README that a file listing can confirm is confirmed here.

use crate::workspace_root;

/// The number just before `suffix` in `text` (`"(63 UI cases"` → 63), if `suffix` occurs.
fn number_before(text: &str, suffix: &str) -> Option<usize> {
    let at = text.find(suffix)?;
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// The files of `dir` (relative to the workspace root) whose name ends with `ext`.
fn count_files(dir: &str, ext: &str) -> usize {
    std::fs::read_dir(workspace_root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(ext))
        .count()
}

#[test]
fn readme_ui_case_count_is_the_number_of_ui_cases() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let stated = number_before(&readme, " UI cases in `tests/ui/`")
        .expect("the README states how many UI cases `tests/ui/` holds");
    let cases = count_files("tests/ui", ".rs");
    assert_eq!(
        stated, cases,
        "README.md says {stated} UI cases, tests/ui/ has {cases}: update the README"
    );
    // Every case has its expected compiler output beside it.
    assert_eq!(count_files("tests/ui", ".stderr"), cases);
}

#[test]
fn number_before_reads_the_digits_next_to_the_phrase() {
    assert_eq!(number_before("has (63 UI cases", " UI cases"), Some(63));
    assert_eq!(number_before("no count UI cases", " UI cases"), None);
    assert_eq!(number_before("nothing", " UI cases"), None);
}

/// Files of `device/src` whose public items are not yet held to having an example: their API
/// is being redesigned, and its examples come with the new design. Remove an entry when the
/// file's items all have examples.
const DEVICE_EXAMPLES_PENDING: &[&str] = &[];

/// Keywords that start an item declaration after `pub ` (with `const`/`unsafe` qualifiers
/// stripped first).
const ITEM_KEYWORDS: &[&str] = &[
    "fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "union ",
];

/// The item a `pub` line declares (`"fn lane_id"`), or `None` when the line declares none
/// that needs an example: a field, a `pub use`, a `pub mod`, a `pub(crate)` item.
fn pub_item(trimmed: &str) -> Option<String> {
    let mut rest = trimmed.strip_prefix("pub ")?;
    // `const fn`, `unsafe fn`, `const unsafe fn`, `unsafe trait`; a `pub const NAME` stays.
    loop {
        if let Some(r) = rest.strip_prefix("unsafe ") {
            rest = r;
        } else if rest.starts_with("const fn ") || rest.starts_with("const unsafe ") {
            rest = &rest["const ".len()..];
        } else {
            break;
        }
    }
    let kw = ITEM_KEYWORDS.iter().find(|k| rest.starts_with(*k))?;
    let name: String = rest[kw.len()..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
        .collect();
    Some(format!("{}{name}", kw))
}

/// The public items of a `device/src` file whose doc comment holds no code example, as
/// `line: item`. What counts as an item: `pub` functions, types, traits, constants and
/// statics (in a macro's template too: the template's doc comment documents every
/// expansion), a trait's methods and constants, `#[macro_export]` macros, and the items a
/// macro invocation documents (a doc comment inside `name! { … }`). What does not: modules
/// (documents, not API), fields and variants (documented with their type), `pub(crate)` items,
/// items of private modules, `#[doc(hidden)]` items, and the `#[cfg(test)]` module.
fn items_without_examples(src: &str) -> Vec<String> {
    let lines: Vec<&str> = src.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut missing = Vec::new();
    let mut doc = String::new();
    let mut hidden = false;
    let mut exported = false;
    // A multi-line attribute's unclosed brackets.
    let mut attr_depth = 0i32;
    // The indentation of the closing brace of the region being skipped (a private module)
    // or searched (a public trait, a macro invocation), if inside one.
    let mut private_until: Option<usize> = None;
    let mut trait_until: Option<usize> = None;
    let mut invocation_until: Option<usize> = None;
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        let ind = indent(line);
        let closes = |until: Option<usize>| until == Some(ind) && t.starts_with('}');
        if t == "#[cfg(test)]"
            && lines
                .get(n + 1)
                .is_some_and(|l| l.trim().starts_with("mod tests"))
        {
            break;
        }
        if closes(private_until) {
            private_until = None;
            continue;
        }
        if private_until.is_some() {
            continue;
        }
        if closes(trait_until) {
            trait_until = None;
        }
        if closes(invocation_until) {
            invocation_until = None;
        }
        if attr_depth > 0 {
            attr_depth += t.matches('[').count() as i32 - t.matches(']').count() as i32;
            continue;
        }
        if let Some(d) = t.strip_prefix("///") {
            doc.push_str(d);
            doc.push('\n');
            continue;
        }
        if t.starts_with("#[") {
            hidden |= t.starts_with("#[doc(hidden)]");
            exported |= t.starts_with("#[macro_export]");
            // A generated doc: a string, or `example!(…)`, the macros' convention for an
            // example built for each expansion.
            if let Some(d) = t.strip_prefix("#[doc = ") {
                doc.push_str(if d.starts_with("example!(") { "```" } else { d });
            }
            attr_depth = t.matches('[').count() as i32 - t.matches(']').count() as i32;
            continue;
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        let item = if let Some(item) = pub_item(t) {
            // A template item named by the macro's caller is documented at the invocation.
            (!item.contains('$')).then_some(item)
        } else if t.starts_with("macro_rules! ") {
            exported.then(|| t.trim_end_matches(" {").replace("macro_rules! ", "macro "))
        } else if trait_until.is_some_and(|i| ind == i + 4)
            && (t.starts_with("fn ") || t.starts_with("unsafe fn ") || t.starts_with("const "))
        {
            Some(t.split(['(', ':', '<']).next().unwrap_or(t).to_string())
        } else if invocation_until.is_some() && !doc.is_empty() {
            Some(format!(
                "{} (generated)",
                t.split([',', ' ']).next().unwrap_or(t)
            ))
        } else {
            None
        };
        if let Some(item) = item
            && !hidden
            && !doc.contains("```")
        {
            missing.push(format!("{}: {item}", n + 1));
        }
        if (t.starts_with("mod ") || t.starts_with("pub(crate) mod ")) && t.ends_with('{') {
            private_until = Some(ind);
        } else if (t.starts_with("pub trait ") || t.starts_with("pub unsafe trait "))
            && t.ends_with('{')
        {
            trait_until = Some(ind);
        } else if t.ends_with("! {") && !t.starts_with("macro_rules!") {
            invocation_until = Some(ind);
        }
        doc.clear();
        hidden = false;
        exported = false;
    }
    missing
}

#[test]
fn every_public_item_of_berth_device_has_an_example() {
    let dir = workspace_root().join("device/src");
    // Every source file, in subfolders too (`host/warp.rs`), by its path below `src`.
    let mut files = Vec::new();
    let mut folders = vec![dir.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let name = path
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".rs") && !DEVICE_EXAMPLES_PENDING.contains(&name.as_str()) {
                files.push(name);
            }
        }
    }
    files.sort();
    assert!(
        files.iter().any(|f| f == "host/warp.rs"),
        "the walk missed a file in a subfolder"
    );
    let missing: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let src = std::fs::read_to_string(dir.join(f)).unwrap();
            items_without_examples(&src)
                .into_iter()
                .map(move |m| format!("device/src/{f}:{m}"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} public items of berth-gpu-device have no example in their doc comment (a ``` block):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_example_check_finds_items_and_their_examples() {
    let src = r#"
/// Documented.
///
/// ```
/// assert!(true);
/// ```
pub fn with_example() {}
/// No example.
#[inline]
pub const unsafe fn without() {}
/// A trait.
///
/// ```
/// ```
pub trait T {
    /// A method.
    fn method(self);
    #[doc(hidden)]
    fn hidden(self);
}
pub struct S {
    /// A field.
    pub field: u32,
}
pub(crate) fn internal() {}
mod private {
    /// Private.
    pub fn inside() {}
}
axes! {
    /// Generated.
    idx_x => a, b, 0;
    /// Generated, with an example.
    ///
    /// ```
    /// ```
    idx_y => a, b, 1;
}
/// A template's method, its example built per expansion.
#[doc = example!(slice, $t, "5", "v.load(0);")]
pub fn load(&self) {}
/// An exported macro.
#[macro_export]
macro_rules! m {
    () => {};
}
#[cfg(test)]
mod tests {
    pub fn in_tests() {}
}
"#;
    assert_eq!(
        items_without_examples(src),
        [
            "10: fn without",
            "17: fn method",
            "21: struct S",
            "32: idx_x (generated)",
            "44: macro m"
        ]
    );
}

/// The body of `pub fn name` in `text`: the lines after the one that opens it (ending in ` {`)
/// up to the `}` that closes it at the start of a line, as rustfmt lays out an item at the top
/// level (a Rust file's or a Markdown code block's).
fn fn_body<'t>(text: &'t str, name: &str) -> &'t str {
    let at = text
        .find(&format!("pub fn {name}("))
        .unwrap_or_else(|| panic!("no `pub fn {name}`"));
    let rest = &text[at..];
    let open = rest.find(" {\n").expect("the body opens") + " {\n".len();
    let len = rest[open..].find("\n}\n").expect("the body closes");
    &rest[open..open + len]
}

/// The kernel `docs/hot-tier.md` shows written the plain way (`bag_sum`) is the one
/// `features --bag` times as the plain loop (`embedding_bag_plain`), line for line.
#[test]
fn the_hot_tier_docs_plain_bag_kernel_is_the_one_timed() {
    let read = |path: &str| std::fs::read_to_string(workspace_root().join(path)).unwrap();
    let (doc, lib) = (read("docs/hot-tier.md"), read("examples/src/lib.rs"));
    let shown = fn_body(&doc, "bag_sum");
    assert!(
        shown.contains("table.row("),
        "not the kernel's body:\n{shown}"
    );
    assert_eq!(
        shown,
        fn_body(&lib, "embedding_bag_plain"),
        "docs/hot-tier.md's `bag_sum` and examples/src/lib.rs's `embedding_bag_plain` differ"
    );
}

#[test]
fn fn_body_is_the_text_between_the_braces() {
    let src = "pub fn f(\n    a: u32,\n) {\n    let b = [a];\n    if a > 0 {\n    }\n}\n";
    assert_eq!(fn_body(src, "f"), "    let b = [a];\n    if a > 0 {\n    }");
}
