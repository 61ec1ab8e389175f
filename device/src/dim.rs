//! Thread, block and grid coordinates, and the block barrier.
//!
//! Names follow CUDA's: `thread::idx_x()` is `threadIdx.x`, `block::idx_x()` is `blockIdx.x`,
//! `block::dim_x()` is `blockDim.x`, `grid::dim_x()` is `gridDim.x`. Everything is `usize`
//! so it indexes slices without casts.

#[cfg(target_arch = "nvptx64")]
macro_rules! sreg {
    ($intr:ident) => {
        // SAFETY: reading a PTX special register has no preconditions.
        unsafe { core::arch::nvptx::$intr() as usize }
    };
}

#[cfg(not(target_arch = "nvptx64"))]
macro_rules! sreg {
    ($field:ident . $axis:tt) => {
        crate::host::with(|c| c.$field[$axis] as usize)
    };
}

macro_rules! axes {
    ($($(#[$doc:meta])* $name:ident => $nv:ident, $field:ident, $axis:tt;)*) => { $(
        $(#[$doc])*
        #[inline(always)]
        #[must_use]
        pub fn $name() -> usize {
            #[cfg(target_arch = "nvptx64")]
            { sreg!($nv) }
            #[cfg(not(target_arch = "nvptx64"))]
            { sreg!($field . $axis) }
        }
    )* };
}

/// The calling thread's position inside its block, and grid-wide helpers.
pub mod thread {
    axes! {
        /// `threadIdx.x`
        ///
        /// ```
        /// use berth_device::thread;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(thread::idx_x(), 5);
        /// ```
        idx_x => _thread_idx_x, thread, 0;
        /// `threadIdx.y`
        ///
        /// ```
        /// use berth_device::thread;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(thread::idx_y(), 1);
        /// ```
        idx_y => _thread_idx_y, thread, 1;
        /// `threadIdx.z`
        ///
        /// ```
        /// use berth_device::thread;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(thread::idx_z(), 0);
        /// ```
        idx_z => _thread_idx_z, thread, 2;
    }

    /// Global index along x: `blockIdx.x * blockDim.x + threadIdx.x`.
    ///
    /// ```
    /// use berth_device::{block, thread};
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::global_x(), 2 * 32 + 5);
    /// assert_eq!(thread::global_x(), block::idx_x() * block::dim_x() + thread::idx_x());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn global_x() -> usize {
        super::block::idx_x() * super::block::dim_x() + idx_x()
    }
    /// Global index along y: `blockIdx.y * blockDim.y + threadIdx.y`.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::global_y(), 3 * 2 + 1);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn global_y() -> usize {
        super::block::idx_y() * super::block::dim_y() + idx_y()
    }
    /// Global index along z: `blockIdx.z * blockDim.z + threadIdx.z`.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::global_z(), 1);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn global_z() -> usize {
        super::block::idx_z() * super::block::dim_z() + idx_z()
    }
    /// Total threads along x in the grid (`gridDim.x * blockDim.x`): the step of a grid-stride loop.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::grid_stride_x(), 4 * 32);
    /// // The x-indices this thread visits in a row of 300 elements:
    /// let mut x = thread::global_x();
    /// let mut visited = Vec::new();
    /// while x < 300 {
    ///     visited.push(x);
    ///     x += thread::grid_stride_x();
    /// }
    /// assert_eq!(visited, [69, 197]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn grid_stride_x() -> usize {
        super::grid::dim_x() * super::block::dim_x()
    }
    /// This thread's own element index: its number among all the launch's threads, linearised
    /// x-fastest (thread in block, then block in grid). Unique in the launch, so it indexes a
    /// `&mut [T]` argument safely; on a one-dimensional grid it equals [`global_x`]. See
    /// [`Own`](crate::own::Own).
    ///
    /// ```
    /// use berth_device::{SliceMut, thread};
    /// let mut data = [0.0f32; 4];
    /// // SAFETY: `data` outlives the view, and nothing but this (one) thread touches it.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let i = thread::index();
    /// if i < out.len() {
    ///     out[i] = 1.5; // an `Own` indexes a `&mut [T]` argument
    /// }
    /// // Outside an executor the grid is one thread, whose index is 0.
    /// assert_eq!(data, [1.5, 0.0, 0.0, 0.0]);
    /// ```
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// // Block (2, 3, 1) is block (1 * 4 + 3) * 4 + 2 = 30 of the grid; the thread is number
    /// // 1 * 32 + 5 = 37 of its 64.
    /// assert_eq!(thread::index().get(), 30 * 64 + 37);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn index() -> crate::own::Own {
        use super::{block, grid};
        // The shapes are constants of the launch (no special-register reads on the GPU): a
        // one-dimensional launch, the common case, takes `global_x` without reading the y and
        // z coordinates.
        if grid::dim_y() == 1 && grid::dim_z() == 1 && block::dim_y() == 1 && block::dim_z() == 1 {
            return crate::own::Own::new(global_x());
        }
        let b = (block::idx_z() * grid::dim_y() + block::idx_y()) * grid::dim_x() + block::idx_x();
        crate::own::Own::new(b * block::size() + linear_in_block())
    }

    /// This thread's position in a two-dimensional launch, `(global_x, global_y)`, as an
    /// [`Own2`](crate::own::Own2): unique in the launch, so it indexes a `&mut [T]` argument
    /// declared `#[matrix(cols = n)]` at element `(row = y, col = x)` safely.
    ///
    /// The position is unique only when the launch's grid and block have z extent 1 (two
    /// threads that differ along z share it), so this checks that once, here.
    ///
    /// # Panics
    /// Unless the grid's and the block's z extents are 1: stops the kernel (on the GPU, a
    /// kernel panic with the caller's location). A kernel that declares a one- or
    /// two-dimensional block (`#[gpu_kernel(block = (16, 16))]`) is never launched on such a
    /// grid (the launcher refuses it), and the check compiles away there.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 0], block_dim: [32, 2, 1], grid_dim: [4, 4, 1],
    /// # });
    /// // As thread (5, 1) of block (2, 3), in a 4×4 grid of 32×2 blocks:
    /// let p = thread::index_2d();
    /// assert_eq!((p.x(), p.y()), (2 * 32 + 5, 3 * 2 + 1));
    /// ```
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid: block (2, 3, 0) has a
    /// // thread at the same position, so there is no 2D index to give.
    /// let err = std::panic::catch_unwind(|| thread::index_2d()).unwrap_err();
    /// assert!(err.downcast_ref::<String>().unwrap().starts_with("thread::index_2d()"));
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn index_2d() -> crate::own::Own2 {
        use super::{block, grid};
        // The extents are constants of the launch (no special-register reads on the GPU); a
        // kernel with a declared 1D or 2D block knows both to be 1 (the launcher refuses
        // other grids), and the test folds away.
        if grid::dim_z() != 1 || block::dim_z() != 1 {
            crate::panic::fail(
                "thread::index_2d() needs a launch whose grid and block have z extent 1 (else \
                 two threads share a position): launch a grid and block with z = 1, or declare \
                 the block shape, `#[gpu_kernel(block = (16, 16))]`, and the launcher refuses \
                 other grids",
            )
        }
        crate::own::Own2::new(global_x(), global_y())
    }

    /// The launch's number of threads (blocks × threads per block): the step of
    /// [`grid_stride`].
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::count(), (4 * 4 * 2) * (32 * 2));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn count() -> usize {
        use super::{block, grid};
        grid::dim_x() * grid::dim_y() * grid::dim_z() * block::size()
    }

    /// This thread's grid-stride loop over `0..len`: [`index`], `index + count`, … below
    /// `len` — each an [`Own`](crate::own::Own), so the loop may write the elements it visits.
    ///
    /// ```
    /// # use berth_device::{thread, SliceMut};
    /// # let mut data = [0u32; 5];
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), 5) };
    /// for i in thread::grid_stride(out.len()) {
    ///     out[i] = 2 * i.get() as u32;
    /// }
    /// # assert_eq!(data, [0, 2, 4, 6, 8]); // outside an executor: a grid of one thread
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn grid_stride(len: usize) -> crate::own::GridStride {
        crate::own::GridStride::new(index().get(), count(), len)
    }

    /// The thread's index inside its block, linearised x-fastest.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(thread::linear_in_block(), 32 + 5);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn linear_in_block() -> usize {
        use super::block::{dim_x, dim_y};
        (idx_z() * dim_y() + idx_y()) * dim_x() + idx_x()
    }
}

