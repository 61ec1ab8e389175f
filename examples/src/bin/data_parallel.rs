//! data_parallel: one data-parallel step over every device of a set. The dataset is split into
//! one shard per device; each device reduces its shard with a berth kernel (one partial sum per
//! block), then an all-reduce adds the partials of all devices, so that every device holds the
//! same combined partials, and a last launch on each device, queued behind the all-reduce
//! without a host wait, sums them; each device's total is checked against the host's sum.
//!
//! On GPUs the all-reduce is NCCL's (build with `--features nccl`); without a GPU the set is
//! two simulated devices, which do the all-reduce themselves.

use berth::{DeviceSet, Grid, ReduceOp};
use berth_examples::cli::init_logging;
use berth_examples::{REDUCE_BLOCK, block_sum};
use clap::Parser;
use rand::Rng;

/// A data-parallel step: shard reductions on every device, then an all-reduce.
#[derive(Parser)]
struct Args {
    /// Elements in the whole dataset.
    #[arg(long, default_value_t = 8_000_017)]
    n: usize,
    /// Simulated devices when there is no GPU.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    simulated: usize,
}

fn main() {
    let args = Args::parse();
    init_logging();
    match run(&args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(2),
        Err(e) => {
            eprintln!("data_parallel: {e}");
            std::process::exit(1);
        }
    }
}

fn run(args: &Args) -> Result<bool, berth::Error> {
    let mut rng = rand::rng();
    let x: Vec<f32> = (0..args.n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let set = DeviceSet::all_or_simulated(args.simulated)?;
    println!(
        "data_parallel: {} device(s): {}",
        set.len(),
        set.iter().map(|g| g.name()).collect::<Vec<_>>().join(", ")
    );
    let shard = args.n.div_ceil(set.len());
    let blocks = 132 * 4;
    let start = std::time::Instant::now();
    // Each device reduces its shard, on a thread of its own.
    let mut partials = set.run_each(|d, gpu| {
        let lo = (d * shard).min(args.n);
        let hi = ((d + 1) * shard).min(args.n);
        let dx = gpu.upload(&x[lo..hi])?;
        let mut partial = gpu.alloc_zeroed::<f32>(blocks)?;
        block_sum(
            gpu,
            Grid::new(blocks as u32, REDUCE_BLOCK),
            &dx,
            &mut partial,
        )?
        .wait()?;
        Ok(partial)
    })?;
    // Combine: the all-reduce leaves every device with the sum of all devices' partials. It
    // is left running, and each device's total of the combined partials (one block) is queued
    // behind it: the launch's stream waits for the collective's on the GPU, so the host waits
    // once, for the totals.
    set.all_reduce(&mut partials, ReduceOp::Sum)?.detach();
    let mut sums: Vec<_> = set
        .iter()
        .map(|gpu| gpu.alloc_zeroed::<f32>(1))
        .collect::<Result<_, _>>()?;
    let finals: Vec<_> = set
        .iter()
        .zip(&partials)
        .zip(&mut sums)
        .enumerate()
        .map(|(d, ((gpu, p), sum))| {
            block_sum(gpu, Grid::new(1, REDUCE_BLOCK), p, sum).map_err(|e| set.on_device(d, e))
        })
        .collect::<Result<_, _>>()?;
    for (d, launch) in finals.into_iter().enumerate() {
        launch.wait().map_err(|e| set.on_device(d, e))?;
    }
    let totals: Vec<f64> = sums
        .iter()
        .enumerate()
        .map(|(d, s)| {
            let v = s.to_vec().map_err(|e| set.on_device(d, e))?;
            Ok(f64::from(v[0]))
        })
        .collect::<Result<_, berth::Error>>()?;
    let secs = start.elapsed().as_secs_f64();

    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum();
    let ok = totals.iter().all(|t| (t - want).abs() <= 1e-5 * scale);
    for (d, t) in totals.iter().enumerate() {
        println!("data_parallel: device {d}: total {t:.6}");
    }
    println!(
        "data_parallel: sum of {} elements over {} device(s) = {:.6} (host {want:.6}) in {secs:.3} s: {}",
        args.n,
        set.len(),
        totals[0],
        if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}
