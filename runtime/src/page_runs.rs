//! Which host pages a context has registered for shared memory, and how many shared values
//! use each registered run of pages. The driver registers a page once: memory shared twice,
//! or two allocations that share a page (small Arrow arrays from one heap, slices of one
//! buffer), must reuse the registration that covers it, register only the pages no
//! registration covers, and unregister a run only when the last value using it goes.

use std::collections::BTreeMap;

/// One registration: pages `start..end` (bytes, page-aligned), at `device` for the GPU, used
/// by `refs` shared values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) end: u64,
    pub(crate) device: u64,
    refs: usize,
}

/// The registered runs of one context, by start address; runs never overlap.
#[derive(Debug, Default)]
pub(crate) struct PageRuns {
    runs: BTreeMap<u64, Run>,
}

impl PageRuns {
    /// The parts of `start..end` (page-aligned) that no run covers, in order.
    pub(crate) fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut gaps = Vec::new();
        let mut at = start;
        // The run that starts before `start` may reach into the range.
        let before = self.runs.range(..start).next_back();
        for (&s, r) in before.into_iter().chain(self.runs.range(start..end)) {
            if r.end <= at {
                continue;
            }
            if s > at {
                gaps.push((at, s.min(end)));
            }
            at = at.max(r.end);
            if at >= end {
                break;
            }
        }
        if at < end {
            gaps.push((at, end));
        }
        gaps
    }

    /// Record a registration of the gap `start..end` at `device`, used by nobody yet.
    pub(crate) fn insert(&mut self, start: u64, end: u64, device: u64) {
        self.runs.insert(
            start,
            Run {
                end,
                device,
                refs: 0,
            },
        );
    }

    /// The runs that overlap `start..end`, by start address.
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, Run)> {
        let before = self.runs.range(..start).next_back();
        before
            .into_iter()
            .chain(self.runs.range(start..end))
            .filter(|(_, r)| r.end > start)
            .map(|(&s, &r)| (s, r))
            .collect()
    }

    /// One more user of every run that overlaps `start..end`.
    pub(crate) fn acquire(&mut self, start: u64, end: u64) {
        for (s, _) in self.overlapping(start, end) {
            self.runs.get_mut(&s).expect("listed").refs += 1;
        }
    }

    /// One user fewer of every run that overlaps `start..end`; the starts of the runs nobody
    /// uses any more, which are forgotten (the caller unregisters them).
    pub(crate) fn release(&mut self, start: u64, end: u64) -> Vec<u64> {
        let mut free = Vec::new();
        for (s, _) in self.overlapping(start, end) {
            let r = self.runs.get_mut(&s).expect("listed");
            r.refs = r.refs.saturating_sub(1);
            if r.refs == 0 {
                self.runs.remove(&s);
                free.push(s);
            }
        }
        free
    }

    /// The run boundaries (starts and ends) strictly inside `start..end`, in order: where a
    /// copy over `start..end` must be cut so that each piece lies within one registration or
    /// outside all of them (the driver refuses a copy whose host range spans several
    /// registrations, or registered and unregistered pages).
    pub(crate) fn cuts(&self, start: u64, end: u64) -> Vec<u64> {
        let mut cuts = Vec::new();
        for (s, r) in self.overlapping(start, end) {
            for b in [s, r.end] {
                if b > start && b < end && cuts.last() != Some(&b) {
                    cuts.push(b);
                }
            }
        }
        cuts
    }

    /// Forget the runs nobody uses (registrations that a failed share made and then undid).
    pub(crate) fn drop_unused(&mut self) -> Vec<u64> {
        let free: Vec<u64> = self
            .runs
            .iter()
            .filter(|(_, r)| r.refs == 0)
            .map(|(&s, _)| s)
            .collect();
        for s in &free {
            self.runs.remove(s);
        }
        free
    }
}

#[cfg(test)]
mod tests {
    use super::PageRuns;

    const P: u64 = 4096;

    #[test]
    fn shared_pages_are_registered_once_and_freed_with_their_last_user() {
        let mut runs = PageRuns::default();
        // A value over pages 1..3.
        assert_eq!(runs.gaps(P, 3 * P), vec![(P, 3 * P)]);
        runs.insert(P, 3 * P, P);
        runs.acquire(P, 3 * P);
        // A second value over pages 2..5: page 2 is covered, 3..5 is a gap.
        assert_eq!(runs.gaps(2 * P, 5 * P), vec![(3 * P, 5 * P)]);
        runs.insert(3 * P, 5 * P, 3 * P);
        runs.acquire(2 * P, 5 * P);
        // A third inside the first run: nothing to register.
        assert!(runs.gaps(P, 2 * P).is_empty());
        runs.acquire(P, 2 * P);
        // Gaps on both sides of a run, and one between two.
        assert_eq!(runs.gaps(0, 6 * P), vec![(0, P), (5 * P, 6 * P)]);
        runs.insert(7 * P, 8 * P, 7 * P);
        assert_eq!(
            runs.gaps(4 * P, 10 * P),
            vec![(5 * P, 7 * P), (8 * P, 10 * P)]
        );
        assert_eq!(runs.drop_unused(), vec![7 * P]);
        assert_eq!(runs.overlapping(2 * P, 4 * P).len(), 2);

        // The first value goes: its runs are still used.
        assert!(runs.release(P, 3 * P).is_empty());
        // The third: the second value still uses page 2 of the first run.
        assert!(runs.release(P, 2 * P).is_empty());
        // The second: both runs are free.
        assert_eq!(runs.release(2 * P, 5 * P), vec![P, 3 * P]);
        assert!(runs.runs.is_empty());
    }

    #[test]
    fn copies_are_cut_where_registrations_begin_and_end() {
        let mut runs = PageRuns::default();
        assert!(runs.cuts(0, 10 * P).is_empty(), "nothing registered");
        runs.insert(P, 3 * P, P);
        runs.insert(3 * P, 5 * P, 3 * P);
        runs.insert(7 * P, 8 * P, 7 * P);
        // Inside one run: one piece.
        assert!(runs.cuts(P + 10, 3 * P).is_empty());
        // Across two adjacent runs: cut where they meet.
        assert_eq!(runs.cuts(2 * P + 1, 4 * P), vec![3 * P]);
        // From unregistered memory into a run, across a gap and into another run.
        assert_eq!(runs.cuts(100, 7 * P + 5), vec![P, 3 * P, 5 * P, 7 * P]);
        // Starting inside a run and ending past it.
        assert_eq!(runs.cuts(4 * P, 9 * P), vec![5 * P, 7 * P, 8 * P]);
    }
}
