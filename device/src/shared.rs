//! Block-shared memory that is really PTX `.shared`.
//!
//! `#[link_section = ".shared"]` is silently ignored by the nvptx backend (you get one
//! device-global buffer, shared by every block: a race). Static shared arrays are therefore
//! declared with `global_asm!(".shared …")` and reached through `cvta.shared.u64`, which is
//! what [`shared_array!`](crate::shared_array) expands to; dynamic shared memory (sized by the
//! launch) is one `.extern .shared` array, see [`dynamic`].

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::Index;

/// A handle to a block's shared array of `T`. Every thread of the block sees the same memory;
/// accesses between two [`sync_threads`](crate::sync_threads) calls that touch one element
/// from two threads, at least one writing, are a data race.
///
/// Elements are read and written by value, as cells: `tile[i].get()`, `tile[i].set(v)`
/// (or `tile.load(i)`, `tile.store(i, v)`); a 2D tile `Shared<[T; C]>` is indexed twice,
/// `tile[r][c].get()`. No `&T` into shared memory is ever handed out, because another thread
/// may write the element while it lives — which is why there is no `tile[i] = v` form.
///
/// ```
/// use berth_device::{shared_array, sync_threads, thread};
/// let tile = shared_array!(TILE: [[f32; 16]; 16]);
/// let (r, c) = (thread::idx_y(), thread::idx_x());
/// tile[r][c].set(1.5);
/// sync_threads();
/// assert_eq!(tile[c][r].get(), 1.5);
/// ```
#[derive(Clone, Copy)]
pub struct Shared<T> {
    ptr: *mut T,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Copy + Send> Shared<T> {
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
        crate::host::note_shared_element(self.ptr.wrapping_add(i), crate::host::Access::Read);
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
        crate::host::note_shared_element(self.ptr.wrapping_add(i), crate::host::Access::Write);
        // SAFETY: in bounds, see `load`.
        unsafe { self.ptr.add(i).write(v) }
    }

    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }

    /// Element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> &SharedCell<T> {
        // SAFETY: in bounds (the caller's contract); a `SharedCell` is a transparent cell
        // over the element, valid for the kernel's lifetime.
        unsafe { &*self.ptr.add(i).cast::<SharedCell<T>>() }
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

impl<T: Copy + Send> Index<usize> for Shared<T> {
    type Output = SharedCell<T>;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: usize) -> &SharedCell<T> {
        self.check(i);
        // SAFETY: checked just above.
        unsafe { self.get_unchecked(i) }
    }
}

/// One element of shared memory, read and written by value like a [`Cell`](core::cell::Cell)
/// (other threads of the block may write it between barriers, so no reference to its
/// value is handed out). Reached by indexing a [`Shared`].
#[repr(transparent)]
pub struct SharedCell<T> {
    value: UnsafeCell<T>,
}

impl<T: Copy + Send> SharedCell<T> {
    /// Read the element.
    #[inline(always)]
    #[must_use]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn get(&self) -> T {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::note_shared_element(self.value.get(), crate::host::Access::Read);
        // SAFETY: the element lives in shared memory for the whole kernel; reads and writes
        // go through the cell by value only, so no reference to it is live across a write.
        unsafe { self.value.get().read() }
    }

    /// Write the element.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn set(&self, v: T) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::note_shared_element(self.value.get(), crate::host::Access::Write);
        // SAFETY: as in `get`.
        unsafe { self.value.get().write(v) }
    }

    /// Replace the element with `f` of it; returns the new value. Not atomic: for
    /// accumulation by several threads use the atomics.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn update(&self, f: impl FnOnce(T) -> T) -> T {
        let v = f(self.get());
        self.set(v);
        v
    }
}

impl<T: Copy + Send, const C: usize> Index<usize> for SharedCell<[T; C]> {
    type Output = SharedCell<T>;
    /// Element `c` of a row of a 2D shared tile.
    #[inline(always)]
    #[track_caller]
    fn index(&self, c: usize) -> &SharedCell<T> {
        if c >= C {
            out_of_bounds(c, C)
        }
        // SAFETY: `c < C`; an array's elements are laid out contiguously and the cell is
        // transparent over its value.
        unsafe { &*self.value.get().cast::<T>().add(c).cast::<SharedCell<T>>() }
    }
}

