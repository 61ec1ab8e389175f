//! Runtime behaviour that needs no GPU: errors instead of panics where the driver is absent,
//! and launch-configuration arithmetic.

use berth::{Error, Gpu, Grid};

#[test]
fn missing_driver_is_a_typed_error_not_a_panic() {
    // SAFETY: only checks whether libcuda can be opened.
    let driver_present = unsafe { berth::raw::sys::is_culib_present() };
    match Gpu::new() {
        Err(Error::NoDriver(why)) => {
            assert!(!driver_present, "driver present but NoDriver: {why}");
            let msg = Error::NoDriver(why).to_string();
            assert!(msg.contains("no CUDA driver"), "{msg}");
        }
        Err(Error::NoDevice { .. }) => assert!(driver_present),
        Ok(gpu) => assert!(
            driver_present,
            "got a GPU ({}) without a driver?",
            gpu.name()
        ),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn cover_rounds_up_to_whole_blocks() {
    for (n, blocks) in [
        (0, 1),
        (1, 1),
        (256, 1),
        (257, 2),
        (1 << 20, 4096),
        (1_000_001, 3907),
    ] {
        let g = Grid::cover(n);
        assert_eq!(g.blocks.x, blocks, "n = {n}");
        assert_eq!(g.threads.x, Grid::DEFAULT_BLOCK);
        assert!(g.threads_x() >= n as u64);
    }
    assert_eq!(Grid::cover_with_block(1000, 128).blocks.x, 8);
    assert_eq!(Grid::new((2, 3), (32, 4, 2)).threads.z, 2);
}

#[test]
fn host_side_signal_waits_time_out_with_a_typed_error() {
    use std::time::Duration;
    let gpu = Gpu::simulator();
    let s = gpu.signals(3).unwrap();
    s.store(1, 7);
    assert_eq!(s.load(1), 7);
    assert_eq!(s.add(1, 5), 7);
    assert_eq!(
        s.wait(1, |v| v == 12, Duration::from_millis(10)).unwrap(),
        12
    );
    let e = s.wait(2, |v| v > 0, Duration::from_millis(20)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("signal 2"), "{e}");
    // A cell past the end is a usage error, not a panic or a wait.
    let e = s.wait(3, |v| v > 0, Duration::from_secs(60)).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
    assert!(e.to_string().contains("signal 3 of a buffer of 3"), "{e}");
    // Nothing sent by a kernel: a receive times out.
    let outbox = gpu.outbox::<u64>(2).unwrap();
    let e = outbox.recv(Duration::from_millis(20)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    // No kernel receiving: two sends fill the ring, a third times out.
    let inbox = gpu.inbox::<u64>(2).unwrap();
    inbox.send(1, Duration::ZERO).unwrap();
    inbox.send(2, Duration::ZERO).unwrap();
    let e = inbox.send(3, Duration::from_millis(10)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("message 2"), "{e}");
}

/// A timeout too long for the clock (`Duration::MAX`: "wait as long as it takes") is a wait
/// without end, not an overflow: a ready cell or a free slot returns at once, and a wait that
/// must poll keeps polling until its value comes.
#[test]
fn waits_accept_any_timeout() {
    use std::time::Duration;
    let gpu = Gpu::simulator();
    let s = gpu.signals(1).unwrap();
    assert_eq!(s.wait(0, |v| v == 0, Duration::MAX).unwrap(), 0);
    let inbox = gpu.inbox::<u64>(2).unwrap();
    inbox.send(1, Duration::MAX).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(5));
            s.store(0, 3);
        });
        assert_eq!(s.wait(0, |v| v == 3, Duration::MAX).unwrap(), 3);
    });
}

#[test]
fn a_mailbox_capacity_is_a_power_of_two_of_at_least_two() {
    let gpu = Gpu::simulator();
    // One slot: "message 0 published" and "free for message 1" would both be seq 1. Three:
    // slot numbers would skip when the message counts wrap.
    for bad in [0, 1, 3, 6, 100, (1 << 30) + 1, 1 << 31] {
        let made = [
            gpu.inbox::<u32>(bad).map(|_| ()),
            gpu.outbox::<u32>(bad).map(|_| ()),
        ];
        for made in made {
            match made {
                Err(e @ Error::MailboxCapacity { capacity }) => {
                    assert_eq!(capacity, bad);
                    assert!(e.to_string().contains("a power of two from 2"), "{e}");
                }
                Err(e) => panic!("{bad}: {e}"),
                Ok(()) => panic!("a mailbox of {bad} slots was accepted"),
            }
        }
    }
    for good in [2, 4, 256] {
        assert_eq!(gpu.inbox::<u32>(good).unwrap().capacity(), good);
        assert_eq!(gpu.outbox::<u32>(good).unwrap().capacity(), good);
    }
}

/// Run the ignored test `name` of this binary in a child process with `BERTH_BACKEND=value`
/// (the environment is per process); whether it passed, and its output.
fn run_with_backend(name: &str, value: &str) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", name, "--nocapture"])
        .env("BERTH_BACKEND", value)
        // Unsanitized under compute-sanitizer: keep it from loading the sanitizer's NVTX
        // injection (see `berth_tests::run_isolated`).
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success() && text.contains("1 passed"), text)
}

