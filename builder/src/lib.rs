//! Builds a berth kernel crate for `nvptx64-nvidia-cuda` and hands its PTX to the host build.
//!
//! A kernel crate is an ordinary library: the host build compiles it with the launch glue that
//! `#[gpu_kernel]` generates, and its build script calls [`kernels`], which builds the same
//! crate for nvptx64 and exports the PTX's path as `BERTH_PTX` (read by the macro, which
//! embeds the file). `cargo xtask ptx` drives the same [`Builder`].
//!
//! A build is a pipeline of stages, each a function from what the one before produced to what
//! the next needs:
//!
//! | stage | function | from | to |
//! |---|---|---|---|
//! | 1. toolchain | [`toolchain::ensure`] | the running toolchain | its missing components installed |
//! | 2. nested build | [`nested::build`] | the crate | [`nested::Nested`]: the crate's bitcode, the libraries and exports rustc links it with |
//! | 3. link | [`link::join`], [`link::device_math`] | `Nested` | [`link::Joined`]: the whole program's bitcode, with libdevice |
//! | 4. IR rewrites | [`codegen::disassemble`], [`ir::rewrite`] | `Joined` | an [`ir::Module`], parsed once and rewritten, and what each rewrite did ([`ir::Report`]) |
//! | 5. opt / llc | [`codegen::compile`], [`ir::checks::combine`] and [`ir::hoist::hoist`] between them | the module | the PTX |
//! | 5b. target | [`target::raise_file`] | the PTX | its `.target` (`sm_90a` for `wgmma`) and `.version` raised to what its inline PTX needs |
//! | 6. ptxas | [`sass::build_cubins`] | the PTX | each kernel's SASS for the build's architecture, packed into one image ([`Sass`]), and each kernel's resource usage, where ptxas is found |
//! | 6b. lints | [`lints::lints`] | the PTX, the usage | what costs time that the source could avoid ([`Lint`]) |
//! | 7. embed | [`embed::embed`] | [`Built`] | the files in `OUT_DIR` and the build script's lines for cargo |
//!
//! Errors in the kernel crate are reported once, by the host build, as ordinary rustc errors.
//! When rustc reports errors in the nested build, [`kernels`] does not fail: it writes them to
//! `OUT_DIR`, exports the file's path as `BERTH_GPU_BUILD_ERRORS` ([`embed::embed_errors`])
//! and says so in one warning. The host build compiles every kernel body too, so a mistake in
//! one is reported by its rustc; an error only the GPU build has (host-only code outside
//! `#[cfg(not(target_arch = "nvptx64"))]`) is reported by `#[gpu_kernel]` as one error of the
//! host build holding rustc's errors in the GPU build, when the host build has no errors of
//! its own (at code generation: `cargo build` reports it, `cargo check` shows the warning).
//! Until the GPU build succeeds, cargo runs the build script on every build.
//!
//! A rewrite a kernel needs that does not apply fails the build naming the kernel and the
//! rewrite ([`ir::RewriteError`]). The names and encodings the macro, the runtime and the
//! builder share are berth's kernel ABI ([`berth_abi`]).
//!
//! Facts this encodes (see the project's NVPTX notes): the nested build needs
//! `RUSTC_BOOTSTRAP=1` and `-Zbuild-std=core`; its flags must be set through
//! `CARGO_ENCODED_RUSTFLAGS` (the outer cargo hands build scripts an empty one, which would
//! silently give sm_30); it must not share the outer target dir (deadlock on its lock), but all
//! kernel crates share one nested dir so `core` is built once; the artifact's path is read from
//! cargo's JSON messages.
#![deny(missing_docs)]

pub mod codegen;
pub mod embed;
pub mod ir;
pub mod link;
pub mod lints;
mod memo;
pub mod nested;
mod ptx_join;
mod ptxas;
pub mod sass;
pub mod target;
pub mod toolchain;
pub mod tools;

pub use berth_abi::{GPU_BUILD_ERRORS_ENV, PTX_ENV};
pub use link::{LinkError, find_libdevice, libdevice_beside};
pub use lints::{Lint, LintKind};
pub use ptxas::{EntryUsage, PtxasError, find_ptxas, ptxas_usage};
pub use sass::{CUBIN_ARCH_ENV, CUBIN_ENV, SASS_ENV, Sass};

