//! Atomic read-modify-write on kernel memory: elements of `#[atomic] &mut [T]` arguments
//! ([`AtomicSlice`]) and of shared arrays ([`Shared`]). Each returns the previous value, as
//! CUDA's `atomicAdd` and friends do, on the GPU and in the simulator alike.
//!
//! The atomics of an `AtomicSlice` are safe: the host initialised its memory. Those of a
//! `Shared` are `unsafe`, because shared memory starts undefined and an atomic reads the
//! element: their contract is that a thread of the block wrote the element before (see
//! [the shared-memory contract](crate::shared#barriers-and-atomics)). The two compile to the
//! same instructions; `unsafe` is only in the type.
//!
//! | operation | `u32` `i32` `u64` `i64` | `f32` `f64` |
//! |---|---|---|
//! | `atomic_add` | wrapping | `atom.add.f32` / `.f64` |
//! | `atomic_min`, `atomic_max` | yes | yes (see below) |
//! | `atomic_exchange`, `atomic_cas` | yes | — |
//!
//! Ordering is relaxed at device scope (CUDA's default): the operations are atomic with
//! respect to each other, and order nothing else. Floats add through `atom.add.f32`/`.f64`
//! on the GPU (`core` has no float atomics) and a compare-and-swap loop on the host; on
//! shared arrays the float add is `atom.shared.add`. Float `atomic_min`/`atomic_max` are one
//! integer atomic on the value's bits (signed max for a non-negative `v`, unsigned min for a
//! negative one, and the mirror for min), which orders floats correctly, `-0.0` below `0.0`;
//! with a NaN in memory or in `v` the result is unspecified.
//!
//! **Scope.** The `_scoped` family on `&mut [T]` takes a [`Scope`]: who else may touch the
//! element. [`Scope::System`] (`atom.sys`) is needed when the host or another GPU does
//! (mapped memory); [`Scope::Device`] (`atom.gpu`) is what the plain methods do. A parameter
//! rather than one method per scope keeps one family of five names, and lets a helper pass
//! its caller's scope through; the value is a constant at the call site, so it costs nothing.
//! Shared arrays have no scoped variants: only their block can reach them.
//!
//! **Block scope** ([`Scope::Block`], `atom.cta`) is cheaper when only one block contends (a
//! per-block slot in global memory), but it is atomic only with respect to the threads of
//! the calling block: another block's access to the element, atomic or not, races with it,
//! and on the GPU updates are lost. Every block of a launch (and of any launch running at
//! once, such as the concurrent chunks of a pipelined `elementwise` launch) reaches every
//! element of an `#[atomic]` argument, so no type proves an element private to a block:
//! block scope takes the `unsafe` `_scoped_unchecked` family, whose contract is that no
//! other block touches the element meanwhile. Passing `Scope::Block` to a safe `_scoped`
//! method is a compile error that says so. The simulator reports two blocks of a launch
//! meeting on an element where either uses block scope, naming both blocks and call sites,
//! and checks the chunks of a pipelined launch as one launch.
//!
//! ```
//! use berth_device::atomic::{AtomicSlice, Scope};
//! let mut data = [1.5f64, 0.0];
//! // SAFETY: `data` outlives the view, nothing else touches it.
//! let v = unsafe { AtomicSlice::from_raw(data.as_mut_ptr(), 2) };
//! assert_eq!(v.atomic_add(0, 2.0), 1.5);
//! assert_eq!(v.atomic_max(1, -3.0), 0.0);
//! assert_eq!(v.atomic_add_scoped(1, 1.0, Scope::System), 0.0);
//! // SAFETY: one thread, so one block: no other block touches element 1.
//! assert_eq!(unsafe { v.atomic_add_scoped_unchecked(1, 1.0, Scope::Block) }, 1.0);
//! assert_eq!(data, [3.5, 2.0]);
//! ```
//!
//! ```compile_fail
//! use berth_device::atomic::{AtomicSlice, Scope};
//! let mut data = [0u32];
//! // SAFETY: `data` outlives the view, nothing else touches it.
//! let v = unsafe { AtomicSlice::from_raw(data.as_mut_ptr(), 1) };
//! v.atomic_add_scoped(0, 1, Scope::Block); // block scope needs `_scoped_unchecked`
//! ```

use crate::panic::index_out_of_bounds;
use crate::shared::Shared;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

