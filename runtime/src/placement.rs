//! Placement of host-resident arguments, in four parts that depend one way:
//!
//! - `model`: the cost model, pure — what reading in place, copying all and copying a range
//!   would cost, and which is cheapest ([`decide`]); no device, no file.
//! - `gather`: the same for a stream of row gathers — in place, through a hot tier, or the
//!   whole table in device memory ([`decide_gather`]); pure too.
//! - `calibration`: the machine's constants ([`LinkCosts`]) as a JSON file, read once per
//!   context ([`Gpu::link_costs`](crate::Gpu::link_costs)).
//! - `probe`: what is measured on the device — its coherence attributes
//!   ([`Gpu::device_profile`](crate::Gpu::device_profile)) and the random-read rate of one
//!   allocation ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)).
//! - `auto`: the decision for one `#[auto]` argument, which uses all three
//!   ([`Gpu::auto_decision`](crate::Gpu::auto_decision)).

pub(crate) mod auto;
pub(crate) mod calibration;
pub(crate) mod gather;
pub(crate) mod model;
pub(crate) mod probe;

pub use gather::{GatherAccess, GatherChoice, GatherDecision, decide_gather, mapped_row_s};
pub use model::{
    Access, Choice, Decision, DeviceProfile, LinkCosts, PROBE_WITHIN, RANDOM_FOOTPRINTS, Touch,
    decide, decide_with_random_rate, worth_probing,
};
