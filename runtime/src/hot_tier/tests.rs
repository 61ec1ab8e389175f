use super::host::set_bit;
use super::miss_log::{Logged, Untaken};
use super::policy::{ADD_PER_SHARD, ADD_SHARDS, SPLIT_MIN};
use super::*;
use std::num::NonZeroUsize;
use std::sync::atomic::Ordering;

/// A tier of `slots` slots over a mapped table of `rows` rows of `width` floats, each
/// element its own index; and that table.
fn numbered_tier(gpu: &Gpu, rows: usize, width: usize, slots: usize) -> (HotTier<f32>, Vec<f32>) {
    let host: Vec<f32> = (0..rows * width).map(|v| v as f32).collect();
    let table = gpu.mapped_from(&host).unwrap();
    let t = gpu
        .hot_tier(table, width, rows * 4 + slots * width * 4)
        .unwrap();
    (t, host)
}

/// The device's slot table after a refresh: every resident row's slot, as the host's
/// table says, and `NOT_RESIDENT` everywhere else — no entry left `PENDING`.
fn assert_tables_agree(t: &mut HotTier<f32>) {
    t.reclaim();
    let PolicyState::Idle(policy) = &t.policy else {
        panic!("a refresh is pending")
    };
    assert_eq!(
        policy.bits, t.resident_bits,
        "the policy's and the tier's residency"
    );
    let device = t.slots.to_vec().unwrap();
    let mut host = vec![NOT_RESIDENT; t.rows];
    for (s, &id) in policy.resident.iter().enumerate() {
        if id != NOT_RESIDENT {
            host[id as usize] = s as u32;
        }
    }
    // The rows logged since (in the gathers' log, or in a log filled while the last
    // ranking ran), not settled by a refresh yet: named by the captures with their
    // granted slots (or pending where a capture was not queued), each slot holding its
    // row, unless a refresh admitted the row meanwhile; and the rows those slots held,
    // evicted by the captures (which the host still calls resident).
    let rows = t.rows;
    let tier = t.tier.to_vec().unwrap();
    let table = t.table.to_vec();
    let mut logged = vec![false; rows];
    for log in t.filled.iter().chain(std::iter::once(&t.live)) {
        let read = log.read(true).unwrap();
        for (i, &s) in read.granted.iter().enumerate().take(read.ids.len()) {
            let v = read.evicts.get(i).copied().unwrap_or(NOT_RESIDENT);
            if v == NOT_RESIDENT || host[v as usize] != s {
                continue;
            }
            if device[v as usize] == s {
                assert!(
                    !read.captured,
                    "row {v}: not evicted by its place's capture"
                );
                continue;
            }
            host[v as usize] = NOT_RESIDENT;
            logged[v as usize] = true;
        }
        for (&id, &s) in read.ids.iter().zip(&read.granted) {
            if host[id as usize] != NOT_RESIDENT {
                continue;
            }
            logged[id as usize] = true;
            let d = device[id as usize];
            if d == PENDING {
                assert!(!read.captured, "row {id}: pending in a captured log");
                continue;
            }
            assert_eq!(d, s, "row {id}: a logged row in its granted slot");
            let w = t.width;
            assert_eq!(tier[s as usize * w..][..w], table[id as usize * w..][..w]);
            host[id as usize] = s;
        }
    }
    assert_eq!(device, host, "device and host slot tables");
    for (id, &s) in device.iter().enumerate() {
        assert!(
            s == NOT_RESIDENT || (s as usize) < t.capacity,
            "row {id}: {s:#x}"
        );
        if !logged[id] {
            assert_eq!(s != NOT_RESIDENT, t.is_resident(id as u32), "row {id}");
        }
    }
}

#[test]
fn missed_rows_are_logged_once_and_every_claim_is_settled_by_the_refresh() {
    let gpu = Gpu::simulator();
    let (rows, width) = (64usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
    assert_eq!(t.capacity(), 4);
    // Counting only position `b mod 1000` of batch `b`: the log decides what is admitted.
    t.count_every(NonZeroUsize::new(1000).unwrap());
    // Ten distinct rows missed, each many times, by one launch: four slots are free, so
    // four claims are logged and the other six given back.
    assert_eq!(t.log_limit - t.live.start, 4);
    let ids: Vec<u32> = (0..200).map(|i| 10 + (i % 10)).collect();
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    // The capture copied each logged row into its slot and named the slot in the table.
    let device = t.slots.to_vec().unwrap();
    let named: Vec<usize> = (0..rows).filter(|&id| device[id] != NOT_RESIDENT).collect();
    assert_eq!(named.len(), 4, "{named:?}");
    assert!(
        named
            .iter()
            .all(|&id| (10..20).contains(&id) && device[id] < 4)
    );
    let tier = t.tier.to_vec().unwrap();
    for &id in &named {
        let slot = device[id] as usize;
        assert_eq!(tier[slot * width..][..width], host[id * width..][..width]);
    }
    // Claims past the limit count too (and are given back): threads that saw the
    // counter below the limit may still claim.
    let n = t.live.n.dev.to_vec().unwrap()[0];
    assert!((4..=ids.len() as u64).contains(&n), "{n}");
    let mut logged = t.live.log.prefix_to_vec(4).unwrap();
    logged.sort_unstable();
    assert_eq!(
        logged.iter().map(|&id| id as usize).collect::<Vec<_>>(),
        named
    );
    // Gathers read them from the tier from the next batch on.
    let before = out.to_vec().unwrap();
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    assert_eq!(out.to_vec().unwrap(), before);
    // Row 10 was counted (position 0 of batch 0); it and three logged rows are admitted.
    let r = t.refresh(&gpu).unwrap();
    assert_eq!((r.admitted, r.resident), (4, 4));
    assert!(t.is_resident(10));
    assert_tables_agree(&mut t);
    assert_eq!(t.live.n.dev.to_vec().unwrap(), [0]);
    // The tier is full: misses are no longer logged, and the gathers stay right.
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    assert!(t.slots.to_vec().unwrap().iter().all(|&s| s != PENDING));
    let got = out.to_vec().unwrap();
    for (b, &id) in ids.iter().enumerate() {
        let row = &host[id as usize * width..][..width];
        assert_eq!(&got[b * width..][..width], row, "position {b}");
    }
    t.refresh(&gpu).unwrap();
    assert_tables_agree(&mut t);
}

/// The guard of a gather whose misses are captured waits for the gather alone: `wait`
/// returns while the capture into the tier is held at a gate, a host write of `out`
/// (on another stream than the gather's) then waits for the capture, which reads `out`,
/// and the rows the capture moved into the tier are the gathered ones.
#[test]
fn a_gathers_wait_ends_before_its_capture_and_a_write_of_out_waits_for_it() {
    use crate::own_kernels::capture_gate;
    use std::sync::atomic::AtomicBool;
    let gpu = Gpu::simulator();
    let stream = gpu.stream().unwrap();
    let (rows, width) = (64usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
    let ids: Vec<u32> = (0..200).map(|i| 10 + (i % 10)).collect();
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    let held = capture_gate::hold(t.tier.device_ptr());
    let (waited, written) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            t.gather(&stream, &ids, &mut out).unwrap().wait().unwrap();
            waited.store(true, Ordering::SeqCst);
            out.copy_from(&vec![-1.0; ids.len() * width]).unwrap();
            written.store(true, Ordering::SeqCst);
        });
        let started = std::time::Instant::now();
        while !waited.load(Ordering::SeqCst) && started.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let returned = waited.load(Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let early = written.load(Ordering::SeqCst);
        drop(held);
        worker.join().unwrap();
        assert!(returned, "the gather's wait waited for its capture");
        assert!(
            !early,
            "a write of `out` did not wait for the capture reading it"
        );
    });
    let device = t.slots.to_vec().unwrap();
    let named: Vec<usize> = (0..rows).filter(|&id| device[id] != NOT_RESIDENT).collect();
    assert_eq!(named.len(), 4, "{named:?}");
    let tier = t.tier.to_vec().unwrap();
    for &id in &named {
        let slot = device[id] as usize;
        assert_eq!(tier[slot * width..][..width], host[id * width..][..width]);
    }
    // The next gather, on the same stream, reads them from the tier.
    let mut again = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    t.gather(&stream, &ids, &mut again).unwrap().wait().unwrap();
    let got = again.to_vec().unwrap();
    for (b, &id) in ids.iter().enumerate() {
        assert_eq!(
            got[b * width..][..width],
            host[id as usize * width..][..width]
        );
    }
}

