//! The hot tier (`Gpu::hot_tier`): gathers equal a host gather on fresh random data whatever
//! is resident, across refreshes that admit and evict rows; ids out of range are a typed
//! error that queues and counts nothing; a budget that holds no row, or fewer rows than a
//! batch, reads from host memory and says so; refreshes queued behind gathers in flight (in a
//! scope, on another stream, after a leaked guard) leave those gathers' results intact; rows
//! gathered by the host's threads equal rows read in place, in any share; a table in managed
//! memory reads like a mapped one; refreshes begun with `begin_refresh` rank on a thread of
//! their own while gathers go on without waiting for them (held by a test hook), through ids
//! out of range, leaked guards, scopes, a dropped tier and kernels that fail to queue. Kernels
//! reading the tier's rows themselves (`#[auto] table: &Rows<T>`) read what a gather would,
//! in every form of the tier, across refreshes that their counted reads drive, and while
//! queued behind other work whose guard is leaked, refreshes after them wait for them. The
//! GPU's count of the rows read from host memory (`gather_reads`) agrees with the host's
//! record after each refresh, counts a captured row a hit from the next gather on, counts the
//! parts of a batch gathered before a bad id, rows left to the host's threads and gathers
//! whose guards are leaked, and is the hit rate the cost model reads. A full tier with room for
//! captures reads a hot set it never held from the gather after the one that missed it.

use berth::{
    DeviceBuffer, Error, GatherReads, Gpu, Grid, HotTier, HotTierStats, InPlaceRows, MappedBuffer,
};
use berth_fixtures::args::rows_gather;
use berth_fixtures::gated::gated_fill_within;
use berth_tests::{random_f32, rng};
use rand::Rng;
use rand::seq::SliceRandom;
use std::sync::{Arc, Mutex};

/// Floats per row: 8 units of 16 bytes.
const WIDTH: usize = 32;
/// What `out` holds before every gather: no value of the table (which is in (-1, 1)).
const POISON: f32 = 1.0e30;

fn gpu() -> Gpu {
    Gpu::new_or_simulator().unwrap()
}

/// A tier over a fresh random table of `rows` rows; `rows_resident` rows fit beside the slot
/// table. Returns the host copy of the table too.
fn tier(gpu: &Gpu, rows: usize, rows_resident: usize) -> (HotTier<f32>, Vec<f32>) {
    let host = random_f32(rows * WIDTH);
    let table = gpu.mapped_from(&host).unwrap();
    let budget = rows * 4 + rows_resident * WIDTH * 4;
    let t = gpu.hot_tier(table, WIDTH, budget).unwrap();
    assert_eq!(t.capacity(), rows_resident.min(rows));
    assert!(t.device_bytes() <= t.budget(), "{t:?}");
    (t, host)
}

fn poisoned(gpu: &Gpu, ids: usize) -> DeviceBuffer<f32> {
    gpu.upload(&vec![POISON; ids * WIDTH]).unwrap()
}

/// `out` holds row `ids[b]` of `host` at `b × WIDTH`, bit for bit.
fn check(host: &[f32], ids: &[u32], out: &DeviceBuffer<f32>) {
    let got = out.to_vec().unwrap();
    assert_eq!(got.len(), ids.len() * WIDTH);
    for (b, &id) in ids.iter().enumerate() {
        let want = &host[id as usize * WIDTH..][..WIDTH];
        let row = &got[b * WIDTH..][..WIDTH];
        assert!(
            row.iter()
                .zip(want)
                .all(|(a, w)| a.to_bits() == w.to_bits()),
            "position {b}, id {id}: got {:?}…, want {:?}…",
            &row[..4],
            &want[..4]
        );
    }
}

/// `n` ids drawn from `hot` (scattered rows of the table) three times in four, uniformly
/// from the whole table otherwise.
fn batch(r: &mut impl Rng, hot: &[u32], rows: usize, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| {
            if r.random_range(0..4) == 0 {
                r.random_range(0..rows as u32)
            } else {
                hot[r.random_range(0..hot.len())]
            }
        })
        .collect()
}

/// Two hot sets of 48 rows each, scattered over a table of `rows` rows, apart.
fn two_hot_sets(r: &mut impl Rng, rows: usize) -> (Vec<u32>, Vec<u32>) {
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(r);
    (perm[..48].to_vec(), perm[48..96].to_vec())
}

/// Batch `round` of a phase of 9 reading the hot set `hot`: 500 ids, with cold rows among the
/// hot ones for the first 6 ([`batch`]), then hot rows alone.
fn phase_batch(r: &mut impl Rng, hot: &[u32], rows: usize, round: usize) -> Vec<u32> {
    if round < 6 {
        batch(r, hot, rows, 500)
    } else {
        (0..500)
            .map(|_| hot[r.random_range(0..hot.len())])
            .collect()
    }
}

