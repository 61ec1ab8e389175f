//! Device memory: [`DeviceBuffer<T>`].

use crate::error::{Error, Result};
use crate::gpu::{Gpu, Inner};
use crate::track::Uses;
use berth_device::DeviceCopy;
use cudarc::driver::{result, sys};
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` elements of `T` in the GPU's own memory.
///
/// Made with [`Gpu::alloc_zeroed`] or [`Gpu::upload`]; read back with [`DeviceBuffer::to_vec`].
/// Kernels take it for slice arguments without a placement attribute.
pub struct DeviceBuffer<T> {
    pub(crate) ptr: sys::CUdeviceptr,
    len: usize,
    pub(crate) gpu: Arc<Inner>,
    /// What the GPU may still do with the memory.
    pub(crate) uses: Uses,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns device memory addressed by an integer; `T: DeviceCopy` is plain data.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: shared access only reads through driver calls.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

impl Gpu {
    /// A buffer of `len` zeroed elements.
    pub fn alloc_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let buf = self.alloc_uninit::<T>(len)?;
        // The simulator's allocations are zeroed already.
        if buf.bytes() > 0 && !self.inner.sim {
            let stream = self.inner.default_stream.0;
            // SAFETY: `buf.ptr` is a fresh allocation of `bytes()` bytes in this context.
            let r = unsafe { result::memset_d8_async(buf.ptr, 0, buf.bytes(), stream) };
            self.inner.check("cuMemsetD8Async", r, None)?;
            crate::stream::sync(&self.inner, stream, None)?;
        }
        Ok(buf)
    }

    /// A buffer holding a copy of `data` (a synchronous copy from host memory).
    pub fn upload<T: DeviceCopy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc_uninit::<T>(data.len())?;
        buf.copy_from(data)?;
        Ok(buf)
    }

    fn alloc_uninit<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.inner.bind()?;
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::OutOfMemory {
                bytes: usize::MAX,
                free: 0,
                total: 0,
            })?;
        // A zero-length buffer owns no memory; its pointer is never dereferenced.
        let ptr = if bytes == 0 {
            0
        } else if self.inner.sim {
            crate::backend::alloc(bytes).ok_or(Error::OutOfMemory {
                bytes,
                free: 0,
                total: 0,
            })?
        } else {
            // SAFETY: plain allocation in the current context.
            match unsafe { result::malloc_sync(bytes) } {
                Ok(p) => p,
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                    let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                    return Err(Error::OutOfMemory { bytes, free, total });
                }
                Err(e) => return Err(self.inner.error("cuMemAlloc", e, None)),
            }
        };
        Ok(DeviceBuffer {
            ptr,
            len,
            gpu: self.inner.clone(),
            uses: Uses::default(),
            _t: PhantomData,
        })
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Overwrite the whole buffer with `data` (synchronous). Lengths must match.
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        self.check_len("copy_from", data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        self.uses.before_host_write();
        if self.gpu.sim {
            // SAFETY: `self.ptr` is a host allocation of `len` elements, `data` has `len`.
            unsafe { crate::backend::copy(self.ptr, data.as_ptr() as u64, self.bytes()) };
            return Ok(());
        }
        let stream = self.gpu.default_stream.0;
        // SAFETY: `self.ptr` holds `len` elements of T and `data` has `len` elements; `data`
        // outlives the copy because we synchronise the stream before returning. (Copies go
        // through a stream and a stream sync rather than cuMemcpyHtoD: for pageable memory
        // the latter may return before the DMA lands, unordered with non-blocking streams.)
        let r = unsafe { result::memcpy_htod_async(self.ptr, data, stream) };
        self.gpu.check("cuMemcpyHtoDAsync", r, None)?;
        crate::stream::sync(&self.gpu, stream, None)
    }

    /// Copy the whole buffer into `out` (synchronous). Lengths must match.
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        self.check_len("copy_to", out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        self.uses.before_host_read();
        if self.gpu.sim {
            // SAFETY: as above, the other way.
            unsafe { crate::backend::copy(out.as_mut_ptr() as u64, self.ptr, self.bytes()) };
            return Ok(());
        }
        let stream = self.gpu.default_stream.0;
        // SAFETY: as in copy_from; the device holds `len` initialised elements of a
        // `DeviceCopy` type, for which any bytes the kernel wrote as T are valid.
        let r = unsafe { result::memcpy_dtoh_async(out, self.ptr, stream) };
        self.gpu.check("cuMemcpyDtoHAsync", r, None)?;
        crate::stream::sync(&self.gpu, stream, None)
    }

    /// The buffer's contents as a `Vec` (synchronous).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v: Vec<T> = Vec::with_capacity(self.len);
        if self.len == 0 {
            return Ok(v);
        }
        self.gpu.bind()?;
        self.uses.before_host_read();
        if self.gpu.sim {
            // SAFETY: `v` has capacity for `len` elements; the source holds `len` elements.
            unsafe {
                crate::backend::copy(v.as_mut_ptr() as u64, self.ptr, self.bytes());
                v.set_len(self.len);
            }
            return Ok(v);
        }
        let stream = self.gpu.default_stream.0;
        // SAFETY: the destination is `v`'s allocation of `len` elements (uninitialised, written
        // as raw bytes by the DMA, never read before `set_len`); the stream is synchronised
        // before `v` is touched again.
        let r = unsafe {
            sys::cuMemcpyDtoHAsync_v2(v.as_mut_ptr().cast(), self.ptr, self.bytes(), stream)
                .result()
        };
        self.gpu.check("cuMemcpyDtoHAsync", r, None)?;
        crate::stream::sync(&self.gpu, stream, None)?;
        // SAFETY: the copy above initialised all `len` elements with bytes of a `DeviceCopy` T.
        unsafe { v.set_len(self.len) };
        Ok(v)
    }

    /// The raw device address (for [`crate::raw`] interop).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn check_len(&self, what: &str, got: usize) -> Result<()> {
        if got != self.len {
            return Err(Error::LengthMismatch {
                what: format!("DeviceBuffer::{what}: host slice vs device buffer"),
                expected: self.len,
                got,
            });
        }
        Ok(())
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // Freed memory may be allocated again at once: nothing may still use it, even work
        // whose guard was leaked.
        self.uses.before_host_write();
        if self.gpu.sim {
            if self.ptr != 0 {
                // SAFETY: allocated by `backend::alloc` with this size, freed once; no queued
                // work uses it any more (waited for above).
                unsafe { crate::backend::free(self.ptr, self.len * std::mem::size_of::<T>()) };
            }
            return;
        }
        // A lost context is reset as a whole; freeing into it could free a new allocation
        // that reuses the address after `Gpu::recover`.
        if self.ptr == 0 || self.gpu.fault.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: allocated by cuMemAlloc in this context, freed once. No GPU work uses it any
        // more: live launches borrow it, and leaked ones were waited for above.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}
