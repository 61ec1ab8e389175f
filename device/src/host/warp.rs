//! The host side of warp calls: what a lane asks for ([`Call`], [`Op`]), which an executor (the
//! simulator) is told through [`BlockServices::warp`](super::BlockServices::warp), and what the
//! warp computes once the lanes have met ([`exchange`]). Kernels do not name it: they call
//! [`crate::warp`]'s functions, which on the host end here.

/// Which collective a lane reached: what an executor (the simulator) is told through
/// [`BlockServices::warp`](super::BlockServices::warp). Kernels do not name it.
///
/// ```
/// assert_eq!(berth_device::host::warp::Op::Xor.name(), "warp::shfl_xor");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `shfl.sync.idx`: read lane `arg`.
    Idx,
    /// `shfl.sync.up`: read lane `lane - arg`.
    Up,
    /// `shfl.sync.down`: read lane `lane + arg`.
    Down,
    /// `shfl.sync.bfly`: read lane `lane ^ arg`.
    Xor,
    /// `vote.sync.all`.
    All,
    /// `vote.sync.any`.
    Any,
    /// `vote.sync.ballot`.
    Ballot,
    /// `match.any.sync`.
    MatchAny,
    /// `match.all.sync`.
    MatchAll,
    /// `redux.sync.add` (wrapping).
    SumU32,
    /// `redux.sync.min.u32`.
    MinU32,
    /// `redux.sync.max.u32`.
    MaxU32,
    /// `redux.sync.min.s32`.
    MinI32,
    /// `redux.sync.max.s32`.
    MaxI32,
    /// `bar.warp.sync`.
    Sync,
    /// One step of a simulated `mma.sync`: read lane `arg`'s operand registers. Every lane of
    /// the warp takes part.
    Mma,
    /// One step of a simulated TF32 `mma.sync` (`mma::tf32::mma`).
    MmaTf32,
    /// One step of a simulated 8-bit integer `mma.sync` (`mma::int8::mma`).
    MmaInt8,
    /// One step of a simulated 8-bit floating-point `mma.sync` (`mma::fp8::mma`).
    MmaFp8,
    /// One step of a simulated `ldmatrix`: read lane `arg`'s row address. Every lane of the
    /// warp takes part.
    Ldmatrix,
    /// One step of a simulated `stmatrix`: read lane `arg`'s row address. Every lane of the
    /// warp takes part.
    Stmatrix,
    /// One step of a simulated `wgmma.mma_async` with A in registers: read lane `arg`'s A
    /// registers. Every lane of the warp takes part.
    Wgmma,
}

impl Op {
    /// The user-facing name of the call, for reports.
    ///
    /// ```
    /// assert_eq!(berth_device::host::warp::Op::Sync.name(), "warp::sync_warp");
    /// ```
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Op::Idx => "warp::shfl_idx",
            Op::Up => "warp::shfl_up",
            Op::Down => "warp::shfl_down",
            Op::Xor => "warp::shfl_xor",
            Op::All => "warp::all",
            Op::Any => "warp::any",
            Op::Ballot => "warp::ballot",
            Op::MatchAny => "warp::match_any",
            Op::MatchAll => "warp::match_all",
            Op::SumU32 | Op::MinU32 | Op::MaxU32 | Op::MinI32 | Op::MaxI32 => "warp::reduce",
            Op::Sync => "warp::sync_warp",
            Op::Mma => "mma::mma",
            Op::MmaTf32 => "mma::tf32::mma",
            Op::MmaInt8 => "mma::int8::mma",
            Op::MmaFp8 => "mma::fp8::mma",
            Op::Ldmatrix => "mma::ldmatrix",
            Op::Stmatrix => "mma::stmatrix",
            Op::Wgmma => "wgmma::mma_async_rs",
        }
    }
}

/// One lane's warp call: what, with which mask, its value and its argument (source lane,
/// delta or xor mask). Kernels do not name it.
///
/// ```
/// use berth_device::host::warp::{Call, Op};
/// let c = Call { op: Op::Ballot, mask: u32::MAX, value: 1, arg: 0 };
/// assert_eq!(c.op.name(), "warp::ballot");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The collective.
    pub op: Op,
    /// Member mask.
    pub mask: u32,
    /// The lane's value (a predicate is 0 or 1).
    pub value: u64,
    /// Source lane, delta or xor mask for shuffles; unused otherwise.
    pub arg: u32,
}

