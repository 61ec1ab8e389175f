//! The soak: many launches of every kind, and many allocate/free cycles of every memory kind,
//! with the device's free memory and the process's resident memory measured before and after.
//! Nothing may leak: both must end flat, within a small tolerance.
//!
//! One test body, two backends, as in `gpu/`. On the GPU (`--features gpu`) the counts are
//! the full soak's (100,000 launches, 10,000 cycles per memory kind); on the simulator (CI)
//! they are small so the code is exercised on every test run. `BERTH_SOAK_LAUNCHES` and
//! `BERTH_SOAK_CYCLES` set them either way (`.gpu/run.sh soak` runs the full counts, the
//! `tests` and `sanitize` modes small ones).
//!
//! Each part prints one JSON line starting with `{"soak":` — what `cargo xtask record` reads
//! into `RELIABILITY.md`.

use berth::{DeviceBuffer, Gpu, Grid, PipelineOptions};
use berth_examples::chain::{chain_host, jacobi, jacobi_host};
use berth_examples::{affine_one_pipelined, saxpy, saxpy_pinned};
use berth_fixtures::args::mapped_iota;
use berth_tests::gpu;
use berth_tests::{affine_on, random_f32, saxpy_on};
use std::time::Instant;

/// A count from the environment, or its default for this backend.
fn count(var: &str, gpu_default: usize, sim_default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) => v
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{var}={v} is not a count")),
        Err(_) if cfg!(feature = "gpu") => gpu_default,
        Err(_) => sim_default,
    }
}

/// Launches of the launch soak, all kinds together.
fn launches() -> usize {
    count("BERTH_SOAK_LAUNCHES", 100_000, 2_000)
}

/// Allocate/free cycles of each memory kind.
fn cycles() -> usize {
    count("BERTH_SOAK_CYCLES", 10_000, 200)
}

/// Elements of the launches' buffers: small, so the soak measures launches, not bandwidth.
const N: usize = if cfg!(feature = "gpu") { 4096 } else { 1024 };

/// How far the device's free memory may move over a soak (the driver keeps some memory of
/// its own for streams and events); a leak of one small buffer per cycle would be far more.
const DEVICE_TOLERANCE: i64 = 8 << 20;
/// How far the resident memory may grow (the host allocator keeps freed pages cached).
const RSS_TOLERANCE: i64 = 32 << 20;

fn backend_name(gpu: &Gpu) -> &'static str {
    match gpu.backend() {
        berth::Backend::Cuda => "cuda",
        _ => "simulator",
    }
}

/// The process's resident memory (pinned host memory included), bytes.
fn rss() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Memory at one point of a soak: the device's free bytes (on the GPU) and the resident set.
#[derive(Clone, Copy)]
struct Sample {
    device_free: Option<i64>,
    rss: i64,
}

/// Settle everything, empty the pools, then measure. The simulator's "device" memory is host
/// memory (its free figure is the whole machine's, moved by every other process), so only the
/// resident set counts there.
fn sample(gpu: &Gpu) -> Sample {
    gpu.synchronize().unwrap();
    gpu.trim_pools().unwrap();
    let device_free =
        (gpu.backend() == berth::Backend::Cuda).then(|| gpu.memory_info().unwrap().0 as i64);
    Sample {
        device_free,
        rss: rss(),
    }
}

/// Whether a memory checker runs this process (`BERTH_SANITIZER`, set by `cargo xtask asan`
/// and `valgrind` and by `.gpu/run.sh sanitize`): its own bookkeeping (quarantined frees,
/// shadow memory, padded device allocations) moves the memory figures, and it checks for
/// leaks itself. The figures are printed, not asserted.
fn under_checker() -> bool {
    std::env::var_os("BERTH_SANITIZER").is_some()
}

