//! Running the queries on a `Gpu`: the Arrow columns shared with it in place (no copy on the
//! host), their packed copies, and the packed columns kept in device memory between queries
//! within a budget by a [`DeviceCache`], which chooses them from what earlier queries read.

use super::data::Tables;
use super::reference::{self, Answer, Query};
use super::{BLOCK, Q1_GROUPS, Q1_SUMS, Q12_COUNTS, Q14_SUMS, SLOTS, accumulator_words};
use arrow_buffer::ScalarBuffer;
use berth::packed::PackedColumn;
use berth::{
    Cacheable, DeviceBuffer, DeviceCache, Gpu, Grid, HostShared, Packing, PipelineOptions,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// How a query's lineitem columns reach the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The Arrow columns as they are, streamed over the link by a pipelined launch.
    Raw,
    /// The packed columns, copied over the link.
    Packed,
    /// The packed columns already in device memory (a warm query).
    Resident,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Raw => "raw",
            Mode::Packed => "packed",
            Mode::Resident => "resident",
        })
    }
}

/// A lineitem column a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Col {
    /// `l_orderkey`.
    OrderKey,
    /// `l_partkey`.
    PartKey,
    /// `l_quantity`.
    Quantity,
    /// `l_extendedprice`.
    Price,
    /// `l_discount`.
    Discount,
    /// `l_tax`.
    Tax,
    /// `l_returnflag`.
    ReturnFlag,
    /// `l_linestatus`.
    LineStatus,
    /// `l_shipdate`.
    ShipDate,
    /// `l_commitdate`.
    CommitDate,
    /// `l_receiptdate`.
    ReceiptDate,
    /// `l_shipmode`.
    ShipMode,
}

impl Col {
    /// Every column.
    pub const ALL: [Col; 12] = [
        Col::OrderKey,
        Col::PartKey,
        Col::Quantity,
        Col::Price,
        Col::Discount,
        Col::Tax,
        Col::ReturnFlag,
        Col::LineStatus,
        Col::ShipDate,
        Col::CommitDate,
        Col::ReceiptDate,
        Col::ShipMode,
    ];
}

/// The lineitem columns query `q` reads.
pub fn columns(q: Query) -> &'static [Col] {
    use Col::*;
    match q {
        Query::Q1 => &[
            ShipDate, ReturnFlag, LineStatus, Quantity, Price, Discount, Tax,
        ],
        Query::Q6 => &[ShipDate, Discount, Quantity, Price],
        Query::Q12 => &[OrderKey, ShipMode, ShipDate, CommitDate, ReceiptDate],
        Query::Q14 => &[PartKey, ShipDate, Price, Discount],
    }
}

/// What one run of a query did.
#[derive(Clone, Debug)]
pub struct Run {
    /// The query.
    pub query: Query,
    /// How its columns reached the kernel.
    pub mode: Mode,
    /// The answer.
    pub answer: Answer,
    /// Wall time from the launch to the answer on the host, in milliseconds.
    pub ms: f64,
    /// Bytes of lineitem columns that crossed the link (0 for a warm run).
    pub bytes_moved: u64,
    /// Bytes of the raw columns the query reads.
    pub raw_bytes: u64,
}

/// A packed column shared with the GPU, and its packing.
struct PackedShared {
    words: HostShared<Arc<[u32]>>,
    packing: Packing,
}

/// The Arrow columns, shared with the GPU in place.
struct RawShared {
    orderkey: HostShared<ScalarBuffer<i64>>,
    partkey: HostShared<ScalarBuffer<i64>>,
    quantity: HostShared<ScalarBuffer<i64>>,
    price: HostShared<ScalarBuffer<i64>>,
    discount: HostShared<ScalarBuffer<i64>>,
    tax: HostShared<ScalarBuffer<i64>>,
    returnflag: HostShared<ScalarBuffer<u8>>,
    linestatus: HostShared<ScalarBuffer<u8>>,
    shipdate: HostShared<ScalarBuffer<i32>>,
    commitdate: HostShared<ScalarBuffer<i32>>,
    receiptdate: HostShared<ScalarBuffer<i32>>,
    shipmode: HostShared<ScalarBuffer<u8>>,
}

/// The queries over one set of tables on one GPU.
pub struct Engine<'g> {
    gpu: &'g Gpu,
    rows: usize,
    raw: RawShared,
    packed: HashMap<Col, PackedShared>,
    priority_by_key: HostShared<Arc<[u8]>>,
    type_by_part: HostShared<ScalarBuffer<u8>>,
    /// The packed columns kept in device memory, and what every query read.
    cache: DeviceCache,
    pipeline: PipelineOptions,
}

