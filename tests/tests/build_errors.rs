//! How a kernel crate's errors reach the user: a small kernel crate, written under the target
//! directory, is built with cargo as a user would build it (its build script calls
//! `berth_build::kernels()`). A mistake in a kernel body is reported once, by the host build,
//! as an ordinary rustc error, not through the build script's failure; an error only the GPU
//! build has fails the build with one error that names the crate and holds the GPU build's
//! rustc errors; once fixed, the crate builds. No GPU is needed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel crate's package name, as the messages name it.
const PACKAGE: &str = "berth-build-errors-case";

/// A kernel crate of two kernels, with `before` above them and `line` in the first one's body.
fn kernel_crate(before: &str, line: &str) -> String {
    format!(
        "use berth::prelude::*;\n\
         {before}\n\
         #[gpu_kernel]\n\
         pub fn scale(a: f32, y: &mut [f32]) {{\n\
         \x20   let i = thread::index();\n\
         \x20   if i < y.len() {{\n\
         \x20       {line}\n\
         \x20       y[i] *= a;\n\
         \x20   }}\n\
         }}\n\
         \n\
         #[gpu_kernel]\n\
         pub fn fill(v: f32, y: &mut [f32]) {{\n\
         \x20   let i = thread::index();\n\
         \x20   if i < y.len() {{\n\
         \x20       y[i] = v;\n\
         \x20   }}\n\
         }}\n"
    )
}

/// The crate's directory and the target directory its builds share (the host build's
/// dependencies and the GPU build's `core` are built once, by the first run).
fn dirs() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("berth-build-errors");
    (root.join(PACKAGE), root.join("target"))
}

/// Write the crate with `lib_rs` and `cargo build` it; the build's status and its output.
fn build(lib_rs: &str) -> (bool, String) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package is in the workspace");
    let (krate, target) = dirs();
    std::fs::create_dir_all(krate.join("src")).expect("creating the crate's directory");
    let manifest = format!(
        "[package]\n\
         name = \"{PACKAGE}\"\n\
         version = \"0.1.0\"\n\
         edition = \"2024\"\n\
         publish = false\n\
         \n\
         [dependencies]\n\
         berth-gpu = {{ path = {berth:?} }}\n\
         \n\
         [build-dependencies]\n\
         berth-gpu-build = {{ path = {builder:?} }}\n\
         \n\
         # Not a member of the workspace it is written under.\n\
         [workspace]\n",
        berth = workspace.display().to_string(),
        builder = workspace.join("builder").display().to_string(),
    );
    std::fs::write(krate.join("Cargo.toml"), manifest).expect("writing Cargo.toml");
    std::fs::write(
        krate.join("build.rs"),
        "fn main() { berth_build::kernels() }\n",
    )
    .expect("writing build.rs");
    std::fs::write(krate.join("src/lib.rs"), lib_rs).expect("writing src/lib.rs");
    // The workspace's lock file: the same versions of the dependencies, none fetched.
    std::fs::copy(workspace.join("Cargo.lock"), krate.join("Cargo.lock"))
        .expect("copying Cargo.lock");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&krate)
        .args(["build", "--offline", "--color", "never"])
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_TERM_PROGRESS_WHEN", "never")
        .output()
        .expect("running cargo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The lines of `out` that begin an error.
fn error_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("error"))
        .map(str::to_owned)
        .collect()
}

/// Both cases in one test: they build one crate in turn.
#[test]
fn kernel_errors_are_reported_once_by_the_host_build() {
    // A type error in a kernel body: the GPU build has it too, but only the host build
    // reports it, as rustc does, and the build script does not fail.
    let (ok, out) = build(&kernel_crate("", "let wrong: u32 = a;"));
    assert!(!ok, "the build must fail:\n{out}");
    assert_eq!(
        out.matches("error[E0308]: mismatched types").count(),
        1,
        "the error once:\n{out}"
    );
    assert_eq!(
        error_lines(&out),
        [
            "error[E0308]: mismatched types".to_owned(),
            format!("error: could not compile `{PACKAGE}` (lib) due to 1 previous error")
        ],
        "one error, and cargo's summary:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "could not compile `{PACKAGE}` (lib) due to 1 previous error"
        )),
        "{out}"
    );
    assert!(!out.contains("failed to run custom build command"), "{out}");
    assert!(!out.contains("has no PTX"), "{out}");
    let warning = format!("building `{PACKAGE}` for the GPU (nvptx64-nvidia-cuda) failed");
    // (cargo shows a build script's warnings again when the package then fails.)
    assert!(out.contains(&warning), "the warning:\n{out}");

    // Host-only code outside `#[cfg(not(target_arch = "nvptx64"))]`: the host build compiles,
    // the GPU build (`no_std`) does not. One error, naming the crate, with rustc's.
    let (ok, out) = build(&kernel_crate(
        "pub fn host_len(v: &std::vec::Vec<f32>) -> usize { v.len() }",
        "",
    ));
    assert!(!ok, "the build must fail:\n{out}");
    assert!(!out.contains("failed to run custom build command"), "{out}");
    let error = format!(
        "error[E0080]: evaluation panicked: {warning}, with errors the host build does not have"
    );
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 2, "one error, and cargo's summary:\n{out}");
    assert!(errors[0].starts_with(&error), "{out}");
    assert_eq!(
        errors[1],
        format!("error: could not compile `{PACKAGE}` (lib) due to 1 previous error"),
        "{out}"
    );
    // rustc's error in the GPU build, inside that one error, at the line that has it.
    let within = &out[out.find(&error).expect("checked")..];
    assert!(within.contains("error[E0433]"), "{out}");
    assert!(within.contains("`std`"), "{out}");
    assert!(within.contains("src/lib.rs:2:"), "{out}");

    // The same code behind the `cfg`: both builds succeed, and nothing is left of the errors.
    let (ok, out) = build(&kernel_crate(
        "#[cfg(not(target_arch = \"nvptx64\"))]\n\
         pub fn host_len(v: &std::vec::Vec<f32>) -> usize { v.len() }",
        "",
    ));
    assert!(ok, "the build must succeed:\n{out}");
    assert!(!out.contains(&warning), "{out}");
    assert!(error_lines(&out).is_empty(), "{out}");
}