#[test]
fn an_unknown_backend_is_an_error_naming_the_valid_ones() {
    let (ok, text) = run_with_backend("child_backend_bogus", "bogus");
    assert!(ok, "child failed:\n{text}");
    let (ok, text) = run_with_backend("child_backend_simulator", "simulator");
    assert!(ok, "child failed:\n{text}");
}

#[test]
#[ignore = "run in a child process with BERTH_BACKEND=bogus"]
fn child_backend_bogus() {
    match Gpu::new_or_simulator() {
        Err(Error::Usage(msg)) => {
            assert!(msg.contains("\"bogus\""), "{msg}");
            assert!(msg.contains("simulator") && msg.contains("cuda"), "{msg}");
        }
        Err(e) => panic!("expected Error::Usage, got {e}"),
        Ok(gpu) => panic!("BERTH_BACKEND=bogus gave a context ({:?})", gpu.backend()),
    }
}

#[test]
#[ignore = "run in a child process with BERTH_BACKEND=simulator"]
fn child_backend_simulator() {
    let gpu = Gpu::new_or_simulator().unwrap();
    assert_eq!(gpu.backend(), berth::Backend::Simulator);
}

#[test]
fn cudarc_interop_on_the_simulator_is_a_typed_error() {
    let gpu = Gpu::simulator();
    let needs_gpu = |e: Error| {
        assert!(matches!(e, Error::NeedsGpu { .. }), "{e}");
        assert!(e.to_string().contains("needs a CUDA GPU"), "{e}");
    };
    needs_gpu(gpu.cudarc_context().unwrap_err());
    let stream = gpu.stream().unwrap();
    needs_gpu(stream.cudarc_stream().unwrap_err());
    let mut buf = gpu.upload(&[1u32, 2, 3]).unwrap();
    let mut ran = false;
    needs_gpu(buf.with_cudarc(&stream, |_, _| ran = true).unwrap_err());
    needs_gpu(buf.with_cudarc_mut(&stream, |_, _| ran = true).unwrap_err());
    assert!(!ran, "the closure ran without a cudarc context");
    // Nothing was lent: the buffer is as it was.
    assert_eq!(buf.to_vec().unwrap(), [1, 2, 3]);
}

#[test]
fn lending_to_cudarc_on_another_contexts_stream_is_refused() {
    let (a, b) = (Gpu::simulator(), Gpu::simulator());
    let mut buf = a.upload(&[1u32]).unwrap();
    let other = b.stream().unwrap();
    let e = buf.with_cudarc_mut(&other, |_, _| ()).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
}

/// Allocations whose size no `usize` holds, or whose element type is aligned beyond what
/// every allocation guarantees, are refused with a typed error on every kind of memory; none
/// wraps to a small allocation (which the zeroing would then overrun) or hands out a
/// misaligned `&[T]`.
#[test]
fn allocations_of_impossible_sizes_or_alignments_are_refused() {
    let gpu = Gpu::simulator();
    let oom = |r: Result<(), Error>, what: &str| match r {
        Err(Error::OutOfMemory { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    for len in [usize::MAX, usize::MAX / 2 + 1, (1 << 63) + (1 << 62)] {
        oom(gpu.pinned_zeroed::<u8>(len).map(drop), "pinned_zeroed");
        oom(gpu.mapped_zeroed::<u8>(len).map(drop), "mapped_zeroed");
        oom(gpu.managed_zeroed::<u8>(len).map(drop), "managed_zeroed");
        oom(gpu.alloc_zeroed::<u8>(len).map(drop), "alloc_zeroed");
        oom(
            gpu.pinned_with::<u8>(len, Default::default()).map(drop),
            "pinned_with",
        );
    }
    oom(gpu.signals(usize::MAX / 4).map(drop), "signals");
    oom(
        gpu.pinned_zeroed::<u64>(usize::MAX / 4).map(drop),
        "u64 overflow",
    );

    #[derive(Clone, Copy, berth::DeviceCopy)]
    #[repr(C, align(512))]
    struct Wide([u8; 512]);
    let usage = |r: Result<(), Error>, what: &str| match r {
        Err(Error::Usage(m)) => assert!(m.contains("aligned to 512"), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    usage(gpu.pinned_zeroed::<Wide>(4).map(drop), "pinned");
    usage(gpu.mapped_zeroed::<Wide>(4).map(drop), "mapped");
    usage(gpu.managed_zeroed::<Wide>(4).map(drop), "managed");
    usage(gpu.alloc_zeroed::<Wide>(4).map(drop), "device");
    usage(gpu.upload(&[Wide([1; 512])]).map(drop), "upload");

    // Within the guarantee, the slices are aligned.
    #[derive(Clone, Copy, berth::DeviceCopy)]
    #[repr(C, align(256))]
    struct Aligned([u8; 256]);
    let b = gpu.pinned_zeroed::<Aligned>(3).unwrap();
    assert_eq!(b.as_ptr() as usize % 256, 0);
    let m = gpu.mapped_zeroed::<Aligned>(3).unwrap();
    assert_eq!(m.as_ptr() as usize % 256, 0);
    let m = gpu.managed_zeroed::<Aligned>(3).unwrap();
    assert_eq!(m.as_ptr() as usize % 256, 0);
}
