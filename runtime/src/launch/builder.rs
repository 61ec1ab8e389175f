//! The typed launch that generated launchers drive: arguments in (through the argument sink),
//! staging and copies around the kernel chosen by each argument's placement, the kernel, and
//! the guard out — or, on a graph's recorder, the launch kept for the graph.
//!
//! Passing arguments only records what the launch will do (it may take pooled staging, which
//! goes back when a launch that never queued anything drops, and it may wait for earlier work
//! on the memory); nothing is queued and no memory of the caller's is written until
//! [`Launch::submit`] has checked everything: the grid against the device's limits (in
//! [`Launch::new`]), every argument and the `same_len` groups. A refused launch leaves every
//! buffer as it was.

use crate::args::{ArgRef, DeviceArg, MappedArg, PinnedArg, RowSource};
use crate::backend::{FunctionId, GraphNode, StreamId};
use crate::context::Inner;
use crate::error::Result;
use crate::launch::grid::Grid;
use crate::launch::kernel::Kernel;
use crate::launch::params::ParamBlock;
use crate::launch::pending::Pending;
use crate::launch::sink::ArgSink;
use crate::placement::auto::decide_for;
use crate::placement::model::{Choice, Touch};
use crate::placement::probe::coherent;
use crate::queue::{Mode, Queue, QueueRef};
use crate::signal::{InboxBuffer, OutboxBuffer, SignalBuffer};
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::sync::Arc;

/// A host↔device copy a launch makes around its kernel.
struct Copy {
    host: u64,
    device: u64,
    bytes: usize,
}

/// Host memory the kernel writes in place (an output on a coherent system), zeroed on the
/// host once the launch is committed.
struct HostZero<'l> {
    uses: &'l Uses,
    addr: u64,
    bytes: usize,
}

/// The elements `range` of memory `a` (of `T`: device or mapped), clamped to its length.
fn sub_range<T>(mut a: ArgRef<'_>, range: std::ops::Range<usize>) -> ArgRef<'_> {
    let size = std::mem::size_of::<T>();
    let start = range.start.min(a.len);
    a.len = range.end.clamp(start, a.len) - start;
    a.bytes = a.len * size;
    a.addr += (start * size) as u64;
    if a.host != 0 {
        a.host += (start * size) as u64;
    }
    a
}

/// One launch being assembled by a generated launcher.
pub struct Launch<'l> {
    args: ArgSink<'l>,
    stream: StreamId,
    grid: Grid,
    func: FunctionId,
    /// Staging buffers taken from the pool: (size class, device address).
    leases: Vec<(usize, u64)>,
    h2d: Vec<Copy>,
    d2h: Vec<Copy>,
    /// Output staging zeroed before the kernel: (device address, bytes).
    zero: Vec<(u64, usize)>,
    /// Outputs written in place, zeroed on the host before the kernel.
    host_zero: Vec<HostZero<'l>>,
    /// Something of the launch may be on its stream (its staging may be in use there).
    queued: bool,
    /// The access hint for `#[auto]` arguments.
    touch: Option<Touch>,
}

impl<'l> Launch<'l> {
    /// Start a launch of `kernel` on `queue`, its grid checked against the device's limits.
    pub fn new(queue: &'l impl Queue, kernel: &'static Kernel, grid: Grid) -> Result<Self> {
        let QueueRef(gpu, stream, mode) = queue.__queue();
        grid.validate(kernel)?;
        gpu.bind()?;
        gpu.check_limits(kernel, &grid)?;
        let func = gpu.ops().function(kernel, grid.entry_of(kernel))?;
        gpu.ops().check_function(kernel, func, &grid)?;
        Ok(Launch {
            args: ArgSink::new(gpu, kernel, mode, Some(stream)),
            stream,
            grid,
            func,
            leases: Vec::new(),
            h2d: Vec::new(),
            d2h: Vec::new(),
            zero: Vec::new(),
            host_zero: Vec::new(),
            queued: false,
            touch: None,
        })
    }