#[test]
fn gathers_equal_a_host_gather_across_refreshes_and_evictions() {
    let gpu = gpu();
    let rows = 3000;
    let (mut t, host) = tier(&gpu, rows, 64);
    let mut r = rng();
    let (hot_a, hot_b) = two_hot_sets(&mut r, rows);
    let (hot_a, hot_b) = (&hot_a[..], &hot_b[..]);
    for (phase, hot) in [hot_a, hot_b].into_iter().enumerate() {
        // Batches with cold rows among the hot ones, then batches of hot rows alone. Which
        // missed rows a gather logs first (and so which take the free slots) depends on the
        // order the blocks run in; once no cold row competes for the slots, the hot rows
        // settle in whatever that order was.
        let mut last_hits = 0;
        for round in 0..9 {
            let ids = phase_batch(&mut r, hot, rows, round);
            let mut out = poisoned(&gpu, ids.len());
            let before = t.stats();
            let reads = t.gather_reads().unwrap();
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
            let hits = t.stats().hits - before.hits;
            let resident_in_batch = ids.iter().filter(|&&id| t.is_resident(id)).count() as u64;
            assert_eq!(hits, resident_in_batch, "phase {phase}, round {round}");
            // After a refresh the host's record is the device's: the GPU's count agrees.
            assert_eq!(
                t.gather_reads().unwrap().since(&reads),
                GatherReads {
                    rows: 500,
                    from_host: 500 - hits
                },
                "phase {phase}, round {round}"
            );
            last_hits = hits;
            let rf = t.refresh(&gpu).unwrap();
            assert!(rf.resident <= t.capacity());
            assert_eq!(rf.resident, t.resident_rows());
        }
        // The phase's hot rows are all resident, and every read of the last batch hit.
        assert!(
            hot.iter().all(|&id| t.is_resident(id)),
            "phase {phase}: {t:?}"
        );
        assert_eq!(last_hits, 500, "phase {phase}");
    }
    let s = t.stats();
    assert!(s.evicted >= 16, "hot set B pushed rows of A out: {s:?}");
    // The host time of the 18 refreshes is summed, and the gathers' counting and staging.
    let zero = std::time::Duration::ZERO;
    assert!(
        s.ranking > zero && s.log_read > zero && s.apply > zero,
        "{s:?}"
    );
    assert!(s.counting > zero && s.staging > zero, "{s:?}");
    assert!(s.admitted >= 96, "{s:?}");
    assert_eq!((s.gathers, s.rows, s.refreshes), (18, 9000, 18));
    // Counts decay: 3 reads of a row of neither hot set, then halved by a refresh.
    let id = (0..rows as u32)
        .find(|id| !hot_a.contains(id) && !hot_b.contains(id))
        .unwrap();
    let base = t.count(id);
    let mut out = poisoned(&gpu, 3);
    t.gather(&gpu, &[id; 3], &mut out).unwrap().wait().unwrap();
    check(&host, &[id; 3], &out);
    assert_eq!(t.count(id), base + 3);
    t.refresh(&gpu).unwrap();
    assert_eq!(t.count(id), (base + 3) / 2);
    // The table comes back unchanged.
    assert!(
        t.into_table()
            .iter()
            .zip(&host)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[test]
fn ids_out_of_range_are_a_typed_error_naming_batch_and_position() {
    let gpu = gpu();
    let rows = 500;
    let (mut t, host) = tier(&gpu, rows, 16);
    let ok: Vec<u32> = (0..40).collect();
    let mut out = poisoned(&gpu, ok.len());
    t.gather(&gpu, &ok, &mut out).unwrap().wait().unwrap();
    check(&host, &ok, &out);
    for (bad, position) in [(rows as u32, 5), (u32::MAX, 39), (rows as u32 + 7, 0)] {
        let mut ids = ok.clone();
        ids[position] = bad;
        // A later position out of range too: the first is named.
        ids[39] = ids[39].max(rows as u32);
        let before = t.stats();
        let reads = t.gather_reads().unwrap();
        let counts: Vec<u32> = (0..rows as u32).map(|id| t.count(id)).collect();
        let mut out = poisoned(&gpu, ids.len());
        let Err(e) = t.gather(&gpu, &ids, &mut out) else {
            panic!("an id out of range was queued")
        };
        match &e {
            Error::IdOutOfRange {
                batch,
                position: p,
                id,
                rows: n,
            } => {
                assert_eq!((batch, p, id, n), (&before.gathers, &position, &bad, &rows));
            }
            other => panic!("{other}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("batch {}", before.gathers))
                && msg.contains(&format!("position {position}")),
            "{msg}"
        );
        // Nothing was queued or counted.
        assert!(out.to_vec().unwrap().iter().all(|&v| v == POISON));
        assert_eq!((t.stats().rows, t.stats().hits), (before.rows, before.hits));
        assert_eq!(t.gather_reads().unwrap(), reads);
        assert!((0..rows as u32).all(|id| t.count(id) == counts[id as usize]));
    }
    // A wrong output length is refused too; the tier still works after both.
    let mut short = poisoned(&gpu, 3);
    assert!(matches!(
        t.gather(&gpu, &ok, &mut short),
        Err(Error::LengthMismatch { .. })
    ));
    t.refresh(&gpu).unwrap();
    let mut out = poisoned(&gpu, ok.len());
    t.gather(&gpu, &ok, &mut out).unwrap().wait().unwrap();
    check(&host, &ok, &out);
    assert_eq!(t.stats().hits, 16);
}

/// A row a gather misses is copied into a free slot by the capture queued after it, and the
/// gathers after it read the row from device memory before any refresh (the GPU's count),
/// while the host's record counts it a hit only from the refresh that settles it; every
/// position of a row missed in a batch misses (the capture comes after the gather), and ids
/// repeated in a later batch hit at every position.
#[test]
fn rows_missed_are_read_from_device_memory_from_the_next_gather_on() {
    let gpu = gpu();
    let rows = 4000;
    let (mut t, host) = tier(&gpu, rows, 1000);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    // Three batches over 300 distinct rows, each row several times, and 100 new rows each.
    let hot = &perm[..300];
    let mut seen = std::collections::HashSet::new();
    for (round, fresh) in perm[300..600].chunks(100).enumerate() {
        let mut ids: Vec<u32> = (0..900).map(|_| hot[r.random_range(0..300)]).collect();
        ids.extend(fresh.iter().flat_map(|&id| [id, id]));
        ids.shuffle(&mut r);
        let want = ids.iter().filter(|&&id| !seen.contains(&id)).count() as u64;
        let (before, reads) = (t.stats(), t.gather_reads().unwrap());
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        let read = t.gather_reads().unwrap().since(&reads);
        assert_eq!(
            (read.rows, read.from_host),
            (ids.len() as u64, want),
            "round {round}"
        );
        let rate = 1.0 - want as f64 / ids.len() as f64;
        assert!((read.hit_rate() - rate).abs() < 1e-12, "round {round}");
        if round > 0 {
            assert!(rate > 0.5, "round {round}: {read:?}");
        }
        // No refresh yet: the host's record has nothing resident.
        assert_eq!(t.stats().since(&before).hits, 0, "round {round}");
        seen.extend(ids);
    }
    assert_eq!(t.resident_rows(), 0);
    // A refresh settles the captured rows: the host's count agrees from then on.
    t.refresh(&gpu).unwrap();
    assert_eq!(t.resident_rows(), seen.len());
    let ids: Vec<u32> = (0..2000).map(|_| perm[r.random_range(0..700)]).collect();
    let (before, reads) = (t.stats(), t.gather_reads().unwrap());
    let mut out = poisoned(&gpu, ids.len());
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    check(&host, &ids, &out);
    let missed = ids.iter().filter(|&&id| !t.is_resident(id)).count() as u64;
    assert!(missed > 0);
    let read = t.gather_reads().unwrap().since(&reads);
    assert_eq!(read.from_host, missed);
    // The host looks up 1,024 of the 2,000 ids, spread over the batch: its rate estimates
    // the GPU's.
    let host_rate = t.stats().since(&before).hit_rate();
    assert!(
        (host_rate - read.hit_rate()).abs() < 0.1,
        "{host_rate} against {read:?}"
    );
}

/// A full tier with room for captures (`capture_room`) takes a hot set it never held from the
/// gather after the one that missed it, with no refresh between: the captures evict cold rows
/// (counted 0) into whose slots they copy the missed ones. Without room, the same gathers keep
/// missing until a refresh. The rows evicted read right from the host table after.
#[test]
fn a_full_tier_with_room_for_captures_reads_a_new_hot_set_from_the_next_gather_on() {
    let gpu = gpu();
    let rows = 4000;
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let (keep, cold, new) = (&perm[..300], &perm[300..600], &perm[600..900]);
    let twice = |r: &mut rand::rngs::StdRng, set: &[u32]| {
        let mut ids: Vec<u32> = set.iter().flat_map(|&id| [id, id]).collect();
        ids.shuffle(r);
        ids
    };
    let mut from_host = Vec::new();
    for room in [0, 400] {
        let (mut t, host) = tier(&gpu, rows, 600);
        t.capture_room(room);
        let gather = |t: &mut HotTier<f32>, ids: &[u32]| -> GatherReads {
            let reads = t.gather_reads().unwrap();
            let mut out = poisoned(&gpu, ids.len());
            t.gather(&gpu, ids, &mut out).unwrap().wait().unwrap();
            check(&host, ids, &out);
            t.gather_reads().unwrap().since(&reads)
        };
        // The tier fills with 600 rows; then only 300 of them are read, and the others go
        // cold: counted 0 after the halving, passed by the clock's hand.
        let all: Vec<u32> = keep.iter().chain(cold).copied().collect();
        gather(&mut t, &twice(&mut r, &all));
        t.refresh(&gpu).unwrap();
        assert_eq!(t.resident_rows(), 600);
        for _ in 0..3 {
            gather(&mut t, &twice(&mut r, keep));
            t.refresh(&gpu).unwrap();
        }
        assert_eq!(t.resident_rows(), 600);
        // A hot set the tier never held: missed once each, then (with room) read from device
        // memory from the next gather on.
        let first = gather(&mut t, &twice(&mut r, new));
        assert_eq!(first.from_host, 600, "room {room}");
        let second = gather(&mut t, &twice(&mut r, new));
        from_host.push(second.from_host);
        assert!(cold.iter().all(|&id| t.is_resident(id)), "room {room}");
        // The refresh settles it: the new rows resident, as many cold ones evicted. Without
        // room it evicts the cold rows for the new ones, whose slots the next refresh fills.
        let refresh = t.refresh(&gpu).unwrap();
        assert_eq!(refresh.evicted, 300, "room {room}");
        assert_eq!(t.resident_rows(), if room > 0 { 600 } else { 300 });
        if room > 0 {
            assert!(new.iter().all(|&id| t.is_resident(id)));
            assert!(cold.iter().all(|&id| !t.is_resident(id)));
            assert!(keep.iter().all(|&id| t.is_resident(id)));
        }
        // Every row reads right, the evicted ones from the host table.
        let mixed: Vec<u32> = (0..900).map(|i| perm[(i * 7) % 900]).collect();
        gather(&mut t, &mixed);
    }
    assert_eq!(from_host, [600, 0], "without room, then with");
}

/// The cost model's view of a tier (`decision`) reads the hit rate the GPU counted between
/// the refreshes before the last: rows captured on their miss are hits from the next gather
/// on, where the host's record credits them only from the refresh that settles them.
#[test]
fn the_cost_model_reads_the_hits_the_gpu_counted() {
    use berth::placement::{GatherAccess, decide_gather};
    let gpu = gpu();
    let (rows, batch) = (20_000, 2_000);
    let (mut t, host) = tier(&gpu, rows, 4_000);
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut rng());
    let ids = &perm[..batch];
    t.refresh(&gpu).unwrap();
    // Six batches of the same new rows: the first misses them all, and its capture makes the
    // other five read them from device memory; the host's record has no hit yet.
    for _ in 0..6 {
        let mut out = poisoned(&gpu, batch);
        t.gather(&gpu, ids, &mut out).unwrap().wait().unwrap();
        check(&host, ids, &out);
    }
    assert_eq!(t.stats().hits, 0);
    t.refresh(&gpu).unwrap();
    t.refresh(&gpu).unwrap();
    let s = t.stats();
    let access = |hit_fraction: f64| GatherAccess {
        table_rows: rows,
        row_bytes: WIDTH * 4,
        batch_rows: batch,
        capacity: t.capacity(),
        hit_fraction,
        admitted_per_batch: s.filled as f64 / s.gathers as f64,
        random_per_s: None,
        row_reads_per_s: t.measure_row_reads().ok(),
        host_s: s.gathering.as_secs_f64() / s.gathers as f64,
        parts: t.parts_for(batch),
    };
    let counted = decide_gather(&gpu.link_costs(), &access(5.0 / 6.0));
    assert_eq!(t.decision(batch), counted);
    assert!(counted.tier_s < decide_gather(&gpu.link_costs(), &access(0.0)).tier_s);
}

/// A tracing writer into a shared buffer.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A large batch on a `Gpu` is staged in parts (two by default, three here too; each part
/// by the gathering thread alone, or with two helpers staging shares of it), each part's
/// kernel queued before the next part is checked: rows right (read from the tier, in place,
/// and captured), every sampled id counted once across the parts; an id out of range in a
/// later part is named with its position in the batch, leaves the parts before it gathered and
/// the rest untouched, and counts nothing; one in the first part queues nothing.
#[test]
fn large_batches_staged_in_parts_gather_right_and_name_an_id_out_of_range_in_any() {
    let gpu = gpu();
    let (rows, n) = (50_000, 30_000);
    // Each part staged by the gathering thread alone, or with helpers taking shares of it.
    for (parts, threads) in [(2, 1), (3, 1), (2, 3)] {
        let (mut t, host) = tier(&gpu, rows, 4_000);
        t.staging_parts(parts);
        t.staging_threads(threads);
        t.count_every(std::num::NonZeroUsize::new(3).unwrap());
        let mut r = rng();
        let mut perm: Vec<u32> = (0..rows as u32).collect();
        perm.shuffle(&mut r);
        let hot = &perm[..1_000];
        let first = batch(&mut r, hot, rows, n);
        let mut out = poisoned(&gpu, n);
        t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
        check(&host, &first, &out);
        // Batch 0 counts positions 0, 3, 6, ... of every part.
        let mut want = vec![0u32; rows];
        for &id in first.iter().step_by(3) {
            want[id as usize] += 1;
        }
        assert_eq!(t.stats().counted, n.div_ceil(3) as u64);
        assert!((0..rows as u32).all(|id| t.count(id) == want[id as usize]));
        t.refresh(&gpu).unwrap();
        for _ in 0..3 {
            let ids = batch(&mut r, hot, rows, n);
            let mut out = poisoned(&gpu, n);
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
        }
        assert!(t.stats().hits > 0);
        let good = batch(&mut r, hot, rows, n);
        let size = n.div_ceil(parts);
        let last = size * (parts - 1);
        // (The position of the bad id, the rows gathered before it.)
        let mut cases = vec![(n - 5, last), (last, last), (size - 1, 0), (0, 0)];
        if parts > 2 {
            cases.extend([(size, size), (last - 1, size * (parts - 2))]);
        }
        for (position, gathered) in cases {
            let mut ids = good.clone();
            ids[position] = rows as u32 + 1;
            let before = t.stats();
            let reads = t.gather_reads().unwrap();
            let mut out = poisoned(&gpu, n);
            match t.gather(&gpu, &ids, &mut out) {
                Err(Error::IdOutOfRange {
                    batch, position: p, ..
                }) => assert_eq!((batch, p), (before.gathers, position)),
                Err(other) => panic!("{other}"),
                Ok(_) => panic!("an id out of range at {position} was queued"),
            }
            let got = out.to_vec().unwrap();
            check_prefix(&host, &ids[..gathered], &got);
            assert!(
                got[gathered * WIDTH..].iter().all(|&v| v == POISON),
                "{parts} parts, at {position}"
            );
            assert_eq!(
                (t.stats().rows, t.stats().counted, t.stats().hits),
                (before.rows, before.counted, before.hits)
            );
            // The parts gathered before the bad one are counted as read, and no more.
            let read = t.gather_reads().unwrap().since(&reads);
            assert_eq!(read.rows, gathered as u64, "{parts} parts, at {position}");
            let resident = ids[..gathered].iter().filter(|&&id| t.is_resident(id));
            assert!(
                read.from_host <= (gathered - resident.count()) as u64,
                "{parts} parts, at {position}: {read:?}"
            );
        }
        // Staged whole, a batch with an id out of range anywhere queues nothing.
        t.staging_parts(1);
        let mut ids = good.clone();
        ids[n - 5] = rows as u32;
        let mut out = poisoned(&gpu, n);
        assert!(matches!(
            t.gather(&gpu, &ids, &mut out),
            Err(Error::IdOutOfRange { position, .. }) if position == n - 5
        ));
        assert!(out.to_vec().unwrap().iter().all(|&v| v == POISON));
        t.staging_parts(parts);
        // The rows the first parts logged are settled by the next refresh.
        t.refresh(&gpu).unwrap();
        let mut out = poisoned(&gpu, n);
        t.gather(&gpu, &good, &mut out).unwrap().wait().unwrap();
        check(&host, &good, &out);
    }
}

/// A gather on a `Gpu` whose kernel is refused after its ids are staged (an output of another
/// context) returns the launch's error, whole or staged in parts, and the tier goes on
/// gathering right through every slot of its ring of staged ids.
#[test]
fn a_gather_refused_after_its_ids_are_staged_leaves_the_tier_right() {
    let gpu = gpu();
    let other = Gpu::simulator();
    let (rows, n) = (50_000, 20_000);
    let (mut t, host) = tier(&gpu, rows, 1_000);
    let mut r = rng();
    for _ in 0..5 {
        let ids: Vec<u32> = (0..n).map(|_| r.random_range(0..rows as u32)).collect();
        for len in [n, 100] {
            let mut foreign = other.alloc_zeroed::<f32>(len * WIDTH).unwrap();
            assert!(matches!(
                t.gather(&gpu, &ids[..len], &mut foreign),
                Err(Error::WrongContext { .. })
            ));
        }
        let mut out = poisoned(&gpu, n);
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
    }
}

/// A batch staged in parts whose last part holds an id out of range leaves its first part's
/// kernel queued, reading its ids in place from the tier's memory. The gathers after it,
/// their guards leaked, come back to that memory of the tier's ring only once that kernel is
/// done: here it waits behind a kernel whose gate the test opens 300 ms later, and the first
/// part's rows must still be the ones its own ids name.
#[test]
fn leaked_gathers_after_a_part_left_queued_by_a_bad_id_wait_before_reusing_its_ids() {
    let gpu = gpu();
    let (rows, n) = (50_000, 20_000);
    let (mut t, host) = tier(&gpu, rows, 1_000);
    let mut r = rng();
    let mut bad: Vec<u32> = (0..n).map(|_| r.random_range(0..rows as u32)).collect();
    bad[n - 1] = rows as u32;
    // As many batches after it as the ring has slots: the last one reuses its memory.
    let later: Vec<Vec<u32>> = (0..4)
        .map(|_| (0..n).map(|_| r.random_range(0..rows as u32)).collect())
        .collect();
    let stream = gpu.stream().unwrap();
    let mut first = poisoned(&gpu, n);
    let mut outs: Vec<DeviceBuffer<f32>> = later.iter().map(|_| poisoned(&gpu, n)).collect();
    behind_a_gate(&gpu, &stream, || {
        assert!(matches!(
            t.gather(&stream, &bad, &mut first),
            Err(Error::IdOutOfRange { position, .. }) if position == n - 1
        ));
        for (ids, out) in later.iter().zip(outs.iter_mut()) {
            std::mem::forget(t.gather(&stream, ids, out).unwrap());
        }
    });
    t.refresh(&stream).unwrap();
    let got = first.to_vec().unwrap();
    check_prefix(&host, &bad[..n / 2], &got);
    assert!(got[n / 2 * WIDTH..].iter().all(|&v| v == POISON));
    for (ids, out) in later.iter().zip(&outs) {
        check(&host, ids, out);
    }
}

/// Run `queue` with `stream` held behind a gated kernel, whose gate a thread opens 300 ms
/// after `queue` starts; then wait for that kernel.
fn behind_a_gate(gpu: &Gpu, stream: &berth::Stream, queue: impl FnOnce()) {
    let gate = gpu.signals(1).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(64).unwrap();
    let fill = gated_fill_within(
        stream,
        Grid::cover(64),
        5_000_000_000,
        1,
        &gate,
        &mut blocker,
    )
    .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            gate.store(0, 1);
        });
        queue();
    });
    fill.wait().unwrap();
}

