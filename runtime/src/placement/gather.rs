//! The gather cost model, pure: what a batch of row gathers from a host table costs read in
//! place (every row over the link), through a hot tier (the resident share from device
//! memory, the rest over the link, and the rows refreshes copy in), or from the whole table in
//! device memory where the budget holds it; and which is cheapest ([`decide_gather`]).
//!
//! The constants are the placement model's ([`LinkCosts`]): a row read in place costs the
//! larger of one random read of a region the table's size and its bytes at the mapped
//! sequential rate; a row read from device memory costs its bytes at
//! [`LinkCosts::device_gather_bytes_per_s`]. Hits and misses of one batch are read by one
//! kernel, so the prediction adds them (the GPU may overlap them: a bound, not a floor).
//! [`HotTier::decision`](crate::HotTier::decision) feeds it a tier's observed hit rate and
//! churn; every decision is logged (`tracing`, target `berth_runtime::placement::gather`).

use crate::placement::model::LinkCosts;

/// What a stream of row gathers looks like, per batch. `Default` is an empty access (no rows,
/// no hits, nothing measured, one part), to fill in with `..Default::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GatherAccess {
    /// Rows of the table.
    pub table_rows: usize,
    /// Bytes of one row.
    pub row_bytes: usize,
    /// Rows a batch gathers.
    pub batch_rows: usize,
    /// Rows the device budget holds (beside the tier's slot table).
    pub capacity: usize,
    /// The share of a batch's rows a tier of `capacity` rows serves (observed, or expected
    /// from the law of the ids); clamped to 0..=1.
    pub hit_fraction: f64,
    /// Rows the tier's refreshes copy in per batch, on average (read from the host table:
    /// the churn a drifting or unskewed law costs).
    pub admitted_per_batch: f64,
    /// Random reads per second of the table itself
    /// ([`Gpu::measure_random_reads`](crate::Gpu::measure_random_reads)), in place of the
    /// machine's rate for a region its size: the memory behind a table decides it (managed
    /// memory kept on the host, mapped for the GPU in 2 MiB pages, answers random rows of a
    /// 64 GiB table about twice as fast as pinned memory of 4 KiB pages on the H200 machine).
    pub random_per_s: Option<f64>,
    /// Random rows of `row_bytes` read in place from the table per second, measured
    /// ([`HotTier::measure_row_reads`](crate::HotTier::measure_row_reads)): where given, a
    /// row read in place costs its inverse, and `random_per_s` is not used. A row's bytes
    /// and one random read do not add up to it: on an H100 host whose link read 131 M random
    /// 4-byte words a second from a 64 GiB table of managed memory, rows of 256 bytes read
    /// in place at 80 M a second, rows of 1 KiB at 24 M.
    pub row_reads_per_s: Option<f64>,
    /// The host's part of a batch, seconds: checking, staging and counting its ids and
    /// queuing its kernels (as a tier measures it: [`HotTierStats::gathering`] per gather);
    /// 0 where it is not known.
    ///
    /// [`HotTierStats::gathering`]: crate::HotTierStats::gathering
    pub host_s: f64,
    /// The parts a batch is staged in ([`HotTier::staging_parts`](crate::HotTier::staging_parts)),
    /// at least 1: the GPU gathers a part while the host stages the next.
    pub parts: usize,
}

/// Where a batch's rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherChoice {
    /// Every row read in place from the host table.
    Mapped,
    /// The rows read most from a device tier, the rest in place.
    Tier,
    /// The whole table in device memory: the budget holds every row.
    Resident,
}

/// A gather decision and the predictions behind it (seconds per batch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatherDecision {
    /// The cheapest.
    pub choice: GatherChoice,
    /// Every row read in place.
    pub mapped_s: f64,
    /// Through a tier with the access's hit fraction and churn.
    pub tier_s: f64,
    /// Every row from device memory, when the budget holds the table (its one fill not
    /// counted: it is paid once).
    pub resident_s: Option<f64>,
    /// Whether the constants were measured on this machine.
    pub calibrated: bool,
    /// The host's part of a batch ([`GatherAccess::host_s`]).
    pub host_s: f64,
    /// The parts a batch is staged in ([`GatherAccess::parts`]).
    pub parts: usize,
}

impl GatherDecision {
    /// The GPU's part of a batch through the choice, seconds.
    pub fn gpu_s(&self) -> f64 {
        match self.choice {
            GatherChoice::Mapped => self.mapped_s,
            GatherChoice::Tier => self.tier_s,
            GatherChoice::Resident => self.resident_s.unwrap_or(self.tier_s),
        }
    }

