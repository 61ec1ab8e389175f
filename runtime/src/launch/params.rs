//! The parameter block of one launch: each value in a 16-byte-aligned slot, as
//! `cuLaunchKernel` takes them. Kept inline (no heap allocation) for kernels of up to
//! [`INLINE_PARAMS`] parameters and [`INLINE_WORDS`] slots, which is every kernel a launch
//! passes a handful of arguments to; larger ones spill to the heap.

use crate::launch::kernel::Param;
use smallvec::SmallVec;

/// Parameters kept inline: a slice argument is two (pointer and length).
pub(crate) const INLINE_PARAMS: usize = 16;
/// 16-byte slots kept inline (a parameter takes one slot per started 16 bytes).
pub(crate) const INLINE_WORDS: usize = 16;

/// One pointer per parameter, as `cuLaunchKernel` takes them.
pub(crate) type Pointers = SmallVec<[*mut std::ffi::c_void; INLINE_PARAMS]>;

/// A kernel's parameter values, each in a 16-byte-aligned slot, as `cuLaunchKernel` takes
/// them (an array of pointers to the values).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ParamBlock {
    storage: SmallVec<[u128; INLINE_WORDS]>,
    /// The first slot of each parameter.
    offsets: SmallVec<[u32; INLINE_PARAMS]>,
}

impl ParamBlock {
    pub(crate) fn new(params: &[Param]) -> Self {
        let mut offsets = SmallVec::with_capacity(params.len());
        let mut words = 0usize;
        for p in params {
            offsets.push(words as u32);
            words += p.size.div_ceil(16).max(1);
        }
        ParamBlock {
            storage: smallvec::smallvec![0; words],
            offsets,
        }
    }

    /// Write parameter `i` (its size was checked by the caller against the kernel's layout).
    pub(crate) fn set(&mut self, i: usize, bytes: &[u8]) {
        let off = self.offsets[i] as usize;
        let end = self
            .offsets
            .get(i + 1)
            .map_or(self.storage.len(), |&o| o as usize);
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

    /// The first eight bytes of parameter `i` (a slice's pointer or length), as written.
    pub(crate) fn word(&self, i: usize) -> u64 {
        // The slot's first eight bytes in memory (`to_ne_bytes` keeps memory order), where
        // `set` wrote them.
        let bytes = self.storage[self.offsets[i] as usize].to_ne_bytes();
        u64::from_ne_bytes(bytes[..8].try_into().expect("eight bytes"))
    }

    /// One pointer per parameter, valid while `self` is neither moved nor written.
    pub(crate) fn pointers(&mut self) -> Pointers {
        let base = self.storage.as_mut_ptr();
        self.offsets
            .iter()
            // SAFETY: each offset is inside `storage`.
            .map(|&o| unsafe { base.add(o as usize) }.cast())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_slots_and_spill_past_the_inline_size() {
        let small = [
            Param::scalar::<u32>("a"),
            Param::slice_ptr::<f32>("b", false, crate::launch::kernel::Placement::Device),
        ];
        let mut p = ParamBlock::new(&small);
        assert!(!p.storage.spilled() && !p.offsets.spilled());
        p.set(0, &7u32.to_ne_bytes());
        p.set(1, &9u64.to_ne_bytes());
        let ptrs = p.pointers();
        assert!(!ptrs.spilled());
        // SAFETY: the pointers address the values just written, of these sizes.
        unsafe {
            assert_eq!(*ptrs[0].cast::<u32>(), 7);
            assert_eq!(*ptrs[1].cast::<u64>(), 9);
        }
        let big = [Param::scalar::<[u8; 40]>("x"); 20];
        let mut p = ParamBlock::new(&big);
        p.set(19, &[1; 40]);
        let ptrs = p.pointers();
        assert_eq!(ptrs.len(), 20);
        // SAFETY: parameter 19's slot holds the 40 bytes just written.
        assert_eq!(unsafe { *ptrs[19].cast::<[u8; 40]>() }, [1; 40]);
    }

    #[test]
    fn a_word_reads_back_what_was_set() {
        let params = [
            Param::scalar::<u32>("a"),
            Param::slice_ptr::<f32>("b", false, crate::launch::kernel::Placement::Device),
            Param::word("b", crate::launch::kernel::Part::Len),
        ];
        let mut p = ParamBlock::new(&params);
        p.set(1, &0x1122_3344_5566_7788u64.to_ne_bytes());
        p.set(2, &12345u64.to_ne_bytes());
        assert_eq!(p.word(1), 0x1122_3344_5566_7788);
        assert_eq!(p.word(2), 12345);
    }
}
