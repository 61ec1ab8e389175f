//! One simulated block's shared memory: its static arrays and its dynamic array, poisoned
//! when the block starts, with a record of which bytes a thread of the block has written.
//!
//! A GPU does not clear shared memory: a block sees what an earlier block left there. A
//! simulator that zeroed it would pass a kernel that forgets to initialise its bins and gives
//! garbage on the GPU. So every array starts filled with [`POISON`] bytes, and a read (or
//! atomic) of a byte no thread of the block has written is reported.

use berth_device::host::{Access, SharedKey};

/// The byte every shared array starts filled with: all ones, so an unwritten `f32` or `f64`
/// is a NaN and an unwritten integer is `MAX` (or `-1`).
pub(crate) const POISON: u8 = 0xff;

/// One shared array of a block.
struct Arena {
    /// The `shared_array!` key (`path::NAME (file:line:col)`), or `None` for the dynamic
    /// array.
    key: Option<&'static SharedKey>,
    memory: Box<[u128]>,
    bytes: usize,
    /// One flag per byte: written by a thread of the block.
    written: Box<[bool]>,
}

impl Arena {
    fn new(key: Option<&'static SharedKey>, bytes: usize) -> Arena {
        let words = bytes.div_ceil(16).max(1);
        Arena {
            key,
            memory: vec![u128::from_ne_bytes([POISON; 16]); words].into_boxed_slice(),
            bytes,
            written: vec![false; bytes].into_boxed_slice(),
        }
    }

    fn base(&self) -> usize {
        self.memory.as_ptr() as usize
    }
}

/// A read of shared memory that no thread of the block had written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unwritten {
    pub(crate) addr: usize,
    pub(crate) bytes: usize,
    pub(crate) kind: Access,
    pub(crate) thread: usize,
    pub(crate) at: berth_device::host::At,
}

/// A block's shared arrays.
pub(crate) struct SharedMemory {
    /// The dynamic array first, then the static ones in the order the block first used them.
    arenas: Vec<Arena>,
}

impl SharedMemory {
    /// Shared memory of a block launched with `dynamic_bytes` of dynamic shared memory.
    pub(crate) fn new(dynamic_bytes: usize) -> SharedMemory {
        SharedMemory {
            arenas: vec![Arena::new(None, dynamic_bytes)],
        }
    }

    /// The static array of expansion `key`, `bytes` long: created poisoned on the block's
    /// first use.
    ///
    /// # Panics
    /// If the block used `key` before with another size (one expansion in a generic helper
    /// instantiated twice): the arena would be too small or too large for one of them.
    pub(crate) fn array(&mut self, key: &'static SharedKey, bytes: usize) -> *mut u8 {
        let found = self.arenas[1..]
            .iter_mut()
            .find(|a| a.key.is_some_and(|k| k.is(key)));
        let arena = match found {
            Some(a) => {
                assert!(
                    a.bytes == bytes,
                    "the shared array {} is {} bytes here but was {} bytes earlier in this block",
                    key.name(),
                    bytes,
                    a.bytes
                );
                a
            }
            None => {
                self.arenas.push(Arena::new(Some(key), bytes));
                self.arenas.last_mut().expect("just pushed")
            }
        };
        arena.memory.as_mut_ptr().cast()
    }

    /// The dynamic array: pointer and size.
    pub(crate) fn dynamic(&mut self) -> (*mut u8, usize) {
        let a = &mut self.arenas[0];
        (a.memory.as_mut_ptr().cast(), a.bytes)
    }

    /// Record an access of `bytes` at `addr`; whether it read bytes nobody had written.
    pub(crate) fn access(&mut self, addr: usize, bytes: usize, kind: Access) -> bool {
        let Some(a) = self
            .arenas
            .iter_mut()
            .find(|a| addr >= a.base() && addr < a.base() + a.bytes)
        else {
            return false;
        };
        let lo = addr - a.base();
        let flags = &mut a.written[lo..(lo + bytes).min(a.bytes)];
        let unwritten = kind != Access::Write && flags.iter().any(|&w| !w);
        if kind != Access::Read {
            flags.fill(true);
        }
        unwritten
    }

    /// `NAME[i]` of the element of `bytes` at `addr`, and where the array is declared: "the
    /// shared array `TILE` (examples/src/lib.rs:329:20), element 3".
    pub(crate) fn describe(&self, addr: usize, bytes: usize) -> String {
        let Some(a) = self
            .arenas
            .iter()
            .find(|a| addr >= a.base() && addr < a.base() + a.bytes.max(1))
        else {
            return format!("shared address {addr:#x}");
        };
        let index = (addr - a.base()) / bytes.max(1);
        match a.key {
            None => format!("element {index} of the dynamic shared array ({bytes}-byte elements)"),
            Some(key) => {
                let key = key.name();
                let (path, at) = key.split_once(" (").unwrap_or((key, ""));
                let name = path.rsplit("::").next().unwrap_or(path);
                let at = at.trim_end_matches(')');
                format!("`{name}[{index}]` (the shared_array! at {at})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_start_poisoned_and_unwritten_reads_are_found() {
        let mut m = SharedMemory::new(64);
        static KEY: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
        let key = &KEY;
        let p = m.array(key, 40);
        // SAFETY: the array is 40 bytes long.
        assert!(
            unsafe { std::slice::from_raw_parts(p, 40) }
                .iter()
                .all(|&b| b == POISON)
        );
        assert_eq!(m.array(key, 40), p, "one array per key");
        let at = p as usize + 8;
        assert!(m.access(at, 4, Access::Read));
        assert!(!m.access(at, 4, Access::Write));
        assert!(!m.access(at, 4, Access::Read));
        assert!(m.access(at, 8, Access::Read), "half of it is unwritten");
        assert_eq!(
            m.describe(at, 4),
            "`TILE[2]` (the shared_array! at src/lib.rs:3:9)"
        );
        let (d, n) = m.dynamic();
        assert_eq!(n, 64);
        assert!(m.access(d as usize + 60, 4, Access::Atomic));
        assert!(
            !m.access(d as usize + 60, 4, Access::Read),
            "the atomic wrote it"
        );
        assert!(
            m.describe(d as usize + 60, 4)
                .starts_with("element 15 of the dynamic")
        );
    }

    /// Two expansions of one user macro share the key's text, not the key: each gets an
    /// arena of its own size.
    #[test]
    fn arrays_are_told_apart_by_key_not_by_name() {
        static SMALL: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
        static BIG: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
        let mut m = SharedMemory::new(0);
        let small = m.array(&SMALL, 4);
        let big = m.array(&BIG, 512);
        assert_ne!(small, big);
        // SAFETY: `big` is 512 bytes long.
        unsafe { big.write_bytes(1, 512) };
        assert_eq!(m.array(&SMALL, 4), small);
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.array(&BIG, 8)));
        assert!(again.is_err(), "one key, another size");
    }
}
