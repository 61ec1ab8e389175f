//! features: rows of a feature table in host memory gathered by Zipf-skewed ids through a
//! hot tier (`Gpu::hot_tier`): the rows read most stay in device memory within a byte budget,
//! the rest are read in place over the link, by one kernel; the tier is refreshed from the
//! counts every few batches. Every batch is checked against the host.
//!
//! `features [--rows R] [--width W] [--device-budget B] [--zipf S] [--batch N] [--warmup U]
//! [--batches K] [--refresh-every E] [--refresh sync|async] [--count-every C] [--admit-on-repeat] [--baseline] [--queued] [--view] [--bag B]
//! [--table managed|pinned] [--json]` (defaults: 8 Mi rows on a GPU,
//! 16 Ki on the simulator; W = 128 floats; a budget of a quarter of the table plus the slot
//! table; S = 1.0; N = 65,536 ids on a GPU, 1,024 on the simulator; U = 0; K = 50 on a GPU, 8
//! on the simulator; E = 4; async refreshes; C = 16). The first U batches fill the tier and are not timed (every
//! 16th is checked); the K batches after them are timed and all checked. Ranks of the Zipf law
//! are scattered over the table by a random permutation. With `--bag B`, batches of the same law
//! are then pooled in bags of B ids three ways, every sum checked: by the tuned kernel through
//! the tier (`embedding_bag_rows`), by the plain loop a newcomer writes (`embedding_bag_plain`),
//! and by the tier's gather followed by a kernel summing the gathered rows.

use berth::{Backend, Gpu, MappedArg};
use berth_examples::F4;
use berth_examples::cli::{Zipf, init_logging, parse_size};
use berth_examples::graph::{Csr, ids_per_seed};
use clap::Parser;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// How a drifting hot set's recovery is judged (shared with the record of the runs).
#[path = "../../../bench/features/drift.rs"]
mod drift;
use drift::{bound_by_excess, missed_beyond, recovered_after, time_model};

/// Rows gathered by Zipf-skewed ids through a hot tier over a host table
/// (`RUST_LOG=berth_runtime=debug` shows each refresh).
#[derive(Parser)]
struct Args {
    /// Rows of the table (default: 8 Mi on a GPU, 16 Ki on the simulator)
    #[arg(long)]
    rows: Option<usize>,
    /// Floats per row, a multiple of 4 (64 to 256 is the usual range)
    #[arg(long, default_value_t = 128)]
    width: usize,
    /// Device memory for the tier, slot table included, like 16G or 512M (default: the slot
    /// table and a quarter of the table's rows)
    #[arg(long, value_parser = parse_size)]
    device_budget: Option<usize>,
    /// Zipf exponents of the ids (0: uniform), comma-separated: one run each over the same
    /// table, each with a fresh tier
    #[arg(long, value_delimiter = ',', default_value = "1.0")]
    zipf: Vec<f64>,
    /// Ids per batch (default: 65,536 on a GPU, 1,024 on the simulator)
    #[arg(long)]
    batch: Option<usize>,
    /// Batches run first, to fill the tier, not timed
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Batches timed (default: 50 on a GPU, 8 on the simulator)
    #[arg(long)]
    batches: Option<usize>,
    /// A refresh falls due after every this many batches (with `--refresh async`, it begins
    /// after the first batch that finds the last refresh applied)
    #[arg(long, default_value_t = 4, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    refresh_every: usize,
    /// How the batch loop refreshes the tier: `async` (`HotTier::begin_refresh`: the ranking
    /// runs on a thread of its own while the next batches gather, and a later gather queues
    /// its kernels) or `sync` (`HotTier::refresh`: the loop waits for the ranking and the
    /// kernels)
    #[arg(long, value_enum, default_value_t = RefreshMode::Async)]
    refresh: RefreshMode,
    /// Count every this many ids of a batch (`HotTier::count_every`)
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    count_every: usize,
    /// Ids from 2-hop neighbourhood samples (fan-out 15, then 10) of an R-MAT graph over the
    /// rows instead of a Zipf law (`--zipf` is not used)
    #[arg(long)]
    graph: bool,
    /// Average out-degree of the `--graph` graph
    #[arg(long, default_value_t = 8)]
    degree: usize,
    /// Append the first 8 timed batches' ids to this file (little-endian u32s), for the
    /// PyTorch anchor to gather the same ids
    #[arg(long)]
    dump_ids: Option<std::path::PathBuf>,
    /// Move the hot set every this many timed batches (0: never): the Zipf ranks go to other
    /// rows, and the batches after each move show how fast the tier follows
    #[arg(long, default_value_t = 0)]
    drift_every: usize,
    /// The share of the ranks (of the graph's ids with `--graph`) each move of the hot set
    /// moves, chosen by a hash of the rank: 1 moves all of them, so that every hot row after a
    /// move was cold before it
    #[arg(long, default_value_t = 1.0, value_parser = share)]
    drift_share: f64,
    /// Also time the same number of batches without a tier (every row read in place)
    #[arg(long)]
    baseline: bool,
    /// Then time as many batches again (fresh ids of the same law), queued in a scope
    /// (`Gpu::scope`): the host stages the next batches while the GPU gathers, as a
    /// training loop does when its step follows the gather on the same stream
    #[arg(long)]
    queued: bool,
    /// Then time as many batches again (fresh ids of the same law) read by a kernel of its
    /// own through the tier (`embedding_gather_rows`, an `#[auto] &Rows<F4>` argument): each
    /// batch's ids noted (`HotTier::note_reads`, which stages them for the kernel), the kernel
    /// launched and waited for, refreshes as in the timed loop
    #[arg(long)]
    view: bool,
    /// Then pool the rows in bags of this many ids (a sum each, an embedding bag; 0: not run):
    /// read and summed by one kernel through the tier (`embedding_bag_rows`, four rows' reads
    /// in flight), by the same sum as a plain rolled loop (`embedding_bag_plain`, one read in
    /// flight), and by the tier's gather followed by a kernel summing the gathered rows
    /// (`embedding_bag_sum`), each a batch at a time and queued back to back; a divisor of
    /// the batch
    #[arg(long, default_value_t = 0)]
    bag: usize,
    /// Stage each batch whole (`HotTier::staging_parts(1)`)
    #[arg(long)]
    whole_batches: bool,
    /// Stage each batch in up to this many parts (`HotTier::staging_parts`; the tier's
    /// default where not given)
    #[arg(long)]
    staging_parts: Option<usize>,
    /// Stage each part on this many threads, the gathering thread and helpers
    /// (`HotTier::staging_threads`; the tier's default where not given)
    #[arg(long)]
    staging_threads: Option<usize>,
    /// Admit a missed row only at its second miss (`HotTier::admit_on_repeat`)
    #[arg(long)]
    admit_on_repeat: bool,
    /// Places each miss log has at least, the slots of cold rows granted where the free ones
    /// are too few (`HotTier::capture_room`; 0: the free slots alone)
    #[arg(long, default_value_t = 0)]
    capture_room: usize,
    /// The share of the rows not resident that host threads gather while the GPU reads the
    /// others in place (`HotTier::host_gathers`; 0: the GPU reads them all)
    #[arg(long, default_value_t = 0.0)]
    host_share: f64,
    /// The host memory of the table: `managed` (unified memory kept on the host, read in
    /// place by the GPU: `Gpu::managed_zeroed`) or `pinned` (page-locked and mapped:
    /// `Gpu::mapped_zeroed`, whose scattered reads are slower)
    #[arg(long, value_enum, default_value_t = Table::Managed)]
    table: Table,
    /// Seed of the permutation and the ids
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also print the result as one JSON line (the `features` benchmark's)
    #[arg(long)]
    json: bool,
}

/// How the batch loop refreshes the tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RefreshMode {
    Sync,
    Async,
}

