//! Warp-level operations: lane ids, shuffles, votes, matches, the warp barrier and warp
//! reductions (CUDA's `__shfl_*_sync`, `__all_sync`, `__ballot_sync`, `__match_*_sync`,
//! `__syncwarp`).
//!
//! A warp is 32 consecutive threads of a block, numbered x-fastest
//! ([`thread::linear_in_block`](crate::thread::linear_in_block)` / 32`). Every collective takes
//! an explicit member mask: the lanes that take part. Each lane named in the mask must reach
//! the same kind of call with the same mask; the calling lane must be in it. [`FULL_MASK`]
//! names the whole warp. In a block whose size is not a multiple of 32 the last warp is
//! partial: its missing lanes are inactive, as on the GPU (votes, ballots, matches and
//! integer reductions ignore them; a shuffle reading one is an error in the simulator, an
//! undefined value on the GPU). [`active_mask`] names the lanes that exist.
//!
//! On the GPU each call is one instruction (`shfl.sync`, `vote.sync`, `match.any.sync`,
//! `bar.warp.sync`, `redux.sync`). The simulator runs the lanes of a warp in lock-step at each
//! call: they meet, exchange values and continue; a mask naming a lane that has returned or
//! waits elsewhere, or a shuffle reading a lane outside the mask, is a located error. On both,
//! a lane calling a collective whose mask leaves it out stops the launch with a located error
//! (PTX leaves that case undefined); with a constant [`FULL_MASK`] the check costs nothing.
//!
//! ```
//! use berth_device::warp::{self, FULL_MASK};
//! // Outside a simulated launch the warp has one lane: lane 0 reads its own value.
//! assert_eq!(warp::shfl_xor(FULL_MASK, 7u32, 0), 7);
//! assert_eq!(warp::reduce_sum(warp::active_mask(), 5u32), 5);
//! ```

/// The mask naming all 32 lanes of a warp.
///
/// ```
/// use berth_device::warp::{self, FULL_MASK};
/// // Every lane of the warp takes part (a block of 32 × k threads).
/// let bits = warp::ballot(FULL_MASK & warp::active_mask(), true);
/// assert_eq!(FULL_MASK.count_ones(), 32);
/// assert_eq!(bits, 1); // outside an executor the warp is one lane
/// ```
pub const FULL_MASK: u32 = u32::MAX;

/// Threads per warp (32 on every NVIDIA GPU).
///
/// ```
/// assert_eq!(berth_device::warp::warp_size(), 32);
/// ```
#[inline(always)]
#[must_use]
pub const fn warp_size() -> usize {
    32
}

/// The calling thread's lane in its warp, `0..32` (PTX `%laneid`).
///
/// ```
/// assert_eq!(berth_device::warp::lane_id(), 0);
/// ```
#[inline(always)]
#[must_use]
pub fn lane_id() -> usize {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: reading a special register has no preconditions.
        (unsafe { nv::laneid() }) as usize
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::thread::linear_in_block() % 32
    }
}

/// Stops the launch (located at the caller's call) unless the calling lane is in `mask`: a
/// `*.sync` warp instruction executed by a lane outside its member mask is undefined behaviour
/// in PTX. For a constant [`FULL_MASK`] the test folds away; other masks pay a lane-id read and
/// a compare.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
#[track_caller]
fn caller_in_mask(mask: u32) {
    // SAFETY: reading a special register has no preconditions.
    let lane = unsafe { nv::laneid() };
    if mask & (1u32 << (lane & 31)) == 0 {
        crate::fail("a warp collective's mask leaves out the calling lane");
    }
}

/// The calling thread's warp within its block: `linear_in_block() / 32`.
///
/// ```
/// assert_eq!(berth_device::warp::warp_id(), 0);
/// ```
#[inline(always)]
#[must_use]
pub fn warp_id() -> usize {
    crate::thread::linear_in_block() / 32
}

/// The mask of lanes executing this call together (CUDA's `__activemask()`, PTX
/// `activemask.b32`). It synchronises nothing; use it to build a mask for a collective that
/// only the lanes of the current branch reach. The simulator, which does not model branch
/// divergence, returns every lane of the warp that exists and has not returned.
///
/// ```
/// assert_eq!(berth_device::warp::active_mask(), 1);
/// ```
#[inline(always)]
#[must_use]
pub fn active_mask() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: activemask has no preconditions.
        unsafe { nv::activemask() }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::host::warp_active_mask()
    }
}

