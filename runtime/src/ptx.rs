//! Reading `.entry` signatures out of PTX text, and checking them against launchers.

use crate::error::{Error, Result};
use crate::launch::Kernel;
use memchr::memmem;

pub(crate) mod split;
pub use split::{Split, SplitError, kernel_module};

/// One `.param` of an entry: its declared name and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// The PTX parameter name.
    pub name: String,
    /// Size in bytes.
    pub size: usize,
}

/// One `.entry` of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// Entry name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<PtxParam>,
}

fn type_size(ty: &str) -> Option<usize> {
    let bits: usize = ty
        .trim_start_matches('.')
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()?;
    Some(if ty.ends_with("pred") { 1 } else { bits / 8 })
}

fn parse_param(decl: &str) -> Option<PtxParam> {
    // `.param .u64 name`, `.param .align 4 .b8 name[12]`, `.param .u64 .ptr .global name`.
    let mut toks = decl.split_ascii_whitespace();
    if toks.next() != Some(".param") {
        return None;
    }
    let mut ty = None;
    let last = loop {
        let t = toks.next()?;
        if t == ".align" {
            toks.next();
        } else if t.starts_with('.') {
            if ty.is_none() && t != ".ptr" {
                ty = Some(t);
            }
        } else {
            break t;
        }
    };
    let elem = type_size(ty?)?;
    let (name, count) = match last.split_once('[') {
        Some((n, rest)) => (n, rest.trim_end_matches(']').parse().ok()?),
        None => (last, 1usize),
    };
    Some(PtxParam {
        name: name.to_owned(),
        size: elem.checked_mul(count)?,
    })
}

/// Every `.entry` in `ptx`, with its parameters.
///
/// The module is searched with `memchr`'s substring finder: PTX is mostly `.`-prefixed
/// tokens, which a search led by the needle's first byte stops at everywhere (a crate's
/// module is about a megabyte, searched on the first launch of every process).
pub fn entries(ptx: &str) -> Vec<PtxEntry> {
    let mut out = Vec::new();
    for pos in memmem::find_iter(ptx.as_bytes(), ".entry ") {
        let rest = &ptx[pos + ".entry ".len()..];
        let name_end = rest.find(['(', '{', ' ', '\n']).unwrap_or(rest.len());
        let name = rest[..name_end].trim().to_owned();
        let after = rest[name_end..].trim_start();
        let params = if after.starts_with('(') {
            let close = after.find(')').unwrap_or(after.len());
            after[1..close]
                .split(',')
                .filter_map(|d| parse_param(d.trim()))
                .collect()
        } else {
            Vec::new()
        };
        out.push(PtxEntry { name, params });
    }
    out
}

/// Byte-array globals with initialisers (`.global .align 1 .b8 NAME[N] = {..};`): where
/// constant strings (file names of panic locations) live. Returns (name, bytes).
///
/// Only the lines with an initialiser (` = {`, which nothing else in PTX has) are read
/// ([`berth_abi::ptx::byte_globals`]).
pub fn byte_globals(ptx: &str) -> Vec<(String, Vec<u8>)> {
    berth_abi::ptx::byte_globals(ptx)
        .map(|g| (g.name.to_owned(), global_bytes(&g)))
        .collect()
}

/// The bytes of the byte-array global `name` of `ptx`, if it declares one.
pub(crate) fn byte_global(ptx: &str, name: &str) -> Option<Vec<u8>> {
    berth_abi::ptx::byte_globals(ptx)
        .find(|g| g.name == name)
        .map(|g| global_bytes(&g))
}

/// The most zero bytes [`global_bytes`] appends past an initialiser.
const MAX_ZERO_TAIL: usize = 4096;

/// A byte-array global's bytes: its initialiser's, then zeros up to its declared length. A
/// declared size far beyond the initialiser (a huge array with a short initialiser, or text
/// that only looks like PTX) is not materialised: the fault reports read strings, which end
/// within their initialiser.
fn global_bytes(g: &berth_abi::ptx::ByteGlobal<'_>) -> Vec<u8> {
    let mut bytes: Vec<u8> = g.bytes().collect();
    bytes.resize(g.len.min(bytes.len().saturating_add(MAX_ZERO_TAIL)), 0);
    bytes
}

