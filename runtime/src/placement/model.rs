//! The placement cost model, pure: given what a launch will touch of a host-resident argument,
//! predict the time of reading it in place (mapped), of copying all of it first, and of
//! copying only the touched range, and pick the cheapest — or direct access, on a coherent
//! system where the GPU reads pageable host memory through the host's page tables.
//!
//! The constants ([`LinkCosts`]) are the link's: copy bandwidth, mapped sequential bandwidth,
//! mapped random-access rate by the size of the region the reads fall in.
//! [`LinkCosts::conservative`] are safe defaults for an uncalibrated machine (and say so); a
//! calibration measures the real ones once per machine (`calibration.rs` reads and writes
//! them). Nothing here touches a device or a file: the context's constants and profile come in
//! as arguments. Every decision and its predictions are logged (`tracing`, target
//! `berth_runtime::placement::model`).

/// The region sizes (bytes) at which the random-read rate of mapped memory is calibrated:
/// 64 MiB to 4 GiB, doubling. On the H200 machine 4-byte reads spread at random over 256 MiB
/// run at ~740 M/s but over 1 GiB at ~110 M/s (`BENCHMARKS.md`, run 15) — consistent with
/// the reach of the GPU's address translation — so one rate cannot price both.
pub const RANDOM_FOOTPRINTS: [usize; 7] = [
    64 << 20,
    128 << 20,
    256 << 20,
    512 << 20,
    1 << 30,
    2 << 30,
    4 << 30,
];

/// The H200 machine's random-read rates at [`RANDOM_FOOTPRINTS`] (`cargo xtask calibrate`, run 16).
const H200_RANDOM_PER_S: [f64; RANDOM_FOOTPRINTS.len()] =
    [747e6, 742e6, 750e6, 683e6, 115e6, 62e6, 48e6];

/// The device gather rate of [`LinkCosts::conservative`], and of calibration files that do
/// not measure it: below what any data-centre GPU of the last generations gathers.
pub(crate) const DEVICE_GATHER_CONSERVATIVE: f64 = 0.3e12;

/// Interpolate a rate measured at region sizes `points` (bytes, rate; sorted by size) at
/// `bytes`: linear in log(size), clamped to the first and last points.
pub(crate) fn interpolate(points: &[(f64, f64)], bytes: f64) -> f64 {
    let Some(&(first_x, first_y)) = points.first() else {
        return f64::NAN;
    };
    if bytes <= first_x {
        return first_y;
    }
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if bytes <= x1 {
            let t = (bytes.ln() - x0.ln()) / (x1.ln() - x0.ln());
            return y0 + t * (y1 - y0);
        }
    }
    points[points.len() - 1].1
}

/// What the link costs, per machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCosts {
    /// Host→device copy bandwidth (pinned), bytes/s.
    pub copy_bytes_per_s: f64,
    /// Device→host copy bandwidth (pinned), bytes/s.
    pub copy_d2h_bytes_per_s: f64,
    /// A kernel reading mapped memory sequentially (wide coalesced loads), bytes/s.
    pub mapped_seq_bytes_per_s: f64,
    /// Independent random reads of mapped memory, accesses/s, when the reads fall at random
    /// in a region of `RANDOM_FOOTPRINTS[i]` bytes ([`LinkCosts::random_per_s`] interpolates).
    pub mapped_random_per_s: [f64; RANDOM_FOOTPRINTS.len()],
    /// One dependent read of mapped memory (a round trip over the link), seconds.
    pub mapped_latency_s: f64,
    /// Pinning (page-locking) host memory, seconds per byte: what making pageable memory
    /// mappable or copyable at full speed costs once ([`LinkCosts::pin_s`]).
    pub pin_s_per_byte: f64,
    /// A kernel gathering whole rows at random from device memory: bytes of rows per
    /// second (the rate of a hot tier's hits, [`decide_gather`](crate::placement::decide_gather)).
    pub device_gather_bytes_per_s: f64,
    /// Fixed cost of a copy or launch, seconds.
    pub fixed_s: f64,
    /// Whether these were measured on this machine.
    pub calibrated: bool,
}

