//! The tensor-core section of `BENCHMARKS.md`, from `tensor.log` (run.sh's `tensor` mode): the
//! `tensor_gemm` example's lines (berth's GEMM and cuBLAS called through cudarc, same
//! process), the `wgmma_gemm` example's JSON lines, the `attention` example's, and
//! `bench/tensor/anchor.py`'s JSON lines (cuBLAS through `torch.matmul`, PyTorch's flash
//! `scaled_dot_product_attention`), all from the same run. Per shape: berth's TFLOP/s, the references', the ratio and the target.

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use serde_json::Value;

/// One `tensor_gemm` line of the form that gave the best of single launches:
/// `tensor_gemm bf16: 4096×4096×4096: berth 0.627 ms (219.1 TFLOP/s), cuBLAS 0.194 ms (708.2
/// TFLOP/s): …`, with an optional kernel name after the dtype (`tensor_gemm bf16 wgmma: …`).
/// The lines with medians are read from their JSON line instead ([`gemm_json`]).
struct Gemm {
    dtype: String,
    kernel: String,
    n: u64,
    berth: f64,
    cublas: Option<f64>,
}

/// One `attention` line: `attention bf16: 128 × 4096 × 128, causal: median 12.093 ms (90.9
/// TFLOP/s); 0 of 4096 sampled outputs off the host's`, with an optional kernel name after the
/// dtype (`attention bf16 wgmma: …`).
struct Attention {
    kernel: String,
    heads: u64,
    seq: u64,
    d: u64,
    causal: bool,
    berth: f64,
    right: bool,
}

/// The number before ` TFLOP/s)` in the text that follows `after`.
fn tflops_after(line: &str, after: &str) -> Option<f64> {
    let rest = &line[line.find(after)? + after.len()..];
    let end = rest.find(" TFLOP/s)")?;
    let start = rest[..end].rfind('(')? + 1;
    rest[start..end].trim().parse().ok()
}

fn gemm(line: &str) -> Option<Gemm> {
    let rest = line.strip_prefix("tensor_gemm ")?;
    let (head, rest) = rest.split_once(": ")?;
    let mut words = head.split_whitespace();
    let dtype = words.next()?.to_owned();
    let kernel = words.next().unwrap_or("mma.sync").to_owned();
    let (shape, _) = rest.split_once(':')?;
    let n = shape.split('×').next()?.trim().parse().ok()?;
    Some(Gemm {
        dtype,
        kernel,
        n,
        berth: tflops_after(line, "berth ")?,
        cublas: tflops_after(line, "cuBLAS "),
    })
}

fn attention(line: &str) -> Option<Attention> {
    let rest = line.strip_prefix("attention ")?;
    let (head, rest) = rest.split_once(": ")?;
    let kernel = head
        .split_whitespace()
        .nth(1)
        .unwrap_or("mma.sync")
        .to_owned();
    let (shape, rest) = rest.split_once(": median ")?;
    let causal = shape.ends_with(", causal");
    let dims: Vec<u64> = shape
        .trim_end_matches(", causal")
        .split('×')
        .map(|v| v.trim().parse())
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    let [heads, seq, d] = dims[..] else {
        return None;
    };
    Some(Attention {
        kernel,
        heads,
        seq,
        d,
        causal,
        berth: tflops_after(line, "median ")?,
        right: rest.contains("; 0 of "),
    })
}

