//! Shared memory in its address space.
//!
//! A Rust static cannot live in PTX `.shared`, so `shared_array!` declares an ordinary static
//! placed in the section `berth:shared` ([`berth_abi::SHARED_SECTION`]); here it moves to
//! address space 3 (with no initialiser) and every use goes through an `addrspacecast`, as
//! clang writes `__shared__` variables. LLVM's address-space inference then emits
//! `ld.shared`/`st.shared`/`atom.shared` for the accesses. The dynamic array
//! ([`berth_abi::DYNAMIC_SHARED`]) becomes an `.extern .shared` array likewise. A shared
//! static whose definition is in a form this does not know is an error naming it: the kernels
//! using it would otherwise share one global buffer between all blocks.

use super::module::{Item, Module, is_ident_byte, section};
use super::{RewriteError, find_word};
use berth_abi::{DYNAMIC_SHARED, Section};
use std::collections::HashSet;

/// Move the shared statics to address space 3 and cast their uses: their names.
pub(super) fn apply(m: &mut Module) -> Result<Vec<String>, RewriteError> {
    let shared: HashSet<String> = m
        .globals()
        .filter(|g| {
            g.name == DYNAMIC_SHARED
                || section(&g.line).and_then(Section::parse) == Some(Ok(Section::SharedArray))
        })
        .map(|g| g.name.clone())
        .collect();
    if shared.is_empty() {
        return Ok(Vec::new());
    }
    let mut moved = Vec::new();
    for item in &mut m.items {
        match item {
            Item::Global(g) if shared.contains(&g.name) => {
                g.line =
                    shared_definition(&g.line).ok_or_else(|| RewriteError::SharedNotMoved {
                        name: g.name.clone(),
                        line: g.line.clone(),
                    })?;
                moved.push(g.name.clone());
            }
            // Every other line that names one: globals' initialisers, functions, metadata.
            Item::Global(g) => g.line = cast_shared_uses(&g.line, &shared),
            Item::Function(f) => {
                for l in std::iter::once(&mut f.header).chain(f.body.iter_mut()) {
                    *l = cast_shared_uses(l, &shared);
                }
            }
            Item::Other(l) => *l = cast_shared_uses(l, &shared),
        }
    }
    Ok(moved)
}

/// A shared static's definition in address space 3: no initialiser (shared memory has none),
/// no section, at least 16-byte alignment kept from the static. `None` for a line that is not
/// a global's definition or declaration in a form this knows.
fn shared_definition(line: &str) -> Option<String> {
    let (head, tail) = line.split_once(" = ")?;
    // `@x = [linkage] [unnamed_addr] global <ty> <init>, section "…", align N`
    let mut words: Vec<&str> = Vec::new();
    let mut rest = tail;
    let (i, kw) = ["global", "constant"]
        .into_iter()
        .find_map(|kw| find_word(rest, kw).map(|i| (i, kw)))?;
    for w in rest[..i].split_whitespace() {
        if w != "addrspace(3)" {
            words.push(w);
        }
    }
    rest = &rest[i + kw.len()..];
    let external = words.contains(&"external");
    // The type: up to the initialiser (defined) or the first comma (declared).
    let after: Vec<&str> = rest.split(", ").collect();
    let first = after[0].trim();
    if first.is_empty() {
        return None;
    }
    let ty = if external {
        first.to_owned()
    } else {
        type_prefix(first)
    };
    let align = after
        .iter()
        .find_map(|p| p.trim().strip_prefix("align "))
        .and_then(|a| a.trim().parse::<u32>().ok())
        .unwrap_or(1)
        .max(16);
    let linkage = words.join(" ");
    let init = if external { "" } else { " undef" };
    Some(
        format!("{head} = {linkage} addrspace(3) global {ty}{init}, align {align}")
            .replace("=  addrspace", "= addrspace"),
    )
}

/// The type at the start of `s` (`[1024 x i8] undef` → `[1024 x i8]`), brackets balanced.
fn type_prefix(s: &str) -> String {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '{' | '<' | '(' => depth += 1,
            ']' | '}' | '>' | ')' => depth -= 1,
            ' ' if depth == 0 => return s[..i].to_owned(),
            _ => {}
        }
    }
    s.to_owned()
}

/// Every use of a shared global (`ptr @name`, `ptr nonnull @name`, inside constant
/// expressions) becomes a generic pointer cast from the shared space.
fn cast_shared_uses(line: &str, shared: &HashSet<String>) -> String {
    if !line.contains('@') {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len() + 64);
    let mut rest = line;
    while let Some(i) = rest.find('@') {
        let name_start = i + 1;
        let name_len = rest[name_start..]
            .bytes()
            .take_while(|&b| is_ident_byte(b))
            .count();
        let name = &rest[name_start..name_start + name_len];
        out.push_str(&rest[..i]);
        if shared.contains(name) {
            out.push_str(&format!("addrspacecast (ptr addrspace(3) @{name} to ptr)"));
        } else {
            out.push_str(&rest[i..name_start + name_len]);
        }
        rest = &rest[name_start + name_len..];
    }
    out.push_str(rest);
    out
}
