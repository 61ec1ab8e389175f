//! Stage 2 of a kernel build: the nested `cargo rustc` of the kernel crate for
//! `nvptx64-nvidia-cuda`, and what rustc says it built.
//!
//! Everything the later stages need is asked of rustc by its documented options, never read
//! from files its linker happens to leave: the crate's own bitcode is written where
//! `--emit=llvm-bc=<path>` says, and `--print=link-args=<path>` writes the linker's command
//! line, whose inputs are the crate's dependencies (libraries of bitcode, `core` among them)
//! and whose `--export-symbol`s are the symbols the PTX module must keep (the kernel entries
//! and [`berth_abi::PANIC_RECORD`]). rustc's own link, whose PTX the builder does not use, is
//! given a linker that only writes an empty file where the PTX would be (`stub_linker`):
//! the real one optimises and compiles the whole program a second time (5 of the examples
//! crate's 6.5 s in rustc), and the empty file keeps cargo's record of the build complete, so
//! an unchanged crate is not rebuilt.

use crate::Error;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The target of the nested build.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// What the nested build is of, and how.
#[derive(Debug, Clone)]
pub struct NestedOptions<'a> {
    /// The kernel crate's directory.
    pub manifest_dir: &'a Path,
    /// The nested build's target directory.
    pub target_dir: &'a Path,
    /// The cargo to run.
    pub cargo: &'a Path,
    /// The crate's name, for messages and the builder's own directory.
    pub krate: &'a str,
    /// The GPU architecture (`sm_90`).
    pub arch: &'a str,
    /// Build berth's device math to call libdevice (`--cfg berth_libdevice`).
    pub libdevice: bool,
    /// Keep the nested cargo's progress lines off stderr.
    pub quiet: bool,
}

/// What the nested build produced.
#[derive(Debug, Clone)]
pub struct Nested {
    /// The kernel crate's name.
    pub krate: String,
    /// The crate's own bitcode (`--emit=llvm-bc`).
    pub bitcode: PathBuf,
    /// The libraries rustc links the crate with, in its order: rlibs whose objects are bitcode.
    pub libraries: Vec<PathBuf>,
    /// The symbols the module exports (rustc's `--export-symbol`s).
    pub exports: Vec<String>,
    /// Source files the PTX depends on (from rustc's dep-info), excluding the standard library.
    pub sources: Vec<PathBuf>,
    /// The directory for this crate's files of the later stages.
    pub work: PathBuf,
}

/// The directory of `krate`'s files of the later stages (its PTX is `<crate>.ptx` there, the
/// crate's name with `_` for `-`) under the nested build's target directory.
pub fn work_dir(target_dir: &Path, krate: &str) -> PathBuf {
    target_dir.join("berth").join(krate.replace('-', "_"))
}