/// The `wgmma_gemm` and `tensor_gemm` examples' JSON lines: `{"bench":"wgmma_gemm",
/// "type":"bf16","m":8192,"n":8192,"k":8192,"berth_tflops":…,"cublas_tflops":…,…}` (medians;
/// square problems only: the table's `n` is all three sizes); `tensor_gemm`'s kernel is the
/// `mma.sync` one.
fn gemm_json(v: &Value) -> Option<Gemm> {
    let kernel = match v["bench"].as_str()? {
        "wgmma_gemm" => "wgmma".to_owned(),
        "tensor_gemm" => "mma.sync".to_owned(),
        _ => return None,
    };
    let n = v["n"].as_u64()?;
    if v["m"].as_u64() != Some(n) || v["k"].as_u64() != Some(n) {
        return None;
    }
    Some(Gemm {
        dtype: v["type"].as_str()?.to_owned(),
        kernel,
        n,
        berth: v["berth_tflops"].as_f64()?,
        cublas: v["cublas_tflops"].as_f64(),
    })
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// The target over cuBLAS for a GEMM kernel.
fn gemm_target(kernel: &str) -> f64 {
    if kernel == "wgmma" { 0.80 } else { 0.55 }
}

/// Write the section (nothing without a berth line).
pub fn write(md: &mut String, text: &str) -> Result {
    let attns: Vec<Attention> = text.lines().filter_map(attention).collect();
    let anchors: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut gemms: Vec<Gemm> = text.lines().filter_map(gemm).collect();
    gemms.extend(anchors.iter().filter_map(gemm_json));
    if gemms.is_empty() && attns.is_empty() {
        return Ok(());
    }
    writeln!(md, "\n## Tensor cores: GEMM and attention\n")?;
    if !gemms.is_empty() {
        writeln!(
            md,
            "`tensor_gemm` (`examples/tensor/src/tensor.rs`): C = A·B, row-major f16/bf16 inputs, f32 output, M = N = K = n; berth's time is the median of its samples of queued launches, and so is cuBLAS's (called through cudarc in the same process, the same way, checked equal); `wgmma_gemm` (`examples/tensor/src/wgmma_gemm.rs`: C = A·Bᵀ, the bulk-copy and warpgroup-MMA kernel) shows the medians of its runs and of cuBLAS's on the same problem; `torch.matmul` is the median of the anchor's runs (`bench/tensor/anchor.py`, same run, bf16/f16 output). Targets: 0.55× cuBLAS for the `mma.sync` kernel, 0.80× for a warpgroup (`wgmma`) kernel.\n"
        )?;
        writeln!(
            md,
            "| dtype | kernel | n | berth, TFLOP/s | cuBLAS (cudarc), TFLOP/s | torch.matmul, TFLOP/s | berth / cuBLAS | target |"
        )?;
        writeln!(md, "|---|---|---:|---:|---:|---:|---:|---|")?;
        for g in &gemms {
            let torch = anchors.iter().find(|a| {
                a["impl"] == "cublas_torch_matmul"
                    && a["dtype"] == g.dtype.as_str()
                    && a["n"].as_u64() == Some(g.n)
            });
            let ratio = g.cublas.map(|c| g.berth / c);
            let target = gemm_target(&g.kernel);
            writeln!(
                md,
                "| {} | {} | {} | {:.1} | {} | {} | {} | ≥ {target}×: {} |",
                g.dtype,
                g.kernel,
                g.n,
                g.berth,
                cell(g.cublas, 1),
                cell(torch.and_then(|t| t["tflops"].as_f64()), 1),
                cell(ratio, 2) + "×",
                match ratio {
                    Some(r) if r >= target => "✓",
                    Some(_) => "✗",
                    None => "–",
                },
            )?;
        }
    }
    if !attns.is_empty() {
        writeln!(
            md,
            "\n`attention`: the `mma.sync` kernel (`examples/tensor/src/attention.rs`, FlashAttention-2 forward) and the `wgmma` kernel (`examples/tensor/src/attention_wgmma.rs`, FlashAttention-3's layout: bulk tensor copies, warpgroup MMA with the probabilities as a register operand); bf16 Q, K, V and O, heads × sequence × head dim, medians of the runs; PyTorch's `scaled_dot_product_attention` with the flash backend on the same shapes (the anchor). Target: 1.0× PyTorch at d = 128, sequence 4k–16k.\n"
        )?;
        writeln!(
            md,
            "| kernel | d | sequence | heads | causal | berth, TFLOP/s | PyTorch flash SDPA, TFLOP/s | berth / PyTorch | outputs right |"
        )?;
        writeln!(md, "|---|---:|---:|---:|---|---:|---:|---:|---|")?;
        for a in &attns {
            let torch = anchors.iter().find(|t| {
                t["impl"] == "torch_sdpa_flash"
                    && t["d"].as_u64() == Some(a.d)
                    && t["seq"].as_u64() == Some(a.seq)
                    && t["causal"].as_bool() == Some(a.causal)
            });
            let t = torch.and_then(|t| t["tflops"].as_f64());
            writeln!(
                md,
                "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
                a.kernel,
                a.d,
                a.seq,
                a.heads,
                if a.causal { "yes" } else { "no" },
                a.berth,
                cell(t, 1),
                cell(t.map(|t| a.berth / t), 2) + "×",
                if a.right { "yes" } else { "**no**" },
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"tensor_gemm bf16: 4096×4096×4096: berth 0.627 ms (219.1 TFLOP/s), cuBLAS 0.194 ms (708.2 TFLOP/s): berth at 3.23× cuBLAS's time; largest relative difference 0.00e0; 0 of 256 sampled entries off the host's
tensor_gemm bf16 wgmma: 8192×8192×8192: berth 1.700 ms (646.8 TFLOP/s), cuBLAS 1.429 ms (769.4 TFLOP/s): berth at 1.19× cuBLAS's time; largest relative difference 0.00e0; 0 of 256 sampled entries off the host's
attention bf16: 128 × 4096 × 128, causal: median 6.425 ms (85.6 TFLOP/s); 0 of 4096 sampled outputs off the host's
attention bf16: 32 × 16384 × 64: median 27.050 ms (81.3 TFLOP/s); 3 of 2048 sampled outputs off the host's
attention bf16 wgmma: 128 × 4096 × 128, causal: median 1.800 ms (305.4 TFLOP/s); 0 of 4096 sampled outputs off the host's
{"bench":"wgmma_gemm","type":"bf16","m":4096,"n":4096,"k":4096,"berth_tflops":512.3,"cublas_tflops":700.0,"ratio":0.732,"worst_rel_diff":0e0,"off_host":0}
{"bench":"tensor_gemm","kernel":"hgemm","type":"f16","m":4096,"n":4096,"k":4096,"batch":10,"berth_tflops":401.5,"berth_best_tflops":405.0,"cublas_tflops":710.2,"cublas_best_tflops":715.0,"ratio":0.565,"worst_rel_diff":0e0,"off_host":0}
{"impl": "cublas_torch_matmul", "dtype": "bf16", "n": 4096, "ms": 0.1969, "tflops": 697.9}
{"impl": "torch_sdpa_flash", "dtype": "bf16", "d": 128, "seq": 4096, "heads": 128, "causal": true, "ms": 1.7903, "tflops": 307.1}"#;

    #[test]
    fn a_run_renders_its_ratios_and_targets() -> Result {
        let mut md = String::new();
        write(&mut md, RUN)?;
        assert!(
            md.contains("| bf16 | mma.sync | 4096 | 219.1 | 708.2 | 697.9 | 0.31× | ≥ 0.55×: ✗ |"),
            "{md}"
        );
        assert!(
            md.contains("| bf16 | wgmma | 8192 | 646.8 | 769.4 | – | 0.84× | ≥ 0.8×: ✓ |"),
            "{md}"
        );
        assert!(
            md.contains("| bf16 | wgmma | 4096 | 512.3 | 700.0 | 697.9 | 0.73× | ≥ 0.8×: ✗ |"),
            "{md}"
        );
        assert!(
            md.contains("| f16 | mma.sync | 4096 | 401.5 | 710.2 | – | 0.57× | ≥ 0.55×: ✓ |"),
            "{md}"
        );
        assert!(
            md.contains("| mma.sync | 128 | 4096 | 128 | yes | 85.6 | 307.1 | 0.28× | yes |"),
            "{md}"
        );
        assert!(
            md.contains("| mma.sync | 64 | 16384 | 32 | no | 81.3 | – | –× | **no** |"),
            "{md}"
        );
        assert!(
            md.contains("| wgmma | 128 | 4096 | 128 | yes | 305.4 | 307.1 | 0.99× | yes |"),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn no_berth_line_no_section() -> Result {
        let mut md = String::new();
        write(&mut md, r#"{"impl": "torch_sdpa_flash", "d": 64}"#)?;
        assert!(md.is_empty());
        Ok(())
    }
}
