//! SASS next to the PTX: each kernel's own PTX module (its entries and what they reach, cut
//! out of the crate's by [`berth_abi::ptx::split`]) assembled by `ptxas` into a cubin for the
//! build's architecture, and the cubins packed into one image ([`berth_abi::cubins`]), so the
//! first launch loads machine code instead of waiting for the driver's JIT compiler (hundreds
//! of milliseconds for a crate of kernels, every process, when the driver's JIT cache is cold
//! or off). Each kernel's cubin is kept while its module, the architecture and ptxas are
//! unchanged: an edit to one kernel assembles that kernel again.

use crate::ptxas::{EntryUsage, PtxasError, parse_usage};
use berth_abi::ptx::split::Split;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable turning the cubin off (`off`): the crate then embeds PTX only.
pub const SASS_ENV: &str = "BERTH_SASS";
pub use berth_abi::{CUBIN_ARCH_ENV, CUBIN_ENV};

/// What a build did about SASS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sass {
    /// The kernels' cubins, assembled for the build's architecture and packed into one
    /// image ([`berth_abi::cubins`]).
    Cubins(PathBuf),
    /// Turned off (`BERTH_SASS=off` or [`Builder::sass`](crate::Builder::sass)).
    Off,
    /// No cubin, and why (no ptxas found, or ptxas failed): the first launch will JIT.
    Unavailable(String),
}

/// Whether the environment leaves SASS on (anything but `BERTH_SASS=off`).
pub fn sass_enabled() -> bool {
    std::env::var(SASS_ENV).map_or(true, |v| v != "off")
}

/// Assemble `ptx` into the cubin `out` for `arch` (`ptxas -arch=<arch> -O3 -v`), and return
/// each entry's resource usage (registers, local frame, spills) from ptxas's report.
pub fn assemble(
    ptxas: &Path,
    ptx: &Path,
    arch: &str,
    out: &Path,
) -> Result<Vec<EntryUsage>, PtxasError> {
    Ok(parse_usage(&assemble_report(ptxas, ptx, arch, out)?))
}

/// [`assemble`], returning ptxas's report as it printed it.
///
/// ptxas compiles the module's functions on every core (`--split-compile 0`: the same machine
/// code, the functions shared out among threads); a ptxas too old for the option assembles
/// on one.
fn assemble_report(ptxas: &Path, ptx: &Path, arch: &str, out: &Path) -> Result<String, PtxasError> {
    assemble_on(ptxas, ptx, arch, out, true)
}