/// A kernel's view of an `#[atomic] &mut [T]` argument: every access is atomic, so any
/// thread may update any element (a histogram, a counter, a claimed slot) without a race.
///
/// Declaring the argument `#[atomic]` is what makes this sound: the whole launch sees the
/// buffer only through atomics, so a plain write can never meet an atomic one on the same
/// element. `T` is `u32`, `i32`, `u64`, `i64`, `f32` or `f64`.
///
/// ```
/// use berth_device::{AtomicSlice, Slice, thread};
/// let bytes = [3u8, 1, 3, 3];
/// let mut counts = [0u32; 4];
/// // SAFETY: the arrays outlive the views; `counts` is reached only through atomics. (In a
/// // kernel the launcher builds the views of `&[u8]` and `#[atomic] &mut [u32]` arguments.)
/// let input = unsafe { Slice::from_raw(bytes.as_ptr(), bytes.len()) };
/// let histogram = unsafe { AtomicSlice::from_raw(counts.as_mut_ptr(), counts.len()) };
/// for i in thread::grid_stride(input.len()) {
///     histogram.atomic_add(usize::from(input[i]), 1);
/// }
/// assert_eq!(counts, [0, 1, 0, 3]);
/// ```
pub struct AtomicSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _life: PhantomData<&'a [T]>,
}

impl<T> AtomicSlice<'_, T> {
    /// Build the view of a kernel argument.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` elements of `T` for the view's lifetime,
    /// aligned (it may dangle when `len == 0`), and every access to the memory during that
    /// time, by any thread, is atomic (through such views).
    ///
    /// ```
    /// use berth_device::AtomicSlice;
    /// let mut counter = [0u64];
    /// // SAFETY: `counter` outlives the view and is reached only through atomics meanwhile.
    /// let c = unsafe { AtomicSlice::from_raw(counter.as_mut_ptr(), 1) };
    /// assert_eq!(c.atomic_add(0, 1), 0);
    /// assert_eq!(counter, [1]);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        AtomicSlice {
            ptr,
            len,
            _life: PhantomData,
        }
    }

    /// Number of elements.
    ///
    /// ```
    /// use berth_device::AtomicSlice;
    /// let mut bins = [0u32; 16];
    /// // SAFETY: `bins` outlives the view and is reached only through atomics meanwhile.
    /// let h = unsafe { AtomicSlice::from_raw(bins.as_mut_ptr(), bins.len()) };
    /// let bin = |x: u32| (x as usize).min(h.len() - 1); // clamp into the last bin
    /// assert_eq!((h.len(), bin(99)), (16, 15));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    ///
    /// ```
    /// use berth_device::AtomicSlice;
    /// // SAFETY: zero elements: nothing is reached.
    /// let h = unsafe { AtomicSlice::<u32>::from_raw(core::ptr::NonNull::dangling().as_ptr(), 0) };
    /// assert!(h.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }
}

macro_rules! atomic_load {
    ($($t:ty => $atomic:ty, $bits:ty;)*) => { $(
        impl AtomicSlice<'_, $t> {
            /// Element `i`, read atomically (relaxed).
            ///
            #[doc = example!(slice, $t, "5", "assert_eq!(v.load(0), d[0]);")]
            #[inline(always)]
            #[track_caller]
            #[must_use]
            pub fn load(&self, i: usize) -> $t {
                if i >= self.len {
                    index_out_of_bounds(i, self.len)
                }
                note_atomic!(slice, self, i, Some(Scope::Device));
                // SAFETY: in bounds; aligned for `$t`, which has the atomic's size and
                // alignment; every access to the element is atomic (from_raw's contract).
                let bits = unsafe { <$atomic>::from_ptr(self.ptr.add(i).cast::<$bits>()) }.load(Relaxed);
                <$t>::from_bits_or_self(bits)
            }
        }
    )* };
}

/// Integers load as themselves, floats from their bits.
trait FromBits<B> {
    fn from_bits_or_self(b: B) -> Self;
}
macro_rules! from_bits {
    ($($t:ty, $b:ty, $e:expr;)*) => { $(
        impl FromBits<$b> for $t {
            #[inline(always)]
            fn from_bits_or_self(b: $b) -> $t {
                ($e)(b)
            }
        }
    )* };
}
from_bits! {
    u32, u32, |b| b;
    i32, i32, |b| b;
    u64, u64, |b| b;
    i64, i64, |b| b;
    f32, u32, f32::from_bits;
    f64, u64, f64::from_bits;
}

