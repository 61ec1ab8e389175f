//! `cargo xtask record DIR`: write what a GPU run produced into the repository.
//!
//! Reads `machine.txt`, `summary.txt`, `tests.log` and each benchmark's `*.jsonl` from `DIR`
//! (the files `.gpu/run.sh` wrote to `$OUT`) and writes
//! - `BENCHMARKS.md`: the summary — machine, command, and per benchmark its tables with the
//!   ratios berth / nvcc (both measured in the same run);
//! - `bench/results/`: the run's raw lines, one file per benchmark (a targeted run's under
//!   `bench/results/targeted/`), linked from the summary;
//! - `GPU-RESULTS.md`: the status of the latest GPU test run, its log kept under
//!   `bench/results/gpu-tests/`;
//! - `RELIABILITY.md`: `soak.jsonl` and `sanitize.jsonl` (`reliability.rs`).
//!
//! `cargo xtask record bench/results` renders `BENCHMARKS.md` again from the recorded raw
//! lines, after a change to how a table is laid out. A GPU result that is not recorded did
//! not happen.

use crate::{Result, workspace_root};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One benchmark of a run: the file `.gpu/run.sh` writes, and how it becomes a section of
/// `BENCHMARKS.md` (the renderer may also write a plot under `docs/`, hence the root).
struct Section {
    file: &'static str,
    render: fn(&mut String, &str, &Path) -> Result,
}

/// Sections a full and a targeted run render alike.
const SIGNALS: Section = Section {
    file: "signals.jsonl",
    render: |md, text, _| crate::benches::signals::write(md, text),
};
const COMPUTE: Section = Section {
    file: "compute.jsonl",
    render: |md, text, _| crate::benches::compute::write(md, text),
};
const LAUNCH: Section = Section {
    file: "launch.jsonl",
    render: |md, text, _| crate::benches::launch::write(md, text),
};
const FIRST_LAUNCH: Section = Section {
    file: "firstlaunch.jsonl",
    render: |md, text, _| crate::benches::first_launch::write(md, text),
};

/// The sections of a full run (one with `bench.jsonl`), in their order in `BENCHMARKS.md`. A
/// new benchmark adds a line here and its renderer beside it, `bench/<name>/record.rs`
/// (listed in `benches.rs`).
const FULL: &[Section] = &[
    Section {
        file: "bench.jsonl",
        render: |md, text, _| crate::benches::kernels::write(md, text),
    },
    COMPUTE,
    Section {
        file: "placement.jsonl",
        render: crate::benches::placement::write,
    },
    SIGNALS,
    Section {
        file: "pipeline.jsonl",
        render: crate::benches::pipeline::write,
    },
    LAUNCH,
    FIRST_LAUNCH,
];

/// The sections of a targeted run (some benchmarks only, no `bench.jsonl`), which goes at the
/// end of `BENCHMARKS.md` with its headings one level down.
const TARGETED: &[Section] = &[
    SIGNALS,
    Section {
        file: "pipeline.jsonl",
        render: crate::benches::pipeline::write_short,
    },
    COMPUTE,
    LAUNCH,
    FIRST_LAUNCH,
    Section {
        file: "nvtx.jsonl",
        render: |md, text, _| crate::benches::nvtx::write(md, text),
    },
    Section {
        // The `#[auto]` tables (and a new docs/auto-placement.svg when there is a sweep).
        file: "placement.jsonl",
        render: crate::benches::placement_auto::write,
    },
    Section {
        // The 2-GPU machine's run (`.gpu/run.sh multigpu`).
        file: "multigpu.jsonl",
        render: |md, text, _| crate::benches::multigpu::write(md, text),
    },
    Section {
        file: "multigpu.log",
        render: |md, text, _| crate::benches::multigpu::write_tests(md, text),
    },
    Section {
        // TPC-H against DuckDB and PyTorch (`.gpu/run.sh tpch`).
        file: "tpch.jsonl",
        render: |md, text, _| crate::benches::tpch::write(md, text),
    },
    Section {
        // The hot tier against PyTorch (`.gpu/run.sh features`).
        file: "features.jsonl",
        render: |md, text, _| crate::benches::features::write(md, text),
    },
    Section {
        // The hot tier at other row widths, run alone (`BERTH_FEATURES_MAIN=0 .gpu/run.sh
        // features`, its `features.jsonl` recorded under this name).
        file: "features-widths.jsonl",
        render: |md, text, _| crate::benches::features::write_widths(md, text),
    },
    Section {
        // A drifting hot set, run alone (`BERTH_FEATURES_MAIN=0 .gpu/run.sh features` with
        // the other steps off, its `features.jsonl` recorded under this name).
        file: "features-drift.jsonl",
        render: |md, text, _| crate::benches::features::write_drift(md, text),
    },
    Section {
        // GEMM and attention on tensor cores against cuBLAS and PyTorch (`.gpu/run.sh tensor`).
        file: "tensor.log",
        render: |md, text, _| crate::benches::tensor::write(md, text),
    },
];

