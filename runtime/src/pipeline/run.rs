//! A pipelined run: the chunks of a plan queued over a ring of streams and staging buffers
//! (copy in, kernel, copy out, progress flag), and the guard that keeps every buffer borrowed
//! until all of them are done ([`PipelineRun`]).
//!
//! Each chunk, once copied back, sets a flag in mapped host memory from its stream (a 4-byte
//! copy behind its outputs' copy): progress is read without a driver call, and after a fault
//! the host knows exactly which chunks reached their outputs.

use crate::backend::{FunctionId, StreamId};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::host_mem::MappedBuffer;
use crate::launch::grid::Grid;
use crate::launch::kernel::Entry;
use crate::launch::sink::ArgSink;
use crate::own_kernels::CHUNK_DONE;
use crate::pipeline::plan::{LinkProfile, PipelineOptions, PipelineStats, Plan};
use crate::placement::probe::coherent;
use crate::track::Completion;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// How a chunk's progress flag is written on the GPU, after its copy out on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlagWriter {
    /// A 4-byte copy of a device word holding 1 into the flag: the copy engine that wrote
    /// the chunk's outputs writes its flag next, so a flag set means the outputs are in host
    /// memory, and copies queued before a fault keep data and flag together (the default,
    /// where there is a link: without copy engines, the stream memory operation is the
    /// same thing).
    Copy,
    /// The [`CHUNK_DONE`] kernel (`BERTH_PIPELINE_FLAGS=kernel`): cheap, but no kernel runs
    /// after a fault while queued copies may, so a chunk can be written and not flagged.
    Kernel,
    /// A stream memory operation, `cuStreamWriteValue32` on the GPU
    /// (`BERTH_PIPELINE_FLAGS=memop`): its memory barrier cost 6–25%.
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

/// One `#[pinned_async]` argument of a pipelined launch, cut into chunks.
pub(crate) struct Bulk {
    /// Its pointer's parameter slot.
    pub(crate) ptr: usize,
    /// Its length's parameter slot.
    pub(crate) len_slot: usize,
    pub(crate) name: &'static str,
    pub(crate) host: u64,
    pub(crate) elem: usize,
    pub(crate) len: usize,
    pub(crate) copy_in: bool,
    pub(crate) copy_out: bool,
}

/// What a pipelined launch has ready to queue.
pub(crate) struct Start<'l> {
    pub(crate) args: ArgSink<'l>,
    pub(crate) func: FunctionId,
    pub(crate) opts: PipelineOptions,
    pub(crate) bulk: Vec<Bulk>,
    pub(crate) n: usize,
    pub(crate) plan: Plan,
    pub(crate) link: LinkProfile,
}

