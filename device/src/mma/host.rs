//! The host's `mma.sync` and `ldmatrix`: each lane gathers the registers or row addresses it
//! needs from the lanes that hold them, one warp call per 64-bit word (all 32 lanes take
//! part in each, so a warp that is not whole is reported at the first), then computes its own
//! part of the result.

use super::{FragA, FragB, FragC, MmaInput, lane_parts, unpack};
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

pub(super) fn mma<T: MmaInput>(
    a: FragA<T>,
    b: FragB<T>,
    c: FragC,
    at: &'static Location<'static>,
) -> FragC {
    let (g, t) = lane_parts(crate::warp::lane_id());
    // Rows g and g + 8 of A, from lanes 4g..4g + 4: lane 4g + i holds columns 2i, 2i + 1
    // (registers 0 and 1: rows g, g + 8) and 2i + 8, 2i + 9 (registers 2 and 3).
    let mut rows = [[0f32; 16]; 2];
    let (lo, hi) = (pair(a.regs[0], a.regs[1]), pair(a.regs[2], a.regs[3]));
    for i in 0..4 {
        let src = 4 * g + i;
        let lo = gather(Op::Mma, lo, src, at);
        let hi = gather(Op::Mma, hi, src, at);
        for (reg, col) in [(lo as u32, 2 * i), (hi as u32, 2 * i + 8)] {
            rows[0][col] = unpack::<T>(reg, false).widen();
            rows[0][col + 1] = unpack::<T>(reg, true).widen();
        }
        for (reg, col) in [((lo >> 32) as u32, 2 * i), ((hi >> 32) as u32, 2 * i + 8)] {
            rows[1][col] = unpack::<T>(reg, false).widen();
            rows[1][col + 1] = unpack::<T>(reg, true).widen();
        }
    }
    // Columns 2t and 2t + 1 of B: column n is held by lanes 4n..4n + 4, lane 4n + i holding
    // rows 2i, 2i + 1 (register 0) and 2i + 8, 2i + 9 (register 1).
    let mut cols = [[0f32; 16]; 2];
    let mine = pair(b.regs[0], b.regs[1]);
    for (j, col) in cols.iter_mut().enumerate() {
        for i in 0..4 {
            let w = gather(Op::Mma, mine, 4 * (2 * t + j) + i, at);
            for (reg, k) in [(w as u32, 2 * i), ((w >> 32) as u32, 2 * i + 8)] {
                col[k] = unpack::<T>(reg, false).widen();
                col[k + 1] = unpack::<T>(reg, true).widen();
            }
        }
    }
    FragC {
        regs: core::array::from_fn(|e| {
            let (row, col) = (&rows[e / 2], &cols[e % 2]);
            // A product of two 11-bit (or 8-bit) significands fits f32's 24 bits: exact.
            (0..16).fold(c.regs[e], |acc, k| acc + row[k] * col[k])
        }),
    }
}

/// # Safety
/// As [`super::ldmatrix`]: `p` is an aligned row of eight elements in block-shared memory
/// (in the host's backing of it), and the read contract holds for every row the warp names.
pub(super) unsafe fn ldmatrix<T: MmaInput>(
    p: *const T,
    matrices: usize,
    trans: bool,
    at: &'static Location<'static>,
) -> [u32; 4] {
    let lane = crate::warp::lane_id();
    let (g, t) = lane_parts(lane);
    let read = |row: u64, col: usize| -> u16 {
        let e = (row as usize as *const T).wrapping_add(col);
        crate::host::shared_access(e as usize, 2, crate::host::Access::Read, at);
        // SAFETY: `row` is a lane's row address, which that lane checked to be eight
        // in-bounds elements of a shared tile (`row_address`), and `col < 8`; the read
        // contract is the caller's.
        unsafe { e.read() }.to_bits()
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