/// Values a shuffle moves: 32-bit ones in one `shfl.sync`, 64-bit ones in two.
///
/// ```
/// use berth_device::warp::{self, FULL_MASK, Shuffle};
/// /// Lane 0's value in every lane, for any shuffled type.
/// fn broadcast<T: Shuffle>(v: T) -> T {
///     warp::shfl_idx(FULL_MASK, v, 0)
/// }
/// assert_eq!((broadcast(-1i32), broadcast(2.5f64), broadcast(u64::MAX)), (-1, 2.5, u64::MAX));
/// ```
pub trait Shuffle: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn to_bits64(self) -> u64;
    #[doc(hidden)]
    fn from_bits64(b: u64) -> Self;
    #[doc(hidden)]
    const WIDE: bool;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! shuffle32 {
    ($($t:ty => $to:expr, $from:expr;)*) => { $(
        impl sealed::Sealed for $t {}
        impl Shuffle for $t {
            #[inline(always)]
            fn to_bits64(self) -> u64 {
                u64::from($to(self))
            }
            #[inline(always)]
            fn from_bits64(b: u64) -> Self {
                $from(b as u32)
            }
            const WIDE: bool = false;
        }
    )* };
}
shuffle32! {
    u32 => |v| v, |b| b;
    i32 => |v: i32| v as u32, |b: u32| b as i32;
    f32 => f32::to_bits, f32::from_bits;
}

macro_rules! shuffle64 {
    ($($t:ty => $to:expr, $from:expr;)*) => { $(
        impl sealed::Sealed for $t {}
        impl Shuffle for $t {
            #[inline(always)]
            fn to_bits64(self) -> u64 {
                $to(self)
            }
            #[inline(always)]
            fn from_bits64(b: u64) -> Self {
                $from(b)
            }
            const WIDE: bool = true;
        }
    )* };
}
shuffle64! {
    u64 => |v| v, |b| b;
    i64 => |v: i64| v as u64, |b: u64| b as i64;
    f64 => f64::to_bits, f64::from_bits;
}

#[cfg(not(target_arch = "nvptx64"))]
use crate::host::warp::{Call, Op};

/// Run one lane's call: an instruction on the GPU, a rendezvous in the simulator.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
#[track_caller]
fn host_call(op: Op, mask: u32, value: u64, arg: u32) -> u64 {
    crate::host::warp_call(
        Call {
            op,
            mask,
            value,
            arg,
        },
        core::panic::Location::caller(),
    )
}

#[cfg(target_arch = "nvptx64")]
mod nv {
    // LLVM's NVPTX intrinsics: the declarations pick up the intrinsics' own attributes
    // (`convergent` among them), which keeps the optimiser from moving a warp call across
    // divergent control flow.
    unsafe extern "C" {
        #[link_name = "llvm.nvvm.read.ptx.sreg.laneid"]
        pub fn laneid() -> u32;
        #[link_name = "llvm.nvvm.activemask"]
        pub fn activemask() -> u32;
        #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
        pub fn shfl_idx(mask: u32, v: u32, lane: u32, c: u32) -> u32;
        #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
        pub fn shfl_up(mask: u32, v: u32, delta: u32, c: u32) -> u32;
        #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
        pub fn shfl_down(mask: u32, v: u32, delta: u32, c: u32) -> u32;
        #[link_name = "llvm.nvvm.shfl.sync.bfly.i32"]
        pub fn shfl_bfly(mask: u32, v: u32, lanes: u32, c: u32) -> u32;
        #[link_name = "llvm.nvvm.vote.all.sync"]
        pub fn vote_all(mask: u32, p: bool) -> bool;
        #[link_name = "llvm.nvvm.vote.any.sync"]
        pub fn vote_any(mask: u32, p: bool) -> bool;
        #[link_name = "llvm.nvvm.vote.ballot.sync"]
        pub fn vote_ballot(mask: u32, p: bool) -> u32;
        #[link_name = "llvm.nvvm.match.any.sync.i32"]
        pub fn match_any(mask: u32, v: u32) -> u32;
        #[link_name = "llvm.nvvm.bar.warp.sync"]
        pub fn bar_warp_sync(mask: u32);
        #[link_name = "llvm.nvvm.redux.sync.add"]
        pub fn redux_add(v: u32, mask: u32) -> u32;
        #[link_name = "llvm.nvvm.redux.sync.umin"]
        pub fn redux_umin(v: u32, mask: u32) -> u32;
        #[link_name = "llvm.nvvm.redux.sync.umax"]
        pub fn redux_umax(v: u32, mask: u32) -> u32;
        #[link_name = "llvm.nvvm.redux.sync.min"]
        pub fn redux_min(v: i32, mask: u32) -> i32;
        #[link_name = "llvm.nvvm.redux.sync.max"]
        pub fn redux_max(v: i32, mask: u32) -> i32;
    }

