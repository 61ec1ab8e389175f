//! The compute-bound kernels' section of `BENCHMARKS.md`, from `compute.jsonl`
//! (`.gpu/run.sh` runs `bench/compute.cu` and `bench_compute` interleaved, two rounds, after
//! both sides' `ptxas -v` reports from the same ptxas).

use crate::Result;
use crate::record::median;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The target ratio berth / nvcc of each kernel; none for `black_scholes_unchecked`, which
/// measures the price of a pattern (lengths checked in every thread) rather than a kernel
/// to match nvcc with.
fn target(kernel: &str) -> Option<f64> {
    match kernel {
        "black_scholes_unchecked" => None,
        "block_sum_warp" => Some(0.97),
        "haxpy2" | "hdot" | "black_scholes" => Some(0.95),
        _ => Some(0.90),
    }
}

/// What the throughput column counts, by unit.
fn unit_name(unit: &str) -> &'static str {
    match unit {
        "gflops" => "GFLOP/s",
        "goptions" => "G options/s",
        _ => "GB/s",
    }
}

#[derive(Default)]
struct Runs {
    rate: Vec<f64>,
    ms: Vec<f64>,
    bad: u64,
    err: f64,
}

pub fn write(md: &mut String, compute: &str) -> Result {
    let mut runs: BTreeMap<(String, u64, String), Runs> = BTreeMap::new();
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    let mut order: Vec<(String, u64)> = Vec::new();
    let mut regs: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let mut sass: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    for line in compute.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if let Some(side) = v["ptxas"].as_str() {
            let k = v["kernel"].as_str().unwrap_or("?").to_owned();
            regs.insert((side.to_owned(), k), v);
            continue;
        }
        if let Some(side) = v["sass"].as_str() {
            let k = v["kernel"].as_str().unwrap_or("?").to_owned();
            sass.insert((side.to_owned(), k), v);
            continue;
        }
        let kernel = v["kernel"].as_str().unwrap_or("?").to_owned();
        let n = v["n"].as_u64().unwrap_or(0);
        let unit = ["gflops", "goptions", "gbps"]
            .into_iter()
            .find(|u| v.get(*u).is_some())
            .unwrap_or("gbps");
        units.insert(kernel.clone(), unit.to_owned());
        if !order.contains(&(kernel.clone(), n)) {
            order.push((kernel.clone(), n));
        }
        let r = runs
            .entry((kernel, n, v["impl"].as_str().unwrap_or("?").to_owned()))
            .or_default();
        r.rate.push(v[unit].as_f64().unwrap_or(f64::NAN));
        r.ms.push(v["median_ms"].as_f64().unwrap_or(f64::NAN));
        r.bad += v["bad"].as_u64().unwrap_or(1);
        r.err = r.err.max(v["max_rel_err"].as_f64().unwrap_or(f64::NAN));
    }
    writeln!(md, "\n## Compute-bound kernels\n")?;
    writeln!(
        md,
        "The kernels of `examples/src/compute.rs` and `examples/src/half_precision.rs` against \
         the same algorithms in CUDA C++ (`bench/compute.cu`: same tiling, same block shapes, \
         written the plain way, `nvcc -O3 -arch=sm_90`), in the same run: median of 10 \
         launches timed one by one with CUDA events, two interleaved rounds, the median of \
         the rounds shown. Outputs were poisoned first and checked against the host in f64 \
         (`bad` = mismatches; `error` = the worst relative error, SGEMM and n-body of sampled \
         outputs, Black-Scholes relative to the spot price). Registers, stack and spills are \
         both sides' `ptxas -v` (the same ptxas, sm_90); SASS is the number of machine \
         instructions `cuobjdump -sass` lists for the kernel (static, all paths). berth's \
         columns are the entry these launches run: `<kernel>__berth_1d` where the kernel has \
         one (all its launches here are one-dimensional), its general entry otherwise.\n"
    )?;
    writeln!(
        md,
        "| kernel | size | unit | berth | nvcc | **berth / nvcc** | target | registers berth / nvcc | spills berth / nvcc | SASS berth / nvcc | error berth / nvcc | bad |"
    )?;
    writeln!(md, "|---|---:|---|---:|---:|---:|---|---|---|---|---|---:|")?;
    // The entry a benchmark launch runs: nvcc's kernel (one for a kernel and its unchecked
    // twin); berth's one-dimensional entry where the kernel has one (every launch of this
    // benchmark of such a kernel is one-dimensional), its general entry otherwise.
    let entry = |side: &str, k: &str| -> (String, String) {
        if side == "nvcc" {
            return (side.to_owned(), k.trim_end_matches("_unchecked").to_owned());
        }
        let linear = format!("{k}__berth_1d");
        let key = (side.to_owned(), linear);
        if regs.contains_key(&key) || sass.contains_key(&key) {
            key
        } else {
            (side.to_owned(), k.to_owned())
        }
    };
    let spill = |side: &str, k: &str| {
        regs.get(&entry(side, k))
            .map(|v| {
                let st = v["spill_stores"].as_u64().unwrap_or(0);
                let ld = v["spill_loads"].as_u64().unwrap_or(0);
                let stack = v["stack"].as_u64().unwrap_or(0);
                if st + ld + stack == 0 {
                    "0".to_owned()
                } else {
                    format!("{st}+{ld} B (stack {stack})")
                }
            })
            .unwrap_or_else(|| "?".into())
    };
    let reg = |side: &str, k: &str| {
        regs.get(&entry(side, k))
            .and_then(|v| v["registers"].as_u64())
            .map_or("?".to_owned(), |r| r.to_string())
    };
    let instructions = |side: &str, k: &str| {
        sass.get(&entry(side, k))
            .and_then(|v| v["instructions"].as_u64())
            .map_or("?".to_owned(), |r| r.to_string())
    };
    for (k, n) in &order {
        let get = |i: &str| runs.get(&(k.clone(), *n, i.to_owned()));
        let (Some(b), Some(c)) = (get("berth"), get("nvcc")) else {
            continue;
        };
        let (bm, cm) = (median(&b.rate), median(&c.rate));
        let ratio = bm / cm;
        let goal = target(k).map_or("—".to_owned(), |t| {
            format!("≥ {t:.2} {}", if ratio >= t { "✓" } else { "✗" })
        });
        writeln!(
            md,
            "| {k} | {n} | {} | {bm:.1} | {cm:.1} | **{ratio:.3}** | {goal} | {} / {} | {} / {} | {} / {} | {:.1e} / {:.1e} | {} |",
            unit_name(&units[k]),
            reg("berth", k),
            reg("nvcc", k),
            spill("berth", k),
            spill("nvcc", k),
            instructions("berth", k),
            instructions("nvcc", k),
            b.err,
            c.err,
            b.bad + c.bad
        )?;
    }
    writeln!(
        md,
        "\n`sgemm_tiled` checks each global access; `sgemm_reg4` and `sgemm_reg8` reach \
         global memory through `Matrix` bands walked tile by tile (`tiles_across` / \
         `tiles_down`: checked before the loop, none per step or element). `sgemm_reg8_unchecked` is `sgemm_reg8` with its global loads and stores \
         unchecked after one up-front validation: the pair measures what the checks cost. \
         `black_scholes` declares its five slices `same_len` (the launcher checks their \
         lengths, and no access is checked in the kernel); `black_scholes_unchecked` checks the \
         lengths in every thread instead, then indexes unchecked. Each pair's nvcc columns are \
         the same CUDA kernel."
    )?;
    writeln!(
        md,
        "\nSGEMM counts 2n³ floating-point operations, n-body 20 per interaction (as CUDA's \
         samples), `block_sum_warp` 4 bytes per element, `haxpy2` 12 bytes per f16 pair (read \
         x and y, write out), `hdot` 8."
    )?;
    Ok(())
}
