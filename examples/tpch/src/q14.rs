//! Q14: its body and its kernels, one for each placement of the columns (a module of its own,
//! so that an edit to one query recompiles only its own host code).

use super::*;

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