/// The results of the lanes in `group` (each with `calls[lane]` set, one op, one mask),
/// with `exists` the warp's lanes that are inside the block. An error names the lane at
/// fault and the problem.
///
/// ```
/// use berth_device::host::warp::{self, Call, Op};
/// let mut calls = [None; 32];
/// calls[0] = Some(Call { op: Op::Xor, mask: 1, value: 5, arg: 0 });
/// assert_eq!(warp::exchange(&calls, 1, 1).unwrap()[0], 5);
/// ```
pub fn exchange(
    calls: &[Option<Call>; 32],
    group: u32,
    exists: u32,
) -> Result<[u64; 32], (usize, String)> {
    let mut out = [0u64; 32];
    let lanes = || (0..32usize).filter(move |l| group & (1 << l) != 0);
    let value = |l: usize| calls[l].map_or(0, |c| c.value);
    let first = calls[lanes().next().unwrap_or(0)].expect("a group has lanes");
    let truth = lanes()
        .filter(|&l| value(l) != 0)
        .fold(0u32, |m, l| m | 1 << l);
    for l in lanes() {
        let c = calls[l].expect("every lane of the group has a call");
        out[l] = match c.op {
            Op::Idx | Op::Up | Op::Down | Op::Xor => {
                let src = match c.op {
                    Op::Idx => Some((c.arg & 31) as usize),
                    Op::Up => l.checked_sub(c.arg as usize),
                    Op::Down => Some(l + c.arg as usize).filter(|&s| s < 32),
                    _ => Some(l ^ (c.arg & 31) as usize),
                };
                match src {
                    // Out of range: the lane keeps its own value (PTX semantics).
                    None => c.value,
                    Some(s) if c.mask & (1 << s) == 0 => {
                        return Err((
                            l,
                            format!(
                                "{}() in lane {l} reads lane {s}, which is not in its mask {:#010x} (on the GPU the value is undefined)",
                                c.op.name(),
                                c.mask
                            ),
                        ));
                    }
                    Some(s) if exists & (1 << s) == 0 => {
                        return Err((
                            l,
                            format!(
                                "{}() in lane {l} reads lane {s}, which is past the end of the block (a partial warp; on the GPU the value is undefined): build the mask with warp::active_mask()",
                                c.op.name()
                            ),
                        ));
                    }
                    Some(s) => value(s),
                }
            }
            Op::All => u64::from(truth == group),
            Op::Any => u64::from(truth != 0),
            Op::Ballot => u64::from(truth),
            Op::MatchAny => u64::from(
                lanes()
                    .filter(|&o| value(o) == c.value)
                    .fold(0u32, |m, o| m | 1 << o),
            ),
            Op::MatchAll => {
                if lanes().all(|o| value(o) == first.value) {
                    u64::from(group)
                } else {
                    0
                }
            }
            Op::SumU32 => u64::from(lanes().fold(0u32, |s, o| s.wrapping_add(value(o) as u32))),
            Op::MinU32 => u64::from(lanes().map(|o| value(o) as u32).min().unwrap_or(0)),
            Op::MaxU32 => u64::from(lanes().map(|o| value(o) as u32).max().unwrap_or(0)),
            Op::MinI32 => lanes().map(|o| value(o) as u32 as i32).min().unwrap_or(0) as u32 as u64,
            Op::MaxI32 => lanes().map(|o| value(o) as u32 as i32).max().unwrap_or(0) as u32 as u64,
            Op::Sync => 0,
            Op::Mma
            | Op::MmaTf32
            | Op::MmaInt8
            | Op::MmaFp8
            | Op::Ldmatrix
            | Op::Stmatrix
            | Op::Wgmma => {
                if group != u32::MAX || exists != u32::MAX {
                    return Err((
                        l,
                        format!(
                            "{}() in lane {l} is a warp-wide operation: all 32 lanes of the warp must reach it together, but the lanes taking part are {group:#010x} (`.sync.aligned` on the GPU: undefined behaviour otherwise)",
                            c.op.name()
                        ),
                    ));
                }
                value((c.arg & 31) as usize)
            }
        };
    }
    Ok(out)
}
