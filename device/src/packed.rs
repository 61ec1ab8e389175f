//! Integer columns that cross the link encoded and are decoded by the kernel that reads them:
//! frame of reference plus bit-packing. A column whose values span a range of `2^b` is sent
//! as `b` bits a value instead of the 8 (or 4, 2, 1) bytes of its type, so a scan bound by the
//! link moves several times fewer bytes.
//!
//! The layout is defined here once, for both sides: value `i` is `base + step * u`, where
//! `u` is the unsigned `bits`-wide integer that starts at bit `i * bits` of a sequence of
//! little-endian `u32` words (a value may straddle two words). On the host,
//! [`PackedColumn::encode`] chooses `base` (the minimum), `step` (the greatest common divisor
//! of the offsets from it: quantities in hundredths of whole units pack as units) and `bits`
//! from the column's values and packs it; any placement carries
//! the words (`#[pinned_async] words: &[u32]`, `#[mapped]`, device-resident), with the
//! [`Packing`] as a scalar beside them, and the kernel reads values through a [`Packed`] view:
//!
//! ```
//! use berth_device::packed::{Packed, PackedColumn};
//! let days: Vec<i32> = (0..1000).map(|i| 8036 + (i * 7) % 2526).collect();
//! let col = PackedColumn::encode(&days).expect("fits in 32 bits");
//! assert_eq!(col.packing().bits, 12); // 2526 distinct days: 12 bits instead of 32
//! assert!(col.bytes() * 2 < days.len() * 4);
//! // What a kernel does with the words it was given and the packing scalar:
//! let view = Packed::new(col.words(), col.packing());
//! assert_eq!(view.get(999), days[999] as i64);
//! ```

use crate::panic::index_out_of_bounds as out_of_bounds;

/// How a column is packed: its values are `base + step * u` for `bits`-wide unsigned `u`,
/// `len` of them (see the module's layout). A kernel takes it as a scalar next to the words.
///
/// ```
/// use berth_device::packed::Packing;
/// let p = Packing { base: 90_000, step: 1, len: 4, bits: 24, reserved: 0 };
/// assert_eq!(p.words(), 4); // 96 bits of values, plus the word every layout ends with
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packing {
    /// The frame of reference: the column's minimum.
    pub base: i64,
    /// The distance between consecutive codes (1 for plain bit-packing).
    pub step: i64,
    /// The number of values.
    pub len: u64,
    /// Bits a value, 0 (every value is `base`) to 32.
    pub bits: u32,
    /// Zero; keeps the struct free of padding.
    pub reserved: u32,
}

// SAFETY: `#[repr(C)]` of two i64, a u64 and two u32: 32 bytes with no padding, no
// pointers, and all-zero bytes are a valid (empty) packing.
unsafe impl crate::DeviceCopy for Packing {}

impl Packing {
    /// The number of `u32` words the layout takes: the values' bits rounded up to words, plus
    /// one, so that a decode always reads two whole words (two at least).
    ///
    /// ```
    /// use berth_device::packed::Packing;
    /// let p = Packing { base: 0, step: 1, len: 64, bits: 4, reserved: 0 };
    /// assert_eq!(p.words(), 9);
    /// ```
    #[inline(always)]
    pub fn words(&self) -> usize {
        ((self.len * self.bits as u64).div_ceil(32) as usize + 1).max(2)
    }
}

/// A kernel's view of a packed column: the words it was given and their [`Packing`].
///
/// ```
/// use berth_device::packed::{Packed, Packing};
/// // Two 4-bit values, 3 and 10, over a base of 100.
/// let words = [0xA3u32, 0];
/// let v = Packed::new(&words, Packing { base: 100, step: 1, len: 2, bits: 4, reserved: 0 });
/// assert_eq!((v.get(0), v.get(1), v.len()), (103, 110, 2));
/// ```
#[derive(Clone, Copy)]
pub struct Packed<'a> {
    words: &'a [u32],
    packing: Packing,
    mask: u64,
}