/// The first rows of `got` (a gather's output) hold rows `ids` of `host`, bit for bit.
fn check_prefix(host: &[f32], ids: &[u32], got: &[f32]) {
    for (b, &id) in ids.iter().enumerate() {
        let want = &host[id as usize * WIDTH..][..WIDTH];
        assert!(
            got[b * WIDTH..][..WIDTH]
                .iter()
                .zip(want)
                .all(|(a, w)| a.to_bits() == w.to_bits()),
            "position {b}, id {id}"
        );
    }
}

#[test]
fn a_budget_of_no_rows_or_fewer_than_a_batch_reads_host_memory_and_says_so() {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let log = Log::default();
    let sink = log.clone();
    // Global: the only test of this binary that installs a subscriber.
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish()
        .try_init()
        .expect("no other test installs a global subscriber");

    let gpu = gpu();
    let rows = 700;
    let host = random_f32(rows * WIDTH);
    let mut r = rng();
    // Budgets: none, the slot table alone, one byte short of a row beside it.
    for budget in [0, rows * 4, rows * 4 + WIDTH * 4 - 1] {
        let table = gpu.mapped_from(&host).unwrap();
        let mut t = gpu.hot_tier(table, WIDTH, budget).unwrap();
        assert_eq!((t.capacity(), t.device_bytes()), (0, 0), "budget {budget}");
        for _ in 0..3 {
            let ids: Vec<u32> = (0..200).map(|_| r.random_range(0..rows as u32)).collect();
            let mut out = poisoned(&gpu, ids.len());
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
            assert_eq!(t.refresh(&gpu).unwrap(), berth::Refresh::default());
        }
        assert_eq!((t.stats().hits, t.resident_rows()), (0, 0));
        // Every row from host memory, by the GPU's count too.
        let read = t.gather_reads().unwrap();
        assert_eq!((read.rows, read.from_host), (600, 600), "budget {budget}");
    }
    // Room for 3 rows, batches of 100 distinct ones: 3 resident, the rest from host memory.
    let table = gpu.mapped_from(&host).unwrap();
    let mut t = gpu
        .hot_tier(table, WIDTH, rows * 4 + 3 * WIDTH * 4)
        .unwrap();
    assert_eq!(t.capacity(), 3);
    let ids: Vec<u32> = (100..200).collect();
    let mut first = Vec::new();
    for round in 0..3 {
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        t.refresh(&gpu).unwrap();
        assert_eq!(t.resident_rows(), 3, "round {round}");
        let resident: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&id| t.is_resident(id))
            .collect();
        // The first batch's first 3 misses (in the order its blocks ran) take the 3 slots;
        // among rows counted alike, resident rows keep their place.
        if round == 0 {
            first = resident;
        } else {
            assert_eq!(resident, first, "round {round}");
        }
    }
    assert_eq!(t.stats().hits, 6);

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let has = |needles: &[&str]| text.lines().any(|l| needles.iter().all(|n| l.contains(n)));
    assert!(
        has(&["DEBUG", "budget=0", "every row is read from host memory"]),
        "{text}"
    );
    assert!(
        has(&[
            "DEBUG",
            "ids=100",
            "capacity=3",
            "more rows than the budget holds"
        ]),
        "{text}"
    );
}

#[test]
fn refreshes_queued_behind_gathers_in_flight_leave_their_results_intact() {
    in_flight(0.0);
}

