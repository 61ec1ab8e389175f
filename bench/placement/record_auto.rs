//! The sparse-lookup and automatic-placement sections of `BENCHMARKS.md`, from the
//! `embedding` and `auto_sweep` lines of `placement.jsonl`, and `docs/auto-placement.svg`.

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

/// One point of the sweep: (fraction, mapped ms, copy ms, auto ms).
type Point = (f64, f64, f64, f64);

pub fn write(md: &mut String, text: &str, root: &std::path::Path) -> Result {
    if let Some(svg) = render(md, text)? {
        std::fs::create_dir_all(root.join("docs"))?;
        std::fs::write(root.join("docs/auto-placement.svg"), svg)?;
    }
    Ok(())
}

/// The Markdown sections, and the plot when there is a sweep.
fn render(md: &mut String, text: &str) -> Result<Option<String>> {
    let rows: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(serde_json::from_str)
        .collect::<std::result::Result<_, _>>()?;
    let emb = |imp: &str, field: &str| {
        median(
            &rows
                .iter()
                .filter(|r| r["bench"] == "embedding" && r["impl"] == imp)
                .filter_map(|r| r[field].as_f64())
                .collect::<Vec<_>>(),
        )
    };
    if rows.iter().any(|r| r["bench"] == "embedding") {
        let bad: u64 = rows
            .iter()
            .filter(|r| r["bench"] == "embedding")
            .filter_map(|r| r["bad"].as_u64())
            .sum();
        let (b, n) = (emb("berth", "gbps"), emb("nvcc", "gbps"));
        writeln!(
            md,
            "\n### Sparse embedding lookup (65 536 random rows of 128 floats from a 2 GiB `#[mapped]` host table)\n"
        )?;
        writeln!(
            md,
            "| berth GB/s (useful) | berth M rows/s | nvcc GB/s | ratio | target | bad |"
        )?;
        writeln!(md, "|---:|---:|---:|---:|---|---:|")?;
        writeln!(
            md,
            "| {b:.2} | {:.2} | {n:.2} | **{:.3}** | ≥ 0.95 {} | {bad} |",
            emb("berth", "mrows_per_s"),
            b / n,
            if b / n >= 0.95 { "✓" } else { "✗" }
        )?;
    }

    let sweep: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["bench"] == "auto_sweep").collect();
    if sweep.is_empty() {
        range_table(md, &rows)?;
        return Ok(None);
    }
    writeln!(
        md,
        "\n### `#[auto]` against the better fixed placement\n\nEach point: the same gather launched mapped (in place), after copying the whole table, and through `#[auto]` with an access hint (`Touch::Elements` / `Touch::Rows`), the decision taken from this run's calibration. Target: auto within 5% of the better fixed placement everywhere. Plot: `docs/auto-placement.svg`.\n"
    )?;
    writeln!(
        md,
        "| table | unit | touched | mapped ms | copy ms | auto ms | choice | auto / best | bad |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---|---:|---:|")?;
    let mut panels: Vec<(String, Vec<Point>)> = Vec::new();
    let (mut worst, mut bad) = (0f64, 0u64);
    // Group the rounds of each point (table, unit, fraction), in first-seen order; medians.
    let mut keys: Vec<(u64, u64, u64)> = Vec::new();
    for r in &sweep {
        let key = (
            r["table_bytes"].as_u64().unwrap_or(0),
            r["unit_bytes"].as_u64().unwrap_or(0),
            r["touched_fraction"].as_f64().unwrap_or(f64::NAN).to_bits(),
        );
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for (tb, ub, fs) in &keys {
        let same: Vec<&&serde_json::Value> = sweep
            .iter()
            .filter(|r| {
                r["table_bytes"].as_u64() == Some(*tb)
                    && r["unit_bytes"].as_u64() == Some(*ub)
                    && r["touched_fraction"].as_f64().map(f64::to_bits) == Some(*fs)
            })
            .collect();
        let med = |field: &str| field_median(&same, field);
        let f = f64::from_bits(*fs);
        let (m, c, a) = (med("mapped_ms"), med("copy_ms"), med("auto_ms"));
        let vs = a / m.min(c);
        worst = worst.max(vs);
        let (point_bad, choices) = bad_and_choices(&same);
        bad += point_bad;
        let table = format!("{} MiB", *tb as f64 / (1024.0 * 1024.0));
        let unit = format!("{ub} B");
        writeln!(
            md,
            "| {table} | {unit} | {}% | {m:.3} | {c:.3} | {a:.3} | {} | **{vs:.3}** {} | {point_bad} |",
            f * 100.0,
            choices.join(" / "),
            if vs <= 1.05 { "✓" } else { "✗" },
        )?;
        let name = format!("{table} table, {unit} units");
        match panels.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1.push((f, m, c, a)),
            None => panels.push((name, vec![(f, m, c, a)])),
        }
    }
    writeln!(
        md,
        "\nWorst auto / best: **{worst:.3}** ({}); results checked against host gathers: {bad} wrong.",
        if worst <= 1.05 {
            "within 5% everywhere ✓"
        } else {
            "target missed ✗"
        }
    )?;
    range_table(md, &rows)?;
    Ok(Some(svg(&panels)))
}