/// When a gather's capture was not queued, the refresh copies the logged rows from the
/// table instead of trusting their slots.
#[test]
fn without_a_capture_the_fill_copies_the_logged_rows() {
    let gpu = Gpu::simulator();
    let (rows, width) = (64usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 8);
    let ids: Vec<u32> = (20..28).collect();
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    // As if the capture had failed: the granted slots hold something else.
    t.live.captured = false;
    t.tier.copy_from(&vec![-1.0; t.tier.len()]).unwrap();
    assert_eq!(t.refresh(&gpu).unwrap().admitted, 8);
    assert_tables_agree(&mut t);
    out.copy_from(&vec![-2.0; out.len()]).unwrap();
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    assert_eq!(t.stats().hits, 8);
    let got = out.to_vec().unwrap();
    assert_eq!(got, host[20 * width..28 * width]);
}

/// Refreshes begun while gathers go on: once each is finished, the device's slot table,
/// the host's residency and the policy's records agree, through admissions and
/// evictions; the ids counted while a ranking ran are in the counts.
#[test]
fn tables_agree_after_refreshes_that_ranked_while_gathers_ran() {
    let gpu = Gpu::simulator();
    let (rows, width) = (500usize, 4usize);
    let (mut t, _) = numbered_tier(&gpu, rows, width, 24);
    let mut out = gpu.alloc_zeroed::<f32>(60 * width).unwrap();
    for k in 0..12u32 {
        // A hot set of 20 rows that moves by 7 rows every refresh.
        let ids: Vec<u32> = (0..60).map(|i| (k * 7 + i % 20) % rows as u32).collect();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        let hold = t.__hold_refreshes();
        t.begin_refresh(&gpu).unwrap();
        let before = matches!(t.policy, PolicyState::Running(_));
        assert!(before && t.deferred.is_empty());
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        assert_eq!(t.deferred.len(), ids.len());
        let got = out.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            assert_eq!(got[b * width], (id as usize * width) as f32, "position {b}");
        }
        hold.release();
        t.finish_refresh(&gpu).unwrap().unwrap();
        assert!(t.deferred.is_empty());
        assert_tables_agree(&mut t);
        assert_eq!(
            t.resident_rows(),
            t.resident_bits
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
        );
    }
    assert!(t.stats().evicted > 0, "{:?}", t.stats());
}

/// The free slots go to the gathers' log up to a log's length; from `split_min` free
/// slots on, half of them are set apart for the log of the gathers while the next
/// ranking runs; every slot granted is counted reserved, none twice.
#[test]
fn free_slots_are_split_between_the_two_logs_from_a_threshold_on() {
    let mut p = Policy::new(3 * SPLIT_MIN, 3 * SPLIT_MIN, SPLIT_MIN);
    let [main, side] = p.grant(true, [0, 0]);
    assert_eq!((main.len(), side.len()), (SPLIT_MIN, SPLIT_MIN));
    assert_eq!((p.free.len(), p.reserved), (SPLIT_MIN, 2 * SPLIT_MIN));
    let mut all: Vec<u32> = main.iter().chain(&side).chain(&p.free).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 3 * SPLIT_MIN);
    // Fewer free slots than the threshold: all to the gathers' log.
    p.free.pop();
    let [main, side] = p.grant(true, [0, 0]);
    assert_eq!(
        (main.len(), side.len(), p.free.len()),
        (SPLIT_MIN - 1, 0, 0)
    );
    let mut q = Policy::new(SPLIT_MIN + 10, SPLIT_MIN + 10, 4 * SPLIT_MIN);
    let [main, side] = q.grant(true, [0, 0]);
    assert_eq!(
        (main.len(), side.len()),
        (SPLIT_MIN / 2 + 5, SPLIT_MIN / 2 + 5)
    );
    let mut r = Policy::new(100, 100, 100);
    assert_eq!(r.grant(true, [0, 0])[1].len(), 0);
}

