//! Warpgroup matrix multiply-accumulate (`wgmma.mma_async`, sm_90a): the four warps of a
//! warpgroup (128 threads, `128 k..128 k + 128` of the block) multiply a 64×16 tile A by a
//! 16×N tile B, read from shared memory through matrix descriptors (A also from registers),
//! and add the product into a 64×N accumulator of `f32` spread over the group's registers ([`Acc`]).
//!
//! # Operands
//!
//! In [`mma_async`] both operands are "K-major": A is 64 rows (m) of 16 elements (k), B is N rows (n) of 16
//! elements (k) — B stored as its transpose, as in `C = A · Bᵀ` with A and B row-major. They
//! live in [`SwizzledTile`]s (rows of 128 bytes, 128-byte swizzle, as the bulk copies of
//! [`crate::tma`] write them); [`SwizzledTile::desc`] names rows `row..row + R` and columns
//! `k..k + 16` of one as a [`Desc`] (start address, a stride of 1024 bytes between groups of
//! eight rows, the swizzle mode), and the row count `R` is in the descriptor's type: A's is
//! 64, B's is N, or the call does not compile.
//!
//! [`mma_async_rs`] is the register form: A comes from the warpgroup's registers ([`RegA`],
//! eight elements a thread, laid out as an accumulator's 16 columns, so
//! [`RegA::from_acc`] turns a product into the next product's A), and B is either K-major or
//! N-major — 16 k rows of N contiguous columns, as a row-major K×N matrix is stored
//! ([`SwizzledTile::desc_mn`], a [`DescMn`]; the instruction's transpose bit).
//!
//! # Asynchrony and the contract
//!
//! [`mma_async`] starts the product and returns; the accumulator's registers belong to the
//! tensor cores until a [`wait`] covers it. The order is: [`fence`] (before the first
//! `mma_async` and after anything else wrote the accumulator), the `mma_async`s, [`commit`]
//! (closes them into a group), [`wait::<N>`](wait) (at most `N` groups in flight). The
//! compiler cannot see this protocol: ptxas, which can, serialises the products where an
//! accumulator is touched too early, so a mistake costs time, not correctness, in the
//! registers. The shared-memory operands must not be written until the wait; that is the
//! `unsafe` contract of [`mma_async`], with its being warpgroup-wide (`.sync.aligned`).
//!
//! Numbers: products of two `bf16` (or `f16`) are exact in `f32`, sums are `f32`.
//!
//! # On the simulator
//!
//! Each thread computes its own accumulator elements when [`mma_async`] (or
//! [`mma_async_rs`], which gathers its A rows from its warp's lanes) is called, reading A
//! and B through the descriptors exactly as the hardware decodes them (start address, stride
//! between eight-row groups, the 128-byte swizzle on the address bits), so a wrong descriptor
//! gives wrong numbers there too; reads of bytes a bulk copy wrote are checked against its
//! mbarrier ([`crate::tma`]). The fence, commit and wait have nothing to do there.
//!
//! ```
//! use berth_device::wgmma::Acc;
//! // Thread 0 of the warpgroup holds rows 0 and 8, columns 0, 1 of each 8-column slice.
//! assert_eq!(Acc::<32>::coords(0, 0), (0, 0));
//! assert_eq!(Acc::<32>::coords(0, 6), (8, 8));
//! assert_eq!(Acc::<32>::coords(37, 1), (17, 3));
//! ```

use crate::mma::MmaInput;
use crate::tma::SwizzledTile;
use core::marker::PhantomData;

#[cfg(target_arch = "nvptx64")]
mod ops;
#[cfg(target_arch = "nvptx64")]
mod ops_rs;

/// A matrix descriptor of rows `row..row + R` (`R` a multiple of 8), 16 columns, of a
/// [`SwizzledTile`] of `T` (from [`SwizzledTile::desc`]).
///
/// ```
/// use berth_device::{bf16, tma::SwizzledTile, shared::Shared};
/// #[repr(align(1024))]
/// struct Backing([bf16; 64 * 64]);
/// let mut b = Backing([bf16::ZERO; 64 * 64]);
/// // SAFETY: a host test: one thread; the array outlives the handle.
/// let tile = SwizzledTile::<bf16, 64>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 4096) }, 0);
/// let d = tile.desc::<64>(0, 16);
/// assert_eq!(d.bits() >> 62, 1); // the 128-byte swizzle
/// assert_eq!(d.bits() >> 32 & 0x3fff, 1024 >> 4); // eight rows apart
/// ```
pub struct Desc<T, const R: usize> {
    bits: u64,
    /// The address bits above the 18 the descriptor holds (the simulator's shared memory is
    /// host memory).
    #[cfg(not(target_arch = "nvptx64"))]
    hi: usize,
    _t: PhantomData<T>,
}