impl RefreshMode {
    fn name(self) -> &'static str {
        match self {
            RefreshMode::Sync => "sync",
            RefreshMode::Async => "async",
        }
    }

    /// Whether a refresh that fell due begins now. With `async` a refresh falls due while the
    /// last one's ranking may still run (or wait for a gather to queue its kernels):
    /// beginning another would first finish that one, the loop waiting for the ranking and
    /// its fill, so it waits for the batch after the last one is applied instead.
    fn may_begin<T: berth::DeviceCopy, M: MappedArg<T>>(self, tier: &berth::HotTier<T, M>) -> bool {
        self == RefreshMode::Sync || !tier.refresh_pending()
    }

    /// Refresh `tier` this way, its kernels queued on `queue`.
    fn refresh<T: berth::DeviceCopy, M: MappedArg<T>>(
        self,
        tier: &mut berth::HotTier<T, M>,
        queue: &impl berth::Queue,
    ) -> berth::Result<()> {
        match self {
            RefreshMode::Sync => tier.refresh(queue).map(drop),
            RefreshMode::Async => tier.begin_refresh(queue),
        }
    }
}

/// The refreshes of a batch loop: one falls due after every `--refresh-every` batches and
/// begins at the first batch its mode allows ([`RefreshMode::may_begin`]).
struct Refreshes {
    every: usize,
    mode: RefreshMode,
    due: bool,
}

impl Refreshes {
    fn new(args: &Args) -> Refreshes {
        Refreshes {
            every: args.refresh_every,
            mode: args.refresh,
            due: false,
        }
    }

    /// After batch `k` (from 0): refresh `tier` on `queue` if one is due and may begin;
    /// whether one began.
    fn after<T: berth::DeviceCopy, M: MappedArg<T>>(
        &mut self,
        k: usize,
        tier: &mut berth::HotTier<T, M>,
        queue: &impl berth::Queue,
    ) -> berth::Result<bool> {
        self.due |= (k + 1).is_multiple_of(self.every);
        if !(self.due && self.mode.may_begin(tier)) {
            return Ok(false);
        }
        self.due = false;
        self.mode.refresh(tier, queue)?;
        Ok(true)
    }
}

/// The host memory behind the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Table {
    Managed,
    Pinned,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Managed => "managed",
            Table::Pinned => "pinned",
        }
    }
}

fn main() {
    init_logging();
    if let Err(e) = run(Args::parse()) {
        eprintln!("features: {e}");
        std::process::exit(1);
    }
}

/// Row r, lane c of the table: exact in f32, so checks are exact.
fn value(r: usize, c: usize) -> f32 {
    (r % 65_536) as f32 + (c % 512) as f32 / 512.0
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new_or_simulator()?;
    let on_gpu = gpu.backend() == Backend::Cuda;
    let rows = args.rows.unwrap_or(if on_gpu { 8 << 20 } else { 16 << 10 });
    let batch = args.batch.unwrap_or(if on_gpu { 65_536 } else { 1024 });
    let width = args.width;
    if width == 0 || !width.is_multiple_of(4) {
        return Err("--width must be a positive multiple of 4".into());
    }
    if rows == 0 || rows > u32::MAX as usize - 2 {
        return Err("--rows must be between 1 and 2^32 - 3".into());
    }
    let d4 = width / 4;
    let row_bytes = width * 4;
    let budget = args
        .device_budget
        .unwrap_or(rows * 4 + rows.div_ceil(4) * row_bytes);
    let zipfs = args
        .zipf
        .iter()
        .map(|&s| Zipf::new(rows as u64, s))
        .collect::<Result<Vec<_>, _>>()?;
    println!(
        "features: {rows} rows × {width} floats ({:.2} GiB) in {} host memory on {}, budget {:.1} MiB, batches of {batch}",
        (rows * row_bytes) as f64 / (1u64 << 30) as f64,
        args.table.name(),
        gpu.name(),
        budget as f64 / (1u64 << 20) as f64,
    );
    let t = Instant::now();
    match args.table {
        Table::Managed => {
            let table = gpu.managed_zeroed::<F4>(rows * d4)?;
            run_all(&args, &gpu, table, (rows, d4, batch), &zipfs, t)
        }
        Table::Pinned => {
            let table = gpu.mapped_zeroed::<F4>(rows * d4)?;
            run_all(&args, &gpu, table, (rows, d4, batch), &zipfs, t)
        }
    }
}

/// Fill `table`, then run every exponent's batches over it.
fn run_all<M: MappedArg<F4> + std::ops::DerefMut<Target = [F4]>>(
    args: &Args,
    gpu: &Gpu,
    mut table: M,
    (rows, d4, batch): (usize, usize, usize),
    zipfs: &[Zipf],
    t: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
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
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut rng);
    println!(
        "features: table filled and ranks scattered in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let graph;
    let laws: Vec<Law> = if args.graph {
        let t = Instant::now();
        graph = berth_examples::graph::rmat(rows, args.degree, &perm, args.seed, workers);
        println!(
            "features: an R-MAT graph of {rows} vertices and {} edges in {:.1} s; batches of {} seeds, fan-out 15 then 10",
            graph.targets.len(),
            t.elapsed().as_secs_f64(),
            (batch / ids_per_seed(&FANOUT)).max(1)
        );
        vec![Law::Graph(&graph)]
    } else {
        args.zipf
            .iter()
            .zip(zipfs)
            .map(|(&s, z)| Law::Zipf(s, z))
            .collect()
    };
    let batch = match laws.first() {
        Some(Law::Graph(_)) => (batch / ids_per_seed(&FANOUT)).max(1) * ids_per_seed(&FANOUT),
        _ => batch,
    };
    let mut out = gpu.alloc_zeroed::<F4>(batch * d4)?;
    let mut bad = 0;
    for law in &laws {
        let (t, b) = run_one(args, gpu, table, &perm, law, batch, &mut out, &mut rng)?;
        table = t;
        bad += b;
    }
    if bad > 0 {
        std::process::exit(2);
    }
    Ok(())
}

/// The fan-out of the graph-sampled batches: 15 neighbours of each seed, 10 of each of those.
const FANOUT: [usize; 2] = [15, 10];

/// Where a batch's ids come from.
enum Law<'a> {
    /// Zipf ranks with this exponent, scattered over the rows.
    Zipf(f64, &'a Zipf),
    /// 2-hop neighbourhoods of uniform seeds in a graph over the rows.
    Graph(&'a Csr),
}

impl Law<'_> {
    /// A batch of `n` ids, the hot set moved by `drift`.
    fn draw(&self, perm: &[u32], drift: Drift, rng: &mut rand::rngs::StdRng, n: usize) -> Vec<u32> {
        match self {
            Law::Zipf(_, z) => draw(z, perm, drift, rng, n),
            Law::Graph(g) => {
                let rows = perm.len();
                let mut ids =
                    berth_examples::graph::sample(g, n / ids_per_seed(&FANOUT), &FANOUT, rng);
                if drift.shift > 0 {
                    for v in &mut ids {
                        *v = drift.apply(*v as usize, rows) as u32;
                    }
                }
                ids
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Law::Zipf(s, _) => format!("Zipf s = {s}"),
            Law::Graph(_) => "R-MAT 2-hop samples".into(),
        }
    }

    /// The JSON fields naming the law.
    fn json(&self) -> (Option<f64>, &'static str) {
        match self {
            Law::Zipf(s, _) => (Some(*s), "zipf"),
            Law::Graph(_) => (None, "rmat_2hop"),
        }
    }
}

/// Parse a share in (0, 1].
fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("`{s}` is not a share in (0, 1]")),
    }
}