use nested::TARGET;
use std::path::{Path, PathBuf};

/// The GPU architecture used when none is asked for.
pub const DEFAULT_ARCH: &str = "sm_90";
/// Environment variable selecting the architecture (`sm_80`, `sm_90`, …).
pub const ARCH_ENV: &str = "BERTH_ARCH";
/// Environment variable turning float contraction off for the whole build (`off`).
pub const FP_CONTRACT_ENV: &str = "BERTH_FP_CONTRACT";
/// Environment variable turning LLVM's loop strength reduction back on (`on`).
pub const LSR_ENV: &str = "BERTH_LSR";
/// Environment variable turning the combined bounds checks off (`off`); see [`ir::checks`].
pub const COMBINE_CHECKS_ENV: &str = "BERTH_COMBINE_CHECKS";
/// Environment variable leaving the bounds checks of counted loops in the loop (`off`); see
/// [`ir::hoist`].
pub const HOIST_CHECKS_ENV: &str = "BERTH_HOIST_CHECKS";
/// Environment variable naming libdevice (`off` for none); see [`find_libdevice`].
pub const LIBDEVICE_ENV: &str = "BERTH_LIBDEVICE";

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
        /// rustc's errors, as it rendered them; empty when the build failed without any (cargo
        /// itself failed).
        diagnostics: Vec<String>,
    },
    /// What rustc was asked to write for the later stages is not there, although cargo found
    /// the build up to date (the files were removed by hand).
    #[error(
        "`{krate}`'s build is up to date but rustc's {path} is missing: remove {target_dir} to build it again"
    )]
    Outputs {
        /// The kernel crate.
        krate: String,
        /// The missing file.
        path: PathBuf,
        /// The nested build's target directory.
        target_dir: PathBuf,
    },
    /// rustc's linker command line (`--print=link-args`) is not in the form this knows.
    #[error(
        "the linker command line rustc printed for `{krate}` ({path}) does not name one module of the crate, its libraries and its exports (this berth-gpu-build does not know this rustc; please report it)"
    )]
    LinkArgs {
        /// The kernel crate.
        krate: String,
        /// The file rustc printed it to.
        path: PathBuf,
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
    /// The architecture the PTX targets: the build's, or `sm_90a` where its inline PTX uses
    /// that variant's instructions ([`target::raise`]).
    pub arch: String,
    /// Source files the PTX depends on (from rustc's dep-info), excluding the standard library.
    pub sources: Vec<PathBuf>,
    /// What the IR rewrites did (shared arrays, block shapes, contraction).
    pub report: ir::Report,
    /// The libdevice linked for device math, if any.
    pub libdevice: Option<PathBuf>,
    /// The SASS assembled from the PTX, or why there is none.
    pub sass: Sass,
    /// The performance lints of the kernels (the local-frame ones only with SASS).
    pub lints: Vec<Lint>,
    /// The kernels whose code calls device math (libdevice's functions, or the `libm`
    /// crate's where libdevice is not linked), read from the IR before it is optimised.
    pub math_kernels: Vec<String>,
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

    /// Also assemble each kernel's PTX into a cubin with ptxas (default: on, off with
    /// `BERTH_SASS=off`).
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

    /// Build the crate: the stages of the pipeline, one after the other.
    pub fn build(&self) -> Result<Built, Error> {
        validate_arch(&self.arch)?;
        let krate = self
            .name
            .clone()
            .unwrap_or_else(|| crate_name(&self.manifest_dir));
        // 1. The toolchain components the nested build and the LLVM tools need.
        let cargo_warnings = self.cargo_warnings;
        let mut timings = Timings::start();
        toolchain::ensure(&toolchain::Toolchain::current()?, &mut |line| {
            if cargo_warnings {
                println!("cargo:warning={line}");
            } else {
                eprintln!("{line}");
            }
        })?;
        timings.stage("toolchain");
        // 2. The nested build, and what rustc says it built.
        let nested = nested::build(&nested::NestedOptions {
            manifest_dir: &self.manifest_dir,
            target_dir: &self.target_dir,
            cargo: &self.cargo,
            krate: &krate,
            arch: &self.arch,
            libdevice: self.libdevice.is_some(),
            quiet: self.quiet,
        })?;
        timings.stage("nested build");
        let link_err = |source| Error::Link {
            krate: krate.clone(),
            source,
        };
        let tools = tools::Tools::find().map_err(link_err)?;
        // 3. The whole program's bitcode, with libdevice where it does device math.
        let joined = link::join(tools, &nested).map_err(link_err)?;
        let joined =
            link::device_math(tools, joined, self.libdevice.as_deref()).map_err(link_err)?;
        timings.stage("link");
        // 4. The IR, parsed once and rewritten.
        let mut module = codegen::disassemble(tools, &joined).map_err(link_err)?;
        let math_kernels = ir::calls::kernels_reaching(&module, ir::calls::is_device_math);
        let report = ir::rewrite(
            &mut module,
            ir::Rewrite {
                contract: self.contract,
            },
        )
        .map_err(|e| link_err(e.into()))?;
        timings.stage("disassembly and IR rewrites");
        // 5. opt and llc.
        let opts = codegen::CodegenOptions {
            arch: self.arch.clone(),
            lsr: std::env::var(LSR_ENV).is_ok_and(|v| v == "on"),
            combine_checks: std::env::var(COMBINE_CHECKS_ENV)
                .ok()
                .is_none_or(|v| v != "off"),
            hoist_checks: std::env::var(HOIST_CHECKS_ENV)
                .ok()
                .is_none_or(|v| v != "off"),
            keep_checks: report
                .reqntid
                .iter()
                .map(|(k, _)| k.clone())
                .chain(report.minctasm.iter().map(|(k, _)| k.clone()))
                .collect(),
        };
        let ptx = codegen::compile(tools, &module, &joined, &krate, &opts).map_err(link_err)?;
        let arch = target::raise_file(&ptx, &self.arch).map_err(|source| Error::Io {
            path: ptx.clone(),
            source,
        })?;
        timings.stage("opt and llc");
        // 6. ptxas, where found.
        let (sass, usage) = if self.sass {
            sass::build_cubins(&ptx, &self.arch)
        } else {
            (Sass::Off, Vec::new())
        };
        timings.stage("ptxas");
        let text = tools::read(&ptx).map_err(link_err)?;
        let lints = lints::lints(&text, &usage);
        timings.stage("lints");
        timings.write(&joined.work.join("timings.txt"));
        Ok(Built {
            ptx,
            arch,
            sources: nested.sources,
            report,
            libdevice: (!joined.libdevice.is_empty())
                .then(|| self.libdevice.clone())
                .flatten(),
            sass,
            lints,
            math_kernels,
        })
    }
}