impl<T, const R: usize> Clone for Desc<T, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const R: usize> Copy for Desc<T, R> {}

impl<T, const R: usize> Desc<T, R> {
    /// The descriptor's 64 bits, as `wgmma` reads them: bits 0–13 the start address / 16,
    /// 16–29 the leading byte offset / 16, 32–45 the stride byte offset / 16, 62–63 the
    /// swizzle mode (1: 128 bytes).
    ///
    /// ```
    /// use berth_device::{tma::SwizzledTile, shared::Shared};
    /// #[repr(align(1024))]
    /// struct Backing([u16; 8 * 64]);
    /// let mut b = Backing([0; 8 * 64]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let tile = SwizzledTile::<u16, 8>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 512) }, 0);
    /// assert_eq!(tile.desc::<8>(0, 16).bits() & 0x3fff, (tile.desc::<8>(0, 0).bits() & 0x3fff) + 2);
    /// ```
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.bits
    }
}

impl<T: Copy + Send, const ROWS: usize> SwizzledTile<T, ROWS> {
    /// The descriptor of rows `row..row + R` and columns `k..k + 16` of the tile: `row` a
    /// multiple of 8, `k` of 16 with `k + 16` at most [`COLS`](Self::COLS) (else the thread
    /// stops with a located report); `R` a multiple of 8, at most `ROWS` (else it does not
    /// compile).
    ///
    /// ```
    /// use berth_device::{bf16, tma::SwizzledTile, shared::Shared};
    /// #[repr(align(1024))]
    /// struct Backing([bf16; 128 * 64]);
    /// let mut b = Backing([bf16::ZERO; 128 * 64]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let tile = SwizzledTile::<bf16, 128>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 128 * 64) }, 0);
    /// let upper = tile.desc::<64>(64, 48); // rows 64..128, columns 48..64
    /// assert_eq!(upper.bits() & 0x3fff, ((b.0.as_ptr() as u64 + 64 * 128 + 96) & 0x3ffff) >> 4);
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn desc<const R: usize>(&self, row: usize, k: usize) -> Desc<T, R> {
        const {
            assert!(
                R.is_multiple_of(8) && R > 0 && R <= ROWS,
                "a descriptor names a multiple of 8 rows of the tile"
            )
        };
        if !row.is_multiple_of(8) || row + R > ROWS || !k.is_multiple_of(16) || k + 16 > Self::COLS
        {
            crate::panic::fail(
                "wgmma descriptor: rows must start at a multiple of 8 and stay in the tile, columns at a multiple of 16 and stay in the row",
            );
        }
        let at = self.as_ptr().wrapping_add(row * Self::COLS + k);
        #[cfg(target_arch = "nvptx64")]
        let addr = u64::from(crate::mbarrier::shared_addr(at));
        #[cfg(not(target_arch = "nvptx64"))]
        let addr = at as u64;
        let bits = ((addr & 0x3ffff) >> 4) | 1 << 16 | (1024u64 >> 4) << 32 | 1 << 62;
        Desc {
            bits,
            #[cfg(not(target_arch = "nvptx64"))]
            hi: at as usize & !0x3ffff,
            _t: PhantomData,
        }
    }
}

/// A warpgroup's 64×N accumulator of `f32`, `REGS = N / 2` per thread (N = 64, 128 or 256:
/// `REGS` 32, 64 or 128). Thread `t` of the group (warp `w = t / 32`, lane `l = t % 32`)
/// holds, for each 8-column slice `j`, rows `16 w + l / 4` and `+ 8`, columns `8 j + 2 (l %
/// 4)` and `+ 1` ([`coords`](Self::coords)).
///
/// ```
/// use berth_device::wgmma::Acc;
/// let mut acc = Acc::<64>::zero();
/// assert_eq!(acc.regs().len(), 64);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Acc<const REGS: usize> {
    regs: [f32; REGS],
}