    /// A batch waited for before the next is staged, seconds: the host stages its first
    /// part before the GPU has anything to gather, then stages the others (and counts) while
    /// the GPU gathers, so `t / k + max(t · (1 − 1/k), g)` for a host's part `t` in `k` parts
    /// and the GPU's part `g` ([`gpu_s`](GatherDecision::gpu_s)). The GPU's part alone
    /// where the host's is not known.
    pub fn batch_s(&self) -> f64 {
        let (t, k) = (self.host_s.max(0.0), self.parts.max(1) as f64);
        t / k + (t * (1.0 - 1.0 / k)).max(self.gpu_s())
    }

    /// A batch among batches queued back to back (in a [`Scope`](crate::Scope)), seconds:
    /// the host stages the next batches while the GPU gathers, so the longer of the two
    /// parts.
    pub fn queued_s(&self) -> f64 {
        self.host_s.max(0.0).max(self.gpu_s())
    }

    /// The predicted rate of the choice for batches waited for one at a time
    /// ([`batch_s`](GatherDecision::batch_s)), rows per second.
    pub fn rows_per_s(&self, batch_rows: usize) -> f64 {
        batch_rows as f64 / self.batch_s()
    }
}

/// Seconds to read one row of `row_bytes` at random in place from a table answering
/// `random_per_s` random reads a second: one random read, or its bytes at the mapped
/// sequential rate, whichever is longer.
pub fn mapped_row_s(costs: &LinkCosts, random_per_s: f64, row_bytes: usize) -> f64 {
    (1.0 / random_per_s).max(row_bytes as f64 / costs.mapped_seq_bytes_per_s)
}

