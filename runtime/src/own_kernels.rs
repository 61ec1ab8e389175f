//! The runtime's own kernels, hand-written PTX in one module (`berth_runtime`), JIT-compiled at
//! first use: [`CHUNK_DONE`] (a pipelined chunk's progress flag), [`RANDOM_PROBE`] (how
//! fast one mapped table answers random reads, for `#[auto]`'s close calls), and the hot
//! tier's [`HOT_GATHER`] and [`HOT_FILL`] (`hot_tier.rs`). All are checked against their
//! descriptors and by ptxas in the tests (`tests/tests/kernels.rs`).

use crate::launch::{Kernel, Param, Part, Placement};
use std::sync::atomic::{AtomicU32, Ordering};

/// A one-thread kernel that marks a chunk done: `*flag = 1` with a system-scope release
/// store, launched after a chunk's copy out on its stream with `BERTH_PIPELINE_FLAGS=kernel`
/// (not the default: after a fault no kernel runs while queued copies may, so a chunk can be
/// written and not flagged; docs/design-notes.md).
pub static CHUNK_DONE: Kernel = Kernel {
    name: "berth_chunk_done",
    crate_name: "berth_runtime",
    ptx: RUNTIME_PTX,
    sass: None,
    params: &[Param::scalar::<u64>("flag")],
    location: concat!(file!(), ":", line!()),
    sim: chunk_done_sim,
    uses_barrier: false,
    linear: None,
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
    ptx: RUNTIME_PTX,
    sass: None,
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
    same_len: &[],
    block: None,
};

