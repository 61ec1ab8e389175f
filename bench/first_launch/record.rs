//! The first-launch section of `BENCHMARKS.md`, from `firstlaunch.jsonl` (the `first_launch`
//! binary, one fresh process per line, the driver's JIT cache off: the examples crate's SASS,
//! saxpy's own PTX module (`BERTH_LOAD=ptx`) and the crate's whole PTX (`BERTH_LOAD=crate-ptx`;
//! lines recorded before kernels had modules of their own say `"module":"ptx"` for it).

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    writeln!(md, "\n## First launch: a fresh process, no JIT cache\n")?;
    writeln!(
        md,
        "`Gpu::new()`, then the first `saxpy` launch until it has finished (`bench/first_launch/main.rs`): the launch loads the SASS the build embedded (ptxas, `-O3`) for every kernel of the examples crate (module KiB: saxpy's cubin), or PTX, which the driver JIT-compiles: saxpy's own module, cut out of the crate's (`BERTH_LOAD=ptx`, what a GPU without matching SASS loads), or the crate's whole module (`BERTH_LOAD=crate-ptx`). One process per run, `CUDA_CACHE_DISABLE=1`; medians over the runs, the range in brackets.{}\n",
        if rows.iter().any(|r| r["impl"] == "nvcc") {
            " The CUDA C++ reference (`bench/first_launch/reference.cu`, same run) does the same with `cudaFree(0)` in place of `Gpu::new()`, from its one-kernel program's SASS."
        } else {
            ""
        }
    )?;
    writeln!(
        md,
        "| program, module loaded | runs | module KiB | init ms | first launch ms | second launch ms | bad |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|")?;
    for (label, nvcc, modules) in [
        ("CUDA C++ (nvcc, sm_90 SASS)", true, &["sass"][..]),
        ("berth, sass", false, &["sass"][..]),
        ("berth, the kernel's ptx", false, &["kernel_ptx"][..]),
        ("berth, the crate's ptx", false, &["crate_ptx", "ptx"][..]),
    ] {
        let of: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| modules.iter().any(|m| r["module"] == *m) && (r["impl"] == "nvcc") == nvcc)
            .collect();
        if of.is_empty() {
            continue;
        }
        let field = |f: &str| -> Vec<f64> { of.iter().filter_map(|r| r[f].as_f64()).collect() };
        let first = field("ms");
        let (lo, hi) = first
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let bad: u64 = of.iter().map(|r| r["bad"].as_u64().unwrap_or(1)).sum();
        let bytes = field("module_bytes");
        let kib = if bytes.is_empty() {
            "–".to_owned()
        } else {
            format!("{:.0}", median(&bytes) / 1024.0)
        };
        writeln!(
            md,
            "| {label} | {} | {kib} | {:.1} | **{:.1}** [{lo:.1}–{hi:.1}] | {:.3} | {bad} |",
            of.len(),
            median(&field("init_ms")),
            median(&first),
            median(&field("second_ms")),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_has_a_row_per_module() {
        let text = "{\"impl\":\"nvcc\",\"bench\":\"first_launch\",\"module\":\"sass\",\"kernel\":\"saxpy\",\"init_ms\":100.0,\"ms\":1.5,\"second_ms\":0.01,\"bad\":0,\"round\":1}\n\
{\"bench\":\"first_launch\",\"module\":\"sass\",\"crate\":\"berth_examples\",\"kernel\":\"saxpy\",\"init_ms\":120.0,\"ms\":4.0,\"second_ms\":0.02,\"bad\":0,\"round\":1}\n\
{\"bench\":\"first_launch\",\"module\":\"ptx\",\"crate\":\"berth_examples\",\"kernel\":\"saxpy\",\"init_ms\":121.0,\"ms\":250.0,\"second_ms\":0.02,\"bad\":0,\"round\":1}\n\
{\"bench\":\"first_launch\",\"module\":\"kernel_ptx\",\"module_bytes\":7168,\"crate\":\"berth_examples\",\"kernel\":\"saxpy\",\"init_ms\":122.0,\"ms\":30.0,\"second_ms\":0.02,\"bad\":0,\"round\":1}\n";
        let mut md = String::new();
        super::write(&mut md, text).unwrap();
        assert!(
            md.contains("| berth, sass | 1 | – | 120.0 | **4.0** [4.0–4.0] | 0.020 | 0 |"),
            "{md}"
        );
        // Lines of the crate's PTX from before kernels had modules of their own.
        assert!(
            md.contains("| berth, the crate's ptx | 1 | – | 121.0 | **250.0**"),
            "{md}"
        );
        assert!(
            md.contains("| berth, the kernel's ptx | 1 | 7 | 122.0 | **30.0**"),
            "{md}"
        );
        assert!(
            md.contains(
                "| CUDA C++ (nvcc, sm_90 SASS) | 1 | – | 100.0 | **1.5** [1.5–1.5] | 0.010 | 0 |"
            ),
            "{md}"
        );
    }
}