/// Print the memory line of a soak and assert that it ended flat.
fn assert_flat(gpu: &Gpu, test: &str, before: Sample, after: Sample) {
    let device_delta = match (before.device_free, after.device_free) {
        // Positive: device memory lost over the soak.
        (Some(b), Some(a)) => Some(b - a),
        _ => None,
    };
    let rss_delta = after.rss - before.rss;
    let device_ok = device_delta.is_none_or(|d| d <= DEVICE_TOLERANCE);
    let rss_ok = rss_delta <= RSS_TOLERANCE;
    let opt = |v: Option<i64>| v.map_or("null".to_owned(), |v| v.to_string());
    println!(
        "{{\"soak\":\"memory\",\"test\":\"{test}\",\"backend\":\"{}\",\"device_free_before\":{},\
         \"device_free_after\":{},\"device_lost\":{},\"device_tolerance\":{DEVICE_TOLERANCE},\
         \"rss_before\":{},\"rss_after\":{},\"rss_grown\":{rss_delta},\"rss_tolerance\":{RSS_TOLERANCE},\
         \"flat\":{}}}",
        backend_name(gpu),
        opt(before.device_free),
        opt(after.device_free),
        opt(device_delta),
        before.rss,
        after.rss,
        device_ok && rss_ok
    );
    if under_checker() {
        return;
    }
    assert!(
        device_ok,
        "{test}: the device lost {} bytes over the soak (tolerance {DEVICE_TOLERANCE})",
        device_delta.unwrap_or(0)
    );
    assert!(
        rss_ok,
        "{test}: the resident set grew by {rss_delta} bytes over the soak (tolerance {RSS_TOLERANCE})"
    );
}

/// One JSON line of the launch soak.
fn launch_line(gpu: &Gpu, kind: &str, launches: usize, seconds: f64, bad: usize) {
    println!(
        "{{\"soak\":\"launches\",\"backend\":\"{}\",\"kind\":\"{kind}\",\"launches\":{launches},\
         \"seconds\":{seconds:.3},\"per_launch_us\":{:.2},\"bad\":{bad}}}",
        backend_name(gpu),
        seconds * 1e6 / launches.max(1) as f64
    );
}

/// Elements that differ in their bits.
fn mismatches(got: &[f32], want: &[f32]) -> usize {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count()
}

