//! The IR in and out of the rewrites (stage 4's input), and stage 5 of a kernel build: the
//! rewritten module optimised (`opt -O3` with nvcc's appetite for unrolling small loops,
//! everything but the exports internalised) and compiled to PTX (`llc`), with the toolchain's
//! LLVM tools.

use crate::ir::{Module, reach};
use crate::link::{Joined, LinkError};
use crate::tools::{self, Tools};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The cost (LLVM's instruction estimate) up to which `opt` unrolls a loop of constant trip
/// count completely: `-unroll-threshold`, 300 at `-O3` otherwise.
///
/// nvcc unrolls small constant-trip loops whole, so an accumulator like `[[f32; 8]; 8]` indexed
/// by the loop counters becomes 64 registers. LLVM's default leaves the outer loop of a
/// register-blocked SGEMM's 8×8 write-back rolled (its body, eight checked stores, costs more
/// than 300), and then the accumulator must stay addressable: a 256-byte local-memory frame,
/// read back from memory in every step of the main loop. At 1000 loops of that size unroll
/// and SROA (which the pipeline runs after full unrolling) puts the arrays in registers, but
/// the 8 steps of that SGEMM's multiply loop (64 multiply-adds and four 16-byte shared reads
/// each) stay a loop, whose shared reads then wait on the multiply-adds before them; nvcc
/// unrolls it, and schedules the next step's reads under the current step's arithmetic. At
/// 2000 it unrolls too; in the example and fixture kernels no other loop changes
/// (`tests/tests/kernels.rs` checks the plain ports' multiply loops and frames). Loops whose
/// trip count is not a constant are not affected: partial and runtime unrolling keep their
/// own thresholds.
pub const UNROLL_THRESHOLD: u32 = 2000;

/// Settings of code generation.
#[derive(Debug, Clone)]
pub struct CodegenOptions {
    /// GPU architecture (`sm_90`).
    pub arch: String,
    /// Run LLVM's loop strength reduction in `llc` (off by default; `BERTH_LSR=on`).
    pub lsr: bool,
    /// Test the bounds checks of each straight stretch together at its start
    /// ([`crate::ir::checks`]; on by default, `BERTH_COMBINE_CHECKS=off` turns it off).
    pub combine_checks: bool,
    /// Take the bounds checks of counted loops out before the loop ([`crate::ir::hoist`]; on
    /// by default, `BERTH_HOIST_CHECKS=off` turns it off).
    pub hoist_checks: bool,
    /// Kernels whose checks stay as written (a declared block shape or register budget).
    pub keep_checks: Vec<String>,
}

/// The joined program as a module to rewrite: its text (`joined.ll`, kept for reading),
/// parsed once.
pub fn disassemble(tools: Tools, joined: &Joined) -> Result<Module, LinkError> {
    let ll = joined.work.join("joined.ll");
    tools.run("llvm-dis", &joined.bitcode, |c| {
        c.arg(&joined.bitcode).arg("-o").arg(&ll)
    })?;
    Ok(Module::parse(&tools::read(&ll)?))
}

/// `text` without the values of its inline assembly's source locations (`!srcloc !N`, the
/// byte offset of each `asm!` in its file, which any edit above it moves): they only place
/// `llc`'s errors, so a module that differs in them alone compiles to the same PTX.
fn without_source_locations(text: &str) -> String {
    let ids: std::collections::HashSet<&str> = text
        .match_indices("!srcloc !")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()]
        })
        .collect();
    text.lines()
        .filter(|l| {
            l.strip_prefix('!')
                .and_then(|r| r.split_once(" = !{i64 "))
                .is_none_or(|(id, _)| !ids.contains(id))
        })
        .flat_map(|l| [l, "\n"])
        .collect()
}

