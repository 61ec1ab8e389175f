//! The hot tier section of `BENCHMARKS.md`, from `features.jsonl` (run.sh's `features` mode):
//! the `features` example's lines (`--json`: one per Zipf exponent for the tier, and one for
//! the same law read without a tier, `--baseline`) and `bench/features/anchor.py`'s (PyTorch's
//! CPU gather into pinned memory and its copy, the whole table gathered on the GPU where it
//! fits, the hit fraction a tier of the hottest rows would get), in the same run. Per
//! exponent: berth's rate and hit rate, the ratios to PyTorch's usual path and to the split
//! bound, and the targets met or not.

use std::fmt::Write as _;

/// How a drifting hot set's recovery is judged (the `features` example's rules).
#[path = "drift.rs"]
mod drift;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use serde_json::Value;

/// The targets over PyTorch's usual path, by Zipf exponent.
const TARGETS: [(f64, f64); 3] = [(0.0, 1.5), (0.8, 4.0), (1.0, 8.0)];

/// The target over the split bound, at every exponent.
const BOUND_TARGET: f64 = 0.7;

/// The steady-state line of `imp` for Zipf exponent `zipf` (not one whose hot set moves).
fn line<'a>(rows: &'a [Value], imp: &str, zipf: f64) -> Option<&'a Value> {
    rows.iter().find(|r| {
        r["impl"] == imp
            && !drifting(r)
            && r["zipf"].as_f64().is_some_and(|z| (z - zipf).abs() < 1e-9)
    })
}

/// Whether `r` is a run whose hot set moves (`--drift-every`).
fn drifting(r: &Value) -> bool {
    r["drift_every"].as_u64().is_some_and(|d| d > 0)
}

/// The target for the batches a drifting hot set takes to be followed.
const DRIFT_TARGET: u64 = 20;

fn mrows(v: Option<&Value>) -> Option<f64> {
    v?["mrows_s"].as_f64()
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// A share as a percentage with one decimal, or "–".
fn percent(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1}%", 100.0 * v))
}

/// Write the section (nothing without a berth line).
pub fn write(md: &mut String, text: &str) -> Result {
    let rows = lines(text)?;
    // The runs at other row widths than the main one (the width of most tier runs) go to a
    // table of their own.
    let main_dim = main_dim(&rows);
    let (width_rows, rows): (Vec<Value>, Vec<Value>) = rows
        .into_iter()
        .partition(|r| r["dim"].as_u64().is_some_and(|d| Some(d) != main_dim));
    // The runs with every batch staged whole go to their own table, beside the others, and
    // so do the runs whose budget holds the whole table.
    let (whole_rows, rows): (Vec<Value>, Vec<Value>) =
        rows.into_iter().partition(|r| r["whole_batches"] == true);
    let (fits_rows, rows): (Vec<Value>, Vec<Value>) = rows
        .into_iter()
        .partition(|r| r["model_choice"] == "Resident");
    let mut zipfs: Vec<f64> = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && !drifting(r))
        .filter_map(|r| r["zipf"].as_f64())
        .collect();
    zipfs.sort_by(f64::total_cmp);
    zipfs.dedup();
    let Some(first) = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier")
        .min_by_key(|r| drifting(r))
    else {
        return Ok(());
    };
    writeln!(
        md,
        "\n## Hot tier: skewed gathers from a table larger than the budget\n"
    )?;
    writeln!(
        md,
        "The `features` example (`docs/hot-tier.md`): a {} GiB host table of {}-float rows ({}), a device budget of {:.1} GiB, batches of {} ids drawn from a Zipf law (ranks scattered over the table), {} batches to fill the tier untimed, then {} timed back to back (gathers and refreshes, every {} batches; their ids drawn before the first, as a loader has them ready, each batch into an output of its own, every row checked against the host after the last). PyTorch's usual path (`bench/features/anchor.py`, same run): CPU `index_select` with 16 threads into pinned memory, then a non-blocking copy. {} (`--host-share`). Without a tier: the same ids, every row read in place by the GPU, or every row gathered by host threads. Hit rate (berth): the share of the second half's rows the gather kernels read from device memory, as the GPU counts them (`HotTier::gather_reads`; a row captured on its miss is read from device memory from the next batch on). Rows requested before: the share of the second half's lookups whose row an earlier lookup of the run (warmup included) had requested; a row never requested before misses in any tier, so no policy's hit rate exceeds it. The split bound: the hit fraction of a tier of the hottest rows (the anchor's) at the rate of a gather from the whole table on the GPU, and the rest at berth's faster rate for the uniform law without a tier.\n",
        first["table_gib"].as_f64().unwrap_or(0.0),
        first["dim"],
        match first["table"].as_str() {
            Some("managed") =>
                "managed memory kept on the host and read in place by the GPU: `--table managed`",
            Some("pinned") => "pinned memory mapped page by page: `--table pinned`",
            _ => "pinned memory mapped page by page",
        },
        first["budget_bytes"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64,
        first["batch"],
        first["warmup"],
        first["batches"],
        first["refresh_every"],
        match first["host_share"].as_f64() {
            Some(s) if s > 0.0 => format!(
                "Host threads gather a share of {s} of the rows not resident into pinned memory while the GPU reads the others in place"
            ),
            _ => "The GPU reads every row not resident in place".to_owned(),
        },
    )?;
    writeln!(
        md,
        "| Zipf s | berth, M rows/s | hit rate (berth) | rows requested before | hit fraction (hottest rows) | PyTorch CPU gather + copy | berth / PyTorch | target | without a tier: in place | without a tier: host threads | whole table on the GPU | split bound | berth / bound | rows right |"
    )?;
    writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"
    )?;
    let mut bounds = Vec::new();
    for &z in &zipfs {
        let berth = line(&rows, "berth_hot_tier", z);
        let torch = line(&rows, "torch_cpu_gather_pinned_copy", z);
        let whole = mrows(line(&rows, "torch_whole_table_on_gpu", z));
        let plain = mrows(line(&rows, "berth_mapped_only", z));
        let hosted = mrows(line(&rows, "berth_host_gathered", z));
        let hit_ideal = torch.and_then(|t| t["hit_fraction_tier"].as_f64());
        let b = mrows(berth);
        let vs_torch = b.zip(mrows(torch)).map(|(b, t)| b / t);
        let target = TARGETS
            .iter()
            .find(|(s, _)| (s - z).abs() < 1e-9)
            .map(|&(_, t)| t);
        let target_cell = match (target, vs_torch) {
            (Some(t), Some(r)) => format!("≥ {t}×: {}", if r >= t { "✓" } else { "✗" }),
            (Some(t), None) => format!("≥ {t}×"),
            (None, _) => "–".into(),
        };
        let bound = split_bound(&rows, z);
        bounds.push((z, bound));
        let vs_bound = b.zip(bound).map(|(b, x)| b / x);
        let ok = [
            berth.map(|v| &v["ok"]),
            line(&rows, "berth_mapped_only", z).map(|v| &v["ok"]),
            line(&rows, "berth_host_gathered", z).map(|v| &v["ok"]),
        ]
        .into_iter()
        .flatten()
        .all(|v| v == true);
        writeln!(
            md,
            "| {z} | {} | {} | {} | {} | {} | {} | {target_cell} | {} | {} | {} | {} | {} | {} |",
            cell(b, 1),
            cell(berth.and_then(hit_late).map(|h| 100.0 * h), 1) + "%",
            percent(berth.and_then(|v| v["requested_before_second_half"].as_f64())),
            cell(hit_ideal.map(|h| 100.0 * h), 1) + "%",
            cell(mrows(torch), 1),
            cell(vs_torch, 2).to_string() + "×",
            cell(plain, 1),
            cell(hosted, 1),
            cell(whole, 0),
            cell(bound, 0),
            cell(vs_bound, 2).to_string()
                + if vs_bound.is_some_and(|r| r >= BOUND_TARGET) {
                    " ✓"
                } else if vs_bound.is_some() {
                    " ✗"
                } else {
                    ""
                },
            if ok { "yes" } else { "**no**" },
        )?;
    }
    graph(md, &rows)?;
    widths(md, &rows, &width_rows)?;
    model(md, &rows)?;
    fits(md, &rows, &fits_rows)?;
    whole(md, &rows, &whole_rows)?;
    queued(md, &rows, &bounds)?;
    views(md, &rows)?;
    bags(md, &rows)?;
    drift(md, &rows)?;
    refreshes(md, &rows)?;
    link(md, &rows)
}

/// A run of the laws at other row widths alone (`BERTH_FEATURES_MAIN=0`, the widths' lines
/// only): its own section, each width against its own anchor (nothing without a tier line).
pub fn write_widths(md: &mut String, text: &str) -> Result {
    let rows = lines(text)?;
    let Some(first) = rows.iter().find(|r| r["impl"] == "berth_hot_tier") else {
        return Ok(());
    };
    run_alone(md, "row widths", first, " with rows of several widths")?;
    widths(md, &[], &rows)?;
    views(md, &rows)?;
    bags(md, &rows)
}

