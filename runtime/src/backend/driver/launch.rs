//! Kernel launches on the CUDA driver: one launch (`cuLaunchKernel`), and CUDA graphs of
//! recorded launches (built, updated in place, launched, destroyed).

use crate::backend::driver::fault::Faults;
use crate::backend::driver::handle::Handle;
use crate::backend::{GraphExec, GraphNode, GraphRepr};
use crate::error::{Error, Result};
use crate::launch::grid::Grid;
use crate::launch::kernel::Kernel;
use cudarc::driver::{DriverError, result, sys};
use std::ffi::c_void;

/// Let `func` use the dynamic shared memory `grid` asks for (above 48 KiB of shared memory
/// in all, static and dynamic, it must opt in).
///
/// Static shared memory alone never needs it (ptxas refuses more than 48 KiB of it), so a
/// launch without dynamic shared memory makes no driver call here; one with it asks the driver
/// for the function's static shared memory, which the loaded module knows exactly.
pub(super) fn prepare(
    faults: &Faults,
    k: &'static Kernel,
    func: sys::CUfunction,
    grid: &Grid,
) -> Result<()> {
    if grid.shared_bytes == 0 {
        return Ok(());
    }
    // SAFETY: valid function of the current context; the attribute is a byte count.
    let static_shared = unsafe {
        result::function::get_function_attribute(
            func,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        )
    }
    .map_err(|e| faults.error("cuFuncGetAttribute", e, Some(k.name)))?;
    if crate::limits::needs_opt_in(static_shared.max(0) as usize, grid) {
        // SAFETY: valid function of the current context; the attribute takes bytes.
        let r = unsafe {
            result::function::set_function_attribute(
                func,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                grid.shared_bytes as i32,
            )
        };
        r.map_err(|e| {
            faults.sticky_or("cuFuncSetAttribute", e, |e| Error::InvalidLaunch {
                kernel: k.name,
                reason: format!(
                    "{} bytes of dynamic shared memory refused: {}",
                    grid.shared_bytes,
                    crate::backend::driver::fault::describe(e).1
                ),
            })
        })?;
    }
    Ok(())
}

/// A configuration the driver refused is the launch's mistake; anything else is the context's.
fn launch_error(
    faults: &Faults,
    k: &'static Kernel,
    grid: &Grid,
    call: &'static str,
    e: DriverError,
) -> Error {
    use sys::CUresult::*;
    if matches!(
        e.0,
        CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    ) {
        let (name, message) = crate::backend::driver::fault::describe(e);
        return Error::InvalidLaunch {
            kernel: k.name,
            reason: format!("the driver refused the configuration {grid:?}: {name} ({message})"),
        };
    }
    faults.error(call, e, Some(k.name))
}

/// Enqueue `k` over `grid` on `stream`.
///
/// # Safety
/// As for [`KernelOps::launch`](crate::backend::KernelOps::launch).
pub(super) unsafe fn launch(
    faults: &Faults,
    k: &'static Kernel,
    func: sys::CUfunction,
    grid: &Grid,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    prepare(faults, k, func, grid)?;
    let (g, t) = (grid.blocks, grid.threads);
    // SAFETY: the caller's contract.
    let r = unsafe {
        result::launch_kernel(
            func,
            (g.x, g.y, g.z),
            (t.x, t.y, t.z),
            grid.shared_bytes,
            stream,
            params,
        )
    };
    r.map_err(|e| launch_error(faults, k, grid, "cuLaunchKernel", e))
}

