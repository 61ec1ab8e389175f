//! The ranking policy: the host's records of the tier's slots and the counts, and the plans it
//! makes (which rows to admit and evict, and where).

use super::host::{
    PREFETCH_AHEAD, atomic_bits, atomic_view, bit, huge_vec, prefetch, set_bit, set_bits_together,
};
use super::miss_log::{Logged, MissLog, Regrant, Untaken};
use super::stats::Refresh;
use crate::own_kernels::NOT_RESIDENT;
use std::sync::atomic::Ordering;

/// With room for captures, a log holds free places up to twice the places the gathers took
/// in its role since the last ranking, and at least this many.
const FREE_PLACES_MIN: usize = 1 << 12;

/// Ids per row range of [`Policy::add_all`]: fewer than two ranges' worth are added in order
/// on the calling thread.
pub(super) const ADD_PER_SHARD: usize = 512;

/// The most row ranges [`Policy::add_all`] splits ids into (more than the host's threads, so
/// that the ranges a skewed law reads most are spread over them).
pub(super) const ADD_SHARDS: usize = 256;

/// Slots one of the host's threads looks at together when [`Policy::condemn`] searches for
/// cold rows.
const CONDEMN_CHUNK: usize = 1 << 12;

/// Free slots from which a refresh sets some apart for the rows the gathers miss while the
/// next ranking runs ([`Policy::grant`]).
pub(super) const SPLIT_MIN: usize = 1 << 14;

/// The host's records of the tier's slots and the counts: what the ranking reads and
/// writes, owned by the thread that ranks.
pub(super) struct Policy {
    pub(super) capacity: usize,
    /// Places of a miss log: the most slots granted to one.
    pub(super) log_len: usize,
    /// Free slots from which a plan sets some apart for the gathers while the next ranking
    /// runs.
    pub(super) split_min: usize,
    /// Decayed reads of each row.
    pub(super) counts: Vec<u32>,
    /// The rows whose count is not zero.
    pub(super) touched: Vec<u32>,
    /// One bit per row, set while the row is resident once the plans made so far are
    /// applied.
    pub(super) bits: Vec<u64>,
    /// The row in each slot, or [`NOT_RESIDENT`].
    pub(super) resident: Vec<u32>,
    /// Slots holding no row that no slot table the device has or will have names (once the
    /// last plan is applied): the fill writes only these.
    pub(super) free: Vec<u32>,
    /// Slots granted to miss logs and not yet given back by a plan that settled them: the
    /// gathers' captures may have filled them.
    pub(super) reserved: usize,
    /// Where the search for rows to evict starts: a slot.
    hand: usize,
    /// Of the places the two logs granted again keep, those whose slots are free (set by the
    /// ranking before each plan; with room for captures, a log's free places are limited).
    pub(super) kept_free: [usize; 2],
    /// With room for captures, the free places a log may hold at least
    /// ([`FREE_PLACES_MIN`]).
    pub(super) free_min: usize,
    /// Whether the last plan left out rows it chose to admit for want of free slots (every
    /// resident row it could evict being chosen too): with room for captures, the next
    /// ranking then lets the logs' untaken places go, so that the free slots they kept go to
    /// those rows.
    pub(super) starved: bool,
    /// One bit per slot, set while the slot is granted to a miss log with the row it holds
    /// ([`Policy::condemn`]): the row stays resident (no plan evicts it or moves it) until
    /// the capture that takes the place evicts it on the device, and the plan that settles
    /// the log learns which.
    pub(super) condemned: Vec<u64>,
    /// Slots whose rows a capture admitted (with room for captures), oldest first, with
    /// those rows, as many as two logs' places at most: the first victims for the next
    /// places, unless read since.
    pub(super) probation: std::collections::VecDeque<(u32, u32)>,
    /// One bit per row, set when the row is counted and cleared when it is admitted or the
    /// hand passes its slot: a resident row counted since (counts decay at every refresh,
    /// far sooner than the hand comes round) is passed over once, as a clock's reference bit
    /// does.
    pub(super) referenced: Vec<u64>,
    /// One bit per row, all clear between calls: the members of a set being built.
    mark: Vec<u64>,
    /// The tier's residency before the last plan was applied, given back by its apply (empty
    /// before the first), and that plan's slot table update (rows and entries).
    pub(super) shadow: Vec<u64>,
    last_update: (Vec<u32>, Vec<u32>, Vec<u32>),
    /// Vectors the batch loop's thread is done with (an applied plan's lists, the grants
    /// its logs had), freed by the next ranking on its own thread: freeing a large vector
    /// unmaps its pages, which interrupts every core that ran the process.
    pub(super) spare: Vec<Vec<u32>>,
}

