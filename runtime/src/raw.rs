//! Escape hatch for experts: the driver handles behind berth's types, and cudarc's layers.
//!
//! Nothing here is needed for ordinary use; using the handles bypasses berth's fault
//! tracking and borrow guarantees. On the simulator there are no driver handles: each is
//! `None` there.

pub use cudarc::driver::{result, sys};

use crate::error::Result;
use crate::gpu::Gpu;
use crate::stream::Stream;

impl Gpu {
    /// The CUDA context handle (current on the calling thread after any berth call); `None` on
    /// the simulator. Valid while this `Gpu`'s context lives and is not lost to a fault.
    pub fn raw_context(&self) -> Option<sys::CUcontext> {
        self.inner.ops().raw_context()
    }

    /// The handle of this GPU's default stream; `None` on the simulator. Valid while this
    /// `Gpu`'s context lives and is not lost to a fault.
    pub fn raw_default_stream(&self) -> Option<sys::CUstream> {
        self.inner.ops().raw_stream(self.inner.default_stream)
    }

    /// A raw device attribute; an error on the simulator, which has none.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        self.inner.ops().attribute(attr)
    }
}

impl Stream {
    /// The stream's handle; `None` on the simulator. Valid while this `Stream` lives and its
    /// context is not lost to a fault.
    pub fn raw(&self) -> Option<sys::CUstream> {
        self.gpu.ops().raw_stream(self.handle)
    }
}