/// Many ids added by the host's threads together, split by row range, leave the same
/// counts, touched rows and reference bits as the same ids added one by one; ids at both
/// ends of every range, repeated, and counts at their ceiling included.
#[test]
fn where_the_free_slots_are_too_few_the_most_counted_rows_are_admitted() {
    // Eight slots, no log. Rows 10 to 15, read once, come in and are counted 0 after the
    // halving; then rows counted 1, 2, 3 and 4 times, first counted in that order: the
    // two free slots go to the two most counted, and two of rows 10 to 15 leave, whose
    // slots the next plan fills with the next most counted.
    let mut p = Policy::new(8, 16, 0);
    let [main, side] = p.grant(true, [0, 0]);
    assert!(main.is_empty() && side.is_empty());
    p.add_all(&[10, 11, 12, 13, 14, 15]);
    let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
    assert_eq!(plan.refresh.admitted, 6);
    p.add_all(&[2, 5, 3, 9, 9, 3, 9, 5, 9, 3]);
    let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
    let mut filled = plan.fill_ids.clone();
    filled.sort_unstable();
    assert_eq!(filled, [3, 9]);
    assert_eq!(plan.refresh.evicted, 2);
    // Counts now 2 (9), 1 (3), 1 (5), 0 (2): row 5 fills a slot of the two that left.
    let plan = p.plan(&[], [0, 0], 0, std::time::Duration::ZERO);
    assert_eq!(plan.fill_ids, [5]);
    assert!(bit(&p.bits, 5) && !bit(&p.bits, 2));
}

#[test]
fn adding_many_ids_at_once_equals_adding_them_one_by_one() {
    let rows = 64 * ADD_SHARDS * 3 + 17;
    let shard = rows.div_ceil(ADD_SHARDS).next_multiple_of(64);
    let mut ids: Vec<u32> = (0..(ADD_PER_SHARD * ADD_SHARDS) as u64 * 2)
        .map(|i| ((i * 2_654_435_761) % rows as u64) as u32)
        .collect();
    for b in 0..rows.div_ceil(shard) {
        for id in [b * shard, (b * shard + shard - 1).min(rows - 1)] {
            ids.extend([id as u32; 3]);
        }
    }
    ids.push(rows as u32 - 1);
    let (mut one, mut all) = (Policy::new(8, rows, 0), Policy::new(8, rows, 0));
    for p in [&mut one, &mut all] {
        p.counts[5] = u32::MAX - 1;
        p.touched.push(5);
    }
    ids.extend([5, 5, 5]);
    for &id in &ids {
        one.add(id);
    }
    all.add_all(&ids);
    assert_eq!(one.counts[5], u32::MAX);
    assert!(one.counts == all.counts && one.referenced == all.referenced);
    let (mut a, mut b) = (one.touched.clone(), all.touched.clone());
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    // A few ids go the one-by-one way, with the same result.
    let few = &ids[..100];
    for &id in few {
        one.add(id);
    }
    all.add_all(few);
    assert!(one.counts == all.counts && one.referenced == all.referenced);
}

/// The counting thread adds every counted id once, in whatever state the gathers find
/// it, and a refresh ranks with all of them.
#[test]
fn the_counting_thread_counts_every_id_once() {
    let gpu = Gpu::simulator();
    let (rows, width) = (512usize, 4usize);
    let mut t = small_tier(&gpu, rows, 8);
    assert!(t.counter.is_some());
    // Handed over every other batch of 64 ids, kept in between.
    t.hand_over_ids = 100;
    let mut expect = vec![0u32; rows];
    let mut out = gpu.alloc_zeroed::<f32>(64 * width).unwrap();
    let mut handed = 0;
    for k in 0..200u32 {
        let ids: Vec<u32> = (0..64).map(|i| (k * 31 + i * i) % rows as u32).collect();
        gather_counted(&gpu, &mut t, &ids, &mut out, &mut expect);
        handed += usize::from(matches!(t.policy, PolicyState::Counting));
    }
    assert!(handed > 0, "no batch was counted on the thread");
    for id in 0..rows as u32 {
        assert_eq!(t.count(id), expect[id as usize], "row {id}");
    }
    assert!(t.deferred.is_empty());
    // A tier dropped while its counts are on the thread waits for them.
    t.gather(
        &gpu,
        &[1, 2, 3],
        &mut gpu.alloc_zeroed::<f32>(3 * width).unwrap(),
    )
    .unwrap()
    .wait()
    .unwrap();
    drop(t);
}

/// A refresh begun while the counting thread has the counts takes them from it on the
/// ranking's thread: every id counted before the refresh is in the counts the ranking
/// halves, once.
#[test]
fn a_refresh_begun_while_the_counting_thread_has_the_counts_ranks_with_all_of_them() {
    let gpu = Gpu::simulator();
    let (rows, width) = (512usize, 4usize);
    let mut t = small_tier(&gpu, rows, 8);
    t.hand_over_ids = 100;
    let mut expect = vec![0u32; rows];
    let mut out = gpu.alloc_zeroed::<f32>(64 * width).unwrap();
    let mut begun = 0;
    for k in 0..100u32 {
        let ids: Vec<u32> = (0..64).map(|i| (k * 17 + i * i) % rows as u32).collect();
        gather_counted(&gpu, &mut t, &ids, &mut out, &mut expect);
        if k % 7 == 6 && matches!(t.policy, PolicyState::Counting) {
            t.begin_refresh(&gpu).unwrap();
            t.finish_refresh(&gpu).unwrap();
            begun += 1;
            for e in &mut expect {
                *e /= 2;
            }
        }
    }
    assert!(
        begun > 0,
        "no refresh began while the counting thread had the counts"
    );
    for id in 0..rows as u32 {
        assert_eq!(t.count(id), expect[id as usize], "row {id}");
    }
}