impl<'a> Packed<'a> {
    /// The view of `words` packed as `packing` says.
    ///
    /// # Panics
    /// Stops the kernel (without `core::fmt`) if `packing.bits` is over 32 or `words` is
    /// shorter than the layout ([`Packing::words`]): once here, so that
    /// [`get`](Packed::get) below `len` never fails.
    ///
    /// ```
    /// use berth_device::packed::{Packed, Packing};
    /// let p = Packing { base: 0, step: 1, len: 100, bits: 8, reserved: 0 };
    /// let short = [0u32; 3];
    /// assert!(std::panic::catch_unwind(|| Packed::new(&short, p)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn new(words: &'a [u32], packing: Packing) -> Self {
        if packing.bits > 32 {
            crate::panic::fail("Packed: a packing has at most 32 bits a value");
        }
        let need = packing.words();
        if words.len() < need {
            out_of_bounds(need - 1, words.len());
        }
        Packed {
            words,
            packing,
            mask: (1u64 << packing.bits) - 1,
        }
    }

    /// The number of values.
    ///
    /// ```
    /// use berth_device::packed::{Packed, Packing};
    /// let v = Packed::new(&[0, 0], Packing { base: 7, step: 1, len: 5, bits: 0, reserved: 0 });
    /// assert_eq!((v.len(), v.get(4)), (5, 7));
    /// ```
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.packing.len as usize
    }

    /// Whether there are no values.
    ///
    /// ```
    /// use berth_device::packed::{Packed, Packing};
    /// assert!(Packed::new(&[0, 0], Packing::default()).is_empty());
    /// ```
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.packing.len == 0
    }

    /// Value `i`.
    ///
    /// # Panics
    /// Stops the kernel with the index and length if `i >= len()`.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let col = PackedColumn::encode(&[-5i64, 1 << 30, 17]).unwrap();
    /// let v = col.view();
    /// assert_eq!((v.get(0), v.get(1), v.get(2)), (-5, 1 << 30, 17));
    /// assert!(std::panic::catch_unwind(|| v.get(3)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> i64 {
        if i as u64 >= self.packing.len {
            out_of_bounds(i, self.len());
        }
        let bit = i as u64 * self.packing.bits as u64;
        let w = (bit >> 5) as usize;
        // `new` checked that the words reach `words()`, which covers word `w + 1` of every
        // value below `len`: these reads are in bounds.
        let (lo, hi) = match (self.words.get(w), self.words.get(w + 1)) {
            (Some(&lo), Some(&hi)) => (lo as u64, hi as u64),
            _ => out_of_bounds(w + 1, self.words.len()),
        };
        let v = ((hi << 32 | lo) >> (bit & 31)) & self.mask;
        self.packing
            .base
            .wrapping_add(self.packing.step.wrapping_mul(v as i64))
    }
}

/// A column packed on the host ([`encode`](PackedColumn::encode)): the words to hand to a
/// kernel and the [`Packing`] to pass beside them.
///
/// ```
/// use berth_device::packed::PackedColumn;
/// let discount: Vec<i64> = (0..10_000).map(|i| i % 11).collect(); // 0.00 … 0.10, scaled
/// let col = PackedColumn::encode(&discount).unwrap();
/// assert_eq!(col.packing().bits, 4);
/// assert_eq!(col.raw_bytes(), 80_000);
/// assert_eq!(col.bytes(), 5_004); // 16× fewer bytes to move
/// ```
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedColumn {
    words: Vec<u32>,
    packing: Packing,
    raw_bytes: usize,
}

/// Integer types a column may be packed from: those that widen to `i64` without loss.
///
/// ```
/// use berth_device::packed::PackInt;
/// fn span<T: PackInt>(v: &[T]) -> i64 {
///     v.iter().map(|x| x.widen()).max().unwrap() - v.iter().map(|x| x.widen()).min().unwrap()
/// }
/// assert_eq!(span(&[3u8, 250]), 247);
/// ```
#[cfg(not(target_arch = "nvptx64"))]
pub trait PackInt: Copy {
    /// The value, widened.
    ///
    /// ```
    /// use berth_device::packed::PackInt;
    /// assert_eq!((-3i8).widen(), -3);
    /// ```
    fn widen(self) -> i64;
}

#[cfg(not(target_arch = "nvptx64"))]
macro_rules! pack_int {
    ($($t:ty),*) => { $(
        impl PackInt for $t {
            #[inline(always)]
            fn widen(self) -> i64 {
                self as i64
            }
        }
    )* };
}
#[cfg(not(target_arch = "nvptx64"))]
pack_int!(u8, u16, u32, i8, i16, i32, i64);