type Result<T> = std::result::Result<T, String>;

fn gpu_err(e: berth::Error) -> String {
    e.to_string()
}

impl<'g> Engine<'g> {
    /// Share the columns of `t` with `gpu` (in place), pack them, and build the join
    /// lookups; keep at most `device_budget` bytes of packed columns in device memory between
    /// queries.
    pub fn new(gpu: &'g Gpu, t: &Tables, device_budget: usize) -> Result<Engine<'g>> {
        t.check_part_keys_dense()?;
        if t.rows() == 0 {
            return Err("lineitem is empty".into());
        }
        let l = &t.lineitem;
        let share_i64 = |a: &arrow_array::Int64Array| gpu.share(a.values().clone());
        let share_i32 = |a: &arrow_array::Date32Array| gpu.share(a.values().clone());
        let share_u8 = |a: &ScalarBuffer<u8>| gpu.share(a.clone());
        let raw = RawShared {
            orderkey: share_i64(&l.orderkey).map_err(gpu_err)?,
            partkey: share_i64(&l.partkey).map_err(gpu_err)?,
            quantity: share_i64(&l.quantity).map_err(gpu_err)?,
            price: share_i64(&l.price).map_err(gpu_err)?,
            discount: share_i64(&l.discount).map_err(gpu_err)?,
            tax: share_i64(&l.tax).map_err(gpu_err)?,
            returnflag: share_u8(l.returnflag.values()).map_err(gpu_err)?,
            linestatus: share_u8(l.linestatus.values()).map_err(gpu_err)?,
            shipdate: share_i32(&l.shipdate).map_err(gpu_err)?,
            commitdate: share_i32(&l.commitdate).map_err(gpu_err)?,
            receiptdate: share_i32(&l.receiptdate).map_err(gpu_err)?,
            shipmode: share_u8(l.shipmode.keys().values()).map_err(gpu_err)?,
        };
        let mut packed = HashMap::new();
        for c in Col::ALL {
            let col = pack(t, c)?;
            let packing = col.packing();
            let words: Arc<[u32]> = col.into_words().into();
            packed.insert(
                c,
                PackedShared {
                    words: gpu.share(words).map_err(gpu_err)?,
                    packing,
                },
            );
        }
        let priority_by_key: Arc<[u8]> = t.priority_by_orderkey()?.into();
        Ok(Engine {
            gpu,
            rows: t.rows(),
            raw,
            packed,
            priority_by_key: gpu.share(priority_by_key).map_err(gpu_err)?,
            type_by_part: share_u8(t.part.ptype.keys().values()).map_err(gpu_err)?,
            cache: gpu.device_cache(device_budget),
            pipeline: PipelineOptions::default(),
        })
    }

    /// Set the options of the raw queries' pipelined launches.
    pub fn set_pipeline(&mut self, opts: PipelineOptions) {
        self.pipeline = opts;
    }

    /// Bytes of raw column `c`.
    pub fn raw_bytes(&self, c: Col) -> u64 {
        let r = &self.raw;
        (match c {
            Col::OrderKey => r.orderkey.bytes(),
            Col::PartKey => r.partkey.bytes(),
            Col::Quantity => r.quantity.bytes(),
            Col::Price => r.price.bytes(),
            Col::Discount => r.discount.bytes(),
            Col::Tax => r.tax.bytes(),
            Col::ReturnFlag => r.returnflag.bytes(),
            Col::LineStatus => r.linestatus.bytes(),
            Col::ShipDate => r.shipdate.bytes(),
            Col::CommitDate => r.commitdate.bytes(),
            Col::ReceiptDate => r.receiptdate.bytes(),
            Col::ShipMode => r.shipmode.bytes(),
        }) as u64
    }

    /// Bytes of packed column `c`.
    pub fn packed_bytes(&self, c: Col) -> u64 {
        self.packed[&c].words.bytes() as u64
    }

    /// The packing chosen for column `c`.
    pub fn packing(&self, c: Col) -> Packing {
        self.packed[&c].packing
    }

    /// Whether every column of `q` is in device memory.
    pub fn is_warm(&self, q: Query) -> bool {
        columns(q)
            .iter()
            .all(|c| self.cache.is_resident(&self.packed[c].words))
    }

    /// Bytes of packed columns in device memory.
    pub fn resident_bytes(&self) -> u64 {
        self.cache.resident_bytes() as u64
    }

    /// Run `q` with its columns placed as `mode` says. Every run counts a read of its
    /// columns in the engine's [`DeviceCache`]; a `Resident` run also asks the cache to keep
    /// them in device memory (it keeps the columns queries read most, as many as the budget
    /// holds), and runs `Packed` when they are not all there.
    pub fn run(&mut self, q: Query, mode: Mode) -> Result<Run> {
        let cols: Vec<&dyn Cacheable> = columns(q)
            .iter()
            .map(|c| &self.packed[c].words as &dyn Cacheable)
            .collect();
        let mode = if mode == Mode::Resident {
            if self.cache.admit(&cols).map_err(gpu_err)? {
                Mode::Resident
            } else {
                Mode::Packed
            }
        } else {
            self.cache.note(&cols);
            mode
        };
        let raw_bytes = columns(q).iter().map(|&c| self.raw_bytes(c)).sum();
        let bytes_moved = match mode {
            Mode::Raw => raw_bytes,
            Mode::Packed => columns(q).iter().map(|&c| self.packed_bytes(c)).sum(),
            Mode::Resident => 0,
        };
        // The query's range in a profiler's timeline, around berth's copies and launches.
        let _range = berth::nvtx::range(&format!("{q} {mode}"));
        let start = Instant::now();
        let answer = self.launch(q, mode).map_err(gpu_err)?;
        Ok(Run {
            query: q,
            mode,
            answer,
            ms: start.elapsed().as_secs_f64() * 1e3,
            bytes_moved,
            raw_bytes,
        })
    }

    /// The grid of the non-pipelined query kernels: about 16 rows a thread.
    fn grid(&self) -> Grid {
        let blocks = self.rows.div_ceil(BLOCK as usize * 16).max(1);
        Grid::new(u32::try_from(blocks).unwrap_or(u32::MAX), BLOCK)
    }

    fn launch(&self, q: Query, mode: Mode) -> berth::Result<Answer> {
        let n = match q {
            Query::Q1 => Q1_GROUPS * Q1_SUMS,
            Query::Q6 => 1,
            Query::Q12 => Q12_COUNTS,
            Query::Q14 => Q14_SUMS,
        };
        let mut acc = self.gpu.alloc_zeroed::<u64>(accumulator_words(n))?;
        match mode {
            Mode::Raw => self.launch_raw(q, &mut acc)?,
            Mode::Packed => self.launch_packed(q, &mut acc)?,
            Mode::Resident => self.launch_resident(q, &mut acc)?,
        }
        let sums = totals(&acc.to_vec()?, n);
        Ok(match q {
            Query::Q1 => Answer::Q1(reference::q1_groups(&sums)),
            Query::Q6 => Answer::Q6 { revenue: sums[0] },
            Query::Q12 => reference::q12_modes(&sums),
            Query::Q14 => Answer::Q14 {
                promo: sums[0],
                total: sums[1],
            },
        })
    }

    fn launch_raw(&self, q: Query, acc: &mut DeviceBuffer<u64>) -> berth::Result<()> {
        let (r, g, o) = (&self.raw, self.gpu, self.pipeline);
        let run = match q {
            Query::Q1 => super::q1_raw_pipelined(
                g,
                o,
                reference::q1_ship_until(),
                &r.shipdate,
                &r.returnflag,
                &r.linestatus,
                &r.quantity,
                &r.price,
                &r.discount,
                &r.tax,
                acc,
            )?,
            Query::Q6 => super::q6_raw_pipelined(
                g,
                o,
                reference::q6_params(),
                &r.shipdate,
                &r.discount,
                &r.quantity,
                &r.price,
                acc,
            )?,
            Query::Q12 => super::q12_raw_pipelined(
                g,
                o,
                reference::q12_params(),
                &r.orderkey,
                &r.shipmode,
                &r.shipdate,
                &r.commitdate,
                &r.receiptdate,
                &self.priority_by_key,
                acc,
            )?,
            Query::Q14 => super::q14_raw_pipelined(
                g,
                o,
                reference::q14_params(),
                &r.partkey,
                &r.shipdate,
                &r.price,
                &r.discount,
                &self.type_by_part,
                acc,
            )?,
        };
        run.wait().map(|_| ())
    }

    fn launch_packed(&self, q: Query, acc: &mut DeviceBuffer<u64>) -> berth::Result<()> {
        let p = |c: Col| (&self.packed[&c].words, self.packed[&c].packing);
        let (g, grid) = (self.gpu, self.grid());
        use Col::*;
        match q {
            Query::Q1 => {
                let (sd, rf, ls, qt) = (p(ShipDate), p(ReturnFlag), p(LineStatus), p(Quantity));
                let (pr, di, tx) = (p(Price), p(Discount), p(Tax));
                super::q1_packed(
                    g,
                    grid,
                    reference::q1_ship_until(),
                    sd.0,
                    sd.1,
                    rf.0,
                    rf.1,
                    ls.0,
                    ls.1,
                    qt.0,
                    qt.1,
                    pr.0,
                    pr.1,
                    di.0,
                    di.1,
                    tx.0,
                    tx.1,
                    acc,
                )?
                .wait()
            }
            Query::Q6 => {
                let (sd, di, qt, pr) = (p(ShipDate), p(Discount), p(Quantity), p(Price));
                super::q6_packed(
                    g,
                    grid,
                    reference::q6_params(),
                    sd.0,
                    sd.1,
                    di.0,
                    di.1,
                    qt.0,
                    qt.1,
                    pr.0,
                    pr.1,
                    acc,
                )?
                .wait()
            }
            Query::Q12 => {
                let (ok, sm, sd) = (p(OrderKey), p(ShipMode), p(ShipDate));
                let (cd, rd) = (p(CommitDate), p(ReceiptDate));
                super::q12_packed(
                    g,
                    grid,
                    reference::q12_params(),
                    ok.0,
                    ok.1,
                    sm.0,
                    sm.1,
                    sd.0,
                    sd.1,
                    cd.0,
                    cd.1,
                    rd.0,
                    rd.1,
                    &self.priority_by_key,
                    acc,
                )?
                .wait()
            }
            Query::Q14 => {
                let (pk, sd, pr, di) = (p(PartKey), p(ShipDate), p(Price), p(Discount));
                super::q14_packed(
                    g,
                    grid,
                    reference::q14_params(),
                    pk.0,
                    pk.1,
                    sd.0,
                    sd.1,
                    pr.0,
                    pr.1,
                    di.0,
                    di.1,
                    &self.type_by_part,
                    acc,
                )?
                .wait()
            }
        }
    }

    fn launch_resident(&self, q: Query, acc: &mut DeviceBuffer<u64>) -> berth::Result<()> {
        let p = |c: Col| {
            let packed = &self.packed[&c];
            // `run` checked that every column of the query is resident.
            let words = self.cache.get(&packed.words).ok_or_else(|| {
                berth::Error::Usage(format!("{c:?} is not resident in device memory"))
            });
            words.map(|w| (w, packed.packing))
        };
        let (g, grid) = (self.gpu, self.grid());
        use Col::*;
        match q {
            Query::Q1 => {
                let (sd, rf, ls, qt) = (p(ShipDate)?, p(ReturnFlag)?, p(LineStatus)?, p(Quantity)?);
                let (pr, di, tx) = (p(Price)?, p(Discount)?, p(Tax)?);
                super::q1_resident(
                    g,
                    grid,
                    reference::q1_ship_until(),
                    sd.0,
                    sd.1,
                    rf.0,
                    rf.1,
                    ls.0,
                    ls.1,
                    qt.0,
                    qt.1,
                    pr.0,
                    pr.1,
                    di.0,
                    di.1,
                    tx.0,
                    tx.1,
                    acc,
                )?
                .wait()
            }
            Query::Q6 => {
                let (sd, di, qt, pr) = (p(ShipDate)?, p(Discount)?, p(Quantity)?, p(Price)?);
                super::q6_resident(
                    g,
                    grid,
                    reference::q6_params(),
                    sd.0,
                    sd.1,
                    di.0,
                    di.1,
                    qt.0,
                    qt.1,
                    pr.0,
                    pr.1,
                    acc,
                )?
                .wait()
            }
            Query::Q12 => {
                let (ok, sm, sd) = (p(OrderKey)?, p(ShipMode)?, p(ShipDate)?);
                let (cd, rd) = (p(CommitDate)?, p(ReceiptDate)?);
                super::q12_resident(
                    g,
                    grid,
                    reference::q12_params(),
                    ok.0,
                    ok.1,
                    sm.0,
                    sm.1,
                    sd.0,
                    sd.1,
                    cd.0,
                    cd.1,
                    rd.0,
                    rd.1,
                    &self.priority_by_key,
                    acc,
                )?
                .wait()
            }
            Query::Q14 => {
                let (pk, sd, pr, di) = (p(PartKey)?, p(ShipDate)?, p(Price)?, p(Discount)?);
                super::q14_resident(
                    g,
                    grid,
                    reference::q14_params(),
                    pk.0,
                    pk.1,
                    sd.0,
                    sd.1,
                    pr.0,
                    pr.1,
                    di.0,
                    di.1,
                    &self.type_by_part,
                    acc,
                )?
                .wait()
            }
        }
    }
}

/// Pack lineitem column `c` of `t`, or say why it does not pack.
fn pack(t: &Tables, c: Col) -> Result<PackedColumn> {
    let l = &t.lineitem;
    let col = match c {
        Col::OrderKey => PackedColumn::encode(l.orderkey.values()),
        Col::PartKey => PackedColumn::encode(l.partkey.values()),
        Col::Quantity => PackedColumn::encode(l.quantity.values()),
        Col::Price => PackedColumn::encode(l.price.values()),
        Col::Discount => PackedColumn::encode(l.discount.values()),
        Col::Tax => PackedColumn::encode(l.tax.values()),
        Col::ReturnFlag => PackedColumn::encode(l.returnflag.values()),
        Col::LineStatus => PackedColumn::encode(l.linestatus.values()),
        Col::ShipDate => PackedColumn::encode(l.shipdate.values()),
        Col::CommitDate => PackedColumn::encode(l.commitdate.values()),
        Col::ReceiptDate => PackedColumn::encode(l.receiptdate.values()),
        Col::ShipMode => PackedColumn::encode(l.shipmode.keys().values()),
    };
    col.ok_or_else(|| format!("{c:?}: its values span more than 32 bits and do not pack"))
}

/// The `n` 128-bit totals of accumulator words laid out as the kernels lay them out: for
/// accumulator `k`, slot `s`: low word at `(k * SLOTS + s) * 2`, carries after it.
pub fn totals(words: &[u64], n: usize) -> Vec<i128> {
    (0..n)
        .map(|k| {
            (0..SLOTS)
                .map(|s| {
                    let i = (k * SLOTS + s) * 2;
                    (u128::from(words[i + 1]) << 64 | u128::from(words[i])) as i128
                })
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpch::data;

    /// Every query in every placement on the simulator gives the host reference's answer,
    /// exactly; a budget that holds some columns keeps the most-read ones, and a query whose
    /// columns it does not hold runs packed instead.
    #[test]
    fn every_query_in_every_placement_matches_the_host() {
        let t = data::generate(0.01, 2).unwrap();
        let gpu = Gpu::simulator();
        let mut e = Engine::new(&gpu, &t, usize::MAX).unwrap();
        for q in Query::ALL {
            let want = reference::answer(q, &t);
            for mode in [Mode::Raw, Mode::Packed, Mode::Resident] {
                let run = e.run(q, mode).unwrap();
                assert_eq!(run.mode, mode, "{q}");
                assert_eq!(run.answer, want, "{q} {mode}");
                assert!(run.bytes_moved <= run.raw_bytes);
            }
            let packed: u64 = columns(q).iter().map(|&c| e.packed_bytes(c)).sum();
            let raw: u64 = columns(q).iter().map(|&c| e.raw_bytes(c)).sum();
            assert!(packed * 3 < raw, "{q}: packed {packed} of {raw} bytes");
        }
        assert!(matches!(&reference::answer(Query::Q1, &t), Answer::Q1(g) if g.len() == 4));
        // Bits a row: ship date 12, discount 4, quantity 6 (whole units), price 24; return
        // flag 5 (A, N, R), line status 1 (F and O, a step of 9 apart), tax 4.
        let bits = |q| columns(q).iter().map(|&c| e.packing(c).bits).sum::<u32>();
        assert_eq!((bits(Query::Q6), bits(Query::Q1)), (46, 56));

        // Q6's columns fit in the budget, Q1's do not: Q6 warm, Q1 packed.
        let q6: u64 = columns(Query::Q6).iter().map(|&c| e.packed_bytes(c)).sum();
        let mut small = Engine::new(&gpu, &t, q6 as usize).unwrap();
        small.run(Query::Q6, Mode::Packed).unwrap();
        small.run(Query::Q6, Mode::Packed).unwrap();
        assert_eq!(
            small.run(Query::Q1, Mode::Resident).unwrap().mode,
            Mode::Packed
        );
        assert_eq!(
            small.run(Query::Q6, Mode::Resident).unwrap().mode,
            Mode::Resident
        );
        assert!(small.resident_bytes() <= q6);
    }

    /// A flag the query does not know stops the kernel with its message, as a typed error.
    #[test]
    fn unknown_flags_are_an_error_naming_the_column() {
        let mut t = data::generate(0.01, 1).unwrap();
        let mut flags: Vec<u8> = t.lineitem.returnflag.values().to_vec();
        flags[7] = b'X';
        t.lineitem.returnflag = arrow_array::UInt8Array::from(flags);
        let gpu = Gpu::simulator();
        let mut e = Engine::new(&gpu, &t, 0).unwrap();
        let err = e.run(Query::Q1, Mode::Packed).unwrap_err();
        assert!(err.contains("l_returnflag must be A, N or R"), "{err}");
    }
}