/// The same with every missed row gathered by the host's threads and scattered by a second
/// kernel, which a refresh queued behind it must wait for too.
#[test]
fn refreshes_queued_behind_host_gathers_in_flight_leave_their_results_intact() {
    in_flight(1.0);
}

/// A gather's ids go to the device through pinned memory kept by the tier, by a copy left
/// queued on the gather's stream. Gathers on a stream whose guards are leaked, more of them
/// than the tier keeps id buffers for, and longer and longer (so the buffers are replaced while
/// copies and gathers that use them are queued): each reads its own ids.
#[test]
fn leaked_gathers_in_flight_each_read_their_own_staged_ids() {
    let gpu = gpu();
    let rows = 1500;
    let (mut t, host) = tier(&gpu, rows, 30);
    let mut r = rng();
    let hot: Vec<u32> = (0..30).map(|_| r.random_range(0..rows as u32)).collect();
    let stream = gpu.stream().unwrap();
    let batches: Vec<Vec<u32>> = (0..10)
        .map(|k| batch(&mut r, &hot, rows, 40 << (k / 3)))
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> =
        batches.iter().map(|b| poisoned(&gpu, b.len())).collect();
    for (k, (ids, out)) in batches.iter().zip(outs.iter_mut()).enumerate() {
        std::mem::forget(t.gather(&stream, ids, out).unwrap());
        if k % 4 == 3 {
            t.refresh(&stream).unwrap();
        }
    }
    for (ids, out) in batches.iter().zip(&outs) {
        check(&host, ids, out);
    }
    assert_eq!(t.stats().gathers, 10);
}

/// Gathers held behind a gate on a stream, their guards leaked: the GPU's count read from
/// another queue waits for them, and counts every row they read from host memory.
#[test]
fn leaked_gathers_are_counted_before_their_reads_are_read() {
    let gpu = gpu();
    let rows = 2000;
    let (mut t, host) = tier(&gpu, rows, 0);
    let stream = gpu.stream().unwrap();
    let mut r = rng();
    let batches: Vec<Vec<u32>> = (0..3)
        .map(|_| (0..700).map(|_| r.random_range(0..rows as u32)).collect())
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> = batches.iter().map(|_| poisoned(&gpu, 700)).collect();
    behind_a_gate(&gpu, &stream, || {
        for (ids, out) in batches.iter().zip(outs.iter_mut()) {
            std::mem::forget(t.gather(&stream, ids, out).unwrap());
        }
        // Read on the host while the gathers wait behind the gate: a tier that holds no
        // row reads every row from host memory.
        assert_eq!(
            t.gather_reads().unwrap(),
            GatherReads {
                rows: 2100,
                from_host: 2100
            }
        );
    });
    for (ids, out) in batches.iter().zip(&outs) {
        check(&host, ids, out);
    }
}

/// Large batches on a `Stream` (staged in parts, two and four, each part's ids read in place
/// by its gather kernel; on the gathering thread alone, or with two helpers writing shares of
/// each part), their guards leaked, more of them than the tier's ring of staged ids: each
/// gathers its own ids, whose memory is written again only once the kernels that read them
/// are done.
#[test]
fn leaked_large_gathers_staged_in_parts_each_read_their_own_ids() {
    let gpu = gpu();
    let rows = 50_000;
    for (parts, threads) in [(2, 1), (4, 1), (2, 3)] {
        let (mut t, host) = tier(&gpu, rows, 2_000);
        t.staging_parts(parts);
        t.staging_threads(threads);
        let mut r = rng();
        let hot: Vec<u32> = (0..2_000).map(|_| r.random_range(0..rows as u32)).collect();
        let stream = gpu.stream().unwrap();
        let batches: Vec<Vec<u32>> = (0..7).map(|_| batch(&mut r, &hot, rows, 40_000)).collect();
        let mut outs: Vec<DeviceBuffer<f32>> =
            batches.iter().map(|b| poisoned(&gpu, b.len())).collect();
        // The first gathers wait on the stream behind a gated kernel: the later gathers,
        // which reuse the first ones' memory for their ids, must wait for them.
        behind_a_gate(&gpu, &stream, || {
            for (ids, out) in batches.iter().zip(outs.iter_mut()) {
                std::mem::forget(t.gather(&stream, ids, out).unwrap());
            }
        });
        t.refresh(&stream).unwrap();
        for (ids, out) in batches.iter().zip(&outs) {
            check(&host, ids, out);
        }
        assert_eq!(t.stats().gathers, 7);
    }
}

fn in_flight(host_share: f64) {
    let gpu = gpu();
    let rows = 2000;
    let (mut t, host) = tier(&gpu, rows, 40);
    t.host_gathers(host_share);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let hot: Vec<&[u32]> = perm.chunks(40).take(6).collect();
    // In a scope nothing waits: gathers and refreshes queue one after another, the hot set
    // moving every two batches, so refreshes evict rows that earlier gathers still read.
    let batches: Vec<Vec<u32>> = (0..12)
        .map(|k| batch(&mut r, hot[k / 2], rows, 300))
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> =
        batches.iter().map(|b| poisoned(&gpu, b.len())).collect();
    gpu.scope(|s| {
        for (ids, out) in batches.iter().zip(outs.iter_mut()) {
            t.gather(s, ids, out)?.detach();
            t.refresh(s)?;
        }
        Ok(())
    })
    .unwrap();
    for (ids, out) in batches.iter().zip(&outs) {
        check(&host, ids, out);
    }
    let s = t.stats();
    assert!(s.evicted > 0 && s.hits > 0, "{s:?}");

    // Gathers queued in a scope on the default stream, refreshes on another stream: the
    // refresh's fill and copy wait for the queued gathers on the GPU.
    let side = gpu.stream().unwrap();
    let more: Vec<Vec<u32>> = (0..6)
        .map(|k| batch(&mut r, hot[5 - k], rows, 300))
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> = more.iter().map(|b| poisoned(&gpu, b.len())).collect();
    gpu.scope(|s| {
        for (ids, out) in more.iter().zip(outs.iter_mut()) {
            t.gather(s, ids, out)?.detach();
            t.refresh(&side)?;
        }
        Ok(())
    })
    .unwrap();
    for (ids, out) in more.iter().zip(&outs) {
        check(&host, ids, out);
    }

    // A leaked guard: the refresh still follows the gather it did not wait for.
    let ids = batch(&mut r, hot[0], rows, 300);
    let mut out = poisoned(&gpu, ids.len());
    std::mem::forget(t.gather(&gpu, &ids, &mut out).unwrap());
    t.refresh(&gpu).unwrap();
    check(&host, &ids, &out);
    assert!(t.stats().evicted > s.evicted);
    assert_eq!(t.stats().staged > 0, host_share > 0.0, "{:?}", t.stats());
}

#[test]
fn tables_the_tier_cannot_take_are_refused() {
    let gpu = gpu();
    // 3 floats per row: not whole 16-byte units.
    let table = gpu.mapped_from(&[0f32; 30]).unwrap();
    assert!(matches!(
        gpu.hot_tier(table, 3, 1 << 20),
        Err(Error::Usage(_))
    ));
    // Not a whole number of rows.
    let table = gpu.mapped_from(&[0f32; 30]).unwrap();
    assert!(matches!(
        gpu.hot_tier(table, 8, 1 << 20),
        Err(Error::Usage(_))
    ));
    let table = gpu.mapped_from(&[0f32; 32]).unwrap();
    assert!(matches!(
        gpu.hot_tier(table, 0, 1 << 20),
        Err(Error::Usage(_))
    ));
    // Another context's table.
    let other = Gpu::simulator();
    let table = other.mapped_from(&[0f32; 32]).unwrap();
    assert!(matches!(
        gpu.hot_tier(table, 8, 1 << 20),
        Err(Error::Usage(_))
    ));
    // A budget beyond the table holds every row, no more.
    let table = gpu.mapped_from(&[1f32; 64]).unwrap();
    let t = gpu.hot_tier(table, 8, 1 << 20).unwrap();
    assert_eq!((t.rows(), t.width(), t.capacity()), (8, 8, 8));
    // And holds them from the start.
    assert_eq!(t.resident_rows(), 8);
}

/// Counting every third id of each batch counts exactly those positions (starting at
/// `batch mod 3`), still makes the rows read most resident, and leaves every gather equal to
/// the host's.
#[test]
fn counting_a_sample_of_the_ids_still_finds_the_hot_rows() {
    let gpu = gpu();
    let rows = 2000;
    let (mut t, host) = tier(&gpu, rows, 40);
    t.count_every(std::num::NonZeroUsize::new(3).unwrap());
    let mut r = rng();
    let mut all: Vec<u32> = (0..rows as u32).collect();
    all.shuffle(&mut r);
    let hot = &all[..40];
    let mut counted = 0u64;
    for k in 0..12u64 {
        let ids = batch(&mut r, hot, rows, 300);
        let before: Vec<u32> = ids.iter().map(|&id| t.count(id)).collect();
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        // The counted positions of batch k: k mod 3, then every third.
        let sampled: Vec<u32> = ids
            .iter()
            .skip((k % 3) as usize)
            .step_by(3)
            .copied()
            .collect();
        counted += sampled.len() as u64;
        for (i, &id) in ids.iter().enumerate() {
            let times = sampled.iter().filter(|&&s| s == id).count() as u32;
            assert_eq!(t.count(id), before[i] + times, "batch {k}, id {id}");
        }
        assert_eq!(t.stats().counted, counted);
        if k % 4 == 3 {
            t.refresh(&gpu).unwrap();
        }
    }
    assert_eq!(t.stats().rows, 12 * 300);
    // Three ids in four come from 40 hot rows, so the sample finds them: most are resident.
    let resident = hot.iter().filter(|&&id| t.is_resident(id)).count();
    assert!(resident >= 30, "{resident} of the 40 hot rows resident");
    assert!(t.stats().hit_rate() > 0.4, "{:?}", t.stats());
}