/// Report an atomic access at `$scope` to element `$i` of the view `$v` to the simulator's
/// checks, located at the caller through `#[track_caller]`. On an `#[atomic]` argument, to
/// the launch's race check: an `#[atomic]` argument is reached only through atomics, which
/// never race with each other within a block, but one at block scope races with any access
/// of another block to the element. On a shared array, to its race and initialisation checks
/// (shared memory is also read and written plainly); only its block reaches it, so every
/// atomic there is atomic for all who can see it.
macro_rules! note_atomic {
    (slice, $v:expr, $i:expr, $scope:expr) => {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::note_element(
            $v.raw_ptr().wrapping_add($i),
            match $scope {
                None => crate::host::Access::BlockAtomic,
                Some(Scope::Device | Scope::System) => crate::host::Access::Atomic,
            },
        );
        #[cfg(target_arch = "nvptx64")]
        let _ = $scope;
    };
    (shared, $v:expr, $i:expr, $scope:expr) => {
        let _ = $scope;
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::note_shared_element(
            $v.raw_ptr().wrapping_add($i),
            crate::host::Access::Atomic,
        );
    };
}

/// A doc example of an atomic on a one-element view (`slice` or `shared`) of `$t` holding
/// `$init`; `v` is the view. The `=>` form runs `$first` (one line, or nothing), then checks
/// that the atomic `$op` returns the first of `$expected` and leaves the second in the element
/// (read back with `load` on a slice, with the `unsafe` plain `read` on a shared array). On a
/// shared array the element is written first and the body is one `unsafe` block.
macro_rules! example {
    ($kind:ident, $t:ty, $init:literal, $first:literal, $op:literal => $expected:literal) => {
        example!($kind, $t, $init, concat!(
            example!(@first $kind, $first),
            example!(@check $kind, $op, $expected)
        ))
    };
    (@first $kind:ident, "") => { "" };
    (@first slice, $first:literal) => { $first };
    (@first shared, $first:literal) => { concat!("    ", $first) };
    (@check slice, $op:literal, $expected:literal) => {
        concat!("assert_eq!((", $op, ", v.load(0)), ", $expected, ");")
    };
    (@check shared, $op:literal, $expected:literal) => {
        concat!(
            "    let old = ", $op, ";\n",
            "    assert_eq!((old, v.read(0)), ", $expected, ");"
        )
    };
    (slice, $t:ty, $init:literal, $body:expr) => {
        concat!(
            "```\n",
            "# #[allow(unused_imports)] use berth_device::atomic::Scope;\n",
            "let mut d = [",
            $init,
            stringify!($t),
            "];\n",
            "// SAFETY: `d` outlives the view and nothing else touches it.\n",
            "let v = unsafe { berth_device::atomic::AtomicSlice::from_raw(d.as_mut_ptr(), 1) };\n",
            $body,
            "\n```"
        )
    };
    (shared, $t:ty, $init:literal, $body:expr) => {
        concat!(
            "```\n",
            "let v = berth_device::shared_array!(A: [",
            stringify!($t),
            "; 1]);\n",
            "// SAFETY: one thread: it writes element 0 before the atomics, so they update a\n",
            "// written value, and nobody else touches the element.\n",
            "unsafe {\n",
            "    v.write(0, ",
            $init,
            stringify!($t),
            ");\n",
            $body,
            "\n}\n```"
        )
    };
}

atomic_load! {
    u32 => AtomicU32, u32;
    i32 => AtomicI32, i32;
    u64 => AtomicU64, u64;
    i64 => AtomicI64, i64;
    f32 => AtomicU32, u32;
    f64 => AtomicU64, u64;
}

/// The `# Safety` section of an atomic on a view of kind `slice` (none: safe) or `shared`.
macro_rules! safety {
    (slice) => {
        ""
    };
    (shared) => {
        concat!(
            "# Safety\n",
            "Element `i` was written with a valid value by a thread of this block before the\n",
            "atomic: the same thread earlier, or another thread before a barrier (shared memory\n",
            "starts undefined, with whatever an earlier block left there). Atomics never race\n",
            "with each other; meeting a plain access of the element is covered by the plain\n",
            "access's [contract](crate::shared#the-contract-of-plain-accesses).\n"
        )
    };
}

