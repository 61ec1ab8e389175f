//! Q12: its body and its kernels, one for each placement of the columns (a module of its own,
//! so that an edit to one query recompiles only its own host code).

use super::*;

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
