//! The last step of a kernel build: from the whole program's LLVM bitcode to PTX, with the
//! rewrites of [`crate::ir`] and NVIDIA's libdevice for device math.
//!
//! rustc links an nvptx64 crate with `llvm-bitcode-linker`, which joins every crate's bitcode
//! (`<name>.o` beside the PTX), optimises it and runs `llc`. That PTX has no fused
//! multiply-adds and no shared-memory address space, and cannot call libdevice. So the
//! builder takes the joined bitcode and the exported-symbol list the linker left, and does the
//! last steps itself with the same LLVM tools (the `llvm-tools` component): `llvm-dis`, the
//! text rewrites, `llvm-link` with libdevice (only the functions used), `opt -O3` with
//! internalisation, `llc`.

use crate::ir::{self, Report, Rewrite};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Prefix of libdevice's functions (`__nv_expf`, …).
const LIBDEVICE_PREFIX: &str = "__nv_";

/// Settings of the last step.
#[derive(Debug, Clone)]
pub struct LinkOptions {
    /// GPU architecture (`sm_90`).
    pub arch: String,
    /// Contract float multiply-adds (nvcc's default `-fmad=true`).
    pub contract: bool,
    /// libdevice, where found.
    pub libdevice: Option<PathBuf>,
    /// Run LLVM's loop strength reduction in `llc` (off by default; `BERTH_LSR=on`).
    pub lsr: bool,
}

/// Why the last step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The LLVM tools of the toolchain were not found.
    #[error(
        "the LLVM tools of the Rust toolchain were not found in {0}: `rustup component add llvm-tools llvm-bitcode-linker`"
    )]
    Tools(PathBuf),
    /// The linker's intermediate files were not where expected.
    #[error(
        "the joined bitcode {0} is missing: this rustc's llvm-bitcode-linker leaves it beside the PTX (berth-build expects Rust 1.95's layout)"
    )]
    NoBitcode(PathBuf),
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

/// The bitcode `llvm-bitcode-linker` joined for `ptx` (`deps/<name>.o`), and its exported
/// symbols (`deps/<name>.symbols.txt`).
pub fn linker_leftovers(ptx: &Path) -> Result<(PathBuf, PathBuf), LinkError> {
    let stem = ptx.file_stem().unwrap_or_default().to_owned();
    let dir = ptx.parent().unwrap_or(Path::new("."));
    for d in [dir.to_path_buf(), dir.join("deps")] {
        let bc = d.join(&stem).with_extension("o");
        let syms = d.join(&stem).with_extension("symbols.txt");
        if bc.is_file() && syms.is_file() {
            return Ok((bc, syms));
        }
    }
    Err(LinkError::NoBitcode(
        dir.join("deps").join(stem).with_extension("o"),
    ))
}

