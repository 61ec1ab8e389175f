//! A kernel crate's SASS: one cubin per kernel, each assembled from the kernel's own PTX
//! module ([`ptx::split`](crate::ptx)), packed into one image the host build embeds. An edit to
//! one kernel assembles that kernel's cubin again, and the runtime loads only the cubins of
//! the kernels a program launches.
//!
//! The image: the 8 bytes [`MAGIC`], then per kernel a little-endian `u16` length and the
//! kernel's name (its general entry), a `u16` length and the architecture its cubin is for
//! (`sm_90`, `sm_90a`), a `u32` length and the names of the cubin's constant byte arrays
//! ([`Cubin::strings`]), a `u32` length, zero bytes up to a multiple of 8 from the image's
//! start, and the cubin.
//!
//! ```
//! use berth_abi::cubins::{Cubin, find, pack};
//! let mut image = Vec::new();
//! let kernels = [Cubin { name: "saxpy", arch: "sm_90", strings: "", image: b"\x7fELF-1" },
//!                Cubin { name: "gemm", arch: "sm_90a", strings: "file\nmsg", image: b"\x7fELF-2" }];
//! pack(kernels.iter().copied(), |bytes| image.extend_from_slice(bytes));
//! let gemm = find(&image, "gemm").unwrap();
//! assert_eq!((gemm.arch, gemm.image), ("sm_90a", &b"\x7fELF-2"[..]));
//! assert_eq!(gemm.strings().collect::<Vec<_>>(), ["file", "msg"]);
//! assert!(find(&image, "other").is_none());
//! assert_eq!(berth_abi::cubins::read(&image).count(), 2);
//! ```

/// The first bytes of the image.
pub const MAGIC: [u8; 8] = *b"berthSA2";

/// One kernel's cubin in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cubin<'a> {
    /// The kernel (its general entry's name); the cubin holds its entries.
    pub name: &'a str,
    /// The architecture the cubin was assembled for (`sm_90`, `sm_90a`).
    pub arch: &'a str,
    /// The names of the byte-array globals with initialisers of the module the cubin was
    /// assembled from ([`crate::ptx::byte_globals`]), one per line: where its constant strings
    /// live, which the runtime looks up when it loads the cubin (for the messages of the
    /// kernel's faults) without reading the PTX.
    pub strings: &'a str,
    /// The cubin (an ELF image).
    pub image: &'a [u8],
}

impl<'a> Cubin<'a> {
    /// The names of [`Cubin::strings`].
    pub fn strings(&self) -> impl Iterator<Item = &'a str> {
        self.strings.split('\n').filter(|s| !s.is_empty())
    }
}

/// Write the image of `cubins` through `out`, in pieces. Panics if a name or architecture
/// is longer than 65,535 bytes, or the string names or a cubin longer than 4 GiB (no build
/// makes one).
pub fn pack<'a>(cubins: impl IntoIterator<Item = Cubin<'a>>, mut out: impl FnMut(&[u8])) {
    out(&MAGIC);
    let mut at = MAGIC.len();
    let mut put = |bytes: &[u8], at: &mut usize| {
        out(bytes);
        *at += bytes.len();
    };
    for c in cubins {
        let name = u16::try_from(c.name.len()).expect("a kernel name under 64 KiB");
        let arch = u16::try_from(c.arch.len()).expect("an architecture name under 64 KiB");
        let strings = u32::try_from(c.strings.len()).expect("string names under 4 GiB");
        let len = u32::try_from(c.image.len()).expect("a cubin under 4 GiB");
        put(&name.to_le_bytes(), &mut at);
        put(c.name.as_bytes(), &mut at);
        put(&arch.to_le_bytes(), &mut at);
        put(c.arch.as_bytes(), &mut at);
        put(&strings.to_le_bytes(), &mut at);
        put(c.strings.as_bytes(), &mut at);
        put(&len.to_le_bytes(), &mut at);
        put(&[0; 8][..at.next_multiple_of(8) - at], &mut at);
        put(c.image, &mut at);
    }
}

/// The cubins of `image`, in order; nothing past a part that is not well formed (an image
/// without [`MAGIC`] has none).
pub fn read(image: &[u8]) -> impl Iterator<Item = Cubin<'_>> {
    let mut at = if image.starts_with(&MAGIC) {
        MAGIC.len()
    } else {
        image.len()
    };
    core::iter::from_fn(move || {
        let name_len = u16::from_le_bytes(take(image, &mut at, 2)?.try_into().ok()?);
        let name = core::str::from_utf8(take(image, &mut at, usize::from(name_len))?).ok()?;
        let arch_len = u16::from_le_bytes(take(image, &mut at, 2)?.try_into().ok()?);
        let arch = core::str::from_utf8(take(image, &mut at, usize::from(arch_len))?).ok()?;
        let strings_len = u32::from_le_bytes(take(image, &mut at, 4)?.try_into().ok()?);
        let strings = take(image, &mut at, usize::try_from(strings_len).ok()?)?;
        let strings = core::str::from_utf8(strings).ok()?;
        let len = u32::from_le_bytes(take(image, &mut at, 4)?.try_into().ok()?);
        let pad = at.next_multiple_of(8) - at;
        take(image, &mut at, pad)?;
        let cubin = take(image, &mut at, usize::try_from(len).ok()?)?;
        Some(Cubin {
            name,
            arch,
            strings,
            image: cubin,
        })
    })
}

/// The `n` bytes of `image` at `at`, moving `at` past them.
fn take<'a>(image: &'a [u8], at: &mut usize, n: usize) -> Option<&'a [u8]> {
    let bytes = image.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(bytes)
}

/// The cubin of kernel `name` in `image`.
pub fn find<'a>(image: &'a [u8], name: &str) -> Option<Cubin<'a>> {
    read(image).find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn cubins_start_eight_byte_aligned_and_a_cut_image_reads_what_is_whole() {
        let mut image = Vec::new();
        let kernels = [
            Cubin {
                name: "a",
                arch: "sm_90",
                strings: "",
                image: &[1, 2, 3],
            },
            Cubin {
                name: "kernel_b",
                arch: "sm_90a",
                strings: "anon_$_0\nanon_$_1",
                image: &[4; 17],
            },
        ];
        pack(kernels, |b| image.extend_from_slice(b));
        let read_back: Vec<Cubin<'_>> = read(&image).collect();
        assert_eq!(read_back, kernels);
        for c in &read_back {
            let offset = c.image.as_ptr() as usize - image.as_ptr() as usize;
            assert_eq!(offset % 8, 0, "{}", c.name);
        }
        // Cut anywhere inside the second cubin: the first alone.
        for cut in [image.len() - 1, image.len() - 17, image.len() - 20] {
            assert_eq!(read(&image[..cut]).collect::<Vec<_>>(), kernels[..1]);
        }
        assert_eq!(read(b"\x7fELF").count(), 0);
        assert_eq!(read(&MAGIC).count(), 0);
    }
}
