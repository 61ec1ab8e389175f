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

/// Q6: `sum(l_extendedprice * l_discount)` over the rows that pass [`Q6Params`], in
/// accumulator 0 (scaled by 10⁴).
#[inline(always)]
fn q6_body(
    p: Q6Params,
    n: usize,
    shipdate: impl Column,
    discount: impl Column,
    quantity: impl Column,
    price: impl Column,
    revenue: &AtomicSlice<'_, u64>,
) {
    let mut sum = 0u64;
    for i in thread::grid_stride(n) {
        let i = i.get();
        let (d, disc) = (shipdate.at(i), discount.at(i));
        if d >= p.date_lo
            && d < p.date_hi
            && disc >= p.discount_lo
            && disc <= p.discount_hi
            && quantity.at(i) < p.quantity_below
        {
            sum = sum.wrapping_add((price.at(i) * disc) as u64);
        }
    }
    warp_add(revenue, 0, sum);
}

/// Q1: per group of (`l_returnflag`, `l_linestatus`), over the rows shipped up to
/// `ship_until`, the sums [`Q1_SUMS`] into accumulator `group * Q1_SUMS + sum`. A flag other
/// than A, N, R (return) or F, O (status) stops the kernel with a message.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn q1_body(
    ship_until: i64,
    n: usize,
    shipdate: impl Column,
    returnflag: impl Column,
    linestatus: impl Column,
    quantity: impl Column,
    price: impl Column,
    discount: impl Column,
    tax: impl Column,
    sums: &AtomicSlice<'_, u64>,
) {
    let mut acc = [[0u64; Q1_SUMS]; Q1_GROUPS];
    for i in thread::grid_stride(n) {
        let i = i.get();
        if shipdate.at(i) > ship_until {
            continue;
        }
        let rf: usize = match returnflag.at(i) as u8 {
            b'A' => 0,
            b'N' => 1,
            b'R' => 2,
            _ => fail("q1: l_returnflag must be A, N or R"),
        };
        let ls: usize = match linestatus.at(i) as u8 {
            b'F' => 0,
            b'O' => 1,
            _ => fail("q1: l_linestatus must be F or O"),
        };
        let (q, pr, disc) = (quantity.at(i), price.at(i), discount.at(i));
        let disc_price = pr * (100 - disc);
        let row = [
            q as u64,
            pr as u64,
            disc_price as u64,
            (disc_price * (100 + tax.at(i))) as u64,
            disc as u64,
            1,
        ];
        let g = rf * 2 + ls;
        // Every group's sums are updated with zero or the row, so that the array stays in
        // registers (an index known only at run time would put it in local memory).
        unroll! { for k in 0..6 {
            let hit = (g == k) as u64;
            unroll! { for s in 0..6 {
                acc[k][s] = acc[k][s].wrapping_add(hit * row[s]);
            } }
        } }
    }
    unroll! { for k in 0..6 {
        // Skip the groups no lane of the warp saw (every lane takes the same branch).
        if warp::any(warp::FULL_MASK, acc[k][5] != 0) {
            unroll! { for s in 0..6 {
                warp_add(sums, k * Q1_SUMS + s, acc[k][s]);
            } }
        }
    } }
}

