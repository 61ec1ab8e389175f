//! Placement benchmark: berth's memory kinds and placements, the counterpart of
//! `bench/placement/reference.cu` (CUDA C++ compiled with nvcc on the same machine, same run).
//!
//! `bench_placement [copy|wc|mapped|gather|all] [reps=10]`. Same sizes, repetitions, checks and
//! JSON fields as the reference, with `"impl":"berth"`:
//! - `h2d`/`d2h`: `DeviceBuffer::copy_from_pinned` / `copy_to_pinned` with `PinnedBuffer`s,
//!   4 KiB … 1 GiB (at least 100 repetitions up to 16 MiB);
//! - `h2d_wc`/`h2d_plain`, `cpu_read_wc`/`cpu_read_plain`: write-combined vs plain pinned
//!   memory (`HostAccess::WriteOnly` vs the default), 256 MiB;
//! - `mapped_seq_read`: the `mapped_sum` kernel over a 1 GiB `MappedBuffer` (16-byte loads);
//! - `gather_mapped`/`gather_copy`: gathers from a 1 GiB host table, in place (`#[mapped]`)
//!   or after copying the whole table to the device, at 0.01% … 10% of it touched;
//! - `embedding`: 65 536 random rows of 128 floats gathered from a 2 GiB mapped host table
//!   (`embedding_gather`), useful GB/s;
//! - `auto_sweep` (berth only): `#[auto]` against both fixed placements (mapped, copy all
//!   first) at 0.001% … 20% touched, for 256 MiB and 1 GiB tables of 4-byte elements and of
//!   512-byte rows; the decision uses `Gpu::link_costs()` (`$BERTH_LINK_COSTS`);
//! - `auto_range` (berth only, with `auto`): a contiguous range of a 1 GiB table read once
//!   with a `Touch::Range` hint, against mapped, copy-all and copy-the-range-by-hand;
//! - `streams` (berth only): two half-GPU compute kernels on one stream vs on two streams.

use berth::Touch;
use berth::{Gpu, Grid, HostAccess, PinnedOptions};
use berth_bench::timing::{Timer, median};
use berth_examples::{
    F4, MAPPED_SUM_BLOCK, busy, embedding_gather, embedding_gather_auto, embedding_gather_device,
    gather_auto, gather_device, gather_mapped, mapped_sum,
};
use std::time::Instant;

type BoxError = Box<dyn std::error::Error>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let section = args.get(1).map_or("all", String::as_str).to_owned();
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    if let Err(e) = run(&section, reps) {
        eprintln!("bench_placement: {e}");
        std::process::exit(1);
    }
}

/// splitmix64, as the reference: fast, deterministic random data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn f32(&mut self) -> f32 {
        let v = ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        if v == 0.0 { 0.5 } else { v }
    }
}

fn run(section: &str, reps: usize) -> Result<(), BoxError> {
    let gpu = Gpu::new()?;
    eprintln!(
        "device: {} (berth placement bench, reps={reps})",
        gpu.name()
    );
    let timer = Timer::new(&gpu)?;
    let all = section == "all";
    if all || section == "copy" {
        copies(&gpu, &timer, reps)?;
    }
    if all || section == "wc" {
        write_combined(&gpu, &timer, reps)?;
    }
    if all || section == "mapped" {
        mapped_read(&gpu, &timer, reps)?;
    }
    if all || section == "gather" {
        gathers(&gpu, &timer, reps)?;
    }
    if all || section == "embedding" {
        embedding(&gpu, &timer, reps)?;
    }
    if all || section == "auto" {
        auto_sweep(&gpu, &timer, reps.min(3))?;
        auto_range(&gpu, &timer, reps.min(3))?;
    }
    if all || section == "streams" {
        streams(&gpu, reps)?;
    }
    Ok(())
}

