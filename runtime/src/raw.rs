//! Escape hatch for experts: the driver handles behind berth's types, and cudarc's layers.
//!
//! Nothing here is needed for ordinary use; using the handles bypasses berth's fault
//! tracking and borrow guarantees.

pub use cudarc::driver::{result, sys};

use crate::gpu::Gpu;
use crate::stream::Stream;

impl Gpu {
    /// The CUDA context handle (current on the calling thread after any berth call).
    pub fn raw_context(&self) -> sys::CUcontext {
        self.inner.ops().raw_context()
    }

    /// The handle of this GPU's default stream.
    pub fn raw_default_stream(&self) -> sys::CUstream {
        self.inner.default_stream
    }
}

impl Stream {
    /// The stream's handle.
    pub fn raw(&self) -> sys::CUstream {
        self.handle
    }
}
