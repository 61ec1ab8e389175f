//! Block-shared memory that is really PTX `.shared`.
//!
//! `#[link_section = ".shared"]` is silently ignored by the nvptx backend (you get one
//! device-global buffer, shared by every block: a race). Static shared arrays are therefore
//! declared with `global_asm!(".shared …")` and reached through `cvta.shared.u64`, which is
//! what [`shared_array!`](crate::shared_array) expands to; dynamic shared memory (sized by the
//! launch) is one `.extern .shared` array, see [`dynamic`].

use core::marker::PhantomData;

/// A handle to a block's shared array of `T`. Every thread of the block sees the same memory;
/// accesses between two [`sync_threads`](crate::sync_threads) calls that touch one element
/// from two threads, at least one writing, are a data race.
#[derive(Clone, Copy)]
pub struct Shared<T> {
    ptr: *mut T,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Copy> Shared<T> {
    /// Wrap a pointer into shared memory.
    ///
    /// # Safety
    /// `ptr` points to `len` elements of block-shared memory, aligned for `T`, valid for the
    /// whole kernel.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        Self {
            ptr,
            len,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array is empty.
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Read element `i`.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        self.check(i);
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::shared_access(
            self.ptr.wrapping_add(i) as usize,
            core::mem::size_of::<T>(),
            false,
        );
        // SAFETY: in bounds; shared memory is valid for the kernel's lifetime. Plain reads of
        // memory other threads may write are ordered by the barrier, not by the type system.
        unsafe { self.ptr.add(i).read() }
    }

    /// Write element `i`.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: T) {
        self.check(i);
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::shared_access(
            self.ptr.wrapping_add(i) as usize,
            core::mem::size_of::<T>(),
            true,
        );
        // SAFETY: in bounds, see `load`.
        unsafe { self.ptr.add(i).write(v) }
    }

    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The generic-address-space pointer to element 0.
    #[inline(always)]
    #[must_use]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    #[inline(always)]
    #[track_caller]
    fn check(&self, i: usize) {
        if i >= self.len {
            out_of_bounds(i, self.len)
        }
    }
}

use crate::panic::index_out_of_bounds as out_of_bounds;

/// Declare a static block-shared array and get its [`Shared`] handle:
/// `let tile = shared_array!(TILE: [f32; 256]);`. The name must be unique in the kernel crate.
#[macro_export]
macro_rules! shared_array {
    ($name:ident : [$t:ty; $n:expr]) => {{
        const __BERTH_N: usize = $n;
        #[cfg(target_arch = "nvptx64")]
        let __berth_p = {
            // An item-only macro needs an item position: a block-local module named after
            // the array (which also makes two arrays of one name in one scope an error).
            #[allow(non_snake_case)]
            mod $name {
                #[allow(unused_imports)]
                use super::*;
                ::core::arch::global_asm!(
                    concat!(".shared .align 16 .b8 __berth_shared_", stringify!($name), "[{bytes}];"),
                    bytes = const ::core::mem::size_of::<$t>() * ($n),
                );
            }
            let p: u64;
            // SAFETY: converts the address of the array declared just above to a generic pointer.
            unsafe {
                ::core::arch::asm!(
                    concat!("cvta.shared.u64 {p}, __berth_shared_", stringify!($name), ";"),
                    p = out(reg64) p,
                    options(pure, nomem, nostack),
                );
            }
            p as *mut $t
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let __berth_p = $crate::__host_shared(
            concat!(module_path!(), "::", stringify!($name)),
            ::core::mem::size_of::<$t>() * __BERTH_N,
            ::core::mem::align_of::<$t>(),
        ) as *mut $t;
        // SAFETY: `__berth_p` addresses `$n` elements of `$t` of this block's shared memory
        // (the `.shared` array above on the GPU, the block's arena on the host).
        unsafe { $crate::Shared::<$t>::from_raw(__berth_p, __BERTH_N) }
    }};
}

#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 16 .b8 __berth_dynamic_shared[];");

/// The block's dynamic shared memory (sized by the launch's `shared_mem_bytes`), seen as
/// `T`s. Its length is the launch's byte count divided by `size_of::<T>()`.
#[inline(always)]
#[must_use]
pub fn dynamic<T: Copy>() -> Shared<T> {
    #[cfg(target_arch = "nvptx64")]
    let (p, bytes) = {
        let p: u64;
        let bytes: u32;
        // SAFETY: takes the generic address of the extern shared array and reads the
        // %dynamic_smem_size special register; neither touches memory.
        unsafe {
            core::arch::asm!(
                "cvta.shared.u64 {p}, __berth_dynamic_shared;",
                "mov.u32 {b}, %dynamic_smem_size;",
                p = out(reg64) p,
                b = out(reg32) bytes,
                options(pure, nomem, nostack),
            );
        }
        (p as *mut u8, bytes as usize)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    let (p, bytes) = crate::host::dynamic_shared();
    assert!(
        core::mem::align_of::<T>() <= 16,
        "dynamic shared memory is 16-byte aligned"
    );
    // SAFETY: the dynamic shared array is 16-aligned (checked above) and `bytes` long.
    unsafe { Shared::from_raw(p.cast(), bytes / core::mem::size_of::<T>().max(1)) }
}

#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __host_shared(key: &'static str, bytes: usize, align: usize) -> *mut u8 {
    crate::host::shared(key, bytes, align)
}
