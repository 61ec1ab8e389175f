//! Block-shared memory that is really PTX `.shared`.
//!
//! `#[link_section = ".shared"]` is silently ignored by the nvptx backend (you get one
//! device-global buffer, shared by every block: a race). A static shared array
//! ([`shared_array!`](crate::shared_array)) is therefore a static in the section
//! `berth:shared`, which the builder moves to the `.shared` state space (address space 3), so
//! its accesses compile to `ld.shared`/`st.shared`/`atom.shared`; dynamic shared memory (sized
//! by the launch) is one `.extern .shared` array, see [`dynamic`].
//!
//! # The contract of plain accesses
//!
//! Every thread of a block reaches the same shared memory, and no type can tell which thread
//! touches which element between two barriers. So the plain accesses of a [`Shared`] —
//! [`read`](Shared::read), [`write`](Shared::write) and their `_unchecked` forms — are
//! `unsafe`, with one contract, as in CUDA:
//!
//! - **No race**: an element that a thread writes is read or written by no other thread of
//!   the block, plainly or atomically, unless a barrier ([`sync_threads`](crate::sync_threads))
//!   separates the two accesses (one thread's access comes before a barrier that the other
//!   thread's access comes after).
//! - **Written before read**: a plain read reads an element that a thread of the block wrote
//!   with a valid `T` before it (the same thread earlier, or another thread before a barrier).
//!   Shared memory starts undefined, with whatever an earlier block left there.
//!
//! An asynchronous copy from global memory ([`async_copy`](crate::async_copy)) is a write by
//! the thread that starts it, lasting until that thread waits for it; its module states the
//! contract that follows.
//!
//! The `// SAFETY:` comment of each `unsafe` block says why both hold — usually "each thread
//! writes its own slot, and reads come after a barrier". The CPU simulator checks the contract
//! on every launch: a race (naming the array, the element, both threads and both lines) and a
//! read of an element no thread of the block wrote are launch errors.
//!
//! # Barriers and atomics
//!
//! The barrier that orders the accesses, [`sync_threads`](crate::sync_threads), is `unsafe`
//! too: every thread of the block that has not exited must reach the same call, the same
//! number of times. A barrier under a thread-dependent condition is undefined behaviour in
//! CUDA (the aligned `bar.sync` lets the compiler assume a warp arrives together), and it
//! leaves threads a barrier apart, with nothing ordering their accesses.
//! The simulator reports a barrier reached by part of a block as a launch error.
//!
//! The atomics of a `Shared` ([`atomic`](crate::atomic): `tile.atomic_add(i, v)`, max, min,
//! exchange, cas) are `unsafe` for the second half of the contract alone: an atomic reads the
//! element, so **the element was written with a valid `T` by a thread of the block before
//! the atomic** (the same thread earlier, or another thread before a barrier). Two atomics
//! never race, and an atomic that meets a plain access of the element breaks the plain
//! access's contract, so "no race" asks nothing more of them. The usual shape is a cleared
//! histogram: each bin written with zero by one thread, a barrier, then the atomics.
//! Atomics on an `#[atomic]` kernel argument ([`AtomicSlice`](crate::AtomicSlice)) are safe:
//! the host initialised that memory.
//!
//! A `Shared` handle itself grants nothing, so making one
//! ([`shared_array!`](crate::shared_array), [`dynamic`], [`Shared::row`]) is safe.

use core::marker::PhantomData;
use core::mem::{MaybeUninit, align_of, size_of};

/// Whether a `T` is copied to and from shared memory as 4-byte words: 16-byte aligned
/// values of up to 64 bytes, on the GPU.
///
/// The NVPTX backend lowers a copy of a whole struct (an LLVM `memcpy`) to accesses of at most
/// 8 bytes, so a `float4`-like value copied from global to shared memory takes two loads and
/// two stores where nvcc's `float4` takes one of each. Copied as words, the loads and stores
/// are separate and LLVM's load/store vectoriser merges each four into one 16-byte access
/// (`ld.global.v4.b32`, `st.shared.v4.b32`). The test is a constant, so other types compile
/// to the plain copy alone.
const fn by_words<T>() -> bool {
    cfg!(target_arch = "nvptx64")
        && align_of::<T>() >= 16
        && size_of::<T>().is_multiple_of(16)
        && size_of::<T>() <= 64
}

