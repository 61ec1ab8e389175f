//! The two backends behind one set of operations: the CUDA driver ([`Driver`]) and the CPU
//! simulator ([`Simulator`]). Memory kinds, launches, pipelines and the tracking of queued
//! work are written once above [`Ops`]; a context picks its implementation once
//! ([`Inner::ops`]).
//!
//! On the simulator every address is a host address: device memory and staging are
//! 256-byte-aligned zeroed heap allocations, copies are `memcpy` jobs on the stream's worker
//! thread, and the "device pointer" of mapped memory is the host pointer itself.
//!
//! Not everything has moved behind this interface yet; `docs/design-notes.md` ("One backend
//! interface") lists what still branches on the backend.

use crate::error::{Error, Result};
use crate::gpu::Inner;
use crate::sim_stream::SimStream;
use cudarc::driver::{DriverError, result, sys};
use std::alloc::Layout;
use std::sync::Arc;

/// A place in one stream's queue: everything queued on it before this point.
pub(crate) enum Point {
    /// A CUDA event recorded on the stream (timing disabled; from the context's pool).
    Event(sys::CUevent),
    /// A simulated stream and its position.
    Sim(Arc<SimStream>, u64),
}

// SAFETY: a CUevent is a driver handle usable from any thread once its context is current there
// (`Ops::wait_point` binds it); a `SimStream` is shared through an `Arc` of thread-safe parts.
unsafe impl Send for Point {}
// SAFETY: as above; the driver serialises calls on one event.
unsafe impl Sync for Point {}

/// What a backend does. Addresses are `u64` (device addresses, or host addresses where the
/// memory is host memory); streams are the context's stream handles.
pub(crate) trait Ops: Sync {
    /// `bytes` (> 0) of device memory: uninitialised on the driver, zeroed on the simulator.
    fn alloc(&self, gpu: &Inner, bytes: usize) -> Result<u64>;

    /// Free device memory from [`Ops::alloc`].
    ///
    /// # Safety
    /// `ptr` came from `alloc(bytes)` of this context and no queued work uses it any more.
    unsafe fn free(&self, ptr: u64, bytes: usize);

    /// `bytes` (> 0) of page-locked host memory with `cuMemHostAlloc` `flags`, uninitialised.
    /// The driver's own error comes back, so the caller can retry with other flags.
    fn alloc_host(&self, bytes: usize, flags: u32) -> std::result::Result<u64, DriverError>;

    /// Free host memory from [`Ops::alloc_host`].
    ///
    /// # Safety
    /// `ptr` came from `alloc_host(bytes, _)` of this context and nothing uses it any more.
    unsafe fn free_host(&self, ptr: u64, bytes: usize);

    /// The device address of host memory allocated with `DEVICEMAP`.
    fn mapped_address(&self, gpu: &Inner, host: u64) -> Result<u64>;

