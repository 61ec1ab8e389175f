//! tpch: TPC-H queries 1, 6, 12 and 14 over tables generated into Arrow arrays in host
//! memory, each run with its lineitem columns streamed raw, copied packed, and kept packed in
//! device memory (warm), every answer checked against the host's.
//!
//! `tpch [--sf 1] [--query 6 ...] [--device-budget 16G] [--repeat 5] [--json]`

use berth::Gpu;
use berth_examples::cli::{host_memory_available, init_logging, parse_size};
use berth_examples::tpch::data::{self, Tables};
use berth_examples::tpch::parquet;
use berth_examples::tpch::query::{Engine, Mode, Run, columns};
use berth_examples::tpch::reference::{self, Answer, Query};
use clap::Parser;
use std::time::Instant;

/// TPC-H queries over host-resident Arrow columns on the GPU (or the simulator), checked
/// against the host.
#[derive(Parser)]
struct Args {
    /// Scale factor of the generated tables (lineitem has about 6 million rows per unit)
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Queries to run (1, 6, 12, 14); all when none is given
    #[arg(long = "query", value_name = "N")]
    queries: Vec<u32>,
    /// Device memory the packed columns may keep between queries (K/M/G suffixes)
    #[arg(long, default_value = "16G", value_parser = parse_size)]
    device_budget: usize,
    /// Timed runs of each query in each placement (the median is reported)
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Read the tables from `lineitem.parquet`, `orders.parquet` and `part.parquet` in this
    /// folder (as `tpchgen-cli parquet` writes them) instead of generating them; `--sf` is
    /// then their scale factor
    #[arg(long, value_name = "DIR")]
    parquet: Option<std::path::PathBuf>,
    /// Threads that generate the tables (default: every core)
    #[arg(long)]
    threads: Option<usize>,
    /// One JSON object a line instead of tables
    #[arg(long)]
    json: bool,
}

fn main() {
    init_logging();
    if let Err(e) = run(Args::parse()) {
        eprintln!("tpch: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), String> {
    data::check_fits(args.sf, host_memory_available())?;
    let queries: Vec<Query> = if args.queries.is_empty() {
        Query::ALL.to_vec()
    } else {
        args.queries
            .iter()
            .map(|&n| Query::from_number(n))
            .collect::<Result<_, _>>()?
    };
    if args.repeat == 0 {
        return Err("--repeat 0: run each query at least once".into());
    }
    let gpu = Gpu::new_or_simulator().map_err(|e| e.to_string())?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let out = Output { json: args.json };
    out.note(&format!("backend {:?}, sf {}", gpu.backend(), args.sf));

    let t0 = Instant::now();
    let tables = match &args.parquet {
        Some(dir) => parquet::read_tables(dir, args.sf)?,
        None => data::generate(args.sf, threads)?,
    };
    let how = if args.parquet.is_some() {
        "read"
    } else {
        "generate"
    };
    out.step(how, t0, &format!("{} lineitem rows", tables.rows()));
    let t0 = Instant::now();
    let mut engine = Engine::new(&gpu, &tables, args.device_budget)?;
    out.step(
        "share_and_pack",
        t0,
        "columns registered in place, packed copies made",
    );

    for q in queries {
        let t0 = Instant::now();
        let want = reference::answer(q, &tables);
        out.step(&format!("{q}_host_reference"), t0, "one thread");
        for mode in [Mode::Raw, Mode::Packed, Mode::Resident] {
            // The first run is cold (columns in host memory; module loaded, pools filled by
            // it); then the median of the repeats.
            let first = checked(&mut engine, q, mode, &want)?;
            let mut runs = Vec::new();
            for _ in 0..args.repeat {
                runs.push(checked(&mut engine, q, mode, &want)?);
            }
            if mode == Mode::Resident && first.mode != Mode::Resident {
                let need: u64 = columns(q).iter().map(|&c| engine.packed_bytes(c)).sum();
                out.note(&format!(
                    "{q}: its packed columns ({:.1} MB) are not all in device memory within \
                     --device-budget {:.1} MB (the columns queries read most come first): \
                     streamed packed instead",
                    need as f64 / 1e6,
                    args.device_budget as f64 / 1e6
                ));
            }
            runs.sort_by(|a, b| a.ms.total_cmp(&b.ms));
            out.run(&tables, mode, &first, &runs[runs.len() / 2], &engine);
        }
        if !out.json {
            print!("{want}");
        }
    }
    Ok(())
}

/// Run `q` as `mode` and check its answer against the host's.
fn checked(engine: &mut Engine<'_>, q: Query, mode: Mode, want: &Answer) -> Result<Run, String> {
    let run = engine.run(q, mode)?;
    if run.answer != *want {
        return Err(format!(
            "{q} {mode}: the GPU's answer differs from the host's\nGPU:\n{}host:\n{want}",
            run.answer
        ));
    }
    Ok(run)
}

struct Output {
    json: bool,
}

impl Output {
    fn note(&self, s: &str) {
        if self.json {
            println!("{}", serde_json::json!({ "note": s }));
        } else {
            println!("tpch: {s}");
        }
    }

    fn step(&self, name: &str, t0: Instant, what: &str) {
        let s = t0.elapsed().as_secs_f64();
        if self.json {
            println!(
                "{}",
                serde_json::json!({ "step": name, "s": s, "what": what })
            );
        } else {
            println!("{name}: {s:.2} s ({what})");
        }
    }

    /// One query in one placement: `placement` asked for, the placement that ran in
    /// `median.mode` (a warm run whose columns the budget does not hold streams packed).
    fn run(&self, t: &Tables, placement: Mode, first: &Run, median: &Run, e: &Engine<'_>) {
        let gbps = |r: &Run| r.bytes_moved as f64 / (r.ms * 1e-3) / 1e9;
        let packing: Vec<String> = columns(first.query)
            .iter()
            .map(|&c| format!("{c:?}:{}", e.packing(c).bits))
            .collect();
        if self.json {
            println!(
                "{}",
                serde_json::json!({
                    "query": first.query.to_string(), "placement": placement.to_string(),
                    "mode": median.mode.to_string(),
                    "sf": t.sf, "rows": t.rows(), "first_ms": first.ms, "ms": median.ms,
                    "bytes_moved": median.bytes_moved, "raw_bytes": median.raw_bytes,
                    "gbps": gbps(median), "bits": packing, "checked": true,
                    "answer": median.answer.exact_lines(),
                })
            );
        } else {
            println!(
                "{} {:<8} first {:>9.3} ms  median {:>9.3} ms  moved {:>7.1} MB of {:>7.1} MB raw  {:>6.1} GB/s  checked",
                first.query,
                median.mode.to_string(),
                first.ms,
                median.ms,
                median.bytes_moved as f64 / 1e6,
                median.raw_bytes as f64 / 1e6,
                gbps(median),
            );
        }
    }
}