/// Run the nested build.
pub fn build(o: &NestedOptions<'_>) -> Result<Nested, Error> {
    let manifest = o.manifest_dir.join("Cargo.toml");
    let work = work_dir(o.target_dir, o.krate);
    std::fs::create_dir_all(&work).map_err(|source| Error::Io {
        path: work.clone(),
        source,
    })?;
    let bitcode = work.join("crate.bc");
    let link_args = work.join("link-args.txt");
    let mut emit = std::ffi::OsString::from("--emit=llvm-bc=");
    emit.push(&bitcode);
    let mut print = std::ffi::OsString::from("--print=link-args=");
    print.push(&link_args);
    let linker = stub_linker(o.target_dir)?.map(|path| {
        let mut arg = std::ffi::OsString::from("-Clinker=");
        arg.push(path);
        arg
    });
    let mut cmd = Command::new(o.cargo);
    cmd.current_dir(o.manifest_dir)
        .args(["rustc", "--lib", "--crate-type", "cdylib", "--release"])
        .args(["--target", TARGET, "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(o.target_dir)
        // rustc's diagnostics come as JSON on stdout, each with its rendered text: echoed
        // unless quiet, and a failed build's errors kept for the build script to hand on.
        .arg("--message-format=json")
        // Kernel crates are plain libraries: the attributes the PTX build needs are
        // injected here, for this crate only, so users write none of them.
        .args([
            "--",
            "-Zcrate-attr=no_std",
            "-Zcrate-attr=feature(abi_ptx, asm_experimental_arch)",
            "-Aunused-features",
            // Asked for its bitcode, rustc would keep every value's name in it: the module
            // would differ from the one its linker gets (names in the PTX's comments and
            // constants), and be larger to rewrite.
            "-Zfewer-names=yes",
        ])
        .arg(emit)
        .arg(print)
        .args(linker)
        .env("RUSTC_BOOTSTRAP", "1")
        // immediate-abort: `core`'s formatted panics trap at once instead of linking
        // `core::fmt`, which would cost every kernel that can panic up to 255 registers
        // (see berth_device::panic).
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!(
                "-Ctarget-cpu={}\x1f-Zunstable-options\x1f-Cpanic=immediate-abort{}",
                o.arch,
                // berth's device math calls libdevice when the last step can link it.
                if o.libdevice {
                    "\x1f--cfg=berth_libdevice"
                } else {
                    ""
                }
            ),
        )
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_STRIP", "false")
        // One codegen unit: the crate's bitcode is one module (`--emit` writes one file).
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        // Never incremental, whatever the workspace's profile says for the kernel crate (an
        // `incremental = true` meant for its host build would reach this build too): the
        // kernels' code differs when rustc compiles the crate incrementally.
        .env("CARGO_INCREMENTAL", "0")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_ENCODED_RUSTDOCFLAGS")
        .stdout(Stdio::piped())
        .stderr(if o.quiet {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
    let krate = o.krate.to_owned();
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        cargo: o.cargo.to_owned(),
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
    let mut errors = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|source| Error::Io {
            path: manifest.clone(),
            source,
        })?;
        if let Some(p) = ptx_artifact(&line) {
            ptx = Some(p);
        } else if let Some(d) = diagnostic(&line) {
            if !o.quiet {
                eprint!("{}", d.rendered);
            }
            if d.error {
                errors.push(d.rendered);
            }
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        cargo: o.cargo.to_owned(),
        source,
    })?;
    let captured = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() {
        if o.quiet {
            for e in &errors {
                eprint!("{e}");
            }
        }
        eprint!("{captured}");
        return Err(Error::Build {
            krate,
            diagnostics: errors,
        });
    }
    let ptx = ptx.ok_or(Error::NoPtx {
        krate: krate.clone(),
    })?;
    // Written by the rustc run that built the artifact cargo reports, whether in this build or
    // an earlier one that cargo found up to date.
    let missing = |path: &Path| Error::Outputs {
        krate: krate.clone(),
        path: path.to_owned(),
        target_dir: o.target_dir.to_owned(),
    };
    if !bitcode.is_file() {
        return Err(missing(&bitcode));
    }
    let text = std::fs::read_to_string(&link_args).map_err(|_| missing(&link_args))?;
    let link = LinkArgs::parse(&text).ok_or_else(|| Error::LinkArgs {
        krate: krate.clone(),
        path: link_args.clone(),
    })?;
    Ok(Nested {
        krate,
        bitcode,
        libraries: link.libraries,
        exports: link.exports,
        sources: dep_info_sources(&ptx.with_extension("d")),
        work,
    })
}

/// The linker rustc's own link of the kernel crate runs: a script that writes an empty file
/// where the linker would write the PTX (`-o`), and nothing else. Written once into the nested
/// target directory (the same path every build, so the crate's fingerprint does not change);
/// `None` where there is no `/bin/sh` (rustc's own linker then runs).
fn stub_linker(target_dir: &Path) -> Result<Option<PathBuf>, Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        const SCRIPT: &str = "#!/bin/sh\n\
            # rustc's link of a berth kernel crate: berth-gpu-build makes the PTX itself from\n\
            # the crate's bitcode, so this only leaves the file cargo expects.\n\
            while [ $# -gt 0 ]; do\n\
            \tif [ \"$1\" = -o ]; then : > \"$2\" || exit 1; fi\n\
            \tshift\n\
            done\n";
        let path = target_dir.join("berth").join("no-link.sh");
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        if std::fs::read_to_string(&path).ok().as_deref() != Some(SCRIPT) {
            std::fs::create_dir_all(target_dir.join("berth")).map_err(io)?;
            // Written beside and renamed: a concurrent build never runs half a script.
            let tmp = path.with_extension(format!("sh.{}", std::process::id()));
            std::fs::write(&tmp, SCRIPT).map_err(io)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
        }
        Ok(Some(path))
    }
    #[cfg(not(unix))]
    {
        let _ = target_dir;
        Ok(None)
    }
}

/// What the linker's command line says the crate is linked with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LinkArgs {
    /// The libraries, in order.
    libraries: Vec<PathBuf>,
    /// The exported symbols.
    exports: Vec<String>,
}

