//! The shape of a launch: grid and block extents, dynamic shared memory, and their checks.

use crate::error::{Error, Result};
use crate::launch::kernel::{Entry, Kernel};

/// Three extents, as CUDA's `dim3`. Converts from `u32`, `(u32, u32)` and `(u32, u32, u32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// x extent
    pub x: u32,
    /// y extent
    pub y: u32,
    /// z extent
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// Grid and block shape of a launch, and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks in the grid.
    pub blocks: Dim3,
    /// Threads per block.
    pub threads: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl Grid {
    /// Threads per block chosen by [`Grid::cover`]: a multiple of the warp size that keeps
    /// enough blocks per SM resident for latency hiding on every architecture since sm_50.
    pub const DEFAULT_BLOCK: u32 = 256;

    /// An explicit grid: `blocks` blocks of `threads` threads.
    pub fn new(blocks: impl Into<Dim3>, threads: impl Into<Dim3>) -> Grid {
        Grid {
            blocks: blocks.into(),
            threads: threads.into(),
            shared_bytes: 0,
        }
    }

    /// One thread per element for `n` elements along x, in blocks of
    /// [`Grid::DEFAULT_BLOCK`]: `thread::global_x()` ranges over `0..n` (and a little past
    /// it in the last block: guard with `if i < len`).
    pub fn cover(n: usize) -> Grid {
        Grid::cover_with_block(n, Grid::DEFAULT_BLOCK)
    }

    /// As [`Grid::cover`], with `block` threads per block.
    pub fn cover_with_block(n: usize, block: u32) -> Grid {
        let blocks = (n as u64).div_ceil(u64::from(block.max(1))).max(1);
        Grid::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }

    /// Ask for `bytes` of dynamic shared memory per block.
    pub fn shared_bytes(mut self, bytes: u32) -> Grid {
        self.shared_bytes = bytes;
        self
    }

    /// Whether the grid and its blocks extend along x only (y and z extents 1).
    ///
    /// ```
    /// use berth_runtime::Grid;
    /// assert!(Grid::cover(1000).is_linear());
    /// assert!(!Grid::cover_2d(1000, 30, (16, 16)).is_linear());
    /// assert!(!Grid::new((4, 2, 1), 256).is_linear());
    /// ```
    pub fn is_linear(&self) -> bool {
        let (b, t) = (self.blocks, self.threads);
        [b.y, b.z, t.y, t.z] == [1, 1, 1, 1]
    }

    /// The entry of `kernel` a launch over this grid runs: the one-dimensional entry where the
    /// kernel has one and the grid is [linear](Grid::is_linear), else the entry without z
    /// where it has one and the grid is [planar](Grid::is_planar), the general one otherwise.
    pub fn entry_of(&self, kernel: &Kernel) -> Entry {
        if kernel.linear.is_some() && self.is_linear() {
            Entry::Linear
        } else if kernel.planar.is_some() && self.is_planar() {
            Entry::Planar
        } else {
            Entry::General
        }
    }

    /// Whether the grid and the block have extent 1 along z (every one- and two-dimensional
    /// launch).
    ///
    /// ```
    /// use berth_runtime::Grid;
    /// assert!(Grid::cover(1000).is_planar());
    /// assert!(Grid::new((4, 2, 1), (32, 8)).is_planar());
    /// assert!(!Grid::new((4, 2, 2), (32, 8)).is_planar());
    /// assert!(!Grid::new(4, (8, 8, 2)).is_planar());
    /// ```
    pub fn is_planar(&self) -> bool {
        self.blocks.z == 1 && self.threads.z == 1
    }

    /// Total threads launched along x.
    pub fn threads_x(&self) -> u64 {
        u64::from(self.blocks.x) * u64::from(self.threads.x)
    }

    /// `n` × `m` elements (x fastest) covered by 2D blocks of `block` threads:
    /// `thread::global_x()` ranges over `0..n` and `global_y()` over `0..m` (a little past
    /// them in the last blocks: guard both).
    ///
    /// ```
    /// use berth_runtime::{Dim3, Grid};
    /// let g = Grid::cover_2d(1000, 30, (16, 16));
    /// assert_eq!((g.blocks, g.threads), (Dim3::from((63, 2, 1)), Dim3::from((16, 16, 1))));
    /// ```
    pub fn cover_2d(n: usize, m: usize, block: (u32, u32)) -> Grid {
        let (bx, by) = (block.0.max(1), block.1.max(1));
        Grid::new((blocks_for(n, bx), blocks_for(m, by), 1), (bx, by, 1))
    }

    /// As [`Grid::cover_2d`] in three dimensions.
    pub fn cover_3d(n: usize, m: usize, l: usize, block: (u32, u32, u32)) -> Grid {
        let (bx, by, bz) = (block.0.max(1), block.1.max(1), block.2.max(1));
        Grid::new(
            (blocks_for(n, bx), blocks_for(m, by), blocks_for(l, bz)),
            (bx, by, bz),
        )
    }

    pub(crate) fn validate(&self, kernel: &'static Kernel) -> Result<()> {
        let name = kernel.name;
        let bad = |reason: String| {
            Err(Error::InvalidLaunch {
                kernel: name,
                reason,
            })
        };
        let (b, t) = (self.blocks, self.threads);
        if let Some([x, y, z]) = kernel.block
            && [t.x, t.y, t.z] != [x, y, z]
        {
            return bad(format!(
                "the kernel declares blocks of ({x}, {y}, {z}) threads (`#[gpu_kernel(block = ..)]`), \
                 the launch asks for ({}, {}, {}): launch it with `Grid::new(blocks, ({x}, {y}, {z}))`",
                t.x, t.y, t.z
            ));
        }
        if [b.x, b.y, b.z, t.x, t.y, t.z].contains(&0) {
            return bad(format!(
                "every extent must be at least 1 (blocks {b:?}, threads {t:?})"
            ));
        }
        // A declared block that extends along fewer than three axes also fixes the grid's
        // extent along the others to 1: a thread's position along the block's axes is then
        // unique in the launch (`thread::index_2d`), which the kernel's entries assume.
        if let Some(block) = kernel.block {
            let rank = berth_abi::block_rank(block);
            let (axes, flat) = match rank {
                1 => ("x", b.y != 1 || b.z != 1),
                2 => ("x and y", b.z != 1),
                _ => ("x, y and z", false),
            };
            if flat {
                let [x, y, _] = block;
                let (shape, grid) = if rank == 1 {
                    (format!("{x}"), format!("Grid::new(blocks, {x})"))
                } else {
                    (
                        format!("({x}, {y})"),
                        format!("Grid::new((blocks_x, blocks_y), ({x}, {y}))"),
                    )
                };
                return bad(format!(
                    "the kernel declares a {rank}D block (`#[gpu_kernel(block = {shape})]`), which \
                     extends along {axes} alone, and the launch's grid of ({}, {}, {}) blocks \
                     extends past them: launch it on a grid along {axes} alone, `{grid}`, or \
                     declare a block that extends along every axis of the grid",
                    b.x, b.y, b.z
                ));
            }
        }
        let per_block = u64::from(t.x) * u64::from(t.y) * u64::from(t.z);
        if t.x > 1024 || t.y > 1024 || t.z > 64 || per_block > 1024 {
            return bad(format!(
                "{per_block} threads per block ({t:?}): at most 1024 in all, x and y ≤ 1024, z ≤ 64"
            ));
        }
        if b.x > i32::MAX as u32 || b.y > 65535 || b.z > 65535 {
            return bad(format!(
                "{b:?} blocks: x ≤ 2^31-1, y and z ≤ 65535 (for more elements, loop with thread::grid_stride_x())"
            ));
        }
        // A thread's linear index and the thread count are 64-bit: with 2^64 threads or more
        // they would wrap, and two threads would own one index (`Own`, grid-stride loops).
        let total = u128::from(b.x) * u128::from(b.y) * u128::from(b.z) * u128::from(per_block);
        if total > u128::from(u64::MAX) {
            return bad(format!(
                "{b:?} blocks of {t:?} threads: {total} threads, more than the 2^64 - 1 a 64-bit thread index can number; use fewer blocks and loop with thread::grid_stride()"
            ));
        }
        Ok(())
    }
}

/// Blocks of `block` threads covering `n` elements along one axis.
fn blocks_for(n: usize, block: u32) -> u32 {
    u32::try_from((n as u64).div_ceil(u64::from(block)).max(1)).unwrap_or(u32::MAX)
}