/// The hot tier's gather: rows of 16-byte units, thread `g` copies unit `g % units` of row
/// `ids[g / units]` into unit `g` of `out`, from the device tier where the row's slot
/// (`slots[id]`) is below `capacity`, else from the mapped host table. Threads whose id is
/// not below `rows` write nothing; an empty slot table (`slots` of length 0) reads every row
/// from the host table. Parameters: `units`, `rows`, `capacity`, then the slices `table`
/// (mapped), `tier`, `slots`, `ids` and `out` (device), each a pointer and a length.
pub static HOT_GATHER: Kernel = Kernel {
    name: "berth_hot_gather",
    crate_name: "berth_runtime",
    ptx: RUNTIME_PTX,
    sass: None,
    params: &[
        Param::scalar::<u64>("units"),
        Param::scalar::<u64>("rows"),
        Param::scalar::<u64>("capacity"),
        Param::slice_ptr::<u8>("table", false, Placement::Mapped),
        Param::word("table", Part::Len),
        Param::slice_ptr::<u8>("tier", false, Placement::Device),
        Param::word("tier", Part::Len),
        Param::slice_ptr::<u32>("slots", false, Placement::Device),
        Param::word("slots", Part::Len),
        Param::slice_ptr::<u32>("ids", false, Placement::Device),
        Param::word("ids", Part::Len),
        Param::slice_ptr::<u8>("out", true, Placement::Device),
        Param::word("out", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: hot_gather_sim,
    uses_barrier: false,
    linear: None,
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
    ptx: RUNTIME_PTX,
    sass: None,
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
    same_len: &[],
    block: None,
};

/// The word whose reading makes [`RANDOM_PROBE`] write its sink.
const PROBE_MAGIC: u32 = 0x7fc0_dead;

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
\t.param .u64 berth_hot_gather_param_12
)
{
\t.reg .pred \t%p<6>;
\t.reg .b32 \t%r<10>;
\t.reg .b64 \t%rd<24>;

\tld.param.u64 \t%rd1, [berth_hot_gather_param_0];
\tld.param.u64 \t%rd2, [berth_hot_gather_param_1];
\tld.param.u64 \t%rd3, [berth_hot_gather_param_2];
\tld.param.u64 \t%rd4, [berth_hot_gather_param_3];
\tld.param.u64 \t%rd5, [berth_hot_gather_param_5];
\tld.param.u64 \t%rd6, [berth_hot_gather_param_7];
\tld.param.u64 \t%rd7, [berth_hot_gather_param_8];
\tld.param.u64 \t%rd8, [berth_hot_gather_param_9];
\tld.param.u64 \t%rd9, [berth_hot_gather_param_10];
\tld.param.u64 \t%rd10, [berth_hot_gather_param_11];
\tmov.u32 \t%r1, %ctaid.x;
\tmov.u32 \t%r2, %ntid.x;
\tmov.u32 \t%r3, %tid.x;
\tmul.wide.u32 \t%rd11, %r1, %r2;
\tcvt.u64.u32 \t%rd12, %r3;
\tadd.s64 \t%rd11, %rd11, %rd12;
\tsetp.eq.u64 \t%p1, %rd1, 0;
\t@%p1 bra \t$L__hot_gather_done;
\tdiv.u64 \t%rd12, %rd11, %rd1;
\tsetp.ge.u64 \t%p2, %rd12, %rd9;
\t@%p2 bra \t$L__hot_gather_done;
\tmul.lo.s64 \t%rd13, %rd12, %rd1;
\tsub.s64 \t%rd13, %rd11, %rd13;
\tcvta.to.global.u64 \t%rd14, %rd8;
\tshl.b64 \t%rd15, %rd12, 2;
\tadd.s64 \t%rd14, %rd14, %rd15;
\tld.global.u32 \t%r4, [%rd14];
\tcvt.u64.u32 \t%rd15, %r4;
\tsetp.ge.u64 \t%p3, %rd15, %rd2;
\t@%p3 bra \t$L__hot_gather_done;
\tmov.u64 \t%rd16, %rd15;
\tmov.u64 \t%rd17, %rd4;
\tsetp.eq.u64 \t%p4, %rd7, 0;
\t@%p4 bra \t$L__hot_gather_read;
\tcvta.to.global.u64 \t%rd18, %rd6;
\tshl.b64 \t%rd19, %rd15, 2;
\tadd.s64 \t%rd18, %rd18, %rd19;
\tld.global.u32 \t%r5, [%rd18];
\tcvt.u64.u32 \t%rd19, %r5;
\tsetp.ge.u64 \t%p5, %rd19, %rd3;
\t@%p5 bra \t$L__hot_gather_read;
\tmov.u64 \t%rd16, %rd19;
\tmov.u64 \t%rd17, %rd5;
$L__hot_gather_read:
\tmul.lo.s64 \t%rd20, %rd16, %rd1;
\tadd.s64 \t%rd20, %rd20, %rd13;
\tshl.b64 \t%rd20, %rd20, 4;
\tcvta.to.global.u64 \t%rd21, %rd17;
\tadd.s64 \t%rd21, %rd21, %rd20;
\tld.global.v4.u32 \t{%r6, %r7, %r8, %r9}, [%rd21];
\tcvta.to.global.u64 \t%rd22, %rd10;
\tshl.b64 \t%rd23, %rd11, 4;
\tadd.s64 \t%rd22, %rd22, %rd23;
\tst.global.v4.u32 \t[%rd22], {%r6, %r7, %r8, %r9};
$L__hot_gather_done:
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

/// The word [`RANDOM_PROBE`]'s thread `i` reads in a table of `words` words.
fn probe_word(i: u64, words: u64) -> u64 {
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

/// [`HOT_GATHER`] on the simulator: one simulated thread's unit, as the PTX does it.
///
/// # Safety
/// `p` points at the 13 parameter values; `table` holds `rows × units` units and `tier`
/// `capacity × units`, `slots` `slots_len` words (0, or `rows`), `ids` `ids_len` words, `out`
/// `ids_len × units` units, and `out` overlaps neither the table nor the tier.
unsafe fn hot_gather_sim(p: &[*mut std::ffi::c_void]) {
    // SAFETY: the caller's contract: each parameter value is a u64.
    let v: [u64; 13] = std::array::from_fn(|i| unsafe { *(p[i] as *const u64) });
    let [
        units,
        rows,
        capacity,
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
    ] = v;
    let g = berth_device::thread::global_x() as u64;
    if units == 0 || g / units >= ids_len {
        return;
    }
    let (b, j) = (g / units, g % units);
    // SAFETY: `b < ids_len` (checked above).
    let id = u64::from(unsafe { *(ids as *const u32).add(b as usize) });
    if id >= rows {
        return;
    }
    let (mut base, mut row) = (table, id);
    if slots_len != 0 {
        // SAFETY: `id < rows`, and a non-empty slot table has `rows` words.
        let slot = u64::from(unsafe { *(slots as *const u32).add(id as usize) });
        if slot < capacity {
            (base, row) = (tier, slot);
        }
    }
    let unit = HOT_UNIT as u64;
    // SAFETY: `row` is below `rows` (table) or `capacity` (tier) and `j < units`, and `g` is
    // below `ids_len × units`: each unit is inside its allocation, and they do not overlap.
    unsafe { copy_unit(base + (row * units + j) * unit, out + g * unit) };
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
