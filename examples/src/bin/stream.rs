//! stream: a transform over a host array larger than the device memory it is allowed, through
//! a pipelined launch (`y = a·x + 1`, chunks over several streams), with live progress.
//!
//! `stream [--gib N] [--device-budget BYTES]` (defaults: 16 GiB of input, a 1 GiB budget;
//! `BYTES` takes K/M/G suffixes). Reports the input rate, the plan, and the peak device memory
//! the run used, then checks the output.

use berth::{Gpu, PipelineOptions};
use berth_examples::affine_one_pipelined;
use std::io::Write;
use std::time::{Duration, Instant};

fn main() {
    if let Err(e) = run() {
        eprintln!("stream: {e}");
        std::process::exit(1);
    }
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim_end_matches(['i', 'B'])
        .parse::<f64>()
        .map(|v| (v * mult as f64) as usize)
        .map_err(|_| format!("`{s}` is not a size (like 512M or 1G)"))
}

fn x_at(i: usize) -> f32 {
    (i % 4093) as f32 * 0.001 - 2.0
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut gib = 16.0f64;
    let mut budget = 1usize << 30;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--gib" => gib = args.next().ok_or("--gib needs a number")?.parse()?,
            "--device-budget" => {
                budget = parse_bytes(&args.next().ok_or("--device-budget needs a size")?)?
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (use --gib N, --device-budget SIZE)"
                )
                .into());
            }
        }
    }
    let n = (gib * (1u64 << 30) as f64 / 4.0) as usize;
    let gpu = Gpu::new_or_simulator()?;
    let (free0, total) = gpu.memory_info()?;
    println!(
        "stream: on the {} — {:.1} GiB in + {:.1} GiB out through y = a·x + 1, device budget {:.2} GiB ({:.0} GiB free of {:.0})",
        gpu.name(),
        gib,
        gib,
        budget as f64 / (1u64 << 30) as f64,
        free0 as f64 / (1u64 << 30) as f64,
        total as f64 / (1u64 << 30) as f64
    );
    let t = Instant::now();
    let mut x = gpu.pinned_zeroed::<f32>(n)?;
    let mut y = gpu.pinned_zeroed::<f32>(n)?;
    let workers = std::thread::available_parallelism().map_or(4, |p| p.get());
    let part = n.div_ceil(workers).max(1);
    std::thread::scope(|s| {
        for (c, chunk) in x.chunks_mut(part).enumerate() {
            s.spawn(move || {
                chunk
                    .iter_mut()
                    .enumerate()
                    .for_each(|(j, v)| *v = x_at(c * part + j))
            });
        }
    });
    y.fill(f32::NAN);
    println!(
        "stream: pinned and filled the host arrays in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let a = 0.5f32;
    let opts = PipelineOptions {
        device_budget: Some(budget),
        ..Default::default()
    };
    let start = Instant::now();
    let run = affine_one_pipelined(&gpu, opts, a, &x, &mut y)?;
    let plan = run.stats();
    let mut min_free = free0;
    let mut shown = usize::MAX;
    loop {
        let done = run.chunks_done();
        if let Ok((free, _)) = gpu.memory_info() {
            min_free = min_free.min(free);
        }
        let pct = done * 100 / run.chunks().max(1);
        if pct != shown {
            shown = pct;
            let secs = start.elapsed().as_secs_f64().max(1e-9);
            let rate = (done * plan.chunk_elems * 4) as f64 / secs / 1e9;
            print!(
                "\rstream: [{:<40}] {pct:3}%  {rate:5.1} GB/s in",
                "#".repeat(pct * 40 / 100)
            );
            let _ = std::io::stdout().flush();
        }
        // A failed chunk never completes: stop on the run finishing too; `wait` says why.
        if done == run.chunks() || run.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = run.wait()?;
    let secs = start.elapsed().as_secs_f64();
    println!();
    let rate = (n * 4) as f64 / secs / 1e9;
    let peak = free0.saturating_sub(min_free);
    println!(
        "stream: {:.2} s, {rate:.1} GB/s input rate ({:.1} GB/s in + out); {} chunks of {:.0} MiB on {} streams",
        secs,
        2.0 * rate,
        stats.chunks,
        (stats.chunk_elems * 4) as f64 / (1 << 20) as f64,
        stats.streams
    );
    let peak = if gpu.backend() == berth::Backend::Cuda {
        format!("{:.0} MiB", peak as f64 / (1 << 20) as f64)
    } else {
        "(not measured on the simulator)".to_owned()
    };
    println!(
        "stream: staging ring {:.0} MiB; peak device memory used during the run {peak} (budget {:.0} MiB, data {:.0} MiB)",
        stats.staging_bytes as f64 / (1 << 20) as f64,
        budget as f64 / (1 << 20) as f64,
        (2 * n * 4) as f64 / (1 << 20) as f64
    );
    let bad = (0..n)
        .step_by(997)
        .chain(n.saturating_sub(1000)..n)
        .filter(|&i| y[i] != a * x_at(i) + 1.0)
        .count();
    if bad > 0 {
        eprintln!("stream: FAILED: {bad} sampled elements differ from the host");
        std::process::exit(2);
    }
    println!("stream: output checked against the host: ok");
    Ok(())
}