/// Q12: for the rows of ship mode `mode_a` or `mode_b` received in `[date_lo, date_hi)`,
/// committed before received and shipped before committed, the count of lines whose order
/// has high priority and of the others, by mode: accumulator `mode * 2 + (0 high, 1 low)`.
/// The order's priority comes from `priority_by_key[l_orderkey]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn q12_body(
    p: Q12Params,
    n: usize,
    orderkey: impl Column,
    shipmode: impl Column,
    shipdate: impl Column,
    commitdate: impl Column,
    receiptdate: impl Column,
    priority_by_key: impl Column,
    counts: &AtomicSlice<'_, u64>,
) {
    let mut c = [0u64; Q12_COUNTS];
    for i in thread::grid_stride(n) {
        let i = i.get();
        let mode = shipmode.at(i) as u32;
        let m = if mode == p.mode_a {
            0
        } else if mode == p.mode_b {
            1
        } else {
            continue;
        };
        let (ship, commit, receipt) = (shipdate.at(i), commitdate.at(i), receiptdate.at(i));
        if receipt < p.date_lo || receipt >= p.date_hi || commit >= receipt || ship >= commit {
            continue;
        }
        let high = (priority_by_key.at(orderkey.at(i) as usize) as u32) < p.high_below;
        let k = m * 2 + if high { 0 } else { 1 };
        unroll! { for j in 0..4 {
            c[j] += (k == j) as u64;
        } }
    }
    unroll! { for j in 0..4 {
        warp_add(counts, j, c[j]);
    } }
}

/// Q14: over the rows shipped in `[date_lo, date_hi)`, the revenue
/// `l_extendedprice * (100 - l_discount)` of promotional parts (accumulator 0) and of all
/// (accumulator 1). The part's type code comes from `type_by_part[l_partkey - 1]` (part keys
/// are dense from 1).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn q14_body(
    p: Q14Params,
    n: usize,
    partkey: impl Column,
    shipdate: impl Column,
    price: impl Column,
    discount: impl Column,
    type_by_part: impl Column,
    sums: &AtomicSlice<'_, u64>,
) {
    let (mut promo, mut all) = (0u64, 0u64);
    for i in thread::grid_stride(n) {
        let i = i.get();
        let d = shipdate.at(i);
        if d < p.date_lo || d >= p.date_hi {
            continue;
        }
        let rev = (price.at(i) * (100 - discount.at(i))) as u64;
        all = all.wrapping_add(rev);
        let t = type_by_part.at((partkey.at(i) - 1) as usize) as u32;
        if t >= p.promo_lo && t < p.promo_hi {
            promo = promo.wrapping_add(rev);
        }
    }
    warp_add(sums, 0, promo);
    warp_add(sums, 1, all);
}

/// Q6 over raw columns streamed from host memory (`q6_raw_pipelined`).
#[gpu_kernel(elementwise, block = 256)]
pub fn q6_raw(
    p: Q6Params,
    #[pinned_async] shipdate: &[i32],
    #[pinned_async] discount: &[i64],
    #[pinned_async] quantity: &[i64],
    #[pinned_async] price: &[i64],
    #[atomic] revenue: &mut [u64],
) {
    let n = shipdate.len();
    q6_body(p, n, shipdate, discount, quantity, price, &revenue);
}

/// Q6 over packed columns copied from host memory.
#[gpu_kernel(block = 256)]
pub fn q6_packed(
    p: Q6Params,
    #[pinned_async] shipdate: &[u32],
    shipdate_p: Packing,
    #[pinned_async] discount: &[u32],
    discount_p: Packing,
    #[pinned_async] quantity: &[u32],
    quantity_p: Packing,
    #[pinned_async] price: &[u32],
    price_p: Packing,
    #[atomic] revenue: &mut [u64],
) {
    let n = shipdate_p.len as usize;
    q6_body(
        p,
        n,
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&discount, discount_p),
        Packed::new(&quantity, quantity_p),
        Packed::new(&price, price_p),
        &revenue,
    );
}

/// Q6 over packed columns resident in device memory.
#[gpu_kernel(block = 256)]
pub fn q6_resident(
    p: Q6Params,
    shipdate: &[u32],
    shipdate_p: Packing,
    discount: &[u32],
    discount_p: Packing,
    quantity: &[u32],
    quantity_p: Packing,
    price: &[u32],
    price_p: Packing,
    #[atomic] revenue: &mut [u64],
) {
    let n = shipdate_p.len as usize;
    q6_body(
        p,
        n,
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&discount, discount_p),
        Packed::new(&quantity, quantity_p),
        Packed::new(&price, price_p),
        &revenue,
    );
}