    /// The `c` operand of `shfl.sync`: clamp at lane 31, one segment of 32 lanes (idx, down,
    /// bfly); `up` clamps at lane 0.
    pub const CLAMP: u32 = 0x1f;
    pub const CLAMP_UP: u32 = 0;
}

macro_rules! shuffle_fn {
    ($(#[$doc:meta])* $name:ident, $intr:ident, $clamp:ident, $op:ident, $arg:ident) => {
        $(#[$doc])*
        #[inline(always)]
        #[track_caller]
        #[must_use]
        pub fn $name<T: Shuffle>(mask: u32, value: T, $arg: u32) -> T {
            #[cfg(target_arch = "nvptx64")]
            {
                let b = value.to_bits64();
                // SAFETY: shfl.sync has no memory effects, and the calling lane is in the
                // mask (`caller_in_mask`, the one case PTX leaves undefined). Lanes of the
                // mask that never arrive make it wait (a deadlock, which the simulator
                // reports); a source lane outside the mask gives unspecified bits, a valid
                // value of every `Shuffle` type (integers and floats).
                unsafe {
                    caller_in_mask(mask);
                    let lo = nv::$intr(mask, b as u32, $arg, nv::$clamp);
                    let hi = if T::WIDE {
                        nv::$intr(mask, (b >> 32) as u32, $arg, nv::$clamp)
                    } else {
                        0
                    };
                    T::from_bits64(u64::from(lo) | u64::from(hi) << 32)
                }
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                T::from_bits64(host_call(Op::$op, mask, value.to_bits64(), $arg))
            }
        }
    };
}

shuffle_fn! {
    /// `value` of lane `src_lane % 32` (CUDA's `__shfl_sync`, PTX `shfl.sync.idx`): a
    /// broadcast when every lane names one source.
    ///
    /// ```
    /// use berth_device::warp::{shfl_idx, FULL_MASK};
    /// assert_eq!(shfl_idx(FULL_MASK, -3i64, 0), -3);
    /// ```
    shfl_idx, shfl_idx, CLAMP, Idx, src_lane
}
shuffle_fn! {
    /// `value` of lane `lane_id() - delta`; lanes below `delta` keep their own (CUDA's
    /// `__shfl_up_sync`, PTX `shfl.sync.up`): the step of a warp prefix sum.
    ///
    /// ```
    /// use berth_device::warp::{shfl_up, FULL_MASK};
    /// assert_eq!(shfl_up(FULL_MASK, 1.5f32, 1), 1.5); // lane 0 keeps its value
    /// ```
    shfl_up, shfl_up, CLAMP_UP, Up, delta
}
shuffle_fn! {
    /// `value` of lane `lane_id() + delta`; lanes whose source is past lane 31 keep their own
    /// (CUDA's `__shfl_down_sync`, PTX `shfl.sync.down`).
    ///
    /// ```
    /// use berth_device::warp::{shfl_down, FULL_MASK};
    /// assert_eq!(shfl_down(FULL_MASK, 9u32, 32), 9); // lane 32 is past the warp: keeps its own
    /// ```
    shfl_down, shfl_down, CLAMP, Down, delta
}
shuffle_fn! {
    /// `value` of lane `lane_id() ^ lane_mask` (CUDA's `__shfl_xor_sync`, PTX
    /// `shfl.sync.bfly`): the butterfly step of a warp reduction.
    ///
    /// ```
    /// use berth_device::warp::{shfl_xor, FULL_MASK};
    /// assert_eq!(shfl_xor(FULL_MASK, 2.0f64, 0), 2.0);
    /// ```
    shfl_xor, shfl_bfly, CLAMP, Xor, lane_mask
}

/// Whether `pred` holds in every lane of `mask` (CUDA's `__all_sync`, PTX `vote.sync.all`).
///
/// ```
/// assert!(berth_device::warp::all(berth_device::warp::FULL_MASK, true));
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn all(mask: u32, pred: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: see `shfl_idx`.
    unsafe {
        caller_in_mask(mask);
        nv::vote_all(mask, pred)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::All, mask, u64::from(pred), 0) != 0
    }
}

/// Whether `pred` holds in any lane of `mask` (CUDA's `__any_sync`, PTX `vote.sync.any`).
///
/// ```
/// assert!(!berth_device::warp::any(berth_device::warp::FULL_MASK, false));
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn any(mask: u32, pred: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: see `shfl_idx`.
    unsafe {
        caller_in_mask(mask);
        nv::vote_any(mask, pred)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::Any, mask, u64::from(pred), 0) != 0
    }
}

