//! Pipelined launches of elementwise kernels: bulk `#[pinned_async]` data cut into chunks
//! over several streams, so that the copy in of chunk k+1, the kernel on chunk k and the copy
//! out of chunk k−1 run at once, through a bounded ring of device staging buffers.
//!
//! Chunk size and stream count come from the link measured once per context
//! ([`Gpu::link_profile`]) and the device's copy engines, unless the caller sets them
//! ([`PipelineOptions`]). The device footprint is `streams × chunk × (bytes per element of
//! the bulk arguments)`, bounded by [`PipelineOptions::device_budget`], so host data larger
//! than the GPU's memory streams through.
//!
//! Each chunk, once copied back, sets a flag in mapped host memory from its stream (a 4-byte
//! copy behind its outputs' copy): progress is read without a driver call, and after a fault
//! the host knows exactly which chunks reached their outputs.

use crate::args::{ArgRef, DeviceArg, MappedArg, PinnedArg};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, Inner};
use crate::host_mem::MappedBuffer;
use crate::launch::{Grid, Kernel, ParamBlock, launch_raw};
use crate::own_kernels::CHUNK_DONE;
use crate::stream::StreamHandle;
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use cudarc::driver::sys;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// How a chunk's progress flag is written on the GPU, after its copy out on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlagWriter {
    /// A 4-byte copy of a device word holding 1 into the flag: the copy engine that wrote
    /// the chunk's outputs writes its flag next, so a flag set means the outputs are in host
    /// memory, and copies queued before a fault keep data and flag together (the default).
    Copy,
    /// The [`CHUNK_DONE`] kernel (`BERTH_PIPELINE_FLAGS=kernel`): cheap, but no kernel runs
    /// after a fault while queued copies may, so a chunk can be written and not flagged.
    Kernel,
    /// `cuStreamWriteValue32` (`BERTH_PIPELINE_FLAGS=memop`): its memory barrier cost 6–25%.
    MemOp,
}

/// The flag writer, from `BERTH_PIPELINE_FLAGS` (`copy`, `kernel`, `memop`; a switch kept for
/// measuring them), read once per process.
fn flag_writer() -> FlagWriter {
    static WRITER: std::sync::OnceLock<FlagWriter> = std::sync::OnceLock::new();
    *WRITER.get_or_init(|| match std::env::var("BERTH_PIPELINE_FLAGS").as_deref() {
        Ok("kernel") => FlagWriter::Kernel,
        Ok("memop") => FlagWriter::MemOp,
        _ => FlagWriter::Copy,
    })
}

/// How to pipeline; `None` fields are chosen from the measured link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Bytes of the widest bulk argument per chunk.
    pub chunk_bytes: Option<usize>,
    /// Streams (and staging sets) in the ring.
    pub streams: Option<usize>,
    /// Most device memory the staging ring may take.
    pub device_budget: Option<usize>,
    /// Threads per block of each chunk's launch.
    pub threads_per_block: u32,
    /// Per-chunk completion flags in mapped memory: progress ([`PipelineRun::chunks_done`])
    /// and, after a failure, which chunk failed and which completed
    /// ([`Error::PipelineChunk`]). One 4-byte copy per chunk, behind its outputs' copy
    /// (docs/design-notes.md has its cost on the H200). Without
    /// flags, `chunks_done()` stays 0 and a failure comes back as the kernel's own error.
    pub progress: bool,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            chunk_bytes: None,
            streams: None,
            device_budget: None,
            threads_per_block: Grid::DEFAULT_BLOCK,
            progress: true,
        }
    }
}

/// The host↔device link, measured once per context.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkProfile {
    /// Host→device rate of large pinned copies, GB/s.
    pub h2d_gbps: f64,
    /// Device→host rate of large pinned copies, GB/s.
    pub d2h_gbps: f64,
    /// The smallest copy that reaches 90% of the large-copy rate both ways, bytes.
    pub efficient_copy_bytes: usize,
    /// Asynchronous copy engines of the device.
    pub copy_engines: u32,
}

/// What a pipelined run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineStats {
    /// Chunks.
    pub chunks: usize,
    /// Elements per chunk (the last may have fewer).
    pub chunk_elems: usize,
    /// Streams used.
    pub streams: usize,
    /// Device memory of the staging ring (the run's whole device footprint for bulk data).
    pub staging_bytes: usize,
}

const PROFILE_SIZES: [usize; 6] = [256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20];

