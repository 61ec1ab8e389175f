//! The host's `wgmma.mma_async`: each thread computes its own accumulator elements, reading
//! both operands through their descriptors as the hardware decodes them.

use crate::host::async_proxy::AsyncOp;
use core::panic::Location;

/// The address of element `(row, k)` of the K-major operand `desc` names (`hi` the address
/// bits above the descriptor's 18), for the swizzle modes the simulator knows: none (core
/// matrices of 8 rows × 16 bytes, `lbo` apart along k and `sbo` apart along the rows) and
/// 128 bytes (rows of 128 bytes, eight-row groups `sbo` apart, the 16-byte chunk XOR-ed with
/// address bits 7–9).
fn element(
    desc: u64,
    hi: usize,
    row: usize,
    k: usize,
    es: usize,
    at: &'static Location<'static>,
) -> usize {
    let start = hi + (((desc & 0x3fff) as usize) << 4);
    let lbo = (((desc >> 16) & 0x3fff) as usize) << 4;
    let sbo = (((desc >> 32) & 0x3fff) as usize) << 4;
    match desc >> 62 {
        0 => start + row / 8 * sbo + row % 8 * 16 + k * es / 16 * lbo + k * es % 16,
        1 => {
            let a = start + row / 8 * sbo + row % 8 * 128 + k * es;
            a ^ ((a >> 7) & 7) << 4
        }
        _ => panic!(
            "wgmma at {}:{}: the simulator knows the descriptors without swizzle and with the 128-byte swizzle",
            at.file(),
            at.line()
        ),
    }
}

/// Read `es`-byte element `(row, k)` of `desc`'s operand, after checking its 16-byte chunk
/// against the bulk copies in flight.
fn read(
    desc: (u64, usize),
    row: usize,
    k: usize,
    widen: fn(u16) -> f32,
    at: &'static Location<'static>,
) -> f32 {
    let p = element(desc.0, desc.1, row, k, 2, at);
    crate::host::async_proxy(
        AsyncOp::Read {
            addr: p & !15,
            bytes: 16,
        },
        at,
    );
    // SAFETY: the descriptor was built from a shared tile (`SwizzledTile::desc`), whose rows
    // and columns it names, inside the block's shared memory; the read contract is the
    // caller's. A hand-made descriptor cannot reach here (its type has no public constructor).
    widen(unsafe { (p as *const u16).read() })
}

/// This thread's part of `acc = a · bᵀ + (accumulate ? acc : 0)` (N = `2 * acc.len()`).
pub(super) fn mma(
    acc: &mut [f32],
    a: (u64, usize),
    b: (u64, usize),
    accumulate: bool,
    widen: fn(u16) -> f32,
    at: &'static Location<'static>,
) {
    if !crate::block::size().is_multiple_of(128) {
        panic!(
            "wgmma.mma_async at {}:{}: the block of {} threads is not whole warpgroups of 128",
            at.file(),
            at.line(),
            crate::block::size()
        );
    }
    let t = crate::thread::linear_in_block() % 128;
    // Thread `t` holds rows `16 (t / 32) + t % 32 / 4` and 8 below (the accumulator layout).
    let rows: [[f32; 16]; 2] = core::array::from_fn(|h| {
        let m = 16 * (t / 32) + t % 32 / 4 + 8 * h;
        core::array::from_fn(|k| read(a, m, k, widen, at))
    });
    let n = 2 * acc.len();
    for j in 0..n / 8 {
        let cols: [[f32; 16]; 2] = core::array::from_fn(|h| {
            let c = 8 * j + 2 * (t % 32 % 4) + h;
            core::array::from_fn(|k| read(b, c, k, widen, at))
        });
        for e in 0..4 {
            let (row, col) = (&rows[e / 2], &cols[e % 2]);
            // A product of two 8-bit (or 11-bit) significands is exact in f32.
            let sum = (0..16).fold(0f32, |s, k| s + row[k] * col[k]);
            let r = &mut acc[4 * j + e];
            *r = if accumulate { *r + sum } else { sum };
        }
    }
}
