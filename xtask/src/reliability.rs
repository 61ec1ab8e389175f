//! `RELIABILITY.md`: the latest figures of every reliability check, rendered from the raw
//! results kept in `bench/results/reliability/`.
//!
//! The raw files are the record; the Markdown is regenerated from them whenever one changes:
//! - `soak.jsonl`: the last GPU soak (`.gpu/run.sh soak`), with a `{"run":..}` line first;
//! - `sanitize.jsonl` / `sanitize.log`: compute-sanitizer results per (tool, binary), merged
//!   over runs (`.gpu/run.sh sanitize TOOL` may run one tool, or a few binaries, at a time);
//! - `host.jsonl`: the host memory checks of the simulator (`cargo xtask asan`, `cargo xtask
//!   valgrind`), one line per (tool, binary), merged likewise.
//!
//! `cargo xtask record DIR` brings in a GPU run's `soak.jsonl`, `sanitize.jsonl` and
//! `sanitize.log`; `cargo xtask asan` and `valgrind` write `host.jsonl` themselves.

use crate::{Result, workspace_root};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the raw results live.
pub fn raw_dir(root: &Path) -> PathBuf {
    root.join("bench/results/reliability")
}

/// The run description of a GPU run's `machine.txt`: date, commit, GPU and host lines.
fn run_line(machine: &str) -> Value {
    let field = |k: &str| {
        machine
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}: ")))
            .unwrap_or("unknown")
            .to_owned()
    };
    serde_json::json!({"run": {
        "date": field("date"),
        "commit": field("commit"),
        "gpu": field("gpu"),
        "host": field("host"),
    }})
}

/// JSON lines of `text` (lines that do not parse are skipped).
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l.trim()).ok())
        .collect()
}

/// Merge `new` rows into `old` by the key fields: a new row replaces the old row of the same
/// key, unless it says the check did not run.
fn merge(old: &str, new: &[Value], key: &[&str]) -> String {
    let key_of = |v: &Value| -> Vec<String> { key.iter().map(|k| v[*k].to_string()).collect() };
    let mut rows: BTreeMap<Vec<String>, Value> = BTreeMap::new();
    for v in lines(old) {
        rows.insert(key_of(&v), v);
    }
    for v in new {
        let k = key_of(v);
        if v["result"] == "not run" && rows.contains_key(&k) {
            continue;
        }
        rows.insert(k, v.clone());
    }
    rows.values().map(|v| format!("{v}\n")).collect()
}

/// The sections of a `sanitize.log` (each starts with `=== TOOL BINARY: result`), by their
/// heading up to the colon.
fn log_sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("=== ")
            && let Some((key, _)) = h.split_once(": ")
        {
            if let Some((k, s)) = current.take() {
                out.insert(k, s);
            }
            current = Some((key.to_owned(), String::new()));
        }
        if let Some((_, s)) = &mut current {
            s.push_str(line);
            s.push('\n');
        }
    }
    if let Some((k, s)) = current {
        out.insert(k, s);
    }
    out
}

/// Bring a GPU run's reliability files into the record; whether there were any.
pub fn record(dir: &Path, machine: &str) -> Result<bool> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let (soak, sanitize, log) = (
        read("soak.jsonl"),
        read("sanitize.jsonl"),
        read("sanitize.log"),
    );
    if soak.trim().is_empty() && sanitize.trim().is_empty() {
        return Ok(false);
    }
    let root = workspace_root();
    let raw = raw_dir(&root);
    std::fs::create_dir_all(&raw)?;
    let run = run_line(machine);
    if !soak.trim().is_empty() {
        let mut text = format!("{run}\n");
        for v in lines(&soak) {
            writeln!(text, "{v}")?;
        }
        std::fs::write(raw.join("soak.jsonl"), text)?;
    }
    if !sanitize.trim().is_empty() {
        let date = &run["run"]["date"];
        let new: Vec<Value> = lines(&sanitize)
            .into_iter()
            .map(|mut v| {
                v["date"] = date.clone();
                v
            })
            .collect();
        let old = std::fs::read_to_string(raw.join("sanitize.jsonl")).unwrap_or_default();
        std::fs::write(
            raw.join("sanitize.jsonl"),
            merge(&old, &new, &["sanitize", "binary"]),
        )?;
        let mut sections =
            log_sections(&std::fs::read_to_string(raw.join("sanitize.log")).unwrap_or_default());
        sections.extend(log_sections(&log));
        std::fs::write(
            raw.join("sanitize.log"),
            sections.into_values().collect::<String>(),
        )?;
    }
    render(&root)?;
    Ok(true)
}