impl Gpu {
    /// The host↔device link of this GPU, measured on first use (a few milliseconds of pinned
    /// copies) and cached for the context's life.
    pub fn link_profile(&self) -> Result<LinkProfile> {
        if let Some(p) = self.inner.link.get() {
            return Ok(*p);
        }
        let p = measure_link(self)?;
        tracing::info!(?p, "link measured");
        Ok(*self.inner.link.get_or_init(|| p))
    }
}

fn measure_link(gpu: &Gpu) -> Result<LinkProfile> {
    if gpu.inner.sim {
        // The simulator's "link" is memcpy; only the plan's shape matters there.
        return Ok(LinkProfile {
            h2d_gbps: 10.0,
            d2h_gbps: 10.0,
            efficient_copy_bytes: 1 << 20,
            copy_engines: 2,
        });
    }
    let max = *PROFILE_SIZES.last().expect("sizes");
    let host = gpu.pinned_zeroed::<u8>(max)?;
    let mut back = gpu.pinned_zeroed::<u8>(max)?;
    let dev = gpu.alloc_zeroed::<u8>(max)?;
    let stream = gpu.inner.default_stream.0;
    let timing = crate::stream::Timing::new()?;
    let mut time = |h2d: bool, bytes: usize| -> Result<f64> {
        let mut t = Vec::new();
        for _ in 0..4 {
            t.push(timing.time(&gpu.inner, stream, || {
                // SAFETY: stream and buffers of at least `bytes` belong to this context; every
                // copy is waited for (by `time`) before the buffers are touched again.
                unsafe {
                    if h2d {
                        gpu.inner.ops().copy_h2d(
                            &gpu.inner,
                            stream,
                            dev.ptr,
                            host.as_ptr() as u64,
                            bytes,
                            "link profile",
                        )
                    } else {
                        gpu.inner.ops().copy_d2h(
                            &gpu.inner,
                            stream,
                            back.as_mut_ptr() as u64,
                            dev.ptr,
                            bytes,
                            "link profile",
                        )
                    }
                }
            })?);
        }
        t.sort_by(f64::total_cmp);
        Ok(bytes as f64 / (t[1] * 1e-3) / 1e9)
    };
    let mut rates = Vec::new();
    for &b in &PROFILE_SIZES {
        rates.push((b, time(true, b)?, time(false, b)?));
    }
    let &(_, h2d, d2h) = rates.last().expect("sizes");
    let efficient = rates
        .iter()
        .find(|(_, h, d)| *h >= 0.9 * h2d && *d >= 0.9 * d2h)
        .map_or(max, |r| r.0);
    let engines = gpu.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?;
    Ok(LinkProfile {
        h2d_gbps: h2d,
        d2h_gbps: d2h,
        efficient_copy_bytes: efficient,
        copy_engines: engines.max(0) as u32,
    })
}

/// The automatic plan: streams from the copy engines, chunk from the link and the data size.
pub fn auto_plan(link: &LinkProfile, widest_total_bytes: usize) -> (usize, usize) {
    // One stream copying in, one computing, one copying out needs three; with a single copy
    // engine the two directions serialise anyway.
    let streams = if link.copy_engines >= 2 { 3 } else { 2 };
    // Big enough to run copies at full rate (4× the efficient size), small enough that
    // filling and draining the pipeline (about two chunks' transfer) stays a small part of
    // the whole (≥ 32 chunks), and at most 64 MiB.
    let lo = 4 * link.efficient_copy_bytes;
    let chunk = (widest_total_bytes / 32).clamp(lo.min(64 << 20), 64 << 20);
    (streams, chunk)
}

struct Bulk {
    slot: usize,
    name: &'static str,
    host: u64,
    elem: usize,
    len: usize,
    copy_in: bool,
    copy_out: bool,
}