/// The driver's description of kernel node `n` of function `func` (its parameter values are
/// copied by the call that takes it).
fn node_params(
    n: &GraphNode,
    func: sys::CUfunction,
    ptrs: &mut [*mut c_void],
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    let (g, t) = (n.grid.blocks, n.grid.threads);
    sys::CUDA_KERNEL_NODE_PARAMS {
        func,
        gridDimX: g.x,
        gridDimY: g.y,
        gridDimZ: g.z,
        blockDimX: t.x,
        blockDimY: t.y,
        blockDimZ: t.z,
        sharedMemBytes: n.grid.shared_bytes,
        kernelParams: ptrs.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A CUDA graph of `nodes`, each after the previous one, instantiated; `func` gives each node's
/// function.
pub(super) fn build(
    faults: &Faults,
    nodes: &[GraphNode],
    func: impl Fn(&GraphNode) -> Result<sys::CUfunction>,
) -> Result<GraphExec> {
    let mut graph = std::ptr::null_mut();
    // SAFETY: plain creation in the current context.
    let r = unsafe { sys::cuGraphCreate(&mut graph, 0) }.result();
    faults.check("cuGraphCreate", r, None)?;
    let mut kernel_nodes: Vec<sys::CUgraphNode> = Vec::with_capacity(nodes.len());
    let fail = |e: Error| {
        // SAFETY: the graph was created above and is destroyed once, here.
        let _ = unsafe { result::graph::destroy(graph) };
        e
    };
    for n in nodes {
        let f = match func(n) {
            Ok(f) => f,
            Err(e) => return Err(fail(e)),
        };
        if let Err(e) = prepare(faults, n.kernel, f, &n.grid) {
            return Err(fail(e));
        }
        let mut block = n.params.clone();
        let mut ptrs = block.pointers();
        let p = node_params(n, f, &mut ptrs);
        let mut node = std::ptr::null_mut();
        let deps = kernel_nodes.last().copied();
        let (dep_ptr, dep_n) = match &deps {
            Some(d) => (d as *const sys::CUgraphNode, 1),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `graph` is live; `p` describes a function of this context with one pointer
        // per parameter (checked at recording) to values that live through the call, which
        // copies them; `dep_ptr` points to `dep_n` nodes of this graph.
        let r =
            unsafe { sys::cuGraphAddKernelNode_v2(&mut node, graph, dep_ptr, dep_n, &p) }.result();
        if let Err(e) = r {
            return Err(fail(launch_error(
                faults,
                n.kernel,
                &n.grid,
                "cuGraphAddKernelNode",
                e,
            )));
        }
        kernel_nodes.push(node);
    }
    // SAFETY: a complete graph of this context.
    let r = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
    match r {
        Ok(exec) => Ok(GraphExec(GraphRepr::Cuda {
            graph: Handle(graph),
            exec: Handle(exec),
            nodes: kernel_nodes.into_iter().map(Handle).collect(),
        })),
        Err(e) => Err(fail(faults.error("cuGraphInstantiate", e, None))),
    }
}

/// Give the instantiated graph the parameter values of `new` where they differ from `old`
/// (same kernels and grids); `func` gives each node's function.
pub(super) fn update(
    faults: &Faults,
    exec: &GraphExec,
    new: &[GraphNode],
    old: &[GraphNode],
    func: impl Fn(&GraphNode) -> Result<sys::CUfunction>,
) -> Result<()> {
    let GraphRepr::Cuda { exec, nodes, .. } = &exec.0 else {
        unreachable!("a simulated graph given to the driver")
    };
    for ((n, o), node) in new.iter().zip(old).zip(nodes) {
        if n.params == o.params {
            continue;
        }
        let mut block = n.params.clone();
        let mut ptrs = block.pointers();
        let p = node_params(n, func(n)?, &mut ptrs);
        // SAFETY: `node` is the kernel node of `exec` recorded for the same kernel and grid;
        // the values `p` points to live through the call, which copies them.
        let r = unsafe { sys::cuGraphExecKernelNodeSetParams_v2(exec.0, node.0, &p) }.result();
        if let Err(e) = r {
            return Err(launch_error(
                faults,
                n.kernel,
                &n.grid,
                "cuGraphExecKernelNodeSetParams",
                e,
            ));
        }
    }
    Ok(())
}

/// Enqueue the instantiated graph on `stream`.
///
/// # Safety
/// As for [`KernelOps::graph_launch`](crate::backend::KernelOps::graph_launch).
pub(super) unsafe fn launch_graph(
    faults: &Faults,
    exec: &GraphExec,
    stream: sys::CUstream,
) -> Result<()> {
    let GraphRepr::Cuda { exec, .. } = &exec.0 else {
        unreachable!("a simulated graph given to the driver")
    };
    // SAFETY: `exec` was instantiated in this (current) context; the caller's contract covers
    // what its nodes address.
    let r = unsafe { result::graph::launch(exec.0, stream) };
    faults.check("cuGraphLaunch", r, Some("graph"))
}

/// Destroy an instantiated graph.
pub(super) fn destroy(exec: GraphExec) {
    if let GraphRepr::Cuda { graph, exec, .. } = exec.0 {
        // SAFETY: created by `build` in this (current) context and destroyed once; the driver
        // frees an exec still running once it completes.
        unsafe {
            let _ = result::graph::exec_destroy(exec.0);
            let _ = result::graph::destroy(graph.0);
        }
    }
}
