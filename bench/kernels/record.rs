//! The memory-bound kernels' section of `BENCHMARKS.md` (saxpy and block_sum against
//! `bench/kernels/reference.cu`) and its launch-overhead table, from `bench.jsonl`.

use crate::stats::median;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Throughput of one implementation of one kernel at one size, over rounds.
#[derive(Default)]
struct Cell {
    gbps: Vec<f64>,
    ms: Vec<f64>,
    bad: u64,
}

/// Launch-overhead lines by (bench, impl): medians, p99s, wrong results.
type Launches = BTreeMap<(String, String), (Vec<f64>, Vec<f64>, u64)>;

pub fn write(md: &mut String, bench: &str) -> Result {
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
    writeln!(md, "\n## Memory-bound kernels: saxpy and block_sum\n")?;
    writeln!(
        md,
        "berth's kernels against the same algorithms in CUDA C++ (`bench/kernels/reference.cu`, \
         `nvcc -O3 -arch=sm_90`). Each figure is the median of 20 launches timed one by one with \
         CUDA events after a warm-up; each implementation ran twice, interleaved, and the table \
         shows the median of the two rounds.\n"
    )?;
    writeln!(
        md,
        "| kernel | n | berth GB/s | nvcc GB/s | berth ms | nvcc ms | ratio berth/nvcc | target | bad |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---|---:|")?;
    let keys: BTreeSet<(String, u64)> = cells.keys().map(|(k, n, _)| (k.clone(), *n)).collect();
    for (k, n) in keys {
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
        write_launches(md, &launches)?;
    }
    Ok(())
}

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