/// A drifting hot set run alone (`BERTH_FEATURES_MAIN=0` with the drift on, the drift's lines
/// only): its own section, the misses priced by a line fitted over its own batches.
pub fn write_drift(md: &mut String, text: &str) -> Result {
    let rows = lines(text)?;
    let Some(first) = rows
        .iter()
        .find(|r| r["impl"] == "berth_hot_tier" && drifting(r))
    else {
        return Ok(());
    };
    run_alone(md, "a drifting hot set", first, "")?;
    drift(md, &rows)?;
    refreshes(md, &rows)
}

/// The JSON lines of a run's output.
fn lines(text: &str) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for l in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(l)?);
    }
    Ok(rows)
}

/// The heading and first sentence of the section of a run of the `features` example alone
/// (`title`), from its `first` tier line; `rows` says what its rows are.
fn run_alone(md: &mut String, title: &str, first: &Value, rows: &str) -> Result {
    writeln!(
        md,
        "\n## Hot tier: {title}\n\nThe `features` example as in the hot tier section, in a run of its own: a {} GiB table and a {:.1} GiB budget{rows}, {} batches to fill the tier, then {} timed.",
        first["table_gib"].as_f64().unwrap_or(0.0),
        first["budget_bytes"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64,
        first["warmup"],
        first["batches"],
    )?;
    Ok(())
}

/// The row width most tier runs have (`None` without a tier run).
fn main_dim(rows: &[Value]) -> Option<u64> {
    let mut dims: Vec<(u64, usize)> = Vec::new();
    for d in rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier")
        .filter_map(|r| r["dim"].as_u64())
    {
        match dims.iter_mut().find(|(e, _)| *e == d) {
            Some((_, n)) => *n += 1,
            None => dims.push((d, 1)),
        }
    }
    // The first width seen wins a tie.
    dims.iter().rev().max_by_key(|&&(_, n)| n).map(|&(d, _)| d)
}

/// The split bound for Zipf exponent `z` over the lines of one row width: the hit fraction of
/// a tier of the hottest rows (the anchor's) at the rate of a gather from the whole table on
/// the GPU, and the rest at the faster of the two ways without a tier for the uniform law (or
/// for this law, where the uniform law was not run).
fn split_bound(rows: &[Value], z: f64) -> Option<f64> {
    let faster = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let without = |z: f64| {
        faster(
            mrows(line(rows, "berth_mapped_only", z)),
            mrows(line(rows, "berth_host_gathered", z)),
        )
    };
    let h = line(rows, "torch_cpu_gather_pinned_copy", z)?["hit_fraction_tier"].as_f64()?;
    let d = mrows(line(rows, "torch_whole_table_on_gpu", z))?;
    let m = without(0.0).or(without(z))?;
    (d > 0.0 && m > 0.0).then(|| 1.0 / (h / d + (1.0 - h) / m))
}

/// The same laws over rows of other widths (a table of the same bytes, the same budget), with
/// the main width's rows beside them (nothing without a run at another width).
fn widths(md: &mut String, rows: &[Value], width_rows: &[Value]) -> Result {
    let mut dims: Vec<u64> = width_rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier")
        .filter_map(|r| r["dim"].as_u64())
        .collect();
    if dims.is_empty() {
        return Ok(());
    }
    if let Some(d) = main_dim(rows) {
        dims.push(d);
    }
    dims.sort_unstable();
    dims.dedup();
    writeln!(
        md,
        "
Row widths: the same laws, batches and budget over tables of the same bytes with rows of several widths (as many more or fewer rows as they are narrower or wider), each width against PyTorch's usual path and its own split bound in the same run. GB/s: the rows' bytes gathered per second. Hit rate: the second half's, as the GPU counts it where the run's lines have that count, else as the host's record has it (which credits a row captured on its miss only from the refresh that settles it).
"
    )?;
    writeln!(
        md,
        "| floats per row | rows in the table | Zipf s | berth, M rows/s | GB/s | hit rate | PyTorch CPU gather + copy | berth / PyTorch | without a tier: in place | whole table on the GPU | split bound | berth / bound | cost model: choice, tier predicted | cost model: in place predicted | rows right |"
    )?;
    writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"
    )?;
    for dim in dims {
        let of_width: Vec<Value> = rows
            .iter()
            .chain(width_rows)
            .filter(|r| r["dim"].as_u64() == Some(dim) && !drifting(r))
            .filter(|r| r["whole_batches"] != true && r["model_choice"] != "Resident")
            .cloned()
            .collect();
        let mut zipfs: Vec<f64> = of_width
            .iter()
            .filter(|r| r["impl"] == "berth_hot_tier")
            .filter_map(|r| r["zipf"].as_f64())
            .collect();
        zipfs.sort_by(f64::total_cmp);
        zipfs.dedup();
        for z in zipfs {
            let berth = line(&of_width, "berth_hot_tier", z);
            let torch = mrows(line(&of_width, "torch_cpu_gather_pinned_copy", z));
            let b = mrows(berth);
            let bound = split_bound(&of_width, z);
            let table_rows = berth.and_then(|r| {
                Some(r["table_gib"].as_f64()? * (1u64 << 30) as f64 / (4 * dim) as f64)
            });
            let ok = [
                berth.map(|v| &v["ok"]),
                line(&of_width, "berth_mapped_only", z).map(|v| &v["ok"]),
                line(&of_width, "berth_host_gathered", z).map(|v| &v["ok"]),
            ]
            .into_iter()
            .flatten()
            .all(|v| v == true);
            writeln!(
                md,
                "| {dim} | {} | {z} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(table_rows, 0),
                cell(b, 1),
                cell(b.map(|b| b * (4 * dim) as f64 / 1e3), 1),
                percent(berth.and_then(hit_late)),
                cell(torch, 1),
                cell(b.zip(torch).map(|(b, t)| b / t), 2) + "×",
                cell(mrows(line(&of_width, "berth_mapped_only", z)), 1),
                cell(mrows(line(&of_width, "torch_whole_table_on_gpu", z)), 0),
                cell(bound, 0),
                cell(b.zip(bound).map(|(b, x)| b / x), 2),
                match berth.and_then(|r| Some((
                    r["model_choice"].as_str()?,
                    r["model_tier_batch_mrows_s"]
                        .as_f64()
                        .or(r["model_tier_mrows_s"].as_f64())?
                ))) {
                    Some((c, p)) => format!("{c}, {p:.1}"),
                    None => "–".into(),
                },
                cell(berth.and_then(|r| r["model_mapped_mrows_s"].as_f64()), 1),
                if ok { "yes" } else { "**no**" },
            )?;
        }
    }
    Ok(())
}

/// The cost model's predictions (`placement::decide_gather`, with the run's calibration) from
/// each law's measured hit rate and fills, against the measured rates (nothing without a
/// line that has them).
fn model(md: &mut String, rows: &[Value]) -> Result {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["impl"] == "berth_hot_tier" && !drifting(r) && r["model_tier_mrows_s"].is_f64()
        })
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\nThe cost model (`placement::decide_gather`, `HotTier::decision`) with {} constants and {}, fed each run's measured hit rate and the rows its refreshes read from the table per batch (the timed batches', where the run records what it fed the model; else the whole run's, the tier's first fill included): its choice, and its predictions of the GPU's part of a batch through the tier and with every row read in place{}, against the measured rates (berth above, a batch at a time, and queued back to back; in place: without a tier).\n",
        if runs.iter().all(|r| r["model_calibrated"] == true) {
            "this machine's calibrated"
        } else {
            "conservative (uncalibrated)"
        },
        if runs.iter().all(|r| r["model_row_reads_mrows_s"].is_f64()) {
            "a miss priced at the table's own rate of random rows of its width (`HotTier::measure_row_reads`)"
        } else {
            "the table's own random-read rate (`Gpu::measure_random_reads`, where the run measured it)"
        },
        if runs.iter().all(|r| r["model_host_us"].is_f64()) {
            "; with the host's part of a batch as the tier measured it (`HotTierStats::gathering`), the prediction of a batch at a time (`GatherDecision::batch_s`: the host's first part before the GPU starts, then the longer of the rest and the GPU's part) and of batches queued back to back (`queued_s`: the longer of the two)"
        } else {
            " (the host's part of a batch comes on top)"
        }
    )?;
    writeln!(
        md,
        "| ids | hit rate | rows filled per batch | choice | tier: the GPU's part predicted, M rows/s | host's part, µs | tier: predicted | tier: measured | measured / predicted | queued: predicted | queued | queued / predicted | in place: predicted | in place: measured | measured / predicted |"
    )?;
    writeln!(
        md,
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for r in runs {
        let law = match r["zipf"].as_f64() {
            Some(z) => format!("Zipf {z}"),
            None => "R-MAT 2-hop".to_owned(),
        };
        let plain = rows.iter().find(|p| {
            p["impl"] == "berth_mapped_only" && p["zipf"] == r["zipf"] && p["ids"] == r["ids"]
        });
        let gpu_p = r["model_tier_mrows_s"].as_f64();
        // A batch at a time and queued: with the host's part where the run has it, else the
        // GPU's part alone.
        let tier_p = r["model_tier_batch_mrows_s"].as_f64().or(gpu_p);
        let queued_p = r["model_tier_queued_mrows_s"].as_f64().or(gpu_p);
        let tier_m = mrows(Some(r));
        let (map_p, map_m) = (r["model_mapped_mrows_s"].as_f64(), mrows(plain));
        // What the model was fed (the timed batches'), where the run says; else the whole
        // run's, the tier's first fill included.
        let filled = r["model_filled_per_batch"].as_f64().or_else(|| {
            let batches = r["batches"].as_f64()? + r["warmup"].as_f64()?;
            Some(r["filled"].as_f64()? / batches.max(1.0))
        });
        let hit = r["model_hit_fraction"].as_f64().or(r["hit_rate"].as_f64());
        let queued = r["queued_mrows_s"].as_f64();
        writeln!(
            md,
            "| {law} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            percent(hit),
            cell(filled, 0),
            r["model_choice"].as_str().unwrap_or("–"),
            cell(gpu_p, 1),
            cell(r["model_host_us"].as_f64(), 1),
            cell(tier_p, 1),
            cell(tier_m, 1),
            cell(tier_m.zip(tier_p).map(|(m, p)| m / p), 2),
            cell(queued_p, 1),
            cell(queued, 1),
            cell(queued.zip(queued_p).map(|(m, p)| m / p), 2),
            cell(map_p, 1),
            cell(map_m, 1),
            cell(map_m.zip(map_p).map(|(m, p)| m / p), 2),
        )?;
    }
    Ok(())
}

