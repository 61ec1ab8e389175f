//! Atomic read-modify-write on kernel memory: elements of `&mut [T]` arguments
//! ([`SliceMut`]) and of shared arrays ([`Shared`]). Each returns the previous value, as
//! CUDA's `atomicAdd` and friends do, on the GPU and in the simulator alike.
//!
//! Ordering is relaxed at device scope (CUDA's default): the operations are atomic with
//! respect to each other, and order nothing else. Floats add through `atom.add.f32` on the
//! GPU (`core` has no float atomics) and a compare-and-swap loop on the host.

use crate::panic::index_out_of_bounds;
use crate::shared::Shared;
use crate::slice::SliceMut;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

macro_rules! int_atomics {
    ($t:ty, $atomic:ty) => {
        int_atomics!(@impl SliceMut<'_, $t>, $t, $atomic);
        int_atomics!(@impl Shared<$t>, $t, $atomic);
    };
    (@impl $view:ty, $t:ty, $atomic:ty) => {
        impl $view {
            #[inline(always)]
            #[track_caller]
            fn atomic_at(&self, i: usize) -> &$atomic {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                // SAFETY: in bounds; the element is aligned for its type, which has the
                // atomic's size and alignment; every access to it in the kernel that may race
                // goes through these atomics.
                unsafe { <$atomic>::from_ptr(self.raw_ptr().add(i)) }
            }

            /// `self[i] += v` atomically; returns the previous value (wrapping).
            #[inline(always)]
            #[track_caller]
            pub fn atomic_add(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i).fetch_add(v, Relaxed)
            }

            /// `self[i] = max(self[i], v)` atomically; returns the previous value.
            #[inline(always)]
            #[track_caller]
            pub fn atomic_max(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i).fetch_max(v, Relaxed)
            }

            /// `self[i] = min(self[i], v)` atomically; returns the previous value.
            #[inline(always)]
            #[track_caller]
            pub fn atomic_min(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i).fetch_min(v, Relaxed)
            }

            /// `self[i] = v` atomically; returns the previous value.
            #[inline(always)]
            #[track_caller]
            pub fn atomic_exchange(&self, i: usize, v: $t) -> $t {
                self.atomic_at(i).swap(v, Relaxed)
            }

            /// If `self[i] == current`, set it to `new`; returns the previous value either way.
            #[inline(always)]
            #[track_caller]
            pub fn atomic_cas(&self, i: usize, current: $t, new: $t) -> $t {
                match self.atomic_at(i).compare_exchange(current, new, Relaxed, Relaxed) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    };
}

int_atomics!(u32, AtomicU32);
int_atomics!(i32, AtomicI32);
int_atomics!(u64, AtomicU64);

macro_rules! float_add {
    ($view:ty) => {
        impl $view {
            /// `self[i] += v` atomically; returns the previous value.
            #[inline(always)]
            #[track_caller]
            pub fn atomic_add(&self, i: usize, v: f32) -> f32 {
                if i >= self.len() {
                    index_out_of_bounds(i, self.len())
                }
                // SAFETY: in bounds (checked above) and aligned.
                let p = unsafe { self.raw_ptr().add(i) };
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: f32;
                    // SAFETY: `p` is a valid, aligned generic address of an f32.
                    unsafe {
                        core::arch::asm!(
                            "atom.add.f32 {old}, [{p}], {v};",
                            old = out(reg32) old,
                            p = in(reg64) p,
                            v = in(reg32) v,
                            options(nostack),
                        );
                    }
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: as above; f32 and u32 have one size and alignment.
                    let a = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) };
                    let mut cur = a.load(Relaxed);
                    loop {
                        let next = (f32::from_bits(cur) + v).to_bits();
                        match a.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                            Ok(prev) => return f32::from_bits(prev),
                            Err(seen) => cur = seen,
                        }
                    }
                }
            }
        }
    };
}

float_add!(SliceMut<'_, f32>);
float_add!(Shared<f32>);
