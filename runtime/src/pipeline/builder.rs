//! The pipelined launch that generated `<kernel>_pipelined` launchers drive: arguments in
//! (through the argument sink shared with plain launches), the `#[pinned_async]` ones kept as
//! bulk data to cut into chunks, then the plan and the run.

use crate::args::{ArgRef, DeviceArg, MappedArg, PinnedArg};
use crate::backend::FunctionId;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::launch::grid::Grid;
use crate::launch::kernel::{Kernel, Part};
use crate::launch::sink::ArgSink;
use crate::pipeline::link::link_profile;
use crate::pipeline::plan::{PipelineOptions, plan};
use crate::pipeline::run::{Bulk, PipelineRun, Start, start};
use crate::queue::Mode;
use crate::signal::SignalBuffer;
use crate::track::Access;
use berth_device::DeviceCopy;

/// A pipelined launch being assembled by a generated `<kernel>_pipelined` launcher.
pub struct Pipelined<'l> {
    gpu: &'l Gpu,
    args: ArgSink<'l>,
    func: FunctionId,
    opts: PipelineOptions,
    bulk: Vec<Bulk>,
}

impl<'l> Pipelined<'l> {
    /// Start a pipelined launch of `kernel`.
    pub fn new(gpu: &'l Gpu, kernel: &'static Kernel, mut opts: PipelineOptions) -> Result<Self> {
        // A kernel that declares a 1D block shape runs chunks in blocks of it by default.
        if let Some([x, 1, 1]) = kernel.block
            && opts.threads_per_block == Grid::DEFAULT_BLOCK
        {
            opts.threads_per_block = x;
        }
        // Every chunk runs over a one-dimensional grid of such blocks (`Grid::cover_with_block`).
        let chunk = Grid::new(1, opts.threads_per_block);
        chunk.validate(kernel)?;
        gpu.inner.bind()?;
        let func = gpu.inner.ops().function(kernel, chunk.entry_of(kernel))?;
        Ok(Pipelined {
            gpu,
            // Its chunks go to several streams: conflicting earlier work is waited for.
            args: ArgSink::new(&gpu.inner, kernel, Mode::Wait, None),
            func,
            opts,
            bulk: Vec::new(),
        })
    }

    /// A scalar, passed to every chunk.
    pub fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        self.args.scalar(v);
    }

    fn whole(&mut self, a: ArgRef<'l>, access: Access) {
        self.args.track(&a, access);
        self.args.slice(&a, a.addr);
    }

    /// Device memory, passed whole to every chunk.
    pub fn device<T: DeviceCopy>(&mut self, b: &'l impl DeviceArg<T>) {
        self.whole(b.__arg(), Access::Shared);
    }
    /// Device memory, passed whole to every chunk (written by the kernel).
    pub fn device_mut<T: DeviceCopy>(&mut self, b: &'l mut impl DeviceArg<T>) {
        self.whole(b.__arg(), Access::Exclusive);
    }
    /// Mapped memory, passed whole to every chunk.
    pub fn mapped<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        self.whole(b.__arg(), Access::Shared);
    }
    /// Mapped memory, passed whole to every chunk (written by the kernel).
    pub fn mapped_mut<T: DeviceCopy>(&mut self, b: &'l mut impl MappedArg<T>) {
        self.whole(b.__arg(), Access::Exclusive);
    }

    /// An `#[auto]` argument, read in place by every chunk (all of it available).
    pub fn auto<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        let a = b.__arg();
        let len = a.len;
        self.whole(a, Access::Shared);
        self.args.window(0..len);
    }

    /// Signal cells, passed whole to every chunk.
    pub fn signals(&mut self, s: &'l SignalBuffer) {
        self.whole(s.arg(), Access::Shared);
    }

    fn bulk(&mut self, a: ArgRef<'l>, elem: usize, copy_in: bool, copy_out: bool) {
        let access = if copy_out {
            Access::Exclusive
        } else {
            Access::Shared
        };
        self.args.track(&a, access);
        // The argument's parameter slots, as the kernel ABI lowers a slice.
        let at = |part| {
            let i = berth_abi::Lowering::PtrLen.position(part);
            self.args.slot() + i.expect("a slice passes a pointer and a length")
        };
        let (ptr, len) = (at(Part::Ptr), at(Part::Len));
        let name = self.args.arg_name();
        // Filled per chunk with the staging address and the chunk's length.
        if self.args.slice(&a, 0) {
            self.bulk.push(Bulk {
                ptr,
                len_slot: len,
                name,
                host: a.addr,
                elem,
                len: a.len,
                copy_in,
                copy_out,
            });
        }
    }

    /// A `#[pinned_async] &[T]` bulk input: chunk k copied in before the kernel on chunk k.
    pub fn bulk_in<T: DeviceCopy>(&mut self, b: &'l impl PinnedArg<T>) {
        self.bulk(b.__arg(), std::mem::size_of::<T>(), true, false);
    }
    /// A `#[pinned_async] &mut [T]` bulk in/out argument.
    pub fn bulk_inout<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        self.bulk(b.__arg(), std::mem::size_of::<T>(), true, true);
    }
    /// A `#[pinned_async(out)] &mut [T]` bulk output.
    pub fn bulk_out<T: DeviceCopy>(&mut self, b: &'l mut impl PinnedArg<T>) {
        self.bulk(b.__arg(), std::mem::size_of::<T>(), false, true);
    }

    /// Check the arguments, plan the chunks, check the chunks' grids against the device's
    /// limits, and enqueue every chunk. A launch refused by a check has queued nothing and
    /// written no memory of the caller's.
    pub fn submit(mut self) -> Result<PipelineRun<'l>> {
        self.args.complete()?;
        let k = self.args.kernel.name;
        let Some(first) = self.bulk.first() else {
            return Err(Error::Usage(format!(
                "`{k}` has no #[pinned_async] argument to pipeline"
            )));
        };
        let n = first.len;
        if let Some(b) = self.bulk.iter().find(|b| b.len != n) {
            return Err(Error::LengthMismatch {
                what: format!(
                    "elementwise kernel `{k}`: bulk argument `{}` vs `{}` (all #[pinned_async] arguments share one length)",
                    b.name, first.name
                ),
                expected: n,
                got: b.len,
            });
        }
        let link = link_profile(self.gpu)?;
        let elems: Vec<usize> = self.bulk.iter().map(|b| b.elem).collect();
        let plan = plan(&self.opts, &link, n, &elems)?;
        // Every chunk's grid is at most the first's: checked once, before anything is queued.
        let widest = Grid::cover_with_block(plan.chunk.min(n), self.opts.threads_per_block);
        self.gpu
            .inner
            .check_launch(self.args.kernel, self.func, &widest)?;
        start(Start {
            args: self.args,
            func: self.func,
            opts: self.opts,
            bulk: self.bulk,
            n,
            plan,
            link,
        })
    }
}
