//! Pipelines over every device of a set: a host dataset split into one pinned shard per device
//! ([`Sharded`]), in proportion to each device's measured link, and an elementwise pipelined
//! launch run on every shard at once, one thread per device, each device with its own streams
//! and staging ring ([`DeviceSet::pipelined`]).
//!
//! Each GPU of a machine has its own host link (on the 2-GPU H200 machine both copy at full
//! rate at once), so splitting by link rate makes the devices finish together. The shards are
//! separate allocations, one per device, so that the devices' runs never wait for each other's
//! use of the same allocation; each is allocated by its device and is portable.

use crate::devices::DeviceSet;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::host_mem::PinnedBuffer;
use crate::pipeline::link::link_profile;
use crate::pipeline::plan::PipelineStats;
use crate::pipeline::run::PipelineRun;
use berth_device::DeviceCopy;
use std::ops::Range;
use std::time::Duration;

/// A host dataset split across the devices of a set: shard `d` is pinned host memory allocated
/// by device `d`, holding elements `ranges()[d]` of the whole.
pub struct Sharded<T> {
    parts: Vec<PinnedBuffer<T>>,
    ranges: Vec<Range<usize>>,
}

impl<T: DeviceCopy> Sharded<T> {
    /// The shards, in device order.
    pub fn shards(&self) -> &[PinnedBuffer<T>] {
        &self.parts
    }

    /// The shards, writable, in device order.
    pub fn shards_mut(&mut self) -> &mut [PinnedBuffer<T>] {
        &mut self.parts
    }

