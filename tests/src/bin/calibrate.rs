//! calibrate: measure the placement cost model's constants on this machine's GPU and write
//! them where `Gpu::link_costs()` finds them (`LinkCosts::cache_path()`, or the path given).
//!
//! `calibrate [OUT.json]`: copy bandwidth (pinned 64 MiB copies), mapped sequential reads
//! (the `mapped_sum` kernel over 256 MiB), and independent random reads of mapped memory
//! (the `gather_mapped` kernel, 4 M random 4-byte reads from a 1 GiB table).

use berth::placement::LinkCosts;
use berth::{Gpu, Grid};
use berth_examples::{F4, MAPPED_SUM_BLOCK, gather_mapped, mapped_sum};
use berth_tests::random_u32;
use berth_tests::timing::{Timer, median};

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

    let n = 1usize << 28;
    let table = gpu.mapped_zeroed::<f32>(n)?;
    let k = 1usize << 22;
    let idx: Vec<u32> = random_u32(k).iter().map(|i| i % n as u32).collect();
    let didx = gpu.upload(&idx)?;
    let mut out = gpu.alloc_zeroed::<f32>(k)?;
    gather_mapped(&gpu, Grid::cover(k), &table, &didx, &mut out)?.wait()?;
    let mut t = Vec::new();
    for _ in 0..5 {
        t.push(timer.time(|| gather_mapped(&gpu, Grid::cover(k), &table, &didx, &mut out))?);
    }
    let random = k as f64 / (median(t) * 1e-3);

    let costs = LinkCosts {
        copy_bytes_per_s: link.h2d_gbps * 1e9,
        mapped_seq_bytes_per_s: seq,
        mapped_random_per_s: random,
        fixed_s: 10e-6,
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
        "calibrate: copies {:.1} GB/s, mapped sequential {:.1} GB/s, mapped random {:.0} M reads/s -> {}",
        costs.copy_bytes_per_s / 1e9,
        seq / 1e9,
        random / 1e6,
        path.display()
    );
    Ok(())
}