/// A pipelined launch being assembled by a generated `<kernel>_pipelined` launcher.
pub struct Pipelined<'l> {
    gpu: &'l Arc<Inner>,
    gpu_handle: &'l Gpu,
    kernel: &'static Kernel,
    func: sys::CUfunction,
    opts: PipelineOptions,
    params: ParamBlock,
    next: usize,
    bulk: Vec<Bulk>,
    error: Option<Error>,
    /// The memory of every argument and how it is borrowed, to note the run's use on.
    uses: Vec<(&'l Uses, Access)>,
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
        Grid::new(1, opts.threads_per_block).validate(kernel)?;
        gpu.inner.bind()?;
        let func = gpu.inner.function(kernel)?;
        Ok(Pipelined {
            gpu: &gpu.inner,
            gpu_handle: gpu,
            kernel,
            func,
            opts,
            params: ParamBlock::new(kernel.params),
            next: 0,
            bulk: Vec::new(),
            error: None,
            uses: Vec::new(),
        })
    }

    fn put(&mut self, bytes: &[u8]) {
        match self.kernel.params.get(self.next) {
            Some(p) if p.size == bytes.len() => {
                self.params.set(self.next, bytes);
                self.next += 1;
            }
            _ => {
                self.error.get_or_insert(Error::Module {
                    kernel: self.kernel.name,
                    reason:
                        "launcher and kernel disagree on the parameters; rebuild the kernel crate"
                            .into(),
                });
            }
        }
    }

    /// A scalar, passed to every chunk.
    pub fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        #[allow(clippy::let_unit_value)]
        let () = T::__BERTH_NO_PADDING;
        // SAFETY: `T: DeviceCopy` is plain data without padding (see `Launch::scalar`).
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        self.put(bytes);
    }

    /// Note that the run uses `a`'s memory with `access`, after any conflicting work whose
    /// guard was leaked (see [`crate::track`]).
    fn track(&mut self, a: &ArgRef<'l>, access: Access) {
        a.uses.before_gpu(access, None);
        self.uses.push((a.uses, access));
    }

    fn whole(&mut self, a: ArgRef<'l>, access: Access) {
        self.track(&a, access);
        if !Arc::ptr_eq(a.gpu, self.gpu) {
            self.error.get_or_insert(Error::WrongContext {
                kernel: self.kernel.name,
            });
            return;
        }
        self.put(&a.addr.to_ne_bytes());
        self.put(&(a.len as u64).to_ne_bytes());
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

    fn bulk(&mut self, a: ArgRef<'l>, elem: usize, copy_in: bool, copy_out: bool) {
        let access = if copy_out {
            Access::Exclusive
        } else {
            Access::Shared
        };
        self.track(&a, access);
        if !Arc::ptr_eq(a.gpu, self.gpu) {
            self.error.get_or_insert(Error::WrongContext {
                kernel: self.kernel.name,
            });
            return;
        }
        let name = self.kernel.params.get(self.next).map_or("?", |p| p.name);
        self.bulk.push(Bulk {
            slot: self.next,
            name,
            host: a.addr,
            elem,
            len: a.len,
            copy_in,
            copy_out,
        });
        // Filled per chunk with the staging address and the chunk's length.
        self.put(&0u64.to_ne_bytes());
        self.put(&0u64.to_ne_bytes());
    }

    /// An `#[auto]` argument, read in place by every chunk (all of it available).
    pub fn auto<T: DeviceCopy>(&mut self, b: &'l impl MappedArg<T>) {
        let a = b.__arg();
        let len = a.len as u64;
        self.whole(a, Access::Shared);
        self.put(&0u64.to_ne_bytes());
        self.put(&len.to_ne_bytes());
    }

    /// Signal cells, passed whole to every chunk.
    pub fn signals(&mut self, s: &'l crate::signal::SignalBuffer) {
        self.whole(s.arg(), Access::Shared);
    }
    /// A mailbox, passed whole to every chunk.
    pub fn mailbox<T: DeviceCopy>(&mut self, m: &'l crate::signal::MailboxBuffer<T>) {
        self.whole(m.arg(), Access::Shared);
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

    /// Plan the chunks and enqueue every one of them.
    pub fn submit(mut self) -> Result<PipelineRun<'l>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let k = self.kernel.name;
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
        let per_elem: usize = self.bulk.iter().map(|b| b.elem).sum();
        let widest = self.bulk.iter().map(|b| b.elem).max().unwrap_or(1);
        let link = self.gpu_handle.link_profile()?;
        let (auto_streams, auto_chunk) = auto_plan(&link, n * widest);
        let streams = self.opts.streams.unwrap_or(auto_streams).max(1);
        let chunk_bytes = self.opts.chunk_bytes.unwrap_or(auto_chunk).max(widest);
        // Whole blocks of 1024 elements keep every chunk's start aligned for wide accesses.
        let mut chunk = (chunk_bytes / widest)
            .max(1)
            .next_multiple_of(1024)
            .min(n.max(1));
        if let Some(budget) = self.opts.device_budget {
            let fit = budget / (streams * per_elem);
            if fit == 0 {
                return Err(Error::Usage(format!(
                    "a device budget of {budget} bytes cannot hold one element per stream ({streams} streams × {per_elem} bytes)"
                )));
            }
            chunk = chunk.min(fit);
            // Staging comes in size classes (up to 25% larger): shrink until the ring fits.
            let ring = |c: usize| -> usize {
                streams
                    * self
                        .bulk
                        .iter()
                        .map(|b| crate::pool::size_class(c * b.elem))
                        .sum::<usize>()
            };
            while chunk > 1 && ring(chunk) > budget {
                chunk -= (chunk / 8).max(1);
            }
        }
        let chunks = n.div_ceil(chunk);
        let streams = streams.min(chunks.max(1));
        self.enqueue(n, chunk, chunks, streams, per_elem, link)
    }

    fn enqueue(
        mut self,
        n: usize,
        chunk: usize,
        chunks: usize,
        streams: usize,
        per_elem: usize,
        link: LinkProfile,
    ) -> Result<PipelineRun<'l>> {
        let k = self.kernel.name;
        let gpu = self.gpu;
        let progress = MappedBuffer::<u32>::zeroed_in(gpu, chunks.max(1))?;
        let mut run = PipelineRun {
            gpu: gpu.clone(),
            kernel: k,
            streams: Vec::new(),
            leases: Vec::new(),
            progress,
            chunks,
            chunk,
            n,
            stats: PipelineStats {
                chunks,
                chunk_elems: chunk,
                streams,
                staging_bytes: 0,
            },
            link,
            done: false,
            flags: self.opts.progress,
            completion: None,
            _borrows: PhantomData,
        };
        for _ in 0..streams {
            run.streams.push(gpu.take_stream()?);
        }
        // On a coherent system the kernel reads and writes the host arrays in place: no
        // staging and no copies, each chunk's launch gets its part of the host memory.
        let direct = self.gpu_handle.coherent();
        if direct {
            for b in self.bulk.iter().filter(|b| !b.copy_in) {
                // Elements the kernel does not write come back zeroed, as with staging.
                // SAFETY: `b.host` is host memory of `b.len` elements that the run borrows
                // exclusively (an output), and no GPU work uses it (tracked when passed).
                unsafe { std::ptr::write_bytes(b.host as *mut u8, 0, b.len * b.elem) };
            }
        }
        // staging[s][b]: the device buffer of bulk argument b for stream s.
        let mut staging = vec![Vec::with_capacity(self.bulk.len()); streams];
        for set in staging.iter_mut() {
            for b in &self.bulk {
                if direct {
                    set.push(0);
                    continue;
                }
                let (class, p) = crate::pool::take_staging(gpu, chunk * b.elem)?;
                run.leases.push((class, p));
                run.stats.staging_bytes += class;
                set.push(p);
            }
        }
        tracing::debug!(
            kernel = k,
            elements = n,
            chunk,
            chunks,
            streams,
            staging_bytes = run.stats.staging_bytes,
            bytes_per_element = per_elem,
            direct,
            "pipelined launch"
        );
        let mut use_flags = self.opts.progress;
        let writer = flag_writer();
        let by_kernel = use_flags && writer == FlagWriter::Kernel;
        let done_fn = if by_kernel {
            gpu.function(&CHUNK_DONE)?
        } else {
            std::ptr::null_mut()
        };
        // Copied flags: one device word holding 1 per stream, set on that stream first.
        let by_copy = use_flags && writer == FlagWriter::Copy && !gpu.sim;
        let ones = if by_copy {
            let (class, p) = crate::pool::take_staging(gpu, 4 * streams)?;
            run.leases.push((class, p));
            for (s, stream) in run.streams.iter().enumerate() {
                // SAFETY: word s of a staging lease of at least 4 × streams bytes, owned by
                // the run until its streams are synchronised; queued on stream s before any
                // of its chunks.
                let r = unsafe { sys::cuMemsetD32Async(p + 4 * s as u64, 1, 1, stream.0) };
                gpu.check("cuMemsetD32Async", r.result(), Some(k))?;
            }
            p
        } else {
            0
        };
        for c in 0..chunks {
            let s = c % streams;
            let stream = run.streams[s].0;
            let range = c * chunk..((c + 1) * chunk).min(n);
            let len = range.len();
            for (b, &dev) in self.bulk.iter().zip(&staging[s]) {
                if direct {
                    let host = b.host + (range.start * b.elem) as u64;
                    self.params.set(b.slot, &host.to_ne_bytes());
                    self.params.set(b.slot + 1, &(len as u64).to_ne_bytes());
                    continue;
                }
                if !b.copy_in {
                    // Elements the kernel does not write come back zeroed (see
                    // `Launch::pinned_out`).
                    // SAFETY: `dev` is a staging buffer of at least `chunk` elements, reused
                    // on this stream only (stream order).
                    unsafe { gpu.ops().zero(gpu, stream, dev, len * b.elem, k) }?;
                }
                if b.copy_in {
                    // SAFETY: `b.host` is pinned memory of `b.len` elements borrowed by the
                    // run; `dev` a staging buffer of at least `chunk` elements, reused on this
                    // stream only after the stream passed its previous chunk.
                    unsafe {
                        gpu.ops().copy_h2d(
                            gpu,
                            stream,
                            dev,
                            b.host + (range.start * b.elem) as u64,
                            len * b.elem,
                            k,
                        )
                    }?;
                }
                self.params.set(b.slot, &dev.to_ne_bytes());
                self.params.set(b.slot + 1, &(len as u64).to_ne_bytes());
            }
            let grid = Grid::cover_with_block(len, self.opts.threads_per_block);
            let mut ptrs = self.params.pointers();
            // SAFETY: `func` is this kernel's entry (checked against its parameters at load);
            // every bulk slot now holds a staging buffer of this stream (or, on a coherent
            // system, the chunk's part of the host memory) and the chunk length, the other
            // slots the caller's memory, borrowed by the run.
            unsafe { launch_raw(gpu, self.kernel, self.func, &grid, stream, &mut ptrs) }?;
            for (b, &dev) in self.bulk.iter().zip(&staging[s]) {
                if b.copy_out && !direct {
                    // SAFETY: as for the copy in, with the host memory borrowed mutably.
                    unsafe {
                        gpu.ops().copy_d2h(
                            gpu,
                            stream,
                            b.host + (range.start * b.elem) as u64,
                            dev,
                            len * b.elem,
                            k,
                        )
                    }?;
                }
            }
            if by_kernel {
                let mut flag = run.progress.device_ptr() + 4 * c as u64;
                let mut ptrs = [(&raw mut flag).cast::<std::ffi::c_void>()];
                // SAFETY: CHUNK_DONE's one parameter is a u64 (checked at load), and it is the
                // address of the c-th u32 of the run's mapped progress buffer, alive until the
                // run's streams are synchronised.
                unsafe {
                    launch_raw(
                        gpu,
                        &CHUNK_DONE,
                        done_fn,
                        &Grid::new(1, 1),
                        stream,
                        &mut ptrs,
                    )
                }?;
            } else if by_copy {
                let flag = run.progress.as_ptr().wrapping_add(c) as u64;
                // SAFETY: 4 bytes from this stream's word of 1 (set on this stream above)
                // into the c-th u32 of the run's mapped progress buffer, alive until the run's
                // streams are synchronised.
                unsafe {
                    gpu.ops()
                        .copy_d2h(gpu, stream, flag, ones + 4 * s as u64, 4, k)
                }?;
            } else if use_flags && gpu.sim {
                let flag = run.progress.as_ptr().wrapping_add(c) as usize;
                let job = move || {
                    // SAFETY: the c-th flag of the run's progress buffer, alive until the
                    // run's streams are synchronised (the run waits for them).
                    unsafe { AtomicU32::from_ptr(flag as *mut u32) }.store(1, Ordering::Release);
                    Ok(())
                };
                gpu.sim_streams.enqueue(stream as usize, Box::new(job));
            } else if use_flags {
                // SAFETY: the flag is a u32 of the run's mapped progress buffer, alive until
                // the run's streams are synchronised.
                let r = unsafe {
                    sys::cuStreamWriteValue32_v2(
                        stream,
                        run.progress.device_ptr() + 4 * c as u64,
                        1,
                        0,
                    )
                }
                .result();
                if r.is_err() {
                    tracing::debug!("stream memory operations unavailable: no per-chunk progress");
                    use_flags = false;
                    run.flags = false;
                }
            }
        }
        gpu.fault.launched(run.streams[0].0, self.kernel);
        let streams: Vec<sys::CUstream> = run.streams.iter().map(|s| s.0).collect();
        let completion = Completion::record(gpu, &streams)?;
        for (uses, access) in &self.uses {
            uses.add(&completion, *access);
        }
        run.completion = Some(completion);
        Ok(run)
    }
}

