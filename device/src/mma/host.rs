//! The host's `mma.sync`, `ldmatrix` and `stmatrix`: each lane gathers the registers or row addresses it
//! needs from the lanes that hold them, one warp call per 64-bit word (all 32 lanes take
//! part in each, so a warp that is not whole is reported at the first), then computes its own
//! part of the result. It works on the fragments' registers, so it names nothing of `mma`.

use crate::host::warp::{Call, Op};
use core::panic::Location;

/// The word `value` of lane `src`, every lane of the warp taking part.
#[inline]
fn gather(op: Op, value: u64, src: usize, at: &'static Location<'static>) -> u64 {
    crate::host::warp_call(
        Call {
            op,
            mask: u32::MAX,
            value,
            arg: src as u32,
        },
        at,
    )
}

fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

/// The calling lane's `(g, t)`: its group of four lanes and its place in the group.
fn lane_parts() -> (usize, usize) {
    let lane = crate::warp::lane_id();
    (lane / 4 % 8, lane % 4)
}

/// The two 16-bit elements of a register, widened by `widen`.
fn halves(reg: u32, widen: fn(u16) -> f32) -> (f32, f32) {
    (widen(reg as u16), widen((reg >> 16) as u16))
}

/// This lane's part of `a × b + c` from its registers (`a`: 4, `b`: 2, `c`: 4 `f32`), the
/// 16-bit elements read by `widen`.
pub(super) fn mma(
    a: [u32; 4],
    b: [u32; 2],
    c: [f32; 4],
    widen: fn(u16) -> f32,
    at: &'static Location<'static>,
) -> [f32; 4] {
    let (g, t) = lane_parts();
    // Rows g and g + 8 of A, from lanes 4g..4g + 4: lane 4g + i holds columns 2i, 2i + 1
    // (registers 0 and 1: rows g, g + 8) and 2i + 8, 2i + 9 (registers 2 and 3).
    let mut rows = [[0f32; 16]; 2];
    let (lo, hi) = (pair(a[0], a[1]), pair(a[2], a[3]));
    for i in 0..4 {
        let src = 4 * g + i;
        let lo = gather(Op::Mma, lo, src, at);
        let hi = gather(Op::Mma, hi, src, at);
        for (reg, col) in [(lo as u32, 2 * i), (hi as u32, 2 * i + 8)] {
            (rows[0][col], rows[0][col + 1]) = halves(reg, widen);
        }
        for (reg, col) in [((lo >> 32) as u32, 2 * i), ((hi >> 32) as u32, 2 * i + 8)] {
            (rows[1][col], rows[1][col + 1]) = halves(reg, widen);
        }
    }
    // Columns 2t and 2t + 1 of B: column n is held by lanes 4n..4n + 4, lane 4n + i holding
    // rows 2i, 2i + 1 (register 0) and 2i + 8, 2i + 9 (register 1).
    let mut cols = [[0f32; 16]; 2];
    let mine = pair(b[0], b[1]);
    for (j, col) in cols.iter_mut().enumerate() {
        for i in 0..4 {
            let w = gather(Op::Mma, mine, 4 * (2 * t + j) + i, at);
            for (reg, k) in [(w as u32, 2 * i), ((w >> 32) as u32, 2 * i + 8)] {
                (col[k], col[k + 1]) = halves(reg, widen);
            }
        }
    }
    core::array::from_fn(|e| {
        let (row, col) = (&rows[e / 2], &cols[e % 2]);
        // A product of two 11-bit (or 8-bit) significands fits f32's 24 bits: exact.
        (0..16).fold(c[e], |acc, k| acc + row[k] * col[k])
    })
}

