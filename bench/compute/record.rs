//! The compute-bound kernels' section of `BENCHMARKS.md`, from `compute.jsonl`
//! (`.gpu/run.sh` runs `bench/compute/reference.cu` and `bench_compute` interleaved, two rounds, after
//! both sides' `ptxas -v` reports from the same ptxas).

use crate::Result;
use crate::stats::median;
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
        "The kernels of `examples/compute/src/compute.rs` and `examples/compute/src/half_precision.rs` against \
         the same algorithms in CUDA C++ (`bench/compute/reference.cu`: same tiling, same block shapes, \
         written the plain way, `nvcc -O3 -arch=sm_90`), in the same run: median of 10 \
         launches timed one by one with CUDA events, two interleaved rounds, the median of \
         the rounds shown. Outputs were poisoned first and checked against the host in f64 \
         (`bad` = mismatches; `error` = the worst relative error, SGEMM and n-body of sampled \
         outputs, Black-Scholes relative to the spot price). Registers, stack and spills are \
         both sides' `ptxas -v` (the same ptxas, sm_90); SASS is the number of machine \
         instructions `cuobjdump -sass` lists for the kernel (static, all paths). berth's \
         columns are the entry these launches run: `<kernel>__berth_1d` where the kernel has \
         one (all its launches here are one-dimensional), else `<kernel>__berth_2d` where it \
         has one (all its launches here are two-dimensional), its general entry otherwise.\n"
    )?;
    writeln!(
        md,
        "| kernel | size | unit | berth | nvcc | **berth / nvcc** | target | registers berth / nvcc | spills berth / nvcc | SASS berth / nvcc | error berth / nvcc | bad |"
    )?;
    writeln!(md, "|---|---:|---|---:|---:|---:|---|---|---|---|---|---:|")?;
    // The entry a benchmark launch runs: nvcc's kernel (one for a kernel and its unchecked
    // twin); berth's one-dimensional entry where the kernel has one (every launch of this
    // benchmark of such a kernel is one-dimensional), else its entry without z where it has
    // one (every launch of such a kernel here is two-dimensional), its general entry otherwise.
    let entry = |side: &str, k: &str| -> (String, String) {
        if side == "nvcc" {
            let base = k
                .trim_end_matches("_unchecked")
                .trim_start_matches("plain_");
            return (side.to_owned(), base.to_owned());
        }
        let linear = berth_abi::linear_entry(k).to_string();
        let planar = berth_abi::planar_entry(k).to_string();
        [linear, planar]
            .into_iter()
            .map(|e| (side.to_owned(), e))
            .find(|key| regs.contains_key(key) || sass.contains_key(key))
            .unwrap_or_else(|| (side.to_owned(), k.to_owned()))
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
    let row = |md: &mut String, k: &String, n: u64, idiomatic: Option<f64>| -> Result {
        let get = |i: &str| runs.get(&(k.clone(), n, i.to_owned()));
        let (Some(b), Some(c)) = (get("berth"), get("nvcc")) else {
            return Ok(());
        };
        let (bm, cm) = (median(&b.rate), median(&c.rate));
        let ratio = bm / cm;
        let goal = target(k).map_or("—".to_owned(), |t| {
            format!("≥ {t:.2} {}", if ratio >= t { "✓" } else { "✗" })
        });
        let beside = idiomatic.map_or(String::new(), |r| format!(" {r:.3} |"));
        writeln!(
            md,
            "| {k} | {n} | {} | {bm:.1} | {cm:.1} | **{ratio:.3}** |{beside} {goal} | {} / {} | {} / {} | {} / {} | {:.1e} / {:.1e} | {} |",
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
        Ok(())
    };
    let plain = |k: &str| k.starts_with("plain_");
    for (k, n) in order.iter().filter(|(k, _)| !plain(k)) {
        row(md, k, *n, None)?;
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
    let ported: Vec<_> = order.iter().filter(|(k, _)| plain(k)).collect();
    if !ported.is_empty() {
        writeln!(md, "\n### Plain ports\n")?;
        writeln!(
            md,
            "The kernels of `examples/compute/src/plain.rs`: CUDA kernels ported line by line as a \
             newcomer writes them (`for` loops over small local arrays, checked slice reads, \
             `unsafe {{ c.write(k, v) }}` for computed-index stores, `unsafe` shared accesses \
             and barriers; no declared block shape, no `unroll!`, no matrix views), against \
             the CUDA C++ they port (the SGEMM and n-body kernels above, and `stencil5` and \
             `transpose` in `bench/compute/reference.cu`), measured as above. *idiomatic* is \
             the ratio of the kernel of the table above written with berth's idioms, at the \
             same size. The stencil and the transpose count 8 bytes a point (one read, one \
             write).\n"
        )?;
        writeln!(
            md,
            "| kernel | size | unit | berth | nvcc | **berth / nvcc** | idiomatic | target | registers berth / nvcc | spills berth / nvcc | SASS berth / nvcc | error berth / nvcc | bad |"
        )?;
        writeln!(
            md,
            "|---|---:|---|---:|---:|---:|---:|---|---|---|---|---|---:|"
        )?;
        for (k, n) in ported {
            let idiom = k.trim_start_matches("plain_");
            let ratio = |i: &str| {
                runs.get(&(idiom.to_owned(), *n, i.to_owned()))
                    .map(|r| median(&r.rate))
            };
            let idiomatic = match (ratio("berth"), ratio("nvcc")) {
                (Some(b), Some(c)) => Some(b / c),
                _ => None,
            };
            match idiomatic {
                Some(r) => row(md, k, *n, Some(r))?,
                None => {
                    // No idiomatic twin measured: a dash in its column.
                    let mut line = String::new();
                    row(&mut line, k, *n, Some(f64::NAN))?;
                    md.push_str(&line.replace(" NaN |", " — |"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A plain port's row sits in its own table, beside its idiomatic twin's ratio, with
    /// registers and stack from berth's entry and nvcc's kernel of the ported name.
    #[test]
    fn plain_ports_render_beside_their_idiomatic_twin() {
        let line = |imp: &str, k: &str, rate: f64| {
            format!(
                "{{\"impl\":\"{imp}\",\"kernel\":\"{k}\",\"n\":4096,\"median_ms\":1.0,\"gflops\":{rate},\"bad\":0,\"max_rel_err\":1e-7}}\n"
            )
        };
        let mut lines = String::new();
        lines += "{\"ptxas\":\"nvcc\",\"kernel\":\"sgemm_reg8\",\"registers\":127,\"stack\":0,\"spill_stores\":0,\"spill_loads\":0,\"smem\":8192}\n";
        lines += "{\"ptxas\":\"berth\",\"kernel\":\"plain_sgemm_reg8\",\"registers\":161,\"stack\":256,\"spill_stores\":0,\"spill_loads\":0,\"smem\":8192}\n";
        lines += &line("nvcc", "sgemm_reg8", 20000.0);
        lines += &line("berth", "sgemm_reg8", 21000.0);
        lines += &line("nvcc", "plain_sgemm_reg8", 20000.0);
        lines += &line("berth", "plain_sgemm_reg8", 1500.0);
        lines += &line("nvcc", "plain_transpose", 3000.0);
        lines += &line("berth", "plain_transpose", 2700.0);
        let mut md = String::new();
        super::write(&mut md, &lines).unwrap();
        let (idiomatic, plain) = md.split_once("### Plain ports").expect("a plain table");
        assert!(idiomatic.contains("| sgemm_reg8 | 4096 |"), "{md}");
        assert!(!idiomatic.contains("plain_"), "{md}");
        assert!(
            plain.contains(
                "| plain_sgemm_reg8 | 4096 | GFLOP/s | 1500.0 | 20000.0 | **0.075** | 1.050 | ≥ 0.90 ✗ | 161 / 127 | 0+0 B (stack 256) / 0 |"
            ),
            "{plain}"
        );
        assert!(
            plain.contains(
                "| plain_transpose | 4096 | GFLOP/s | 2700.0 | 3000.0 | **0.900** | — | ≥ 0.90 ✓ |"
            ),
            "{plain}"
        );
    }
}