/// Runs whose budget holds the whole table (the tier keeps it all from the start), against
/// PyTorch's gather from the whole table on the GPU in the same run (nothing without one).
fn fits(md: &mut String, rows: &[Value], fits_rows: &[Value]) -> Result {
    let runs: Vec<&Value> = fits_rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier")
        .collect();
    let Some(first) = runs.first() else {
        return Ok(());
    };
    writeln!(
        md,
        "\nWhen the budget holds the table: a {:.0} GiB table of the same rows under the same budget, which the tier copies in whole when it is made and gathers from device memory (nothing counted, ranked or logged), {} timed batches after {} untimed; against PyTorch's gather from the whole 64 GiB table on the GPU above (`torch_whole_table_on_gpu`, the same law).\n",
        first["table_gib"].as_f64().unwrap_or(0.0),
        first["batches"],
        first["warmup"],
    )?;
    writeln!(
        md,
        "| Zipf s | berth, M rows/s | hit rate | PyTorch, whole table on the GPU | berth / PyTorch | cost model: the GPU's part, predicted | rows right |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---|")?;
    for r in runs {
        let Some(z) = r["zipf"].as_f64() else {
            continue;
        };
        let (b, t) = (
            mrows(Some(r)),
            mrows(line(rows, "torch_whole_table_on_gpu", z)),
        );
        writeln!(
            md,
            "| {z} | {} | {} | {} | {} | {} | {} |",
            cell(b, 1),
            percent(r["hit_rate"].as_f64()),
            cell(t, 1),
            cell(b.zip(t).map(|(b, t)| b / t), 2),
            cell(r["model_tier_mrows_s"].as_f64(), 1),
            if r["ok"] == true { "yes" } else { "**no**" },
        )?;
    }
    Ok(())
}

/// Batches staged in parts (the default on a `Gpu`) against the same laws staged whole
/// (`--whole-batches`, same run): rates, and the host's time per batch before the wait
/// (nothing without a whole-batch run).
fn whole(md: &mut String, rows: &[Value], whole_rows: &[Value]) -> Result {
    if whole_rows.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\nStaged in parts or whole: the same laws, batches and refreshes with each batch staged whole (`HotTier::staging_parts(1)`, `--whole-batches`, same run), against the runs above, where a batch of 16 Ki ids or more is checked, written to the ids' mapped memory and gathered in parts (as many as the parts column says), each part's kernel running while the host stages the next, each part staged by as many threads as the threads column says (`HotTier::staging_threads`). Host time: a batch's time in `gather` before the wait, and of it the staging (checking and writing the ids).\n"
    )?;
    writeln!(
        md,
        "| Zipf s | parts | staging threads, parts / whole | in parts, M rows/s | whole, M rows/s | parts / whole | host time, parts, µs | host time, whole, µs | staging, parts, µs | staging, whole, µs | rows right |"
    )?;
    writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )?;
    // Runs from before the tier had staging helpers staged on the gathering thread alone.
    let threads = |r: Option<&Value>| r.map_or(1, |r| r["staging_threads"].as_u64().unwrap_or(1));
    let per_batch = |r: Option<&Value>, key: &str| {
        r.and_then(|r| Some(r[key].as_f64()? / r["batches"].as_f64()? * 1e6))
    };
    for w in whole_rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && !drifting(r))
    {
        let Some(z) = w["zipf"].as_f64() else {
            continue;
        };
        let split = line(rows, "berth_hot_tier", z);
        let (a, b) = (mrows(split), mrows(Some(w)));
        writeln!(
            md,
            "| {z} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            split
                .and_then(|s| s["staging_parts"].as_u64())
                .map_or_else(|| "–".to_owned(), |p| p.to_string()),
            threads(split),
            threads(Some(w)),
            cell(a, 1),
            cell(b, 1),
            cell(a.zip(b).map(|(a, b)| a / b), 2),
            cell(per_batch(split, "gather_host_s"), 1),
            cell(per_batch(Some(w), "gather_host_s"), 1),
            cell(per_batch(split, "gather_staging_s"), 1),
            cell(per_batch(Some(w), "gather_staging_s"), 1),
            if w["ok"] == true && split.is_some_and(|s| s["ok"] == true) {
                "yes"
            } else {
                "**no**"
            },
        )?;
    }
    Ok(())
}

