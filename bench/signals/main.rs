//! Signal benchmark: round trips and mailbox throughput between the host and a persistent
//! kernel through mapped memory — the counterpart of `bench/signals/reference.cu` (same protocol,
//! slot layout and counts, CUDA C++, same run).
//!
//! JSON lines with `"impl":"berth"`: `round_trip` (20 000 strict mailbox round trips after
//! 1 000 of warm-up: median and p99 in µs), `flag_round_trip` (the same for a bare flag:
//! the host raises one `Signals` cell, the `ping_pong` kernel answers in another) and `mailbox_throughput` (200 000 jobs with the ring kept
//! full: jobs per second). Every reply is checked.

use berth::{Gpu, Grid};
use berth_examples::{Job, Reply, ping_pong, square_worker, worker_ctl};
use std::time::{Duration, Instant};

const CAP: usize = 256;
const T: Duration = Duration::from_secs(30);

fn job(id: u32) -> Job {
    Job {
        id,
        stop: 0,
        value: (id % 1000) as f32 * 0.25,
    }
}

fn bad(id: u32, r: &Reply) -> usize {
    let j = job(id);
    usize::from(r.id != id || r.value != j.value * j.value + 1.0)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_signals: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new()?;
    eprintln!("device: {} (berth signals bench)", gpu.name());
    let inbox = gpu.inbox::<Job>(CAP)?;
    let outbox = gpu.outbox::<Reply>(CAP)?;
    let ctl = gpu.signals(2)?;
    let stream = gpu.stream()?;
    let pending = square_worker(&stream, Grid::new(1, 1), 30_000, &inbox, &outbox, &ctl)?;
    let mut id = 0u32;
    let mut wrong = 0;
    for _ in 0..1000 {
        inbox.send(job(id), T)?;
        wrong += bad(id, &outbox.recv(T)?);
        id += 1;
    }
    let rounds = 20_000;
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        inbox.send(job(id), T)?;
        let r = outbox.recv(T)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        wrong += bad(id, &r);
        id += 1;
    }
    latency_line("round_trip", lat, wrong);

    let jobs = 200_000u32;
    let mut wrong = 0;
    let first = id;
    let mut next = id;
    let start = Instant::now();
    for k in first..first + jobs {
        while k - next >= CAP as u32 - 1 {
            wrong += bad(next, &outbox.recv(T)?);
            next += 1;
        }
        inbox.send(job(k), T)?;
    }
    while next < first + jobs {
        wrong += bad(next, &outbox.recv(T)?);
        next += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    inbox.send(
        Job {
            id: 0,
            stop: 1,
            value: 0.0,
        },
        T,
    )?;
    pending.wait()?;
    let answered = ctl.load(worker_ctl::ANSWERED);
    wrong += usize::from(answered != first + jobs);
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"mailbox_throughput\",\"jobs\":{jobs},\"jobs_per_s\":{:.0},\"bad\":{wrong}}}",
        f64::from(jobs) / secs
    );
    flag_round_trips(&gpu, rounds as u32)
}

/// Bare flag round trips: the host stores `n` in cell 0 (release) and spins on cell 1
/// (acquire) until the `ping_pong` kernel answers with `n`.
fn flag_round_trips(gpu: &Gpu, rounds: u32) -> Result<(), Box<dyn std::error::Error>> {
    let warmup = 1000;
    let cells = gpu.signals(2)?;
    let stream = gpu.stream()?;
    let pending = ping_pong(&stream, Grid::new(1, 1), warmup + rounds, 30_000, &cells)?;
    let mut lat = Vec::with_capacity(rounds as usize);
    for n in 1..=warmup + rounds {
        let t = Instant::now();
        cells.store(0, n);
        cells.wait(1, |v| v == n, T)?;
        if n > warmup {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    pending.wait()?;
    let wrong = usize::from(cells.load(1) != warmup + rounds);
    latency_line("flag_round_trip", lat, wrong);
    Ok(())
}

/// One JSON line of round-trip latencies (µs): median and p99 by the reference's rule,
/// `sorted[floor((N - 1) * p)]`.
fn latency_line(bench: &str, mut lat: Vec<f64>, wrong: usize) {
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"{bench}\",\"rounds\":{},\"median_us\":{:.3},\"p99_us\":{:.3},\"bad\":{wrong}}}",
        lat.len(),
        q(0.5),
        q(0.99)
    );
}