/// From the joined bitcode `bc` and its exported `symbols` to `out` (PTX).
pub fn relink(
    bc: &Path,
    symbols: &Path,
    out: &Path,
    opts: &LinkOptions,
) -> Result<Report, LinkError> {
    let tools = llvm_tools()?;
    let work = bc.with_extension("berth-link");
    std::fs::create_dir_all(&work).map_err(|source| LinkError::Io {
        path: work.clone(),
        source,
    })?;
    let ll = work.join("joined.ll");
    run(tools, "llvm-dis", bc, |c| c.arg(bc).arg("-o").arg(&ll))?;
    let mut text = read(&ll)?;
    // libdevice first, so its plain multiplies and adds are contracted too, as nvcc's
    // `-fmad=true` contracts them (its deliberate roundings are intrinsics, left alone).
    let math: Vec<String> = ir::declared_functions(&text)
        .into_iter()
        .filter(|f| f.starts_with(LIBDEVICE_PREFIX))
        .collect();
    if !math.is_empty() {
        let Some(lib) = &opts.libdevice else {
            return Err(LinkError::NoLibdevice {
                functions: math.join(", "),
            });
        };
        let with_math = work.join("with-libdevice.bc");
        run(tools, "llvm-link", bc, |c| {
            c.arg(bc)
                .arg("--only-needed")
                .arg(lib)
                .arg("-o")
                .arg(&with_math)
        })?;
        run(tools, "llvm-dis", &with_math, |c| {
            c.arg(&with_math).arg("-o").arg(&ll)
        })?;
        text = read(&ll)?;
    }
    let (text, report) = ir::rewrite(
        &text,
        Rewrite {
            contract: opts.contract,
        },
    )?;
    let rewritten = work.join("rewritten.ll");
    write(&rewritten, &text)?;
    let linked = work.join("linked.bc");
    run(tools, "llvm-as", &rewritten, |c| {
        c.arg(&rewritten).arg("-o").arg(&linked)
    })?;
    let exports = work.join("exports.txt");
    let kept: String = read(symbols)?
        .lines()
        .filter(|s| !s.is_empty())
        .map(|s| format!("{s}\n"))
        .collect();
    write(&exports, &kept)?;
    let optimized = work.join("optimized.bc");
    run(tools, "opt", &linked, |c| {
        c.arg(&linked)
            .arg(format!("-mcpu={}", opts.arch))
            .arg("-nvptx-short-ptr")
            .arg(format!(
                "--internalize-public-api-file={}",
                exports.display()
            ))
            .arg("--passes=default<O3>,internalize,globaldce")
            .arg("-o")
            .arg(&optimized)
    })?;
    run(tools, "llc", &optimized, |c| {
        c.arg(format!("-mcpu={}", opts.arch))
            .arg("-nvptx-short-ptr")
            // Loop strength reduction gives every checked access two induction variables (the
            // index its bounds check compares, the address it loads): register-blocked kernels
            // then need 28–34 more registers than nvcc's and run at half the occupancy. Without
            // it each address is recomputed from its index (one multiply-add), as ptxas likes.
            .args((!opts.lsr).then_some("-disable-lsr"))
            .arg(&optimized)
            .arg("-o")
            .arg(out)
    })?;
    Ok(report)
}

fn read(p: &Path) -> Result<String, LinkError> {
    std::fs::read_to_string(p).map_err(|source| LinkError::Io {
        path: p.to_owned(),
        source,
    })
}

fn write(p: &Path, s: &str) -> Result<(), LinkError> {
    std::fs::write(p, s).map_err(|source| LinkError::Io {
        path: p.to_owned(),
        source,
    })
}

fn run(
    tools: &Path,
    tool: &'static str,
    file: &Path,
    args: impl FnOnce(&mut Command) -> &mut Command,
) -> Result<(), LinkError> {
    let mut cmd = Command::new(tools.join(tool));
    let out = args(&mut cmd).output().map_err(|source| LinkError::Io {
        path: tools.join(tool),
        source,
    })?;
    if !out.status.success() {
        return Err(LinkError::Tool {
            tool,
            file: file.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// The toolchain's LLVM tools: `<sysroot>/lib/rustlib/<host>/bin`.
fn llvm_tools() -> Result<&'static Path, LinkError> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let out = |args: &[&str]| {
            Command::new(&rustc)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let sysroot = out(&["--print", "sysroot"]).trim().to_owned();
        let host = out(&["-vV"])
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
            .unwrap_or_default();
        Path::new(&sysroot)
            .join("lib/rustlib")
            .join(host)
            .join("bin")
    });
    if dir.join("llc").is_file() && dir.join("opt").is_file() {
        Ok(dir)
    } else {
        Err(LinkError::Tools(dir.clone()))
    }
}

/// Where libdevice is: `$BERTH_LIBDEVICE` (a path; `off` for none), the CUDA toolkit
/// (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`), or the `nvidia-cuda-nvcc` Python wheel.
pub fn find_libdevice() -> Option<PathBuf> {
    const FILE: &str = "nvvm/libdevice/libdevice.10.bc";
    if let Some(p) = std::env::var_os("BERTH_LIBDEVICE") {
        if p == "off" || p == "none" || p.is_empty() {
            return None;
        }
        return Some(PathBuf::from(p));
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