impl LinkArgs {
    /// Read `--print=link-args` output: environment assignments (`NAME="value"`), then the
    /// linker and its arguments, each quoted as Rust's `Debug` quotes a string. `None` unless
    /// it names exactly one object of the crate's own (the one module `--emit` wrote), at
    /// least one library and at least one exported symbol.
    fn parse(text: &str) -> Option<LinkArgs> {
        let args = quoted_words(text.trim())?;
        let mut libraries = Vec::new();
        let mut exports = Vec::new();
        let mut objects = 0;
        let mut it = args.into_iter().skip(1);
        while let Some(a) = it.next() {
            if a == "--export-symbol" {
                exports.push(it.next()?);
            } else if a.ends_with(".rlib") {
                libraries.push(PathBuf::from(a));
            } else if a.ends_with(".o") {
                objects += 1;
            }
        }
        (objects == 1 && !libraries.is_empty() && !exports.is_empty())
            .then_some(LinkArgs { libraries, exports })
    }
}

/// The arguments of a printed command line: its quoted words, unescaped, after the leading
/// environment assignments. `None` for text that is not such a line.
fn quoted_words(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return Some(out);
        };
        // `NAME="value"`: an environment assignment, skipped.
        let env = first != '"';
        if env {
            while chars.next_if(|&c| c != '=').is_some() {}
            chars.next()?;
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut word = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => word.push('\n'),
                    't' => word.push('\t'),
                    'r' => word.push('\r'),
                    '0' => word.push('\0'),
                    'u' => {
                        if chars.next()? != '{' {
                            return None;
                        }
                        let mut hex = String::new();
                        loop {
                            match chars.next()? {
                                '}' => break,
                                c => hex.push(c),
                            }
                        }
                        word.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    c => word.push(c),
                },
                c => word.push(c),
            }
        }
        if !env {
            out.push(word);
        }
    }
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

/// One diagnostic of rustc, from a line of cargo's JSON output.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Diagnostic {
    /// rustc's text for it, as it prints it.
    rendered: String,
    /// Whether it is an error (not a warning or a note); rustc's closing "aborting due to N
    /// previous errors" is none.
    error: bool,
}

