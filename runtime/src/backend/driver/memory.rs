//! Memory on the CUDA driver: device and page-locked host allocations, registration of
//! existing host memory, asynchronous copies and memsets, and stream memory operations.

use crate::backend::driver::Driver;
use crate::backend::{ContextOps, MemoryOps, StreamId};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::ffi::c_void;

impl MemoryOps for Driver {
    fn tensor_map(&self, base: u64, shape: &berth_device::tma::MapShape) -> Result<[u64; 16]> {
        use sys::{
            CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
            CUtensorMapL2promotion, CUtensorMapSwizzle,
        };
        let _section = self.section()?;
        let es = u64::from(shape.elem_bytes);
        let dtype = match shape.elem_bytes {
            1 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            2 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            4 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            _ => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        };
        let swizzle = match shape.swizzle {
            128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            _ => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        };
        // Innermost dimension first: columns, then rows.
        let dims = [u64::from(shape.cols), u64::from(shape.rows)];
        let strides = [shape.row_stride * es];
        let boxes = [shape.box_cols, shape.box_rows];
        let element_strides = [1u32, 1];
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
        // SAFETY: every array is as long as the rank (2; one stride: the innermost is the
        // element), `map` is writable and 128-byte aligned (`CUtensorMap`'s own alignment),
        // and `base` is a device allocation of this context holding the matrix (the
        // caller's check); the call only encodes, it reads no device memory.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                dtype,
                2,
                base as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        r.result()
            .map_err(|e| self.error("cuTensorMapEncodeTiled", e, None))?;
        // SAFETY: written by the call above (and zeroed before it).
        Ok(unsafe { map.assume_init() }.opaque)
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let _section = self.section()?;
        // SAFETY: plain allocation in the current context (the caller bound it).
        match unsafe { result::malloc_sync(bytes) } {
            Ok(p) => Ok(p),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                Err(Error::OutOfMemory { bytes, free, total })
            }
            Err(e) => Err(self.error("cuMemAlloc", e, None)),
        }
    }

    unsafe fn free(&self, ptr: u64, _bytes: usize) {
        // A lost context's memory goes with its reset; after it, the address may be a new
        // allocation's.
        let Ok(_section) = self.section() else {
            return;
        };
        // SAFETY: the caller's contract.
        let _ = unsafe { result::free_sync(ptr) };
    }

    fn alloc_host(&self, bytes: usize, flags: u32) -> Result<u64> {
        let _section = self.section()?;
        let mut p = std::ptr::null_mut();
        // SAFETY: plain allocation in the current context (the caller bound it).
        let r = unsafe { sys::cuMemHostAlloc(&mut p, bytes, flags) }.result();
        match r {
            Ok(()) => Ok(p as u64),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory {
                bytes,
                free: 0,
                total: 0,
            }),
            Err(e) => Err(self.error("cuMemHostAlloc", e, None)),
        }
    }

    unsafe fn free_host(&self, ptr: u64, _bytes: usize) {
        // A lost context's host allocations go with its reset.
        let Ok(_section) = self.section() else {
            return;
        };
        // SAFETY: the caller's contract.
        let _ = unsafe { result::free_host(ptr as *mut c_void) };
    }

    fn alloc_managed_host(&self, bytes: usize) -> Result<u64> {
        use sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS;
        use sys::CUmem_advise::{
            CU_MEM_ADVISE_SET_ACCESSED_BY, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
        };
        if self.attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)? == 0 {
            return Err(Error::Usage(
                "this device cannot read managed memory while the host uses it (no concurrent \
                 managed access on this platform): use a MappedBuffer"
                    .into(),
            ));
        }
        let _section = self.section()?;
        let mut p = 0;
        // SAFETY: plain allocation in the current context (the caller bound it).
        let r = unsafe {
            sys::cuMemAllocManaged(
                &mut p,
                bytes,
                sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
            )
        }
        .result();
        match r {
            Ok(()) => {}
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                return Err(Error::OutOfMemory {
                    bytes,
                    free: 0,
                    total: 0,
                });
            }
            Err(e) => return Err(self.error("cuMemAllocManaged", e, None)),
        }
        let host = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        };
        let device = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.ordinal as i32,
        };
        for (advice, location, what) in [
            (
                CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                host,
                "cuMemAdvise(preferred location: host)",
            ),
            (
                CU_MEM_ADVISE_SET_ACCESSED_BY,
                device,
                "cuMemAdvise(accessed by: this device)",
            ),
        ] {
            // SAFETY: `p..p + bytes` is the managed allocation just made; advice changes
            // where its pages live and how they are mapped, never their contents.
            let r = unsafe { sys::cuMemAdvise_v2(p, bytes, advice, location) }.result();
            if let Err(e) = r {
                // SAFETY: nothing has used the allocation yet.
                let _ = unsafe { result::free_sync(p) };
                return Err(self.error(what, e, None));
            }
        }
        Ok(p)
    }

    unsafe fn free_managed(&self, ptr: u64, _bytes: usize) {
        // A lost context's memory goes with its reset.
        let Ok(_section) = self.section() else {
            return;
        };
        // SAFETY: the caller's contract.
        let _ = unsafe { result::free_sync(ptr) };
    }

    fn mapped_address(&self, host: u64) -> Result<u64> {
        let _section = self.section()?;
        let mut d = 0;
        // SAFETY: `host` is a live DEVICEMAP allocation of this (current) context.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, host as *mut c_void, 0) };
        self.check("cuMemHostGetDevicePointer", r.result(), None)?;
        Ok(d)
    }

    unsafe fn register(&self, host: *mut c_void, bytes: usize) -> Result<u64> {
        let _section = self.section()?;
        let flags = sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: `host..host+bytes` stays allocated until it is unregistered (the caller's
        // contract).
        let r = unsafe { sys::cuMemHostRegister_v2(host, bytes, flags) }.result();
        if let Err(e) = r {
            use sys::CUresult::*;
            return Err(match e.0 {
                CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED => Error::Usage(
                    "this memory (or a page of it) is already registered or pinned: register \
                     each allocation once, or use a MappedBuffer"
                        .into(),
                ),
                CUDA_ERROR_NOT_SUPPORTED => Error::Usage(
                    "this platform does not support registering host memory: use a MappedBuffer"
                        .into(),
                ),
                _ => self.error("cuMemHostRegister", e, None),
            });
        }
        let mut device = 0;
        // SAFETY: `host` was just registered with DEVICEMAP in the current context.
        if let Err(e) = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }.result()
        {
            // SAFETY: undo the registration above.
            let _ = unsafe { sys::cuMemHostUnregister(host) };
            return Err(self.error("cuMemHostGetDevicePointer", e, None));
        }
        Ok(device)
    }

    unsafe fn unregister(&self, host: *mut c_void) {
        // A lost context's registrations go with its reset.
        let Ok(_section) = self.section() else {
            return;
        };
        // SAFETY: the caller's contract.
        let _ = unsafe { sys::cuMemHostUnregister(host) };
    }

    unsafe fn copy_h2d(
        &self,
        stream: StreamId,
        device: u64,
        host: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        let _range = crate::nvtx::copy(true, bytes, kernel);
        // SAFETY: the caller's contract.
        let r = unsafe { sys::cuMemcpyHtoDAsync_v2(device, host as *const c_void, bytes, stream) }
            .result();
        self.check("cuMemcpyHtoDAsync", r, Some(kernel))
    }

    unsafe fn copy_peer(
        &self,
        stream: StreamId,
        dst: u64,
        from: &dyn crate::backend::Ops,
        src: u64,
        bytes: usize,
        what: &str,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        let Some(from_ctx) = from.raw_context() else {
            return Err(Error::Usage(format!(
                "{what}: `{}` has no CUDA memory to copy from",
                from.name()
            )));
        };
        let _section = self.section()?;
        // SAFETY: the caller's contract: both ranges are device memory of their contexts, alive
        // and left alone until the stream has passed the copy; both contexts are live.
        let r = unsafe { sys::cuMemcpyPeerAsync(dst, self.ctx.0, src, from_ctx, bytes, stream) }
            .result();
        self.check("cuMemcpyPeerAsync", r, Some(what))
    }

    unsafe fn copy_d2h(
        &self,
        stream: StreamId,
        host: u64,
        device: u64,
        bytes: usize,
        kernel: &str,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        let _range = crate::nvtx::copy(false, bytes, kernel);
        // SAFETY: the caller's contract.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(host as *mut c_void, device, bytes, stream) }
            .result();
        self.check("cuMemcpyDtoHAsync", r, Some(kernel))
    }

    unsafe fn zero(&self, stream: StreamId, device: u64, bytes: usize, kernel: &str) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        // SAFETY: the caller's contract.
        let r = unsafe { result::memset_d8_async(device, 0, bytes, stream) };
        self.check("cuMemsetD8Async", r, Some(kernel))
    }

    unsafe fn fill_u32(
        &self,
        stream: StreamId,
        device: u64,
        value: u32,
        count: usize,
        kernel: &str,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        // SAFETY: the caller's contract.
        let r = unsafe { sys::cuMemsetD32Async(device, value, count, stream) }.result();
        self.check("cuMemsetD32Async", r, Some(kernel))
    }

    unsafe fn write_flag(&self, stream: StreamId, _host: u64, device: u64) -> bool {
        let (Ok(stream), Ok(_section)) = (self.stream(stream), self.section()) else {
            return false;
        };
        // SAFETY: the caller's contract: `device` is a live u32 of mapped memory.
        unsafe { sys::cuStreamWriteValue32_v2(stream, device, 1, 0) }
            .result()
            .is_ok()
    }
}
