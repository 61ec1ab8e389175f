//! Stage 4 of a kernel build: the rewrites of the whole kernel program's LLVM IR before it is
//! optimised and compiled to PTX: what rustc cannot express but nvcc's front end does.
//!
//! The IR is parsed once ([`Module`]); each rewrite works on it and says what it did
//! ([`Report`]). A rewrite that a kernel needs and that did not apply — a line it should
//! change in a form it does not know, an entry its attributes name that is not there — is an
//! error naming the kernel and the rewrite ([`RewriteError`]), never a kernel built without it.
//!
//! - **Per-kernel attributes** (`ir/kernel.rs`): the entry's section from `#[gpu_kernel(..)]`
//!   becomes LLVM attributes; a declared block shape gives thread-index reads exact ranges.
//! - **Pointer parameters' alignment** (`ir/align.rs`).
//! - **Shared memory in its address space** (`ir/shared.rs`).
//! - **Contraction** (`ir/contract.rs`): float multiplies and adds may fuse into FMAs.
//! - **Index bounds** (`ir/kernel.rs`): every read of a thread or block index is assumed below
//!   its axis size, so a kernel that checks its block shape itself gets a declared shape's
//!   ranges past the check.
//! - **32-bit pointers** for the shared, constant and local spaces (`-nvptx-short-ptr`, nvcc's
//!   default): shared addresses fit one register, not two.
//!
//! After `opt`, [`checks`] tests the bounds checks of each straight stretch together.
//!
//! The names and encodings the rewrites read are berth's kernel ABI ([`berth_abi`]).

mod align;
pub mod calls;
pub mod checks;
mod contract;
pub mod hoist;
mod kernel;
pub mod module;
pub mod reach;
mod shared;

pub use module::Module;

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
    /// Reads of a thread index or block size given their exact range (kernels with a
    /// required block shape).
    pub ranged: usize,
    /// Reads of a thread or block index followed by the assumption that it is below the
    /// block or grid size of its axis (every kernel).
    pub bounded: usize,
    /// Kernels whose pointer parameters were given an alignment, with the alignment of each
    /// parameter (0: not a pointer to data).
    pub param_align: Vec<(String, Vec<u8>)>,
    /// Whether the data layout was given 32-bit pointers for the shared, constant and local
    /// spaces.
    pub short_pointers: bool,
}

/// Why a module could not be rewritten.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RewriteError {
    /// A kernel section names an attribute this builder does not know.
    #[error(
        "kernel `{kernel}` carries the attribute `{attr}`, unknown to this berth-gpu-build (are berth and berth-gpu-build the same version?)"
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
         (are berth and berth-gpu-build the same version?)"
    )]
    ParamAlignMismatch {
        /// The kernel.
        kernel: String,
        /// Parameters the list names.
        expected: usize,
        /// Parameters the entry has.
        found: usize,
    },
    /// A rewrite the kernel needs did not apply: it found a line it should apply to in a
    /// form it does not recognise, or not what it applies to. The build stops rather than
    /// produce a kernel without it.
    #[error(
        "`{kernel}`: the {rewrite} rewrite did not apply, so the kernel would be built without it (this berth-gpu-build does not know this rustc's IR; please report it): {line}"
    )]
    NotApplied {
        /// The kernel (or, for contraction, the function).
        kernel: String,
        /// Which rewrite.
        rewrite: &'static str,
        /// The line, trimmed.
        line: String,
    },
    /// A static in the shared section whose definition is in a form the shared-memory
    /// rewrite does not know: left alone it would be one global buffer for all blocks.
    #[error(
        "the shared array `{name}` could not be moved to shared memory (this berth-gpu-build does not know this rustc's IR; please report it): {line}"
    )]
    SharedNotMoved {
        /// The static.
        name: String,
        /// Its definition.
        line: String,
    },
}

/// The error for a rewrite of `kernel` (or function) that did not apply at `line`.
fn not_applied(kernel: &str, rewrite: &'static str, line: &str) -> RewriteError {
    RewriteError::NotApplied {
        kernel: kernel.to_owned(),
        rewrite,
        line: line.trim().to_owned(),
    }
}

/// Apply the rewrites to `module`: what each did.
pub fn rewrite(module: &mut Module, opts: Rewrite) -> Result<Report, RewriteError> {
    let kernels = kernel::attributes(module)?;
    let param_align = align::apply(module)?;
    let shared = shared::apply(module)?;
    let exact: Vec<&str> = kernels
        .iter()
        .filter(|(_, a)| a.exact_fp)
        .map(|(k, _)| k.as_str())
        .collect();
    let contracted = if opts.contract {
        contract::apply(module, &exact)?
    } else {
        0
    };
    let ranged = kernel::thread_ranges(module, &kernels)?;
    let bounded = kernel::index_bounds(module);
    let short_pointers = short_pointers(module);
    Ok(Report {
        shared,
        reqntid: kernels
            .iter()
            .filter_map(|(k, a)| Some((k.clone(), a.block?)))
            .collect(),
        minctasm: kernels
            .iter()
            .filter_map(|(k, a)| Some((k.clone(), a.min_blocks?)))
            .collect(),
        exact: exact.into_iter().map(str::to_owned).collect(),
        contracted,
        ranged,
        bounded,
        param_align,
        short_pointers,
    })
}

