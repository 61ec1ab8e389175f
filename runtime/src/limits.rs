//! What one launch may ask of a device: threads per block, block and grid extents, shared
//! memory per block ([`DeviceLimits`]), and the check of a launch against them. A GPU context
//! reads them from the device; the simulator enforces a device's limits too — the H200's
//! unless told otherwise — so a launch the GPU would refuse is refused on the simulator as
//! well, at the same call.

use crate::error::{Error, Result};
use crate::launch::grid::Grid;
use crate::launch::kernel::Kernel;
use std::collections::HashMap;
use std::sync::Mutex;

/// A device's launch limits (registers per thread are not modelled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Shared memory (static and dynamic) a block may use without opting in
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK`), in bytes; also the most static
    /// shared memory a kernel may declare.
    pub shared_per_block: u32,
    /// Shared memory a block may use once its kernel opts in
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`), in bytes. Launches opt in
    /// by themselves when they need more than [`DeviceLimits::shared_per_block`].
    pub shared_per_block_optin: u32,
    /// Threads in one block, all axes together.
    pub threads_per_block: u32,
    /// Block extents, per axis.
    pub block_dim: [u32; 3],
    /// Grid extents (blocks), per axis.
    pub grid_dim: [u32; 3],
}

const KIB: u32 = 1024;

impl DeviceLimits {
    /// An NVIDIA H200 (sm_90): 48 KiB of shared memory per block, 227 KiB with opt-in, 1024
    /// threads per block, blocks up to (1024, 1024, 64), grids up to (2³¹−1, 65535, 65535).
    pub const H200: DeviceLimits = DeviceLimits {
        shared_per_block: 48 * KIB,
        shared_per_block_optin: 227 * KIB,
        threads_per_block: 1024,
        block_dim: [1024, 1024, 64],
        grid_dim: [i32::MAX as u32, 65535, 65535],
    };

    /// Check a launch of `k` over `grid` (its static shared memory read from its PTX).
    pub(crate) fn check_kernel(&self, k: &'static Kernel, grid: &Grid) -> Result<()> {
        self.check(k.name, grid, static_shared_bytes(k))
    }

    /// Check `grid` for `kernel`, whose static shared arrays take `static_shared` bytes per
    /// block: [`Error::InvalidLaunch`] naming the limit a launch exceeds.
    pub fn check(&self, kernel: &'static str, grid: &Grid, static_shared: usize) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidLaunch { kernel, reason });
        let (b, t) = (grid.blocks, grid.threads);
        let per_block = u64::from(t.x) * u64::from(t.y) * u64::from(t.z);
        if per_block > u64::from(self.threads_per_block) {
            return bad(format!(
                "{per_block} threads per block ({}, {}, {}): the device allows at most {} threads per block",
                t.x, t.y, t.z, self.threads_per_block
            ));
        }
        for (axis, (got, max)) in ["x", "y", "z"]
            .iter()
            .zip([t.x, t.y, t.z].into_iter().zip(self.block_dim))
        {
            if got > max {
                return bad(format!(
                    "a block of {got} threads along {axis}: the device allows at most {max}"
                ));
            }
        }
        for (axis, (got, max)) in ["x", "y", "z"]
            .iter()
            .zip([b.x, b.y, b.z].into_iter().zip(self.grid_dim))
        {
            if got > max {
                return bad(format!(
                    "a grid of {got} blocks along {axis}: the device allows at most {max}"
                ));
            }
        }
        let (kib, optin) = (
            |n: usize| format!("{:.1} KiB", n as f64 / 1024.0),
            self.shared_per_block_optin as usize,
        );
        if static_shared > self.shared_per_block as usize {
            return bad(format!(
                "the kernel's static shared arrays take {static_shared} bytes ({}): the device \
                 allows at most {} bytes of static shared memory per block (move the large \
                 arrays to dynamic shared memory)",
                kib(static_shared),
                self.shared_per_block
            ));
        }
        let total = static_shared + grid.shared_bytes as usize;
        if total > optin {
            return bad(format!(
                "{} bytes of dynamic shared memory and {static_shared} of static shared memory \
                 per block ({} in all): the device allows at most {optin} bytes ({}) of shared \
                 memory per block with opt-in, {} without",
                grid.shared_bytes,
                kib(total),
                kib(optin),
                kib(self.shared_per_block as usize),
            ));
        }
        Ok(())
    }
}

/// Whether a launch over `grid` of a kernel with `static_shared` bytes of static shared memory
/// must opt in to more shared memory than a block gets by default (48 KiB on every GPU berth
/// runs on).
pub(crate) fn needs_opt_in(static_shared: usize, grid: &Grid) -> bool {
    static_shared + grid.shared_bytes as usize > 48 * KIB as usize
}

/// The bytes of static shared memory `k`'s entry uses, from its PTX (cached per kernel).
pub(crate) fn static_shared_bytes(k: &'static Kernel) -> usize {
    static CACHE: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
    let key = k as *const Kernel as usize;
    let mut cache = CACHE.lock().expect("poisoned");
    *cache
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| crate::ptx::Module::cached(k.ptx()).static_shared_bytes(k.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h200_refuses_what_its_driver_refuses() {
        let l = DeviceLimits::H200;
        let ok = Grid::new(10, 256).shared_bytes(100 * 1024);
        assert!(l.check("k", &ok, 1024).is_ok());
        let full = Grid::new(1, 1024).shared_bytes(227 * 1024 - 4096);
        assert!(l.check("k", &full, 4096).is_ok());
        let over = Grid::new(1, 32).shared_bytes(1 << 20);
        let e = l.check("k", &over, 0).unwrap_err().to_string();
        assert!(
            e.contains("1048576 bytes of dynamic shared memory") && e.contains("232448 bytes"),
            "{e}"
        );
        let e = l
            .check("k", &Grid::new(1, 32).shared_bytes(227 * 1024), 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("16 of static"), "{e}");
        let e = l.check("k", &Grid::new(1, 32), 64 * 1024).unwrap_err();
        assert!(e.to_string().contains("static shared memory"), "{e}");
        let e = l.check("k", &Grid::new(1, (32, 32, 2)), 0).unwrap_err();
        assert!(
            e.to_string().contains("at most 1024 threads per block"),
            "{e}"
        );
        let e = l.check("k", &Grid::new((1, 70_000), 32), 0).unwrap_err();
        assert!(e.to_string().contains("70000 blocks along y"), "{e}");
    }
}