/// The heading of the targeted-run section of `BENCHMARKS.md`.
const TARGETED_HEADING: &str = "## Targeted run";

/// Where the raw lines of the recorded runs live, relative to the workspace root.
const RESULTS: &str = "bench/results";

/// What one run wrote: its files by name (empty when absent).
struct Run {
    dir: PathBuf,
}

impl Run {
    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    fn machine(&self) -> Result<String> {
        let machine = self.read("machine.txt");
        if machine.is_empty() {
            return Err(format!(
                "{} has no machine.txt: is it the output of .gpu/run.sh?",
                self.dir.display()
            )
            .into());
        }
        Ok(machine)
    }
}

/// The value of a `key: value` line of `machine.txt`.
fn field<'a>(machine: &'a str, key: &str) -> &'a str {
    machine
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or("unknown")
}

pub fn run(dir: PathBuf) -> Result {
    let run = Run { dir };
    let machine = run.machine()?;
    let root = workspace_root();
    // The soak and compute-sanitizer results: RELIABILITY.md.
    let reliability = crate::reliability::record(&run.dir, &machine)?;
    let results = root.join(RESULTS);
    // Rendering again from the recorded raw lines: keep them, and the targeted run's.
    let rerender = same_dir(&run.dir, &results);

    // The calibration kept in docs/ is the H200's: another card's is left in the run.
    let costs = run.read("link-costs.json");
    let h200 = serde_json::from_str::<serde_json::Value>(&costs)
        .is_ok_and(|v| v["device"].as_str().is_some_and(|d| d.contains("H200")));
    if h200 {
        std::fs::create_dir_all(root.join("docs"))?;
        std::fs::write(root.join("docs/link-costs-h200.json"), &costs)?;
        eprintln!(
            "wrote docs/link-costs-h200.json (use it with BERTH_LINK_COSTS=docs/link-costs-h200.json)"
        );
    } else if !costs.trim().is_empty() {
        eprintln!("link-costs.json is not the H200's: docs/link-costs-h200.json left as it is");
    }

    if !run.read("bench.jsonl").trim().is_empty() {
        let md = full(&run, &machine, &root)?;
        std::fs::write(root.join("BENCHMARKS.md"), md)?;
        let targeted_dir = results.join("targeted");
        if !rerender {
            save_raw(&run, &machine, FULL, &results)?;
            drop_superseded(&run, &targeted_dir)?;
        }
        eprintln!("wrote BENCHMARKS.md and the raw lines under {RESULTS}/");
        if targeted_dir.join("machine.txt").exists() {
            let t = Run { dir: targeted_dir };
            targeted(&t, &t.machine()?, &root)?;
        }
    } else if TARGETED.iter().any(|s| !run.read(s.file).trim().is_empty()) {
        let targeted_dir = results.join("targeted");
        if !same_dir(&run.dir, &targeted_dir) {
            save_targeted(&run, &machine, &targeted_dir)?;
        }
        let t = Run { dir: targeted_dir };
        targeted(&t, &t.machine()?, &root)?;
    }

    let summary = run.read("summary.txt");
    let tests_log = run.read("tests.log");
    // A bench-only run (`.gpu/run.sh bench`) has a summary but no test log: keep the recorded tests.
    if !summary.is_empty() && !tests_log.trim().is_empty() {
        gpu_results(&root, &run, &machine, &summary, &tests_log)?;
    } else if !summary.is_empty() && summary.contains("PASS  tests/") {
        eprintln!(
            "{}: a test summary without tests.log (not fetched?): GPU-RESULTS.md left as it was",
            run.dir.display()
        );
    }
    let recognised = !costs.trim().is_empty()
        || !run.read("bench.jsonl").trim().is_empty()
        || TARGETED.iter().any(|s| !run.read(s.file).trim().is_empty())
        || !tests_log.trim().is_empty();
    if !recognised && !reliability {
        return Err(format!(
            "nothing to record in {}: no bench.jsonl, no targeted benchmark's lines, no \
             tests.log, no soak or sanitizer results",
            run.dir.display()
        )
        .into());
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Copies a run's `machine.txt` and raw lines into `to`, removing the raw lines of benchmarks
/// this run did not measure, so `to` holds exactly the run the summary shows.
fn save_raw(run: &Run, machine: &str, sections: &[Section], to: &Path) -> Result {
    std::fs::create_dir_all(to)?;
    std::fs::write(to.join("machine.txt"), machine)?;
    for s in sections {
        let text = run.read(s.file);
        let path = to.join(s.file);
        if !text.trim().is_empty() {
            std::fs::write(path, text)?;
        } else if path.exists() {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

/// Removes from the targeted results in `dir` the sections a full run measured again; the
/// others (benchmarks the full run does not include: launch chains, first launch, NVTX, the
/// 2-GPU machine's) stay, with the run they came from. The folder goes when nothing is left.
fn drop_superseded(full: &Run, dir: &Path) -> Result {
    if !dir.exists() {
        return Ok(());
    }
    for s in TARGETED {
        if !full.read(s.file).trim().is_empty() {
            for f in [dir.join(s.file), dir.join(section_machine(s.file))] {
                if f.exists() {
                    std::fs::remove_file(f)?;
                }
            }
        }
    }
    if !TARGETED.iter().any(|s| dir.join(s.file).exists()) {
        std::fs::remove_dir_all(dir)?;
    }
    Ok(())
}

/// Adds a targeted run's raw lines to `to`, section by section: a section this run measured
/// replaces the earlier one (with this run's machine and date beside it, `<section>.machine.txt`),
/// the others stay as they were recorded, so the targeted part of `BENCHMARKS.md` shows the
/// latest measurement of every benchmark run since the full run.
///
/// The multi-GPU sections come only from a machine with two GPUs or more: a one-GPU machine's
/// `multigpu` run (its two-device tests skipped, no peer or all-reduce figures) would replace
/// the 2-GPU machine's, so it is left out, with a note.
fn save_targeted(run: &Run, machine: &str, to: &Path) -> Result {
    std::fs::create_dir_all(to)?;
    std::fs::write(to.join("machine.txt"), machine)?;
    let gpus = machine.lines().filter(|l| l.starts_with("gpu:")).count();
    for s in TARGETED {
        let text = run.read(s.file);
        if gpus < 2 && s.file.starts_with("multigpu") {
            if !text.trim().is_empty() {
                eprintln!(
                    "not recorded: {} comes from a machine with {gpus} GPU(s); the multi-GPU \
                     section keeps the 2-GPU machine's run (keep one-GPU diagnostics under \
                     {RESULTS}/diagnostics/)",
                    s.file
                );
            }
            continue;
        }
        if !text.trim().is_empty() {
            std::fs::write(to.join(s.file), text)?;
            std::fs::write(to.join(section_machine(s.file)), machine)?;
        }
    }
    // The multi-GPU run's machine details, kept raw beside its sections.
    if gpus >= 2 {
        for file in MULTIGPU_RAW {
            let text = run.read(file);
            if !text.trim().is_empty() {
                std::fs::write(to.join(file), text)?;
            }
        }
    }
    Ok(())
}

/// Files of a multi-GPU run kept as they came: the GPUs' topology (`nvidia-smi topo -m`) and
/// NCCL's account of both sides' communicators.
const MULTIGPU_RAW: &[&str] = &["topology.txt", "nccl-init.log"];

/// The file beside a targeted section's raw lines that names the run they came from.
fn section_machine(file: &str) -> String {
    format!("{}.machine.txt", file.trim_end_matches(".jsonl"))
}

/// Renders each section present in the run, each followed by the link to its raw lines.
fn sections(md: &mut String, run: &Run, sections: &[Section], raw: &str, root: &Path) -> Result {
    for s in sections {
        let text = run.read(s.file);
        if text.trim().is_empty() {
            continue;
        }
        (s.render)(md, &text, root)?;
        let path = format!("{raw}/{}", s.file);
        writeln!(md, "\nRaw lines: [`{path}`]({path}).")?;
    }
    Ok(())
}

/// `BENCHMARKS.md` for a full run: what was compared and how, the machine, the command, the
/// contents, then the sections.
fn full(run: &Run, machine: &str, root: &Path) -> Result<String> {
    let mut body = String::new();
    sections(&mut body, run, FULL, RESULTS, root)?;

    let mut md = String::new();
    writeln!(md, "# Benchmarks\n")?;
    writeln!(
        md,
        "berth against CUDA C++ doing the same work (`bench/<name>/reference.cu`, `nvcc -O3 -arch=sm_90`), both \
         built and run on the GPU machine **in the same run**, so a ratio berth / nvcc compares \
         the code, not machines or sessions; 1 is parity. Each section says how its figures were \
         taken. Every result was checked against a host computation (`bad` = mismatches).\n"
    )?;
    writeln!(
        md,
        "**Run**: {}, commit `{}`.\n",
        field(machine, "date"),
        field(machine, "commit")
    )?;
    writeln!(md, "**Machine**:\n\n```\n{machine}```\n")?;
    writeln!(
        md,
        "**Command**: `cargo xtask bench` stages the benchmarks and the CUDA C++ references in \
         `.gpu/`; `.gpu/run.sh bench` runs them on the GPU machine (nvcc compiles the references \
         there) and writes one JSON line per measurement; `cargo xtask record OUT` writes this \
         file and copies those lines to [`{RESULTS}/`]({RESULTS}/).\n"
    )?;
    writeln!(md, "**Contents**:\n")?;
    for heading in body.lines().filter_map(|l| l.strip_prefix("## ")) {
        writeln!(md, "- [{heading}](#{})", anchor(heading))?;
    }
    md.push_str(&body);
    Ok(md)
}

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_` kept, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// A run of some benchmarks only (no `bench.jsonl`): its figures go into their own section at
/// the end of `BENCHMARKS.md`, replacing an earlier targeted run's, so the full run's tables
/// stay as measured.
fn targeted(run: &Run, machine: &str, root: &Path) -> Result {
    let path = root.join("BENCHMARKS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(path, with_targeted(&old, run, machine, root)?)?;
    eprintln!("wrote the targeted run into BENCHMARKS.md");
    Ok(())
}

/// `old` (a `BENCHMARKS.md`) with its targeted-run section replaced by this run's.
fn with_targeted(old: &str, run: &Run, machine: &str, root: &Path) -> Result<String> {
    let mut md = match old.find(TARGETED_HEADING) {
        Some(i) => old[..i].trim_end().to_owned(),
        None => old.trim_end().to_owned(),
    };
    // The sections first: the heading names the latest run among them.
    let mut sections = String::new();
    let mut latest = String::new();
    for s in TARGETED {
        let text = run.read(s.file);
        if text.trim().is_empty() {
            continue;
        }
        let from = run.read(&section_machine(s.file));
        let from = if from.is_empty() { machine } else { &from };
        // ISO dates order as strings.
        if latest.is_empty() || field(from, "date") > field(&latest, "date") {
            latest = from.to_owned();
        }
        let md = &mut sections;
        let mut part = String::new();
        (s.render)(&mut part, &text, root)?;
        let part = part.replacen("\n## ", "\n### ", 1);
        // The run's date, commit and GPU under the section's heading: sections of different
        // runs may come from different GPUs.
        let gpu = field(from, "gpu")
            .split(',')
            .next()
            .unwrap_or_default()
            .trim();
        let stamp = format!(
            "\n\nMeasured {}, commit `{}`, on {}.",
            field(from, "date"),
            field(from, "commit"),
            if gpu.is_empty() { "unknown" } else { gpu }
        );
        match part.trim_start_matches('\n').find('\n') {
            Some(end) => {
                let lead = part.len() - part.trim_start_matches('\n').len();
                md.push_str(&part[..lead + end]);
                md.push_str(&stamp);
                md.push_str(&part[lead + end..]);
            }
            None => md.push_str(&part),
        }
        let raw = format!("{RESULTS}/targeted/{}", s.file);
        writeln!(md, "\nRaw lines: [`{raw}`]({raw}).")?;
    }
    if sections.is_empty() {
        return Ok(md + "\n");
    }
    writeln!(
        md,
        "\n\n{TARGETED_HEADING}s: latest {}\n\nBenchmarks measured by shorter device runs, same \
         conventions: berth and CUDA C++ in the same run. Each section names the run it comes \
         from; a full run replaces the sections it measures again. The latest of these runs' \
         machine:\n\n```\n{latest}```",
        field(&latest, "date")
    )?;
    md.push_str(&sections);
    Ok(md)
}

/// Where the latest GPU test run's files are kept (its log, summary and machine), relative to
/// the workspace root; `GPU-RESULTS.md` is rendered from them.
const GPU_TESTS: &str = "bench/results/gpu-tests";

/// Keeps a test run's `machine.txt`, `summary.txt` and `tests.log` under [`GPU_TESTS`] (unless
/// they are read from there) and writes `GPU-RESULTS.md` from them.
fn gpu_results(root: &Path, run: &Run, machine: &str, summary: &str, tests_log: &str) -> Result {
    let kept = root.join(GPU_TESTS);
    if !same_dir(&run.dir, &kept) {
        std::fs::create_dir_all(&kept)?;
        std::fs::write(kept.join("machine.txt"), machine)?;
        std::fs::write(kept.join("summary.txt"), summary)?;
        std::fs::write(kept.join("tests.log"), tests_log)?;
    }
    std::fs::write(
        root.join("GPU-RESULTS.md"),
        gpu_results_md(machine, summary, tests_log)?,
    )?;
    eprintln!("wrote GPU-RESULTS.md and the run's log under {GPU_TESTS}/");
    Ok(())
}

/// The counts of a test binary's own `test result:` line (its last in the log's section: the
/// lines before it may be a child process's).
#[derive(Default)]
struct Counts {
    passed: String,
    failed: String,
    ignored: String,
}

/// Each test binary's counts in a `tests.log` (sections opened by `=== test binary: NAME`).
fn test_counts(tests_log: &str) -> Vec<(String, Counts)> {
    let mut out: Vec<(String, Counts)> = Vec::new();
    for line in tests_log.lines() {
        if let Some(name) = line.strip_prefix("=== test binary: ") {
            out.push((name.trim().to_owned(), Counts::default()));
        } else if let (Some(rest), Some((_, counts))) =
            (line.strip_prefix("test result: "), out.last_mut())
        {
            let count = |what: &str| {
                rest.split(';')
                    .find_map(|part| part.trim().strip_suffix(what))
                    .and_then(|n| n.trim().rsplit(' ').next())
                    .unwrap_or("?")
                    .to_owned()
            };
            *counts = Counts {
                passed: count(" passed"),
                failed: count(" failed"),
                ignored: count(" ignored"),
            };
        }
    }
    out
}

/// `GPU-RESULTS.md`: the status of the latest GPU test run, one row per test binary and
/// example, stamped with the run's date and commit; the log stays under [`GPU_TESTS`].
fn gpu_results_md(machine: &str, summary: &str, tests_log: &str) -> Result<String> {
    let status = |label: &str| {
        summary
            .lines()
            .find_map(|l| {
                let (result, rest) = l.split_once("  ")?;
                (rest.trim() == label).then(|| result.trim().to_owned())
            })
            .unwrap_or_else(|| "not run".to_owned())
    };
    let mut md = String::new();
    writeln!(
        md,
        "# GPU results
"
    )?;
    writeln!(
        md,
        "The latest run of the GPU tests and the examples on the GPU machine (`.gpu/run.sh tests`, \
         staged by `cargo xtask gpu`, recorded by `cargo xtask record`): {}, commit `{}`, {}. \
         The run's log, summary and machine: [`{GPU_TESTS}/`]({GPU_TESTS}/). What the benchmarks \
         measured: [BENCHMARKS.md](BENCHMARKS.md); the soak and compute-sanitizer runs: \
         [RELIABILITY.md](RELIABILITY.md).\n",
        field(machine, "date"),
        field(machine, "commit"),
        field(machine, "gpu")
    )?;
    let counts = test_counts(tests_log);
    let (pass, all) = (
        summary.lines().filter(|l| l.starts_with("PASS")).count(),
        summary.lines().filter(|l| !l.trim().is_empty()).count(),
    );
    writeln!(md, "{pass} of {all} pass.\n")?;
    writeln!(md, "| test binary | result | passed | failed | ignored |")?;
    writeln!(md, "|---|---|---:|---:|---:|")?;
    for (name, c) in &counts {
        writeln!(
            md,
            "| `tests/{name}` | {} | {} | {} | {} |",
            status(&format!("tests/{name}")),
            c.passed,
            c.failed,
            c.ignored
        )?;
    }
    writeln!(md, "\n| example | result |")?;
    writeln!(md, "|---|---|")?;
    for line in summary.lines() {
        if let Some((result, rest)) = line.split_once("  ")
            && let Some(example) = rest.trim().strip_prefix("example ")
        {
            writeln!(md, "| `{example}` | {} |", result.trim())?;
        }
    }
    for line in summary.lines() {
        if let Some((_, rest)) = line.split_once("  ")
            && !rest.starts_with("tests/")
            && !rest.starts_with("example ")
        {
            writeln!(md, "\nAlso: {line}")?;
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_github() {
        assert_eq!(
            anchor("Signals: host ↔ persistent kernel"),
            "signals-host--persistent-kernel"
        );
        assert_eq!(anchor("`#[auto]` vs copy_then"), "auto-vs-copy_then");
    }

    /// A full run replaces the targeted sections it measured again and keeps the others.
    #[test]
    fn a_full_run_keeps_the_targeted_sections_it_did_not_measure() -> Result {
        let base = std::env::temp_dir().join(format!("berth-supersede-{}", std::process::id()));
        let (full_dir, targeted) = (base.join("full"), base.join("targeted"));
        std::fs::create_dir_all(&full_dir)?;
        std::fs::create_dir_all(&targeted)?;
        std::fs::write(full_dir.join("compute.jsonl"), "{}\n")?;
        for f in ["compute.jsonl", "launch.jsonl"] {
            std::fs::write(targeted.join(f), "{}\n")?;
            std::fs::write(targeted.join(section_machine(f)), "date: x\n")?;
        }
        std::fs::write(targeted.join("machine.txt"), "date: x\n")?;
        drop_superseded(
            &Run {
                dir: full_dir.clone(),
            },
            &targeted,
        )?;
        assert!(!targeted.join("compute.jsonl").exists());
        assert!(!targeted.join(section_machine("compute.jsonl")).exists());
        assert!(targeted.join("launch.jsonl").exists());
        assert!(targeted.join(section_machine("launch.jsonl")).exists());
        // A full run that measured everything left leaves no targeted folder.
        std::fs::write(full_dir.join("launch.jsonl"), "{}\n")?;
        drop_superseded(&Run { dir: full_dir }, &targeted)?;
        assert!(!targeted.exists());
        std::fs::remove_dir_all(&base)?;
        Ok(())
    }

    /// The committed `BENCHMARKS.md` is what `record` renders from the committed raw lines, so
    /// a change to a renderer comes with the regenerated file
    /// (`cargo xtask record bench/results`).
    #[test]
    fn a_one_gpu_multigpu_run_does_not_replace_the_two_gpu_one() -> Result {
        let base = std::env::temp_dir().join(format!("berth-one-gpu-{}", std::process::id()));
        let (run_dir, to) = (base.join("run"), base.join("targeted"));
        std::fs::create_dir_all(&run_dir)?;
        std::fs::create_dir_all(&to)?;
        std::fs::write(to.join("multigpu.jsonl"), "two GPUs\n")?;
        std::fs::write(run_dir.join("multigpu.jsonl"), "one GPU\n")?;
        std::fs::write(run_dir.join("multigpu.log"), "skipped\n")?;
        std::fs::write(run_dir.join("launch.jsonl"), "{}\n")?;
        std::fs::write(run_dir.join("topology.txt"), "GPU0 GPU1\n")?;
        let one = "date: d\ncommit: c\ngpu: NVIDIA H200\n";
        save_targeted(
            &Run {
                dir: run_dir.clone(),
            },
            one,
            &to,
        )?;
        assert_eq!(
            std::fs::read_to_string(to.join("multigpu.jsonl"))?,
            "two GPUs\n"
        );
        assert!(!to.join("multigpu.log").exists());
        assert!(!to.join("topology.txt").exists());
        assert!(
            to.join("launch.jsonl").exists(),
            "the other sections are recorded"
        );
        let two = "date: d\ncommit: c\ngpu: NVIDIA H200\ngpu: NVIDIA H200\n";
        save_targeted(&Run { dir: run_dir }, two, &to)?;
        assert_eq!(
            std::fs::read_to_string(to.join("multigpu.jsonl"))?,
            "one GPU\n"
        );
        assert_eq!(
            std::fs::read_to_string(to.join("topology.txt"))?,
            "GPU0 GPU1\n",
            "the 2-GPU run's topology is kept"
        );
        std::fs::remove_dir_all(&base)?;
        Ok(())
    }

    /// The committed `GPU-RESULTS.md` is what `record` renders from the kept test run.
    #[test]
    fn gpu_results_md_is_rendered_from_the_kept_run() -> Result {
        let root = workspace_root();
        let run = Run {
            dir: root.join(GPU_TESTS),
        };
        let md = gpu_results_md(
            &run.machine()?,
            &run.read("summary.txt"),
            &run.read("tests.log"),
        )?;
        assert!(
            md == std::fs::read_to_string(root.join("GPU-RESULTS.md"))?,
            "GPU-RESULTS.md is not what `cargo xtask record {GPU_TESTS}` renders: run it"
        );
        Ok(())
    }

    /// A `tpch` run (its lines only) is recorded as a targeted section: the TPC-H tables,
    /// one heading down, stamped with the run, and the link to its raw lines.
    #[test]
    fn a_tpch_run_is_a_targeted_section() -> Result {
        let dir = std::env::temp_dir().join(format!("berth-tpch-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let line = r#"{"answer":["1193053.2253"],"bits":["ShipDate:12"],"bytes_moved":1684900,"checked":true,"first_ms":93.8,"gbps":0.02,"mode":"raw","placement":"raw","ms":74.1,"query":"q6","raw_bytes":1684900,"rows":60175,"sf":0.01}"#;
        std::fs::write(dir.join("tpch.jsonl"), format!("{line}\n"))?;
        let machine = "date: 2030-01-01\ncommit: abc\ngpu: NVIDIA H200\n";
        let run = Run { dir: dir.clone() };
        let md = with_targeted("# Benchmarks\n", &run, machine, &dir)?;
        std::fs::remove_dir_all(&dir)?;
        assert!(
            md.contains(
                "\n### TPC-H over host-resident columns\n\nMeasured 2030-01-01, commit `abc`, on NVIDIA H200."
            ),
            "{md}"
        );
        assert!(md.contains("| 0.01 | Q6 | 74.10 |"), "{md}");
        assert!(
            md.contains("Raw lines: [`bench/results/targeted/tpch.jsonl`]"),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn a_binarys_counts_are_its_own_not_its_childs() {
        let log = "=== test binary: gpu\nrunning 2 tests\n--- child `x` ---\n\
                   test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out\n\
                   test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n\
                   === test binary: queue\ntest result: FAILED. 3 passed; 1 failed; 0 ignored\n";
        let c = test_counts(log);
        let got: Vec<_> = c
            .iter()
            .map(|(n, c)| {
                (
                    n.as_str(),
                    c.passed.as_str(),
                    c.failed.as_str(),
                    c.ignored.as_str(),
                )
            })
            .collect();
        assert_eq!(got, [("gpu", "2", "0", "1"), ("queue", "3", "1", "0")]);
    }

    #[test]
    fn benchmarks_md_is_rendered_from_bench_results() -> Result {
        let root = workspace_root();
        let committed = std::fs::read_to_string(root.join("BENCHMARKS.md"))?;
        // Plots go to a scratch folder: the test compares text only.
        let scratch = std::env::temp_dir().join(format!("berth-record-{}", std::process::id()));
        let full_run = Run {
            dir: root.join(RESULTS),
        };
        let mut md = full(&full_run, &full_run.machine()?, &scratch)?;
        let targeted_run = Run {
            dir: root.join(RESULTS).join("targeted"),
        };
        if let Ok(machine) = targeted_run.machine() {
            md = with_targeted(&md, &targeted_run, &machine, &scratch)?;
        }
        let _ = std::fs::remove_dir_all(&scratch);
        assert!(
            md == committed,
            "BENCHMARKS.md is not what `cargo xtask record bench/results` renders: run it"
        );
        Ok(())
    }
}