/// [`rewrite`] on a module's text: the rewritten text and the report.
pub fn rewrite_text(ir: &str, opts: Rewrite) -> Result<(String, Report), RewriteError> {
    let mut module = Module::parse(ir);
    let report = rewrite(&mut module, opts)?;
    Ok((module.to_string(), report))
}

/// 32-bit pointers for the shared, constant and local spaces in the data layout: whether the
/// module had one to change.
fn short_pointers(m: &mut Module) -> bool {
    for line in m.lines_mut() {
        if let Some(layout) = line.strip_prefix("target datalayout = \"") {
            let layout = layout.trim_end_matches('"');
            *line = format!("target datalayout = \"{layout}-p3:32:32-p4:32:32-p5:32:32\"");
            return true;
        }
    }
    false
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
        let (out, report) = rewrite_text(MODULE, Rewrite { contract: true }).unwrap();
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
        let (out, report) = rewrite_text(MODULE, Rewrite { contract: true }).unwrap();
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
        let (out, report) = rewrite_text(MODULE, Rewrite { contract: true }).unwrap();
        assert!(out.contains("%4 = fmul contract float %3, %3"));
        assert!(out.contains("%5 = fadd contract float %4, %3"));
        assert!(
            out.contains("%2 = fmul float 1.0, 2.0"),
            "exact kernel untouched"
        );
        assert!(out.contains("%b = fmul contract <2 x float> %a, %a"));
        assert_eq!(report.contracted, 3);
        let (off, report) = rewrite_text(MODULE, Rewrite { contract: false }).unwrap();
        assert!(off.contains("%4 = fmul float %3, %3"));
        assert_eq!(report.contracted, 0);
    }

    #[test]
    fn unknown_kernel_attributes_are_errors() {
        let m = "define ptx_kernel void @k() section \"berth:warp=3\" {\n}\n";
        assert_eq!(
            rewrite_text(m, Rewrite { contract: true }).unwrap_err(),
            RewriteError::UnknownAttribute {
                kernel: "k".into(),
                attr: "warp=3".into()
            }
        );
        let m = "define ptx_kernel void @k() section \"berth:minctasm=two\" {\n}\n";
        assert_eq!(
            rewrite_text(m, Rewrite { contract: true }).unwrap_err(),
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
        let err = rewrite_text(m, Rewrite { contract: false }).unwrap_err();
        assert_eq!(
            err,
            RewriteError::ParamAlignMismatch {
                kernel: "odd".into(),
                expected: 3,
                found: 2
            }
        );
        let m = m.replace("[3 x i8] [i8 8, i8 0, i8 0]", "[2 x i8] [i8 8, i8 0]");
        let (out, report) = rewrite_text(&m, Rewrite { contract: false }).unwrap();
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
        let (out, _) = rewrite_text(only, Rewrite { contract: false }).unwrap();
        assert_eq!(out, "define ptx_kernel void @k() {\n}\n");
    }

    /// A kernel with a required block shape reading `tid.x` in the forms rustc's LLVM writes.
    fn ranged_kernel(read: &str) -> String {
        format!(
            "define ptx_kernel void @k() unnamed_addr section \"berth:reqntid=16,4,1\" {{\n  {read}\n  ret void\n}}\n\ndeclare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
        )
    }

    #[test]
    fn thread_reads_get_their_exact_range_whatever_attributes_the_call_carries() {
        for (read, want) in [
            (
                "%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
                "%t = call range(i32 0, 16) i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
            ),
            (
                "%t = tail call noundef i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
                "%t = tail call noundef range(i32 0, 16) i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
            ),
            (
                "%t = tail call noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
                "%t = tail call noundef range(i32 0, 16) i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
            ),
            (
                "%n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()",
                "%n = call range(i32 4, 5) i32 @llvm.nvvm.read.ptx.sreg.ntid.y()",
            ),
        ] {
            let (out, report) =
                rewrite_text(&ranged_kernel(read), Rewrite { contract: false }).unwrap();
            assert!(out.contains(want), "{read}:\n{out}");
            assert_eq!(report.ranged, 1, "{read}");
            // The declaration after the kernel is left alone.
            assert!(out.contains("\ndeclare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"));
        }
    }

    #[test]
    fn every_thread_and_block_index_read_is_assumed_below_its_axis_size() {
        let m = "define ptx_kernel void @k() {\n  %t = tail call noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n  ret void\n}\n\ndefine internal i32 @f() {\n  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()\n  %l = call i32 @llvm.nvvm.read.ptx.sreg.laneid()\n  ret i32 %b\n}\n\ndeclare i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n";
        let (out, report) = rewrite_text(m, Rewrite { contract: false }).unwrap();
        assert_eq!(report.bounded, 2, "{out}");
        for want in [
            "  %t = tail call noundef range(i32 0, 1024) i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n  %berth.limit.1 = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n  %berth.below.1 = icmp ult i32 %t, %berth.limit.1\n  call void @llvm.assume(i1 %berth.below.1)\n  %n = ",
            "  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()\n  %berth.limit.2 = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.z()\n  %berth.below.2 = icmp ult i32 %b, %berth.limit.2\n  call void @llvm.assume(i1 %berth.below.2)\n  %l = ",
            "\ndeclare void @llvm.assume(i1 noundef)\n",
            "\ndeclare noundef i32 @llvm.nvvm.read.ptx.sreg.nctaid.z()\n",
        ] {
            assert!(out.contains(want), "{want}\nnot in\n{out}");
        }
        // Declared once: the module's own declaration of ntid.y stays the only one.
        assert_eq!(out.matches("declare").count(), 7, "{out}");
        assert!(!out.contains("declare noundef i32 @llvm.nvvm.read.ptx.sreg.ntid.y()"));
    }

    #[test]
    fn a_thread_read_the_range_rewrite_does_not_recognise_fails_the_build_naming_the_kernel() {
        let read = "%t = call #7 i32 @llvm.nvvm.read.ptx.sreg.tid.x()";
        let err = rewrite_text(&ranged_kernel(read), Rewrite { contract: false }).unwrap_err();
        assert!(
            matches!(&err, RewriteError::NotApplied { kernel, .. } if kernel == "k"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("`k`: the thread-index range rewrite"),
            "{err}"
        );
        // Without a required block shape nothing is expected of the line.
        let plain = ranged_kernel(read).replace(" section \"berth:reqntid=16,4,1\"", "");
        rewrite_text(&plain, Rewrite { contract: false }).unwrap();
    }

    /// Each rewrite a kernel needs that cannot apply stops the build, naming the kernel (or
    /// the shared array) and the rewrite.
    #[test]
    fn an_expected_rewrite_that_does_not_apply_is_an_error_naming_the_kernel() {
        let contract = Rewrite { contract: true };
        // An alignment list for an entry the module does not define.
        let m = "@_RNvA = internal constant [1 x i8] c\"\\10\", section \"berth:palign:gone\", align 1\ndefine ptx_kernel void @k(ptr %0) {\n}\n";
        let err = rewrite_text(m, contract).unwrap_err();
        assert!(
            matches!(&err, RewriteError::NotApplied { kernel, rewrite: "parameter alignment", .. } if kernel == "gone"),
            "{err:?}"
        );
        assert!(err.to_string().contains("`gone`"), "{err}");
        // Kernel attributes on a function that is not an entry would be lost.
        let m = "define void @helper() section \"berth:reqntid=32,1,1\" {\n  ret void\n}\n";
        let err = rewrite_text(m, contract).unwrap_err();
        assert!(
            matches!(&err, RewriteError::NotApplied { kernel, rewrite: "kernel attributes", .. } if kernel == "helper"),
            "{err:?}"
        );
        // A shared array in a form the shared-memory rewrite does not know.
        let m = "@_RNvTILE = internal alias i8, ptr @x, section \"berth:shared\"\n";
        let err = rewrite_text(m, contract).unwrap_err();
        assert!(
            matches!(&err, RewriteError::SharedNotMoved { name, .. } if name == "_RNvTILE"),
            "{err:?}"
        );
        // A float operation contraction cannot mark.
        let m = "define ptx_kernel void @dot(ptr %p) {\n  store float fmul (float 1.0, float 2.0), ptr %p\n  ret void\n}\n";
        let err = rewrite_text(m, contract).unwrap_err();
        assert!(
            matches!(&err, RewriteError::NotApplied { kernel, rewrite: "contraction", .. } if kernel == "dot"),
            "{err:?}"
        );
        // ... which is nothing to do where contraction is off.
        rewrite_text(m, Rewrite { contract: false }).unwrap();
    }

    #[test]
    fn declared_functions_are_listed() {
        let m =
            "declare float @__nv_expf(float)\ndeclare void @llvm.trap()\ndefine void @f() {\n}\n";
        assert_eq!(
            Module::parse(m).declared_functions(),
            vec!["__nv_expf", "llvm.trap"]
        );
    }
}
