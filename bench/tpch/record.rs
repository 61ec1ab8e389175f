//! The TPC-H section of `BENCHMARKS.md`, from `tpch.jsonl` (run.sh's `tpch` mode): the lines
//! of the `tpch` example (`--json`: one per query and placement, every answer checked against
//! the host's) and of `bench/tpch/anchor.py` (DuckDB, PyTorch, the link bound) at each scale
//! factor, in the same run. Per scale factor and query: berth's times raw, packed and warm,
//! the bytes each moved and their rate over the link, the ratios to each anchor, whether the
//! answers equal DuckDB's, and the targets met or not.

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use serde_json::Value;

/// The queries, in the order of the tables.
const QUERIES: [&str; 4] = ["q1", "q6", "q12", "q14"];

/// The link rate the anchor's bound assumes (bytes of the raw columns over it), GB/s; the
/// bound of a query the anchor does not time is computed from berth's raw bytes at this rate.
const LINK_GBPS: f64 = 55.0;

/// One berth line: a query in one placement at one scale factor.
struct Berth<'a> {
    /// `raw`, `packed` or `resident`: the placement asked for.
    placement: &'a str,
    /// The placement that ran (a warm run whose columns the budget does not hold runs packed).
    mode: &'a str,
    first_ms: f64,
    ms: f64,
    bytes_moved: f64,
    raw_bytes: f64,
    gbps: f64,
    checked: bool,
    answer: Vec<&'a str>,
}

/// Everything measured for one query at one scale factor.
#[derive(Default)]
struct Query<'a> {
    berth: Vec<Berth<'a>>,
    /// The anchor's lines by `impl` (`duckdb`, `torch_pinned`, …).
    anchors: Vec<(&'a str, &'a Value)>,
}

impl<'a> Query<'a> {
    fn placement(&self, p: &str) -> Option<&Berth<'a>> {
        self.berth.iter().find(|b| b.placement == p)
    }

    fn anchor(&self, imp: &str) -> Option<&'a Value> {
        self.anchors
            .iter()
            .find(|(i, _)| *i == imp)
            .map(|(_, v)| *v)
    }

    fn anchor_ms(&self, imp: &str) -> Option<f64> {
        self.anchor(imp)?["ms"].as_f64()
    }

    /// The link bound: the anchor's, else berth's raw bytes over [`LINK_GBPS`].
    fn link_bound_ms(&self) -> Option<f64> {
        self.anchor_ms("link_bound").or_else(|| {
            let raw = self.placement("raw")?;
            Some(raw.raw_bytes / (LINK_GBPS * 1e9) * 1e3)
        })
    }

    /// Whether every berth answer equals DuckDB's (`None` without a DuckDB line).
    fn equals_duckdb(&self) -> Option<bool> {
        let duck: Vec<&str> = self
            .anchor("duckdb")?
            .get("answer")?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        Some(!self.berth.is_empty() && self.berth.iter().all(|b| b.answer == duck))
    }
}

/// The section's rows: per scale factor (ascending) and query.
type Table<'a> = Vec<(f64, Vec<(&'static str, Query<'a>)>)>;

fn table<'a>(rows: &'a [Value]) -> Table<'a> {
    let mut sfs: Vec<f64> = rows
        .iter()
        .filter(|r| r.get("query").is_some())
        .filter_map(|r| r["sf"].as_f64())
        .collect();
    sfs.sort_by(f64::total_cmp);
    sfs.dedup();
    sfs.into_iter()
        .map(|sf| {
            let of_sf = |r: &&Value| r["sf"].as_f64() == Some(sf);
            let queries = QUERIES
                .iter()
                .map(|&q| {
                    let mut out = Query::default();
                    for r in rows.iter().filter(of_sf).filter(|r| r["query"] == q) {
                        if let Some(imp) = r["impl"].as_str() {
                            out.anchors.push((imp, r));
                        } else if let Some(mode) = r["mode"].as_str() {
                            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
                            out.berth.push(Berth {
                                placement: r["placement"].as_str().unwrap_or(mode),
                                mode,
                                first_ms: f("first_ms"),
                                ms: f("ms"),
                                bytes_moved: f("bytes_moved"),
                                raw_bytes: f("raw_bytes"),
                                gbps: f("gbps"),
                                checked: r["checked"] == true,
                                answer: r["answer"]
                                    .as_array()
                                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                                    .unwrap_or_default(),
                            });
                        }
                    }
                    (q, out)
                })
                .filter(|(_, q)| !q.berth.is_empty() || !q.anchors.is_empty())
                .collect();
            (sf, queries)
        })
        .collect()
}

