//! The launch-queue section of `BENCHMARKS.md`, from `launch.jsonl` (`bench/launch/reference.cu` and the
//! `bench_launch` binary: 1,000 dependent launches of the same Jacobi step, same run,
//! interleaved rounds).

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    let pick = |imp: &str, bench: &str, n: u64| {
        median(
            &rows
                .iter()
                .filter(|r| r["impl"] == imp && r["bench"] == bench && r["n"] == n)
                .filter_map(|r| r["per_launch_us"].as_f64())
                .collect::<Vec<_>>(),
        )
    };
    let mut sizes: Vec<u64> = rows.iter().filter_map(|r| r["n"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let rounds = rows
        .iter()
        .filter_map(|r| r["round"].as_u64())
        .max()
        .unwrap_or(1);
    writeln!(md, "\n## Launch queue: 1,000 dependent launches\n")?;
    writeln!(
        md,
        "`jacobi(a, b)`, `jacobi(b, a)`, … (`examples/src/chain.rs`): berth queued in a `Gpu::scope` and replayed as a `Graph` (`bench/launch/main.rs`) against CUDA C++ queueing the same launches on one stream and replaying a captured CUDA graph (`bench/launch/reference.cu`), same run; host time per launch including the one wait at the end, medians of {rounds} interleaved rounds.\n"
    )?;
    writeln!(
        md,
        "| bench | n | berth µs/launch | nvcc µs/launch | ratio berth/nvcc | bad |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|")?;
    for bench in ["launch_chain", "graph_chain"] {
        for &n in &sizes {
            let (b, c) = (pick("berth", bench, n), pick("nvcc", bench, n));
            let bad: u64 = rows
                .iter()
                .filter(|r| r["bench"] == bench && r["n"] == n)
                .map(|r| r["bad"].as_u64().unwrap_or(1))
                .sum();
            writeln!(
                md,
                "| {bench} | {n} | {b:.2} | {c:.2} | **{:.2}** | {bad} |",
                b / c
            )?;
        }
    }
    let submits: Vec<String> = sizes
        .iter()
        .filter_map(|&n| {
            let s = pick("berth", "launch_chain_submit", n);
            s.is_finite().then(|| format!("{s:.2} µs at n = {n}"))
        })
        .collect();
    if !submits.is_empty() {
        writeln!(
            md,
            "\nberth's host time to queue each launch of the scope (before its one wait): {}. Where it is close to the total per launch, the host path sets the pace.",
            submits.join(", ")
        )?;
    }
    let first = sizes.first().copied().unwrap_or(0);
    let (raw, bind) = (
        pick("berth", "host_raw_launch", first),
        pick("berth", "host_bind", first),
    );
    if raw.is_finite() && bind.is_finite() {
        writeln!(
            md,
            "The same process's bare `cuLaunchKernel` of the same entry on the same stream (through cudarc, no berth code) takes {raw:.2} µs per call and `cuCtxSetCurrent` {bind:.3} µs: berth's own part of a queued launch is the submit time less these."
        )?;
    }
    Ok(())
}