/// A pipelined launch in flight: it keeps every buffer borrowed until all chunks are done.
#[must_use = "a pipelined launch is asynchronous: call .wait() to get its outcome"]
pub struct PipelineRun<'l> {
    gpu: Arc<Inner>,
    kernel: &'static str,
    streams: Vec<StreamHandle>,
    leases: Vec<(usize, u64)>,
    progress: MappedBuffer<u32>,
    chunks: usize,
    chunk: usize,
    n: usize,
    stats: PipelineStats,
    link: LinkProfile,
    done: bool,
    /// Whether every chunk sets its flag (else failures cannot be located to a chunk).
    flags: bool,
    /// Where the streams will be once the run is done; noted on every buffer it uses.
    completion: Option<Arc<Completion>>,
    _borrows: PhantomData<&'l mut ()>,
}

impl PipelineRun<'_> {
    /// Chunks in the run.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// Chunks whose outputs are back in host memory (read from mapped memory: no driver call).
    /// A failed chunk never counts, so a progress loop should also stop on
    /// [`PipelineRun::is_finished`].
    pub fn chunks_done(&self) -> usize {
        (0..self.chunks).filter(|&c| self.flag(c)).count()
    }

    /// Whether every stream of the run has stopped: all chunks done, or a failure that
    /// [`PipelineRun::wait`] will report. Never blocks.
    pub fn is_finished(&self) -> bool {
        self.streams
            .iter()
            .all(|s| crate::stream::idle(&self.gpu, s.0))
    }

    /// The plan.
    pub fn stats(&self) -> PipelineStats {
        self.stats
    }

    /// The link measurement the plan came from.
    pub fn link(&self) -> LinkProfile {
        self.link
    }

    fn flag(&self, c: usize) -> bool {
        let p = self.progress.as_ptr().wrapping_add(c).cast_mut();
        // SAFETY: `p` is the c-th u32 of the live progress buffer (c < chunks), written by the
        // run's streams (see `FlagWriter`); read atomically.
        unsafe { AtomicU32::from_ptr(p) }.load(Ordering::Acquire) == 1
    }

    fn chunk_range(&self, c: usize) -> Range<usize> {
        c * self.chunk..((c + 1) * self.chunk).min(self.n)
    }

    /// Wait for every chunk. A failure is reported once, with the first chunk that did not
    /// complete and every later chunk that did (its outputs were written back).
    pub fn wait(mut self) -> Result<PipelineStats> {
        self.done = true;
        let mut failure = None;
        for s in &self.streams {
            if let Err(e) = crate::stream::sync(&self.gpu, s.0, Some(self.kernel)) {
                failure.get_or_insert(e);
            }
        }
        let result = match failure {
            None => Ok(self.stats),
            // Without flags the failing chunk is unknown: the kernel's own report, unwrapped.
            Some(source) if !self.flags => Err(source),
            Some(source) => {
                let chunk = (0..self.chunks).find(|&c| !self.flag(c)).unwrap_or(0);
                let completed_after: Vec<usize> =
                    (chunk + 1..self.chunks).filter(|&c| self.flag(c)).collect();
                Err(Error::PipelineChunk {
                    kernel: self.kernel,
                    chunk,
                    elements: self.chunk_range(chunk),
                    completed_after,
                    source: Box::new(source),
                })
            }
        };
        self.release();
        result
    }

    fn release(&mut self) {
        // Every stream was synchronised (or stopped for good on a fault): the run is over.
        if let Some(c) = &self.completion {
            c.finished();
        }
        if self.gpu.fault.is_lost() {
            self.leases.clear();
            self.streams.clear();
            return;
        }
        for (class, p) in self.leases.drain(..) {
            self.gpu.staging.put(class, (), p);
        }
        for s in self.streams.drain(..) {
            self.gpu.put_stream(s);
        }
    }
}

impl Drop for PipelineRun<'_> {
    fn drop(&mut self) {
        if !self.done {
            for s in &self.streams {
                let _ = crate::stream::sync(&self.gpu, s.0, Some(self.kernel));
            }
            self.release();
        }
    }
}