/// Queue every chunk of `s`.
pub(crate) fn start(s: Start<'_>) -> Result<PipelineRun<'_>> {
    let Start {
        mut args,
        func,
        opts,
        bulk,
        n,
        plan,
        link,
    } = s;
    let Plan {
        chunk,
        chunks,
        streams,
        per_elem,
    } = plan;
    let (gpu, kernel) = (args.gpu, args.kernel);
    let k = kernel.name;
    let _range = crate::nvtx::pipeline(k, chunks, streams);
    let ops = gpu.ops();
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
        flags: opts.progress,
        completion: None,
        _borrows: PhantomData,
    };
    for _ in 0..streams {
        run.streams.push(gpu.take_stream()?);
    }
    // On a coherent system the kernel reads and writes the host arrays in place: no
    // staging and no copies, each chunk's launch gets its part of the host memory.
    let direct = coherent(gpu);
    // staging[s][b]: the device buffer of bulk argument b for stream s.
    let mut staging = vec![Vec::with_capacity(bulk.len()); streams];
    for set in staging.iter_mut() {
        for b in &bulk {
            if direct {
                set.push(0);
                continue;
            }
            let (class, p) = gpu.take_staging(chunk * b.elem)?;
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
    let mut use_flags = opts.progress;
    let writer = flag_writer();
    let by_kernel = use_flags && writer == FlagWriter::Kernel;
    let done_fn = if by_kernel {
        Some(ops.function(&CHUNK_DONE, Entry::General)?)
    } else {
        None
    };
    // Copied flags: one device word holding 1 per stream, set on that stream first. Without
    // a link there are no copy engines, and a stream memory operation publishes the flag.
    let by_copy = use_flags && writer == FlagWriter::Copy && ops.has_link();
    let ones = if by_copy {
        let (class, p) = gpu.take_staging(4 * streams)?;
        run.leases.push((class, p));
        for (s, &stream) in run.streams.iter().enumerate() {
            // SAFETY: word s of a staging lease of at least 4 × streams bytes, owned by the
            // run until its streams are synchronised; queued on stream s before any of its
            // chunks.
            unsafe { ops.fill_u32(stream, p + 4 * s as u64, 1, 1, k) }?;
        }
        p
    } else {
        0
    };
    if direct {
        // Everything that may fail before the chunks is done: the outputs are written only
        // now, by a run that goes ahead.
        for b in bulk.iter().filter(|b| !b.copy_in) {
            // Elements the kernel does not write come back zeroed, as with staging.
            // SAFETY: `b.host` is host memory of `b.len` elements that the run borrows
            // exclusively (an output), and no GPU work uses it (tracked when passed).
            unsafe { std::ptr::write_bytes(b.host as *mut u8, 0, b.len * b.elem) };
        }
    }
    // The chunks are the parts of one launch: each has its own piece of the bulk arguments,
    // and every chunk reaches the rest of the memory, as the blocks of one launch do.
    let own: Vec<(usize, usize)> = bulk.iter().map(|b| (b.ptr, b.elem)).collect();
    let group = ops.launch_group(kernel, chunks, &own);
    // Chunks queued so far: a failure to queue the next is reported below.
    let mut queued = 0;
    let mut queue = || -> Result<()> {
        for c in 0..chunks {
            let _chunk = crate::nvtx::chunk(k, c, chunks);
            let s = c % streams;
            let stream = run.streams[s];
            let range = c * chunk..((c + 1) * chunk).min(n);
            let len = range.len();
            for (b, &dev) in bulk.iter().zip(&staging[s]) {
                if direct {
                    let host = b.host + (range.start * b.elem) as u64;
                    args.params.set(b.ptr, &host.to_ne_bytes());
                    args.params.set(b.len_slot, &(len as u64).to_ne_bytes());
                    continue;
                }
                if !b.copy_in {
                    // Elements the kernel does not write come back zeroed (see
                    // `Launch::pinned_out`).
                    // SAFETY: `dev` is a staging buffer of at least `chunk` elements, reused on
                    // this stream only (stream order).
                    unsafe { ops.zero(stream, dev, len * b.elem, k) }?;
                }
                if b.copy_in {
                    let host = b.host + (range.start * b.elem) as u64;
                    // SAFETY: `b.host` is pinned memory of `b.len` elements borrowed by the run;
                    // `dev` a staging buffer of at least `chunk` elements, reused on this stream
                    // only after the stream passed its previous chunk.
                    unsafe { gpu.copy_h2d(stream, dev, host, len * b.elem, k) }?;
                }
                args.params.set(b.ptr, &dev.to_ne_bytes());
                args.params.set(b.len_slot, &(len as u64).to_ne_bytes());
            }
            let grid = Grid::cover_with_block(len, opts.threads_per_block);
            let mut ptrs = args.params.pointers();
            // SAFETY: `func` is this kernel's function (checked against its parameters at load);
            // every bulk slot now holds a staging buffer of this stream (or, on a coherent
            // system, the chunk's part of the host memory) and the chunk length, the other slots
            // the caller's memory, borrowed by the run. `group` is this kernel's, of `chunks`
            // parts, with the bulk slots as each part's own; chunk `c` is queued once.
            unsafe { ops.launch_part(&group, c, kernel, func, &grid, stream, &mut ptrs) }?;
            for (b, &dev) in bulk.iter().zip(&staging[s]) {
                if b.copy_out && !direct {
                    let host = b.host + (range.start * b.elem) as u64;
                    // SAFETY: as for the copy in, with the host memory borrowed mutably.
                    unsafe { gpu.copy_d2h(stream, host, dev, len * b.elem, k) }?;
                }
            }
            let flag_host = run.progress.host_ptr().wrapping_add(c) as u64;
            let flag_device = run.progress.device_ptr() + 4 * c as u64;
            if let Some(done_fn) = done_fn {
                let mut flag = flag_device;
                let mut ptrs = [(&raw mut flag).cast::<std::ffi::c_void>()];
                // SAFETY: CHUNK_DONE's one parameter is a u64 (checked at load), and it is the
                // address of the c-th u32 of the run's mapped progress buffer, alive until the
                // run's streams are synchronised.
                unsafe { ops.launch(&CHUNK_DONE, done_fn, &Grid::new(1, 1), stream, &mut ptrs) }?;
            } else if by_copy {
                // SAFETY: 4 bytes from this stream's word of 1 (set on this stream above) into
                // the c-th u32 of the run's mapped progress buffer, alive until the run's streams
                // are synchronised.
                unsafe { ops.copy_d2h(stream, flag_host, ones + 4 * s as u64, 4, k) }?;
            } else if use_flags {
                // SAFETY: the c-th u32 of the run's mapped progress buffer, alive until the run's
                // streams are synchronised (the run waits for them) and read by the host only
                // atomically.
                if !unsafe { ops.write_flag(stream, flag_host, flag_device) } {
                    tracing::debug!("stream memory operations unavailable: no per-chunk progress");
                    use_flags = false;
                    run.flags = false;
                }
            }
            queued = c + 1;
        }
        Ok(())
    };
    let queue_result = queue();
    if queued > 0 {
        ops.fault().launched(run.streams[0], kernel);
    }
    if let Err(e) = queue_result {
        // A chunk queued before faulted and took the context with it, so queueing the next
        // was refused: report the run's failure as its wait would (the kernel's own error,
        // located to a chunk where flags are set), not the refusal. Dropping the run (its
        // error path) waits for the queued chunks as well.
        if queued > 0 && e.is_context_lost() {
            return Err(run.wait().err().unwrap_or(e));
        }
        return Err(e);
    }
    let completion = match Completion::record(gpu, &run.streams) {
        Ok(c) => c,
        Err(e) if e.is_context_lost() => return Err(run.wait().err().unwrap_or(e)),
        Err(e) => return Err(e),
    };
    args.used_until(&completion);
    run.completion = Some(completion);
    Ok(run)
}

/// A pipelined launch in flight: it keeps every buffer borrowed until all chunks are done.
#[must_use = "a pipelined launch is asynchronous: call .wait() to get its outcome"]
pub struct PipelineRun<'l> {
    gpu: Arc<Inner>,
    kernel: &'static str,
    streams: Vec<StreamId>,
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
        self.streams.iter().all(|&s| self.gpu.idle(s))
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
        let p = self.progress.host_ptr().wrapping_add(c);
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
        // The fault itself, where a stream reports it; the other streams then report the
        // context lost to it.
        let mut failure: Option<Error> = None;
        for &s in &self.streams {
            if let Err(e) = self.gpu.sync(s, Some(self.kernel)) {
                match &failure {
                    Some(Error::ContextLost(_)) if !matches!(e, Error::ContextLost(_)) => {
                        failure = Some(e)
                    }
                    Some(_) => {}
                    None => failure = Some(e),
                }
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
        if self.gpu.is_lost() {
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
            for &s in &self.streams {
                let _ = self.gpu.sync(s, Some(self.kernel));
            }
            self.release();
        }
    }
}
