//! The toolchain's LLVM tools (the `llvm-tools` component: `llvm-link`, `llvm-nm`,
//! `llvm-dis`, `llvm-as`, `opt`, `llc`), and running them.

use crate::link::LinkError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory of the toolchain's LLVM tools.
#[derive(Debug, Clone, Copy)]
pub struct Tools(&'static Path);

impl Tools {
    /// The tools of the toolchain that runs the build: `<sysroot>/lib/rustlib/<host>/bin`.
    pub fn find() -> Result<Tools, LinkError> {
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
            Ok(Tools(dir))
        } else {
            Err(LinkError::Tools(dir.clone()))
        }
    }

    /// What identifies the installed `tools` (their paths, sizes and modification times),
    /// for the stamps of stages that run them: a toolchain updated in place changes it.
    pub(crate) fn identity(self, tools: &[&str]) -> String {
        tools
            .iter()
            .map(|t| {
                let path = self.0.join(t);
                let meta = std::fs::metadata(&path).ok();
                format!(
                    "{}:{:?}:{:?}\n",
                    path.display(),
                    meta.as_ref().map(|m| m.len()),
                    meta.and_then(|m| m.modified().ok())
                )
            })
            .collect()
    }

    /// Run `tool` on `file` with the arguments `args` adds: its standard output.
    pub fn run(
        self,
        tool: &'static str,
        file: &Path,
        args: impl FnOnce(&mut Command) -> &mut Command,
    ) -> Result<String, LinkError> {
        let mut cmd = Command::new(self.0.join(tool));
        let out = args(&mut cmd).output().map_err(|source| LinkError::Io {
            path: self.0.join(tool),
            source,
        })?;
        if !out.status.success() {
            return Err(LinkError::Tool {
                tool,
                file: file.to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Read a text file.
pub(crate) fn read(p: &Path) -> Result<String, LinkError> {
    std::fs::read_to_string(p).map_err(|source| LinkError::Io {
        path: p.to_owned(),
        source,
    })
}

/// Write a text file.
pub(crate) fn write(p: &Path, s: &str) -> Result<(), LinkError> {
    std::fs::write(p, s).map_err(|source| LinkError::Io {
        path: p.to_owned(),
        source,
    })
}
