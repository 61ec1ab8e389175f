//! reduction: the sum of a large array with a shared-memory block reduction on the GPU
//! (one partial sum per block), finished on the host and checked against a host sum.

use berth::{Backend, Gpu, Grid};
use berth_examples::cli::init_logging;
use berth_examples::{REDUCE_BLOCK, block_sum};
use clap::Parser;
use rand::Rng;

/// A block-wise sum reduction checked against the host.
#[derive(Parser)]
struct Args {}

fn main() {
    Args::parse();
    init_logging();
    if let Err(e) = run() {
        eprintln!("reduction: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), berth::Error> {
    let n = 10_000_019;
    let mut rng = rand::rng();
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();

    // The GPU when there is one, else the CPU simulator (BERTH_BACKEND=simulator forces it).
    let gpu = Gpu::new_or_simulator()?;
    match gpu.backend() {
        Backend::Cuda => println!("reduction: running on the GPU ({})", gpu.name()),
        Backend::Simulator => println!("reduction: no GPU here: running on the {}", gpu.name()),
    }
    let start = std::time::Instant::now();
    let blocks = 132 * 8;
    let dx = gpu.upload(&x)?;
    let mut partial = gpu.upload(&vec![f32::NAN; blocks])?;
    block_sum(
        &gpu,
        Grid::new(blocks as u32, REDUCE_BLOCK),
        &dx,
        &mut partial,
    )?
    .wait()?;
    let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let secs = start.elapsed().as_secs_f64();

    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum();
    let ok = (got - want).abs() <= 1e-5 * scale;
    println!(
        "reduction: sum of {n} elements = {got:.6} (host {want:.6}) in {secs:.3} s: {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    if !ok {
        std::process::exit(2);
    }
    Ok(())
}
