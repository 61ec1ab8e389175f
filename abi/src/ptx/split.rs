//! A kernel's own PTX module, cut out of its crate's: the header, the kernel's entries, and
//! every module-scope item they reach — the `.func`s they call or take the address of, the
//! `.global`, `.const` and `.shared` variables they name, the `.extern` declarations they use —
//! transitively, through function bodies and variable initialisers alike, in the crate
//! module's order.
//!
//! A kernel crate's module holds every kernel of the crate (a megabyte of PTX for a crate of
//! a hundred kernels). The builder assembles each kernel's piece into its own SASS, so that an
//! edit to one kernel assembles that kernel again; where no SASS runs on the GPU, the runtime
//! loads each kernel's piece on its first launch, so that the driver's JIT compiles what the
//! program launches, not the whole crate. Both cut with this module, so the piece a kernel's
//! SASS was assembled from is the piece the runtime would load in its place.
//!
//! Each piece has its own copy of the module-scope variables it names. Kernel code has no
//! writable module-scope variable but the panic record, which the runtime points at the same
//! host memory in every module it loads.
//!
//! ```
//! use berth_abi::ptx::split::Split;
//! let ptx = ".version 8.7\n.target sm_90\n.address_size 64\n\
//!            .func f() { ret; }\n\
//!            .visible .entry a() { call.uni f, (); ret; }\n\
//!            .visible .entry b() { ret; }\n";
//! let split = Split::parse(ptx).unwrap();
//! assert_eq!(split.entries().collect::<Vec<_>>(), ["a", "b"]);
//! let a = split.module(&["a"]).unwrap();
//! assert!(a.contains(".func f()") && a.contains(".entry a()") && !a.contains(".entry b()"));
//! ```

use super::{Kind, ReadError, statements, symbols};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Why a crate's PTX cannot be cut into kernel modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// A module-scope statement of a form the splitter does not know (it would not know what
    /// the statement names, or whether a kernel needs it).
    Unknown(String),
    /// An entry asked for is not in the module.
    NoEntry(String),
    /// A brace, parenthesis or comment is never closed.
    Unbalanced,
}

impl core::fmt::Display for SplitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SplitError::Unknown(s) => write!(f, "a module-scope statement not understood: `{s}`"),
            SplitError::NoEntry(e) => write!(f, "no entry `{e}` in the module"),
            SplitError::Unbalanced => write!(f, "an unbalanced brace, parenthesis or comment"),
        }
    }
}

impl core::error::Error for SplitError {}

impl From<ReadError<'_>> for SplitError {
    fn from(e: ReadError<'_>) -> Self {
        match e {
            ReadError::Unknown(s) => SplitError::Unknown(s.to_owned()),
            ReadError::Unbalanced => SplitError::Unbalanced,
        }
    }
}

/// One module-scope statement, as the split keeps it.
#[derive(Debug)]
struct Item<'a> {
    text: &'a str,
    kind: Kind,
    /// The symbol the statement defines or declares (empty for the header).
    name: &'a str,
}

/// A crate's PTX module read as its module-scope statements, ready to be cut into kernel
/// modules ([`Split::module`]).
#[derive(Debug)]
pub struct Split<'a> {
    items: Vec<Item<'a>>,
    /// The statements that define or declare each symbol, in order.
    by_name: BTreeMap<&'a str, Vec<usize>>,
}

impl<'a> Split<'a> {
    /// Read `ptx` as module-scope statements. Fails on a statement of a form this does not
    /// know: a piece cut from it might then lack what its kernel needs.
    pub fn parse(ptx: &'a str) -> Result<Split<'a>, SplitError> {
        let mut items = Vec::new();
        for s in statements(ptx) {
            let s = s?;
            items.push(Item {
                text: s.text,
                kind: s.kind,
                name: s.name,
            });
        }
        let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            if item.kind != Kind::Header {
                by_name.entry(item.name).or_default().push(i);
            }
        }
        Ok(Split { items, by_name })
    }

    /// The names of the module's `.entry` statements, in order.
    pub fn entries(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.items
            .iter()
            .filter(|i| i.kind == Kind::Entry)
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
                .is_some_and(|is| is.iter().any(|&i| self.items[i].kind == Kind::Entry));
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
                if core::mem::replace(&mut keep[i], true) {
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
        // them is plain sm_90 PTX, which also compiles for newer GPUs.
        let arch_specific =
            self.items.iter().zip(&keep).any(|(item, &kept)| {
                kept && crate::SM90A_ONLY.iter().any(|i| item.text.contains(i))
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

/// The module of the entries `entries` cut out of the crate module `ptx` (see [`Split`]).
pub fn kernel_module(ptx: &str, entries: &[&str]) -> Result<String, SplitError> {
    Split::parse(ptx)?.module(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::symbols;
    use alloc::borrow::ToOwned;
    use alloc::format;
    use alloc::string::String;
    use alloc::vec::Vec;

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
