//! `cargo xtask record DIR`: write what a GPU run produced into the repository.
//!
//! Reads `machine.txt`, `summary.txt`, `tests.log` and `bench.jsonl` (and the other parts'
//! `*.jsonl`, `launch.jsonl` and `firstlaunch.jsonl` among them) from `DIR` (the files
//! `.gpu/run.sh` wrote to `$OUT`) and writes `BENCHMARKS.md` (ratios berth / nvcc, same run)
//! and `GPU-RESULTS.md` (what the GPU tests reported); `soak.jsonl` and `sanitize.jsonl` go
//! into `RELIABILITY.md` (`reliability.rs`). A GPU result that is not recorded did not happen.

use crate::{Result, workspace_root};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Throughput of one implementation of one kernel at one size, over rounds.
#[derive(Default)]
struct Cell {
    gbps: Vec<f64>,
    ms: Vec<f64>,
    bad: u64,
}

/// The median (the mean of the middle two for an even count; NaN for none).
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn run(dir: PathBuf) -> Result {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let machine = read("machine.txt");
    let summary = read("summary.txt");
    let tests_log = read("tests.log");
    let bench = read("bench.jsonl");
    if machine.is_empty() {
        return Err(format!(
            "{} has no machine.txt: is it the output of .gpu/run.sh?",
            dir.display()
        )
        .into());
    }
    let date = machine
        .lines()
        .find_map(|l| l.strip_prefix("date: "))
        .unwrap_or("unknown date")
        .to_owned();
    let root = workspace_root();
    // The soak and compute-sanitizer results: RELIABILITY.md.
    crate::reliability::record(&dir, &machine)?;
    let costs = read("link-costs.json");
    if !costs.trim().is_empty() {
        std::fs::create_dir_all(root.join("docs"))?;
        std::fs::write(root.join("docs/link-costs-h200.json"), &costs)?;
        eprintln!(
            "wrote docs/link-costs-h200.json (use it with BERTH_LINK_COSTS=docs/link-costs-h200.json)"
        );
    }

    if !bench.trim().is_empty() {
        let mut cells: BTreeMap<(String, u64, String), Cell> = BTreeMap::new();
        let mut launches = Launches::new();
        for line in bench.lines().filter(|l| l.starts_with('{')) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            if let Some(b) = v["bench"].as_str() {
                let e = launches
                    .entry((b.to_owned(), v["impl"].as_str().unwrap_or("?").to_owned()))
                    .or_default();
                e.0.push(v["median_us"].as_f64().unwrap_or(f64::NAN));
                e.1.push(v["p99_us"].as_f64().unwrap_or(f64::NAN));
                e.2 += v["bad"].as_u64().unwrap_or(1);
                continue;
            }
            let key = (
                v["kernel"].as_str().unwrap_or("?").to_owned(),
                v["n"].as_u64().unwrap_or(0),
                v["impl"].as_str().unwrap_or("?").to_owned(),
            );
            let c = cells.entry(key).or_default();
            c.gbps.push(v["gbps"].as_f64().unwrap_or(f64::NAN));
            c.ms.push(v["median_ms"].as_f64().unwrap_or(f64::NAN));
            c.bad += v["bad"].as_u64().unwrap_or(1);
        }
        let mut md = String::new();
        writeln!(md, "# Benchmarks\n")?;
        writeln!(
            md,
            "berth's Rust-built kernels against the same algorithms in CUDA C++ (`bench/reference.cu`, \
             `nvcc -O3 -arch=sm_90`), compiled and run on the GPU machine **in the same run**. \
             Each figure is the median of 20 launches timed one by one with CUDA events after a \
             warm-up; each implementation ran twice, interleaved, and the table shows the median \
             of the two rounds. Every result was checked against the host (`bad` = mismatches).\n"
        )?;
        writeln!(
            md,
            "Run: {date}, by `cargo xtask bench` then the device run of `.gpu/run.sh bench`, recorded with `cargo xtask record`.\n"
        )?;
        writeln!(md, "```\n{}```\n", machine)?;
        writeln!(
            md,
            "| kernel | n | berth GB/s | nvcc GB/s | berth ms | nvcc ms | ratio berth/nvcc | target | bad |"
        )?;
        writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---|---:|")?;
        let keys: Vec<(String, u64)> = cells.keys().map(|(k, n, _)| (k.clone(), *n)).collect();
        let mut seen = std::collections::BTreeSet::new();
        for (k, n) in keys {
            if !seen.insert((k.clone(), n)) {
                continue;
            }
            let mut get = |i: &str| {
                cells
                    .remove(&(k.clone(), n, i.to_owned()))
                    .unwrap_or_default()
            };
            let (b, c) = (get("berth"), get("nvcc"));
            let (bg, cg) = (median(&b.gbps), median(&c.gbps));
            let ratio = bg / cg;
            let verdict = if ratio >= 0.97 {
                "≥ 0.97 ✓"
            } else {
                "≥ 0.97 ✗"
            };
            writeln!(
                md,
                "| {k} | {n} | {bg:.1} | {cg:.1} | {:.4} | {:.4} | **{ratio:.3}** | {verdict} | {} |",
                median(&b.ms),
                median(&c.ms),
                b.bad + c.bad
            )?;
        }
        writeln!(
            md,
            "\nGB/s counts 12 bytes per element for saxpy (read x, read y, write y) and 4 for block_sum."
        )?;
        if !launches.is_empty() {
            write_launches(&mut md, &launches)?;
        }
        writeln!(md, "\nRaw lines (`bench.jsonl`):\n\n```\n{}```", bench)?;
        let compute = read("compute.jsonl");
        if !compute.trim().is_empty() {
            crate::record_compute::write(&mut md, &compute)?;
        }
        let placement = read("placement.jsonl");
        if !placement.trim().is_empty() {
            crate::record_placement::write(&mut md, &placement)?;
        }
        let signals = read("signals.jsonl");
        if !signals.trim().is_empty() {
            crate::record_signals::write(&mut md, &signals)?;
        }
        let pipeline = read("pipeline.jsonl");
        if !pipeline.trim().is_empty() {
            crate::record_pipeline::write(&mut md, &pipeline, &root)?;
        }
        let launch = read("launch.jsonl");
        if !launch.trim().is_empty() {
            crate::record_launch::write(&mut md, &launch)?;
        }
        let first_launch = read("firstlaunch.jsonl");
        if !first_launch.trim().is_empty() {
            crate::record_first_launch::write(&mut md, &first_launch)?;
        }
        std::fs::write(root.join("BENCHMARKS.md"), md)?;
        eprintln!("wrote BENCHMARKS.md");
    }

    if bench.trim().is_empty() {
        let parts = [
            read("signals.jsonl"),
            read("pipeline.jsonl"),
            read("placement.jsonl"),
            read("compute.jsonl"),
            read("launch.jsonl"),
            read("firstlaunch.jsonl"),
        ];
        if parts.iter().any(|p| !p.trim().is_empty()) {
            targeted(&root, &date, &machine, &parts)?;
        }
    }

    // A bench-only run (`.gpu/run.sh bench`) has a summary but no test log: keep the recorded tests.
    if !summary.is_empty() && !tests_log.trim().is_empty() {
        let mut md = String::new();
        writeln!(md, "# GPU results\n")?;
        writeln!(
            md,
            "The GPU tests and examples, run on the GPU machine with `.gpu/run.sh` (staged by `cargo xtask gpu`), recorded with `cargo xtask record`. Run: {date}.\n"
        )?;
        writeln!(md, "```\n{machine}```\n")?;
        writeln!(md, "## Summary\n\n```\n{summary}```\n")?;
        writeln!(md, "## Test output\n\n```")?;
        for line in tests_log.lines() {
            let keep = [
                "===",
                "test ",
                "running",
                "quickstart",
                "reduction",
                "stream:",
                "reported:",
                "recovered:",
                "Gpu::recover",
                "new Gpu after",
                "--- child",
                "automatic plan",
                "4 MiB budget",
                "pool after",
                "write-only",
                "embedding:",
                "worker:",
                "progress:",
            ];
            if keep.iter().any(|k| line.starts_with(k)) {
                writeln!(md, "{line}")?;
            }
        }
        writeln!(md, "```")?;
        std::fs::write(root.join("GPU-RESULTS.md"), md)?;
        eprintln!("wrote GPU-RESULTS.md");
    }
    Ok(())
}