/// The calling thread's block: its position in the grid and its shape.
pub mod block {
    axes! {
        /// `blockIdx.x`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::idx_x(), 2);
        /// ```
        idx_x => _block_idx_x, block, 0;
        /// `blockIdx.y`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::idx_y(), 3);
        /// ```
        idx_y => _block_idx_y, block, 1;
        /// `blockIdx.z`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::idx_z(), 1);
        /// ```
        idx_z => _block_idx_z, block, 2;
        /// `blockDim.x`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::dim_x(), 32);
        /// ```
        dim_x => _block_dim_x, block_dim, 0;
        /// `blockDim.y`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::dim_y(), 2);
        /// ```
        dim_y => _block_dim_y, block_dim, 1;
        /// `blockDim.z`
        ///
        /// ```
        /// use berth_device::block;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(block::dim_z(), 1);
        /// ```
        dim_z => _block_dim_z, block_dim, 2;
    }

    /// Number of threads in the block.
    ///
    /// ```
    /// use berth_device::block;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
    /// # });
    /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
    /// assert_eq!(block::size(), 64);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn size() -> usize {
        dim_x() * dim_y() * dim_z()
    }
}

/// The grid's shape.
pub mod grid {
    axes! {
        /// `gridDim.x`
        ///
        /// ```
        /// use berth_device::grid;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(grid::dim_x(), 4);
        /// ```
        dim_x => _grid_dim_x, grid_dim, 0;
        /// `gridDim.y`
        ///
        /// ```
        /// use berth_device::grid;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(grid::dim_y(), 4);
        /// ```
        dim_y => _grid_dim_y, grid_dim, 1;
        /// `gridDim.z`
        ///
        /// ```
        /// use berth_device::grid;
        /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
        /// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
        /// # });
        /// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
        /// assert_eq!(grid::dim_z(), 2);
        /// ```
        dim_z => _grid_dim_z, grid_dim, 2;
    }
}