/// Record host-check rows (`cargo xtask asan` / `valgrind`) and render.
pub fn record_host(rows: &[Value]) -> Result {
    let root = workspace_root();
    let raw = raw_dir(&root);
    std::fs::create_dir_all(&raw)?;
    let old = std::fs::read_to_string(raw.join("host.jsonl")).unwrap_or_default();
    std::fs::write(
        raw.join("host.jsonl"),
        merge(&old, rows, &["tool", "binary"]),
    )?;
    render(&root)
}

/// Write `RELIABILITY.md` from the raw files.
pub fn render(root: &Path) -> Result {
    let raw = raw_dir(root);
    let read = |f: &str| std::fs::read_to_string(raw.join(f)).unwrap_or_default();
    let md = markdown(
        &read("soak.jsonl"),
        &read("sanitize.jsonl"),
        &read("host.jsonl"),
    )?;
    std::fs::write(root.join("RELIABILITY.md"), md)?;
    eprintln!("wrote RELIABILITY.md");
    Ok(())
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".to_owned(),
        v => v.to_string(),
    }
}

fn mib(v: &Value) -> String {
    v.as_f64()
        .map_or("—".to_owned(), |b| format!("{:.1}", b / 1048576.0))
}

fn markdown(soak: &str, sanitize: &str, host: &str) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# Reliability\n")?;
    writeln!(
        md,
        "The latest figures of berth's reliability checks, written by `cargo xtask record` (GPU \
         runs) and `cargo xtask asan` / `valgrind` (host runs) from the raw results in \
         `bench/results/reliability/`. What each check does and how to run it: \
         `docs/reliability.md`. The macro fuzz tests run in CI with every `cargo test`.\n"
    )?;
    soak_section(&mut md, soak)?;
    sanitize_section(&mut md, sanitize)?;
    host_section(&mut md, host)?;
    Ok(md)
}

fn soak_section(md: &mut String, soak: &str) -> Result {
    writeln!(md, "## Soak on the GPU\n")?;
    let rows = lines(soak);
    let Some(run) = rows.iter().find(|v| v["run"].is_object()) else {
        writeln!(
            md,
            "Not run on the GPU yet: `.gpu/run.sh soak` (docs/reliability.md).\n"
        )?;
        return Ok(());
    };
    let run = &run["run"];
    let backend = rows
        .iter()
        .find_map(|v| v["backend"].as_str())
        .unwrap_or("unknown");
    writeln!(
        md,
        "`tests/tests/soak.rs` by `.gpu/run.sh soak`. Run: {}, commit {}, {} ({}), backend {backend}.\n",
        s(&run["date"]),
        s(&run["commit"]),
        s(&run["gpu"]),
        s(&run["host"])
    )?;
    let of = |kind: &'static str| rows.iter().filter(move |v| v["soak"] == kind);
    writeln!(md, "| launches | count | µs per launch | wrong elements |")?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for v in of("launches") {
        writeln!(
            md,
            "| {} | {} | {} | {} |",
            s(&v["kind"]),
            s(&v["launches"]),
            s(&v["per_launch_us"]),
            s(&v["bad"])
        )?;
    }
    writeln!(
        md,
        "\n| memory kind | allocate/free cycles | of them driver allocations | seconds |"
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for v in of("alloc") {
        writeln!(
            md,
            "| {} | {} | {} | {} |",
            s(&v["kind"]),
            s(&v["cycles"]),
            s(&v["driver_allocations"]),
            s(&v["seconds"])
        )?;
    }
    writeln!(
        md,
        "\n| soak | device free before → after (MiB) | device lost (MiB) | resident set before → after (MiB) | grown (MiB) | flat |"
    )?;
    writeln!(md, "|---|---|---:|---|---:|---|")?;
    for v in of("memory") {
        writeln!(
            md,
            "| {} | {} → {} | {} | {} → {} | {} | {} |",
            s(&v["test"]),
            mib(&v["device_free_before"]),
            mib(&v["device_free_after"]),
            mib(&v["device_lost"]),
            mib(&v["rss_before"]),
            mib(&v["rss_after"]),
            mib(&v["rss_grown"]),
            if v["flat"] == true { "yes" } else { "**no**" }
        )?;
    }
    writeln!(
        md,
        "\nMeasured after a warm-up, with the pools emptied and the device synchronised at both \
         ends; tolerances {} MiB of device memory and {} MiB of resident memory.\n",
        of("memory")
            .next()
            .map_or("—".into(), |v| mib(&v["device_tolerance"])),
        of("memory")
            .next()
            .map_or("—".into(), |v| mib(&v["rss_tolerance"]))
    )?;
    writeln!(
        md,
        "Raw lines: [`bench/results/reliability/soak.jsonl`](bench/results/reliability/soak.jsonl).\n"
    )?;
    Ok(())
}

const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];

