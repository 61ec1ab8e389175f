//! The parameter block of one launch: each value in a 16-byte-aligned slot, as
//! `cuLaunchKernel` takes them.

use crate::launch::kernel::Param;

/// A kernel's parameter values, each in a 16-byte-aligned slot, as `cuLaunchKernel` takes
/// them (an array of pointers to the values).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ParamBlock {
    storage: Vec<u128>,
    offsets: Vec<usize>,
}

impl ParamBlock {
    pub(crate) fn new(params: &[Param]) -> Self {
        let mut offsets = Vec::with_capacity(params.len());
        let mut words = 0;
        for p in params {
            offsets.push(words);
            words += p.size.div_ceil(16).max(1);
        }
        ParamBlock {
            storage: vec![0; words],
            offsets,
        }
    }

    /// Write parameter `i` (its size was checked by the caller against the kernel's layout).
    pub(crate) fn set(&mut self, i: usize, bytes: &[u8]) {
        let off = self.offsets[i];
        let end = self
            .offsets
            .get(i + 1)
            .copied()
            .unwrap_or(self.storage.len());
        assert!(bytes.len() <= (end - off) * 16, "parameter slot too small");
        // SAFETY: the slot at `off` spans `end - off` u128 words, at least `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.storage.as_mut_ptr().add(off).cast::<u8>(),
                bytes.len(),
            );
        }
    }

    /// One pointer per parameter, valid while `self` is neither moved nor written.
    pub(crate) fn pointers(&mut self) -> Vec<*mut std::ffi::c_void> {
        let base = self.storage.as_mut_ptr();
        self.offsets
            .iter()
            // SAFETY: each offset is inside `storage`.
            .map(|&o| unsafe { base.add(o) }.cast())
            .collect()
    }
}
