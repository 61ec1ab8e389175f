//! A refresh's ranking on a thread of its own: what it is given, what it gives back, and the
//! gate that holds it ([`HotTier::__hold_refreshes`](super::HotTier::__hold_refreshes)).

use super::counter::{CountBack, Counter};
use super::host::beside_gathers;
use super::lists::{PINNED_LIST_MAX, PlanLists};
use super::miss_log::{MissLog, Regrant, Untaken};
use super::policy::{Plan, Policy};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::own_kernels::NOT_RESIDENT;
use std::sync::{Arc, Mutex};

/// What a ranking thread is given: the policy's state and the log to read.
pub(super) struct Job {
    /// The policy, or where to take it back from (taken when the job runs).
    pub(super) policy: Option<Source>,
    /// Ids counted since the policy was last given the ids to count, added before it ranks.
    pub(super) counted: Vec<u32>,
    /// Places each log has at least ([`HotTier::capture_room`](super::HotTier::capture_room)).
    pub(super) room: usize,
    /// The logs to read and settle, in the order they were filled.
    pub(super) logs: Vec<MissLog>,
    /// The tier's lists, to write the plan's into.
    pub(super) lists: PlanLists,
    pub(super) gpu: Gpu,
    /// Places of a miss log at most, and of its buffers.
    pub(super) log_len: usize,
    pub(super) log_places: usize,
    pub(super) gate: Option<Arc<Gate>>,
}

/// Where a ranking takes the policy from.
pub(super) enum Source {
    Here(Box<Policy>),
    /// The counting thread, once it has counted the ids it was given.
    Counter(Arc<Mutex<CountBack>>),
}

/// What a ranking thread gives back.
pub(super) struct Ranked {
    /// The policy (`None` when the counting thread that had it panicked or ended).
    pub(super) policy: Option<Box<Policy>>,
    /// The logs, as they were (the tier empties them once the plan is applied), or, with a
    /// plan, the two to grant its slots to.
    pub(super) logs: Vec<MissLog>,
    pub(super) lists: PlanLists,
    /// The plan, or why a log could not be read (the policy then untouched, but for the
    /// counted ids added).
    pub(super) plan: Result<Plan>,
}

impl Job {
    /// Wait at the gate, if any, add the counted ids, read the logs, then rank (adding and
    /// ranking on the host's threads for work beside the gathers, [`beside_gathers`]; the
    /// waits outside it, so that the counting thread can finish in that pool).
    pub(super) fn run(mut self) -> Ranked {
        if let Some(gate) = &self.gate {
            gate.wait();
        }
        let started = std::time::Instant::now();
        let mut policy = match self.policy.take() {
            Some(Source::Here(policy)) => policy,
            Some(Source::Counter(back)) => match Counter::take(&back) {
                Some(Ok(policy)) => policy,
                _ => {
                    return Ranked {
                        policy: None,
                        logs: self.logs,
                        lists: self.lists,
                        plan: Err(Error::Usage(
                            "a hot tier's counting thread panicked: the tier refreshes no more"
                                .into(),
                        )),
                    };
                }
            },
            None => unreachable!("a job runs once"),
        };
        let taken = started.elapsed();
        policy.spare.clear();
        beside_gathers(|| policy.add_all(&self.counted));
        let start = std::time::Instant::now();
        let (room, log_len, log_places) = (self.room, self.log_len, self.log_places);
        policy.log_len = log_len;
        // The logs granted places again: the last two filled of the buffers asked for, the
        // gathers' log until now staying theirs from the plan on, the one before it theirs
        // while the next ranking runs. With room for captures, they keep the places no
        // gather took, unless the last plan lacked free slots for rows it chose (a tier of
        // few slots, whose logs' free places may be all it has); the others are let go.
        let targets: Vec<usize> = (0..self.logs.len())
            .rev()
            .filter(|&i| self.logs[i].log.len() == log_places && log_len > 0)
            .take(2)
            .collect();
        let mut plan = self
            .logs
            .iter()
            .enumerate()
            .map(|(i, log)| log.read(room > 0 && targets.contains(&i) && !policy.starved))
            .collect::<Result<Vec<_>>>()
            .map(|logged| {
                let log_read = start.elapsed();
                let mut kept = [0; 2];
                for (kept, &i) in kept.iter_mut().zip(&targets) {
                    if let Untaken::Kept(k) = logged[i].untaken {
                        *kept = k;
                    }
                }
                // With room, the free slots among the places each log keeps (a sequential
                // pass over the host's list of its kept places): the plan limits them.
                policy.kept_free = [0; 2];
                for (t, &i) in targets.iter().enumerate().take(2).filter(|_| room > 0) {
                    let log = &self.logs[i];
                    let (n, limit) = (log.start + logged[i].ids.len(), log.limit());
                    policy.kept_free[t] = if log.evicts.is_empty() {
                        limit.saturating_sub(n)
                    } else {
                        log.evicts[n.min(limit)..limit]
                            .iter()
                            .filter(|&&v| v == NOT_RESIDENT)
                            .count()
                    };
                }
                let mut plan = beside_gathers(|| policy.plan(&logged, kept, room, log_read));
                plan.log_places = log_places;
                // The places the plan adds to each, after those it keeps.
                let grants = std::mem::take(&mut plan.grants);
                for (t, (granted, evicts)) in grants.into_iter().enumerate() {
                    let r = match targets.get(t) {
                        Some(&i) if matches!(logged[i].untaken, Untaken::Kept(_)) => {
                            let log = &self.logs[i];
                            log.regrant(log.start + logged[i].ids.len(), granted, evicts)
                        }
                        _ => Regrant::fresh(granted, evicts),
                    };
                    plan.regrants.push(r);
                }
                plan
            });
        if plan.is_ok() {
            // The logs granted places first, in order; the others go.
            let mut logs: Vec<Option<MissLog>> = self.logs.drain(..).map(Some).collect();
            self.logs = targets.iter().filter_map(|&i| logs[i].take()).collect();
        }
        if let Ok(plan) = &mut plan {
            // The plan's lists go into pinned memory here, so that the thread that applies
            // it only queues their copies; where that fails, that thread writes them.
            let written = std::time::Instant::now();
            plan.written = self.write(plan).is_ok();
            plan.write = written.elapsed();
            plan.add = start - started;
            tracing::debug!(
                counts_back_us = taken.as_micros(),
                add_us = (plan.add - taken).as_micros(),
                log_read_us = plan.log_read.as_micros(),
                policy_us = plan.policy.as_micros(),
                write_us = plan.write.as_micros(),
                logged = plan.logged,
                candidates = plan.candidates,
                "hot tier ranked"
            );
        }
        Ranked {
            policy: Some(policy),
            logs: self.logs,
            lists: self.lists,
            plan,
        }
    }

