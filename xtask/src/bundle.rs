//! `cargo xtask gpu` / `cargo xtask bench`: stage everything the GPU machine runs in `.gpu/`.
//!
//! The GPU machine needs no Rust toolchain: binaries are built here (profile `gpu`: release,
//! no debug info, stripped — small enough to copy for every run) and found through cargo's
//! JSON messages. The CUDA C++ reference is copied as source and compiled there with nvcc, in
//! the same run as the Rust benchmark.

use crate::{Result, workspace_root};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const RUN_SH: &str = include_str!("run.sh");

/// The CUDA C++ sources of the benchmarks (under `bench/`, one folder per benchmark) and the
/// name each has in the bundle, beside `run.sh`, which compiles them there; the shared
/// headers go beside them too, so their `#include "common.h"` finds them.
const REFERENCES: &[(&str, &str)] = &[
    ("kernels/reference.cu", "reference.cu"),
    ("compute/reference.cu", "compute.cu"),
    ("placement/reference.cu", "placement.cu"),
    ("pipeline/reference.cu", "pipeline.cu"),
    ("signals/reference.cu", "signals.cu"),
    ("signals/split.cu", "signals_split.cu"),
    ("signals/echo_variants.cu", "echo_variants.cu"),
    ("launch/reference.cu", "launch.cu"),
    ("first_launch/reference.cu", "first_launch.cu"),
    ("multigpu/reference.cu", "multigpu.cu"),
    ("include/common.h", "common.h"),
    ("include/mailbox.h", "mailbox.h"),
    ("include/stream_input.h", "stream_input.h"),
    ("tpch/anchor.py", "tpch_anchor.py"),
    ("features/anchor.py", "features_anchor.py"),
    ("features/mapped_pages.cu", "mapped_pages.cu"),
    ("tensor/anchor.py", "tensor_anchor.py"),
];

/// The bundle's size budget. `.gpu/` is copied to the GPU machine for every run, so it stays
/// small (about 8 MiB): one past this budget holds something staged by mistake (an unstripped
/// or debug binary, a stray file), which is an error here rather than a slow copy there.
const SIZE_BUDGET: u64 = 56 << 20;

/// Test binaries that need cargo at run time (trybuild, builds of a kernel crate) stay behind.
const HOST_ONLY_TESTS: &[&str] = &["ui", "build_errors"];

pub fn run(bench_only: bool) -> Result {
    let root = workspace_root();
    let gpu_dir = root.join(".gpu");
    if gpu_dir.exists() {
        std::fs::remove_dir_all(&gpu_dir)?;
    }
    for sub in ["tests", "bin"] {
        std::fs::create_dir_all(gpu_dir.join(sub))?;
    }
    // The bundle's benchmarks and first-launch figures are for SASS modules: without ptxas the
    // kernel crates would quietly fall back to PTX (JIT-compiled at the first launch). Naming
    // the ptxas found also reruns the kernel build scripts when it appears or changes.
    let ptxas = berth_build::find_ptxas().ok_or(
        "the GPU bundle needs ptxas to embed SASS and none was found \
         (BERTH_PTXAS, PATH, /usr/local/cuda, or `pip install nvidia-cuda-nvcc==13.0.88`)",
    )?;
    let mut child = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .env("BERTH_PTXAS", &ptxas)
        .env_remove("BERTH_SASS")
        .args([
            "build",
            "--profile",
            "gpu",
            "-p",
            "berth-tests",
            "-p",
            "berth-examples",
            "-p",
            "berth-bench",
        ])
        .args(["--features", "berth-tests/gpu", "--tests", "--bins"])
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .spawn()?;
    let mut staged = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let msg: serde_json::Value = match serde_json::from_str(&line?) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let name = msg["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let is_test = msg["profile"]["test"].as_bool().unwrap_or(false);
        let kinds = msg["target"]["kind"].to_string();
        let sub = if is_test {
            if HOST_ONLY_TESTS.contains(&name.as_str())
                || kinds.contains("lib")
                || kinds.contains("bin")
            {
                continue;
            }
            "tests"
        } else {
            "bin"
        };
        let dest = gpu_dir.join(sub).join(&name);
        std::fs::copy(exe, &dest)?;
        staged.push(dest);
    }
    if !child.wait()?.success() {
        return Err("building the GPU bundle failed (errors above)".into());
    }
    for (from, to) in REFERENCES {
        std::fs::copy(root.join("bench").join(from), gpu_dir.join(to))?;
    }
    stage_nsys_libs(&gpu_dir.join("lib"))?;
    // The compute kernels' PTX, for the resource report next to nvcc's (same ptxas there).
    let ptx =
        berth_build::nested::work_dir(&root.join("target/berth-nvptx"), "berth_examples_compute")
            .join("berth_examples_compute.ptx");
    std::fs::copy(&ptx, gpu_dir.join("berth_examples_compute.ptx")).map_err(|e| {
        format!(
            "{}: {e} (the compute examples' PTX should have been built just now)",
            ptx.display()
        )
    })?;
    // Which commit the bundle was built from, for the record of the run.
    let commit = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    std::fs::write(gpu_dir.join("commit.txt"), format!("{commit}\n"))?;
    let run_sh = gpu_dir.join("run.sh");
    std::fs::write(&run_sh, RUN_SH)?;
    make_executable(&run_sh)?;
    let bytes: u64 = staged
        .iter()
        .filter_map(|p| p.metadata().ok())
        .map(|m| m.len())
        .sum();
    // Every binary embeds the same kernel modules, so the packed tar is compressed with a
    // dictionary larger than one binary (xz -9: 64 MiB), which stores that repeated part once;
    // gzip's 32 KiB window cannot see it. run.sh unpacks it there.
    let packed = gpu_dir.join("binaries.tar.xz");
    let status = Command::new("tar")
        .current_dir(&gpu_dir)
        .env("XZ_OPT", "-9 -T0")
        .args(["-cJf", "binaries.tar.xz", "bin", "tests"])
        .status()?;
    if !status.success() {
        return Err("packing the binaries with tar and xz failed".into());
    }
    for sub in ["bin", "tests"] {
        std::fs::remove_dir_all(gpu_dir.join(sub))?;
    }
    eprintln!(
        "staged {} binaries ({:.1} MiB, {:.1} MiB packed) in {}",
        staged.len(),
        bytes as f64 / 1048576.0,
        packed.metadata()?.len() as f64 / 1048576.0,
        gpu_dir.display()
    );
    for p in &staged {
        eprintln!("  {}", p.strip_prefix(&root).unwrap_or(p).display());
    }
    let total = dir_bytes(&gpu_dir)?;
    if total > SIZE_BUDGET {
        return Err(format!(
            "{} holds {:.1} MiB, over the bundle's budget of {} MiB: \
             leave something out of the bundle or pack it tighter",
            gpu_dir.display(),
            total as f64 / 1048576.0,
            SIZE_BUDGET >> 20
        )
        .into());
    }
    let what = if bench_only { " bench" } else { " [MODE]" };
    eprintln!(
        "\nto run it: copy .gpu/ to the GPU machine, run `OUT=<results folder> .gpu/run.sh{what}` \
         there (DEVELOPMENT.md lists the modes),\n\
         bring the results folder back and record it: cargo xtask record <results folder>"
    );
    Ok(())
}