/// The runs whose hot set moves: how many batches the gathers take to be back within 10% of
/// their steady time after each move, and the fewest any tier could take (nothing without
/// such a run).
fn drift(md: &mut String, rows: &[Value]) -> Result {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && drifting(r))
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    let any_tier = "The GPU counts each batch's misses (`HotTier::gather_reads`), and berth's batches are the measure: any tier misses at least the lookups of rows never requested before, so a batch of any tier takes at least berth's time less the cost of berth's misses beyond those (at the table's price of a miss: the slope of a batch's time over its share of misses across the same run's steady laws at this exponent and above, in ms a batch were every lookup a miss; where the run has none, a line fitted over its own batches). Any tier is back within 10% no sooner than those times are, by the same rule. Beyond any tier: the share of the lookups of the 20 batches after each move that berth missed beyond those of rows never requested before. (A run without the GPU's counts shows the bound its example printed.)";
    writeln!(
        md,
        "\nA drifting hot set: every few timed batches a share of the Zipf ranks (picked by a hash) move to rows a third of the table away, so the hot rows they bring were cold; the tier refreshed as above. Steady: the median wall time of the 8 batches before the first move (a refresh can stall the batch it lands on for milliseconds, so medians, not means); after: the slowest batch after a move; back within 10%: the first batch after each move from which the median of 4 batches is at most 1.1× the steady time (target: within {DRIFT_TARGET} batches). Any tier: a row never requested before misses in every tier, so the 4 batches from batch k hit at most the share of their lookups whose rows were requested before. {any_tier} Room for captures: `HotTier::capture_room`, the places each miss log has at least, cold rows' slots granted where the free ones are too few (cells \"kept free\": runs of a build whose refreshes evicted cold rows ahead of need instead).\n"
    )?;
    writeln!(
        md,
        "| Zipf s | ranks moved | room for captures | timed batches | moved every | steady, ms a batch | slowest after a move, ms | berth back within 10% after, batches | any tier, not before | a miss, ms a batch | berth's misses beyond any tier's, 20 batches after each move | target | rows right |"
    )?;
    writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|---|---|"
    )?;
    let batches = |key: &str, r: &Value| -> Vec<Option<u64>> {
        r[key]
            .as_array()
            .map(|a| a.iter().map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    let list = |v: &[Option<u64>]| {
        if v.is_empty() {
            return "–".to_owned();
        }
        v.iter()
            .map(|k| k.map_or("never".into(), |k| k.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for r in runs {
        let every = r["drift_every"].as_u64().unwrap_or(0) as usize;
        let ms: Vec<f64> = r["batch_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let moves: Vec<usize> = (1..)
            .map(|k| k * every)
            .take_while(|&m| m < ms.len())
            .collect();
        let floats = |key: &str| -> Vec<f64> {
            r[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let requested = floats("batch_requested_before");
        let first = moves.first().copied().filter(|&m| m >= drift::STEADY);
        let steady = first.map(|m| drift::median(&ms[m - drift::STEADY..m]));
        let slowest = moves
            .iter()
            .flat_map(|&m| ms[m..(m + every).min(ms.len())].iter().copied())
            .reduce(f64::max);
        // From the per-batch figures, by the example's rules (lines of the example's earlier
        // rules render the same way).
        let judged = |rule: &dyn Fn(usize, usize, usize) -> Option<usize>| -> Vec<Option<u64>> {
            moves
                .iter()
                .enumerate()
                .map(|(i, &m)| {
                    let end = moves.get(i + 1).copied().unwrap_or(ms.len());
                    first.and_then(|f| rule(f, m, end)).map(|k| k as u64)
                })
                .collect()
        };
        let recovery = match first {
            Some(_) => judged(&|f, m, end| drift::recovered_after(&ms, f, m, end)),
            None => batches("drift_recovery_batches", r),
        };
        let gpu_hit = floats("batch_gpu_hit_rate");
        let counted = first.is_some() && gpu_hit.len() == ms.len() && requested.len() == ms.len();
        let per_miss = miss_cost(rows, r).or_else(|| {
            drift::time_model(&ms, &gpu_hit)
                .filter(|_| counted)
                .map(|(_, c)| c)
        });
        let bound = match per_miss {
            Some(c) if counted => {
                judged(&|f, m, end| drift::bound_by_excess(&ms, &gpu_hit, &requested, c, f, m, end))
            }
            _ => batches("drift_bound_batches", r),
        };
        let beyond: Vec<String> = if counted {
            moves
                .iter()
                .enumerate()
                .filter_map(|(i, &m)| {
                    let end = moves.get(i + 1).copied().unwrap_or(ms.len());
                    drift::missed_beyond(&gpu_hit, &requested, m, end)
                })
                .map(|b| format!("{:.1}%", 100.0 * b))
                .collect()
        } else {
            Vec::new()
        };
        let met = !recovery.is_empty()
            && recovery
                .iter()
                .all(|k| k.is_some_and(|k| k <= DRIFT_TARGET));
        writeln!(
            md,
            "| {} | {} | {} | {} | {every} | {} | {} | {} | {} | {} | {} | ≤ {DRIFT_TARGET}: {} | {} |",
            r["zipf"],
            percent(r["drift_share"].as_f64().or(Some(1.0))),
            room(r),
            ms.len(),
            cell(steady, 3),
            cell(slowest, 3),
            list(&recovery),
            list(&bound),
            cell(per_miss, 3),
            if beyond.is_empty() {
                "–".to_owned()
            } else {
                beyond.join(", ")
            },
            if recovery.is_empty() {
                "–"
            } else if met {
                "✓"
            } else {
                "✗"
            },
            if r["ok"] == true { "yes" } else { "**no**" },
        )?;
    }
    Ok(())
}

/// What the timed batches' refreshes cost on the host, per refresh (nothing without the
/// lines' refresh times).
fn refreshes(md: &mut String, rows: &[Value]) -> Result {
    let tiers: Vec<&Value> = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && r["refresh_ranking_s"].is_number())
        .collect();
    let Some(first) = tiers.first() else {
        return Ok(());
    };
    writeln!(
        md,
        "\nThe timed batches' refreshes ({}, due every {} batches; an async one begins once the last one is applied): those begun, and those applied (their kernels queued) in the timed batches. Per refresh applied: the ranking's host time ({}), reading the miss log (waiting for the gathers queued before it), and queuing the fill and slot table update kernels; per refresh begun, the batch loop's thread's time, the refresh column of the first table.\n",
        first["refresh"].as_str().unwrap_or("?"),
        first["refresh_every"],
        if first["refresh"] == "async" {
            "on the tier's thread, beside the gathers"
        } else {
            "on the batch loop's thread"
        },
    )?;
    writeln!(
        md,
        "| ids | refreshes begun, applied | ranking, ms | miss log read, ms | kernels queued, ms | on the batch loop's thread, ms |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|")?;
    for t in tiers {
        // The refreshes the timed batches began (a line without the count: one every
        // `refresh_every` batches).
        let n = t["refreshes"].as_f64().unwrap_or_else(|| {
            (t["batches"].as_f64().unwrap_or(0.0)
                / t["refresh_every"]
                    .as_f64()
                    .unwrap_or(f64::INFINITY)
                    .max(1.0))
            .floor()
        });
        // The plans applied in the timed batches, whose host times the line sums (a line
        // without the list: as many as were begun).
        let applied = t["refresh_applied_batches"]
            .as_array()
            .map_or(n, |a| a.len() as f64);
        let per = |key: &str, n: f64| t[key].as_f64().filter(|_| n > 0.0).map(|v| 1e3 * v / n);
        let each = |key: &str| per(key, applied);
        writeln!(
            md,
            "| {} | {n}, {applied} | {} | {} | {} | {} |",
            match (t["zipf"].as_f64(), drifting(t)) {
                (Some(z), false) => format!("Zipf s = {z}"),
                (Some(z), true) => format!(
                    "Zipf s = {z}, {} of the ranks moving every {}, room for captures {}",
                    percent(t["drift_share"].as_f64().or(Some(1.0))),
                    t["drift_every"],
                    room(t)
                ),
                (None, _) => "R-MAT 2-hop".to_owned(),
            },
            cell(each("refresh_ranking_s"), 2),
            cell(each("refresh_log_read_s"), 2),
            cell(each("refresh_apply_s"), 2),
            cell(per("refresh_s", n), 2),
        )?;
    }
    Ok(())
}

/// Where the time of a gather read in place goes: berth's in-place rate without a tier against
/// its own GPU time, and a plain CUDA kernel's over the same kind of table (`mapped_pages.cu`),
/// back to back and a batch at a time (nothing without either).
fn link(md: &mut String, rows: &[Value]) -> Result {
    let cuda: Vec<&Value> = rows
        .iter()
        .filter(|r| r["impl"] == "cuda_mapped_gather")
        .collect();
    let berth = rows.iter().find(|r| {
        r["impl"] == "berth_mapped_only"
            && r["zipf"].as_f64() == Some(0.0)
            && r["gather_gpu_span_s"].as_f64().is_some()
    });
    if cuda.is_empty() && berth.is_none() {
        return Ok(());
    }
    writeln!(
        md,
        "\nThe in-place path alone, uniform ids (Zipf s = 0): berth's gather without a tier (wall time of each batch, and the GPU's time from before its first kernel to after its last), and a plain CUDA kernel (`bench/features/mapped_pages.cu`, same run: one warp a row, managed memory kept on the host and mapped for the GPU, filled by 16 threads) timed back to back (ids on the device, events around 20 launches) and a batch at a time (ids copied from pageable memory, the kernel, a wait).\n"
    )?;
    writeln!(
        md,
        "| gather | table | M rows/s, a batch at a time (wall) | M rows/s, GPU time / back to back |"
    )?;
    writeln!(md, "|---|---|---:|---:|")?;
    if let Some(b) = berth {
        let n = b["batch"].as_f64().unwrap_or(0.0) * b["batches"].as_f64().unwrap_or(0.0);
        let span = b["gather_gpu_span_s"].as_f64().filter(|&s| s > 0.0);
        writeln!(
            md,
            "| berth, no tier | {} GiB, {} | {} | {} |",
            b["table_gib"].as_f64().unwrap_or(0.0),
            b["table"].as_str().unwrap_or("?"),
            cell(mrows(Some(b)), 1),
            cell(span.map(|s| n / s / 1e6), 1),
        )?;
    }
    for c in cuda {
        writeln!(
            md,
            "| plain CUDA | {} GiB, {} ({}) | {} | {} |",
            c["gib"].as_f64().unwrap_or(0.0),
            c["table"].as_str().unwrap_or("?"),
            match c["thp"].as_str() {
                Some("madvise") => "MADV_HUGEPAGE",
                Some("none") => "no madvise",
                Some(other) => other,
                None => "?",
            },
            cell(c["gpu_mapped_per_batch_mrows_s"].as_f64(), 1),
            cell(c["gpu_mapped_mrows_s"].as_f64(), 1),
        )?;
    }
    Ok(())
}

/// The same laws' batches queued back to back (`--queued`), against PyTorch's path
/// overlapped and a batch at a time, and the split bound (`bounds`, by exponent); nothing
/// without a queued berth line.
fn queued(md: &mut String, rows: &[Value], bounds: &[(f64, Option<f64>)]) -> Result {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && !drifting(r) && r["queued_mrows_s"].is_f64())
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\nQueued back to back: after the timed batches above, as many again (fresh ids of the same law) gathered in a scope (`Gpu::scope`), each gather left queued, refreshes as above, one wait at the end, every row checked: the host stages the next batches while the GPU gathers, as a training loop does when its step follows the gather on the same stream. PyTorch overlapped: the next batch's `index_select` into a second pinned buffer while the last one's copy runs, 32 batches, one wait at the end.\n"
    )?;
    writeln!(
        md,
        "| ids | berth queued, M rows/s | hit rate | PyTorch overlapped | berth queued / PyTorch overlapped | PyTorch a batch at a time | berth queued / PyTorch a batch at a time | split bound | berth queued / bound | rows right |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")?;
    for r in runs {
        let graph = r["ids"] == "rmat_2hop";
        let z = r["zipf"].as_f64();
        let by = |imp: &str| rows.iter().find(|t| t["impl"] == imp && same_law(t, r));
        let b = r["queued_mrows_s"].as_f64();
        let over = mrows(by("torch_cpu_gather_pinned_copy_overlapped"));
        let single = mrows(by("torch_cpu_gather_pinned_copy"));
        let bound = z.and_then(|z| {
            bounds
                .iter()
                .find(|(x, _)| (x - z).abs() < 1e-9)
                .and_then(|(_, b)| *b)
        });
        let ratio = |t: Option<f64>| cell(b.zip(t).map(|(b, t)| b / t), 2) + "×";
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if graph {
                "R-MAT 2-hop".to_owned()
            } else {
                format!("Zipf s = {}", cell(z, 1))
            },
            cell(b, 1),
            percent(r["queued_hit_rate"].as_f64()),
            cell(over, 1),
            ratio(over),
            cell(single, 1),
            ratio(single),
            cell(bound, 0),
            cell(b.zip(bound).map(|(b, x)| b / x), 2),
            if r["ok"] == true { "yes" } else { "**no**" },
        )?;
    }
    Ok(())
}

/// Whether line `t` is of the same law of ids as berth's line `r`: the graph's samples, or
/// the same Zipf exponent.
fn same_law(t: &Value, r: &Value) -> bool {
    if r["ids"] == "rmat_2hop" {
        t["ids"] == "rmat_2hop"
    } else {
        t["zipf"]
            .as_f64()
            .zip(r["zipf"].as_f64())
            .is_some_and(|(a, b)| (a - b).abs() < 1e-9)
    }
}

/// A kernel reading the tier's rows itself (`#[auto] &Rows<F4>`), against the tier's own
/// gathers and PyTorch's usual path in the same run, law by law and width by width (nothing
/// without a line that has it).
fn views(md: &mut String, rows: &[Value]) -> Result {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| r["impl"] == "berth_hot_tier" && !drifting(r) && r["view_mrows_s"].is_f64())
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\nA kernel reading the rows itself: after the timed batches, as many again (fresh ids of the same law) read by a kernel of the example's own through the tier (`embedding_gather_rows`, an `#[auto] table: &Rows<F4>` argument: each row looked up in the tier's slot table and read from device memory if resident, else from the host table in place), a batch at a time: the ids noted for the tier (`HotTier::note_reads`: checked and staged in mapped memory, from which the kernel reads them, and counted), the kernel launched and waited for, refreshes as above, every row checked. Host and GPU: a batch's time on the host before its wait (of it, noting the ids) and on the GPU (events around the kernel), one after the other. Queued: as many batches again queued back to back in a scope (`Gpu::scope`), each launch's guard detached, one wait at the end, against the tier's own gathers queued the same way where the run has them.\n"
    )?;
    writeln!(
        md,
        "| floats per row | ids | the tier's gather, M rows/s | a kernel through `&Rows`, M rows/s | kernel / gather | host, µs a batch (noting) | GPU, µs a batch | hit rate | PyTorch CPU gather + copy | kernel / PyTorch | queued: kernel, M rows/s | queued: gather | rows right |"
    )?;
    writeln!(
        md,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )?;
    for r in runs {
        let graph = r["ids"] == "rmat_2hop";
        let z = r["zipf"].as_f64();
        let torch = rows.iter().find(|t| {
            t["impl"] == "torch_cpu_gather_pinned_copy" && t["dim"] == r["dim"] && same_law(t, r)
        });
        let (gather, view, torch) = (mrows(Some(r)), r["view_mrows_s"].as_f64(), mrows(torch));
        let per_batch = |key: &str| {
            r[key]
                .as_f64()
                .zip(r["batches"].as_f64())
                .map(|(s, n)| 1e6 * s / n)
        };
        let host = match (per_batch("view_host_s"), per_batch("view_noting_s")) {
            (Some(h), Some(n)) => format!("{h:.1} ({n:.1})"),
            (h, _) => cell(h, 1),
        };
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["dim"],
            if graph {
                "R-MAT 2-hop".to_owned()
            } else {
                format!("Zipf s = {}", cell(z, 1))
            },
            cell(gather, 1),
            cell(view, 1),
            cell(view.zip(gather).map(|(v, g)| v / g), 2),
            host,
            cell(per_batch("view_gpu_s"), 1),
            percent(r["view_hit_rate"].as_f64()),
            cell(torch, 1),
            cell(view.zip(torch).map(|(v, t)| v / t), 2) + "×",
            cell(r["view_queued_mrows_s"].as_f64(), 1),
            cell(r["queued_mrows_s"].as_f64(), 1),
            if r["ok"] == true { "yes" } else { "**no**" },
        )?;
    }
    Ok(())
}