/// Copy the `T` at `src` to `dst` as 4-byte words (see [`by_words`]).
///
/// # Safety
/// As `dst.write(src.read())`: `src` is valid for reads of a `T` and `dst` for writes, both
/// aligned for `T` to at least 4 bytes, and the two do not overlap.
#[inline(always)]
unsafe fn copy_words<T: Copy>(src: *const T, dst: *mut T) {
    let (src, dst) = (
        src.cast::<MaybeUninit<u32>>(),
        dst.cast::<MaybeUninit<u32>>(),
    );
    let mut w = 0;
    while w < size_of::<T>() / 4 {
        // SAFETY: word `w` lies inside the `T` at both ends (`w < size_of::<T>() / 4`) and is
        // 4-byte aligned (the caller's contract); as `MaybeUninit<u32>` a padding byte is
        // copied as it is, uninitialised or not.
        unsafe { dst.add(w).write(src.add(w).read()) };
        w += 1;
    }
}

/// A handle to a block's shared array of `T`. Every thread of the block sees the same memory.
///
/// Elements are read and written by value, with `unsafe` [`read`](Self::read) and
/// [`write`](Self::write) under the [module's contract](self#the-contract-of-plain-accesses);
/// a 2D tile `Shared<[T; C]>` gives its rows as `Shared<T>` with [`row`](Self::row). No `&T`
/// into shared memory is ever handed out: another thread may write the element while it
/// lives, which is why there is no `tile[i] = v` form.
///
/// ```
/// use berth_device::{shared_array, sync_threads, thread};
/// let tile = shared_array!(TILE: [[f32; 16]; 16]);
/// let (r, c) = (thread::idx_y(), thread::idx_x());
/// // SAFETY: each thread writes its own (r, c) slot; every thread of the block reaches the
/// // barrier (no branch around it); the transposed read comes after it, and the slot it
/// // reads was written by thread (c, r) before it.
/// let v = unsafe {
///     tile.row(r).write(c, 1.5);
///     sync_threads();
///     tile.row(c).read(r)
/// };
/// assert_eq!(v, 1.5);
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
    ///
    /// ```
    /// use berth_device::Shared;
    /// let mut backing = [0u32; 8];
    /// // SAFETY: `backing` is aligned, 8 elements long and outlives the handle (a host test:
    /// // one thread, so "block-shared" is this thread's).
    /// let s = unsafe { Shared::from_raw(backing.as_mut_ptr(), backing.len()) };
    /// assert_eq!(s.len(), 8);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        Self {
            ptr,
            len,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    ///
    /// ```
    /// let tile = berth_device::shared_array!(T: [u32; 64]);
    /// assert_eq!(tile.len(), 64);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array is empty.
    ///
    /// ```
    /// // Outside a launch there is no dynamic shared memory.
    /// assert!(berth_device::dynamic_shared::<f32>().is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Read element `i` (bounds-checked: an index past the end stops the thread with a
    /// located report).
    ///
    /// # Safety
    /// The [module's contract](self#the-contract-of-plain-accesses): some thread of the block
    /// wrote element `i` before this read, and no other thread writes it (plainly or
    /// atomically) between the last barrier and the next.
    ///
    /// ```
    /// use berth_device::{shared_array, sync_threads, thread};
    /// let sums = shared_array!(SUMS: [f32; 32]);
    /// let t = thread::idx_x();
    /// // SAFETY: each thread writes its own slot `t`; every thread reaches the barrier (no
    /// // branch around it); slot 0 is read after it and nobody writes it again.
    /// let first = unsafe {
    ///     sums.write(t, t as f32 * 2.0);
    ///     sync_threads();
    ///     sums.read(0)
    /// };
    /// assert_eq!(first, 0.0);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, i: usize) -> T {
        self.check(i);
        // SAFETY: in bounds (checked just above); the rest is the caller's contract.
        unsafe { self.read_unchecked(i) }
    }

    /// Write element `i` (bounds-checked: an index past the end stops the thread with a
    /// located report).
    ///
    /// # Safety
    /// The [module's contract](self#the-contract-of-plain-accesses): no other thread of the
    /// block reads or writes element `i` (plainly or atomically) between the last barrier and
    /// the next.
    ///
    /// ```
    /// use berth_device::{block, shared_array, sync_threads, thread};
    /// let bins = shared_array!(BINS: [u32; 16]);
    /// // Thread t clears bins t, t + threads, …: every bin, each by one thread.
    /// for k in (thread::idx_x()..bins.len()).step_by(block::size()) {
    ///     // SAFETY: bin `k` is cleared by this thread only; the atomics come after the
    ///     // barrier.
    ///     unsafe { bins.write(k, 0) };
    /// }
    /// // SAFETY: every thread of the block reaches both barriers (no branch around them);
    /// // bin 3 was cleared before the first, so the atomic adds to a written value; it is
    /// // read after the second, and nobody writes it after.
    /// let v = unsafe {
    ///     sync_threads();
    ///     bins.atomic_add(3, 1);
    ///     sync_threads();
    ///     bins.read(3)
    /// };
    /// assert_eq!(v, 1);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, i: usize, v: T) {
        self.check(i);
        // SAFETY: in bounds (checked just above); the rest is the caller's contract.
        unsafe { self.write_unchecked(i, v) }
    }

    /// Read element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`, and the contract of [`read`](Self::read).
    ///
    /// ```
    /// let tile = berth_device::shared_array!(T: [u64; 4]);
    /// // SAFETY: 3 < 4; this thread wrote element 3 and no other thread touches it.
    /// let v = unsafe {
    ///     tile.write_unchecked(3, 7);
    ///     tile.read_unchecked(3)
    /// };
    /// assert_eq!(v, 7);
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_unchecked(&self, i: usize) -> T {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race and initialisation checks
        crate::host::note_shared_element(self.ptr.wrapping_add(i), crate::host::Access::Read);
        // SAFETY: in bounds (the caller's contract); shared memory is valid for the kernel's
        // lifetime (`from_raw`'s contract); written with a valid `T` and not written
        // concurrently (the caller's contract). By value: no reference outlives the read.
        unsafe { self.ptr.add(i).read() }
    }

    /// Write element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`, and the contract of [`write`](Self::write).
    ///
    /// ```
    /// use berth_device::{shared_array, thread};
    /// let tile = shared_array!(T: [f32; 256]);
    /// let t = thread::idx_x();
    /// if t < tile.len() {
    ///     // SAFETY: `t < len`, and thread `t` is the only one writing slot `t`.
    ///     unsafe { tile.write_unchecked(t, 0.5) };
    /// }
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write_unchecked(&self, i: usize, v: T) {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        crate::host::note_shared_element(self.ptr.wrapping_add(i), crate::host::Access::Write);
        // SAFETY: in bounds (the caller's contract); valid per `from_raw`'s contract; no
        // other thread touches the element meanwhile (the caller's contract). `T: Copy`: the
        // old value needs no drop. Both ends are aligned for `T`.
        unsafe {
            if const { by_words::<T>() } {
                copy_words(&v, self.ptr.add(i));
            } else {
                self.ptr.add(i).write(v);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The generic-address-space pointer to element 0 (for `unsafe` code that needs wide
    /// or custom accesses; the simulator does not see accesses through it).
    ///
    /// ```
    /// let tile = berth_device::shared_array!(T: [f32; 4]);
    /// assert_eq!(tile.as_ptr() as usize % 16, 0); // shared arrays are 16-byte aligned
    /// ```
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

impl<T: Copy + Send, const C: usize> Shared<[T; C]> {
    /// Row `r` of a 2D tile, as a `Shared<T>` of its `C` elements (bounds-checked): read and
    /// write it with [`read`](Shared::read) and [`write`](Shared::write),
    /// `tile.row(r).read(c)`. Safe: the row handle, like any handle, grants no access by
    /// itself.
    ///
    /// ```
    /// use berth_device::{shared_array, thread};
    /// let tile = shared_array!(TILE: [[u32; 8]; 4]);
    /// let (r, c) = (thread::idx_y(), thread::idx_x());
    /// let row = tile.row(r);
    /// assert_eq!(row.len(), 8);
    /// // SAFETY: each thread writes its own (r, c) slot and reads it back itself.
    /// let v = unsafe {
    ///     row.write(c, 10 * r as u32 + c as u32);
    ///     row.read(c)
    /// };
    /// assert_eq!(v, 0);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn row(&self, r: usize) -> Shared<T> {
        self.check(r);
        // SAFETY: row `r` is in bounds (checked just above): `C` contiguous elements of `T`
        // inside the array, in the same shared memory, valid for the kernel's lifetime.
        unsafe { Shared::from_raw(self.ptr.add(r).cast::<T>(), C) }
    }
}

use crate::panic::index_out_of_bounds as out_of_bounds;

/// Declare a static block-shared array and get its [`Shared`] handle:
/// `let tile = shared_array!(TILE: [f32; 256]);`, or a 2D tile
/// `let tile = shared_array!(TILE: [[f32; 16]; 16]);` (a `Shared<[f32; 16]>` of 16 rows,
/// read as `tile.row(r).read(c)`). Each use of the macro is its own array, even two of one
/// name in one scope; its contents are undefined until written, as on the GPU (the simulator
/// fills them with `0xff` bytes and reports a read of an element no thread wrote). Plain
/// accesses are `unsafe`, under the [contract](crate::shared#the-contract-of-plain-accesses)
/// that the simulator checks; so are atomics, which need the element
/// [written first](crate::shared#barriers-and-atomics).
///
/// On the GPU the array is a static that the builder places in PTX `.shared` memory, so
/// accesses compile to `ld.shared`/`st.shared`/`atom.shared`.
///
/// ```
/// use berth_device::{block, shared_array, sync_threads, thread};
/// // A block's sum: each thread stores its value, thread 0 adds them up after the barrier.
/// let vals = shared_array!(VALS: [f32; 256]);
/// let t = thread::idx_x();
/// // SAFETY: thread `t` writes only its own slot `t`; every thread of the block reaches the
/// // barrier (no branch around it).
/// unsafe {
///     vals.write(t, 1.0);
///     sync_threads();
/// }
/// if t == 0 {
///     let mut total = 0.0;
///     for k in 0..block::size() {
///         // SAFETY: slot `k` was written by thread `k` before the barrier; nobody writes
///         // it after.
///         total += unsafe { vals.read(k) };
///     }
///     assert_eq!(total, block::size() as f32);
/// }
/// ```
#[macro_export]
macro_rules! shared_array {
    ($name:ident : [$t:ty; $n:expr]) => {{
        const __BERTH_N: usize = $n;
        #[cfg(target_arch = "nvptx64")]
        let __berth_p = {
            #[allow(non_upper_case_globals)]
            // Moved to the `.shared` state space by the builder (section `berth:shared`);
            // never accessed as a Rust static, only through the handle below.
            #[unsafe(link_section = $crate::__abi::shared_section!())]
            static mut $name: ::core::mem::MaybeUninit<
                $crate::__private_shared::Aligned<[$t; __BERTH_N]>,
            > = ::core::mem::MaybeUninit::uninit();
            ::core::ptr::addr_of_mut!($name) as *mut $t
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let __berth_p = {
            // This expansion's own key: its address identifies the array (two expansions of
            // one user macro share the name and location text).
            static __BERTH_KEY: $crate::host::SharedKey = $crate::host::SharedKey::new(concat!(
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
            ));
            $crate::__host_shared(
                &__BERTH_KEY,
                ::core::mem::size_of::<$t>() * __BERTH_N,
                ::core::mem::align_of::<$t>(),
            ) as *mut $t
        };
        // SAFETY: `__berth_p` addresses `$n` elements of `$t` of this block's shared memory
        // (the `.shared` array above on the GPU, the block's arena on the host), 16-aligned.
        unsafe { $crate::Shared::<$t>::from_raw(__berth_p, __BERTH_N) }
    }};
}

#[doc(hidden)]
pub mod __private_shared {
    /// 16-byte alignment for shared arrays, so wide (`.v4`) accesses are possible.
    #[doc(hidden)]
    #[repr(C, align(16))]
    pub struct Aligned<T>(pub T);
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The block's dynamic shared memory; the builder declares it `.extern .shared`.
    #[link_name = berth_abi::dynamic_shared!()]
    static mut DYNAMIC_SHARED: [u8; 0];
}

/// The block's dynamic shared memory (sized by the launch's `shared_mem_bytes`), seen as
/// `T`s. Its length is the launch's byte count divided by `size_of::<T>()`; outside a launch
/// it is empty. Every call returns a handle to the same memory, so two views of different
/// types alias: the [contract](crate::shared#the-contract-of-plain-accesses) of plain accesses
/// is about the memory, whichever view reaches it.
///
/// ```
/// use berth_device::{dynamic_shared, sync_threads, thread};
/// // Launched with `Grid::new(blocks, threads).shared_bytes(threads * 4)`.
/// fn reverse_in_block(v: u32) -> u32 {
///     let tile = dynamic_shared::<u32>();
///     let (t, n) = (thread::idx_x(), tile.len());
///     if t < n {
///         // SAFETY: thread `t` writes only slot `t`.
///         unsafe { tile.write(t, v) };
///     }
///     // SAFETY: every thread of the block reaches the barrier: it is outside the branches.
///     unsafe { sync_threads() };
///     if t < n {
///         // SAFETY: slot `n - 1 - t` was written by its thread before the barrier (the
///         // launch gives one slot per thread), and nobody writes it after.
///         unsafe { tile.read(n - 1 - t) }
///     } else {
///         v
///     }
/// }
/// assert!(dynamic_shared::<u32>().is_empty()); // no launch here: nothing to reverse
/// assert_eq!(reverse_in_block(7), 7);
/// ```
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
            core::ptr::addr_of_mut!(DYNAMIC_SHARED) as *mut u8,
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
pub fn __host_shared(key: &'static crate::host::SharedKey, bytes: usize, align: usize) -> *mut u8 {
    crate::host::shared(key, bytes, align)
}
