//! Host runtime of berth: the GPU context ([`Gpu`]), streams ([`Stream`]) and events
//! ([`Event`]), device memory ([`DeviceBuffer`]), the per-context module cache, and typed
//! launches that return a [`Pending`] guard, [`Scope`]s that queue dependent launches without
//! waiting and wait once, and [`Graph`]s that record launches once and replay them.
//!
//! No guard is needed for soundness: every allocation records the GPU work that may still use
//! it, and host reads, writes, frees and reuse wait for that work, so a guard leaked with
//! `mem::forget` costs a wait, never a data race.
//!
//! Layering, as in cudarc: cudarc's `sys`/`result` layers do the driver calls; this crate's
//! public types own every handle and hide cudarc; [`raw`] is the escape hatch for experts.
//! Inside, dependencies point one way: one backend interface with two implementations (the
//! CUDA driver and the CPU simulator) at the bottom, then the context and its pools, memory
//! kinds, streams and events, placement, launches, and pipelines on top; nothing above the
//! backend asks which backend it is (`docs/runtime-layers.md` has the map, and a test reads it
//! and keeps the modules to it: no file names a higher layer, none names another in a circle).
//!
//! Libraries built on cudarc (cuBLAS, cuRAND, NCCL) work on berth's memory without copies:
//! [`DeviceBuffer::with_cudarc`] lends a buffer as a cudarc view for a closure and records the
//! work queued on it, [`Stream::cudarc_stream`] and [`Gpu::cudarc_context`] are the same stream
//! and context seen by cudarc, and [`DeviceBuffer::from_cudarc`] adopts cudarc's memory.
//!
//! Several GPUs: a [`DeviceSet`] holds a context per device (or simulated devices, so the same
//! code runs in CI); a buffer of one device is read by another's kernels through a
//! [`PeerView`] (in place where the topology allows peer access, copied otherwise); a host
//! dataset [`Sharded`] across the set by measured link streams through every device at once
//! ([`DeviceSet::pipelined`]); and [`DeviceSet::all_reduce`], [`DeviceSet::broadcast`],
//! [`DeviceSet::all_gather`], [`DeviceSet::reduce`] and [`DeviceSet::reduce_scatter`] run NCCL
//! (the `nccl` feature) on berth buffers, each returning a [`Collective`] guard that waits as a
//! launch's does.
//!
//! Failure is always a typed [`Error`]: no driver or device, out of memory, a bad launch
//! configuration, and a kernel that panicked (named, with the panic's file, line and message,
//! read from mapped host memory the panic handler fills before it traps). A trap poisons the
//! CUDA context for good; [`Gpu::recover`] tears it down and makes a fresh one where the
//! driver allows it, and [`restart_process`] is the recovery where it does not.
#![deny(missing_docs)]

mod args;
mod backend;
mod buffer;
mod collective;
mod context;
mod copy;
mod devices;
mod error;
mod event;
mod fault;
mod gpu;
mod graph;
mod host_mem;
mod host_shared;
mod hot_tier;
mod interop;
mod launch;
#[cfg(test)]
mod layers;
mod limits;
mod managed;
mod numa;
pub mod nvtx;
mod own_kernels;
mod page_runs;
mod peer;
mod pipeline;
pub mod placement;
mod pool;
pub mod ptx;
mod queue;
pub mod raw;
mod resident;
mod restart;
mod scope;
mod signal;
mod stream;
mod tensor_map;
mod track;

pub use args::{DeviceArg, MappedArg, PinnedArg, RowSource};
pub use backend::Backend;
pub use buffer::DeviceBuffer;
pub use collective::{Collective, CollectiveType, ReduceOp};
pub use devices::DeviceSet;
pub use error::{Error, PanicReport, Result};
pub use event::Event;
pub use gpu::Gpu;
pub use graph::{Graph, Held, Recorder};
pub use host_mem::{
    HostAccess, HostFlags, MappedBuffer, PinnedBuffer, PinnedOptions, RegisterError, Registered,
};
pub use host_shared::{HostShared, SharedHost};
pub use hot_tier::{GatherReads, HotTier, HotTierStats, InPlaceRows, NotedIds, Refresh};
pub use launch::pending::Pending;
pub use launch::{Dim3, Grid};
pub use limits::DeviceLimits;
pub use managed::ManagedBuffer;
pub use peer::{PeerPath, PeerView};
pub use pipeline::{DeviceProgress, Sharded};
pub use pipeline::{LinkProfile, PipelineOptions, PipelineRun, PipelineStats, auto_plan};
pub use pool::PoolStats;
pub use queue::Queue;
pub use resident::{Cacheable, DeviceCache, Placed};
pub use restart::{RESTART_ENV, restart_process};
pub use scope::Scope;
pub use signal::{InboxBuffer, OutboxBuffer, SignalBuffer};
pub use stream::Stream;

#[doc(hidden)]
pub mod __private {
    pub use crate::launch::builder::Launch;
    pub use crate::launch::{
        CrateFiles, Entry, Kernel, KernelRegistration, KernelSass, Param, Part, Placement, Pointee,
        Sass, crate_sass, registered_kernels,
    };
    pub use crate::own_kernels::{
        CHUNK_DONE, FILL_U32, HOT_CAPTURE, HOT_FILL, HOT_GATHER, HOT_SCATTER, HOT_SLOTS,
        RANDOM_PROBE,
    };
    pub use crate::pipeline::Pipelined;
    pub use crate::placement::Touch;
}
