//! calibrate: measure the placement cost model's constants on this machine's GPU and write
//! them where `Gpu::link_costs()` finds them (`LinkCosts::cache_path()`, or the path given).
//!
//! `calibrate [OUT.json]`: copy bandwidth (pinned 64 MiB copies), mapped sequential reads
//! (the `mapped_sum` kernel over 256 MiB), independent random reads of mapped memory
//! (the `gather_mapped` kernel, 4 M random 4-byte reads in tables of 64 MiB to 4 GiB,
//! three rounds of fresh tables), the latency of
//! one dependent mapped read (`mapped_chase`, a random cycle through 64 MiB), and the cost
//! of pinning (registering 256 MiB of pageable memory), and gathers from device memory (the
//! `embedding_gather_device` kernel, 65,536 random 512-byte rows of a 4 GiB table).

use berth::placement::{LinkCosts, RANDOM_FOOTPRINTS};
use berth::{Gpu, Grid};
use berth_bench::timing::{Timer, median};
use berth_examples::{
    F4, MAPPED_SUM_BLOCK, embedding_gather_device, gather_mapped, mapped_chase, mapped_sum,
};
use berth_tests::random_u32;

fn main() {
    if let Err(e) = run() {
        eprintln!("calibrate: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new()?;
    let timer = Timer::new(&gpu)?;
    let link = gpu.link_profile()?;

    let n4 = (256usize << 20) / 16;
    let table4 = gpu.mapped_from(&vec![
        F4 {
            x: 1.0,
            y: 1.0,
            z: 1.0,
            w: 1.0
        };
        n4
    ])?;
    let mut partial = gpu.alloc_zeroed::<f32>(528)?;
    let grid = Grid::new(528, MAPPED_SUM_BLOCK);
    mapped_sum(&gpu, grid, &table4, &mut partial)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..5 {
        t.push(timer.time(|| mapped_sum(&gpu, grid, &table4, &mut partial))?);
    }
    let seq = (n4 * 16) as f64 / (median(t) * 1e-3);
    drop(table4);

    // Random 4-byte reads spread over tables of 64 MiB to 4 GiB: the rate falls with the
    // table's size (address translation), so the model keeps one per size. Each size gets
    // tables of its own, allocated afresh in each of three rounds, as an application's
    // tables are; the rate kept is the median of the rounds (one table's rate varied by a
    // third between runs when one 4 GiB table served every size).
    let k = 1usize << 22;
    let raw = random_u32(k);
    let mut didx = gpu.alloc_zeroed::<u32>(k)?;
    let mut out = gpu.alloc_zeroed::<f32>(k)?;
    let mut rounds = vec![Vec::new(); RANDOM_FOOTPRINTS.len()];
    for round in 0..3 {
        for (rates, &region) in rounds.iter_mut().zip(&RANDOM_FOOTPRINTS) {
            let elems = region / 4;
            let table = gpu.mapped_zeroed::<f32>(elems)?;
            let idx: Vec<u32> = raw.iter().map(|&i| i % elems as u32).collect();
            didx.copy_from(&idx)?;
            gather_mapped(&gpu, Grid::cover(k), &table, &didx, &mut out)?.wait()?;
            let mut t = Vec::new();
            for _ in 0..5 {
                t.push(
                    timer.time(|| gather_mapped(&gpu, Grid::cover(k), &table, &didx, &mut out))?,
                );
            }
            let rate = k as f64 / (median(t) * 1e-3);
            eprintln!(
                "calibrate: random 4-byte reads in a {:>4} MiB table (round {}): {:.0} M/s",
                region >> 20,
                round + 1,
                rate / 1e6
            );
            rates.push(rate as f32);
        }
    }
    let mut random = [0f64; RANDOM_FOOTPRINTS.len()];
    for (rate, rates) in random.iter_mut().zip(rounds) {
        *rate = median(rates);
    }
    drop((didx, out));

    // A random single cycle through 16 M slots (Sattolo's algorithm): every read misses.
    let slots = 1usize << 24;
    let mut next: Vec<u32> = (0..slots as u32).collect();
    let r = random_u32(slots);
    for i in (1..slots).rev() {
        let j = r[i] as usize % i;
        next.swap(i, j);
    }
    let next = gpu.mapped_from(&next)?;
    let mut end = gpu.alloc_zeroed::<u32>(1)?;
    let steps = 4000u32;
    mapped_chase(&gpu, Grid::new(1, 32), &next, 100, &mut end)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..5 {
        t.push(timer.time(|| mapped_chase(&gpu, Grid::new(1, 32), &next, steps, &mut end))?);
    }
    let latency = median(t) * 1e-3 / f64::from(steps);
    drop(next);

    // Pinning: register 256 MiB of touched pageable memory, then unregister.
    let mut pageable = vec![1u8; 256 << 20];
    let mut pins = Vec::new();
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let reg = gpu.register(pageable)?;
        pins.push(t0.elapsed().as_secs_f32());
        pageable = reg.into_inner();
    }
    let pin_s_per_byte = median(pins) / pageable.len() as f64;
    drop(pageable);

    // Gathers from device memory: 65,536 random 512-byte rows of a 4 GiB device table, a
    // launch each (what a hot tier's hits cost).
    let (rows, dim4, batch) = (4usize << 20, 32u32, 1usize << 16);
    let table = gpu.alloc_zeroed::<F4>(rows * dim4 as usize)?;
    let ids: Vec<u32> = random_u32(batch).iter().map(|&i| i % rows as u32).collect();
    let ids = gpu.upload(&ids)?;
    let mut rows_out = gpu.alloc_zeroed::<F4>(batch * dim4 as usize)?;
    let grid = Grid::cover(rows_out.len());
    embedding_gather_device(&gpu, grid, dim4, &table, &ids, &mut rows_out)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..9 {
        t.push(
            timer
                .time(|| embedding_gather_device(&gpu, grid, dim4, &table, &ids, &mut rows_out))?,
        );
    }
    // The model adds a launch's fixed cost to the bytes at this rate.
    let fixed_s = 10e-6;
    let launch_s = median(t) * 1e-3;
    let gather_s = (launch_s - fixed_s).max(launch_s / 4.0);
    let device_gather = (batch * dim4 as usize * 16) as f64 / gather_s;
    drop((table, ids, rows_out));

    let costs = LinkCosts {
        copy_bytes_per_s: link.h2d_gbps * 1e9,
        copy_d2h_bytes_per_s: link.d2h_gbps * 1e9,
        mapped_latency_s: latency,
        pin_s_per_byte,
        mapped_seq_bytes_per_s: seq,
        mapped_random_per_s: random,
        device_gather_bytes_per_s: device_gather,
        fixed_s,
        calibrated: true,
    };
    let json = costs.to_json(gpu.name());
    let path = match std::env::args().nth(1) {
        Some(p) => std::path::PathBuf::from(p),
        None => LinkCosts::cache_path().ok_or("no cache directory (set BERTH_LINK_COSTS)")?,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, format!("{json}\n"))?;
    println!(
        "calibrate: copies {:.1}/{:.1} GB/s (in/out), mapped sequential {:.1} GB/s, mapped random {:.0}–{:.0} M reads/s (4 GiB–64 MiB regions), mapped latency {:.2} µs, pinning {:.0} ms/GiB, device gathers {:.0} GB/s -> {}",
        costs.copy_bytes_per_s / 1e9,
        costs.copy_d2h_bytes_per_s / 1e9,
        seq / 1e9,
        random[random.len() - 1] / 1e6,
        random[0] / 1e6,
        latency * 1e6,
        pin_s_per_byte * (1u64 << 30) as f64 * 1e3,
        device_gather / 1e9,
        path.display()
    );
    Ok(())
}
