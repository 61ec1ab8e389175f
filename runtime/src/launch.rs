//! Launch configuration, kernel descriptors and the typed launch that generated launchers
//! drive.

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::gpu::Inner;
use crate::stream::Queue;
use berth_device::DeviceCopy;
use cudarc::driver::{result, sys};
use std::marker::PhantomData;
use std::sync::Arc;

/// Three extents, as CUDA's `dim3`. Converts from `u32`, `(u32, u32)` and `(u32, u32, u32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// x extent
    pub x: u32,
    /// y extent
    pub y: u32,
    /// z extent
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// Grid and block shape of a launch, and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks in the grid.
    pub blocks: Dim3,
    /// Threads per block.
    pub threads: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl Grid {
    /// Threads per block chosen by [`Grid::cover`]: a multiple of the warp size that keeps
    /// enough blocks per SM resident for latency hiding on every architecture since sm_50.
    pub const DEFAULT_BLOCK: u32 = 256;

    /// An explicit grid: `blocks` blocks of `threads` threads.
    pub fn new(blocks: impl Into<Dim3>, threads: impl Into<Dim3>) -> Grid {
        Grid {
            blocks: blocks.into(),
            threads: threads.into(),
            shared_bytes: 0,
        }
    }

    /// One thread per element for `n` elements along x, in blocks of
    /// [`Grid::DEFAULT_BLOCK`]: `thread::global_x()` ranges over `0..n` (and a little past
    /// it in the last block: guard with `if i < len`).
    pub fn cover(n: usize) -> Grid {
        Grid::cover_with_block(n, Grid::DEFAULT_BLOCK)
    }

    /// As [`Grid::cover`], with `block` threads per block.
    pub fn cover_with_block(n: usize, block: u32) -> Grid {
        let blocks = (n as u64).div_ceil(u64::from(block.max(1))).max(1);
        Grid::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }

    /// Ask for `bytes` of dynamic shared memory per block.
    pub fn shared_bytes(mut self, bytes: u32) -> Grid {
        self.shared_bytes = bytes;
        self
    }

    /// Total threads launched along x.
    pub fn threads_x(&self) -> u64 {
        u64::from(self.blocks.x) * u64::from(self.threads.x)
    }

    fn validate(&self, kernel: &'static str) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidLaunch { kernel, reason });
        let (b, t) = (self.blocks, self.threads);
        if [b.x, b.y, b.z, t.x, t.y, t.z].contains(&0) {
            return bad(format!(
                "every extent must be at least 1 (blocks {b:?}, threads {t:?})"
            ));
        }
        let per_block = u64::from(t.x) * u64::from(t.y) * u64::from(t.z);
        if t.x > 1024 || t.y > 1024 || t.z > 64 || per_block > 1024 {
            return bad(format!(
                "{per_block} threads per block ({t:?}): at most 1024 in all, x and y ≤ 1024, z ≤ 64"
            ));
        }
        if b.x > i32::MAX as u32 || b.y > 65535 || b.z > 65535 {
            return bad(format!(
                "{b:?} blocks: x ≤ 2^31-1, y and z ≤ 65535 (for more elements, loop with thread::grid_stride_x())"
            ));
        }
        Ok(())
    }
}

/// What one PTX parameter of a kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A by-value scalar.
    Scalar,
    /// The device pointer of a slice argument.
    SlicePtr {
        /// Whether the kernel writes through it.
        mutable: bool,
    },
    /// The length (elements, `usize`) of the slice argument just before.
    SliceLen,
}

/// One PTX parameter of a kernel, as the launcher will pass it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// The Rust argument it comes from.
    pub name: &'static str,
    /// What it is.
    pub kind: ParamKind,
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

