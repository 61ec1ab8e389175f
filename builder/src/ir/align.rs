//! Pointer parameters declared with their target's alignment.
//!
//! rustc gives a kernel's raw-pointer parameters no `align` attribute, so PTX declares them
//! `.ptr .align 1` and a 16-byte element is read in pieces. Each entry carries a static in the
//! section `berth:palign:<entry>` ([`berth_abi::Section::ParamAlign`]) whose bytes are, per
//! parameter, the alignment of what it points to (0 for other parameters); the matching `ptr`
//! parameters get `align N` (PTX `.ptr .align N`, and LLVM may then use vector loads), and the
//! static is dropped. A list whose entry is not defined here, or does not match its
//! parameters, is an error naming the kernel.

use super::module::{Item, Module, section};
use super::{RewriteError, not_applied};
use berth_abi::Section;
use std::collections::HashSet;

/// The rewrite's name in errors.
const REWRITE: &str = "parameter alignment";

/// Apply every entry's alignment list: the entries and their lists, in module order.
pub(super) fn apply(m: &mut Module) -> Result<Vec<(String, Vec<u8>)>, RewriteError> {
    // The lists: by entry, and their statics' names (to drop them).
    let mut lists: Vec<(String, Vec<u8>)> = Vec::new();
    let mut statics: HashSet<String> = HashSet::new();
    for g in m.globals() {
        let Some(Ok(Section::ParamAlign(entry))) = section(&g.line).and_then(Section::parse) else {
            continue;
        };
        let bytes = list_bytes(&g.line).ok_or_else(|| not_applied(entry, REWRITE, &g.line))?;
        statics.insert(g.name.clone());
        lists.push((entry.to_owned(), bytes));
    }
    if lists.is_empty() {
        return Ok(lists);
    }
    let mut applied = Vec::with_capacity(lists.len());
    for (entry, bytes) in &lists {
        let f = m
            .functions_mut()
            .find(|f| &f.name == entry)
            .ok_or_else(|| not_applied(entry, REWRITE, "(the module defines no such entry)"))?;
        f.header = param_aligns(&f.header, entry, bytes)?;
        applied.push((entry.clone(), bytes.clone()));
    }
    m.retain_globals(|g| !statics.contains(&g.name));
    for item in &mut m.items {
        if let Item::Global(g) = item
            && (g.name == "llvm.used" || g.name == "llvm.compiler.used")
        {
            g.line = without_used(&g.line, &statics).unwrap_or_default();
        }
    }
    // `@llvm.used` left empty goes.
    m.retain_globals(|g| !g.line.is_empty());
    Ok(applied)
}

/// `@x = internal constant [3 x i8] c"\10\00\04", section "berth:palign:k", align 1`: the
/// bytes.
fn list_bytes(line: &str) -> Option<Vec<u8>> {
    // The initialiser follows the type `[N x i8]`.
    let ty_at = line.find(" x i8] ")?;
    let count: usize = line[..ty_at].rsplit('[').next()?.trim().parse().ok()?;
    let init = &line[ty_at + " x i8] ".len()..];
    let bytes = if init.starts_with("zeroinitializer") {
        vec![0; count]
    } else if let Some(c) = init.strip_prefix("c\"") {
        c_string(&c[..c.find('"')?])?
    } else if let Some(list) = init.strip_prefix('[') {
        list[..list.find(']')?]
            .split(',')
            .map(|e| e.trim().strip_prefix("i8 ")?.trim().parse::<i16>().ok())
            .map(|v| v.map(|v| v as u8))
            .collect::<Option<Vec<u8>>>()?
    } else {
        return None;
    };
    (bytes.len() == count).then_some(bytes)
}

/// The bytes of an LLVM `c"…"` string: printable characters as themselves, others as `\XX`.
fn c_string(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
                continue;
            }
            out.push(u8::from_str_radix(s.get(i + 1..i + 3)?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// `@llvm.used` without the listed globals (`None` when nothing is left).
fn without_used(line: &str, drop: &HashSet<String>) -> Option<String> {
    let (Some(open), Some(close)) = (line.find("] [").map(|i| i + 3), line.rfind(']')) else {
        return Some(line.to_owned());
    };
    let kept: Vec<&str> = line[open..close]
        .split(", ")
        .filter(|e| {
            let name = e.trim().trim_start_matches("ptr ").trim_start_matches('@');
            !drop.contains(name)
        })
        .collect();
    if kept.is_empty() {
        return None;
    }
    let head = &line[..line.find('[')?];
    Some(format!(
        "{head}[{} x ptr] [{}]{}",
        kept.len(),
        kept.join(", "),
        &line[close + 1..]
    ))
}

/// The `define` line of `entry` with `align N` on each `ptr` parameter whose byte is N > 1.
fn param_aligns(line: &str, entry: &str, bytes: &[u8]) -> Result<String, RewriteError> {
    let open = line
        .find(&format!("@{entry}("))
        .map(|i| i + entry.len() + 2);
    let open = open.or_else(|| {
        line.find(&format!("@\"{entry}\"("))
            .map(|i| i + entry.len() + 4)
    });
    let Some(open) = open else {
        return Err(not_applied(entry, REWRITE, line));
    };
    // The parameter list, split at top-level commas.
    let mut depth = 0i32;
    let mut params: Vec<(usize, usize)> = Vec::new();
    let mut start = open;
    let mut close = line.len();
    for (i, c) in line[open..].char_indices().map(|(i, c)| (i + open, c)) {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' if depth == 0 => {
                close = i;
                break;
            }
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                params.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !line[start..close].trim().is_empty() {
        params.push((start, close));
    }
    if params.len() != bytes.len() {
        return Err(RewriteError::ParamAlignMismatch {
            kernel: entry.to_owned(),
            expected: bytes.len(),
            found: params.len(),
        });
    }
    let mut out = String::with_capacity(line.len() + 16 * bytes.len());
    out.push_str(&line[..open]);
    for (k, (&(s, e), &a)) in params.iter().zip(bytes).enumerate() {
        if k > 0 {
            out.push(',');
        }
        let p = &line[s..e];
        let body = p.trim_start();
        if a > 1 && body.starts_with("ptr ") && !body.contains("byval") {
            let lead = &p[..p.len() - body.len()];
            let rest = &body["ptr ".len()..];
            let existing = rest
                .split(' ')
                .collect::<Vec<_>>()
                .windows(2)
                .find(|w| w[0] == "align")
                .and_then(|w| w[1].parse::<u32>().ok());
            match existing {
                Some(n) if n >= u32::from(a) => out.push_str(p),
                Some(n) => {
                    out.push_str(lead);
                    out.push_str("ptr ");
                    out.push_str(&rest.replacen(&format!("align {n}"), &format!("align {a}"), 1));
                }
                None => out.push_str(&format!("{lead}ptr align {a} {rest}")),
            }
        } else {
            out.push_str(p);
        }
    }
    out.push_str(&line[close..]);
    Ok(out)
}
