//! The `#[auto]` decision for one argument: the model ([`decide`]) with the context's
//! calibrated constants and coherence profile, a close call ([`worth_probing`]) settled by
//! the random-read rate of the memory itself, measured on the device, and a copy the device
//! has no room for ruled out.

use crate::args::{ArgRef, MappedArg};
use crate::backend::StreamId;
use crate::context::Inner;
use crate::gpu::Gpu;
use crate::placement::calibration::link_costs;
use crate::placement::model::{
    Access, Decision, Touch, decide, decide_with_random_rate, probe_reads, worth_probing,
};
use crate::placement::probe::{device_profile, random_read_rate};
use crate::pool::size_class;
use berth_device::DeviceCopy;
use std::sync::Arc;

/// [`Gpu::auto_decision`] for the argument `a` of `elem`-byte elements, probing on `stream`.
/// Every `#[auto]` launch takes it on the host before its kernel: a few tens of nanoseconds
/// unless it probes, or its choice is a copy (then a look at the device's free memory, a
/// call to the driver: a copy that does not fit is ruled out, and the argument read in place).
pub(crate) fn decide_for(
    inner: &Arc<Inner>,
    a: &ArgRef<'_>,
    elem: usize,
    hint: Touch,
    stream: StreamId,
) -> Decision {
    let access = hint.access(a.len, elem);
    let d = priced(inner, a, &access, stream);
    let bytes = d.copied_bytes(&access);
    if bytes == 0 {
        return d;
    }
    let class = size_class(bytes);
    let free = inner.ops().memory_info().ok().map(|(free, _)| free);
    if room_for(class, inner.staging.has_free(class, ()), free) {
        return d;
    }
    tracing::debug!(
        bytes,
        free = ?free,
        "auto placement: the copy the model favours does not fit the device's free memory: read in place"
    );
    d.in_place()
}

/// Whether a copy into staging of size class `class` fits the device: a cached staging
/// buffer of its class is free (`pooled`), or the device has that much memory free (`free`;
/// `None` where it could not be read: the copy is tried, and its allocation says).
fn room_for(class: usize, pooled: bool, free: Option<usize>) -> bool {
    pooled || free.is_none_or(|free| free >= class)
}

/// The model's decision for `access` of `a`, a close call settled by a probe on `stream`.
fn priced(inner: &Arc<Inner>, a: &ArgRef<'_>, access: &Access, stream: StreamId) -> Decision {
    let access = *access;
    let profile = device_profile(inner).unwrap_or_default();
    let costs = link_costs(inner);
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
    /// now if not yet; not on the simulator), and a copy the device's free memory cannot take
    /// ruled out ([`Decision::copy_fits`]: read in place instead).
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

#[cfg(test)]
mod tests {
    use super::room_for;
    use crate::placement::model::{Access, Choice, DeviceProfile, LinkCosts, decide};

    #[test]
    fn a_copy_fits_where_a_staging_buffer_of_its_class_is_free_or_the_device_has_room() {
        assert!(room_for(1 << 30, false, Some(2 << 30)));
        assert!(room_for(1 << 30, false, Some(1 << 30)));
        assert!(!room_for(1 << 30, false, Some((1 << 30) - 1)));
        assert!(room_for(1 << 30, true, Some(0)));
        // Unknown free memory: the copy is tried.
        assert!(room_for(1 << 30, false, None));
    }

    #[test]
    fn a_copy_ruled_out_reads_in_place_and_keeps_the_predictions() {
        let all = Access {
            total_bytes: 1 << 30,
            unit_bytes: 1 << 30,
            touched: 1,
            contiguous_bytes: None,
        };
        let d = decide(
            &LinkCosts::h200_reference(),
            &DeviceProfile::default(),
            &all,
        );
        assert_eq!(d.choice, Choice::CopyWhole);
        assert!(d.copy_fits);
        assert_eq!(d.copied_bytes(&all), 1 << 30);
        let p = d.in_place();
        assert_eq!(p.choice, Choice::Mapped);
        assert!(!p.copy_fits);
        assert_eq!((p.mapped_s, p.copy_whole_s), (d.mapped_s, d.copy_whole_s));
        assert_eq!(p.copied_bytes(&all), 0);
        let range = Access {
            contiguous_bytes: Some(4096),
            ..all
        };
        let r = decide(
            &LinkCosts::h200_reference(),
            &DeviceProfile::default(),
            &range,
        );
        assert_eq!(
            (r.choice, r.copied_bytes(&range)),
            (Choice::CopyRange, 4096)
        );
        // Reading directly on a coherent system copies nothing, and stays so.
        let coherent = DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: true,
        };
        let c = decide(&LinkCosts::h200_reference(), &coherent, &all);
        assert_eq!(
            (c.copied_bytes(&all), c.in_place().choice),
            (0, Choice::Direct)
        );
    }
}