/// `v` with `digits` decimals, or `–` when there is none.
fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

/// `a / b` when both are measured and `b` is not zero.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() && b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A speed-up `anchor / berth`, with `×`: in bold where berth is faster.
fn speedup(anchor: Option<f64>, berth: Option<f64>) -> String {
    match ratio(anchor, berth) {
        Some(r) if r > 1.0 => format!("**{r:.2}×**"),
        Some(r) => format!("{r:.2}×"),
        None => "–".into(),
    }
}

/// A target of the TPC-H benchmark: which queries, which placement, and the bound.
struct Target {
    what: &'static str,
    queries: &'static [&'static str],
    placement: &'static str,
    /// `AtMost(x)`: berth ms / link bound ms ≤ x; `AtLeast(x)`: DuckDB ms / berth ms ≥ x.
    bound: Bound,
}

enum Bound {
    AtMostLinkBound(f64),
    AtLeastDuckdb(f64),
}

const TARGETS: &[Target] = &[
    Target {
        what: "raw columns, cold: ≤ 1.15× the link bound",
        queries: &["q1", "q6"],
        placement: "raw",
        bound: Bound::AtMostLinkBound(1.15),
    },
    Target {
        what: "packed columns, cold: Q1 ≥ 8× DuckDB",
        queries: &["q1"],
        placement: "packed",
        bound: Bound::AtLeastDuckdb(8.0),
    },
    Target {
        what: "packed columns, cold: Q6 ≥ 2× DuckDB",
        queries: &["q6"],
        placement: "packed",
        bound: Bound::AtLeastDuckdb(2.0),
    },
    Target {
        what: "packed columns, cold: Q12 and Q14 ≥ 3× DuckDB",
        queries: &["q12", "q14"],
        placement: "packed",
        bound: Bound::AtLeastDuckdb(3.0),
    },
    Target {
        what: "warm: every query ≥ 30× DuckDB",
        queries: &QUERIES,
        placement: "resident",
        bound: Bound::AtLeastDuckdb(30.0),
    },
];

