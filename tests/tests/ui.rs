//! Compile-fail (UI) tests of `#[gpu_kernel]`: each file in `ui/` makes one mistake, and its
//! `.stderr` is what the user is told. Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p berth-tests --test ui`, then read every one.

use std::path::{Path, PathBuf};

/// The case compiled without `BERTH_PTX`, as in a kernel crate that has no build script.
const NO_PTX_CASE: &str = "ui/missing-build-script.rs";

/// Every other case, relative to the package (as trybuild reports them), in a stable order.
fn cases_with_ptx() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| Path::new("ui").join(entry.expect("directory entry").file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| p != Path::new(NO_PTX_CASE))
        .collect();
    cases.sort();
    cases
}

/// One test, in order, because the macro reads `BERTH_PTX` from the process environment, which
/// every thread shares: first the case without it, then every other case with a dummy PTX
/// file, so that they show only their own error and not also "this crate has no PTX".
/// trybuild compiles its cases when the `TestCases` is dropped, so each one is dropped before
/// the environment changes.
#[test]
fn ui() {
    // SAFETY: this test binary has no other test and starts no thread before this point, so
    // nothing reads the environment concurrently.
    unsafe { std::env::remove_var("BERTH_PTX") };
    {
        let t = trybuild::TestCases::new();
        t.compile_fail(NO_PTX_CASE);
    }

    let ptx = std::env::temp_dir().join(format!("berth-ui-{}.ptx", std::process::id()));
    std::fs::write(&ptx, ".version 7.8\n.target sm_90\n.address_size 64\n")
        .unwrap_or_else(|e| panic!("writing {}: {e}", ptx.display()));
    // SAFETY: as above; trybuild's threads from the first batch ended with its `TestCases`.
    unsafe { std::env::set_var("BERTH_PTX", &ptx) };
    {
        let t = trybuild::TestCases::new();
        for case in cases_with_ptx() {
            t.compile_fail(case);
        }
    }
    let _ = std::fs::remove_file(&ptx);
}