/// The PTX of the rewritten `module`: `<work>/<crate>.ptx`. The program `opt` is given stays
/// beside it as `rewritten.ll`: the module without what no export reaches ([`reach::prune`]).
///
/// Each kernel is optimised and compiled alone, from its own module
/// ([`reach::kernel_modules`]), in `<work>/kernels/`, and the kernels' PTX joined, with one
/// copy of what they share. A kernel whose module, options and tools are those of the last
/// build keeps its PTX: an edit to one kernel compiles that kernel again, an edit to a
/// function several call compiles those.
pub fn compile(
    tools: Tools,
    module: &Module,
    joined: &Joined,
    krate: &str,
    opts: &CodegenOptions,
) -> Result<PathBuf, LinkError> {
    let work = &joined.work;
    let ptx = work.join(format!("{}.ptx", krate.replace('-', "_")));
    let program = reach::prune(module, &joined.exports);
    tools::write(&work.join("rewritten.ll"), &program.to_string())?;
    let (text, _) = kernels_ptx(tools, &program, &joined.exports, work, opts)?;
    if tools::read(&ptx).ok().as_deref() != Some(text.as_str()) {
        tools::write(&ptx, &text)?;
    }
    Ok(ptx)
}

/// The PTX of `program`'s kernels, each compiled from its own module in `<work>/kernels/` or
/// kept from the last build, joined; and the kernels compiled this time.
fn kernels_ptx(
    tools: Tools,
    program: &Module,
    exports: &[String],
    work: &Path,
    opts: &CodegenOptions,
) -> Result<(String, Vec<String>), LinkError> {
    let kept: String = exports.iter().map(|s| format!("{s}\n")).collect();
    let exports_file = work.join("exports.txt");
    if tools::read(&exports_file).ok().as_deref() != Some(kept.as_str()) {
        tools::write(&exports_file, &kept)?;
    }
    let mut units = reach::kernel_modules(program, exports);
    if units.is_empty() {
        units.push(("crate".to_owned(), program.clone()));
    }
    let dir = work.join("kernels");
    std::fs::create_dir_all(&dir).map_err(|source| LinkError::Io {
        path: dir.clone(),
        source,
    })?;
    let settings = Settings {
        tools,
        dir: &dir,
        exports: &exports_file,
        opts,
        names: exports,
        // What every kernel's stamp holds besides its module and its exports.
        common: crate::memo::key(&[
            opts.arch.as_bytes(),
            &[
                u8::from(opts.lsr),
                u8::from(opts.combine_checks),
                u8::from(opts.hoist_checks),
            ],
            opts.keep_checks.join(",").as_bytes(),
            &UNROLL_THRESHOLD.to_le_bytes(),
            crate::memo::builder_identity().as_bytes(),
            tools.identity(&["opt", "llc"]).as_bytes(),
        ]),
    };
    let done = in_parallel(&units, |(name, m)| compile_kernel(&settings, name, m))?;
    let compiled = units
        .iter()
        .zip(&done)
        .filter(|(_, (_, compiled))| *compiled)
        .map(|((name, _), _)| name.clone())
        .collect();
    forget_others(
        &dir,
        units.iter().map(|(name, _)| file_stem(name)).collect(),
    );
    let texts: Vec<String> = done.into_iter().map(|(text, _)| text).collect();
    let text = crate::ptx_join::join(&texts).map_err(|e| LinkError::Tool {
        tool: "the PTX join",
        file: dir.clone(),
        stderr: e.to_string(),
    })?;
    Ok((text, compiled))
}

/// What compiling each kernel needs besides its module.
struct Settings<'a> {
    tools: Tools,
    dir: &'a Path,
    /// The file of the exports, for `opt`.
    exports: &'a Path,
    /// The exports.
    names: &'a [String],
    opts: &'a CodegenOptions,
    common: String,
}

