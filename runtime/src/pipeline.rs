//! Pipelined launches of elementwise kernels: bulk `#[pinned_async]` data cut into chunks
//! over several streams, so that the copy in of chunk k+1, the kernel on chunk k and the copy
//! out of chunk k−1 run at once, through a bounded ring of device staging buffers.
//!
//! Chunk size and stream count come from the link measured once per context
//! ([`Gpu::link_profile`](crate::Gpu::link_profile), in `link`) and the device's copy engines,
//! unless the caller sets them ([`PipelineOptions`]); the plan (`plan`) is pure arithmetic. The
//! device footprint is `streams × chunk × (bytes per element of the bulk arguments)`, bounded
//! by [`PipelineOptions::device_budget`], so host data larger than the GPU's memory streams
//! through. The generated launcher fills a [`Pipelined`] (`builder`), whose submit queues the
//! chunks and returns the [`PipelineRun`] guard (`run`).

pub(crate) mod builder;
pub(crate) mod link;
pub(crate) mod multi;
pub(crate) mod plan;
pub(crate) mod run;

pub use builder::Pipelined;
pub use multi::{DeviceProgress, Sharded};
pub use plan::{LinkProfile, PipelineOptions, PipelineStats, auto_plan};
pub use run::PipelineRun;