/// Over the rounds of a point: wrong results, and the distinct choices in order.
fn bad_and_choices<'a>(rounds: &[&&'a serde_json::Value]) -> (u64, Vec<&'a str>) {
    let bad = rounds.iter().map(|r| r["bad"].as_u64().unwrap_or(1)).sum();
    let mut choices: Vec<&str> = rounds
        .iter()
        .map(|r| r["choice"].as_str().unwrap_or("?"))
        .collect();
    choices.dedup();
    (bad, choices)
}

/// The median of one numeric field over the rounds of a point.
fn field_median(rounds: &[&&serde_json::Value], field: &str) -> f64 {
    median(
        &rounds
            .iter()
            .map(|r| r[field].as_f64().unwrap_or(f64::NAN))
            .collect::<Vec<_>>(),
    )
}

/// The `auto_range` points: a contiguous range read once, with a `Touch::Range` hint.
fn range_table(md: &mut String, rows: &[serde_json::Value]) -> Result {
    let pts: Vec<&serde_json::Value> = rows.iter().filter(|r| r["bench"] == "auto_range").collect();
    if pts.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\n### `#[auto]` with a range hint (`Touch::Range`)\n\nA contiguous range of a 1 GiB table of floats, read once: mapped, after copying the whole table, after copying just the range by hand, and through `#[auto]` (which may copy only the range). Target: within 5% of the best of the three.\n"
    )?;
    writeln!(
        md,
        "| range | mapped ms | copy all ms | copy range ms | auto ms | choice | auto / best | bad |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---|---:|---:|")?;
    let (mut worst, mut bad) = (0f64, 0u64);
    let mut fractions: Vec<u64> = Vec::new();
    for r in &pts {
        let f = r["touched_fraction"].as_f64().unwrap_or(f64::NAN).to_bits();
        if !fractions.contains(&f) {
            fractions.push(f);
        }
    }
    for f in fractions {
        let same: Vec<&&serde_json::Value> = pts
            .iter()
            .filter(|r| r["touched_fraction"].as_f64().map(f64::to_bits) == Some(f))
            .collect();
        let med = |field: &str| field_median(&same, field);
        let (m, c, g, a) = (
            med("mapped_ms"),
            med("copy_ms"),
            med("range_ms"),
            med("auto_ms"),
        );
        let vs = a / m.min(c).min(g);
        worst = worst.max(vs);
        let (point_bad, choices) = bad_and_choices(&same);
        bad += point_bad;
        writeln!(
            md,
            "| {}% | {m:.3} | {c:.3} | {g:.3} | {a:.3} | {} | **{vs:.3}** {} | {point_bad} |",
            f64::from_bits(f) * 100.0,
            choices.join(" / "),
            if vs <= 1.05 { "✓" } else { "✗" },
        )?;
    }
    writeln!(
        md,
        "\nWorst auto / best with a range hint: **{worst:.3}**; results checked: {bad} wrong."
    )?;
    Ok(())
}