/// [`assemble_report`], on every core (`split`) or on one.
fn assemble_on(
    ptxas: &Path,
    ptx: &Path,
    arch: &str,
    out: &Path,
    split: bool,
) -> Result<String, PtxasError> {
    let run = |split: bool| {
        Command::new(ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-O3")
            .arg("-v")
            .args(
                split
                    .then_some(["--split-compile", "0"])
                    .into_iter()
                    .flatten(),
            )
            .arg(ptx)
            .arg("-o")
            .arg(out)
            .output()
            .map_err(|e| PtxasError::Spawn(ptxas.to_owned(), e))
    };
    let mut res = run(split)?;
    if split
        && !res.status.success()
        && String::from_utf8_lossy(&res.stderr).contains("split-compile")
    {
        res = run(false)?;
    }
    if !res.status.success() {
        return Err(PtxasError::Rejected {
            file: ptx.to_owned(),
            stderr: String::from_utf8_lossy(&res.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&res.stderr).into_owned())
}

/// The SASS of the crate PTX at `ptx` for `arch` (the build's architecture, `BERTH_ARCH`):
/// each kernel's own module — its entry, its one-dimensional entry where it has one, and what
/// they reach ([`Split::module`]) — assembled into its cubin in `<dir>/sass/`, on every core,
/// and the cubins packed beside the PTX as `<stem>.cubins` ([`berth_abi::cubins`]). A
/// kernel's module that uses `sm_90a` instructions is assembled for `sm_90a`. `ptxas` comes
/// from [`find_ptxas`](crate::find_ptxas). Never fails the build: without ptxas, or when it
/// rejects a kernel's PTX, the reason comes back and the crate keeps its PTX alone. With the
/// SASS, each entry's resource usage (none without it).
///
/// A kernel whose module, architecture and ptxas are those of the last build keeps its cubin
/// (a stamp beside it, `<kernel>.cubin.key`): an edit to one kernel assembles that kernel.
pub fn build_cubins(ptx: &Path, arch: &str) -> (Sass, Vec<EntryUsage>) {
    let Some(ptxas) = crate::find_ptxas() else {
        return (
            Sass::Unavailable(
                "no ptxas found ($BERTH_PTXAS, PATH, a CUDA toolkit or `pip install \
                 nvidia-cuda-nvcc`)"
                    .into(),
            ),
            Vec::new(),
        );
    };
    match assemble_kernels(&ptxas, ptx, arch) {
        Ok((image, usage)) => (Sass::Cubins(image), usage),
        Err(why) => (Sass::Unavailable(why), Vec::new()),
    }
}

/// Each kernel's cubin of [`build_cubins`], packed; or why there is none.
fn assemble_kernels(
    ptxas: &Path,
    ptx: &Path,
    arch: &str,
) -> Result<(PathBuf, Vec<EntryUsage>), String> {
    let text = std::fs::read_to_string(ptx).map_err(|e| format!("{}: {e}", ptx.display()))?;
    let split = Split::parse(&text).map_err(|e| format!("{}: {e}", ptx.display()))?;
    let entries: Vec<&str> = split.entries().collect();
    // A kernel's entries: its general one and, where it has them, its specialised ones.
    let is_entry = |n: &str| entries.contains(&n);
    let kernels: Vec<Vec<&str>> = entries
        .iter()
        .filter(|&&e| berth_abi::kernel_of_entry(e, is_entry) == e)
        .map(|&e| {
            let mut of = vec![e];
            of.extend(
                entries
                    .iter()
                    .copied()
                    .filter(|&s| s != e && berth_abi::kernel_of_entry(s, is_entry) == e),
            );
            of
        })
        .collect();
    let dir = ptx.with_file_name("sass");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tool = {
        let meta = std::fs::metadata(ptxas).ok();
        format!(
            "{}:{:?}:{:?}",
            ptxas.display(),
            meta.as_ref().map(|m| m.len()),
            meta.and_then(|m| m.modified().ok())
        )
    };
    // Many small modules at once: each ptxas on one core.
    let built = crate::codegen::in_parallel(&kernels, |of| {
        let piece = split.module(of).map_err(|e| e.to_string())?;
        let (piece, arch) = crate::target::raise(&piece, arch);
        let file = dir.join(format!("{}.ptx", of[0]));
        let (out, stamp, report) = (
            file.with_extension("cubin"),
            file.with_extension("cubin.key"),
            file.with_extension("ptxas.txt"),
        );
        // The piece's constant strings, which the runtime looks up in the loaded cubin.
        let strings: Vec<&str> = berth_abi::ptx::byte_globals(&piece)
            .map(|g| g.name)
            .collect();
        let strings = strings.join("\n");
        let key = crate::memo::key(&[piece.as_bytes(), arch.as_bytes(), tool.as_bytes()]);
        if crate::memo::fresh(&stamp, &key, &[&out, &report])
            && let Ok(text) = std::fs::read_to_string(&report)
        {
            return Ok((arch, strings, out, text));
        }
        crate::memo::clear(&stamp);
        std::fs::write(&file, &piece).map_err(|e| format!("{}: {e}", file.display()))?;
        let text = assemble_on(ptxas, &file, &arch, &out, false)
            .map_err(|e| format!("kernel `{}`: {e}", of[0]))?;
        if std::fs::write(&report, &text).is_ok() {
            crate::memo::record(&stamp, &key);
        }
        Ok::<_, String>((arch, strings, out, text))
    })?;
    // What no kernel of this build has is left from an earlier one.
    let names: std::collections::HashSet<&str> = kernels.iter().map(|of| of[0]).collect();
    if let Ok(listing) = std::fs::read_dir(&dir) {
        for f in listing.flatten() {
            let name = f.file_name();
            let stem = name.to_string_lossy();
            let stem = stem.split('.').next().unwrap_or_default();
            if !names.contains(stem) {
                let _ = std::fs::remove_file(f.path());
            }
        }
    }
    let mut images = Vec::with_capacity(built.len());
    for (_, _, out, _) in &built {
        images.push(std::fs::read(out).map_err(|e| format!("{}: {e}", out.display()))?);
    }
    let mut packed = Vec::new();
    berth_abi::cubins::pack(
        kernels
            .iter()
            .zip(&built)
            .zip(&images)
            .map(
                |((of, (arch, strings, _, _)), image)| berth_abi::cubins::Cubin {
                    name: of[0],
                    arch,
                    strings,
                    image,
                },
            ),
        |bytes| packed.extend_from_slice(bytes),
    );
    let image = ptx.with_extension("cubins");
    if std::fs::read(&image).ok().as_deref() != Some(packed.as_slice()) {
        std::fs::write(&image, &packed).map_err(|e| format!("{}: {e}", image.display()))?;
    }
    let usage = built
        .iter()
        .flat_map(|(_, _, _, text)| parse_usage(text))
        .collect();
    Ok((image, usage))
}

/// The SM number (`90` for `sm_90`) a cubin's ELF header names, or `None` if `image` is not
/// a CUDA ELF (machine `EM_CUDA`, 190). The field moved in the CUDA 12.8 ELF ABI (version 8):
/// bits 8..16 of `e_flags`, before that bits 0..8.
pub fn cubin_sm(image: &[u8]) -> Option<u32> {
    const EM_CUDA: u16 = 190;
    if image.len() < 52 || &image[..4] != b"\x7fELF" || image[4] != 2 || image[5] != 1 {
        return None;
    }
    let machine = u16::from_le_bytes([image[18], image[19]]);
    if machine != EM_CUDA {
        return None;
    }
    let flags = u32::from_le_bytes(image[48..52].try_into().ok()?);
    let abi_version = image[8];
    Some(if abi_version >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY_PTX: &str = ".version 7.8\n.target sm_90\n.address_size 64\n\
        .func f() { ret; }\n\
        .global .align 1 .b8 msg[2] = {104, 105};\n\
        .visible .entry k() { call.uni f, (); ret; }\n\
        .visible .entry k__berth_1d() { ret; }\n\
        .visible .entry k__berth_2d() { ret; }\n\
        .visible .entry other() { .reg .b16 %rs<2>; ld.global.u8 %rs1, [msg]; \
        st.global.u8 [msg+1], %rs1; ret; }\n";

    fn ptxas_or_skip() -> Option<PathBuf> {
        let found = crate::find_ptxas();
        if found.is_none() {
            assert!(
                std::env::var("CI").is_err(),
                "ptxas not found and CI is set: install it with `pip install nvidia-cuda-nvcc==13.0.88`"
            );
            eprintln!("ptxas not found: skipping the cubin check (set CI=true to make this fail)");
        }
        found
    }

    #[test]
    fn cubin_is_assembled_for_the_arch() {
        let Some(ptxas) = ptxas_or_skip() else { return };
        let dir = std::env::temp_dir().join(format!("berth-sass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = dir.join("k.ptx");
        std::fs::write(&ptx, TINY_PTX).unwrap();
        let out = dir.join("k.cubin");
        assemble(&ptxas, &ptx, "sm_90", &out).unwrap_or_else(|e| panic!("{e}"));
        let image = std::fs::read(&out).unwrap();
        assert_eq!(cubin_sm(&image), Some(90));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn each_kernel_has_its_own_cubin_kept_while_its_module_is_unchanged() {
        if ptxas_or_skip().is_none() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("berth-cubins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = dir.join("crate.ptx");
        std::fs::write(&ptx, TINY_PTX).unwrap();
        let (sass, usage) = build_cubins(&ptx, "sm_90");
        let packed = dir.join("crate.cubins");
        assert_eq!(sass, Sass::Cubins(packed.clone()));
        let mut entries: Vec<&str> = usage.iter().map(|u| u.name.as_str()).collect();
        entries.sort_unstable();
        assert_eq!(entries, ["k", "k__berth_1d", "k__berth_2d", "other"]);
        let image = std::fs::read(&packed).unwrap();
        let kernels: Vec<_> = berth_abi::cubins::read(&image).collect();
        let names: Vec<(&str, &str)> = kernels.iter().map(|c| (c.name, c.arch)).collect();
        // A kernel's specialised entries are in its cubin, not cubins of their own.
        assert_eq!(names, [("k", "sm_90"), ("other", "sm_90")]);
        for c in &kernels {
            assert_eq!(cubin_sm(c.image), Some(90), "{}", c.name);
        }
        let has =
            |image: &[u8], name: &str| image.windows(name.len()).any(|w| w == name.as_bytes());
        assert!(has(kernels[0].image, "k__berth_1d") && !has(kernels[0].image, "other"));
        assert!(has(kernels[0].image, "k__berth_2d"));
        // Each cubin names the constant byte arrays of its module, which it holds.
        assert_eq!(kernels[0].strings().count(), 0);
        assert_eq!(kernels[1].strings().collect::<Vec<_>>(), ["msg"]);
        assert!(has(kernels[1].image, "msg"));
        let cubin = |kernel: &str| dir.join("sass").join(format!("{kernel}.cubin"));
        let modified = |kernel: &str| {
            std::fs::metadata(cubin(kernel))
                .unwrap()
                .modified()
                .unwrap()
        };
        let (k, other) = (modified("k"), modified("other"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        // One kernel changed: that kernel is assembled again, the other kept.
        std::fs::write(&ptx, TINY_PTX.replace("%rs1; ret; }", "%rs1; exit; }")).unwrap();
        assert_eq!(build_cubins(&ptx, "sm_90").0, Sass::Cubins(packed.clone()));
        assert_eq!(modified("k"), k);
        assert_ne!(modified("other"), other);
        // A kernel gone: its files go too.
        std::fs::write(
            &ptx,
            &TINY_PTX[..TINY_PTX.find(".visible .entry other").unwrap()],
        )
        .unwrap();
        build_cubins(&ptx, "sm_90");
        assert!(!cubin("other").exists());
        assert_eq!(
            berth_abi::cubins::read(&std::fs::read(&packed).unwrap()).count(),
            1
        );
        // Another architecture: assembled again; one ptxas does not know is no SASS, and why.
        assert!(matches!(build_cubins(&ptx, "sm_80").0, Sass::Cubins(_)));
        assert!(matches!(build_cubins(&ptx, "sm_1").0, Sass::Unavailable(_)));
        // PTX the splitter or ptxas rejects: the build goes on without SASS and says why.
        std::fs::write(&ptx, "not ptx").unwrap();
        assert!(matches!(
            build_cubins(&ptx, "sm_90").0,
            Sass::Unavailable(_)
        ));
        std::fs::write(
            &ptx,
            TINY_PTX.replace(
                "ret; }\n.visible .entry other",
                "bogus; }\n.visible .entry other",
            ),
        )
        .unwrap();
        match build_cubins(&ptx, "sm_90").0 {
            Sass::Unavailable(why) => assert!(why.contains("kernel `k`"), "{why}"),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn elf_header_names_the_sm() {
        let mut image = vec![0u8; 64];
        image[..4].copy_from_slice(b"\x7fELF");
        image[4] = 2;
        image[5] = 1;
        image[18..20].copy_from_slice(&190u16.to_le_bytes());
        image[8] = 8;
        image[48..52].copy_from_slice(&0x0600_5a04u32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(90));
        image[8] = 7;
        image[48..52].copy_from_slice(&0x0050_0550u32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(0x50));
        image[18] = 62; // x86-64
        assert_eq!(cubin_sm(&image), None);
        assert_eq!(cubin_sm(b"\x7fELF"), None);
    }
}