fn sanitize_section(md: &mut String, sanitize: &str) -> Result {
    writeln!(md, "## compute-sanitizer on the GPU\n")?;
    let rows = lines(sanitize);
    if rows.is_empty() {
        writeln!(
            md,
            "Not run on the GPU yet: `.gpu/run.sh sanitize TOOL` (docs/reliability.md).\n"
        )?;
        return Ok(());
    }
    writeln!(
        md,
        "Each tool over every GPU test binary (all its tests) and every example, by \
         `.gpu/run.sh sanitize TOOL`. A cell: the result, the sanitizer's error count, of which \
         API errors (a driver call that returned an error: the tests provoke some on purpose, \
         e.g. an allocation larger than the GPU), and the seconds it took. A binary passes with \
         exit status 0 and no error but API errors. The tests that make a kernel trap on purpose \
         run in a child process, which is not sanitized (their fault is the point).\n"
    )?;
    let mut binaries: Vec<String> = rows.iter().map(|v| s(&v["binary"])).collect();
    binaries.sort_by_key(|b| (!b.starts_with("tests/"), b.clone()));
    binaries.dedup();
    writeln!(md, "| binary | {} |", TOOLS.join(" | "))?;
    writeln!(md, "|---|{}", "---|".repeat(TOOLS.len()))?;
    let (mut pass, mut total, mut device_errors) = (0, 0, 0u64);
    for b in &binaries {
        let mut line = format!("| {b} |");
        for t in TOOLS {
            let cell = match rows
                .iter()
                .find(|v| v["sanitize"] == t && s(&v["binary"]) == *b)
            {
                None => "—".to_owned(),
                Some(v) if v["result"] == "not run" => "not run".to_owned(),
                Some(v) => {
                    total += 1;
                    let (e, a) = (
                        v["errors"].as_u64().unwrap_or(0),
                        v["api_errors"].as_u64().unwrap_or(0),
                    );
                    device_errors += e.saturating_sub(a);
                    let r = s(&v["result"]);
                    if r == "pass" || r == "no-cuda" {
                        pass += 1;
                    }
                    let r = if r == "pass" || r == "no-cuda" {
                        r
                    } else {
                        format!("**{r}**")
                    };
                    format!("{r} · {e} ({a} API) · {} s", s(&v["seconds"]))
                }
            };
            line += &format!(" {cell} |");
        }
        writeln!(md, "{line}")?;
    }
    let mut dates: Vec<String> = rows.iter().map(|v| s(&v["date"])).collect();
    dates.sort();
    dates.dedup();
    let mut commits: Vec<String> = rows.iter().map(|v| s(&v["commit"])).collect();
    commits.sort();
    commits.dedup();
    writeln!(
        md,
        "\n{pass} of {total} runs pass; {device_errors} errors other than API errors. Runs: {}; commits: {}. \
         The sanitizer's reports per run: `bench/results/reliability/sanitize.log`.\n",
        dates.join(", "),
        commits.join(", ")
    )?;
    Ok(())
}

