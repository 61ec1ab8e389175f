//! Rewrites of the whole kernel program's LLVM IR (text form) before it is optimised and
//! compiled to PTX: what rustc cannot express but nvcc's front end does.
//!
//! - **Contraction.** `a * b + c` on floats fuses into one FMA in nvcc (`-fmad=true`);
//!   rustc marks no float operation as contractible, and the NVPTX backend then keeps
//!   `mul.rn` + `add.rn`. Every `fmul`/`fadd`/`fsub` gets the `contract` flag, except in
//!   kernels that opted out and when the crate turned it off.
//! - **Shared memory in its address space.** A Rust static cannot live in PTX `.shared`, so
//!   `shared_array!` declares an ordinary static placed in the section `berth:shared`; here it
//!   moves to address space 3 (with no initialiser) and every use goes through an
//!   `addrspacecast`, as clang writes `__shared__` variables. LLVM's address-space inference
//!   then emits `ld.shared`/`st.shared`/`atom.shared` for the accesses. The dynamic array
//!   `__berth_dynamic_shared` becomes an `.extern .shared` array likewise.
//! - **Per-kernel attributes.** `#[gpu_kernel(..)]` writes what the entry needs into the
//!   entry's section name (`berth:reqntid=16,16,1;nocontract`); it becomes the function
//!   attribute `"nvvm.reqntid"` (PTX `.reqntid`, and thread-index ranges the optimiser uses to
//!   drop bounds checks), `"nvvm.minctasm"` (PTX `.minnctapersm`: blocks one SM must hold,
//!   which bounds the registers ptxas gives each thread) and the opt-out of contraction.
//! - **Pointer parameters declared with their target's alignment.** rustc gives a kernel's
//!   raw-pointer parameters no `align` attribute, so PTX declares them `.ptr .align 1` and a
//!   16-byte element is read in pieces. Each entry carries a static in the section
//!   `berth:palign:<entry>` whose bytes are, per parameter, the alignment of what it points to
//!   (0 for other parameters); the matching `ptr` parameters get `align N` (PTX
//!   `.ptr .align N`, and LLVM may then use vector loads), and the static is dropped.

use std::collections::HashSet;

/// The section that marks a static as block-shared memory.
pub const SHARED_SECTION: &str = "berth:shared";
/// The name of the dynamic shared-memory array.
pub const DYNAMIC_SHARED: &str = "__berth_dynamic_shared";
/// Prefix of a kernel entry's section carrying its attributes.
pub const KERNEL_SECTION_PREFIX: &str = "berth:";
/// Prefix of the section of the static listing an entry's parameter alignments.
pub const PARAM_ALIGN_SECTION_PREFIX: &str = "berth:palign:";

/// What to change in the module.
#[derive(Debug, Clone, Copy)]
pub struct Rewrite {
    /// Mark float multiplies and adds contractible (outside kernels that opted out).
    pub contract: bool,
}

/// What a rewrite found, for messages and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Statics moved to shared memory.
    pub shared: Vec<String>,
    /// Kernels given a required block shape, with it.
    pub reqntid: Vec<(String, [u32; 3])>,
    /// Kernels given a number of blocks one SM must hold at once, with it.
    pub minctasm: Vec<(String, u32)>,
    /// Kernels whose arithmetic was left uncontracted.
    pub exact: Vec<String>,
    /// Float operations marked contractible.
    pub contracted: usize,
    /// Kernels whose pointer parameters were given an alignment, with the alignment of each
    /// parameter (0: not a pointer to data).
    pub param_align: Vec<(String, Vec<u8>)>,
}

/// Why a module could not be rewritten.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RewriteError {
    /// A kernel section names an attribute this builder does not know.
    #[error(
        "kernel `{kernel}` carries the attribute `{attr}`, unknown to this berth-build (are berth and berth-build the same version?)"
    )]
    UnknownAttribute {
        /// The kernel.
        kernel: String,
        /// The attribute text.
        attr: String,
    },
    /// A kernel's list of parameter alignments does not match its parameters.
    #[error(
        "kernel `{kernel}` has {found} parameters in LLVM IR but its alignment list names {expected} \
         (are berth and berth-build the same version?)"
    )]
    ParamAlignMismatch {
        /// The kernel.
        kernel: String,
        /// Parameters the list names.
        expected: usize,
        /// Parameters the entry has.
        found: usize,
    },
}

