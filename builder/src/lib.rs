//! Builds a berth kernel crate for `nvptx64-nvidia-cuda` and hands its PTX to the host build.
//!
//! A kernel crate is an ordinary library: the host build compiles it with the launch glue that
//! `#[gpu_kernel]` generates, and its build script calls [`kernels`], which runs a nested
//! `cargo rustc` of the same crate for nvptx64 and exports the PTX's path as `BERTH_PTX`
//! (read by the macro, which embeds the file). Where `ptxas` is found it also assembles the
//! PTX into SASS for the build's architecture (a cubin, exported as `BERTH_CUBIN`), which the
//! runtime loads first so the first launch needs no JIT. `cargo xtask ptx` drives the same
//! [`Builder`]. Before the nested build, the toolchain components it needs are installed
//! through rustup where missing ([`toolchain`]).
//!
//! Facts this encodes (see the project's NVPTX notes): the nested build needs
//! `RUSTC_BOOTSTRAP=1` and `-Zbuild-std=core`; its flags must be set through
//! `CARGO_ENCODED_RUSTFLAGS` (the outer cargo hands build scripts an empty one, which would
//! silently give sm_30); it must not share the outer target dir (deadlock on its lock), but all
//! kernel crates share one nested dir so `core` is built once; the artifact's path is read from
//! cargo's JSON messages.
#![deny(missing_docs)]

pub mod ir;
pub mod link;
mod ptxas;
pub mod sass;
pub mod toolchain;

pub use link::{LinkError, find_libdevice};
pub use ptxas::{EntryUsage, PtxasError, find_ptxas, ptxas_usage};
pub use sass::{CUBIN_ARCH_ENV, CUBIN_ENV, SASS_ENV, Sass};

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The GPU architecture used when none is asked for.
pub const DEFAULT_ARCH: &str = "sm_90";
/// Environment variable selecting the architecture (`sm_80`, `sm_90`, …).
pub const ARCH_ENV: &str = "BERTH_ARCH";
/// Environment variable turning float contraction off for the whole build (`off`).
pub const FP_CONTRACT_ENV: &str = "BERTH_FP_CONTRACT";
/// Environment variable turning LLVM's loop strength reduction back on (`on`).
pub const LSR_ENV: &str = "BERTH_LSR";
/// Environment variable naming libdevice (`off` for none); see [`find_libdevice`].
pub const LIBDEVICE_ENV: &str = "BERTH_LIBDEVICE";
/// The environment variable the host build reads the PTX path from.
pub const PTX_ENV: &str = "BERTH_PTX";
const TARGET: &str = "nvptx64-nvidia-cuda";

/// Why a kernel build failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `cargo` could not be started.
    #[error("could not run `{cargo}`: {source}")]
    Spawn {
        /// The cargo binary.
        cargo: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The nested build failed; rustc's diagnostics were printed to stderr.
    #[error(
        "building `{krate}` for the GPU ({TARGET}) failed: rustc's errors are above. The GPU \
         build is `no_std`: host-only code in a kernel crate goes behind \
         `#[cfg(not(target_arch = \"nvptx64\"))]`"
    )]
    Build {
        /// The kernel crate.
        krate: String,
    },
    /// The build succeeded but produced no `.ptx`.
    #[error("building `{krate}` for {TARGET} produced no .ptx (is it a library crate?)")]
    NoPtx {
        /// The kernel crate.
        krate: String,
    },
    /// The architecture string is not of the form `sm_NN`.
    #[error("`{0}` is not a GPU architecture: expected something like `sm_90`")]
    BadArch(String),
    /// The last step (rewrites, libdevice, opt, llc) failed.
    #[error("finishing the PTX of `{krate}` failed: {source}")]
    Link {
        /// The kernel crate.
        krate: String,
        /// What failed.
        source: LinkError,
    },
    /// The toolchain lacks components the GPU build needs and they were not installed.
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    /// Filesystem error.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct Built {
    /// The PTX file.
    pub ptx: PathBuf,
    /// Source files the PTX depends on (from rustc's dep-info), excluding the standard library.
    pub sources: Vec<PathBuf>,
    /// What the IR rewrites did (shared arrays, block shapes, contraction).
    pub report: ir::Report,
    /// The libdevice linked for device math, if any.
    pub libdevice: Option<PathBuf>,
    /// The SASS assembled from the PTX, or why there is none.
    pub sass: Sass,
}