/// Launch-overhead lines of `bench.jsonl` by (bench, impl): medians, p99s, wrong results.
type Launches = BTreeMap<(String, String), (Vec<f64>, Vec<f64>, u64)>;

/// The launch-overhead table: one small saxpy launched and waited for, host time, berth
/// against the CUDA C++ launch + `cudaStreamSynchronize` (medians over the runs' lines).
fn write_launches(md: &mut String, launches: &Launches) -> Result {
    let get = |b: &str, i: &str| launches.get(&(b.to_owned(), i.to_owned()));
    let med = |b: &str, i: &str, p99: bool| {
        get(b, i).map_or(f64::NAN, |e| median(if p99 { &e.1 } else { &e.0 }))
    };
    let bad: u64 = launches.values().map(|e| e.2).sum();
    writeln!(
        md,
        "\n### Launch overhead (saxpy over 256 elements, one block; host time, µs)\n"
    )?;
    writeln!(md, "| measure | berth | nvcc | ratio berth/nvcc |")?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for (label, p99) in [
        ("launch + wait, median", false),
        ("launch + wait, p99", true),
    ] {
        let (b, c) = (
            med("launch_wait", "berth", p99),
            med("launch_wait", "nvcc", p99),
        );
        writeln!(md, "| {label} | {b:.2} | {c:.2} | **{:.2}** |", b / c)?;
    }
    writeln!(
        md,
        "| launch queued without waiting, per launch | — | {:.2} | |",
        med("launch_enqueue", "nvcc", false)
    )?;
    writeln!(
        md,
        "\nA berth launch on its own returns a guard that waits when dropped; the last row is what \
         CUDA C++ gets by queueing launches without waiting, which berth does inside a scope \
         (`gpu.scope(|s| ..)`, measured under \"Launch queue\"). Results checked: {bad} wrong."
    )?;
    Ok(())
}

