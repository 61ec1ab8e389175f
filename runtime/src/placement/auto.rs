//! The `#[auto]` decision for one argument: the model ([`decide`]) with the context's
//! calibrated constants and coherence profile, and a close call ([`worth_probing`]) settled by
//! the random-read rate of the memory itself, measured on the device.

use crate::args::{ArgRef, MappedArg};
use crate::backend::StreamId;
use crate::context::Inner;
use crate::gpu::Gpu;
use crate::placement::calibration::link_costs;
use crate::placement::model::{
    Decision, Touch, decide, decide_with_random_rate, probe_reads, worth_probing,
};
use crate::placement::probe::{device_profile, random_read_rate};
use berth_device::DeviceCopy;
use std::sync::Arc;

/// [`Gpu::auto_decision`] for the argument `a` of `elem`-byte elements, probing on `stream`.
/// Every `#[auto]` launch takes it on the host before its kernel: a few tens of nanoseconds
/// unless it probes.
pub(crate) fn decide_for(
    inner: &Arc<Inner>,
    a: &ArgRef<'_>,
    elem: usize,
    hint: Touch,
    stream: StreamId,
) -> Decision {
    let profile = device_profile(inner).unwrap_or_default();
    let costs = link_costs(inner);
    let access = hint.access(a.len, elem);
    let d = decide(&costs, &profile, &access);
    // Without a link (the simulator) there is no rate that could settle anything.
    if !inner.ops().has_link() || !worth_probing(&costs, &profile, &access, &d) {
        return d;
    }
    // A close call: it hangs on how fast this allocation answers random reads.
    let reads = probe_reads(d.copy_whole_s, costs.random_per_s(a.bytes));
    let gpu = Gpu {
        inner: inner.clone(),
    };
    match random_read_rate(&gpu, a, stream, reads) {
        Ok(rate) => Decision {
            measured_random_per_s: Some(rate),
            ..decide_with_random_rate(&costs, &profile, &access, rate)
        },
        // The machine's constants decide; if the context is broken, the launch says so.
        Err(e) => {
            tracing::warn!(error = %e, "random-read probe failed");
            d
        }
    }
}

impl Gpu {
    /// What an `#[auto]` launch with `hint` decides for `memory` (its log line, as a value):
    /// [`decide`] with this GPU's constants and profile, a close call ([`worth_probing`])
    /// settled by the memory's own random-read rate ([`Gpu::measure_random_reads`], measured
    /// now if not yet; not on the simulator).
    pub fn auto_decision<T: DeviceCopy>(
        &self,
        memory: &impl MappedArg<T>,
        hint: Touch,
    ) -> Decision {
        let a = memory.__arg();
        decide_for(
            &self.inner,
            &a,
            std::mem::size_of::<T>(),
            hint,
            self.inner.default_stream,
        )
    }
}