/// Predict and choose by the GPU's part of a batch (the host's part, checking, staging and
/// counting its ids, is the same for every choice; [`GatherDecision::batch_s`] and
/// [`GatherDecision::queued_s`] add it where the access gives it). A
/// batch read in place costs a launch and its rows at the random-row rate (the table's own,
/// measured at the row's width, where the access has it; else [`mapped_row_s`], at the
/// table's own random-read rate where the access has that, else the machine's for a region
/// its size); through a tier, its hits' bytes at the device gather rate, its
/// misses at the random-row rate and the rows refreshes copy in at that rate again; from the
/// whole table in device memory, every row's bytes at the device rate. The whole table wins
/// wherever the budget holds it (device memory is never slower than the link); otherwise the
/// tier, unless its churn costs more than its hits save.
pub fn decide_gather(costs: &LinkCosts, a: &GatherAccess) -> GatherDecision {
    let n = a.batch_rows as f64;
    let h = if a.hit_fraction.is_nan() {
        0.0
    } else {
        a.hit_fraction.clamp(0.0, 1.0)
    };
    let table_bytes = a.table_rows.saturating_mul(a.row_bytes);
    let random = a
        .random_per_s
        .filter(|r| *r > 0.0)
        .unwrap_or_else(|| costs.random_per_s(table_bytes));
    let miss = a
        .row_reads_per_s
        .filter(|r| *r > 0.0 && r.is_finite())
        .map_or_else(|| mapped_row_s(costs, random, a.row_bytes), |r| 1.0 / r);
    let hit = a.row_bytes as f64 / costs.device_gather_bytes_per_s;
    let mapped_s = costs.fixed_s + n * miss;
    let tier_s = costs.fixed_s + n * h * hit + n * (1.0 - h) * miss + a.admitted_per_batch * miss;
    let resident_s =
        (a.table_rows > 0 && a.capacity >= a.table_rows).then_some(costs.fixed_s + n * hit);
    let choice = if resident_s.is_some() {
        GatherChoice::Resident
    } else if tier_s < mapped_s {
        GatherChoice::Tier
    } else {
        GatherChoice::Mapped
    };
    tracing::debug!(
        ?choice,
        mapped_s,
        tier_s,
        ?resident_s,
        hit_fraction = h,
        admitted_per_batch = a.admitted_per_batch,
        calibrated = costs.calibrated,
        "gather decision"
    );
    GatherDecision {
        choice,
        mapped_s,
        tier_s,
        resident_s,
        calibrated: costs.calibrated,
        host_s: if a.host_s.is_finite() {
            a.host_s.max(0.0)
        } else {
            0.0
        },
        parts: a.parts.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration: a 64 GiB table of 128-float rows, 16 GiB of rows resident,
    /// batches of 65,536.
    fn skewed(hit_fraction: f64) -> GatherAccess {
        GatherAccess {
            table_rows: (64usize << 30) / 512,
            row_bytes: 512,
            batch_rows: 65_536,
            capacity: (16usize << 30) / 512,
            hit_fraction,
            admitted_per_batch: 0.0,
            ..GatherAccess::default()
        }
    }

    #[test]
    fn the_h200_split_bound_is_predicted_within_a_fifth() {
        // The anchor on the H200 (a tier of the hottest rows at the device gather rate,
        // 1,524 M rows/s, the rest at the mapped rate, 59 M rows/s): s = 0, 0.8, 1.0, 1.2
        // serve 25, 75, 93, 99% of lookups from the tier, a split bound of about 78, 214,
        // 547 and 1,300 M rows/s.
        let c = LinkCosts::h200_reference();
        for (h, bound) in [(0.25, 78e6), (0.75, 214e6), (0.93, 547e6), (0.99, 1300e6)] {
            let d = decide_gather(&c, &skewed(h));
            assert_eq!(d.choice, GatherChoice::Tier, "{d:?}");
            let rate = d.rows_per_s(65_536);
            // The model reads misses at the calibrated 4-byte random rate of the largest
            // region (48 M/s), a little below the 59 M rows/s the rows themselves reached.
            assert!(
                (0.75..1.1).contains(&(rate / bound)),
                "h = {h}: {:.0} M rows/s predicted against {:.0}",
                rate / 1e6,
                bound / 1e6
            );
        }
    }

    #[test]
    fn the_tables_own_random_rate_prices_its_misses() {
        // Managed memory answering 100 M random reads a second: 512-byte rows at their bytes'
        // rate (10 ns at 51 GB/s) or the read (10 ns), not the machine's 48 M reads/s of
        // pinned memory of that size.
        let c = LinkCosts::h200_reference();
        let machine = decide_gather(&c, &skewed(0.0));
        let own = decide_gather(
            &c,
            &GatherAccess {
                random_per_s: Some(100e6),
                ..skewed(0.0)
            },
        );
        let rate = 65_536.0 / own.mapped_s;
        assert!((85e6..100e6).contains(&rate), "{rate}");
        assert!(own.mapped_s < machine.mapped_s / 1.8);
        // A rate of 0 or less is no measurement.
        let zero = GatherAccess {
            random_per_s: Some(0.0),
            ..skewed(0.0)
        };
        assert_eq!(decide_gather(&c, &zero).mapped_s, machine.mapped_s);
    }

    #[test]
    fn a_measured_row_rate_prices_each_miss_over_the_random_read_rate() {
        // The H100 host's 64 GiB managed table: 131 M random 4-byte reads a second, 1 KiB rows
        // read in place at 24 M a second (the larger of the read and the bytes would say 33 M).
        let c = LinkCosts::h200_reference();
        let wide = GatherAccess {
            row_bytes: 1024,
            table_rows: (64usize << 30) / 1024,
            random_per_s: Some(131e6),
            ..skewed(0.5)
        };
        let rows = GatherAccess {
            row_reads_per_s: Some(24e6),
            ..wide
        };
        let d = decide_gather(&c, &rows);
        assert!((65_536.0 / d.mapped_s - 24e6).abs() < 0.5e6, "{d:?}");
        // Half the rows miss: the tier's batch pays for those at the measured rate, and the
        // hits at the device rate.
        let hits = 32_768.0 * 1024.0 / c.device_gather_bytes_per_s;
        let expected = c.fixed_s + hits + 32_768.0 / 24e6;
        assert!(
            (d.tier_s - expected).abs() < 1e-9,
            "{} against {expected}",
            d.tier_s
        );
        assert!(d.mapped_s > decide_gather(&c, &wide).mapped_s);
        // No measurement (none, 0, or not finite): the random-read rate prices the rows.
        for r in [
            None,
            Some(0.0),
            Some(-1.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
        ] {
            let a = GatherAccess {
                row_reads_per_s: r,
                ..wide
            };
            assert_eq!(decide_gather(&c, &a), decide_gather(&c, &wide), "{r:?}");
        }
    }

    #[test]
    fn the_hosts_part_overlaps_the_gpus_after_the_first_part() {
        let c = LinkCosts::h200_reference();
        let gpu_only = decide_gather(&c, &skewed(0.9));
        let g = gpu_only.gpu_s();
        assert_eq!(gpu_only.batch_s(), g);
        assert_eq!(gpu_only.queued_s(), g);
        // A host's part of half the GPU's, in two parts: a quarter of it before the GPU
        // starts, the rest beside it.
        let half = decide_gather(
            &c,
            &GatherAccess {
                host_s: g / 2.0,
                parts: 2,
                ..skewed(0.9)
            },
        );
        assert_eq!(half.choice, gpu_only.choice);
        assert!((half.batch_s() - 1.25 * g).abs() < 1e-15, "{half:?}");
        assert_eq!(half.queued_s(), g);
        assert!((half.rows_per_s(65_536) - 65_536.0 / (1.25 * g)).abs() < 1e-3);
        // A host's part three times the GPU's: the host's alone, once its first part is
        // staged; whole batches pay both.
        let slow = GatherAccess {
            host_s: 3.0 * g,
            parts: 2,
            ..skewed(0.9)
        };
        assert!((decide_gather(&c, &slow).batch_s() - 3.0 * g).abs() < 1e-15);
        assert_eq!(decide_gather(&c, &slow).queued_s(), 3.0 * g);
        let whole = GatherAccess { parts: 1, ..slow };
        assert!((decide_gather(&c, &whole).batch_s() - 4.0 * g).abs() < 1e-15);
        // 0 parts is 1; a host's part that is negative or not finite is none.
        let zero = GatherAccess { parts: 0, ..slow };
        assert_eq!(
            decide_gather(&c, &zero).batch_s(),
            decide_gather(&c, &whole).batch_s()
        );
        for h in [-1.0, f64::NAN, f64::INFINITY] {
            let d = decide_gather(&c, &GatherAccess { host_s: h, ..slow });
            assert_eq!(d.batch_s(), g, "{h}");
        }
    }

    #[test]
    fn the_whole_table_wins_where_the_budget_holds_it() {
        let c = LinkCosts::h200_reference();
        let a = GatherAccess {
            capacity: (64usize << 30) / 512,
            ..skewed(0.25)
        };
        let d = decide_gather(&c, &a);
        assert_eq!(d.choice, GatherChoice::Resident);
        let whole = d.rows_per_s(65_536);
        // The anchor's gather from a device-resident table: 1,524 M rows/s.
        assert!((1.3e9..1.7e9).contains(&whole), "{whole}");
        assert!(d.resident_s.unwrap() < d.tier_s && d.tier_s < d.mapped_s);
        // One row short of the table: no.
        let short = GatherAccess {
            capacity: a.table_rows - 1,
            ..a
        };
        assert_eq!(decide_gather(&c, &short).resident_s, None);
    }

    #[test]
    fn churn_that_costs_more_than_the_hits_save_reads_in_place() {
        let c = LinkCosts::conservative();
        // A few hits, and refreshes copying in a whole batch's worth of rows each batch.
        let a = GatherAccess {
            admitted_per_batch: 65_536.0,
            ..skewed(0.3)
        };
        let d = decide_gather(&c, &a);
        assert_eq!(d.choice, GatherChoice::Mapped, "{d:?}");
        assert!(!d.calibrated);
        // The same hits without churn pay.
        assert_eq!(decide_gather(&c, &skewed(0.3)).choice, GatherChoice::Tier);
        // No hits at all: reading in place is never worse.
        assert_eq!(decide_gather(&c, &skewed(0.0)).choice, GatherChoice::Mapped);
    }

    #[test]
    fn nonsense_hit_fractions_and_sizes_give_finite_predictions() {
        let c = LinkCosts::h200_reference();
        for h in [f64::NAN, -1.0, 2.0, f64::INFINITY] {
            let d = decide_gather(&c, &skewed(h));
            assert!(d.mapped_s.is_finite() && d.tier_s.is_finite(), "{h}: {d:?}");
            assert!(d.tier_s > 0.0);
        }
        let huge = GatherAccess {
            table_rows: usize::MAX,
            row_bytes: usize::MAX,
            ..skewed(0.5)
        };
        let d = decide_gather(&c, &huge);
        assert!(d.mapped_s.is_finite(), "{d:?}");
        let empty = GatherAccess {
            table_rows: 0,
            capacity: 0,
            ..skewed(0.5)
        };
        assert_eq!(decide_gather(&c, &empty).resident_s, None);
    }
}
