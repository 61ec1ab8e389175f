//! [`ManagedBuffer`]: host memory a GPU reads in place through the driver's unified memory,
//! kept on the host.
//!
//! A [`MappedBuffer`](crate::MappedBuffer) is mapped into the device's address space page by
//! page, and a kernel that reads rows scattered over many gigabytes of it misses the GPU's
//! address translation on nearly every row: on an H200, random 512-byte rows of a 64 GiB
//! pinned table arrive at about 28 million a second, against 59 million from a 2 GiB one,
//! whatever the host's page size. From unified memory whose preferred location is the host
//! and which the device accesses without migrating, the same reads run at the link's rate
//! (about 99 million rows a second, 51 GB/s, at 2 and 64 GiB alike): the driver maps it
//! for the device its own way. `bench/features/mapped_pages.cu` measures both.

use crate::args::{ArgRef, MappedArg, sealed};
use crate::backend::HOST_DEVICEMAP;
use crate::context::Inner;
use crate::error::Result;
use crate::fault::Borrow;
use crate::gpu::Gpu;
use crate::host_mem::{HostFlags, checked_bytes};
use crate::track::Uses;
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// `len` elements of `T` in host memory that this GPU reads and writes in place, like a
/// [`MappedBuffer`](crate::MappedBuffer) (kernels take it for `#[mapped]` arguments; it
/// derefs to `[T]`), made with [`Gpu::managed_zeroed`] or [`Gpu::managed_from`].
///
/// It is the driver's unified memory with its pages kept on the host and mapped for the
/// device: use it for large tables that kernels read sparsely (a
/// [`HotTier`](crate::HotTier)'s table, embedding rows, graph features), where a
/// `MappedBuffer`'s scattered reads run at half the link's rate or less. The
/// memory is pageable host memory, not page-locked: it is not a source for asynchronous
/// copies (`#[pinned_async]`), and its pages are placed by the first touch (zeroing, on the
/// host's threads).
pub struct ManagedBuffer<T> {
    ptr: u64,
    len: usize,
    bytes: usize,
    gpu: Arc<Inner>,
    uses: Uses,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns its allocation alone; shared access is read-only through `Deref`
// (the host and the GPU write only through `&mut`), so sharing it between threads is sharing
// `&[T]`, sound for `T: Sync`.
unsafe impl<T: DeviceCopy + Sync> Sync for ManagedBuffer<T> {}
// SAFETY: the allocation belongs to no thread (freed from any, through the `Sync` context);
// moving the buffer moves its elements, sound for `T: Send`.
unsafe impl<T: DeviceCopy + Send> Send for ManagedBuffer<T> {}

impl Gpu {
    /// A [`ManagedBuffer`] of `len` zeroed elements, zeroed by the host's threads (which
    /// places its pages in host memory).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory); [`Error::Usage`](crate::Error::Usage)
    /// where this device cannot read managed memory while the host uses it (a platform
    /// without concurrent managed access: use a [`MappedBuffer`](crate::MappedBuffer)).
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::new_or_simulator()?;
    /// let mut table = gpu.managed_zeroed::<f32>(1 << 16)?;
    /// table[7] = 1.5;
    /// assert_eq!(table[7], 1.5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn managed_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<ManagedBuffer<T>> {
        let bytes = checked_bytes::<T>(len)?.max(1);
        let inner = &self.inner;
        // Counted while it lives: a reset of the context would free it (it refuses instead).
        inner.ops().fault().begin_borrow(Borrow::HostBuffer)?;
        let ptr = match inner
            .bind()
            .and_then(|()| inner.ops().alloc_managed_host(bytes))
        {
            Ok(p) => p,
            Err(e) => {
                inner.ops().fault().end_borrow(Borrow::HostBuffer);
                return Err(e);
            }
        };
        {
            use rayon::prelude::*;
            // SAFETY: `ptr` is a fresh allocation of `bytes` bytes that nothing else reaches
            // yet; the slice ends before the buffer is made.
            let all = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, bytes) };
            all.par_chunks_mut(ZERO_CHUNK).for_each(|c| c.fill(0));
        }
        Ok(ManagedBuffer {
            ptr,
            len,
            bytes,
            gpu: inner.clone(),
            uses: Uses::default(),
            _t: PhantomData,
        })
    }

    /// A [`ManagedBuffer`] holding a copy of `data`.
    pub fn managed_from<T: DeviceCopy>(&self, data: &[T]) -> Result<ManagedBuffer<T>> {
        let mut b = self.managed_zeroed(data.len())?;
        b.copy_from_slice(data);
        Ok(b)
    }
}

/// Bytes each of the host's threads zeroes at a time: a few huge pages.
const ZERO_CHUNK: usize = 8 << 20;

impl<T: DeviceCopy> ManagedBuffer<T> {
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The address kernels use for this memory (the host's address too).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl<T: DeviceCopy> Deref for ManagedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.uses.before_host_read();
        // SAFETY: the allocation holds `len` zeroed-then-written elements of a DeviceCopy type
        // and lives while `self` does (a reset of its context, which would free it, is refused
        // meanwhile). No GPU work writes it while the slice lives: a live launch that writes
        // it borrows the buffer exclusively, and the work of a leaked one was waited for just
        // above. Work queued later needs `&mut self`, which this shared borrow excludes.
        unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for ManagedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.uses.before_host_write();
        // SAFETY: as in `deref`, and no GPU work reads it either: `&mut self` excludes live
        // launches, and leaked ones were waited for just above.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.len) }
    }
}

impl<T> Drop for ManagedBuffer<T> {
    fn drop(&mut self) {
        // Nothing may still read or write it, even work whose guard was leaked.
        self.uses.before_host_write();
        // SAFETY: `ptr` came from `alloc_managed_host(bytes)` of this context, is freed only
        // here, and no work uses it any more (waited for just above).
        unsafe { self.gpu.ops().free_managed(self.ptr, self.bytes) };
        self.gpu.ops().fault().end_borrow(Borrow::HostBuffer);
    }
}

impl<T: DeviceCopy> std::fmt::Debug for ManagedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedBuffer")
            .field("len", &self.len)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T> sealed::Sealed for ManagedBuffer<T> {}

impl<T: DeviceCopy> MappedArg<T> for ManagedBuffer<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.ptr,
            len: self.len,
            bytes: self.bytes(),
            gpu: &self.gpu,
            flags: Some(HostFlags(HOST_DEVICEMAP)),
            host: self.ptr,
            uses: &self.uses,
            held: 0,
            read_only: false,
        }
    }
}