/// A nested nvptx64 build of one kernel crate.
#[derive(Debug, Clone)]
pub struct Builder {
    manifest_dir: PathBuf,
    arch: String,
    target_dir: PathBuf,
    cargo: PathBuf,
    quiet: bool,
    name: Option<String>,
    contract: bool,
    libdevice: Option<PathBuf>,
    sass: bool,
    cargo_warnings: bool,
}

impl Builder {
    /// A build of the crate whose `Cargo.toml` is in `manifest_dir`, for [`DEFAULT_ARCH`],
    /// into `target_dir`.
    pub fn new(manifest_dir: impl Into<PathBuf>, target_dir: impl Into<PathBuf>) -> Self {
        Builder {
            manifest_dir: manifest_dir.into(),
            arch: DEFAULT_ARCH.to_owned(),
            target_dir: target_dir.into(),
            cargo: std::env::var_os("CARGO")
                .map(PathBuf::from)
                .unwrap_or_else(|| "cargo".into()),
            quiet: false,
            name: None,
            contract: std::env::var(FP_CONTRACT_ENV).map_or(true, |v| v != "off"),
            libdevice: find_libdevice(),
            sass: sass::sass_enabled(),
            cargo_warnings: false,
        }
    }

    /// Also assemble the PTX into a cubin with ptxas (default: on, off with `BERTH_SASS=off`).
    pub fn sass(mut self, on: bool) -> Self {
        self.sass = on;
        self
    }

    /// Fuse float multiplies and adds into FMAs (default: on, as nvcc's `-fmad=true`; off
    /// with `BERTH_FP_CONTRACT=off`). A kernel can opt out alone with
    /// `#[gpu_kernel(fp_contract = false)]`.
    pub fn fp_contract(mut self, on: bool) -> Self {
        self.contract = on;
        self
    }

    /// Use this libdevice for device math (default: [`find_libdevice`]); `None` builds
    /// berth's math from its portable Rust implementation instead.
    pub fn libdevice(mut self, path: Option<PathBuf>) -> Self {
        self.libdevice = path;
        self
    }

