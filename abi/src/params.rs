//! How a kernel's arguments become the parameters of its PTX entry.
//!
//! A kernel `fn k(a: f32, x: &[f32], #[auto] t: &[u32])` has the PTX entry
//! `k(a, x_ptr, x_len, t_ptr, t_len, t_start, t_end)`: each argument is lowered
//! ([`Lowering`]) to one or more parameters, each of which is one [`Part`]. The macro declares
//! the entry's parameters in that order and records each one's part in the kernel's
//! descriptor; the runtime packs a launch's parameter block part by part, checking each
//! against the descriptor; the simulator's entry reads the values back by the same positions.

/// The size in bytes of every parameter that is not a scalar's value: pointers, lengths and
/// window bounds are 64-bit words (`u64` on the host, `usize` and pointers on nvptx64).
pub const WORD_BYTES: usize = 8;

/// How one kernel argument is passed to the PTX entry. (The names are unlike any type of
/// berth's: rustc prints a type by its bare name in messages only where no other item of the
/// program has that name.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lowering {
    /// A scalar `T`: its value, one parameter of `size_of::<T>()` bytes.
    Value,
    /// A slice (`&[T]`, `&mut [T]`, of any placement but `#[auto]`), and the memory of a
    /// signal or mailbox argument: a pointer to the first element and the element count.
    PtrLen,
    /// An `#[auto]` slice: pointer and element count as a slice's, then the range of elements
    /// the launch made available, `start..end` (the pointer is to element 0 however much of
    /// the slice was copied).
    PtrLenRange,
    /// An `#[auto] &Rows<T>` argument, a table read a row at a time by id: pointer and element
    /// count of the table as a slice's, then the slot table of a hot tier in device memory
    /// (`u32` per row: the row's slot, or a value of at least the capacity where the row is
    /// not resident; null where the launch passes no tier), the tier's rows (`capacity`
    /// slots of `width` elements each) and the elements per row.
    PtrLenTier,
}

/// One PTX parameter of a lowered argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// A scalar's value.
    Value,
    /// The address of a slice's element 0 (device memory, or mapped host memory).
    Ptr,
    /// A slice's length in elements.
    Len,
    /// The first element of an `#[auto]` slice's available range.
    Start,
    /// One past the last element of an `#[auto]` slice's available range.
    End,
    /// The address of a hot tier's slot table (0 for none).
    Slots,
    /// The address of a hot tier's device rows.
    Tier,
    /// The slots a hot tier holds.
    Capacity,
    /// Elements per row of a table read by rows.
    Width,
}

impl Lowering {
    /// Every lowering.
    pub const ALL: [Lowering; 4] = [
        Lowering::Value,
        Lowering::PtrLen,
        Lowering::PtrLenRange,
        Lowering::PtrLenTier,
    ];

    /// The parameters this lowering passes, in order.
    pub const fn parts(self) -> &'static [Part] {
        match self {
            Lowering::Value => &[Part::Value],
            Lowering::PtrLen => &[Part::Ptr, Part::Len],
            Lowering::PtrLenRange => &[Part::Ptr, Part::Len, Part::Start, Part::End],
            Lowering::PtrLenTier => &[
                Part::Ptr,
                Part::Len,
                Part::Slots,
                Part::Tier,
                Part::Capacity,
                Part::Width,
            ],
        }
    }

    /// Where `part` is among [`Lowering::parts`], if this lowering passes it.
    ///
    /// ```
    /// use berth_abi::{Lowering, Part};
    /// assert_eq!(Lowering::PtrLenRange.position(Part::Start), Some(2));
    /// assert_eq!(Lowering::Value.position(Part::Len), None);
    /// ```
    pub const fn position(self, part: Part) -> Option<usize> {
        let parts = self.parts();
        let mut i = 0;
        while i < parts.len() {
            if parts[i] as u8 == part as u8 {
                return Some(i);
            }
            i += 1;
        }
        None
    }
}

impl Part {
    /// Every part.
    pub const ALL: [Part; 9] = [
        Part::Value,
        Part::Ptr,
        Part::Len,
        Part::Start,
        Part::End,
        Part::Slots,
        Part::Tier,
        Part::Capacity,
        Part::Width,
    ];

