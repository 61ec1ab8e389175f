//! Stage 7 of a kernel build: the PTX (and SASS) handed to the host build of the kernel crate,
//! which `#[gpu_kernel]` embeds: the files copied into the build script's `OUT_DIR`, their
//! paths exported through the variables of berth's kernel ABI ([`berth_abi::PTX_ENV`],
//! [`berth_abi::CUBIN_ENV`], [`berth_abi::CUBIN_ARCH_ENV`]), and what cargo must watch.
//!
//! A GPU build that failed with rustc's errors hands those instead ([`embed_errors`]): the
//! host build reports them, once, as its own errors.

use crate::nested::TARGET;
use crate::{Built, Error, Sass};
use std::path::Path;

/// The build script's lines for cargo (`cargo:…`) that hand `built` to the host build of the
/// package `package` for `arch`, after copying its files into `out_dir`.
pub fn embed(
    built: &Built,
    out_dir: &Path,
    package: &str,
    arch: &str,
) -> Result<Vec<String>, Error> {
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to).map_err(|source| Error::Io {
            path: to.to_owned(),
            source,
        })
    };
    let mut lines = Vec::new();
    let dest = out_dir.join(format!("{}.ptx", package.replace('-', "_")));
    copy(&built.ptx, &dest)?;
    lines.push(format!(
        "cargo:rustc-env={}={}",
        berth_abi::PTX_ENV,
        dest.display()
    ));
    match &built.sass {
        Sass::Cubins(cubin) => {
            let dest = dest.with_extension("cubins");
            copy(cubin, &dest)?;
            lines.push(format!(
                "cargo:rustc-env={}={}",
                berth_abi::CUBIN_ENV,
                dest.display()
            ));
            lines.push(format!(
                "cargo:rustc-env={}={arch}",
                berth_abi::CUBIN_ARCH_ENV
            ));
        }
        Sass::Off => {}
        Sass::Unavailable(why) => {
            let why = why.lines().next().unwrap_or_default();
            lines.push(format!(
                "cargo:warning=no SASS for {arch}, PTX only (the first launch will JIT-compile it): {why}"
            ));
        }
    }
    for src in &built.sources {
        lines.push(format!("cargo:rerun-if-changed={}", src.display()));
    }
    Ok(lines)
}

/// The build script's lines for cargo that hand the host build of the package `package` the
/// errors rustc reported in its GPU build (`diagnostics`, as rustc rendered them), after
/// writing them into `out_dir`: the file's path as [`berth_abi::GPU_BUILD_ERRORS_ENV`], one
/// warning saying where the errors will be reported, and a file to watch that never exists,
/// so that cargo runs the build script again on every build until the GPU build succeeds
/// (the mistake may be fixed anywhere, in a dependency too).
///
/// The host build compiles the same kernel bodies, so an ordinary mistake in one is reported by
/// its rustc, once, as a normal error. An error that only the GPU build has (host-only code
/// that the host build accepts) is reported by `#[gpu_kernel]` as one error holding the file,
/// when the host build reaches code generation without errors of its own: `cargo build` and
/// `cargo test` report it, `cargo check` (no code generation) only shows the warning.
pub fn embed_errors(
    diagnostics: &[String],
    out_dir: &Path,
    package: &str,
) -> Result<Vec<String>, Error> {
    let path = out_dir.join(format!("{}.gpu-errors.txt", package.replace('-', "_")));
    std::fs::write(&path, gpu_errors_report(package, diagnostics)).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let never = path.with_extension("rerun");
    // Left behind by nothing, but removed in case someone made it.
    let _ = std::fs::remove_file(&never);
    Ok(vec![
        format!(
            "cargo:rustc-env={}={}",
            berth_abi::GPU_BUILD_ERRORS_ENV,
            path.display()
        ),
        format!("cargo:rerun-if-changed={}", never.display()),
        format!(
            "cargo:warning=building `{package}` for the GPU ({TARGET}) failed: rustc's errors \
             are reported by the crate's host build (those only the GPU build has by `cargo \
             build`, not by `cargo check`)"
        ),
    ])
}

