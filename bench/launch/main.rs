//! Launch-queue benchmark, the counterpart of `bench/launch/reference.cu` (CUDA C++ compiled with nvcc
//! on the same machine, same run).
//!
//! `bench_launch [n ...] [--reps R] [--simulator]`: for each `n` (default 2^16 and 2^22), a chain of 1,000
//! dependent launches of the `jacobi` example kernel (`jacobi(a, b)` then `jacobi(b, a)`, …):
//! - `launch_chain`: queued through a `Gpu::scope` (no host wait between launches), one wait
//!   at the end;
//! - `graph_chain`: recorded once into a `Graph`, replayed (one wait).
//!
//! Host time from the first launch to the end of the wait, median over the repetitions,
//! divided by 1,000. The result of the last repetition is checked against the host on three
//! windows (start, middle, end) of the array: after k steps an element depends only on its k
//! neighbours each side, so a window computed alone is exact away from its cut edges.
//! One JSON line per (bench, n):
//! `{"impl":"berth","bench":"launch_chain"|"graph_chain","n":..,"launches":1000,"per_launch_us":..,"total_ms":..,"bad":..}`.
//!
//! First, the cost of one NVTX range as launches, copies and chunks open them (median of 10
//! batches of 100,000): `{"impl":"berth","bench":"nvtx_range","nvtx":"on"|"off","per_range_ns":..,"bad":0}`
//! — "off" without a profiler attached (or with `BERTH_NVTX=off`), "on" under one (`nsys
//! profile -t cuda,nvtx`); run.sh's `nsys` mode compares `launch_chain_submit` both ways.

use berth::{DeviceBuffer, Gpu, Grid};
use berth_bench::median_f64;
use berth_examples::chain::{jacobi, jacobi_host};
use berth_tests::random_f32;
use std::time::Instant;

const LAUNCHES: usize = 1000;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_launch: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut sizes = Vec::new();
    let mut reps = 10;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--simulator" {
            continue;
        } else if a == "--reps" {
            reps = args.next().ok_or("--reps needs a value")?.parse()?;
        } else {
            sizes.push(a.parse::<usize>()?);
        }
    }
    if sizes.is_empty() {
        sizes = vec![1 << 16, 1 << 22];
    }
    // `--simulator`: the same run on the CPU simulator (checks the harness, not the speed).
    let gpu = if std::env::args().any(|a| a == "--simulator") {
        Gpu::simulator()
    } else {
        Gpu::new()?
    };
    nvtx_cost();
    if gpu.backend() == berth::Backend::Cuda {
        host_costs(&gpu)?;
    }
    for n in sizes {
        let x = random_f32(n);
        let mut a = gpu.upload(&x)?;
        let mut b = gpu.upload(&x)?;
        let grid = Grid::cover(n);

        // Queued in a scope.
        let mut times = Vec::with_capacity(reps);
        let mut submits = Vec::with_capacity(reps);
        for rep in 0..=reps {
            a.copy_from(&x)?;
            b.copy_from(&x)?;
            let t = Instant::now();
            let mut submitted = 0.0;
            gpu.scope(|s| {
                for _ in 0..LAUNCHES / 2 {
                    jacobi(s, grid, &a, &mut b)?.detach();
                    jacobi(s, grid, &b, &mut a)?.detach();
                }
                submitted = t.elapsed().as_secs_f64();
                Ok(())
            })?;
            if rep > 0 {
                times.push(t.elapsed().as_secs_f64());
                submits.push(submitted);
            }
        }
        let bad = check(&x, &a.to_vec()?);
        // The host's time to queue the launches (before the scope's one wait): when it is
        // most of the total, the host path, not the GPU, sets the pace.
        println!(
            "{{\"impl\":\"berth\",\"bench\":\"launch_chain_submit\",\"n\":{n},\"launches\":{LAUNCHES},\"per_launch_us\":{:.3},\"bad\":0}}",
            median_f64(submits) * 1e6 / LAUNCHES as f64
        );
        report("launch_chain", n, median_f64(times), bad);

        // Recorded once, replayed.
        a.copy_from(&x)?;
        b.copy_from(&x)?;
        let mut times = Vec::with_capacity(reps);
        {
            let mut graph = gpu.graph();
            let mut ha = graph.hold(&mut a)?;
            let mut hb = graph.hold(&mut b)?;
            graph.record(|r| {
                for _ in 0..LAUNCHES / 2 {
                    jacobi(r, grid, &ha, &mut hb)?.detach();
                    jacobi(r, grid, &hb, &mut ha)?.detach();
                }
                Ok(())
            })?;
            graph.run(&gpu)?.wait()?; // warm-up (uploads the graph)
            for _ in 0..reps {
                let t = Instant::now();
                graph.run(&gpu)?.wait()?;
                times.push(t.elapsed().as_secs_f64());
            }
        }
        // 1 + reps replays from x.
        let bad = check_steps(&x, &a, LAUNCHES * (reps + 1))?;
        report("graph_chain", n, median_f64(times), bad);
    }
    Ok(())
}

/// One NVTX range opened and closed, as the launch path does it, per call.
fn nvtx_cost() {
    const CALLS: usize = 100_000;
    let mut t = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        for _ in 0..CALLS {
            drop(std::hint::black_box(berth::nvtx::range(
                std::hint::black_box("launch jacobi"),
            )));
        }
        t.push(start.elapsed().as_secs_f64() * 1e9 / CALLS as f64);
    }
    let on = if berth::nvtx::enabled() { "on" } else { "off" };
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"nvtx_range\",\"nvtx\":\"{on}\",\"per_range_ns\":{:.2},\"bad\":0}}",
        median_f64(t)
    );
}