/// The lanes of `mask` whose `pred` holds, as a bit mask (CUDA's `__ballot_sync`, PTX
/// `vote.sync.ballot`).
///
/// ```
/// assert_eq!(berth_device::warp::ballot(berth_device::warp::FULL_MASK, true), 1);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn ballot(mask: u32, pred: bool) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: see `shfl_idx`.
    unsafe {
        caller_in_mask(mask);
        nv::vote_ballot(mask, pred)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::Ballot, mask, u64::from(pred), 0) as u32
    }
}

/// 32-bit values [`match_any`] and [`match_all`] compare.
///
/// ```
/// use berth_device::warp::{self, Match};
/// /// The lanes that hold the same key as this one, and whether all of the mask agree.
/// fn peers<T: Match>(mask: u32, key: T) -> (u32, bool) {
///     (warp::match_any(mask, key), warp::match_all(mask, key) == mask)
/// }
/// assert_eq!(peers(warp::active_mask(), 0.5f32), (1, true));
/// ```
pub trait Match: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn bits(self) -> u32;
}
impl Match for u32 {
    #[inline(always)]
    fn bits(self) -> u32 {
        self
    }
}
impl Match for i32 {
    #[inline(always)]
    fn bits(self) -> u32 {
        self as u32
    }
}
impl Match for f32 {
    #[inline(always)]
    fn bits(self) -> u32 {
        self.to_bits()
    }
}

/// The lanes of `mask` holding the same `value` as the caller (bitwise for `f32`; CUDA's
/// `__match_any_sync`, PTX `match.any.sync.b32`, sm_70+): groups lanes by key.
///
/// ```
/// assert_eq!(berth_device::warp::match_any(berth_device::warp::FULL_MASK, 42u32), 1);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn match_any<T: Match>(mask: u32, value: T) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: see `shfl_idx`.
    unsafe {
        caller_in_mask(mask);
        nv::match_any(mask, value.bits())
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::MatchAny, mask, u64::from(value.bits()), 0) as u32
    }
}

/// `mask` if every lane of `mask` holds the same `value` (bitwise for `f32`), else 0
/// (CUDA's `__match_all_sync`, PTX `match.all.sync.b32`, sm_70+).
///
/// ```
/// assert_eq!(berth_device::warp::match_all(1, 7i32), 1);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn match_all<T: Match>(mask: u32, value: T) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let d: u32;
        caller_in_mask(mask);
        // SAFETY: match.all.sync reads registers only; the caller is in the mask (checked
        // above), see `shfl_idx`.
        unsafe {
            core::arch::asm!(
                "match.all.sync.b32 {d}, {v}, {m};",
                d = out(reg32) d,
                v = in(reg32) value.bits(),
                m = in(reg32) mask,
                options(nomem, nostack),
            );
        }
        d
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::MatchAll, mask, u64::from(value.bits()), 0) as u32
    }
}

/// Warp barrier (CUDA's `__syncwarp(mask)`, PTX `bar.warp.sync`): the lanes of `mask` wait
/// for each other, and memory they wrote before it is visible to them after it.
///
/// ```
/// berth_device::warp::sync_warp(berth_device::warp::FULL_MASK);
/// ```
#[inline(always)]
#[track_caller]
pub fn sync_warp(mask: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: see `shfl_idx`.
    unsafe {
        caller_in_mask(mask);
        nv::bar_warp_sync(mask)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host_call(Op::Sync, mask, 0, 0);
    }
}