/// Staging parts and threads out of range are taken as the nearest allowed; a new tier
/// has three staging threads on a host of 16 cores or more, two on one of 4 to 15, one
/// elsewhere.
#[test]
fn staging_parts_and_threads_are_kept_in_range() {
    let gpu = Gpu::simulator();
    let (mut t, _) = numbered_tier(&gpu, 64, 4, 4);
    for (cores, threads) in [(1, 1), (3, 1), (4, 2), (15, 2), (16, 3), (192, 3)] {
        assert_eq!(default_staging_threads(cores), threads, "{cores} cores");
    }
    assert_eq!(
        t.max_staging_threads(),
        default_staging_threads(host_cores())
    );
    assert_eq!(t.max_staging_parts(), DEFAULT_PARTS);
    for (asked, kept) in [(0, 1), (1, 1), (3, 3), (8, 8), (100, 8)] {
        t.staging_threads(asked);
        assert_eq!(t.max_staging_threads(), kept, "threads {asked}");
        t.staging_parts(asked);
        assert_eq!(t.max_staging_parts(), kept, "parts {asked}");
    }
}

/// A tier can be shared with threads that read its state, and moved to another.
#[test]
fn a_tier_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<HotTier<f32>>();
}

#[test]
fn hits_are_looked_up_for_every_counted_id_up_to_a_cap_then_for_an_even_share() {
    // Even rows resident.
    let bits = vec![0x5555_5555_5555_5555u64; 1 << 10];
    let ids: Vec<u32> = (0..65_536u32).map(|i| (i * 7919) % 65_536).collect();
    let mut stagers = Stagers::default();
    stagers.ensure(3);
    for (every, batch, helpers) in [
        (1, 0, 0),
        (16, 3, 0),
        (64, 5, 0),
        (16, 1 << 20, 0),
        (7, 9, 0),
        (1, 0, 3),
        (16, 3, 1),
        (64, 5, 2),
        (7, 9, 3),
    ] {
        let (mut dst, mut picked) = (vec![0u32; ids.len()], vec![99]);
        picked.clear();
        let sample = Sample::of_batch(batch, every);
        assert_eq!(
            copy_checked(
                &mut dst,
                &ids,
                1 << 16,
                Some(sample),
                &mut picked,
                &stagers,
                helpers
            ),
            None
        );
        assert_eq!(dst, ids);
        let first = (batch % every as u64) as usize;
        let want: Vec<u32> = ids[first..].iter().copied().step_by(every).collect();
        assert_eq!(picked, want, "every {every}, {helpers} helpers");
        let mut added = Vec::new();
        let (counted, looked, hits) = count_ids(&bits, &picked, |p| added.extend_from_slice(p));
        assert_eq!(added, want, "every {every}");
        assert_eq!(counted, want.len() as u64);
        let look = want.len().div_ceil(HIT_LOOKUPS);
        let looked_ids: Vec<u32> = want.iter().copied().step_by(look).collect();
        assert!(looked as usize <= HIT_LOOKUPS && looked as usize > HIT_LOOKUPS / 2);
        assert_eq!(looked, looked_ids.len() as u64);
        assert_eq!(
            hits,
            looked_ids.iter().filter(|&&id| id % 2 == 0).count() as u64
        );
    }
    // A small batch: every counted id looked up.
    let mut picked = Vec::new();
    let mut dst = vec![0u32; 4000];
    copy_checked(
        &mut dst,
        &ids[..4000],
        1 << 16,
        Some(Sample::of_batch(2, 4)),
        &mut picked,
        &stagers,
        0,
    );
    let (counted, looked, hits) = count_ids(&bits, &picked, |_| {});
    assert_eq!((counted, looked), (1000, 1000));
    let even = ids[2..4000]
        .iter()
        .step_by(4)
        .filter(|&&id| id % 2 == 0)
        .count();
    assert_eq!(hits, even as u64);
    // Batches shorter than the first position counted pick nothing.
    picked.clear();
    copy_checked(
        &mut dst[..3],
        &ids[..3],
        1 << 16,
        Some(Sample::of_batch(5, 8)),
        &mut picked,
        &stagers,
        3,
    );
    assert!(picked.is_empty());
}

/// The vector copy equals the plain one: every alignment of the
/// destination, every length around the vectors' width, the largest id anywhere, ids with
/// the top bit set (unsigned order).
#[test]
fn the_vector_copy_copies_every_id_and_finds_the_largest() {
    let mut x = 0x9e37_79b9u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mut buf = vec![0u32; 200];
    for offset in 0..4 {
        for len in (0..70usize).chain([100, 195]) {
            for top in [0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
                // The largest id in every lane of every running maximum, head and tail.
                for at in (0..len.max(1)).step_by(if len > 70 { 3 } else { 1 }) {
                    let mut ids: Vec<u32> = (0..len).map(|_| next() % 1000).collect();
                    if len > 0 {
                        ids[at] = top;
                    }
                    buf.fill(7);
                    let dst = &mut buf[offset..offset + len];
                    let max = copy_max(dst, &ids);
                    assert_eq!(dst, &ids[..], "offset {offset}, len {len}");
                    let want = ids.iter().copied().max().unwrap_or(0);
                    assert_eq!(max, want, "offset {offset}, len {len}, top {top} at {at}");
                    assert!(buf[..offset].iter().all(|&v| v == 7));
                    assert!(buf[offset + len..].iter().all(|&v| v == 7));
                }
            }
        }
    }
}

#[test]
fn the_first_id_out_of_range_is_found_wherever_it_is() {
    // The copy is whole whatever the check finds, on the calling thread alone or with
    // helpers staging shares of it (an id out of range in any share).
    let mut stagers = Stagers::default();
    stagers.ensure(3);
    let first_checked = |ids: &[u32], rows: usize| -> Option<usize> {
        let mut dst = vec![7u32; ids.len()];
        let first = copy_checked(&mut dst, ids, rows, None, &mut Vec::new(), &stagers, 0);
        assert_eq!(dst, ids);
        // Picking ids to count, and helpers, change neither the copy nor the check.
        for helpers in [0, 1, 3] {
            let (mut again, mut picked) = (vec![7u32; ids.len()], Vec::new());
            let sample = Some(Sample::of_batch(3, 16));
            assert_eq!(
                copy_checked(
                    &mut again,
                    ids,
                    rows,
                    sample,
                    &mut picked,
                    &stagers,
                    helpers
                ),
                first,
                "{helpers} helpers"
            );
            assert_eq!(again, ids);
            let want: Vec<u32> = ids.iter().copied().skip(3).step_by(16).collect();
            assert_eq!(picked, want, "{helpers} helpers");
        }
        first
    };
    let mut ids: Vec<u32> = (0..100_000).map(|i| i % 100).collect();
    assert_eq!(first_checked(&ids, 100), None);
    assert_eq!(first_checked(&ids, 99), Some(99));
    for at in [0, 4095, 4096, 50_001, 99_999] {
        let kept = ids[at];
        ids[at] = 100;
        assert_eq!(first_checked(&ids, 100), Some(at), "at {at}");
        ids[at] = u32::MAX;
        assert_eq!(first_checked(&ids, 100), Some(at), "at {at}");
        ids[at] = kept;
    }
    assert_eq!(first_checked(&[], 0), None);
    assert_eq!(first_checked(&[0], 0), Some(0));
    assert_eq!(first_checked(&[u32::MAX], 1 << 33), None);
}