macro_rules! int_atomics {
    ($t:ty, $atomic:ty) => {
        int_atomics!(@impl AtomicSlice<'_, $t>, $t, $atomic, slice, []);
        int_atomics!(@impl Shared<$t>, $t, $atomic, shared, [unsafe]);
    };
    (@impl $view:ty, $t:ty, $atomic:ty, $kind:ident, [$($unsafe:tt)?]) => {
        impl $view {
            /// The atomic of element `i`, for an atomic at `scope` (`None`: block scope), which
            /// only the simulator's checks read: the plain methods' atomics are at device scope.
            #[inline(always)]
            #[track_caller]
            fn atomic_at(&self, i: usize, scope: Option<Scope>) -> &$atomic {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                note_atomic!($kind, self, i, scope);
                // SAFETY: in bounds; the element is aligned for its type, which has the
                // atomic's size and alignment; every access to it in the kernel that may race
                // goes through these atomics.
                unsafe { <$atomic>::from_ptr(self.raw_ptr().add(i)) }
            }

            /// `self[i] += v` atomically (wrapping); returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "5", "", "v.atomic_add(0, 2)" => "(5, 7)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_add(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i, Some(Scope::Device)).fetch_add(v, Relaxed)
            }

            /// `self[i] = max(self[i], v)` atomically; returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "5", "", "v.atomic_max(0, 9)" => "(5, 9)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_max(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i, Some(Scope::Device)).fetch_max(v, Relaxed)
            }

            /// `self[i] = min(self[i], v)` atomically; returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "5", "", "v.atomic_min(0, 1)" => "(5, 1)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_min(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i, Some(Scope::Device)).fetch_min(v, Relaxed)
            }

            /// `self[i] = v` atomically; returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "5", "", "v.atomic_exchange(0, 3)" => "(5, 3)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_exchange(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i, Some(Scope::Device)).swap(v, Relaxed)
            }

            /// If `self[i] == current`, set it to `new`; returns the previous value either way.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "5", "assert_eq!(v.atomic_cas(0, 5, 7), 5);\n", "v.atomic_cas(0, 5, 9)" => "(7, 7)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_cas(&self, i: usize, current: $t, new: $t) -> $t {
                match self.atomic_at(i, Some(Scope::Device)).compare_exchange(current, new, Relaxed, Relaxed) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    };
}

int_atomics!(u32, AtomicU32);
int_atomics!(i32, AtomicI32);
int_atomics!(u64, AtomicU64);
int_atomics!(i64, AtomicI64);

