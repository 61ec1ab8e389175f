//! Kernels on the CUDA driver: one PTX module per kernel crate, loaded (and checked against
//! every launcher of the crate) on first use, the function cache, launches and graphs.

use crate::backend::driver::Driver;
use crate::backend::driver_launch;
use crate::backend::{GraphExec, GraphNode, KernelOps};
use crate::error::{Error, Result};
use crate::launch::grid::Grid;
use crate::launch::kernel::{Kernel, registered_kernels};
use cudarc::driver::{result, sys};
use std::ffi::{CString, c_void};

impl Driver {
    fn module(&self, kernel: &'static Kernel) -> Result<sys::CUmodule> {
        let mut modules = self.modules.lock().expect("poisoned");
        if let Some(m) = modules.get(kernel.crate_name) {
            return Ok(*m);
        }
        // Check every entry of the PTX against its launcher before anything runs: a stale
        // PTX or a macro bug must be an error here, not memory corruption later.
        for k in registered_kernels().filter(|k| k.crate_name == kernel.crate_name) {
            crate::ptx::check_kernel(k)?;
        }
        crate::ptx::check_kernel(kernel)?;
        let src = CString::new(kernel.ptx).map_err(|_| Error::Module {
            kernel: kernel.name,
            reason: "the embedded PTX contains a NUL byte".into(),
        })?;
        // SAFETY: `src` is a NUL-terminated PTX image; the context is current (bind).
        let module = unsafe { result::module::load_data(src.as_ptr().cast()) }.map_err(|e| {
            let (name, message) = crate::error::describe(e);
            Error::Module {
                kernel: kernel.name,
                reason: format!(
                    "the driver rejected the PTX of crate `{}`: {name} ({message}); was it built for a newer GPU than this one (BERTH_ARCH)?",
                    kernel.crate_name
                ),
            }
        })?;
        self.faults.record.install(module)?;
        self.faults.state.index_strings(module, kernel.ptx);
        tracing::debug!(krate = kernel.crate_name, "PTX module loaded");
        modules.insert(kernel.crate_name, module);
        Ok(module)
    }
}

impl KernelOps for Driver {
    fn function(&self, kernel: &'static Kernel) -> Result<sys::CUfunction> {
        let key = std::ptr::from_ref(kernel) as usize;
        if let Some(f) = self.functions.lock().expect("poisoned").get(&key) {
            return Ok(*f);
        }
        let module = self.module(kernel)?;
        let cname = CString::new(kernel.name).expect("kernel names have no NUL");
        // SAFETY: `module` is a loaded module of this (current) context.
        let f =
            unsafe { result::module::get_function(module, cname) }.map_err(|e| Error::Module {
                kernel: kernel.name,
                reason: format!(
                    "entry `{}` not found in the PTX of crate `{}` ({}); rebuild the crate",
                    kernel.name,
                    kernel.crate_name,
                    crate::error::describe(e).0
                ),
            })?;
        self.functions.lock().expect("poisoned").insert(key, f);
        Ok(f)
    }

    unsafe fn launch(
        &self,
        kernel: &'static Kernel,
        func: sys::CUfunction,
        grid: &Grid,
        stream: sys::CUstream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { driver_launch::launch(&self.faults, kernel, func, grid, stream, params) }
    }

    fn graph_build(&self, nodes: &[GraphNode]) -> Result<GraphExec> {
        driver_launch::build(&self.faults, nodes)
    }

    fn graph_update(&self, exec: &GraphExec, new: &[GraphNode], old: &[GraphNode]) -> Result<()> {
        driver_launch::update(&self.faults, exec, new, old)
    }

    unsafe fn graph_launch(
        &self,
        exec: &GraphExec,
        _nodes: &[GraphNode],
        stream: sys::CUstream,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { driver_launch::launch_graph(&self.faults, exec, stream) }
    }

    fn graph_drop(&self, exec: GraphExec) {
        driver_launch::destroy(exec);
    }
}