/// Q1 over raw columns streamed from host memory (`q1_raw_pipelined`).
#[gpu_kernel(elementwise, block = 256)]
pub fn q1_raw(
    ship_until: i64,
    #[pinned_async] shipdate: &[i32],
    #[pinned_async] returnflag: &[u8],
    #[pinned_async] linestatus: &[u8],
    #[pinned_async] quantity: &[i64],
    #[pinned_async] price: &[i64],
    #[pinned_async] discount: &[i64],
    #[pinned_async] tax: &[i64],
    #[atomic] sums: &mut [u64],
) {
    let n = shipdate.len();
    q1_body(
        ship_until, n, shipdate, returnflag, linestatus, quantity, price, discount, tax, &sums,
    );
}

/// Q1 over packed columns copied from host memory.
#[gpu_kernel(block = 256)]
pub fn q1_packed(
    ship_until: i64,
    #[pinned_async] shipdate: &[u32],
    shipdate_p: Packing,
    #[pinned_async] returnflag: &[u32],
    returnflag_p: Packing,
    #[pinned_async] linestatus: &[u32],
    linestatus_p: Packing,
    #[pinned_async] quantity: &[u32],
    quantity_p: Packing,
    #[pinned_async] price: &[u32],
    price_p: Packing,
    #[pinned_async] discount: &[u32],
    discount_p: Packing,
    #[pinned_async] tax: &[u32],
    tax_p: Packing,
    #[atomic] sums: &mut [u64],
) {
    let n = shipdate_p.len as usize;
    q1_body(
        ship_until,
        n,
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&returnflag, returnflag_p),
        Packed::new(&linestatus, linestatus_p),
        Packed::new(&quantity, quantity_p),
        Packed::new(&price, price_p),
        Packed::new(&discount, discount_p),
        Packed::new(&tax, tax_p),
        &sums,
    );
}

/// Q1 over packed columns resident in device memory.
#[gpu_kernel(block = 256)]
pub fn q1_resident(
    ship_until: i64,
    shipdate: &[u32],
    shipdate_p: Packing,
    returnflag: &[u32],
    returnflag_p: Packing,
    linestatus: &[u32],
    linestatus_p: Packing,
    quantity: &[u32],
    quantity_p: Packing,
    price: &[u32],
    price_p: Packing,
    discount: &[u32],
    discount_p: Packing,
    tax: &[u32],
    tax_p: Packing,
    #[atomic] sums: &mut [u64],
) {
    let n = shipdate_p.len as usize;
    q1_body(
        ship_until,
        n,
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&returnflag, returnflag_p),
        Packed::new(&linestatus, linestatus_p),
        Packed::new(&quantity, quantity_p),
        Packed::new(&price, price_p),
        Packed::new(&discount, discount_p),
        Packed::new(&tax, tax_p),
        &sums,
    );
}

/// Q12 over raw columns streamed from host memory (`q12_raw_pipelined`); the orders'
/// priorities are read in place.
#[gpu_kernel(elementwise, block = 256)]
pub fn q12_raw(
    p: Q12Params,
    #[pinned_async] orderkey: &[i64],
    #[pinned_async] shipmode: &[u8],
    #[pinned_async] shipdate: &[i32],
    #[pinned_async] commitdate: &[i32],
    #[pinned_async] receiptdate: &[i32],
    #[mapped] priority_by_key: &[u8],
    #[atomic] counts: &mut [u64],
) {
    let n = orderkey.len();
    q12_body(
        p,
        n,
        orderkey,
        shipmode,
        shipdate,
        commitdate,
        receiptdate,
        priority_by_key,
        &counts,
    );
}