/// What a ranking decided: the kernels to queue, and what they change.
pub(super) struct Plan {
    /// Rows to copy from the table, and their slots.
    pub(super) fill_ids: Vec<u32>,
    pub(super) fill_dst: Vec<u32>,
    /// Slot table entries to write, and their values.
    pub(super) update_ids: Vec<u32>,
    pub(super) update_vals: Vec<u32>,
    pub(super) refresh: Refresh,
    pub(super) logged: usize,
    pub(super) displaced: usize,
    pub(super) candidates: usize,
    pub(super) log_read: std::time::Duration,
    pub(super) policy: std::time::Duration,
    /// The slots the policy grants to places added to the gathers' log from the plan on,
    /// and to their log while the next ranking runs, each with the rows those slots hold, one
    /// per place ([`NOT_RESIDENT`] for a free slot; empty where every slot is free).
    pub(super) grants: [(Vec<u32>, Vec<u32>); 2],
    /// How those two logs are granted their places (the ranking's thread makes them from
    /// `grants`).
    pub(super) regrants: Vec<Regrant>,
    /// The places of the buffers of the logs made for it.
    pub(super) log_places: usize,
    /// The logs the ranking read that are granted places again, in that order.
    pub(super) logs: Vec<MissLog>,
    /// The host's residency once the plan is applied (one bit per row), for the tier.
    pub(super) bits: Vec<u64>,
    /// Whether the ranking's thread wrote the lists and grants into pinned memory.
    pub(super) written: bool,
    /// How long the ranking's thread took to add the counted ids it was given, and to write
    /// the lists.
    pub(super) add: std::time::Duration,
    pub(super) write: std::time::Duration,
    /// Whether the fill is queued.
    pub(super) filled: bool,
    /// Whether the slot table update is queued.
    pub(super) updated: bool,
}

impl Policy {
    pub(super) fn new(capacity: usize, rows: usize, log_len: usize) -> Policy {
        let rows = if capacity == 0 { 0 } else { rows };
        let free: Vec<u32> = (0..capacity as u32).rev().collect();
        Policy {
            capacity,
            log_len,
            split_min: SPLIT_MIN,
            counts: huge_vec(rows, 0),
            touched: Vec::new(),
            bits: huge_vec(rows.div_ceil(64), 0),
            resident: vec![NOT_RESIDENT; capacity],
            free,
            reserved: 0,
            hand: 0,
            kept_free: [0; 2],
            free_min: FREE_PLACES_MIN,
            starved: false,
            condemned: vec![0; capacity.div_ceil(64)],
            probation: std::collections::VecDeque::new(),
            referenced: huge_vec(rows.div_ceil(64), 0),
            mark: huge_vec(rows.div_ceil(64), 0),
            shadow: Vec::new(),
            last_update: (Vec::new(), Vec::new(), Vec::new()),
            spare: Vec::new(),
        }
    }

    /// Grant free slots to two miss logs, the gathers' until the next ranking begins and
    /// (with `side`) theirs while it runs, which hold `kept` places already: up to `log_len`
    /// places each, the free slots split evenly between them when there are fewer; with fewer
    /// than `split_min` free slots, all to the first (a tier that small has few misses to log
    /// while a ranking runs).
    pub(super) fn grant(&mut self, side: bool, kept: [usize; 2]) -> [Vec<u32>; 2] {
        let len = self.log_len;
        self.grant_by(side, kept, [len, len])
    }

