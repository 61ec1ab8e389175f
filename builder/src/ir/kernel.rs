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
//!
//! In every kernel, declared shape or not, each read of the thread or block index is followed
//! by an assumption of what the PTX ISA guarantees: `tid.x < ntid.x`, `ctaid.x < nctaid.x`.
//! Where the kernel checks its block shape itself (`if block::dim_x() != 32 { fail(..) }`) the
//! optimiser then knows the thread index's range past the check, as a declared shape would
//! tell it, and drops the bounds checks it proves.

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

/// After each read of `tid.{x,y,z}` or `ctaid.{x,y,z}` in any function, an `llvm.assume` that
/// it is less than `ntid`/`nctaid` of the same axis (true of every thread the GPU runs); the
/// intrinsics it calls are declared if the module does not yet. How many reads were bounded.
pub(super) fn index_bounds(m: &mut Module) -> usize {
    let mut n = 0;
    for f in m.functions_mut() {
        let mut body = Vec::with_capacity(f.body.len());
        for line in std::mem::take(&mut f.body) {
            let bound = index_read(&line).map(|(v, l, a)| (v.to_owned(), l, a.to_owned()));
            body.push(line);
            if let Some((value, limit, axis)) = bound {
                n += 1;
                let indent = "  ";
                body.push(format!(
                    "{indent}%berth.limit.{n} = call i32 {SREG}{limit}.{axis}()"
                ));
                body.push(format!(
                    "{indent}%berth.below.{n} = icmp ult i32 {value}, %berth.limit.{n}"
                ));
                body.push(format!(
                    "{indent}call void @llvm.assume(i1 %berth.below.{n})"
                ));
            }
        }
        f.body = body;
    }
    if n > 0 {
        let declared = m.declared_functions();
        let mut wanted = vec![(
            "llvm.assume".to_owned(),
            "declare void @llvm.assume(i1 noundef)".to_owned(),
        )];
        for limit in ["ntid", "nctaid"] {
            for axis in ["x", "y", "z"] {
                let name = format!("llvm.nvvm.read.ptx.sreg.{limit}.{axis}");
                let line = format!("declare noundef i32 @{name}()");
                wanted.push((name, line));
            }
        }
        for (name, line) in wanted {
            if !declared.contains(&name) {
                m.items.push(super::module::Item::Other(line));
            }
        }
    }
    n
}

/// `(value, limit register, axis)` of a line that reads `tid` or `ctaid` into a value:
/// `  %5 = tail call range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x()` gives
/// `("%5", "ntid", "x")`.
fn index_read(line: &str) -> Option<(&str, &'static str, &str)> {
    let at = line.find(SREG).filter(|_| line.starts_with(' '))?;
    let rest = &line[at + SREG.len()..];
    let (limit, rest) = if let Some(r) = rest.strip_prefix("tid.") {
        ("ntid", r)
    } else if let Some(r) = rest.strip_prefix("ctaid.") {
        ("nctaid", r)
    } else {
        return None;
    };
    let axis = rest.get(..1).filter(|a| matches!(*a, "x" | "y" | "z"))?;
    if !rest[1..].starts_with("()") || !line[..at].ends_with("i32 ") {
        return None;
    }
    let (value, call) = line.trim_start().split_once(" = ")?;
    (value.starts_with('%') && find_word(call, "call").is_some()).then_some((value, limit, axis))
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