/// Which ranks (or ids) a move of the hot set moves: a share of them, picked by a hash.
#[derive(Clone, Copy)]
struct Drift {
    shift: usize,
    /// Those whose hash (53 bits) is below this move.
    below: u64,
}

impl Drift {
    const NONE: Drift = Drift { shift: 0, below: 0 };

    fn new(shift: usize, share: f64) -> Drift {
        Drift {
            shift,
            below: (share * (1u64 << 53) as f64) as u64,
        }
    }

    /// Where rank (or id) `r` of `n` goes.
    fn apply(self, r: usize, n: usize) -> usize {
        let hash = (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        if self.shift > 0 && hash < self.below {
            (r + self.shift) % n
        } else {
            r % n
        }
    }
}

/// A batch of `n` ids: Zipf ranks, moved by `drift`, mapped through `perm`, drawn in chunks
/// of [`DRAW_CHUNK`] on rayon's pool of threads (each chunk from its own generator, seeded
/// from `rng`: the same ids on any number of cores). The pool's threads stay: a thread
/// started and ended per batch would unmap its stack while the next batch is timed, and an
/// unmap stalls every thread of the process that touches its memory map meanwhile.
fn draw(
    zipf: &Zipf,
    perm: &[u32],
    drift: Drift,
    rng: &mut rand::rngs::StdRng,
    n: usize,
) -> Vec<u32> {
    use rayon::prelude::*;
    let mut ids = vec![0u32; n];
    let seeds: Vec<u64> = (0..n.div_ceil(DRAW_CHUNK)).map(|_| rng.random()).collect();
    ids.par_chunks_mut(DRAW_CHUNK)
        .zip(seeds)
        .for_each(|(part, seed)| {
            let mut r = rand::rngs::StdRng::seed_from_u64(seed);
            for v in part {
                *v = perm[drift.apply(zipf.sample(&mut r) as usize, perm.len())];
            }
        });
    ids
}

/// The ids [`draw`] takes from one generator.
const DRAW_CHUNK: usize = 4096;

/// Append `ids` to the file at `path` as little-endian u32s.
fn dump(path: &std::path::Path, ids: &[u32]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    f.write_all(&bytes)
}

/// What the runs after the timed batches share: the tier, the law (its ids drawn again for
/// each run) and the outputs, one a batch, with what poisons them.
struct Again<'a, T: MappedArg<F4>> {
    args: &'a Args,
    gpu: &'a Gpu,
    tier: &'a mut berth::HotTier<F4, T>,
    perm: &'a [u32],
    law: &'a Law<'a>,
    rng: &'a mut rand::rngs::StdRng,
    outs: &'a mut [berth::DeviceBuffer<F4>],
    poison: &'a [F4],
}

/// The batches of [`run_queued`].
struct Queued {
    /// Wall time from before the first gather to the scope's end.
    seconds: f64,
    /// Of it, the host's: from before the first gather to the last one queued.
    host_s: f64,
    /// Of the gathers' host time: staging the ids, counting them (the tier's counters).
    staging_s: f64,
    counting_s: f64,
    /// The refreshes' reads of the miss log (waiting for the gathers queued before).
    refresh_log_read_s: f64,
    /// The share of the looked-up ids the tier held (`HotTierStats::hit_rate`).
    hit_rate: f64,
    /// Elements that differ from the host's rows.
    bad: usize,
}

/// Time as many batches again as `outs` holds, of `law` (drawn first), queued back to back in
/// a scope: each gather into an output of its own (poisoned first), refreshes as in the timed
/// loop, one wait at the end; every row checked after it.
fn run_queued<T: MappedArg<F4>>(
    again: &mut Again<'_, T>,
) -> Result<Queued, Box<dyn std::error::Error>> {
    let Again {
        args,
        gpu,
        perm,
        law,
        poison,
        ..
    } = *again;
    let (tier, rng, outs) = (&mut *again.tier, &mut *again.rng, &mut *again.outs);
    let (batches, batch) = (outs.len(), poison.len() / tier.width());
    let planned = replan(law, perm, rng, batch, outs, poison)?;
    let before = tier.stats();
    let t = Instant::now();
    let mut host_s = 0.0;
    gpu.scope(|s| {
        let mut refreshes = Refreshes::new(args);
        for (k, (ids, out)) in planned.iter().zip(outs.iter_mut()).enumerate() {
            tier.gather(s, ids, out)?.detach();
            refreshes.after(k, tier, s)?;
        }
        host_s = t.elapsed().as_secs_f64();
        Ok(())
    })?;
    let seconds = t.elapsed().as_secs_f64();
    let after = tier.stats();
    let mut bad = 0;
    for (ids, out) in planned.iter().zip(outs.iter()) {
        bad += mismatches(&out.to_vec()?, ids, tier.width());
    }
    let queued = after.since(&before);
    let hit_rate = queued.hit_rate();
    println!(
        "features: {batches} batches queued back to back: {:.2} M rows/s, hit rate {:.1}%",
        (batches * batch) as f64 / seconds / 1e6,
        100.0 * hit_rate
    );
    Ok(Queued {
        seconds,
        host_s,
        staging_s: queued.staging.as_secs_f64(),
        counting_s: queued.counting.as_secs_f64(),
        refresh_log_read_s: queued.log_read.as_secs_f64(),
        hit_rate,
        bad,
    })
}

/// As many batches of `law` as `outs` holds, drawn now (fresh ids of the same law), each
/// with an output of its own, poisoned with `poison`.
fn replan(
    law: &Law,
    perm: &[u32],
    rng: &mut rand::rngs::StdRng,
    batch: usize,
    outs: &mut [berth::DeviceBuffer<F4>],
    poison: &[F4],
) -> Result<Vec<Vec<u32>>, Box<dyn std::error::Error>> {
    for out in outs.iter_mut() {
        out.copy_from(poison)?;
    }
    Ok((0..outs.len())
        .map(|_| law.draw(perm, Drift::NONE, rng, batch))
        .collect())
}

/// The batches of [`run_view`].
struct Viewed {
    /// Wall time of the batches: counting the ids, writing them, the kernel and its wait, and
    /// the refreshes on the batch loop's thread.
    seconds: f64,
    /// Of it, the host's before each wait (noting the ids, queuing the kernel), and of that
    /// noting them (`note_reads`: checking and staging them, counting a sample).
    host_s: f64,
    noting_s: f64,
    /// The GPU's time from before each kernel to after it (events).
    gpu_s: f64,
    /// The share of the looked-up ids the tier held (`HotTierStats::hit_rate`).
    hit_rate: f64,
    /// As many batches again queued back to back in a scope: their wall time and hit rate.
    queued_s: f64,
    queued_hit_rate: f64,
    /// Elements that differ from the host's rows.
    bad: usize,
}