/// A target's outcome for one query at one scale factor: the measured ratio and whether it
/// meets the bound (`None`: not measured, or the warm run did not stay on the device).
fn outcome(t: &Target, q: &Query<'_>) -> (Option<f64>, Option<bool>) {
    let Some(b) = q.placement(t.placement) else {
        return (None, None);
    };
    match t.bound {
        Bound::AtMostLinkBound(x) => {
            let r = ratio(Some(b.ms), q.link_bound_ms());
            (r, r.map(|r| r <= x))
        }
        Bound::AtLeastDuckdb(x) => {
            // A warm run that fell back to packed columns is not a warm measurement.
            if b.mode != t.placement {
                return (None, None);
            }
            let r = ratio(q.anchor_ms("duckdb"), Some(b.ms));
            (r, r.map(|r| r >= x))
        }
    }
}

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    let table = table(&rows);
    writeln!(md, "\n## TPC-H over host-resident columns\n")?;
    writeln!(
        md,
        "The `tpch` example (`examples/src/bin/tpch.rs`, [docs/host-data.md](docs/host-data.md)): TPC-H queries 1, 6, 12 and 14 over `lineitem` columns generated into Arrow arrays in host memory, each in three placements: **raw** (the Arrow buffers shared in place, streamed by a pipelined launch), **packed** (bit-packed on the host, copied and decoded in the kernel), **warm** (the packed columns kept in device memory between queries). Raw and packed runs move their columns from host memory every time (cold for the data); times are medians of the repeats after a first run, which loads the module and fills the pools (its time is in the last table). Against it, same machine, same run (`bench/tpch/anchor.py`): DuckDB on its own in-memory tables, 16 threads; PyTorch copying the raw columns from pinned memory, then computing (Q1 and Q6); the link bound, the raw columns' bytes over {LINK_GBPS:.0} GB/s. Speed-ups are the anchor's time over berth's (above 1: berth is faster); every berth answer equals the host reference's (the run stops otherwise).\n"
    )?;
    writeln!(
        md,
        "| SF | query | raw ms | packed ms | warm ms | raw MB | packed MB | fewer bytes | raw GB/s | packed GB/s | answers = DuckDB |"
    )?;
    writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")?;
    for (sf, queries) in &table {
        for (name, q) in queries {
            let ms = |p| q.placement(p).map(|b| b.ms);
            let raw = q.placement("raw");
            let packed = q.placement("packed");
            let warm = match q.placement("resident") {
                Some(b) if b.mode != "resident" => {
                    format!("{} (streamed: {})", num(Some(b.ms), 2), b.mode)
                }
                Some(b) => num(Some(b.ms), 2),
                None => "–".into(),
            };
            let checked = if q.berth.iter().all(|b| b.checked) {
                ""
            } else {
                " (unchecked)"
            };
            let duck = match q.equals_duckdb() {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "not compared",
            };
            writeln!(
                md,
                "| {sf} | {} | {} | {} | {warm} | {} | {} | {} | {} | {} | {duck}{checked} |",
                name.to_uppercase(),
                num(ms("raw"), 2),
                num(ms("packed"), 2),
                num(raw.map(|b| b.bytes_moved / 1e6), 1),
                num(packed.map(|b| b.bytes_moved / 1e6), 1),
                match ratio(raw.map(|b| b.bytes_moved), packed.map(|b| b.bytes_moved)) {
                    Some(r) => format!("{r:.2}×"),
                    None => "–".into(),
                },
                num(raw.map(|b| b.gbps), 1),
                num(packed.map(|b| b.gbps), 1),
            )?;
        }
    }

    writeln!(
        md,
        "\nAgainst the anchors (times in ms; speed-ups are the anchor's time over berth's; raw / link bound is berth's time over the bound):\n"
    )?;
    writeln!(
        md,
        "| SF | query | DuckDB | PyTorch pinned | PyTorch pageable | PyTorch resident | link bound | raw / link bound | vs DuckDB: raw | packed | warm | vs PyTorch pinned: raw | packed | warm |"
    )?;
    writeln!(
        md,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for (sf, queries) in &table {
        for (name, q) in queries {
            let ms = |p| q.placement(p).map(|b| b.ms);
            let warm = q
                .placement("resident")
                .filter(|b| b.mode == "resident")
                .map(|b| b.ms);
            let (duck, pinned) = (q.anchor_ms("duckdb"), q.anchor_ms("torch_pinned"));
            writeln!(
                md,
                "| {sf} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                name.to_uppercase(),
                num(duck, 2),
                num(pinned, 2),
                num(q.anchor_ms("torch_pageable"), 2),
                num(q.anchor_ms("torch_resident"), 2),
                num(q.link_bound_ms(), 2),
                num(ratio(ms("raw"), q.link_bound_ms()), 2),
                speedup(duck, ms("raw")),
                speedup(duck, ms("packed")),
                speedup(duck, warm),
                speedup(pinned, ms("raw")),
                speedup(pinned, ms("packed")),
                speedup(pinned, warm),
            )?;
        }
    }

    writeln!(md, "\nTargets (on the H200, same run):\n")?;
    writeln!(md, "| target | SF | query | measured | met |")?;
    writeln!(md, "|---|---:|---|---:|---|")?;
    let (mut met, mut all) = (0, 0);
    for t in TARGETS {
        for (sf, queries) in &table {
            for (name, q) in queries.iter().filter(|(n, _)| t.queries.contains(n)) {
                let (r, ok) = outcome(t, q);
                let streamed = q
                    .placement(t.placement)
                    .filter(|b| b.mode != t.placement)
                    .map(|b| format!("streamed {} (device budget)", b.mode));
                let measured = match (t.bound.is_link(), r) {
                    (_, None) => streamed.unwrap_or_else(|| "–".to_owned()),
                    (true, Some(r)) => format!("{r:.2}× the bound"),
                    (false, Some(r)) => format!("{r:.2}× DuckDB"),
                };
                let verdict = match ok {
                    Some(true) => "met",
                    Some(false) => "**not met**",
                    None => "not measured",
                };
                all += 1;
                met += usize::from(ok == Some(true));
                writeln!(
                    md,
                    "| {} | {sf} | {} | {measured} | {verdict} |",
                    t.what,
                    name.to_uppercase()
                )?;
            }
        }
    }
    writeln!(md, "\n{met} of {all} met.")?;

    writeln!(
        md,
        "\nFirst runs (ms; module loaded, pools filled, and for the warm placement the packed columns brought into device memory):\n"
    )?;
    writeln!(md, "| SF | query | raw | packed | warm |")?;
    writeln!(md, "|---:|---|---:|---:|---:|")?;
    for (sf, queries) in &table {
        for (name, q) in queries.iter().filter(|(_, q)| !q.berth.is_empty()) {
            let first = |p| q.placement(p).map(|b| b.first_ms);
            writeln!(
                md,
                "| {sf} | {} | {} | {} | {} |",
                name.to_uppercase(),
                num(first("raw"), 2),
                num(first("packed"), 2),
                num(first("resident"), 2),
            )?;
        }
    }
    let notes: Vec<&str> = rows.iter().filter_map(|r| r["note"].as_str()).collect();
    if !notes.is_empty() {
        writeln!(md, "\nNotes of the run:\n")?;
        for n in notes {
            writeln!(md, "- {n}")?;
        }
    }
    Ok(())
}