fn report(bench: &str, n: usize, seconds: f64, bad: usize) {
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"{bench}\",\"n\":{n},\"launches\":{LAUNCHES},\"per_launch_us\":{:.3},\"total_ms\":{:.4},\"bad\":{bad}}}",
        seconds * 1e6 / LAUNCHES as f64,
        seconds * 1e3
    );
}

/// Elements of `got` (after `LAUNCHES` steps from `x`) that differ from the host's on the
/// three windows.
fn check(x: &[f32], got: &[f32]) -> usize {
    windows_bad(x, got, LAUNCHES)
}

fn check_steps(x: &[f32], a: &DeviceBuffer<f32>, steps: usize) -> berth::Result<usize> {
    Ok(windows_bad(x, &a.to_vec()?, steps))
}

/// Compare `got` with `steps` host steps from `x` on a window at the start, the middle and
/// the end of the array (each computed alone; exact `steps` elements away from a cut edge).
fn windows_bad(x: &[f32], got: &[f32], steps: usize) -> usize {
    let n = x.len();
    let w = 1024.min(n);
    let mut bad = 0;
    for centre in [0, n / 2, n - w] {
        let lo = centre.saturating_sub(steps);
        let hi = (centre + w + steps).min(n);
        let mut p = x[lo..hi].to_vec();
        let mut q = p.clone();
        for _ in 0..steps {
            jacobi_host(&p, &mut q);
            std::mem::swap(&mut p, &mut q);
        }
        // Exact where no cut edge is within `steps`: real ends of the array are not cuts.
        let from = if lo == 0 { 0 } else { steps };
        let to = if hi == n { hi - lo } else { hi - lo - steps };
        for i in from..to {
            if (p[i] - got[lo + i]).abs() > 1e-6 {
                bad += 1;
            }
        }
    }
    bad
}

/// Where a queued launch's host time goes, on the same context: `cuCtxSetCurrent` (which every
/// berth call makes) and a bare `cuLaunchKernel` of the `jacobi` entry berth runs, on the same stream
/// (no berth code), each per call, median of 10 batches of 1,000. Together with
/// `launch_chain_submit` they split berth's host path into the driver's part and berth's own.
fn host_costs(gpu: &Gpu) -> Result<(), Box<dyn std::error::Error>> {
    use berth::raw::{result, sys};
    let n = 1usize << 16;
    let a = gpu.upload(&random_f32(n))?;
    let b = gpu.alloc_zeroed::<f32>(n)?;
    let ctx = gpu.raw_context().ok_or("the host costs need a GPU")?;
    let stream = gpu
        .raw_default_stream()
        .ok_or("the host costs need a GPU")?;
    let k = berth::__private::registered_kernels()
        .find(|k| k.name == "jacobi")
        .ok_or("the jacobi kernel is not registered")?;
    let grid = Grid::cover(n);
    // The entry berth runs for this grid (the one-dimensional one).
    let entry = std::ffi::CString::new(k.entry_name(grid.entry_of(k)))?;
    // SAFETY: `ctx` is berth's live context; the module and function are this context's.
    let func = unsafe {
        result::ctx::set_current(ctx)?;
        let module = result::module::load_data(std::ffi::CString::new(k.ptx())?.as_ptr().cast())?;
        result::module::get_function(module, entry)?
    };
    let per_call = |f: &mut dyn FnMut()| -> f64 {
        let mut t = Vec::new();
        for _ in 0..10 {
            let start = Instant::now();
            for _ in 0..LAUNCHES {
                f();
            }
            t.push(start.elapsed().as_secs_f64() * 1e6 / LAUNCHES as f64);
        }
        median_f64(t)
    };
    let bind_us = per_call(&mut || {
        // SAFETY: as above.
        let _ = unsafe { result::ctx::set_current(ctx) };
    });
    let (mut pa, mut la, mut pb, mut lb) = (a.device_ptr(), n as u64, b.device_ptr(), n as u64);
    let mut params: [*mut std::ffi::c_void; 4] = [
        (&raw mut pa).cast(),
        (&raw mut la).cast(),
        (&raw mut pb).cast(),
        (&raw mut lb).cast(),
    ];
    let (g, t) = (grid.blocks, grid.threads);
    let raw_us = per_call(&mut || {
        // SAFETY: `func` takes (ptr, len, ptr, len); the buffers outlive the synchronise
        // below; `stream` is berth's default stream of this context.
        let _ = unsafe {
            result::launch_kernel(
                func,
                (g.x, g.y, g.z),
                (t.x, t.y, t.z),
                0,
                stream as sys::CUstream,
                &mut params,
            )
        };
    });
    // SAFETY: as above.
    unsafe { result::stream::synchronize(stream) }?;
    for (bench, us) in [("host_bind", bind_us), ("host_raw_launch", raw_us)] {
        println!(
            "{{\"impl\":\"berth\",\"bench\":\"{bench}\",\"n\":{n},\"launches\":{LAUNCHES},\"per_launch_us\":{us:.3},\"bad\":0}}"
        );
    }
    Ok(())
}