impl LinkCosts {
    /// Safe defaults for an uncalibrated machine: a PCIe Gen4-class link, below what the H200
    /// machine measures (54 GB/s copies, 51 GB/s mapped sequential, ~105 M random reads/s),
    /// so they err towards copying, which is never catastrophic.
    pub fn conservative() -> Self {
        LinkCosts {
            copy_bytes_per_s: 25e9,
            copy_d2h_bytes_per_s: 25e9,
            mapped_seq_bytes_per_s: 20e9,
            mapped_random_per_s: [40e6; RANDOM_FOOTPRINTS.len()],
            mapped_latency_s: 2e-6,
            pin_s_per_byte: 1.0 / 1e9,
            device_gather_bytes_per_s: DEVICE_GATHER_CONSERVATIVE,
            fixed_s: 10e-6,
            calibrated: false,
        }
    }

    /// The H200 machine's figures (`shared/H200-REFERENCE.md`), for tests and documentation.
    pub fn h200_reference() -> Self {
        LinkCosts {
            copy_bytes_per_s: 54.4e9,
            copy_d2h_bytes_per_s: 55.2e9,
            mapped_seq_bytes_per_s: 51.1e9,
            // Calibrated on the H200 machine (`docs/link-costs-h200.json`).
            mapped_random_per_s: H200_RANDOM_PER_S,
            // Half the 2.8 µs signal round trip.
            mapped_latency_s: 1.4e-6,
            // 438 ms per GiB (`cudaHostAlloc` of 1 GiB).
            pin_s_per_byte: 0.438 / (1u64 << 30) as f64,
            // 65,536 random 512-byte rows of a device-resident table at 1,524 M rows/s,
            // launch included.
            device_gather_bytes_per_s: 1.0e12,
            fixed_s: 10e-6,
            calibrated: true,
        }
    }

    /// Independent random reads per second of mapped memory spread over `region_bytes`.
    pub fn random_per_s(&self, region_bytes: usize) -> f64 {
        interpolate(&self.random_points(), region_bytes as f64)
    }

    pub(crate) fn random_points(&self) -> [(f64, f64); RANDOM_FOOTPRINTS.len()] {
        std::array::from_fn(|i| (RANDOM_FOOTPRINTS[i] as f64, self.mapped_random_per_s[i]))
    }

    /// What pinning `bytes` of host memory costs, seconds: worth paying once for memory
    /// used by many launches, never per launch.
    pub fn pin_s(&self, bytes: usize) -> f64 {
        bytes as f64 * self.pin_s_per_byte
    }
}

/// Whether the GPU reads pageable host memory coherently (Grace Hopper and similar).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceProfile {
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`.
    pub pageable_memory_access: bool,
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES`.
    pub uses_host_page_tables: bool,
}

impl DeviceProfile {
    /// Host memory is read in place at full speed: no copy is ever worth it.
    pub fn coherent(&self) -> bool {
        self.pageable_memory_access && self.uses_host_page_tables
    }
}

/// A launch's access hint for its `#[auto]` arguments: how much of each it will read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Touch {
    /// About this many elements, at random.
    Elements(usize),
    /// About this many rows of `row_elems` elements each, at random (each row read whole).
    Rows {
        /// Rows read.
        rows: usize,
        /// Elements per row.
        row_elems: usize,
    },
    /// This fraction of the elements, at random.
    Fraction(f64),
    /// Only the elements `start..end`, each read about once. The launch makes only this range
    /// available to the kernel (an index outside it stops the kernel with its location), so
    /// the cost model may copy just the range to the device.
    Range {
        /// First element read.
        start: usize,
        /// One past the last element read.
        end: usize,
    },
    /// All of it, in order.
    All,
}

impl Touch {
    /// The access of this hint on an argument of `len` elements of `elem_bytes` bytes.
    pub fn access(&self, len: usize, elem_bytes: usize) -> Access {
        let total_bytes = len.saturating_mul(elem_bytes);
        let (unit_bytes, touched) = match *self {
            Touch::Elements(n) => (elem_bytes, n.min(len)),
            Touch::Rows { rows, row_elems } => (
                row_elems.max(1).saturating_mul(elem_bytes),
                rows.min(len / row_elems.max(1)),
            ),
            Touch::Fraction(f) => (elem_bytes, (len as f64 * f.clamp(0.0, 1.0)) as usize),
            Touch::All => (total_bytes.max(1), 1),
            Touch::Range { start, end } => {
                // Read once, in order: one unit of the range's bytes.
                let r = self.window(len);
                let bytes = r.len().saturating_mul(elem_bytes);
                return Access {
                    total_bytes,
                    unit_bytes: bytes.max(1),
                    touched: usize::from(end > start && !r.is_empty()),
                    contiguous_bytes: Some(bytes),
                };
            }
        };
        Access {
            total_bytes,
            unit_bytes,
            touched,
            contiguous_bytes: None,
        }
    }