impl Bound {
    fn is_link(&self) -> bool {
        matches!(self, Bound::AtMostLinkBound(_))
    }
}

#[cfg(test)]
mod tests {
    use super::write;

    /// A berth line as `tpch --json` prints it.
    fn berth(
        q: &str,
        placement: &str,
        mode: &str,
        sf: f64,
        ms: f64,
        moved: u64,
        answer: &str,
    ) -> String {
        let raw = 1_000_000_000u64;
        serde_json::json!({
            "answer": [answer], "bits": ["ShipDate:12"], "bytes_moved": moved, "checked": true,
            "first_ms": ms * 3.0, "gbps": moved as f64 / (ms * 1e-3) / 1e9, "mode": mode,
            "placement": placement, "ms": ms, "query": q, "raw_bytes": raw, "rows": 60175, "sf": sf,
        })
        .to_string()
    }

    /// An anchor line as `anchor.py` prints it.
    fn anchor(imp: &str, q: &str, sf: f64, ms: f64, answer: Option<&str>) -> String {
        let mut v = serde_json::json!({ "impl": imp, "query": q, "sf": sf, "ms": ms, "bytes": 1_000_000_000u64 });
        if let Some(a) = answer {
            v["answer"] = serde_json::json!([a]);
            v["threads"] = 16.into();
        }
        v.to_string()
    }

