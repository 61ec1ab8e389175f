//! Pipeline benchmark: 4 GiB in + 4 GiB out through an elementwise kernel, the counterpart of
//! `bench/pipeline/reference.cu` (hand-written CUDA C++ pipelines, nvcc, same run).
//!
//! `bench_pipeline [serial|streams|auto|heavy|all] [reps=3]`, same data (element i a function
//! of i), same timing (wall clock around enqueue + wait, one warm-up, median) and checks
//! (every 4097th element and the last 1000) as the reference, JSON lines with
//! `"impl":"berth"`:
//! - `serial_pinned`: one unpipelined launch of `affine_one` (copy all in, kernel, copy out);
//! - `pipeline_streams`: `affine_one_pipelined` with 2/3/4 streams × 4…256 MiB chunks;
//! - `pipeline_auto`: the automatic plan (`PipelineOptions::default()`);
//! - `heavy_serial` / `heavy_pipeline` / `heavy_auto`: `relax` with K = 1280 steps.

use berth::{Gpu, Grid, PipelineOptions};
use berth_bench::{median_f64, stream_input_at};
use berth_examples::{affine_one, affine_one_pipelined, relax, relax_pipelined};
use std::time::Instant;

type BoxError = Box<dyn std::error::Error>;

const N: usize = 1 << 30;
const BYTES_IN: usize = N * 4;
const K: u32 = 1280;
const A: f32 = 1.5;

fn heavy_host(mut v: f32) -> f32 {
    for _ in 0..K {
        // One rounding per step: the GPU fuses the kernel's multiply-add.
        v = v.mul_add(0.9999, 0.0001);
    }
    v
}

fn sample() -> impl Iterator<Item = usize> {
    (0..N).step_by(4097).chain(N - 1000..N)
}

fn bad(y: &[f32], f: impl Fn(f32) -> f32) -> usize {
    sample()
        .filter(|&i| {
            let want = f(stream_input_at(i));
            let close = (y[i] - want).abs() <= 1e-5 * want.abs() + 1e-6; // false for NaN
            !close
        })
        .count()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let section = args.get(1).map_or("all", String::as_str).to_owned();
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    if let Err(e) = run(&section, reps) {
        eprintln!("bench_pipeline: {e}");
        std::process::exit(1);
    }
}

/// Median wall-clock milliseconds of `f` over `reps` runs after one warm-up.
fn time(reps: usize, mut f: impl FnMut() -> Result<(), BoxError>) -> Result<f64, BoxError> {
    f()?;
    let mut t = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median_f64(t))
}

fn emit(bench: &str, extra: &str, ms: f64, reps: usize, bad: usize) {
    let gbps = BYTES_IN as f64 / (ms * 1e-3) / 1e9;
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"{bench}\",\"bytes_in\":{BYTES_IN},{extra}\"median_ms\":{ms:.3},\"gbps_in\":{gbps:.2},\"reps\":{reps},\"bad\":{bad}}}"
    );
}