/// Embedding bags (`--bag`): one kernel reading and summing the rows through the tier (tuned,
/// and as the plain loop a newcomer writes, "–" in lines without it) against the tier's gather
/// followed by a kernel summing the gathered rows, and PyTorch's `embedding_bag` on the CPU
/// (its sums copied) and from the whole table on the GPU, law by law and width by width
/// (nothing without a bag run).
fn bags(md: &mut String, rows: &[Value]) -> Result {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["impl"] == "berth_hot_tier" && !drifting(r) && r["bag_fused_mrows_s"].is_f64()
        })
        .collect();
    let Some(first) = runs.first() else {
        return Ok(());
    };
    writeln!(
        md,
        "\nEmbedding bags: after the batches above, ids of the same law pooled in bags of {} (a sum of the bag's rows each, as an embedding bag with sum pooling), three ways: one kernel reading and summing the rows through the tier (`embedding_bag_rows`, an `#[auto] table: &Rows<F4>` argument, its ids noted first with `HotTier::note_reads`; tuned to issue four rows' reads before it adds the first), the same sum as the plain loop a newcomer writes (`embedding_bag_plain`, the `bag_sum` of `docs/hot-tier.md`, its ids noted the same way: a rolled loop, one row's read in flight per thread; – where the run did not time it), and the tier's gather into a batch of rows followed by a kernel summing them (`embedding_bag_sum`). Each way {} batches a batch at a time (each in a scope of its own, waited for at its end: host and GPU, µs a batch, as in the table above, the GPU's time from before the first kernel to after the last), then as many again queued back to back in one scope; refreshes as above; every sum checked against the host's. M ids/s: looked-up rows per second. PyTorch (same run, same law): `embedding_bag(mode=\"sum\")` on the CPU with 16 threads, its sums copied to the GPU, and from the whole table on the GPU.\n",
        first["bag"], first["batches"],
    )?;
    writeln!(
        md,
        "| floats per row | ids | hit rate | one kernel, M ids/s | plain loop | plain loop / one kernel | gather then sum | one kernel / gather then sum | host, µs a batch (one kernel / gather then sum) | GPU, µs a batch | queued: one kernel | queued: plain loop | queued: gather then sum | queued: one kernel / gather then sum | PyTorch CPU `embedding_bag` + copy | best berth / PyTorch | PyTorch, whole table on the GPU | sums right |"
    )?;
    writeln!(
        md,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )?;
    for r in runs {
        let torch = |imp: &str| {
            mrows(rows.iter().find(|t| {
                t["impl"] == imp && t["dim"] == r["dim"] && t["bag"] == r["bag"] && same_law(t, r)
            }))
        };
        let per_batch = |key: &str| {
            r[key]
                .as_f64()
                .zip(r["batches"].as_f64())
                .map(|(s, n)| 1e6 * s / n)
        };
        let pair = |a: Option<f64>, b: Option<f64>| format!("{} / {}", cell(a, 1), cell(b, 1));
        let f = |key: &str| r[key].as_f64();
        let ratio = |a: Option<f64>, b: Option<f64>| cell(a.zip(b).map(|(a, b)| a / b), 2);
        let best = [
            f("bag_fused_mrows_s"),
            f("bag_plain_mrows_s"),
            f("bag_split_mrows_s"),
            f("bag_fused_queued_mrows_s"),
            f("bag_plain_queued_mrows_s"),
            f("bag_split_queued_mrows_s"),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max);
        let cpu = torch("torch_cpu_embedding_bag_copy");
        writeln!(
            md,
            "| {} | Zipf s = {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["dim"],
            cell(r["zipf"].as_f64(), 1),
            percent(f("bag_hit_rate")),
            cell(f("bag_fused_mrows_s"), 1),
            cell(f("bag_plain_mrows_s"), 1),
            ratio(f("bag_plain_mrows_s"), f("bag_fused_mrows_s")),
            cell(f("bag_split_mrows_s"), 1),
            ratio(f("bag_fused_mrows_s"), f("bag_split_mrows_s")),
            pair(per_batch("bag_fused_host_s"), per_batch("bag_split_host_s")),
            pair(per_batch("bag_fused_gpu_s"), per_batch("bag_split_gpu_s")),
            cell(f("bag_fused_queued_mrows_s"), 1),
            cell(f("bag_plain_queued_mrows_s"), 1),
            cell(f("bag_split_queued_mrows_s"), 1),
            ratio(f("bag_fused_queued_mrows_s"), f("bag_split_queued_mrows_s")),
            cell(cpu, 1),
            ratio(best, cpu) + "×",
            cell(torch("torch_embedding_bag_whole_table_on_gpu"), 0),
            if r["ok"] == true { "yes" } else { "**no**" },
        )?;
    }
    Ok(())
}