/// Time as many batches again as `outs` holds, of `law` (drawn first), read by a kernel of
/// its own through the tier (`#[auto] table: &Rows<F4>`), a batch at a time: the ids noted
/// for the tier (`HotTier::note_reads`: checked, staged in mapped memory the kernel reads
/// them from, counted; a ranked refresh's kernels queued first), the kernel launched into an
/// output of its own (poisoned first) and waited for, refreshes as in the timed loop; then as
/// many again queued back to back in a scope, one wait at the end; every row checked.
fn run_view<T: MappedArg<F4>>(
    again: &mut Again<'_, T>,
) -> Result<Viewed, Box<dyn std::error::Error>> {
    let Again {
        args,
        gpu,
        perm,
        law,
        poison,
        ..
    } = *again;
    let (tier, rng, outs) = (&mut *again.tier, &mut *again.rng, &mut *again.outs);
    let (batches, d4) = (outs.len(), tier.width());
    let batch = poison.len() / d4;
    let planned = replan(law, perm, rng, batch, outs, poison)?;
    let before = tier.stats();
    let (mut seconds, mut refreshes) = (0.0, Refreshes::new(args));
    let (mut noting_s, mut host_s, mut gpu_s) = (0.0, 0.0, 0.0);
    let (start, stop) = (gpu.event()?, gpu.event()?);
    for (k, (ids, out)) in planned.iter().zip(outs.iter_mut()).enumerate() {
        let t = Instant::now();
        tier.note_reads(gpu, ids)?;
        noting_s += t.elapsed().as_secs_f64();
        // The GPU's part: from before the kernel (after any refresh kernels `note_reads`
        // queued) to after it.
        start.record(gpu)?;
        let pending = berth_examples::embedding_gather_rows(
            gpu,
            berth::Grid::cover(batch * d4),
            &*tier,
            tier.noted_ids(),
            out,
        )?;
        stop.record(gpu)?;
        host_s += t.elapsed().as_secs_f64();
        pending.wait()?;
        gpu_s += berth::Event::elapsed(&start, &stop)?.as_secs_f64();
        refreshes.after(k, tier, gpu)?;
        seconds += t.elapsed().as_secs_f64();
    }
    let viewed = tier.stats().since(&before);
    let mut bad = 0;
    for (ids, out) in planned.iter().zip(outs.iter()) {
        bad += mismatches(&out.to_vec()?, ids, d4);
    }
    println!(
        "features: {batches} batches read by a kernel through the tier (`&Rows`): {:.2} M rows/s, hit rate {:.1}%",
        (batches * batch) as f64 / seconds / 1e6,
        100.0 * viewed.hit_rate()
    );
    // As many again queued back to back in a scope: the host notes the next batches' ids
    // while the GPU reads the last ones' rows (four batches in flight, the ring's depth).
    let planned = replan(law, perm, rng, batch, outs, poison)?;
    let before = tier.stats();
    let t = Instant::now();
    gpu.scope(|s| {
        let mut refreshes = Refreshes::new(args);
        for (k, (ids, out)) in planned.iter().zip(outs.iter_mut()).enumerate() {
            tier.note_reads(s, ids)?;
            berth_examples::embedding_gather_rows(
                s,
                berth::Grid::cover(batch * d4),
                &*tier,
                tier.noted_ids(),
                out,
            )?
            .detach();
            refreshes.after(k, tier, s)?;
        }
        Ok(())
    })?;
    let queued_s = t.elapsed().as_secs_f64();
    let queued_hit_rate = tier.stats().since(&before).hit_rate();
    for (ids, out) in planned.iter().zip(outs.iter()) {
        bad += mismatches(&out.to_vec()?, ids, d4);
    }
    println!(
        "features: {batches} batches more read by it queued back to back: {:.2} M rows/s, hit rate {:.1}%",
        (batches * batch) as f64 / queued_s / 1e6,
        100.0 * queued_hit_rate
    );
    println!(
        "features: of it, {:.1} µs a batch on the host before the wait ({:.1} µs noting the ids), {:.1} µs on the GPU",
        1e6 * host_s / batches as f64,
        1e6 * noting_s / batches as f64,
        1e6 * gpu_s / batches as f64,
    );
    Ok(Viewed {
        seconds,
        host_s,
        noting_s,
        gpu_s,
        hit_rate: viewed.hit_rate(),
        queued_s,
        queued_hit_rate,
        bad,
    })
}

/// One way of pooling [`run_bag`]'s batches.
#[derive(Default)]
struct BagTimes {
    /// Wall time a batch at a time (each batch's work then its wait), and of it the host's
    /// part before the wait.
    seconds: f64,
    host_s: f64,
    /// The GPU's time from before the batch's first kernel to after its last (events).
    gpu_s: f64,
    /// As many batches again queued back to back in a scope: their wall time.
    queued_s: f64,
}

/// The batches of [`run_bag`].
struct Bagged {
    /// One kernel reading and summing the rows through the tier (`&Rows`), four rows' reads in
    /// flight.
    fused: BagTimes,
    /// The same sum as the plain loop a newcomer writes, one read in flight.
    plain: BagTimes,
    /// The tier's gather, then a kernel summing the gathered rows.
    split: BagTimes,
    /// The share of the looked-up ids the tier held, over all six runs.
    hit_rate: f64,
    /// Sums that differ from the host's.
    bad: usize,
}

/// Which kernels pool a batch of [`run_bag`]'s.
#[derive(Clone, Copy, PartialEq)]
enum Pooling {
    /// One kernel through the tier (`embedding_bag_rows`, the ids noted first), which issues
    /// four rows' reads before it adds the first.
    Fused,
    /// The same, as the plain rolled loop of `docs/hot-tier.md` (`embedding_bag_plain`, the
    /// ids noted first): one read in flight per thread.
    Plain,
    /// The tier's gather into a batch of rows, then a kernel summing them
    /// (`embedding_bag_sum`).
    Split,
}

/// One way of pooling a batch of ids in bags of `bag` rows of `d4` groups of four floats.
#[derive(Clone, Copy)]
struct Bag {
    /// The kernels that pool it.
    way: Pooling,
    bag: usize,
    d4: usize,
    /// One thread per 16 bytes of the sums.
    grid: berth::Grid,
}

impl Bag {
    /// Queue the pooling of `ids` into `sum` on `s` (through `out` where the rows are
    /// gathered first), between the events `marks` where given, every guard detached.
    fn queue<T: MappedArg<F4>>(
        self,
        s: &berth::Scope<'_>,
        tier: &mut berth::HotTier<F4, T>,
        ids: &[u32],
        out: &mut berth::DeviceBuffer<F4>,
        sum: &mut berth::DeviceBuffer<F4>,
        marks: Option<(&berth::Event, &berth::Event)>,
    ) -> berth::Result<()> {
        let bag = self.bag as u32;
        if self.way != Pooling::Split {
            tier.note_reads(s, ids)?;
        }
        if let Some((start, _)) = marks {
            start.record(s)?;
        }
        match self.way {
            Pooling::Fused => berth_examples::embedding_bag_rows(
                s,
                self.grid,
                bag,
                &*tier,
                tier.noted_ids(),
                sum,
            )?
            .detach(),
            Pooling::Plain => berth_examples::embedding_bag_plain(
                s,
                self.grid,
                bag,
                &*tier,
                tier.noted_ids(),
                sum,
            )?
            .detach(),
            Pooling::Split => {
                tier.gather(s, ids, out)?.detach();
                berth_examples::embedding_bag_sum(s, self.grid, bag, self.d4 as u32, &*out, sum)?
                    .detach();
            }
        }
        if let Some((_, stop)) = marks {
            stop.record(s)?;
        }
        Ok(())
    }
}

