//! stream: a transform over a host array larger than the device memory it is allowed, through
//! a pipelined launch (`y = a·x + 1`, chunks over several streams), with live progress.
//!
//! `stream [--gib N] [--device-budget BYTES]` (defaults: 16 GiB of input, or less where the
//! host memory available cannot pin it twice; a 1 GiB budget; `BYTES` takes K/M/G suffixes).
//! Reports the input rate, the plan, and the peak device memory
//! the run used, then checks the output.

use berth::{Gpu, PipelineOptions};
use berth_examples::affine_one_pipelined;
use berth_examples::cli::{host_memory_available, init_logging, parse_size, progress_bar};
use clap::Parser;
use indicatif::HumanBytes;
use std::time::{Duration, Instant};

/// A transform over a host array larger than the device memory it may use, through a
/// pipelined launch, with live progress (`RUST_LOG=berth_runtime=debug` shows the plan).
#[derive(Parser)]
struct Args {
    /// GiB of input; as much again of output is pinned too. Default: 16, or what fits in the
    /// host memory available
    #[arg(long)]
    gib: Option<f64>,
    /// Device memory the pipeline may use (K/M/G suffixes)
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    device_budget: usize,
}

const GIB: f64 = (1u64 << 30) as f64;

/// The default input size.
const DEFAULT_GIB: f64 = 16.0;

/// Of the host memory available, the share the two pinned arrays may take.
const HOST_SHARE: f64 = 0.75;

fn main() {
    init_logging();
    if let Err(e) = run(Args::parse()) {
        eprintln!("stream: {e}");
        std::process::exit(1);
    }
}

fn x_at(i: usize) -> f32 {
    (i % 4093) as f32 * 0.001 - 2.0
}

/// GiB of input that fit: the input and the output are pinned (page-locked), so both must fit
/// in the host memory available, with room to spare. An explicit `--gib` too large is refused
/// with the memory it needs; the default shrinks to fit.
fn input_gib(asked: Option<f64>) -> Result<f64, String> {
    if let Some(g) = asked
        && !(g.is_finite() && g > 0.0)
    {
        return Err(format!("--gib {g}: must be a positive number"));
    }
    let Some(avail) = host_memory_available() else {
        return Ok(asked.unwrap_or(DEFAULT_GIB));
    };
    let fits = HOST_SHARE * avail as f64 / GIB / 2.0;
    match asked {
        Some(g) if g <= fits => Ok(g),
        Some(g) => Err(format!(
            "--gib {g} pins {:.1} GiB of host memory (input and output); {:.1} GiB is \
             available here, of which it may take {:.0}%: use --gib {:.2} or less",
            2.0 * g,
            avail as f64 / GIB,
            HOST_SHARE * 100.0,
            fits
        )),
        None if fits >= DEFAULT_GIB => Ok(DEFAULT_GIB),
        None if fits >= 1.0 / 64.0 => {
            println!(
                "stream: {:.1} GiB of host memory available: {fits:.2} GiB of input instead of \
                 {DEFAULT_GIB}",
                avail as f64 / GIB
            );
            Ok(fits)
        }
        None => Err(format!(
            "only {:.0} MiB of host memory available: too little to pin even 16 MiB of input",
            avail as f64 / (1 << 20) as f64
        )),
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let gib = input_gib(args.gib)?;
    let budget = args.device_budget;
    let n = (gib * GIB / 4.0) as usize;
    let gpu = Gpu::new_or_simulator()?;
    let (free0, total) = gpu.memory_info()?;
    println!(
        "stream: on the {} — {:.1} GiB in + {:.1} GiB out through y = a·x + 1, device budget {:.2} GiB ({:.0} GiB free of {:.0})",
        gpu.name(),
        gib,
        gib,
        budget as f64 / GIB,
        free0 as f64 / GIB,
        total as f64 / GIB
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
    let bar = progress_bar("stream", run.chunks() as u64, "chunks");
    loop {
        let done = run.chunks_done();
        if let Ok((free, _)) = gpu.memory_info() {
            min_free = min_free.min(free);
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let rate = (done * plan.chunk_elems * 4) as f64 / secs / 1e9;
        bar.set_position(done as u64);
        bar.set_message(format!("{rate:5.1} GB/s in"));
        // A failed chunk never completes: stop on the run finishing too; `wait` says why.
        if done == run.chunks() || run.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bar.finish();
    let stats = run.wait()?;
    let secs = start.elapsed().as_secs_f64();
    let rate = (n * 4) as f64 / secs / 1e9;
    let peak = free0.saturating_sub(min_free);
    println!(
        "stream: {:.2} s, {rate:.1} GB/s input rate ({:.1} GB/s in + out); {} chunks of {} on {} streams",
        secs,
        2.0 * rate,
        stats.chunks,
        HumanBytes((stats.chunk_elems * 4) as u64),
        stats.streams
    );
    let peak = if gpu.backend() == berth::Backend::Cuda {
        HumanBytes(peak as u64).to_string()
    } else {
        "(not measured on the simulator)".to_owned()
    };
    println!(
        "stream: staging ring {}; peak device memory used during the run {peak} (budget {}, data {})",
        HumanBytes(stats.staging_bytes as u64),
        HumanBytes(budget as u64),
        HumanBytes((2 * n * 4) as u64)
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