macro_rules! float_atomics {
    ($t:ty, $bits:ty, $atomic:ty, $reg:ident, $add:literal, $shared_add:literal,
     $signed:ty, $signed_atomic:ty) => {
        float_atomics!(@minmax AtomicSlice<'_, $t>, $t, $bits, $atomic, $signed, $signed_atomic,
            slice, []);
        float_atomics!(@minmax Shared<$t>, $t, $bits, $atomic, $signed, $signed_atomic,
            shared, [unsafe]);
        float_atomics!(@add AtomicSlice<'_, $t>, $t, $bits, $atomic, $reg, slice, [],
            concat!($add, " {old}, [{p}], {v};"));
        // The element's shared-space address, 32 bits, from its generic one: the add is in
        // the shared state space whatever LLVM knows of the pointer.
        float_atomics!(@add Shared<$t>, $t, $bits, $atomic, $reg, shared, [unsafe], concat!(
            "{{ .reg .b64 %berth_s64; .reg .b32 %berth_s32;\n",
            "cvta.to.shared.u64 %berth_s64, {p};\n",
            "cvt.u32.u64 %berth_s32, %berth_s64;\n",
            $shared_add, " {old}, [%berth_s32], {v};\n}}"
        ));
    };
    (@add $view:ty, $t:ty, $bits:ty, $atomic:ty, $reg:ident, $kind:ident, [$($unsafe:tt)?],
     $tmpl:expr) => {
        impl $view {
            /// `self[i] += v` atomically; returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "0.5", "", "v.atomic_add(0, 2.0)" => "(0.5, 2.5)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_add(&self, i: usize, v: $t) -> $t {
                self.add_at(i, v, Some(Scope::Device))
            }

            /// [`atomic_add`](Self::atomic_add), with the `scope` the simulator's checks see
            /// (`None`: block scope; on the GPU, the add is at device scope).
            #[inline(always)]
            #[track_caller]
            fn add_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                note_atomic!($kind, self, i, scope);
                // SAFETY: in bounds (checked above) and aligned.
                let p = unsafe { self.raw_ptr().add(i) };
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $t;
                    // SAFETY: `p` is a valid, aligned generic address of the element (for a
                    // shared array, converted to its shared-space address first).
                    unsafe {
                        core::arch::asm!(
                            $tmpl,
                            old = out($reg) old,
                            p = in(reg64) p,
                            v = in($reg) v,
                            options(nostack),
                        );
                    }
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: as above; the float and its bits type have one size and
                    // alignment.
                    let a = unsafe { <$atomic>::from_ptr(p.cast::<$bits>()) };
                    let mut cur = a.load(Relaxed);
                    loop {
                        let next = (<$t>::from_bits(cur) + v).to_bits();
                        match a.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                            Ok(prev) => return <$t>::from_bits(prev),
                            Err(seen) => cur = seen,
                        }
                    }
                }
            }
        }
    };
    (@minmax $view:ty, $t:ty, $bits:ty, $atomic:ty, $signed:ty, $signed_atomic:ty, $kind:ident,
     [$($unsafe:tt)?]) => {
        impl $view {
            #[inline(always)]
            #[track_caller]
            fn float_bits_at(&self, i: usize) -> (&$atomic, &$signed_atomic) {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                note_atomic!($kind, self, i, Some(Scope::Device));
                // SAFETY: in bounds and aligned; the float, its bits and their atomics have
                // one size and alignment; racing accesses go through these atomics.
                unsafe {
                    let p = self.raw_ptr().add(i);
                    (<$atomic>::from_ptr(p.cast()), <$signed_atomic>::from_ptr(p.cast()))
                }
            }

            /// `self[i] = max(self[i], v)` atomically (one integer atomic on the bits; NaNs
            /// unspecified); returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "0.5", "assert_eq!(v.atomic_max(0, -2.0), 0.5);\n", "v.atomic_max(0, 3.0)" => "(0.5, 3.0)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_max(&self, i: usize, v: $t) -> $t {
                let (u, s) = self.float_bits_at(i);
                let b = v.to_bits();
                <$t>::from_bits(if v.is_sign_positive() {
                    s.fetch_max(b as $signed, Relaxed) as $bits
                } else {
                    u.fetch_min(b, Relaxed)
                })
            }

            /// `self[i] = min(self[i], v)` atomically (one integer atomic on the bits; NaNs
            /// unspecified); returns the previous value.
            ///
            #[doc = safety!($kind)]
            #[doc = example!($kind, $t, "0.5", "assert_eq!(v.atomic_min(0, 3.0), 0.5);\n", "v.atomic_min(0, -2.0)" => "(0.5, -2.0)")]
            #[inline(always)]
            #[track_caller]
            pub $($unsafe)? fn atomic_min(&self, i: usize, v: $t) -> $t {
                let (u, s) = self.float_bits_at(i);
                let b = v.to_bits();
                <$t>::from_bits(if v.is_sign_positive() {
                    s.fetch_min(b as $signed, Relaxed) as $bits
                } else {
                    u.fetch_max(b, Relaxed)
                })
            }
        }
    };
}

float_atomics!(
    f32,
    u32,
    AtomicU32,
    reg32,
    "atom.add.f32",
    "atom.shared.add.f32",
    i32,
    AtomicI32
);
float_atomics!(
    f64,
    u64,
    AtomicU64,
    reg64,
    "atom.add.f64",
    "atom.shared.add.f64",
    i64,
    AtomicI64
);

/// Which threads an atomic must be atomic with respect to (PTX's `.gpu`, `.sys`, and `.cta`
/// through [`Scope::Block`]). See the [module docs](self) for when to choose which.
///
/// ```
/// use berth_device::atomic::Scope;
/// assert_ne!(Scope::Device, Scope::System);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// All threads of the GPU (`atom.gpu`): what the unscoped methods do.
    Device,
    /// The GPU, the host and other GPUs (`atom.sys`): for mapped or managed memory that
    /// others touch during the kernel.
    System,
}

