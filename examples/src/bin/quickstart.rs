//! quickstart: saxpy on device buffers, checked against the same computation on the host.

use berth::{Backend, Gpu, Grid};
use berth_examples::cli::init_logging;
use berth_examples::saxpy;
use clap::Parser;
use rand::Rng;

/// saxpy on device buffers, checked against the host (on the GPU, or the CPU simulator where there is none).
#[derive(Parser)]
struct Args {}

fn main() {
    Args::parse();
    init_logging();
    if let Err(e) = run() {
        eprintln!("quickstart: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), berth::Error> {
    let n = 1 << 20;
    let mut rng = rand::rng();
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let a = 2.5f32;

    // The GPU when there is one, else the CPU simulator (BERTH_BACKEND=simulator forces it).
    let gpu = Gpu::new_or_simulator()?;
    match gpu.backend() {
        Backend::Cuda => println!("quickstart: running on the GPU ({})", gpu.name()),
        Backend::Simulator => println!("quickstart: no GPU here: running on the {}", gpu.name()),
    }
    let start = std::time::Instant::now();
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&y)?;
    saxpy(&gpu, Grid::cover(n), a, &dx, &mut dy)?.wait()?;
    let got = dy.to_vec()?;

    let bad = (0..n)
        .filter(|&i| (got[i] - a.mul_add(x[i], y[i])).abs() > 1e-5)
        .count();
    println!(
        "quickstart: saxpy over {n} elements in {:.3} s, {bad} mismatches against the host",
        start.elapsed().as_secs_f64()
    );
    if bad > 0 {
        eprintln!("quickstart: FAILED");
        std::process::exit(2);
    }
    Ok(())
}