    /// Enqueue a copy of `bytes` from host memory to device memory on `stream`.
    ///
    /// # Safety
    /// Both ranges are valid for `bytes`, stay alive and are written by nobody else until the
    /// stream has passed the copy; on the driver, `host` is pinned unless the caller
    /// synchronises the stream before the host memory changes.
    unsafe fn copy_h2d(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        host: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Enqueue a copy of `bytes` from device memory to host memory on `stream`.
    ///
    /// # Safety
    /// As for [`Ops::copy_h2d`], with the host memory borrowed exclusively.
    unsafe fn copy_d2h(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        host: u64,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Enqueue zeroing `bytes` of device memory at `device` on `stream`.
    ///
    /// # Safety
    /// `device` is device memory of at least `bytes`, alive until the stream has passed the
    /// memset, and nothing else uses it meanwhile.
    unsafe fn zero(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()>;

    /// Wait for everything queued on `stream`; the first failure of its work.
    fn sync(&self, gpu: &Inner, stream: sys::CUstream, kernel: Option<&str>) -> Result<()>;

    /// Whether `stream` has nothing left to do (never blocks).
    fn idle(&self, gpu: &Inner, stream: sys::CUstream) -> bool;

    /// The point `stream` reaches once the work queued on it so far is done.
    fn record_point(&self, gpu: &Inner, stream: sys::CUstream) -> Result<Point>;

    /// Block the host until `point` is reached. A context lost to a fault runs nothing any
    /// more, so a failed wait returns too.
    fn wait_point(&self, gpu: &Inner, point: &Point);

    /// A point is no longer needed.
    fn release_point(&self, gpu: &Inner, point: Point);
}

impl Inner {
    /// The backend of this context.
    pub(crate) fn ops(&self) -> &'static dyn Ops {
        if self.sim { &Simulator } else { &Driver }
    }
}

/// The CUDA driver, through cudarc's `result`/`sys` layers.
pub(crate) struct Driver;

/// The CPU simulator: host memory, and worker threads as streams.
pub(crate) struct Simulator;

impl Ops for Driver {
    fn alloc(&self, gpu: &Inner, bytes: usize) -> Result<u64> {
        // SAFETY: plain allocation in the current context (the caller bound it).
        match unsafe { result::malloc_sync(bytes) } {
            Ok(p) => Ok(p),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                Err(Error::OutOfMemory { bytes, free, total })
            }
            Err(e) => Err(gpu.error("cuMemAlloc", e, None)),
        }
    }

    unsafe fn free(&self, ptr: u64, _bytes: usize) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::free_sync(ptr) };
    }

    fn alloc_host(&self, bytes: usize, flags: u32) -> std::result::Result<u64, DriverError> {
        let mut p = std::ptr::null_mut();
        // SAFETY: plain allocation in the current context (the caller bound it).
        unsafe { sys::cuMemHostAlloc(&mut p, bytes, flags) }
            .result()
            .map(|()| p as u64)
    }

    unsafe fn free_host(&self, ptr: u64, _bytes: usize) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::free_host(ptr as *mut std::ffi::c_void) };
    }

    fn mapped_address(&self, gpu: &Inner, host: u64) -> Result<u64> {
        let mut d = 0;
        // SAFETY: `host` is a live DEVICEMAP allocation of this (current) context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, host as *mut std::ffi::c_void, 0) }
            .result()
            .map_err(|e| gpu.error("cuMemHostGetDevicePointer", e, None))?;
        Ok(d)
    }

    unsafe fn copy_h2d(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        host: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let r = unsafe {
            sys::cuMemcpyHtoDAsync_v2(device, host as *const std::ffi::c_void, bytes, stream)
        }
        .result();
        gpu.check("cuMemcpyHtoDAsync", r, Some(kernel))
    }

    unsafe fn copy_d2h(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        host: u64,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let r = unsafe {
            sys::cuMemcpyDtoHAsync_v2(host as *mut std::ffi::c_void, device, bytes, stream)
        }
        .result();
        gpu.check("cuMemcpyDtoHAsync", r, Some(kernel))
    }

    unsafe fn zero(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let r = unsafe { result::memset_d8_async(device, 0, bytes, stream) };
        gpu.check("cuMemsetD8Async", r, Some(kernel))
    }

    fn sync(&self, gpu: &Inner, stream: sys::CUstream, kernel: Option<&str>) -> Result<()> {
        // SAFETY: `stream` belongs to `gpu`'s context, which the caller made current.
        let r = unsafe { result::stream::synchronize(stream) };
        gpu.check("cuStreamSynchronize", r, kernel)?;
        gpu.fault.stream_idle(stream);
        Ok(())
    }

    fn idle(&self, gpu: &Inner, stream: sys::CUstream) -> bool {
        if gpu.bind().is_err() {
            return true;
        }
        // SAFETY: `stream` belongs to `gpu`'s context, which is current.
        let r = unsafe { sys::cuStreamQuery(stream) };
        r != sys::CUresult::CUDA_ERROR_NOT_READY
    }

    fn record_point(&self, gpu: &Inner, stream: sys::CUstream) -> Result<Point> {
        let ev = gpu.take_event()?;
        // SAFETY: `ev` and `stream` belong to `gpu`'s context, current since the caller's
        // launch or copy bound it.
        let r = unsafe { result::event::record(ev, stream) };
        if let Err(e) = r {
            gpu.put_event(ev);
            return Err(gpu.error("cuEventRecord", e, None));
        }
        Ok(Point::Event(ev))
    }

    fn wait_point(&self, gpu: &Inner, point: &Point) {
        if let Point::Event(ev) = point
            && gpu.bind().is_ok()
        {
            // SAFETY: `ev` is an event of this (current) context, alive while `point` is.
            let _ = unsafe { result::event::synchronize(*ev) };
        }
    }

    fn release_point(&self, gpu: &Inner, point: Point) {
        if let Point::Event(ev) = point
            && !gpu.fault.is_lost()
        {
            gpu.put_event(ev);
        }
    }
}

