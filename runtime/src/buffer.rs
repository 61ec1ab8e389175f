//! Device memory: [`DeviceBuffer<T>`].

use crate::context::Inner;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::track::Uses;
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` elements of `T` in the GPU's own memory.
///
/// Made with [`Gpu::alloc_zeroed`] or [`Gpu::upload`]; read back with [`DeviceBuffer::to_vec`].
/// Kernels take it for slice arguments without a placement attribute.
pub struct DeviceBuffer<T> {
    pub(crate) ptr: u64,
    len: usize,
    pub(crate) gpu: Arc<Inner>,
    /// What the GPU may still do with the memory.
    pub(crate) uses: Uses,
    _t: PhantomData<T>,
}

impl Gpu {
    /// A buffer of `len` zeroed elements.
    pub fn alloc_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let buf = self.alloc_uninit::<T>(len)?;
        if buf.bytes() > 0 {
            let stream = self.inner.default_stream;
            // SAFETY: `buf.ptr` is a fresh allocation of `bytes()` bytes in this context, used
            // by nothing else until the stream is synchronised below.
            unsafe {
                self.inner
                    .ops()
                    .zero(stream, buf.ptr, buf.bytes(), "alloc_zeroed")
            }?;
            self.inner.sync(stream, None)?;
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
        let bytes = crate::host_mem::checked_bytes::<T>(len)?;
        // A zero-length buffer owns no memory; its pointer is never dereferenced.
        let ptr = if bytes == 0 {
            0
        } else {
            self.inner.ops().alloc(bytes)?
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
    /// A buffer owning `ptr`, `len` elements of T allocated in `gpu`'s context.
    ///
    /// # Safety
    ///
    /// 1. `ptr` is a live device allocation of this context holding at least `len` elements
    ///    of T (0 only for `len == 0`), freeable with `MemoryOps::free`;
    /// 2. nothing else owns or frees it, and no GPU work still uses it.
    pub(crate) unsafe fn from_raw(gpu: Arc<Inner>, ptr: u64, len: usize) -> Self {
        DeviceBuffer {
            ptr,
            len,
            gpu,
            uses: Uses::default(),
            _t: PhantomData,
        }
    }

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
        self.copy_prefix_from(data)
    }

    /// Overwrite the buffer's first `data.len()` elements with `data` (synchronous); `data`
    /// no longer than the buffer.
    pub(crate) fn copy_prefix_from(&mut self, data: &[T]) -> Result<()> {
        self.copy_into_from(0, data)
    }

    /// Overwrite the buffer's elements `at..at + data.len()` with `data` (synchronous); those
    /// within the buffer.
    pub(crate) fn copy_into_from(&mut self, at: usize, data: &[T]) -> Result<()> {
        let room = self.len.saturating_sub(at);
        if at > self.len || data.len() > room {
            return Err(Error::LengthMismatch {
                what: format!("copy_into_from: data longer than the buffer's elements from {at}"),
                expected: room,
                got: data.len(),
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        // Wait first: waiting for another device's work (a peer read) may make its context
        // current, and the copy needs this one.
        self.uses.before_host_write();
        self.gpu.bind()?;
        // No reset between the check and the copy into this address (see `FaultState::enter`).
        let _section = self.gpu.ops().fault().enter()?;
        let stream = self.gpu.default_stream;
        // SAFETY: `self.ptr` holds `len` elements of T and `data` has at most `len - at`
        // elements (checked above), written from element `at` on; `data` outlives the copy
        // because we synchronise the stream before returning. (Copies go through a stream and
        // a stream sync rather than cuMemcpyHtoD: for pageable memory the latter may return
        // before the DMA lands, unordered with non-blocking streams.)
        let host = data.as_ptr() as u64;
        let bytes = std::mem::size_of_val(data);
        let dst = self.ptr + (at * std::mem::size_of::<T>()) as u64;
        unsafe { self.gpu.copy_h2d(stream, dst, host, bytes, "copy_from") }?;
        self.gpu.sync(stream, None)
    }

    /// Copy the whole buffer into `out` (synchronous). Lengths must match.
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        self.check_len("copy_to", out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // Wait first: waiting for another device's work (a peer read) may make its context
        // current, and the copy needs this one.
        self.uses.before_host_read();
        self.gpu.bind()?;
        // No reset between the check and the copy from this address (see `FaultState::enter`).
        let _section = self.gpu.ops().fault().enter()?;
        let stream = self.gpu.default_stream;
        // SAFETY: as in copy_from, the other way; the device holds `len` initialised elements
        // of a `DeviceCopy` type, for which any bytes the kernel wrote as T are valid.
        let host = out.as_mut_ptr() as u64;
        unsafe {
            self.gpu
                .copy_d2h(stream, host, self.ptr, self.bytes(), "copy_to")
        }?;
        self.gpu.sync(stream, None)
    }

    /// The buffer's contents as a `Vec` (synchronous).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.prefix_to_vec(self.len)
    }

    /// The buffer's first `n` elements (all of them if it has fewer) as a `Vec` (synchronous).
    pub(crate) fn prefix_to_vec(&self, n: usize) -> Result<Vec<T>> {
        self.range_to_vec(0..n)
    }

    /// The buffer's elements `range` (those of them it has) as a `Vec` (synchronous).
    pub(crate) fn range_to_vec(&self, range: std::ops::Range<usize>) -> Result<Vec<T>> {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        let n = end - start;
        let mut v: Vec<T> = Vec::with_capacity(n);
        if n == 0 {
            return Ok(v);
        }
        // Wait first: waiting for another device's work (a peer read) may make its context
        // current, and the copy needs this one.
        self.uses.before_host_read();
        self.gpu.bind()?;
        // No reset between the check and the copy from this address (see `FaultState::enter`).
        let _section = self.gpu.ops().fault().enter()?;
        let stream = self.gpu.default_stream;
        // SAFETY: the destination is `v`'s allocation of `n` elements (uninitialised, written
        // as raw bytes by the copy, never read before `set_len`), and the elements
        // `start..start + n` read are within the buffer (`start + n = end ≤ len`); the stream
        // is synchronised before `v` is touched again.
        let host = v.as_mut_ptr() as u64;
        let bytes = n * std::mem::size_of::<T>();
        let src = self.ptr + (start * std::mem::size_of::<T>()) as u64;
        unsafe { self.gpu.copy_d2h(stream, host, src, bytes, "to_vec") }?;
        self.gpu.sync(stream, None)?;
        // SAFETY: the copy above initialised all `n` elements with bytes of a `DeviceCopy` T.
        unsafe { v.set_len(n) };
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

impl<T> DeviceBuffer<T> {
    fn bytes_of_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // Freed memory may be allocated again at once: nothing may still use it, even work
        // whose guard was leaked.
        self.uses.before_host_write();
        // A lost context is reset as a whole; freeing into it could free a new allocation
        // that reuses the address after `Gpu::recover`. The section keeps a reset from
        // starting between the check and the free.
        if self.ptr == 0 {
            return;
        }
        let Ok(_section) = self.gpu.ops().fault().enter() else {
            return;
        };
        if self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: allocated by `MemoryOps::alloc` in this context with this size, freed once,
        // before any reset of the context (the section above). No GPU work uses it any more:
        // live launches borrow it, and leaked ones were waited for above.
        unsafe { self.gpu.ops().free(self.ptr, self.bytes_of_len()) };
    }
}