#[test]
fn logged_rows_the_counted_ones_displace_are_given_back() {
    let gpu = Gpu::simulator();
    let (rows, width) = (64usize, 4usize);
    let table = gpu.mapped_zeroed::<f32>(rows * width).unwrap();
    let mut t = gpu
        .hot_tier(table, width, rows * 4 + 2 * width * 4)
        .unwrap();
    // Every id counted: rows 1 and 2 (three reads each) take both slots, and rows 3 and
    // 4, logged as missed too, are left out.
    let ids = [3u32, 4, 1, 1, 1, 2, 2, 2];
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    let device = t.slots.to_vec().unwrap();
    assert_eq!(device.iter().filter(|&&s| s != NOT_RESIDENT).count(), 2);
    let r = t.refresh(&gpu).unwrap();
    assert_eq!(r.admitted, 2);
    assert!(t.is_resident(1) && t.is_resident(2));
    assert!(!t.is_resident(3) && !t.is_resident(4));
    assert_tables_agree(&mut t);
}

/// A tier of `slots` rows over a table of `rows` rows of 4 floats, on `gpu`.
fn small_tier(gpu: &Gpu, rows: usize, slots: usize) -> HotTier<f32> {
    let table = gpu.mapped_zeroed::<f32>(rows * 4).unwrap();
    gpu.hot_tier(table, 4, rows * 4 + slots * 4 * 4).unwrap()
}

/// Gather `ids` into `out` and wait, each id counted in `expect` (what the tier's counts
/// should hold).
fn gather_counted(
    gpu: &Gpu,
    t: &mut HotTier<f32>,
    ids: &[u32],
    out: &mut DeviceBuffer<f32>,
    expect: &mut [u32],
) {
    for &id in ids {
        expect[id as usize] += 1;
    }
    t.gather(gpu, ids, out).unwrap().wait().unwrap();
}

/// Gather `ids` from a [`small_tier`], then refresh it.
fn gather_and_refresh(gpu: &Gpu, t: &mut HotTier<f32>, ids: &[u32]) -> Refresh {
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * 4).unwrap();
    t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
    t.refresh(gpu).unwrap()
}

#[test]
fn the_row_probe_reads_the_rows_it_names_and_the_simulator_prices_them_by_the_model() {
    let gpu = Gpu::simulator();
    let (rows, width) = (3_000, 8);
    let (t, host) = numbered_tier(&gpu, rows, width, 64);
    let units = width * 4 / HOT_UNIT;
    for run in 0..2 {
        let (scratch, _) = probe_rows(&gpu, &t.table, (rows, units, width), 1_024, run).unwrap();
        let got = scratch.to_vec().unwrap();
        for i in 0..1_024 {
            let id = probe_word(run * 1_024 + i as u64, rows as u64) as usize;
            assert!(id < rows);
            assert_eq!(
                got[i * width..][..width],
                host[id * width..][..width],
                "row {i}"
            );
        }
    }
    // No link to time: the model's price of a row read in place, cached.
    let costs = crate::placement::calibration::link_costs(&gpu.inner);
    let model = 1.0
        / crate::placement::mapped_row_s(&costs, costs.random_per_s(rows * width * 4), width * 4);
    assert_eq!(t.measure_row_reads().unwrap(), model);
    assert_eq!(t.row_reads.get(), Some(&model));
    // The decision prices every row read in place at it.
    let d = t.decision(4_096);
    assert!(
        (d.mapped_s - (costs.fixed_s + 4_096.0 / model)).abs() < 1e-12,
        "{d:?}"
    );
}

#[test]
fn the_decision_reads_the_gathers_since_the_refresh_before_last() {
    let gpu = Gpu::simulator();
    let (rows, width) = (3_000, 8);
    // 64 slots: the 64 hot rows fill them, and nothing is left for the cold ones.
    let (mut t, _) = numbered_tier(&gpu, rows, width, 64);
    let hot: Vec<u32> = (0..4_096u32).map(|i| i % 64 * 40).collect();
    // Odd rows: none of them hot.
    let cold: Vec<u32> = (0..4_096u32).map(|i| 1 + i % 900 * 2).collect();
    let mut out = gpu.alloc_zeroed::<f32>(4_096 * width).unwrap();
    for round in 0..3 {
        for _ in 0..4 {
            t.gather(&gpu, &hot, &mut out).unwrap().wait().unwrap();
        }
        if round < 2 {
            t.refresh(&gpu).unwrap();
        }
    }
    assert_eq!(t.resident_rows(), 64);
    // Before any refresh the window is the tier's whole life; here it is the gathers
    // since the first refresh began, all of them hits.
    assert_eq!(t.recent(), t.stats().since(&t.window[0]));
    assert_eq!(t.recent().hit_rate(), 1.0);
    assert!(t.stats().hit_rate() < 1.0);
    assert_eq!(t.decision(4_096).choice, GatherChoice::Tier);
    // Two refreshes with no gather between them, then the cold rows: the window holds
    // only those, which all miss, and the model reads in place.
    t.refresh(&gpu).unwrap();
    t.refresh(&gpu).unwrap();
    assert_eq!(
        t.recent(),
        t.stats(),
        "an empty window: the tier's whole life"
    );
    for _ in 0..2 {
        t.gather(&gpu, &cold, &mut out).unwrap().wait().unwrap();
    }
    let recent = t.recent();
    assert_eq!((recent.gathers, recent.looked_up), (2, 2_048));
    assert_eq!(recent.hits, 0);
    // The GPU's count over the same span: every row of the two batches missed.
    let counted = t.gpu_recent().expect("8,192 rows counted");
    assert_eq!((counted.rows, counted.from_host), (8_192, 8_192));
    assert!(t.stats().hit_rate() > 0.5, "{:?}", t.stats());
    let d = t.decision(4_096);
    assert_eq!(d.choice, GatherChoice::Mapped, "{d:?}");
    assert!((d.host_s - recent.gathering.as_secs_f64() / 2.0).abs() < 1e-12);
}