#[allow(non_upper_case_globals)]
impl Scope {
    /// The threads of the calling block (`atom.cta`): only for an element that no other block
    /// touches meanwhile (a per-block slot). Another block's access to the element, even an
    /// atomic one, races with it. Its own type, [`BlockScope`], which the safe `_scoped`
    /// methods refuse at compile time: it goes to the `unsafe` `_scoped_unchecked` family,
    /// whose contract is that promise. Use [`Scope::Device`] for an element that blocks
    /// share.
    ///
    /// ```
    /// use berth_device::atomic::{AtomicSlice, Scope};
    /// let mut slots = [0u32; 4];
    /// // SAFETY: `slots` outlives the view, nothing else touches it.
    /// let v = unsafe { AtomicSlice::from_raw(slots.as_mut_ptr(), 4) };
    /// // SAFETY: one thread, so one block: no other block touches element 2.
    /// unsafe { v.atomic_add_scoped_unchecked(2, 5, Scope::Block) };
    /// assert_eq!(slots, [0, 0, 5, 0]);
    /// ```
    pub const Block: BlockScope = BlockScope;
}

/// The type of [`Scope::Block`]: block scope (`atom.cta`), taken only by the `unsafe`
/// `_scoped_unchecked` methods.
///
/// ```
/// use berth_device::atomic::{BlockScope, Scope};
/// assert_eq!(Scope::Block, BlockScope);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockScope;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Scope {}
    impl Sealed for super::BlockScope {}
}

/// A scope an `unsafe` `_scoped_unchecked` atomic takes: a [`Scope`] or [`Scope::Block`].
/// Sealed.
///
/// ```
/// use berth_device::atomic::{AtomicScope, AtomicSlice, Scope};
/// /// A helper that passes its caller's scope through.
/// ///
/// /// # Safety
/// /// As `atomic_add_scoped_unchecked` for `scope`.
/// unsafe fn bump(v: &AtomicSlice<'_, u32>, i: usize, scope: impl AtomicScope) -> u32 {
///     // SAFETY: the caller's contract.
///     unsafe { v.atomic_add_scoped_unchecked(i, 1, scope) }
/// }
/// let mut d = [0u32];
/// // SAFETY: `d` outlives the view, nothing else touches it.
/// let v = unsafe { AtomicSlice::from_raw(d.as_mut_ptr(), 1) };
/// // SAFETY: one thread, so one block.
/// unsafe { (bump(&v, 0, Scope::Block), bump(&v, 0, Scope::Device)) };
/// assert_eq!(d, [2]);
/// ```
pub trait AtomicScope: Copy + sealed::Sealed {
    /// The scope, `None` for block scope.
    #[doc(hidden)]
    fn __scope(self) -> Option<Scope>;
}

impl AtomicScope for Scope {
    #[inline(always)]
    fn __scope(self) -> Option<Scope> {
        Some(self)
    }
}

impl AtomicScope for BlockScope {
    #[inline(always)]
    fn __scope(self) -> Option<Scope> {
        None
    }
}

/// A scope that reaches every block — [`Scope::Device`] or [`Scope::System`] — which the safe
/// `_scoped` methods take: an atomic at such a scope never races with another atomic, whoever
/// makes it. Sealed.
///
/// ```
/// use berth_device::atomic::{AtomicSlice, GridScope, Scope};
/// /// A helper that passes its caller's scope through.
/// fn bump(v: &AtomicSlice<'_, u32>, i: usize, scope: impl GridScope) -> u32 {
///     v.atomic_add_scoped(i, 1, scope)
/// }
/// let mut d = [0u32];
/// // SAFETY: `d` outlives the view, nothing else touches it.
/// let v = unsafe { AtomicSlice::from_raw(d.as_mut_ptr(), 1) };
/// bump(&v, 0, Scope::System);
/// assert_eq!(d, [1]);
/// ```
#[diagnostic::on_unimplemented(
    message = "block scope (`Scope::Block`) on an `#[atomic]` argument needs `unsafe`: other blocks can reach every element",
    label = "block scope is atomic only among the threads of one block",
    note = "use `Scope::Device` for an element that blocks may share",
    note = "or, where no other block touches the element during the launch (a per-block slot), the `unsafe` form, with a `// SAFETY:` comment saying why: `unsafe {{ v.atomic_add_scoped_unchecked(i, x, Scope::Block) }}` (likewise `atomic_max_scoped_unchecked`, …)"
)]
pub trait GridScope: AtomicScope {}

impl GridScope for Scope {}

