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
    ($(#[$doc:meta] $name:ident => $nv:ident, $field:ident, $axis:tt;)*) => { $(
        #[$doc]
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
        idx_x => _thread_idx_x, thread, 0;
        /// `threadIdx.y`
        idx_y => _thread_idx_y, thread, 1;
        /// `threadIdx.z`
        idx_z => _thread_idx_z, thread, 2;
    }

    /// Global index along x: `blockIdx.x * blockDim.x + threadIdx.x`.
    #[inline(always)]
    #[must_use]
    pub fn global_x() -> usize {
        super::block::idx_x() * super::block::dim_x() + idx_x()
    }
    /// Global index along y: `blockIdx.y * blockDim.y + threadIdx.y`.
    #[inline(always)]
    #[must_use]
    pub fn global_y() -> usize {
        super::block::idx_y() * super::block::dim_y() + idx_y()
    }
    /// Global index along z: `blockIdx.z * blockDim.z + threadIdx.z`.
    #[inline(always)]
    #[must_use]
    pub fn global_z() -> usize {
        super::block::idx_z() * super::block::dim_z() + idx_z()
    }
    /// Total threads along x in the grid (`gridDim.x * blockDim.x`): the step of a grid-stride loop.
    #[inline(always)]
    #[must_use]
    pub fn grid_stride_x() -> usize {
        super::grid::dim_x() * super::block::dim_x()
    }
    /// This thread's own element index: its number among all the launch's threads, linearised
    /// x-fastest (thread in block, then block in grid). Unique in the launch, so it indexes a
    /// `&mut [T]` argument safely; on a one-dimensional grid it equals [`global_x`]. See
    /// [`Own`](crate::own::Own).
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

    /// The launch's number of threads (blocks × threads per block): the step of
    /// [`grid_stride`].
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
        idx_x => _block_idx_x, block, 0;
        /// `blockIdx.y`
        idx_y => _block_idx_y, block, 1;
        /// `blockIdx.z`
        idx_z => _block_idx_z, block, 2;
        /// `blockDim.x`
        dim_x => _block_dim_x, block_dim, 0;
        /// `blockDim.y`
        dim_y => _block_dim_y, block_dim, 1;
        /// `blockDim.z`
        dim_z => _block_dim_z, block_dim, 2;
    }

    /// Number of threads in the block.
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
        dim_x => _grid_dim_x, grid_dim, 0;
        /// `gridDim.y`
        dim_y => _grid_dim_y, grid_dim, 1;
        /// `gridDim.z`
        dim_z => _grid_dim_z, grid_dim, 2;
    }
}

/// Block-wide barrier (`__syncthreads()`, PTX `bar.sync 0`): every thread of the block must
/// reach it; shared-memory writes before it are visible to the block after it.
#[inline(always)]
#[track_caller]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bar.sync has no memory-safety preconditions; a barrier reached by only part of
    // the block is a logic error (deadlock), not undefined behaviour in Rust's sense.
    unsafe {
        core::arch::nvptx::_syncthreads()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::barrier(core::panic::Location::caller());
}