    /// Which elements of the whole each shard holds.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Elements in all shards.
    pub fn len(&self) -> usize {
        self.ranges.last().map_or(0, |r| r.end)
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` of the whole (`None` past the end).
    pub fn get(&self, i: usize) -> Option<&T> {
        let d = self.ranges.iter().position(|r| r.contains(&i))?;
        self.parts[d].get(i - self.ranges[d].start)
    }

    /// The whole dataset, gathered into one `Vec`.
    pub fn to_vec(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.len());
        for p in &self.parts {
            v.extend_from_slice(p);
        }
        v
    }
}

impl<T> std::fmt::Debug for Sharded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("ranges", &self.ranges)
            .finish_non_exhaustive()
    }
}

/// What the closure of [`DeviceSet::pipelined`] gets to report one device's progress.
pub struct DeviceProgress<'p> {
    device: usize,
    report: &'p (dyn Fn(usize, usize, usize) + Sync),
}

impl DeviceProgress<'_> {
    /// The device's index in the set.
    pub fn device(&self) -> usize {
        self.device
    }

    /// Wait for `run`, reporting `(device, chunks done, chunks)` each time more chunks are
    /// done, and once at the end.
    pub fn follow(&self, run: PipelineRun<'_>) -> Result<PipelineStats> {
        let chunks = run.chunks();
        let mut last = usize::MAX;
        while !run.is_finished() {
            let done = run.chunks_done();
            if done != last {
                (self.report)(self.device, done, chunks);
                last = done;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let done = run.chunks_done();
        let stats = run.wait()?;
        if done != last {
            (self.report)(self.device, done, chunks);
        }
        Ok(stats)
    }
}

impl DeviceSet {
    /// Each member's share of streamed work: its link's rate for elementwise runs (the
    /// slower direction of its measured host link, since copies in and out overlap), over the
    /// sum of all. Measures each link on first use (cached per context).
    pub fn link_weights(&self) -> Result<Vec<f64>> {
        let mut rates = Vec::with_capacity(self.len());
        for (d, g) in self.iter().enumerate() {
            let l = link_profile(g).map_err(|e| self.on_device(d, e))?;
            rates.push(l.h2d_gbps.min(l.d2h_gbps).max(f64::MIN_POSITIVE));
        }
        let sum: f64 = rates.iter().sum();
        Ok(rates.into_iter().map(|r| r / sum).collect())
    }

    /// Split `n` elements into one contiguous range per member, in proportion to
    /// [`DeviceSet::link_weights`], each a multiple of `align` elements except the last
    /// (`align` ≥ 1; 4096 keeps shards page-aligned for 4-byte elements).
    pub fn split(&self, n: usize, align: usize) -> Result<Vec<Range<usize>>> {
        let w = self.link_weights()?;
        Ok(split_weighted(n, &w, align.max(1)))
    }

    /// `data` split across the set by [`DeviceSet::split`], each shard pinned by its device
    /// next to it (as [`DeviceSet::shard_zeroed`] allocates), then filled from `data`.
    pub fn shard_from<T: DeviceCopy>(&self, data: &[T]) -> Result<Sharded<T>> {
        let mut shards = self.shard_zeroed_in(self.split(data.len(), 4096)?)?;
        for (part, r) in shards.parts.iter_mut().zip(&shards.ranges) {
            // The pages stay on the node that allocated them.
            part.copy_from_slice(&data[r.clone()]);
        }
        Ok(shards)
    }

    /// Zeroed shards with the ranges of `like` (e.g. the output of a pipelined run over it).
    pub fn shard_zeroed_like<T: DeviceCopy, U>(&self, like: &Sharded<U>) -> Result<Sharded<T>> {
        self.shard_zeroed_in(like.ranges.clone())
    }

    /// `n` zeroed elements split across the set by [`DeviceSet::split`].
    pub fn shard_zeroed<T: DeviceCopy>(&self, n: usize) -> Result<Sharded<T>> {
        self.shard_zeroed_in(self.split(n, 4096)?)
    }

    fn shard_zeroed_in<T: DeviceCopy>(&self, ranges: Vec<Range<usize>>) -> Result<Sharded<T>> {
        if ranges.len() != self.len() {
            return Err(Error::LengthMismatch {
                what: "DeviceSet::shard_zeroed_like: shards vs devices".into(),
                expected: self.len(),
                got: ranges.len(),
            });
        }
        let mut parts = Vec::with_capacity(ranges.len());
        for (d, r) in ranges.iter().enumerate() {
            parts.push(
                self.gpus()[d]
                    .pinned_zeroed_near(r.len())
                    .map_err(|e| self.on_device(d, e))?,
            );
        }
        Ok(Sharded { parts, ranges })
    }

    /// Run an elementwise pipelined launch over every shard at once: `launch(gpu, x, y,
    /// progress)` is called on a thread per member with that member's shards; it starts the
    /// member's pipelined run (`kernel_pipelined(gpu, opts, …, x, y)?`) and waits for it, e.g.
    /// with [`DeviceProgress::follow`], which reports `(device, chunks done, chunks)` to
    /// `report`. The shards' ranges must match.
    ///
    /// A failure names the device ([`Error::OnDevice`]) and, for a failed chunk, the chunk
    /// with its element range in the whole dataset ([`Error::PipelineChunk`] inside).
    pub fn pipelined<T: DeviceCopy + Sync, U: DeviceCopy + Send>(
        &self,
        x: &Sharded<T>,
        y: &mut Sharded<U>,
        report: &(dyn Fn(usize, usize, usize) + Sync),
        launch: impl Fn(
            &Gpu,
            &PinnedBuffer<T>,
            &mut PinnedBuffer<U>,
            &DeviceProgress<'_>,
        ) -> Result<PipelineStats>
        + Sync,
    ) -> Result<Vec<PipelineStats>> {
        if x.ranges != y.ranges || x.parts.len() != self.len() {
            return Err(Error::Usage(format!(
                "DeviceSet::pipelined: the input's shards {:?} and the output's {:?} must match, \
                 one per device of the set ({})",
                x.ranges,
                y.ranges,
                self.len()
            )));
        }
        let results: Vec<Result<PipelineStats>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .iter()
                .zip(&x.parts)
                .zip(y.parts.iter_mut())
                .enumerate()
                .map(|(d, ((gpu, xs), ys))| {
                    let launch = &launch;
                    let progress = DeviceProgress { device: d, report };
                    s.spawn(move || launch(gpu, xs, ys, &progress))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        results
            .into_iter()
            .enumerate()
            .map(|(d, r)| r.map_err(|e| self.on_device(d, in_whole(e, x.ranges[d].start))))
            .collect()
    }
}

/// A chunk's element range in the whole dataset, from its range in a shard starting at
/// `start`.
fn in_whole(e: Error, start: usize) -> Error {
    match e {
        Error::PipelineChunk {
            kernel,
            chunk,
            elements,
            completed_after,
            source,
        } => Error::PipelineChunk {
            kernel,
            chunk,
            elements: elements.start + start..elements.end + start,
            completed_after,
            source,
        },
        e => e,
    }
}

/// `n` split into contiguous ranges in proportion to `weights`, every boundary a multiple of
/// `align` (the last range takes the rest).
pub(crate) fn split_weighted(n: usize, weights: &[f64], align: usize) -> Vec<Range<usize>> {
    let total: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(weights.len());
    let (mut start, mut acc) = (0usize, 0.0f64);
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        let end = if i + 1 == weights.len() {
            n
        } else {
            let ideal = (n as f64 * acc / total).round() as usize;
            (ideal / align * align).clamp(start, n)
        };
        out.push(start..end);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::split_weighted;

    #[test]
    fn splits_follow_the_weights_and_cover_everything() {
        let r = split_weighted(1 << 20, &[0.5, 0.5], 4096);
        assert_eq!(r, vec![0..1 << 19, (1 << 19)..(1 << 20)]);
        let r = split_weighted(100_000, &[1.0, 3.0], 4096);
        assert_eq!(r[0], 0..24576);
        assert_eq!(r[1], 24576..100_000);
        let r = split_weighted(10, &[1.0, 1.0, 1.0], 4096);
        assert_eq!(r, vec![0..0, 0..0, 0..10]);
    }
}