/// Pool batches of `law` (drawn first) in bags of `args.bag` ids, a sum of their rows each
/// (an embedding bag), three ways: one kernel reading and summing the rows through the tier
/// (`embedding_bag_rows`, the ids noted first), the same sum as the plain loop a newcomer
/// writes (`embedding_bag_plain`, the ids noted the same way), and the tier's gather into a
/// batch of rows (one of `outs`) followed by a kernel summing them (`embedding_bag_sum`). Each
/// way a batch at a time (in a scope of its own, waited for at its end), then as many again
/// queued back to back in one scope; refreshes as in the timed loop; every sum checked against
/// the host's, added in the same order.
fn run_bag<T: MappedArg<F4>>(
    again: &mut Again<'_, T>,
) -> Result<Bagged, Box<dyn std::error::Error>> {
    let Again {
        args,
        gpu,
        perm,
        law,
        poison,
        ..
    } = *again;
    let (tier, rng, outs) = (&mut *again.tier, &mut *again.rng, &mut *again.outs);
    let (batches, d4, bag) = (outs.len(), tier.width(), args.bag);
    let batch = poison.len() / d4;
    if !batch.is_multiple_of(bag) {
        return Err(format!("--bag {bag} does not divide the batch of {batch} ids").into());
    }
    let bags = batch / bag;
    let sum_poison = &poison[..bags * d4];
    let mut sums = (0..batches)
        .map(|_| gpu.upload(sum_poison))
        .collect::<Result<Vec<_>, _>>()?;
    let grid = berth::Grid::cover(bags * d4);
    let before = tier.stats();
    let (start, stop) = (gpu.event()?, gpu.event()?);
    let (mut fused, mut plain, mut split) = Default::default();
    let mut bad = 0;
    for pooling in [Pooling::Fused, Pooling::Plain, Pooling::Split] {
        let times: &mut BagTimes = match pooling {
            Pooling::Fused => &mut fused,
            Pooling::Plain => &mut plain,
            Pooling::Split => &mut split,
        };
        let way = Bag {
            way: pooling,
            bag,
            d4,
            grid,
        };
        // A batch at a time.
        let planned = replan(law, perm, rng, batch, outs, poison)?;
        for sum in sums.iter_mut() {
            sum.copy_from(sum_poison)?;
        }
        let mut refreshes = Refreshes::new(args);
        for (k, ((ids, out), sum)) in planned
            .iter()
            .zip(outs.iter_mut())
            .zip(&mut sums)
            .enumerate()
        {
            let t = Instant::now();
            gpu.scope(|s| {
                way.queue(s, tier, ids, out, sum, Some((&start, &stop)))?;
                times.host_s += t.elapsed().as_secs_f64();
                Ok(())
            })?;
            times.gpu_s += berth::Event::elapsed(&start, &stop)?.as_secs_f64();
            refreshes.after(k, tier, gpu)?;
            times.seconds += t.elapsed().as_secs_f64();
        }
        for (ids, sum) in planned.iter().zip(&sums) {
            bad += bag_mismatches(&sum.to_vec()?, ids, bag, d4);
        }
        // Queued back to back.
        let planned = replan(law, perm, rng, batch, outs, poison)?;
        for sum in sums.iter_mut() {
            sum.copy_from(sum_poison)?;
        }
        let t = Instant::now();
        gpu.scope(|s| {
            let mut refreshes = Refreshes::new(args);
            for (k, ((ids, out), sum)) in planned
                .iter()
                .zip(outs.iter_mut())
                .zip(&mut sums)
                .enumerate()
            {
                way.queue(s, tier, ids, out, sum, None)?;
                refreshes.after(k, tier, s)?;
            }
            Ok(())
        })?;
        times.queued_s = t.elapsed().as_secs_f64();
        for (ids, sum) in planned.iter().zip(&sums) {
            bad += bag_mismatches(&sum.to_vec()?, ids, bag, d4);
        }
    }
    let hit_rate = tier.stats().since(&before).hit_rate();
    let rate = |s: f64| (batches * batch) as f64 / s / 1e6;
    println!(
        "features: bags of {bag} rows summed, {batches} batches each way, hit rate {:.1}%: one kernel through the tier (`&Rows`) {:.2} M rows/s a batch at a time, {:.2} queued; the plain loop {:.2}, {:.2} queued; the tier's gather then a sum {:.2}, {:.2} queued",
        100.0 * hit_rate,
        rate(fused.seconds),
        rate(fused.queued_s),
        rate(plain.seconds),
        rate(plain.queued_s),
        rate(split.seconds),
        rate(split.queued_s),
    );
    for (what, t) in [
        ("one kernel", &fused),
        ("plain loop", &plain),
        ("gather then sum", &split),
    ] {
        println!(
            "features: of it ({what}), {:.1} µs a batch on the host before the wait, {:.1} µs on the GPU",
            1e6 * t.host_s / batches as f64,
            1e6 * t.gpu_s / batches as f64,
        );
    }
    Ok(Bagged {
        fused,
        plain,
        split,
        hit_rate,
        bad,
    })
}

/// The elements of a pooling's output `got` (bags of `bag` ids, `d4` groups of four floats
/// each) that differ from the host's sums of the table's rows `ids`, added in order.
fn bag_mismatches(got: &[F4], ids: &[u32], bag: usize, d4: usize) -> usize {
    let mut bad = 0;
    for (b, bag_ids) in ids.chunks(bag).enumerate() {
        for j in 0..d4 {
            let mut want = [0.0f32; 4];
            for &id in bag_ids {
                for (c, w) in want.iter_mut().enumerate() {
                    *w += value(id as usize, j * 4 + c);
                }
            }
            let v = got[b * d4 + j];
            if [v.x, v.y, v.z, v.w] != want {
                bad += 1;
            }
        }
    }
    bad
}