/// The diagnostic in one line of cargo's JSON output, if the line is a compiler message.
fn diagnostic(line: &str) -> Option<Diagnostic> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    if msg.get("reason")?.as_str()? != "compiler-message" {
        return None;
    }
    let message = msg.get("message")?;
    let rendered = message.get("rendered")?.as_str()?.to_owned();
    let level = message.get("level")?.as_str()?;
    let text = message.get("message")?.as_str().unwrap_or_default();
    let error = level.starts_with("error") && !text.starts_with("aborting due to");
    Some(Diagnostic { rendered, error })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `cmd`'s exit status, where `cmd` runs a script this process has just written: while
    /// another test's thread forks, its child holds the script's file open for writing until it
    /// execs, and running the script meanwhile fails with `ETXTBSY`; it is run again then.
    #[cfg(unix)]
    fn run_written_script(cmd: &mut Command) -> std::process::ExitStatus {
        const ETXTBSY: i32 = 26;
        for _ in 0..1000 {
            match cmd.status() {
                Err(e) if e.raw_os_error() == Some(ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                status => return status.unwrap(),
            }
        }
        panic!("the script stayed busy for 5 s")
    }

    #[cfg(unix)]
    #[test]
    fn the_stub_linker_leaves_an_empty_file_where_the_ptx_would_be() {
        let dir = std::env::temp_dir().join(format!("berth-no-link-{}", std::process::id()));
        let linker = stub_linker(&dir).unwrap().expect("a stub linker on unix");
        assert_eq!(stub_linker(&dir).unwrap(), Some(linker.clone()), "one path");
        let out = dir.join("deps").join("k.ptx");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, "old").unwrap();
        let status = run_written_script(
            Command::new(&linker)
                .args(["k.rcgu.o", "--export-symbol", "k", "-o"])
                .arg(&out)
                .args(["-O3", "--debug"]),
        );
        assert!(status.success());
        assert_eq!(std::fs::read(&out).unwrap(), b"");
        // Where the file cannot be written, rustc hears of it.
        let status = run_written_script(
            Command::new(&linker)
                .arg("-o")
                .arg(dir.join("missing").join("k.ptx"))
                .stderr(Stdio::null()),
        );
        assert!(!status.success());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn artifact_line_yields_ptx_path() {
        let line = r#"{"reason":"compiler-artifact","filenames":["/t/x.d","/t/kern.ptx"]}"#;
        assert_eq!(ptx_artifact(line), Some(PathBuf::from("/t/kern.ptx")));
        assert_eq!(ptx_artifact(r#"{"reason":"build-finished"}"#), None);
        assert_eq!(ptx_artifact("not json"), None);
    }

    /// The linker's command line as rustc 1.95 prints it for an nvptx64 cdylib.
    #[test]
    fn link_args_give_the_libraries_and_the_exports() {
        let text = r#"LC_ALL="C" PATH="/r/bin:/usr/bin" VSLANG="1033" "llvm-bitcode-linker" "--export-symbol" "fill" "--export-symbol" "fill__berth_1d" "--export-symbol" "__berth_panic_record" "/t/deps/k.k.44c6-cgu.0.rcgu.o" "/t/deps/libberth-6e53.rlib" "/t/my dir/libcore-4431.rlib" "-L" "/t/deps/rustcCRPu9R/raw-dylibs" "--target" "nvptx64-nvidia-cuda" "--target-cpu" "sm_90" "-o" "/t/deps/k.ptx" "-O3" "--debug"
"#;
        assert_eq!(
            LinkArgs::parse(text),
            Some(LinkArgs {
                libraries: vec![
                    PathBuf::from("/t/deps/libberth-6e53.rlib"),
                    PathBuf::from("/t/my dir/libcore-4431.rlib"),
                ],
                exports: vec![
                    "fill".to_owned(),
                    "fill__berth_1d".to_owned(),
                    "__berth_panic_record".to_owned(),
                ],
            })
        );
        // Two objects of the crate's own would be two modules, of which `--emit` wrote one.
        let two = text.replace(
            r#""/t/deps/libberth-6e53.rlib""#,
            r#""/t/deps/k.k.44c6-cgu.1.rcgu.o""#,
        );
        assert_eq!(LinkArgs::parse(&two), None);
        assert_eq!(LinkArgs::parse("not a command line"), None);
        assert_eq!(LinkArgs::parse(r#""unterminated"#), None);
    }

    /// Lines of cargo's JSON output as cargo 1.95 writes them for a failed build (shortened).
    #[test]
    fn compiler_messages_give_the_rendered_errors() {
        let error = r#"{"reason":"compiler-message","package_id":"path+file:///w/k#0.1.0","target":{"name":"k"},"message":{"$message_type":"diagnostic","message":"mismatched types","code":{"code":"E0308"},"level":"error","spans":[],"children":[],"rendered":"error[E0308]: mismatched types\n --> src/lib.rs:5:18\n"}}"#;
        assert_eq!(
            diagnostic(error),
            Some(Diagnostic {
                rendered: "error[E0308]: mismatched types\n --> src/lib.rs:5:18\n".to_owned(),
                error: true,
            })
        );
        let warning = error
            .replace(r#""level":"error""#, r#""level":"warning""#)
            .replace("error[E0308]", "warning");
        assert_eq!(diagnostic(&warning).map(|d| d.error), Some(false));
        let ice = error.replace(
            r#""level":"error""#,
            r#""level":"error: internal compiler error""#,
        );
        assert_eq!(diagnostic(&ice).map(|d| d.error), Some(true));
        let aborting = r#"{"reason":"compiler-message","message":{"message":"aborting due to 1 previous error","level":"error","rendered":"error: aborting due to 1 previous error\n\n"}}"#;
        assert_eq!(diagnostic(aborting).map(|d| d.error), Some(false));
        let note = r#"{"reason":"compiler-message","message":{"message":"For more information about this error, try `rustc --explain E0308`.","level":"failure-note","rendered":"For more information about this error, try `rustc --explain E0308`.\n"}}"#;
        assert_eq!(diagnostic(note).map(|d| d.error), Some(false));
        assert_eq!(
            diagnostic(r#"{"reason":"build-finished","success":false}"#),
            None
        );
        assert_eq!(
            diagnostic(r#"{"reason":"compiler-artifact","filenames":[]}"#),
            None
        );
        assert_eq!(diagnostic("error: could not compile `k`"), None);
    }

    #[test]
    fn quoted_words_are_unescaped() {
        assert_eq!(
            quoted_words(r#"A="x y" "l" "a\"b" "c\\d" "\u{e9}\t""#),
            Some(vec![
                "l".to_owned(),
                "a\"b".to_owned(),
                "c\\d".to_owned(),
                "\u{e9}\t".to_owned()
            ])
        );
    }

    #[test]
    fn dep_info_drops_std_and_unescapes_spaces() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k.d");
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
}