/// While slots are free, a refresh admits every row gathered since the last one, counted or
/// not (here one id in 16 is counted), the counted first; with fewer free slots than rows
/// gathered, the tier fills and holds no more than its capacity, and gathers stay right.
#[test]
fn free_slots_take_the_rows_gathered_lately_counted_or_not() {
    let gpu = gpu();
    let rows = 1000;
    let (mut t, host) = tier(&gpu, rows, 200);
    t.count_every(std::num::NonZeroUsize::new(16).unwrap());
    let mut r = rng();
    let mut all: Vec<u32> = (0..rows as u32).collect();
    all.shuffle(&mut r);
    // 150 distinct rows: fewer than the 200 slots.
    let first = all[..150].to_vec();
    let mut out = poisoned(&gpu, first.len());
    t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
    check(&host, &first, &out);
    let done = t.refresh(&gpu).unwrap();
    assert_eq!((done.admitted, done.resident), (150, 150), "{done:?}");
    assert!(first.iter().all(|&id| t.is_resident(id)));
    // All from device memory now.
    let mut out = poisoned(&gpu, first.len());
    t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
    check(&host, &first, &out);
    // 300 more distinct rows: only 50 slots are free, and no resident row leaves for rows
    // that were not counted.
    let second = all[150..450].to_vec();
    let mut out = poisoned(&gpu, second.len());
    t.gather(&gpu, &second, &mut out).unwrap().wait().unwrap();
    check(&host, &second, &out);
    let done = t.refresh(&gpu).unwrap();
    assert_eq!(done.resident, 200, "{done:?}");
    assert_eq!(t.resident_rows(), 200);
    let mixed: Vec<u32> = all[..450].to_vec();
    let mut out = poisoned(&gpu, mixed.len());
    t.gather(&gpu, &mixed, &mut out).unwrap().wait().unwrap();
    check(&host, &mixed, &out);
}

/// When counted rows need the slots the last gathers' missed rows were logged into, the
/// logged rows the ranking did not choose give theirs up, whatever order the gathers logged
/// them in: a hot row logged last keeps its slot, and a row read once gives it up.
#[test]
fn logged_rows_the_ranking_keeps_hold_their_slots_whatever_their_place_in_the_log() {
    let gpu = gpu();
    let (mut t, host) = tier(&gpu, 100, 2);
    let (p, q, h, k, m) = (10, 11, 20, 21, 30);
    let run = |t: &mut HotTier<f32>, ids: &[u32]| {
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, ids, &mut out).unwrap().wait().unwrap();
        check(&host, ids, &out);
        t.refresh(&gpu).unwrap()
    };
    // Two rows read once fill the two slots through the log.
    run(&mut t, &[p, q]);
    assert!(t.is_resident(p) && t.is_resident(q), "{t:?}");
    // Two hot rows push them out; their slots go to the next gathers' log.
    run(&mut t, &[h, h, h, h, h, k, k, k, k, k]);
    assert!(!t.is_resident(p) && !t.is_resident(q), "{t:?}");
    // `m` (read once) and `h` (hot) miss and are logged, in either order.
    run(&mut t, &[m, h, h, h]);
    // The ranking keeps `h` and `k`: `k` takes the slot `m` was logged into.
    assert!(t.is_resident(h), "{t:?}");
    assert!(t.is_resident(k), "{t:?}");
    assert!(!t.is_resident(m), "{t:?}");
}

/// Rows not resident come through the host's threads (gathered into pinned memory while the
/// GPU gathers the others, then scattered into `out`) or are read in place by the GPU, in any
/// share; every gathered row equals the table's, and the tier counts as staged exactly the
/// share of the rows its residency did not hold (none when host gathers are off).
#[test]
fn rows_gathered_by_host_threads_equal_rows_read_in_place() {
    let gpu = gpu();
    let rows = 5000;
    let (mut all, host) = tier(&gpu, rows, 200);
    all.host_gathers(1.0);
    let mut half = gpu
        .hot_tier(gpu.mapped_from(&host).unwrap(), WIDTH, all.budget())
        .unwrap();
    half.host_gathers(0.5);
    let mut off = gpu
        .hot_tier(gpu.mapped_from(&host).unwrap(), WIDTH, all.budget())
        .unwrap();
    off.host_gathers(0.0);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let hot = &perm[..150];
    let (mut misses_all, mut misses_half) = (0u64, 0u64);
    for round in 0..8 {
        // Batches longer than one host task (2048 ids), so several threads mark rows.
        let ids = batch(&mut r, hot, rows, 5000 + round * 37);
        misses_all += ids.iter().filter(|&&id| !all.is_resident(id)).count() as u64;
        misses_half += ids.iter().filter(|&&id| !half.is_resident(id)).count() as u64;
        for t in [&mut all, &mut half, &mut off] {
            let mut out = poisoned(&gpu, ids.len());
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
            t.refresh(&gpu).unwrap();
        }
        assert_eq!(all.stats().staged, misses_all, "round {round}");
        // Half of each 2048-id task's misses, rounded down.
        let staged = half.stats().staged;
        assert!(
            staged <= misses_half / 2 && staged + 3 * (round as u64 + 1) >= misses_half / 2,
            "round {round}: {staged} of {misses_half}"
        );
    }
    assert!(misses_all > 0 && all.stats().hits > 0, "{:?}", all.stats());
    assert_eq!(off.stats().staged, 0);
    // Rows left to the host's threads are misses to the GPU's count, as rows read in place.
    assert_eq!(all.gather_reads().unwrap().from_host, misses_all);
    assert_eq!(half.gather_reads().unwrap().from_host, misses_half);
    // A tier that keeps no row: every row of a batch through the host's threads.
    let table = gpu.mapped_from(&host).unwrap();
    let mut none = gpu.hot_tier(table, WIDTH, 16).unwrap();
    none.host_gathers(1.0);
    let ids: Vec<u32> = (0..3000).map(|_| r.random_range(0..rows as u32)).collect();
    let mut out = poisoned(&gpu, ids.len());
    none.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    check(&host, &ids, &out);
    assert_eq!(none.stats().staged, 3000);
    assert_eq!(none.gather_reads().unwrap().from_host, 3000);
}

/// A table in managed memory (`Gpu::managed_from`) is read like a mapped one: gathers equal
/// the host's rows across refreshes, resident or not; a tier that holds no row over it reads
/// every row in place and counts nothing.
#[test]
fn a_managed_table_gathers_what_the_host_table_holds() {
    let gpu = gpu();
    let rows = 2000;
    let host = random_f32(rows * WIDTH);
    let table = gpu.managed_from(&host).unwrap();
    let mut t: HotTier<f32, berth::ManagedBuffer<f32>> = gpu
        .hot_tier(table, WIDTH, rows * 4 + 64 * WIDTH * 4)
        .unwrap();
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    for round in 0..6 {
        let ids = batch(&mut r, &perm[..32], rows, 400);
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        t.refresh(&gpu).unwrap();
        assert!(round < 2 || t.resident_rows() > 0, "{t:?}");
    }
    assert!(t.stats().hits > 0, "{:?}", t.stats());
    let mut plain = gpu.hot_tier(t.into_table(), WIDTH, 0).unwrap();
    let ids = batch(&mut r, &perm[..32], rows, 400);
    let mut out = poisoned(&gpu, ids.len());
    plain.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    check(&host, &ids, &out);
    let s = plain.stats();
    assert_eq!((s.rows, s.counted, s.hits), (400, 0, 0));
}

/// Refreshes begun while gathers go on (`begin_refresh`): gathers queued while a ranking is
/// held, and gathers that apply a finished ranking's kernels before their own, all equal the
/// host's rows, across evictions of a hot set that moves every few batches; the tier ends as
/// full as its capacity allows, with every row of the last hot set resident. With
/// `admit_on_repeat` too, whose doorkeeper the rankings' threads clear.
#[test]
fn gathers_stay_right_while_refreshes_rank_in_the_background() {
    background(false, 0.0);
}

#[test]
fn gathers_stay_right_while_refreshes_rank_in_the_background_admitting_on_repeat() {
    background(true, 0.0);
}

/// The same with half the rows not resident gathered by the host's threads, which mark them
/// from the host's residency while the ranking runs.
#[test]
fn host_gathers_stay_right_while_refreshes_rank_in_the_background() {
    background(false, 0.5);
}

fn background(on_repeat: bool, host_share: f64) {
    let gpu = gpu();
    let rows = 3000;
    let (mut t, host) = tier(&gpu, rows, 48);
    t.admit_on_repeat(on_repeat);
    t.host_gathers(host_share);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let hot: Vec<&[u32]> = perm.chunks(40).take(4).collect();
    for k in 0..32 {
        let hot = hot[(k / 8) % hot.len()];
        // Every third refresh is held for two batches: those gathers run while it ranks.
        let held = (k % 3 == 0).then(|| t.__hold_refreshes());
        t.begin_refresh(&gpu).unwrap();
        for _ in 0..2 {
            let ids = batch(&mut r, hot, rows, 400);
            let mut out = poisoned(&gpu, ids.len());
            let before = t.stats();
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
            if held.is_some() {
                // Nothing of the held refresh is applied: no row admitted or evicted.
                assert!(t.refresh_pending(), "batch {k}");
                assert_eq!(
                    (t.stats().admitted, t.stats().evicted),
                    (before.admitted, before.evicted)
                );
            }
        }
        drop(held);
    }
    t.finish_refresh(&gpu).unwrap();
    assert!(!t.refresh_pending());
    // The last hot set alone, until it is resident.
    let last = hot[3];
    for _ in 0..3 {
        let ids: Vec<u32> = (0..400)
            .map(|_| last[r.random_range(0..last.len())])
            .collect();
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        t.begin_refresh(&gpu).unwrap();
    }
    t.finish_refresh(&gpu).unwrap();
    assert!(last.iter().all(|&id| t.is_resident(id)), "{t:?}");
    let s = t.stats();
    assert!(s.evicted > 0 && s.hits > 0, "{s:?}");
    assert_eq!(t.resident_rows(), t.capacity());
}

