//! Stage 7 of a kernel build: the PTX (and SASS) handed to the host build of the kernel crate,
//! which `#[gpu_kernel]` embeds: the files copied into the build script's `OUT_DIR`, their
//! paths exported through the variables of berth's kernel ABI ([`berth_abi::PTX_ENV`],
//! [`berth_abi::CUBIN_ENV`], [`berth_abi::CUBIN_ARCH_ENV`]), and what cargo must watch.

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
        Sass::Cubin(cubin) => {
            let dest = dest.with_extension("cubin");
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_host_build_gets_the_files_by_the_abis_variables() {
        let dir = std::env::temp_dir().join(format!("berth-embed-{}", std::process::id()));
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let (ptx, cubin) = (dir.join("k.ptx"), dir.join("k.cubin"));
        std::fs::write(&ptx, ".version 8.7").unwrap();
        std::fs::write(&cubin, b"\x7fELF").unwrap();
        let built = Built {
            ptx,
            sources: vec![PathBuf::from("/w/src/lib.rs")],
            report: Default::default(),
            libdevice: None,
            sass: Sass::Cubin(cubin),
            lints: Vec::new(),
        };
        let lines = embed(&built, &out, "my-kernels", "sm_90").unwrap();
        let want_ptx = out.join("my_kernels.ptx");
        assert_eq!(
            lines,
            [
                format!("cargo:rustc-env=BERTH_PTX={}", want_ptx.display()),
                format!(
                    "cargo:rustc-env=BERTH_CUBIN={}",
                    out.join("my_kernels.cubin").display()
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
}