    /// The crate's name, for messages (default: its directory's name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Build for `arch` (`sm_NN`).
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = arch.into();
        self
    }

    /// Say what the build does (installing missing toolchain components) as `cargo:warning`
    /// lines, for a build script; otherwise on stderr.
    pub fn cargo_warnings(mut self, on: bool) -> Self {
        self.cargo_warnings = on;
        self
    }

    /// Do not echo the nested cargo's progress lines.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    /// Run the nested build, after installing the toolchain components it needs where they
    /// are missing ([`toolchain::ensure`]).
    pub fn build(&self) -> Result<Built, Error> {
        validate_arch(&self.arch)?;
        let cargo_warnings = self.cargo_warnings;
        toolchain::ensure(&toolchain::Toolchain::current()?, &mut |line| {
            if cargo_warnings {
                println!("cargo:warning={line}");
            } else {
                eprintln!("{line}");
            }
        })?;
        let manifest = self.manifest_dir.join("Cargo.toml");
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(&self.manifest_dir)
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--release"])
            .args(["--target", TARGET, "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .arg("--message-format=json-render-diagnostics")
            // Kernel crates are plain libraries: the attributes the PTX build needs are
            // injected here, for this crate only, so users write none of them.
            .args([
                "--",
                "-Zcrate-attr=no_std",
                "-Zcrate-attr=feature(abi_ptx, asm_experimental_arch)",
                "-Aunused-features",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            // immediate-abort: `core`'s formatted panics trap at once instead of linking
            // `core::fmt`, which would cost every kernel that can panic up to 255 registers
            // (see berth_device::panic).
            .env(
                "CARGO_ENCODED_RUSTFLAGS",
                format!(
                    "-Ctarget-cpu={}\x1f-Zunstable-options\x1f-Cpanic=immediate-abort{}",
                    self.arch,
                    // berth's device math calls libdevice when the last step can link it.
                    if self.libdevice.is_some() {
                        "\x1f--cfg=berth_libdevice"
                    } else {
                        ""
                    }
                ),
            )
            .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
            .env("CARGO_PROFILE_RELEASE_STRIP", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
            .env_remove("RUSTFLAGS")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("CARGO_ENCODED_RUSTDOCFLAGS")
            .stdout(Stdio::piped())
            .stderr(if self.quiet {
                Stdio::piped()
            } else {
                Stdio::inherit()
            });
        let krate = self
            .name
            .clone()
            .unwrap_or_else(|| crate_name(&self.manifest_dir));
        let mut child = cmd.spawn().map_err(|source| Error::Spawn {
            cargo: self.cargo.clone(),
            source,
        })?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take();
        // Drain stderr concurrently so a chatty failing build cannot block on a full pipe.
        let err_thread = stderr.map(|mut s| {
            std::thread::spawn(move || {
                let mut buf = String::new();
                let _ = std::io::Read::read_to_string(&mut s, &mut buf);
                buf
            })
        });
        let mut ptx = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|source| Error::Io {
                path: manifest.clone(),
                source,
            })?;
            if let Some(p) = ptx_artifact(&line) {
                ptx = Some(p);
            }
        }
        let status = child.wait().map_err(|source| Error::Spawn {
            cargo: self.cargo.clone(),
            source,
        })?;
        let captured = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        if !status.success() {
            eprint!("{captured}");
            return Err(Error::Build { krate });
        }
        let linked_ptx = ptx.ok_or(Error::NoPtx {
            krate: krate.clone(),
        })?;
        let sources = dep_info_sources(&linked_ptx.with_extension("d"));
        let link_err = |source| Error::Link {
            krate: krate.clone(),
            source,
        };
        let (bc, symbols) = link::linker_leftovers(&linked_ptx).map_err(link_err)?;
        let ptx = bc.with_extension("berth.ptx");
        let opts = link::LinkOptions {
            arch: self.arch.clone(),
            contract: self.contract,
            libdevice: self.libdevice.clone(),
            lsr: std::env::var(LSR_ENV).is_ok_and(|v| v == "on"),
        };
        let report = link::relink(&bc, &symbols, &ptx, &opts).map_err(link_err)?;
        let sass = if self.sass {
            sass::build_cubin(&ptx, &self.arch)
        } else {
            Sass::Off
        };
        Ok(Built {
            ptx,
            sources,
            report,
            libdevice: self.libdevice.clone(),
            sass,
        })
    }
}

fn validate_arch(arch: &str) -> Result<(), Error> {
    match arch.strip_prefix("sm_") {
        Some(n) if !n.is_empty() && n.trim_end_matches('a').chars().all(|c| c.is_ascii_digit()) => {
            Ok(())
        }
        _ => Err(Error::BadArch(arch.to_owned())),
    }
}

fn crate_name(manifest_dir: &Path) -> String {
    manifest_dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `.ptx` path from one line of cargo's JSON output, if the line is an artifact message.
fn ptx_artifact(line: &str) -> Option<PathBuf> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    if msg.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    msg.get("filenames")?
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".ptx"))
        .map(PathBuf::from)
}

/// Source files listed in a rustc dep-info file, minus the standard library's own sources.
fn dep_info_sources(dep_file: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dep_file) else {
        return Vec::new();
    };
    let Some(first) = text.lines().next() else {
        return Vec::new();
    };
    let deps = first.split_once(": ").map(|(_, d)| d).unwrap_or("");
    // Paths are separated by spaces; a space inside a path is escaped as `\ `.
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            ' ' => {
                if !cur.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(PathBuf::from(cur));
    }
    out.retain(|p| !p.components().any(|c| c.as_os_str() == "rustlib"));
    out
}

/// The nested target dir shared by every kernel crate of a workspace: `<target>/berth-nvptx`,
/// found from the build script's `OUT_DIR` (`<target>/<profile>/build/<pkg>/out`).
fn shared_target_dir(out_dir: &Path) -> PathBuf {
    let target = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|b| b.parent()?.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.join("nvptx"));
    target.join("berth-nvptx")
}

