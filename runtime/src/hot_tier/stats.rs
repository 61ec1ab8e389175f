//! What a tier counts of its gathers and refreshes.

/// What a [`HotTier`](super::HotTier) has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotTierStats {
    /// Batches: gathers queued, and batches of reads noted ([`HotTier::note_reads`](super::HotTier::note_reads)).
    pub gathers: u64,
    /// Rows gathered or noted (ids given to gathers and to [`HotTier::note_reads`](super::HotTier::note_reads)).
    pub rows: u64,
    /// Ids counted: every id by default, every `n`-th of each batch with
    /// [`HotTier::count_every`](super::HotTier::count_every); none by a tier that holds no row (nothing could become
    /// resident).
    pub counted: u64,
    /// Counted ids whose residency the host looked up for [`hits`](HotTierStats::hits):
    /// every counted id of a batch that counts at most 1,024, else 1,024 of them spread
    /// evenly over the batch (each lookup is a miss in the host's caches, on the gathering
    /// thread).
    pub looked_up: u64,
    /// Looked-up ids whose rows were resident (read from device memory), by the host's
    /// record of the residency: a row a gather's capture copied in counts from the refresh
    /// that settles it on (the gathers read it from device memory from the next batch on).
    pub hits: u64,
    /// Refreshes begun (on a tier that holds no row, refreshes called).
    pub refreshes: u64,
    /// Rows copied into the tier by refreshes whose kernels are queued.
    pub admitted: u64,
    /// Rows dropped from the tier by refreshes whose kernels are queued, and by the captures
    /// those refreshes settled.
    pub evicted: u64,
    /// Of the rows admitted, those the refreshes' fills read from the host table (the
    /// others a gather's capture copied from its output, which read them once already).
    pub filled: u64,
    /// Rows not resident that host threads gathered into pinned memory for the GPU to read
    /// in one stream ([`HotTier::host_gathers`](super::HotTier::host_gathers)), rather than the GPU reading each in place.
    pub staged: u64,
    /// Host time the rankings of the refreshes applied so far took (on a thread of the
    /// tier's own, beside the gathers, for [`HotTier::begin_refresh`](super::HotTier::begin_refresh)).
    pub ranking: std::time::Duration,
    /// Host time reading their miss logs (waiting for the gathers queued before included).
    pub log_read: std::time::Duration,
    /// Host time queuing their fill and slot table update kernels, on the thread that
    /// applied them (a `refresh` or `finish_refresh` on a `Gpu` or a `Stream` waits for the
    /// kernels too; a gather leaves them queued before its own).
    pub apply: std::time::Duration,
    /// Host time the gathers spent counting their sampled ids for the policy (one id in
    /// [`HotTier::count_every`](super::HotTier::count_every)), on the gathering thread after the batch's kernels are
    /// queued.
    pub counting: std::time::Duration,
    /// Host time the gathers (and [`HotTier::note_reads`](super::HotTier::note_reads)) spent staging their ids: checking
    /// them and writing them into the mapped memory the kernels read them from, after waiting
    /// for the kernels that last read it.
    pub staging: std::time::Duration,
    /// Host time of the gathers' calls, from each call to its return (the staging, the
    /// counting, queuing the kernels, and any refresh's kernels queued first), for the
    /// gathers that queued their kernels, and of [`HotTier::note_reads`](super::HotTier::note_reads): the host's part of
    /// a batch, which [`HotTier::decision`](super::HotTier::decision) adds to its predictions.
    pub gathering: std::time::Duration,
}

impl HotTierStats {
    /// What the tier did after `earlier` (an earlier [`HotTier::stats`](super::HotTier::stats) of the same tier):
    /// each counter and time less its value then.
    ///
    /// ```
    /// # fn main() -> berth_runtime::Result<()> {
    /// let gpu = berth_runtime::Gpu::simulator();
    /// let table = gpu.mapped_from(&vec![1.0f32; 64 * 4])?; // 64 rows of 4 floats
    /// let mut tier = gpu.hot_tier(table, 4, 64 * 4 + 8 * 16)?; // 8 rows resident at most
    /// let mut out = gpu.alloc_zeroed::<f32>(2 * 4)?;
    /// tier.gather(&gpu, &[3, 9], &mut out)?.wait()?;
    /// let before = tier.stats();
    /// tier.gather(&gpu, &[3, 5], &mut out)?.wait()?;
    /// let last = tier.stats().since(&before);
    /// assert_eq!((last.gathers, last.rows), (1, 2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn since(&self, earlier: &HotTierStats) -> HotTierStats {
        HotTierStats {
            gathers: self.gathers.saturating_sub(earlier.gathers),
            rows: self.rows.saturating_sub(earlier.rows),
            counted: self.counted.saturating_sub(earlier.counted),
            looked_up: self.looked_up.saturating_sub(earlier.looked_up),
            hits: self.hits.saturating_sub(earlier.hits),
            refreshes: self.refreshes.saturating_sub(earlier.refreshes),
            admitted: self.admitted.saturating_sub(earlier.admitted),
            evicted: self.evicted.saturating_sub(earlier.evicted),
            filled: self.filled.saturating_sub(earlier.filled),
            staged: self.staged.saturating_sub(earlier.staged),
            ranking: self.ranking.saturating_sub(earlier.ranking),
            log_read: self.log_read.saturating_sub(earlier.log_read),
            apply: self.apply.saturating_sub(earlier.apply),
            counting: self.counting.saturating_sub(earlier.counting),
            staging: self.staging.saturating_sub(earlier.staging),
            gathering: self.gathering.saturating_sub(earlier.gathering),
        }
    }

    /// Fraction of the looked-up ids whose rows were resident (0 before any gather): the
    /// fraction of all rows gathered when every id is counted and looked up, an estimate of
    /// it otherwise.
    pub fn hit_rate(&self) -> f64 {
        if self.looked_up == 0 {
            0.0
        } else {
            self.hits as f64 / self.looked_up as f64
        }
    }
}

/// The rows a [`HotTier`](super::HotTier)'s gathers read, as the GPU counted them
/// ([`HotTier::gather_reads`](super::HotTier::gather_reads)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherReads {
    /// Rows given to the gather kernels: the ids of every gather that queued its kernel
    /// (each part's, where a batch is staged in parts).
    pub rows: u64,
    /// Of them, the rows the kernels did not read from device memory: read in place from the
    /// host table, or left to the host's threads ([`HotTier::host_gathers`](super::HotTier::host_gathers)).
    pub from_host: u64,
}

impl GatherReads {
    /// The reads after `earlier` (an earlier [`HotTier::gather_reads`](super::HotTier::gather_reads) of the same tier).
    pub fn since(&self, earlier: &GatherReads) -> GatherReads {
        GatherReads {
            rows: self.rows.saturating_sub(earlier.rows),
            from_host: self.from_host.saturating_sub(earlier.from_host),
        }
    }

    /// The fraction of the rows read from device memory (0 before any gather).
    pub fn hit_rate(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            1.0 - self.from_host as f64 / self.rows as f64
        }
    }
}

/// What one [`HotTier::refresh`](super::HotTier::refresh) (or [`HotTier::finish_refresh`](super::HotTier::finish_refresh)) changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refresh {
    /// Rows copied into the tier (the rows the captures copied in, settled, included).
    pub admitted: usize,
    /// Rows dropped from it to make room (the rows the captures evicted from the slots they
    /// took, settled, included: [`HotTier::capture_room`](super::HotTier::capture_room)).
    pub evicted: usize,
    /// Rows resident after the refresh.
    pub resident: usize,
}