/// Block-wide barrier (`__syncthreads()`, PTX `bar.sync 0`): waits until every thread of the
/// block has reached it; shared-memory writes before it are visible to the block after it.
///
/// # Safety
/// Every thread of the block that has not exited reaches this same call: the same call site,
/// the same number of times. A call under a condition that differs between the threads of a
/// block (`if thread::idx_x() < 16 { sync_threads() }`, a loop whose trip count depends on
/// the thread, an early `return` of some threads before it, a helper with a barrier called on
/// one side of such a branch) breaks the contract. CUDA makes such a barrier undefined
/// behaviour, not only a hang: `bar.sync` is the `.aligned` form, which the compiler may
/// assume every thread of a warp executes together, and code moved on that assumption is
/// wrong when it does not hold. The usual reason the contract holds is that the call is
/// outside any branch or loop that depends on the thread.
///
/// The CPU simulator checks the contract on every launch: a barrier reached by only part of
/// a block is a launch error that names its line and the waiting threads.
///
/// ```
/// use berth_device::{PerBlock, sync_threads, thread};
/// /// A kernel body's two phases: every thread's write of phase one is visible to the whole
/// /// block in phase two.
/// fn two_phases(partial: &mut PerBlock<'_, u32>) {
///     // … phase one: each thread writes its part of a shared tile …
///     // SAFETY: every thread of the block reaches this barrier: it is outside any
///     // thread-dependent branch, and nothing returns before it.
///     unsafe { sync_threads() };
///     // … phase two: the block's first thread combines the tile.
///     if let Some(slot) = partial.mine() {
///         *slot = thread::linear_in_block() as u32 + 1;
///     }
/// }
/// let mut sums = [0u32];
/// // SAFETY: `sums` outlives the view and nothing else touches it.
/// two_phases(&mut unsafe { PerBlock::from_raw(sums.as_mut_ptr(), 1) });
/// // Outside an executor the block is one thread: the barrier returns at once.
/// assert_eq!(sums, [1]);
/// ```
#[inline(always)]
#[track_caller]
pub unsafe fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: every thread of the block that has not exited reaches this call together (the
    // caller's contract), which is what the aligned `bar.sync 0` requires.
    unsafe {
        core::arch::nvptx::_syncthreads()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::barrier(core::panic::Location::caller());
}
