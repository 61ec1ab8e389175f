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

/// The address of element `(k, n)` of the N-major operand `desc` names, 128-byte swizzle only:
/// 16-byte chunks of 8 columns, rows of 128 bytes (64 columns of 2-byte elements) along k,
/// groups of eight k rows `sbo` apart, blocks of 64 columns `lbo` apart, the chunk XOR-ed
/// with address bits 7–9.
fn element_mn(desc: u64, hi: usize, k: usize, n: usize, at: &'static Location<'static>) -> usize {
    let start = hi + (((desc & 0x3fff) as usize) << 4);
    let lbo = (((desc >> 16) & 0x3fff) as usize) << 4;
    let sbo = (((desc >> 32) & 0x3fff) as usize) << 4;
    if desc >> 62 != 1 {
        panic!(
            "wgmma at {}:{}: the simulator knows N-major descriptors with the 128-byte swizzle only",
            at.file(),
            at.line()
        );
    }
    let a = start + n / 64 * lbo + k / 8 * sbo + k % 8 * 128 + n % 64 * 2;
    a ^ ((a >> 7) & 7) << 4
}

/// Read the 2-byte element at `p` of an operand, after checking its 16-byte chunk against the
/// bulk copies in flight.
fn read_at(p: usize, widen: fn(u16) -> f32, at: &'static Location<'static>) -> f32 {
    crate::host::async_proxy(
        AsyncOp::Read {
            addr: p & !15,
            bytes: 16,
        },
        at,
    );
    // SAFETY: the descriptor was built from a shared tile (`SwizzledTile::desc` or
    // `desc_mn`), whose rows and columns it names, inside the block's shared memory; the read
    // contract is the caller's. A hand-made descriptor cannot reach here (its type has no
    // public constructor).
    widen(unsafe { (p as *const u16).read() })
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
    read_at(element(desc.0, desc.1, row, k, 2, at), widen, at)
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

/// This thread's part of `acc = a · b + (accumulate ? acc : 0)` with A in the warpgroup's
/// registers (`a` this thread's four) and B K-major or, `b.1`, N-major (N = `2 * acc.len()`).
/// The rows a thread's accumulator holds are its own warp's A rows: it gathers them from the
/// warp's lanes, every lane taking part.
pub(super) fn mma_rs(
    acc: &mut [f32],
    a: [u32; 4],
    b: ((u64, usize), bool),
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
    let (g, q) = (t % 32 / 4, t % 4);
    // Rows g and g + 8 of the warp's 16, from lanes 4g..4g + 4: lane 4g + i holds columns
    // 2i, 2i + 1 (registers 0 and 1: rows g, g + 8) and 2i + 8, 2i + 9 (registers 2 and 3).
    let mut rows = [[0f32; 16]; 2];
    let pair = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
    let (lo, hi) = (pair(a[0], a[1]), pair(a[2], a[3]));
    let gather = |value: u64, src: usize| {
        crate::host::warp_call(
            crate::host::warp::Call {
                op: crate::host::warp::Op::Wgmma,
                mask: u32::MAX,
                value,
                arg: src as u32,
            },
            at,
        )
    };
    let halves = |reg: u32| (widen(reg as u16), widen((reg >> 16) as u16));
    for i in 0..4 {
        let (l, h) = (gather(lo, 4 * g + i), gather(hi, 4 * g + i));
        for (reg, col) in [(l as u32, 2 * i), (h as u32, 2 * i + 8)] {
            (rows[0][col], rows[0][col + 1]) = halves(reg);
        }
        for (reg, col) in [((l >> 32) as u32, 2 * i), ((h >> 32) as u32, 2 * i + 8)] {
            (rows[1][col], rows[1][col + 1]) = halves(reg);
        }
    }
    let ((bits, hi_bits), transposed) = b;
    let n = 2 * acc.len();
    for j in 0..n / 8 {
        let cols: [[f32; 16]; 2] = core::array::from_fn(|h| {
            let c = 8 * j + 2 * q + h;
            core::array::from_fn(|k| {
                if transposed {
                    read_at(element_mn(bits, hi_bits, k, c, at), widen, at)
                } else {
                    read((bits, hi_bits), c, k, widen, at)
                }
            })
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
