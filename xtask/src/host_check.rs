//! `cargo xtask asan` / `cargo xtask valgrind`: the simulator's own `unsafe` code (memory,
//! streams, kernel threads and coroutines) under a host memory checker, through the tests of
//! the runtime and device crates and the simulator test binaries of `tests/`.
//!
//! - `asan`: AddressSanitizer and LeakSanitizer. Built with the pinned stable toolchain and
//!   `RUSTC_BOOTSTRAP=1` (for `-Zsanitizer=address`; its runtime ships with the standard
//!   library), with `--target` so the flag reaches the tests but not build scripts or proc
//!   macros, into `target/asan`. Miri is not used: it needs a nightly toolchain with the miri
//!   component, and cannot run the simulator's coroutines (stack switching) or its FFI.
//! - `valgrind`: valgrind's memcheck over the ordinary test build (much slower; `--skip NAME`
//!   leaves out tests by name, as libtest does).
//!
//! Leaks that tests make on purpose (launch guards `mem::forget`ed to show that leaking stays
//! sound) are suppressed by test name: `xtask/sanitizer/`. Each binary's result is a row of
//! `bench/results/reliability/host.jsonl` and a line of `RELIABILITY.md` (`--no-record` to
//! only check, as CI does).

use crate::{Result, workspace_root};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Asan,
    Valgrind,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Asan => "asan",
            Tool::Valgrind => "valgrind",
        }
    }
}

/// The packages whose tests run: the runtime (the simulator is in it), the device API, and the
/// integration tests (simulator backend).
const PACKAGES: [&str; 3] = ["berth-gpu-runtime", "berth-gpu-device", "berth-tests"];

/// Test binaries not run under a checker: `ui` runs cargo and rustc (trybuild), and
/// `build_errors` runs cargo builds of kernel crates to read their errors: neither runs the
/// simulator, and the checked build would only slow their compilers.
const SKIP_BINARIES: [&str; 2] = ["ui", "build_errors"];

/// One test binary to run.
struct Binary {
    label: String,
    path: PathBuf,
}

pub fn asan(args: &[String]) -> Result {
    run(Tool::Asan, args)
}

pub fn valgrind(args: &[String]) -> Result {
    run(Tool::Valgrind, args)
}

fn run(tool: Tool, args: &[String]) -> Result {
    let mut record = true;
    let mut skips = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-record" => record = false,
            "--skip" => skips.push(it.next().ok_or("--skip needs a test name")?.clone()),
            _ => {
                return Err(format!(
                    "usage: cargo xtask {} [--no-record] [--skip TEST]...",
                    tool.name()
                )
                .into());
            }
        }
    }
    let root = workspace_root();
    let binaries = build(tool, &root)?;
    let (date, commit) = (utc_now(), commit(&root));
    let command = command_line(tool, args);
    let checker = checker_version(tool);
    let mut rows = Vec::new();
    let mut failed = 0;
    for b in &binaries {
        let row = run_binary(tool, &root, b, &skips)?;
        let ok = row["result"] == "pass";
        eprintln!(
            "{} {}: {} ({} passed, {} failed, {} checker errors, {} s)",
            tool.name(),
            b.label,
            row["result"],
            row["passed"],
            row["failed"],
            row["errors"],
            row["seconds"]
        );
        if !ok {
            failed += 1;
        }
        let mut row = row;
        row["date"] = json!(date);
        row["commit"] = json!(commit);
        row["command"] = json!(command);
        row["checker"] = json!(checker);
        rows.push(row);
    }
    if record {
        crate::reliability::record_host(&rows)?;
    }
    if failed > 0 {
        return Err(format!(
            "{failed} of {} test binaries failed under {} (output above)",
            rows.len(),
            tool.name()
        )
        .into());
    }
    eprintln!(
        "{}: {} test binaries, all clean",
        tool.name(),
        binaries.len()
    );
    Ok(())
}

fn command_line(tool: Tool, args: &[String]) -> String {
    let mut c = format!("cargo xtask {}", tool.name());
    for a in args.iter().filter(|a| *a != "--no-record") {
        c.push(' ');
        c.push_str(a);
    }
    c
}

/// What did the checking: the compiler that instrumented the tests, or valgrind's version.
fn checker_version(tool: Tool) -> String {
    let (prog, arg, what) = match tool {
        Tool::Asan => (
            "rustc",
            "-V",
            ", RUSTC_BOOTSTRAP=1 -Zsanitizer=address -Cforce-frame-pointers=yes",
        ),
        Tool::Valgrind => ("valgrind", "--version", ""),
    };
    let version = Command::new(prog)
        .arg(arg)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| format!("{prog} (version unknown)"));
    format!("{version}{what}")
}

/// The host's target triple (`rustc -vV`).
fn host_triple() -> Result<String> {
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".into())
}

