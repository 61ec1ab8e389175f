//! The NVTX section of `BENCHMARKS.md`, from `nvtx.jsonl` (run.sh's `nsys` mode):
//! `bench_launch` at n = 2^16 without a profiler, and under `nsys profile -t cuda,nvtx` with
//! berth's ranges off (`BERTH_NVTX=off`) and on — what one range costs, and what the ranges
//! add to queueing a launch.

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    writeln!(md, "\n## NVTX ranges: their cost\n")?;
    writeln!(
        md,
        "`bench_launch 65536` (`bench/launch/main.rs`) without a profiler, and under `nsys profile -t cuda,nvtx` with berth's ranges off (`BERTH_NVTX=off`) and on (docs/profiling.md): one range opened and closed (`nvtx_range`), and the host time to queue one of 1,000 dependent launches in a scope (`launch_chain_submit`, each launch opening a range; under nsys its CUDA tracing is in both columns). Medians over the rounds.\n"
    )?;
    writeln!(
        md,
        "| profiler | ranges | one range ns | queueing a launch µs | launch incl. wait µs | bad |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|---:|")?;
    for (profiler, ranges) in [("none", None), ("nsys", Some("off")), ("nsys", Some("on"))] {
        let of: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["profiler"] == profiler && ranges.is_none_or(|v| r["ranges"] == v))
            .collect();
        if of.is_empty() {
            continue;
        }
        let pick = |bench: &str, field: &str| -> f64 {
            let v: Vec<f64> = of
                .iter()
                .filter(|r| r["bench"] == bench)
                .filter_map(|r| r[field].as_f64())
                .collect();
            median(&v)
        };
        let on = of
            .iter()
            .find(|r| r["bench"] == "nvtx_range")
            .and_then(|r| r["nvtx"].as_str())
            .unwrap_or("?");
        let bad: u64 = of.iter().map(|r| r["bad"].as_u64().unwrap_or(1)).sum();
        writeln!(
            md,
            "| {profiler} | {} (recorded: {on}) | {:.1} | {:.3} | {:.3} | {bad} |",
            ranges.unwrap_or("default"),
            pick("nvtx_range", "per_range_ns"),
            pick("launch_chain_submit", "per_launch_us"),
            pick("launch_chain", "per_launch_us"),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_per_profiler_and_setting() {
        let text = "{\"impl\":\"berth\",\"bench\":\"nvtx_range\",\"nvtx\":\"off\",\"per_range_ns\":1.5,\"bad\":0,\"profiler\":\"none\",\"round\":1}\n\
{\"impl\":\"berth\",\"bench\":\"launch_chain_submit\",\"n\":65536,\"launches\":1000,\"per_launch_us\":3.2,\"bad\":0,\"profiler\":\"none\",\"round\":1}\n\
{\"impl\":\"berth\",\"bench\":\"launch_chain\",\"n\":65536,\"launches\":1000,\"per_launch_us\":3.9,\"total_ms\":3.9,\"bad\":0,\"profiler\":\"none\",\"round\":1}\n\
{\"impl\":\"berth\",\"bench\":\"nvtx_range\",\"nvtx\":\"on\",\"per_range_ns\":250.0,\"bad\":0,\"profiler\":\"nsys\",\"ranges\":\"on\",\"round\":1}\n\
{\"impl\":\"berth\",\"bench\":\"launch_chain_submit\",\"n\":65536,\"launches\":1000,\"per_launch_us\":5.5,\"bad\":0,\"profiler\":\"nsys\",\"ranges\":\"on\",\"round\":1}\n";
        let mut md = String::new();
        super::write(&mut md, text).unwrap();
        assert!(
            md.contains("| none | default (recorded: off) | 1.5 | 3.200 | 3.900 | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| nsys | on (recorded: on) | 250.0 | 5.500 |"),
            "{md}"
        );
        assert!(!md.contains("| nsys | off"), "{md}");
    }
}