/// 100,000 launches: plain launches waited for one by one (on the default queue and on a
/// stream), dependent launches queued in scopes, `#[pinned_async]` launches through the
/// staging pool, and pipelined launches (one launch per chunk). Every part's result is checked
/// against the host, and memory ends where it started.
#[test]
fn soak_launches() {
    let (_g, gpu) = gpu();
    let total = launches();
    let (plain, scoped, pinned) = (total * 2 / 5, total * 2 / 5, total / 10);
    let piped = total - plain - scoped - pinned;
    let stream = gpu.stream().unwrap();
    let x = random_f32(N);
    let g = Grid::cover(N);
    // Warm-up: every kernel once, so modules, the staging pool's first buffers and the
    // link profile the pipeline measures are not counted as growth.
    {
        let dx = gpu.upload(&x).unwrap();
        let mut dy = gpu.upload(&x).unwrap();
        saxpy(&gpu, g, 1.0, &dx, &mut dy).unwrap().wait().unwrap();
        jacobi(&gpu, g, &dx, &mut dy).unwrap().wait().unwrap();
        let px = gpu.pinned_from(&x).unwrap();
        let mut py = gpu.pinned_from(&x).unwrap();
        saxpy_pinned(&gpu, g, 1.0, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
        affine_one_pipelined(&gpu, PipelineOptions::default(), 1.0, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
    }
    let before = sample(&gpu);

    // Plain launches, each waited for: alternately on the default queue and on a stream.
    let a = 0.5;
    let dx = gpu.upload(&x).unwrap();
    let y0 = random_f32(N);
    let mut dy = gpu.upload(&y0).unwrap();
    let t = Instant::now();
    for i in 0..plain {
        if i % 2 == 0 {
            saxpy(&gpu, g, a, &dx, &mut dy).unwrap().wait().unwrap();
        } else {
            saxpy(&stream, g, a, &dx, &mut dy).unwrap().wait().unwrap();
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let mut want = y0;
    for _ in 0..plain {
        want = saxpy_on(&gpu, a, &x, &want);
    }
    let bad = mismatches(&dy.to_vec().unwrap(), &want);
    launch_line(&gpu, "plain", plain, secs, bad);
    assert_eq!(
        bad, 0,
        "plain launches: {bad} elements differ from the host"
    );
    drop((dx, dy));

    // Dependent launches queued in scopes of up to 1,000, waited for once per scope.
    let (mut pa, mut pb): (DeviceBuffer<f32>, DeviceBuffer<f32>) =
        (gpu.upload(&x).unwrap(), gpu.upload(&x).unwrap());
    let t = Instant::now();
    let mut queued = 0;
    while queued < scoped {
        let steps = (scoped - queued).min(1000) / 2 * 2;
        let steps = steps.max(2);
        let launched = gpu
            .scope(|s| {
                for _ in 0..steps / 2 {
                    jacobi(s, g, &pa, &mut pb)?.detach();
                    jacobi(s, g, &pb, &mut pa)?.detach();
                }
                Ok(s.launches())
            })
            .unwrap();
        assert_eq!(launched, steps as u64);
        queued += steps;
    }
    let secs = t.elapsed().as_secs_f64();
    let want = chain_host(&x, queued, |_, a, b| jacobi_host(a, b));
    let bad = mismatches(&pa.to_vec().unwrap(), &want);
    launch_line(&gpu, "scoped", queued, secs, bad);
    assert_eq!(
        bad, 0,
        "scoped launches: {bad} elements differ from the host"
    );
    drop((pa, pb));

    // `#[pinned_async]` launches: staging buffers from the pool, copies in and out.
    let px = gpu.pinned_from(&x).unwrap();
    let y0 = random_f32(N);
    let mut py = gpu.pinned_from(&y0).unwrap();
    let t = Instant::now();
    for _ in 0..pinned {
        saxpy_pinned(&stream, g, a, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    let mut want = y0;
    for _ in 0..pinned {
        want = saxpy_on(&gpu, a, &x, &want);
    }
    let bad = mismatches(&py, &want);
    launch_line(&gpu, "pinned_async", pinned, secs, bad);
    assert_eq!(
        bad, 0,
        "pinned-async launches: {bad} elements differ from the host"
    );
    drop((px, py));

    // Pipelined launches: four chunks (of 1,024 elements, the pipeline's granule) over three
    // streams per run, every run checked.
    let n = 4096;
    let x = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(1024 * 4),
        streams: Some(3),
        ..Default::default()
    };
    let t = Instant::now();
    let (mut chunks, mut bad, mut run) = (0, 0, 0u32);
    while chunks < piped {
        let a = 1.0 + run as f32 / 8.0;
        py.fill(f32::NAN);
        let stats = affine_one_pipelined(&gpu, opts, a, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
        bad += mismatches(&py, &affine_on(&gpu, a, &x));
        chunks += stats.chunks;
        run = (run + 1) % 64;
    }
    let secs = t.elapsed().as_secs_f64();
    launch_line(&gpu, "pipelined", chunks, secs, bad);
    assert_eq!(
        bad, 0,
        "pipelined launches: {bad} elements differ from the host"
    );
    drop((x, px, py, stream));

    let after = sample(&gpu);
    let total = plain + queued + pinned + chunks;
    println!(
        "{{\"soak\":\"launches\",\"backend\":\"{}\",\"kind\":\"total\",\"launches\":{total},\"bad\":0}}",
        backend_name(&gpu)
    );
    assert_flat(&gpu, "launches", before, after);
}

/// The simulator's stream threads of the process (each simulated stream is one; named
/// `berth-sim-stream`, which the kernel shortens to 15 bytes). Other threads come and go with
/// the test harness.
fn stream_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.starts_with("berth-sim-strea"))
                .count()
        })
        .unwrap_or(0)
}

/// Pipelined runs take their streams from the context's pool and give them back: many runs
/// use the same few streams (on the simulator each stream is a thread, and taking a new one
/// per run once left a thread and its queue behind for every run).
#[test]
fn pipelined_runs_reuse_their_streams() {
    let (_g, gpu) = gpu();
    let n = 1 << 16;
    let x = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(n),
        streams: Some(3),
        ..Default::default()
    };
    let mut run = || {
        affine_one_pipelined(&gpu, opts, 2.0, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap()
    };
    run();
    let before = stream_threads();
    for _ in 0..50 {
        assert_eq!(run().streams, 3);
    }
    let after = stream_threads();
    assert_eq!(mismatches(&py, &affine_on(&gpu, 2.0, &x)), 0);
    assert!(
        // A run's streams may return to the pool just after its wait returns: the next run
        // then takes a new one. One run's worth of slack; a stream per run would be 150.
        after <= before + 3,
        "50 pipelined runs on 3 streams: {before} stream threads before, {after} after"
    );
}

/// Blocks the simulator stops early — a barrier reached by half the block, a thread stopping
/// the kernel before the others started — free their shared memory and bookkeeping: the
/// threads left suspended or never started hold nothing of the block. Simulator only (on a
/// GPU these kernels trap, which ends the process's CUDA state). Each launch asks for 48 KiB
/// of dynamic shared memory, so a block kept alive by a leaked count would show.
#[cfg(not(feature = "gpu"))]
#[test]
fn blocks_stopped_early_leak_nothing() {
    use berth_examples::compute::sgemm_reg8_unchecked;
    use berth_fixtures::broken::half_barrier;
    let (_g, _) = gpu();
    let shared = 48 << 10;
    let n = 128;
    // A stopped kernel stops its simulated context, as a fault a GPU's: each launch gets a
    // fresh one, and what a lost context holds is freed with it too.
    let launch = || {
        let gpu = Gpu::simulator();
        let mut out = gpu.alloc_zeroed::<u32>(64).unwrap();
        let e = half_barrier(&gpu, Grid::new(1, 32).shared_bytes(shared), &mut out)
            .unwrap()
            .wait();
        assert!(e.is_err(), "half a block at a barrier must be reported");
        let gpu = gpu.recover().unwrap();
        let a = gpu.upload(&vec![1.0f32; n * n - 1]).unwrap();
        let b = gpu.upload(&vec![1.0f32; n * n]).unwrap();
        let mut c = gpu.alloc_zeroed::<f32>(n * n).unwrap();
        let grid = Grid::new((1, 1), (16, 16)).shared_bytes(shared);
        let e = sgemm_reg8_unchecked(&gpu, grid, n as u32, &a, &b, &mut c)
            .unwrap()
            .wait();
        assert!(e.is_err(), "a short matrix must stop the kernel");
    };
    for _ in 0..20 {
        launch();
    }
    let before = rss();
    for _ in 0..300 {
        launch();
    }
    let grown = rss() - before;
    assert!(
        grown < 4 << 20 || under_checker(),
        "600 launches stopped early grew the resident set by {grown} bytes"
    );
}

/// Sizes the allocation cycles go through, in elements of 4 bytes: several pool size classes,
/// from less than a page to a few MiB.
/// The largest (4 MiB) only on the GPU: the simulator runs every element's thread on the host.
const SIZES: &[usize] = if cfg!(feature = "gpu") {
    &[1, 1000, 16_384 + 3, 262_144, 1 << 20]
} else {
    &[1, 1000, 16_384 + 3, 262_144]
};

/// One JSON line of the allocation soak: cycles, and how many of them reached the driver (the
/// rest were served by a pool).
fn alloc_line(gpu: &Gpu, kind: &str, cycles: usize, driver: u64, seconds: f64) {
    println!(
        "{{\"soak\":\"alloc\",\"backend\":\"{}\",\"kind\":\"{kind}\",\"cycles\":{cycles},\
         \"driver_allocations\":{driver},\"seconds\":{seconds:.3}}}",
        backend_name(gpu)
    );
}

/// Keep up to `live` values at once, dropping the oldest when a new one comes: allocations
/// and frees interleave, as in a program, instead of one buffer coming and going.
struct Ring<T> {
    items: std::collections::VecDeque<T>,
    live: usize,
}

impl<T> Ring<T> {
    fn new(live: usize) -> Self {
        Ring {
            items: Default::default(),
            live,
        }
    }

    fn push(&mut self, v: T) {
        if self.items.len() == self.live {
            self.items.pop_front();
        }
        self.items.push_back(v);
    }
}

/// How often the pools are emptied during the cycles, so pooled kinds are freed to the driver
/// and allocated again, not only reused.
const TRIM_EVERY: usize = 32;

/// One memory kind's cycles: `cycles` allocate/free cycles on `gpu`, every `TRIM_EVERY`-th
/// followed by emptying the pools; returns how many of them reached the driver.
type Cycles = fn(&Gpu, usize) -> u64;

/// Empty the pools after every `TRIM_EVERY`-th cycle.
fn trim(gpu: &Gpu, i: usize) {
    if i % TRIM_EVERY == TRIM_EVERY - 1 {
        gpu.trim_pools().unwrap();
    }
}

fn size(i: usize) -> usize {
    SIZES[i % SIZES.len()]
}

/// Device buffers (not pooled: every cycle is a driver allocation and free); every 100th
/// uploaded and read back.
fn device_cycles(gpu: &Gpu, cycles: usize) -> u64 {
    let mut ring = Ring::new(4);
    for i in 0..cycles {
        let n = size(i);
        if i % 100 == 0 {
            let data = random_f32(n);
            let b = gpu.upload(&data).unwrap();
            assert_eq!(b.to_vec().unwrap(), data, "device buffer of {n}");
            ring.push(b);
        } else {
            ring.push(gpu.alloc_zeroed::<f32>(n).unwrap());
        }
    }
    cycles as u64
}

/// Pinned buffers, through the pinned pool.
fn pinned_cycles(gpu: &Gpu, cycles: usize) -> u64 {
    let before = gpu.pool_stats().pinned_allocations;
    let mut ring = Ring::new(4);
    for i in 0..cycles {
        let mut p = gpu.pinned_zeroed::<f32>(size(i)).unwrap();
        assert!(
            p[0] == 0.0 && p[p.len() - 1] == 0.0,
            "a pinned buffer is zeroed"
        );
        p[0] = 1.0;
        ring.push(p);
        trim(gpu, i);
    }
    drop(ring);
    gpu.pool_stats().pinned_allocations - before
}

/// Mapped buffers, through the same pool (other flags); every 100th written by a kernel.
fn mapped_cycles(gpu: &Gpu, cycles: usize) -> u64 {
    let before = gpu.pool_stats().pinned_allocations;
    let mut ring = Ring::new(4);
    for i in 0..cycles {
        let n = size(i);
        let mut m = gpu.mapped_zeroed::<u32>(n).unwrap();
        if i % 100 == 0 {
            mapped_iota(gpu, Grid::cover(n), i as u32, &mut m)
                .unwrap()
                .wait()
                .unwrap();
            assert!(
                m.iter()
                    .enumerate()
                    .all(|(k, &v)| v == (i as u32).wrapping_add(k as u32)),
                "mapped buffer of {n}, cycle {i}"
            );
        }
        ring.push(m);
        trim(gpu, i);
    }
    drop(ring);
    gpu.pool_stats().pinned_allocations - before
}

/// Registered host memory: a fresh `Vec` each cycle, registered, given back and freed; every
/// 100th written by a kernel in place.
fn registered_cycles(gpu: &Gpu, cycles: usize) -> u64 {
    let mut ring = Ring::new(4);
    for i in 0..cycles {
        let n = size(i);
        let mut r = gpu.register(vec![0u32; n]).unwrap();
        if i % 100 == 0 {
            mapped_iota(gpu, Grid::cover(n), 7, &mut r)
                .unwrap()
                .wait()
                .unwrap();
            let v = r.into_inner();
            assert!(
                v.iter().enumerate().all(|(k, &x)| x == 7 + k as u32),
                "registered memory of {n}, cycle {i}"
            );
        } else {
            ring.push(r);
        }
    }
    cycles as u64
}

/// Device staging: one `#[pinned_async]` launch per cycle (two staging buffers from the pool,
/// given back when the launch completes), sizes changing; every result checked.
fn staging_cycles(gpu: &Gpu, cycles: usize) -> u64 {
    let before = gpu.pool_stats().device_allocations;
    let inputs: Vec<_> = SIZES
        .iter()
        .map(|&n| gpu.pinned_from(&random_f32(n)).unwrap())
        .collect();
    let mut outputs: Vec<_> = SIZES
        .iter()
        .map(|&n| gpu.pinned_from(&random_f32(n)).unwrap())
        .collect();
    let mut wants: Vec<Vec<f32>> = outputs.iter().map(|o| o.to_vec()).collect();
    for i in 0..cycles {
        let k = i % SIZES.len();
        saxpy_pinned(gpu, Grid::cover(SIZES[k]), 0.5, &inputs[k], &mut outputs[k])
            .unwrap()
            .wait()
            .unwrap();
        wants[k] = saxpy_on(gpu, 0.5, &inputs[k], &wants[k]);
        trim(gpu, i);
    }
    for (k, (o, w)) in outputs.iter().zip(&wants).enumerate() {
        assert_eq!(mismatches(o, w), 0, "staged launches of {}", SIZES[k]);
    }
    gpu.pool_stats().device_allocations - before
}

/// 10,000 allocate/free cycles of each memory kind — device buffers, pinned buffers, mapped
/// buffers, registered host memory and the pooled device staging of `#[pinned_async]`
/// launches — at sizes across the pools' size classes, up to 4 buffers of a kind alive at
/// once, the pools emptied every 32 cycles, some buffers of each kind used by a kernel and
/// checked. A warm-up of a tenth of the cycles first, so what the host allocator and the
/// driver keep cached after the first round is not counted as growth; then memory must end
/// where it was after the warm-up.
#[test]
fn soak_allocations() {
    let (_g, gpu) = gpu();
    let cycles = cycles();
    let kinds: [(&str, Cycles); 5] = [
        ("device", device_cycles),
        ("pinned", pinned_cycles),
        ("mapped", mapped_cycles),
        ("registered", registered_cycles),
        ("staging", staging_cycles),
    ];
    let warm_up = (cycles / 10).max(2 * TRIM_EVERY);
    for (_, run) in kinds {
        run(&gpu, warm_up);
    }
    let before = sample(&gpu);
    for (kind, run) in kinds {
        let t = Instant::now();
        let driver = run(&gpu, cycles);
        alloc_line(&gpu, kind, cycles, driver, t.elapsed().as_secs_f64());
    }
    let after = sample(&gpu);
    assert_flat(&gpu, "allocations", before, after);
}
