//! The signals section of `BENCHMARKS.md`, from `signals.jsonl` (`bench/signals/reference.cu` and the
//! `bench_signals` binary: the same mailbox protocol, same run, two rounds each).

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    let pick = |imp: &str, bench: &str, field: &str| {
        median(
            &rows
                .iter()
                .filter(|r| r["impl"] == imp && r["bench"] == bench)
                .filter_map(|r| r[field].as_f64())
                .collect::<Vec<_>>(),
        )
    };
    let bad: u64 = rows.iter().filter_map(|r| r["bad"].as_u64()).sum();
    let rounds = rows
        .iter()
        .filter_map(|r| r["round"].as_u64())
        .max()
        .unwrap_or(1);
    let rounds = match rounds {
        1 => "one round".to_string(),
        2 => "medians of two rounds".to_string(),
        n => format!(
            "medians of {n} rounds (runs of the benchmark one after another, two rounds each)"
        ),
    };
    writeln!(
        md,
        "\n## Signals: host ↔ persistent kernel through mapped memory\n"
    )?;
    writeln!(
        md,
        "berth (`bench/signals/main.rs`, mailboxes of 256 slots, the `square_worker` kernel) against the same protocol in CUDA C++ (`bench/signals/reference.cu`), same run, {rounds}.\n"
    )?;
    writeln!(md, "| measure | berth | nvcc | ratio berth/nvcc | target |")?;
    writeln!(md, "|---|---:|---:|---:|---|")?;
    let (bm, nm) = (
        pick("berth", "round_trip", "median_us"),
        pick("nvcc", "round_trip", "median_us"),
    );
    writeln!(
        md,
        "| mailbox round trip, median (µs) | {bm:.2} | {nm:.2} | **{:.2}** | ≤ 1.1 {} |",
        bm / nm,
        if bm / nm <= 1.1 { "✓" } else { "✗" }
    )?;
    let (bf, nf) = (
        pick("berth", "flag_round_trip", "median_us"),
        pick("nvcc", "flag_round_trip", "median_us"),
    );
    if !(bf.is_nan() && nf.is_nan()) {
        writeln!(
            md,
            "| bare flag round trip (`Signals`, `ping_pong`), median (µs) | {bf:.2} | {nf:.2} | **{:.2}** | ≤ 1.1 {} |",
            bf / nf,
            if bf / nf <= 1.1 { "✓" } else { "✗" }
        )?;
        writeln!(
            md,
            "| bare flag round trip, p99 (µs) | {:.2} | {:.2} | {:.2} | |",
            pick("berth", "flag_round_trip", "p99_us"),
            pick("nvcc", "flag_round_trip", "p99_us"),
            pick("berth", "flag_round_trip", "p99_us") / pick("nvcc", "flag_round_trip", "p99_us")
        )?;
    }
    let (bp, np) = (
        pick("berth", "round_trip", "p99_us"),
        pick("nvcc", "round_trip", "p99_us"),
    );
    writeln!(
        md,
        "| mailbox round trip, p99 (µs) | {bp:.2} | {np:.2} | {:.2} | |",
        bp / np
    )?;
    let (bt, nt) = (
        pick("berth", "mailbox_throughput", "jobs_per_s"),
        pick("nvcc", "mailbox_throughput", "jobs_per_s"),
    );
    writeln!(
        md,
        "| mailbox throughput (jobs/s, ring full) | {bt:.0} | {nt:.0} | {:.2} | |",
        bt / nt
    )?;
    writeln!(md, "\nReplies checked: {bad} wrong.")?;
    Ok(())
}
