//! The Rust components the GPU build needs, installed through rustup where they are missing.
//!
//! The nested nvptx64 build needs three components of the toolchain that runs it: `rust-src`
//! (to build `core` with `-Zbuild-std`), `llvm-bitcode-linker` (rustc's linker for nvptx64)
//! and `llvm-tools` (`llvm-dis`, `opt`, `llc` for the last step). rustup installs the
//! components a `rust-toolchain.toml` lists only when it installs the toolchain itself, not
//! into a toolchain already installed, so a fresh checkout can meet a toolchain without them.
//! [`ensure`] looks for each component's files in the sysroot before any long build; the
//! missing ones are installed with one `rustup component add`, said in one line, or the build
//! fails with the one command that installs them (rustup absent, the install failed, or
//! `BERTH_RUSTUP=off`).
//!
//! Kernel crates build concurrently (one build script each), so the install runs under a lock
//! file and each build script checks the sysroot again once it holds the lock: the first one
//! installs, the others find the components there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The components the GPU build needs.
pub const COMPONENTS: [&str; 3] = ["rust-src", "llvm-bitcode-linker", "llvm-tools"];

/// Environment variable naming the rustup binary to install components with, or `off` for
/// none (a missing component then fails the build with the command that installs it).
pub const RUSTUP_ENV: &str = "BERTH_RUSTUP";

/// Why the toolchain cannot build for the GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolchainError {
    /// Components are missing and were not installed.
    #[error(
        "the GPU build needs the Rust toolchain's {}, missing from the toolchain at {} ({why}): \
         run `{command}`",
        missing.join(", "),
        sysroot.display()
    )]
    Missing {
        /// The missing components.
        missing: Vec<&'static str>,
        /// The toolchain's sysroot.
        sysroot: PathBuf,
        /// Why they were not installed.
        why: String,
        /// The command that installs them.
        command: String,
    },
    /// The toolchain's sysroot could not be found.
    #[error("could not ask `{rustc}` for its sysroot: {why}")]
    Sysroot {
        /// The rustc asked.
        rustc: String,
        /// What went wrong.
        why: String,
    },
}

/// The toolchain a build runs with: its sysroot, host triple and rustup name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// `rustc --print sysroot`.
    pub sysroot: PathBuf,
    /// The host triple (where the LLVM tools live: `lib/rustlib/<host>/bin`).
    pub host: String,
    /// The name rustup knows it by (`RUSTUP_TOOLCHAIN`, which rustup sets for the processes
    /// it starts, else the sysroot's directory under `toolchains/`), if any.
    pub name: Option<String>,
}

impl Toolchain {
    /// The toolchain of `$RUSTC` (the one cargo builds with; `rustc` outside cargo).
    pub fn current() -> Result<Toolchain, ToolchainError> {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let out = |args: &[&str]| -> Result<String, ToolchainError> {
            let err = |why: String| ToolchainError::Sysroot {
                rustc: rustc.to_string_lossy().into_owned(),
                why,
            };
            let o = Command::new(&rustc)
                .args(args)
                .output()
                .map_err(|e| err(e.to_string()))?;
            if !o.status.success() {
                return Err(err(String::from_utf8_lossy(&o.stderr).trim().to_owned()));
            }
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let sysroot = PathBuf::from(out(&["--print", "sysroot"])?.trim());
        let host = out(&["-vV"])?
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
            .unwrap_or_default();
        let name = std::env::var("RUSTUP_TOOLCHAIN")
            .ok()
            .filter(|n| !n.is_empty())
            .or_else(|| rustup_name(&sysroot));
        Ok(Toolchain {
            sysroot,
            host,
            name,
        })
    }

    /// The components of [`COMPONENTS`] whose files are not in the sysroot.
    pub fn missing(&self) -> Vec<&'static str> {
        COMPONENTS.into_iter().filter(|c| !self.has(c)).collect()
    }

