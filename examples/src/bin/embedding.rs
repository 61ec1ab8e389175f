//! embedding: rows gathered from an embedding table that stays in host memory, read in place
//! by the kernel (`#[mapped]`): random batches of ids, each row fetched with coalesced 16-byte
//! reads, every batch checked against the host.
//!
//! `embedding [--gib G] [--dim D] [--batch B] [--batches N] [--auto]` (defaults: 4 GiB on a
//! GPU, 64 MiB on the simulator; D = 128 floats per row; B = 4096 ids; N = 50 batches).
//! `--auto` launches `embedding_gather_auto` instead: the table is `#[auto]`, and each batch
//! is read in place or copied in whole, as the cost model predicts from the batch size
//! (`Touch::Rows`) and this machine's calibration.

use berth::{Backend, Gpu, Grid, Touch};
use berth_examples::cli::init_logging;
use berth_examples::{F4, embedding_gather, embedding_gather_auto};
use clap::Parser;
use rand::Rng;
use std::time::Instant;

/// Rows gathered from an embedding table that stays in host memory
/// (`RUST_LOG=berth_runtime=debug` shows each `--auto` placement decision).
#[derive(Parser)]
struct Args {
    /// GiB of table (default: 4 on a GPU, 1/16 on the simulator)
    #[arg(long)]
    gib: Option<f64>,
    /// Floats per row (a multiple of 4)
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Ids per batch
    #[arg(long, default_value_t = 4096, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    batch: usize,
    /// Batches to run
    #[arg(long, default_value_t = 50, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    batches: usize,
    /// Launch `embedding_gather_auto`: each batch read in place or copied, as the cost model
    /// predicts
    #[arg(long)]
    auto: bool,
}

fn main() {
    init_logging();
    if let Err(e) = run(Args::parse()) {
        eprintln!("embedding: {e}");
        std::process::exit(1);
    }
}

/// Row r, lane c of the table: exact in f32 for the sizes used, so checks are exact.
fn value(r: usize, c: usize) -> f32 {
    (r % 65_536) as f32 + (c % 512) as f32 / 512.0
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new_or_simulator()?;
    let gib = args.gib.unwrap_or(if gpu.backend() == Backend::Cuda {
        4.0
    } else {
        1.0 / 16.0
    });
    let Args {
        dim,
        batch,
        batches,
        auto,
        ..
    } = args;
    if dim == 0 || dim % 4 != 0 {
        return Err("--dim must be a positive multiple of 4".into());
    }
    let d4 = dim / 4;
    let rows = ((gib * (1u64 << 30) as f64) as usize / (dim * 4)).max(1);
    println!(
        "embedding: {rows} rows × {dim} floats ({:.2} GiB) in host memory on {}, batches of {batch}",
        (rows * dim * 4) as f64 / (1u64 << 30) as f64,
        gpu.name()
    );
    let t = Instant::now();
    let mut table = gpu.mapped_zeroed::<F4>(rows * d4)?;
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per = rows.div_ceil(workers);
    std::thread::scope(|s| {
        for (w, part) in table.chunks_mut(per * d4).enumerate() {
            s.spawn(move || {
                for (k, v) in part.iter_mut().enumerate() {
                    let (r, c) = (w * per + k / d4, (k % d4) * 4);
                    *v = F4 {
                        x: value(r, c),
                        y: value(r, c + 1),
                        z: value(r, c + 2),
                        w: value(r, c + 3),
                    };
                }
            });
        }
    });
    println!(
        "embedding: table pinned, mapped and filled in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let hint = Touch::Rows {
        rows: batch,
        row_elems: d4,
    };
    if auto {
        let costs = gpu.link_costs();
        let d = gpu.auto_decision(&table, hint);
        println!(
            "embedding: #[auto] chooses {:?} for batches of {batch} rows (predicted: in place {:.3} ms, copy the table {:.3} ms; {})",
            d.choice,
            d.mapped_s * 1e3,
            d.copy_whole_s * 1e3,
            if costs.calibrated {
                "calibrated"
            } else {
                "uncalibrated: conservative constants; run `cargo xtask calibrate`"
            }
        );
    }
    let mut rng = rand::rng();
    let mut out = gpu.alloc_zeroed::<F4>(batch * d4)?;
    let (mut secs, mut bad) = (0.0, 0usize);
    for _ in 0..batches {
        let ids: Vec<u32> = (0..batch)
            .map(|_| rng.random_range(0..rows as u32))
            .collect();
        let dids = gpu.upload(&ids)?;
        let t = Instant::now();
        let grid = Grid::cover(batch * d4);
        if auto {
            embedding_gather_auto(&gpu, grid, hint, d4 as u32, &table, &dids, &mut out)?.wait()?;
        } else {
            embedding_gather(&gpu, grid, d4 as u32, &table, &dids, &mut out)?.wait()?;
        }
        secs += t.elapsed().as_secs_f64();
        let got = out.to_vec()?;
        for (b, &id) in ids.iter().enumerate() {
            for j in 0..d4 {
                let v = got[b * d4 + j];
                let c = j * 4;
                let r = id as usize;
                if [v.x, v.y, v.z, v.w]
                    != [
                        value(r, c),
                        value(r, c + 1),
                        value(r, c + 2),
                        value(r, c + 3),
                    ]
                {
                    bad += 1;
                }
            }
        }
    }
    let n = (batch * batches) as f64;
    println!(
        "embedding: {:.2} M rows/s, {:.2} GB/s of rows gathered ({} batches, launch + wait each); {bad} mismatches",
        n / secs / 1e6,
        n * (dim * 4) as f64 / secs / 1e9,
        batches
    );
    if bad > 0 {
        std::process::exit(2);
    }
    Ok(())
}
