//! The runtime's own kernels, hand-written PTX in one module (`berth_runtime`), JIT-compiled at
//! first use: [`CHUNK_DONE`] (a pipelined chunk's progress flag) and [`RANDOM_PROBE`] (how
//! fast one mapped table answers random reads, for `#[auto]`'s close calls). Both are checked
//! against their descriptors and by ptxas in the tests (`tests/tests/kernels.rs`).

use crate::launch::{Kernel, Param};
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
