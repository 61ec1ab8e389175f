//! Stage 5b of a kernel build: the PTX's `.target` and `.version` raised to what its
//! instructions need. llc writes the build's architecture and its default ISA version; inline
//! PTX it does not read may use more: the warpgroup instructions (`wgmma`, `setmaxnreg`) exist
//! only on `sm_90a` (the architecture-specific variant of sm_90, which runs on sm_90 GPUs
//! only), the bulk copies and transaction-counting barriers need PTX ISA 8.0, and `mma` on
//! 8-bit floats PTX ISA 8.4.

use berth_abi::SM90A_ONLY;
use std::path::Path;
/// Instructions that need PTX ISA 8.0.
const ISA_80: [&str; 5] = [
    "wgmma.",
    "setmaxnreg.",
    "cp.async.bulk",
    "expect_tx",
    "fence.proxy.async",
];

/// Types whose `mma` needs PTX ISA 8.4.
const ISA_84: [&str; 2] = [".e4m3", ".e5m2"];

/// `ptx` with its `.target` and `.version` raised for the instructions it holds, and the
/// architecture to assemble it for: `arch` itself, or `sm_90a` for sm_90 PTX that uses
/// `wgmma` or `setmaxnreg`.
pub fn raise(ptx: &str, arch: &str) -> (String, String) {
    let uses = |set: &[&str]| set.iter().any(|i| ptx.contains(i));
    let arch = if arch == "sm_90" && uses(&SM90A_ONLY) {
        "sm_90a".to_owned()
    } else {
        arch.to_owned()
    };
    let isa = if uses(&ISA_84) {
        Some((8, 4))
    } else if uses(&ISA_80) {
        Some((8, 0))
    } else {
        None
    };
    let mut out = String::with_capacity(ptx.len() + 8);
    for line in ptx.split_inclusive('\n') {
        let body = line.trim_end();
        if let Some(t) = body.strip_prefix(".target ") {
            let rest = t
                .split_once(',')
                .map(|(_, r)| format!(",{r}"))
                .unwrap_or_default();
            out.push_str(&format!(".target {arch}{rest}\n"));
        } else if let Some(v) = body.strip_prefix(".version ")
            && let Some((major, minor)) = isa
            && version(v) < (major, minor)
        {
            out.push_str(&format!(".version {major}.{minor}\n"));
        } else {
            out.push_str(line);
        }
    }
    (out, arch)
}

/// LLVM's intrinsics that exist on `sm_90a` only: the warpgroup fences, commits and waits and
/// `setmaxnreg` (berth's device crate calls them rather than inline PTX, because they are
/// `convergent`).
const SM90A_INTRINSICS: [&str; 2] = ["@llvm.nvvm.wgmma.", "@llvm.nvvm.setmaxnreg."];

/// The architecture llc compiles a kernel's module `ir` (LLVM IR text) for: `arch`, or
/// `sm_90a` for an sm_90 build whose module calls an sm_90a-only intrinsic (llc cannot select
/// them for plain sm_90).
pub fn llc_arch<'a>(ir: &str, arch: &'a str) -> std::borrow::Cow<'a, str> {
    if arch == "sm_90" && SM90A_INTRINSICS.iter().any(|i| ir.contains(i)) {
        "sm_90a".into()
    } else {
        arch.into()
    }
}

fn version(v: &str) -> (u32, u32) {
    let (a, b) = v.trim().split_once('.').unwrap_or((v, "0"));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}

/// [`raise`] the PTX file at `path` in place; the architecture to assemble it for.
pub fn raise_file(path: &Path, arch: &str) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    let (raised, arch) = raise(&text, arch);
    if raised != text {
        std::fs::write(path, raised)?;
    }
    Ok(arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_calling_warpgroup_intrinsics_compiles_for_sm_90a() {
        let wait = "  call void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 0)\n";
        let regs = "  call void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 240)\n";
        assert_eq!(llc_arch(wait, "sm_90"), "sm_90a");
        assert_eq!(llc_arch(regs, "sm_90"), "sm_90a");
        assert_eq!(
            llc_arch("  call void @llvm.nvvm.barrier0()\n", "sm_90"),
            "sm_90"
        );
        // Other architectures are left as asked.
        assert_eq!(llc_arch(wait, "sm_100"), "sm_100");
        assert_eq!(llc_arch(wait, "sm_90a"), "sm_90a");
    }

    #[test]
    fn wgmma_raises_the_target_and_the_version() {
        let ptx = ".version 7.8\n.target sm_90\n.address_size 64\nwgmma.fence.sync.aligned;\n";
        let (out, arch) = raise(ptx, "sm_90");
        assert_eq!(arch, "sm_90a");
        assert!(out.starts_with(".version 8.0\n.target sm_90a\n.address_size 64\n"));
    }

    #[test]
    fn fp8_products_raise_the_version_to_8_4() {
        let ptx =
            ".version 8.0\n.target sm_90\nmma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 x;\n";
        let (out, arch) = raise(ptx, "sm_90");
        assert!(out.starts_with(".version 8.4\n.target sm_90\n"), "{out}");
        assert_eq!(arch, "sm_90");
        let newer = ".version 8.7\n.target sm_90\nmma.e4m3;\n";
        assert_eq!(raise(newer, "sm_90").0, newer);
    }

    #[test]
    fn bulk_copies_raise_the_version_only_and_plain_ptx_is_untouched() {
        let ptx = ".version 7.8\n.target sm_90\ncp.async.bulk.tensor.2d.x;\n";
        let (out, arch) = raise(ptx, "sm_90");
        assert_eq!(
            (
                arch.as_str(),
                out.starts_with(".version 8.0\n.target sm_90\n")
            ),
            ("sm_90", true)
        );
        let plain = ".version 7.8\n.target sm_90\nret;\n";
        assert_eq!(
            raise(plain, "sm_90"),
            (plain.to_owned(), "sm_90".to_owned())
        );
        let newer = ".version 8.7\n.target sm_100\nwgmma.x;\n";
        assert_eq!(raise(newer, "sm_100").0, newer);
    }
}