/// Q12 over packed columns copied from host memory; the orders' priorities are read in
/// place.
#[gpu_kernel(block = 256)]
pub fn q12_packed(
    p: Q12Params,
    #[pinned_async] orderkey: &[u32],
    orderkey_p: Packing,
    #[pinned_async] shipmode: &[u32],
    shipmode_p: Packing,
    #[pinned_async] shipdate: &[u32],
    shipdate_p: Packing,
    #[pinned_async] commitdate: &[u32],
    commitdate_p: Packing,
    #[pinned_async] receiptdate: &[u32],
    receiptdate_p: Packing,
    #[mapped] priority_by_key: &[u8],
    #[atomic] counts: &mut [u64],
) {
    let n = orderkey_p.len as usize;
    q12_body(
        p,
        n,
        Packed::new(&orderkey, orderkey_p),
        Packed::new(&shipmode, shipmode_p),
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&commitdate, commitdate_p),
        Packed::new(&receiptdate, receiptdate_p),
        priority_by_key,
        &counts,
    );
}

/// Q12 over packed columns resident in device memory; the orders' priorities are read in
/// place.
#[gpu_kernel(block = 256)]
pub fn q12_resident(
    p: Q12Params,
    orderkey: &[u32],
    orderkey_p: Packing,
    shipmode: &[u32],
    shipmode_p: Packing,
    shipdate: &[u32],
    shipdate_p: Packing,
    commitdate: &[u32],
    commitdate_p: Packing,
    receiptdate: &[u32],
    receiptdate_p: Packing,
    #[mapped] priority_by_key: &[u8],
    #[atomic] counts: &mut [u64],
) {
    let n = orderkey_p.len as usize;
    q12_body(
        p,
        n,
        Packed::new(&orderkey, orderkey_p),
        Packed::new(&shipmode, shipmode_p),
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&commitdate, commitdate_p),
        Packed::new(&receiptdate, receiptdate_p),
        priority_by_key,
        &counts,
    );
}

/// Q14 over raw columns streamed from host memory (`q14_raw_pipelined`); the parts' types
/// are read in place.
#[gpu_kernel(elementwise, block = 256)]
pub fn q14_raw(
    p: Q14Params,
    #[pinned_async] partkey: &[i64],
    #[pinned_async] shipdate: &[i32],
    #[pinned_async] price: &[i64],
    #[pinned_async] discount: &[i64],
    #[mapped] type_by_part: &[u8],
    #[atomic] sums: &mut [u64],
) {
    let n = partkey.len();
    q14_body(
        p,
        n,
        partkey,
        shipdate,
        price,
        discount,
        type_by_part,
        &sums,
    );
}

/// Q14 over packed columns copied from host memory; the parts' types are read in place.
#[gpu_kernel(block = 256)]
pub fn q14_packed(
    p: Q14Params,
    #[pinned_async] partkey: &[u32],
    partkey_p: Packing,
    #[pinned_async] shipdate: &[u32],
    shipdate_p: Packing,
    #[pinned_async] price: &[u32],
    price_p: Packing,
    #[pinned_async] discount: &[u32],
    discount_p: Packing,
    #[mapped] type_by_part: &[u8],
    #[atomic] sums: &mut [u64],
) {
    let n = partkey_p.len as usize;
    q14_body(
        p,
        n,
        Packed::new(&partkey, partkey_p),
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&price, price_p),
        Packed::new(&discount, discount_p),
        type_by_part,
        &sums,
    );
}

/// Q14 over packed columns resident in device memory; the parts' types are read in place.
#[gpu_kernel(block = 256)]
pub fn q14_resident(
    p: Q14Params,
    partkey: &[u32],
    partkey_p: Packing,
    shipdate: &[u32],
    shipdate_p: Packing,
    price: &[u32],
    price_p: Packing,
    discount: &[u32],
    discount_p: Packing,
    #[mapped] type_by_part: &[u8],
    #[atomic] sums: &mut [u64],
) {
    let n = partkey_p.len as usize;
    q14_body(
        p,
        n,
        Packed::new(&partkey, partkey_p),
        Packed::new(&shipdate, shipdate_p),
        Packed::new(&price, price_p),
        Packed::new(&discount, discount_p),
        type_by_part,
        &sums,
    );
}