/// A gather queued while a refresh's ranking is held (not done, and not to be done until
/// released) returns, and its guard's wait too, without waiting for it: the batch loop does
/// not stall. Its rows are read as resident before the refresh; the refresh's rows become
/// resident only once it is finished, and the ids counted meanwhile are added to the halved
/// counts.
#[test]
fn a_gather_does_not_wait_for_a_pending_ranking() {
    let gpu = gpu();
    let rows = 500;
    let (mut t, host) = tier(&gpu, rows, 64);
    let first: Vec<u32> = (0..8).flat_map(|id| [id * 7; 4]).collect();
    let mut out = poisoned(&gpu, first.len());
    t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
    assert_eq!(t.count(7), 4);
    let hold = t.__hold_refreshes();
    t.begin_refresh(&gpu).unwrap();
    assert!(t.refresh_pending());
    // The ranking cannot have run: the gather still reads every row from host memory.
    for _ in 0..3 {
        let mut out = poisoned(&gpu, first.len());
        t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
        check(&host, &first, &out);
    }
    assert!(t.refresh_pending());
    assert_eq!(t.stats().hits, 0);
    assert!((0..8).all(|id| !t.is_resident(id * 7)));
    assert_eq!((t.stats().admitted, t.resident_rows()), (0, 0));
    hold.release();
    let done = t
        .finish_refresh(&gpu)
        .unwrap()
        .expect("a refresh was pending");
    assert_eq!((done.admitted, done.resident), (8, 8));
    assert!(!t.refresh_pending());
    assert_eq!(t.finish_refresh(&gpu).unwrap(), None);
    assert!((0..8).all(|id| t.is_resident(id * 7)));
    // 4 reads halved, then 12 counted while the ranking was held.
    assert_eq!(t.count(7), 2 + 12);
    let mut out = poisoned(&gpu, first.len());
    t.gather(&gpu, &first, &mut out).unwrap().wait().unwrap();
    check(&host, &first, &out);
    assert_eq!(t.stats().hits, first.len() as u64);
}

/// `refresh` and `begin_refresh` then `finish_refresh` do the same.
#[test]
fn begin_and_finish_equal_a_refresh() {
    let gpu = gpu();
    let rows = 2000;
    let host = random_f32(rows * WIDTH);
    let budget = rows * 4 + 40 * WIDTH * 4;
    let mut sync = gpu
        .hot_tier(gpu.mapped_from(&host).unwrap(), WIDTH, budget)
        .unwrap();
    let mut split = gpu
        .hot_tier(gpu.mapped_from(&host).unwrap(), WIDTH, budget)
        .unwrap();
    // Which missed rows the log holds depends on the order the gather's blocks ran in, so
    // the two tiers may admit different rows; the counts they rank by are the same.
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    for round in 0..6 {
        let ids = batch(&mut r, &perm[round * 10..round * 10 + 60], rows, 300);
        for t in [&mut sync, &mut split] {
            let mut out = poisoned(&gpu, ids.len());
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            check(&host, &ids, &out);
        }
        let a = sync.refresh(&gpu).unwrap();
        split.begin_refresh(&gpu).unwrap();
        let b = split.finish_refresh(&gpu).unwrap().unwrap();
        assert!(a.resident <= 40 && b.resident <= 40, "round {round}");
        assert_eq!(
            (sync.resident_rows(), split.resident_rows()),
            (a.resident, b.resident)
        );
        assert_eq!(sync.stats().refreshes, split.stats().refreshes);
        for &id in &ids {
            assert_eq!(sync.count(id), split.count(id), "round {round}, row {id}");
        }
    }
}

/// While a ranking is held: an id out of range is the same typed error, and queues,
/// counts and applies nothing; leaked gather guards (`mem::forget`) leave their gathers to
/// the runtime's ordering, which the refresh's kernels, queued by the next gather, follow;
/// in a scope, gathers and the refresh's kernels all stay queued and right.
#[test]
fn ids_out_of_range_and_leaked_guards_while_a_refresh_is_pending() {
    let gpu = gpu();
    let rows = 1500;
    let (mut t, host) = tier(&gpu, rows, 32);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let (hot_a, hot_b) = (&perm[..32], &perm[32..64]);
    for round in 0..3 {
        let ids: Vec<u32> = (0..200).map(|_| hot_a[r.random_range(0..32)]).collect();
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        t.refresh(&gpu).unwrap();
        assert!(round == 0 || hot_a.iter().all(|&id| t.is_resident(id)));
    }
    // The next hot set, counted; then a refresh held.
    let ids: Vec<u32> = (0..300).map(|_| hot_b[r.random_range(0..32)]).collect();
    let mut out = poisoned(&gpu, ids.len());
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    let hold = t.__hold_refreshes();
    t.begin_refresh(&gpu).unwrap();
    let before = t.stats();
    let mut bad = ids.clone();
    bad[17] = rows as u32;
    let mut out = poisoned(&gpu, bad.len());
    match t.gather(&gpu, &bad, &mut out) {
        Err(Error::IdOutOfRange {
            batch, position, ..
        }) => assert_eq!((batch, position), (before.gathers, 17)),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("an id out of range was queued"),
    }
    assert!(out.to_vec().unwrap().iter().all(|&v| v == POISON));
    assert_eq!(
        (t.stats().rows, t.stats().counted),
        (before.rows, before.counted)
    );
    assert!(t.refresh_pending());
    // Gathers whose guards are leaked, reading hot set A from device memory while the held
    // refresh is about to evict it.
    let leaked: Vec<Vec<u32>> = (0..3)
        .map(|_| (0..200).map(|_| hot_a[r.random_range(0..32)]).collect())
        .collect();
    let mut outs: Vec<_> = leaked.iter().map(|b| poisoned(&gpu, b.len())).collect();
    for (ids, out) in leaked.iter().zip(outs.iter_mut()) {
        std::mem::forget(t.gather(&gpu, ids, out).unwrap());
    }
    hold.release();
    // The refresh's kernels are queued by this gather (or by `finish_refresh`).
    let mut out = poisoned(&gpu, ids.len());
    std::mem::forget(t.gather(&gpu, &ids, &mut out).unwrap());
    t.finish_refresh(&gpu).unwrap();
    check(&host, &ids, &out);
    for (ids, out) in leaked.iter().zip(&outs) {
        check(&host, ids, out);
    }
    assert!(t.stats().evicted > before.evicted, "{:?}", t.stats());
    // Rows of hot set A left; their slots take hot set B's rows from the next refreshes
    // (a slot emptied by a refresh is refilled from the refresh after it).
    for _ in 0..6 {
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        t.refresh(&gpu).unwrap();
    }
    assert!(hot_b.iter().all(|&id| t.is_resident(id)), "{t:?}");
    // The counts saw the leaked gathers' ids, not the failed one's.
    let id = bad[17 - 1];
    assert!(t.count(id) > 0);

    // In a scope: a held refresh, gathers queued behind one another, the release, and the
    // refresh's kernels queued by a later gather or `finish_refresh`, nothing waited for.
    let batches: Vec<Vec<u32>> = (0..6)
        .map(|k| {
            let hot = if k % 2 == 0 { hot_a } else { hot_b };
            batch(&mut r, hot, rows, 250)
        })
        .collect();
    let mut outs: Vec<_> = batches.iter().map(|b| poisoned(&gpu, b.len())).collect();
    gpu.scope(|s| {
        for (k, (ids, out)) in batches.iter().zip(outs.iter_mut()).enumerate() {
            let hold = (k % 2 == 0).then(|| t.__hold_refreshes());
            t.begin_refresh(s)?;
            t.gather(s, ids, out)?.detach();
            drop(hold);
        }
        t.finish_refresh(s)?;
        Ok(())
    })
    .unwrap();
    for (ids, out) in batches.iter().zip(&outs) {
        check(&host, ids, out);
    }
}

/// A tier dropped, or its table taken back, while a refresh's ranking is pending (held, or
/// running): nothing hangs or fails, and the table comes back unchanged.
#[test]
fn a_tier_dropped_with_a_refresh_pending() {
    let gpu = gpu();
    let rows = 800;
    let host = random_f32(rows * WIDTH);
    let ids: Vec<u32> = (0..300).map(|i| (i * 13 % rows) as u32).collect();
    for held in [false, true] {
        for into_table in [false, true] {
            let (mut t, _) = tier(&gpu, rows, 100);
            let mut out = poisoned(&gpu, ids.len());
            t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
            let hold = held.then(|| t.__hold_refreshes());
            t.begin_refresh(&gpu).unwrap();
            let mut out = poisoned(&gpu, ids.len());
            std::mem::forget(t.gather(&gpu, &ids, &mut out).unwrap());
            if into_table {
                let table = t.into_table();
                assert_eq!(table.len(), rows * WIDTH);
            } else {
                drop(t);
            }
            // The ranking thread, if still held, runs once the hold goes.
            drop(hold);
        }
    }
    // A fresh tier over the same host data still works.
    let table = gpu.mapped_from(&host).unwrap();
    let mut t = gpu
        .hot_tier(table, WIDTH, rows * 4 + 100 * WIDTH * 4)
        .unwrap();
    t.begin_refresh(&gpu).unwrap();
    let mut out = poisoned(&gpu, ids.len());
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    check(&host, &ids, &out);
}

