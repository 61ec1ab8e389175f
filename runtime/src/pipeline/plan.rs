//! The plan of a pipelined launch, pure: from the link's figures ([`LinkProfile`]), the
//! caller's options and the bulk arguments' element sizes, how many streams, how many elements
//! per chunk, how many chunks.

use crate::error::{Error, Result};
use crate::launch::grid::Grid;
use crate::pool::size_class;

/// How to pipeline; `None` fields are chosen from the measured link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Bytes of the widest bulk argument per chunk.
    pub chunk_bytes: Option<usize>,
    /// Streams (and staging sets) in the ring.
    pub streams: Option<usize>,
    /// Most device memory the staging ring may take. Staging buffers come in size classes
    /// (at least 4 KiB, up to 25% above the chunk's bytes), counted as allocated; a budget
    /// below the smallest ring that can run (streams × bulk arguments × 4 KiB) is an
    /// [`Error::Usage`](crate::Error::Usage) when the run is planned, never exceeded.
    pub device_budget: Option<usize>,
    /// Threads per block of each chunk's launch.
    pub threads_per_block: u32,
    /// Per-chunk completion flags in mapped memory: progress
    /// ([`PipelineRun::chunks_done`](crate::PipelineRun::chunks_done)) and, after a failure,
    /// which chunk failed and which completed
    /// ([`Error::PipelineChunk`](crate::Error::PipelineChunk)). One 4-byte copy per chunk,
    /// behind its outputs' copy (docs/design-notes.md has its cost on the H200). Without
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

/// The shape of one pipelined run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Elements per chunk (the last may have fewer).
    pub(crate) chunk: usize,
    /// Chunks.
    pub(crate) chunks: usize,
    /// Streams, at most one per chunk.
    pub(crate) streams: usize,
    /// Bytes of all bulk arguments per element.
    pub(crate) per_elem: usize,
}

