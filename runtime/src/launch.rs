//! The typed launch that generated launchers drive: arguments in, staging and copies around
//! the kernel, the guard out. The launch's shape ([`grid`]), the kernel descriptors
//! ([`kernel`]), the parameter block ([`params`]) and the guard ([`pending`]) are modules of
//! their own.

mod grid;
mod kernel;
mod params;
mod pending;

pub use grid::{Dim3, Grid};
pub use kernel::{Kernel, KernelRegistration, Param, ParamKind, Placement, registered_kernels};
pub(crate) use params::ParamBlock;
pub use pending::Pending;

use crate::args::{ArgRef, DeviceArg, MappedArg, PinnedArg};
use crate::error::{Error, Result};
use crate::gpu::Inner;
use crate::stream::{Mode, Queue};
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use cudarc::driver::{result, sys};
use std::marker::PhantomData;
use std::sync::Arc;

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
        // Refused now, as the driver would refuse it.
        crate::limits::check_simulated(gpu, k, grid)?;
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

/// Let `func` use the dynamic shared memory `grid` asks for (above 48 KiB of shared memory
/// in all, static and dynamic, it must opt in).
pub(crate) fn prepare(k: &'static Kernel, func: sys::CUfunction, grid: &Grid) -> Result<()> {
    let kernel = k.name;
    if crate::limits::needs_opt_in(k, grid) {
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