/// The elements of a gather's output `got` (rows of `d4` groups of four) that differ from
/// the table's rows `ids`.
fn mismatches(got: &[F4], ids: &[u32], d4: usize) -> usize {
    let mut bad = 0;
    for (b, &id) in ids.iter().enumerate() {
        for j in 0..d4 {
            let (v, c, r) = (got[b * d4 + j], j * 4, id as usize);
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
    bad
}

/// A set of rows: one bit per row of the table.
struct RowSet(Vec<u64>);

impl RowSet {
    fn new(rows: usize) -> RowSet {
        RowSet(vec![0; rows.div_ceil(64)])
    }

    /// Add `ids` in order; how many were in the set already (added by an earlier call or
    /// earlier in `ids`).
    fn insert_all(&mut self, ids: &[u32]) -> u64 {
        let mut seen = 0;
        for &id in ids {
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            seen += u64::from(self.0[word] & bit != 0);
            self.0[word] |= bit;
        }
        seen
    }
}

/// One exponent's batches through a fresh tier over `table` (given back); the mismatches.
#[allow(clippy::too_many_arguments)]
fn run_one<M: MappedArg<F4> + std::ops::Deref<Target = [F4]>>(
    args: &Args,
    gpu: &Gpu,
    table: M,
    perm: &[u32],
    law: &Law,
    batch: usize,
    out: &mut berth::DeviceBuffer<F4>,
    rng: &mut rand::rngs::StdRng,
) -> Result<(M, usize), Box<dyn std::error::Error>> {
    let on_gpu = gpu.backend() == Backend::Cuda;
    let (exponent, ids_from) = law.json();
    let batches = args.batches.unwrap_or(if on_gpu { 50 } else { 8 });
    let (width, d4) = (args.width, args.width / 4);
    let row_bytes = width * 4;
    let rows = table.len() / d4;
    let budget = args
        .device_budget
        .unwrap_or(rows * 4 + rows.div_ceil(4) * row_bytes);
    println!("features: {}", law.name());
    let mut tier = gpu.hot_tier(table, d4, budget)?;
    tier.count_every(std::num::NonZeroUsize::new(args.count_every).expect("parsed as 1 or more"));
    tier.admit_on_repeat(args.admit_on_repeat);
    if args.whole_batches {
        tier.staging_parts(1);
    } else if let Some(parts) = args.staging_parts {
        tier.staging_parts(parts);
    }
    if let Some(threads) = args.staging_threads {
        tier.staging_threads(threads);
    }
    tier.capture_room(args.capture_room);
    tier.host_gathers(args.host_share);
    println!(
        "features: the tier holds {} rows ({:.1}% of the table; {:.1} MiB of device memory)",
        tier.capacity(),
        100.0 * tier.capacity() as f64 / rows as f64,
        tier.device_bytes() as f64 / (1u64 << 20) as f64
    );
    let (mut gather_s, mut refresh_s, mut bad) = (0.0, 0.0, 0usize);
    let mut queue_s = 0.0;
    let mut hits_after_warmup = (0u64, 0u64);
    // Every row requested so far (a bit per row, set outside the timed spans): a lookup of a
    // row never requested before misses in any tier, whatever its policy, so the share of
    // the second half's lookups whose row was requested before bounds the hit rate.
    let mut requested = RowSet::new(rows);
    let warmup_t = Instant::now();
    let mut warmup_s = 0.0;
    // The tier's counters when the timed batches begin.
    let mut at_timed = tier.stats();
    // The timed batches' gather times, and where the hot set moved.
    let (mut batch_s, mut moves) = (Vec::new(), Vec::new());
    // Each timed batch's hit rate: of its looked-up ids by the host's record, and of all its
    // rows as the GPU counted them.
    let (mut batch_hit, mut batch_gpu_hit) = (Vec::new(), Vec::new());
    // The GPU's counts when the timed batches begin, after the last batch, and when the
    // second half begins.
    let mut reads_timed = tier.gather_reads()?;
    let (mut reads_last, mut reads_late) = (reads_timed, reads_timed);
    // The timed batches' ids are drawn before the first is timed, as a training loop's loader
    // has them ready, and each batch gathers into an output of its own, checked after the
    // last: between timed batches the host does nothing but time them.
    let (mut planned, mut outs) = (Vec::new(), Vec::new());
    // The refreshes, and how many the timed batches began; the timed batches after which
    // one began, and those whose gather applied one (queued its kernels).
    let (mut due, mut refreshes) = (Refreshes::new(args), 0usize);
    let (mut refresh_begun, mut refresh_applied) = (Vec::new(), Vec::new());
    // What no gather writes: NaN equals no row's value.
    let poison = vec![
        F4 {
            x: f32::NAN,
            y: f32::NAN,
            z: f32::NAN,
            w: f32::NAN,
        };
        batch * d4
    ];
    for k in 0..args.warmup + batches {
        let timed = k >= args.warmup;
        let i = k.saturating_sub(args.warmup);
        if k == args.warmup {
            let mut shift = 0;
            for i in 0..batches {
                if args.drift_every > 0 && i > 0 && i % args.drift_every == 0 {
                    // A third of the table away: the new hot rows were cold.
                    shift = (shift + rows / 3 + 1) % rows;
                    moves.push(i);
                }
                planned.push(law.draw(perm, Drift::new(shift, args.drift_share), rng, batch));
                outs.push(gpu.upload(&poison)?);
            }
            warmup_s = warmup_t.elapsed().as_secs_f64();
            at_timed = tier.stats();
            reads_timed = tier.gather_reads()?;
            reads_last = reads_timed;
        }
        let drawn;
        let ids: &[u32] = if timed {
            &planned[i]
        } else {
            drawn = law.draw(perm, Drift::NONE, rng, batch);
            &drawn
        };
        if timed
            && i < 8
            && let Some(path) = &args.dump_ids
        {
            dump(path, ids)?;
        }
        let dst = if timed { &mut outs[i] } else { &mut *out };
        let before = tier.stats();
        let was_pending = tier.refresh_pending();
        // Timed as a loop runs it: the gather and its wait, nothing recorded between.
        let t = Instant::now();
        let pending = tier.gather(gpu, ids, dst)?;
        // The host's part of a gather (staging the ids, counting them, queuing the kernels),
        // apart from the wait for the GPU.
        let queued = t.elapsed().as_secs_f64();
        pending.wait()?;
        if timed {
            let dt = t.elapsed().as_secs_f64();
            if was_pending && !tier.refresh_pending() {
                refresh_applied.push(i);
            }
            gather_s += dt;
            queue_s += queued;
            batch_s.push(dt);
            batch_hit.push(tier.stats().since(&before).hit_rate());
            // Read after the batch's time is taken: a copy of the GPU's counters.
            let reads = tier.gather_reads()?;
            batch_gpu_hit.push(reads.since(&reads_last).hit_rate());
            reads_last = reads;
            if i + 1 == batches / 2 {
                reads_late = reads;
            }
        }
        if k >= args.warmup + batches / 2 {
            let batch = tier.stats().since(&before);
            hits_after_warmup.0 += batch.hits;
            hits_after_warmup.1 += batch.looked_up;
        }
        if !timed && k % 16 == 0 {
            bad += mismatches(&out.to_vec()?, ids, d4);
        }
        if !timed {
            requested.insert_all(ids);
        }
        // The time the batch loop's thread spends in a refresh: with `--refresh async`,
        // starting the ranking (the ranking's kernels are queued, and waited for, inside a
        // later gather, and counted in its time).
        let t = Instant::now();
        if due.after(k, &mut tier, gpu)? && timed {
            refresh_s += t.elapsed().as_secs_f64();
            refreshes += 1;
            refresh_begun.push(i);
        }
    }
    for (ids, out) in planned.iter().zip(&outs) {
        bad += mismatches(&out.to_vec()?, ids, d4);
    }
    // The tier's counters after the timed batches (before any queued ones).
    let s = tier.stats();
    let resident = tier.resident_rows();
    // What the cost model predicts from the timed batches' hit rate and refreshes, with this
    // context's constants (calibrated where a calibration is found).
    let timed = s.since(&at_timed);
    let timed_gathers = timed.gathers.max(1);
    let row_reads = tier.measure_row_reads()?;
    // The timed batches' hit rate as the GPU counted it (every row, a captured row a hit from
    // the batch after its miss), and the second half's.
    let timed_hits = reads_last.since(&reads_timed).hit_rate();
    let gpu_late = reads_last.since(&reads_late).hit_rate();
    let timed_filled = timed.filled as f64 / timed_gathers as f64;
    let model = berth::placement::decide_gather(
        &gpu.link_costs(),
        &berth::placement::GatherAccess {
            table_rows: rows,
            row_bytes,
            batch_rows: batch,
            capacity: tier.capacity(),
            hit_fraction: timed_hits,
            admitted_per_batch: timed_filled,
            // The table's own rate of random rows of this width (its memory and the rows'
            // width decide it), measured once after the timed batches.
            random_per_s: None,
            row_reads_per_s: Some(row_reads),
            // The host's part of the timed batches, as the tier measured it.
            host_s: timed.gathering.as_secs_f64() / timed_gathers as f64,
            parts: tier.parts_for(batch),
        },
    );
    // The tier's path (or the whole table, where the model keeps it), whatever the choice.
    let through_tier = berth::placement::GatherDecision {
        choice: match model.choice {
            berth::placement::GatherChoice::Resident => model.choice,
            _ => berth::placement::GatherChoice::Tier,
        },
        ..model
    };
    let model_tier = batch as f64 / through_tier.gpu_s();
    let model_tier_batch = batch as f64 / through_tier.batch_s();
    let model_tier_queued = batch as f64 / through_tier.queued_s();
    let model_mapped = batch as f64 / model.mapped_s;
    let mut again = Again {
        args,
        gpu,
        tier: &mut tier,
        perm,
        law,
        rng,
        outs: &mut outs,
        poison: &poison,
    };
    let queued = if args.queued {
        Some(run_queued(&mut again)?)
    } else {
        None
    };
    if let Some(q) = &queued {
        bad += q.bad;
    }
    let viewed = if args.view {
        Some(run_view(&mut again)?)
    } else {
        None
    };
    if let Some(v) = &viewed {
        bad += v.bad;
    }
    let bagged = if args.bag > 0 {
        Some(run_bag(&mut again)?)
    } else {
        None
    };
    if let Some(b) = &bagged {
        bad += b.bad;
    }
    // The timed batches' lookups in order, after the warmup's.
    let mut seen_late = (0u64, 0u64);
    let mut batch_requested = Vec::with_capacity(planned.len());
    for (i, ids) in planned.iter().enumerate() {
        let seen = requested.insert_all(ids);
        batch_requested.push(seen as f64 / ids.len().max(1) as f64);
        if i >= batches / 2 {
            seen_late.0 += seen;
            seen_late.1 += ids.len() as u64;
        }
    }
    let requested_before = seen_late.0 as f64 / seen_late.1.max(1) as f64;
    if args.warmup > 0 {
        println!(
            "features: {} batches to fill the tier in {warmup_s:.1} s, {} rows resident",
            args.warmup, resident
        );
    }
    let n = (batch * batches) as f64;
    // Each move is judged until the next one, against the steady state before the first.
    let first = moves.first().copied().unwrap_or(0);
    let ends: Vec<usize> = moves
        .iter()
        .skip(1)
        .copied()
        .chain([batch_s.len()])
        .collect();
    let recovery: Vec<Option<usize>> = moves
        .iter()
        .zip(&ends)
        .map(|(&m, &end)| recovered_after(&batch_s, first, m, end))
        .collect();
    // A batch's time per unit of miss share, from a line fitted over the run's batches: the
    // price of the misses the tier made beyond any tier's.
    let per_miss = time_model(&batch_s, &batch_gpu_hit).map_or(0.0, |(_, c)| c);
    let bound: Vec<Option<usize>> = moves
        .iter()
        .zip(&ends)
        .map(|(&m, &end)| {
            let (hit, requested) = (&batch_gpu_hit, &batch_requested);
            bound_by_excess(&batch_s, hit, requested, per_miss, first, m, end)
        })
        .collect();
    if !moves.is_empty() {
        let beyond: Vec<String> = moves
            .iter()
            .zip(&ends)
            .filter_map(|(&m, &end)| missed_beyond(&batch_gpu_hit, &batch_requested, m, end))
            .map(|b| format!("{:.2}", 100.0 * b))
            .collect();
        println!(
            "features: the hot set ({:.0}% of its ranks) moved at timed batches {moves:?}; gathers back within 10% of their steady time after {recovery:?} batches; any tier, the same batches less their misses beyond those of rows never requested before (as the GPU counted them, at {:.3} ms a batch were every lookup a miss): not before {bound:?}; the tier missed {beyond:?}% of the lookups of the {} batches after each move beyond those of rows never requested before",
            100.0 * args.drift_share,
            1e3 * per_miss,
            drift::SPAN
        );
    }
    let late = if hits_after_warmup.1 == 0 {
        0.0
    } else {
        hits_after_warmup.0 as f64 / hits_after_warmup.1 as f64
    };
    println!(
        "features: {:.1}% of the second half's lookups were of rows requested before (no tier hits more); the GPU read {:.1}% of them from device memory",
        100.0 * requested_before,
        100.0 * gpu_late
    );
    println!(
        "features: {:.2} M rows/s gathered ({:.2} GB/s of rows; gathers {:.3} s, {:.3} s of it on the host before the wait; refreshes ({}) {:.3} s on the batch loop's thread), hit rate by the host's record {:.1}% overall, {:.1}% in the second half; {} rows admitted, {} evicted; {} rows gathered by host threads; {bad} mismatches",
        n / (gather_s + refresh_s) / 1e6,
        n * row_bytes as f64 / (gather_s + refresh_s) / 1e9,
        gather_s,
        queue_s,
        args.refresh.name(),
        refresh_s,
        100.0 * s.hit_rate(),
        100.0 * late,
        s.admitted,
        s.evicted,
        s.staged,
    );
    println!(
        "features: the cost model ({} constants) chooses {:?}: {:.1} M rows/s predicted through the tier at this hit rate ({:.1} M a batch at a time, with the host's {:.0} µs a batch), {:.1} M every row in place",
        if model.calibrated {
            "calibrated"
        } else {
            "conservative"
        },
        model.choice,
        model_tier / 1e6,
        model_tier_batch / 1e6,
        model.host_s * 1e6,
        model_mapped / 1e6,
    );
    if args.json {
        let line = serde_json::json!({
            "impl": "berth_hot_tier",
            "zipf": exponent,
            "ids": ids_from,
            "table_gib": (rows * row_bytes) as f64 / (1u64 << 30) as f64,
            "dim": width,
            "batch": batch,
            "batches": batches,
            "warmup": args.warmup,
            "warmup_s": warmup_s,
            "resident_rows": resident,
            "refresh_every": args.refresh_every,
            "refreshes": refreshes,
            "refresh": args.refresh.name(),
            "count_every": args.count_every,
            "admit_on_repeat": args.admit_on_repeat,
            "whole_batches": args.whole_batches,
            "staging_parts": tier.max_staging_parts(),
            "capture_room": args.capture_room,
            "drift_every": args.drift_every,
            "drift_recovery_batches": recovery,
            // Each timed batch's wall time where the hot set moves (what the recovery is
            // measured on), in milliseconds.
            "batch_ms": (args.drift_every > 0)
                .then(|| batch_s.iter().map(|s| (s * 1e6).round() / 1e3).collect::<Vec<_>>()),
            "budget_bytes": budget,
            "capacity_rows": tier.capacity(),
            "gather_s": gather_s,
            "gather_host_s": queue_s,
            "refresh_s": refresh_s,
            "mrows_s": n / (gather_s + refresh_s) / 1e6,
            "hit_rate": s.hit_rate(),
            "hit_rate_second_half": late,
            // The bound of any tier's hit rate in the second half: lookups of rows requested
            // before (in the warmup or earlier in the timed batches).
            "requested_before_second_half": requested_before,
            "admitted": s.admitted,
            "evicted": s.evicted,
            "host_share": args.host_share,
            "table": args.table.name(),
            "staged": s.staged,
            // The refreshes applied in the timed batches: the ranking's host time (beside the
            // gathers with `--refresh async`), reading the miss log, queuing the kernels.
            "refresh_ranking_s": timed.ranking.as_secs_f64(),
            "refresh_log_read_s": timed.log_read.as_secs_f64(),
            "refresh_apply_s": timed.apply.as_secs_f64(),
            // Of `gather_host_s`: counting the sampled ids for the policy, and staging the ids
            // (the rest is applying refreshes and queuing the kernels).
            "gather_counting_s": timed.counting.as_secs_f64(),
            "gather_staging_s": timed.staging.as_secs_f64(),
            "ok": bad == 0,
        });
        let mut line = line;
        line["staging_threads"] = tier.max_staging_threads().into();
        line["refresh_begun_batches"] = refresh_begun.into();
        line["refresh_applied_batches"] = refresh_applied.into();
        // The hit rates as the GPU counted them, over every row of the timed batches and of
        // their second half.
        line["gpu_hit_rate"] = timed_hits.into();
        line["gpu_hit_rate_second_half"] = gpu_late.into();
        // The cost model's choice and predictions (`placement::decide_gather`) from the
        // timed batches' hit rate and fills.
        line["filled"] = s.filled.into();
        line["model_choice"] = format!("{:?}", model.choice).into();
        line["model_calibrated"] = model.calibrated.into();
        line["model_tier_mrows_s"] = (model_tier / 1e6).into();
        line["model_mapped_mrows_s"] = (model_mapped / 1e6).into();
        line["model_row_reads_mrows_s"] = (row_reads / 1e6).into();
        line["model_host_us"] = (model.host_s * 1e6).into();
        // What the model was fed: the timed batches' hit rate (the GPU's count) and rows
        // filled per batch.
        line["model_hit_fraction"] = timed_hits.into();
        line["model_filled_per_batch"] = timed_filled.into();
        line["model_tier_batch_mrows_s"] = (model_tier_batch / 1e6).into();
        line["model_tier_queued_mrows_s"] = (model_tier_queued / 1e6).into();
        if let Some(q) = &queued {
            line["queued_s"] = q.seconds.into();
            line["queued_mrows_s"] = (n / q.seconds / 1e6).into();
            line["queued_hit_rate"] = q.hit_rate.into();
            line["queued_host_s"] = q.host_s.into();
            line["queued_staging_s"] = q.staging_s.into();
            line["queued_counting_s"] = q.counting_s.into();
            line["queued_refresh_log_read_s"] = q.refresh_log_read_s.into();
        }
        if let Some(v) = &viewed {
            line["view_s"] = v.seconds.into();
            line["view_mrows_s"] = (n / v.seconds / 1e6).into();
            line["view_hit_rate"] = v.hit_rate.into();
            line["view_host_s"] = v.host_s.into();
            line["view_noting_s"] = v.noting_s.into();
            line["view_gpu_s"] = v.gpu_s.into();
            line["view_queued_mrows_s"] = (n / v.queued_s / 1e6).into();
            line["view_queued_hit_rate"] = v.queued_hit_rate.into();
        }
        if let Some(b) = &bagged {
            line["bag"] = args.bag.into();
            line["bag_hit_rate"] = b.hit_rate.into();
            for (key, t) in [
                ("bag_fused", &b.fused),
                ("bag_plain", &b.plain),
                ("bag_split", &b.split),
            ] {
                line[format!("{key}_mrows_s")] = (n / t.seconds / 1e6).into();
                line[format!("{key}_host_s")] = t.host_s.into();
                line[format!("{key}_gpu_s")] = t.gpu_s.into();
                line[format!("{key}_queued_mrows_s")] = (n / t.queued_s / 1e6).into();
            }
        }
        if args.drift_every > 0 {
            line["drift_share"] = args.drift_share.into();
            // The recovery no tier can beat (`bound_by_excess`), and what it is found from.
            line["drift_bound_batches"] = serde_json::json!(bound);
            line["batch_hit_rate"] = serde_json::json!(batch_hit);
            line["batch_gpu_hit_rate"] = serde_json::json!(batch_gpu_hit);
            line["batch_requested_before"] = serde_json::json!(batch_requested);
        }
        println!("{line}");
    }
    let table = tier.into_table();
    if !args.baseline {
        return Ok((table, bad));
    }
    // The same law without a tier (a tier with no budget): every row read in place, then
    // every row gathered by host threads.
    let mut table = table;
    for (share, name, what) in [
        (0.0, "berth_mapped_only", "every row read in place"),
        (
            1.0,
            "berth_host_gathered",
            "every row gathered by host threads",
        ),
    ] {
        let mut plain = gpu.hot_tier(table, d4, 0)?;
        plain.host_gathers(share);
        let (mut plain_s, mut plain_host_s, mut plain_span_s) = (0.0, 0.0, 0.0);
        for out in &mut outs {
            out.copy_from(&poison)?;
        }
        // Timed as the tier's batches are, then gathered again with events around each, for
        // the GPU's time from before its first kernel to after its last (idle gaps included).
        for (ids, out) in planned.iter().zip(&mut outs) {
            let t = Instant::now();
            let pending = plain.gather(gpu, ids, out)?;
            plain_host_s += t.elapsed().as_secs_f64();
            pending.wait()?;
            plain_s += t.elapsed().as_secs_f64();
        }
        let (span_start, span_stop) = (gpu.event()?, gpu.event()?);
        for (ids, out) in planned.iter().zip(&mut outs) {
            span_start.record(gpu)?;
            let pending = plain.gather(gpu, ids, out)?;
            span_stop.record(gpu)?;
            pending.wait()?;
            plain_span_s += berth::Event::elapsed(&span_start, &span_stop)?.as_secs_f64();
        }
        for (ids, out) in planned.iter().zip(&outs) {
            bad += mismatches(&out.to_vec()?, ids, d4);
        }
        println!(
            "features: without a tier ({what}): {:.2} M rows/s ({plain_s:.3} s, {plain_host_s:.3} s of it on the host before the wait, {plain_span_s:.3} s on the GPU)",
            n / plain_s / 1e6
        );
        if args.json {
            let line = serde_json::json!({
                "impl": name,
                "zipf": exponent,
                "ids": ids_from,
                "table_gib": (rows * row_bytes) as f64 / (1u64 << 30) as f64,
                "dim": width,
                "batch": batch,
                "batches": batches,
                "gather_s": plain_s,
                "gather_host_s": plain_host_s,
                "gather_gpu_span_s": plain_span_s,
                "mrows_s": n / plain_s / 1e6,
                "table": args.table.name(),
                "ok": bad == 0,
            });
            println!("{line}");
        }
        table = plain.into_table();
    }
    Ok((table, bad))
}

#[cfg(test)]
mod tests {
    use super::Drift;

    #[test]
    fn a_drift_moves_its_share_of_the_ranks_and_keeps_them_in_range() {
        let n = 1000;
        assert!((0..n).all(|r| Drift::NONE.apply(r, n) == r));
        let all = Drift::new(7, 1.0);
        assert!((0..n).all(|r| all.apply(r, n) == (r + 7) % n));
        let some = Drift::new(7, 0.25);
        let moved = (0..n).filter(|&r| some.apply(r, n) != r).count();
        assert!((150..350).contains(&moved), "{moved} of {n} moved");
        assert!((0..n).all(|r| some.apply(r, n) < n));
    }
}
