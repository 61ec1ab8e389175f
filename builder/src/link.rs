//! Stage 3 of a kernel build: the whole program's bitcode, joined from what rustc built, with
//! NVIDIA's libdevice for the device math it calls.
//!
//! rustc links an nvptx64 crate with `llvm-bitcode-linker`, which joins every crate's bitcode,
//! optimises it and runs `llc`. That PTX has no fused multiply-adds and no shared-memory
//! address space, and cannot call libdevice. So the builder joins the same inputs itself —
//! the crate's bitcode and the libraries rustc names ([`crate::nested`]) — with the
//! toolchain's `llvm-link`, links libdevice where the program calls it (only the functions
//! used), and hands the result to the IR rewrites ([`crate::ir`]) and code generation
//! ([`crate::codegen`]).

use crate::ir;
use crate::nested::Nested;
use crate::tools::Tools;
use std::path::{Path, PathBuf};

/// Prefix of libdevice's functions (`__nv_expf`, …).
const LIBDEVICE_PREFIX: &str = "__nv_";

/// Why the last steps failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The LLVM tools of the toolchain were not found.
    #[error(
        "the LLVM tools of the Rust toolchain were not found in {0}: `rustup component add llvm-tools llvm-bitcode-linker`"
    )]
    Tools(PathBuf),
    /// A tool failed.
    #[error("{tool} failed on {file}:\n{stderr}")]
    Tool {
        /// The tool.
        tool: &'static str,
        /// Its input.
        file: PathBuf,
        /// What it printed.
        stderr: String,
    },
    /// The kernels call device math but libdevice was not found.
    #[error(
        "the kernels call libdevice's {functions} but libdevice.10.bc was not found: \
         `pip install nvidia-cuda-nvcc==13.0.88`, or set BERTH_LIBDEVICE to the file \
         (berth's own math needs it only when it was built with it: clear the build cache)"
    )]
    NoLibdevice {
        /// The functions called.
        functions: String,
    },
    /// A rewrite failed.
    #[error(transparent)]
    Rewrite(#[from] ir::RewriteError),
    /// Filesystem error.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The whole program as one module of bitcode.
#[derive(Debug, Clone)]
pub struct Joined {
    /// The bitcode file.
    pub bitcode: PathBuf,
    /// The symbols the PTX keeps; everything else is internalised.
    pub exports: Vec<String>,
    /// The libdevice functions the program calls, linked in (empty when it calls none).
    pub libdevice: Vec<String>,
    /// The directory for the later stages' files.
    pub work: PathBuf,
}

/// Join the crate's bitcode with the libraries rustc links it with, as rustc's linker joins
/// them (`llvm-link --ignore-non-bitcode`: the libraries' metadata members are skipped).
///
/// Of the libraries only what the crate reaches is taken (`--only-needed`): the rest — most
/// of `core` — would be dropped before `opt` ([`crate::ir::reach::prune`]), but not before
/// being joined, disassembled and parsed, five times the crate's own text. Where an export is
/// then missing (a library's symbol that nothing in the crate names), the libraries are
/// joined whole.
pub fn join(tools: Tools, nested: &Nested) -> Result<Joined, LinkError> {
    let joined = nested.work.join("joined.bc");
    let link = |only_needed: bool| {
        tools.run("llvm-link", &nested.bitcode, |c| {
            c.arg("--ignore-non-bitcode")
                .args(only_needed.then_some("--only-needed"))
                .arg(&nested.bitcode)
                .args(&nested.libraries)
                .arg("-o")
                .arg(&joined)
        })
    };
    link(true)?;
    let defined = tools.run("llvm-nm", &joined, |c| {
        c.arg("--defined-only")
            .arg("--format=just-symbols")
            .arg(&joined)
    })?;
    let defined: std::collections::HashSet<&str> = defined.lines().map(str::trim).collect();
    if !nested.exports.iter().all(|e| defined.contains(e.as_str())) {
        link(false)?;
    }
    Ok(Joined {
        bitcode: joined,
        exports: nested.exports.clone(),
        libdevice: Vec::new(),
        work: nested.work.clone(),
    })
}

/// Link libdevice's functions that `joined` calls (`__nv_*`, undefined in it), from the
/// libdevice at `libdevice`. Linked before the rewrites, so libdevice's plain multiplies and
/// adds are contracted too, as nvcc's `-fmad=true` contracts them (its deliberate roundings
/// are intrinsics, left alone).
pub fn device_math(
    tools: Tools,
    joined: Joined,
    libdevice: Option<&Path>,
) -> Result<Joined, LinkError> {
    let undefined = tools.run("llvm-nm", &joined.bitcode, |c| {
        c.arg("--undefined-only")
            .arg("--format=just-symbols")
            .arg(&joined.bitcode)
    })?;
    let math: Vec<String> = undefined
        .lines()
        .map(str::trim)
        .filter(|f| f.starts_with(LIBDEVICE_PREFIX))
        .map(str::to_owned)
        .collect();
    if math.is_empty() {
        return Ok(joined);
    }
    let Some(lib) = libdevice else {
        return Err(LinkError::NoLibdevice {
            functions: math.join(", "),
        });
    };
    let with_math = joined.work.join("with-libdevice.bc");
    tools.run("llvm-link", &joined.bitcode, |c| {
        c.arg(&joined.bitcode)
            .arg("--only-needed")
            .arg(lib)
            .arg("-o")
            .arg(&with_math)
    })?;
    Ok(Joined {
        bitcode: with_math,
        libdevice: math,
        ..joined
    })
}

/// Where libdevice is: `$BERTH_LIBDEVICE` (a path; `off` for none), beside the `ptxas` that
/// [`find_ptxas`](crate::find_ptxas) finds (the same toolkit or wheel, see
/// [`libdevice_beside`]), the CUDA toolkit (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`), or
/// the `nvidia-cuda-nvcc` Python wheel.
pub fn find_libdevice() -> Option<PathBuf> {
    const FILE: &str = LIBDEVICE_IN_TOOLKIT;
    if let Some(p) = std::env::var_os(crate::LIBDEVICE_ENV) {
        if p == "off" || p == "none" || p.is_empty() {
            return None;
        }
        return Some(PathBuf::from(p));
    }
    if let Some(p) = crate::ptxas::find_ptxas().and_then(|ptxas| libdevice_beside(&ptxas)) {
        return Some(p);
    }
    let toolkits = ["CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain(["/usr/local/cuda", "/opt/cuda"].map(PathBuf::from));
    for t in toolkits {
        let p = t.join(FILE);
        if p.is_file() {
            return Some(p);
        }
    }
    crate::ptxas::python_dirs()
        .into_iter()
        .flat_map(|d| ["cu13", "cuda_nvcc", "cu12"].map(|v| d.join("nvidia").join(v).join(FILE)))
        .find(|p| p.is_file())
}

/// Where libdevice lies in a CUDA toolkit or an `nvidia-cuda-nvcc` wheel, from its root.
const LIBDEVICE_IN_TOOLKIT: &str = "nvvm/libdevice/libdevice.10.bc";

/// The libdevice of the toolkit or wheel that `ptxas` belongs to: `<root>/bin/ptxas` beside
/// `<root>/nvvm/libdevice/libdevice.10.bc` (a toolkit's layout and the wheel's alike), with
/// `ptxas` read through symbolic links (`/usr/bin/ptxas` to a toolkit's).
pub fn libdevice_beside(ptxas: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(ptxas).unwrap_or_else(|_| ptxas.to_owned());
    [ptxas, real.as_path()]
        .into_iter()
        .filter_map(|p| p.parent()?.parent())
        .map(|root| root.join(LIBDEVICE_IN_TOOLKIT))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake toolkit (or wheel) root: `bin/ptxas` and, with `libdevice`, the bitcode.
    fn toolkit(root: &Path, libdevice: bool) -> PathBuf {
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let ptxas = root.join("bin/ptxas");
        std::fs::write(&ptxas, "").unwrap();
        if libdevice {
            std::fs::create_dir_all(root.join("nvvm/libdevice")).unwrap();
            std::fs::write(root.join(LIBDEVICE_IN_TOOLKIT), "").unwrap();
        }
        ptxas
    }

    #[test]
    fn libdevice_is_found_beside_ptxas_in_its_toolkit_or_through_a_link() {
        let dir = std::env::temp_dir().join(format!("berth-libdevice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let wheel = dir.join("site-packages/nvidia/cu13");
        let ptxas = toolkit(&wheel, true);
        assert_eq!(
            libdevice_beside(&ptxas),
            Some(wheel.join("nvvm/libdevice/libdevice.10.bc"))
        );
        // A wheel or toolkit without libdevice: none, not another one.
        let bare = toolkit(&dir.join("bare"), false);
        assert_eq!(libdevice_beside(&bare), None);
        // `ptxas` on PATH as a link into a toolkit: the toolkit's libdevice.
        #[cfg(unix)]
        {
            std::fs::create_dir_all(dir.join("usr/bin")).unwrap();
            let link = dir.join("usr/bin/ptxas");
            std::os::unix::fs::symlink(&ptxas, &link).unwrap();
            let found = libdevice_beside(&link).unwrap();
            assert_eq!(
                found,
                std::fs::canonicalize(&wheel)
                    .unwrap()
                    .join(LIBDEVICE_IN_TOOLKIT)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