/// The plan for `n` elements of bulk arguments of `elems` bytes per element each (at least
/// one), with `opts` over `link`.
pub(crate) fn plan(
    opts: &PipelineOptions,
    link: &LinkProfile,
    n: usize,
    elems: &[usize],
) -> Result<Plan> {
    let per_elem = elems.iter().copied().fold(0usize, usize::saturating_add);
    let widest = elems.iter().copied().max().unwrap_or(1).max(1);
    let (auto_streams, auto_chunk) = auto_plan(link, n.saturating_mul(widest));
    let streams = opts.streams.unwrap_or(auto_streams).max(1);
    let chunk_bytes = opts.chunk_bytes.unwrap_or(auto_chunk).max(widest);
    // Whole blocks of 1024 elements keep every chunk's start aligned for wide accesses (a
    // chunk as large as the whole run needs no rounding).
    let mut chunk = (chunk_bytes / widest)
        .max(1)
        .checked_next_multiple_of(1024)
        .unwrap_or(usize::MAX)
        .min(n.max(1));
    // The staging ring of `streams` sets of one buffer per bulk argument, `c` elements each:
    // its device bytes, as allocated (in size classes, up to 25% larger, at least 4 KiB).
    let ring = |c: usize, streams: usize| -> usize {
        elems
            .iter()
            .map(|e| size_class(c.saturating_mul(*e)))
            .fold(0usize, usize::saturating_add)
            .saturating_mul(streams)
    };
    if let Some(budget) = opts.device_budget {
        let fit = budget / streams.saturating_mul(per_elem).max(1);
        if fit == 0 {
            return Err(Error::Usage(format!(
                "a device budget of {budget} bytes cannot hold one element per stream ({streams} streams × {per_elem} bytes)"
            )));
        }
        chunk = chunk.min(fit);
        // Shrink until the ring fits.
        while chunk > 1 && ring(chunk, streams) > budget {
            chunk -= (chunk / 8).max(1);
        }
    }
    let chunks = n.div_ceil(chunk);
    let streams = streams.min(chunks.max(1));
    if let Some(budget) = opts.device_budget {
        let least = ring(chunk, streams);
        if least > budget {
            return Err(Error::Usage(format!(
                "a device budget of {budget} bytes is below the smallest staging ring: {streams} \
                 stream(s) × {} buffer(s) take {least} bytes (staging buffers are at least {} bytes)",
                elems.len(),
                size_class(1)
            )));
        }
    }
    Ok(Plan {
        chunk,
        chunks,
        streams,
        per_elem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: LinkProfile = LinkProfile {
        h2d_gbps: 50.0,
        d2h_gbps: 50.0,
        efficient_copy_bytes: 1 << 20,
        copy_engines: 2,
    };

    #[test]
    fn a_device_budget_bounds_the_staging_ring_with_its_size_classes() {
        let budget = 10 << 20;
        let opts = PipelineOptions {
            device_budget: Some(budget),
            ..Default::default()
        };
        let n = 100 << 20;
        let p = plan(&opts, &LINK, n, &[4, 4]).unwrap();
        let ring = p.streams * 2 * size_class(p.chunk * 4);
        assert!(ring <= budget, "{p:?}: ring of {ring} bytes");
        assert_eq!(p.chunks, n.div_ceil(p.chunk));
        assert_eq!((p.streams, p.per_elem), (3, 8));
    }

    #[test]
    fn a_budget_without_room_for_one_element_per_stream_is_refused() {
        let opts = PipelineOptions {
            device_budget: Some(8),
            streams: Some(3),
            ..Default::default()
        };
        assert!(matches!(
            plan(&opts, &LINK, 1000, &[4, 4]),
            Err(Error::Usage(_))
        ));
    }

    /// Staging buffers take at least one size class (4 KiB): a budget below the smallest ring
    /// that can run is refused, never exceeded; one just above it plans within it.
    #[test]
    fn a_budget_below_the_smallest_staging_ring_is_refused() {
        for streams in [1, 3] {
            let least = streams * 2 * size_class(1);
            for (budget, fits) in [(1024, false), (least - 1, false), (least, true)] {
                let opts = PipelineOptions {
                    device_budget: Some(budget),
                    streams: Some(streams),
                    ..Default::default()
                };
                match plan(&opts, &LINK, 1 << 20, &[4, 4]) {
                    Ok(p) => {
                        assert!(fits, "budget {budget}: {p:?}");
                        assert!(p.streams * 2 * size_class(p.chunk * 4) <= budget, "{p:?}");
                    }
                    Err(Error::Usage(m)) => {
                        assert!(!fits, "budget {budget}: {m}");
                        assert!(m.contains("smallest staging ring"), "{m}");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    #[test]
    fn a_run_shorter_than_one_chunk_uses_one_stream() {
        let p = plan(&PipelineOptions::default(), &LINK, 10, &[4]).unwrap();
        assert_eq!((p.chunk, p.chunks, p.streams), (10, 1, 1));
    }

    /// Options at the ends of their types plan something or are refused; nothing overflows
    /// (the arithmetic saturates or is checked, so this holds in release builds too).
    #[test]
    fn extreme_options_plan_without_overflow() {
        let wide = [usize::MAX / 2, 8];
        for streams in [None, Some(1), Some(1 << 62), Some(usize::MAX)] {
            for chunk_bytes in [None, Some(1), Some(usize::MAX - 5), Some(usize::MAX)] {
                for device_budget in [None, Some(1), Some(1 << 30), Some(usize::MAX)] {
                    for (n, elems) in [(1usize << 40, &[4usize, 4][..]), (3, &wide[..])] {
                        let opts = PipelineOptions {
                            streams,
                            chunk_bytes,
                            device_budget,
                            ..Default::default()
                        };
                        match plan(&opts, &LINK, n, elems) {
                            Ok(p) => {
                                assert!(p.chunk >= 1 && p.chunk <= n, "{opts:?}: {p:?}");
                                if let Some(budget) = device_budget {
                                    let ring: usize = elems
                                        .iter()
                                        .map(|e| size_class(p.chunk.saturating_mul(*e)))
                                        .fold(0, usize::saturating_add);
                                    let ring = ring.saturating_mul(p.streams);
                                    assert!(ring <= budget, "{opts:?}: {p:?}: ring {ring}");
                                }
                                assert_eq!(p.chunks, n.div_ceil(p.chunk), "{opts:?}: {p:?}");
                                assert!(p.streams >= 1, "{opts:?}: {p:?}");
                            }
                            Err(Error::Usage(_)) => assert!(device_budget.is_some(), "{opts:?}"),
                            Err(e) => panic!("{opts:?}: {e}"),
                        }
                    }
                }
            }
        }
    }
}
