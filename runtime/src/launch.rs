//! Launch configuration, kernel descriptors and the typed launch that generated launchers
//! drive.

use crate::args::{ArgRef, DeviceArg, MappedArg, PinnedArg};
use crate::error::{Error, Result};
use crate::gpu::Inner;
use crate::stream::{Mode, Queue};
use crate::track::{Access, Completion, Uses};
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

    /// `n` × `m` elements (x fastest) covered by 2D blocks of `block` threads:
    /// `thread::global_x()` ranges over `0..n` and `global_y()` over `0..m` (a little past
    /// them in the last blocks: guard both).
    ///
    /// ```
    /// use berth_runtime::{Dim3, Grid};
    /// let g = Grid::cover_2d(1000, 30, (16, 16));
    /// assert_eq!((g.blocks, g.threads), (Dim3::from((63, 2, 1)), Dim3::from((16, 16, 1))));
    /// ```
    pub fn cover_2d(n: usize, m: usize, block: (u32, u32)) -> Grid {
        let (bx, by) = (block.0.max(1), block.1.max(1));
        Grid::new((blocks_for(n, bx), blocks_for(m, by), 1), (bx, by, 1))
    }

    /// As [`Grid::cover_2d`] in three dimensions.
    pub fn cover_3d(n: usize, m: usize, l: usize, block: (u32, u32, u32)) -> Grid {
        let (bx, by, bz) = (block.0.max(1), block.1.max(1), block.2.max(1));
        Grid::new(
            (blocks_for(n, bx), blocks_for(m, by), blocks_for(l, bz)),
            (bx, by, bz),
        )
    }

    pub(crate) fn validate(&self, kernel: &'static Kernel) -> Result<()> {
        let name = kernel.name;
        let bad = |reason: String| {
            Err(Error::InvalidLaunch {
                kernel: name,
                reason,
            })
        };
        let (b, t) = (self.blocks, self.threads);
        if let Some([x, y, z]) = kernel.block
            && [t.x, t.y, t.z] != [x, y, z]
        {
            return bad(format!(
                "the kernel declares blocks of ({x}, {y}, {z}) threads (`#[gpu_kernel(block = ..)]`), \
                 the launch asks for ({}, {}, {}): launch it with `Grid::new(blocks, ({x}, {y}, {z}))`",
                t.x, t.y, t.z
            ));
        }
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

/// Blocks of `block` threads covering `n` elements along one axis.
fn blocks_for(n: usize, block: u32) -> u32 {
    u32::try_from((n as u64).div_ceil(u64::from(block)).max(1)).unwrap_or(u32::MAX)
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
        /// Where the slice's data lives.
        placement: Placement,
    },
    /// The length (elements, `usize`) of the slice argument just before.
    SliceLen,
}

/// Where a slice argument's data lives, from its attribute in the kernel's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// No attribute: device memory, passed in place.
    Device,
    /// `#[pinned_async]`: pinned host memory, copied to device staging around the launch.
    PinnedAsync,
    /// `#[pinned_async(out)]`: pinned host memory the kernel only writes: copied back only.
    PinnedOut,
    /// `#[mapped]`: host memory mapped into the GPU's address space, read in place.
    Mapped,
    /// `#[auto]`: mapped host memory, read in place or copied in, chosen per launch.
    Auto,
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
    pub const fn slice_ptr<T>(name: &'static str, mutable: bool, placement: Placement) -> Param {
        Param {
            name,
            kind: ParamKind::SlicePtr { mutable, placement },
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
    /// The host entry of the CPU simulator: one call runs one simulated thread, with one
    /// pointer per parameter value.
    pub sim: unsafe fn(&[*mut std::ffi::c_void]),
    /// Whether the body calls `sync_threads` (the simulator then runs threads as coroutines).
    pub uses_barrier: bool,
    /// The block shape the kernel declared (`#[gpu_kernel(block = (x, y, z))]`): its PTX
    /// requires exactly this many threads per block (`.reqntid`), and launches with another
    /// shape are refused.
    pub block: Option<[u32; 3]>,
}

/// Registration of a kernel descriptor, collected across the program.
pub struct KernelRegistration(pub &'static Kernel);
inventory::collect!(KernelRegistration);

/// Every kernel linked into this program.
pub fn registered_kernels() -> impl Iterator<Item = &'static Kernel> {
    inventory::iter::<KernelRegistration>().map(|r| r.0)
}

/// A kernel's parameter values, each in a 16-byte-aligned slot, as `cuLaunchKernel` takes
/// them (an array of pointers to the values).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ParamBlock {
    storage: Vec<u128>,
    offsets: Vec<usize>,
}

