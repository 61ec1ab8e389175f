//! A kernel's own PTX module, cut out of its crate's: the header, the kernel's entries, and
//! every module-scope item they reach — the `.func`s they call or take the address of, the
//! `.global`, `.const` and `.shared` variables they name, the `.extern` declarations they use —
//! transitively, through function bodies and variable initialisers alike, in the crate
//! module's order.
//!
//! The driver JIT-compiles a PTX module whole when it is loaded. A kernel crate's module holds
//! every kernel of the crate (a megabyte of PTX for the examples: seconds of JIT), so where no
//! SASS runs on the GPU the runtime loads each kernel's own module on its first launch and the
//! JIT compiles what the program launches, not the whole crate.
//!
//! Each piece has its own copy of the module-scope variables it names. Kernel code has no
//! writable module-scope variable but the panic record, which the runtime points at the same
//! host memory in every module it loads.

use memchr::memchr;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why a crate's PTX cannot be cut into kernel modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// A module-scope statement of a form the splitter does not know (it would not know what
    /// the statement names, or whether a kernel needs it).
    Unknown(String),
    /// An entry asked for is not in the module.
    NoEntry(String),
    /// A brace or parenthesis is never closed.
    Unbalanced,
}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SplitError::Unknown(s) => write!(f, "a module-scope statement not understood: `{s}`"),
            SplitError::NoEntry(e) => write!(f, "no entry `{e}` in the module"),
            SplitError::Unbalanced => write!(f, "an unbalanced brace or parenthesis"),
        }
    }
}

impl std::error::Error for SplitError {}

/// What a module-scope statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `.version`, `.target`, `.address_size`, `.file`: every piece keeps it.
    Header,
    /// A kernel entry, a function (definition or declaration) or a variable: kept where
    /// something kept names it.
    Named,
}

#[derive(Debug)]
struct Item<'a> {
    text: &'a str,
    kind: Kind,
    /// The symbol the statement defines or declares ([`Kind::Named`]).
    name: &'a str,
}

/// A crate's PTX module read as its module-scope statements, ready to be cut into kernel
/// modules ([`Split::module`]).
#[derive(Debug)]
pub struct Split<'a> {
    items: Vec<Item<'a>>,
    /// The statements that define or declare each symbol, in order.
    by_name: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Split<'a> {
    /// Read `ptx` as module-scope statements. Fails on a statement of a form this does not
    /// know: a piece cut from it might then lack what its kernel needs.
    pub fn parse(ptx: &'a str) -> Result<Split<'a>, SplitError> {
        let bytes = ptx.as_bytes();
        let mut items = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match bytes[at] {
                b if b.is_ascii_whitespace() => at += 1,
                b'/' if bytes.get(at + 1) == Some(&b'/') => at = line_end(bytes, at),
                b'/' if bytes.get(at + 1) == Some(&b'*') => at = block_comment_end(bytes, at)?,
                _ => {
                    let end = statement_end(bytes, at)?;
                    items.push(classify(&ptx[at..end])?);
                    at = end;
                }
            }
        }
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            if item.kind == Kind::Named {
                by_name.entry(item.name).or_default().push(i);
            }
        }
        Ok(Split { items, by_name })
    }

    /// The names of the module's `.entry` statements, in order.
    pub fn entries(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.items
            .iter()
            .filter(|i| i.kind == Kind::Named && is_entry(i.text))
            .map(|i| i.name)
    }

    /// The module of the entries `entries`: the header, the entries and everything they reach,
    /// in this module's order.
    pub fn module(&self, entries: &[&str]) -> Result<String, SplitError> {
        let mut keep = vec![false; self.items.len()];
        let mut todo: Vec<&str> = Vec::new();
        for &e in entries {
            let found = self
                .by_name
                .get(e)
                .is_some_and(|is| is.iter().any(|&i| is_entry(self.items[i].text)));
            if !found {
                return Err(SplitError::NoEntry(e.to_owned()));
            }
            todo.push(e);
        }
        while let Some(name) = todo.pop() {
            let Some(defs) = self.by_name.get(name) else {
                continue;
            };
            for &i in defs {
                if std::mem::replace(&mut keep[i], true) {
                    continue;
                }
                for sym in symbols(self.items[i].text) {
                    if sym != name
                        && let Some(is) = self.by_name.get(sym)
                        && is.iter().any(|&j| !keep[j])
                    {
                        todo.push(sym);
                    }
                }
            }
        }
        // A crate raised to `sm_90a` for some kernels' instructions: a module without any of
        // them is plain sm_90 PTX, which the driver also compiles for newer GPUs.
        let arch_specific = self.items.iter().zip(&keep).any(|(item, &kept)| {
            kept && berth_abi::SM90A_ONLY.iter().any(|i| item.text.contains(i))
        });
        let mut out = String::new();
        for (item, kept) in self.items.iter().zip(keep) {
            if item.kind == Kind::Header
                && !arch_specific
                && let Some(rest) = item.text.strip_prefix(".target sm_90a")
            {
                out.push_str(".target sm_90");
                out.push_str(rest);
                out.push('\n');
            } else if kept || item.kind == Kind::Header {
                out.push_str(item.text);
                out.push('\n');
            }
        }
        Ok(out)
    }
}

