//! cudarc interop without copies: berth's context, streams and device memory seen as cudarc's
//! [`CudaContext`], [`CudaStream`] and [`CudaView`]/[`CudaViewMut`], so that libraries built on
//! cudarc (cuBLAS, cuRAND, NCCL) work on berth memory; and a cudarc [`CudaSlice`] adopted as a
//! [`DeviceBuffer`].
//!
//! A buffer is lent to cudarc for the length of a closure, as `std::thread::scope` lends its
//! borrows: the closure sees a view whose lifetime it cannot extend, and the lending ends
//! inside the call, on return or unwind, so nothing the caller leaks can outlive it. When it
//! ends, the work cudarc queued on the buffer is recorded as a use of the allocation (like a
//! launch's): host reads, writes and frees, and berth launches that conflict, wait for it.
//! berth cannot see which streams that work went to, so the use covers the whole context: the
//! first conflicting access synchronises the context once.
//!
//! The simulator has no CUDA context: every entry point here returns `Error::NeedsGpu` there.

use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::stream::Stream;
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut};
use std::mem::ManuallyDrop;
use std::sync::Arc;

impl Gpu {
    /// cudarc's handle of this GPU's context: the device's primary context, the one berth
    /// runs in, so memory, streams and modules are shared, not copied. One handle is shared
    /// while anything of cudarc's made from it lives.
    ///
    /// After a fault, [`Gpu::recover`] resets the context, which would free cudarc's memory
    /// too: it is refused ([`crate::Error::ResetRefused`]) while cudarc objects made from the
    /// context live (its slices and streams hold this handle, and so does a berth [`Stream`]
    /// once lent to cudarc). Drop them, recover, and make them again from the new `Gpu`.
    pub fn cudarc_context(&self) -> Result<Arc<CudaContext>> {
        self.inner.ops().cudarc_context()
    }
}

impl Stream {
    /// This stream as a cudarc [`CudaStream`] (the same stream, not a new one), e.g. for
    /// `CudaBlas::new`: work cudarc queues on it runs in order with berth's work on it.
    ///
    /// The stream lives as long as any cudarc handle to it: dropping this `Stream` while
    /// cudarc still holds one leaks the stream instead of destroying it under cudarc.
    pub fn cudarc_stream(&self) -> Result<Arc<CudaStream>> {
        if let Some(s) = self.cudarc.get() {
            return Ok(s.clone());
        }
        let ctx = self.gpu.ops().cudarc_context()?;
        let raw = self
            .gpu
            .ops()
            .raw_stream(self.handle)
            .ok_or(Error::NeedsGpu {
                what: "cudarc interop",
            })?;
        // SAFETY: 1. `raw` is the driver's handle of this stream, a stream of the context
        // `ctx` retains (the device's primary context, berth's); 2. it stays alive while
        // cudarc may use it: `Stream`'s drop gives it back to the context's pool (streams are
        // destroyed only with their context, which cudarc's handle holds off a reset of) only
        // when the wrapper kept here is its last reference, and leaks it otherwise; 3.
        // cudarc's work on it is ordered with berth's by the stream itself, and memory lent to
        // cudarc records cudarc's use of it (`DeviceBuffer::with_cudarc`).
        let wrapped = unsafe { ctx.wrap_borrowed_stream(raw) };
        Ok(self.cudarc.get_or_init(|| wrapped).clone())
    }
}

/// A berth allocation seen by cudarc as a `CudaSlice` while it is lent. cudarc must never free
/// it: the slice is leaked, never dropped, when the lending ends (on return or on unwind), and
/// cudarc's use of the memory is recorded then.
struct Lent<'b, T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    gpu: &'b Arc<Inner>,
    uses: &'b Uses,
    access: Access,
}