/// `atom.relaxed.{scope}.{op}` on a generic address, its previous value.
#[cfg(target_arch = "nvptx64")]
macro_rules! atom_scoped {
    ($scope:expr, $op:literal, $reg:ident, $t:ty, $p:expr, $($v:expr),+) => {
        match $scope {
            None => atom_scoped!(@one ".cta", $op, $reg, $t, $p, $($v),+),
            Some(Scope::Device) => atom_scoped!(@one ".gpu", $op, $reg, $t, $p, $($v),+),
            Some(Scope::System) => atom_scoped!(@one ".sys", $op, $reg, $t, $p, $($v),+),
        }
    };
    (@one $scope:literal, $op:literal, $reg:ident, $t:ty, $p:expr, $($v:expr),+) => {{
        let old: $t;
        // SAFETY: `$p` is a valid, aligned generic address of an element of the view (the
        // caller checked the index); the memory is only raced on through atomics, and a
        // block-scoped one only where no other block touches the element (the contract of
        // the `_scoped_unchecked` methods, the only ones that reach `.cta`).
        unsafe {
            core::arch::asm!(
                concat!("atom.relaxed", $scope, ".", $op, " {old}, [{p}]",
                    $(atom_scoped!(@comma $v),)+ ";"),
                $(in($reg) $v,)+
                p = in(reg64) $p,
                old = out($reg) old,
                options(nostack),
            );
        }
        old
    }};
    (@comma $v:expr) => { ", {}" };
}

/// The safe `_scoped` method `$name` (a scope that reaches every block) and its `unsafe`
/// `_scoped_unchecked` twin `$unchecked` (any scope), both calling `$at` with the scope as an
/// `Option<Scope>` (`None`: block scope). `$args` are the operands after the index.
macro_rules! scoped_pair {
    ($t:ty, $name:ident, $unchecked:ident, $at:ident, $plain:literal,
     ($($arg:ident),+), $safe_ex:literal, $unchecked_ex:literal) => {
        #[doc = concat!("[`", $plain, "`](Self::", $plain, ") at `scope`: [`Scope::Device`] or")]
        /// [`Scope::System`]. Block scope needs the `unsafe`
        #[doc = concat!("[`", stringify!($unchecked), "`](Self::", stringify!($unchecked), ").")]
        ///
        #[doc = example!(slice, $t, "5", $safe_ex)]
        #[inline(always)]
        #[track_caller]
        pub fn $name(&self, i: usize, $($arg: $t,)+ scope: impl GridScope) -> $t {
            self.$at(i, $($arg,)+ scope.__scope())
        }

        #[doc = concat!("[`", $plain, "`](Self::", $plain, ") at any `scope`, block scope included.")]
        ///
        /// # Safety
        /// With [`Scope::Block`]: no thread of another block accesses element `i` while this
        /// atomic may run — not in this launch, nor in a launch running at once (the chunks
        /// of a pipelined `elementwise` launch run at once, and block `b` of each is a
        /// different block). With [`Scope::Device`] or [`Scope::System`], none (the safe
        #[doc = concat!("[`", stringify!($name), "`](Self::", stringify!($name), ") is the same).")]
        ///
        #[doc = example!(slice, $t, "5", $unchecked_ex)]
        #[inline(always)]
        #[track_caller]
        pub unsafe fn $unchecked(&self, i: usize, $($arg: $t,)+ scope: impl AtomicScope) -> $t {
            self.$at(i, $($arg,)+ scope.__scope())
        }
    };
}