/// Libraries Nsight Systems' importer (`QdstrmImporter`) loads but a machine with only the
/// CUDA toolkit may lack: elfutils' `libdw` and what it needs beyond glibc and zlib. Built
/// against glibc 2.34 at most (Debian 12's), they load on a newer glibc.
const NSYS_LIBS: &[&str] = &["libdw.so.1", "libelf.so.1", "liblzma.so.5", "libbz2.so.1.0"];

/// Copies [`NSYS_LIBS`] from this machine into `lib` for run.sh's `nsys` mode; a missing one
/// is a warning (that mode then keeps nsys's raw capture and says why).
fn stage_nsys_libs(lib: &Path) -> Result {
    std::fs::create_dir_all(lib)?;
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/usr/lib64",
    ];
    for name in NSYS_LIBS {
        match dirs
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.exists())
        {
            // `copy` follows the soname link to the library itself.
            Some(p) => {
                std::fs::copy(&p, lib.join(name))?;
            }
            None => eprintln!(
                "warning: {name} not found: run.sh's nsys mode may not import its capture \
                 (`apt-get install libdw1`)"
            ),
        }
    }
    Ok(())
}

#[cfg(unix)]
fn make_executable(p: &Path) -> Result {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result {
    Ok(())
}

/// The bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every benchmark folder's reference is staged, and nothing staged is missing.
    #[test]
    fn every_benchmark_reference_is_staged() {
        let bench = workspace_root().join("bench");
        for (from, _) in REFERENCES {
            assert!(bench.join(from).is_file(), "bench/{from} is missing");
        }
        for entry in std::fs::read_dir(&bench).unwrap() {
            let dir = entry.unwrap().path();
            let reference = dir.join("reference.cu");
            if reference.exists() {
                let rel = reference
                    .strip_prefix(&bench)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                assert!(
                    REFERENCES.iter().any(|(from, _)| *from == rel),
                    "bench/{rel} is not staged in the bundle"
                );
            }
        }
    }

    #[test]
    fn dir_bytes_counts_files_in_subfolders() {
        let dir = std::env::temp_dir().join(format!("berth-bundle-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::write(dir.join("a"), [0u8; 10]).unwrap();
        std::fs::write(dir.join("sub/b"), [0u8; 200]).unwrap();
        std::fs::write(dir.join("sub/deeper/c"), [0u8; 3000]).unwrap();
        let total = dir_bytes(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(total, 3210);
    }
}