impl<T> Drop for Lent<'_, T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and not touched afterwards.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        // `leak` frees nothing (berth owns the memory); with cudarc's event tracking on, it
        // also makes the lent stream wait for uses cudarc recorded on other streams.
        let _ = slice.leak();
        self.uses
            .add(&Completion::whole_context(self.gpu), self.access);
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Lend the buffer to cudarc, read-only, for the length of `f`: `f` gets a [`CudaView`] of
    /// the whole buffer and `on` as a [`CudaStream`] (queue cudarc's work there to keep it in
    /// order with berth's). Nothing is copied. The buffer stays borrowed while `f` runs; when
    /// it returns, the work `f` queued is recorded as a shared use of the buffer, so a host
    /// write or free of it waits for that work.
    ///
    /// `Error::NeedsGpu` on the simulator; `Error::Usage` if `on` belongs to another `Gpu`.
    pub fn with_cudarc<R>(
        &self,
        on: &Stream,
        f: impl for<'a> FnOnce(CudaView<'a, T>, &'a Arc<CudaStream>) -> R,
    ) -> Result<R> {
        let lent = self.lend(on, Access::Shared)?;
        Ok(f(lent.slice.as_view(), lent.slice.stream()))
    }

    /// Lend the buffer to cudarc, writable, for the length of `f`, which gets a
    /// [`CudaViewMut`] (e.g. the output of a cuBLAS GEMM) and `on` as a [`CudaStream`]. The
    /// buffer stays borrowed exclusively while `f` runs; when it returns, the work `f` queued
    /// is recorded as an exclusive use: any host access to the buffer (`to_vec`, `copy_from`,
    /// drop) and any berth launch that takes it wait for that work first.
    ///
    /// `Error::NeedsGpu` on the simulator; `Error::Usage` if `on` belongs to another `Gpu`.
    pub fn with_cudarc_mut<R>(
        &mut self,
        on: &Stream,
        f: impl for<'a> FnOnce(CudaViewMut<'a, T>, &'a Arc<CudaStream>) -> R,
    ) -> Result<R> {
        let mut lent = self.lend(on, Access::Exclusive)?;
        let stream = lent.slice.stream().clone();
        Ok(f(lent.slice.as_view_mut(), &stream))
    }

    fn lend(&self, on: &Stream, access: Access) -> Result<Lent<'_, T>> {
        if !Arc::ptr_eq(&on.gpu, &self.gpu) {
            return Err(Error::Usage(
                "DeviceBuffer::with_cudarc: the buffer and the stream belong to different GPU \
                 contexts"
                    .into(),
            ));
        }
        let stream = on.cudarc_stream()?;
        self.gpu.bind()?;
        // cudarc's work may go to any stream: earlier work it would race must be complete.
        self.uses.before_gpu(access, None);
        // SAFETY: 1. `self.ptr` holds `len` elements of T in the context of `stream`;
        // 2. the slice never frees it: `Lent` leaks it when dropped, which happens before the
        // borrow of `self` ends, on return or unwind, and the slice itself never leaves
        // `Lent` (the closure gets views of it); 3. aliasing follows the borrow of `self`: a
        // read-only view for `&self`, the writable one only for `&mut self`; earlier work that
        // conflicts was waited for above, and cudarc's use is recorded when the slice is
        // leaked.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(self.ptr, self.len()) };
        Ok(Lent {
            slice: ManuallyDrop::new(slice),
            gpu: &self.gpu,
            uses: &self.uses,
            access,
        })
    }

    /// Take ownership of memory cudarc allocated in `gpu`'s context, without copying it: the
    /// buffer frees it when dropped. Waits for the work queued on the context so far (cudarc
    /// may have queued uses of it on any stream).
    ///
    /// `Error::NeedsGpu` on the simulator; `Error::Usage` if the slice belongs to another
    /// context (it is then dropped, and cudarc frees it).
    pub fn from_cudarc(gpu: &Gpu, slice: CudaSlice<T>) -> Result<DeviceBuffer<T>> {
        let ctx = gpu.inner.ops().cudarc_context()?;
        if slice.context().cu_ctx() != ctx.cu_ctx() {
            return Err(Error::Usage(
                "DeviceBuffer::from_cudarc: the slice belongs to another CUDA context".into(),
            ));
        }
        gpu.inner.bind()?;
        let len = slice.len();
        // Gives up cudarc's ownership without freeing; the slice's stream waits for the uses
        // cudarc tracked on other streams.
        let ptr = slice.leak();
        gpu.inner.ops().synchronize()?;
        // SAFETY: 1. `ptr` is cudarc's allocation of `len` elements of T in this context
        // (checked above), from cuMemAlloc or cuMemAllocAsync, both of which cuMemFree frees
        // once unused; 2. `leak` gave up cudarc's ownership, and the context was synchronised,
        // so no queued work uses it.
        Ok(unsafe { DeviceBuffer::from_raw(gpu.inner.clone(), ptr, len) })
    }
}