/// The split of a kernel crate's PTX, read on its first use and kept for the program's life
/// (the PTX is embedded, so is the text the split points into).
pub(crate) fn cached(ptx: &'static str) -> Result<Arc<Split<'static>>, SplitError> {
    type Cache = HashMap<usize, Result<Arc<Split<'static>>, SplitError>>;
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .get_or_insert_with(Default::default)
        .entry(ptx.as_ptr() as usize)
        .or_insert_with(|| Split::parse(ptx).map(Arc::new))
        .clone()
}

/// The module of the entries `entries` cut out of the crate module `ptx` (see [`Split`]).
pub fn kernel_module(ptx: &str, entries: &[&str]) -> Result<String, SplitError> {
    Split::parse(ptx)?.module(entries)
}

fn is_entry(text: &str) -> bool {
    words(text).any(|w| w == ".entry")
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_ascii_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
}

/// Where the line holding `at` ends (past its newline).
fn line_end(bytes: &[u8], at: usize) -> usize {
    memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n + 1)
}

fn block_comment_end(bytes: &[u8], at: usize) -> Result<usize, SplitError> {
    memchr::memmem::find(&bytes[at + 2..], b"*/")
        .map(|n| at + 2 + n + 2)
        .ok_or(SplitError::Unbalanced)
}

/// The end of the module-scope statement that begins at `start`: its `;`, the `}` closing
/// a function's body, or, for the directives of the header, which have neither, its line.
fn statement_end(bytes: &[u8], start: usize) -> Result<usize, SplitError> {
    const LINE_DIRECTIVES: [&[u8]; 4] = [b".version", b".target", b".address_size", b".file"];
    if LINE_DIRECTIVES
        .iter()
        .any(|d| bytes[start..].starts_with(d))
    {
        let end = memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |n| start + n);
        return Ok(end);
    }
    let (mut depth, mut parens, mut initialiser) = (0usize, 0usize, false);
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = line_end(bytes, at);
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = block_comment_end(bytes, at)?;
                continue;
            }
            b'(' => parens += 1,
            b')' => parens = parens.checked_sub(1).ok_or(SplitError::Unbalanced)?,
            b'=' if depth == 0 => initialiser = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1).ok_or(SplitError::Unbalanced)?;
                // A body ends the statement; an initialiser's braces end at its `;`.
                if depth == 0 && !initialiser {
                    return Ok(at + 1);
                }
            }
            b';' if depth == 0 && parens == 0 => return Ok(at + 1),
            _ => {}
        }
        at += 1;
    }
    Err(SplitError::Unbalanced)
}

