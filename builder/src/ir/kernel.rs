//! Per-kernel attributes, and the thread-index ranges a declared block shape gives.
//!
//! `#[gpu_kernel(..)]` writes what the entry needs into the entry's section name
//! ([`berth_abi::Section::Attributes`], `berth:reqntid=16,16,1;nocontract`); it becomes the
//! function attribute `"nvvm.reqntid"` (PTX `.reqntid`, and thread-index ranges the optimiser
//! uses to drop bounds checks), `"nvvm.minctasm"` (PTX `.minnctapersm`: blocks one SM must
//! hold, which bounds the registers ptxas gives each thread) and the opt-out of contraction.
//!
//! In a kernel with a declared block shape, every read of the thread index or block size gets
//! its exact range (`tid.x` in `0..x`, `ntid.x` = x), so the optimiser can prove indices
//! derived from them in bounds (LLVM's own range pass bounds each axis only by the total). A
//! read in a form this does not know fails the build naming the kernel, rather than leave the
//! kernel without its ranges.

use super::module::{Module, section};
use super::{RewriteError, find_word, not_applied};
use berth_abi::{KernelAttrs, Section};

/// Turn every kernel section into LLVM attributes: the kernels that had one, with what it said.
pub(super) fn attributes(m: &mut Module) -> Result<Vec<(String, KernelAttrs)>, RewriteError> {
    let mut out = Vec::new();
    for f in m.functions_mut() {
        let attrs = match section(&f.header).and_then(Section::parse) {
            None | Some(Ok(Section::SharedArray | Section::ParamAlign(_))) => continue,
            Some(Err(unknown)) => {
                return Err(RewriteError::UnknownAttribute {
                    kernel: f.name.clone(),
                    attr: unknown.0.to_owned(),
                });
            }
            Some(Ok(Section::Attributes(attrs))) => attrs,
        };
        if !f.is_kernel() {
            // The attributes are for an entry: elsewhere they would be lost.
            return Err(not_applied(&f.name, "kernel attributes", &f.header));
        }
        let mut llvm = String::new();
        if let Some([x, y, z]) = attrs.block {
            llvm.push_str(&format!(" \"nvvm.reqntid\"=\"{x},{y},{z}\""));
        }
        if let Some(n) = attrs.min_blocks {
            llvm.push_str(&format!(" \"nvvm.minctasm\"=\"{n}\""));
        }
        f.header = replace_section(&f.header, &llvm);
        out.push((f.name.clone(), attrs));
    }
    Ok(out)
}

/// `line` with its ` section "…"` replaced by `with`.
fn replace_section(line: &str, with: &str) -> String {
    let start = line.find(" section \"").expect("the line has a section");
    let after = start + " section \"".len();
    let end = after + line[after..].find('"').expect("a closed section name") + 1;
    format!("{}{with}{}", &line[..start], &line[end..])
}

/// Give the thread-index reads of each kernel with a declared block shape their exact ranges:
/// how many reads were given one.
pub(super) fn thread_ranges(
    m: &mut Module,
    kernels: &[(String, KernelAttrs)],
) -> Result<usize, RewriteError> {
    let mut ranged = 0;
    for f in m.functions_mut() {
        let Some(block) = kernels
            .iter()
            .find(|(k, _)| *k == f.name)
            .and_then(|(_, a)| a.block)
        else {
            continue;
        };
        for line in &mut f.body {
            let r = ranged_line(line, block)
                .ok_or_else(|| not_applied(&f.name, "thread-index range", line))?;
            ranged += usize::from(r != *line);
            *line = r;
        }
    }
    Ok(ranged)
}

/// The intrinsics reading a special register (`@llvm.nvvm.read.ptx.sreg.tid.x`).
const SREG: &str = "@llvm.nvvm.read.ptx.sreg.";

/// In a kernel with a required block shape, reads of the thread index and block size get
/// their exact ranges (`tid.x` in `0..x`, `ntid.x` = x), so the optimiser can prove indices
/// derived from them in bounds. (LLVM's own range pass bounds each axis only by the total.)
/// Return attributes between `call` and the type (`noundef`, an existing `range(..)`, which
/// is replaced) are kept. `None` for a read of `tid`/`ntid` in a form this does not know,
/// which the caller reports rather than leave the kernel unranged.
fn ranged_line(line: &str, [x, y, z]: [u32; 3]) -> Option<String> {
    // Only instructions (indented, inside a function), not declarations.
    let Some(name_at) = line.find(SREG).filter(|_| line.starts_with(' ')) else {
        return Some(line.to_owned());
    };
    let reg = &line[name_at + SREG.len()..];
    let dim = |axis: Option<&str>| match axis.and_then(|a| a.get(..1)) {
        Some("x") => Some(x),
        Some("y") => Some(y),
        Some("z") => Some(z),
        _ => None,
    };
    let (lo, hi) = if let Some(axis) = reg.strip_prefix("tid.") {
        (0, dim(Some(axis))?)
    } else if let Some(axis) = reg.strip_prefix("ntid.") {
        let n = dim(Some(axis))?;
        (n, n + 1)
    } else {
        // Another special register (`ctaid`, `laneid`, …): no range to give.
        return Some(line.to_owned());
    };
    // `… = [tail ]call [attributes ]i32 @llvm…`: the attributes lie between `call` and the
    // type.
    let at = name_at.checked_sub("i32 ".len())?;
    if &line[at..name_at] != "i32 " {
        return None;
    }
    let head = &line[..at];
    let call = find_word(head, "call")?;
    let (before, attrs) = head.split_at(call + "call".len());
    let mut kept: Vec<&str> = Vec::new();
    let mut rest = attrs.trim();
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("range(") {
            // An existing range: replaced by the exact one.
            let close = tail.find(')')?;
            rest = tail[close + 1..].trim_start();
            continue;
        }
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        if word.contains('(') || word.starts_with('#') || word.starts_with('@') {
            // An attribute with arguments, or a group, this does not know.
            return None;
        }
        kept.push(word);
        rest = rest[end..].trim_start();
    }
    let mut attrs = kept.join(" ");
    if !attrs.is_empty() {
        attrs.push(' ');
    }
    Some(format!(
        "{before} {attrs}range(i32 {lo}, {hi}) {}",
        &line[at..]
    ))
}