impl ParamBlock {
    pub(crate) fn new(params: &[Param]) -> Self {
        let mut offsets = Vec::with_capacity(params.len());
        let mut words = 0;
        for p in params {
            offsets.push(words);
            words += p.size.div_ceil(16).max(1);
        }
        ParamBlock {
            storage: vec![0; words],
            offsets,
        }
    }

    /// Write parameter `i` (its size was checked by the caller against the kernel's layout).
    pub(crate) fn set(&mut self, i: usize, bytes: &[u8]) {
        let off = self.offsets[i];
        let end = self
            .offsets
            .get(i + 1)
            .copied()
            .unwrap_or(self.storage.len());
        assert!(bytes.len() <= (end - off) * 16, "parameter slot too small");
        // SAFETY: the slot at `off` spans `end - off` u128 words, at least `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.storage.as_mut_ptr().add(off).cast::<u8>(),
                bytes.len(),
            );
        }
    }

    /// One pointer per parameter, valid while `self` is neither moved nor written.
    pub(crate) fn pointers(&mut self) -> Vec<*mut std::ffi::c_void> {
        let base = self.storage.as_mut_ptr();
        self.offsets
            .iter()
            // SAFETY: each offset is inside `storage`.
            .map(|&o| unsafe { base.add(o) }.cast())
            .collect()
    }
}

/// Enqueue `func` over `grid` on `stream` with the parameters `ptrs` point to.
///
/// # Safety
/// `func` is an entry of `gpu`'s (current) context whose parameter list matches `ptrs` (one
/// pointer per parameter, to a value of the PTX parameter's size), and all memory the values
/// address stays alive until the stream has passed the kernel.
pub(crate) unsafe fn launch_raw(
    gpu: &Inner,
    k: &'static Kernel,
    func: sys::CUfunction,
    grid: &Grid,
    stream: sys::CUstream,
    ptrs: &mut [*mut std::ffi::c_void],
) -> Result<()> {
    if gpu.sim {
        // The job runs later, on the stream's thread: it takes its own copy of the values
        // (as `cuLaunchKernel` does); what they address stays borrowed by the launch's guard.
        let mut params = ParamBlock::new(k.params);
        for (i, (p, &ptr)) in k.params.iter().zip(ptrs.iter()).enumerate() {
            // SAFETY: `ptrs[i]` points to a value of parameter i's size (caller's contract).
            params.set(i, unsafe {
                std::slice::from_raw_parts(ptr.cast::<u8>(), p.size)
            });
        }
        let grid = *grid;
        let job = move || {
            let mut params = params;
            let mut ptrs = params.pointers();
            // SAFETY: forwarded: one pointer per parameter of `k`, to live values.
            unsafe { crate::sim::run(k, &grid, &mut ptrs) }
        };
        gpu.sim_streams.enqueue(stream as usize, Box::new(job));
        return Ok(());
    }
    prepare(k, func, grid)?;
    let kernel = k.name;
    let (g, t) = (grid.blocks, grid.threads);
    // SAFETY: the caller's contract.
    let r = unsafe {
        result::launch_kernel(
            func,
            (g.x, g.y, g.z),
            (t.x, t.y, t.z),
            grid.shared_bytes,
            stream,
            ptrs,
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
                kernel,
                reason: format!(
                    "the driver refused the configuration {grid:?}: {name} ({message})"
                ),
            });
        }
        return Err(gpu.error("cuLaunchKernel", e, Some(kernel)));
    }
    Ok(())
}