/// The second half's hit rate of a run: the GPU's count (every row, a row captured on its miss
/// a hit from the next batch on), or, in lines that lack it, the host's record's.
fn hit_late(r: &Value) -> Option<f64> {
    r["gpu_hit_rate_second_half"]
        .as_f64()
        .or(r["hit_rate_second_half"].as_f64())
}

/// The cost of a miss for a drifting run `r`, in milliseconds a batch per unit of miss share:
/// the slope of a batch's time (from the rate) over its share of misses (the second half's)
/// across the same run's steady laws of the same width at `r`'s exponent and above (least
/// squares), where the hit rates are settled; `None` without two such laws of different
/// hit rates.
fn miss_cost(rows: &[Value], r: &Value) -> Option<f64> {
    let z = r["zipf"].as_f64()?;
    let points: Vec<(f64, f64)> = rows
        .iter()
        .filter(|l| l["impl"] == "berth_hot_tier" && !drifting(l) && l["dim"] == r["dim"])
        .filter(|l| l["ids"] != "rmat_2hop" && l["zipf"].as_f64().is_some_and(|s| s >= z - 1e-9))
        .filter_map(|l| {
            let t = l["batch"].as_f64()? / l["mrows_s"].as_f64()? / 1e3;
            Some((1.0 - hit_late(l)?, t))
        })
        .collect();
    drift::line_fit(&points).map(|(_, per_miss)| per_miss)
}

/// The graph-sampled batches' row (nothing without a berth line for them).
fn graph(md: &mut String, rows: &[Value]) -> Result {
    let by = |imp: &str| {
        rows.iter()
            .find(|r| r["impl"] == imp && r["ids"] == "rmat_2hop")
    };
    let Some(berth) = by("berth_hot_tier") else {
        return Ok(());
    };
    writeln!(
        md,
        "\nGraph-sampled batches: {} seeds drawn uniformly, 15 out-neighbours of each, 10 of each of those (with replacement, duplicates gathered), in an R-MAT graph over the rows (average degree 8, vertices scattered over the ids); PyTorch gathers the same ids.\n",
        berth["batch"].as_u64().unwrap_or(0) / 166
    )?;
    writeln!(
        md,
        "| ids | berth, M rows/s | hit rate (berth) | PyTorch CPU gather + copy | berth / PyTorch | target | without a tier: in place | without a tier: host threads | whole table on the GPU | rows right |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---|---:|---:|---:|---|")?;
    let (b, t) = (
        mrows(Some(berth)),
        mrows(by("torch_cpu_gather_pinned_copy")),
    );
    let ratio = b.zip(t).map(|(b, t)| b / t);
    let ok = [
        Some(berth),
        by("berth_mapped_only"),
        by("berth_host_gathered"),
    ]
    .into_iter()
    .flatten()
    .all(|v| v["ok"] == true);
    writeln!(
        md,
        "| R-MAT 2-hop | {} | {}% | {} | {}× | ≥ 4×: {} | {} | {} | {} | {} |",
        cell(b, 1),
        cell(hit_late(berth).map(|h| 100.0 * h), 1),
        cell(t, 1),
        cell(ratio, 2),
        match ratio {
            Some(r) if r >= 4.0 => "✓",
            Some(_) => "✗",
            None => "–",
        },
        cell(mrows(by("berth_mapped_only")), 1),
        cell(mrows(by("berth_host_gathered")), 1),
        cell(mrows(by("torch_whole_table_on_gpu")), 0),
        if ok { "yes" } else { "**no**" },
    )?;
    Ok(())
}