/// Small multiples: one log–log panel per (table, unit), three curves each.
fn svg(panels: &[(String, Vec<Point>)]) -> String {
    let (pw, ph, cols) = (420.0, 280.0, 2usize);
    let rows = panels.len().div_ceil(cols);
    let (w, h) = (pw * cols as f64, ph * rows as f64 + 60.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="{w}" height="{h}" fill="white"/><text x="20" y="20" font-size="14">#[auto] vs fixed placements: gather time vs fraction touched (H200, log–log)</text>"#
    );
    let curves = [
        ("mapped", "#1f77b4", "none"),
        ("copy all first", "#d62728", "none"),
        ("#[auto]", "#2ca02c", "6,3"),
    ];
    for (i, (name, color, dash)) in curves.iter().enumerate() {
        let x = 20.0 + 150.0 * i as f64;
        s += &format!(
            r#"<line x1="{x}" y1="40" x2="{}" y2="40" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="44">{name}</text>"#,
            x + 24.0,
            x + 28.0
        );
    }
    for (n, (name, pts)) in panels.iter().enumerate() {
        let (ox, oy) = (pw * (n % cols) as f64, 60.0 + ph * (n / cols) as f64);
        let (l, r, t, b) = (ox + 60.0, ox + pw - 15.0, oy + 20.0, oy + ph - 35.0);
        let fx: Vec<f64> = pts.iter().map(|p| p.0.log10()).collect();
        let ys: Vec<f64> = pts
            .iter()
            .flat_map(|p| [p.1, p.2, p.3])
            .filter(|v| *v > 0.0)
            .map(f64::log10)
            .collect();
        let (x0, x1) = (
            fx.iter().cloned().fold(f64::INFINITY, f64::min),
            fx.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        );
        let (y0, y1) = (
            ys.iter().cloned().fold(f64::INFINITY, f64::min).floor(),
            ys.iter().cloned().fold(f64::NEG_INFINITY, f64::max).ceil(),
        );
        let px = |f: f64| l + (f.log10() - x0) / (x1 - x0).max(1e-9) * (r - l);
        let py = |ms: f64| b - (ms.max(1e-9).log10() - y0) / (y1 - y0).max(1e-9) * (b - t);
        s += &format!(
            r#"<text x="{l}" y="{}" font-size="12">{name}</text><line x1="{l}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{b}" stroke="black"/>"#,
            t - 6.0
        );
        let mut e = y0 as i32;
        while e <= y1 as i32 {
            let ms = 10f64.powi(e);
            s += &format!(
                r##"<text x="{}" y="{}" text-anchor="end">{ms} ms</text><line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="#ddd"/>"##,
                l - 4.0,
                py(ms) + 4.0,
                y = py(ms)
            );
            e += 1;
        }
        for p in pts {
            s += &format!(
                r#"<text x="{}" y="{}" text-anchor="middle">{}%</text>"#,
                px(p.0),
                b + 14.0,
                p.0 * 100.0
            );
        }
        for (i, (_, color, dash)) in curves.iter().enumerate() {
            let d: Vec<String> = pts
                .iter()
                .map(|p| {
                    let v = [p.1, p.2, p.3][i];
                    format!("{:.1},{:.1}", px(p.0), py(v))
                })
                .collect();
            s += &format!(
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
                d.join(" ")
            );
        }
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_ratio_the_sweep_and_the_plot() {
        let text = r#"{"impl":"berth","bench":"embedding","gbps":40.0,"mrows_per_s":78.1,"bad":0}
{"impl":"nvcc","bench":"embedding","gbps":41.0,"bad":0}
{"impl":"berth","bench":"auto_sweep","table_bytes":268435456,"unit_bytes":4,"touched_fraction":0.001,"k":67108,"mapped_ms":0.7,"copy_ms":5.0,"auto_ms":0.71,"choice":"Mapped","vs_best":1.01,"bad":0}
{"impl":"berth","bench":"auto_sweep","table_bytes":268435456,"unit_bytes":4,"touched_fraction":0.001,"k":67108,"mapped_ms":0.9,"copy_ms":5.0,"auto_ms":0.91,"choice":"Mapped","vs_best":1.01,"bad":0}
{"impl":"berth","bench":"auto_sweep","table_bytes":268435456,"unit_bytes":4,"touched_fraction":0.2,"k":13421772,"mapped_ms":130.0,"copy_ms":5.2,"auto_ms":5.9,"choice":"CopyWhole","vs_best":1.13,"bad":0}
"#;
        let mut md = String::new();
        let svg = render(&mut md, text).unwrap().expect("a plot");
        assert!(md.contains("**0.976**"), "{md}");
        assert!(md.contains("Worst auto / best: **1.135**"), "{md}");
        assert!(md.contains("target missed"), "{md}");
        assert!(svg.starts_with("<svg") && svg.matches("<polyline").count() == 3);
        assert!(svg.contains("256 MiB table, 4 B units"));
        // Two rounds of the first point make one row, with the medians (0.8, 0.81).
        assert_eq!(md.matches("| 256 MiB | 4 B | 0.1% |").count(), 1, "{md}");
        assert!(md.contains("| 0.800 | 5.000 | 0.810 | Mapped |"), "{md}");
        assert!(
            !md.contains("range hint"),
            "no range points, no range table"
        );
    }

    #[test]
    fn range_points_get_their_own_table_against_the_best_of_three() {
        let text = r#"{"impl":"berth","bench":"auto_sweep","table_bytes":268435456,"unit_bytes":4,"touched_fraction":0.001,"k":67108,"mapped_ms":0.7,"copy_ms":5.0,"auto_ms":0.71,"choice":"Mapped","vs_best":1.01,"bad":0}
{"impl":"berth","bench":"auto_range","table_bytes":1073741824,"touched_fraction":0.1,"k":26843545,"mapped_ms":2.2,"copy_ms":20.0,"range_ms":2.0,"auto_ms":2.02,"choice":"CopyRange","vs_best":1.01,"bad":0}
"#;
        let mut md = String::new();
        render(&mut md, text).unwrap();
        assert!(
            md.contains("| 10% | 2.200 | 20.000 | 2.000 | 2.020 | CopyRange | **1.010** ✓ | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("Worst auto / best with a range hint: **1.010**"),
            "{md}"
        );
    }
}