#[test]
fn the_decision_adds_the_host_part_the_gathers_took() {
    let gpu = Gpu::simulator();
    let (rows, width) = (3_000, 8);
    let (mut t, _) = numbered_tier(&gpu, rows, width, 64);
    assert_eq!(t.stats().gathering, std::time::Duration::ZERO);
    assert_eq!(t.decision(4_096).host_s, 0.0);
    let ids: Vec<u32> = (0..4_096u32).map(|i| i * 7 % rows as u32).collect();
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    for _ in 0..3 {
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
    }
    // A gather refused for an id out of range queues nothing and adds no time.
    let before = t.stats().gathering;
    assert!(t.gather(&gpu, &[rows as u32], &mut out).is_err());
    let s = t.stats();
    assert_eq!(s.gathering, before);
    assert!(s.gathering > std::time::Duration::ZERO);
    assert!(s.gathering >= s.staging, "{s:?}");
    let d = t.decision(4_096);
    let per_gather = s.gathering.as_secs_f64() / s.gathers as f64;
    assert!((d.host_s - per_gather).abs() < 1e-12, "{d:?}");
    // 4,096 ids go whole; 65,536 in the default two parts (8,192 ids a part at least).
    assert_eq!((d.parts, t.parts_for(4_096)), (1, 1));
    assert_eq!(t.parts_for(65_536), 2);
    t.staging_parts(8);
    assert_eq!(t.parts_for(65_536), 8);
    assert_eq!(t.parts_for(20_000), 2);
    assert!(d.batch_s() >= d.gpu_s().max(d.host_s));
}

#[test]
fn a_budget_that_holds_the_table_keeps_all_of_it_from_the_start() {
    let gpu = Gpu::simulator();
    // 2,500 rows: three launches of the whole tier's fill in tests.
    let (rows, width) = (2_500, 8);
    let (mut t, host) = numbered_tier(&gpu, rows, width, rows);
    assert_eq!(t.capacity(), rows);
    assert_eq!(t.resident_rows(), rows);
    assert!((0..rows as u32).all(|id| t.is_resident(id)));
    assert_eq!(t.decision(512).choice, GatherChoice::Resident);
    // Every row is in its own slot, named there, and equal to the table's.
    assert_eq!(
        t.slots.to_vec().unwrap(),
        (0..rows as u32).collect::<Vec<_>>()
    );
    assert_eq!(t.tier.to_vec().unwrap(), host);
    // Spread over the table, repeats included (a multiplicative hash of the position).
    let ids: Vec<u32> = (0..512u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32 % rows as u32)
        .collect();
    for _ in 0..3 {
        let mut out = gpu.upload(&vec![f32::NAN; ids.len() * width]).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        let got = out.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            let row = id as usize * width;
            assert_eq!(
                got[b * width..][..width],
                host[row..row + width],
                "position {b}"
            );
        }
        assert_eq!(
            t.refresh(&gpu).unwrap(),
            Refresh {
                admitted: 0,
                evicted: 0,
                resident: rows,
            }
        );
    }
    let s = t.stats();
    assert_eq!((s.counted, s.admitted, s.filled), (0, 0, 0));
    assert_eq!((s.looked_up, s.hits), (3 * 512, 3 * 512));
    assert_eq!(s.hit_rate(), 1.0);
    assert_eq!(t.count(ids[0]), 0);
    // Ids out of range are refused as by any tier.
    let mut out = gpu.alloc_zeroed::<f32>(2 * width).unwrap();
    let e = t.gather(&gpu, &[1, rows as u32], &mut out).map(drop);
    assert!(
        matches!(e, Err(Error::IdOutOfRange { position: 1, .. })),
        "{e:?}"
    );

    // A row less than the table: an empty tier that fills as the gathers ask.
    let (mut t, _) = numbered_tier(&gpu, rows, width, rows - 1);
    assert_eq!(t.resident_rows(), 0);
    assert_ne!(t.decision(512).choice, GatherChoice::Resident);
    gather_and_refresh_numbered(&gpu, &mut t, &ids, width);
    assert!(t.resident_rows() > 0);
    assert!(t.stats().counted > 0);
}

/// Gather `ids` from a [`numbered_tier`] of `width` into an output poisoned first, and
/// check each row against the host's `table`.
fn gather_checked(gpu: &Gpu, t: &mut HotTier<f32>, table: &[f32], ids: &[u32], width: usize) {
    let mut out = gpu.upload(&vec![-1.0f32; ids.len() * width]).unwrap();
    t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
    let got = out.to_vec().unwrap();
    for (b, &id) in ids.iter().enumerate() {
        let row = &table[id as usize * width..][..width];
        assert_eq!(&got[b * width..][..width], row, "position {b}");
    }
}

/// Gather `ids` from a [`numbered_tier`] of `width` and refresh it.
fn gather_and_refresh_numbered(gpu: &Gpu, t: &mut HotTier<f32>, ids: &[u32], width: usize) {
    let mut out = gpu.alloc_zeroed::<f32>(ids.len() * width).unwrap();
    t.gather(gpu, ids, &mut out).unwrap().wait().unwrap();
    t.refresh(gpu).unwrap();
}