    fn has(&self, component: &str) -> bool {
        let rustlib = self.sysroot.join("lib/rustlib");
        let bin = rustlib.join(&self.host).join("bin");
        match component {
            // What `-Zbuild-std` reads first.
            "rust-src" => rustlib.join("src/rust/library/Cargo.lock").is_file(),
            "llvm-bitcode-linker" => {
                bin.join("self-contained/llvm-bitcode-linker").is_file()
                    || bin.join("llvm-bitcode-linker").is_file()
            }
            "llvm-tools" => ["llvm-dis", "llvm-link", "llvm-as", "opt", "llc"]
                .iter()
                .all(|t| bin.join(t).is_file()),
            _ => false,
        }
    }

    /// The command that installs `components` into this toolchain.
    pub fn install_command(&self, components: &[&str]) -> Vec<String> {
        let mut cmd = vec!["rustup".to_owned(), "component".into(), "add".into()];
        if let Some(name) = &self.name {
            cmd.push("--toolchain".into());
            cmd.push(name.clone());
        }
        cmd.extend(components.iter().map(|c| (*c).to_owned()));
        cmd
    }
}

/// The toolchain's name when its sysroot is `<RUSTUP_HOME>/toolchains/<name>`.
fn rustup_name(sysroot: &Path) -> Option<String> {
    let parent = sysroot.parent()?;
    (parent.file_name()? == "toolchains")
        .then(|| {
            sysroot
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .flatten()
}

/// Where rustup is: `$BERTH_RUSTUP` (`off`: nowhere), an executable `rustup` on `path`, or
/// `<cargo_home>/bin/rustup`.
pub fn find_rustup(
    over: Option<&OsStr>,
    path: Option<&OsStr>,
    cargo_home: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(over) = over {
        return (over != "off" && !over.is_empty()).then(|| PathBuf::from(over));
    }
    let on_path = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("rustup"));
    let in_home = cargo_home.map(|h| h.join("bin/rustup"));
    on_path.chain(in_home).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// Where the lock serialising installs is: one per machine and user, in the temp dir.
fn lock_path() -> PathBuf {
    std::env::temp_dir().join("berth-rustup-components.lock")
}

/// Makes sure `toolchain` has every component of [`COMPONENTS`]: the missing ones are
/// installed with `rustup` (found by [`find_rustup`] from the environment), and `note` is
/// called with one line saying so. Returns the components installed (none when all were
/// there).
pub fn ensure(
    toolchain: &Toolchain,
    note: &mut dyn FnMut(&str),
) -> Result<Vec<&'static str>, ToolchainError> {
    if toolchain.missing().is_empty() {
        return Ok(Vec::new());
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let rustup = find_rustup(
        std::env::var_os(RUSTUP_ENV).as_deref(),
        std::env::var_os("PATH").as_deref(),
        cargo_home.as_deref(),
    );
    ensure_with(toolchain, rustup.as_deref(), &lock_path(), note)
}

/// [`ensure`] with the rustup binary (`None`: there is none) and lock file given.
pub fn ensure_with(
    toolchain: &Toolchain,
    rustup: Option<&Path>,
    lock: &Path,
    note: &mut dyn FnMut(&str),
) -> Result<Vec<&'static str>, ToolchainError> {
    let missing = toolchain.missing();
    if missing.is_empty() {
        return Ok(missing);
    }
    let fail = |missing: Vec<&'static str>, why: String| ToolchainError::Missing {
        command: toolchain.install_command(&missing).join(" "),
        missing,
        sysroot: toolchain.sysroot.clone(),
        why,
    };
    let Some(rustup) = rustup else {
        let why = if std::env::var_os(RUSTUP_ENV).is_some_and(|v| v == "off") {
            format!("{RUSTUP_ENV}=off: not installed automatically")
        } else {
            "rustup was not found, and the components come from rustup".to_owned()
        };
        return Err(fail(missing, why));
    };
    // Held until the install is over; released when the file is closed.
    let _lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock)
        .and_then(|f| f.lock().map(|()| f))
        .map_err(|e| fail(missing.clone(), format!("{}: {e}", lock.display())))?;
    // Another build script may have installed them while this one waited.
    let missing = toolchain.missing();
    if missing.is_empty() {
        return Ok(missing);
    }
    let args = &toolchain.install_command(&missing)[1..];
    note(&format!(
        "installing the Rust components the GPU build needs, missing from this toolchain: `rustup {}`",
        args.join(" ")
    ));
    let out = Command::new(rustup)
        .args(args)
        // rustup's own choice of toolchain must not come from the outer build.
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .map_err(|e| {
            fail(
                missing.clone(),
                format!("could not run {}: {e}", rustup.display()),
            )
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .trim()
            .to_owned();
        return Err(fail(missing, format!("`rustup` failed: {why}")));
    }
    let still = toolchain.missing();
    if !still.is_empty() {
        return Err(fail(
            still,
            "`rustup component add` succeeded but their files are not in the sysroot".into(),
        ));
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const HOST: &str = "x86_64-unknown-linux-gnu";

    /// A `PATH` of `dirs`.
    fn join_paths(dirs: &[&Path]) -> std::ffi::OsString {
        std::env::join_paths(dirs).unwrap()
    }

    /// A fresh directory under the temp dir, removed when dropped.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("berth-tc-{name}-"))
            .tempdir()
            .unwrap()
    }

    /// A fake sysroot `<root>/toolchains/1.95.0-test` with the given components' files.
    fn sysroot(root: &Path, components: &[&str]) -> Toolchain {
        let sysroot = root.join("toolchains/1.95.0-test");
        std::fs::create_dir_all(sysroot.join("lib/rustlib").join(HOST).join("bin")).unwrap();
        let tc = Toolchain {
            name: rustup_name(&sysroot),
            sysroot,
            host: HOST.into(),
        };
        for c in components {
            for f in files(c) {
                let p = tc.sysroot.join(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "").unwrap();
            }
        }
        tc
    }

    fn files(component: &str) -> Vec<String> {
        let bin = format!("lib/rustlib/{HOST}/bin");
        match component {
            "rust-src" => vec!["lib/rustlib/src/rust/library/Cargo.lock".into()],
            "llvm-bitcode-linker" => vec![format!("{bin}/self-contained/llvm-bitcode-linker")],
            "llvm-tools" => ["llvm-dis", "llvm-link", "llvm-as", "opt", "llc"]
                .iter()
                .map(|t| format!("{bin}/{t}"))
                .collect(),
            _ => unreachable!(),
        }
    }

    /// An executable shell script `dir/rustup` with `body`.
    fn fake_rustup(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("rustup");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// A fake rustup that logs its arguments and creates the named components' files.
    fn installing_rustup(dir: &Path, tc: &Toolchain) -> PathBuf {
        let mut body = format!("echo \"$@\" >> {}/log\nsleep 0.2\n", dir.display());
        body.push_str("for c in \"$@\"; do case $c in\n");
        for c in COMPONENTS {
            let touch: Vec<String> = files(c)
                .iter()
                .map(|f| {
                    let p = tc.sysroot.join(f);
                    format!(
                        "mkdir -p {} && touch {}",
                        p.parent().unwrap().display(),
                        p.display()
                    )
                })
                .collect();
            body.push_str(&format!("  {c}) {} ;;\n", touch.join(" && ")));
        }
        body.push_str("esac; done");
        fake_rustup(dir, &body)
    }

    #[test]
    fn missing_components_are_found_from_the_sysroot() {
        let tmp = scratch("missing");
        let root = tmp.path().to_path_buf();
        let tc = sysroot(&root, &["llvm-tools"]);
        assert_eq!(tc.missing(), ["rust-src", "llvm-bitcode-linker"]);
        assert_eq!(tc.name.as_deref(), Some("1.95.0-test"));
        let tmp_full = scratch("full");
        let full = sysroot(tmp_full.path(), &COMPONENTS);
        assert!(full.missing().is_empty());
    }

    #[test]
    fn only_the_missing_components_are_installed_in_one_line() {
        let tmp = scratch("install");
        let root = tmp.path().to_path_buf();
        let tc = sysroot(&root, &["llvm-tools"]);
        let rustup = installing_rustup(&root, &tc);
        let mut notes = Vec::new();
        let got = ensure_with(&tc, Some(&rustup), &root.join("lock"), &mut |n| {
            notes.push(n.to_owned())
        })
        .unwrap();
        assert_eq!(got, ["rust-src", "llvm-bitcode-linker"]);
        let log = std::fs::read_to_string(root.join("log")).unwrap();
        assert_eq!(
            log,
            "component add --toolchain 1.95.0-test rust-src llvm-bitcode-linker\n"
        );
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].ends_with(
                "`rustup component add --toolchain 1.95.0-test rust-src llvm-bitcode-linker`"
            ),
            "{}",
            notes[0]
        );
        assert!(tc.missing().is_empty());
        // Nothing missing: rustup is not run again.
        assert!(
            ensure_with(&tc, Some(&rustup), &root.join("lock"), &mut |_| ())
                .unwrap()
                .is_empty()
        );
        assert_eq!(std::fs::read_to_string(root.join("log")).unwrap(), log);
    }

    #[test]
    fn concurrent_builds_install_once() {
        let tmp = scratch("race");
        let root = tmp.path().to_path_buf();
        let tc = sysroot(&root, &[]);
        let rustup = installing_rustup(&root, &tc);
        let lock = root.join("lock");
        let installed: Vec<Vec<&str>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| ensure_with(&tc, Some(&rustup), &lock, &mut |_| ()).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let log = std::fs::read_to_string(root.join("log")).unwrap();
        assert_eq!(log.lines().count(), 1, "{log}");
        assert_eq!(installed.iter().filter(|i| !i.is_empty()).count(), 1);
        assert!(tc.missing().is_empty());
    }

    #[test]
    fn a_failed_install_prints_the_one_command() {
        let tmp = scratch("fail");
        let root = tmp.path().to_path_buf();
        let tc = sysroot(&root, &["rust-src"]);
        let rustup = fake_rustup(&root, "echo 'error: could not download' >&2; exit 1");
        let err = ensure_with(&tc, Some(&rustup), &root.join("lock"), &mut |_| ())
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with(
                "run `rustup component add --toolchain 1.95.0-test llvm-bitcode-linker llvm-tools`"
            ),
            "{err}"
        );
        assert!(err.contains("could not download"), "{err}");
    }

    #[test]
    fn without_rustup_the_error_names_the_command() {
        let tmp = scratch("norustup");
        let root = tmp.path().to_path_buf();
        let mut tc = sysroot(&root, &["llvm-tools", "llvm-bitcode-linker"]);
        tc.name = None;
        let err = ensure_with(&tc, None, &root.join("lock"), &mut |_| ())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rustup was not found") || err.contains("BERTH_RUSTUP=off"),
            "{err}"
        );
        assert!(
            err.ends_with("run `rustup component add rust-src`"),
            "{err}"
        );
    }

    #[test]
    fn rustup_is_found_on_path_or_in_cargo_home() {
        let tmp = scratch("find");
        let root = tmp.path().to_path_buf();
        let (a, b, home) = (root.join("a"), root.join("b"), root.join("home"));
        for d in [&a, &b, &home.join("bin")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let path = join_paths(&[&a, &b]);
        assert_eq!(find_rustup(None, Some(&path), Some(&home)), None);
        let in_home = fake_rustup(&home.join("bin"), "exit 0");
        assert_eq!(
            find_rustup(None, Some(&path), Some(&home)),
            Some(in_home.clone())
        );
        let on_path = fake_rustup(&b, "exit 0");
        assert_eq!(find_rustup(None, Some(&path), Some(&home)), Some(on_path));
        // A file that is not executable is not rustup.
        std::fs::write(a.join("rustup"), "").unwrap();
        assert_eq!(find_rustup(None, Some(&join_paths(&[&a])), None), None);
        assert_eq!(
            find_rustup(Some(OsStr::new("off")), Some(&path), Some(&home)),
            None
        );
        assert_eq!(
            find_rustup(Some(OsStr::new("/x/rustup")), Some(&path), None),
            Some(PathBuf::from("/x/rustup"))
        );
    }
}