impl Param {
    /// A by-value argument of type `T`.
    pub const fn scalar<T>(name: &'static str) -> Param {
        Param {
            name,
            kind: ParamKind::Scalar,
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }

    /// The pointer half of a slice of `T`.
    pub const fn slice_ptr<T>(name: &'static str, mutable: bool) -> Param {
        Param {
            name,
            kind: ParamKind::SlicePtr { mutable },
            size: 8,
            align: 8,
        }
    }

    /// The length half of a slice.
    pub const fn slice_len(name: &'static str) -> Param {
        Param {
            name,
            kind: ParamKind::SliceLen,
            size: 8,
            align: 8,
        }
    }
}

/// Everything the runtime knows about one kernel, generated by `#[gpu_kernel]`.
#[derive(Debug)]
pub struct Kernel {
    /// Entry name in the PTX (the Rust function's name).
    pub name: &'static str,
    /// The kernel crate (`CARGO_CRATE_NAME`); one PTX module per crate.
    pub crate_name: &'static str,
    /// The crate's PTX.
    pub ptx: &'static str,
    /// PTX parameters in order.
    pub params: &'static [Param],
    /// `file:line` of the kernel's definition.
    pub location: &'static str,
}

/// Registration of a kernel descriptor, collected across the program.
pub struct KernelRegistration(pub &'static Kernel);
inventory::collect!(KernelRegistration);

/// Every kernel linked into this program.
pub fn registered_kernels() -> impl Iterator<Item = &'static Kernel> {
    inventory::iter::<KernelRegistration>().map(|r| r.0)
}

/// One launch being assembled by a generated launcher.
pub struct Launch<'l> {
    gpu: &'l Arc<Inner>,
    stream: sys::CUstream,
    kernel: &'static Kernel,
    grid: Grid,
    func: sys::CUfunction,
    /// Parameter values, each at a 16-byte-aligned slot.
    storage: Vec<u128>,
    offsets: Vec<usize>,
    next: usize,
    error: Option<Error>,
}

impl<'l> Launch<'l> {
    /// Start a launch of `kernel` on `queue`.
    pub fn new(queue: &'l impl Queue, kernel: &'static Kernel, grid: Grid) -> Result<Self> {
        let crate::stream::QueueRef(gpu, stream) = queue.__queue();
        grid.validate(kernel.name)?;
        gpu.bind()?;
        let func = gpu.function(kernel)?;
        let mut offsets = Vec::with_capacity(kernel.params.len());
        let mut words = 0;
        for p in kernel.params {
            offsets.push(words);
            words += p.size.div_ceil(16).max(1);
        }
        Ok(Launch {
            gpu,
            stream,
            kernel,
            grid,
            func,
            storage: vec![0; words],
            offsets,
            next: 0,
            error: None,
        })
    }