#[test]
fn a_row_read_again_while_resident_outlives_a_row_read_once() {
    // Rows 5 and 9 take the tier's two slots; one of them is read again while resident;
    // by the time row 7 needs a slot, both are counted 0 (halved twice). The row read
    // again stays, whichever slot the hand reaches first: each row in turn.
    for again in [5u32, 9] {
        let gpu = Gpu::simulator();
        let mut t = small_tier(&gpu, 64, 2);
        let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_and_refresh(&gpu, t, ids);
        assert_eq!(gather(&mut t, &[5, 9]).admitted, 2);
        gather(&mut t, &[again]);
        assert_eq!(t.count(again), 0);
        // The slot freed for row 7 is filled from the next refresh on.
        assert_eq!(gather(&mut t, &[7]).evicted, 1);
        let once = 5 + 9 - again;
        assert!(t.is_resident(again) && !t.is_resident(once));
        assert_eq!(gather(&mut t, &[7]).admitted, 1);
        assert!(t.is_resident(again) && t.is_resident(7));
        assert_tables_agree(&mut t);
    }
}

/// Rows missed while a ranking runs are logged into the log granted for that time: read
/// from the tier from the next gather on, settled by the refresh after the next, and
/// their slots never handed to another row meanwhile.
#[test]
fn rows_missed_while_a_ranking_runs_are_read_from_the_tier_at_once() {
    let gpu = Gpu::simulator();
    let (rows, width) = (64usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 16);
    t.count_every(NonZeroUsize::new(1000).unwrap());
    let mut out = gpu.alloc_zeroed::<f32>(4 * width).unwrap();
    t.gather(&gpu, &[0, 1, 2, 3], &mut out)
        .unwrap()
        .wait()
        .unwrap();
    // Logs of six places (as a tier of millions of rows has logs of far fewer places than
    // its free slots).
    t.reclaim();
    let PolicyState::Idle(p) = &mut t.policy else {
        unreachable!("no refresh begun")
    };
    p.log_len = 6;
    p.split_min = 0;
    assert_eq!(t.refresh(&gpu).unwrap().admitted, 4);
    // Twelve slots free: six for the gathers' log, six for theirs while a ranking runs.
    assert_eq!(t.log_limit - t.live.start, 6);
    let hold = t.__hold_refreshes();
    t.begin_refresh(&gpu).unwrap();
    assert_eq!(t.log_limit - t.live.start, 6);
    let ids = [30u32, 31, 30, 2];
    let hits = t.stats().hits;
    for _ in 0..2 {
        out.copy_from(&vec![-1.0; out.len()]).unwrap();
        t.gather(&gpu, &ids, &mut out).unwrap().wait().unwrap();
        let got = out.to_vec().unwrap();
        for (b, &id) in ids.iter().enumerate() {
            assert_eq!(
                got[b * width..][..width],
                host[id as usize * width..][..width]
            );
        }
    }
    let device = t.slots.to_vec().unwrap();
    let tier = t.tier.to_vec().unwrap();
    for id in [30usize, 31] {
        let s = device[id] as usize;
        assert!(s < t.capacity(), "row {id}: {s:#x}");
        assert_eq!(tier[s * width..][..width], host[id * width..][..width]);
    }
    // The host counts a hit only for rows a refresh settled (one counted id a batch).
    assert_eq!(t.stats().hits - hits, 0);
    hold.release();
    t.finish_refresh(&gpu).unwrap().unwrap();
    assert!(!t.is_resident(30) && t.filled.len() == 1);
    assert_tables_agree(&mut t);
    // Rows the gathers missed since are logged into the new log's slots, none of them
    // the slots of rows 30 and 31.
    t.gather(&gpu, &[40, 41, 42, 41], &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let device = t.slots.to_vec().unwrap();
    let mut named: Vec<u32> = [30, 31, 40, 41, 42].map(|id| device[id]).to_vec();
    named.sort_unstable();
    named.dedup();
    assert_eq!(named.len(), 5);
    assert_tables_agree(&mut t);
    t.refresh(&gpu).unwrap();
    for id in [30, 31, 40, 41, 42] {
        assert!(t.is_resident(id), "row {id}");
    }
    assert_tables_agree(&mut t);
}

/// With room for captures, a log holds free places up to twice the places the gathers
/// took in its role since the last ranking (a free place holds no row until a capture
/// takes it), and no cold row's slot is granted while free slots are left; without room
/// the free slots are split evenly.
#[test]
fn with_room_free_slots_go_to_the_log_whose_role_takes_places() {
    for room in [0, 8] {
        let mut p = Policy::new(64, 256, 32);
        p.split_min = 0;
        p.free_min = 2;
        for s in 0..40u32 {
            p.resident[s as usize] = s;
            set_bit(&mut p.bits, s, true);
        }
        p.free = (40..64).rev().collect();
        // Four free slots granted to each log: the gathers took three of the first's
        // (its role, the gathers' log) and none of the other's.
        let main_slots = p.free.split_off(20);
        let side_slots = p.free.split_off(16);
        p.reserved = 8;
        let logged = |ids: Vec<u32>, granted: &[u32], kept| Logged {
            granted: granted[..ids.len()].to_vec(),
            ids,
            evicts: Vec::new(),
            captured: true,
            untaken: Untaken::Kept(kept),
        };
        let logs = [
            logged(Vec::new(), &side_slots, 4),
            logged(vec![100, 101, 102], &main_slots, 1),
        ];
        p.kept_free = [1, 4];
        let plan = p.plan(&logs, [1, 4], room, std::time::Duration::ZERO);
        let [(main, main_rows), (side, side_rows)] = &plan.grants;
        if room == 0 {
            assert_eq!((main.len(), side.len()), (8, 8));
            continue;
        }
        // The first may hold 2 × 3 free places (it keeps one), the other 2 (it keeps 4).
        assert_eq!((main.len(), side.len()), (5, 0));
        assert!(
            main_rows.is_empty() && side_rows.is_empty(),
            "free slots only"
        );
        assert_eq!(p.free.len(), 11, "the free slots not granted stay free");
        assert!(p.condemned.iter().all(|&w| w == 0), "no cold row condemned");
        for id in [100, 101, 102] {
            assert!(bit(&p.bits, id), "row {id} settled");
        }
    }
}

/// With room for captures, the rows captures admitted and nothing read since are the
/// first cold rows granted, oldest first, before the clock's hand looks; a row read
/// since leaves the list and is not granted.
#[test]
fn rows_captured_and_not_read_since_are_granted_first() {
    let mut p = Policy::new(8, 64, 8);
    p.free.clear();
    for s in 0..8u32 {
        p.resident[s as usize] = s;
        set_bit(&mut p.bits, s, true);
    }
    p.probation.extend([(5, 5), (6, 6), (7, 7)]);
    p.add(7);
    let (mut main, mut side) = (Vec::new(), Vec::new());
    let [main_rows, side_rows] = p.condemn([&mut main, &mut side], [0, 0], 2);
    assert_eq!((main, main_rows), (vec![5, 6], vec![5, 6]));
    assert_eq!((side, side_rows), (vec![0, 1], vec![0, 1]));
    assert!(p.probation.is_empty());
    for s in [0, 1, 5, 6] {
        assert!(bit(&p.condemned, s), "slot {s}");
    }
    assert!(!bit(&p.condemned, 7));
}

/// Room for captures under a hot set that moves while rankings run: every gather reads
/// its rows right, and after each refresh the host's and the device's tables agree,
/// rows evicted by the captures of the log filled while the ranking ran included (some
/// of them asked for again, and logged again, in the same log or the next).
#[test]
fn with_room_for_captures_gathers_stay_right_and_tables_agree_while_rankings_run() {
    let gpu = Gpu::simulator();
    let (rows, width) = (500usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 48);
    t.capture_room(6);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u32
    };
    let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_checked(&gpu, t, &host, ids, width);
    let (mut evicted, mut granted_while_ranking) = (0, 0);
    for k in 0..40u32 {
        // A hot set of 16 rows that moves wholly every 8 refreshes, and cold rows.
        let base = (k / 8) * 100;
        let batch = |next: &mut dyn FnMut() -> u32| -> Vec<u32> {
            (0..24)
                .map(|_| match next() % 4 {
                    0 => next() % rows as u32,
                    _ => base + next() % 16,
                })
                .collect()
        };
        let ids = batch(&mut next);
        gather(&mut t, &ids);
        if k % 3 == 0 {
            evicted += t.refresh(&gpu).unwrap().evicted;
        } else {
            let hold = t.__hold_refreshes();
            t.begin_refresh(&gpu).unwrap();
            if t.live.evicts[t.live.start.min(t.live.evicts.len())..]
                .iter()
                .any(|&id| id != NOT_RESIDENT)
            {
                granted_while_ranking += 1;
            }
            for _ in 0..2 {
                let ids = batch(&mut next);
                gather(&mut t, &ids);
            }
            hold.release();
            evicted += t.finish_refresh(&gpu).unwrap().unwrap().evicted;
        }
        assert_tables_agree(&mut t);
    }
    assert!(
        evicted > 0 && granted_while_ranking > 0,
        "{evicted} {granted_while_ranking}"
    );
}