/// This lane's part of the TF32 `a × b + c` (m16n8k8) from its registers (`a`: 4, `b`: 2
/// TF32 values, `c`: 4).
pub(super) fn mma_tf32(
    a: [f32; 4],
    b: [f32; 2],
    c: [f32; 4],
    at: &'static Location<'static>,
) -> [f32; 4] {
    let (g, t) = lane_parts();
    // Rows g and g + 8 of A, from lanes 4g..4g + 4: lane 4g + i holds column i (registers 0
    // and 1: rows g, g + 8) and column i + 4 (registers 2 and 3).
    let mut rows = [[0f32; 8]; 2];
    let (lo, hi) = (
        pair(a[0].to_bits(), a[1].to_bits()),
        pair(a[2].to_bits(), a[3].to_bits()),
    );
    for i in 0..4 {
        for (w, col) in [(lo, i), (hi, i + 4)] {
            let w = gather(Op::MmaTf32, w, 4 * g + i, at);
            rows[0][col] = f32::from_bits(w as u32);
            rows[1][col] = f32::from_bits((w >> 32) as u32);
        }
    }
    // Columns 2t and 2t + 1 of B: column n is held by lanes 4n..4n + 4, lane 4n + i holding
    // rows i (register 0) and i + 4 (register 1).
    let mut cols = [[0f32; 8]; 2];
    let mine = pair(b[0].to_bits(), b[1].to_bits());
    for (j, col) in cols.iter_mut().enumerate() {
        for i in 0..4 {
            let w = gather(Op::MmaTf32, mine, 4 * (2 * t + j) + i, at);
            (col[i], col[i + 4]) = (f32::from_bits(w as u32), f32::from_bits((w >> 32) as u32));
        }
    }
    core::array::from_fn(|e| {
        let (row, col) = (&rows[e / 2], &cols[e % 2]);
        // A product of two 11-bit significands fits f32's 24 bits: exact.
        (0..8).fold(c[e], |acc, k| acc + row[k] * col[k])
    })
}

/// Rows `g` and `g + 8` of A (16×32) and columns `2t` and `2t + 1` of B (32×8) of an
/// m16n8k32 product, gathered from the lanes that hold them (`a`: 4, `b`: 2 registers of
/// four 8-bit elements each, read by `wa` and `wb`), for lane `(g, t)`.
#[allow(clippy::type_complexity)]
fn gather_k32<E: Copy + Default>(
    op: Op,
    a: [u32; 4],
    b: [u32; 2],
    wa: fn(u8) -> E,
    wb: fn(u8) -> E,
    at: &'static Location<'static>,
) -> ([[E; 32]; 2], [[E; 32]; 2]) {
    let (g, t) = lane_parts();
    // Lane 4g + i holds columns 4i..4i + 4 (registers 0 and 1: rows g, g + 8) and
    // 4i + 16..4i + 20 (registers 2 and 3).
    let mut rows = [[E::default(); 32]; 2];
    let (lo, hi) = (pair(a[0], a[1]), pair(a[2], a[3]));
    for i in 0..4 {
        for (w, col) in [(lo, 4 * i), (hi, 4 * i + 16)] {
            let w = gather(op, w, 4 * g + i, at);
            for (r, row) in rows.iter_mut().enumerate() {
                let bytes = ((w >> (32 * r)) as u32).to_le_bytes();
                for (j, &byte) in bytes.iter().enumerate() {
                    row[col + j] = wa(byte);
                }
            }
        }
    }
    // Column n is held by lanes 4n..4n + 4, lane 4n + i holding rows 4i..4i + 4 (register 0)
    // and 4i + 16..4i + 20 (register 1).
    let mut cols = [[E::default(); 32]; 2];
    let mine = pair(b[0], b[1]);
    for (j, col) in cols.iter_mut().enumerate() {
        for i in 0..4 {
            let w = gather(op, mine, 4 * (2 * t + j) + i, at);
            for (r, k0) in [(0, 4 * i), (1, 4 * i + 16)] {
                let bytes = ((w >> (32 * r)) as u32).to_le_bytes();
                for (j, &byte) in bytes.iter().enumerate() {
                    col[k0 + j] = wb(byte);
                }
            }
        }
    }
    (rows, cols)
}

/// This lane's part of the 8-bit integer `a × b + c` (m16n8k32): the exact sum, clamped to
/// `i32`.
pub(super) fn mma_int8(
    a: [u32; 4],
    b: [u32; 2],
    c: [i32; 4],
    wa: fn(u8) -> i32,
    wb: fn(u8) -> i32,
    at: &'static Location<'static>,
) -> [i32; 4] {
    let (rows, cols) = gather_k32(Op::MmaInt8, a, b, wa, wb, at);
    core::array::from_fn(|e| {
        let (row, col) = (&rows[e / 2], &cols[e % 2]);
        let sum = (0..32).fold(i64::from(c[e]), |acc, k| {
            acc + i64::from(row[k]) * i64::from(col[k])
        });
        sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
    })
}