    /// The elements a launch makes available to the kernel for an argument of `len`
    /// elements: `start..end` (clamped to the argument) for [`Touch::Range`], else all.
    pub fn window(&self, len: usize) -> std::ops::Range<usize> {
        match *self {
            Touch::Range { start, end } => start.min(len)..end.clamp(start.min(len), len),
            _ => 0..len,
        }
    }
}

/// What a launch will do with a host-resident argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access {
    /// Size of the whole argument, bytes.
    pub total_bytes: usize,
    /// Bytes of one access unit (a 4-byte float, a 512-byte row).
    pub unit_bytes: usize,
    /// Units touched (expected).
    pub touched: usize,
    /// When the touched units form one contiguous range: its size in bytes.
    pub contiguous_bytes: Option<usize>,
}

/// How to place the argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Read it in place through mapped memory.
    Mapped,
    /// Copy all of it to the device first.
    CopyWhole,
    /// Copy only the touched contiguous range.
    CopyRange,
    /// A coherent system: read it directly, no mapping, no copy.
    Direct,
}

/// A decision and the predictions behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The cheapest choice.
    pub choice: Choice,
    /// Predicted seconds reading in place.
    pub mapped_s: f64,
    /// Predicted seconds copying everything first.
    pub copy_whole_s: f64,
    /// Predicted seconds copying the contiguous range, when there is one.
    pub copy_range_s: Option<f64>,
    /// Whether the constants were measured on this machine.
    pub calibrated: bool,
    /// The random-read rate of the memory itself, when a close call was settled by it
    /// ([`Gpu::auto_decision`](crate::Gpu::auto_decision)); `None` when the machine's rate for
    /// its size decided.
    pub measured_random_per_s: Option<f64>,
    /// Whether the copy the predictions favour fits the device's free memory; `false` when
    /// it does not, and the choice is to read in place instead ([`Decision::in_place`]).
    pub copy_fits: bool,
}

impl Decision {
    /// This decision with the copies ruled out (the device has no room for them): read in
    /// place, or directly on a coherent system; the predictions are kept.
    pub fn in_place(self) -> Decision {
        let choice = match self.choice {
            Choice::CopyWhole | Choice::CopyRange => Choice::Mapped,
            c => c,
        };
        Decision {
            choice,
            copy_fits: false,
            ..self
        }
    }

    /// Bytes the choice copies to the device before the kernel: the whole argument's, the
    /// range's, or none.
    pub fn copied_bytes(&self, a: &Access) -> usize {
        match self.choice {
            Choice::CopyWhole => a.total_bytes,
            Choice::CopyRange => a.contiguous_bytes.unwrap_or(a.total_bytes),
            Choice::Mapped | Choice::Direct => 0,
        }
    }
}

/// Predict and choose. The mapped cost of a unit is the larger of its random-access share
/// (at the rate measured for a region the size of the whole argument) and its bytes at the sequential rate (wide rows approach the sequential rate,
/// 4-byte gathers are latency-bound), and reading anything costs at least one round trip;
/// copies cost their bytes at the copy rate.
pub fn decide(costs: &LinkCosts, profile: &DeviceProfile, a: &Access) -> Decision {
    decide_with_random_rate(costs, profile, a, costs.random_per_s(a.total_bytes))
}

