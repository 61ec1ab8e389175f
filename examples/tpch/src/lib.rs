//! The kernels of berth's TPC-H example (queries 1, 6, 12 and 14 over `lineitem` columns that
//! live in host memory), a kernel crate of their own: a crate's GPU build compiles the whole
//! crate again after any edit, so kernels edited apart rebuild quicker in crates apart. The
//! host side (the tables, the reference answers, the runs) is `berth_examples::tpch`, which
//! re-exports this crate.
//!
//! Each query comes in three placements, written in its kernels' signatures, with one body:
//! - `*_raw`: the columns as the application holds them (decimals as scaled `i64`, dates as
//!   `i32` days, dictionary codes as `u8`), `#[pinned_async]` in an `elementwise` kernel, so a
//!   pipelined launch streams them over the link in chunks while earlier chunks compute;
//! - `*_packed`: the same columns bit-packed on the host ([`berth::packed`]), `#[pinned_async]`,
//!   decoded by the kernel: several times fewer bytes cross the link;
//! - `*_resident`: the packed columns kept in device memory between queries (warm runs).
//!
//! Lookups into the other tables (an order's priority by order key for Q12, a part's type by
//! part key for Q14) are `#[mapped]`: the kernels read them in host memory, in place, only
//! for the rows that pass the filter.
//!
//! Results are exact: sums of scaled integers, accumulated per warp and added atomically into
//! 128-bit accumulators (two `u64` words, the carry added on overflow), spread over
//! [`SLOTS`] slots so that warps do not all meet at one address.

use berth::prelude::*;
use berth::{AtomicSlice, Packed, Packing};

/// Threads per block of every query kernel (declared, so warps are always whole).
pub const BLOCK: u32 = 256;

/// Slots per accumulator: warp `w` of a launch adds into slot `w % SLOTS`.
pub const SLOTS: usize = 32;

/// The `u64` words of `n` 128-bit accumulators of [`SLOTS`] slots each.
pub const fn accumulator_words(n: usize) -> usize {
    n * SLOTS * 2
}

/// Q1's groups: `l_returnflag` A, N or R by `l_linestatus` F or O.
pub const Q1_GROUPS: usize = 6;
/// Q1's sums per group: quantity, price, discounted price, charge, discount, rows.
pub const Q1_SUMS: usize = 6;
/// Q12's counts: (MAIL, SHIP) × (high priority, low priority).
pub const Q12_COUNTS: usize = 4;
/// Q14's sums: promotional revenue, all revenue.
pub const Q14_SUMS: usize = 2;

/// Q6's predicate: `l_shipdate` in `[date_lo, date_hi)`, `l_discount` in
/// `[discount_lo, discount_hi]` and `l_quantity < quantity_below` (scaled as the columns).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeviceCopy)]
pub struct Q6Params {
    /// First ship date (days since 1970-01-01).
    pub date_lo: i64,
    /// Ship date bound, exclusive.
    pub date_hi: i64,
    /// Lowest discount (hundredths).
    pub discount_lo: i64,
    /// Highest discount, inclusive.
    pub discount_hi: i64,
    /// Quantity bound, exclusive (hundredths).
    pub quantity_below: i64,
}

/// Q12's predicate: ship modes `mode_a` and `mode_b` (dictionary codes), receipt date in
/// `[date_lo, date_hi)`, and order priorities up to `high_below` (exclusive) counted as high.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeviceCopy)]
pub struct Q12Params {
    /// First receipt date (days since 1970-01-01).
    pub date_lo: i64,
    /// Receipt date bound, exclusive.
    pub date_hi: i64,
    /// The first ship mode's code.
    pub mode_a: u32,
    /// The second ship mode's code.
    pub mode_b: u32,
    /// Priority codes below this one are high.
    pub high_below: u32,
    /// Zero; keeps the struct free of padding.
    pub reserved: u32,
}

/// Q14's predicate: ship date in `[date_lo, date_hi)`; part types with codes in
/// `[promo_lo, promo_hi)` are promotional (the dictionary is sorted, so a prefix is a range).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeviceCopy)]
pub struct Q14Params {
    /// First ship date (days since 1970-01-01).
    pub date_lo: i64,
    /// Ship date bound, exclusive.
    pub date_hi: i64,
    /// First promotional type code.
    pub promo_lo: u32,
    /// Promotional type codes end here, exclusive.
    pub promo_hi: u32,
}

/// A column a query body reads, whatever its placement and encoding.
pub trait Column {
    /// Row `i`'s value.
    fn at(&self, i: usize) -> i64;
}

macro_rules! slice_column {
    ($($t:ty),*) => { $(
        impl Column for Slice<'_, $t> {
            #[inline(always)]
            fn at(&self, i: usize) -> i64 {
                self[i] as i64
            }
        }
    )* };
}
slice_column!(i64, i32, u8);

impl Column for Packed<'_> {
    #[inline(always)]
    fn at(&self, i: usize) -> i64 {
        self.get(i)
    }
}

/// Sum `v` over the warp and add it, from lane 0, to 128-bit accumulator `k`. Every lane of
/// the warp calls it (the kernels declare whole warps and call it outside any branch).
#[inline(always)]
fn warp_add(acc: &AtomicSlice<'_, u64>, k: usize, v: u64) {
    let mut total = v;
    let mut lanes = 16;
    while lanes > 0 {
        total = total.wrapping_add(warp::shfl_xor(warp::FULL_MASK, total, lanes));
        lanes /= 2;
    }
    if warp::lane_id() == 0 && total != 0 {
        let slot = (thread::index().get() / 32) % SLOTS;
        let i = (k * SLOTS + slot) * 2;
        let prev = acc.atomic_add(i, total);
        if prev.checked_add(total).is_none() {
            acc.atomic_add(i + 1, 1);
        }
    }
}

mod q1;
mod q12;
mod q14;
mod q6;

pub use q1::*;
pub use q6::*;
pub use q12::*;
pub use q14::*;