    /// The variant's name (`"Len"`), for generated code that names it
    /// (`berth::__private::Part::Len`).
    pub const fn name(self) -> &'static str {
        match self {
            Part::Value => "Value",
            Part::Ptr => "Ptr",
            Part::Len => "Len",
            Part::Start => "Start",
            Part::End => "End",
            Part::Slots => "Slots",
            Part::Tier => "Tier",
            Part::Capacity => "Capacity",
            Part::Width => "Width",
        }
    }

    /// The suffix of the entry parameter's name after the argument's (`__berth_x_len`); none
    /// for a value, which keeps the argument's own name.
    pub const fn suffix(self) -> Option<&'static str> {
        match self {
            Part::Value => None,
            Part::Ptr => Some("ptr"),
            Part::Len => Some("len"),
            Part::Start => Some("lo"),
            Part::End => Some("hi"),
            Part::Slots => Some("slots"),
            Part::Tier => Some("tier"),
            Part::Capacity => Some("cap"),
            Part::Width => Some("width"),
        }
    }

    /// The parameter's size in bytes: [`WORD_BYTES`], or `None` for a value (its type's size).
    pub const fn size(self) -> Option<usize> {
        match self {
            Part::Value => None,
            _ => Some(WORD_BYTES),
        }
    }
}

/// Where a slice argument's data lives, from its attribute in the kernel's signature: the
/// macro records it in the descriptor (by [`Placement::name`]), the runtime and the simulator
/// read it there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// No attribute: device memory, passed in place.
    Device,
    /// `#[pinned_async]`: pinned host memory, copied to device staging around the launch.
    PinnedAsync,
    /// `#[pinned_async(out)]`: pinned host memory the kernel only writes: copied back only.
    PinnedOut,
    /// `#[mapped]`: host memory mapped into the GPU's address space, read in place.
    Mapped,
    /// `#[auto]`: mapped host memory, read in place or copied in, chosen per launch.
    Auto,
}

impl Placement {
    /// Every placement.
    pub const ALL: [Placement; 5] = [
        Placement::Device,
        Placement::PinnedAsync,
        Placement::PinnedOut,
        Placement::Mapped,
        Placement::Auto,
    ];

    /// The variant's name (`"Mapped"`), for generated code that names it.
    pub const fn name(self) -> &'static str {
        match self {
            Placement::Device => "Device",
            Placement::PinnedAsync => "PinnedAsync",
            Placement::PinnedOut => "PinnedOut",
            Placement::Mapped => "Mapped",
            Placement::Auto => "Auto",
        }
    }

    /// How a slice of this placement is passed.
    pub const fn lowering(self) -> Lowering {
        match self {
            Placement::Auto => Lowering::PtrLenRange,
            _ => Lowering::PtrLen,
        }
    }
}

/// The byte a kernel entry's parameter-alignment list (the static in its
/// [`Section::ParamAlign`](crate::Section::ParamAlign) section) holds for a pointer to `T`:
/// `T`'s alignment, at most 128. Every other parameter's byte is 0. The builder writes it on
/// the PTX parameter (`.ptr .align N`), so 16-byte elements are read in one access.
///
/// ```
/// assert_eq!(berth_abi::param_align::<f32>(), 4);
/// #[repr(align(256))]
/// struct Wide(u8);
/// assert_eq!(berth_abi::param_align::<Wide>(), 128);
/// ```
pub const fn param_align<T>() -> u8 {
    let a = core::mem::align_of::<T>();
    if a > 128 { 128 } else { a as u8 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    /// The names generated code spells are the variants' own.
    #[test]
    fn names_are_the_variants() {
        for p in Part::ALL {
            assert_eq!(p.name(), format!("{p:?}"));
        }
        for p in Placement::ALL {
            assert_eq!(p.name(), format!("{p:?}"));
        }
    }

    /// Every lowering starts with the value or the pointer, a length follows every pointer,
    /// and a part's position is where `parts` has it.
    #[test]
    fn lowerings_are_consistent() {
        for l in Lowering::ALL {
            let parts = l.parts();
            assert!(matches!(parts[0], Part::Value | Part::Ptr), "{l:?}");
            if parts[0] == Part::Ptr {
                assert_eq!(parts[1], Part::Len, "{l:?}");
            }
            for (i, p) in parts.iter().enumerate() {
                assert_eq!(l.position(*p), Some(i));
            }
            for p in Part::ALL {
                assert_eq!(l.position(p).is_some(), parts.contains(&p));
            }
        }
        let suffixes: std::vec::Vec<_> = Part::ALL.iter().filter_map(|p| p.suffix()).collect();
        let mut unique = suffixes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            suffixes.len(),
            unique.len(),
            "two parts would get one parameter name"
        );
        assert_eq!(Placement::Auto.lowering(), Lowering::PtrLenRange);
        assert_eq!(Placement::Mapped.lowering(), Lowering::PtrLen);
    }
}