/// [`decide`] with the random-read rate of this very memory (reads per second, measured by
/// [`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)) in place of the machine's
/// rate for its size.
pub fn decide_with_random_rate(
    costs: &LinkCosts,
    profile: &DeviceProfile,
    a: &Access,
    random_per_s: f64,
) -> Decision {
    let touched_bytes = a.touched as f64 * a.unit_bytes as f64;
    let per_unit = (1.0 / random_per_s).max(a.unit_bytes as f64 / costs.mapped_seq_bytes_per_s);
    // At least one round trip over the link, however little is read.
    let mapped_s = costs.fixed_s
        + (a.touched as f64 * per_unit)
            .max(touched_bytes / costs.mapped_seq_bytes_per_s)
            .max(if a.touched > 0 {
                costs.mapped_latency_s
            } else {
                0.0
            });
    let copy_whole_s = 2.0 * costs.fixed_s + a.total_bytes as f64 / costs.copy_bytes_per_s;
    let copy_range_s = a
        .contiguous_bytes
        .map(|b| 2.0 * costs.fixed_s + b as f64 / costs.copy_bytes_per_s);
    let choice = if profile.coherent() {
        Choice::Direct
    } else {
        let mut best = (Choice::Mapped, mapped_s);
        if copy_whole_s < best.1 {
            best = (Choice::CopyWhole, copy_whole_s);
        }
        if let Some(r) = copy_range_s
            && r < best.1
        {
            best = (Choice::CopyRange, r);
        }
        best.0
    };
    let d = Decision {
        choice,
        mapped_s,
        copy_whole_s,
        copy_range_s,
        calibrated: costs.calibrated,
        measured_random_per_s: None,
        copy_fits: true,
    };
    tracing::debug!(
        ?choice,
        mapped_s,
        copy_whole_s,
        ?copy_range_s,
        calibrated = costs.calibrated,
        coherent = profile.coherent(),
        total_bytes = a.total_bytes,
        touched = a.touched,
        random_per_s,
        "placement decision{}",
        if costs.calibrated {
            ""
        } else {
            " (uncalibrated: conservative constants)"
        }
    );
    d
}

/// How far apart the predictions of reading in place and of copying may be for the choice
/// to hang on the random-read rate of the memory itself: the rate of one allocation differs
/// from the machine's calibrated rate for its size by up to a third on the H200 (its
/// physical layout), so closer calls than this are measured
/// ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)).
pub const PROBE_WITHIN: f64 = 2.0;

/// Whether `d`, taken with the machine's constants, is a close call between reading `a` in
/// place at random and copying it: then the random-read rate of the memory itself decides.
/// Never on a coherent system, for a range or when little is read (one round trip).
pub fn worth_probing(costs: &LinkCosts, profile: &DeviceProfile, a: &Access, d: &Decision) -> bool {
    if profile.coherent() || a.contiguous_bytes.is_some() || a.touched == 0 {
        return false;
    }
    let random = costs.random_per_s(a.total_bytes);
    // Reading in place is priced by its random reads (not its bytes or one round trip).
    let random_s = a.touched as f64 / random;
    let bound = random_s >= (a.touched as f64 * a.unit_bytes as f64) / costs.mapped_seq_bytes_per_s
        && random_s >= costs.mapped_latency_s;
    let (lo, hi) = if d.mapped_s < d.copy_whole_s {
        (d.mapped_s, d.copy_whole_s)
    } else {
        (d.copy_whole_s, d.mapped_s)
    };
    bound && hi < PROBE_WITHIN * lo
}