fn run(section: &str, reps: usize) -> Result<(), BoxError> {
    let gpu = Gpu::new()?;
    let link = gpu.link_profile()?;
    eprintln!(
        "device: {} (berth pipeline bench, reps={reps}); link: {link:?}",
        gpu.name()
    );
    let mut x = gpu.pinned_zeroed::<f32>(N)?;
    std::thread::scope(|s| {
        for (c, part) in x.chunks_mut(N / 16).enumerate() {
            s.spawn(move || {
                for (j, v) in part.iter_mut().enumerate() {
                    *v = stream_input_at(c * (N / 16) + j);
                }
            });
        }
    });
    let mut y = gpu.pinned_zeroed::<f32>(N)?;
    let affine = |v: f32| A * v + 1.0;
    let all = section == "all";

    if all || section == "serial" {
        y.fill(f32::NAN);
        let ms = time(reps, || {
            Ok(affine_one(&gpu, Grid::cover(N), A, &x, &mut y)?.wait()?)
        })?;
        emit("serial_pinned", "", ms, reps, bad(&y, affine));
        // The serial launch's 8 GiB of staging is not needed any more.
        gpu.trim_pools()?;
    }
    if all || section == "streams" {
        for streams in [2usize, 3, 4] {
            for mib in [4usize, 8, 16, 32, 64, 128, 256] {
                let opts = PipelineOptions {
                    chunk_bytes: Some(mib << 20),
                    streams: Some(streams),
                    ..Default::default()
                };
                y.fill(f32::NAN);
                let ms = time(reps, || {
                    affine_one_pipelined(&gpu, opts, A, &x, &mut y)?.wait()?;
                    Ok(())
                })?;
                let extra = format!("\"streams\":{streams},\"chunk_bytes\":{},", mib << 20);
                emit("pipeline_streams", &extra, ms, reps, bad(&y, affine));
            }
        }
    }
    if all || section == "auto" {
        y.fill(f32::NAN);
        let mut stats = None;
        let ms = time(reps, || {
            stats = Some(
                affine_one_pipelined(&gpu, PipelineOptions::default(), A, &x, &mut y)?.wait()?,
            );
            Ok(())
        })?;
        let s = stats.expect("ran");
        let extra = format!(
            "\"streams\":{},\"chunk_bytes\":{},\"staging_bytes\":{},",
            s.streams,
            s.chunk_elems * 4,
            s.staging_bytes
        );
        emit("pipeline_auto", &extra, ms, reps, bad(&y, affine));
    }
    if all || section == "bidir" {
        // The link's ceiling for this workload: 4 GiB in and 4 GiB out at the same time, no
        // kernel, on two streams.
        let (s_in, s_out) = (gpu.stream()?, gpu.stream()?);
        let mut dx = gpu.alloc_zeroed::<f32>(N)?;
        let dy = gpu.alloc_zeroed::<f32>(N)?;
        let ms = time(reps, || {
            let a = dx.copy_from_pinned(&s_in, &x)?;
            let b = dy.copy_to_pinned(&s_out, &mut y)?;
            a.wait()?;
            b.wait()?;
            Ok(())
        })?;
        emit("bidirectional_copies", "", ms, reps, 0);
        drop((dx, dy));
    }
    if all || section == "ablation" {
        // What the per-chunk progress flags cost, and how long enqueueing takes.
        for (streams, mib) in [(2usize, 4usize), (3, 4), (3, 64)] {
            for progress in [true, false] {
                let opts = PipelineOptions {
                    chunk_bytes: Some(mib << 20),
                    streams: Some(streams),
                    progress,
                    ..Default::default()
                };
                let mut enqueue = Vec::new();
                let ms = time(reps, || {
                    let t = Instant::now();
                    let run = affine_one_pipelined(&gpu, opts, A, &x, &mut y)?;
                    enqueue.push(t.elapsed().as_secs_f64() * 1e3);
                    run.wait()?;
                    Ok(())
                })?;
                // Which way the flags were written (`BERTH_PIPELINE_FLAGS`, read by the runtime).
                let by = match std::env::var("BERTH_PIPELINE_FLAGS").as_deref() {
                    Ok("memop") => "memop",
                    Ok("kernel") => "kernel",
                    _ => "copy",
                };
                let extra = format!(
                    "\"streams\":{streams},\"chunk_bytes\":{},\"progress\":{progress},\"flags\":\"{by}\",\"enqueue_ms\":{:.3},",
                    mib << 20,
                    median_f64(enqueue)
                );
                emit("pipeline_ablation", &extra, ms, reps, bad(&y, affine));
            }
        }
    }
    if all || section == "heavy" {
        let k = format!("\"k\":{K},");
        y.fill(f32::NAN);
        let ms = time(reps, || {
            Ok(relax(&gpu, Grid::cover(N), K, &x, &mut y)?.wait()?)
        })?;
        emit("heavy_serial", &k, ms, reps, bad(&y, heavy_host));
        gpu.trim_pools()?;
        let opts = PipelineOptions {
            chunk_bytes: Some(64 << 20),
            streams: Some(3),
            ..Default::default()
        };
        y.fill(f32::NAN);
        let ms = time(reps, || {
            relax_pipelined(&gpu, opts, K, &x, &mut y)?.wait()?;
            Ok(())
        })?;
        emit(
            "heavy_pipeline",
            &format!("{k}\"streams\":3,\"chunk_bytes\":67108864,"),
            ms,
            reps,
            bad(&y, heavy_host),
        );
        y.fill(f32::NAN);
        let ms = time(reps, || {
            relax_pipelined(&gpu, PipelineOptions::default(), K, &x, &mut y)?.wait()?;
            Ok(())
        })?;
        emit("heavy_auto", &k, ms, reps, bad(&y, heavy_host));
    }
    Ok(())
}