    /// The rows of the section's table whose first cells are `sf` and `query`.
    fn rows<'a>(md: &'a str, sf: &str, q: &str) -> Vec<&'a str> {
        let lead = format!("| {sf} | {q} |");
        md.lines().filter(|l| l.starts_with(&lead)).collect()
    }

    #[test]
    fn renders_times_bytes_ratios_answers_and_targets() {
        let mut lines = vec![
            r#"{"note":"backend Cuda, sf 10"}"#.to_owned(),
            r#"{"s":2.5,"step":"generate","what":"60175 lineitem rows"}"#.to_owned(),
            // Q6: raw at the link bound (20 ms for 1 GB at 50 GB/s), packed 5× fewer bytes.
            berth("q6", "raw", "raw", 10.0, 20.0, 1_000_000_000, "1.5"),
            berth("q6", "packed", "packed", 10.0, 5.0, 200_000_000, "1.5"),
            berth("q6", "resident", "resident", 10.0, 0.5, 0, "1.5"),
            // Q1: its warm run fell back to packed columns; its answer differs from DuckDB's.
            berth("q1", "raw", "raw", 10.0, 30.0, 1_000_000_000, "A F 2"),
            berth("q1", "packed", "packed", 10.0, 10.0, 200_000_000, "A F 2"),
            berth("q1", "resident", "packed", 10.0, 10.0, 200_000_000, "A F 2"),
            anchor("duckdb", "q1", 10.0, 100.0, Some("A F 3")),
            anchor("duckdb", "q6", 10.0, 30.0, Some("1.5")),
            anchor("torch_pinned", "q6", 10.0, 40.0, None),
            anchor("torch_pageable", "q6", 10.0, 200.0, None),
            anchor("torch_resident", "q6", 10.0, 1.0, None),
            anchor("link_bound", "q6", 10.0, 18.18, None),
            // SF 30: berth alone (the anchor skipped).
            berth("q14", "raw", "raw", 30.0, 60.0, 3_000_000_000, "7 9"),
            r#"{"note":"tpch anchor skipped: needs duckdb, numpy and tpchgen-cli"}"#.to_owned(),
        ];
        let mut md = String::new();
        write(&mut md, &lines.join("\n")).unwrap();

        let q6 = rows(&md, "10", "Q6");
        assert_eq!(q6.len(), 3, "berth, anchors, first runs: {md}");
        assert!(
            q6[0].contains("| 20.00 | 5.00 | 0.50 | 1000.0 | 200.0 | 5.00× | 50.0 | 40.0 | yes |"),
            "{}",
            q6[0]
        );
        // DuckDB 30 ms: 1.5× raw, 6× packed, 60× warm; PyTorch pinned 40 ms: 2×, 8×, 80×.
        assert!(
            q6[1].contains("| 30.00 | 40.00 | 200.00 | 1.00 | 18.18 | 1.10 | **1.50×** | **6.00×** | **60.00×** | **2.00×** | **8.00×** | **80.00×** |"),
            "{}",
            q6[1]
        );
        let q1 = rows(&md, "10", "Q1");
        assert!(q1[0].contains("10.00 (streamed: packed)"), "{}", q1[0]);
        assert!(q1[0].ends_with("| **no** |"), "{}", q1[0]);
        // Q1's link bound comes from its raw bytes: 1 GB / 55 GB/s.
        assert!(q1[1].contains("| 18.18 | 1.65 |"), "{}", q1[1]);
        let q14 = rows(&md, "30", "Q14");
        assert!(q14[0].ends_with("| not compared |"), "{}", q14[0]);

        let target = |what: &str, sf: &str, q: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {what} | {sf} | {q} |")))
                .unwrap_or_else(|| panic!("no target row {what} {sf} {q}: {md}"))
                .to_owned()
        };
        let link = "raw columns, cold: ≤ 1.15× the link bound";
        assert!(target(link, "10", "Q6").ends_with("| 1.10× the bound | met |"));
        assert!(target(link, "10", "Q1").ends_with("| 1.65× the bound | **not met** |"));
        let q6_packed = "packed columns, cold: Q6 ≥ 2× DuckDB";
        assert!(target(q6_packed, "10", "Q6").ends_with("| 6.00× DuckDB | met |"));
        let q1_packed = "packed columns, cold: Q1 ≥ 8× DuckDB";
        assert!(target(q1_packed, "10", "Q1").ends_with("| 10.00× DuckDB | met |"));
        let warm = "warm: every query ≥ 30× DuckDB";
        assert!(target(warm, "10", "Q6").ends_with("| 60.00× DuckDB | met |"));
        // A warm run that streamed is no warm measurement.
        assert!(
            target(warm, "10", "Q1")
                .ends_with("| streamed packed (device budget) | not measured |")
        );
        assert!(target(warm, "30", "Q14").ends_with("| – | not measured |"));
        assert!(md.contains("\n4 of 8 met.\n"), "{md}");
        assert!(md.contains("- tpch anchor skipped"), "{md}");

        // A faster DuckDB turns a met target into one not met.
        lines[9] = anchor("duckdb", "q6", 10.0, 5.0, Some("1.5"));
        let mut md = String::new();
        write(&mut md, &lines.join("\n")).unwrap();
        assert!(
            md.contains(
                "| packed columns, cold: Q6 ≥ 2× DuckDB | 10 | Q6 | 1.00× DuckDB | **not met** |"
            ),
            "{md}"
        );
    }

    #[test]
    fn a_line_that_is_not_json_is_an_error() {
        assert!(write(&mut String::new(), "{not json").is_err());
    }
}