/// A refresh whose kernels cannot be queued (here: on another context's queue) stays
/// pending: nothing changes what gathers read, and the next gather on the tier's own
/// context queues them. Rows logged by the gathers (their slot table update fails) or, with
/// `admit_on_repeat`, rows copied from the table (their fill fails).
#[test]
fn a_refresh_whose_kernels_fail_to_queue_stays_pending() {
    let gpu = gpu();
    let other = Gpu::simulator();
    let rows = 600;
    for on_repeat in [false, true] {
        let (mut t, host) = tier(&gpu, rows, 50);
        t.admit_on_repeat(on_repeat);
        let ids: Vec<u32> = (0..40).map(|i| i * 11).collect();
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        t.begin_refresh(&gpu).unwrap();
        assert!(t.finish_refresh(&other).is_err());
        assert!(t.refresh_pending());
        let mut out = poisoned(&gpu, ids.len());
        assert!(t.gather(&other, &ids, &mut out).is_err());
        assert!(out.to_vec().unwrap().iter().all(|&v| v == POISON));
        assert!(t.refresh_pending());
        assert_eq!((t.stats().admitted, t.resident_rows()), (0, 0));
        assert!(ids.iter().all(|&id| !t.is_resident(id)));
        // On the tier's own context the refresh's kernels go first.
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
        assert!(!t.refresh_pending());
        assert_eq!(t.resident_rows(), 40, "on_repeat {on_repeat}");
        assert_eq!(t.stats().hits, 40);
        let done = t.refresh(&gpu).unwrap();
        assert_eq!(done.resident, 40);
        let mut out = poisoned(&gpu, ids.len());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        check(&host, &ids, &out);
    }
}

/// `ids` in mapped memory, and an output of their rows, poisoned.
/// The rows `ids`, noted for the tier with `note_reads`, read by a kernel through the tier
/// (`noted_ids`) into a poisoned output: equal to `host`'s rows, bit for bit.
fn kernel_reads_noted(gpu: &Gpu, t: &HotTier<f32>, host: &[f32], ids: &[u32]) {
    let mut out = poisoned(gpu, ids.len());
    rows_gather(
        gpu,
        Grid::cover(ids.len() * WIDTH),
        t,
        t.noted_ids(),
        &mut out,
    )
    .unwrap()
    .wait()
    .unwrap();
    check(host, ids, &out);
}

fn for_kernel(gpu: &Gpu, ids: &[u32]) -> (MappedBuffer<u32>, DeviceBuffer<f32>) {
    (gpu.mapped_from(ids).unwrap(), poisoned(gpu, ids.len()))
}

#[test]
fn kernels_read_rows_through_the_tier_as_gathers_do_across_refreshes_and_evictions() {
    kernels_read_rows_through_the_tier(0);
}

/// With room for captures the logs keep the free slots the gathers did not take: a tier this
/// small has no others, and the rows the kernels read (no capture) still become resident.
#[test]
fn with_room_kernels_read_rows_through_the_tier_as_gathers_do() {
    kernels_read_rows_through_the_tier(2);
}

/// Two hot sets in turn over a tier of 64 slots with room for `room` captures a log, read by
/// a kernel through the tier with a gather now and then, a refresh after each batch: each
/// batch's hits are the rows resident when it was looked up, and each set ends resident.
fn kernels_read_rows_through_the_tier(room: usize) {
    let gpu = gpu();
    let rows = 3000;
    let (mut t, host) = tier(&gpu, rows, 64);
    t.capture_room(room);
    let mut r = rng();
    let (hot_a, hot_b) = two_hot_sets(&mut r, rows);
    let (hot_a, hot_b) = (&hot_a[..], &hot_b[..]);
    for (phase, hot) in [hot_a, hot_b].into_iter().enumerate() {
        let mut last_hits = 0;
        for round in 0..9 {
            let ids = phase_batch(&mut r, hot, rows, round);
            let before = t.stats();
            let resident_in_batch = ids.iter().filter(|&&id| t.is_resident(id)).count() as u64;
            if round % 3 == 2 {
                // A gather now and then, beside the kernel's reads: its capture copies rows
                // into free slots, which the kernels then read from device memory.
                let mut out = poisoned(&gpu, ids.len());
                t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
                check(&host, &ids, &out);
            } else {
                t.note_reads(&gpu, &ids).unwrap();
                // The ids as the tier staged them, read in place by the kernel.
                assert_eq!(t.noted_ids().to_vec(), ids);
                kernel_reads_noted(&gpu, &t, &host, &ids);
            }
            let batch_stats = t.stats().since(&before);
            assert_eq!((batch_stats.gathers, batch_stats.rows), (1, 500));
            assert_eq!(batch_stats.hits, resident_in_batch, "phase {phase}");
            last_hits = batch_stats.hits;
            t.refresh(&gpu).unwrap();
        }
        // The rows the kernels read were counted: the phase's hot rows are all resident.
        assert!(
            hot.iter().all(|&id| t.is_resident(id)),
            "phase {phase}: {t:?}"
        );
        assert_eq!(last_hits, 500, "phase {phase}");
    }
    assert!(t.stats().evicted >= 16, "{:?}", t.stats());
}

#[test]
fn a_kernel_reads_rows_of_any_tier_form() {
    let gpu = gpu();
    let rows = 500;
    let mut r = rng();
    let ids: Vec<u32> = (0..300).map(|_| r.random_range(0..rows as u32)).collect();
    // No slot for a row: every row read in place; a budget of the whole table: every row
    // resident from the start; a tier of 32 slots.
    for resident in [0, rows, 32] {
        let (mut t, host) = tier(&gpu, rows, resident);
        let whole = resident == rows;
        assert_eq!(t.resident_rows(), if whole { rows } else { 0 });
        for _ in 0..3 {
            t.note_reads(&gpu, &ids).unwrap();
            kernel_reads_noted(&gpu, &t, &host, &ids);
            t.refresh(&gpu).unwrap();
        }
        let s = t.stats();
        match resident {
            0 => assert_eq!((s.looked_up, s.hits, t.resident_rows()), (0, 0, 0)),
            32 => assert_eq!(t.resident_rows(), 32),
            _ => assert_eq!((s.looked_up, s.hits), (900, 900)),
        }
        assert_eq!((s.gathers, s.rows), (3, 900));
        // Counting a row past the table is refused, naming the batch and position.
        let before = t.stats();
        let err = t.note_reads(&gpu, &[1, 2, rows as u32 + 7]).unwrap_err();
        assert!(
            matches!(err, Error::IdOutOfRange { batch: 3, position: 2, id, rows: n } if id == rows as u32 + 7 && n == rows),
            "{err}"
        );
        assert_eq!(
            HotTierStats {
                staging: before.staging,
                ..t.stats()
            },
            before,
            "nothing counted"
        );
        // A failed note leaves no ids for a kernel to read.
        assert!(t.noted_ids().is_empty());
    }
}

/// On the simulator: a GPU context is lost with a kernel's panic, and the other tests share
/// the process's.
#[test]
fn a_kernel_reading_a_row_past_the_table_stops_with_its_location() {
    for resident in [0, 32] {
        let gpu = Gpu::simulator();
        let rows = 100;
        let (t, _) = tier(&gpu, rows, resident);
        let bad = [3u32, rows as u32];
        let (dev_ids, mut out) = for_kernel(&gpu, &bad);
        let err = rows_gather(&gpu, Grid::cover(bad.len() * WIDTH), &t, &dev_ids, &mut out)
            .and_then(|p| p.wait())
            .unwrap_err();
        let Error::KernelPanic { kernel, report, .. } = &err else {
            panic!("expected the kernel's panic, got {err}");
        };
        assert_eq!(kernel, "rows_gather");
        assert!(report.file.ends_with("args.rs"), "{report}");
        let want = format!("the len is {rows} but the index is {rows}");
        assert!(report.message.contains(&want), "{report}");
    }
}