    /// [`grant`](Policy::grant), each log's places (those it keeps and the free slots
    /// granted) up to `most` of it rather than a log's length.
    fn grant_by(&mut self, side: bool, kept: [usize; 2], most: [usize; 2]) -> [Vec<u32>; 2] {
        let free = self.free.len();
        let most = most.map(|m| m.min(self.log_len));
        let side = if side && free >= self.split_min {
            (free / 2).min(most[1].saturating_sub(kept[1]))
        } else {
            0
        };
        let side = self.free.split_off(free - side);
        let main = self.free.len().min(most[0].saturating_sub(kept[0]));
        let main = self.free.split_off(self.free.len() - main);
        self.reserved += main.len() + side.len();
        [main, side]
    }

    /// Add places to the two logs granted `grants` (the first's first), which hold `kept`
    /// places already, each up to `room` places (and the log's length): the slots of
    /// resident rows counted 0 that the clock's hand finds unreferenced (each passed once if
    /// referenced, the bit looked at first), not already condemned. Each is condemned with
    /// its row, which stays resident. For each log, the rows its new places' slots hold, one
    /// per place ([`NOT_RESIDENT`] for the free ones), or none where no place was added. The
    /// hand looks at the slots a window at a time, each window by the host's threads
    /// together, and at most once round the tier; a log keeps the places no capture took, so
    /// it looks for about as many rows as the captures took.
    pub(super) fn condemn(
        &mut self,
        grants: [&mut Vec<u32>; 2],
        kept: [usize; 2],
        room: usize,
    ) -> [Vec<u32>; 2] {
        let mut wants = [0; 2];
        for ((want, granted), kept) in wants.iter_mut().zip(&grants).zip(kept) {
            *want = room.min(self.log_len).saturating_sub(kept + granted.len());
        }
        let want = wants[0] + wants[1];
        if want == 0 || self.capacity == 0 {
            return [Vec::new(), Vec::new()];
        }
        use rayon::prelude::*;
        let capacity = self.capacity;
        let (counts, resident) = (&self.counts, &self.resident);
        let referenced = atomic_bits(&mut self.referenced);
        let mut looked = 0;
        let mut found: Vec<(u32, u32)> = Vec::new();
        // Rows admitted by captures and not read since go first, oldest first: a row the law
        // reads once then takes the place of another such row, not of a row it reads now and
        // then. Those read since leave the list (the hand passes them as it does any row).
        while found.len() < want {
            let Some((s, id)) = self.probation.pop_front() else {
                break;
            };
            if resident[s as usize] != id || bit(&self.condemned, s) {
                continue;
            }
            let read = referenced[id as usize / 64].load(Ordering::Relaxed) & (1u64 << (id % 64));
            if read == 0 && counts[id as usize] == 0 {
                // Condemned at once, so that the hand below passes it.
                set_bit(&mut self.condemned, s, true);
                found.push((s, id));
            }
        }
        while found.len() < want && looked < capacity {
            let short = want - found.len();
            let window = (short + short / 4)
                .max(CONDEMN_CHUNK)
                .min(capacity - looked);
            let start = (self.hand + looked) % capacity;
            let condemned = &self.condemned;
            // Slots `start..start + window`, round the tier.
            let taken: Vec<Vec<(u32, u32)>> = (0..window.div_ceil(CONDEMN_CHUNK))
                .into_par_iter()
                .map(|c| {
                    let mut taken = Vec::new();
                    let end = ((c + 1) * CONDEMN_CHUNK).min(window);
                    for i in c * CONDEMN_CHUNK..end {
                        if i + PREFETCH_AHEAD < end {
                            let id = resident[(start + i + PREFETCH_AHEAD) % capacity];
                            if id != NOT_RESIDENT {
                                prefetch(referenced, id as usize / 64);
                                prefetch(counts, id as usize);
                            }
                        }
                        let s = (start + i) % capacity;
                        let id = resident[s];
                        if id == NOT_RESIDENT || bit(condemned, s as u32) {
                            continue;
                        }
                        // Passed once if referenced (the bit cleared only where set: most
                        // are clear, and a load costs less than an atomic write).
                        let (word, mask) = (&referenced[id as usize / 64], 1u64 << (id % 64));
                        if word.load(Ordering::Relaxed) & mask != 0 {
                            word.fetch_and(!mask, Ordering::Relaxed);
                        } else if counts[id as usize] == 0 {
                            taken.push((s as u32, id));
                        }
                    }
                    taken
                })
                .collect();
            looked += window;
            for t in taken {
                found.extend_from_slice(&t);
            }
        }
        found.truncate(want);
        self.hand = (self.hand + looked) % capacity;
        for &(s, _) in &found {
            set_bit(&mut self.condemned, s, true);
        }
        let mut found = found.into_iter();
        let mut evicts = [Vec::new(), Vec::new()];
        for ((granted, want), evicts) in grants.into_iter().zip(wants).zip(&mut evicts) {
            let places = granted.len();
            for (s, id) in found.by_ref().take(want) {
                granted.push(s);
                evicts.push(id);
            }
            if !evicts.is_empty() {
                // One per place: the free slots first.
                evicts.splice(0..0, std::iter::repeat_n(NOT_RESIDENT, places));
            }
        }
        evicts
    }