/// The one warning of a build whose device math fell back to berth's portable versions
/// (no libdevice found, and `BERTH_LIBDEVICE` not `off`): the kernels it affects (those whose
/// code calls device math), where libdevice was looked for and how to get it. `None` when
/// libdevice was found or refused, or no kernel calls device math.
fn portable_math_warning(built: &Built, package: &str) -> Option<String> {
    let refused = std::env::var_os(LIBDEVICE_ENV).is_some_and(|v| v == "off" || v == "none");
    if refused || built.math_kernels.is_empty() || find_libdevice().is_some() {
        return None;
    }
    let kernels: Vec<&str> = built.math_kernels.iter().map(String::as_str).collect();
    Some(portable_math_message(
        package,
        &kernels,
        find_ptxas().as_deref(),
    ))
}

/// The text of [`portable_math_warning`].
fn portable_math_message(package: &str, kernels: &[&str], ptxas: Option<&Path>) -> String {
    let beside = ptxas.map_or_else(String::new, |p| {
        format!(" (looked beside {} and in the CUDA toolkits)", p.display())
    });
    format!(
        "no libdevice.10.bc found{beside}: the device math (exp, log, sin, pow, …) in {package}'s kernels ({}) uses berth's portable versions, slower than nvcc's; `pip install nvidia-cuda-nvcc==13.0.88` (libdevice beside its ptxas) or set {LIBDEVICE_ENV}=/path/to/libdevice.10.bc, then rebuild",
        kernels.join(", ")
    )
}

/// How long each stage of a build took, written beside its files (`timings.txt`) for reading.
struct Timings {
    last: std::time::Instant,
    lines: String,
}