/// What a statement is and the symbol it defines or declares.
fn classify(text: &str) -> Result<Item<'_>, SplitError> {
    let unknown = || SplitError::Unknown(text.lines().next().unwrap_or_default().to_owned());
    if [".version", ".target", ".address_size", ".file"]
        .iter()
        .any(|d| text.starts_with(d))
    {
        return Ok(Item {
            text,
            kind: Kind::Header,
            name: "",
        });
    }
    // Linkage first (`.visible`, `.extern`, `.weak`, `.common`), then what it is.
    let mut rest = text;
    let what = loop {
        let trimmed = rest.trim_start();
        let word_end = trimmed
            .find(|c: char| c.is_ascii_whitespace() || c == '(')
            .unwrap_or(trimmed.len());
        let word = &trimmed[..word_end];
        rest = &trimmed[word_end..];
        match word {
            ".visible" | ".extern" | ".weak" | ".common" => continue,
            ".entry" | ".func" | ".global" | ".const" | ".shared" => break word,
            _ => return Err(unknown()),
        }
    };
    let name = if what == ".entry" || what == ".func" {
        // `.func (.param .b32 func_retval0) name(…)`: past the return value's group.
        let mut r = rest.trim_start();
        if r.starts_with('(') {
            r = r.split_once(')').ok_or_else(unknown)?.1.trim_start();
        }
        let end = r
            .find(|c: char| c.is_ascii_whitespace() || c == '(' || c == ';')
            .unwrap_or(r.len());
        &r[..end]
    } else {
        // `.global .align 8 .u64 NAME[3] = {…};`, `.shared .align 16 .b8 NAME[4096];`
        let decl = rest.split(['=', ';']).next().unwrap_or_default();
        let last = decl.split_ascii_whitespace().last().unwrap_or_default();
        last.split('[').next().unwrap_or_default()
    };
    if name.is_empty() || !name.bytes().all(is_symbol_byte) {
        return Err(unknown());
    }
    Ok(Item {
        text,
        kind: Kind::Named,
        name,
    })
}

