//! The placement section of `BENCHMARKS.md`, from `placement.jsonl` (`bench/placement/reference.cu` and
//! the `bench_placement` binary, same run, two interleaved rounds each).

use std::collections::BTreeMap;
use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Medians over rounds of one (bench, size, implementation).
#[derive(Default, Clone)]
struct Cell {
    ms: Vec<f64>,
    rate: Vec<f64>,
    /// Timed repetitions behind each round's median.
    reps: Vec<u64>,
    bad: u64,
}

use crate::stats::median;

type Key = (String, String, String); // bench, size (bytes or fraction), impl

fn parse(text: &str) -> Result<BTreeMap<Key, Cell>> {
    let mut cells: BTreeMap<Key, Cell> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let size = v
            .get("bytes")
            .map(|b| b.to_string())
            .or_else(|| v.get("fraction").map(|f| f.to_string()))
            .unwrap_or_default();
        let key = (
            v["bench"].as_str().unwrap_or("?").to_owned(),
            size,
            v["impl"].as_str().unwrap_or("?").to_owned(),
        );
        let c = cells.entry(key).or_default();
        c.ms.push(v["median_ms"].as_f64().unwrap_or(f64::NAN));
        let rate = v.get("gbps").or_else(|| v.get("maccess_per_s"));
        c.rate
            .push(rate.and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN));
        c.reps
            .extend(v.get("reps").and_then(serde_json::Value::as_u64));
        c.bad += v["bad"].as_u64().unwrap_or(1);
    }
    Ok(cells)
}

fn get(cells: &BTreeMap<Key, Cell>, bench: &str, size: &str, imp: &str) -> Cell {
    cells
        .get(&(bench.to_owned(), size.to_owned(), imp.to_owned()))
        .cloned()
        .unwrap_or_default()
}

fn human_bytes(b: &str) -> String {
    let b: f64 = b.parse().unwrap_or(0.0);
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{} KiB", b / 1024.0)
    }
}

/// `docs/placement-crossover.svg`: gather time against fraction touched, mapped vs copy,
/// log–log, from (fraction, mapped ms, copy ms).
fn write_crossover_svg(points: &[(f64, f64, f64)]) -> Result {
    if points.is_empty() {
        return Ok(());
    }
    let (w, h, l, r, t, b) = (700.0, 400.0, 70.0, 190.0, 30.0, 50.0);
    let lx = |f: f64| f.log10();
    let (x0, x1) = (lx(points[0].0), lx(points[points.len() - 1].0));
    let ys: Vec<f64> = points
        .iter()
        .flat_map(|p| [p.1, p.2])
        .map(f64::log10)
        .collect();
    let (y0, y1) = (
        ys.iter().cloned().fold(f64::INFINITY, f64::min).floor(),
        ys.iter().cloned().fold(f64::NEG_INFINITY, f64::max).ceil(),
    );
    let px = |f: f64| l + (lx(f) - x0) / (x1 - x0).max(1e-9) * (w - l - r);
    let py = |ms: f64| h - b - (ms.log10() - y0) / (y1 - y0).max(1e-9) * (h - t - b);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="{w}" height="{h}" fill="white"/>"#
    );
    s += &format!(
        r#"<text x="{l}" y="18" font-size="14">Gather from a 1 GiB host table: time vs fraction touched (H200)</text>"#
    );
    s += &format!(
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
    let mut e = y0 as i32;
    while e <= y1 as i32 {
        let ms = 10f64.powi(e);
        s += &format!(
            r##"<text x="{}" y="{}" text-anchor="end">{ms} ms</text><line x1="{l}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            l - 6.0,
            py(ms) + 4.0,
            w - r,
            y = py(ms)
        );
        e += 1;
    }
    for p in points {
        s += &format!(
            r#"<text x="{}" y="{}" text-anchor="middle">{}%</text>"#,
            px(p.0),
            h - b + 18.0,
            p.0 * 100.0
        );
    }
    s += &format!(
        r#"<text x="{}" y="{}" text-anchor="middle">elements touched (log scale)</text>"#,
        (l + w - r) / 2.0,
        h - 10.0
    );
    for (i, (name, color)) in [
        ("mapped (in place)", "#1f77b4"),
        ("copy all, then gather", "#d62728"),
    ]
    .iter()
    .enumerate()
    {
        let d: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(if i == 0 { p.1 } else { p.2 })))
            .collect();
        s += &format!(
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            d.join(" ")
        );
        let ly = t + 20.0 + 18.0 * i as f64;
        s += &format!(
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{name}</text>"#,
            w - r + 8.0,
            w - r + 30.0,
            w - r + 34.0,
            ly + 4.0
        );
    }
    s += "</svg>\n";
    let root = crate::workspace_root();
    std::fs::create_dir_all(root.join("docs"))?;
    std::fs::write(root.join("docs/placement-crossover.svg"), s)?;
    Ok(())
}