    /// Count one more read of each row of `ids` ([`add`](Policy::add) for each, in any
    /// order). Each id is a random access into arrays of one entry per row, far larger than
    /// the caches, which one thread waits for about as long as a batch takes: the ids are
    /// split by row range, the ranges added by the host's threads together (a few ids in
    /// order on this thread), each id's entries fetched some ids ahead.
    pub(super) fn add_all(&mut self, ids: &[u32]) {
        let shards = (ids.len() / ADD_PER_SHARD).min(ADD_SHARDS);
        if shards < 2 || self.counts.len() < 64 * shards {
            for (i, &id) in ids.iter().enumerate() {
                if let Some(&next) = ids.get(i + PREFETCH_AHEAD) {
                    prefetch(&self.counts, next as usize);
                    prefetch(&self.referenced, next as usize / 64);
                }
                self.add(id);
            }
            return;
        }
        use rayon::prelude::*;
        // Whole words of `referenced` per shard.
        let shard = self.counts.len().div_ceil(shards).next_multiple_of(64);
        let mut buckets = vec![Vec::new(); self.counts.len().div_ceil(shard)];
        for &id in ids {
            buckets[id as usize / shard].push(id);
        }
        let touched: Vec<Vec<u32>> = self
            .counts
            .par_chunks_mut(shard)
            .zip(self.referenced.par_chunks_mut(shard / 64))
            .zip(buckets.par_iter())
            .enumerate()
            .map(|(b, ((counts, referenced), ids))| {
                let base = (b * shard) as u32;
                let mut touched = Vec::new();
                for (i, &id) in ids.iter().enumerate() {
                    if let Some(&next) = ids.get(i + PREFETCH_AHEAD) {
                        prefetch(counts, (next - base) as usize);
                        prefetch(referenced, (next - base) as usize / 64);
                    }
                    let local = id - base;
                    let c = &mut counts[local as usize];
                    if *c == 0 {
                        touched.push(id);
                    }
                    *c = c.saturating_add(1);
                    set_bit(referenced, local, true);
                }
                touched
            })
            .collect();
        for t in touched {
            self.touched.extend_from_slice(&t);
        }
    }

    /// Count one more read of row `id`, noting it in `touched` if it was counted 0, and
    /// mark it referenced.
    pub(super) fn add(&mut self, id: u32) {
        let c = &mut self.counts[id as usize];
        if *c == 0 {
            self.touched.push(id);
        }
        *c = c.saturating_add(1);
        set_bit(&mut self.referenced, id, true);
    }