impl<const REGS: usize> Acc<REGS> {
    /// All zeros.
    ///
    /// ```
    /// assert_eq!(berth_device::wgmma::Acc::<32>::zero().regs()[5], 0.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn zero() -> Self {
        Self { regs: [0.0; REGS] }
    }

    /// The `(row, column)` of register `i` of thread `t` (`0..128`) of the warpgroup.
    ///
    /// ```
    /// use berth_device::wgmma::Acc;
    /// assert_eq!(Acc::<128>::coords(127, 127), (63, 255));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(t: usize, i: usize) -> (usize, usize) {
        let (w, l) = (t / 32 % 4, t % 32);
        (
            16 * w + l / 4 + 8 * (i / 2 % 2),
            8 * (i / 4) + 2 * (l % 4) + i % 2,
        )
    }

    /// The thread's registers, in [`coords`](Self::coords) order. Call it only after a
    /// [`wait`] that covers every product into them: on the GPU it passes the registers
    /// through an empty asm statement, which the compiler keeps after the wait, so no read of
    /// them is moved above it (the compiler does not know that `mma_async` writes them
    /// later than it returns).
    ///
    /// ```
    /// assert_eq!(berth_device::wgmma::Acc::<32>::zero().regs(), &[0.0; 32]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn regs(&mut self) -> &[f32; REGS] {
        #[cfg(target_arch = "nvptx64")]
        {
            let regs: *mut f32 = self.regs.as_mut_ptr();
            // SAFETY (each arm): `REGS` is the arm's register count, so the cast names the
            // same array.
            unsafe {
                match REGS {
                    32 => ops::fence_operands_32(&mut *regs.cast()),
                    64 => ops::fence_operands_64(&mut *regs.cast()),
                    128 => ops::fence_operands_128(&mut *regs.cast()),
                    _ => {}
                }
            }
        }
        &self.regs
    }

    /// The thread's registers to change in place (a rescale), in [`coords`](Self::coords)
    /// order. As [`regs`](Self::regs): call it only after a [`wait`] that covers every product
    /// into them, and [`fence`] before the next `mma_async` into them.
    ///
    /// ```
    /// let mut acc = berth_device::wgmma::Acc::<32>::zero();
    /// acc.regs_mut()[3] = 2.0;
    /// assert_eq!(acc.regs()[3], 2.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn regs_mut(&mut self) -> &mut [f32; REGS] {
        let _ = self.regs();
        &mut self.regs
    }
}

/// LLVM's NVPTX intrinsics for the warpgroup-wide instructions that take no register operands.
/// Unlike inline PTX, they are `convergent`: the optimiser never duplicates one into paths
/// that only some lanes take (jump threading would copy a `wait_group` that follows
/// `if lane == 0 { arrive }` into both arms, and an `.aligned` instruction reached by part of
/// a warp hangs the warpgroup), nor moves one across divergent control flow.
#[cfg(target_arch = "nvptx64")]
mod nv {
    unsafe extern "C" {
        #[link_name = "llvm.nvvm.wgmma.fence.sync.aligned"]
        pub fn fence();
        #[link_name = "llvm.nvvm.wgmma.commit_group.sync.aligned"]
        pub fn commit_group();
        #[link_name = "llvm.nvvm.wgmma.wait_group.sync.aligned"]
        pub fn wait_group(n: u64);
        #[link_name = "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32"]
        pub fn setmaxnreg_inc(n: u32);
        #[link_name = "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32"]
        pub fn setmaxnreg_dec(n: u32);
    }
}

/// Order this thread's earlier register and shared-memory accesses before the `mma_async`s
/// that follow (`wgmma.fence.sync.aligned`): needed before the first one, and after the
/// accumulator was written by anything else. Warpgroup-wide on the GPU.
///
/// # Safety
/// Every thread of the warpgroup reaches the call together (`.sync.aligned`).
///
/// ```
/// // On the host a fence has nothing to order.
/// // SAFETY: one thread, its own warpgroup here.
/// unsafe { berth_device::wgmma::fence() };
/// ```
#[inline(always)]
pub unsafe fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: orders accesses; the caller has the warpgroup reach it together.
    unsafe {
        nv::fence()
    };
}

/// Close this thread's `mma_async`s not yet committed into a group
/// (`wgmma.commit_group.sync.aligned`).
///
/// # Safety
/// Every thread of the warpgroup reaches the call together.
///
/// ```
/// // SAFETY: one thread, its own warpgroup here.
/// unsafe { berth_device::wgmma::commit() };
/// ```
#[inline(always)]
pub unsafe fn commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `fence`.
    unsafe {
        nv::commit_group()
    };
}