/// Room for captures: cold rows' slots are granted to the log, their rows stay resident
/// until a capture takes the place, and the refresh after settles both rows; places not
/// taken stay with the gathers' log and keep their rows; counted rows are never granted.
#[test]
fn room_for_captures_evicts_cold_rows_only_at_the_captures_that_take_their_slots() {
    let gpu = Gpu::simulator();
    let (rows, width) = (64usize, 4usize);
    let (mut t, host) = numbered_tier(&gpu, rows, width, 4);
    t.capture_room(2);
    let gather = |t: &mut HotTier<f32>, ids: &[u32]| gather_checked(&gpu, t, &host, ids, width);
    // The places a log's gathers may take, and the rows their slots hold.
    let window = |log: &MissLog| {
        let rows = log.evicts.get(log.start..).unwrap_or_default().to_vec();
        (log.limit() - log.start, rows)
    };
    // Rows 0 and 1 counted four times, rows 2 and 3 once: after the refresh those are
    // counted 2, these 0 (counted when the refresh granted, so not granted yet).
    gather(&mut t, &[0, 1, 0, 1, 0, 1, 0, 1, 2, 3]);
    assert_eq!(t.refresh(&gpu).unwrap().admitted, 4);
    assert_eq!(t.log_limit - t.live.start, 0);
    // Now rows 2 and 3 are cold: their slots go to the log, and they stay resident.
    let r = t.refresh(&gpu).unwrap();
    assert_eq!((r.evicted, r.resident), (0, 4));
    assert_eq!(t.log_limit - t.live.start, 2);
    let (_, granted) = window(&t.live);
    let mut cold = granted.clone();
    cold.sort_unstable();
    assert_eq!(cold, [2, 3]);
    assert!(t.is_resident(2) && t.is_resident(3));
    assert_tables_agree(&mut t);
    // No capture takes a place: the next refresh leaves the rows resident (read or not),
    // and their places with the log, which stays the gathers'.
    gather(&mut t, &[0, 1, 2, 3]);
    let r = t.refresh(&gpu).unwrap();
    assert_eq!((r.evicted, r.admitted, r.resident), (0, 0, 4));
    assert_tables_agree(&mut t);
    assert_eq!(window(&t.live), (2, granted.clone()));
    let first = granted[0];
    // Row 40 takes the first place, evicting its row on the device; that row, asked for
    // again, takes the second, evicting the other; then both are read from the tier.
    let before = t.gather_reads().unwrap();
    gather(&mut t, &[40]);
    let slots = t.slots.to_vec().unwrap();
    assert_eq!(slots[first as usize], NOT_RESIDENT);
    assert!(slots[40] < 4);
    assert!(
        t.is_resident(first),
        "the host learns it at the next refresh"
    );
    assert_tables_agree(&mut t);
    gather(&mut t, &[first]);
    gather(&mut t, &[first, 40, 0, 1]);
    assert_eq!(t.gather_reads().unwrap().since(&before).from_host, 2);
    assert_tables_agree(&mut t);
    let r = t.refresh(&gpu).unwrap();
    assert_eq!((r.admitted, r.evicted, r.resident), (2, 2, 4));
    let other = 5 - first; // rows 2 and 3
    assert!(t.is_resident(first) && t.is_resident(40) && !t.is_resident(other));
    assert_tables_agree(&mut t);
    gather(&mut t, &[first, 40, 0, 1, other]);
}