fn line(bench: &str, fields: &str) {
    println!("{{\"impl\":\"berth\",\"bench\":\"{bench}\",{fields}}}");
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// Copies of 16 MiB or less take tens of microseconds at most, where one slow repetition of
/// ten moves the median by several percent: they take at least this many (as the reference).
const SHORT_COPY_REPS: usize = 100;

fn copies(gpu: &Gpu, timer: &Timer, reps_arg: usize) -> Result<(), BoxError> {
    let mut rng = Rng(1);
    for bytes in [4096usize, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30] {
        let reps = if bytes <= 16 << 20 {
            reps_arg.max(SHORT_COPY_REPS)
        } else {
            reps_arg
        };
        let mut src = gpu.pinned_zeroed::<u8>(bytes)?;
        for b in src.iter_mut() {
            *b = rng.next() as u8;
        }
        let mut dev = gpu.alloc_zeroed::<u8>(bytes)?;
        let mut back = gpu.pinned_zeroed::<u8>(bytes)?;
        back.fill(0xAB);
        dev.copy_from_pinned(gpu, &src)?.wait()?;
        let mut t = Vec::new();
        for _ in 0..reps {
            t.push(timer.time(|| dev.copy_from_pinned(gpu, &src))?);
        }
        let ms = median(t);
        // The check of H2D is the D2H round trip below (exact bytes).
        dev.copy_to_pinned(gpu, &mut back)?.wait()?;
        let bad_h2d = src.iter().zip(back.iter()).filter(|(a, b)| a != b).count();
        line(
            "h2d",
            &format!(
                "\"bytes\":{bytes},\"median_ms\":{ms:.5},\"gbps\":{:.2},\"reps\":{reps},\"bad\":{bad_h2d}",
                gbps(bytes, ms)
            ),
        );
        back.fill(0xAB);
        let mut t = Vec::new();
        for _ in 0..reps {
            t.push(timer.time(|| dev.copy_to_pinned(gpu, &mut back))?);
        }
        let ms = median(t);
        let bad = src.iter().zip(back.iter()).filter(|(a, b)| a != b).count();
        line(
            "d2h",
            &format!(
                "\"bytes\":{bytes},\"median_ms\":{ms:.5},\"gbps\":{:.2},\"reps\":{reps},\"bad\":{bad}",
                gbps(bytes, ms)
            ),
        );
    }
    Ok(())
}

fn write_combined(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let bytes = 256usize << 20;
    let words = bytes / 8;
    let mut rng = Rng(2);
    let data: Vec<u64> = (0..words).map(|_| rng.next()).collect();
    let want = data.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let wc_opts = PinnedOptions {
        access: HostAccess::WriteOnly,
        portable: false,
    };
    let mut wc = gpu.pinned_with::<u64>(words, wc_opts)?;
    wc.copy_from_slice(&data);
    let plain = gpu.pinned_from(&data)?;
    eprintln!(
        "write-only buffer flags: {}; plain: {}",
        wc.flags(),
        plain.flags()
    );
    let mut dev = gpu.alloc_zeroed::<u64>(words)?;
    for (name, src) in [("h2d_wc", &wc), ("h2d_plain", &plain)] {
        dev.copy_from_pinned(gpu, src)?.wait()?;
        let mut t = Vec::new();
        for _ in 0..reps {
            t.push(timer.time(|| dev.copy_from_pinned(gpu, src))?);
        }
        let ms = median(t);
        let bad = dev
            .to_vec()?
            .iter()
            .zip(&data)
            .filter(|(a, b)| a != b)
            .count();
        line(
            name,
            &format!(
                "\"bytes\":{bytes},\"median_ms\":{ms:.5},\"gbps\":{:.2},\"reps\":{reps},\"bad\":{bad}",
                gbps(bytes, ms)
            ),
        );
    }
    for (name, src, n) in [
        ("cpu_read_wc", &wc, reps.min(5)),
        ("cpu_read_plain", &plain, reps),
    ] {
        let mut t = Vec::new();
        let mut bad = 0;
        let mut sum = 0;
        for _ in 0..=n {
            let start = Instant::now();
            sum = src.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            sum = std::hint::black_box(sum);
            t.push(start.elapsed().as_secs_f32() * 1e3);
            bad += usize::from(sum != want);
        }
        t.remove(0); // warm-up
        let ms = median(t);
        line(
            name,
            &format!(
                "\"bytes\":{bytes},\"median_ms\":{ms:.5},\"gbps\":{:.2},\"reps\":{n},\"sum\":\"0x{sum:016x}\",\"bad\":{bad}",
                gbps(bytes, ms)
            ),
        );
    }
    Ok(())
}

fn mapped_read(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let n4 = 1usize << 26;
    let bytes = n4 * 16;
    let mut rng = Rng(3);
    let mut table = gpu.mapped_zeroed::<F4>(n4)?;
    let (mut want, mut scale) = (0f64, 0f64);
    for v in table.iter_mut() {
        *v = F4 {
            x: rng.f32(),
            y: rng.f32(),
            z: rng.f32(),
            w: rng.f32(),
        };
        for c in [v.x, v.y, v.z, v.w] {
            want += f64::from(c);
            scale += f64::from(c.abs());
        }
    }
    let blocks = 132 * 4;
    let mut partial = gpu.upload(&vec![f32::NAN; blocks])?;
    let grid = Grid::new(blocks as u32, MAPPED_SUM_BLOCK);
    mapped_sum(gpu, grid, &table, &mut partial)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..reps {
        t.push(timer.time(|| mapped_sum(gpu, grid, &table, &mut partial))?);
    }
    let ms = median(t);
    let got: f64 = partial.to_vec()?.iter().map(|&p| f64::from(p)).sum();
    let within = (got - want).abs() <= 1e-5 * scale; // false for NaN (a block that wrote nothing)
    let bad = usize::from(!within);
    line(
        "mapped_seq_read",
        &format!(
            "\"bytes\":{bytes},\"median_ms\":{ms:.5},\"gbps\":{:.2},\"reps\":{reps},\"bad\":{bad}",
            gbps(bytes, ms)
        ),
    );
    Ok(())
}

fn gathers(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let n = 1usize << 28;
    let mut rng = Rng(4);
    let mut table = gpu.mapped_zeroed::<f32>(n)?;
    for v in table.iter_mut() {
        *v = rng.f32();
    }
    let mut device_table = gpu.upload(&vec![f32::NAN; n])?;
    for f in [0.0001f64, 0.001, 0.01, 0.1] {
        let k = (f * n as f64) as usize;
        let idx: Vec<u32> = (0..k).map(|_| (rng.next() >> 36) as u32).collect();
        let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
        let didx = gpu.upload(&idx)?;
        let mut out = gpu.upload(&vec![f32::NAN; k])?;
        let grid = Grid::cover(k);
        gather_mapped(gpu, grid, &table, &didx, &mut out)?.wait()?;
        let mut t = Vec::new();
        for _ in 0..reps {
            t.push(timer.time(|| gather_mapped(gpu, grid, &table, &didx, &mut out))?);
        }
        let ms = median(t);
        let bad = out
            .to_vec()?
            .iter()
            .zip(&want)
            .filter(|(a, b)| a != b)
            .count();
        line(
            "gather_mapped",
            &format!(
                "\"fraction\":{f},\"k\":{k},\"median_ms\":{ms:.5},\"maccess_per_s\":{:.2},\"reps\":{reps},\"bad\":{bad}",
                k as f64 / (ms * 1e-3) / 1e6
            ),
        );

        let copy_reps = reps.min(5);
        let mut out = gpu.upload(&vec![f32::NAN; k])?;
        let mut run_once = |timer: &Timer| -> Result<f32, BoxError> {
            timer.time(|| {
                device_table.copy_from_pinned(gpu, &table)?.wait()?;
                gather_device(gpu, grid, &device_table, &didx, &mut out)
            })
        };
        run_once(timer)?;
        let mut t = Vec::new();
        for _ in 0..copy_reps {
            t.push(run_once(timer)?);
        }
        let ms = median(t);
        let bad = out
            .to_vec()?
            .iter()
            .zip(&want)
            .filter(|(a, b)| a != b)
            .count();
        line(
            "gather_copy",
            &format!(
                "\"fraction\":{f},\"k\":{k},\"median_ms\":{ms:.5},\"maccess_per_s\":{:.2},\"reps\":{copy_reps},\"bad\":{bad}",
                k as f64 / (ms * 1e-3) / 1e6
            ),
        );
    }
    Ok(())
}

/// Rows of 128 floats (32 × `F4`): 512 bytes, an embedding row.
const DIM4: usize = 32;

fn random_table(
    gpu: &Gpu,
    rows: usize,
    rng: &mut Rng,
) -> Result<berth::MappedBuffer<F4>, BoxError> {
    let mut table = gpu.mapped_zeroed::<F4>(rows * DIM4)?;
    for v in table.iter_mut() {
        *v = F4 {
            x: rng.f32(),
            y: rng.f32(),
            z: rng.f32(),
            w: rng.f32(),
        };
    }
    Ok(table)
}

fn row_ids(rows: usize, batch: usize, rng: &mut Rng) -> Vec<u32> {
    (0..batch)
        .map(|_| (rng.next() % rows as u64) as u32)
        .collect()
}

fn gathered_rows(table: &[F4], ids: &[u32]) -> Vec<F4> {
    ids.iter()
        .flat_map(|&r| &table[r as usize * DIM4..(r as usize + 1) * DIM4])
        .copied()
        .collect()
}

fn mismatches<T: PartialEq>(got: &[T], want: &[T]) -> usize {
    got.iter().zip(want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len())
}

const NAN4: F4 = F4 {
    x: f32::NAN,
    y: f32::NAN,
    z: f32::NAN,
    w: f32::NAN,
};

/// Sparse embedding lookup: a batch of random rows from a 2 GiB mapped host table.
fn embedding(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let rows = (2usize << 30) / (DIM4 * 16);
    let batch = 65536;
    let mut rng = Rng(5);
    let table = random_table(gpu, rows, &mut rng)?;
    let ids = row_ids(rows, batch, &mut rng);
    let want = gathered_rows(&table, &ids);
    let dids = gpu.upload(&ids)?;
    let mut out = gpu.upload(&vec![NAN4; batch * DIM4])?;
    let grid = Grid::cover(batch * DIM4);
    embedding_gather(gpu, grid, DIM4 as u32, &table, &dids, &mut out)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..reps {
        t.push(timer.time(|| embedding_gather(gpu, grid, DIM4 as u32, &table, &dids, &mut out))?);
    }
    let ms = median(t);
    let bad = mismatches(&out.to_vec()?, &want);
    line(
        "embedding",
        &format!(
            "\"rows\":{batch},\"dim\":{},\"table_bytes\":{},\"median_ms\":{ms:.5},\"gbps\":{:.3},\"mrows_per_s\":{:.3},\"reps\":{reps},\"bad\":{bad}",
            DIM4 * 4,
            rows * DIM4 * 16,
            gbps(batch * DIM4 * 16, ms),
            batch as f64 / (ms * 1e-3) / 1e6
        ),
    );
    Ok(())
}

/// `#[auto]` against the two fixed placements, across touched fractions, table sizes and
/// access units. Each point: the three medians, the model's choice, and result checks.
fn auto_sweep(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let costs = gpu.link_costs();
    eprintln!("auto sweep: link costs {costs:?}");
    let fractions = [0.00001f64, 0.0001, 0.001, 0.01, 0.05, 0.2];
    let mut rng = Rng(6);
    for table_bytes in [256usize << 20, 1 << 30] {
        // 4-byte elements.
        let n = table_bytes / 4;
        let mut table = gpu.mapped_zeroed::<f32>(n)?;
        for v in table.iter_mut() {
            *v = rng.f32();
        }
        let mut device_table = gpu.alloc_zeroed::<f32>(n)?;
        for f in fractions {
            let k = ((f * n as f64) as usize).max(1);
            let idx: Vec<u32> = (0..k).map(|_| (rng.next() % n as u64) as u32).collect();
            let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
            let didx = gpu.upload(&idx)?;
            let grid = Grid::cover(k);
            let hint = Touch::Elements(k);
            // The launch's own decision: a close call is settled by this table's measured rate.
            let choice = gpu.auto_decision(&table, hint).choice;
            let poisoned = vec![f32::NAN; k];
            let mut outs = [
                gpu.upload(&poisoned)?,
                gpu.upload(&poisoned)?,
                gpu.upload(&poisoned)?,
            ];
            let [o0, o1, o2] = &mut outs;
            let ms = interleaved_medians(timer, reps, &mut |s, timer| {
                timer.time(|| match s {
                    0 => gather_mapped(gpu, grid, &table, &didx, o0),
                    1 => {
                        device_table.copy_from_pinned(gpu, &table)?.wait()?;
                        gather_device(gpu, grid, &device_table, &didx, o1)
                    }
                    _ => gather_auto(gpu, grid, hint, &table, &didx, o2),
                })
            })?;
            let mut bad = 0;
            for out in outs {
                bad += mismatches(&out.to_vec()?, &want);
            }
            auto_line(table_bytes, 4, f, k, ms, choice, bad);
        }
        drop((table, device_table));

        // 512-byte rows.
        let rows = table_bytes / (DIM4 * 16);
        let table = random_table(gpu, rows, &mut rng)?;
        let mut device_table = gpu.alloc_zeroed::<F4>(rows * DIM4)?;
        for f in fractions {
            let k = ((f * rows as f64) as usize).max(1);
            let ids = row_ids(rows, k, &mut rng);
            let want = gathered_rows(&table, &ids);
            let dids = gpu.upload(&ids)?;
            let grid = Grid::cover(k * DIM4);
            let hint = Touch::Rows {
                rows: k,
                row_elems: DIM4,
            };
            let choice = gpu.auto_decision(&table, hint).choice;
            let d = DIM4 as u32;
            let poisoned = vec![NAN4; k * DIM4];
            let mut outs = [
                gpu.upload(&poisoned)?,
                gpu.upload(&poisoned)?,
                gpu.upload(&poisoned)?,
            ];
            let [o0, o1, o2] = &mut outs;
            let ms = interleaved_medians(timer, reps, &mut |s, timer| {
                timer.time(|| match s {
                    0 => embedding_gather(gpu, grid, d, &table, &dids, o0),
                    1 => {
                        device_table.copy_from_pinned(gpu, &table)?.wait()?;
                        embedding_gather_device(gpu, grid, d, &device_table, &dids, o1)
                    }
                    _ => embedding_gather_auto(gpu, grid, hint, d, &table, &dids, o2),
                })
            })?;
            let mut bad = 0;
            for out in outs {
                bad += mismatches(&out.to_vec()?, &want);
            }
            auto_line(table_bytes, DIM4 * 16, f, k, ms, choice, bad);
        }
    }
    Ok(())
}

/// The medians of `N` ways of doing one thing (`run(0..N, timer)`), measured in turns so
/// that drift on a shared machine hits all alike. Each gets two warm-ups, then at least
/// `reps` timed runs and more when it is short (up to 201, about 50 ms of runs), since a
/// 10 µs launch varies by more than the 5% the comparison needs. The count is set by the
/// second warm-up: the first can include loading the kernel's module (milliseconds), and a
/// short launch counted from it got a tenth of the runs of its rival.
///
/// Every way is sampled over the same stretch of rounds: one with fewer runs takes them
/// spread evenly over all the rounds, not bunched at the start. The order of the turns
/// alternates (0..N, then N..0) so that no way always runs right after the same other one:
/// with a fixed order `#[auto]` always followed the whole-table copy and `mapped` always
/// followed `#[auto]`, and at the tiniest launches (8–15 µs) `#[auto]` measured 3–5% slower
/// than `mapped` while both ran the same instructions on the same table.
fn interleaved_medians<const N: usize>(
    timer: &Timer,
    reps: usize,
    run: &mut dyn FnMut(usize, &Timer) -> Result<f32, BoxError>,
) -> Result<[f64; N], BoxError> {
    let mut want = [0usize; N];
    for (s, w) in want.iter_mut().enumerate() {
        run(s, timer)?;
        let warm = run(s, timer)?;
        *w = ((50.0 / warm.max(1e-3)).ceil() as usize).clamp(reps, 201);
    }
    let rounds = want.iter().copied().max().unwrap_or(0);
    let mut times: [Vec<f32>; N] = std::array::from_fn(|_| Vec::new());
    for r in 0..rounds {
        for j in 0..N {
            let s = if r % 2 == 0 { j } else { N - 1 - j };
            // True for exactly `want[s]` of the rounds, evenly spaced.
            if (r + 1) * want[s] / rounds > r * want[s] / rounds {
                times[s].push(run(s, timer)?);
            }
        }
    }
    Ok(times.map(median))
}

/// `#[auto]` with a `Touch::Range` hint: a gather reading a contiguous range of a 1 GiB
/// table once, launched mapped, after copying the whole table, after copying just the range
/// (by hand), and through `#[auto]`, which may copy only the range.
fn auto_range(gpu: &Gpu, timer: &Timer, reps: usize) -> Result<(), BoxError> {
    let costs = gpu.link_costs();
    let profile = gpu.device_profile()?;
    let n = (1usize << 30) / 4;
    let mut rng = Rng(7);
    let mut table = gpu.mapped_zeroed::<f32>(n)?;
    for v in table.iter_mut() {
        *v = rng.f32();
    }
    let mut device_table = gpu.alloc_zeroed::<f32>(n)?;
    for f in [0.00001f64, 0.0001, 0.001, 0.01, 0.1, 0.5] {
        let k = ((f * n as f64) as usize).max(1);
        let start = (rng.next() as usize) % (n - k + 1);
        let idx: Vec<u32> = (start..start + k).map(|i| i as u32).collect();
        let rel: Vec<u32> = (0..k as u32).collect();
        let want = table[start..start + k].to_vec();
        let (didx, drel) = (gpu.upload(&idx)?, gpu.upload(&rel)?);
        let mut range_buf = gpu.alloc_zeroed::<f32>(k)?;
        let range_src = gpu.pinned_from(&want)?;
        let grid = Grid::cover(k);
        let hint = Touch::Range {
            start,
            end: start + k,
        };
        let choice = berth::placement::decide(&costs, &profile, &hint.access(n, 4)).choice;
        let poisoned = vec![f32::NAN; k];
        let mut o0 = gpu.upload(&poisoned)?;
        let mut o1 = gpu.upload(&poisoned)?;
        let mut o2 = gpu.upload(&poisoned)?;
        let mut o3 = gpu.upload(&poisoned)?;
        let ms: [f64; 4] = interleaved_medians(timer, reps, &mut |s, timer| {
            timer.time(|| match s {
                0 => gather_mapped(gpu, grid, &table, &didx, &mut o0),
                1 => {
                    device_table.copy_from_pinned(gpu, &table)?.wait()?;
                    gather_device(gpu, grid, &device_table, &didx, &mut o1)
                }
                2 => {
                    // The range copied by hand from pinned memory of its own.
                    range_buf.copy_from_pinned(gpu, &range_src)?.wait()?;
                    gather_device(gpu, grid, &range_buf, &drel, &mut o2)
                }
                _ => gather_auto(gpu, grid, hint, &table, &didx, &mut o3),
            })
        })?;
        let mut bad = 0;
        for out in [o0, o1, o2, o3] {
            bad += mismatches(&out.to_vec()?, &want);
        }
        let [mapped, copy, range, auto] = ms;
        line(
            "auto_range",
            &format!(
                "\"table_bytes\":{},\"touched_fraction\":{f},\"k\":{k},\"mapped_ms\":{mapped:.5},\"copy_ms\":{copy:.5},\"range_ms\":{range:.5},\"auto_ms\":{auto:.5},\"choice\":\"{choice:?}\",\"vs_best\":{:.4},\"bad\":{bad}",
                n * 4,
                auto / mapped.min(copy).min(range)
            ),
        );
    }
    Ok(())
}

fn auto_line(
    table_bytes: usize,
    unit_bytes: usize,
    f: f64,
    k: usize,
    [mapped, copy, auto]: [f64; 3],
    choice: berth::placement::Choice,
    bad: usize,
) {
    line(
        "auto_sweep",
        &format!(
            "\"table_bytes\":{table_bytes},\"unit_bytes\":{unit_bytes},\"touched_fraction\":{f},\"k\":{k},\"mapped_ms\":{mapped:.5},\"copy_ms\":{copy:.5},\"auto_ms\":{auto:.5},\"choice\":\"{choice:?}\",\"vs_best\":{:.4},\"bad\":{bad}",
            auto / mapped.min(copy)
        ),
    );
}

/// Two launches that each fill half the SMs: one after the other on one stream, then on two
/// streams at once. Wall-clock around launch + wait of both.
fn streams(gpu: &Gpu, reps: usize) -> Result<(), BoxError> {
    let blocks = 66u32;
    let n = blocks as usize * 256;
    let iters = 1u32 << 21;
    let grid = Grid::new(blocks, 256);
    let (s1, s2) = (gpu.stream()?, gpu.stream()?);
    let mut a = gpu.alloc_zeroed::<f32>(n)?;
    let mut b = gpu.alloc_zeroed::<f32>(n)?;
    let mut serial = Vec::new();
    let mut concurrent = Vec::new();
    for rep in 0..=reps {
        let t = Instant::now();
        busy(&s1, grid, iters, &mut a)?.wait()?;
        busy(&s1, grid, iters, &mut b)?.wait()?;
        let one = t.elapsed().as_secs_f32() * 1e3;
        let t = Instant::now();
        let pa = busy(&s1, grid, iters, &mut a)?;
        let pb = busy(&s2, grid, iters, &mut b)?;
        pa.wait()?;
        pb.wait()?;
        let two = t.elapsed().as_secs_f32() * 1e3;
        if rep > 0 {
            serial.push(one);
            concurrent.push(two);
        }
    }
    let (s, c) = (median(serial), median(concurrent));
    let same = a.to_vec()? == b.to_vec()?;
    line(
        "streams",
        &format!(
            "\"serial_ms\":{s:.4},\"concurrent_ms\":{c:.4},\"overlap\":{:.3},\"reps\":{reps},\"bad\":{}",
            s / c,
            usize::from(!same)
        ),
    );
    Ok(())
}