/// Wait until at most `N` groups of this thread's `mma_async`s are in flight
/// (`wgmma.wait_group.sync.aligned N`): the accumulators of the older ones are ready and
/// their shared-memory operands may be written again.
///
/// # Safety
/// Every thread of the warpgroup reaches the call together.
///
/// ```
/// // SAFETY: one thread, its own warpgroup here.
/// unsafe { berth_device::wgmma::wait::<0>() };
/// ```
#[inline(always)]
pub unsafe fn wait<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `fence`. To LLVM the intrinsic may read and write any memory, so no access
    // moves across it: the operands' shared memory is free after it.
    unsafe {
        nv::wait_group(N as u64)
    };
    // The simulator reads the operands when the product is issued; meeting the warp here
    // keeps a lane's signal "the operands are free" (an arrival after the wait) behind every
    // lane's reads, as the aligned wait does on the GPU.
    #[cfg(not(target_arch = "nvptx64"))]
    crate::warp::sync_warp(u32::MAX);
}

/// `acc = a · bᵀ + (accumulate ? acc : 0)` by the warpgroup
/// (`wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{T}.{T}`, N = `2 * REGS`): `a` names 64
/// rows (m) by 16 (k), `b` N rows (n) by 16 (k), both in shared memory.
///
/// # Safety
/// - Every thread of the warpgroup (threads `128 k..128 k + 128` of the block) reaches the
///   call together, with the same descriptors.
/// - Nothing writes the operands' shared memory until a [`wait`] covers the call, and the
///   bytes a bulk copy wrote there are read only after waiting for its barrier phase.
///
/// ```should_panic
/// use berth_device::{bf16, tma::SwizzledTile, shared::Shared, wgmma::{self, Acc}};
/// #[repr(align(1024))]
/// struct Backing([bf16; 64 * 64]);
/// let mut b = Backing([bf16::ONE; 64 * 64]);
/// // SAFETY: a host test: one thread; the array outlives the handle.
/// let tile = SwizzledTile::<bf16, 64>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 4096) }, 0);
/// let mut acc = Acc::<32>::zero();
/// // Outside a launch of whole warpgroups this stops with a report.
/// // SAFETY: (not met: a block of one thread) the warpgroup reaches it together.
/// unsafe { wgmma::mma_async(&mut acc, tile.desc::<64>(0, 0), tile.desc::<64>(0, 0), false) };
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn mma_async<T: MmaInput, const REGS: usize, const RB: usize>(
    acc: &mut Acc<REGS>,
    a: Desc<T, 64>,
    b: Desc<T, RB>,
    accumulate: bool,
) {
    const {
        assert!(
            RB == 2 * REGS && matches!(RB, 64 | 128 | 256),
            "wgmma: B has N = 64, 128 or 256 rows and the accumulator N / 2 registers"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    {
        let (ab, bb, s) = (a.bits, b.bits, u32::from(accumulate));
        let regs: *mut f32 = acc.regs.as_mut_ptr();
        // SAFETY (each arm): `REGS` is the arm's register count (checked above), so the cast
        // names the same array; the rest is the caller's contract, forwarded.
        unsafe {
            match (RB, T::IS_BF16) {
                (64, true) => ops::m64n64_bf16(&mut *regs.cast(), ab, bb, s),
                (64, false) => ops::m64n64_f16(&mut *regs.cast(), ab, bb, s),
                (128, true) => ops::m64n128_bf16(&mut *regs.cast(), ab, bb, s),
                (128, false) => ops::m64n128_f16(&mut *regs.cast(), ab, bb, s),
                (_, true) => ops::m64n256_bf16(&mut *regs.cast(), ab, bb, s),
                (_, false) => ops::m64n256_f16(&mut *regs.cast(), ab, bb, s),
            }
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    host::mma(
        &mut acc.regs,
        (a.bits, a.hi),
        (b.bits, b.hi),
        accumulate,
        |bits| T::from_bits(bits).widen(),
        core::panic::Location::caller(),
    );
}

/// Let this warpgroup's threads use up to `N` registers each (`setmaxnreg.inc.sync.aligned`,
/// sm_90a; `N` a multiple of 8, 24 to 256): for the warpgroups that hold accumulators, while
/// another gives registers back with [`release_registers`].
///
/// # Safety
/// Every thread of the warpgroup reaches the call together; the block's register file holds
/// what every warpgroup asks for.
///
/// ```
/// // On the host registers are not counted.
/// // SAFETY: one thread, its own warpgroup here.
/// unsafe { berth_device::wgmma::claim_registers::<232>() };
/// ```
#[inline(always)]
pub unsafe fn claim_registers<const N: u32>() {
    const {
        assert!(
            N.is_multiple_of(8) && N >= 24 && N <= 256,
            "setmaxnreg takes a multiple of 8 from 24 to 256"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        nv::setmaxnreg_inc(N)
    };
}

/// Give registers back: this warpgroup's threads use at most `N` each from here
/// (`setmaxnreg.dec.sync.aligned`, sm_90a), for a warpgroup that only issues copies.
///
/// # Safety
/// As [`claim_registers`].
///
/// ```
/// // SAFETY: one thread, its own warpgroup here.
/// unsafe { berth_device::wgmma::release_registers::<40>() };
/// ```
#[inline(always)]
pub unsafe fn release_registers<const N: u32>() {
    const {
        assert!(
            N.is_multiple_of(8) && N >= 24 && N <= 256,
            "setmaxnreg takes a multiple of 8 from 24 to 256"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        nv::setmaxnreg_dec(N)
    };
}

/// A matrix descriptor of an N-major ("MN-major", transposed) B operand: 16 rows (k) by `N`
/// columns (n) with the columns contiguous, in a [`SwizzledTile`] (from
/// [`SwizzledTile::desc_mn`]). `N` is a multiple of the tile's row (64 `bf16`): each 64
/// columns are one block of the tile's rows, `block_rows` rows apart.
///
/// This is the layout of `v` in `o = p · v` with `v` row-major `[keys][d]`: the keys are k,
/// the head dimension n.
///
/// ```
/// use berth_device::{bf16, tma::SwizzledTile, shared::Shared};
/// #[repr(align(1024))]
/// struct Backing([bf16; 256 * 64]);
/// let mut b = Backing([bf16::ZERO; 256 * 64]);
/// // SAFETY: a host test: one thread; the array outlives the handle.
/// let tile = SwizzledTile::<bf16, 256>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 256 * 64) }, 0);
/// // Keys 16..32 of a 128-key tile of v with d = 128: columns 64..128 are rows 128..256.
/// let d = tile.desc_mn::<128>(16, 128);
/// assert_eq!(d.bits() >> 16 & 0x3fff, 128 * 128 >> 4); // the next 64 columns
/// assert_eq!(d.bits() >> 32 & 0x3fff, 1024 >> 4); // the next eight keys
/// ```
pub struct DescMn<T, const N: usize> {
    bits: u64,
    #[cfg(not(target_arch = "nvptx64"))]
    hi: usize,
    _t: PhantomData<T>,
}

impl<T, const N: usize> Clone for DescMn<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for DescMn<T, N> {}

impl<T, const N: usize> DescMn<T, N> {
    /// The descriptor's 64 bits, as `wgmma` reads them: bits 0–13 the start address / 16,
    /// 16–29 the leading byte offset / 16 (from one 64-column block to the next), 32–45 the
    /// stride byte offset / 16 (from one group of eight k rows to the next: 1024 bytes), 62–63
    /// the swizzle mode (1: 128 bytes).
    ///
    /// ```
    /// use berth_device::{bf16, tma::SwizzledTile, shared::Shared};
    /// #[repr(align(1024))]
    /// struct Backing([bf16; 64 * 64]);
    /// let mut b = Backing([bf16::ZERO; 64 * 64]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let tile = SwizzledTile::<bf16, 64>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 4096) }, 0);
    /// // Sixteen k rows later: 2048 bytes on (the 14-bit field of a host address wraps).
    /// let start = |k| tile.desc_mn::<64>(k, 64).bits() & 0x3fff;
    /// assert_eq!(start(16), (start(0) + 128) & 0x3fff);
    /// ```
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.bits
    }
}

impl<T: Copy + Send, const ROWS: usize> SwizzledTile<T, ROWS> {
    /// The N-major B descriptor of k rows `k..k + 16` and columns `0..N` of the matrix the tile
    /// holds in blocks of [`COLS`](Self::COLS) columns: column `c` of k row `r` is element
    /// `(b * block_rows + r, c % COLS)` of the tile, `b = c / COLS` (so a matrix of `N` columns
    /// is `N / COLS` bulk copies of `block_rows` rows, one below the other). `k` a multiple of
    /// 8, `block_rows` of 8, and the last block's rows inside the tile (else the thread stops
    /// with a located report); `N` a multiple of `COLS` from 64 to 256 (else it does not
    /// compile).
    ///
    /// ```
    /// use berth_device::{bf16, tma::SwizzledTile, shared::Shared};
    /// #[repr(align(1024))]
    /// struct Backing([bf16; 128 * 64]);
    /// let mut b = Backing([bf16::ZERO; 128 * 64]);
    /// // SAFETY: a host test: one thread; the array outlives the handle.
    /// let tile = SwizzledTile::<bf16, 128>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 128 * 64) }, 0);
    /// let d = tile.desc_mn::<64>(32, 128); // k rows 32..48, columns 0..64
    /// assert_eq!(d.bits() & 0x3fff, ((b.0.as_ptr() as u64 + 32 * 128) & 0x3ffff) >> 4);
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn desc_mn<const N: usize>(&self, k: usize, block_rows: usize) -> DescMn<T, N> {
        const {
            assert!(
                N.is_multiple_of(Self::COLS) && N >= 64 && N <= 256,
                "an N-major descriptor names 64 to 256 columns, whole rows of the tile"
            )
        };
        let blocks = N / Self::COLS;
        if !k.is_multiple_of(8)
            || !block_rows.is_multiple_of(8)
            || (blocks > 1 && block_rows < k + 16)
            || (blocks - 1) * block_rows + k + 16 > ROWS
        {
            crate::panic::fail(
                "wgmma N-major descriptor: k rows must start at a multiple of 8, blocks be a multiple of 8 rows apart holding the 16 rows, and every block stay in the tile",
            );
        }
        let at = self.as_ptr().wrapping_add(k * Self::COLS);
        #[cfg(target_arch = "nvptx64")]
        let addr = u64::from(crate::mbarrier::shared_addr(at));
        #[cfg(not(target_arch = "nvptx64"))]
        let addr = at as u64;
        let lbo = (block_rows * 128) as u64;
        let bits = ((addr & 0x3ffff) >> 4) | (lbo >> 4) << 16 | (1024u64 >> 4) << 32 | 1 << 62;
        DescMn {
            bits,
            #[cfg(not(target_arch = "nvptx64"))]
            hi: at as usize & !0x3ffff,
            _t: PhantomData,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T, const R: usize> Sealed for super::Desc<T, R> {}
    impl<T, const N: usize> Sealed for super::DescMn<T, N> {}
}

/// A B operand of [`mma_async_rs`]: a K-major [`Desc`] (`N` rows of 16 k, as in `a · bᵀ`) or an
/// N-major [`DescMn`] (16 k rows of `N` columns, as in `a · b`).
///
/// ```
/// use berth_device::{bf16, wgmma::{BOperand, Desc, DescMn}};
/// assert_eq!(<Desc<bf16, 128> as BOperand<bf16>>::N, 128);
/// assert!(<DescMn<bf16, 64> as BOperand<bf16>>::TRANSPOSED);
/// ```
pub trait BOperand<T>: Copy + sealed::Sealed {
    /// The columns of B (n).
    ///
    /// ```
    /// use berth_device::{f16, wgmma::{BOperand, DescMn}};
    /// assert_eq!(<DescMn<f16, 256> as BOperand<f16>>::N, 256);
    /// ```
    const N: usize;
    /// Whether B is N-major (the instruction's `imm-trans-b`).
    ///
    /// ```
    /// use berth_device::{f16, wgmma::{BOperand, Desc}};
    /// assert!(!<Desc<f16, 64> as BOperand<f16>>::TRANSPOSED);
    /// ```
    const TRANSPOSED: bool;
    #[doc(hidden)]
    fn parts(&self) -> (u64, usize);
}

impl<T, const R: usize> BOperand<T> for Desc<T, R> {
    const N: usize = R;
    const TRANSPOSED: bool = false;
    #[inline(always)]
    fn parts(&self) -> (u64, usize) {
        #[cfg(target_arch = "nvptx64")]
        let hi = 0;
        #[cfg(not(target_arch = "nvptx64"))]
        let hi = self.hi;
        (self.bits, hi)
    }
}

impl<T, const N: usize> BOperand<T> for DescMn<T, N> {
    const N: usize = N;
    const TRANSPOSED: bool = true;
    #[inline(always)]
    fn parts(&self) -> (u64, usize) {
        #[cfg(target_arch = "nvptx64")]
        let hi = 0;
        #[cfg(not(target_arch = "nvptx64"))]
        let hi = self.hi;
        (self.bits, hi)
    }
}

/// A thread's part of a 64×16 A operand of `T` held in registers, for [`mma_async_rs`]: eight
/// elements in four 32-bit registers. Thread `t` of the warpgroup (warp `w`, lane `l`) holds
/// rows `16 w + l / 4` and `+ 8`, columns `2 (l % 4)`, `+ 1`, `+ 8`, `+ 9`
/// ([`coords`](Self::coords)) — the places of accumulator registers `8 j..8 j + 8` of an
/// [`Acc`] in its columns `16 j..16 j + 16`, so a product's rows become the next product's A
/// without leaving the registers ([`from_acc`](Self::from_acc)).
///
/// ```
/// use berth_device::{bf16, wgmma::{Acc, RegA}};
/// for t in 0..128 {
///     for e in 0..8 {
///         let (r, c) = RegA::<bf16>::coords(t, e);
///         assert_eq!(Acc::<64>::coords(t, 8 * 3 + e), (r, 16 * 3 + c));
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RegA<T> {
    regs: [u32; 4],
    _t: PhantomData<T>,
}

impl<T: MmaInput> RegA<T> {
    /// The `(row, column)` of element `e` (`0..8`) of thread `t` (`0..128`) of the warpgroup.
    ///
    /// ```
    /// use berth_device::{bf16, wgmma::RegA};
    /// assert_eq!(RegA::<bf16>::coords(0, 6), (8, 8));
    /// assert_eq!(RegA::<bf16>::coords(127, 7), (63, 15));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn coords(t: usize, e: usize) -> (usize, usize) {
        let (w, l) = (t / 32 % 4, t % 32);
        (
            16 * w + l / 4 + 8 * (e / 2 % 2),
            8 * (e / 4) + 2 * (l % 4) + e % 2,
        )
    }

    /// The fragment of elements `x`, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// use berth_device::{bf16, wgmma::RegA};
    /// let a = RegA::from_array(core::array::from_fn(|e| bf16::from_f32(e as f32)));
    /// assert_eq!(a.to_array()[5].to_f32(), 5.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_array(x: [T; 8]) -> Self {
        let pack = |lo: T, hi: T| u32::from(lo.to_bits()) | u32::from(hi.to_bits()) << 16;
        Self {
            regs: core::array::from_fn(|k| pack(x[2 * k], x[2 * k + 1])),
            _t: PhantomData,
        }
    }

    /// The elements, in [`coords`](Self::coords) order.
    ///
    /// ```
    /// use berth_device::{f16, wgmma::RegA};
    /// let a = RegA::from_array([f16::from_f32(2.0); 8]);
    /// assert_eq!(a.to_array()[7].to_f32(), 2.0);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn to_array(&self) -> [T; 8] {
        core::array::from_fn(|e| T::from_bits((self.regs[e / 2] >> (16 * (e % 2))) as u16))
    }

    /// Columns `16 j..16 j + 16` of the 64×N matrix `x` holds in an [`Acc`]'s layout (its
    /// registers `8 j..8 j + 8`), each rounded to the nearest `T` (ties to even): the A operand
    /// of the next product.
    ///
    /// ```
    /// use berth_device::{bf16, wgmma::{Acc, RegA}};
    /// let mut acc = Acc::<32>::zero();
    /// acc.regs_mut()[8 + 5] = 1.0 / 3.0;
    /// let a = RegA::<bf16>::from_acc(acc.regs(), 1);
    /// assert_eq!(a.to_array()[5].to_f32(), 0.333_984_375);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn from_acc<const REGS: usize>(x: &[f32; REGS], j: usize) -> Self {
        Self {
            regs: core::array::from_fn(|k| round_pair::<T>(x[8 * j + 2 * k], x[8 * j + 2 * k + 1])),
            _t: PhantomData,
        }
    }
}

/// `lo` and `hi` rounded to nearest `T`, packed `lo` in the low half.
#[inline(always)]
fn round_pair<T: MmaInput>(lo: f32, hi: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a conversion of registers (`cvt.rn.{bf16x2,f16x2}.f32`, sm_80): it reads and
        // writes nothing else.
        unsafe {
            if T::IS_BF16 {
                core::arch::asm!("cvt.rn.bf16x2.f32 {r}, {h}, {l};", r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack));
            } else {
                core::arch::asm!("cvt.rn.f16x2.f32 {r}, {h}, {l};", r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack));
            }
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let bits = |x: f32| {
            if T::IS_BF16 {
                crate::bf16::from_f32(x).to_bits()
            } else {
                crate::f16::from_f32(x).to_bits()
            }
        };
        u32::from(bits(lo)) | u32::from(bits(hi)) << 16
    }
}

/// `acc = a · b + (accumulate ? acc : 0)` by the warpgroup with A in registers
/// (`wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{T}.{T}`, the register form, N = `2 * REGS`):
/// `a` the 64×16 A of the group's threads, `b` a K-major ([`Desc`]: N rows of 16) or N-major
/// ([`DescMn`]: 16 rows of N, the transposed form) B in shared memory.
///
/// # Safety
/// As [`mma_async`]: every thread of the warpgroup reaches the call together, with the same
/// descriptor and its own part of `a`; nothing writes B's shared memory until a [`wait`]
/// covers the call, and the bytes a bulk copy wrote there are read only after waiting for its
/// barrier phase.
///
/// ```should_panic
/// use berth_device::{bf16, tma::SwizzledTile, shared::Shared, wgmma::{self, Acc, RegA}};
/// #[repr(align(1024))]
/// struct Backing([bf16; 64 * 64]);
/// let mut b = Backing([bf16::ONE; 64 * 64]);
/// // SAFETY: a host test: one thread; the array outlives the handle.
/// let tile = SwizzledTile::<bf16, 64>::new(unsafe { Shared::from_raw(b.0.as_mut_ptr(), 4096) }, 0);
/// let mut acc = Acc::<32>::zero();
/// let a = RegA::from_array([bf16::ONE; 8]);
/// // Outside a launch of whole warpgroups this stops with a report.
/// // SAFETY: (not met: a block of one thread) the warpgroup reaches it together.
/// unsafe { wgmma::mma_async_rs(&mut acc, a, tile.desc_mn::<64>(0, 64), false) };
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn mma_async_rs<T: MmaInput, const REGS: usize, B: BOperand<T>>(
    acc: &mut Acc<REGS>,
    a: RegA<T>,
    b: B,
    accumulate: bool,
) {
    const {
        assert!(
            B::N == 2 * REGS && matches!(B::N, 64 | 128 | 256),
            "wgmma: B has N = 64, 128 or 256 columns and the accumulator N / 2 registers"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    {
        let (bb, s) = (b.parts().0, u32::from(accumulate));
        let regs: *mut f32 = acc.regs.as_mut_ptr();
        let ar = a.regs;
        // SAFETY (each arm): `REGS` is the arm's register count (checked above), so the cast
        // names the same array; the rest is the caller's contract, forwarded.
        unsafe {
            macro_rules! arms {
                ($tb:literal) => {
                    match (B::N, T::IS_BF16) {
                        (64, true) => ops_rs::rs_m64n64_bf16::<$tb>(&mut *regs.cast(), ar, bb, s),
                        (64, false) => ops_rs::rs_m64n64_f16::<$tb>(&mut *regs.cast(), ar, bb, s),
                        (128, true) => ops_rs::rs_m64n128_bf16::<$tb>(&mut *regs.cast(), ar, bb, s),
                        (128, false) => ops_rs::rs_m64n128_f16::<$tb>(&mut *regs.cast(), ar, bb, s),
                        (_, true) => ops_rs::rs_m64n256_bf16::<$tb>(&mut *regs.cast(), ar, bb, s),
                        (_, false) => ops_rs::rs_m64n256_f16::<$tb>(&mut *regs.cast(), ar, bb, s),
                    }
                };
            }
            if B::TRANSPOSED { arms!(1) } else { arms!(0) }
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    host::mma_rs(
        &mut acc.regs,
        a.regs,
        (b.parts(), B::TRANSPOSED),
        accumulate,
        |bits| T::from_bits(bits).widen(),
        core::panic::Location::caller(),
    );
}

#[cfg(not(target_arch = "nvptx64"))]
mod host;
