//! worker: a persistent kernel fed through mailboxes in mapped host memory. One GPU thread
//! stays resident; the host posts jobs, the kernel answers each, no launch or copy in between.
//! Measures round-trip latency (one job in flight) and throughput (the ring kept full), and
//! checks every reply.
//!
//! `worker [jobs]` (default 20 000).

use berth::{Backend, Gpu, Grid};
use berth_examples::cli::init_logging;
use berth_examples::{Job, Reply, square_worker, worker_ctl};
use clap::Parser;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(10);

fn main() {
    init_logging();
    if let Err(e) = run(Args::parse()) {
        eprintln!("worker: {e}");
        std::process::exit(1);
    }
}

/// The kernel answers `value² + 1`: one rounding on a GPU (berth contracts multiply-adds
/// into FMAs, as nvcc does), two on the simulator (host Rust does not).
fn expect(fused: bool, job: &Job, r: &Reply) -> Result<(), String> {
    let want = if fused {
        job.value.mul_add(job.value, 1.0)
    } else {
        job.value * job.value + 1.0
    };
    if r.id != job.id || r.value != want {
        return Err(format!(
            "job {} answered {r:?}, expected value {want}",
            job.id
        ));
    }
    Ok(())
}

/// Job `id`, whose value is `id / 2` (rounded to `f32`).
fn job(id: u32) -> Job {
    Job {
        id,
        stop: 0,
        value: id as f32 * 0.5,
    }
}

/// A persistent kernel serving jobs through mailboxes in mapped host memory.
#[derive(Parser)]
struct Args {
    /// Jobs to send, at least 2: the first half one at a time, the rest with the ring full
    #[arg(default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(2..))]
    jobs: u32,
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let jobs = args.jobs;
    let gpu = Gpu::new_or_simulator()?;
    let fused = gpu.backend() == berth::Backend::Cuda;
    let on = match gpu.backend() {
        Backend::Cuda => format!("the GPU ({})", gpu.name()),
        Backend::Simulator => format!("the {} (no GPU here)", gpu.name()),
    };
    println!("worker: persistent kernel on {on}, {jobs} jobs each way");
    let inbox = gpu.inbox::<Job>(256)?;
    let outbox = gpu.outbox::<Reply>(256)?;
    let ctl = gpu.signals(2)?;
    let stream = gpu.stream()?;
    let pending = square_worker(&stream, Grid::new(1, 1), 10_000, &inbox, &outbox, &ctl)?;
    ctl.wait(worker_ctl::STATE, |s| s == worker_ctl::RUNNING, TIMEOUT)?;

    // Latency: one job in flight at a time.
    let mut lat = Vec::with_capacity(jobs as usize / 2);
    for id in 0..jobs / 2 {
        let job = job(id);
        let t = Instant::now();
        inbox.send(job, TIMEOUT)?;
        let r = outbox.recv(TIMEOUT)?;
        lat.push(t.elapsed());
        expect(fused, &job, &r)?;
    }
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];

    // Throughput: keep the ring full; replies come back in order.
    let start = Instant::now();
    let first = jobs / 2;
    let mut next_reply = first;
    // Receive and check the oldest reply outstanding.
    let take = |next: &mut u32| -> Result<(), Box<dyn std::error::Error>> {
        expect(fused, &job(*next), &outbox.recv(TIMEOUT)?)?;
        *next += 1;
        Ok(())
    };
    for id in first..jobs {
        while id - next_reply >= inbox.capacity() as u32 - 1 {
            take(&mut next_reply)?;
        }
        inbox.send(job(id), TIMEOUT)?;
    }
    while next_reply < jobs {
        take(&mut next_reply)?;
    }
    let secs = start.elapsed().as_secs_f64();
    inbox.send(
        Job {
            id: u32::MAX,
            stop: 1,
            value: 0.0,
        },
        TIMEOUT,
    )?;
    pending.wait()?;
    let state = ctl.load(worker_ctl::STATE);
    let answered = ctl.load(worker_ctl::ANSWERED);
    if state != worker_ctl::STOPPED || answered != jobs {
        return Err(format!(
            "worker ended in state {state} after {answered} jobs (expected {jobs})"
        )
        .into());
    }
    println!(
        "worker: round trip median {:.1} µs, p99 {:.1} µs, max {:.1} µs ({} round trips)",
        us(p(0.5)),
        us(p(0.99)),
        us(*lat.last().expect("some")),
        lat.len()
    );
    println!(
        "worker: throughput {:.0} jobs/s with the ring kept full ({} jobs); all {jobs} replies checked",
        (jobs - first) as f64 / secs,
        jobs - first
    );
    Ok(())
}
