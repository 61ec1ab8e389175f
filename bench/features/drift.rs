//! How a drifting hot set's recovery is judged, from a run's per-batch figures: the
//! `features` example prints and writes it (`--drift-every`), and the record renders it again
//! from the raw lines, by the same rules.
//!
//! Batch times are judged by medians: a refresh that lands on a batch can stall it for several
//! milliseconds, and a mean over a few batches would take one such batch for the typical one
//! (before the first move as much as after it).

/// Batches before the first move of the hot set that make its steady state.
pub const STEADY: usize = 8;
/// Batches a recovery is judged over.
pub const WINDOW: usize = 4;

/// The median of `v`: the middle value, or the mean of the middle two; 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// How many batches after a move of the hot set at timed batch `at` the gathers took again at
/// most 10% more than in the steady state, the 8 batches before the first move (`first`):
/// the first `k` where the median of batches `at + k ..` (4 of them) is within 10% of theirs.
/// `None` if there are fewer than 8 before, or it never happens before the next move or the
/// end (`end`).
pub fn recovered_after(batch_s: &[f64], first: usize, at: usize, end: usize) -> Option<usize> {
    if first < STEADY || at > end || end > batch_s.len() {
        return None;
    }
    let steady = median(&batch_s[first - STEADY..first]);
    (at..end.saturating_sub(WINDOW - 1))
        .find(|&k| median(&batch_s[k..k + WINDOW]) <= 1.1 * steady)
        .map(|k| k - at)
}

/// A batch's time as a fixed part plus a part proportional to its share of misses,
/// `time ≈ fixed + per_miss · (1 - hit)`, fitted by least squares over the batches whose time
/// is at most three times the median (a refresh's stall left out). `None` without two
/// batches of different hit rates.
pub fn time_model(batch_s: &[f64], hit: &[f64]) -> Option<(f64, f64)> {
    let cap = 3.0 * median(batch_s);
    let points: Vec<(f64, f64)> = batch_s
        .iter()
        .zip(hit)
        .filter(|&(&t, _)| t <= cap)
        .map(|(&t, &h)| (1.0 - h, t))
        .collect();
    line_fit(&points)
}

/// The least-squares line `y ≈ a + b·x` through `points` (`(x, y)`): `(a, b)`. `None` without
/// two points of different `x`.
pub fn line_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if points.len() < 2 || sxx <= 1e-12 {
        return None;
    }
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

/// The same as [`recovered_after`] for any tier, from the tier's own batches and the GPU's
/// count of their misses (`hit`, per batch): a lookup of a row never requested before
/// misses in every tier, so batch `k` of any tier misses at least the share
/// `1 − requested[k]` of its lookups, and the tier measured missed `requested[k] − hit[k]`
/// more. Taking those extra misses away at `per_miss` (a batch's time per unit of miss share,
/// at most) leaves `batch_s[k] − per_miss · max(0, requested[k] − hit[k])`: no tier with the
/// same gather does a batch faster. Any tier is back within 10% of its steady time (the same
/// times' median over the 8 batches before the first move) no sooner than those times are.
/// Unlike a line fitted over the run ([`time_model`]), it needs no model of how a batch's
/// time grows with its misses (the growth is not linear: a miss costs less the more of them
/// share the link), only a price for the few the tier missed beyond any tier. `None` as for
/// [`recovered_after`].
pub fn bound_by_excess(
    batch_s: &[f64],
    hit: &[f64],
    requested: &[f64],
    per_miss: f64,
    first: usize,
    at: usize,
    end: usize,
) -> Option<usize> {
    let len = batch_s.len().min(hit.len()).min(requested.len());
    let any: Vec<f64> = (0..len)
        .map(|k| batch_s[k] - per_miss.max(0.0) * (requested[k] - hit[k]).max(0.0))
        .collect();
    recovered_after(&any, first, at, end.min(len))
}

/// Batches after a move over which [`missed_beyond`] compares a tier with any tier: the
/// target's span.
pub const SPAN: usize = 20;