/// The PTX of one kernel's module: `<dir>/<kernel>.ptx`, kept from the last build when its
/// stamp (`<kernel>.key`) says the module, options and tools are the same; and whether it was
/// compiled (not kept).
fn compile_kernel(
    s: &Settings<'_>,
    kernel: &str,
    module: &Module,
) -> Result<(String, bool), LinkError> {
    let stem = file_stem(kernel);
    let file = |ext: &str| s.dir.join(format!("{stem}.{ext}"));
    let (ptx, stamp) = (file("ptx"), file("key"));
    let text = module.to_string();
    // The exports this module defines: those `opt` keeps (another kernel added or removed
    // changes the list, not this kernel's code).
    let defined: HashSet<&str> = module
        .functions()
        .map(|f| f.name.as_str())
        .chain(module.globals().map(|g| g.name.as_str()))
        .collect();
    let own: Vec<&str> = s
        .names
        .iter()
        .map(String::as_str)
        .filter(|e| defined.contains(e))
        .collect();
    let key = crate::memo::key(&[
        without_source_locations(&text).as_bytes(),
        own.join("\n").as_bytes(),
        s.common.as_bytes(),
    ]);
    if crate::memo::fresh(&stamp, &key, &[&ptx])
        && let Ok(kept) = tools::read(&ptx)
    {
        return Ok((kept, false));
    }
    crate::memo::clear(&stamp);
    let (opts, tools) = (s.opts, s.tools);
    // The stages pass text: `opt` and `llc` read it as fast as bitcode, and the check
    // combining between them works on text.
    let rewritten = file("ll");
    tools::write(&rewritten, &text)?;
    let optimized = file("opt.ll");
    tools.run("opt", &rewritten, |c| {
        c.arg(&rewritten)
            .arg(format!("-mcpu={}", opts.arch))
            .arg("-nvptx-short-ptr")
            .arg(format!(
                "--internalize-public-api-file={}",
                s.exports.display()
            ))
            .arg("--passes=default<O3>,internalize,globaldce")
            .arg(format!("-unroll-threshold={UNROLL_THRESHOLD}"))
            .arg("-S")
            .arg("-o")
            .arg(&optimized)
    })?;
    let optimized = if opts.combine_checks || opts.hoist_checks {
        combine_checks(
            &optimized,
            &file("combined.ll"),
            &opts.keep_checks,
            (opts.combine_checks, opts.hoist_checks),
        )?
    } else {
        optimized
    };
    let cpu = crate::target::llc_arch(&text, &opts.arch);
    tools.run("llc", &optimized, |c| {
        c.arg(format!("-mcpu={cpu}"))
            .arg("-nvptx-short-ptr")
            // Loop strength reduction gives a checked access two induction variables (the
            // index its bounds check compares, the address it loads), which costs registers
            // where checks stay in loops (and, with them hoisted, still raises more kernels'
            // register counts than it lowers: docs/kernel-language.md). Without it each
            // address is recomputed from its index (one multiply-add), as ptxas likes.
            .args((!opts.lsr).then_some("-disable-lsr"))
            .arg(&optimized)
            .arg("-o")
            .arg(&ptx)
    })?;
    let out = tools::read(&ptx)?;
    crate::memo::record(&stamp, &key);
    Ok((out, true))
}

/// The extensions of a kernel's files in `<work>/kernels/`.
const KERNEL_FILES: [&str; 5] = ["ll", "opt.ll", "combined.ll", "ptx", "key"];