    fn put(&mut self, bytes: &[u8]) {
        let Some(p) = self.kernel.params.get(self.next) else {
            self.fail(format!(
                "more arguments than the kernel's {} parameters",
                self.kernel.params.len()
            ));
            return;
        };
        if p.size != bytes.len() {
            self.fail(format!(
                "parameter `{}` is {} bytes in the kernel but {} in the launch",
                p.name,
                p.size,
                bytes.len()
            ));
            return;
        }
        let off = self.offsets[self.next];
        // SAFETY: the slot at `off` spans ceil(size/16) u128 words, at least `bytes.len()`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.storage.as_mut_ptr().add(off).cast::<u8>(),
                bytes.len(),
            );
        }
        self.next += 1;
    }

    fn fail(&mut self, reason: String) {
        if self.error.is_none() {
            self.error = Some(Error::Module {
                kernel: self.kernel.name,
                reason: format!("launcher and kernel disagree: {reason}; rebuild the kernel crate"),
            });
        }
    }

    /// Pass a scalar by value.
    pub fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        // SAFETY: `T: DeviceCopy` is plain data; reading its bytes is defined (padding bytes
        // are copied as they are and never interpreted by the host).
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        tracing::trace!(
            kernel = self.kernel.name,
            bytes = bytes.len(),
            "scalar by value"
        );
        self.put(bytes);
    }

    fn slice<T: DeviceCopy>(&mut self, b: &DeviceBuffer<T>, mutable: bool) {
        if !Arc::ptr_eq(&b.gpu, self.gpu) {
            if self.error.is_none() {
                self.error = Some(Error::WrongContext {
                    kernel: self.kernel.name,
                });
            }
            return;
        }
        tracing::trace!(
            kernel = self.kernel.name,
            placement = "device",
            bytes = b.bytes(),
            mutable,
            "slice passed in place (no copy)"
        );
        self.put(&b.ptr.to_ne_bytes());
        self.put(&(b.len() as u64).to_ne_bytes());
    }

    /// Pass a device buffer for a `&[T]` argument.
    pub fn device<T: DeviceCopy>(&mut self, b: &'l DeviceBuffer<T>) {
        self.slice(b, false);
    }

    /// Pass a device buffer for a `&mut [T]` argument.
    pub fn device_mut<T: DeviceCopy>(&mut self, b: &'l mut DeviceBuffer<T>) {
        self.slice(b, true);
    }

    /// Enqueue the launch.
    pub fn submit(mut self) -> Result<Pending<'l>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.next != self.kernel.params.len() {
            self.fail(format!(
                "{} of {} parameters passed",
                self.next,
                self.kernel.params.len()
            ));
            return Err(self.error.take().expect("just set"));
        }
        let k = self.kernel.name;
        if self.grid.shared_bytes > 48 * 1024 {
            // SAFETY: valid function of the current context; the attribute takes bytes.
            let r = unsafe {
                result::function::set_function_attribute(
                    self.func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    self.grid.shared_bytes as i32,
                )
            };
            r.map_err(|e| Error::InvalidLaunch {
                kernel: k,
                reason: format!(
                    "{} bytes of dynamic shared memory refused: {}",
                    self.grid.shared_bytes,
                    crate::error::describe(e).1
                ),
            })?;
        }
        let base = self.storage.as_mut_ptr();
        let mut ptrs: Vec<*mut std::ffi::c_void> = self
            .offsets
            .iter()
            // SAFETY: each offset is inside `storage`.
            .map(|&o| unsafe { base.add(o) }.cast())
            .collect();
        let (g, t) = (self.grid.blocks, self.grid.threads);
        tracing::debug!(
            kernel = k,
            blocks = ?(g.x, g.y, g.z),
            threads = ?(t.x, t.y, t.z),
            shared_bytes = self.grid.shared_bytes,
            stream = ?self.stream,
            "launch"
        );
        // SAFETY: `func` is an entry of this context whose parameter list was checked against
        // `kernel.params` when its module loaded; `ptrs` has one pointer per parameter, each
        // to a value of the checked size that outlives the call (the driver copies them).
        // Device memory passed in stays borrowed by the returned guard until completion.
        let r = unsafe {
            result::launch_kernel(
                self.func,
                (g.x, g.y, g.z),
                (t.x, t.y, t.z),
                self.grid.shared_bytes,
                self.stream,
                &mut ptrs,
            )
        };
        if let Err(e) = r {
            use sys::CUresult::*;
            if matches!(
                e.0,
                CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            ) {
                let (name, message) = crate::error::describe(e);
                return Err(Error::InvalidLaunch {
                    kernel: k,
                    reason: format!(
                        "the driver refused the configuration {:?}: {name} ({message})",
                        self.grid
                    ),
                });
            }
            return Err(self.gpu.error("cuLaunchKernel", e, Some(k)));
        }
        self.gpu.fault.launched(self.stream, self.kernel);
        Ok(Pending {
            gpu: self.gpu.clone(),
            stream: self.stream,
            kernel: k,
            done: false,
            _borrows: PhantomData,
        })
    }
}

/// A launch in flight. It keeps every buffer of the launch borrowed until the stream has
/// finished it; [`Pending::wait`] returns the outcome. Dropping it without waiting also
/// waits (a fault is then reported by the next call on the context).
#[must_use = "a launch is asynchronous: call .wait() to get its outcome"]
pub struct Pending<'l> {
    gpu: Arc<Inner>,
    stream: sys::CUstream,
    kernel: &'static str,
    done: bool,
    _borrows: PhantomData<&'l mut ()>,
}

impl Pending<'_> {
    /// Wait for the launch (and earlier work on its stream) to finish.
    pub fn wait(mut self) -> Result<()> {
        self.done = true;
        crate::stream::sync(&self.gpu, self.stream, Some(self.kernel))
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &'static str {
        self.kernel
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Errors are recorded in the context's fault state and surface on the next call.
            let _ = crate::stream::sync(&self.gpu, self.stream, Some(self.kernel));
        }
    }
}