/// Random reads for a probe of memory whose whole copy is predicted to take `copy_s`: about
/// a quarter of what the copy's time would read at `random_per_s`, 16 Ki to 256 Ki.
pub(crate) fn probe_reads(copy_s: f64, random_per_s: f64) -> usize {
    ((copy_s * random_per_s / 4.0) as usize).clamp(1 << 14, 1 << 18)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: usize = 1 << 30;

    fn gather(fraction: f64, unit: usize) -> Access {
        let units = GIB / unit;
        Access {
            total_bytes: GIB,
            unit_bytes: unit,
            touched: (units as f64 * fraction) as usize,
            contiguous_bytes: None,
        }
    }

    /// Where mapped stops winning, by bisection on the touched fraction.
    fn crossover(costs: &LinkCosts, unit: usize) -> f64 {
        let (mut lo, mut hi) = (1e-7f64, 1.0f64);
        for _ in 0..60 {
            let mid = (lo * hi).sqrt();
            if decide(costs, &DeviceProfile::default(), &gather(mid, unit)).choice == Choice::Mapped
            {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Hints and lengths at the ends of `usize` give an access (and a decision) without
    /// overflow.
    #[test]
    fn extreme_hints_do_not_overflow() {
        let costs = LinkCosts::h200_reference();
        let profile = DeviceProfile {
            pageable_memory_access: false,
            uses_host_page_tables: false,
        };
        for touch in [
            Touch::Rows {
                rows: 1,
                row_elems: usize::MAX,
            },
            Touch::Rows {
                rows: usize::MAX,
                row_elems: 3,
            },
            Touch::Elements(usize::MAX),
            Touch::All,
            Touch::Range {
                start: 0,
                end: usize::MAX,
            },
        ] {
            for (len, elem) in [(usize::MAX, 8), (usize::MAX / 4, 4), (1 << 20, usize::MAX)] {
                let a = touch.access(len, elem);
                let d = decide(&costs, &profile, &a);
                let _ = worth_probing(&costs, &profile, &a, &d);
            }
        }
    }

    #[test]
    fn the_h200_crossover_for_4_byte_gathers_matches_the_measurement() {
        // Measured on the H200 (BENCHMARKS.md): mapped wins below ~0.78–0.80% of a 1 GiB
        // table of floats touched at random.
        let f = crossover(&LinkCosts::h200_reference(), 4);
        assert!(
            (0.006..0.010).contains(&f),
            "crossover at {:.3}%",
            f * 100.0
        );
    }

    #[test]
    fn wide_rows_stay_mapped_longer_and_ranges_copy_only_what_is_touched() {
        let costs = LinkCosts::h200_reference();
        let rows = crossover(&costs, 512);
        assert!(
            rows > 5.0 * crossover(&costs, 4),
            "512-byte rows cross at {:.2}%",
            rows * 100.0
        );
        let mut a = gather(0.5, 4);
        a.contiguous_bytes = Some(GIB / 2);
        assert_eq!(
            decide(&costs, &DeviceProfile::default(), &a).choice,
            Choice::CopyRange
        );
        assert_eq!(
            decide(&costs, &DeviceProfile::default(), &gather(1e-5, 4)).choice,
            Choice::Mapped
        );
        assert_eq!(
            decide(&costs, &DeviceProfile::default(), &gather(0.2, 4)).choice,
            Choice::CopyWhole
        );
    }

    #[test]
    fn a_coherent_profile_reads_directly() {
        // What a Grace Hopper system reports; the GPU machine reports both false.
        let gh = DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: true,
        };
        let d = decide(&LinkCosts::h200_reference(), &gh, &gather(0.5, 4));
        assert_eq!(d.choice, Choice::Direct);
        let half = DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: false,
        };
        assert_ne!(
            decide(&LinkCosts::h200_reference(), &half, &gather(0.5, 4)).choice,
            Choice::Direct
        );
    }

    #[test]
    fn uncalibrated_constants_are_conservative_and_say_so() {
        let c = LinkCosts::conservative();
        assert!(!c.calibrated);
        let d = decide(&c, &DeviceProfile::default(), &gather(0.001, 4));
        assert!(!d.calibrated);
        // They favour copying earlier than the measured machine does.
        assert!(crossover(&c, 4) < crossover(&LinkCosts::h200_reference(), 4));
    }

    #[test]
    fn the_random_rate_follows_the_region_and_is_clamped_outside_the_calibrated_sizes() {
        let c = LinkCosts::h200_reference();
        for (i, &region) in RANDOM_FOOTPRINTS.iter().enumerate() {
            assert_eq!(c.random_per_s(region), c.mapped_random_per_s[i]);
        }
        let (a, b) = (c.random_per_s(256 << 20), c.random_per_s(512 << 20));
        let mid = c.random_per_s(362 << 20);
        assert!(
            mid < a.max(b) && mid > a.min(b),
            "{mid} not between {a} and {b}"
        );
        assert_eq!(c.random_per_s(1 << 20), c.mapped_random_per_s[0]);
        assert_eq!(c.random_per_s(64 << 30), c.mapped_random_per_s[6]);
    }

    #[test]
    fn the_crossover_moves_with_the_table_size_as_measured() {
        // Run 15 on the H200: 1% of a 256 MiB table of floats read in place took 0.94 ms
        // against 4.9 ms copying it; 1% of a 1 GiB table, 24.6 ms against 19.6 ms.
        let c = LinkCosts::h200_reference();
        let one_percent = |bytes: usize| Access {
            total_bytes: bytes,
            unit_bytes: 4,
            touched: bytes / 4 / 100,
            contiguous_bytes: None,
        };
        let small = decide(&c, &DeviceProfile::default(), &one_percent(256 << 20));
        let large = decide(&c, &DeviceProfile::default(), &one_percent(GIB));
        assert_eq!(small.choice, Choice::Mapped, "{small:?}");
        assert_eq!(large.choice, Choice::CopyWhole, "{large:?}");
    }

    #[test]
    fn close_calls_are_settled_by_the_rate_of_the_memory_itself() {
        // Full run of 2026-11-30 on the H200: 5% of a 256 MiB table of floats, mapped
        // 4.5–4.7 ms against 4.96 ms copying. That machine's calibration read 560 M/s for
        // 256 MiB tables; the sweep's own table answered at ~730 M/s.
        let mut c = LinkCosts::h200_reference();
        c.mapped_random_per_s[2] = 560e6;
        let p = DeviceProfile::default();
        let five_percent = Access {
            total_bytes: 256 << 20,
            unit_bytes: 4,
            touched: (256 << 20) / 4 / 20,
            contiguous_bytes: None,
        };
        let d = decide(&c, &p, &five_percent);
        assert_eq!(d.choice, Choice::CopyWhole, "{d:?}");
        assert!(worth_probing(&c, &p, &five_percent, &d), "{d:?}");
        let measured = decide_with_random_rate(&c, &p, &five_percent, 730e6);
        assert_eq!(measured.choice, Choice::Mapped, "{measured:?}");
        assert!(measured.mapped_s < d.mapped_s);
        assert_eq!(measured.copy_whole_s, d.copy_whole_s);

        // Clear calls are not measured: a few reads, or most of a big table.
        for fraction in [1e-5, 0.2] {
            let a = Access {
                touched: ((256 << 20) as f64 / 4.0 * fraction) as usize,
                ..five_percent
            };
            let d = decide(&c, &p, &a);
            assert!(!worth_probing(&c, &p, &a, &d), "{fraction}: {d:?}");
        }
        // Nor wide rows (priced by their bytes), ranges, or coherent systems.
        let rows = Access {
            unit_bytes: 512,
            touched: (256 << 20) / 512 / 20,
            ..five_percent
        };
        assert!(!worth_probing(&c, &p, &rows, &decide(&c, &p, &rows)));
        let range = Access {
            contiguous_bytes: Some(64 << 20),
            ..five_percent
        };
        assert!(!worth_probing(&c, &p, &range, &decide(&c, &p, &range)));
        let coherent = DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: true,
        };
        let d = decide(&c, &coherent, &five_percent);
        assert!(!worth_probing(&c, &coherent, &five_percent, &d));
    }

    #[test]
    fn a_probe_reads_a_quarter_of_what_the_copy_would_cost_within_bounds() {
        // 256 MiB at 55 GB/s, ~730 M/s: the upper bound.
        assert_eq!(probe_reads(4.9e-3, 730e6), 1 << 18);
        // 4 MiB: the lower bound.
        assert_eq!(probe_reads(80e-6, 730e6), 1 << 14);
        assert_eq!(probe_reads(1e-3, 400e6), 100_000);
    }

    #[test]
    fn a_range_hint_prices_one_sequential_read_and_copies_only_the_range() {
        let c = LinkCosts::h200_reference();
        let range = 64usize << 20;
        let t = Touch::Range {
            start: 100,
            end: 100 + range / 4,
        };
        let a = t.access(GIB / 4, 4);
        assert_eq!(a.contiguous_bytes, Some(range));
        let d = decide(&c, &DeviceProfile::default(), &a);
        assert!(d.copy_range_s.unwrap() < d.copy_whole_s / 10.0, "{d:?}");
        let seq = c.fixed_s + range as f64 / c.mapped_seq_bytes_per_s;
        assert!((d.mapped_s - seq).abs() < 1e-9, "{d:?}");
        // 55 GB/s copies against 51 GB/s reading in place, for data read once.
        assert_eq!(d.choice, Choice::CopyRange);
        // A few bytes: one round trip in place beats a copy.
        let tiny = Touch::Range { start: 7, end: 9 }.access(GIB / 4, 4);
        assert_eq!(
            decide(&c, &DeviceProfile::default(), &tiny).choice,
            Choice::Mapped
        );
        assert_eq!(Touch::Range { start: 10, end: 50 }.window(30), 10..30);
        assert_eq!(Touch::Range { start: 40, end: 50 }.window(30), 30..30);
        assert_eq!(Touch::Range { start: 20, end: 10 }.window(30), 20..20);
        assert_eq!(Touch::All.window(30), 0..30);
        assert_eq!(Touch::Elements(3).window(30), 0..30);
    }

    #[test]
    fn reading_anything_in_place_costs_a_round_trip() {
        let c = LinkCosts::h200_reference();
        let one = Access {
            total_bytes: 4096,
            unit_bytes: 4,
            touched: 1,
            contiguous_bytes: None,
        };
        let d = decide(&c, &DeviceProfile::default(), &one);
        assert!(d.mapped_s >= c.fixed_s + c.mapped_latency_s);
    }
}
