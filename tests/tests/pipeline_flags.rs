//! Pipelined launches with their progress flags written by stream memory operations
//! (`BERTH_PIPELINE_FLAGS=memop`) instead of the runtime's `CHUNK_DONE` kernel (the default,
//! tested in `gpu/`): progress, results and the located failing chunk are the same. Its own test binary: the switch is read once per
//! process. On the GPU with `--features gpu`, else on the simulator.

use berth::{Error, Gpu, PipelineOptions};
use berth_examples::affine_one_pipelined;
use berth_fixtures::faults::scale_finite_pipelined;
use berth_tests::{affine_on, random_f32};
use std::time::{Duration, Instant};

#[test]
fn flags_written_by_stream_memory_operations_track_progress_and_locate_a_failure() {
    // SAFETY: the only test of this binary, and nothing has started a thread that reads the
    // environment yet.
    unsafe { std::env::set_var("BERTH_PIPELINE_FLAGS", "memop") };
    let gpu = if cfg!(feature = "gpu") {
        Gpu::new().expect("a GPU is required for --features gpu")
    } else {
        Gpu::simulator()
    };
    let chunk = 8192;
    let n = chunk * 23 + 101;
    let x = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&vec![f32::NAN; n]).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(chunk * 4),
        streams: Some(3),
        ..Default::default()
    };
    let run = affine_one_pipelined(&gpu, opts, 0.75, &px, &mut py).unwrap();
    let start = Instant::now();
    while !run.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "run never finished"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Every flag is visible once the streams are done.
    assert_eq!(run.chunks_done(), run.chunks());
    assert_eq!(run.chunks(), 24);
    run.wait().unwrap();
    assert_eq!(&py[..], &affine_on(&gpu, 0.75, &x)[..]);

    // A failing chunk is located by the same flags (last: on the GPU a trap ends the
    // process's use of the device).
    let mut bad = x.clone();
    bad[chunk * 9 + 17] = f32::INFINITY;
    let pbad = gpu.pinned_from(&bad).unwrap();
    // Reported by the run's wait, or by the launch itself when the fault took the context while
    // later chunks were still being queued: the same error either way.
    let err = match scale_finite_pipelined(&gpu, opts, 2.0, &pbad, &mut py) {
        Ok(run) => run.wait().unwrap_err(),
        Err(e) => e,
    };
    println!("reported: {err}");
    let Error::PipelineChunk {
        chunk: c,
        completed_after,
        ..
    } = &err
    else {
        panic!("expected PipelineChunk, got {err}");
    };
    // The fault stops every stream, so a chunk before the failing one may not have run
    // either: the report names the first chunk that did not complete.
    let c = *c;
    assert!(c <= 9, "{err}");
    assert!(
        completed_after.iter().all(|&k| k > c && k < 24 && k != 9),
        "{err}"
    );
}