    fn gpu(&self) -> &'l Arc<Inner> {
        self.args.gpu
    }

    /// Pass a scalar by value.
    pub fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        self.args.scalar(v);
    }

    /// Pass device memory for a `&[T]` argument without placement.
    pub fn device<T: DeviceCopy>(&mut self, b: &'l impl DeviceArg<T>) {
        self.in_place(b.__arg(), Access::Shared, "device", "in place, no copy");
    }

    /// Pass device memory for a `&mut [T]` argument without placement.
    pub fn device_mut<T: DeviceCopy>(&mut self, b: &'l mut impl DeviceArg<T>) {
        self.in_place(b.__arg(), Access::Exclusive, "device", "in place, no copy");
    }

    /// Pass mapped host memory for a `#[mapped] &[T]` argument.
    pub fn mapped<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        let what = "read in place over the link, no copy";
        self.in_place(b.__arg(), Access::Shared, "mapped", what);
    }

    /// Pass the first `n` elements of device memory (all of them if it has fewer) for a
    /// `&[T]` argument: the kernel sees a slice of that length, and the launch uses the whole
    /// buffer.
    pub(crate) fn device_prefix<T: DeviceCopy>(&mut self, b: &'l impl DeviceArg<T>, n: usize) {
        self.device_range(b, 0..n);
    }

    /// Pass the elements `range` of device memory (clamped to its length) for a `&[T]`
    /// argument: the kernel sees a slice of those elements, and the launch uses the whole
    /// buffer, as [`Launch::device_prefix`] does.
    pub(crate) fn device_range<T: DeviceCopy>(
        &mut self,
        b: &'l impl DeviceArg<T>,
        range: std::ops::Range<usize>,
    ) {
        self.in_place(
            sub_range::<T>(b.__arg(), range),
            Access::Shared,
            "device",
            "in place, no copy",
        );
    }

    /// [`Launch::device_range`] for a `&mut [T]` argument.
    pub(crate) fn device_range_mut<T: DeviceCopy>(
        &mut self,
        b: &'l mut impl DeviceArg<T>,
        range: std::ops::Range<usize>,
    ) {
        let a = sub_range::<T>(b.__arg(), range);
        self.in_place(a, Access::Exclusive, "device", "in place, no copy");
    }

    /// Pass the first `n` elements of mapped host memory (all of them if it has fewer) for a
    /// `#[mapped] &[T]` argument, as [`Launch::device_prefix`] does for device memory.
    pub(crate) fn mapped_prefix<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>, n: usize) {
        self.mapped_range(b, 0..n);
    }

    /// Pass the elements `range` of mapped host memory (clamped to its length) for a
    /// `#[mapped] &[T]` argument, as [`Launch::device_range`] does for device memory.
    pub(crate) fn mapped_range<T: DeviceCopy>(
        &mut self,
        b: &'l impl MappedArg<T>,
        range: std::ops::Range<usize>,
    ) {
        let what = "read in place over the link, no copy";
        self.in_place(
            sub_range::<T>(b.__arg(), range),
            Access::Shared,
            "mapped",
            what,
        );
    }

    /// Pass mapped host memory for a `#[mapped] &mut [T]` argument.
    pub fn mapped_mut<T: DeviceCopy>(&mut self, b: &'l mut impl MappedArg<T>) {
        let what = "read and written in place over the link, no copy";
        self.in_place(b.__arg(), Access::Exclusive, "mapped", what);
    }

    /// Pass signal cells (`#[mapped] s: &Signals`): shared with the host while the kernel runs.
    pub fn signals(&mut self, s: &'l SignalBuffer) {
        // Shared: the kernel writes the cells only atomically, and the host reads them only
        // atomically, while the launch runs.
        let what = "signal cells shared with the host while the kernel runs";
        self.in_place(s.arg(), Access::Shared, "mapped", what);
    }

    /// Pass an inbox (`#[mapped] inbox: &Inbox<T>`): the host sends into it while the kernel
    /// runs.
    ///
    /// The launch takes the kernel's side of the mailbox exclusively (the host's side stays
    /// shared): a launch on another stream that takes it too runs after this one on the GPU,
    /// never beside it, and one launch cannot take it twice. A side has one receiver.
    pub fn inbox<T: DeviceCopy>(&mut self, m: &'l InboxBuffer<T>) {
        let what = "inbox the host sends into while the kernel runs";
        self.in_place(m.arg(), Access::Exclusive, "mapped", what);
    }

    /// Pass an outbox (`#[mapped] outbox: &Outbox<T>`): the host receives from it while the
    /// kernel runs. Taken exclusively by the launch, as [`Launch::inbox`] says.
    pub fn outbox<T: DeviceCopy>(&mut self, m: &'l OutboxBuffer<T>) {
        let what = "outbox the host receives from while the kernel runs";
        self.in_place(m.arg(), Access::Exclusive, "mapped", what);
    }

    /// Memory the kernel reaches where it is: device memory, or mapped host memory.
    fn in_place(
        &mut self,
        a: ArgRef<'l>,
        access: Access,
        placement: &'static str,
        what: &'static str,
    ) {
        self.args.track(&a, access);
        self.trace(&a, placement, what);
        self.args.slice(&a, a.addr);
    }

    /// The access hint of the launch's `#[auto]` arguments.
    pub fn touch(&mut self, t: Touch) {
        self.touch = Some(t);
    }

    /// Pass an `#[auto] &[T]` argument: read in place (mapped), copied in whole, or — for a
    /// [`Touch::Range`] hint — only the range copied in, whichever the cost model predicts is
    /// fastest for this launch's hint. A close call between random reads in place and a copy
    /// ([`worth_probing`](crate::placement::worth_probing)) is settled by the random-read rate
    /// of this allocation, measured at its first such launch and cached
    /// ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)); that launch waits for
    /// the work already queued on its stream, once. The kernel's view makes only the hinted
    /// range available, whatever the choice.
    pub fn auto<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        let a = b.__arg();
        self.args.track(&a, Access::Shared);
        if let Mode::Record(_) = self.args.mode {
            // Refused by `track` (mapped memory is never held by a graph); the cost model
            // would measure on a stream here.
            return;
        }
        let touch = self.touch.unwrap_or(Touch::All);
        let size = std::mem::size_of::<T>();
        let window = touch.window(a.len);
        let d = decide_for(self.gpu(), &a, size, touch, self.stream);
        tracing::debug!(
            kernel = self.args.kernel.name,
            arg = self.args.arg_name(),
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
                self.args.slice(&a, a.addr + offset);
            }
            Choice::Mapped => {
                self.trace(
                    &a,
                    "auto",
                    "read in place over the link (chosen by the cost model)",
                );
                self.args.slice(&a, a.addr + offset);
            }
        }
        self.args.window(window);
    }

    /// Pass a table for an `#[auto] &Rows<T>` argument: a [`HotTier`](crate::HotTier)'s table
    /// read in place, and, where the tier has slots, its slot table and device rows, through
    /// which the kernel reads the rows resident there; or an
    /// [`InPlaceRows`](crate::InPlaceRows)' table alone. The launch takes all three shared: a
    /// refresh or a gather queued after it, which writes the slot table and the rows, runs
    /// after the kernel on the GPU, whatever guard is leaked.
    pub fn rows<T: DeviceCopy>(&mut self, src: &'l impl RowSource<T>) {
        let r = src.__rows();
        self.args.track(&r.table, Access::Shared);
        if let Some((tier, slots, _)) = &r.tier {
            self.args.track(tier, Access::Shared);
            self.args.track(slots, Access::Shared);
        }
        if let Mode::Record(_) = self.args.mode {
            // Refused by `track`: a graph holds no mapped memory.
            return;
        }
        let what = if r.tier.is_some() {
            "rows read through the hot tier's slot table: resident ones from device memory, the others in place"
        } else {
            "rows read in place over the link (no tier, or one that holds no row)"
        };
        tracing::debug!(
            kernel = self.args.kernel.name,
            arg = self.args.arg_name(),
            width = r.width,
            resident = r.resident,
            capacity = r.tier.as_ref().map_or(0, |t| t.2),
            "{what}"
        );
        if !self.args.slice(&r.table, r.table.addr) {
            return;
        }
        match r.tier {
            Some((tier, slots, capacity)) => {
                self.args.tier(slots.addr, tier.addr, capacity, r.width)
            }
            None => self.args.tier(0, 0, 0, r.width),
        }
    }

    /// Pass pinned host memory for a `#[pinned_async] &[T]` argument: copied host→device into
    /// a pooled staging buffer before the kernel.
    pub fn pinned_in<T: DeviceCopy>(&mut self, b: &'l impl PinnedArg<T>) {
        let a = b.__arg();
        self.args.track(&a, Access::Shared);
        self.pinned(a, true, false);
    }

    /// Pass pinned host memory for a `#[pinned_async] &mut [T]` argument: copied host→device
    /// before the kernel and device→host after it.
    pub fn pinned_inout<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        let a = b.__arg();
        self.args.track(&a, Access::Exclusive);
        self.pinned(a, true, true);
    }

    /// Pass pinned host memory for a `#[pinned_async(out)] &mut [T]` argument: copied
    /// device→host after the kernel only. The staging the kernel writes is zeroed first, so
    /// elements the kernel does not write come back as zero bytes (`0`, `false`), whatever
    /// earlier launches left in the pooled staging: never an invalid value of `T`. On a
    /// coherent system the kernel writes the host memory in place, zeroed first the same way
    /// once the launch is accepted; a refused launch leaves it untouched.
    pub fn pinned_out<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        let a = b.__arg();
        self.args.track(&a, Access::Exclusive);
        self.pinned(a, false, true);
    }

    /// An `#[auto]` argument copied in before the kernel: the host bytes `src` (the whole
    /// argument, or the hinted range) go to pooled staging; the kernel gets the argument's
    /// full length `len` and the staged address plus `offset` (element `lo` of its window).
    fn auto_copy(&mut self, src: ArgRef<'_>, len: usize, offset: u64, what: &'static str) {
        let Some(device) = self.stage(src.bytes) else {
            return;
        };
        self.trace(&src, "auto", what);
        if self.args.slice(&ArgRef { len, ..src }, device + offset) && src.bytes > 0 {
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
        match self.args.mode {
            Mode::Record(_) => {
                self.args
                    .invalid("staged arguments cannot be recorded into a graph".into());
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
        match self.gpu().take_staging(bytes) {
            Ok((class, p)) => {
                self.leases.push((class, p));
                Some(p)
            }
            Err(e) => {
                self.args.error(e);
                None
            }
        }
    }

    fn pinned(&mut self, a: ArgRef<'l>, copy_in: bool, back: bool) {
        if let Mode::Record(_) = self.args.mode {
            self.args
                .invalid("staged arguments cannot be recorded into a graph".into());
            return;
        }
        if coherent(self.gpu()) {
            // The GPU reads and writes host memory through the host's page tables: no
            // staging, no copies; the kernel gets the host address.
            self.trace(
                &a,
                "pinned_async",
                "read and written in place: coherent system, no copy",
            );
            if self.args.slice(&a, a.addr) && !copy_in && a.bytes > 0 {
                // Elements the kernel does not write come back zeroed, as with staging: done
                // by `enqueue`, once the launch is accepted.
                self.host_zero.push(HostZero {
                    uses: a.uses,
                    addr: a.addr,
                    bytes: a.bytes,
                });
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
        if !self.args.slice(&a, device) || a.bytes == 0 {
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
            kernel = self.args.kernel.name,
            arg = self.args.arg_name(),
            placement,
            bytes = a.bytes,
            memory = %a.flags.map_or_else(|| "device".to_owned(), |f| f.to_string()),
            stream = ?self.stream,
            "{what}"
        );
    }

    /// Check the arguments (each one, and the `same_len` groups), then enqueue the copies in,
    /// the kernel and the copies out. A launch refused here has queued nothing and written no
    /// memory of the caller's.
    pub fn submit(mut self) -> Result<Pending<'l>> {
        let gpu = self.gpu();
        let kernel = self.args.kernel;
        self.args.complete()?;
        if let Mode::Record(rec) = self.args.mode {
            let params = std::mem::replace(&mut self.args.params, ParamBlock::new(&[]));
            rec.push(GraphNode {
                kernel,
                func: self.func,
                grid: self.grid,
                params,
            });
            return Ok(Pending {
                gpu: gpu.clone(),
                stream: self.stream,
                kernel: kernel.name,
                done: true,
                scoped: false,
                leases: Vec::new(),
                completion: None,
                own_point: false,
                _borrows: PhantomData,
            });
        }
        self.enqueue()?;
        gpu.ops().fault().launched(self.stream, kernel);
        let mut leases = std::mem::take(&mut self.leases);
        let (completion, scoped) = match self.args.mode {
            // The scope waits for its stream at its end: no event per launch, and one
            // completion for all its launches until something waits. Its staging is reusable
            // by later launches of the scope (stream order puts them after this one's copies).
            Mode::Scope(scope) => (scope.joined(gpu, self.stream, leases.drain(..)), true),
            _ => (Completion::record(gpu, &[self.stream])?, false),
        };
        self.args.used_until(&completion);
        Ok(Pending {
            gpu: gpu.clone(),
            stream: self.stream,
            kernel: kernel.name,
            done: false,
            scoped,
            leases,
            completion: Some(completion),
            own_point: false,
            _borrows: PhantomData,
        })
    }

    /// Queue the checked launch: the first of its side effects.
    fn enqueue(&mut self) -> Result<()> {
        let (gpu, kernel) = (self.gpu(), self.args.kernel);
        // Outputs zeroed on the host are not ordered on the stream like the rest of the
        // launch: earlier work on them, even on this stream, must be over (a wait, so before
        // the call section).
        for z in &self.host_zero {
            z.uses.before_host_write();
        }
        // The function and the addresses are the context's as it is now: no reset may come
        // between the check and the calls.
        let _section = gpu.ops().fault().enter()?;
        let k = kernel.name;
        let _range = crate::nvtx::launch(k);
        let ops = gpu.ops();
        for z in &self.host_zero {
            // SAFETY: host memory of `z.bytes` bytes that this launch borrows exclusively (an
            // output) for `'l`, and no GPU work uses it (waited for above; a launch that takes
            // it later waits for this one).
            unsafe { std::ptr::write_bytes(z.addr as *mut u8, 0, z.bytes) };
        }
        self.queued = true;
        for &(device, bytes) in &self.zero {
            // SAFETY: a staging lease of this launch of at least `bytes`, held until its guard
            // completes.
            unsafe { ops.zero(self.stream, device, bytes, k) }?;
        }
        for c in &self.h2d {
            // SAFETY: `c.host` is pinned memory of `c.bytes` bytes borrowed by this launch
            // until its guard completes; `c.device` a staging buffer of at least that size.
            unsafe { gpu.copy_h2d(self.stream, c.device, c.host, c.bytes, k) }?;
        }
        let mut ptrs = self.args.params.pointers();
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
        // SAFETY: `func` is this context's function of `kernel`, whose parameter list was
        // checked against `kernel.params` when its module loaded; `ptrs` has one pointer per
        // parameter, each to a value of the checked size that outlives the call (the backend
        // copies them). Memory passed in stays borrowed by the returned guard until completion.
        unsafe { ops.launch(kernel, self.func, &self.grid, self.stream, &mut ptrs) }?;
        for c in &self.d2h {
            // SAFETY: as for the copies in; the host memory is borrowed mutably by the launch.
            unsafe { gpu.copy_d2h(self.stream, c.host, c.device, c.bytes, k) }?;
        }
        Ok(())
    }
}

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        if self.leases.is_empty() {
            return;
        }
        let gpu = self.gpu();
        if !self.queued {
            // Refused before anything was queued: the staging is as this launch found it,
            // with no wait. In a scope some of it may be an earlier launch's, still in use on
            // the stream: back to the scope, which hands it to the pool after its wait.
            if let Mode::Scope(scope) = self.args.mode {
                scope.give_back(self.leases.drain(..));
            } else if !gpu.is_lost() {
                for (class, p) in self.leases.drain(..) {
                    gpu.staging.put(class, (), p);
                }
            }
            return;
        }
        if let Mode::Scope(scope) = self.args.mode {
            // Copies of this launch may be queued, reading or writing memory whose borrow
            // ends now: wait for them (keeping any failure for the scope to report). Later
            // launches of the scope may then reuse the staging.
            gpu.drain(self.stream);
            scope.give_back(self.leases.drain(..));
            return;
        }
        // Not submitted, or failed part-way: some copies may be queued. Give the staging
        // buffers back only once the stream is past them.
        if gpu.sync(self.stream, Some(self.args.kernel.name)).is_ok() {
            for (class, p) in self.leases.drain(..) {
                gpu.staging.put(class, (), p);
            }
        }
    }
}