/// Check that `kernel`'s PTX entry has exactly the parameters its launcher passes.
pub fn check_kernel(kernel: &Kernel) -> Result<()> {
    check_against(kernel, &entries(kernel.ptx()))
}

/// [`check_kernel`] against the already parsed entries of the kernel's PTX, so that the
/// launchers of one crate are checked with one pass over its PTX.
pub fn check_against(kernel: &Kernel, all: &[PtxEntry]) -> Result<()> {
    let fail = |reason: String| {
        Err(Error::Module {
            kernel: kernel.name,
            reason,
        })
    };
    for (_, name) in kernel.entries() {
        let Some(entry) = all.iter().find(|e| e.name == name) else {
            return fail(format!(
                "no `.entry {name}` in the PTX of crate `{}`; rebuild it",
                kernel.crate_name
            ));
        };
        if entry.params.len() != kernel.params.len() {
            return fail(format!(
                "the PTX entry `{name}` has {} parameters, the launcher passes {}",
                entry.params.len(),
                kernel.params.len()
            ));
        }
        for (i, (p, l)) in entry.params.iter().zip(kernel.params).enumerate() {
            if p.size != l.size {
                return fail(format!(
                    "parameter {i} (`{}`) of `{name}`: {} bytes in the PTX, {} in the launcher",
                    l.name, p.size, l.size
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-parameter kernel `fill` (with the linear entry `fill__berth_1d`) over `ptx`.
    fn fill(ptx: &'static str, linear: Option<&'static str>) -> Kernel {
        unsafe fn nothing(_: &[*mut std::ffi::c_void]) {}
        const PARAMS: &[crate::launch::Param] = &[crate::launch::Param::scalar::<u64>("n")];
        Kernel {
            name: "fill",
            crate_name: "test",
            crate_files: Some(Box::leak(Box::new(crate::launch::CrateFiles {
                ptx,
                sass: None,
            }))),
            params: PARAMS,
            location: "here",
            sim: nothing,
            uses_barrier: false,
            block: None,
            linear,
            planar: None,
            same_len: &[],
        }
    }

    #[test]
    fn a_linear_entry_is_checked_like_the_general_one() {
        const BOTH: &str = ".visible .entry fill(\n\t.param .u64 fill_param_0\n)\n{ ret; }\n\
                            .visible .entry fill__berth_1d(\n\t.param .u64 fill__berth_1d_param_0\n)\n{ ret; }\n";
        const GENERAL: &str = ".visible .entry fill(\n\t.param .u64 fill_param_0\n)\n{ ret; }\n";
        const NARROW: &str = ".visible .entry fill(\n\t.param .u64 fill_param_0\n)\n{ ret; }\n\
                              .visible .entry fill__berth_1d(\n\t.param .u32 fill__berth_1d_param_0\n)\n{ ret; }\n";
        check_kernel(&fill(BOTH, Some("fill__berth_1d"))).unwrap();
        check_kernel(&fill(GENERAL, None)).unwrap();
        let missing = check_kernel(&fill(GENERAL, Some("fill__berth_1d"))).unwrap_err();
        assert!(
            missing.to_string().contains("no `.entry fill__berth_1d`"),
            "{missing}"
        );
        let narrow = check_kernel(&fill(NARROW, Some("fill__berth_1d"))).unwrap_err();
        assert!(
            narrow.to_string().contains("of `fill__berth_1d`: 4 bytes"),
            "{narrow}"
        );
    }

    #[test]
    fn one_dimensional_launches_run_the_linear_entry() {
        use crate::launch::{Entry, Grid};
        let k = fill("", Some("fill__berth_1d"));
        for (grid, entry) in [
            (Grid::cover(1000), Entry::Linear),
            (Grid::new(1, 1), Entry::Linear),
            (Grid::new((4, 2), 256), Entry::General),
            (Grid::new(4, (16, 16)), Entry::General),
            (Grid::new((1, 1, 2), 32), Entry::General),
            (Grid::new(1, (32, 1, 2)), Entry::General),
        ] {
            assert_eq!(grid.entry_of(&k), entry, "{grid:?}");
        }
        assert_eq!(k.entry_name(Entry::Linear), "fill__berth_1d");
        assert_eq!(k.entry_name(Entry::General), "fill");
        // Without a linear entry every launch runs the general one.
        let k = fill("", None);
        assert_eq!(Grid::cover(1000).entry_of(&k), Entry::General);
        assert_eq!(k.entry_name(Entry::Linear), "fill");
    }

    /// The planar entry runs only where the grid and the block have extent 1 along z, and
    /// the linear entry keeps the launches it takes.
    #[test]
    fn launches_without_z_run_the_planar_entry() {
        use crate::launch::{Entry, Grid};
        let both = Kernel {
            planar: Some("fill__berth_2d"),
            ..fill("", Some("fill__berth_1d"))
        };
        let planar = Kernel {
            planar: Some("fill__berth_2d"),
            ..fill("", None)
        };
        for (grid, with_both, with_planar) in [
            (Grid::cover(1000), Entry::Linear, Entry::Planar),
            (Grid::new((4, 2), 256), Entry::Planar, Entry::Planar),
            (Grid::new(4, (32, 8)), Entry::Planar, Entry::Planar),
            (
                Grid::new((4, 2, 2), (32, 8)),
                Entry::General,
                Entry::General,
            ),
            (Grid::new(4, (8, 8, 2)), Entry::General, Entry::General),
            (Grid::new((1, 1, 2), 32), Entry::General, Entry::General),
        ] {
            assert_eq!(grid.entry_of(&both), with_both, "{grid:?}");
            assert_eq!(grid.entry_of(&planar), with_planar, "{grid:?}");
        }
        assert_eq!(both.entry_name(Entry::Planar), "fill__berth_2d");
        assert_eq!(fill("", None).entry_name(Entry::Planar), "fill");
        let names: Vec<_> = both.entries().collect();
        assert_eq!(
            names,
            [
                (Entry::General, "fill"),
                (Entry::Linear, "fill__berth_1d"),
                (Entry::Planar, "fill__berth_2d")
            ]
        );
    }

    #[test]
    fn a_planar_entry_is_checked_like_the_general_one() {
        const BOTH: &str = ".visible .entry fill(\n\t.param .u64 fill_param_0\n)\n{ ret; }\n\
                            .visible .entry fill__berth_2d(\n\t.param .u64 fill__berth_2d_param_0\n)\n{ ret; }\n";
        const GENERAL: &str = ".visible .entry fill(\n\t.param .u64 fill_param_0\n)\n{ ret; }\n";
        let planar = |ptx| Kernel {
            planar: Some("fill__berth_2d"),
            ..fill(ptx, None)
        };
        check_kernel(&planar(BOTH)).unwrap();
        let missing = check_kernel(&planar(GENERAL)).unwrap_err();
        assert!(
            missing.to_string().contains("no `.entry fill__berth_2d`"),
            "{missing}"
        );
    }

    #[test]
    fn reads_byte_globals() {
        let ptx = ".global .align 1 .b8 anon_$_1[4] = {97, 98, 99};\n.visible .global .align 8 .b8 __berth_panic_record[8];\n";
        assert_eq!(
            byte_globals(ptx),
            vec![("anon_$_1".to_owned(), vec![97, 98, 99, 0])]
        );
    }

    /// Every byte-array global with an initialiser is found wherever its line is — first,
    /// last without a newline, indented, `.const` or `.visible` — and nothing else is: not
    /// arrays of other types, not globals without an initialiser, not ` = {` inside a body
    /// or a comment.
    #[test]
    fn finds_byte_globals_only_on_their_own_lines() {
        let ptx = ".global .align 1 .b8 first[2] = {1, 2};\n\
                   .version 8.5\n\
                   .global .align 8 .u64 table[2] = {1, 2};\n\
                   .visible .global .align 1 .b8 shown[3] = {7, 8, 9};\n\
                   .global .align 1 .b8 plain[4];\n\
                   .visible .entry k()\n{\n\t// x = {1}\n\tret;\n}\n\
                   \t.const .align 1 .b8 konst[1] = {5};\n\
                   .global .align 1 .b8 last[3] = {65, 66};";
        let found = byte_globals(ptx);
        assert_eq!(
            found,
            vec![
                ("first".to_owned(), vec![1, 2]),
                ("shown".to_owned(), vec![7, 8, 9]),
                ("konst".to_owned(), vec![5]),
                ("last".to_owned(), vec![65, 66, 0]),
            ]
        );
    }

    /// Sizes at the ends of `usize` parse without overflow or a huge allocation: PTX comes
    /// from the build, but the parser must not trust it with the process.
    #[test]
    fn huge_declared_sizes_neither_overflow_nor_allocate() {
        let big = usize::MAX;
        let ptx = format!(
            ".global .align 1 .b8 s[{big}] = {{104, 105}};\n\
             .shared .align 16 .b8 tile[{big}];\n\
             .shared .align 16 .b8 tile2[{big}];\n\
             .visible .entry k(\n\t.param .align 8 .b8 k_param_0[{big}],\n\t.param .u64 k_param_1\n)\n\
             {{\n\tmov.u64 %rd1, tile;\n\tmov.u64 %rd2, tile2;\n\tret;\n}}\n\
             .visible .entry w(\n\t.param .align 8 .b64 w_param_0[{big}]\n)\n{{\n\tret;\n}}\n"
        );
        let globals = byte_globals(&ptx);
        assert_eq!(globals.len(), 1);
        assert_eq!(&globals[0].1[..2], b"hi");
        assert!(globals[0].1.len() <= 2 + MAX_ZERO_TAIL);
        let e = entries(&ptx);
        let k = e.iter().find(|e| e.name == "k").unwrap();
        assert_eq!(k.params[0].size, big);
        // 8 × usize::MAX bytes is no size: the parameter does not parse.
        let w = e.iter().find(|e| e.name == "w").unwrap();
        assert!(w.params.is_empty(), "{w:?}");
        assert_eq!(entry_static_shared_bytes(&ptx, "k"), usize::MAX);
    }

    #[test]
    fn parses_entries_and_params() {
        let ptx = r#"
.version 7.8
.target sm_90
.address_size 64
.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 .ptr .global .align 4 saxpy_param_1,
	.param .u64 saxpy_param_2,
	.param .align 4 .b8 saxpy_param_3[12],
	.param .u8 saxpy_param_4
)
{ ret; }
.visible .entry empty()
{ ret; }
"#;
        let e = entries(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "saxpy");
        let sizes: Vec<usize> = e[0].params.iter().map(|p| p.size).collect();
        assert_eq!(sizes, vec![4, 8, 8, 12, 1]);
        assert_eq!(e[0].params[3].name, "saxpy_param_3");
        assert_eq!(e[1].name, "empty");
        assert!(e[1].params.is_empty());
    }
}

/// The bodies of every `.entry` and `.func` in `ptx`, by name (declarations, which have none,
/// are skipped).
///
/// One pass over the text: the next match of each keyword is found again only once the scan
/// has moved past it, so a module of many entries after its last `.func` is not searched to
/// its end once per entry.
fn function_bodies(ptx: &str) -> std::collections::HashMap<String, &str> {
    const KEYS: [&str; 2] = [".entry ", ".func "];
    let find = |from: usize, key: &str| {
        memmem::find(&ptx.as_bytes()[from..], key.as_bytes()).map_or(usize::MAX, |p| from + p)
    };
    let mut out = std::collections::HashMap::new();
    // The absolute position of each keyword's next match (usize::MAX: none left).
    let mut next = KEYS.map(|k| find(0, k));
    let mut at = 0;
    loop {
        for (n, key) in next.iter_mut().zip(KEYS) {
            if *n < at {
                *n = find(at, key);
            }
        }
        let Some((pos, klen)) = next
            .iter()
            .zip(KEYS)
            .filter(|(p, _)| **p != usize::MAX)
            .map(|(p, k)| (*p, k.len()))
            .min()
        else {
            break;
        };
        let header = &ptx[pos + klen..];
        // `.func (.param .b32 func_retval0) name(` — skip a return-value group.
        let header = header.trim_start();
        let header = if header.starts_with('(') {
            header
                .split_once(')')
                .map_or(header, |(_, h)| h.trim_start())
        } else {
            header
        };
        let header_at = header.as_ptr() as usize - ptx.as_ptr() as usize;
        let name_end = header
            .find(|c: char| c == '(' || c.is_whitespace())
            .unwrap_or(header.len());
        let name = &header[..name_end];
        let open = header.find('{');
        let semicolon = header.find(';');
        // A declaration (`.func name(...);`, `.noreturn;`) ends at its semicolon, before any
        // brace: the next brace belongs to something else.
        let Some(open) = open.filter(|&o| semicolon.is_none_or(|s| s > o)) else {
            match semicolon {
                Some(s) => {
                    at = header_at + s + 1;
                    continue;
                }
                None => break,
            }
        };
        let body_start = &header[open..];
        let mut depth = 0usize;
        let mut end = body_start.len();
        for (i, ch) in body_start.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.insert(name.to_owned(), &body_start[..end]);
        at = header_at + open + end;
    }
    out
}

/// What the simulator reads from a PTX module: its functions' bodies and its module-scope
/// shared arrays, parsed once ([`Module::cached`]).
pub(crate) struct Module<'a> {
    bodies: std::collections::HashMap<String, &'a str>,
    /// Module-scope `.shared` arrays (symbol, bytes); the dynamic `.extern` one excluded.
    shared: Vec<(String, usize)>,
}

/// `.shared .align 16 .b8 NAME[4096];` (at module scope or inside a function): the symbol and
/// its size in bytes.
fn shared_decl(line: &str) -> Option<(String, usize)> {
    let rest = line.trim().strip_prefix(".shared")?;
    let toks: Vec<&str> = rest.split_whitespace().collect();
    let last = toks.last()?.trim_end_matches(';');
    let ty = toks
        .iter()
        .find(|t| t.starts_with('.') && **t != ".align" && type_size(t).is_some_and(|s| s > 0))?;
    let (sym, count) = match last.split_once('[') {
        Some((n, c)) => (n, c.trim_end_matches(']').parse().ok()?),
        None => (last, 1usize),
    };
    Some((sym.to_owned(), type_size(ty)?.checked_mul(count)?))
}

/// Whether `text` names the symbol `sym` (not a longer symbol it begins).
fn names(text: &str, sym: &str) -> bool {
    text.match_indices(sym).any(|(i, _)| {
        let next = text[i + sym.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    })
}

impl<'a> Module<'a> {
    pub(crate) fn parse(ptx: &'a str) -> Module<'a> {
        let mut shared = Vec::new();
        let mut depth = 0usize;
        for line in ptx.lines() {
            if depth == 0
                && let Some(d) = shared_decl(line)
            {
                shared.push(d);
            }
            depth += line.matches('{').count();
            depth = depth.saturating_sub(line.matches('}').count());
        }
        Module {
            bodies: function_bodies(ptx),
            shared,
        }
    }

    /// The bodies of the entry `name` and of every function it calls, directly or not.
    fn reachable(&self, name: &str) -> Vec<&'a str> {
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![name.to_owned()];
        let mut out = Vec::new();
        while let Some(f) = todo.pop() {
            if !seen.insert(f.clone()) {
                continue;
            }
            let Some(&body) = self.bodies.get(&f) else {
                continue;
            };
            out.push(body);
            for line in body.lines().filter(|l| l.contains("call")) {
                // `call.uni (retval0), name, (params);` or `call.uni name, (params);`
                let after = line.split_once("call").map_or("", |(_, a)| a);
                for tok in after.split([',', ' ', '\t', ';']) {
                    let t = tok.trim();
                    if !t.is_empty()
                        && !t.starts_with('(')
                        && !t.starts_with('.')
                        && self.bodies.contains_key(t)
                    {
                        todo.push(t.to_owned());
                    }
                }
            }
        }
        out
    }

    /// See [`entry_uses_barrier`].
    pub(crate) fn uses_barrier(&self, name: &str) -> bool {
        let collectives = [
            "bar.sync",
            "barrier.sync",
            "bar.warp.sync",
            "shfl.sync",
            "vote.sync",
            "match.any.sync",
            "match.all.sync",
            "redux.sync",
            // The tensor-core instructions the simulator runs as warp collectives.
            "mma.sync",
            "ldmatrix.sync",
            "stmatrix.sync",
            "wgmma.mma_async",
            // An mbarrier wait yields to the threads that arrive.
            "mbarrier.try_wait",
        ];
        self.reachable(name)
            .iter()
            .any(|body| collectives.iter().any(|c| body.contains(c)))
    }

    /// See [`entry_static_shared_bytes`].
    pub(crate) fn static_shared_bytes(&self, name: &str) -> usize {
        let bodies = self.reachable(name);
        let local: usize = bodies
            .iter()
            .flat_map(|b| b.lines().filter_map(shared_decl))
            .map(|(_, bytes)| bytes)
            .fold(0, usize::saturating_add);
        let module: usize = self
            .shared
            .iter()
            .filter(|(sym, _)| bodies.iter().any(|b| names(b, sym)))
            .map(|(_, bytes)| *bytes)
            .fold(0, usize::saturating_add);
        local.saturating_add(module)
    }
}

impl Module<'static> {
    /// The parsed module of a kernel crate's PTX, parsed on first use.
    pub(crate) fn cached(ptx: &'static str) -> std::sync::Arc<Module<'static>> {
        type Cache = std::collections::HashMap<usize, std::sync::Arc<Module<'static>>>;
        static CACHE: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);
        let mut cache = CACHE.lock().expect("poisoned");
        cache
            .get_or_insert_with(Default::default)
            .entry(ptx.as_ptr() as usize)
            .or_insert_with(|| std::sync::Arc::new(Module::parse(ptx)))
            .clone()
    }
}

/// Whether the entry `name`, or any function it calls, executes a block barrier
/// (`bar.sync` / `barrier.sync`) or a warp collective (`bar.warp.sync`, `shfl.sync`,
/// `vote.sync`, `match.*.sync`, `redux.sync`, and the tensor cores' `mma.sync`, `ldmatrix`,
/// `stmatrix`, `wgmma.mma_async`), or waits on an mbarrier: the simulator must then run its
/// threads as coroutines.
pub fn entry_uses_barrier(ptx: &str, name: &str) -> bool {
    Module::parse(ptx).uses_barrier(name)
}

/// Bytes of static shared memory the entry `name` uses: the `.shared` arrays declared in it
/// or in a function it calls, and the module's `.shared` arrays they name (the dynamic
/// `.extern .shared` array is sized by the launch, not counted). Alignment padding between
/// arrays is not counted, so this can be a few bytes under what ptxas allocates.
pub fn entry_static_shared_bytes(ptx: &str, name: &str) -> usize {
    Module::parse(ptx).static_shared_bytes(name)
}

#[cfg(test)]
mod barrier_tests {
    use super::*;

    #[test]
    fn barriers_are_found_through_calls() {
        let ptx = r#"
.func  (.param .b32 func_retval0) helper(
	.param .b64 helper_param_0
)
{
	bar.sync 	0;
	ret;
}
.func leaf()
{
	ret;
}
.visible .entry direct(
	.param .u64 direct_param_0
)
{
	{ // callseq 0
	bar.sync 	0;
	}
	ret;
}
.visible .entry indirect()
{
	{ // callseq 1
	call.uni (retval0), helper, (param0);
	}
	ret;
}
.visible .entry none()
{
	call.uni leaf, ();
	ret;
}
"#;
        assert!(entry_uses_barrier(ptx, "direct"));
        assert!(entry_uses_barrier(ptx, "indirect"));
        assert!(!entry_uses_barrier(ptx, "none"));
        assert!(!entry_uses_barrier(ptx, "missing"));
        let warp =
            ".visible .entry w()\n{\n\tshfl.sync.bfly.b32 \t%r2, %r1, 16, 31, -1;\n\tret;\n}\n";
        assert!(entry_uses_barrier(warp, "w"));
        // The tensor cores' warp-wide instructions.
        for ins in [
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];",
            "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r1], {%r2, %r3};",
        ] {
            let tc = format!(".visible .entry t()\n{{\n\t{ins}\n\tret;\n}}\n");
            assert!(entry_uses_barrier(&tc, "t"), "{ins}");
        }
    }

    #[test]
    fn static_shared_memory_is_summed_over_what_an_entry_reaches() {
        let ptx = r#"
.extern .shared .align 16 .b8 __berth_dynamic_shared[];
.shared .align 16 .b8 _ZA[4096];
.shared .align 16 .b8 _ZB[1024];
.func helper()
{
	.shared .align 4 .b32 _ZLOCAL[8];
	ld.shared.b32 	%r1, [_ZA+4];
	ret;
}
.visible .entry uses_a()
{
	call.uni helper, ();
	ret;
}
.visible .entry uses_b()
{
	.shared .align 16 .b8 _ZOWN[16];
	st.shared.b32 	[_ZB], %r1;
	ret;
}
.visible .entry none()
{
	ret;
}
"#;
        assert_eq!(entry_static_shared_bytes(ptx, "uses_a"), 4096 + 32);
        assert_eq!(entry_static_shared_bytes(ptx, "uses_b"), 1024 + 16);
        assert_eq!(entry_static_shared_bytes(ptx, "none"), 0);
    }

    #[test]
    fn a_declaration_does_not_hide_the_definition_after_it() {
        // As rustc writes them: forward declarations (one `.noreturn`) at the top, here
        // followed directly by definitions, with no global initialiser's braces between.
        let ptx = r#"
.func panic_at
(
	.param .b64 panic_at_param_0
)
.noreturn;
.func  (.param .b32 func_retval0) helper
(
	.param .b32 helper_param_0
)
;
.visible .entry first(
	.param .u64 first_param_0
)
{
	bar.sync 	0;
	ret;
}
.func  (.param .b32 func_retval0) helper(
	.param .b32 helper_param_0
)
{
	shfl.sync.bfly.b32 	%r2, %r1, 16, 31, -1;
	ret;
}
.visible .entry second()
{
	{ // callseq 0
	call.uni (retval0), helper, (param0);
	}
	ret;
}
"#;
        let bodies = function_bodies(ptx);
        let mut names: Vec<&str> = bodies.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["first", "helper", "second"]);
        assert!(
            bodies["helper"].contains("shfl.sync"),
            "{}",
            bodies["helper"]
        );
        assert!(entry_uses_barrier(ptx, "first"));
        assert!(entry_uses_barrier(ptx, "second"));
    }

    #[test]
    fn many_entries_after_the_last_function_are_all_found() {
        let mut ptx = String::from(".func leaf()\n{\n\tret;\n}\n");
        for i in 0..300 {
            ptx.push_str(&format!(
                ".visible .entry e{i}()\n{{\n\tcall.uni leaf, ();\n\tret;\n}}\n"
            ));
        }
        let bodies = function_bodies(&ptx);
        assert_eq!(bodies.len(), 301);
        assert!(bodies["e299"].contains("call.uni leaf"));
    }
}