/// The share of the lookups of the [`SPAN`] batches from a move at `at` (fewer where the next
/// move or the end, `end`, comes first) that the tier missed beyond those of rows never
/// requested before, which every tier misses: the mean of `requested[k] − hit[k]`, the hit
/// rates the GPU's count. `None` without such batches.
pub fn missed_beyond(hit: &[f64], requested: &[f64], at: usize, end: usize) -> Option<f64> {
    let end = end.min(at + SPAN).min(hit.len()).min(requested.len());
    (at < end).then(|| (at..end).map(|k| requested[k] - hit[k]).sum::<f64>() / (end - at) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_takes_the_middle() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn a_recovery_is_the_first_window_back_within_ten_percent() {
        // Steady at 1.0 (one stalled batch among them does not move the median), slow after
        // the move at 8; the window from 11 has the median 1.025.
        let mut t = vec![1.0, 1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        t.extend([3.0, 2.5, 2.0, 1.5, 1.05, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(recovered_after(&t, 8, 8, t.len()), Some(3));
        // Not before the next move (at 13).
        assert_eq!(recovered_after(&t, 8, 8, 13), None);
        // A move after the recovery is back at once.
        assert_eq!(recovered_after(&t, 8, 13, t.len()), Some(0));
        // Never back.
        let mut slow = t[..8].to_vec();
        slow.extend([2.0; 10]);
        assert_eq!(recovered_after(&slow, 8, 8, slow.len()), None);
        // Fewer than 8 steady batches.
        assert_eq!(recovered_after(&t, 4, 4, t.len()), None);
    }

    #[test]
    fn the_time_model_fits_a_fixed_part_and_a_cost_per_miss() {
        // time = 0.1 + 0.5 (1 - hit), and one stalled batch the fit leaves out.
        let hit = [0.9, 0.9, 0.2, 0.2, 0.5, 0.6, 0.9];
        let mut t: Vec<f64> = hit.iter().map(|h| 0.1 + 0.5 * (1.0 - h)).collect();
        t[6] = 5.0;
        let (fixed, per_miss) = time_model(&t, &hit).expect("a fit");
        assert!((fixed - 0.1).abs() < 1e-9 && (per_miss - 0.5).abs() < 1e-9);
        assert_eq!(time_model(&[1.0, 2.0], &[0.5, 0.5]), None);
    }

    #[test]
    fn any_tier_is_the_tier_less_its_misses_beyond_the_rows_requested_before() {
        // Steady 0.1; after the move at 8 the tier misses 0.1 of its lookups beyond the rows
        // never requested before for 3 batches (at 0.5 a unit: 0.05 of each batch), then
        // none.
        let t: Vec<f64> = [0.1; 8]
            .into_iter()
            .chain([0.2, 0.16, 0.15, 0.14, 0.105, 0.1, 0.1, 0.1])
            .collect();
        let requested = vec![0.9; 16];
        let hit: Vec<f64> = (0..16)
            .map(|k| if (8..11).contains(&k) { 0.8 } else { 0.9 })
            .collect();
        // The tier: windows from 8 + k have medians 0.155, 0.145, 0.1225, 0.1025: k = 3.
        assert_eq!(recovered_after(&t, 8, 8, 16), Some(3));
        // Any tier: 0.15, 0.11, 0.1, 0.14, 0.105, ..: medians 0.125, 0.1075: k = 1.
        assert_eq!(
            bound_by_excess(&t, &hit, &requested, 0.5, 8, 8, 16),
            Some(1)
        );
        // Misses beyond any tier's free: the tier's own recovery.
        assert_eq!(
            bound_by_excess(&t, &hit, &requested, 0.0, 8, 8, 16),
            Some(3)
        );
        // A tier that hit more than the rows requested before (it cannot) is not made slower.
        let more = vec![0.95; 16];
        assert_eq!(
            bound_by_excess(&t, &more, &requested, 0.5, 8, 8, 16),
            Some(3)
        );
        assert_eq!(bound_by_excess(&t, &hit, &requested, 0.5, 4, 8, 16), None);
    }

    #[test]
    fn a_tier_misses_beyond_any_tier_by_its_hits_below_the_rows_requested_before() {
        let requested = [0.9, 0.9, 0.8, 0.85, 0.9];
        let hit = [0.88, 0.88, 0.7, 0.8, 0.89];
        // From the move at 2: (0.1 + 0.05 + 0.01) / 3.
        let m = missed_beyond(&hit, &requested, 2, 5).expect("batches");
        assert!((m - 0.16 / 3.0).abs() < 1e-12, "{m}");
        // Up to the next move only, and none past the end.
        let m = missed_beyond(&hit, &requested, 2, 3).expect("batches");
        assert!((m - 0.1).abs() < 1e-12, "{m}");
        assert_eq!(missed_beyond(&hit, &requested, 5, 9), None);
    }
}