    /// Write the plan's lists into the pinned memory of the tier's lists and of the two logs
    /// its slots are granted to (the logs read that are granted places again, emptied of
    /// those taken by the tier once the plan is applied; new ones where there are fewer than
    /// two).
    pub(super) fn write(&mut self, plan: &Plan) -> Result<()> {
        let (gpu, max) = (&self.gpu, PINNED_LIST_MAX);
        self.lists.fill.0.write(gpu, &plan.fill_ids, max)?;
        self.lists.fill.1.write(gpu, &plan.fill_dst, max)?;
        self.lists.update.0.write(gpu, &plan.update_ids, max)?;
        self.lists.update.1.write(gpu, &plan.update_vals, max)?;
        while self.logs.len() < 2 {
            self.logs.push(MissLog::new(gpu, self.log_places)?);
        }
        for (log, r) in self.logs.iter_mut().zip(&plan.regrants) {
            log.grant.write(gpu, &r.grant.1, max)?;
            if !r.evict.1.is_empty() {
                log.evict.write(gpu, &r.evict.1, max)?;
            }
        }
        Ok(())
    }
}

/// A gate a ranking thread waits at until it is opened ([`HotTier::__hold_refreshes`](super::HotTier::__hold_refreshes)).
#[derive(Default)]
pub(super) struct Gate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Gate {
    pub(super) fn wait(&self) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn open(&self) {
        *self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.opened.notify_all();
    }
}

/// Holds the rankings of a [`HotTier`](super::HotTier)'s refreshes until released or dropped
/// ([`HotTier::__hold_refreshes`](super::HotTier::__hold_refreshes)).
#[doc(hidden)]
pub struct RefreshHold {
    pub(super) gate: Arc<Gate>,
}

impl RefreshHold {
    /// Let the held rankings run.
    pub fn release(self) {}
}

impl Drop for RefreshHold {
    fn drop(&mut self) {
        self.gate.open();
    }
}

/// A ranking on its thread. Dropping it (with the tier) opens its gate and waits for the
/// thread to end (a ranking at most, and the gathers before it, whose log it reads), so that
/// the log's device buffers and the host's records are freed with the tier.
pub(super) struct Worker {
    pub(super) handle: Option<std::thread::JoinHandle<Option<Ranked>>>,
    /// The gate the thread may wait at, opened when the tier lets go of the thread.
    pub(super) gate: Option<Arc<Gate>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(gate) = &self.gate {
            gate.open();
        }
        if let Some(handle) = self.handle.take() {
            // A panic of the ranking is not passed on from a drop.
            drop(handle.join());
        }
    }
}