/// Let `func` use the dynamic shared memory `grid` asks for (above 48 KiB it must opt in).
pub(crate) fn prepare(k: &'static Kernel, func: sys::CUfunction, grid: &Grid) -> Result<()> {
    let kernel = k.name;
    if grid.shared_bytes > 48 * 1024 {
        // SAFETY: valid function of the current context; the attribute takes bytes.
        let r = unsafe {
            result::function::set_function_attribute(
                func,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                grid.shared_bytes as i32,
            )
        };
        r.map_err(|e| Error::InvalidLaunch {
            kernel,
            reason: format!(
                "{} bytes of dynamic shared memory refused: {}",
                grid.shared_bytes,
                crate::error::describe(e).1
            ),
        })?;
    }
    Ok(())
}

/// A host↔device copy a launch makes around its kernel.
struct Copy {
    host: u64,
    device: u64,
    bytes: usize,
}

/// One launch being assembled by a generated launcher.
pub struct Launch<'l> {
    gpu: &'l Arc<Inner>,
    stream: sys::CUstream,
    kernel: &'static Kernel,
    grid: Grid,
    func: sys::CUfunction,
    params: ParamBlock,
    next: usize,
    error: Option<Error>,
    /// Staging buffers taken from the pool: (size class, device address).
    leases: Vec<(usize, u64)>,
    h2d: Vec<Copy>,
    d2h: Vec<Copy>,
    /// Output staging zeroed before the kernel: (device address, bytes).
    zero: Vec<(u64, usize)>,
    /// The access hint for `#[auto]` arguments.
    touch: Option<crate::placement::Touch>,
    /// The memory of every argument and how it is borrowed, to note the launch's use on.
    uses: Vec<(&'l Uses, Access)>,
    /// Queued with a waiting guard, queued in a scope, or recorded into a graph.
    mode: Mode<'l>,
}

