//! Kernel benchmark of the Rust-built example kernels, the counterpart of
//! `bench/kernels/reference.cu` (CUDA C++ compiled with nvcc on the same machine, same run).
//!
//! `bench <n> [repetitions]`: one warm-up, then each launch timed alone with CUDA events
//! (as the reference does), median reported; results checked against the host. Prints one
//! JSON line per kernel: `{"impl":"berth","kernel":..,"n":..,"median_ms":..,"gbps":..,"bad":..}`,
//! then the launch overhead (`"bench":"launch_wait"`: one small launch and its wait, host
//! time, as the reference measures it).

use berth::{Gpu, Grid};
use berth_bench::timing::{Timer, median};
use berth_examples::{REDUCE_BLOCK, block_sum, saxpy};
use berth_tests::{random_f32, saxpy_host, sum_f64};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1 << 28);
    let reps: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let gpu = Gpu::new()?;
    let timer = Timer::new(&gpu)?;

    // saxpy: y = a*x + y, 12 bytes per element.
    let x = random_f32(n);
    let y = random_f32(n);
    let a = 1.5f32;
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&y)?;
    let grid = Grid::cover(n);
    saxpy(&gpu, grid, a, &dx, &mut dy)?.wait()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        times.push(timer.time(|| saxpy(&gpu, grid, a, &dx, &mut dy))?);
    }
    dy.copy_from(&y)?;
    saxpy(&gpu, grid, a, &dx, &mut dy)?.wait()?;
    let got = dy.to_vec()?;
    let want = saxpy_host(a, &x, &y);
    let bad = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| (*g - *w).abs() > 1e-5)
        .count();
    let ms = median(times);
    println!(
        "{{\"impl\":\"berth\",\"kernel\":\"saxpy\",\"n\":{n},\"median_ms\":{ms:.5},\"gbps\":{:.1},\"bad\":{bad}}}",
        12.0 * n as f64 / (ms * 1e-3) / 1e9
    );
    drop((dx, dy));

    // block_sum: 4 bytes per element, 132*8 blocks of 256 threads (as the reference).
    let blocks = 132 * 8;
    let dx = gpu.upload(&x)?;
    let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize])?;
    let grid = Grid::new(blocks, REDUCE_BLOCK);
    block_sum(&gpu, grid, &dx, &mut partial)?.wait()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        times.push(timer.time(|| block_sum(&gpu, grid, &dx, &mut partial))?);
    }
    let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let want = sum_f64(&x);
    let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
    let bad = usize::from((got - want).abs() > 1e-5 * scale);
    let ms = median(times);
    println!(
        "{{\"impl\":\"berth\",\"kernel\":\"block_sum\",\"n\":{n},\"median_ms\":{ms:.5},\"gbps\":{:.1},\"bad\":{bad}}}",
        4.0 * n as f64 / (ms * 1e-3) / 1e9
    );
    drop((dx, partial));
    launch_wait(&gpu, 2000)
}

/// Launch overhead: saxpy over 256 elements (one block) on the `Gpu`'s stream, launch plus
/// wait timed on the host, `rounds` times after 100 warm-ups; median and p99 in µs. Queueing
/// launches without waiting (the reference's `launch_enqueue`) is measured by `bench_launch`:
/// dependent launches queued in a `Gpu::scope`, against `bench/launch/reference.cu`. The result is
/// checked after one more launch from fresh inputs.
fn launch_wait(gpu: &Gpu, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let n = 256;
    let (x, y) = (random_f32(n), random_f32(n));
    let a = 1e-6f32;
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&y)?;
    let grid = Grid::cover(n);
    for _ in 0..100 {
        saxpy(gpu, grid, a, &dx, &mut dy)?.wait()?;
    }
    let mut us = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = std::time::Instant::now();
        saxpy(gpu, grid, a, &dx, &mut dy)?.wait()?;
        us.push(t.elapsed().as_secs_f32() * 1e6);
    }
    dy.copy_from(&y)?;
    saxpy(gpu, grid, a, &dx, &mut dy)?.wait()?;
    let want = saxpy_host(a, &x, &y);
    let bad = dy
        .to_vec()?
        .iter()
        .zip(&want)
        .filter(|(g, w)| (*g - *w).abs() > 1e-5)
        .count();
    let mut sorted = us.clone();
    sorted.sort_by(f32::total_cmp);
    let p99 = sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)];
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"launch_wait\",\"n\":{n},\"rounds\":{rounds},\"median_us\":{:.3},\"p99_us\":{p99:.3},\"bad\":{bad}}}",
        median(us)
    );
    Ok(())
}