/// Build the test binaries for `tool`; their paths, from cargo's JSON messages.
fn build(tool: Tool, root: &Path) -> Result<Vec<Binary>> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args(["test", "--no-run", "--lib", "--tests"])
        .arg("--message-format=json-render-diagnostics");
    for p in PACKAGES {
        cmd.args(["-p", p]);
    }
    if tool == Tool::Asan {
        cmd.args(["--target", &host_triple()?])
            .env("RUSTC_BOOTSTRAP", "1")
            // Frame pointers in every frame built here, optimised crates included: LeakSanitizer
            // records an allocation's stack with the frame-pointer unwinder, and one frame
            // without stops it short of the test function the suppressions match by name.
            .env(
                "RUSTFLAGS",
                "-Zsanitizer=address -Cforce-frame-pointers=yes",
            )
            .env("CARGO_TARGET_DIR", root.join("target/asan"));
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    let mut out = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(&line?) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let kinds = msg["target"]["kind"].to_string();
        let name = msg["target"]["name"].as_str().unwrap_or("?");
        let label = if kinds.contains("\"lib\"") {
            format!(
                "{} unit tests",
                msg["package_id"].as_str().map_or(name, package_name)
            )
        } else if kinds.contains("\"test\"") {
            format!("tests/{name}")
        } else {
            continue; // binaries' unit tests: none
        };
        if SKIP_BINARIES.contains(&name) {
            continue;
        }
        out.push(Binary {
            label,
            path: exe.into(),
        });
    }
    if !child.wait()?.success() {
        return Err(format!("building the tests for {} failed", tool.name()).into());
    }
    out.sort_by(|a, b| a.label.cmp(&b.label));
    Ok(out)
}

/// The package's name in a cargo package id: `path+file:///…/runtime#berth-gpu-runtime@0.1.0`,
/// `path+file:///…/berth-gpu-runtime#0.1.0` (the name is the folder's), or the older
/// `berth-gpu-runtime 0.1.0 (path+file:///…)`.
fn package_name(id: &str) -> &str {
    match id.split_once('#') {
        Some((url, tail)) => match tail.split_once('@') {
            Some((name, _)) => name,
            None => url.rsplit('/').next().unwrap_or(url),
        },
        None => id.split_whitespace().next().unwrap_or(id),
    }
}

fn run_binary(tool: Tool, root: &Path, b: &Binary, skips: &[String]) -> Result<Value> {
    let supp = root.join("xtask/sanitizer");
    let mut cmd = match tool {
        Tool::Asan => {
            let mut c = Command::new(&b.path);
            // Allocations too large for ASan are the out-of-memory tests' point: return null.
            c.env("ASAN_OPTIONS", "allocator_may_return_null=1:detect_leaks=1")
                .env(
                    "LSAN_OPTIONS",
                    format!("suppressions={}", supp.join("lsan.supp").display()),
                );
            c
        }
        Tool::Valgrind => {
            let mut c = Command::new("valgrind");
            c.args([
                "--error-exitcode=99",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
                "--show-leak-kinds=definite",
            ])
            .arg(format!(
                "--suppressions={}",
                supp.join("valgrind.supp").display()
            ))
            .arg(&b.path);
            c
        }
    };
    for s in skips {
        cmd.args(["--skip", s]);
    }
    // Tests that measure memory report it without asserting under a checker.
    cmd.env("BERTH_SANITIZER", tool.name());
    let t = Instant::now();
    let out = cmd.current_dir(root).output()?;
    let secs = t.elapsed().as_secs();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (passed, failed, ignored) = libtest_counts(&text);
    let errors = checker_errors(tool, &text);
    let result = if out.status.success() && errors == 0 && failed == 0 {
        "pass"
    } else {
        // The checker's report and the failing tests, for the log.
        eprintln!("--- {} {} ---\n{text}--- end ---", tool.name(), b.label);
        "fail"
    };
    Ok(json!({
        "tool": tool.name(),
        "binary": b.label,
        "result": result,
        "passed": passed,
        "failed": failed,
        "ignored": ignored,
        "errors": errors,
        "seconds": secs,
    }))
}

/// Tests passed, failed and ignored, from libtest's `test result:` lines.
fn libtest_counts(text: &str) -> (u64, u64, u64) {
    let mut counts = (0, 0, 0);
    for line in text.lines().filter(|l| l.starts_with("test result:")) {
        let num = |what: &str| {
            line.split(';')
                .find(|p| p.trim_end().ends_with(what))
                .and_then(|p| p.split_whitespace().rev().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        counts.0 += num("passed");
        counts.1 += num("failed");
        counts.2 += num("ignored");
    }
    counts
}

/// Reports of the checker in `text`: ASan and LSan error headers, or valgrind's error count.
fn checker_errors(tool: Tool, text: &str) -> u64 {
    match tool {
        Tool::Asan => text
            .lines()
            .filter(|l| l.contains("ERROR: AddressSanitizer") || l.contains("ERROR: LeakSanitizer"))
            .count() as u64,
        Tool::Valgrind => text
            .lines()
            .filter_map(|l| l.split("ERROR SUMMARY: ").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .sum(),
    }
}

fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

fn commit(root: &Path) -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_counts_add_up_the_result_lines() {
        let text = "test a ... ok\ntest result: ok. 40 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 1s\n\
                    test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(libtest_counts(text), (43, 1, 2));
    }

    #[test]
    fn checker_errors_are_counted_per_tool() {
        let asan = "==1==ERROR: AddressSanitizer: heap-use-after-free\n==2==ERROR: LeakSanitizer: detected memory leaks\n";
        assert_eq!(checker_errors(Tool::Asan, asan), 2);
        let vg = "==9== ERROR SUMMARY: 3 errors from 2 contexts (suppressed: 0 from 0)\n";
        assert_eq!(checker_errors(Tool::Valgrind, vg), 3);
        assert_eq!(checker_errors(Tool::Valgrind, "nothing"), 0);
    }

    #[test]
    fn package_names_come_from_package_ids() {
        assert_eq!(
            package_name("path+file:///w/runtime#berth-gpu-runtime@0.1.0"),
            "berth-gpu-runtime"
        );
        assert_eq!(
            package_name("path+file:///w/berth-gpu-device#0.1.0"),
            "berth-gpu-device"
        );
        assert_eq!(
            package_name("berth-gpu-device 0.1.0 (path+file:///w/device)"),
            "berth-gpu-device"
        );
    }
}