impl<'l> Launch<'l> {
    /// Start a launch of `kernel` on `queue`.
    pub fn new(queue: &'l impl Queue, kernel: &'static Kernel, grid: Grid) -> Result<Self> {
        let crate::stream::QueueRef(gpu, stream, mode) = queue.__queue();
        grid.validate(kernel)?;
        gpu.bind()?;
        let func = gpu.function(kernel)?;
        Ok(Launch {
            gpu,
            stream,
            kernel,
            grid,
            func,
            params: ParamBlock::new(kernel.params),
            next: 0,
            error: None,
            leases: Vec::new(),
            h2d: Vec::new(),
            d2h: Vec::new(),
            zero: Vec::new(),
            touch: None,
            uses: Vec::new(),
            mode,
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
        self.params.set(self.next, bytes);
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

    fn arg_name(&self) -> &'static str {
        self.kernel.params.get(self.next).map_or("?", |p| p.name)
    }

    /// Pass a scalar by value.
    pub fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        // SAFETY: `T: DeviceCopy` is plain data; reading its bytes is defined (padding bytes
        // are copied as they are and never interpreted by the host).
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        self.put(bytes);
    }

    /// Note that the launch uses `a`'s memory with `access`, after any conflicting work whose
    /// guard was leaked (see [`crate::track`]).
    ///
    /// One allocation passed twice with one of them `&mut` would give the kernel body a
    /// `&[T]` and a writable view of the same memory at once: refused (ordinary borrows cannot
    /// do it; copies of a graph's [`Held`](crate::Held) handles could). A launch recorded into
    /// a graph takes only memory that graph holds for its whole life, and held memory is
    /// taken only by launches recorded into its graph.
    fn track(&mut self, a: &ArgRef<'l>, access: Access) {
        let aliased = self.uses.iter().any(|(u, acc)| {
            std::ptr::eq(*u, a.uses) && (access == Access::Exclusive || *acc == Access::Exclusive)
        });
        if aliased {
            let reason = format!(
                "argument `{}` is memory the launch already takes, and one of them is `&mut`",
                self.arg_name()
            );
            self.invalid(reason);
        }
        match self.mode {
            Mode::Record(rec) => {
                if a.held != rec.graph {
                    let reason = format!(
                        "argument `{}` is not held by the graph being recorded: pass the handle from `graph.hold(&mut buffer)` (device memory only; host memory and staged arguments cannot be recorded)",
                        self.arg_name()
                    );
                    self.invalid(reason);
                }
            }
            _ if a.held != 0 => {
                // Handles are `Copy`: launched directly from several threads, two launches
                // could both pass the check below before either notes its use. The graph's
                // replays are the only GPU work on held memory, serialised by the graph.
                let reason = format!(
                    "argument `{}` is a graph's held buffer: it is used only by launches recorded into that graph",
                    self.arg_name()
                );
                self.invalid(reason);
            }
            _ => a.uses.before_gpu(access, Some(self.stream)),
        }
        self.uses.push((a.uses, access));
    }

    fn invalid(&mut self, reason: String) {
        if self.error.is_none() {
            self.error = Some(Error::InvalidLaunch {
                kernel: self.kernel.name,
                reason,
            });
        }
    }

    /// Push a (pointer, length) pair after checking the memory belongs to this context.
    fn slice(&mut self, a: &ArgRef<'_>, device_addr: u64) -> bool {
        if !Arc::ptr_eq(a.gpu, self.gpu) {
            if self.error.is_none() {
                self.error = Some(Error::WrongContext {
                    kernel: self.kernel.name,
                });
            }
            return false;
        }
        self.put(&device_addr.to_ne_bytes());
        self.put(&(a.len as u64).to_ne_bytes());
        true
    }

    /// Pass device memory for a `&[T]` argument without placement.
    pub fn device<T: DeviceCopy>(&mut self, b: &'l impl DeviceArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Shared);
        self.trace(&a, "device", "in place, no copy");
        self.slice(&a, a.addr);
    }

    /// Pass device memory for a `&mut [T]` argument without placement.
    pub fn device_mut<T: DeviceCopy>(&mut self, b: &'l mut impl DeviceArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Exclusive);
        self.trace(&a, "device", "in place, no copy");
        self.slice(&a, a.addr);
    }

    /// Pass mapped host memory for a `#[mapped] &[T]` argument.
    pub fn mapped<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Shared);
        self.trace(&a, "mapped", "read in place over the link, no copy");
        self.slice(&a, a.addr);
    }

    /// Pass mapped host memory for a `#[mapped] &mut [T]` argument.
    pub fn mapped_mut<T: DeviceCopy>(&mut self, b: &'l mut impl MappedArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Exclusive);
        self.trace(
            &a,
            "mapped",
            "read and written in place over the link, no copy",
        );
        self.slice(&a, a.addr);
    }

    /// The access hint of the launch's `#[auto]` arguments.
    pub fn touch(&mut self, t: crate::placement::Touch) {
        self.touch = Some(t);
    }

    /// Pass an `#[auto] &[T]` argument: read in place (mapped), copied in whole, or — for a
    /// [`Touch::Range`](crate::placement::Touch::Range) hint — only the range copied in,
    /// whichever the cost model predicts is fastest for this launch's hint. A close call
    /// between random reads in place and a copy ([`worth_probing`](crate::placement::worth_probing))
    /// is settled by the random-read rate of this allocation, measured at its first such
    /// launch and cached ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads));
    /// that launch waits for the work already queued on its stream, once. The kernel's view makes only the hinted range available, whatever the choice.
    pub fn auto<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        use crate::placement::{Choice, Touch};
        let a = b.__arg();
        self.track(&a, Access::Shared);
        if let Mode::Record(_) = self.mode {
            // Refused by `track` (mapped memory is never held by a graph); the cost model
            // would measure on a stream here.
            return;
        }
        let gpu = crate::Gpu {
            inner: self.gpu.clone(),
        };
        let touch = self.touch.unwrap_or(Touch::All);
        let size = std::mem::size_of::<T>();
        let window = touch.window(a.len);
        let d = gpu.decide_for(&a, size, touch, self.stream);
        tracing::debug!(
            kernel = self.kernel.name,
            arg = self.arg_name(),
            choice = ?d.choice,
            mapped_s = d.mapped_s,
            copy_s = d.copy_whole_s,
            copy_range_s = ?d.copy_range_s,
            measured_random_per_s = ?d.measured_random_per_s,
            available = ?window,
            "auto placement"
        );
        // Element `window.start` of the argument, wherever the choice puts it.
        let offset = (window.start * size) as u64;
        match d.choice {
            Choice::CopyWhole => {
                // The memory is pinned (mapped buffers and registered memory are), so the
                // copy in is the same as a `#[pinned_async]` input's.
                let whole = ArgRef { addr: a.host, ..a };
                let what = "copied in whole before the kernel (chosen by the cost model)";
                self.auto_copy(whole, a.len, offset, what);
            }
            Choice::CopyRange => {
                let range = ArgRef {
                    addr: a.host + offset,
                    host: a.host + offset,
                    bytes: window.len() * size,
                    ..a
                };
                let what =
                    "only the hinted range copied in before the kernel (chosen by the cost model)";
                self.auto_copy(range, a.len, 0, what);
            }
            Choice::Direct => {
                self.trace(&a, "auto", "read directly: coherent system, no copy");
                self.slice(&a, a.addr + offset);
            }
            Choice::Mapped => {
                self.trace(
                    &a,
                    "auto",
                    "read in place over the link (chosen by the cost model)",
                );
                self.slice(&a, a.addr + offset);
            }
        }
        self.put(&(window.start as u64).to_ne_bytes());
        self.put(&(window.end as u64).to_ne_bytes());
    }

    /// Pass signal cells (`#[mapped] s: &Signals`): shared with the host while the kernel runs.
    pub fn signals(&mut self, s: &'l crate::signal::SignalBuffer) {
        let a = s.arg();
        // Shared: the kernel writes the cells only atomically, and the host reads them only
        // atomically, while the launch runs.
        self.track(&a, Access::Shared);
        self.trace(
            &a,
            "mapped",
            "signal cells shared with the host while the kernel runs",
        );
        self.slice(&a, a.addr);
    }

    /// Pass a mailbox (`#[mapped] m: &Mailbox<T>`): shared with the host while the kernel runs.
    pub fn mailbox<T: DeviceCopy>(&mut self, m: &'l crate::signal::MailboxBuffer<T>) {
        let a = m.arg();
        self.track(&a, Access::Shared);
        self.trace(
            &a,
            "mapped",
            "mailbox shared with the host while the kernel runs",
        );
        self.slice(&a, a.addr);
    }

    /// Pass pinned host memory for a `#[pinned_async] &[T]` argument: copied host→device into
    /// a pooled staging buffer before the kernel.
    pub fn pinned_in<T: DeviceCopy>(&mut self, b: &'l impl PinnedArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Shared);
        self.pinned(a, false);
    }

    /// Pass pinned host memory for a `#[pinned_async] &mut [T]` argument: copied host→device
    /// before the kernel and device→host after it.
    pub fn pinned_inout<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Exclusive);
        self.pinned(a, true);
    }

    /// Pass pinned host memory for a `#[pinned_async(out)] &mut [T]` argument: copied
    /// device→host after the kernel only. The staging the kernel writes is zeroed first, so
    /// elements the kernel does not write come back as zero bytes (`0`, `false`), whatever
    /// earlier launches left in the pooled staging: never an invalid value of `T`.
    pub fn pinned_out<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        let a = b.__arg();
        self.track(&a, Access::Exclusive);
        self.pinned_with(a, false, true);
    }

    fn pinned(&mut self, a: ArgRef<'l>, back: bool) {
        self.pinned_with(a, true, back);
    }

    /// An `#[auto]` argument copied in before the kernel: the host bytes `src` (the whole
    /// argument, or the hinted range) go to pooled staging; the kernel gets the argument's
    /// full length `len` and the staged address plus `offset` (element `lo` of its window).
    fn auto_copy(&mut self, src: ArgRef<'_>, len: usize, offset: u64, what: &'static str) {
        let Some(device) = self.stage(src.bytes) else {
            return;
        };
        self.trace(&src, "auto", what);
        if self.slice(&ArgRef { len, ..src }, device + offset) && src.bytes > 0 {
            self.h2d.push(Copy {
                host: src.addr,
                device,
                bytes: src.bytes,
            });
        }
    }

    /// A pooled device staging buffer of at least `bytes` (0 for none), or `None` after
    /// recording the failure.
    fn stage(&mut self, bytes: usize) -> Option<u64> {
        if bytes == 0 {
            return Some(0);
        }
        match self.mode {
            Mode::Record(_) => {
                self.invalid("staged arguments cannot be recorded into a graph".into());
                return None;
            }
            Mode::Scope(scope) => {
                if let Some(lease) = scope.reuse_staging(bytes) {
                    self.leases.push(lease);
                    return Some(lease.1);
                }
            }
            Mode::Wait => {}
        }
        match crate::pool::take_staging(self.gpu, bytes) {
            Ok((class, p)) => {
                self.leases.push((class, p));
                Some(p)
            }
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    fn pinned_with(&mut self, a: ArgRef<'_>, copy_in: bool, back: bool) {
        let gpu = crate::Gpu {
            inner: self.gpu.clone(),
        };
        if let Mode::Record(_) = self.mode {
            self.invalid("staged arguments cannot be recorded into a graph".into());
            return;
        }
        if gpu.coherent() {
            // The GPU reads and writes host memory through the host's page tables: no
            // staging, no copies; the kernel gets the host address.
            self.trace(
                &a,
                "pinned_async",
                "read and written in place: coherent system, no copy",
            );
            if self.slice(&a, a.addr) && !copy_in {
                // Not ordered on the stream like the rest of the launch: earlier work on the
                // memory, even on this stream, must be over.
                a.uses.before_host_write();
                // Elements the kernel does not write come back zeroed, as with staging.
                // SAFETY: `a` is host memory of `a.bytes` bytes that this launch borrows
                // exclusively (an output), and no GPU work uses it (tracked above).
                unsafe { std::ptr::write_bytes(a.addr as *mut u8, 0, a.bytes) };
            }
            return;
        }
        let Some(device) = self.stage(a.bytes) else {
            return;
        };
        let direction = match (copy_in, back) {
            (true, true) => "copied in before and out after the kernel",
            (true, false) => "copied in before the kernel",
            _ => "copied out after the kernel",
        };
        self.trace(&a, "pinned_async", direction);
        if !self.slice(&a, device) || a.bytes == 0 {
            return;
        }
        let c = Copy {
            host: a.addr,
            device,
            bytes: a.bytes,
        };
        if back {
            self.d2h.push(Copy { ..c });
        }
        if copy_in {
            self.h2d.push(c);
        } else {
            self.zero.push((device, a.bytes));
        }
    }

    fn trace(&self, a: &ArgRef<'_>, placement: &'static str, what: &'static str) {
        tracing::debug!(
            kernel = self.kernel.name,
            arg = self.arg_name(),
            placement,
            bytes = a.bytes,
            memory = %a.flags.map_or_else(|| "device".to_owned(), |f| f.to_string()),
            stream = ?self.stream,
            "{what}"
        );
    }

    /// Enqueue the copies in, the kernel and the copies out.
    pub fn submit(mut self) -> Result<Pending<'l>> {
        if let Mode::Record(rec) = self.mode {
            self.complete()?;
            let params = std::mem::replace(&mut self.params, ParamBlock::new(&[]));
            rec.push(crate::graph::Node {
                kernel: self.kernel,
                func: self.func,
                grid: self.grid,
                params,
            });
            return Ok(Pending {
                gpu: self.gpu.clone(),
                stream: self.stream,
                kernel: self.kernel.name,
                done: true,
                scoped: false,
                leases: Vec::new(),
                completion: None,
                _borrows: PhantomData,
            });
        }
        self.enqueue()?;
        self.gpu.fault.launched(self.stream, self.kernel);
        let completion = match self.mode {
            // The scope waits for its stream at its end: no event per launch.
            Mode::Scope(_) => Completion::in_scope(self.gpu, self.stream),
            _ => Completion::record(self.gpu, &[self.stream])?,
        };
        for (uses, access) in &self.uses {
            uses.add(&completion, *access);
        }
        let mut leases = std::mem::take(&mut self.leases);
        let scoped = if let Mode::Scope(scope) = self.mode {
            // The scope waits for the launch: its staging is reusable by later launches of
            // the scope (stream order puts them after this one's copies).
            scope.queued(&completion, leases.drain(..));
            true
        } else {
            false
        };
        Ok(Pending {
            gpu: self.gpu.clone(),
            stream: self.stream,
            kernel: self.kernel.name,
            done: false,
            scoped,
            leases,
            completion: Some(completion),
            _borrows: PhantomData,
        })
    }

    /// Every parameter was passed and every argument accepted.
    fn complete(&mut self) -> Result<()> {
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
        Ok(())
    }

    fn enqueue(&mut self) -> Result<()> {
        self.complete()?;
        let k = self.kernel.name;
        let ops = self.gpu.ops();
        for &(device, bytes) in &self.zero {
            // SAFETY: a staging lease of this launch of at least `bytes`, held until its guard
            // completes.
            unsafe { ops.zero(self.gpu, self.stream, device, bytes, k) }?;
        }
        for c in &self.h2d {
            // SAFETY: `c.host` is pinned memory of `c.bytes` bytes borrowed by this launch
            // until its guard completes; `c.device` a staging buffer of at least that size.
            unsafe { ops.copy_h2d(self.gpu, self.stream, c.device, c.host, c.bytes, k) }?;
        }
        let mut ptrs = self.params.pointers();
        let (g, t) = (self.grid.blocks, self.grid.threads);
        tracing::debug!(
            kernel = k,
            blocks = ?(g.x, g.y, g.z),
            threads = ?(t.x, t.y, t.z),
            shared_bytes = self.grid.shared_bytes,
            copies_in = self.h2d.len(),
            copies_out = self.d2h.len(),
            stream = ?self.stream,
            "launch"
        );
        // SAFETY: `func` is an entry of this context whose parameter list was checked against
        // `kernel.params` when its module loaded; `ptrs` has one pointer per parameter, each
        // to a value of the checked size that outlives the call (the driver copies them).
        // Memory passed in stays borrowed by the returned guard until completion.
        unsafe {
            launch_raw(
                self.gpu,
                self.kernel,
                self.func,
                &self.grid,
                self.stream,
                &mut ptrs,
            )
        }?;
        for c in &self.d2h {
            // SAFETY: as for the copies in; the host memory is borrowed mutably by the launch.
            unsafe { ops.copy_d2h(self.gpu, self.stream, c.host, c.device, c.bytes, k) }?;
        }
        Ok(())
    }
}

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        if self.leases.is_empty() {
            return;
        }
        if let Mode::Scope(scope) = self.mode {
            // Copies of this launch may be queued, reading or writing memory whose borrow
            // ends now: wait for them (keeping any failure for the scope to report). Later
            // launches of the scope may then reuse the staging.
            crate::stream::drain(self.gpu, self.stream);
            scope.give_back(self.leases.drain(..));
            return;
        }
        // Not submitted, or failed part-way: some copies may be queued. Give the staging
        // buffers back only once the stream is past them.
        if crate::stream::sync(self.gpu, self.stream, Some(self.kernel.name)).is_ok() {
            for (class, p) in self.leases.drain(..) {
                self.gpu.staging.put(class, (), p);
            }
        }
    }
}

