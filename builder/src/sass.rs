//! SASS next to the PTX: the kernel crate's PTX assembled by `ptxas` into a cubin for the
//! build's architecture, so the first launch loads machine code instead of waiting for the
//! driver's JIT compiler (hundreds of milliseconds for a crate of kernels, every process, when
//! the driver's JIT cache is cold or off).

use crate::ptxas::{EntryUsage, PtxasError, parse_usage};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable turning the cubin off (`off`): the crate then embeds PTX only.
pub const SASS_ENV: &str = "BERTH_SASS";
pub use berth_abi::{CUBIN_ARCH_ENV, CUBIN_ENV};

/// What a build did about SASS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sass {
    /// The cubin, assembled for the build's architecture.
    Cubin(PathBuf),
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
    let mut res = run(true)?;
    if !res.status.success() && String::from_utf8_lossy(&res.stderr).contains("split-compile") {
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

/// The SASS for the PTX at `ptx`, written beside it as `<stem>.cubin`: `ptxas` from
/// [`find_ptxas`](crate::find_ptxas). Never fails the build: without ptxas, or when it
/// rejects the PTX, the reason comes back and the crate keeps its PTX alone. With the SASS,
/// each entry's resource usage (none without it).
pub fn build_cubin(ptx: &Path, arch: &str) -> (Sass, Vec<EntryUsage>) {
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
    let out = ptx.with_extension("cubin");
    // The same PTX, architecture and ptxas as the last build: its cubin is still right.
    let (stamp, report) = (
        ptx.with_extension("cubin.key"),
        ptx.with_extension("ptxas.txt"),
    );
    let key = std::fs::read(ptx).ok().map(|text| {
        let tool = std::fs::metadata(&ptxas).ok();
        let tool = format!(
            "{}:{:?}:{:?}",
            ptxas.display(),
            tool.as_ref().map(|m| m.len()),
            tool.and_then(|m| m.modified().ok())
        );
        crate::memo::key(&[&text, arch.as_bytes(), tool.as_bytes()])
    });
    if let Some(key) = &key
        && crate::memo::fresh(&stamp, key, &[&out, &report])
        && let Ok(text) = std::fs::read_to_string(&report)
    {
        return (Sass::Cubin(out), parse_usage(&text));
    }
    crate::memo::clear(&stamp);
    match assemble_report(&ptxas, ptx, arch, &out) {
        Ok(text) => {
            if let Some(key) = key
                && std::fs::write(&report, &text).is_ok()
            {
                crate::memo::record(&stamp, &key);
            }
            (Sass::Cubin(out), parse_usage(&text))
        }
        Err(e) => (Sass::Unavailable(e.to_string()), Vec::new()),
    }
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

    const TINY_PTX: &str =
        ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n";

    #[test]
    fn cubin_is_assembled_for_the_arch() {
        let Some(ptxas) = crate::find_ptxas() else {
            assert!(
                std::env::var("CI").is_err(),
                "ptxas not found and CI is set: install it with `pip install nvidia-cuda-nvcc==13.0.88`"
            );
            eprintln!("ptxas not found: skipping the cubin check (set CI=true to make this fail)");
            return;
        };
        let dir = std::env::temp_dir().join(format!("berth-sass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = dir.join("k.ptx");
        std::fs::write(&ptx, TINY_PTX).unwrap();
        let out = dir.join("k.cubin");
        assemble(&ptxas, &ptx, "sm_90", &out).unwrap_or_else(|e| panic!("{e}"));
        let image = std::fs::read(&out).unwrap();
        assert_eq!(cubin_sm(&image), Some(90));
        assert_eq!(build_cubin(&ptx, "sm_90").0, Sass::Cubin(out.clone()));
        // The same PTX again: the cubin is kept, not assembled again.
        let stamp = ptx.with_extension("cubin.key");
        assert!(stamp.is_file());
        let before = std::fs::metadata(&out).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(build_cubin(&ptx, "sm_90").0, Sass::Cubin(out.clone()));
        assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), before);
        // Another PTX, or another architecture: assembled again.
        std::fs::write(&ptx, format!("{TINY_PTX}.visible .entry k2() {{ ret; }}\n")).unwrap();
        let (sass, usage) = build_cubin(&ptx, "sm_90");
        assert_eq!(sass, Sass::Cubin(out.clone()));
        assert!(usage.iter().any(|u| u.name == "k2"), "{usage:?}");
        assert_ne!(std::fs::metadata(&out).unwrap().modified().unwrap(), before);
        assert!(matches!(build_cubin(&ptx, "sm_80").0, Sass::Unavailable(_)));
        // PTX ptxas rejects: the build goes on without SASS and says why.
        std::fs::write(&ptx, "not ptx").unwrap();
        assert!(matches!(build_cubin(&ptx, "sm_90").0, Sass::Unavailable(_)));
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