/// A drifting run's room for captures (`capture_room`), or the slots its build kept free
/// (`keep_free`).
fn room(r: &Value) -> String {
    match (r["capture_room"].as_u64(), r["keep_free"].as_u64()) {
        (Some(n), _) => n.to_string(),
        (None, Some(n)) if n > 0 => format!("{n} kept free"),
        _ => "0".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_renders_its_ratios_and_bound() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"hit_rate_second_half":0.9,"requested_before_second_half":0.9123,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"mrows_s":20.0,"ok":true}
{"impl":"berth_mapped_only","zipf":1.0,"mrows_s":25.0,"ok":true}
{"impl":"berth_host_gathered","zipf":0.0,"mrows_s":10.0,"ok":true}
{"impl":"berth_host_gathered","zipf":1.0,"mrows_s":12.0,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"mrows_s":40.0,"hit_fraction_tier":0.9}
{"impl":"torch_whole_table_on_gpu","zipf":1.0,"mrows_s":1000.0}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // Bound: 1 / (0.9 / 1000 + 0.1 / 20) = 169.5 M rows/s; berth 100 / 169.5 = 0.59.
        assert!(md.contains("| 1 | 100.0 | 90.0% | 91.2% | 90.0% | 40.0 | 2.50× | ≥ 8×: ✗ | 25.0 | 12.0 | 1000 | 169 | 0.59 ✗ | yes |"), "{md}");
        Ok(())
    }

    #[test]
    fn other_widths_get_their_own_table_and_bound() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"hit_rate_second_half":0.9,"ok":true}
{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":192,"refresh_every":16,"mrows_s":90.0,"drift_every":64,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"dim":128,"mrows_s":20.0,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"dim":128,"mrows_s":40.0,"hit_fraction_tier":0.9}
{"impl":"torch_whole_table_on_gpu","zipf":1.0,"dim":128,"mrows_s":1000.0}
{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":256,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":60.0,"hit_rate_second_half":0.8,"model_choice":"Tier","model_tier_mrows_s":75.0,"model_mapped_mrows_s":11.5,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"dim":256,"mrows_s":10.0,"ok":true}
{"impl":"berth_mapped_only","zipf":1.0,"dim":256,"mrows_s":12.0,"ok":false}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"dim":256,"mrows_s":30.0,"hit_fraction_tier":0.8}
{"impl":"torch_whole_table_on_gpu","zipf":1.0,"dim":256,"mrows_s":500.0}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // The main table keeps the 128-float rows: bound 1 / (0.9 / 1000 + 0.1 / 20) = 169.5.
        assert!(
            md.contains("| 1 | 100.0 | 90.0% | – | 90.0% | 40.0 | 2.50× |"),
            "{md}"
        );
        assert!(!md.contains("\n| 1 | 60.0 |"), "{md}");
        // 256 floats: 64 GiB / 1 KiB = 67,108,864 rows; 60 M rows/s of 1 KiB = 61.4 GB/s;
        // bound 1 / (0.8 / 500 + 0.2 / 10) = 46.3; a wrong row of the run without a tier shows.
        assert!(md.contains("| 256 | 67108864 | 1 | 60.0 | 61.4 | 80.0% | 30.0 | 2.00× | 12.0 | 500 | 46 | 1.30 | Tier, 75.0 | 11.5 | **no** |"), "{md}");
        // The main width is set beside it, without the drifting run.
        assert!(md.contains("| 128 | 134217728 | 1 | 100.0 | 51.2 | 90.0% | 40.0 | 2.50× | – | 1000 | 169 | 0.59 | – | – | yes |"), "{md}");
        Ok(())
    }

    #[test]
    fn a_run_of_widths_alone_renders_each_width() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":0.0,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":90.0,"hit_rate_second_half":0.25,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"dim":64,"mrows_s":80.0,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":0.0,"dim":64,"mrows_s":60.0,"hit_fraction_tier":0.25}
{"impl":"torch_whole_table_on_gpu","zipf":0.0,"dim":64,"mrows_s":1200.0}
{"impl":"berth_hot_tier","zipf":0.0,"ids":"zipf","table_gib":64.0,"dim":256,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":30.0,"hit_rate_second_half":0.25,"ok":true}"#;
        let mut md = String::new();
        write_widths(&mut md, text)?;
        assert!(md.contains("## Hot tier: row widths"), "{md}");
        assert!(
            md.contains("a 64 GiB table and a 16.0 GiB budget with rows of several widths, 3000 batches to fill the tier"),
            "{md}"
        );
        // 64 floats: bound 1 / (0.25 / 1200 + 0.75 / 80) = 104.3; 90 / 104.3 = 0.86.
        assert!(md.contains("| 64 | 268435456 | 0 | 90.0 | 23.0 | 25.0% | 60.0 | 1.50× | 80.0 | 1200 | 104 | 0.86 | – | – | yes |"), "{md}");
        assert!(md.contains("| 256 | 67108864 | 0 | 30.0 |"), "{md}");
        let mut none = String::new();
        write_widths(
            &mut none,
            r#"{"impl":"torch_whole_table_on_gpu","zipf":0.0,"dim":64,"mrows_s":1.0}"#,
        )?;
        assert!(none.is_empty());
        Ok(())
    }

    #[test]
    fn the_models_predictions_and_a_table_the_budget_holds_are_set_beside_the_measurements()
    -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"hit_rate":0.9,"hit_rate_second_half":0.9,"filled":6400,"model_choice":"Tier","model_calibrated":true,"model_tier_mrows_s":125.0,"model_mapped_mrows_s":40.0,"ok":true}
{"impl":"berth_mapped_only","zipf":1.0,"ids":"zipf","mrows_s":50.0,"ok":true}
{"impl":"torch_whole_table_on_gpu","zipf":1.0,"mrows_s":1000.0}
{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":8.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":16,"batches":64,"refresh_every":16,"mrows_s":950.0,"hit_rate":1.0,"filled":0,"model_choice":"Resident","model_calibrated":true,"model_tier_mrows_s":1200.0,"model_mapped_mrows_s":40.0,"ok":true}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // The run the budget holds stays out of the main table.
        assert!(md.contains("| 1 | 100.0 | 90.0% |"), "{md}");
        assert!(!md.contains("| 1 | 950.0 | 100.0% | – |"), "{md}");
        assert!(md.contains("this machine's calibrated"), "{md}");
        assert!(
            md.contains(
                "| Zipf 1 | 90.0% | 2 | Tier | 125.0 | – | 125.0 | 100.0 | 0.80 | 125.0 | – | – | 40.0 | 50.0 | 1.25 |"
            ),
            "{md}"
        );
        assert!(md.contains("the table's own random-read rate"), "{md}");
        assert!(
            md.contains("(the host's part of a batch comes on top)"),
            "{md}"
        );
        // A run with the host's part and the row rate: compared with the batch-at-a-time and
        // queued predictions.
        let with_host = r#"{"impl":"berth_hot_tier","zipf":1.2,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":180.0,"queued_mrows_s":210.0,"hit_rate":0.95,"hit_rate_second_half":0.95,"filled":640,"model_choice":"Tier","model_calibrated":true,"model_tier_mrows_s":300.0,"model_tier_batch_mrows_s":200.0,"model_tier_queued_mrows_s":250.0,"model_host_us":262.1,"model_row_reads_mrows_s":45.0,"model_hit_fraction":0.96,"model_filled_per_batch":12.4,"model_mapped_mrows_s":45.0,"ok":true}
{"impl":"berth_mapped_only","zipf":1.2,"ids":"zipf","mrows_s":50.0,"ok":true}"#;
        let mut host = String::new();
        write(&mut host, with_host)?;
        assert!(
            host.contains(
                "| Zipf 1.2 | 96.0% | 12 | Tier | 300.0 | 262.1 | 200.0 | 180.0 | 0.90 | 250.0 | 210.0 | 0.84 | 45.0 | 50.0 | 1.11 |"
            ),
            "{host}"
        );
        assert!(host.contains("`HotTier::measure_row_reads`"), "{host}");
        assert!(host.contains("`GatherDecision::batch_s`"), "{host}");
        assert!(md.contains("a 8 GiB table"), "{md}");
        assert!(
            md.contains("| 1 | 950.0 | 100.0% | 1000.0 | 0.95 | 1200.0 | yes |"),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn a_kernel_reading_the_rows_itself_is_compared_with_the_gather_and_pytorch() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"view_mrows_s":120.0,"view_hit_rate":0.93,"view_host_s":0.0032,"view_noting_s":0.00256,"view_gpu_s":0.0064,"view_queued_mrows_s":150.0,"hit_rate_second_half":0.9,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"dim":128,"mrows_s":80.0,"hit_fraction_tier":0.9}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"dim":64,"mrows_s":40.0,"hit_fraction_tier":0.9}
{"impl":"berth_hot_tier","zipf":0.0,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":50.0,"hit_rate_second_half":0.25,"ok":true}"#;
        let mut md = String::new();
        write_widths(&mut md, text)?;
        assert!(md.contains("`#[auto] table: &Rows<F4>`"), "{md}");
        // Against PyTorch's line of the same width; the law without a kernel run is left out.
        assert!(
            md.contains(
                "| 64 | Zipf s = 1.0 | 100.0 | 120.0 | 1.20 | 50.0 (40.0) | 100.0 | 93.0% | 40.0 | 3.00× | 150.0 | – | yes |"
            ),
            "{md}"
        );
        assert!(!md.contains("| 64 | Zipf s = 0.0 |"), "{md}");
        let mut none = String::new();
        views(&mut none, &[])?;
        assert!(none.is_empty());
        Ok(())
    }

    #[test]
    fn bags_are_compared_three_ways_and_with_pytorchs_embedding_bag() -> Result {
        let text = r#"{"impl":"torch_cpu_embedding_bag_copy","zipf":1.0,"ids":"zipf","dim":64,"bag":32,"mrows_s":50.0}
{"impl":"torch_embedding_bag_whole_table_on_gpu","zipf":1.0,"ids":"zipf","dim":64,"bag":32,"mrows_s":2000.0}
{"impl":"torch_cpu_embedding_bag_copy","zipf":1.0,"ids":"zipf","dim":64,"bag":16,"mrows_s":10.0}
{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"bag":32,"bag_hit_rate":0.9,"bag_fused_mrows_s":300.0,"bag_plain_mrows_s":150.0,"bag_split_mrows_s":200.0,"bag_fused_queued_mrows_s":400.0,"bag_plain_queued_mrows_s":600.0,"bag_split_queued_mrows_s":500.0,"bag_fused_host_s":0.0064,"bag_plain_host_s":0.0064,"bag_split_host_s":0.0032,"bag_fused_gpu_s":0.0128,"bag_plain_gpu_s":0.0256,"bag_split_gpu_s":0.0192,"ok":true}
{"impl":"berth_hot_tier","zipf":1.2,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"bag":32,"bag_hit_rate":0.95,"bag_fused_mrows_s":320.0,"bag_split_mrows_s":160.0,"bag_fused_queued_mrows_s":480.0,"bag_split_queued_mrows_s":240.0,"bag_fused_host_s":0.0064,"bag_split_host_s":0.0064,"bag_fused_gpu_s":0.0064,"bag_split_gpu_s":0.0064,"ok":true}
{"impl":"berth_hot_tier","zipf":0.0,"ids":"zipf","table_gib":64.0,"dim":64,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":50.0,"ok":true}"#;
        let mut md = String::new();
        write_widths(&mut md, text)?;
        assert!(md.contains("pooled in bags of 32"), "{md}");
        // Against PyTorch's line of the same width and bag (not bag 16's); the plain loop at
        // half the tuned kernel's rate; the best of berth's six (the plain loop queued, 600)
        // over the CPU's 50; the law without a bag run is left out.
        assert!(
            md.contains(
                "| 64 | Zipf s = 1.0 | 90.0% | 300.0 | 150.0 | 0.50 | 200.0 | 1.50 | 100.0 / 50.0 | 200.0 / 300.0 | 400.0 | 600.0 | 500.0 | 0.80 | 50.0 | 12.00× | 2000 | yes |"
            ),
            "{md}"
        );
        // A line without the plain loop's fields renders "–" in its cells.
        assert!(
            md.contains(
                "| 64 | Zipf s = 1.2 | 95.0% | 320.0 | – | – | 160.0 | 2.00 | 100.0 / 100.0 | 100.0 / 100.0 | 480.0 | – | 240.0 | 2.00 | – | –× | – | yes |"
            ),
            "{md}"
        );
        assert!(!md.contains("| 64 | Zipf s = 0.0 | –"), "{md}");
        let mut none = String::new();
        bags(&mut none, &[])?;
        assert!(none.is_empty());
        Ok(())
    }

    #[test]
    fn queued_batches_are_compared_with_both_pytorch_paths_and_the_bound() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"queued_mrows_s":160.0,"queued_hit_rate":0.9,"hit_rate_second_half":0.9,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"mrows_s":20.0,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"mrows_s":40.0,"hit_fraction_tier":0.9}
{"impl":"torch_cpu_gather_pinned_copy_overlapped","zipf":1.0,"mrows_s":64.0}
{"impl":"torch_whole_table_on_gpu","zipf":1.0,"mrows_s":1000.0}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // Bound: 1 / (0.9 / 1000 + 0.1 / 20) = 169.5; 160 / 64 = 2.5; 160 / 40 = 4.
        assert!(
            md.contains(
                "| Zipf s = 1.0 | 160.0 | 90.0% | 64.0 | 2.50× | 40.0 | 4.00× | 169 | 0.94 | yes |"
            ),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn whole_batches_are_compared_with_parts_and_kept_out_of_the_other_tables() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":100.0,"hit_rate_second_half":0.9,"gather_host_s":0.0064,"gather_staging_s":0.00448,"staging_parts":4,"staging_threads":2,"ok":true}
{"impl":"berth_hot_tier","zipf":1.0,"table_gib":64.0,"dim":128,"budget_bytes":17179869184,"batch":65536,"warmup":3000,"batches":64,"refresh_every":16,"mrows_s":80.0,"hit_rate_second_half":0.5,"gather_host_s":0.0096,"gather_staging_s":0.00512,"whole_batches":true,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"mrows_s":40.0,"hit_fraction_tier":0.9}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // 0.0064 s / 64 batches = 100 µs; 0.0096 / 64 = 150; 0.00448 / 64 = 70; 0.00512 / 64 = 80.
        assert!(
            md.contains(
                "| 1 | 4 | 2 / 1 | 100.0 | 80.0 | 1.25 | 100.0 | 150.0 | 70.0 | 80.0 | yes |"
            ),
            "{md}"
        );
        // The first table reads the parts' line (hit rate 90%, not the whole run's 50%).
        assert!(md.contains("| 1 | 100.0 | 90.0% |"), "{md}");
        assert!(!md.contains("| 1 | 80.0 |"), "{md}");
        Ok(())
    }

    #[test]
    fn the_graph_row_compares_the_same_ids() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":1,"refresh_every":1,"mrows_s":100.0,"hit_rate_second_half":0.9,"ok":true}
{"impl":"berth_hot_tier","zipf":null,"ids":"rmat_2hop","batch":65404,"mrows_s":90.0,"hit_rate_second_half":0.8,"ok":true}
{"impl":"torch_cpu_gather_pinned_copy","zipf":null,"ids":"rmat_2hop","mrows_s":20.0}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        assert!(md.contains("Graph-sampled batches: 394 seeds"), "{md}");
        assert!(
            md.contains(
                "| R-MAT 2-hop | 90.0 | 80.0% | 20.0 | 4.50× | ≥ 4×: ✓ | – | – | – | yes |"
            ),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn the_in_place_path_is_shown_beside_the_plain_kernel() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":0.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":1,"refresh_every":1,"mrows_s":50.0,"hit_rate_second_half":0.2,"ok":true}
{"impl":"berth_mapped_only","zipf":0.0,"table_gib":64.0,"table":"managed","batch":65536,"batches":64,"gather_s":0.134,"gather_gpu_span_s":0.0524288,"mrows_s":31.3,"ok":true}
{"impl":"cuda_mapped_gather","table":"managed_preferred_host","thp":"none","gib":64,"batch":65536,"gpu_mapped_mrows_s":99.5,"gpu_mapped_per_batch_mrows_s":80.25,"host_threads":16,"host_gather_mrows_s":60.9}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        // 64 batches of 65,536 rows in 0.0524288 s on the GPU: 80.0 M rows/s.
        assert!(
            md.contains("| berth, no tier | 64 GiB, managed | 31.3 | 80.0 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| plain CUDA | 64 GiB, managed_preferred_host (no madvise) | 80.2 | 99.5 |"
            ),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn refreshes_are_shown_per_refresh() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":64,"refresh_every":16,"refresh":"async","mrows_s":100.0,"hit_rate_second_half":0.9,"refresh_s":0.004,"refresh_ranking_s":0.0372,"refresh_log_read_s":0.002,"refresh_apply_s":0.0056,"ok":true}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        assert!(
            md.contains("on the tier's thread, beside the gathers"),
            "{md}"
        );
        // 4 refreshes in 64 batches, each taken as applied.
        assert!(
            md.contains("| Zipf s = 1 | 4, 4 | 9.30 | 0.50 | 1.40 | 1.00 |"),
            "{md}"
        );
        // Two begun, one applied: the ranking's times are that one's, the batch loop's
        // thread's shared by both.
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":64,"refresh_every":16,"refresh":"async","mrows_s":100.0,"hit_rate_second_half":0.9,"refreshes":2,"refresh_begun_batches":[7,40],"refresh_applied_batches":[40],"refresh_s":0.004,"refresh_ranking_s":0.0372,"refresh_log_read_s":0.002,"refresh_apply_s":0.0056,"ok":true}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        assert!(
            md.contains("| Zipf s = 1 | 2, 1 | 37.20 | 2.00 | 5.60 | 2.00 |"),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn a_drifting_run_shows_its_recovery_and_leaves_the_steady_row_alone() -> Result {
        let text = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":64,"refresh_every":16,"mrows_s":100.0,"hit_rate_second_half":0.9,"drift_every":0,"ok":true}
{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","batches":24,"mrows_s":50.0,"hit_rate_second_half":0.5,"drift_every":12,"drift_share":0.1,"drift_recovery_batches":[3],"drift_bound_batches":[1],"batch_ms":[1,1,1,1,1,1,1,1,1,1,1,1,4,3,2,1.05,1,1,1,1,1,1,1,1],"ok":true}"#;
        let mut md = String::new();
        write(&mut md, text)?;
        assert!(md.contains("| 1 | 100.0 | 90.0% |"), "{md}");
        assert!(!md.contains("| 1 | 50.0 |"), "{md}");
        assert!(
            md.contains(
                "| 1.0 | 10.0% | 0 | 24 | 12 | 1.000 | 4.000 | 2 | 1 | – | – | ≤ 20: ✓ | yes |"
            ),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn any_tier_is_berth_less_its_misses_beyond_the_rows_requested_before() -> Result {
        // Each batch 0.05 ms plus 0.5 ms a unit of miss share (the GPU's count), steady 0.1 ms;
        // after the move at 12 berth misses 0.15, 0.11, 0.07, 0.03 of the lookups beyond the
        // rows never requested before, then none: back after 3 batches.
        let ms = [0.1; 12]
            .into_iter()
            .chain([0.2, 0.175, 0.15, 0.125, 0.104])
            .chain([0.1; 7]);
        let hit = [0.9; 12]
            .into_iter()
            .chain([0.7, 0.75, 0.8, 0.85, 0.892])
            .chain([0.9; 7]);
        let requested = [0.9; 12]
            .into_iter()
            .chain([0.85, 0.86, 0.87, 0.88, 0.89])
            .chain([0.9; 7]);
        let list = |v: &mut dyn Iterator<Item = f64>| {
            v.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
        };
        let drifting = format!(
            r#"{{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","dim":128,"batch":65536,"batches":24,"mrows_s":50.0,"hit_rate_second_half":0.5,"drift_every":12,"drift_share":0.1,"batch_ms":[{}],"batch_gpu_hit_rate":[{}],"batch_requested_before":[{}],"ok":true}}"#,
            list(&mut ms.into_iter()),
            list(&mut hit.into_iter()),
            list(&mut requested.into_iter())
        );
        // s = 1.0: 0.1 ms a batch at 10% misses; s = 1.2: 0.05 ms at 2%: 0.625 ms a unit.
        let laws = r#"{"impl":"berth_hot_tier","zipf":1.0,"ids":"zipf","table_gib":64.0,"dim":128,"budget_bytes":1,"batch":65536,"warmup":1,"batches":64,"refresh_every":16,"mrows_s":655.36,"hit_rate_second_half":0.5,"gpu_hit_rate_second_half":0.9,"drift_every":0,"ok":true}
{"impl":"berth_hot_tier","zipf":1.2,"ids":"zipf","dim":128,"batch":65536,"batches":64,"mrows_s":1310.72,"hit_rate_second_half":0.5,"gpu_hit_rate_second_half":0.98,"drift_every":0,"ok":true}"#;
        let mut md = String::new();
        write(&mut md, &format!("{laws}\n{drifting}"))?;
        assert!(md.contains("The GPU counts each batch's misses"), "{md}");
        // Any tier: 0.2 - 0.625 · 0.15 = 0.10625, and the same for the next 3: back at once.
        // Berth missed (0.15 + 0.11 + 0.07 + 0.03 - 0.002) / 12 beyond it.
        assert!(
            md.contains(
                "| 1.0 | 10.0% | 0 | 24 | 12 | 0.100 | 0.200 | 3 | 0 | 0.625 | 3.0% | ≤ 20: ✓ | yes |"
            ),
            "{md}"
        );
        // Without laws to price a miss, a line fitted over the run's batches: 0.5 ms a unit,
        // any tier at 0.125, 0.12, 0.115, 0.11, 0.104, 0.1: the median of 4 within 10% from 2.
        let mut md = String::new();
        write(&mut md, &drifting)?;
        assert!(
            md.contains(
                "| 1.0 | 10.0% | 0 | 24 | 12 | 0.100 | 0.200 | 3 | 2 | 0.500 | 3.0% | ≤ 20: ✓ | yes |"
            ),
            "{md}"
        );
        Ok(())
    }

    #[test]
    fn no_berth_line_no_section() -> Result {
        let mut md = String::new();
        write(
            &mut md,
            r#"{"impl":"torch_cpu_gather_pinned_copy","zipf":1.0,"mrows_s":40.0}"#,
        )?;
        assert!(md.is_empty());
        Ok(())
    }
}