    /// Rank the counted rows and settle the logged ones (`logs`, in the order they were
    /// filled: each row in the slot granted to its place, copied there by the gathers'
    /// captures if `captured`, each of which evicted the row its slot held), choose the rows
    /// to admit and evict and their slots, grant the free slots to the next gathers' logs,
    /// which keep `keeps` places (and the slots of cold rows, up to `room` places a log:
    /// [`condemn`](Policy::condemn)), and halve every count. Host work only: the plan's kernels are queued by the tier.
    pub(super) fn plan(
        &mut self,
        logs: &[Logged],
        keeps: [usize; 2],
        room: usize,
        log_read: std::time::Duration,
    ) -> Plan {
        let start = std::time::Instant::now();
        // The logged rows: each is in the slot granted to its place in its log (the gathers'
        // captures copied it there and named it in the slot table, or the fill does when a
        // capture was not queued). The slots granted to places not taken are free again, and
        // so are those of rows resident already (admitted by a plan made while their log was
        // filled, in another slot, which the device's slot table names since). Gathers may
        // have read these slots, but every one of them is queued before this plan's fill,
        // the first work to write them.
        let mut logged = Vec::new();
        let mut granted = Vec::new();
        let mut uncaptured = std::collections::HashSet::new();
        // The rows the captures evicted from the slots granted with them (a condemned row
        // stays in its slot until then, so its entry named the slot), and whether their
        // log's captures all ran (else the device may still name them).
        let mut left = Vec::new();
        for log in logs {
            let n = log.ids.len().min(log.granted.len());
            // Each place taken: a free slot, reserved until now, or a cold row's, whose row
            // its capture evicted (settled before the rows the log names, of which a later
            // one may be that row, logged again). Each row's words are fetched some places
            // ahead: random reads into per-row and per-slot arrays far larger than the caches.
            for (i, &s) in log.granted[..n].iter().enumerate() {
                if let (Some(&victim), Some(&ahead)) = (
                    log.evicts.get(i + PREFETCH_AHEAD),
                    log.granted.get(i + PREFETCH_AHEAD),
                ) && victim != NOT_RESIDENT
                {
                    prefetch(&self.bits, victim as usize / 64);
                    prefetch(&self.resident, ahead as usize);
                }
                match log.evicts.get(i) {
                    Some(&victim) if victim != NOT_RESIDENT => {
                        set_bit(&mut self.condemned, s, false);
                        set_bit(&mut self.bits, victim, false);
                        self.resident[s as usize] = NOT_RESIDENT;
                        left.push((victim, log.captured));
                    }
                    _ => self.reserved -= 1,
                }
            }
            // The places no gather took stay with their log, or, let go, leave a free slot
            // free again and a cold row resident, no longer condemned.
            if let Untaken::LetGo(granted, evicts) = &log.untaken {
                for (i, &s) in granted.iter().enumerate() {
                    match evicts.get(i) {
                        Some(&victim) if victim != NOT_RESIDENT => {
                            set_bit(&mut self.condemned, s, false);
                        }
                        _ => {
                            self.reserved -= 1;
                            self.free.push(s);
                        }
                    }
                }
            }
            for (i, (&id, &s)) in log.ids[..n].iter().zip(&log.granted).enumerate() {
                if let Some(&next) = log.ids[..n].get(i + PREFETCH_AHEAD) {
                    prefetch(&self.bits, next as usize / 64);
                }
                if bit(&self.bits, id) {
                    self.free.push(s);
                    continue;
                }
                // Resident from here on (unless given up below, for a counted row).
                set_bit(&mut self.bits, id, true);
                logged.push(id);
                granted.push(s);
                if !log.captured {
                    uncaptured.insert(id);
                }
            }
        }
        let logged = &logged[..];
        // The rows the policy keeps: the counted most, resident first among equals (a
        // logged row they name keeps its slot).
        let counts = &self.counts;
        let bits = &self.bits;
        let rank = |&id: &u32| (std::cmp::Reverse(counts[id as usize]), !bit(bits, id), id);
        // Each row's rank is read once (two random reads into per-row arrays far larger than
        // the caches), by the host's threads together: the sorts below compare the keys.
        use rayon::prelude::*;
        let mut ranked: Vec<_> = self.touched.par_iter().map(|id| (rank(id), *id)).collect();
        if ranked.len() > self.capacity {
            ranked.select_nth_unstable(self.capacity - 1);
            ranked.truncate(self.capacity);
        }
        let chosen: Vec<u32> = ranked.iter().map(|&(_, id)| id).collect();
        // Not resident: the second key is `!bit(bits, id)`. In no order: where the free slots
        // are too few for all of them, the most counted are found when it is known (below).
        ranked.retain(|&((_, out, _), _)| out);
        let mut admit = ranked;
        // The counted rows come first: where the free slots are too few for them, logged rows
        // the policy did not choose give theirs up, the least counted first. Their slots are
        // free at once: the gathers that may have read them are queued before this plan's
        // fill, and the slot table update after it names them no more. (The chosen rows are
        // marked only where there are logged rows to tell apart and the free slots are too few
        // for the rows to admit: each mark is a random write, made by the host's threads
        // together.)
        let over = admit.len().saturating_sub(self.free.len());
        let with_logged = !logged.is_empty() && over > 0;
        if with_logged {
            set_bits_together(&mut self.mark, &chosen, true);
        }
        let mark = &self.mark;
        // Each logged row's keys, read once (a random read of its mark, count and residency),
        // by the host's threads together: the order "chosen rows first, then the others from
        // most to least counted", which tells the rows that give their slots up.
        let keyed: Option<Vec<_>> = with_logged.then(|| {
            logged
                .par_iter()
                .copied()
                .zip(granted.par_iter().copied())
                .map(|(id, s)| ((!bit(mark, id), rank(&id)), id, s))
                .collect()
        });
        let unchosen = keyed
            .as_ref()
            .map_or(0, |k| k.iter().filter(|((out, _), _, _)| *out).count());
        let displace = over.min(unchosen);
        let kept = logged.len() - displace;
        // The logged rows with their slots, those that keep them first. When every one keeps
        // its slot (free slots enough for the counted rows), in the log's order; else the
        // `displace` last of that order give theirs up (the order found only where it
        // splits).
        let pairs: Vec<(u32, u32)> = match keyed {
            Some(mut keyed) if displace > 0 => {
                keyed.select_nth_unstable(kept);
                keyed.into_iter().map(|(_, id, s)| (id, s)).collect()
            }
            _ => logged
                .iter()
                .copied()
                .zip(granted.iter().copied())
                .collect(),
        };
        if with_logged {
            set_bits_together(&mut self.mark, &chosen, false);
        }
        let mut ids = Vec::with_capacity(2 * logged.len());
        let mut vals = Vec::with_capacity(ids.capacity());
        for (i, &(id, s)) in pairs[..kept].iter().enumerate() {
            if let Some(&(next, slot)) = pairs[..kept].get(i + PREFETCH_AHEAD) {
                prefetch(&self.referenced, next as usize / 64);
                prefetch(&self.resident, slot as usize);
            }
            set_bit(&mut self.referenced, id, false);
            self.resident[s as usize] = id;
            ids.push(id);
            vals.push(s);
        }
        if room > 0 {
            self.probation
                .extend(pairs[..kept].iter().map(|&(id, s)| (s, id)));
            // As many as two logs' places: the most one refresh grants.
            let over = self.probation.len().saturating_sub(2 * self.log_len);
            self.probation.drain(..over);
        }
        for &(id, s) in &pairs[kept..] {
            set_bit(&mut self.bits, id, false);
            self.free.push(s);
            ids.push(id);
            vals.push(NOT_RESIDENT);
        }
        let (mut fill_ids, mut fill_dst): (Vec<u32>, Vec<u32>) = if uncaptured.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            pairs[..kept]
                .iter()
                .copied()
                .filter(|(id, _)| uncaptured.contains(id))
                .unzip()
        };
        let (counts, bits) = (&self.counts, &self.bits);
        // Room: resident rows not kept leave, rows counted 0 first, as many as the free slots
        // lack; their slots are refilled from the next refresh on. Rows whose slots are
        // granted to a log (condemned) stay.
        let must = admit.len().saturating_sub(self.free.len());
        let short = must;
        let mut evict = Vec::new();
        if short > 0 {
            // The logged rows just settled stay (the gathers have only now asked for them),
            // and so do the chosen rows that are resident: every one of those is counted, so
            // the hand, which takes only rows counted 0, passes them anyway; they are marked
            // only where the least counted rows must leave too.
            let stay: Vec<u32> = pairs[..kept].iter().map(|&(id, _)| id).collect();
            for &id in &stay {
                set_bit(&mut self.mark, id, true);
            }
            let resident = &self.resident;
            // Rows counted 0 first, found by a hand that goes round the slots from where it
            // stopped last time: with a large tier nearly every resident row is one, so this
            // looks at about as many slots as rows leave, not at every slot. A row counted
            // since it was admitted or the hand last passed it stays this time (its mark
            // cleared): rows read again while resident outlive rows read once, as in a clock.
            let capacity = self.capacity;
            let referenced = &mut self.referenced;
            let mut looked = 0;
            let (mark, condemned) = (&self.mark, &self.condemned);
            while evict.len() < short && looked < capacity {
                let s = (self.hand + looked) % capacity;
                looked += 1;
                let id = resident[s];
                if id != NOT_RESIDENT
                    && counts[id as usize] == 0
                    && !bit(mark, id)
                    && !bit(condemned, s as u32)
                {
                    if bit(referenced, id) {
                        set_bit(referenced, id, false);
                    } else {
                        evict.push(s as u32);
                    }
                }
            }
            self.hand = (self.hand + looked) % capacity;
            if evict.len() < must {
                // Then the least counted of the others.
                let chosen_resident: Vec<u32> =
                    chosen.iter().copied().filter(|&id| bit(bits, id)).collect();
                for &id in &chosen_resident {
                    set_bit(&mut self.mark, id, true);
                }
                let (mark, condemned) = (&self.mark, &self.condemned);
                let leaves = |s: usize| {
                    let id = resident[s];
                    id != NOT_RESIDENT && !bit(mark, id) && !bit(condemned, s as u32)
                };
                let mut taken = vec![false; capacity];
                for &s in &evict {
                    taken[s as usize] = true;
                }
                let mut rest: Vec<u32> = (0..capacity as u32)
                    .filter(|&s| leaves(s as usize) && !taken[s as usize])
                    .collect();
                rest.sort_unstable_by_key(|&s| {
                    let id = resident[s as usize];
                    (counts[id as usize], std::cmp::Reverse(id))
                });
                rest.truncate(must - evict.len());
                evict.extend(rest);
                for &id in &chosen_resident {
                    set_bit(&mut self.mark, id, false);
                }
            }
            for &id in &stay {
                set_bit(&mut self.mark, id, false);
            }
        }
        // Chosen rows that no eviction makes room for (every resident row it could evict is
        // chosen too): with room, the next ranking lets the logs' untaken places go.
        self.starved = evict.len() < must;
        // The most counted of the rows to admit, where the free slots are too few for all.
        if admit.len() > self.free.len() {
            if let Some(n) = self.free.len().checked_sub(1) {
                admit.select_nth_unstable(n);
            }
            admit.truncate(self.free.len());
        }
        let admit: Vec<u32> = admit.into_iter().map(|(_, id)| id).collect();
        let dst: Vec<u32> = self.free[self.free.len() - admit.len()..].to_vec();
        self.free.truncate(self.free.len() - admit.len());
        fill_ids.extend_from_slice(&admit);
        fill_dst.extend_from_slice(&dst);
        for (&id, &s) in admit.iter().zip(&dst) {
            set_bit(&mut self.bits, id, true);
            set_bit(&mut self.referenced, id, false);
            self.resident[s as usize] = id;
            ids.push(id);
            vals.push(s);
        }
        // The evicted rows' slots: gathers queued before the plan's slot table update may
        // still read them, so they are granted or filled only by work queued after it (the
        // tier queues the plan's kernels, then grants).
        let mut emptied = Vec::with_capacity(evict.len());
        for &s in &evict {
            let id = self.resident[s as usize];
            set_bit(&mut self.bits, id, false);
            self.resident[s as usize] = NOT_RESIDENT;
            emptied.push(s);
            ids.push(id);
            vals.push(NOT_RESIDENT);
        }
        self.free.append(&mut emptied);
        // The rows the captures evicted, unless admitted again since. The device's slot
        // table says so already (the captures' compare-and-swap), but where a log's captures
        // may not all have run: there the update says it; the tier's residency learns it
        // with the update either way.
        let mut gone = Vec::new();
        let taken = left.len();
        for (id, captured) in left {
            if bit(&self.bits, id) {
                continue;
            }
            if captured {
                gone.push(id);
            } else {
                ids.push(id);
                vals.push(NOT_RESIDENT);
            }
        }
        // The next gathers' logs: free slots, each to a place, then cold rows' slots, after
        // the places they keep. With room, the logs keep the places no capture took, and a
        // free slot granted to a place holds no row until a capture takes it: each log holds
        // free places up to twice the places the gathers took in its role since the last
        // ranking (the gathers' log until it began, `logs`' last, and those filled while the
        // last ranking ran), so that a log that takes few does not keep them empty.
        let most = if room > 0 {
            let main = logs.last().map_or(0, |l| l.ids.len());
            let side: usize = logs.iter().rev().skip(1).map(|l| l.ids.len()).sum();
            let free = [main, side].map(|t| (2 * t).max(self.free_min));
            [0, 1].map(|t| keeps[t] - self.kept_free[t].min(keeps[t]) + free[t])
        } else {
            [self.log_len; 2]
        };
        let [mut grant_main, mut grant_side] = self.grant_by(true, keeps, most);
        // Cold rows' slots only where the free ones run short: while the tier fills, the
        // captures fill free slots.
        let room = if self.free.len() >= room { 0 } else { room };
        let [evict_main, evict_side] =
            self.condemn([&mut grant_main, &mut grant_side], keeps, room);
        // The tier's residency once this plan is applied: the copy the last plan's apply gave
        // back (the residency before it), brought up to this plan by both plans' updates.
        let mut bits = std::mem::take(&mut self.shadow);
        if bits.len() == self.bits.len() {
            // Each update names a row once: its bits are set and cleared by the host's
            // threads together, one update after the other.
            let view = atomic_bits(&mut bits);
            let (last_ids, last_vals, last_gone) = &self.last_update;
            for (ids, vals, gone) in [(last_ids, last_vals, last_gone), (&ids, &vals, &gone)] {
                ids.par_iter().zip(vals.par_iter()).for_each(|(&id, &s)| {
                    let (word, mask) = (&view[id as usize / 64], 1u64 << (id % 64));
                    if s == NOT_RESIDENT {
                        word.fetch_and(!mask, Ordering::Relaxed);
                    } else {
                        word.fetch_or(mask, Ordering::Relaxed);
                    }
                });
                // Rows no update names (each row gone names no row the update sets).
                gone.par_iter().for_each(|&id| {
                    view[id as usize / 64].fetch_and(!(1u64 << (id % 64)), Ordering::Relaxed);
                });
            }
        } else {
            bits = self.bits.clone();
        }
        self.last_update = (ids.clone(), vals.clone(), gone);
        let candidates = self.touched.len();
        self.halve();
        Plan {
            fill_ids,
            fill_dst,
            update_ids: ids,
            update_vals: vals,
            refresh: Refresh {
                admitted: kept + admit.len(),
                evicted: evict.len() + taken,
                resident: self.capacity - self.free.len() - self.reserved,
            },
            logged: logged.len(),
            displaced: displace,
            candidates,
            log_read,
            policy: start.elapsed(),
            grants: [(grant_main, evict_main), (grant_side, evict_side)],
            regrants: Vec::new(),
            log_places: 0,
            logs: Vec::new(),
            bits,
            written: false,
            add: std::time::Duration::ZERO,
            write: std::time::Duration::ZERO,
            filled: false,
            updated: false,
        }
    }

    /// Halve each count, and forget the rows it leaves at 0, in one pass spread over the
    /// host's threads: each is a random read and write into an array far larger than the
    /// caches, which many cores serve at once.
    pub(super) fn halve(&mut self) {
        use rayon::prelude::*;
        let counts = atomic_view(&mut self.counts);
        let keep: Vec<bool> = self
            .touched
            .par_iter()
            .map(|&id| {
                let c = &counts[id as usize];
                let halved = c.load(Ordering::Relaxed) / 2;
                c.store(halved, Ordering::Relaxed);
                halved > 0
            })
            .collect();
        let mut k = keep.iter();
        self.touched.retain(|_| *k.next().unwrap_or(&false));
    }
}