/// This lane's part of the 8-bit floating-point `a × b + c` (m16n8k32): exact products
/// summed in `f32`.
pub(super) fn mma_fp8(
    a: [u32; 4],
    b: [u32; 2],
    c: [f32; 4],
    wa: fn(u8) -> f32,
    wb: fn(u8) -> f32,
    at: &'static Location<'static>,
) -> [f32; 4] {
    let (rows, cols) = gather_k32(Op::MmaFp8, a, b, wa, wb, at);
    core::array::from_fn(|e| {
        let (row, col) = (&rows[e / 2], &cols[e % 2]);
        // A product of two significands of at most 4 bits fits f32's 24 bits: exact.
        (0..32).fold(c[e], |acc, k| acc + row[k] * col[k])
    })
}

/// # Safety
/// As [`super::ldmatrix`]: `p` is an aligned row of eight elements in block-shared memory
/// (in the host's backing of it), and the read contract holds for every row the warp names.
pub(super) unsafe fn ldmatrix(
    p: *const u16,
    matrices: usize,
    trans: bool,
    at: &'static Location<'static>,
) -> [u32; 4] {
    let (g, t) = lane_parts();
    let read = |row: u64, col: usize| -> u16 {
        let e = (row as usize as *const u16).wrapping_add(col);
        crate::host::shared_access(e as usize, 2, crate::host::Access::Read, at);
        // SAFETY: `row` is a lane's row address, which that lane checked to be eight
        // in-bounds elements of a shared tile (`row_address`), and `col < 8`; the read
        // contract is the caller's.
        unsafe { e.read() }
    };
    let mut regs = [0u32; 4];
    for (m, reg) in regs.iter_mut().enumerate().take(matrices) {
        *reg = if trans {
            // Lane l gets column g of rows 2t and 2t + 1 of matrix m.
            let r0 = gather(Op::Ldmatrix, p as u64, 8 * m + 2 * t, at);
            let r1 = gather(Op::Ldmatrix, p as u64, 8 * m + 2 * t + 1, at);
            u32::from(read(r0, g)) | u32::from(read(r1, g)) << 16
        } else {
            // Lane l gets columns 2t and 2t + 1 of row g of matrix m.
            let r = gather(Op::Ldmatrix, p as u64, 8 * m + g, at);
            u32::from(read(r, 2 * t)) | u32::from(read(r, 2 * t + 1)) << 16
        };
    }
    regs
}

/// # Safety
/// As [`super::FragC::stmatrix_at`]: `p` is an aligned row of eight elements in
/// block-shared memory (in the host's backing of it), and the write contract holds for every
/// row the warp names.
pub(super) unsafe fn stmatrix(
    p: *mut u16,
    trans: bool,
    regs: [u32; 4],
    matrices: usize,
    at: &'static Location<'static>,
) {
    let (g, t) = lane_parts();
    let write = |row: u64, col: usize, v: u16| {
        let e = (row as usize as *mut u16).wrapping_add(col);
        crate::host::shared_access(e as usize, 2, crate::host::Access::Write, at);
        // SAFETY: `row` is a lane's row address, which that lane checked to be eight
        // in-bounds elements of a shared tile, and `col < 8`; the write contract is the
        // caller's.
        unsafe { e.write(v) }
    };
    for (m, &reg) in regs.iter().enumerate().take(matrices) {
        let (lo, hi) = (reg as u16, (reg >> 16) as u16);
        if trans {
            // Lane l's register m holds row g, columns 2t and 2t + 1 of matrix m; stored
            // transposed, they are column g of rows 2t and 2t + 1.
            let r0 = gather(Op::Stmatrix, p as u64, 8 * m + 2 * t, at);
            let r1 = gather(Op::Stmatrix, p as u64, 8 * m + 2 * t + 1, at);
            write(r0, g, lo);
            write(r1, g, hi);
        } else {
            // Columns 2t and 2t + 1 of row g of matrix m.
            let r = gather(Op::Stmatrix, p as u64, 8 * m + g, at);
            write(r, 2 * t, lo);
            write(r, 2 * t + 1, hi);
        }
    }
}