/// A table with no tier (`InPlaceRows`) is read row by row in place, mapped or managed, by
/// the same kernel that reads through a tier.
#[test]
fn kernels_read_rows_of_a_table_with_no_tier_in_place() {
    let gpu = gpu();
    let rows = 2000;
    let host = random_f32(rows * WIDTH);
    let mut r = rng();
    let ids: Vec<u32> = (0..300).map(|_| r.random_range(0..rows as u32)).collect();
    fn read<M: berth::MappedArg<f32>>(gpu: &Gpu, table: &M, host: &[f32], ids: &[u32]) {
        let view = InPlaceRows::new(table, WIDTH).unwrap();
        assert_eq!((view.rows(), view.width()), (host.len() / WIDTH, WIDTH));
        let (dev_ids, mut out) = for_kernel(gpu, ids);
        rows_gather(
            gpu,
            Grid::cover(ids.len() * WIDTH),
            &view,
            &dev_ids,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        check(host, ids, &out);
    }
    read(&gpu, &gpu.mapped_from(&host).unwrap(), &host, &ids);
    read(&gpu, &gpu.managed_from(&host).unwrap(), &host, &ids);
}

/// A kernel reading a table with no tier, its guard leaked and the kernel held behind a gate,
/// reads the table as it was when queued: a host write to the table waits for it.
#[test]
fn leaked_kernels_reading_a_table_with_no_tier_finish_before_the_host_writes_it() {
    let gpu = gpu();
    let rows = 500;
    let host = random_f32(rows * WIDTH);
    let mut table = gpu.mapped_from(&host).unwrap();
    let mut r = rng();
    let ids: Vec<u32> = (0..200).map(|_| r.random_range(0..rows as u32)).collect();
    let (dev_ids, mut out) = for_kernel(&gpu, &ids);
    let stream = gpu.stream().unwrap();
    behind_a_gate(&gpu, &stream, || {
        let view = InPlaceRows::new(&table, WIDTH).unwrap();
        std::mem::forget(
            rows_gather(
                &stream,
                Grid::cover(ids.len() * WIDTH),
                &view,
                &dev_ids,
                &mut out,
            )
            .unwrap(),
        );
        // The kernel has not run (the gate holds its stream): the write waits for it.
        table.fill(POISON);
    });
    stream.synchronize().unwrap();
    check(&host, &ids, &out);
    assert!(table.iter().all(|&v| v == POISON));
}

#[test]
fn a_table_with_no_tier_is_whole_rows_of_its_own_context() {
    let a = Gpu::simulator();
    let table = a.mapped_from(&[0f32; 30]).unwrap();
    for width in [0, 8] {
        assert!(matches!(
            InPlaceRows::new(&table, width),
            Err(Error::Usage(_))
        ));
    }
    // Rows of any width: 3 floats, not a whole 16-byte unit, read as they are.
    let host: Vec<f32> = (0..30).map(|v| v as f32).collect();
    let table = a.mapped_from(&host).unwrap();
    let view = InPlaceRows::new(&table, 3).unwrap();
    assert_eq!(view.rows(), 10);
    let ids = [7u32, 0, 9];
    let dev_ids = a.mapped_from(&ids).unwrap();
    let mut out = a.upload(&[POISON; 9]).unwrap();
    rows_gather(&a, Grid::cover(9), &view, &dev_ids, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&id| host[id as usize * 3..][..3].to_vec())
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    let b = Gpu::simulator();
    let (dev_ids, mut out) = for_kernel(&b, &[1, 2]);
    let err = rows_gather(&b, Grid::cover(2 * WIDTH), &view, &dev_ids, &mut out)
        .err()
        .expect("refused");
    assert!(matches!(err, Error::WrongContext { .. }), "{err}");
}

/// On the simulator (a kernel's panic loses the context): an id past a table with no tier
/// stops the kernel with its location, as through a tier.
#[test]
fn a_kernel_reading_past_a_table_with_no_tier_stops_with_its_location() {
    let gpu = Gpu::simulator();
    let rows = 100;
    let table = gpu.mapped_from(&random_f32(rows * WIDTH)).unwrap();
    let view = InPlaceRows::new(&table, WIDTH).unwrap();
    let bad = [3u32, rows as u32];
    let (dev_ids, mut out) = for_kernel(&gpu, &bad);
    let err = rows_gather(
        &gpu,
        Grid::cover(bad.len() * WIDTH),
        &view,
        &dev_ids,
        &mut out,
    )
    .and_then(|p| p.wait())
    .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected the kernel's panic, got {err}");
    };
    assert_eq!(kernel, "rows_gather");
    assert!(
        report
            .message
            .contains(&format!("the len is {rows} but the index is {rows}")),
        "{report}"
    );
}

#[test]
fn leaked_kernels_in_flight_read_the_rows_they_were_queued_against_whatever_is_refreshed_after() {
    let gpu = gpu();
    let rows = 2000;
    let (mut t, host) = tier(&gpu, rows, 40);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    let (hot_a, hot_b) = (&perm[..40], &perm[40..80]);
    // Hot set A resident.
    for _ in 0..3 {
        t.note_reads(&gpu, hot_a).unwrap();
        t.refresh(&gpu).unwrap();
    }
    assert!(hot_a.iter().all(|&id| t.is_resident(id)));
    let ids: Vec<u32> = (0..400).map(|k| hot_a[k % hot_a.len()]).collect();
    let (dev_ids, mut out) = for_kernel(&gpu, &ids);
    // The kernel reading A waits behind a gate on a stream of its own, its guard leaked;
    // meanwhile hot set B is counted and refreshed in on the default stream, evicting A.
    let stream = gpu.stream().unwrap();
    behind_a_gate(&gpu, &stream, || {
        std::mem::forget(
            rows_gather(
                &stream,
                Grid::cover(ids.len() * WIDTH),
                &t,
                &dev_ids,
                &mut out,
            )
            .unwrap(),
        );
        for _ in 0..3 {
            t.note_reads(&gpu, hot_b).unwrap();
            t.note_reads(&gpu, hot_b).unwrap();
            t.refresh(&gpu).unwrap();
        }
    });
    stream.synchronize().unwrap();
    assert!(hot_b.iter().all(|&id| t.is_resident(id)), "{t:?}");
    assert!(hot_a.iter().all(|&id| !t.is_resident(id)), "{t:?}");
    check(&host, &ids, &out);
}

#[test]
fn a_pending_refresh_is_applied_before_the_kernel_that_follows_note_reads() {
    let gpu = gpu();
    let rows = 1000;
    let (mut t, host) = tier(&gpu, rows, 16);
    let hot: Vec<u32> = (0..16).map(|k| k * 61 % rows as u32).collect();
    t.note_reads(&gpu, &hot).unwrap();
    t.begin_refresh(&gpu).unwrap();
    // Until it is applied, nothing is resident; note_reads queues it once ranked.
    while t.refresh_pending() {
        t.note_reads(&gpu, &hot).unwrap();
        std::thread::yield_now();
    }
    assert!(hot.iter().all(|&id| t.is_resident(id)), "{t:?}");
    kernel_reads_noted(&gpu, &t, &host, &hot);
}

#[test]
fn a_tier_of_another_context_is_refused() {
    let a = Gpu::simulator();
    let b = Gpu::simulator();
    let (t, _) = tier(&a, 100, 8);
    let (dev_ids, mut out) = for_kernel(&b, &[1, 2]);
    let err = rows_gather(&b, Grid::cover(2 * WIDTH), &t, &dev_ids, &mut out)
        .err()
        .expect("refused");
    assert!(matches!(err, Error::WrongContext { .. }), "{err}");
}

#[test]
fn a_gather_clears_the_noted_ids() {
    let gpu = gpu();
    let (mut t, host) = tier(&gpu, 100, 8);
    t.note_reads(&gpu, &[5, 6, 7]).unwrap();
    assert_eq!(
        (t.noted_ids().len(), t.noted_ids().to_vec()),
        (3, vec![5, 6, 7])
    );
    let mut out = poisoned(&gpu, 2);
    t.gather(&gpu, &[1, 2], &mut out).unwrap().wait().unwrap();
    check(&host, &[1, 2], &out);
    assert!(t.noted_ids().is_empty());
}

#[test]
fn a_kernel_reading_a_tier_is_not_recorded_into_a_graph() {
    let gpu = gpu();
    let (mut t, _) = tier(&gpu, 100, 8);
    t.note_reads(&gpu, &[1, 2]).unwrap();
    let mut out_buf = poisoned(&gpu, 2);
    let mut graph = gpu.graph();
    let mut out = graph.hold(&mut out_buf).unwrap();
    let err = graph
        .record(|r| {
            rows_gather(r, Grid::cover(2 * WIDTH), &t, t.noted_ids(), &mut out)?.detach();
            Ok(())
        })
        .expect_err("refused");
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
    assert!(err.to_string().contains("not held by the graph"), "{err}");
}

/// Leaked gathers (`mem::forget`) of a full tier with room for captures, refreshes begun
/// between them on the same stream: every batch reads its rows right, whatever the captures
/// evicted after the gathers queued before them read it, and a hot set the tier never held
/// is read from device memory soon after its first misses (the captures take it in).
#[test]
fn leaked_gathers_with_room_for_captures_read_right_while_the_captures_evict() {
    let gpu = gpu();
    let rows = 6000;
    let (mut t, host) = tier(&gpu, rows, 600);
    t.capture_room(300);
    let mut r = rng();
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    perm.shuffle(&mut r);
    // The tier fills with 600 rows read once: cold after the halving, their slots granted.
    let mut out = poisoned(&gpu, 600);
    t.gather(&gpu, &perm[..600], &mut out)
        .unwrap()
        .wait()
        .unwrap();
    t.refresh(&gpu).unwrap();
    t.refresh(&gpu).unwrap();
    assert_eq!(t.resident_rows(), 600);
    // Three hot sets of 100 rows the tier never held, 10 batches each.
    let batches: Vec<Vec<u32>> = (0..30)
        .map(|k| {
            let set = &perm[600 + (k / 10) * 100..][..100];
            (0..200).map(|_| set[r.random_range(0..100)]).collect()
        })
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> =
        batches.iter().map(|b| poisoned(&gpu, b.len())).collect();
    let stream = gpu.stream().unwrap();
    let before = t.gather_reads().unwrap();
    for (k, (ids, out)) in batches.iter().zip(outs.iter_mut()).enumerate() {
        std::mem::forget(t.gather(&stream, ids, out).unwrap());
        if k % 4 == 3 {
            t.begin_refresh(&stream).unwrap();
        }
    }
    for (ids, out) in batches.iter().zip(&outs) {
        check(&host, ids, out);
    }
    // Each set's first batches miss its rows; then the captures have them (about 1,100
    // lookups from host in all). Without room, a set's misses last until a refresh admits
    // it (about 5,000).
    let reads = t.gather_reads().unwrap().since(&before);
    assert_eq!(reads.rows, 6000);
    assert!(reads.from_host < 2500, "{reads:?}");
    t.finish_refresh(&stream).unwrap();
    let mixed: Vec<u32> = (0..900).map(|i| perm[(i * 7) % 900]).collect();
    let mut out = poisoned(&gpu, mixed.len());
    t.gather(&gpu, &mixed, &mut out).unwrap().wait().unwrap();
    check(&host, &mixed, &out);
}