impl Timings {
    fn start() -> Self {
        Timings {
            last: std::time::Instant::now(),
            lines: String::new(),
        }
    }

    /// The stage that ends now.
    fn stage(&mut self, name: &str) {
        let now = std::time::Instant::now();
        let ms = (now - self.last).as_secs_f64() * 1e3;
        self.lines.push_str(&format!("{name}: {ms:.0} ms\n"));
        self.last = now;
    }

    /// Written for reading only: a build does not fail for want of it.
    fn write(&self, path: &Path) {
        let _ = std::fs::write(path, &self.lines);
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
/// ptxas is found (and `BERTH_SASS` is not `off`), the same for the kernels' cubins
/// (`BERTH_CUBIN`, `BERTH_CUBIN_ARCH`). Missing SASS is one warning.
///
/// When rustc reports errors in the GPU build, the build script still succeeds: it hands the
/// errors to the host build ([`embed::embed_errors`]) with one warning, and the host build of
/// the crate reports them. A mistake in a kernel body is an error of the host build too (it
/// compiles every body), reported there once as an ordinary rustc error; an error only the
/// GPU build has (host-only code outside `#[cfg(not(target_arch = "nvptx64"))]`) is one error
/// of the host build, naming the crate and holding rustc's errors in the GPU build, reported
/// when the host build has no errors of its own and reaches code generation (`cargo build`,
/// `cargo test`; under `cargo check` only the warning says so). Any other failure (the
/// toolchain, cargo itself, the link, a rewrite, opt or llc) ends the build script with the
/// diagnostics and a one-line summary.
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
    println!("cargo:rerun-if-env-changed={COMBINE_CHECKS_ENV}");
    println!("cargo:rerun-if-env-changed={HOIST_CHECKS_ENV}");
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
    let built = match Builder::new(&manifest_dir, shared_target_dir(&out_dir))
        .name(env_or_die("CARGO_PKG_NAME"))
        .arch(&arch)
        .quiet(true)
        .cargo_warnings(true)
        .build()
    {
        Ok(built) => built,
        // rustc's errors: reported by the host build, as its own. The lines make cargo run
        // this script again on every build until the GPU build succeeds.
        Err(Error::Build { diagnostics, .. }) if !diagnostics.is_empty() => {
            let package = env_or_die("CARGO_PKG_NAME");
            for line in embed::embed_errors(&diagnostics, &out_dir, &package)? {
                println!("{line}");
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // A local frame or spills is always worth a look; a check in a loop may be one the data
    // needs (a gather), so those are listed by `cargo xtask ptx` rather than on every build.
    for lint in built.lints.iter().filter(|l| l.warns_on_build()) {
        println!("cargo:warning={lint}");
    }
    if let Some(warning) = portable_math_warning(&built, &env_or_die("CARGO_PKG_NAME")) {
        println!("cargo:warning={warning}");
    }
    // 7. The files handed to the host build.
    for line in embed::embed(&built, &out_dir, &env_or_die("CARGO_PKG_NAME"), &built.arch)? {
        println!("{line}");
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("src").display()
    );
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
    fn the_portable_math_warning_names_the_kernels_the_search_and_the_fix() {
        let kernels = ["saxpy", "black_scholes"];
        let ptxas = Path::new("/opt/nvidia/cu13/bin/ptxas");
        let m = portable_math_message("my-kernels", &kernels, Some(ptxas));
        assert!(
            m.starts_with("no libdevice.10.bc found (looked beside /opt/nvidia/cu13/bin/ptxas"),
            "{m}"
        );
        assert!(
            m.contains("my-kernels's kernels (saxpy, black_scholes) uses berth's portable"),
            "{m}"
        );
        assert!(m.contains("pip install nvidia-cuda-nvcc"), "{m}");
        assert!(m.contains("BERTH_LIBDEVICE="), "{m}");
        assert!(!m.contains('\n'), "one line for cargo:warning: {m}");
        let without = portable_math_message("k", &["a"], None);
        assert!(
            without.starts_with("no libdevice.10.bc found: "),
            "{without}"
        );
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
    fn shared_target_dir_is_beside_profile_dirs() {
        let out = Path::new("/w/target/debug/build/kern-123/out");
        assert_eq!(
            shared_target_dir(out),
            PathBuf::from("/w/target/berth-nvptx")
        );
    }
}
