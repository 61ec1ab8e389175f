//! Multi-GPU benchmark, the counterpart of `bench/multigpu/reference.cu` (CUDA C++ and NCCL called
//! directly, nvcc, same run). JSON lines with `"impl":"berth"`:
//!
//! - `multigpu_pipeline`: 4 GiB in + 4 GiB out through `affine_one_pipelined` (automatic plan),
//!   on device 0 alone (`"devices":1`) and split over every device of the machine by
//!   `DeviceSet::pipelined`, rounds interleaved; wall clock, one warm-up, median;
//! - `peer_read`: `block_sum` over 1 GiB of f32 on device 0, reading device 1's buffer in place
//!   through a peer view (`"where":"peer"`) and, for scale, its own (`"where":"local"`);
//! - `peer_step` (1 MiB): a step across devices, `saxpy` writing a buffer on device 1 in a
//!   scope, then `block_sum` on device 0 reading it in place through a peer view made after
//!   the write, queued behind the write on the GPU (device 0's stream waits for device 1's),
//!   waited for;
//! - `allreduce`: `DeviceSet::all_reduce` (NCCL) of f32 buffers of 1 MiB, 64 MiB and 1 GiB on
//!   every device, waited for after each through its guard; bus bandwidth as nccl-tests
//!   defines it (`bytes × 2(n−1)/n / time`); `submit_us` is the host time of the call that
//!   queues it. `allreduce_devsync`: the same, waited for with `DeviceSet::synchronize`.
//!   `allreduce_step` (1 MiB): a data-parallel step's tail, the all-reduce detached and a
//!   launch reading its result queued behind it on every device, waited for through the
//!   launches.
//!
//! `bench_multigpu [pipeline|peer|allreduce|all] [reps=5]`. With fewer than two GPUs it prints
//! why on stderr and emits the single-device lines only.

use berth::{DeviceSet, Grid, PipelineOptions, ReduceOp};
use berth_bench::{median_f64, stream_input_at};
use berth_examples::{REDUCE_BLOCK, affine_one_pipelined, block_sum, saxpy};
use std::time::Instant;

type BoxError = Box<dyn std::error::Error>;

const N: usize = 1 << 30;
const A: f32 = 1.5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let section = args.get(1).map_or("all", String::as_str).to_owned();
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    if let Err(e) = run(&section, reps.max(1)) {
        eprintln!("bench_multigpu: {e}");
        std::process::exit(1);
    }
}

fn run(section: &str, reps: usize) -> Result<(), BoxError> {
    let all = section == "all";
    let count = DeviceSet::cuda_count()?;
    eprintln!("bench_multigpu: {count} CUDA device(s), reps={reps}");
    if count < 2 {
        eprintln!("bench_multigpu: fewer than two GPUs: only the single-device pipeline runs");
    }
    if all || section == "pipeline" {
        pipeline(count, reps)?;
    }
    if count >= 2 && (all || section == "peer") {
        peer(reps)?;
    }
    // Asked for by name, the all-reduce also runs over one GPU (a communicator of one rank):
    // the collective call's host path against NCCL's own, without a second device.
    if (count >= 2 && all) || (count >= 1 && section == "allreduce") {
        allreduce(reps)?;
    }
    Ok(())
}

/// Fill a set's shards of the whole dataset, element i = stream_input_at(i), a thread per 1/16.
fn fill(xs: &mut berth::Sharded<f32>) {
    let ranges = xs.ranges().to_vec();
    for (part, r) in xs.shards_mut().iter_mut().zip(ranges) {
        let step = part.len().div_ceil(16).max(1);
        std::thread::scope(|s| {
            for (c, chunk) in part.chunks_mut(step).enumerate() {
                let base = r.start + c * step;
                s.spawn(move || {
                    for (j, v) in chunk.iter_mut().enumerate() {
                        *v = stream_input_at(base + j);
                    }
                });
            }
        });
    }
}

