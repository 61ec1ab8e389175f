//! Q1: its body and its kernels, one for each placement of the columns (a module of its own,
//! so that an edit to one query recompiles only its own host code).

use super::*;

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
