//! The runtime's own kernels, hand-written PTX in one module (`berth_runtime`), JIT-compiled at
//! first use: [`CHUNK_DONE`] (a pipelined chunk's progress flag), [`RANDOM_PROBE`] (how
//! fast one mapped table answers random reads, for `#[auto]`'s close calls), and the hot
//! tier's [`HOT_GATHER`], [`HOT_SCATTER`], [`HOT_FILL`] and [`HOT_SLOTS`] with [`FILL_U32`] (`hot_tier.rs`). All are checked against their
//! descriptors and by ptxas in the tests (`tests/tests/kernels.rs`).

use crate::launch::{Kernel, Param, Part, Placement};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A one-thread kernel that marks a chunk done: `*flag = 1` with a system-scope release
/// store, launched after a chunk's copy out on its stream with `BERTH_PIPELINE_FLAGS=kernel`
/// (not the default: after a fault no kernel runs while queued copies may, so a chunk can be
/// written and not flagged; docs/design-notes.md).
pub static CHUNK_DONE: Kernel = Kernel {
    name: "berth_chunk_done",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[Param::scalar::<u64>("flag")],
    location: concat!(file!(), ":", line!()),
    sim: chunk_done_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// Random 4-byte reads of one mapped table: thread `i` of the first `reads` reads word
/// `mulhi(splitmix64(i + 1), words)` of `table` (uniform over the table, no index array), and
/// writes `sink` only if the word is `PROBE_MAGIC` (so the loads are not optimised away;
/// whatever the table holds, nothing else is written). Timed by
/// [`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads).
pub static RANDOM_PROBE: Kernel = Kernel {
    name: "berth_random_probe",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("table"),
        Param::scalar::<u64>("words"),
        Param::scalar::<u64>("reads"),
        Param::scalar::<u64>("sink"),
    ],
    location: concat!(file!(), ":", line!()),
    sim: random_probe_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// The hot tier's gather: rows of 16-byte units, thread `g` copies unit `g % units` of row
/// `ids[g / units]` into unit `g` of `out`, from the device tier where the row's slot
/// (`slots[id]`) is below `capacity`, else from the mapped host table. Threads whose id is
/// not below `rows` write nothing; an empty slot table (`slots` of length 0) reads every row
/// from the host table.
///
/// It also logs the rows it missed, each once: the thread of a row's unit 0 that finds the
/// slot `NOT_RESIDENT` (`u32::MAX`), while the 64-bit counter `log_n[0]` is below `log_limit` and `log`'s
/// length, claims it (`PENDING` (`u32::MAX - 1`), with a compare-and-swap, so one thread of the whole launch
/// wins per row), adds 1 to the counter, and writes the id at `log[n]` if `n` is still below
/// both; past them it gives the slot back (`NOT_RESIDENT`). `log_limit` 0 logs nothing. With a
/// doorkeeper (`seen`, one bit per row; none when its length is 0), a row is claimed only
/// if its bit was set already: the first miss sets it (`atom.or`), a later one claims. Slots are read with relaxed `.gpu` loads,
/// since a launch's own claims may race with them. Parameters: `units`, `rows`, `capacity`,
/// `log_limit`, then the slices `table` (mapped), `tier`, `slots` (written), `ids`, `out`
/// (written), `log_n` (written), `log` (written), `seen` (written) and `claim` (written), each
/// a pointer and a length. The thread of unit 0 of row `b` writes `claim[b]` (for `b` below its
/// length): the row's place in the log if it logged the row, else `NOT_RESIDENT`.
///
/// Rows the host gathers: a position `b` below `staged`'s length (a mapped slice) whose row
/// is not read from the tier and whose `staged[b]` is `PENDING` is not written at all: the
/// host's threads gather that row, and [`HOT_SCATTER`] writes it. Its claim and log entry are
/// made as for any other miss.
///
/// It counts the rows it does not read from the tier (read in place, or left to the host's
/// threads) in `misses`, the last parameter: the thread of unit 0 of such a row `b` adds 1 to
/// word `16 · (b mod 32)`, where that is below the slice's length: 32 counters, 128 bytes
/// apart, so that no one address takes every add. Ids not below `rows` are not counted.
pub static HOT_GATHER: Kernel = Kernel {
    name: "berth_hot_gather",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("units"),
        Param::scalar::<u64>("rows"),
        Param::scalar::<u64>("capacity"),
        Param::scalar::<u64>("log_limit"),
        Param::slice_ptr::<u8>("table", false, Placement::Mapped),
        Param::word("table", Part::Len),
        Param::slice_ptr::<u8>("tier", false, Placement::Device),
        Param::word("tier", Part::Len),
        Param::slice_ptr::<u32>("slots", true, Placement::Device),
        Param::word("slots", Part::Len),
        Param::slice_ptr::<u32>("ids", false, Placement::Mapped),
        Param::word("ids", Part::Len),
        Param::slice_ptr::<u8>("out", true, Placement::Device),
        Param::word("out", Part::Len),
        Param::slice_ptr::<u64>("log_n", true, Placement::Device),
        Param::word("log_n", Part::Len),
        Param::slice_ptr::<u32>("log", true, Placement::Device),
        Param::word("log", Part::Len),
        Param::slice_ptr::<u32>("seen", true, Placement::Device),
        Param::word("seen", Part::Len),
        Param::slice_ptr::<u32>("claim", true, Placement::Device),
        Param::word("claim", Part::Len),
        Param::slice_ptr::<u32>("staged", false, Placement::Mapped),
        Param::word("staged", Part::Len),
        Param::slice_ptr::<u64>("misses", true, Placement::Device),
        Param::word("misses", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_gather_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// The hot tier's scatter, queued after a gather whose host threads gathered some rows: thread
/// `g` copies unit `g` of `stage` (row `k = g / units`, rows of `units` units back to back, in
/// mapped host memory the host filled) into unit `g % units` of `out` row `pos[k]`, for `k`
/// below `pos`'s length and `stage_rows`, and `pos[k]` below `out_rows`. Parameters: `units`,
/// `out_rows`, `stage_rows`, then the slices `pos` (mapped), `stage` (mapped) and `out`
/// (written).
pub static HOT_SCATTER: Kernel = Kernel {
    name: "berth_hot_scatter",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("units"),
        Param::scalar::<u64>("out_rows"),
        Param::scalar::<u64>("stage_rows"),
        Param::slice_ptr::<u32>("pos", false, Placement::Mapped),
        Param::word("pos", Part::Len),
        Param::slice_ptr::<u8>("stage", false, Placement::Mapped),
        Param::word("stage", Part::Len),
        Param::slice_ptr::<u8>("out", true, Placement::Device),
        Param::word("out", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_scatter_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// The hot tier's capture, queued after a gather: thread `g` copies unit `g % units` of
/// `out` row `b = g / units` into unit `g % units` of tier slot `grant[n]`, where `n =
/// claim[b]` is the row's place in the miss log, if the gather logged it there: `n` below the
/// lengths of `grant` and `log` and the counter `log_n[0]`, `log[n] == ids[b]`, and the slot
/// below `capacity`. The thread of unit 0 of such a row also writes the slot into the slot
/// table, `slots[ids[b]]` (for an id below its length): kernels queued after this one read
/// the row from the tier. Where the slot held a row, `evict[n]` names it (for `n` below
/// `evict`'s length; an entry not below the slot table's length names none): that thread
/// first evicts it, setting its entry to `NOT_RESIDENT` if it still names the slot (a
/// compare-and-swap, so that an entry a later refresh moved stays). As for the gather, `out`
/// holds `ids × units` units and `tier` `capacity × units` (their lengths count the host's
/// elements, not bytes). Parameters: `units`, `capacity`, then the slices `ids`, `claim`,
/// `log`, `log_n`, `grant`, `evict`, `out`, `tier` (written) and `slots` (written).
pub static HOT_CAPTURE: Kernel = Kernel {
    name: "berth_hot_capture",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("units"),
        Param::scalar::<u64>("capacity"),
        Param::slice_ptr::<u32>("ids", false, Placement::Mapped),
        Param::word("ids", Part::Len),
        Param::slice_ptr::<u32>("claim", false, Placement::Device),
        Param::word("claim", Part::Len),
        Param::slice_ptr::<u32>("log", false, Placement::Device),
        Param::word("log", Part::Len),
        Param::slice_ptr::<u64>("log_n", false, Placement::Device),
        Param::word("log_n", Part::Len),
        Param::slice_ptr::<u32>("grant", false, Placement::Device),
        Param::word("grant", Part::Len),
        Param::slice_ptr::<u32>("evict", false, Placement::Device),
        Param::word("evict", Part::Len),
        Param::slice_ptr::<u8>("out", false, Placement::Device),
        Param::word("out", Part::Len),
        Param::slice_ptr::<u8>("tier", true, Placement::Device),
        Param::word("tier", Part::Len),
        Param::slice_ptr::<u32>("slots", true, Placement::Device),
        Param::word("slots", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_capture_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// A hot tier's slot table entry for a row that is not resident.
pub(crate) const NOT_RESIDENT: u32 = u32::MAX;
/// A hot tier's slot table entry for a row that is not resident and that a gather has logged
/// as missed since the last refresh.
pub(crate) const PENDING: u32 = u32::MAX - 1;

/// The hot tier's slot table update: thread `i` sets `slots[ids[i]] = vals[i]`, for `i` below
/// both lengths and ids below `rows` and the slot table's length. Parameters: `rows`, then the
/// slices `ids`, `vals` and `slots` (written).
pub static HOT_SLOTS: Kernel = Kernel {
    name: "berth_hot_slots",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("rows"),
        Param::slice_ptr::<u32>("ids", false, Placement::Device),
        Param::word("ids", Part::Len),
        Param::slice_ptr::<u32>("vals", false, Placement::Device),
        Param::word("vals", Part::Len),
        Param::slice_ptr::<u32>("slots", true, Placement::Device),
        Param::word("slots", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_slots_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// Thread `i` below the length of `dst` writes `value` (its low 32 bits) to `dst[i]`.
/// Parameters: `value`, then the slice `dst` (written).
pub static FILL_U32: Kernel = Kernel {
    name: "berth_fill_u32",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("value"),
        Param::slice_ptr::<u32>("dst", true, Placement::Device),
        Param::word("dst", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: fill_u32_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// The hot tier's fill: thread `g` copies unit `g % units` of host row `ids[g / units]` into
/// device slot `dst[g / units]` of `tier`. Threads whose id is not below `rows`, or whose slot
/// is not below `capacity`, write nothing. Parameters: `units`, `rows`, `capacity`, then the
/// slices `table` (mapped), `ids`, `dst` and `tier` (device, written).
pub static HOT_FILL: Kernel = Kernel {
    name: "berth_hot_fill",
    crate_name: "berth_runtime",
    crate_files: Some(&RUNTIME_FILES),
    params: &[
        Param::scalar::<u64>("units"),
        Param::scalar::<u64>("rows"),
        Param::scalar::<u64>("capacity"),
        Param::slice_ptr::<u8>("table", false, Placement::Mapped),
        Param::word("table", Part::Len),
        Param::slice_ptr::<u32>("ids", false, Placement::Device),
        Param::word("ids", Part::Len),
        Param::slice_ptr::<u32>("dst", false, Placement::Device),
        Param::word("dst", Part::Len),
        Param::slice_ptr::<u8>("tier", true, Placement::Device),
        Param::word("tier", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_fill_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// The word whose reading makes [`RANDOM_PROBE`] write its sink.
const PROBE_MAGIC: u32 = 0x7fc0_dead;

/// The runtime's own kernels' files: their PTX, JIT-compiled on first use.
static RUNTIME_FILES: crate::launch::CrateFiles = crate::launch::CrateFiles {
    ptx: RUNTIME_PTX,
    sass: None,
};

const RUNTIME_PTX: &str = "\
.version 6.0
.target sm_70
.address_size 64

.visible .entry berth_chunk_done(
\t.param .u64 berth_chunk_done_param_0
)
{
\t.reg .b32 \t%r<2>;
\t.reg .b64 \t%rd<3>;

\tld.param.u64 \t%rd1, [berth_chunk_done_param_0];
\tcvta.to.global.u64 \t%rd2, %rd1;
\tmov.u32 \t%r1, 1;
\tst.release.sys.global.u32 \t[%rd2], %r1;
\tret;
}

.visible .entry berth_random_probe(
\t.param .u64 berth_random_probe_param_0,
\t.param .u64 berth_random_probe_param_1,
\t.param .u64 berth_random_probe_param_2,
\t.param .u64 berth_random_probe_param_3
)
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<5>;
\t.reg .b64 \t%rd<13>;

\tld.param.u64 \t%rd1, [berth_random_probe_param_0];
\tld.param.u64 \t%rd2, [berth_random_probe_param_1];
\tld.param.u64 \t%rd3, [berth_random_probe_param_2];
\tld.param.u64 \t%rd4, [berth_random_probe_param_3];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd5, %r1, %r2;
\tcvt.u64.u32 \t%rd6, %r3;
\tadd.s64 \t%rd5, %rd5, %rd6;
\tsetp.ge.u64 \t%p1, %rd5, %rd3;
\t@%p1 bra \t$L__done;
\tadd.s64 \t%rd7, %rd5, 1;
\tmul.lo.s64 \t%rd7, %rd7, -7046029254386353131;
\tshr.u64 \t%rd8, %rd7, 30;
\txor.b64 \t%rd7, %rd7, %rd8;
\tmul.lo.s64 \t%rd7, %rd7, -4658895280553007687;
\tshr.u64 \t%rd8, %rd7, 27;
\txor.b64 \t%rd7, %rd7, %rd8;
\tmul.lo.s64 \t%rd7, %rd7, -7723592293110705685;
\tshr.u64 \t%rd8, %rd7, 31;
\txor.b64 \t%rd7, %rd7, %rd8;
\tmul.hi.u64 \t%rd9, %rd7, %rd2;
\tshl.b64 \t%rd10, %rd9, 2;
\tcvta.to.global.u64 \t%rd11, %rd1;
\tadd.s64 \t%rd11, %rd11, %rd10;
\tld.global.u32 \t%r4, [%rd11];
\tsetp.ne.u32 \t%p2, %r4, 2143346349;
\t@%p2 bra \t$L__done;
\tcvta.to.global.u64 \t%rd12, %rd4;
\tst.global.u32 \t[%rd12], %r4;
$L__done:
\tret;
}

.visible .entry berth_hot_gather(
\t.param .u64 berth_hot_gather_param_0,
\t.param .u64 berth_hot_gather_param_1,
\t.param .u64 berth_hot_gather_param_2,
\t.param .u64 berth_hot_gather_param_3,
\t.param .u64 berth_hot_gather_param_4,
\t.param .u64 berth_hot_gather_param_5,
\t.param .u64 berth_hot_gather_param_6,
\t.param .u64 berth_hot_gather_param_7,
\t.param .u64 berth_hot_gather_param_8,
\t.param .u64 berth_hot_gather_param_9,
\t.param .u64 berth_hot_gather_param_10,
\t.param .u64 berth_hot_gather_param_11,
\t.param .u64 berth_hot_gather_param_12,
\t.param .u64 berth_hot_gather_param_13,
\t.param .u64 berth_hot_gather_param_14,
\t.param .u64 berth_hot_gather_param_15,
\t.param .u64 berth_hot_gather_param_16,
\t.param .u64 berth_hot_gather_param_17,
\t.param .u64 berth_hot_gather_param_18,
\t.param .u64 berth_hot_gather_param_19,
\t.param .u64 berth_hot_gather_param_20,
\t.param .u64 berth_hot_gather_param_21,
\t.param .u64 berth_hot_gather_param_22,
\t.param .u64 berth_hot_gather_param_23,
\t.param .u64 berth_hot_gather_param_24,
\t.param .u64 berth_hot_gather_param_25
)
{
\t.reg .pred \t%p<19>;
\t.reg .b32 \t%r<13>;
\t.reg .b64 \t%rd<52>;

\tld.param.u64 \t%rd1, [berth_hot_gather_param_0];
\tld.param.u64 \t%rd2, [berth_hot_gather_param_1];
\tld.param.u64 \t%rd3, [berth_hot_gather_param_2];
\tld.param.u64 \t%rd4, [berth_hot_gather_param_3];
\tld.param.u64 \t%rd5, [berth_hot_gather_param_4];
\tld.param.u64 \t%rd6, [berth_hot_gather_param_6];
\tld.param.u64 \t%rd7, [berth_hot_gather_param_8];
\tld.param.u64 \t%rd8, [berth_hot_gather_param_9];
\tld.param.u64 \t%rd9, [berth_hot_gather_param_10];
\tld.param.u64 \t%rd10, [berth_hot_gather_param_11];
\tld.param.u64 \t%rd11, [berth_hot_gather_param_12];
\tld.param.u64 \t%rd12, [berth_hot_gather_param_14];
\tld.param.u64 \t%rd13, [berth_hot_gather_param_15];
\tld.param.u64 \t%rd14, [berth_hot_gather_param_16];
\tld.param.u64 \t%rd15, [berth_hot_gather_param_17];
\tld.param.u64 \t%rd32, [berth_hot_gather_param_18];
\tld.param.u64 \t%rd33, [berth_hot_gather_param_19];
\tld.param.u64 \t%rd36, [berth_hot_gather_param_20];
\tld.param.u64 \t%rd37, [berth_hot_gather_param_21];
\tld.param.u64 \t%rd41, [berth_hot_gather_param_22];
\tld.param.u64 \t%rd42, [berth_hot_gather_param_23];
\tld.param.u64 \t%rd48, [berth_hot_gather_param_24];
\tld.param.u64 \t%rd49, [berth_hot_gather_param_25];
\tmov.u32 \t%r11, 0;
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd16, %r1, %r2;
\tcvt.u64.u32 \t%rd17, %r3;
\tadd.s64 \t%rd16, %rd16, %rd17;
\tsetp.eq.u64 \t%p1, %rd1, 0;
\t@%p1 bra \t$L__hot_gather_done;
\tdiv.u64 \t%rd17, %rd16, %rd1;
\tsetp.ge.u64 \t%p2, %rd17, %rd10;
\t@%p2 bra \t$L__hot_gather_done;
\tmov.u32 \t%r10, 0xFFFFFFFF;
\tmul.lo.s64 \t%rd18, %rd17, %rd1;
\tsub.s64 \t%rd18, %rd16, %rd18;
\tcvta.to.global.u64 \t%rd19, %rd9;
\tshl.b64 \t%rd20, %rd17, 2;
\tadd.s64 \t%rd19, %rd19, %rd20;
\tld.global.u32 \t%r4, [%rd19];
\tcvt.u64.u32 \t%rd20, %r4;
\tsetp.ge.u64 \t%p3, %rd20, %rd2;
\t@%p3 bra \t$L__hot_gather_claimed;
\tmov.u64 \t%rd21, %rd20;
\tmov.u64 \t%rd22, %rd5;
\tsetp.eq.u64 \t%p4, %rd8, 0;
\t@%p4 bra \t$L__hot_gather_read;
\tcvta.to.global.u64 \t%rd23, %rd7;
\tshl.b64 \t%rd24, %rd20, 2;
\tadd.s64 \t%rd23, %rd23, %rd24;
\tld.relaxed.gpu.global.u32 \t%r5, [%rd23];
\tcvt.u64.u32 \t%rd24, %r5;
\tsetp.lt.u64 \t%p5, %rd24, %rd3;
\t@!%p5 bra \t$L__hot_gather_miss;
\tmov.u64 \t%rd21, %rd24;
\tmov.u64 \t%rd22, %rd6;
\tmov.u32 \t%r11, 1;
\tbra.uni \t$L__hot_gather_read;
$L__hot_gather_miss:
\tsetp.ne.u64 \t%p6, %rd18, 0;
\tsetp.eq.u64 \t%p7, %rd4, 0;
\tor.pred \t%p6, %p6, %p7;
\tsetp.eq.u64 \t%p7, %rd13, 0;
\tor.pred \t%p6, %p6, %p7;
\tsetp.ne.u32 \t%p7, %r5, 0xFFFFFFFF;
\tor.pred \t%p6, %p6, %p7;
\t@%p6 bra \t$L__hot_gather_read;
\tcvta.to.global.u64 \t%rd25, %rd12;
\tmin.u64 \t%rd27, %rd4, %rd15;
\tld.relaxed.gpu.global.u64 \t%rd26, [%rd25];
\tsetp.ge.u64 \t%p10, %rd26, %rd27;
\t@%p10 bra \t$L__hot_gather_read;
\tshr.u64 \t%rd34, %rd20, 5;
\tsetp.ge.u64 \t%p11, %rd34, %rd33;
\t@%p11 bra \t$L__hot_gather_claim;
\tcvta.to.global.u64 \t%rd35, %rd32;
\tshl.b64 \t%rd34, %rd34, 2;
\tadd.s64 \t%rd35, %rd35, %rd34;
\tand.b32 \t%r8, %r4, 31;
\tmov.u32 \t%r9, 1;
\tshl.b32 \t%r9, %r9, %r8;
\tatom.relaxed.gpu.global.or.b32 \t%r8, [%rd35], %r9;
\tand.b32 \t%r8, %r8, %r9;
\tsetp.eq.u32 \t%p11, %r8, 0;
\t@%p11 bra \t$L__hot_gather_read;
$L__hot_gather_claim:
\tatom.relaxed.gpu.global.cas.b32 \t%r6, [%rd23], 0xFFFFFFFF, 0xFFFFFFFE;
\tsetp.ne.u32 \t%p8, %r6, 0xFFFFFFFF;
\t@%p8 bra \t$L__hot_gather_read;
\tatom.relaxed.gpu.global.add.u64 \t%rd26, [%rd25], 1;
\tsetp.lt.u64 \t%p9, %rd26, %rd27;
\t@%p9 bra \t$L__hot_gather_log;
\tatom.relaxed.gpu.global.exch.b32 \t%r7, [%rd23], 0xFFFFFFFF;
\tbra.uni \t$L__hot_gather_read;
$L__hot_gather_log:
\tcvta.to.global.u64 \t%rd28, %rd14;
\tshl.b64 \t%rd29, %rd26, 2;
\tadd.s64 \t%rd28, %rd28, %rd29;
\tst.global.u32 \t[%rd28], %r4;
\tcvt.u32.u64 \t%r10, %rd26;
$L__hot_gather_read:
\tsetp.ne.u32 \t%p14, %r11, 0;
\t@%p14 bra \t$L__hot_gather_copy;
\tsetp.ne.u64 \t%p17, %rd18, 0;
\t@%p17 bra \t$L__hot_gather_counted;
\tand.b64 \t%rd50, %rd17, 31;
\tshl.b64 \t%rd50, %rd50, 4;
\tsetp.ge.u64 \t%p18, %rd50, %rd49;
\t@%p18 bra \t$L__hot_gather_counted;
\tcvta.to.global.u64 \t%rd51, %rd48;
\tshl.b64 \t%rd50, %rd50, 3;
\tadd.s64 \t%rd51, %rd51, %rd50;
\tred.relaxed.gpu.global.add.u64 \t[%rd51], 1;
$L__hot_gather_counted:
\tsetp.ge.u64 \t%p15, %rd17, %rd42;
\t@%p15 bra \t$L__hot_gather_copy;
\tcvta.to.global.u64 \t%rd44, %rd41;
\tshl.b64 \t%rd45, %rd17, 2;
\tadd.s64 \t%rd44, %rd44, %rd45;
\tld.global.u32 \t%r12, [%rd44];
\tsetp.eq.u32 \t%p16, %r12, 0xFFFFFFFE;
\t@%p16 bra \t$L__hot_gather_claimed;
$L__hot_gather_copy:
\tmul.lo.s64 \t%rd30, %rd21, %rd1;
\tadd.s64 \t%rd30, %rd30, %rd18;
\tshl.b64 \t%rd30, %rd30, 4;
\tcvta.to.global.u64 \t%rd31, %rd22;
\tadd.s64 \t%rd31, %rd31, %rd30;
\tld.global.v4.u32 \t{%r6, %r7, %r8, %r9}, [%rd31];
\tcvta.to.global.u64 \t%rd25, %rd11;
\tshl.b64 \t%rd26, %rd16, 4;
\tadd.s64 \t%rd25, %rd25, %rd26;
\tst.global.v4.u32 \t[%rd25], {%r6, %r7, %r8, %r9};
$L__hot_gather_claimed:
\tsetp.ne.u64 \t%p12, %rd18, 0;
\tsetp.ge.u64 \t%p13, %rd17, %rd37;
\tor.pred \t%p12, %p12, %p13;
\t@%p12 bra \t$L__hot_gather_done;
\tcvta.to.global.u64 \t%rd38, %rd36;
\tshl.b64 \t%rd39, %rd17, 2;
\tadd.s64 \t%rd38, %rd38, %rd39;
\tst.global.u32 \t[%rd38], %r10;
$L__hot_gather_done:
\tret;
}

.visible .entry berth_hot_scatter(
\t.param .u64 berth_hot_scatter_param_0,
\t.param .u64 berth_hot_scatter_param_1,
\t.param .u64 berth_hot_scatter_param_2,
\t.param .u64 berth_hot_scatter_param_3,
\t.param .u64 berth_hot_scatter_param_4,
\t.param .u64 berth_hot_scatter_param_5,
\t.param .u64 berth_hot_scatter_param_6,
\t.param .u64 berth_hot_scatter_param_7,
\t.param .u64 berth_hot_scatter_param_8
)
{
\t.reg .pred \t%p<4>;
\t.reg .b32 \t%r<9>;
\t.reg .b64 \t%rd<20>;

\tld.param.u64 \t%rd1, [berth_hot_scatter_param_0];
\tld.param.u64 \t%rd2, [berth_hot_scatter_param_1];
\tld.param.u64 \t%rd3, [berth_hot_scatter_param_2];
\tld.param.u64 \t%rd4, [berth_hot_scatter_param_3];
\tld.param.u64 \t%rd5, [berth_hot_scatter_param_4];
\tld.param.u64 \t%rd6, [berth_hot_scatter_param_5];
\tld.param.u64 \t%rd7, [berth_hot_scatter_param_7];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd8, %r1, %r2;
\tcvt.u64.u32 \t%rd9, %r3;
\tadd.s64 \t%rd8, %rd8, %rd9;
\tsetp.eq.u64 \t%p1, %rd1, 0;
\t@%p1 bra \t$L__hot_scatter_done;
\tdiv.u64 \t%rd9, %rd8, %rd1;
\tmin.u64 \t%rd10, %rd5, %rd3;
\tsetp.ge.u64 \t%p2, %rd9, %rd10;
\t@%p2 bra \t$L__hot_scatter_done;
\tmul.lo.s64 \t%rd11, %rd9, %rd1;
\tsub.s64 \t%rd11, %rd8, %rd11;
\tcvta.to.global.u64 \t%rd12, %rd4;
\tshl.b64 \t%rd13, %rd9, 2;
\tadd.s64 \t%rd12, %rd12, %rd13;
\tld.global.u32 \t%r4, [%rd12];
\tcvt.u64.u32 \t%rd14, %r4;
\tsetp.ge.u64 \t%p3, %rd14, %rd2;
\t@%p3 bra \t$L__hot_scatter_done;
\tcvta.to.global.u64 \t%rd15, %rd6;
\tshl.b64 \t%rd16, %rd8, 4;
\tadd.s64 \t%rd15, %rd15, %rd16;
\tld.global.v4.u32 \t{%r5, %r6, %r7, %r8}, [%rd15];
\tmul.lo.s64 \t%rd17, %rd14, %rd1;
\tadd.s64 \t%rd17, %rd17, %rd11;
\tshl.b64 \t%rd17, %rd17, 4;
\tcvta.to.global.u64 \t%rd18, %rd7;
\tadd.s64 \t%rd18, %rd18, %rd17;
\tst.global.v4.u32 \t[%rd18], {%r5, %r6, %r7, %r8};
$L__hot_scatter_done:
\tret;
}

.visible .entry berth_hot_capture(
\t.param .u64 berth_hot_capture_param_0,
\t.param .u64 berth_hot_capture_param_1,
\t.param .u64 berth_hot_capture_param_2,
\t.param .u64 berth_hot_capture_param_3,
\t.param .u64 berth_hot_capture_param_4,
\t.param .u64 berth_hot_capture_param_5,
\t.param .u64 berth_hot_capture_param_6,
\t.param .u64 berth_hot_capture_param_7,
\t.param .u64 berth_hot_capture_param_8,
\t.param .u64 berth_hot_capture_param_9,
\t.param .u64 berth_hot_capture_param_10,
\t.param .u64 berth_hot_capture_param_11,
\t.param .u64 berth_hot_capture_param_12,
\t.param .u64 berth_hot_capture_param_13,
\t.param .u64 berth_hot_capture_param_14,
\t.param .u64 berth_hot_capture_param_15,
\t.param .u64 berth_hot_capture_param_16,
\t.param .u64 berth_hot_capture_param_17,
\t.param .u64 berth_hot_capture_param_18,
\t.param .u64 berth_hot_capture_param_19
)
{
\t.reg .pred \t%p<14>;
\t.reg .b32 \t%r<16>;
\t.reg .b64 \t%rd<52>;

\tld.param.u64 \t%rd1, [berth_hot_capture_param_0];
\tld.param.u64 \t%rd2, [berth_hot_capture_param_1];
\tld.param.u64 \t%rd3, [berth_hot_capture_param_2];
\tld.param.u64 \t%rd4, [berth_hot_capture_param_3];
\tld.param.u64 \t%rd5, [berth_hot_capture_param_4];
\tld.param.u64 \t%rd6, [berth_hot_capture_param_5];
\tld.param.u64 \t%rd7, [berth_hot_capture_param_6];
\tld.param.u64 \t%rd8, [berth_hot_capture_param_7];
\tld.param.u64 \t%rd9, [berth_hot_capture_param_8];
\tld.param.u64 \t%rd10, [berth_hot_capture_param_9];
\tld.param.u64 \t%rd11, [berth_hot_capture_param_10];
\tld.param.u64 \t%rd12, [berth_hot_capture_param_11];
\tld.param.u64 \t%rd46, [berth_hot_capture_param_12];
\tld.param.u64 \t%rd47, [berth_hot_capture_param_13];
\tld.param.u64 \t%rd13, [berth_hot_capture_param_14];
\tld.param.u64 \t%rd14, [berth_hot_capture_param_15];
\tld.param.u64 \t%rd15, [berth_hot_capture_param_16];
\tld.param.u64 \t%rd16, [berth_hot_capture_param_17];
\tld.param.u64 \t%rd38, [berth_hot_capture_param_18];
\tld.param.u64 \t%rd39, [berth_hot_capture_param_19];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd17, %r1, %r2;
\tcvt.u64.u32 \t%rd18, %r3;
\tadd.s64 \t%rd17, %rd17, %rd18;
\tsetp.eq.u64 \t%p1, %rd1, 0;
\t@%p1 bra \t$L__hot_capture_done;
\tsetp.eq.u64 \t%p1, %rd10, 0;
\t@%p1 bra \t$L__hot_capture_done;
\tdiv.u64 \t%rd18, %rd17, %rd1;
\tmin.u64 \t%rd19, %rd4, %rd6;
\tsetp.ge.u64 \t%p2, %rd18, %rd19;
\t@%p2 bra \t$L__hot_capture_done;
\tmul.lo.s64 \t%rd19, %rd18, %rd1;
\tsub.s64 \t%rd19, %rd17, %rd19;
\tshl.b64 \t%rd20, %rd18, 2;
\tcvta.to.global.u64 \t%rd21, %rd5;
\tadd.s64 \t%rd21, %rd21, %rd20;
\tld.global.u32 \t%r4, [%rd21];
\tcvt.u64.u32 \t%rd22, %r4;
\tmin.u64 \t%rd23, %rd12, %rd8;
\tsetp.ge.u64 \t%p3, %rd22, %rd23;
\t@%p3 bra \t$L__hot_capture_done;
\tcvta.to.global.u64 \t%rd24, %rd9;
\tld.global.u64 \t%rd25, [%rd24];
\tsetp.ge.u64 \t%p4, %rd22, %rd25;
\t@%p4 bra \t$L__hot_capture_done;
\tshl.b64 \t%rd26, %rd22, 2;
\tcvta.to.global.u64 \t%rd27, %rd7;
\tadd.s64 \t%rd27, %rd27, %rd26;
\tld.global.u32 \t%r5, [%rd27];
\tcvta.to.global.u64 \t%rd28, %rd3;
\tadd.s64 \t%rd28, %rd28, %rd20;
\tld.global.u32 \t%r6, [%rd28];
\tsetp.ne.u32 \t%p5, %r5, %r6;
\t@%p5 bra \t$L__hot_capture_done;
\tcvta.to.global.u64 \t%rd29, %rd11;
\tadd.s64 \t%rd29, %rd29, %rd26;
\tld.global.u32 \t%r7, [%rd29];
\tcvt.u64.u32 \t%rd30, %r7;
\tsetp.ge.u64 \t%p6, %rd30, %rd2;
\t@%p6 bra \t$L__hot_capture_done;
\tsetp.ne.u64 \t%p7, %rd19, 0;
\t@%p7 bra \t$L__hot_capture_copy;
\tsetp.ge.u64 \t%p9, %rd22, %rd47;
\t@%p9 bra \t$L__hot_capture_name;
\tcvta.to.global.u64 \t%rd48, %rd46;
\tadd.s64 \t%rd48, %rd48, %rd26;
\tld.global.u32 \t%r12, [%rd48];
\tcvt.u64.u32 \t%rd49, %r12;
\tsetp.ge.u64 \t%p10, %rd49, %rd39;
\t@%p10 bra \t$L__hot_capture_name;
\tshl.b64 \t%rd50, %rd49, 2;
\tcvta.to.global.u64 \t%rd51, %rd38;
\tadd.s64 \t%rd51, %rd51, %rd50;
\tatom.global.cas.b32 \t%r13, [%rd51], %r7, -1;
$L__hot_capture_name:
\tcvt.u64.u32 \t%rd40, %r6;
\tsetp.ge.u64 \t%p8, %rd40, %rd39;
\t@%p8 bra \t$L__hot_capture_copy;
\tshl.b64 \t%rd41, %rd40, 2;
\tcvta.to.global.u64 \t%rd42, %rd38;
\tadd.s64 \t%rd42, %rd42, %rd41;
\tst.global.u32 \t[%rd42], %r7;
$L__hot_capture_copy:
\tmul.lo.s64 \t%rd32, %rd30, %rd1;
\tadd.s64 \t%rd32, %rd32, %rd19;
\tshl.b64 \t%rd34, %rd17, 4;
\tcvta.to.global.u64 \t%rd35, %rd13;
\tadd.s64 \t%rd35, %rd35, %rd34;
\tld.global.v4.u32 \t{%r8, %r9, %r10, %r11}, [%rd35];
\tshl.b64 \t%rd36, %rd32, 4;
\tcvta.to.global.u64 \t%rd37, %rd15;
\tadd.s64 \t%rd37, %rd37, %rd36;
\tst.global.v4.u32 \t[%rd37], {%r8, %r9, %r10, %r11};
$L__hot_capture_done:
\tret;
}

.visible .entry berth_hot_slots(
\t.param .u64 berth_hot_slots_param_0,
\t.param .u64 berth_hot_slots_param_1,
\t.param .u64 berth_hot_slots_param_2,
\t.param .u64 berth_hot_slots_param_3,
\t.param .u64 berth_hot_slots_param_4,
\t.param .u64 berth_hot_slots_param_5,
\t.param .u64 berth_hot_slots_param_6
)
{
\t.reg .pred \t%p<4>;
\t.reg .b32 \t%r<6>;
\t.reg .b64 \t%rd<16>;

\tld.param.u64 \t%rd1, [berth_hot_slots_param_0];
\tld.param.u64 \t%rd2, [berth_hot_slots_param_1];
\tld.param.u64 \t%rd3, [berth_hot_slots_param_2];
\tld.param.u64 \t%rd4, [berth_hot_slots_param_3];
\tld.param.u64 \t%rd5, [berth_hot_slots_param_4];
\tld.param.u64 \t%rd6, [berth_hot_slots_param_5];
\tld.param.u64 \t%rd7, [berth_hot_slots_param_6];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd8, %r1, %r2;
\tcvt.u64.u32 \t%rd9, %r3;
\tadd.s64 \t%rd8, %rd8, %rd9;
\tmin.u64 \t%rd9, %rd3, %rd5;
\tsetp.ge.u64 \t%p1, %rd8, %rd9;
\t@%p1 bra \t$L__hot_slots_done;
\tshl.b64 \t%rd10, %rd8, 2;
\tcvta.to.global.u64 \t%rd11, %rd2;
\tadd.s64 \t%rd11, %rd11, %rd10;
\tld.global.u32 \t%r4, [%rd11];
\tcvta.to.global.u64 \t%rd12, %rd4;
\tadd.s64 \t%rd12, %rd12, %rd10;
\tld.global.u32 \t%r5, [%rd12];
\tcvt.u64.u32 \t%rd13, %r4;
\tmin.u64 \t%rd14, %rd1, %rd7;
\tsetp.ge.u64 \t%p2, %rd13, %rd14;
\t@%p2 bra \t$L__hot_slots_done;
\tshl.b64 \t%rd13, %rd13, 2;
\tcvta.to.global.u64 \t%rd15, %rd6;
\tadd.s64 \t%rd15, %rd15, %rd13;
\tst.global.u32 \t[%rd15], %r5;
$L__hot_slots_done:
\tret;
}

.visible .entry berth_fill_u32(
\t.param .u64 berth_fill_u32_param_0,
\t.param .u64 berth_fill_u32_param_1,
\t.param .u64 berth_fill_u32_param_2
)
{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<5>;
\t.reg .b64 \t%rd<8>;

\tld.param.u64 \t%rd1, [berth_fill_u32_param_0];
\tld.param.u64 \t%rd2, [berth_fill_u32_param_1];
\tld.param.u64 \t%rd3, [berth_fill_u32_param_2];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd4, %r1, %r2;
\tcvt.u64.u32 \t%rd5, %r3;
\tadd.s64 \t%rd4, %rd4, %rd5;
\tsetp.ge.u64 \t%p1, %rd4, %rd3;
\t@%p1 bra \t$L__fill_u32_done;
\tcvt.u32.u64 \t%r4, %rd1;
\tshl.b64 \t%rd6, %rd4, 2;
\tcvta.to.global.u64 \t%rd7, %rd2;
\tadd.s64 \t%rd7, %rd7, %rd6;
\tst.global.u32 \t[%rd7], %r4;
$L__fill_u32_done:
\tret;
}

.visible .entry berth_hot_fill(
\t.param .u64 berth_hot_fill_param_0,
\t.param .u64 berth_hot_fill_param_1,
\t.param .u64 berth_hot_fill_param_2,
\t.param .u64 berth_hot_fill_param_3,
\t.param .u64 berth_hot_fill_param_4,
\t.param .u64 berth_hot_fill_param_5,
\t.param .u64 berth_hot_fill_param_6,
\t.param .u64 berth_hot_fill_param_7,
\t.param .u64 berth_hot_fill_param_8,
\t.param .u64 berth_hot_fill_param_9,
\t.param .u64 berth_hot_fill_param_10
)
{
\t.reg .pred \t%p<6>;
\t.reg .b32 \t%r<10>;
\t.reg .b64 \t%rd<24>;

\tld.param.u64 \t%rd1, [berth_hot_fill_param_0];
\tld.param.u64 \t%rd2, [berth_hot_fill_param_1];
\tld.param.u64 \t%rd3, [berth_hot_fill_param_2];
\tld.param.u64 \t%rd4, [berth_hot_fill_param_3];
\tld.param.u64 \t%rd5, [berth_hot_fill_param_5];
\tld.param.u64 \t%rd6, [berth_hot_fill_param_6];
\tld.param.u64 \t%rd7, [berth_hot_fill_param_7];
\tld.param.u64 \t%rd8, [berth_hot_fill_param_8];
\tld.param.u64 \t%rd9, [berth_hot_fill_param_9];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd11, %r1, %r2;
\tcvt.u64.u32 \t%rd12, %r3;
\tadd.s64 \t%rd11, %rd11, %rd12;
\tsetp.eq.u64 \t%p1, %rd1, 0;
\t@%p1 bra \t$L__hot_fill_done;
\tdiv.u64 \t%rd12, %rd11, %rd1;
\tsetp.ge.u64 \t%p2, %rd12, %rd6;
\t@%p2 bra \t$L__hot_fill_done;
\tsetp.ge.u64 \t%p2, %rd12, %rd8;
\t@%p2 bra \t$L__hot_fill_done;
\tmul.lo.s64 \t%rd13, %rd12, %rd1;
\tsub.s64 \t%rd13, %rd11, %rd13;
\tshl.b64 \t%rd15, %rd12, 2;
\tcvta.to.global.u64 \t%rd14, %rd5;
\tadd.s64 \t%rd14, %rd14, %rd15;
\tld.global.u32 \t%r4, [%rd14];
\tcvta.to.global.u64 \t%rd16, %rd7;
\tadd.s64 \t%rd16, %rd16, %rd15;
\tld.global.u32 \t%r5, [%rd16];
\tcvt.u64.u32 \t%rd17, %r4;
\tsetp.ge.u64 \t%p3, %rd17, %rd2;
\t@%p3 bra \t$L__hot_fill_done;
\tcvt.u64.u32 \t%rd18, %r5;
\tsetp.ge.u64 \t%p4, %rd18, %rd3;
\t@%p4 bra \t$L__hot_fill_done;
\tmul.lo.s64 \t%rd19, %rd17, %rd1;
\tadd.s64 \t%rd19, %rd19, %rd13;
\tshl.b64 \t%rd19, %rd19, 4;
\tcvta.to.global.u64 \t%rd20, %rd4;
\tadd.s64 \t%rd20, %rd20, %rd19;
\tld.global.v4.u32 \t{%r6, %r7, %r8, %r9}, [%rd20];
\tmul.lo.s64 \t%rd21, %rd18, %rd1;
\tadd.s64 \t%rd21, %rd21, %rd13;
\tshl.b64 \t%rd21, %rd21, 4;
\tcvta.to.global.u64 \t%rd22, %rd9;
\tadd.s64 \t%rd22, %rd22, %rd21;
\tst.global.v4.u32 \t[%rd22], {%r6, %r7, %r8, %r9};
$L__hot_fill_done:
\tret;
}
";

/// [`CHUNK_DONE`] on the simulator (whose pipelines set flags from their streams directly).
///
/// # Safety
/// `p[0]` points at the flag's address, a live, 4-aligned `u32`.
unsafe fn chunk_done_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract.
    unsafe { AtomicU32::from_ptr(*(p[0] as *const *mut u32)) }.store(1, Ordering::Release);
}

/// The word [`RANDOM_PROBE`]'s thread `i` reads in a table of `words` words (also the rows
/// a hot tier's row probe reads).
pub(crate) fn probe_word(i: u64, words: u64) -> u64 {
    let mut z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((u128::from(z) * u128::from(words)) >> 64) as u64
}

/// [`RANDOM_PROBE`] on the simulator: one simulated thread's read. (The simulator's `#[auto]`
/// decisions do not probe — it has no link to measure — but the descriptor stays launchable.)
///
/// # Safety
/// `p` points at the four parameter values: a table of `words` live `u32`s, the counts, and
/// a live `u32` sink.
unsafe fn random_probe_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let [table, words, reads, sink] = [0, 1, 2, 3].map(|i| unsafe { *(p[i] as *const u64) });
    let i = berth_device::thread::global_x() as u64;
    if i >= reads {
        return;
    }
    let at = (table as *const u32).wrapping_add(probe_word(i, words) as usize);
    // SAFETY: `probe_word(i, words) < words`, inside the live table (caller's contract).
    let v = unsafe { at.read_volatile() };
    if v == PROBE_MAGIC {
        // SAFETY: the sink is a live u32 (caller's contract).
        unsafe { (sink as *mut u32).write_volatile(v) };
    }
}

/// The unit of [`HOT_GATHER`] and [`HOT_FILL`]: 16 bytes, one `ld.global.v4.u32`.
pub(crate) const HOT_UNIT: usize = 16;

/// Copy one 16-byte unit.
///
/// # Safety
/// `src` and `dst` are 16 live, non-overlapping bytes each.
unsafe fn copy_unit(src: u64, dst: u64) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, HOT_UNIT) };
}

/// [`HOT_GATHER`] on the simulator: one simulated thread's unit, as the PTX does it (the slot
/// table and the log counter through atomics, as there).
///
/// # Safety
/// `p` points at the 26 parameter values; `table` holds `rows × units` units and `tier`
/// `capacity × units`, `slots` `slots_len` 4-aligned words (0, or `rows`), `ids` `ids_len`
/// words, `out` `ids_len × units` units, `log_n` `log_n_len` 8-aligned words and `log`
/// `log_len` words, `seen` `seen_len` 4-aligned words, `claim` `claim_len` words,
/// `staged` `staged_len` words and `misses` `misses_len` 8-aligned words; `out` and `claim`
/// overlap none of the others.
unsafe fn hot_gather_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let v: [u64; 26] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let [
        units,
        rows,
        capacity,
        log_limit,
        table,
        _,
        tier,
        _,
        slots,
        slots_len,
        ids,
        ids_len,
        out,
        _,
        log_n,
        log_n_len,
        log,
        log_len,
        seen,
        seen_len,
        claim,
        claim_len,
        staged,
        staged_len,
        misses,
        misses_len,
    ] = v;
    let g = berth_device::thread::global_x() as u64;
    if units == 0 || g / units >= ids_len {
        return;
    }
    let (b, j) = (g / units, g % units);
    // SAFETY: `b < ids_len` (checked above).
    let id = u64::from(unsafe { *(ids as *const u32).add(b as usize) });
    let mut claimed = NOT_RESIDENT;
    let write_claim = |claimed: u32| {
        if j == 0 && b < claim_len {
            // SAFETY: `b` is below `claim`'s length.
            unsafe { (claim as *mut u32).add(b as usize).write(claimed) };
        }
    };
    if id >= rows {
        write_claim(claimed);
        return;
    }
    let (mut base, mut row) = (table, id);
    if slots_len != 0 {
        // SAFETY: `id < rows`, and a non-empty slot table has `rows` 4-aligned words.
        let entry = unsafe { AtomicU32::from_ptr((slots as *mut u32).add(id as usize)) };
        let slot = entry.load(Ordering::Relaxed);
        if u64::from(slot) < capacity {
            (base, row) = (tier, u64::from(slot));
        } else if j == 0 && log_limit != 0 && log_n_len != 0 && slot == NOT_RESIDENT {
            // SAFETY: `log_n` holds at least one 8-aligned word (checked above).
            let counter = unsafe { AtomicU64::from_ptr(log_n as *mut u64) };
            let limit = log_limit.min(log_len);
            // The doorkeeper: a row's first miss only sets its bit.
            let repeat = || {
                let word = id / 32;
                if word >= seen_len {
                    return true;
                }
                let mask = 1u32 << (id % 32);
                // SAFETY: `word` is below the doorkeeper's length, in 4-aligned words.
                let w = unsafe { AtomicU32::from_ptr((seen as *mut u32).add(word as usize)) };
                w.fetch_or(mask, Ordering::Relaxed) & mask != 0
            };
            if counter.load(Ordering::Relaxed) < limit
                && repeat()
                && entry
                    .compare_exchange(NOT_RESIDENT, PENDING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                if n < limit {
                    // SAFETY: `n` is below `log`'s length.
                    unsafe { (log as *mut u32).add(n as usize).write(id as u32) };
                    claimed = n as u32;
                } else {
                    entry.swap(NOT_RESIDENT, Ordering::Relaxed);
                }
            }
        }
    }
    let word = (b % 32) * 16;
    if base == table && j == 0 && word < misses_len {
        // SAFETY: `word` is below the counters' length, in 8-aligned words.
        unsafe { AtomicU64::from_ptr((misses as *mut u64).add(word as usize)) }
            .fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: `b` is below `staged`'s length where it is read.
    if base == table
        && b < staged_len
        && unsafe { *(staged as *const u32).add(b as usize) } == PENDING
    {
        // The host delivers this row.
        write_claim(claimed);
        return;
    }
    let unit = HOT_UNIT as u64;
    // SAFETY: `row` is below `rows` (table) or `capacity` (tier) and `j < units`, and `g` is
    // below `ids_len × units`: each unit is inside its allocation, and they do not overlap.
    unsafe { copy_unit(base + (row * units + j) * unit, out + g * unit) };
    write_claim(claimed);
}

/// [`HOT_SCATTER`] on the simulator: one simulated thread's unit, as the PTX does it.
///
/// # Safety
/// `p` points at the 9 parameter values; `pos` holds `pos_len` words, `stage` at least
/// `min(pos_len, stage_rows) × units` units and `out` `out_rows × units` units, overlapping
/// neither.
unsafe fn hot_scatter_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let v: [u64; 9] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let [units, out_rows, stage_rows, pos, pos_len, stage, _, out, _] = v;
    let g = berth_device::thread::global_x() as u64;
    if units == 0 || g / units >= pos_len.min(stage_rows) {
        return;
    }
    let (k, j) = (g / units, g % units);
    // SAFETY: `k` is below `pos`'s length.
    let b = u64::from(unsafe { *(pos as *const u32).add(k as usize) });
    if b >= out_rows {
        return;
    }
    let unit = HOT_UNIT as u64;
    // SAFETY: unit `g` of `stage` is below `min(pos_len, stage_rows) × units`, and unit
    // `b × units + j` of `out` below `out_rows × units`; they do not overlap.
    unsafe { copy_unit(stage + g * unit, out + (b * units + j) * unit) };
}

/// [`HOT_CAPTURE`] on the simulator: one simulated thread's unit, as the PTX does it.
///
/// # Safety
/// `p` points at the 18 parameter values; each of `ids`, `claim`, `log`, `log_n`, `grant` and
/// `slots` holds its length in words, `out` holds `ids_len × units` units and `tier`
/// `capacity × units`, and neither `tier` nor `slots` overlaps any other.
unsafe fn hot_capture_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let v: [u64; 20] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let [
        units,
        capacity,
        ids,
        ids_len,
        claim,
        claim_len,
        log,
        log_len,
        log_n,
        log_n_len,
        grant,
        grant_len,
        evict,
        evict_len,
        out,
        _,
        tier,
        _,
        slots,
        slots_len,
    ] = v;
    #[cfg(test)]
    capture_gate::pass(tier);
    let g = berth_device::thread::global_x() as u64;
    if units == 0 || log_n_len == 0 {
        return;
    }
    let (b, j) = (g / units, g % units);
    if b >= ids_len.min(claim_len) {
        return;
    }
    // SAFETY: `b` is below `claim`'s length.
    let n = u64::from(unsafe { *(claim as *const u32).add(b as usize) });
    // SAFETY: `log_n` holds at least one word.
    if n >= grant_len.min(log_len) || n >= unsafe { *(log_n as *const u64) } {
        return;
    }
    // SAFETY: `n` is below `log`'s and `grant`'s lengths, `b` below `ids`'.
    let (logged, id, slot) = unsafe {
        (
            *(log as *const u32).add(n as usize),
            *(ids as *const u32).add(b as usize),
            u64::from(*(grant as *const u32).add(n as usize)),
        )
    };
    if logged != id || slot >= capacity {
        return;
    }
    if j == 0 && n < evict_len {
        // SAFETY: `n` is below `evict`'s length.
        let victim = u64::from(unsafe { *(evict as *const u32).add(n as usize) });
        if victim < slots_len {
            // SAFETY: `victim` is below `slots`' length; this kernel's threads access the slot
            // table only atomically.
            let entry = unsafe { AtomicU32::from_ptr((slots as *mut u32).add(victim as usize)) };
            let _ = entry.compare_exchange(
                slot as u32,
                NOT_RESIDENT,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }
    if j == 0 && u64::from(id) < slots_len {
        // SAFETY: `id` is below `slots`' length; `slots` overlaps no other parameter, and this
        // kernel's threads access it only atomically.
        unsafe { AtomicU32::from_ptr((slots as *mut u32).add(id as usize)) }
            .store(slot as u32, Ordering::Relaxed);
    }
    let unit = HOT_UNIT as u64;
    // SAFETY: `b < ids_len` and `j < units`: unit `g` is inside `out`; `slot < capacity`: unit
    // `slot × units + j` is inside `tier`; the two do not overlap.
    unsafe { copy_unit(out + g * unit, tier + (slot * units + j) * unit) };
}

/// [`HOT_SLOTS`] on the simulator: one simulated thread's entry.
///
/// # Safety
/// `p` points at the 7 parameter values; `ids`, `vals` and `slots` hold their lengths in
/// words, `slots` distinct from the others.
unsafe fn hot_slots_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let [rows, ids, ids_len, vals, vals_len, slots, slots_len]: [u64; 7] =
        std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let i = berth_device::thread::global_x() as u64;
    if i >= ids_len.min(vals_len) {
        return;
    }
    // SAFETY: `i` is below both lengths.
    let (id, val) = unsafe {
        (
            u64::from(*(ids as *const u32).add(i as usize)),
            *(vals as *const u32).add(i as usize),
        )
    };
    if id < rows.min(slots_len) {
        // SAFETY: `id` is below the slot table's length.
        unsafe { (slots as *mut u32).add(id as usize).write(val) };
    }
}

/// [`FILL_U32`] on the simulator: one simulated thread's word.
///
/// # Safety
/// `p` points at the 3 parameter values; `dst` holds its length in words.
unsafe fn fill_u32_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let [value, dst, len]: [u64; 3] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let i = berth_device::thread::global_x() as u64;
    if i < len {
        // SAFETY: `i` is below `dst`'s length.
        unsafe { (dst as *mut u32).add(i as usize).write(value as u32) };
    }
}

/// [`HOT_FILL`] on the simulator: one simulated thread's unit, as the PTX does it.
///
/// # Safety
/// `p` points at the 11 parameter values; `table` holds `rows × units` units and `tier`
/// `capacity × units` (distinct allocations), `ids` and `dst` their lengths in words.
unsafe fn hot_fill_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let v: [u64; 11] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let [
        units,
        rows,
        capacity,
        table,
        _,
        ids,
        ids_len,
        dst,
        dst_len,
        tier,
        _,
    ] = v;
    let g = berth_device::thread::global_x() as u64;
    if units == 0 || g / units >= ids_len || g / units >= dst_len {
        return;
    }
    let (b, j) = (g / units, g % units);
    // SAFETY: `b` is below both lengths (checked above).
    let (id, slot) = unsafe {
        (
            u64::from(*(ids as *const u32).add(b as usize)),
            u64::from(*(dst as *const u32).add(b as usize)),
        )
    };
    if id >= rows || slot >= capacity {
        return;
    }
    let unit = HOT_UNIT as u64;
    // SAFETY: `id < rows`, `slot < capacity`, `j < units`: both units inside their
    // allocations, which are distinct (host table, device tier).
    unsafe {
        copy_unit(
            table + (id * units + j) * unit,
            tier + (slot * units + j) * unit,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_constants_are_the_rust_ones() {
        for c in [
            0x9E37_79B9_7F4A_7C15u64,
            0xBF58_476D_1CE4_E5B9,
            0x94D0_49BB_1331_11EB,
        ] {
            assert!(RUNTIME_PTX.contains(&(c as i64).to_string()), "{c:#x}");
        }
        assert!(RUNTIME_PTX.contains(&PROBE_MAGIC.to_string()));
    }

    #[test]
    fn probe_reads_stay_inside_the_table_and_spread_over_it() {
        for words in [1u64, 7, 1 << 20, (4u64 << 30) / 4, u64::MAX / 4] {
            assert!((0..10_000).all(|i| probe_word(i, words) < words));
        }
        // 64 Ki reads over 64 buckets: each gets about 1 Ki.
        let words = 1u64 << 26;
        let mut buckets = [0u32; 64];
        for i in 0..65_536 {
            buckets[(probe_word(i, words) >> 20) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (850..1200).contains(&b)),
            "{buckets:?}"
        );
    }
}

/// A gate the simulated [`HOT_CAPTURE`] of one tier waits at, for tests that need a capture
/// still running when the host goes on.
#[cfg(test)]
pub(crate) mod capture_gate {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Condvar, Mutex};

    /// The device address of the tier whose captures wait, while one is held (0: none).
    static HELD: AtomicU64 = AtomicU64::new(0);
    static OPENED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

    /// Until the guard is dropped, the simulated captures into the tier at device address
    /// `tier` wait.
    pub(crate) fn hold(tier: u64) -> Held {
        HELD.store(tier, Ordering::SeqCst);
        Held
    }

    /// The gate of [`hold`]: open once dropped.
    pub(crate) struct Held;

    impl Drop for Held {
        fn drop(&mut self) {
            let _g = OPENED.0.lock().expect("poisoned");
            HELD.store(0, Ordering::SeqCst);
            OPENED.1.notify_all();
        }
    }

    /// Wait while the captures into `tier` are held.
    pub(super) fn pass(tier: u64) {
        if HELD.load(Ordering::SeqCst) != tier {
            return;
        }
        let mut g = OPENED.0.lock().expect("poisoned");
        while HELD.load(Ordering::SeqCst) == tier {
            g = OPENED.1.wait(g).expect("poisoned");
        }
    }
}