pub fn write(md: &mut String, text: &str, root: &std::path::Path) -> Result {
    let cells = parse(text)?;
    writeln!(md, "\n## Placement: memory kinds, copies, mapped access\n")?;
    writeln!(
        md,
        "berth (`bench/placement/main.rs`) against `bench/placement/reference.cu` (CUDA runtime API, nvcc), same run, two interleaved rounds each, medians.\n"
    )?;

    writeln!(
        md,
        "### Copies: `PinnedBuffer` ↔ `DeviceBuffer` vs `cudaMemcpyAsync` with `cudaHostAlloc` memory\n"
    )?;
    writeln!(
        md,
        "Each round's median over its repetitions (`reps`: the fewest of either side's), then the median of the rounds. berth's side copies buffers of each size's own; the reference copies prefixes of 1 GiB buffers (`./placement copy_fresh` runs it with buffers of each size's own).\n"
    )?;
    writeln!(
        md,
        "| direction | size | berth GB/s | nvcc GB/s | ratio | target (≥ 0.98 from 1 MiB) | reps | bad |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---|---:|---:|")?;
    let mut sizes: Vec<(u64, String)> = cells
        .keys()
        .filter(|(b, _, _)| b == "h2d")
        .map(|(_, s, _)| (s.parse().unwrap_or(0), s.clone()))
        .collect();
    sizes.sort();
    sizes.dedup();
    for dir in ["h2d", "d2h"] {
        for (bytes, size) in &sizes {
            let (b, c) = (
                get(&cells, dir, size, "berth"),
                get(&cells, dir, size, "nvcc"),
            );
            let ratio = median(&b.rate) / median(&c.rate);
            let target = if *bytes < 1 << 20 {
                "(small: latency-bound)".to_owned()
            } else if ratio >= 0.98 {
                "✓".to_owned()
            } else {
                "✗".to_owned()
            };
            let reps = b.reps.iter().chain(&c.reps).min().copied().unwrap_or(0);
            writeln!(
                md,
                "| {dir} | {} | {:.2} | {:.2} | **{ratio:.3}** | {target} | {reps} | {} |",
                human_bytes(size),
                median(&b.rate),
                median(&c.rate),
                b.bad + c.bad
            )?;
        }
    }

    writeln!(
        md,
        "\n### Write-combined vs plain pinned memory (256 MiB)\n"
    )?;
    writeln!(md, "| measure | berth GB/s | nvcc GB/s |")?;
    writeln!(md, "|---|---:|---:|")?;
    for bench in ["h2d_wc", "h2d_plain", "cpu_read_wc", "cpu_read_plain"] {
        let size = cells
            .keys()
            .find(|(b, _, _)| b == bench)
            .map(|(_, s, _)| s.clone())
            .unwrap_or_default();
        let (b, c) = (
            get(&cells, bench, &size, "berth"),
            get(&cells, bench, &size, "nvcc"),
        );
        writeln!(
            md,
            "| {bench} | {:.2} | {:.2} |",
            median(&b.rate),
            median(&c.rate)
        )?;
    }

    writeln!(
        md,
        "\n### A kernel reading `#[mapped]` host memory sequentially (1 GiB, 16-byte loads, 528 blocks)\n"
    )?;
    let (b, c) = (
        get(&cells, "mapped_seq_read", "1073741824", "berth"),
        get(&cells, "mapped_seq_read", "1073741824", "nvcc"),
    );
    let ratio = median(&b.rate) / median(&c.rate);
    writeln!(md, "| berth GB/s | nvcc GB/s | ratio | target | bad |")?;
    writeln!(md, "|---:|---:|---:|---|---:|")?;
    writeln!(
        md,
        "| {:.2} | {:.2} | **{ratio:.3}** | ≥ 0.98 {} | {} |",
        median(&b.rate),
        median(&c.rate),
        if ratio >= 0.98 { "✓" } else { "✗" },
        b.bad + c.bad
    )?;

    writeln!(
        md,
        "\n### Sparse gather from a 1 GiB host table: in place (`#[mapped]`) vs copy the table, then gather\n"
    )?;
    writeln!(
        md,
        "| touched | gathers | berth mapped ms | berth copy+gather ms | faster | nvcc mapped ms | nvcc copy+gather ms | berth/nvcc mapped | berth/nvcc copy | bad |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")?;
    let mut fractions: Vec<(f64, String)> = cells
        .keys()
        .filter(|(b, _, _)| b == "gather_mapped")
        .map(|(_, s, _)| (s.parse().unwrap_or(0.0), s.clone()))
        .collect();
    fractions.sort_by(|a, b| a.0.total_cmp(&b.0));
    fractions.dedup_by(|a, b| a.1 == b.1);
    let mut points = Vec::new();
    for (f, size) in &fractions {
        let bm = get(&cells, "gather_mapped", size, "berth");
        let bc = get(&cells, "gather_copy", size, "berth");
        let nm = get(&cells, "gather_mapped", size, "nvcc");
        let nc = get(&cells, "gather_copy", size, "nvcc");
        let (bm_ms, bc_ms) = (median(&bm.ms), median(&bc.ms));
        points.push((*f, bm_ms, bc_ms));
        let k = (f * (1u64 << 28) as f64) as u64;
        writeln!(
            md,
            "| {}% | {k} | {bm_ms:.3} | {bc_ms:.3} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} |",
            f * 100.0,
            if bm_ms < bc_ms { "mapped" } else { "copy" },
            median(&nm.ms),
            median(&nc.ms),
            median(&nm.ms) / bm_ms,
            median(&nc.ms) / bc_ms,
            bm.bad + bc.bad + nm.bad + nc.bad
        )?;
    }
    write_crossover_svg(&points)?;
    // Where the two strategies cross: interpolate log(time) between the bracketing points.
    let cross = points.windows(2).find_map(|w| {
        let (f0, m0, c0) = w[0];
        let (f1, m1, c1) = w[1];
        let (d0, d1) = ((m0 / c0).ln(), (m1 / c1).ln());
        (d0 <= 0.0 && d1 > 0.0).then(|| {
            let t = d0 / (d0 - d1);
            (f0.ln() + t * (f1.ln() - f0.ln())).exp()
        })
    });
    match cross {
        Some(f) => writeln!(
            md,
            "\nberth's crossover: mapped is faster below about **{:.2}%** of the table touched (4-byte elements, uniform random), copying the table first above it. (berth/nvcc columns: time ratios nvcc/berth, above 1 = berth faster.)",
            f * 100.0
        )?,
        None => writeln!(md, "\nNo crossover inside the measured range.")?,
    }
    for line in text
        .lines()
        .filter(|l| l.contains("\"bench\":\"streams\""))
        .take(1)
    {
        let v: serde_json::Value = serde_json::from_str(line)?;
        writeln!(md, "\n### Independent launches on two streams\n")?;
        writeln!(
            md,
            "Two launches of a compute-bound kernel that each fill half the SMs: {:.2} ms one after the other on one stream, {:.2} ms on two streams: **{:.2}×** (2× = full overlap; berth only, wall clock).",
            v["serial_ms"].as_f64().unwrap_or(f64::NAN),
            v["concurrent_ms"].as_f64().unwrap_or(f64::NAN),
            v["overlap"].as_f64().unwrap_or(f64::NAN)
        )?;
    }
    crate::benches::placement_auto::write(md, text, root)?;
    Ok(())
}