impl<T: Copy + Send, const C: usize> SharedCell<[T; C]> {
    /// Element `c` of the row without a bounds check.
    ///
    /// # Safety
    /// `c < C`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, c: usize) -> &SharedCell<T> {
        // SAFETY: the caller's contract, as in `index`.
        unsafe { &*self.value.get().cast::<T>().add(c).cast::<SharedCell<T>>() }
    }
}

use crate::panic::index_out_of_bounds as out_of_bounds;

/// Declare a static block-shared array and get its [`Shared`] handle:
/// `let tile = shared_array!(TILE: [f32; 256]);`, or a 2D tile
/// `let tile = shared_array!(TILE: [[f32; 16]; 16]);` (a `Shared<[f32; 16]>` of 16 rows,
/// read as `tile[r][c].get()`). Each use of the macro is its own array, even two of one name
/// in one scope; its contents are undefined until written, as on the GPU (the simulator
/// fills them with `0xff` bytes and reports a read of an element no thread wrote).
///
/// On the GPU the array is a static that the builder places in PTX `.shared` memory, so
/// accesses compile to `ld.shared`/`st.shared`/`atom.shared`.
#[macro_export]
macro_rules! shared_array {
    ($name:ident : [$t:ty; $n:expr]) => {{
        const __BERTH_N: usize = $n;
        #[cfg(target_arch = "nvptx64")]
        let __berth_p = {
            #[allow(non_upper_case_globals)]
            // Moved to the `.shared` state space by the builder (section `berth:shared`);
            // never accessed as a Rust static, only through the handle below.
            #[unsafe(link_section = "berth:shared")]
            static mut $name: ::core::mem::MaybeUninit<
                $crate::__private_shared::Aligned<[$t; __BERTH_N]>,
            > = ::core::mem::MaybeUninit::uninit();
            ::core::ptr::addr_of_mut!($name) as *mut $t
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let __berth_p = $crate::__host_shared(
            concat!(
                module_path!(),
                "::",
                stringify!($name),
                " (",
                file!(),
                ":",
                line!(),
                ":",
                column!(),
                ")"
            ),
            ::core::mem::size_of::<$t>() * __BERTH_N,
            ::core::mem::align_of::<$t>(),
        ) as *mut $t;
        // SAFETY: `__berth_p` addresses `$n` elements of `$t` of this block's shared memory
        // (the `.shared` array above on the GPU, the block's arena on the host), 16-aligned.
        unsafe { $crate::Shared::<$t>::from_raw(__berth_p, __BERTH_N) }
    }};
}

#[doc(hidden)]
pub mod __private_shared {
    /// 16-byte alignment for shared arrays, so wide (`.v4`) accesses are possible.
    #[repr(C, align(16))]
    pub struct Aligned<T>(pub T);
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The block's dynamic shared memory; the builder declares it `.extern .shared`.
    static mut __berth_dynamic_shared: [u8; 0];
}

/// The block's dynamic shared memory (sized by the launch's `shared_mem_bytes`), seen as
/// `T`s. Its length is the launch's byte count divided by `size_of::<T>()`.
#[inline(always)]
#[must_use]
pub fn dynamic<T: Copy + Send>() -> Shared<T> {
    #[cfg(target_arch = "nvptx64")]
    let (p, bytes) = {
        let bytes: u32;
        // SAFETY: reads the %dynamic_smem_size special register; touches no memory.
        unsafe {
            core::arch::asm!(
                "mov.u32 {b}, %dynamic_smem_size;",
                b = out(reg32) bytes,
                options(pure, nomem, nostack),
            );
        }
        (
            core::ptr::addr_of_mut!(__berth_dynamic_shared) as *mut u8,
            bytes as usize,
        )
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