/// Values a warp reduction combines. Floats reduce with butterfly shuffles (five
/// `shfl.sync.bfly` steps: every lane gets the same result, combined in the same order);
/// `u32`/`i32` use one `redux.sync` instruction (sm_80+). The mask must be [`FULL_MASK`] or
/// name whole aligned groups of 2, 4, 8 or 16 lanes for floats.
///
/// ```
/// use berth_device::warp::{self, FULL_MASK, Reduce};
/// /// The warp's (sum, min, max) of one value per lane.
/// fn stats<T: Reduce>(v: T) -> (T, T, T) {
///     (warp::reduce_sum(FULL_MASK, v), warp::reduce_min(FULL_MASK, v), warp::reduce_max(FULL_MASK, v))
/// }
/// // Outside an executor the warp has one lane. Integers reduce over the lanes that exist;
/// // a float reduction shuffles across all of its mask, so it needs a block of whole warps.
/// assert_eq!(stats(-3i32), (-3, -3, -3));
/// assert_eq!(stats(7u32), (7, 7, 7));
/// ```
pub trait Reduce: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn warp_sum(mask: u32, v: Self) -> Self;
    #[doc(hidden)]
    fn warp_min(mask: u32, v: Self) -> Self;
    #[doc(hidden)]
    fn warp_max(mask: u32, v: Self) -> Self;
}

#[inline(always)]
#[track_caller]
fn butterfly(mask: u32, mut v: f32, f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut lanes = 16;
    while lanes > 0 {
        v = f(v, shfl_xor(mask, v, lanes));
        lanes /= 2;
    }
    v
}

impl Reduce for f32 {
    #[inline(always)]
    #[track_caller]
    fn warp_sum(mask: u32, v: f32) -> f32 {
        butterfly(mask, v, |a, b| a + b)
    }
    #[inline(always)]
    #[track_caller]
    fn warp_min(mask: u32, v: f32) -> f32 {
        butterfly(mask, v, f32::min)
    }
    #[inline(always)]
    #[track_caller]
    fn warp_max(mask: u32, v: f32) -> f32 {
        butterfly(mask, v, f32::max)
    }
}

macro_rules! redux {
    ($t:ty, $sum:ident, $min:ident, $max:ident, $osum:ident, $omin:ident, $omax:ident) => {
        impl Reduce for $t {
            #[inline(always)]
            #[track_caller]
            fn warp_sum(mask: u32, v: $t) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: see `shfl_idx`.
                unsafe {
                    caller_in_mask(mask);
                    nv::$sum(v as u32, mask) as $t
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    host_call(Op::$osum, mask, u64::from(v as u32), 0) as u32 as $t
                }
            }
            #[inline(always)]
            #[track_caller]
            fn warp_min(mask: u32, v: $t) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: see `shfl_idx`.
                unsafe {
                    caller_in_mask(mask);
                    nv::$min(v as _, mask) as $t
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    host_call(Op::$omin, mask, u64::from(v as u32), 0) as u32 as $t
                }
            }
            #[inline(always)]
            #[track_caller]
            fn warp_max(mask: u32, v: $t) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: see `shfl_idx`.
                unsafe {
                    caller_in_mask(mask);
                    nv::$max(v as _, mask) as $t
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    host_call(Op::$omax, mask, u64::from(v as u32), 0) as u32 as $t
                }
            }
        }
    };
}
redux!(
    u32, redux_add, redux_umin, redux_umax, SumU32, MinU32, MaxU32
);
redux!(i32, redux_add, redux_min, redux_max, SumU32, MinI32, MaxI32);

/// The sum of `value` over the lanes of `mask`, in every lane (wrapping for integers).
///
/// ```
/// use berth_device::warp::{reduce_sum, FULL_MASK};
/// assert_eq!(reduce_sum(FULL_MASK, 3u32), 3);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn reduce_sum<T: Reduce>(mask: u32, value: T) -> T {
    T::warp_sum(mask, value)
}

/// The minimum of `value` over the lanes of `mask`, in every lane (`f32::min` for floats:
/// a NaN loses to a number).
///
/// ```
/// use berth_device::warp::{reduce_min, FULL_MASK};
/// assert_eq!(reduce_min(FULL_MASK, -3i32), -3);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn reduce_min<T: Reduce>(mask: u32, value: T) -> T {
    T::warp_min(mask, value)
}

/// The maximum of `value` over the lanes of `mask`, in every lane (`f32::max` for floats).
///
/// ```
/// use berth_device::warp::{reduce_max, FULL_MASK};
/// assert_eq!(reduce_max(FULL_MASK, 7u32), 7);
/// ```
#[inline(always)]
#[track_caller]
#[must_use]
pub fn reduce_max<T: Reduce>(mask: u32, value: T) -> T {
    T::warp_max(mask, value)
}
