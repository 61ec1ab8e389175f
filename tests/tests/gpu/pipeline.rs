//! Pipelined launches: chunks over several streams give the unpipelined result, stay within
//! the device budget, and report a failing chunk once.

use super::*;

#[test]
fn pipelined_results_equal_the_unpipelined_launch() {
    use berth::PipelineOptions;
    use berth_examples::{affine_one, affine_one_pipelined};
    let (_g, gpu) = gpu();
    for (n, chunk_elems, streams) in [
        (1usize, 1024usize, 3usize),
        (1000, 1024, 2),
        (100_003, 4096, 3),
        (1 << 20, 65_536, 4),
        ((1 << 22) + 17, 1 << 20, 3),
    ] {
        let x = random_f32(n);
        let px = gpu.pinned_from(&x).unwrap();
        let mut whole = gpu.pinned_from(&vec![f32::NAN; n]).unwrap();
        affine_one(&gpu, Grid::cover(n), 1.25, &px, &mut whole)
            .unwrap()
            .wait()
            .unwrap();
        let mut piped = gpu.pinned_from(&vec![f32::NAN; n]).unwrap();
        let opts = PipelineOptions {
            chunk_bytes: Some(chunk_elems * 4),
            streams: Some(streams),
            ..Default::default()
        };
        let run = affine_one_pipelined(&gpu, opts, 1.25, &px, &mut piped).unwrap();
        let chunks = run.chunks();
        let stats = run.wait().unwrap();
        assert_eq!(stats.chunks, chunks);
        assert_eq!(chunks, n.div_ceil(chunk_elems), "n = {n}");
        assert_eq!(
            &piped[..],
            &whole[..],
            "n = {n}: pipelined differs from one launch"
        );
        assert_eq!(&piped[..], &affine_on(&gpu, 1.25, &x)[..], "n = {n}");
    }
}

#[test]
fn pipelined_in_out_and_automatic_plan() {
    use berth::PipelineOptions;
    use berth_fixtures::faults::scale_finite_pipelined;
    let (_g, gpu) = gpu();
    let n = (64 << 20) / 4 + 12_345;
    let x = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&random_f32(n)).unwrap();
    let run = scale_finite_pipelined(&gpu, PipelineOptions::default(), 3.0, &px, &mut py).unwrap();
    let link = run.link();
    let stats = run.wait().unwrap();
    println!("automatic plan for {n} floats: {stats:?} from {link:?}");
    assert!(stats.chunks > 1, "{stats:?}");
    assert!(link.h2d_gbps > 1.0 && link.d2h_gbps > 1.0, "{link:?}");
    let want: Vec<f32> = x.iter().map(|&v| v * 3.0).collect();
    assert_eq!(&py[..], &want[..]);
}

#[test]
fn device_budget_bounds_the_staging_ring() {
    use berth::PipelineOptions;
    use berth_examples::affine_one_pipelined;
    let (_g, gpu) = gpu();
    let n = 10_000_000; // 40 MB in, 40 MB out
    let x = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    let budget = 4 << 20;
    let opts = PipelineOptions {
        device_budget: Some(budget),
        ..Default::default()
    };
    let stats = affine_one_pipelined(&gpu, opts, -2.0, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    println!("4 MiB budget: {stats:?}");
    assert!(
        stats.staging_bytes <= budget,
        "the ring must fit the budget: {stats:?}"
    );
    assert!(stats.chunks * stats.chunk_elems >= n);
    assert_eq!(&py[..], &affine_on(&gpu, -2.0, &x)[..]);
    // Bulk arguments must share a length.
    let short = gpu.pinned_zeroed::<f32>(n - 1).unwrap();
    let mut out = gpu.pinned_zeroed::<f32>(n).unwrap();
    let e = affine_one_pipelined(&gpu, PipelineOptions::default(), 1.0, &short, &mut out)
        .err()
        .unwrap();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    // A budget too small for anything is a clear error.
    let tiny = PipelineOptions {
        device_budget: Some(4),
        ..Default::default()
    };
    let e = affine_one_pipelined(&gpu, tiny, 1.0, &px, &mut py)
        .err()
        .unwrap();
    assert!(matches!(e, Error::Usage(_)), "{e}");
}

#[test]
fn without_progress_flags_a_failure_is_the_kernels_own_error() {
    in_child_on_the_gpu!("without_progress_flags_a_failure_is_the_kernels_own_error");
    use berth::PipelineOptions;
    use berth_fixtures::faults::scale_finite_pipelined;
    let (_g, gpu) = gpu();
    let chunk = 8192;
    let n = chunk * 10 + 5;
    let mut x = random_f32(n);
    x[chunk * 4 + 9] = f32::NAN;
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(chunk * 4),
        streams: Some(2),
        progress: false,
        ..Default::default()
    };
    // The failure comes from the run's wait, or from the launch itself when the fault took the
    // context while later chunks were still being queued: the same error either way.
    let err = match scale_finite_pipelined(&gpu, opts, 2.0, &px, &mut py) {
        Ok(run) => {
            assert_eq!(run.chunks_done(), 0, "no flags, no progress");
            run.wait().unwrap_err()
        }
        Err(e) => e,
    };
    println!("reported: {err}");
    // Not a PipelineChunk naming a chunk it cannot know: the kernel's report itself.
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected the kernel's KernelPanic, got {err}");
    };
    assert_eq!(kernel, "scale_finite");
    assert_eq!(report.message, "input is not finite");
}