fn host_section(md: &mut String, host: &str) -> Result {
    writeln!(md, "## Host memory checks of the simulator\n")?;
    let rows = lines(host);
    if rows.is_empty() {
        writeln!(
            md,
            "Not run yet: `cargo xtask asan`, `cargo xtask valgrind` (docs/reliability.md).\n"
        )?;
        return Ok(());
    }
    writeln!(
        md,
        "The simulator is host code with its own `unsafe` (its memory, streams and kernel \
         threads): the runtime's, the device crate's and the simulator test binaries' tests under \
         AddressSanitizer (`cargo xtask asan`) and valgrind's memcheck (`cargo xtask valgrind`), \
         on the build machine.\n"
    )?;
    writeln!(
        md,
        "| tool | binary | result | tests passed | failed | checker errors | seconds | date | commit |"
    )?;
    writeln!(md, "|---|---|---|---:|---:|---:|---:|---|---|")?;
    for v in &rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s(&v["tool"]),
            s(&v["binary"]),
            s(&v["result"]),
            s(&v["passed"]),
            s(&v["failed"]),
            s(&v["errors"]),
            s(&v["seconds"]),
            s(&v["date"]),
            s(&v["commit"])
        )?;
    }
    let mut commands: Vec<String> = rows
        .iter()
        .map(|v| format!("{}    # {}", s(&v["command"]), s(&v["checker"])))
        .collect();
    commands.sort();
    commands.dedup();
    writeln!(md, "\nCommands:\n\n```")?;
    for c in commands {
        writeln!(md, "{c}")?;
    }
    writeln!(md, "```\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_replaces_by_key_but_keeps_rows_a_run_skipped() {
        let old = "{\"sanitize\":\"memcheck\",\"binary\":\"tests/gpu\",\"result\":\"timeout\"}\n\
                   {\"sanitize\":\"memcheck\",\"binary\":\"tests/queue\",\"result\":\"pass\"}\n";
        let new = [
            json!({"sanitize":"memcheck","binary":"tests/gpu","result":"pass"}),
            json!({"sanitize":"memcheck","binary":"tests/queue","result":"not run"}),
            json!({"sanitize":"racecheck","binary":"tests/gpu","result":"pass"}),
        ];
        let merged = lines(&merge(old, &new, &["sanitize", "binary"]));
        assert_eq!(merged.len(), 3);
        let find = |t: &str, b: &str| {
            merged
                .iter()
                .find(|v| v["sanitize"] == t && v["binary"] == b)
                .map(|v| s(&v["result"]))
        };
        assert_eq!(find("memcheck", "tests/gpu").as_deref(), Some("pass"));
        assert_eq!(find("memcheck", "tests/queue").as_deref(), Some("pass"));
        assert_eq!(find("racecheck", "tests/gpu").as_deref(), Some("pass"));
    }

    #[test]
    fn log_sections_are_keyed_by_tool_and_binary() {
        let log = "=== memcheck tests/gpu: pass (exit 0)\nline a\n=== memcheck example stream --gib 0.25: fail (exit 1)\nline b\n";
        let sections = log_sections(log);
        assert_eq!(
            sections.keys().collect::<Vec<_>>(),
            ["memcheck example stream --gib 0.25", "memcheck tests/gpu"]
        );
        assert!(sections["memcheck tests/gpu"].ends_with("line a\n"));
    }

    #[test]
    fn markdown_tables_every_part() {
        let soak = [
            json!({"run":{"date":"2026-12-01","commit":"abc","gpu":"H200","host":"Linux"}}),
            json!({"soak":"launches","kind":"plain","launches":40000,"per_launch_us":9.5,"bad":0}),
            json!({"soak":"alloc","kind":"device","cycles":10000,"driver_allocations":10000,"seconds":1.2}),
            json!({"soak":"memory","test":"launches","device_free_before":1048576000,"device_free_after":1048576000,"device_lost":0,"rss_before":1,"rss_after":2,"rss_grown":1,"device_tolerance":8388608,"rss_tolerance":33554432,"flat":true}),
        ]
        .map(|v| v.to_string())
        .join("\n");
        let sanitize = json!({"sanitize":"memcheck","binary":"tests/gpu","result":"pass","errors":2,"api_errors":2,"seconds":100,"date":"d","commit":"c"}).to_string();
        let host = json!({"tool":"asan","binary":"runtime","result":"pass","passed":10,"failed":0,"errors":0,"seconds":3,"date":"d","commit":"c","command":"cargo xtask asan"}).to_string();
        let md = markdown(&soak, &sanitize, &host).unwrap();
        assert!(md.contains("| plain | 40000 | 9.5 | 0 |"), "{md}");
        assert!(md.contains("| device | 10000 | 10000 | 1.2 |"), "{md}");
        assert!(md.contains("| launches | 1000.0 → 1000.0 | 0.0 |"), "{md}");
        assert!(
            md.contains("| tests/gpu | pass · 2 (2 API) · 100 s | — | — | — |"),
            "{md}"
        );
        assert!(
            md.contains("1 of 1 runs pass; 0 errors other than API errors"),
            "{md}"
        );
        assert!(
            md.contains("| asan | runtime | pass | 10 | 0 | 0 | 3 |"),
            "{md}"
        );
    }
}
