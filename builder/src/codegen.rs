//! The IR in and out of the rewrites (stage 4's input), and stage 5 of a kernel build: the
//! rewritten module optimised (`opt -O3` with nvcc's appetite for unrolling small loops,
//! everything but the exports internalised) and compiled to PTX (`llc`), with the toolchain's
//! LLVM tools.

use crate::ir::Module;
use crate::link::{Joined, LinkError};
use crate::tools::{self, Tools};
use std::path::PathBuf;

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

/// The PTX of the rewritten `module`: `<work>/<crate>.ptx`. The rewritten text stays beside
/// it as `rewritten.ll`.
pub fn compile(
    tools: Tools,
    module: &Module,
    joined: &Joined,
    krate: &str,
    opts: &CodegenOptions,
) -> Result<PathBuf, LinkError> {
    let work = &joined.work;
    let ptx = work.join(format!("{}.ptx", krate.replace('-', "_")));
    let text = module.to_string();
    // The same module, options and tools as the last build: its PTX is still right.
    let kept: String = joined.exports.iter().map(|s| format!("{s}\n")).collect();
    let stamp = work.join("codegen.key");
    let key = crate::memo::key(&[
        without_source_locations(&text).as_bytes(),
        kept.as_bytes(),
        opts.arch.as_bytes(),
        &[u8::from(opts.lsr), u8::from(opts.combine_checks)],
        opts.keep_checks.join(",").as_bytes(),
        &UNROLL_THRESHOLD.to_le_bytes(),
        crate::memo::builder_identity().as_bytes(),
        tools.identity(&["llvm-as", "opt", "llc"]).as_bytes(),
    ]);
    if crate::memo::fresh(&stamp, &key, &[&ptx]) {
        return Ok(ptx);
    }
    crate::memo::clear(&stamp);
    // The stages pass text: `opt` and `llc` read it as fast as bitcode, and the check
    // combining between them works on text.
    let rewritten = work.join("rewritten.ll");
    tools::write(&rewritten, &text)?;
    let exports = work.join("exports.txt");
    tools::write(&exports, &kept)?;
    let optimized = work.join("optimized.ll");
    tools.run("opt", &rewritten, |c| {
        c.arg(&rewritten)
            .arg(format!("-mcpu={}", opts.arch))
            .arg("-nvptx-short-ptr")
            .arg(format!(
                "--internalize-public-api-file={}",
                exports.display()
            ))
            .arg("--passes=default<O3>,internalize,globaldce")
            .arg(format!("-unroll-threshold={UNROLL_THRESHOLD}"))
            .arg("-S")
            .arg("-o")
            .arg(&optimized)
    })?;
    let optimized = if opts.combine_checks {
        combine_checks(work, &optimized, &opts.keep_checks)?
    } else {
        optimized
    };
    tools.run("llc", &optimized, |c| {
        c.arg(format!("-mcpu={}", opts.arch))
            .arg("-nvptx-short-ptr")
            // Loop strength reduction gives every checked access two induction variables (the
            // index its bounds check compares, the address it loads): register-blocked kernels
            // then need 28–34 more registers than nvcc's and run at half the occupancy. Without
            // it each address is recomputed from its index (one multiply-add), as ptxas likes.
            .args((!opts.lsr).then_some("-disable-lsr"))
            .arg(&optimized)
            .arg("-o")
            .arg(&ptx)
    })?;
    crate::memo::record(&stamp, &key);
    Ok(ptx)
}

/// The optimised module with the bounds checks of each straight stretch tested together
/// ([`crate::ir::checks`]): `combined.ll`.
fn combine_checks(
    work: &std::path::Path,
    optimized: &std::path::Path,
    keep: &[String],
) -> Result<PathBuf, LinkError> {
    let mut module = Module::parse(&tools::read(optimized)?);
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    crate::ir::checks::combine(&mut module, &keep);
    let combined = work.join("combined.ll");
    tools::write(&combined, &module.to_string())?;
    Ok(combined)
}

#[cfg(test)]
mod tests {
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