fn bad(ys: &berth::Sharded<f32>) -> usize {
    (0..N)
        .step_by(4097)
        .chain(N - 1000..N)
        .filter(|&i| {
            let want = A * stream_input_at(i) + 1.0;
            let got = *ys.get(i).unwrap_or(&f32::NAN);
            let close = (got - want).abs() <= 1e-5 * want.abs() + 1e-6; // false for NaN
            !close
        })
        .count()
}

fn pipeline(count: usize, reps: usize) -> Result<(), BoxError> {
    let mut sets = vec![DeviceSet::cuda(&[0])?];
    if count >= 2 {
        sets.push(DeviceSet::all()?);
    }
    let mut data = Vec::new();
    for set in &sets {
        let mut xs = set.shard_zeroed::<f32>(N)?;
        fill(&mut xs);
        let ys = set.shard_zeroed_like::<f32, _>(&xs)?;
        eprintln!(
            "pipeline over {} device(s): shards {:?}, link weights {:?}",
            set.len(),
            xs.ranges(),
            set.link_weights()?
        );
        data.push((xs, ys));
    }
    let once = |set: &DeviceSet, xs: &berth::Sharded<f32>, ys: &mut berth::Sharded<f32>| {
        set.pipelined(xs, ys, &|_, _, _| {}, |gpu, x, y, _| {
            affine_one_pipelined(gpu, PipelineOptions::default(), A, x, y)?.wait()
        })
    };
    let mut times = vec![Vec::new(); sets.len()];
    // One warm-up each, then rounds interleaved so drift hits both alike.
    for (set, (xs, ys)) in sets.iter().zip(data.iter_mut()) {
        once(set, xs, ys)?;
    }
    for _ in 0..reps {
        for (k, (set, (xs, ys))) in sets.iter().zip(data.iter_mut()).enumerate() {
            let start = Instant::now();
            once(set, xs, ys)?;
            times[k].push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    for (k, set) in sets.iter().enumerate() {
        let ms = median_f64(times[k].clone());
        let gbps = (N * 4) as f64 / (ms * 1e-3) / 1e9;
        println!(
            "{{\"impl\":\"berth\",\"bench\":\"multigpu_pipeline\",\"devices\":{},\"bytes_in\":{},\"median_ms\":{ms:.3},\"gbps_in\":{gbps:.2},\"reps\":{reps},\"bad\":{}}}",
            set.len(),
            N * 4,
            bad(&data[k].1)
        );
    }
    Ok(())
}

fn peer(reps: usize) -> Result<(), BoxError> {
    let n = 1usize << 28;
    let blocks = 132 * 8;
    let set = DeviceSet::cuda(&[0, 1])?;
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let direct = set.can_access_peer(0, 1)?;
    eprintln!("peer read: device 0 can access device 1 in place: {direct}");
    let ones = vec![1.0f32; n];
    let remote = g1.upload(&ones)?;
    let local = g0.upload(&ones)?;
    let mut partial = g0.alloc_zeroed::<f32>(blocks)?;
    let view = remote.peer_view(g0)?;
    let grid = Grid::new(blocks as u32, REDUCE_BLOCK);
    let mut time = |on_peer: bool| -> Result<(f64, usize), BoxError> {
        let mut t = Vec::new();
        for r in 0..=reps {
            let start = Instant::now();
            if on_peer {
                block_sum(g0, grid, &view, &mut partial)?.wait()?;
            } else {
                block_sum(g0, grid, &local, &mut partial)?.wait()?;
            }
            if r > 0 {
                t.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        let total: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
        Ok((median_f64(t), usize::from(total != n as f64)))
    };
    for (place, on_peer) in [
        ("peer", true),
        ("local", false),
        ("peer", true),
        ("local", false),
    ] {
        let (ms, bad) = time(on_peer)?;
        let gbps = (n * 4) as f64 / (ms * 1e-3) / 1e9;
        println!(
            "{{\"impl\":\"berth\",\"bench\":\"peer_read\",\"where\":\"{place}\",\"path\":\"{:?}\",\"bytes\":{},\"median_ms\":{ms:.3},\"gbps\":{gbps:.2},\"reps\":{reps},\"bad\":{bad}}}",
            if on_peer {
                view.path()
            } else {
                berth::PeerPath::Local
            },
            n * 4
        );
    }
    if !direct {
        eprintln!("peer step: skipped, device 0 cannot read device 1's memory in place");
        return Ok(());
    }
    peer_step(&set, reps)
}

/// A step across devices: device 1 writes `y += z` (a launch detached in a scope on its
/// default stream), device 0 sums `y` in place through a peer view made right after, its
/// stream ordered after the write on the GPU, and the sum is waited for. The C++ side records
/// an event after the write and makes device 0's stream wait for it.
fn peer_step(set: &DeviceSet, reps: usize) -> Result<(), BoxError> {
    let (n, iters, blocks) = (1usize << 18, 200usize, 132 * 8);
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let z = g1.upload(&vec![1.0f32; n])?;
    let mut y = g1.alloc_zeroed::<f32>(n)?;
    let mut partial = g0.alloc_zeroed::<f32>(blocks)?;
    let (write, read) = (Grid::cover(n), Grid::new(blocks as u32, REDUCE_BLOCK));
    let mut per = Vec::new();
    for r in 0..=reps {
        let start = Instant::now();
        for _ in 0..iters {
            g1.scope(|s1| {
                saxpy(s1, write, 1.0, &z, &mut y)?.detach();
                let view = y.peer_view(g0)?;
                block_sum(g0, read, &view, &mut partial)?.wait()
            })?;
        }
        if r > 0 {
            per.push(start.elapsed().as_secs_f64() / iters as f64);
        }
    }
    // Every step added one: y holds the number of steps, and the last sum saw all of it.
    let steps = ((reps + 1) * iters) as f32;
    let mut bad = y.to_vec()?.iter().filter(|&&v| v != steps).count();
    let total: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let want = f64::from(steps) * n as f64;
    bad += usize::from((total - want).abs() > 1e-5 * want);
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"peer_step\",\"bytes\":{},\"iters\":{iters},\"median_us\":{:.2},\"reps\":{reps},\"bad\":{bad}}}",
        n * 4,
        median_f64(per) * 1e6
    );
    Ok(())
}

fn allreduce(reps: usize) -> Result<(), BoxError> {
    let set = DeviceSet::all()?;
    let n = set.len();
    for (bytes, iters) in [(1usize << 20, 200usize), (64 << 20, 40), (1 << 30, 8)] {
        let len = bytes / 4;
        let mut bufs: Vec<_> = set
            .iter()
            .enumerate()
            .map(|(d, g)| g.upload(&vec![d as f32 + 1.0; len]))
            .collect::<Result<_, _>>()?;
        // Correctness first: one all-reduce of 1, 2, … gives n(n+1)/2 everywhere.
        set.all_reduce(&mut bufs, ReduceOp::Sum)?.wait()?;
        let want = (n * (n + 1) / 2) as f32;
        let mut bad = 0;
        for b in &bufs {
            let v = b.to_vec()?;
            bad += v.iter().step_by(997).filter(|&&x| x != want).count();
        }
        if bytes == 1 << 20 {
            step(&set, &mut bufs, iters, reps)?;
        }
        for b in &mut bufs {
            b.copy_from(&vec![0.0f32; len])?;
        }
        // Waited for through the guard (each member's collective stream, as the C++ side
        // synchronises its streams), then through `DeviceSet::synchronize` (every stream of
        // each member, as `cudaDeviceSynchronize` would).
        for (bench, whole) in [("allreduce", false), ("allreduce_devsync", true)] {
            let (mut per, mut submit) = (Vec::new(), Vec::new());
            for r in 0..=reps {
                let start = Instant::now();
                let mut queued = 0.0;
                for _ in 0..iters {
                    let t = Instant::now();
                    let c = set.all_reduce(&mut bufs, ReduceOp::Sum)?;
                    queued += t.elapsed().as_secs_f64();
                    if whole {
                        c.detach();
                        set.synchronize()?;
                    } else {
                        c.wait()?;
                    }
                }
                if r > 0 {
                    per.push(start.elapsed().as_secs_f64() / iters as f64);
                    submit.push(queued / iters as f64);
                }
            }
            let (s, submit) = (median_f64(per), median_f64(submit));
            let busbw = bytes as f64 * 2.0 * (n - 1) as f64 / n as f64 / s / 1e9;
            // `submit_us`: the host time of the call that queues the collective (the rest of
            // `median_us` is the wait), to split a gap between host path and GPU time.
            println!(
                "{{\"impl\":\"berth\",\"bench\":\"{bench}\",\"devices\":{n},\"bytes\":{bytes},\"iters\":{iters},\"median_us\":{:.2},\"submit_us\":{:.2},\"busbw_gbps\":{busbw:.2},\"reps\":{reps},\"bad\":{bad}}}",
                s * 1e6,
                submit * 1e6
            );
        }
    }
    Ok(())
}

/// The tail of a data-parallel step: the all-reduce detached, then on every device a launch
/// on its default stream reading the reduced buffer (which the stream orders after the
/// collective on the GPU: the host does not wait in between), waited for through the launches'
/// guards. The C++ side records an event on each collective stream, makes the launch's stream
/// wait for it and synchronises the launch streams.
fn step(
    set: &DeviceSet,
    bufs: &mut [berth::DeviceBuffer<f32>],
    iters: usize,
    reps: usize,
) -> Result<(), BoxError> {
    let n = set.len();
    let len = bufs[0].len();
    let grid = Grid::cover(len);
    let mut outs: Vec<_> = set
        .iter()
        .map(|g| g.alloc_zeroed::<f32>(len))
        .collect::<Result<_, _>>()?;
    let once = |bufs: &mut [berth::DeviceBuffer<f32>],
                outs: &mut [berth::DeviceBuffer<f32>]|
     -> Result<(), BoxError> {
        set.all_reduce(bufs, ReduceOp::Sum)?.detach();
        let launched: Vec<_> = set
            .iter()
            .zip(bufs.iter())
            .zip(outs.iter_mut())
            .map(|((g, b), o)| saxpy(g, grid, 1.0, b, o))
            .collect::<Result<_, _>>()?;
        for p in launched {
            p.wait()?;
        }
        Ok(())
    };
    // Correctness first: buffers of 1, 2, … reduce to n(n+1)/2, which lands in zeroed outputs.
    for (d, b) in bufs.iter_mut().enumerate() {
        b.copy_from(&vec![d as f32 + 1.0; len])?;
    }
    once(bufs, &mut outs)?;
    let want = (n * (n + 1) / 2) as f32;
    let mut bad = 0;
    for o in &outs {
        bad += o.to_vec()?.iter().filter(|&&x| x != want).count();
    }
    for b in bufs.iter_mut().chain(outs.iter_mut()) {
        b.copy_from(&vec![0.0f32; len])?;
    }
    let mut per = Vec::new();
    for r in 0..=reps {
        let start = Instant::now();
        for _ in 0..iters {
            once(bufs, &mut outs)?;
        }
        if r > 0 {
            per.push(start.elapsed().as_secs_f64() / iters as f64);
        }
    }
    println!(
        "{{\"impl\":\"berth\",\"bench\":\"allreduce_step\",\"devices\":{n},\"bytes\":{},\"iters\":{iters},\"median_us\":{:.2},\"reps\":{reps},\"bad\":{bad}}}",
        len * 4,
        median_f64(per) * 1e6
    );
    Ok(())
}
