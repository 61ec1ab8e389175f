//! berth's project commands (`cargo xtask <command>`), in the style of rust-analyzer's xtask:
//! one binary, few dependencies.
//!
//! - `ptx [-p CRATE] [--arch sm_XX] [--out DIR]`: build kernel crates for nvptx64 with the same
//!   builder as their build scripts, print per-kernel registers/stack/spills/shared memory
//!   (ptxas), and copy the PTX where asked.
//! - `gpu`: stage release-built, stripped GPU tests, examples, the benchmark and the CUDA C++
//!   reference with a run script in `.gpu/`, for the GPU machine (which needs no Rust).
//! - `bench`: the same bundle; prints the command that runs only the benchmarks.
//! - `calibrate [OUT.json]`: measure this machine's link (copies, mapped sequential and random
//!   reads) for `#[auto]` placement and cache it (`LinkCosts::cache_path()`); needs a GPU.
//! - `record DIR`: turn what a GPU run wrote (`DIR/*.jsonl`, `DIR/tests.log`,
//!   `DIR/machine.txt`) into `BENCHMARKS.md` (the summary), `bench/results/` (the raw lines),
//!   `GPU-RESULTS.md` and `RELIABILITY.md` (the soak and compute-sanitizer runs);
//!   `record bench/results` renders the summary again.
//! - `asan` / `valgrind [--no-record] [--skip TEST]`: the simulator's tests under
//!   AddressSanitizer or valgrind; the result goes into `RELIABILITY.md`.

mod benches;
mod bundle;
mod host_check;
mod ptx;
mod rebuild;
mod record;
mod reliability;
mod stats;
#[cfg(test)]
mod tidy;

use std::path::PathBuf;
use std::process::ExitCode;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

const USAGE: &str = "usage: cargo xtask <command>
  ptx [-p CRATE] [--arch sm_XX] [--out DIR]   build kernel PTX, report ptxas resource usage
  gpu                                         stage GPU tests + benchmarks in .gpu/
  bench                                       stage the same bundle, print the benchmark command
  calibrate [OUT.json]                        measure this machine's link for #[auto] placement (GPU)
  rebuild [--crates] [--profile dev|release] [--edits N] time a one-line kernel edit's rebuild (no GPU)
  record DIR                                  write BENCHMARKS.md, bench/results/, GPU-RESULTS.md and RELIABILITY.md from a run's output
  asan [--no-record] [--skip TEST]...         the simulator's tests under AddressSanitizer (RELIABILITY.md)
  valgrind [--no-record] [--skip TEST]...     the same under valgrind's memcheck (slow)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ptx") => ptx::run(&args[1..]),
        Some("gpu") => bundle::run(false),
        Some("bench") => bundle::run(true),
        Some("calibrate") => calibrate(&args[1..]),
        Some("rebuild") => rebuild::run(&args[1..]),
        Some("asan") => host_check::asan(&args[1..]),
        Some("valgrind") => host_check::valgrind(&args[1..]),
        Some("record") => match args.get(1) {
            Some(dir) => record::run(PathBuf::from(dir)),
            None => Err("record needs the folder a GPU run wrote".into()),
        },
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo run --release -p berth-bench --bin calibrate [OUT.json]`: the calibration binary,
/// built and run here.
fn calibrate(args: &[String]) -> Result {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "run",
            "--release",
            "-q",
            "-p",
            "berth-bench",
            "--bin",
            "calibrate",
            "--",
        ])
        .args(args)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("calibration failed ({status})").into())
    }
}