macro_rules! scoped_int {
    ($t:ty, $reg:ident, $add:literal, $max:literal, $min:literal, $exch:literal, $cas:literal) => {
        impl AtomicSlice<'_, $t> {
            #[inline(always)]
            #[track_caller]
            fn scoped_ptr(&self, i: usize) -> *mut $t {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                // SAFETY: in bounds (checked above).
                unsafe { self.raw_ptr().add(i) }
            }

            scoped_pair!($t, atomic_add_scoped, atomic_add_scoped_unchecked, add_scoped_at,
                "atomic_add", (v),
                "assert_eq!(v.atomic_add_scoped(0, 2, Scope::Device), 5);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_add_scoped_unchecked(0, 2, Scope::Block) }, 5);");
            scoped_pair!($t, atomic_max_scoped, atomic_max_scoped_unchecked, max_scoped_at,
                "atomic_max", (v),
                "assert_eq!(v.atomic_max_scoped(0, 9, Scope::System), 5);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_max_scoped_unchecked(0, 9, Scope::Block) }, 5);");
            scoped_pair!($t, atomic_min_scoped, atomic_min_scoped_unchecked, min_scoped_at,
                "atomic_min", (v),
                "assert_eq!(v.atomic_min_scoped(0, 1, Scope::Device), 5);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_min_scoped_unchecked(0, 1, Scope::Block) }, 5);");
            scoped_pair!($t, atomic_exchange_scoped, atomic_exchange_scoped_unchecked,
                exchange_scoped_at, "atomic_exchange", (v),
                "assert_eq!(v.atomic_exchange_scoped(0, 1, Scope::Device), 5);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_exchange_scoped_unchecked(0, 1, Scope::Block) }, 5);");
            scoped_pair!($t, atomic_cas_scoped, atomic_cas_scoped_unchecked, cas_scoped_at,
                "atomic_cas", (current, new),
                "assert_eq!(v.atomic_cas_scoped(0, 5, 7, Scope::System), 5);\nassert_eq!(v.atomic_cas_scoped(0, 5, 9, Scope::System), 7);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_cas_scoped_unchecked(0, 5, 7, Scope::Block) }, 5);");

            #[inline(always)]
            #[track_caller]
            fn add_scoped_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                let p = self.scoped_ptr(i);
                #[cfg(target_arch = "nvptx64")]
                {
                    atom_scoped!(scope, $add, $reg, $t, p, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = p;
                    self.atomic_at(i, scope).fetch_add(v, Relaxed)
                }
            }

            #[inline(always)]
            #[track_caller]
            fn max_scoped_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                let p = self.scoped_ptr(i);
                #[cfg(target_arch = "nvptx64")]
                {
                    atom_scoped!(scope, $max, $reg, $t, p, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = p;
                    self.atomic_at(i, scope).fetch_max(v, Relaxed)
                }
            }

            #[inline(always)]
            #[track_caller]
            fn min_scoped_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                let p = self.scoped_ptr(i);
                #[cfg(target_arch = "nvptx64")]
                {
                    atom_scoped!(scope, $min, $reg, $t, p, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = p;
                    self.atomic_at(i, scope).fetch_min(v, Relaxed)
                }
            }

            #[inline(always)]
            #[track_caller]
            fn exchange_scoped_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                let p = self.scoped_ptr(i);
                #[cfg(target_arch = "nvptx64")]
                {
                    atom_scoped!(scope, $exch, $reg, $t, p, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = p;
                    self.atomic_at(i, scope).swap(v, Relaxed)
                }
            }

            #[inline(always)]
            #[track_caller]
            fn cas_scoped_at(&self, i: usize, current: $t, new: $t, scope: Option<Scope>) -> $t {
                let p = self.scoped_ptr(i);
                #[cfg(target_arch = "nvptx64")]
                {
                    atom_scoped!(scope, $cas, $reg, $t, p, current, new)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = p;
                    match self.atomic_at(i, scope).compare_exchange(current, new, Relaxed, Relaxed) {
                        Ok(v) | Err(v) => v,
                    }
                }
            }
        }
    };
}

scoped_int!(
    u32, reg32, "add.u32", "max.u32", "min.u32", "exch.b32", "cas.b32"
);
scoped_int!(
    i32, reg32, "add.s32", "max.s32", "min.s32", "exch.b32", "cas.b32"
);
scoped_int!(
    u64, reg64, "add.u64", "max.u64", "min.u64", "exch.b64", "cas.b64"
);
scoped_int!(
    i64, reg64, "add.u64", "max.s64", "min.s64", "exch.b64", "cas.b64"
);

macro_rules! scoped_float {
    ($t:ty, $reg:ident, $add:literal) => {
        impl AtomicSlice<'_, $t> {
            scoped_pair!($t, atomic_add_scoped, atomic_add_scoped_unchecked, add_scoped_at,
                "atomic_add", (v),
                "assert_eq!(v.atomic_add_scoped(0, 2.0, Scope::Device), 5.0);",
                "// SAFETY: one thread, so one block: no other block touches element 0.\nassert_eq!(unsafe { v.atomic_add_scoped_unchecked(0, 2.0, Scope::Block) }, 5.0);");

            #[inline(always)]
            #[track_caller]
            fn add_scoped_at(&self, i: usize, v: $t, scope: Option<Scope>) -> $t {
                #[cfg(target_arch = "nvptx64")]
                {
                    if i >= self.len() {
                        index_out_of_bounds(i, self.len())
                    }
                    // SAFETY: in bounds (checked above).
                    let p = unsafe { self.raw_ptr().add(i) };
                    atom_scoped!(scope, $add, $reg, $t, p, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    self.add_at(i, v, scope)
                }
            }
        }
    };
}

scoped_float!(f32, reg32, "add.f32");
scoped_float!(f64, reg64, "add.f64");