#[test]
fn a_failing_chunk_is_reported_once_with_its_index() {
    in_child_on_the_gpu!("a_failing_chunk_is_reported_once_with_its_index");
    use berth::PipelineOptions;
    use berth_fixtures::faults::scale_finite_pipelined;
    let (_g, gpu) = gpu();
    let chunk = 8192;
    let n = chunk * 40 + 77;
    let mut x = random_f32(n);
    let bad = chunk * 17 + 123;
    x[bad] = f32::NAN;
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&vec![0.5f32; n]).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(chunk * 4),
        streams: Some(3),
        ..Default::default()
    };
    // The failure comes from the run's wait, or from the launch itself when the fault took the
    // context while later chunks were still being queued: the same error either way.
    let err = match scale_finite_pipelined(&gpu, opts, 2.0, &px, &mut py) {
        Ok(run) => {
            // A progress loop ends: the failed chunk never counts as done, but the run
            // finishes.
            let start = std::time::Instant::now();
            while !run.is_finished() {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(20),
                    "run never finished"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert!(run.chunks_done() < run.chunks());
            run.wait().unwrap_err()
        }
        Err(e) => e,
    };
    println!("reported: {err}");
    let Error::PipelineChunk {
        chunk: c,
        elements,
        completed_after,
        source,
        ..
    } = &err
    else {
        panic!("expected PipelineChunk, got {err}");
    };
    // The fault stops every stream, so a chunk before the failing one may not have run
    // either: the report names the first chunk that did not complete.
    let c = *c;
    assert!(c <= 17, "{err}");
    assert_eq!(elements.clone(), c * chunk..(c + 1) * chunk);
    assert!(
        completed_after.iter().all(|&k| k > c && k < 41 && k != 17),
        "{completed_after:?}"
    );
    let Error::KernelPanic { kernel, report, .. } = source.as_ref() else {
        panic!("expected the kernel's panic inside, got {source}");
    };
    assert_eq!(kernel, "scale_finite");
    assert_eq!(report.message, "input is not finite");
    // Thread indices are chunk-relative: block and thread locate the element in its chunk.
    assert_eq!(
        report.block[0] as usize * 256 + report.thread[0] as usize,
        123,
        "{report}"
    );
    // Chunks before the failing one, and those reported complete after it, hold results. The
    // failing chunk was never copied back (still 0.5). Any other chunk was either not written
    // or written whole: the fault may stop its stream between its copy back and its flag, so
    // the report is a lower bound on what came back, never more.
    for k in 0..41usize {
        let r = k * chunk..((k + 1) * chunk).min(n);
        let reported = k < c || completed_after.contains(&k);
        let (first, last) = (r.start, r.end - 1);
        if reported {
            assert_eq!(py[first], x[first] * 2.0, "chunk {k}");
            assert_eq!(py[last], x[last] * 2.0, "chunk {k}");
        } else if k == 17 {
            assert_eq!(py[first], 0.5, "the failing chunk was copied back");
        } else {
            let whole = py[first] == x[first] * 2.0 && py[last] == x[last] * 2.0;
            let untouched = py[first] == 0.5 && py[last] == 0.5;
            assert!(whole || untouched, "chunk {k}: {} {}", py[first], py[last]);
        }
    }
}
