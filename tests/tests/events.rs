//! Events on both backends (the simulator by default, the GPU with `--features gpu`): timing a
//! kernel, host waits, one stream waiting for another, and misuse as typed errors.

use berth::{Error, Event, Gpu, Grid};
use berth_examples::busy;
use berth_fixtures::gated::gated_fill;
use berth_tests::gpu;
use std::time::Duration;

#[test]
fn events_time_a_kernel_without_raw_handles() {
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    let (start, stop) = (gpu.event().unwrap(), gpu.event().unwrap());
    let n = 4096;
    let mut out = gpu.alloc_zeroed::<f32>(n).unwrap();
    // A first launch loads the module: keep it out of the timed interval.
    busy(&stream, Grid::cover(n), 1, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let mut times = Vec::new();
    for iters in [1_000u32, 50_000] {
        start.record(&stream).unwrap();
        let launch = busy(&stream, Grid::cover(n), iters, &mut out).unwrap();
        stop.record(&stream).unwrap();
        stop.wait().unwrap();
        assert!(stop.is_complete().unwrap());
        times.push(Event::elapsed(&start, &stop).unwrap());
        launch.wait().unwrap();
    }
    println!("busy kernel: {times:?}");
    assert!(
        times
            .iter()
            .all(|t| *t > Duration::ZERO && *t < Duration::from_secs(30))
    );
    assert!(
        times[1] > times[0],
        "50 000 iterations took no longer than 1 000: {times:?}"
    );
}

#[test]
fn a_stream_waits_for_an_event_of_another_without_the_host() {
    let (_g, gpu) = gpu();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let gate = gpu.signals(1).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(1024).unwrap();
    let (on_a, on_b) = (gpu.event().unwrap(), gpu.event().unwrap());
    let launch = gated_fill(&a, Grid::cover(1024), 5, &gate, &mut out).unwrap();
    on_a.record(&a).unwrap();
    b.wait_event(&on_a).unwrap();
    on_b.record(&b).unwrap();
    // `b` has nothing of its own to do, yet cannot pass `on_a` while `a` is held at the gate.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!on_a.is_complete().unwrap());
    assert!(!on_b.is_complete().unwrap(), "stream b did not wait");
    gate.store(0, 1);
    on_b.wait().unwrap();
    assert!(on_a.is_complete().unwrap());
    assert!(Event::elapsed(&on_a, &on_b).unwrap() < Duration::from_secs(5));
    launch.wait().unwrap();
    // The default stream can wait too.
    gpu.wait_event(&on_b).unwrap();
    gpu.synchronize().unwrap();
}

#[test]
fn event_misuse_is_a_typed_error() {
    let (_g, gpu) = gpu();
    let (start, stop) = (gpu.event().unwrap(), gpu.event().unwrap());
    // Never recorded: complete (as in CUDA), but without a time.
    start.wait().unwrap();
    assert!(start.is_complete().unwrap());
    assert!(matches!(
        Event::elapsed(&start, &stop),
        Err(Error::Usage(_))
    ));
    // Swapped: stop before start.
    stop.record(&gpu).unwrap();
    gpu.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(2));
    start.record(&gpu).unwrap();
    let swapped = Event::elapsed(&start, &stop);
    assert!(swapped.is_err(), "{swapped:?}");
    // Another context's stream.
    let other = if cfg!(feature = "gpu") {
        Gpu::new().unwrap()
    } else {
        Gpu::simulator()
    };
    let s = other.stream().unwrap();
    assert!(matches!(start.record(&s), Err(Error::Usage(_))));
    assert!(matches!(s.wait_event(&start), Err(Error::Usage(_))));
}