/// The heading of the targeted-run section of `BENCHMARKS.md`.
const TARGETED: &str = "## Targeted run";

/// A run of some benchmarks only (no `bench.jsonl`): its figures go into their own section at
/// the end of `BENCHMARKS.md`, replacing an earlier targeted run's, so the full run's tables
/// stay as measured.
fn targeted(
    root: &std::path::Path,
    date: &str,
    machine: &str,
    [signals, pipeline, placement, compute, launch, first_launch]: &[String; 6],
) -> Result {
    let path = root.join("BENCHMARKS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut md = match old.find(TARGETED) {
        Some(i) => old[..i].trim_end().to_owned(),
        None => old.trim_end().to_owned(),
    };
    writeln!(
        md,
        "\n\n{TARGETED}: {date}\n\nA shorter device run after the full one above (benchmarks added or changed since), same \
         conventions: berth and CUDA C++ in the same run.\n\n```\n{machine}```"
    )?;
    if !signals.trim().is_empty() {
        let mut part = String::new();
        crate::record_signals::write(&mut part, signals)?;
        md.push_str(&part.replacen("\n## ", "\n### ", 1));
    }
    if !pipeline.trim().is_empty() {
        writeln!(
            md,
            "\n### Overlap workload (4 GiB in + 4 GiB out)\n\n| run | input GB/s |\n|---|---:|"
        )?;
        for line in pipeline.lines().filter(|l| l.starts_with('{')) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let what = match (v["impl"].as_str(), v["bench"].as_str()) {
                (Some("berth"), Some("bidirectional_copies")) => {
                    "berth: copies only, both directions at once on two streams".to_owned()
                }
                (Some("nvcc"), Some("bidirectional_copies")) => {
                    "CUDA C++: the same copies (`cudaMemcpyAsync`)".to_owned()
                }
                (Some("nvcc"), Some("zero_copy")) => format!(
                    "CUDA C++: zero-copy kernel, x and y in mapped host memory ({} blocks)",
                    v["blocks"]
                ),
                (i, b) => {
                    // Any other line: its name and the fields that tell its variant apart.
                    let mut label = format!("{} {}", i.unwrap_or("?"), b.unwrap_or("?"));
                    for f in ["streams", "chunk_bytes", "progress", "flags"] {
                        if !v[f].is_null() {
                            label += &format!(", {f} {}", v[f]);
                        }
                    }
                    label
                }
            };
            writeln!(
                md,
                "| {what} | {:.1} |",
                v["gbps_in"].as_f64().unwrap_or(f64::NAN)
            )?;
        }
        writeln!(md, "\nRaw lines:\n\n```\n{pipeline}```")?;
    }
    if !compute.trim().is_empty() {
        let mut part = String::new();
        crate::record_compute::write(&mut part, compute)?;
        md.push_str(&part.replacen("\n## ", "\n### ", 1));
    }
    if !launch.trim().is_empty() {
        let mut part = String::new();
        crate::record_launch::write(&mut part, launch)?;
        md.push_str(&part.replacen("\n## ", "\n### ", 1));
    }
    if !first_launch.trim().is_empty() {
        let mut part = String::new();
        crate::record_first_launch::write(&mut part, first_launch)?;
        md.push_str(&part.replacen("\n## ", "\n### ", 1));
    }
    if !placement.trim().is_empty() {
        // The `#[auto]` tables (and a new docs/auto-placement.svg when there is a sweep).
        crate::record_auto::write(&mut md, placement)?;
        writeln!(
            md,
            "\nRaw lines (`placement.jsonl`):\n\n```\n{placement}```"
        )?;
    }
    std::fs::write(path, md)?;
    eprintln!("wrote the targeted run into BENCHMARKS.md");
    Ok(())
}