const ALIGN: usize = 256;

fn layout(bytes: usize) -> Layout {
    Layout::from_size_align(bytes.max(1), ALIGN).expect("allocation size overflows")
}

impl Simulator {
    /// Queue a memcpy on a simulated stream.
    ///
    /// # Safety
    /// As for [`Ops::copy_h2d`]: both ranges valid and left alone until the stream ran it.
    unsafe fn copy(gpu: &Inner, stream: sys::CUstream, dst: u64, src: u64, bytes: usize) {
        // SAFETY (of the job): the caller's contract; it runs before the stream passes it.
        let job = move || {
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
            Ok(())
        };
        gpu.sim_streams.enqueue(stream as usize, Box::new(job));
    }
}

impl Ops for Simulator {
    fn alloc(&self, _gpu: &Inner, bytes: usize) -> Result<u64> {
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout(bytes)) };
        if p.is_null() {
            return Err(Error::OutOfMemory {
                bytes,
                free: 0,
                total: 0,
            });
        }
        Ok(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize) {
        // SAFETY: the caller's contract: `ptr` came from `alloc(bytes)`, same layout.
        unsafe { std::alloc::dealloc(ptr as *mut u8, layout(bytes)) }
    }

    fn alloc_host(&self, bytes: usize, _flags: u32) -> std::result::Result<u64, DriverError> {
        // Host memory is host memory: the same zeroed, aligned allocation as device memory.
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout(bytes)) };
        if p.is_null() {
            return Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        }
        Ok(p as u64)
    }

    unsafe fn free_host(&self, ptr: u64, bytes: usize) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_host(bytes, _)`, same layout.
        unsafe { std::alloc::dealloc(ptr as *mut u8, layout(bytes)) }
    }

    fn mapped_address(&self, _gpu: &Inner, host: u64) -> Result<u64> {
        Ok(host)
    }

    unsafe fn copy_h2d(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        host: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { Simulator::copy(gpu, stream, device, host, bytes) };
        Ok(())
    }

    unsafe fn copy_d2h(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        host: u64,
        device: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { Simulator::copy(gpu, stream, host, device, bytes) };
        Ok(())
    }

    unsafe fn zero(
        &self,
        gpu: &Inner,
        stream: sys::CUstream,
        device: u64,
        bytes: usize,
        _kernel: &str,
    ) -> Result<()> {
        // SAFETY (of the job): the caller's contract; device memory is host memory here.
        let job = move || {
            unsafe { std::ptr::write_bytes(device as *mut u8, 0, bytes) };
            Ok(())
        };
        gpu.sim_streams.enqueue(stream as usize, Box::new(job));
        Ok(())
    }

    fn sync(&self, gpu: &Inner, stream: sys::CUstream, _kernel: Option<&str>) -> Result<()> {
        gpu.sim_streams.sync(stream as usize)
    }

    fn idle(&self, gpu: &Inner, stream: sys::CUstream) -> bool {
        gpu.sim_streams.idle(stream as usize)
    }

    fn record_point(&self, gpu: &Inner, stream: sys::CUstream) -> Result<Point> {
        let (s, position) = gpu.sim_streams.position(stream as usize);
        Ok(Point::Sim(s, position))
    }

    fn wait_point(&self, _gpu: &Inner, point: &Point) {
        if let Point::Sim(stream, position) = point {
            stream.wait_until(*position);
        }
    }

    fn release_point(&self, _gpu: &Inner, _point: Point) {}
}