fn is_symbol_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// The identifiers `text` names outside its comments: its symbols (registers, `%r1`, and
/// directives, `.u32`, are not).
fn symbols(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let b = bytes[at];
            if b == b'/' && bytes.get(at + 1) == Some(&b'/') {
                at = line_end(bytes, at);
            } else if b == b'/' && bytes.get(at + 1) == Some(&b'*') {
                at = block_comment_end(bytes, at).unwrap_or(bytes.len());
            } else if is_symbol_byte(b) {
                let start = at;
                while at < bytes.len() && is_symbol_byte(bytes[at]) {
                    at += 1;
                }
                let prefixed = start > 0 && matches!(bytes[start - 1], b'%' | b'.');
                if !prefixed && !b.is_ascii_digit() {
                    return Some(&text[start..at]);
                }
            } else {
                at += 1;
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"//
// Generated by LLVM NVPTX Back-End
//

.version 7.8
.target sm_90
.address_size 64

	// .globl	a              // -- Begin function a
.func helper_fail
(
	.param .b64 helper_fail_param_0
)
.noreturn;
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.extern .shared .align 16 .b8 __berth_dynamic_shared[];
.shared .align 16 .b8 TILE[4096];
.visible .global .align 8 .b8 __berth_panic_record[16];
.global .align 1 .b8 anon_$_1[4] = {102, 46, 114, 115};
.global .align 8 .u64 anon_$_2[3] = {generic(anon_$_1), 4, 7};
.global .align 1 .b8 unused[2] = {1, 2};
                                        // @a
.visible .entry a(
	.param .u64 a_param_0
)
.reqntid 256, 1, 1
{
	// a comment naming unused and b
	mov.u64 	%rd1, anon_$_2;
	call.uni helper_fail, (param0);
	ret;
}
.func helper_fail(
	.param .b64 helper_fail_param_0
)
.noreturn
{
	ld.global.u64 	%rd1, [__berth_panic_record];
	{ // callseq 0
	call.uni (retval0), vprintf, (param0, param1);
	}
	trap;
}
.visible .entry a__berth_1d(
	.param .u64 a__berth_1d_param_0
)
{
	ret;
}
.visible .entry b()
{
	st.shared.u32 	[TILE], %r1;
	mov.u64 	%rd2, __berth_dynamic_shared;
	ret;
}
"#;

    fn statements(module: &str) -> Vec<String> {
        let split = Split::parse(module).unwrap();
        split.items.iter().map(|i| i.name.to_owned()).collect()
    }

    /// A crate raised to `sm_90a`: a kernel whose module reaches no `sm_90a` instruction gets
    /// plain `sm_90`, one that does (here through a function it calls) keeps `sm_90a`.
    #[test]
    fn modules_without_arch_specific_instructions_target_plain_sm_90() {
        let ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n\
                   .func mma()\n{\n\twgmma.fence.sync.aligned;\n\tret;\n}\n\
                   .visible .entry gemm()\n{\n\tcall.uni mma, ();\n\tret;\n}\n\
                   .visible .entry plain()\n{\n\tret;\n}\n";
        let split = Split::parse(ptx).unwrap();
        let gemm = split.module(&["gemm"]).unwrap();
        assert!(gemm.starts_with(".version 8.0\n.target sm_90a\n"), "{gemm}");
        let plain = split.module(&["plain"]).unwrap();
        assert!(
            plain.starts_with(".version 8.0\n.target sm_90\n"),
            "{plain}"
        );
        assert!(!plain.contains("wgmma") && !plain.contains("sm_90a"));
    }

    #[test]
    fn a_kernel_module_holds_what_its_entries_reach_in_order() {
        let split = Split::parse(PTX).unwrap();
        assert_eq!(
            split.entries().collect::<Vec<_>>(),
            ["a", "a__berth_1d", "b"]
        );
        let a = split.module(&["a", "a__berth_1d"]).unwrap();
        assert_eq!(
            statements(&a),
            [
                "",
                "",
                "",
                "helper_fail",
                "vprintf",
                "__berth_panic_record",
                "anon_$_1",
                "anon_$_2",
                "a",
                "helper_fail",
                "a__berth_1d",
            ]
        );
        assert!(a.starts_with(".version 7.8\n.target sm_90\n.address_size 64\n"));
        // Comments inside a body stay with it, but what they name is not kept.
        assert!(a.contains("// a comment naming unused and b"));
        assert!(!a.contains("unused[2]") && !a.contains(".entry b"));
        let b = split.module(&["b"]).unwrap();
        assert_eq!(
            statements(&b),
            ["", "", "", "__berth_dynamic_shared", "TILE", "b"]
        );
    }

    #[test]
    fn what_is_not_understood_is_an_error_not_a_guess() {
        assert_eq!(
            kernel_module(PTX, &["missing"]),
            Err(SplitError::NoEntry("missing".into()))
        );
        // A function is not an entry.
        assert_eq!(
            kernel_module(PTX, &["helper_fail"]),
            Err(SplitError::NoEntry("helper_fail".into()))
        );
        let odd = format!("{PTX}.section .debug_info {{ }}\n");
        assert!(matches!(
            Split::parse(&odd),
            Err(SplitError::Unknown(s)) if s.starts_with(".section")
        ));
        let open = format!("{PTX}.visible .entry c()\n{{\n\tret;\n");
        assert_eq!(Split::parse(&open).unwrap_err(), SplitError::Unbalanced);
    }

    #[test]
    fn symbols_skip_registers_directives_numbers_and_comments() {
        let syms: Vec<&str> =
            symbols("ld.global.u64 %rd1, [sym_$_1+8]; // other\n\tcall.uni f, (p0); 12").collect();
        assert_eq!(syms, ["ld", "sym_$_1", "call", "f", "p0"]);
    }
}