/// The text the host build reports for an error only the GPU build of `package` has: what
/// failed, the usual cause, and rustc's errors.
fn gpu_errors_report(package: &str, diagnostics: &[String]) -> String {
    let mut text = format!(
        "building `{package}` for the GPU ({TARGET}) failed, with errors the host build does \
         not have. The GPU build is `no_std`: host-only code in a kernel crate goes behind \
         `#[cfg(not(target_arch = \"nvptx64\"))]`. rustc's errors in the GPU build:\n"
    );
    for d in diagnostics {
        text.push('\n');
        text.push_str(d.trim_end());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_host_build_gets_the_files_by_the_abis_variables() {
        let dir = std::env::temp_dir().join(format!("berth-embed-{}", std::process::id()));
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let (ptx, cubin) = (dir.join("k.ptx"), dir.join("k.cubins"));
        std::fs::write(&ptx, ".version 8.7").unwrap();
        std::fs::write(&cubin, berth_abi::cubins::MAGIC).unwrap();
        let built = Built {
            ptx,
            arch: "sm_90".to_owned(),
            sources: vec![PathBuf::from("/w/src/lib.rs")],
            report: Default::default(),
            libdevice: None,
            sass: Sass::Cubins(cubin),
            lints: Vec::new(),
            math_kernels: Vec::new(),
        };
        let lines = embed(&built, &out, "my-kernels", "sm_90").unwrap();
        let want_ptx = out.join("my_kernels.ptx");
        assert_eq!(
            lines,
            [
                format!("cargo:rustc-env=BERTH_PTX={}", want_ptx.display()),
                format!(
                    "cargo:rustc-env=BERTH_CUBIN={}",
                    out.join("my_kernels.cubins").display()
                ),
                "cargo:rustc-env=BERTH_CUBIN_ARCH=sm_90".to_owned(),
                "cargo:rerun-if-changed=/w/src/lib.rs".to_owned(),
            ]
        );
        assert_eq!(std::fs::read_to_string(want_ptx).unwrap(), ".version 8.7");
        let without = Built {
            sass: Sass::Unavailable("no ptxas found\nmore".into()),
            ..built
        };
        let lines = embed(&without, &out, "k", "sm_80").unwrap();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].starts_with("cargo:warning=no SASS for sm_80"),
            "{lines:?}"
        );
        assert!(lines[1].ends_with("no ptxas found"), "{lines:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_gpu_build_hands_its_errors_to_the_host_build() {
        let out = std::env::temp_dir().join(format!("berth-embed-errors-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let diagnostics = [
            "error[E0433]: cannot find `std` in the crate root\n --> src/lib.rs:3:5\n\n".to_owned(),
            "error: could not find `{x}`\n".to_owned(),
        ];
        let lines = embed_errors(&diagnostics, &out, "my-kernels").unwrap();
        let file = out.join("my_kernels.gpu-errors.txt");
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            lines[0],
            format!("cargo:rustc-env=BERTH_GPU_BUILD_ERRORS={}", file.display())
        );
        let never = out.join("my_kernels.gpu-errors.rerun");
        assert_eq!(
            lines[1],
            format!("cargo:rerun-if-changed={}", never.display())
        );
        assert!(!never.exists());
        assert!(
            lines[2].starts_with(
                "cargo:warning=building `my-kernels` for the GPU (nvptx64-nvidia-cuda) failed: rustc's errors are reported by the crate's host build"
            ),
            "{lines:?}"
        );
        assert!(lines[2].contains("`cargo check`"), "{lines:?}");
        assert!(!lines[2].contains('\n'), "one line for cargo: {lines:?}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("building `my-kernels` for the GPU (nvptx64-nvidia-cuda) failed"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "GPU build:\n\nerror[E0433]: cannot find `std` in the crate root\n --> src/lib.rs:3:5\n\nerror: could not find `{x}`\n"
            ),
            "{text}"
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
}
