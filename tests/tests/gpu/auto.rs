//! `#[auto]` placement and sparse reads of host tables: embedding rows from a mapped table,
//! reads in place or copies chosen per launch, the hinted range enforced.

use super::*;

#[test]
fn embedding_rows_are_gathered_from_a_mapped_table() {
    use berth_examples::{F4, embedding_gather};
    let (_g, gpu) = gpu();
    for (rows, dim4) in [(1000usize, 16usize), (3001, 64)] {
        let host = random_f4(rows * dim4);
        let table = gpu.mapped_from(&host).unwrap();
        let ids: Vec<u32> = random_u32(777).iter().map(|i| i % rows as u32).collect();
        let dids = gpu.upload(&ids).unwrap();
        let mut out = gpu
            .upload(&vec![
                F4 {
                    x: f32::NAN,
                    ..Default::default()
                };
                ids.len() * dim4
            ])
            .unwrap();
        embedding_gather(
            &gpu,
            Grid::cover(ids.len() * dim4),
            dim4 as u32,
            &table,
            &dids,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        let want: Vec<F4> = ids
            .iter()
            .flat_map(|&id| {
                host[id as usize * dim4..(id as usize + 1) * dim4]
                    .iter()
                    .copied()
            })
            .collect();
        assert_eq!(
            out.to_vec().unwrap(),
            want,
            "{rows} rows of {dim4} × 4 floats"
        );
    }
}

/// `gather_auto` of `idx` with `hint` from `mapped` (holding `table`) into a poisoned output,
/// checked against the host.
fn gather_auto_matches_host(
    gpu: &Gpu,
    hint: berth::Touch,
    mapped: &berth::MappedBuffer<f32>,
    table: &[f32],
    idx: &[u32],
) {
    let didx = gpu.upload(idx).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    berth_examples::gather_auto(gpu, Grid::cover(idx.len()), hint, mapped, &didx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
    assert_eq!(out.to_vec().unwrap(), want, "{hint:?}");
}

#[test]
fn auto_placement_reads_in_place_or_copies_and_gets_the_same_result() {
    use berth::Touch;
    use berth::placement::{Choice, decide};
    let (_g, gpu) = gpu();
    let n = 1 << 22;
    let table = random_f32(n);
    let mapped = gpu.mapped_from(&table).unwrap();
    let costs = gpu.link_costs();
    let profile = gpu.device_profile().unwrap();
    // A range of 3.2 MB read once: copying just it beats reading it in place with the
    // uncalibrated constants (and with the H200's).
    let (start, end) = (1_000_000usize, 1_800_000usize);
    for (hint, expect) in [
        (Touch::Elements(100), Choice::Mapped),
        (Touch::All, Choice::CopyWhole),
        (Touch::Range { start, end }, Choice::CopyRange),
    ] {
        let d = decide(&costs, &profile, &hint.access(n, 4));
        assert_eq!(d.choice, expect, "{hint:?}: {d:?}");
        let window = hint.window(n);
        let idx: Vec<u32> = random_u32(5000)
            .iter()
            .map(|&i| (window.start + i as usize % window.len()) as u32)
            .collect();
        gather_auto_matches_host(&gpu, hint, &mapped, &table, &idx);
    }
    // The copy path used pooled staging.
    assert!(gpu.pool_stats().device_allocations + gpu.pool_stats().device_reuses > 0);

    // Whole rows (`Touch::Rows`): a few rows are read in place, all of them copied first.
    use berth_examples::{F4, embedding_gather_auto};
    let (rows, dim4) = (4096usize, 32usize);
    let host = random_f4(rows * dim4);
    let table = gpu.mapped_from(&host).unwrap();
    for (hint, expect) in [
        (
            Touch::Rows {
                rows: 3,
                row_elems: dim4,
            },
            Choice::Mapped,
        ),
        (Touch::All, Choice::CopyWhole),
    ] {
        let d = decide(&costs, &profile, &hint.access(rows * dim4, 16));
        assert_eq!(d.choice, expect, "{hint:?}: {d:?}");
        let ids: Vec<u32> = random_u32(37).iter().map(|i| i % rows as u32).collect();
        let dids = gpu.upload(&ids).unwrap();
        let nan = F4 {
            x: f32::NAN,
            y: f32::NAN,
            z: f32::NAN,
            w: f32::NAN,
        };
        let mut out = gpu.upload(&vec![nan; ids.len() * dim4]).unwrap();
        let grid = Grid::cover(ids.len() * dim4);
        embedding_gather_auto(&gpu, grid, hint, dim4 as u32, &table, &dids, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let want: Vec<F4> = ids
            .iter()
            .flat_map(|&r| &host[r as usize * dim4..(r as usize + 1) * dim4])
            .copied()
            .collect();
        assert!(out.to_vec().unwrap() == want, "{hint:?}: rows differ");
    }
}

#[test]
fn a_copy_the_device_has_no_room_for_is_read_in_place() {
    use berth::Touch;
    use berth::placement::Choice;
    let (_g, gpu) = gpu();
    // 256 MiB read whole: the model copies it first.
    let n = 1 << 26;
    let table = random_f32(n);
    let mapped = gpu.mapped_from(&table).unwrap();
    let d = gpu.auto_decision(&mapped, Touch::All);
    assert_eq!((d.choice, d.copy_fits), (Choice::CopyWhole, true), "{d:?}");
    // Free staging of that size would fit it: release the pools, then fill the device until
    // less than the table is free.
    gpu.trim_pools().unwrap();
    let mut filler = Vec::new();
    loop {
        let (free, _) = gpu.memory_info().unwrap();
        if free < (n * 4) / 2 {
            break;
        }
        match gpu.alloc_zeroed::<u8>((free - (n * 4) / 4).min(8 << 30)) {
            Ok(b) => filler.push(b),
            Err(_) => break,
        }
    }
    assert!(gpu.memory_info().unwrap().0 < n * 4);
    let d = gpu.auto_decision(&mapped, Touch::All);
    assert_eq!((d.choice, d.copy_fits), (Choice::Mapped, false), "{d:?}");
    // And the launch reads it in place, right.
    let idx: Vec<u32> = random_u32(5000).iter().map(|&i| i % n as u32).collect();
    gather_auto_matches_host(&gpu, Touch::All, &mapped, &table, &idx);
    drop(filler);
    let d = gpu.auto_decision(&mapped, Touch::All);
    assert_eq!(d.choice, Choice::CopyWhole, "{d:?}");
}

#[test]
fn a_close_call_measures_the_table_once_and_reads_right_either_way() {
    use berth::Touch;
    use berth::placement::{decide, worth_probing};
    let (_g, gpu) = gpu();
    let n = 16 << 20;
    let table = random_f32(n);
    let mapped = gpu.mapped_from(&table).unwrap();
    let costs = gpu.link_costs();
    let profile = gpu.device_profile().unwrap();
    // As many random reads as the model says a whole copy costs: the closest call there is.
    let bytes = n * 4;
    let close = (costs.random_per_s(bytes) * bytes as f64 / costs.copy_bytes_per_s) as usize;
    let hint = Touch::Elements(close);
    let d = decide(&costs, &profile, &hint.access(n, 4));
    assert!(
        worth_probing(&costs, &profile, &hint.access(n, 4), &d),
        "{d:?}"
    );

    let idx: Vec<u32> = random_u32(5000).iter().map(|&i| i % n as u32).collect();
    gather_auto_matches_host(&gpu, hint, &mapped, &table, &idx);
    // The probe only read the table, and its rate is kept for the next close call.
    assert!(mapped[..] == table[..], "the probe changed the table");
    let rate = gpu.measure_random_reads(&mapped).unwrap();
    println!(
        "random reads of this 64 MiB table: {:.0} M/s (model: {:.0} M/s)",
        rate / 1e6,
        costs.random_per_s(bytes) / 1e6
    );
    assert_eq!(gpu.measure_random_reads(&mapped).unwrap(), rate);
    let decided = gpu.auto_decision(&mapped, hint);
    if cfg!(feature = "gpu") {
        assert!((1e6..1e11).contains(&rate), "{rate}");
        assert_eq!(decided.measured_random_per_s, Some(rate), "{decided:?}");
    } else {
        assert_eq!(
            decided, d,
            "the simulator decides with the model's constants"
        );
        // The simulator has no link to measure: the model's rate.
        assert_eq!(rate, costs.random_per_s(bytes));
    }
}

#[test]
fn an_index_outside_the_hinted_range_is_reported_not_read() {
    in_child_on_the_gpu!("an_index_outside_the_hinted_range_is_reported_not_read");
    use berth::Touch;
    use berth_examples::gather_auto;
    let (_g, gpu) = gpu();
    let n = 1 << 20;
    let mapped = gpu.mapped_from(&random_f32(n)).unwrap();
    let mut idx: Vec<u32> = (0..4096).map(|i| 1000 + i % 1000).collect();
    idx[3000] = 5000;
    let didx = gpu.upload(&idx).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    let hint = Touch::Range {
        start: 1000,
        end: 2000,
    };
    let err = gather_auto(&gpu, Grid::cover(idx.len()), hint, &mapped, &didx, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    println!("reported: {err}");
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "gather_auto");
    assert!(
        report.message.starts_with(
            "index 5000 is outside 1000..2000, the part of this `#[auto]` argument (len 1048576)"
        ),
        "{report}"
    );
    assert_eq!(
        report.line,
        berth_tests::EXAMPLES.line("out[i] = table[idx[i.get()] as usize]"),
        "{report}"
    );
    assert_eq!(
        (report.block[0], report.thread[0]),
        (3000 / 256, 3000 % 256),
        "{report}"
    );
}

#[test]
fn mapped_chase_follows_dependent_links_in_host_memory() {
    use berth_examples::mapped_chase;
    let (_g, gpu) = gpu();
    let slots = 4096usize;
    let mut next: Vec<u32> = (0..slots as u32).collect();
    let r = random_u32(slots);
    for i in (1..slots).rev() {
        next.swap(i, r[i] as usize % i);
    }
    let table = gpu.mapped_from(&next).unwrap();
    let steps = 1000u32;
    let mut want = 0usize;
    for _ in 0..steps {
        want = next[want] as usize;
    }
    let mut end = gpu.upload(&[u32::MAX]).unwrap();
    mapped_chase(&gpu, Grid::new(2, 32), &table, steps, &mut end)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(end.to_vec().unwrap(), vec![want as u32]);
}

/// `n` random `F4`s (embedding rows are `dim4` of them).
fn random_f4(n: usize) -> Vec<berth_examples::F4> {
    random_f32(n * 4)
        .chunks(4)
        .map(|c| berth_examples::F4 {
            x: c[0],
            y: c[1],
            z: c[2],
            w: c[3],
        })
        .collect()
}
