//! Q6: its body and its kernels, one for each placement of the columns (a module of its own,
//! so that an edit to one query recompiles only its own host code).

use super::*;

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