/// Remove the files in `dir` of kernels the crate no longer has (renamed or removed), so
/// that what is there to read is this build's. Written for tidiness only: a file that
/// cannot be removed stays.
fn forget_others(dir: &Path, stems: HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = KERNEL_FILES.iter().any(|ext| {
            name.strip_suffix(ext)
                .and_then(|n| n.strip_suffix('.'))
                .is_some_and(|stem| stems.contains(stem))
        });
        if !ours {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A file name for `kernel`'s files: its symbol where that is one (LLVM's unquoted names are
/// letters, digits and `_.$`), otherwise a hash of it.
fn file_stem(kernel: &str) -> String {
    if !kernel.is_empty()
        && kernel.len() < 200
        && kernel.bytes().all(crate::ir::module::is_ident_byte)
    {
        kernel.to_owned()
    } else {
        format!("kernel-{}", crate::memo::key(&[kernel.as_bytes()]))
    }
}

/// `f` of every item, on as many threads as the machine has cores (`opt` and `llc` are
/// processes of their own; the threads only wait for them), in the items' order; the first
/// error if any fails.
pub(crate) fn in_parallel<T: Sync, R: Send, E: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<R, E>>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    let failed = r.is_err();
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    if failed {
                        // The others stop at their next item: the first error is reported.
                        next.store(items.len(), std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut out = Vec::with_capacity(items.len());
    // An item left undone comes after the error that stopped the others.
    for r in results {
        if let Some(r) = r.into_inner().unwrap_or_else(|e| e.into_inner()) {
            out.push(r?);
        }
    }
    Ok(out)
}

/// The rewrites of the optimised IR's bounds checks ([`crate::ir::checks`], then
/// [`crate::ir::hoist`], as `(combine, hoist)` select), written to `combined`.
fn combine_checks(
    optimized: &Path,
    combined: &Path,
    keep: &[String],
    (combine, hoist): (bool, bool),
) -> Result<PathBuf, LinkError> {
    let mut module = Module::parse(&tools::read(optimized)?);
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    if combine {
        crate::ir::checks::combine(&mut module, &keep);
    }
    if hoist {
        crate::ir::hoist::hoist(&mut module, &keep);
    }
    tools::write(combined, &module.to_string())?;
    Ok(combined.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two kernels calling one function, and a third calling nothing.
    const PROGRAM: &str = "target datalayout = \"e-p3:32:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n\
        target triple = \"nvptx64-nvidia-cuda\"\n\
        @__berth_panic_record = global [16 x i8] zeroinitializer, align 8\n\
        @llvm.used = appending global [1 x ptr] [ptr @__berth_panic_record], section \"llvm.metadata\"\n\
        define void @scale(ptr %p, float %x) {\n  %v = fmul float %x, 2.0\n  store float %v, ptr %p, align 4\n  ret void\n}\n\
        define ptx_kernel void @a(ptr %p) {\n  call void @scale(ptr %p, float 1.0)\n  ret void\n}\n\
        define ptx_kernel void @b(ptr %p, float %x) {\n  call void @scale(ptr %p, float %x)\n  ret void\n}\n\
        define ptx_kernel void @c(ptr %p) {\n  store float 5.0, ptr %p, align 4\n  ret void\n}\n";

    fn exports() -> Vec<String> {
        ["a", "b", "c", "__berth_panic_record"]
            .map(String::from)
            .to_vec()
    }

    fn options() -> CodegenOptions {
        CodegenOptions {
            arch: "sm_90".into(),
            lsr: false,
            combine_checks: true,
            hoist_checks: true,
            keep_checks: Vec::new(),
        }
    }

    /// The toolchain's LLVM tools, or `None` (and the test is skipped) where they are not
    /// installed.
    fn tools() -> Option<Tools> {
        let tools = Tools::find().ok();
        if tools.is_none() {
            eprintln!("the toolchain's LLVM tools are not installed: skipping");
        }
        tools
    }

    #[test]
    fn an_edit_compiles_again_the_kernels_whose_module_it_changes() {
        let Some(tools) = tools() else { return };
        let work = tempfile::tempdir().unwrap();
        let build = |text: &str| {
            let program = reach::prune(&Module::parse(text), &exports());
            kernels_ptx(tools, &program, &exports(), work.path(), &options()).unwrap()
        };
        let (first, compiled) = build(PROGRAM);
        assert_eq!(compiled, ["a", "b", "c"]);
        for k in ["a", "b", "c"] {
            assert!(first.contains(&format!(".entry {k}(")), "{first}");
        }
        // The record every module holds is in the crate's module once.
        assert_eq!(
            first
                .matches(".global .align 8 .b8 __berth_panic_record")
                .count(),
            1,
            "{first}"
        );
        // Nothing changed: nothing compiled, the same PTX.
        let (again, compiled) = build(PROGRAM);
        assert!(compiled.is_empty(), "{compiled:?}");
        assert_eq!(again, first);
        // One kernel's body: that kernel.
        let (_, compiled) = build(&PROGRAM.replace("float 5.0", "float 6.0"));
        assert_eq!(compiled, ["c"]);
        // A function two kernels call: those two.
        let edited = PROGRAM
            .replace("float 5.0", "float 6.0")
            .replace("float %x, 2.0", "float %x, 4.0");
        let (_, compiled) = build(&edited);
        assert_eq!(compiled, ["a", "b"]);
        // A kernel removed: its files go, the others' stay.
        let without_c = edited.replace("define ptx_kernel void @c(ptr %p) {\n  store float 6.0, ptr %p, align 4\n  ret void\n}\n", "");
        let exports_ab = ["a", "b", "__berth_panic_record"]
            .map(String::from)
            .to_vec();
        let program = reach::prune(&Module::parse(&without_c), &exports_ab);
        let (text, compiled) =
            kernels_ptx(tools, &program, &exports_ab, work.path(), &options()).unwrap();
        assert!(!text.contains(".entry c("), "{text}");
        assert!(compiled.is_empty(), "{compiled:?}");
        let kernels = work.path().join("kernels");
        assert!(!kernels.join("c.ptx").exists() && !kernels.join("c.key").exists());
        assert!(kernels.join("a.ptx").is_file() && kernels.join("b.key").is_file());
        // Another option: every kernel.
        let program = reach::prune(&Module::parse(&edited), &exports());
        let lsr = CodegenOptions {
            lsr: true,
            ..options()
        };
        let (_, compiled) = kernels_ptx(tools, &program, &exports(), work.path(), &lsr).unwrap();
        assert_eq!(compiled, ["a", "b", "c"]);
    }

    #[test]
    fn kernels_compiled_apart_are_the_kernels_of_the_whole_program() {
        let Some(tools) = tools() else { return };
        let work = tempfile::tempdir().unwrap();
        let program = reach::prune(&Module::parse(PROGRAM), &exports());
        let (split, _) = kernels_ptx(tools, &program, &exports(), work.path(), &options()).unwrap();
        // The whole program through opt and llc at once, as one module.
        let dir = work.path();
        let (ll, opt, ptx) = (
            dir.join("whole.ll"),
            dir.join("whole.opt.ll"),
            dir.join("whole.ptx"),
        );
        tools::write(&ll, &program.to_string()).unwrap();
        tools
            .run("opt", &ll, |c| {
                c.arg(&ll)
                    .arg("-mcpu=sm_90")
                    .arg("-nvptx-short-ptr")
                    .arg(format!(
                        "--internalize-public-api-file={}",
                        dir.join("exports.txt").display()
                    ))
                    .arg("--passes=default<O3>,internalize,globaldce")
                    .arg(format!("-unroll-threshold={UNROLL_THRESHOLD}"))
                    .arg("-S")
                    .arg("-o")
                    .arg(&opt)
            })
            .unwrap();
        let combined =
            combine_checks(&opt, &dir.join("whole.combined.ll"), &[], (true, true)).unwrap();
        tools
            .run("llc", &combined, |c| {
                c.args(["-mcpu=sm_90", "-nvptx-short-ptr", "-disable-lsr"])
                    .arg(&combined)
                    .arg("-o")
                    .arg(&ptx)
            })
            .unwrap();
        let whole = tools::read(&ptx).unwrap();
        let mut want = crate::ptx_join::entries(&whole);
        let mut got = crate::ptx_join::entries(&split);
        want.sort();
        got.sort();
        assert_eq!(got.len(), 3);
        assert_eq!(got, want, "{split}\n----\n{whole}");
    }

    #[test]
    fn source_locations_of_inline_assembly_do_not_count() {
        let a = "call void asm \"bar.sync 0;\", \"\"(), !srcloc !3\n!2 = !{i64 0, i64 32}\n!3 = !{i64 1475342741355953}\n";
        let moved = a.replace("1475342741355953", "1475308381617577");
        let other_range = a.replace("i64 32", "i64 64");
        let strip = super::without_source_locations;
        assert_eq!(strip(a), strip(&moved));
        assert_ne!(strip(a), strip(&other_range));
        assert!(strip(a).contains("bar.sync"));
    }
}