/// Apply the rewrites to a module in LLVM's text form.
pub fn rewrite(ir: &str, opts: Rewrite) -> Result<(String, Report), RewriteError> {
    let mut report = Report::default();
    // First pass: the shared statics, so their uses can be rewritten wherever they appear.
    let mut shared: HashSet<String> = HashSet::new();
    for line in ir.lines() {
        if let Some(name) = global_name(line)
            && (line.contains(&format!("section \"{SHARED_SECTION}\"")) || name == DYNAMIC_SHARED)
        {
            shared.insert(name.to_owned());
        }
    }
    // The parameter-alignment statics: by entry, and their own names (to drop them).
    let mut aligns: Vec<(String, Vec<u8>)> = Vec::new();
    let mut align_statics: HashSet<String> = HashSet::new();
    for line in ir.lines() {
        if let Some(name) = global_name(line)
            && let Some((entry, bytes)) = param_align_static(line)
        {
            align_statics.insert(name.to_owned());
            aligns.push((entry, bytes));
        }
    }
    let mut out = String::with_capacity(ir.len() + ir.len() / 8);
    let mut exact_fn = false;
    let mut block: Option<[u32; 3]> = None;
    for line in ir.lines() {
        if let Some(name) = global_name(line)
            && shared.contains(name)
        {
            out.push_str(&shared_definition(line));
            out.push('\n');
            report.shared.push(name.to_owned());
            continue;
        }
        if let Some(name) = global_name(line) {
            if align_statics.contains(name) {
                continue;
            }
            if (name == "llvm.used" || name == "llvm.compiler.used") && !align_statics.is_empty() {
                if let Some(l) = without_used(line, &align_statics) {
                    out.push_str(&l);
                    out.push('\n');
                }
                continue;
            }
        }
        if let Some(layout) = line.strip_prefix("target datalayout = \"") {
            // 32-bit pointers for the shared, constant and local spaces (`-nvptx-short-ptr`,
            // nvcc's default): shared addresses fit one register, not two.
            let layout = layout.trim_end_matches('"');
            out.push_str(&format!(
                "target datalayout = \"{layout}-p3:32:32-p4:32:32-p5:32:32\"\n"
            ));
            continue;
        }
        let mut line = if shared.is_empty() {
            line.to_owned()
        } else {
            cast_shared_uses(line, &shared)
        };
        if line.starts_with("define ") {
            if let Some((entry, bytes)) = aligns.iter().find(|(e, _)| defines(&line, e)) {
                line = param_aligns(&line, entry, bytes)?;
                report.param_align.push((entry.clone(), bytes.clone()));
            }
            let (l, attrs) = kernel_attributes(&line)?;
            line = l;
            exact_fn = false;
            block = None;
            if let Some((name, attrs)) = attrs {
                block = attrs.reqntid;
                if let Some(r) = attrs.reqntid {
                    report.reqntid.push((name.clone(), r));
                }
                if let Some(n) = attrs.minctasm {
                    report.minctasm.push((name.clone(), n));
                }
                if attrs.exact {
                    exact_fn = true;
                    report.exact.push(name);
                }
            }
        } else {
            if opts.contract && !exact_fn {
                let (l, n) = contract(&line);
                line = l;
                report.contracted += n;
            }
            if let Some(b) = block {
                line = thread_ranges(&line, b);
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    Ok((out, report))
}

/// `@x = internal constant [3 x i8] c"\10\00\04", section "berth:palign:k", align 1`: the
/// entry `k` and the bytes.
fn param_align_static(line: &str) -> Option<(String, Vec<u8>)> {
    let marker = format!("section \"{PARAM_ALIGN_SECTION_PREFIX}");
    let at = line.find(&marker)?;
    let rest = &line[at + marker.len()..];
    let entry = rest[..rest.find('"')?].to_owned();
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
    (bytes.len() == count).then_some((entry, bytes))
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

/// Whether a `define` line defines `@name`.
fn defines(line: &str, name: &str) -> bool {
    line.contains(&format!(" @{name}(")) || line.contains(&format!(" @\"{name}\"("))
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
        return Ok(line.to_owned());
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

/// The name of the global a line defines or declares (`@name = ...`), if it does.
fn global_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('@')?;
    let end = rest.find(" = ")?;
    let name = &rest[..end];
    (!name.is_empty() && name.bytes().all(is_ident_byte)).then_some(name)
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$')
}

/// A shared static's definition in address space 3: no initialiser (shared memory has none),
/// no section, at least 16-byte alignment kept from the static.
fn shared_definition(line: &str) -> String {
    let (head, tail) = line.split_once(" = ").expect("a global definition");
    // `@x = [linkage] [unnamed_addr] global <ty> <init>, section "…", align N`
    let mut words: Vec<&str> = Vec::new();
    let mut rest = tail;
    let Some((i, kw)) = ["global", "constant"]
        .into_iter()
        .find_map(|kw| find_word(rest, kw).map(|i| (i, kw)))
    else {
        return line.to_owned();
    };
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
    format!("{head} = {linkage} addrspace(3) global {ty}{init}, align {align}")
        .replace("=  addrspace", "= addrspace")
}

/// The byte offset of `word` as a whole word in `s`.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(i) = s[from..].find(word).map(|i| i + from) {
        let before = i == 0 || bytes[i - 1] == b' ';
        let after = bytes.get(i + word.len()).is_none_or(|&b| b == b' ');
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
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

/// Attributes a kernel entry carries in its section.
#[derive(Debug, Default, PartialEq, Eq)]
struct KernelAttrs {
    reqntid: Option<[u32; 3]>,
    /// Blocks one SM must hold at once (`.minnctapersm`).
    minctasm: Option<u32>,
    exact: bool,
}

/// A `define` line with its berth section replaced by LLVM attributes, and what it said.
#[allow(clippy::type_complexity)]
fn kernel_attributes(line: &str) -> Result<(String, Option<(String, KernelAttrs)>), RewriteError> {
    let marker = format!(" section \"{KERNEL_SECTION_PREFIX}");
    let Some(start) = line.find(&marker) else {
        return Ok((line.to_owned(), None));
    };
    let body_start = start + marker.len();
    let Some(len) = line[body_start..].find('"') else {
        return Ok((line.to_owned(), None));
    };
    let spec = &line[body_start..body_start + len];
    let name = line
        .split_once('@')
        .map(|(_, r)| r.split('(').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let mut attrs = KernelAttrs::default();
    for part in spec.split(';').filter(|p| !p.is_empty()) {
        if let Some(dims) = part.strip_prefix("reqntid=") {
            let v: Vec<u32> = dims.split(',').filter_map(|d| d.parse().ok()).collect();
            if v.len() != 3 {
                return Err(RewriteError::UnknownAttribute {
                    kernel: name,
                    attr: part.to_owned(),
                });
            }
            attrs.reqntid = Some([v[0], v[1], v[2]]);
        } else if let Some(n) = part.strip_prefix("minctasm=") {
            attrs.minctasm = Some(n.parse().map_err(|_| RewriteError::UnknownAttribute {
                kernel: name.clone(),
                attr: part.to_owned(),
            })?);
        } else if part == "nocontract" {
            attrs.exact = true;
        } else {
            return Err(RewriteError::UnknownAttribute {
                kernel: name,
                attr: part.to_owned(),
            });
        }
    }
    let mut replacement = match attrs.reqntid {
        Some([x, y, z]) => format!(" \"nvvm.reqntid\"=\"{x},{y},{z}\""),
        None => String::new(),
    };
    if let Some(n) = attrs.minctasm {
        replacement.push_str(&format!(" \"nvvm.minctasm\"=\"{n}\""));
    }
    let mut l = String::with_capacity(line.len());
    l.push_str(&line[..start]);
    l.push_str(&replacement);
    l.push_str(&line[body_start + len + 1..]);
    Ok((l, Some((name, attrs))))
}

/// `%x = fmul float %a, %b` → `%x = fmul contract float %a, %b` (also `fadd`, `fsub`, vectors,
/// instructions that already carry flags).
fn contract(line: &str) -> (String, usize) {
    for op in ["fmul", "fadd", "fsub"] {
        let pat = format!("= {op} ");
        if let Some(i) = line.find(&pat) {
            let after = &line[i + pat.len()..];
            if after.starts_with("contract ") || after.starts_with("fast ") {
                return (line.to_owned(), 0);
            }
            let mut l = String::with_capacity(line.len() + 9);
            l.push_str(&line[..i + pat.len()]);
            l.push_str("contract ");
            l.push_str(after);
            return (l, 1);
        }
    }
    (line.to_owned(), 0)
}

/// In a kernel with a required block shape, reads of the thread index and block size get
/// their exact ranges (`tid.x` in `0..x`, `ntid.x` = x), so the optimiser can prove indices
/// derived from them in bounds. (LLVM's own range pass bounds each axis only by the total.)
fn thread_ranges(line: &str, [x, y, z]: [u32; 3]) -> String {
    const SREG: &str = "i32 @llvm.nvvm.read.ptx.sreg.";
    let Some(at) = line.find(SREG) else {
        return line.to_owned();
    };
    let reg = &line[at + SREG.len()..];
    let dim = |axis: &str| match axis {
        "x" => Some(x),
        "y" => Some(y),
        "z" => Some(z),
        _ => None,
    };
    let range = if let Some(axis) = reg.strip_prefix("tid.") {
        dim(&axis[..1]).map(|n| (0, n))
    } else if let Some(axis) = reg.strip_prefix("ntid.") {
        dim(&axis[..1]).map(|n| (n, n + 1))
    } else {
        None
    };
    match range {
        Some((lo, hi)) if line[..at].trim_end().ends_with("call") => {
            format!("{}range(i32 {lo}, {hi}) {}", &line[..at], &line[at..])
        }
        _ => line.to_owned(),
    }
}

/// Names of functions the module declares but does not define (`declare … @name(`).
pub fn declared_functions(ir: &str) -> Vec<String> {
    ir.lines()
        .filter(|l| l.starts_with("declare "))
        .filter_map(|l| {
            let at = l.find('@')?;
            let rest = &l[at + 1..];
            let end = rest.find('(')?;
            Some(rest[..end].trim_matches('"').to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = r#"@_RNvTILE = internal unnamed_addr global [1024 x i8] undef, section "berth:shared", align 4
@__berth_dynamic_shared = external global [0 x i8], align 1
@other = internal global [4 x i8] zeroinitializer, align 4

define ptx_kernel void @sgemm(ptr noundef %0, i64 %1) unnamed_addr #2 section "berth:reqntid=16,16,1;minctasm=3" {
start:
  %2 = getelementptr inbounds nuw float, ptr @_RNvTILE, i64 %1
  %3 = load float, ptr %2, align 4
  %t = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %d = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %4 = fmul float %3, %3
  %5 = fadd float %4, %3
  store float %5, ptr @__berth_dynamic_shared, align 4
  store float %5, ptr @other, align 4
  %6 = call float asm "ld $0, [$1];", "=r,l"(ptr nonnull @_RNvTILE)
  ret void
}

define ptx_kernel void @exact(ptr %0) unnamed_addr #2 section "berth:nocontract" {
  %2 = fmul float 1.0, 2.0
  %3 = fsub fast float %2, 1.0
  ret void
}

define internal float @helper(float %a) {
  %b = fmul <2 x float> %a, %a
  ret float %a
}
"#;

    #[test]
    fn shared_statics_move_to_address_space_3() {
        let (out, report) = rewrite(MODULE, Rewrite { contract: true }).unwrap();
        assert!(out.contains(
            "@_RNvTILE = internal unnamed_addr addrspace(3) global [1024 x i8] undef, align 16\n"
        ));
        assert!(
            out.contains(
                "@__berth_dynamic_shared = external addrspace(3) global [0 x i8], align 16\n"
            ),
            "{out}"
        );
        assert!(out.contains(
            "getelementptr inbounds nuw float, ptr addrspacecast (ptr addrspace(3) @_RNvTILE to ptr), i64 %1"
        ));
        assert!(out.contains(
            "store float %5, ptr addrspacecast (ptr addrspace(3) @__berth_dynamic_shared to ptr), align 4"
        ));
        assert!(out.contains("store float %5, ptr @other, align 4"));
        assert!(out.contains("(ptr nonnull addrspacecast (ptr addrspace(3) @_RNvTILE to ptr))"));
        assert_eq!(report.shared.len(), 2);
    }

    #[test]
    fn kernel_sections_become_attributes() {
        let (out, report) = rewrite(MODULE, Rewrite { contract: true }).unwrap();
        assert!(out.contains(
            "define ptx_kernel void @sgemm(ptr noundef %0, i64 %1) unnamed_addr #2 \"nvvm.reqntid\"=\"16,16,1\" \"nvvm.minctasm\"=\"3\" {"
        ));
        assert_eq!(report.minctasm, vec![("sgemm".to_owned(), 3)]);
        assert!(out.contains("define ptx_kernel void @exact(ptr %0) unnamed_addr #2 {"));
        assert!(!out.contains("section \"berth:"));
        assert_eq!(report.reqntid, vec![("sgemm".to_owned(), [16, 16, 1])]);
        assert!(
            out.contains("%t = tail call range(i32 0, 16) i32 @llvm.nvvm.read.ptx.sreg.tid.y()")
        );
        assert!(out.contains("%d = call range(i32 16, 17) i32 @llvm.nvvm.read.ptx.sreg.ntid.x()"));
        assert_eq!(report.exact, vec!["exact".to_owned()]);
    }

    #[test]
    fn float_arithmetic_is_contracted_outside_exact_kernels() {
        let (out, report) = rewrite(MODULE, Rewrite { contract: true }).unwrap();
        assert!(out.contains("%4 = fmul contract float %3, %3"));
        assert!(out.contains("%5 = fadd contract float %4, %3"));
        assert!(
            out.contains("%2 = fmul float 1.0, 2.0"),
            "exact kernel untouched"
        );
        assert!(out.contains("%b = fmul contract <2 x float> %a, %a"));
        assert_eq!(report.contracted, 3);
        let (off, report) = rewrite(MODULE, Rewrite { contract: false }).unwrap();
        assert!(off.contains("%4 = fmul float %3, %3"));
        assert_eq!(report.contracted, 0);
    }

    #[test]
    fn unknown_kernel_attributes_are_errors() {
        let m = "define ptx_kernel void @k() section \"berth:warp=3\" {\n}\n";
        assert_eq!(
            rewrite(m, Rewrite { contract: true }).unwrap_err(),
            RewriteError::UnknownAttribute {
                kernel: "k".into(),
                attr: "warp=3".into()
            }
        );
        let m = "define ptx_kernel void @k() section \"berth:minctasm=two\" {\n}\n";
        assert_eq!(
            rewrite(m, Rewrite { contract: true }).unwrap_err(),
            RewriteError::UnknownAttribute {
                kernel: "k".into(),
                attr: "minctasm=two".into()
            }
        );
    }

    #[test]
    fn pointer_parameters_get_their_alignment() {
        let m = r#"@llvm.used = appending global [3 x ptr] [ptr @_RNvA, ptr @__berth_panic_record, ptr @_RNvB], section "llvm.metadata"
@_RNvA = internal constant [4 x i8] c"\10\00\04\00", section "berth:palign:nbody", align 1
@_RNvB = internal constant [2 x i8] zeroinitializer, section "berth:palign:scalars", align 1
@_RNvC = internal constant [3 x i8] [i8 8, i8 0, i8 0], section "berth:palign:odd", align 1

define ptx_kernel void @nbody(ptr noundef readonly captures(none) %0, i64 noundef %1, ptr noundef align 2 %2, i64 %3) unnamed_addr #0 section "berth:reqntid=256,1,1" {
  ret void
}

define ptx_kernel void @scalars(float %0, ptr byval({ [4 x float] }) align 4 %1) unnamed_addr #0 {
  ret void
}

define ptx_kernel void @odd(ptr %0, i64 %1) unnamed_addr #0 {
  ret void
}
"#;
        let err = rewrite(m, Rewrite { contract: false }).unwrap_err();
        assert_eq!(
            err,
            RewriteError::ParamAlignMismatch {
                kernel: "odd".into(),
                expected: 3,
                found: 2
            }
        );
        let m = m.replace("[3 x i8] [i8 8, i8 0, i8 0]", "[2 x i8] [i8 8, i8 0]");
        let (out, report) = rewrite(&m, Rewrite { contract: false }).unwrap();
        assert!(out.contains(
            "define ptx_kernel void @nbody(ptr align 16 noundef readonly captures(none) %0, i64 noundef %1, ptr noundef align 4 %2, i64 %3) unnamed_addr #0 \"nvvm.reqntid\"=\"256,1,1\" {"
        ), "{out}");
        assert!(out.contains(
            "define ptx_kernel void @scalars(float %0, ptr byval({ [4 x float] }) align 4 %1) unnamed_addr #0 {"
        ));
        assert!(
            out.contains("define ptx_kernel void @odd(ptr align 8 %0, i64 %1) unnamed_addr #0 {")
        );
        assert!(!out.contains("berth:palign"), "{out}");
        assert!(out.contains(
            "@llvm.used = appending global [1 x ptr] [ptr @__berth_panic_record], section \"llvm.metadata\"\n"
        ), "{out}");
        assert_eq!(
            report.param_align,
            vec![
                ("nbody".to_owned(), vec![16, 0, 4, 0]),
                ("scalars".to_owned(), vec![0, 0]),
                ("odd".to_owned(), vec![8, 0]),
            ]
        );
        // Nothing left in `@llvm.used`: the line goes.
        let only = "@llvm.used = appending global [1 x ptr] [ptr @_RNvB], section \"llvm.metadata\"\n@_RNvB = internal constant [0 x i8] zeroinitializer, section \"berth:palign:k\", align 1\ndefine ptx_kernel void @k() {\n}\n";
        let (out, _) = rewrite(only, Rewrite { contract: false }).unwrap();
        assert_eq!(out, "define ptx_kernel void @k() {\n}\n");
    }

    #[test]
    fn declared_functions_are_listed() {
        let m =
            "declare float @__nv_expf(float)\ndeclare void @llvm.trap()\ndefine void @f() {\n}\n";
        assert_eq!(declared_functions(m), vec!["__nv_expf", "llvm.trap"]);
    }
}