/// The greatest common divisor (`gcd(0, b) == b`).
#[cfg(not(target_arch = "nvptx64"))]
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(not(target_arch = "nvptx64"))]
impl PackedColumn {
    /// Pack `values` with the smallest frame of reference that holds them: `base` is the
    /// minimum, `step` the greatest common divisor of the offsets from it, and `bits` the
    /// width of the largest offset divided by `step`. `None` when that needs more than 32
    /// bits (the values would not pack), in which case a caller sends them raw.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// assert!(PackedColumn::encode(&[0i64, 1, 1 << 40]).is_none());
    /// let flags = PackedColumn::encode(&[b'N', b'R', b'A']).unwrap();
    /// assert_eq!((flags.packing().base, flags.packing().bits), (65, 5));
    /// ```
    pub fn encode<T: PackInt>(values: &[T]) -> Option<PackedColumn> {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for v in values {
            let v = v.widen();
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if values.is_empty() {
            (lo, hi) = (0, 0);
        }
        let mut step = 0u128;
        for v in values {
            step = gcd(step, (v.widen() as i128 - lo as i128) as u128);
        }
        let step = step.max(1);
        let span = (hi as i128 - lo as i128) as u128 / step;
        let bits = 128 - span.leading_zeros();
        if bits > 32 {
            return None;
        }
        let packing = Packing {
            base: lo,
            // At most the span, which fits in 32 bits times the step: a `u64`; the `i64`
            // product below wraps as the decode's does.
            step: step as i64,
            len: values.len() as u64,
            bits,
            reserved: 0,
        };
        let mut words = vec![0u32; packing.words()];
        if bits > 0 {
            for (i, v) in values.iter().enumerate() {
                let off = ((v.widen() as i128 - lo as i128) as u128 / step) as u64;
                let bit = i as u64 * bits as u64;
                let w = (bit >> 5) as usize;
                let shifted = off << (bit & 31);
                words[w] |= shifted as u32;
                words[w + 1] |= (shifted >> 32) as u32;
            }
        }
        Some(PackedColumn {
            words,
            packing,
            raw_bytes: std::mem::size_of_val(values),
        })
    }

    /// The packed words (what crosses the link).
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let col = PackedColumn::encode(&[1u8, 2, 3]).unwrap(); // codes 0, 1, 2: 2 bits each
    /// assert_eq!(col.words(), &[0b10_01_00, 0]);
    /// ```
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The packed words, owned (to pin, register or share them).
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let col = PackedColumn::encode(&[7i32; 100]).unwrap(); // one value: 0 bits
    /// assert_eq!(col.into_words(), vec![0, 0]);
    /// ```
    pub fn into_words(self) -> Vec<u32> {
        self.words
    }

    /// The scalar a kernel decodes the words with.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let p = PackedColumn::encode(&[-4i16, 3, 2]).unwrap().packing();
    /// assert_eq!((p.base, p.step, p.len, p.bits), (-4, 1, 3, 3));
    /// // Hundredths of whole units: a step of 100.
    /// let q = PackedColumn::encode(&[100i64, 5000, 2400]).unwrap().packing();
    /// assert_eq!((q.base, q.step, q.bits), (100, 100, 6));
    /// ```
    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// Bytes of the packed words.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let col = PackedColumn::encode(&vec![1u32 << 20; 1000]).unwrap();
    /// assert_eq!(col.bytes(), 8);
    /// ```
    pub fn bytes(&self) -> usize {
        self.words.len() * 4
    }

    /// Bytes of the column it was packed from.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// assert_eq!(PackedColumn::encode(&[0i64; 10]).unwrap().raw_bytes(), 80);
    /// ```
    pub fn raw_bytes(&self) -> usize {
        self.raw_bytes
    }

    /// The column seen as a kernel sees it, on the host.
    ///
    /// ```
    /// use berth_device::packed::PackedColumn;
    /// let col = PackedColumn::encode(&[10u16, 20, 30]).unwrap();
    /// assert_eq!(col.view().get(2), 30);
    /// ```
    pub fn view(&self) -> Packed<'_> {
        Packed::new(&self.words, self.packing)
    }
}

#[cfg(test)]
mod tests {
    use super::PackedColumn;

    /// Every width from 0 to 32 bits, at both ends of its range and at values straddling
    /// words, decodes to what was packed; a span of 2^32 does not pack.
    #[test]
    fn every_width_round_trips() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bits in 0..=32u32 {
            let max = if bits == 0 { 0 } else { (1i64 << bits) - 1 };
            let base = -(1i64 << 40) + bits as i64;
            let mut values = vec![base, base + max];
            for _ in 0..997 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                values.push(base + (x as i64 & max));
            }
            let col = PackedColumn::encode(&values).unwrap();
            assert_eq!(col.packing().bits, bits);
            assert_eq!(col.packing().base, base);
            let v = col.view();
            assert_eq!(v.len(), values.len());
            for (i, &want) in values.iter().enumerate() {
                assert_eq!(v.get(i), want, "bits {bits}, value {i}");
            }
        }
        // Multiples of a step pack as their quotients; a span of 2^32 steps or more does
        // not pack.
        let hundredths: Vec<i64> = (1..=50).map(|q| -300 + q * 100).collect();
        let col = PackedColumn::encode(&hundredths).unwrap();
        assert_eq!((col.packing().step, col.packing().bits), (100, 6));
        assert!((0..50).all(|i| col.view().get(i) == hundredths[i]));
        assert_eq!(
            PackedColumn::encode(&[0i64, 3 << 31])
                .unwrap()
                .packing()
                .bits,
            1
        );
        assert!(PackedColumn::encode(&[0i64, 1 << 32, 1]).is_none());
        assert_eq!(
            PackedColumn::encode(&[0i64, 1, u32::MAX as i64])
                .unwrap()
                .packing()
                .bits,
            32
        );
        let empty = PackedColumn::encode::<i64>(&[]).unwrap();
        assert!(empty.view().is_empty());
    }
}
