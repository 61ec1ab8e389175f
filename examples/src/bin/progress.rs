//! progress: a long-running kernel reports its progress in mapped memory while it runs; the
//! host draws a progress bar from it, then checks the result.

use berth::{Backend, Gpu, Grid};
use berth_examples::cli::{init_logging, progress_bar};
use berth_examples::{REDUCE_BLOCK, sum_with_progress};
use clap::Parser;
use rand::Rng;
use std::time::{Duration, Instant};

/// A long-running kernel that reports its progress while it runs.
#[derive(Parser)]
struct Args {}

fn main() {
    Args::parse();
    init_logging();
    if let Err(e) = run() {
        eprintln!("progress: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new_or_simulator()?;
    // Enough work to watch: more rounds on a GPU than on the simulator.
    let (n, rounds, blocks) = match gpu.backend() {
        Backend::Cuda => (1 << 24, 200u32, 132 * 8u32),
        Backend::Simulator => (1 << 20, 4u32, 64u32),
    };
    println!(
        "progress: {rounds} passes over {n} floats on {}",
        gpu.name()
    );
    let mut rng = rand::rng();
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let dx = gpu.upload(&x)?;
    let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize])?;
    let progress = gpu.signals(1)?;
    let stream = gpu.stream()?;
    let start = Instant::now();
    let pending = sum_with_progress(
        &stream,
        Grid::new(blocks, REDUCE_BLOCK),
        rounds,
        &dx,
        &mut partial,
        &progress,
    )?;
    let mut shown = u32::MAX;
    let mut updates = 0;
    let bar = progress_bar("progress", u64::from(blocks), "blocks");
    loop {
        let done = progress.load(0);
        if done != shown {
            shown = done;
            updates += 1;
            bar.set_position(u64::from(done));
        }
        if done >= blocks {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            return Err("no progress for 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    bar.finish();
    pending.wait()?;
    let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let want: f64 = f64::from(rounds) * x.iter().map(|&v| f64::from(v)).sum::<f64>();
    let scale: f64 = f64::from(rounds) * x.iter().map(|&v| f64::from(v.abs())).sum::<f64>();
    let ok = (got - want).abs() <= 1e-5 * scale;
    println!(
        "progress: {:.2} s, {updates} progress updates seen while it ran; sum {got:.3} (host {want:.3}): {}",
        start.elapsed().as_secs_f64(),
        if ok { "ok" } else { "MISMATCH" }
    );
    if !ok {
        std::process::exit(2);
    }
    Ok(())
}
