//! The host↔device link as the pipeline planner sees it ([`LinkProfile`]): measured once per
//! context with pinned copies of growing size, timed with events.

use crate::buffer::DeviceBuffer;
use crate::error::Result;
use crate::event::Timing;
use crate::gpu::Gpu;
use crate::host_mem::PinnedBuffer;
use crate::pipeline::plan::LinkProfile;

const PROFILE_SIZES: [usize; 6] = [256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20];

impl Gpu {
    /// The host↔device link of this GPU, measured on first use (a few milliseconds of pinned
    /// copies) and cached for the context's life.
    pub fn link_profile(&self) -> Result<LinkProfile> {
        link_profile(self)
    }
}

/// The link of `gpu`'s context (see [`Gpu::link_profile`]).
pub(crate) fn link_profile(gpu: &Gpu) -> Result<LinkProfile> {
    if let Some(p) = gpu.inner.link.get() {
        return Ok(*p);
    }
    let p = measure_link(gpu)?;
    tracing::info!(?p, "link measured");
    Ok(*gpu.inner.link.get_or_init(|| p))
}

fn measure_link(gpu: &Gpu) -> Result<LinkProfile> {
    let ops = gpu.inner.ops();
    if !ops.has_link() {
        // The simulator's "link" is memcpy; only the plan's shape matters there.
        return Ok(LinkProfile {
            h2d_gbps: 10.0,
            d2h_gbps: 10.0,
            efficient_copy_bytes: 1 << 20,
            copy_engines: 2,
        });
    }
    let max = *PROFILE_SIZES.last().expect("sizes");
    let host: PinnedBuffer<u8> = gpu.pinned_zeroed(max)?;
    let mut back: PinnedBuffer<u8> = gpu.pinned_zeroed(max)?;
    let dev: DeviceBuffer<u8> = gpu.alloc_zeroed(max)?;
    let stream = gpu.inner.default_stream;
    let timing = Timing::new(&gpu.inner)?;
    let mut time = |h2d: bool, bytes: usize| -> Result<f64> {
        let mut t = Vec::new();
        for _ in 0..4 {
            t.push(timing.time(stream, || {
                // SAFETY: stream and buffers of at least `bytes` belong to this context; every
                // copy is waited for (by `time`) before the buffers are touched again.
                unsafe {
                    if h2d {
                        let src = host.as_ptr() as u64;
                        ops.copy_h2d(stream, dev.ptr, src, bytes, "link profile")
                    } else {
                        let dst = back.as_mut_ptr() as u64;
                        ops.copy_d2h(stream, dst, dev.ptr, bytes, "link profile")
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
    Ok(LinkProfile {
        h2d_gbps: h2d,
        d2h_gbps: d2h,
        efficient_copy_bytes: efficient,
        copy_engines: ops.copy_engines()?,
    })
}