/// A launch in flight. It keeps every buffer of the launch borrowed until the stream has
/// finished it (copies back included); [`Pending::wait`] returns the outcome. Dropping it
/// without waiting also waits (a failure is then reported by the next synchronise of the
/// stream).
///
/// A launch queued in a [`Scope`](crate::Scope) is the exception: dropping its guard leaves it
/// queued (the scope waits for it at its end and reports its outcome), and so does
/// [`Pending::detach`]. A launch recorded into a [`Graph`](crate::Graph) has not run: its
/// guard holds nothing and `wait` returns at once.
#[must_use = "a launch is asynchronous: call .wait() to get its outcome (in a scope, .detach() leaves it queued)"]
pub struct Pending<'l> {
    gpu: Arc<Inner>,
    stream: sys::CUstream,
    kernel: &'static str,
    done: bool,
    /// Queued in a scope: the scope waits for it and reports its outcome.
    scoped: bool,
    leases: Vec<(usize, u64)>,
    /// Where the streams will be once the launch is done; noted on every buffer it uses.
    /// `None` for a launch recorded into a graph.
    completion: Option<Arc<Completion>>,
    _borrows: PhantomData<&'l mut ()>,
}

impl Pending<'_> {
    /// The guard of a copy just queued on `stream` that uses `uses`.
    pub(crate) fn copy(
        gpu: &Arc<Inner>,
        stream: sys::CUstream,
        what: &'static str,
        uses: &[(&Uses, Access)],
    ) -> Result<Self> {
        let completion = Completion::record(gpu, &[stream])?;
        for (u, access) in uses {
            u.add(&completion, *access);
        }
        Ok(Pending::queued(gpu, stream, what, completion, false))
    }

    /// The guard of work just queued on `stream` that ends at `completion`.
    pub(crate) fn queued(
        gpu: &Arc<Inner>,
        stream: sys::CUstream,
        what: &'static str,
        completion: Arc<Completion>,
        scoped: bool,
    ) -> Self {
        Pending {
            stream,
            kernel: what,
            done: false,
            scoped,
            leases: Vec::new(),
            completion: Some(completion),
            gpu: gpu.clone(),
            _borrows: PhantomData,
        }
    }

    /// Wait for the launch (and earlier work on its stream) to finish. In a scope, a failure
    /// this returns is not reported again by the scope.
    pub fn wait(mut self) -> Result<()> {
        if self.completion.is_none() {
            return Ok(());
        }
        self.done = true;
        let r = crate::stream::sync(&self.gpu, self.stream, Some(self.kernel));
        self.release();
        r
    }

    /// Leave the work queued without waiting. In a [`Scope`](crate::Scope), the scope waits
    /// for it at its end and reports its outcome; the buffers' borrows end now, and host
    /// access to them waits for the work first. Elsewhere the same as dropping the guard,
    /// which waits.
    pub fn detach(self) {}

    /// The kernel launched.
    pub fn kernel(&self) -> &'static str {
        self.kernel
    }

    /// Return staging buffers to the pool; only after the stream passed them, and never into
    /// a lost context (whose memory is gone).
    fn release(&mut self) {
        // The stream was synchronised (or stopped for good on a fault): the work is over.
        if let Some(c) = &self.completion {
            c.finished();
        }
        if self.gpu.fault.is_lost() {
            self.leases.clear();
            return;
        }
        for (class, p) in self.leases.drain(..) {
            self.gpu.staging.put(class, (), p);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.done || self.scoped {
            return;
        }
        if let Err(e) = crate::stream::sync(&self.gpu, self.stream, Some(self.kernel)) {
            // Nobody asked for the outcome: keep the failure for the next synchronise of the
            // stream (a GPU fault also loses the context, which every later call reports).
            tracing::warn!(error = %e, "a dropped launch guard found its stream failed");
            self.gpu.keep_failure(self.stream, e);
        }
        self.release();
    }
}