/// The whole build script of a kernel crate: `fn main() { berth_build::kernels() }`.
///
/// Builds this crate for nvptx64 (arch from `BERTH_ARCH`, default `sm_90`), copies the PTX to
/// `OUT_DIR`, and tells cargo to export its path as `BERTH_PTX` and when to rebuild; where
/// ptxas is found (and `BERTH_SASS` is not `off`), the same for the cubin (`BERTH_CUBIN`,
/// `BERTH_CUBIN_ARCH`). A failed build ends the build script with rustc's diagnostics and a
/// one-line summary; a missing cubin is one warning.
pub fn kernels() {
    if let Err(e) = try_kernels() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn try_kernels() -> Result<(), Error> {
    println!("cargo:rerun-if-env-changed={ARCH_ENV}");
    println!("cargo:rerun-if-env-changed={FP_CONTRACT_ENV}");
    println!("cargo:rerun-if-env-changed={LIBDEVICE_ENV}");
    println!("cargo:rerun-if-env-changed={LSR_ENV}");
    println!("cargo:rerun-if-env-changed={SASS_ENV}");
    println!("cargo:rerun-if-env-changed=BERTH_PTXAS");
    println!("cargo:rerun-if-env-changed={}", toolchain::RUSTUP_ENV);
    // The nested build runs this script again for the nvptx64 target: nothing to do there.
    if std::env::var("TARGET").is_ok_and(|t| t.starts_with("nvptx64")) {
        return Ok(());
    }
    let manifest_dir = PathBuf::from(env_or_die("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env_or_die("OUT_DIR"));
    let arch = std::env::var(ARCH_ENV).unwrap_or_else(|_| DEFAULT_ARCH.to_owned());
    let built = Builder::new(&manifest_dir, shared_target_dir(&out_dir))
        .name(env_or_die("CARGO_PKG_NAME"))
        .arch(&arch)
        .quiet(true)
        .cargo_warnings(true)
        .build()?;
    let dest = out_dir.join(format!(
        "{}.ptx",
        env_or_die("CARGO_PKG_NAME").replace('-', "_")
    ));
    std::fs::copy(&built.ptx, &dest).map_err(|source| Error::Io {
        path: dest.clone(),
        source,
    })?;
    println!("cargo:rustc-env={PTX_ENV}={}", dest.display());
    match &built.sass {
        Sass::Cubin(cubin) => {
            let dest = dest.with_extension("cubin");
            std::fs::copy(cubin, &dest).map_err(|source| Error::Io {
                path: dest.clone(),
                source,
            })?;
            println!("cargo:rustc-env={CUBIN_ENV}={}", dest.display());
            println!("cargo:rustc-env={CUBIN_ARCH_ENV}={arch}");
        }
        Sass::Off => {}
        Sass::Unavailable(why) => {
            let why = why.lines().next().unwrap_or_default();
            println!(
                "cargo:warning=no SASS for {arch}, PTX only (the first launch will JIT-compile it): {why}"
            );
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("src").display()
    );
    for src in &built.sources {
        println!("cargo:rerun-if-changed={}", src.display());
    }
    Ok(())
}

fn env_or_die(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        eprintln!("error: `{name}` is not set: berth_build::kernels() must run from a build.rs");
        std::process::exit(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_line_yields_ptx_path() {
        let line = r#"{"reason":"compiler-artifact","filenames":["/t/x.d","/t/kern.ptx"]}"#;
        assert_eq!(ptx_artifact(line), Some(PathBuf::from("/t/kern.ptx")));
        assert_eq!(ptx_artifact(r#"{"reason":"build-finished"}"#), None);
        assert_eq!(ptx_artifact("not json"), None);
    }

    #[test]
    fn arch_is_validated() {
        assert!(validate_arch("sm_90").is_ok());
        assert!(validate_arch("sm_90a").is_ok());
        assert!(validate_arch("90").is_err());
        assert!(validate_arch("sm_").is_err());
        assert!(validate_arch("sm_9x").is_err());
    }

    #[test]
    fn dep_info_drops_std_and_unescapes_spaces() {
        let dir = std::env::temp_dir().join(format!("berth-dep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k.d");
        std::fs::write(
            &f,
            "/t/k.ptx: /w/src/lib.rs /w/my\\ dir/a.rs /r/lib/rustlib/src/core/lib.rs\n\n/w/src/lib.rs:\n",
        )
        .unwrap();
        let got = dep_info_sources(&f);
        assert_eq!(
            got,
            vec![
                PathBuf::from("/w/src/lib.rs"),
                PathBuf::from("/w/my dir/a.rs")
            ]
        );
    }

    #[test]
    fn shared_target_dir_is_beside_profile_dirs() {
        let out = Path::new("/w/target/debug/build/kern-123/out");
        assert_eq!(
            shared_target_dir(out),
            PathBuf::from("/w/target/berth-nvptx")
        );
    }
}
