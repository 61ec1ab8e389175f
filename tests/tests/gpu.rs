//! The example kernels against host references on fresh random data, at sizes that are and
//! are not multiples of the block: placements, pipelines, panics and typed errors.
//!
//! One test body, two backends: with `--features gpu` (staged by `cargo xtask gpu` for the
//! GPU machine) every test runs on the GPU; without it (CI, `cargo test`) the same tests run
//! on the CPU simulator, except the few marked `#[cfg(feature = "gpu")]` that test what only a
//! GPU does (sticky faults and recovery, traps without a record).

use berth::{Error, Gpu, Grid};
#[cfg(feature = "gpu")]
use berth_examples::unchecked_copy;
use berth_examples::{REDUCE_BLOCK, block_sum, saxpy};
use berth_tests::{
    affine_on, in_child, mul_add_on, random_f32, random_u32, reduce_blocks, run_isolated, saxpy_on,
    sum_f64,
};
use berth_tests::{backend, gpu};

/// Sizes that are and are not multiples of the block; the largest only on the GPU.
const SIZES: &[usize] = if cfg!(feature = "gpu") {
    &[1, 255, 256, 257, 1000, 4099, (1 << 20) + 3, 10_000_019]
} else {
    &[1, 255, 256, 257, 1000, 4099, (1 << 20) + 3]
};

#[test]
fn saxpy_matches_host_bit_for_bit() {
    let (_g, gpu) = gpu();
    for &n in SIZES {
        let x = random_f32(n);
        let y = random_f32(n);
        let a = 1.0 + random_f32(1)[0];
        let dx = gpu.upload(&x).unwrap();
        let mut dy = gpu.upload(&y).unwrap();
        saxpy(&gpu, Grid::cover(n), a, &dx, &mut dy)
            .unwrap()
            .wait()
            .unwrap();
        let got = dy.to_vec().unwrap();
        let want = saxpy_on(&gpu, a, &x, &y);
        let bad = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        assert_eq!(bad, 0, "n = {n}: {bad} elements differ");
    }
}

#[test]
fn saxpy_on_a_stream_with_odd_blocks() {
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    let n = 100_003;
    let x = random_f32(n);
    let y = random_f32(n);
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y).unwrap();
    saxpy(&stream, Grid::cover_with_block(n, 96), -0.75, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_on(&gpu, -0.75, &x, &y));
}

#[test]
fn block_sum_matches_host() {
    let (_g, gpu) = gpu();
    for &n in SIZES {
        let x = random_f32(n);
        let blocks = reduce_blocks(n);
        let dx = gpu.upload(&x).unwrap();
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        block_sum(&gpu, Grid::new(blocks, REDUCE_BLOCK), &dx, &mut partial)
            .unwrap()
            .wait()
            .unwrap();
        let parts = partial.to_vec().unwrap();
        assert!(
            parts.iter().all(|p| p.is_finite()),
            "n = {n}: a block wrote nothing"
        );
        let got = sum_f64(&parts);
        let want = sum_f64(&x);
        let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
        assert!(
            (got - want).abs() <= 1e-5 * scale,
            "n = {n}: got {got}, want {want}"
        );
    }
}

/// On the GPU, run the rest of the calling test `$name` in a child process (a trap poisons
/// the whole process) and pass or fail with it; on the simulator, just go on.
macro_rules! in_child_on_the_gpu {
    ($name:literal) => {
        if cfg!(feature = "gpu") && !in_child() {
            let (ok, out) = run_isolated($name);
            assert!(ok, "child failed:\n{out}");
            return;
        }
    };
}

/// A tile of a `Matrix` view that reaches past the matrix stops the kernel at the line that
/// asked for it, naming the tile's last element and the matrix's shape (the record's MATRIX
/// kind, decoded by the host), before anything is written: `sgemm_reg8` on a 132 × 132
/// product reaches column 135 of its block's 128 × 132 band of `a` with its eight-column
/// step at `t = 128`.
#[test]
fn a_tile_past_its_matrix_is_reported_with_row_column_and_shape() {
    in_child_on_the_gpu!("a_tile_past_its_matrix_is_reported_with_row_column_and_shape");
    let (_g, gpu) = gpu();
    let n = 132;
    let (a, b) = (random_f32(n * n), random_f32(n * n));
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut dc = gpu.upload(&vec![f32::NAN; n * n]).unwrap();
    let grid = Grid::new((1, 1), (16, 16));
    let err = berth_examples::compute::sgemm_reg8(&gpu, grid, n as u32, &da, &db, &mut dc)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "sgemm_reg8");
    let line = berth_tests::line_in(
        "examples/src/compute.rs",
        include_str!("../../examples/src/compute.rs"),
        ".tiles_across::<REG8_TILE, BK>(0);",
    );
    assert_eq!(
        (report.file.as_str(), report.line),
        ("examples/src/compute.rs", line),
        "{report}"
    );
    assert_eq!(
        report.message,
        "index (127, 135) out of bounds: the matrix is 128 × 132 (rows × columns)"
    );
    if !cfg!(feature = "gpu") {
        // On a GPU the trap loses the context with everything in it.
        assert!(dc.to_vec().unwrap().iter().all(|v| v.is_nan()));
    }
}

#[cfg(feature = "gpu")]
fn check_saxpy(gpu: &Gpu, n: usize) {
    let xs = random_f32(n);
    let ys = random_f32(n);
    let dx = gpu.upload(&xs).unwrap();
    let mut dy = gpu.upload(&ys).unwrap();
    saxpy(gpu, Grid::cover(n), 3.0, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_on(gpu, 3.0, &xs, &ys));
}

#[test]
#[cfg(feature = "gpu")]
fn kernel_panic_is_reported_and_context_recovers() {
    if !in_child() {
        let (ok, out) = run_isolated("kernel_panic_is_reported_and_context_recovers");
        assert!(ok, "child failed:\n{out}");
        assert!(out.contains("recovered: "), "{out}");
        return;
    }
    if std::env::var(berth::RESTART_ENV).as_deref() == Ok("1") {
        // Second life after restart_process(): a fresh process must have a working GPU.
        let (_g, gpu) = gpu();
        check_saxpy(&gpu, 5000);
        println!("recovered: restart_process() gave a fresh process with a working GPU");
        return;
    }
    let (_g, gpu) = gpu();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    // 1024 threads for 1000 elements: threads 1000.. index past the end.
    let err = unchecked_copy(&gpu, Grid::cover(n), &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "unchecked_copy");
    assert_eq!(report.file, "examples/src/lib.rs", "{report}");
    assert_eq!(
        report.line,
        berth_tests::example_line("out[i] = x[i];"),
        "{report}"
    );
    assert!(
        report
            .message
            .starts_with("index out of bounds: the len is 1000 but the index is 10"),
        "{report}"
    );
    assert_eq!(
        report.block[0], 3,
        "only block 3 holds threads past 1000: {report}"
    );
    assert!(report.thread[0] >= 1000 - 768, "{report}");
    assert!(err.is_context_lost());
    println!("reported: {err}");

    // The context is poisoned: further work is refused with a typed error, not a hang.
    assert!(gpu.is_lost());
    let again = gpu.alloc_zeroed::<u32>(4).unwrap_err();
    assert!(matches!(again, Error::ContextLost(_)), "{again}");
    drop((out, x));

    match gpu.recover() {
        Ok(gpu) => {
            check_saxpy(&gpu, 5000);
            println!("recovered: Gpu::recover() gave a working context in this process");
        }
        Err(Error::ProcessPoisoned { name }) => {
            println!(
                "Gpu::recover(): the driver refuses new contexts in this process ({name}); restarting it"
            );
            drop(_g);
            let e = berth::restart_process();
            panic!("restart_process returned: {e}");
        }
        Err(e) => panic!("recover failed with an unexpected error: {e}"),
    }
}

/// Poison `gpu`'s context: a launch indexing past its buffers (threads 300.. of a 1024-thread
/// block) panics on the GPU. The launch's error, which says the context is lost, and its two
/// device buffers (for tests that drop them after a reset).
#[cfg(feature = "gpu")]
fn poison(gpu: &Gpu) -> (Error, [berth::DeviceBuffer<u32>; 2]) {
    let x = gpu.upload(&random_u32(300)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(300).unwrap();
    let err = unchecked_copy(gpu, Grid::cover(300), &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(err.is_context_lost(), "{err}");
    (err, [x, out])
}

/// A reset destroys every handle of the context: streams, events, modules, memory. Other
/// threads still calling through the lost context's handles while one thread recovers it must
/// get a typed error (the context is lost), never reach the driver with a handle the reset
/// destroyed and the fresh context may have given out again. Four threads create, record,
/// query, wait for and drop events and streams in a loop across the fault and the reset
/// (which happens even where the driver then refuses a fresh context in this process).
#[test]
#[cfg(feature = "gpu")]
fn other_threads_event_and_stream_calls_across_a_reset_get_typed_errors() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if !in_child() {
        let name = "other_threads_event_and_stream_calls_across_a_reset_get_typed_errors";
        let (ok, out) = run_isolated(name);
        assert!(ok, "child failed:\n{out}");
        assert!(out.contains("threads: "), "{out}");
        return;
    }
    let (_g, gpu) = gpu();
    let stop = Arc::new(AtomicBool::new(false));
    let (oks, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (gpu, stop) = (gpu.clone(), stop.clone());
            let (oks, refused) = (oks.clone(), refused.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let step = || -> Result<(), Error> {
                        let stream = gpu.stream()?;
                        let (a, b) = (gpu.event()?, gpu.event()?);
                        a.record(&stream)?;
                        b.record(&stream)?;
                        stream.wait_event(&a)?;
                        b.wait()?;
                        a.is_complete()?;
                        stream.synchronize()
                    };
                    match step() {
                        Ok(()) => oks.fetch_add(1, Ordering::SeqCst),
                        Err(e) if e.is_context_lost() => refused.fetch_add(1, Ordering::SeqCst),
                        Err(e) => panic!("an event or stream call failed untyped: {e}"),
                    };
                }
            })
        })
        .collect();
    let running = |w: &[std::thread::JoinHandle<()>]| w.iter().all(|w| !w.is_finished());
    while oks.load(Ordering::SeqCst) < 100 && running(&workers) {
        std::thread::yield_now();
    }
    poison(&gpu);
    // The workers keep calling through the lost context's handles during the reset.
    // The reset happens either way; on drivers that keep a process unable to use the GPU
    // after a trap, opening the fresh context then fails (`ProcessPoisoned`).
    let fresh = match gpu.recover() {
        Ok(fresh) => Some(fresh),
        Err(Error::ProcessPoisoned { name }) => {
            println!("reset done; the process stays poisoned ({name})");
            None
        }
        Err(e) => panic!("recover failed with an unexpected error: {e}"),
    };
    let after = refused.load(Ordering::SeqCst);
    while refused.load(Ordering::SeqCst) < after + 100 && running(&workers) {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("a worker panicked");
    }
    assert!(oks.load(Ordering::SeqCst) >= 100);
    assert!(refused.load(Ordering::SeqCst) >= after + 100);
    if let Some(fresh) = fresh {
        // The fresh context's events and streams work.
        let stream = fresh.stream().unwrap();
        let ev = fresh.event().unwrap();
        ev.record(&stream).unwrap();
        ev.wait().unwrap();
        check_saxpy(&fresh, 5000);
    }
    println!(
        "threads: {} steps done, {} refused with the context lost",
        oks.load(Ordering::SeqCst),
        refused.load(Ordering::SeqCst)
    );
}

/// A reset frees every allocation of the context, its page-locked host memory included:
/// reading that afterwards kills the process (`bench/reset_frees_pinned.cu`). So while pinned
/// or mapped buffers of a lost context live, a reset (`recover`, or a new `Gpu` on the device)
/// is refused with a typed error naming them, and the buffers keep their contents; once they
/// are dropped, the reset goes ahead.
#[test]
#[cfg(feature = "gpu")]
fn a_reset_waits_until_the_lost_contexts_host_buffers_are_dropped() {
    if !in_child() {
        let (ok, out) =
            run_isolated("a_reset_waits_until_the_lost_contexts_host_buffers_are_dropped");
        assert!(ok, "child failed:\n{out}");
        assert!(out.contains("reset refused: "), "{out}");
        return;
    }
    let (_g, gpu) = gpu();
    let data = random_u32(1 << 16);
    let pinned = gpu.pinned_from(&data).unwrap();
    let mapped = gpu.mapped_from(&data).unwrap();
    // cudarc memory of the context: its slice holds cudarc's stream, which holds the context.
    let cudarc_slice = {
        let ctx = gpu.cudarc_context().unwrap();
        ctx.default_stream().alloc_zeros::<u32>(64).unwrap()
    };
    let (_, lost_buffers) = poison(&gpu);

    let refused = |e: Error| {
        assert!(
            matches!(
                e,
                Error::ResetRefused {
                    host_buffers: 2,
                    peer_views: 0,
                    communicators: 0,
                    cudarc_handles: 1..,
                    ..
                }
            ),
            "expected a refusal naming the two host buffers and cudarc's slice, got {e}"
        );
        assert!(e.is_context_lost());
        println!("reset refused: {e}");
    };
    refused(gpu.recover().map(|_| ()).unwrap_err());
    refused(Gpu::new().map(|_| ()).unwrap_err());
    assert!(gpu.is_lost());
    assert!(
        *pinned == *data && *mapped == *data,
        "the buffers keep their contents"
    );

    drop((pinned, mapped));
    let e = gpu.recover().map(|_| ()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ResetRefused {
                host_buffers: 0,
                cudarc_handles: 1..,
                ..
            }
        ),
        "cudarc's slice still holds the reset off: {e}"
    );
    drop(cudarc_slice);
    recover_now(&gpu, "the host buffers and cudarc's slice were dropped");
    // The reset is done: a second recovery through the old handle would reset the context
    // made since (or poison it again), and is refused.
    let again = gpu.recover().map(|_| ()).unwrap_err();
    assert!(
        matches!(&again, Error::Usage(m) if m.contains("already reset")),
        "{again}"
    );
    drop(lost_buffers);
}

/// Recover `gpu` now that nothing holds its reset off: a working context (checked with a
/// saxpy), or the reset done and the process poisoned (the H200's driver); anything else fails.
#[cfg(feature = "gpu")]
fn recover_now(gpu: &Gpu, once: &str) {
    match gpu.recover() {
        Ok(fresh) => {
            check_saxpy(&fresh, 1000);
            println!("recovered once {once}");
        }
        Err(e @ Error::ProcessPoisoned { .. }) => {
            println!("reset done once {once}; the process stays poisoned: {e}")
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// NCCL allocates in every member's context and its threads use that memory, so a reset of
/// a member waits for the set's communicators to go: refused while the set lives, and once the
/// set is dropped (its communicators aborted, since the lost member's cannot finish anything)
/// the reset goes ahead. On one GPU: a set of device 0 alone, NCCL with one rank.
#[test]
#[cfg(feature = "gpu")]
fn a_reset_waits_until_the_device_sets_communicators_are_gone() {
    if !in_child() {
        let (ok, out) = run_isolated("a_reset_waits_until_the_device_sets_communicators_are_gone");
        assert!(ok, "child failed:\n{out}");
        assert!(out.contains("reset refused: "), "{out}");
        return;
    }
    let (_g, _) = gpu();
    let set = berth::DeviceSet::cuda(&[0]).unwrap();
    let gpu = set.gpus()[0].clone();
    let mut bufs = vec![gpu.upload(&random_u32(1024)).unwrap()];
    set.all_reduce(&mut bufs, berth::ReduceOp::Sum)
        .unwrap()
        .wait()
        .unwrap();
    let (_, lost_buffers) = poison(&gpu);

    let e = gpu.recover().map(|_| ()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ResetRefused {
                host_buffers: 0,
                peer_views: 0,
                communicators: 1,
                cudarc_handles: 0,
                ..
            }
        ),
        "expected a refusal naming the set's communicators, got {e}"
    );
    println!("reset refused: {e}");
    // A collective on the lost member is a typed error.
    let again = set
        .all_reduce(&mut bufs, berth::ReduceOp::Sum)
        .and_then(|c| c.wait());
    assert!(again.is_err_and(|e| e.is_context_lost()));

    drop((bufs, lost_buffers));
    drop(set);
    recover_now(&gpu, "the set was dropped");
}

#[test]
#[cfg(feature = "gpu")]
fn new_gpu_after_an_unrecovered_fault_is_fresh_or_a_typed_error() {
    if !in_child() {
        let (ok, out) =
            run_isolated("new_gpu_after_an_unrecovered_fault_is_fresh_or_a_typed_error");
        assert!(ok, "child failed:\n{out}");
        return;
    }
    let (_g, gpu) = gpu();
    let (err, lost_buffers) = poison(&gpu);
    assert!(matches!(err, Error::KernelPanic { .. }), "{err}");
    // Keep the lost handles alive: a new Gpu resets the poisoned context (marking them lost)
    // or says the process cannot use the GPU any more; it never panics or hangs.
    match Gpu::new() {
        Ok(fresh) => {
            assert!(gpu.is_lost());
            check_saxpy(&fresh, 1000);
            println!("new Gpu after a fault: fresh context");
        }
        Err(e @ Error::ProcessPoisoned { .. }) => {
            assert!(gpu.is_lost());
            println!("new Gpu after a fault: {e}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    drop((lost_buffers, gpu));
}

#[test]
fn bad_launches_are_typed_errors() {
    let (_g, gpu) = gpu();
    let x = gpu.upload(&random_f32(10)).unwrap();
    let mut y = gpu.upload(&random_f32(10)).unwrap();
    let e = saxpy(&gpu, Grid::new(1, 2048), 1.0, &x, &mut y)
        .err()
        .expect("2048 threads per block");
    assert!(
        matches!(
            e,
            Error::InvalidLaunch {
                kernel: "saxpy",
                ..
            }
        ),
        "{e}"
    );
    let e = saxpy(&gpu, Grid::new((1, 70_000), 32), 1.0, &x, &mut y)
        .err()
        .expect("grid y > 65535");
    assert!(matches!(e, Error::InvalidLaunch { .. }), "{e}");
    // Every extent within its limit, but 2^73 threads in all: more than a 64-bit index numbers.
    let e = saxpy(
        &gpu,
        Grid::new((i32::MAX as u32, 65535, 65535), 1024),
        1.0,
        &x,
        &mut y,
    )
    .err()
    .expect("2^64 threads or more");
    assert!(
        matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("2^64")),
        "{e}"
    );
    // A buffer of another context is refused before anything runs.
    let other = backend();
    let foreign = other.upload(&random_f32(10)).unwrap();
    let e = saxpy(&gpu, Grid::cover(10), 1.0, &foreign, &mut y)
        .err()
        .expect("foreign buffer");
    assert!(matches!(e, Error::WrongContext { .. }), "{e}");
    // Too much memory is an error, not an abort.
    let e = gpu.alloc_zeroed::<f32>(1 << 46).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    // The context is still healthy after all of that.
    saxpy(&gpu, Grid::cover(10), 1.0, &x, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    assert!(!gpu.is_lost());
}

#[test]
fn device_buffer_round_trips_and_checks_lengths() {
    let (_g, gpu) = gpu();
    let v = random_u32(12345);
    let mut b = gpu.upload(&v).unwrap();
    assert_eq!(b.to_vec().unwrap(), v);
    assert!(matches!(
        b.copy_from(&v[1..]),
        Err(Error::LengthMismatch { .. })
    ));
    let z = gpu.alloc_zeroed::<u32>(777).unwrap();
    assert!(z.to_vec().unwrap().iter().all(|&e| e == 0));
    let empty = gpu.upload::<f32>(&[]).unwrap();
    assert!(empty.to_vec().unwrap().is_empty());
}

#[test]
fn struct_and_bool_scalars_arrive_intact() {
    use berth_examples::{Affine, affine_clamp};
    let (_g, gpu) = gpu();
    let n = 70_001;
    let x: Vec<f32> = random_f32(n).iter().map(|v| v * 10.0).collect();
    let p = Affine {
        scale: 1.75,
        offset: -0.5,
        limit: 4.0,
    };
    let dx = gpu.upload(&x).unwrap();
    for clamp in [false, true] {
        let mut out = gpu.upload(&vec![f32::NAN; n]).unwrap();
        affine_clamp(&gpu, Grid::cover(n), p, clamp, &dx, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let want: Vec<f32> = x
            .iter()
            .map(|&v| {
                let y = mul_add_on(&gpu, p.scale, v, p.offset);
                if clamp { y.clamp(-p.limit, p.limit) } else { y }
            })
            .collect();
        assert_eq!(out.to_vec().unwrap(), want, "clamp = {clamp}");
    }
}

#[test]
fn dynamic_shared_memory_is_per_block() {
    use berth_examples::block_sum_dynamic;
    let (_g, gpu) = gpu();
    for (n, threads) in [
        (1usize, 32u32),
        (5000, 64),
        (1 << 20, 512),
        (3_000_017, 1024),
    ] {
        let x = random_f32(n);
        let blocks = (n.div_ceil(threads as usize)).min(500) as u32;
        let dx = gpu.upload(&x).unwrap();
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        let grid = Grid::new(blocks, threads).shared_bytes(threads * 4);
        block_sum_dynamic(&gpu, grid, &dx, &mut partial)
            .unwrap()
            .wait()
            .unwrap();
        let got = sum_f64(&partial.to_vec().unwrap());
        let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
        assert!(
            (got - sum_f64(&x)).abs() <= 1e-5 * scale,
            "n = {n}, threads = {threads}: {got}"
        );
    }
}

/// A launch whose dynamic shared memory fits the default 48 KiB alone but not with the
/// kernel's static shared memory must still opt in: the static part is counted (`block_sum`'s
/// 1 KiB tile), and the launch runs with the right sum. Past the default by far, too.
#[test]
fn dynamic_shared_memory_beside_static_shared_memory_opts_in_when_both_need_it() {
    let (_g, gpu) = gpu();
    let n = 1 << 18;
    let x = random_f32(n);
    let dx = gpu.upload(&x).unwrap();
    let blocks = 120u32;
    for dynamic in [48 * 1024 - 512, 48 * 1024, 200 * 1024] {
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        let grid = Grid::new(blocks, REDUCE_BLOCK).shared_bytes(dynamic);
        block_sum(&gpu, grid, &dx, &mut partial)
            .unwrap()
            .wait()
            .unwrap_or_else(|e| panic!("{dynamic} bytes of dynamic shared memory: {e}"));
        let got = sum_f64(&partial.to_vec().unwrap());
        let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>();
        assert!(
            (got - sum_f64(&x)).abs() <= 1e-5 * scale,
            "{dynamic} bytes: {got}"
        );
    }
    // Beyond what opting in allows, with the static part: refused before it is queued.
    let grid = Grid::new(blocks, REDUCE_BLOCK).shared_bytes(227 * 1024);
    let mut partial = gpu.alloc_zeroed::<f32>(blocks as usize).unwrap();
    let e = block_sum(&gpu, grid, &dx, &mut partial)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, Error::InvalidLaunch { .. }), "{e}");
}

#[test]
fn two_dimensional_grid_indices() {
    use berth_examples::add_coordinates;
    let (_g, gpu) = gpu();
    let (w, h) = (333usize, 77usize);
    let a = random_f32(w * h);
    let da = gpu.upload(&a).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; w * h]).unwrap();
    let grid = Grid::new((w.div_ceil(32) as u32, h.div_ceil(8) as u32), (32, 8));
    add_coordinates(&gpu, grid, w as u32, &da, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = (0..w * h)
        .map(|k| a[k] + ((k / w) * 1000 + k % w) as f32)
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
}

#[test]
#[cfg(feature = "gpu")]
fn core_panic_ends_the_launch_with_an_error_naming_the_kernel() {
    if !in_child() {
        let (ok, out) = run_isolated("core_panic_ends_the_launch_with_an_error_naming_the_kernel");
        assert!(ok, "child failed:\n{out}");
        return;
    }
    use berth_examples::divide;
    let (_g, gpu) = gpu();
    let x = gpu.upload(&random_u32(4096)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(4096).unwrap();
    // A working launch first, then division by zero.
    divide(&gpu, Grid::cover(4096), 7, &x, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let err = divide(&gpu, Grid::cover(4096), 0, &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    match &err {
        Error::KernelFault { kernels, name, .. } => {
            assert_eq!(kernels, "`divide`", "{err}");
            assert_eq!(name, "CUDA_ERROR_LAUNCH_FAILED", "{err}");
        }
        other => panic!("expected KernelFault, got {other}"),
    }
    assert!(err.is_context_lost());
    println!("reported: {err}");
}

#[test]
fn a_warp_collective_whose_mask_leaves_out_the_caller_stops_the_launch_located() {
    in_child_on_the_gpu!(
        "a_warp_collective_whose_mask_leaves_out_the_caller_stops_the_launch_located"
    );
    use berth_examples::warp_ops::ballot_without_caller;
    let (_g, gpu) = gpu();
    let mut out = gpu.upload(&vec![u32::MAX; 64]).unwrap();
    let err = ballot_without_caller(&gpu, Grid::new(1, 64), &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let line = include_str!("../../examples/src/warp_ops.rs")
        .lines()
        .position(|l| l.contains("warp::ballot(next, true)"))
        .expect("in warp_ops.rs") as u32
        + 1;
    match &err {
        Error::KernelPanic { kernel, report, .. } => {
            assert_eq!(kernel, "ballot_without_caller", "{err}");
            assert_eq!(report.file, "examples/src/warp_ops.rs", "{report}");
            assert_eq!(report.line, line, "{report}");
            assert_eq!(
                report.message, "a warp collective's mask leaves out the calling lane",
                "{report}"
            );
        }
        Error::Simulator { problem, .. } => {
            assert!(problem.contains("does not name the calling lane"), "{err}");
            assert!(
                problem.contains(&format!("examples/src/warp_ops.rs:{line}")),
                "{err}"
            );
        }
        other => panic!("expected a located failure, got {other}"),
    }
    println!("reported: {err}");
}

#[test]
fn gpu_assert_reports_file_line_and_message() {
    in_child_on_the_gpu!("gpu_assert_reports_file_line_and_message");
    use berth_examples::copy_below;
    let (_g, gpu) = gpu();
    let mut values: Vec<u32> = random_u32(5000).iter().map(|v| v % 100).collect();
    let dx = gpu.upload(&values).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(5000).unwrap();
    copy_below(&gpu, Grid::cover(5000), 100, &dx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), values);
    values[4321] = 100;
    let dx = gpu.upload(&values).unwrap();
    let err = copy_below(&gpu, Grid::cover(5000), 100, &dx, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "copy_below");
    assert_eq!(report.file, "examples/src/lib.rs");
    assert_eq!(report.message, "value not below the limit");
    assert_eq!(
        report.line,
        berth_tests::example_line("gpu_assert!(x[i] < limit"),
        "{report}"
    );
    assert_eq!(
        (report.block[0], report.thread[0]),
        (4321 / 256, 4321 % 256),
        "{report}"
    );
    println!("reported: {err}");
}

// ---- placements -------------------------------------------------------------------------

#[test]
fn pinned_async_in_and_in_out_match_host() {
    use berth_examples::saxpy_pinned;
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    for &n in SIZES {
        let x = random_f32(n);
        let y = random_f32(n);
        let px = gpu.pinned_from(&x).unwrap();
        let mut py = gpu.pinned_from(&y).unwrap();
        assert!(
            !py.flags().write_combined(),
            "read-back buffers must not be write-combined"
        );
        saxpy_pinned(&stream, Grid::cover(n), 0.25, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(&py[..], &saxpy_on(&gpu, 0.25, &x, &y)[..], "n = {n}");
        assert_eq!(&px[..], &x[..], "n = {n}: an input must not change");
    }
}

/// A GPU and the CPU simulator share nothing: a peer view or copy either way, and portable
/// pinned memory of one launched on the other, are typed errors naming both devices — never a
/// CUDA device address read as a host pointer, nor a CUDA event handed to the simulator's
/// stream (the pinned memory carries a use by a leaked launch guard of its own device, which
/// the other backend's stream cannot wait for: the host waits for it).
#[test]
#[cfg(feature = "gpu")]
fn a_gpu_and_the_simulator_share_no_memory() {
    use berth::PinnedOptions;
    use berth_examples::saxpy_pinned;
    let (_g, gpu) = gpu();
    let sim = Gpu::simulator();
    let names = |e: &Error| match e {
        Error::Usage(why) => {
            why.contains("different backends")
                && why.contains(gpu.name())
                && why.contains(sim.name())
        }
        _ => false,
    };
    let on_gpu = gpu.upload(&[1.0f32, 2.0]).unwrap();
    let on_sim = sim.upload(&[3.0f32, 4.0]).unwrap();
    for e in [
        on_gpu.peer_view(&sim).unwrap_err(),
        on_gpu.peer_copy(&sim).unwrap_err(),
        on_sim.peer_view(&gpu).unwrap_err(),
        on_sim.peer_copy(&gpu).unwrap_err(),
    ] {
        assert!(names(&e), "{e:?}");
    }
    let n = 100_003;
    let opts = PinnedOptions {
        portable: true,
        ..PinnedOptions::default()
    };
    for (owner, other) in [(&gpu, &sim), (&sim, &gpu)] {
        let x = owner.pinned_with::<f32>(n, opts).unwrap();
        let mut y = owner.pinned_with::<f32>(n, opts).unwrap();
        assert!(x.flags().portable(), "{}", x.flags());
        std::mem::forget(saxpy_pinned(owner, Grid::cover(n), 1.0, &x, &mut y).unwrap());
        match saxpy_pinned(other, Grid::cover(n), 1.0, &x, &mut y) {
            Err(e) => assert!(names(&e), "{e:?}"),
            Ok(_) => panic!("memory of {} launched on {}", owner.name(), other.name()),
        }
        // The host waited for the leaked launch; the memory is usable again.
        assert!(y.iter().all(|&v| v == 0.0));
    }
}

#[test]
fn write_only_inputs_are_write_combined_and_still_correct() {
    use berth::{HostAccess, PinnedOptions};
    use berth_examples::saxpy_pinned;
    let (_g, gpu) = gpu();
    let n = 300_007;
    let x = random_f32(n);
    let y = random_f32(n);
    let opts = PinnedOptions {
        access: HostAccess::WriteOnly,
        portable: false,
    };
    let mut px = gpu.pinned_with::<f32>(n, opts).unwrap();
    px.copy_from_slice(&x);
    println!("write-only input flags: {}", px.flags());
    let mut py = gpu.pinned_from(&y).unwrap();
    saxpy_pinned(&gpu, Grid::cover(n), 2.0, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &saxpy_on(&gpu, 2.0, &x, &y)[..]);
}

#[test]
fn steady_state_pinned_launches_allocate_nothing() {
    use berth_examples::saxpy_pinned;
    let (_g, gpu) = gpu();
    let n = 1 << 20;
    let x = random_f32(n);
    let y = random_f32(n);
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&y).unwrap();
    // Warm-up: the first launch fills the staging pool.
    saxpy_pinned(&gpu, Grid::cover(n), 1.0, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    let before = gpu.pool_stats();
    let mut want = saxpy_on(&gpu, 1.0, &x, &y);
    for _ in 0..50 {
        saxpy_pinned(&gpu, Grid::cover(n), 1.0, &px, &mut py)
            .unwrap()
            .wait()
            .unwrap();
        want = saxpy_on(&gpu, 1.0, &x, &want);
    }
    let after = gpu.pool_stats();
    assert_eq!(
        after.device_allocations, before.device_allocations,
        "{before:?} -> {after:?}"
    );
    assert_eq!(
        after.pinned_allocations, before.pinned_allocations,
        "{before:?} -> {after:?}"
    );
    assert_eq!(
        after.device_reuses - before.device_reuses,
        100,
        "two staging buffers per launch"
    );
    assert_eq!(&py[..], &want[..]);
    // Pinned buffers go back to their pool and are reused.
    drop(py);
    let again = gpu.pinned_zeroed::<f32>(n).unwrap();
    assert!(
        again.iter().all(|&v| v == 0.0),
        "a reused pinned buffer is zeroed again"
    );
    assert_eq!(
        gpu.pool_stats().pinned_allocations,
        after.pinned_allocations
    );
    println!("pool after 51 launches: {:?}", gpu.pool_stats());
}

#[test]
fn mapped_read_sums_host_memory_in_place() {
    use berth_examples::{F4, MAPPED_SUM_BLOCK, mapped_sum};
    let (_g, gpu) = gpu();
    for n4 in [1usize, 255, 1000, 1 << 20, (1 << 22) + 3] {
        let vals = random_f32(4 * n4);
        let host: Vec<F4> = vals
            .chunks(4)
            .map(|c| F4 {
                x: c[0],
                y: c[1],
                z: c[2],
                w: c[3],
            })
            .collect();
        let mapped = gpu.mapped_from(&host).unwrap();
        let blocks = (n4.div_ceil(MAPPED_SUM_BLOCK as usize)).min(132 * 4) as u32;
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        mapped_sum(
            &gpu,
            Grid::new(blocks, MAPPED_SUM_BLOCK),
            &mapped,
            &mut partial,
        )
        .unwrap()
        .wait()
        .unwrap();
        let got = sum_f64(&partial.to_vec().unwrap());
        let scale: f64 = vals
            .iter()
            .map(|&v| f64::from(v.abs()))
            .sum::<f64>()
            .max(1.0);
        assert!((got - sum_f64(&vals)).abs() <= 1e-5 * scale, "n4 = {n4}");
    }
}

#[test]
fn mapped_write_is_seen_by_the_host_after_the_launch() {
    use berth_examples::mapped_iota;
    let (_g, gpu) = gpu();
    for n in [1usize, 257, 100_003] {
        let mut out = gpu.mapped_from(&vec![u32::MAX; n]).unwrap();
        let base = random_u32(1)[0];
        mapped_iota(&gpu, Grid::cover(n), base, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let want: Vec<u32> = (0..n as u32).map(|i| base.wrapping_add(i)).collect();
        assert_eq!(&out[..], &want[..], "n = {n}");
    }
}

#[test]
fn registered_host_memory_is_read_and_written_in_place() {
    use berth_examples::{gather_mapped, mapped_iota};
    let (_g, gpu) = gpu();
    let n = 50_000;
    // Written by the kernel straight into a Vec's own pages.
    let mut reg = gpu.register(vec![0u32; n]).unwrap();
    mapped_iota(&gpu, Grid::cover(n), 7, &mut reg)
        .unwrap()
        .wait()
        .unwrap();
    let v = reg.into_inner();
    assert!(v.iter().enumerate().all(|(i, &x)| x == 7 + i as u32));
    // Read by the kernel from a registered table.
    let table = random_f32(n);
    let idx: Vec<u32> = random_u32(4096).iter().map(|i| i % n as u32).collect();
    let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
    let reg = gpu.register(table).unwrap();
    let didx = gpu.upload(&idx).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    gather_mapped(&gpu, Grid::cover(idx.len()), &reg, &didx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), want);
    drop(reg);
    // Nothing to register is a clear error, not a driver code, and gives the Vec back.
    let refused = gpu.register(Vec::<f32>::with_capacity(8)).unwrap_err();
    assert!(matches!(*refused.error, Error::Usage(_)));
    assert_eq!(refused.data.capacity(), 8);
}

#[test]
fn mapped_and_copied_gathers_agree() {
    use berth_examples::{gather_device, gather_mapped};
    let (_g, gpu) = gpu();
    let n = 1 << 22;
    let table = random_f32(n);
    let idx: Vec<u32> = random_u32(100_000).iter().map(|i| i % n as u32).collect();
    let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
    let mapped = gpu.mapped_from(&table).unwrap();
    let device = gpu.upload(&table).unwrap();
    let didx = gpu.upload(&idx).unwrap();
    let mut a = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    let mut b = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    gather_mapped(&gpu, Grid::cover(idx.len()), &mapped, &didx, &mut a)
        .unwrap()
        .wait()
        .unwrap();
    gather_device(&gpu, Grid::cover(idx.len()), &device, &didx, &mut b)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(a.to_vec().unwrap(), want);
    assert_eq!(b.to_vec().unwrap(), want);
}

#[test]
fn tracing_says_what_each_placement_did() {
    use berth_examples::{gather_mapped, saxpy_pinned};
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::util::SubscriberInitExt as _;

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
    let log = Log::default();
    let sink = log.clone();
    // Global, not thread-scoped: a scoped subscriber set while other threads of the test
    // binary have already cached "no interest" in these callsites may see no events.
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish()
        .try_init()
        .expect("no other test installs a global subscriber");

    let (_g, gpu) = gpu();
    let n = 1000;
    let x = gpu.pinned_from(&random_f32(n)).unwrap();
    let mut y = gpu.pinned_from(&random_f32(n)).unwrap();
    saxpy_pinned(&gpu, Grid::cover(n), 1.0, &x, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    let table = gpu.mapped_from(&random_f32(n)).unwrap();
    let idx = gpu.upload(&[3u32; 10]).unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(10).unwrap();
    gather_mapped(&gpu, Grid::cover(10), &table, &idx, &mut out)
        .unwrap()
        .wait()
        .unwrap();

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    println!("{text}");
    let has = |needles: &[&str]| text.lines().any(|l| needles.iter().all(|n| l.contains(n)));
    assert!(
        has(&[
            "arg=\"x\"",
            "placement=\"pinned_async\"",
            "bytes=4000",
            "memory=pinned",
            "copied in before the kernel"
        ]),
        "{text}"
    );
    assert!(
        has(&[
            "arg=\"y\"",
            "placement=\"pinned_async\"",
            "copied in before and out after the kernel"
        ]),
        "{text}"
    );
    assert!(
        has(&[
            "kernel=\"saxpy_pinned\"",
            "copies_in=2",
            "copies_out=1",
            "launch"
        ]),
        "{text}"
    );
    assert!(
        has(&[
            "arg=\"table\"",
            "placement=\"mapped\"",
            "memory=pinned+mapped",
            "no copy"
        ]),
        "{text}"
    );
    assert!(
        has(&["arg=\"idx\"", "placement=\"device\"", "bytes=40"]),
        "{text}"
    );
}

// ---- pipelined launches -----------------------------------------------------------------

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
    use berth_examples::scale_finite_pipelined;
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
    use berth_examples::scale_finite_pipelined;
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
    let run = scale_finite_pipelined(&gpu, opts, 2.0, &px, &mut py).unwrap();
    assert_eq!(run.chunks_done(), 0, "no flags, no progress");
    let err = run.wait().unwrap_err();
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
    use berth_examples::scale_finite_pipelined;
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
    let run = scale_finite_pipelined(&gpu, opts, 2.0, &px, &mut py).unwrap();
    // A progress loop ends: the failed chunk never counts as done, but the run finishes.
    let start = std::time::Instant::now();
    while !run.is_finished() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "run never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(run.chunks_done() < run.chunks());
    let err = run.wait().unwrap_err();
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
    assert_eq!(*c, 17, "{err}");
    assert_eq!(elements.clone(), 17 * chunk..18 * chunk);
    assert!(
        completed_after.iter().all(|&k| k > 17 && k < 41),
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
    // Chunks before the failing one, and those reported complete after it, hold results;
    // the others were not written (still 0.5).
    for k in 0..41usize {
        let r = k * chunk..((k + 1) * chunk).min(n);
        let written = k < 17 || completed_after.contains(&k);
        let sample = r.start;
        if written {
            assert_eq!(py[sample], x[sample] * 2.0, "chunk {k}");
        } else if k != 17 {
            assert_eq!(py[sample], 0.5, "chunk {k} was written but not reported");
        }
    }
}

// ---- atomics ------------------------------------------------------------------------------

#[test]
fn atomics_count_and_return_previous_values() {
    use berth_examples::{histogram, tickets};
    let (_g, gpu) = gpu();
    let n = 300_007;
    let x = random_u32(n);
    for nbins in [1usize, 7, 64] {
        let dx = gpu.upload(&x).unwrap();
        let mut bins = gpu.alloc_zeroed::<u32>(nbins).unwrap();
        histogram(&gpu, Grid::new(200, 256), &dx, &mut bins)
            .unwrap()
            .wait()
            .unwrap();
        let mut want = vec![0u32; nbins];
        for &v in &x {
            want[v as usize % nbins] += 1;
        }
        assert_eq!(bins.to_vec().unwrap(), want, "{nbins} bins");
    }
    let vals: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let dv = gpu.upload(&vals).unwrap();
    let mut counter = gpu.alloc_zeroed::<u32>(1).unwrap();
    let mut sum = gpu.alloc_zeroed::<f32>(1).unwrap();
    let mut out = gpu.upload(&vec![u32::MAX; n]).unwrap();
    tickets(&gpu, Grid::cover(n), &dv, &mut counter, &mut sum, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let mut got = out.to_vec().unwrap();
    got.sort_unstable();
    assert!(
        got.iter().enumerate().all(|(i, &t)| t == i as u32),
        "tickets are a permutation of 0..n"
    );
    assert_eq!(counter.to_vec().unwrap()[0], n as u32);
    // Small integers: the float sum is exact in any order.
    let want: f32 = vals.iter().sum();
    assert_eq!(sum.to_vec().unwrap()[0], want);
}

#[test]
fn compute_kernels_match_host() {
    use berth::PipelineOptions;
    use berth_examples::{busy, relax, relax_pipelined};
    let (_g, gpu) = gpu();
    // relax: `steps` dependent multiply-adds from x[i], each as the backend computes it.
    let n = 50_003;
    let steps = 37;
    let x = random_f32(n);
    let host = |mut v: f32| {
        for _ in 0..steps {
            v = mul_add_on(&gpu, v, 0.9999, 0.0001);
        }
        v
    };
    let want: Vec<f32> = x.iter().map(|&v| host(v)).collect();
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    relax(&gpu, Grid::cover(n), steps, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &want[..]);
    py.fill(f32::NAN);
    let opts = PipelineOptions {
        chunk_bytes: Some(4096 * 4),
        ..Default::default()
    };
    relax_pipelined(&gpu, opts, steps, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &want[..]);
    // busy: the same kind of chain from i * 1e-6.
    let m = 2 * 256 + 17;
    let mut out = gpu.upload(&vec![f32::NAN; m]).unwrap();
    busy(&gpu, Grid::cover(m), 100, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = (0..m)
        .map(|i| {
            let mut v = i as f32 * 1e-6;
            for _ in 0..100 {
                v = mul_add_on(&gpu, v, 0.999_999, 1e-7);
            }
            v
        })
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
}

// ---- signals ----------------------------------------------------------------------------

fn job(id: u32) -> berth_examples::Job {
    berth_examples::Job {
        id,
        stop: 0,
        value: (id % 1000) as f32 * 0.25,
    }
}

#[test]
fn flag_round_trips_answer_every_ping_in_order() {
    use berth_examples::ping_pong;
    use std::time::Duration;
    let t = Duration::from_secs(20);
    let (_g, gpu) = gpu();
    let cells = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let rounds = 2000;
    let pending = ping_pong(&stream, Grid::new(1, 1), rounds, 20_000, &cells).unwrap();
    for n in 1..=rounds {
        // The kernel has answered the previous ping and nothing else.
        assert_eq!(cells.load(1), n - 1);
        cells.store(0, n);
        assert_eq!(
            cells.wait(1, |v| v >= n, t).unwrap(),
            n,
            "answer to ping {n}"
        );
    }
    pending.wait().unwrap();
    assert_eq!(cells.load(1), rounds);
}

#[test]
fn mailboxes_carry_ten_thousand_rounds_each_way_without_loss() {
    use berth_examples::{Job, square_worker, worker_ctl};
    use std::time::Duration;
    let t = Duration::from_secs(20);
    let (_g, gpu) = gpu();
    let inbox = gpu.inbox::<Job>(64).unwrap();
    let outbox = gpu.outbox::<berth_examples::Reply>(64).unwrap();
    let ctl = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let pending = square_worker(&stream, Grid::new(1, 1), 20_000, &inbox, &outbox, &ctl).unwrap();
    let check = |id: u32, r: berth_examples::Reply| {
        let j = job(id);
        assert_eq!((r.id, r.value), (id, j.value * j.value + 1.0), "reply {id}");
    };
    // 10 000 strict round trips, then 10 000 with the ring kept full.
    for id in 0..10_000 {
        inbox.send(job(id), t).unwrap();
        check(id, outbox.recv(t).unwrap());
    }
    let mut next = 10_000;
    for id in 10_000..20_000u32 {
        while id - next >= 63 {
            check(next, outbox.recv(t).unwrap());
            next += 1;
        }
        inbox.send(job(id), t).unwrap();
    }
    while next < 20_000 {
        check(next, outbox.recv(t).unwrap());
        next += 1;
    }
    inbox
        .send(
            Job {
                id: 0,
                stop: 1,
                value: 0.0,
            },
            t,
        )
        .unwrap();
    pending.wait().unwrap();
    assert_eq!(ctl.load(worker_ctl::STATE), worker_ctl::STOPPED);
    assert_eq!(
        ctl.load(worker_ctl::ANSWERED),
        20_000,
        "no job lost or duplicated"
    );
    // Nothing more arrives.
    assert!(matches!(
        outbox.recv(Duration::from_millis(20)),
        Err(Error::Timeout { .. })
    ));
}

#[test]
fn a_kernel_whose_host_never_answers_ends_with_an_error() {
    in_child_on_the_gpu!("a_kernel_whose_host_never_answers_ends_with_an_error");
    use berth_examples::{Job, Reply, square_worker, worker_ctl};
    let (_g, gpu) = gpu();
    let inbox = gpu.inbox::<Job>(4).unwrap();
    let outbox = gpu.outbox::<Reply>(4).unwrap();
    let ctl = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let started = std::time::Instant::now();
    // 50 ms of patience, and the host posts nothing.
    let err = square_worker(&stream, Grid::new(1, 1), 50, &inbox, &outbox, &ctl)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected the worker's failure, got {err}");
    };
    assert_eq!(kernel, "square_worker");
    assert_eq!(report.message, "the host posted no job in time");
    assert_eq!(ctl.load(worker_ctl::STATE), worker_ctl::HOST_GONE);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "gave up in time"
    );
    println!("reported: {err}");
}

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
        berth_tests::example_line("out[i] = table[idx[i.get()] as usize]"),
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

// ---- warp operations ----------------------------------------------------------------------

#[test]
fn warp_collectives_match_their_definitions() {
    use berth_examples::warp_ops::{WARP_LANES_OUT, warp_lanes};
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for (n, block) in [(1, 32), (255, 256), (1000, 64), (4099, 256), (70_001, 128)] {
        // Small values make the votes and matches go both ways.
        let x: Vec<u32> = random_u32(n)
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 3 == 0 { v % 97 } else { v })
            .collect();
        let dx = gpu.upload(&x).unwrap();
        let mut out = gpu.upload(&vec![0xdead_beef; n * WARP_LANES_OUT]).unwrap();
        warp_lanes(&gpu, Grid::cover_with_block(n, block), &dx, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let got = out.to_vec().unwrap();
        let want = warp_ref::warp_lanes(&x, block as usize);
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "n = {n}: thread {}, result {}: got {:#x}, want {:#x}",
                i / WARP_LANES_OUT,
                i % WARP_LANES_OUT,
                got[i],
                want[i]
            );
        }
    }
}

#[test]
fn warp_shuffles_move_64_bit_values_and_reduce_floats() {
    use berth_examples::warp_ops::warp_wide;
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for n in [1, 33, 256, 10_007] {
        let x: Vec<f64> = random_f32(n).iter().map(|&v| f64::from(v) / 3.0).collect();
        let y: Vec<i64> = random_u32(n)
            .iter()
            .map(|&v| (i64::from(v) << 31) - (1 << 62))
            .collect();
        let z = random_f32(n);
        let warps = n.div_ceil(32);
        let (dx, dy, dz) = (
            gpu.upload(&x).unwrap(),
            gpu.upload(&y).unwrap(),
            gpu.upload(&z).unwrap(),
        );
        let mut wide = gpu.upload(&vec![f64::NAN; n]).unwrap();
        let mut ints = gpu.upload(&vec![i64::MIN; n]).unwrap();
        let mut stats = gpu.upload(&vec![f32::NAN; 3 * warps]).unwrap();
        warp_wide(
            &gpu,
            Grid::cover(n),
            &dx,
            &dy,
            &dz,
            &mut wide,
            &mut ints,
            &mut stats,
        )
        .unwrap()
        .wait()
        .unwrap();
        let (w, i, s) = warp_ref::warp_wide(&x, &y, &z);
        assert_eq!(wide.to_vec().unwrap(), w, "n = {n}");
        assert_eq!(ints.to_vec().unwrap(), i, "n = {n}");
        let got = stats.to_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&s), "n = {n}: warp sums bit for bit");
    }
}

#[test]
fn partial_warps_have_only_the_lanes_inside_the_block() {
    use berth_examples::warp_ops::warp_active;
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for block in [32usize, 48, 100, 256] {
        let mut out = gpu.upload(&vec![0xdead_beef; 2 * block]).unwrap();
        warp_active(&gpu, Grid::new(3, block as u32), &mut out)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            out.to_vec().unwrap(),
            warp_ref::warp_active(block),
            "block {block}"
        );
    }
}

// ---- half precision -----------------------------------------------------------------------

#[test]
fn haxpy2_rounds_each_fma_once() {
    use berth::device::half::{HalfExt, f16x2};
    use berth::f16;
    use berth_examples::half_precision::haxpy2;
    let (_g, gpu) = gpu();
    let pairs = |v: Vec<f32>| -> Vec<f16x2> {
        v.chunks(2)
            .map(|c| f16x2::new(f16::from_f32(c[0] * 50.0), f16::from_f32(c[1] * 50.0)))
            .collect()
    };
    for n in [1, 255, 256, 257, 100_003] {
        let (x, y) = (pairs(random_f32(2 * n)), pairs(random_f32(2 * n)));
        let a = f16x2::new(f16::from_f32(1.5), f16::from_f32(-0.3));
        let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
        let nan = f16x2::splat(f16::NAN);
        let mut out = gpu.upload(&vec![nan; n]).unwrap();
        haxpy2(&gpu, Grid::cover(n), a, &dx, &dy, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let got = out.to_vec().unwrap();
        for i in 0..n {
            // The correctly rounded a * x + y, element by element.
            let want = f16x2::new(a.lo.fma_rn(x[i].lo, y[i].lo), a.hi.fma_rn(x[i].hi, y[i].hi));
            assert_eq!(got[i].to_bits(), want.to_bits(), "n = {n}, pair {i}");
        }
    }
}

#[test]
fn hdot_accumulates_halves_in_f32() {
    use berth::device::half::f16x2;
    use berth::f16;
    use berth_examples::half_precision::{HDOT_BLOCK, hdot};
    let (_g, gpu) = gpu();
    for n in [1, 255, 4099, (1 << 20) + 3] {
        let v = |s: Vec<f32>| -> Vec<f16x2> {
            s.chunks(2)
                .map(|c| f16x2::new(f16::from_f32(c[0]), f16::from_f32(c[1])))
                .collect()
        };
        let (x, y) = (v(random_f32(2 * n)), v(random_f32(2 * n)));
        let blocks = n.div_ceil(HDOT_BLOCK as usize).clamp(1, 132 * 8) as u32;
        let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        hdot(&gpu, Grid::new(blocks, HDOT_BLOCK), &dx, &dy, &mut partial)
            .unwrap()
            .wait()
            .unwrap();
        let parts = partial.to_vec().unwrap();
        assert!(parts.iter().all(|p| p.is_finite()), "n = {n}");
        let got = sum_f64(&parts);
        let terms = x.iter().zip(&y).flat_map(|(a, b)| {
            [
                f64::from(a.lo.to_f32()) * f64::from(b.lo.to_f32()),
                f64::from(a.hi.to_f32()) * f64::from(b.hi.to_f32()),
            ]
        });
        let (want, scale) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
        assert!(
            (got - want).abs() <= 1e-5 * f64::max(scale, 1.0),
            "n = {n}: got {got}, want {want}"
        );
    }
}

#[test]
fn half_operations_match_their_host_definitions() {
    use berth::device::half::{HalfExt, bf16x2, f16x2};
    use berth::{bf16, f16};
    use berth_examples::half_precision::{HALF_OPS_OUT, half_ops};
    let (_g, gpu) = gpu();
    let n = 50_001;
    let x: Vec<f16> = random_f32(n)
        .iter()
        .map(|&v| f16::from_f32(v * 100.0))
        .collect();
    let y: Vec<bf16> = random_f32(n)
        .iter()
        .map(|&v| bf16::from_f32(v * 1e4))
        .collect();
    let z: Vec<f32> = random_f32(n).iter().map(|&v| v * 300.0).collect();
    let (dx, dy, dz) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&y).unwrap(),
        gpu.upload(&z).unwrap(),
    );
    let k = HALF_OPS_OUT * n;
    let mut wide = gpu.upload(&vec![f32::NAN; k]).unwrap();
    let mut halves = gpu.upload(&vec![f16::NAN; k]).unwrap();
    let mut brains = gpu.upload(&vec![bf16::NAN; k]).unwrap();
    let mut pairs = gpu.upload(&vec![f16x2::splat(f16::NAN); n]).unwrap();
    half_ops(
        &gpu,
        Grid::cover(n),
        &dx,
        &dy,
        &dz,
        &mut wide,
        &mut halves,
        &mut brains,
        &mut pairs,
    )
    .unwrap()
    .wait()
    .unwrap();
    let (wide, halves) = (wide.to_vec().unwrap(), halves.to_vec().unwrap());
    let (brains, pairs) = (brains.to_vec().unwrap(), pairs.to_vec().unwrap());
    for i in 0..n {
        let (h, b, f) = (x[i], y[i], z[i]);
        // Conversions and single operations: the `half` crate's own (software) conversions
        // around one f32 operation, which rounds once.
        let (fh, fb) = (f16::from_f32(f), bf16::from_f32(f));
        let p = f16x2::new(
            f16::from_f32(f16::from_f32(f * 1.0).to_f32() * h.to_f32()),
            f16::from_f32(f16::from_f32(-f).to_f32() * h.to_f32()),
        );
        let p = f16x2::new(
            f16::from_f32(p.lo.to_f32() + f16::from_f32(b.to_f32()).to_f32()),
            f16::from_f32(p.hi.to_f32() + f16::from_f32(b.to_f32()).to_f32()),
        );
        let q = bf16x2::from_f32s(f, h.to_f32()).fma(bf16x2::splat(b), bf16x2::splat(fb));
        let r = (bf16x2::splat(b) + q) * q;
        let want_wide = [
            h.to_f32(),
            b.to_f32(),
            p.lo.to_f32() + p.hi.to_f32(),
            r.lo.to_f32() + r.hi.to_f32(),
        ];
        let want_halves = [
            fh,
            f16::from_f32(h.to_f32() + fh.to_f32()),
            f16::from_f32(h.to_f32() * fh.to_f32()),
            h.fma_rn(h, fh),
        ];
        let want_brains = [
            fb,
            bf16::from_f32(b.to_f32() + fb.to_f32()),
            bf16::from_f32(b.to_f32() * fb.to_f32()),
            b.fma_rn(b, fb),
        ];
        let s = HALF_OPS_OUT * i..HALF_OPS_OUT * (i + 1);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&wide[s.clone()]), bits(&want_wide), "element {i}");
        let hb = |v: &[f16]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(hb(&halves[s.clone()]), hb(&want_halves), "element {i}");
        let bb = |v: &[bf16]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bb(&brains[s]), bb(&want_brains), "element {i}");
        let want_pair = f16x2::new(p.lo, f16::from_f32(q.hi.to_f32()));
        assert_eq!(pairs[i].to_bits(), want_pair.to_bits(), "element {i}");
    }
}

#[test]
fn wide_and_float_atomics_fold_every_element() {
    use berth_examples::atomics::atomics_wide;
    let (_g, gpu) = gpu();
    for n in [1, 257, 100_003] {
        let x: Vec<u64> = random_u32(n)
            .iter()
            .zip(random_u32(n))
            .map(|(&a, b)| u64::from(a) << 32 | u64::from(b))
            .collect();
        let y: Vec<i64> = x.iter().map(|&v| (v as i64).rotate_left(7)).collect();
        // Multiples of 1/64 below 2^10: every partial sum is exact, in any order.
        let z: Vec<f64> = random_f32(n)
            .iter()
            .map(|&v| (f64::from(v) * 65536.0).round() / 64.0)
            .collect();
        let w = random_f32(n);
        let (dx, dy, dz, dw) = (
            gpu.upload(&x).unwrap(),
            gpu.upload(&y).unwrap(),
            gpu.upload(&z).unwrap(),
            gpu.upload(&w).unwrap(),
        );
        let mut ints = gpu.upload(&[0, 0, u64::MAX]).unwrap();
        let mut signed = gpu.upload(&[0, i64::MIN, i64::MAX]).unwrap();
        let mut floats = gpu
            .upload(&[0.0, f64::NEG_INFINITY, f64::INFINITY])
            .unwrap();
        let mut singles = gpu.upload(&[f32::NEG_INFINITY, f32::INFINITY]).unwrap();
        atomics_wide(
            &gpu,
            Grid::cover(n),
            &dx,
            &dy,
            &dz,
            &dw,
            &mut ints,
            &mut signed,
            &mut floats,
            &mut singles,
        )
        .unwrap()
        .wait()
        .unwrap();
        let sum_u = x.iter().fold(0u64, |s, &v| s.wrapping_add(v));
        let (max_u, min_u) = (*x.iter().max().unwrap(), *x.iter().min().unwrap());
        assert_eq!(ints.to_vec().unwrap(), [sum_u, max_u, min_u], "n = {n}");
        let sum_i = y.iter().fold(0i64, |s, &v| s.wrapping_add(v));
        let (max_i, min_i) = (*y.iter().max().unwrap(), *y.iter().min().unwrap());
        assert_eq!(signed.to_vec().unwrap(), [sum_i, max_i, min_i], "n = {n}");
        let fmax = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let fmin = z.iter().copied().fold(f64::INFINITY, f64::min);
        assert_eq!(
            floats.to_vec().unwrap(),
            [z.iter().sum::<f64>(), fmax, fmin],
            "n = {n}"
        );
        let smax = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let smin = w.iter().copied().fold(f32::INFINITY, f32::min);
        assert_eq!(singles.to_vec().unwrap(), [smax, smin], "n = {n}");
    }
}

#[test]
fn scoped_atomics_count_per_block_and_across_the_grid() {
    use berth_examples::atomics::atomics_scoped;
    let (_g, gpu) = gpu();
    let (n, block) = (50_001usize, 128u32);
    let blocks = n.div_ceil(block as usize);
    let x = random_u32(n);
    let dx = gpu.upload(&x).unwrap();
    let mut per_block = gpu.alloc_zeroed::<u32>(blocks).unwrap();
    let mut last = gpu.upload(&vec![-1i32; blocks]).unwrap();
    let mut total = gpu.upload(&[0, 0, u64::MAX]).unwrap();
    let mut owner = gpu.alloc_zeroed::<i64>(61).unwrap();
    let mut fsum = gpu.alloc_zeroed::<f32>(1).unwrap();
    let mut dsum = gpu.alloc_zeroed::<f64>(1 + blocks).unwrap();
    atomics_scoped(
        &gpu,
        Grid::new(blocks as u32, block),
        &dx,
        &mut per_block,
        &mut last,
        &mut total,
        &mut owner,
        &mut fsum,
        &mut dsum,
    )
    .unwrap()
    .wait()
    .unwrap();
    let b = block as usize;
    let counts: Vec<u32> = (0..blocks).map(|k| (n - k * b).min(b) as u32).collect();
    assert_eq!(per_block.to_vec().unwrap(), counts);
    for (k, &l) in last.to_vec().unwrap().iter().enumerate() {
        assert!(
            (k * b..(k * b + b).min(n)).contains(&(l as usize)),
            "block {k}: {l}"
        );
    }
    let sum: u64 = x.iter().map(|&v| u64::from(v)).sum();
    let (max, min) = (*x.iter().max().unwrap(), *x.iter().min().unwrap());
    assert_eq!(
        total.to_vec().unwrap(),
        [sum, u64::from(max), u64::from(min)]
    );
    for (k, &o) in owner.to_vec().unwrap().iter().enumerate() {
        let has_key = x.iter().any(|&v| v as usize % 61 == k);
        if has_key {
            assert!(
                o >= 1 && x[o as usize - 1] as usize % 61 == k,
                "slot {k}: {o}"
            );
        } else {
            assert_eq!(o, 0, "slot {k}");
        }
    }
    // Small integers: the float sums are exact in any order.
    let eighths: Vec<u32> = x.iter().map(|&v| v % 8).collect();
    let want = eighths.iter().map(|&v| f64::from(v)).sum::<f64>();
    assert_eq!(f64::from(fsum.to_vec().unwrap()[0]), want);
    let d = dsum.to_vec().unwrap();
    assert_eq!(d[0], want);
    for k in 0..blocks {
        let part: f64 = eighths[k * b..(k * b + b).min(n)]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        assert_eq!(d[1 + k], part, "block {k}");
    }
}

// ---- cudarc interop -------------------------------------------------------------------------

/// Row-major `n × n` `c = a · b` by cuBLAS (through cudarc) on berth's buffers, on `stream`.
#[cfg(feature = "gpu")]
fn cublas_sgemm(
    stream: &berth::Stream,
    n: usize,
    a: &berth::DeviceBuffer<f32>,
    b: &berth::DeviceBuffer<f32>,
    c: &mut berth::DeviceBuffer<f32>,
) {
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys::cublasOperation_t};
    let blas = CudaBlas::new(stream.cudarc_stream().unwrap()).unwrap();
    let d = n as i32;
    // Column-major `cᵀ = bᵀ · aᵀ` is row-major `c = a · b`.
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: d,
        n: d,
        k: d,
        alpha: 1.0f32,
        lda: d,
        ldb: d,
        beta: 0.0f32,
        ldc: d,
    };
    a.with_cudarc(stream, |a, _| {
        b.with_cudarc(stream, |b, _| {
            c.with_cudarc_mut(stream, |mut c, _| {
                // SAFETY: three views of `n × n` elements, as the sizes above say.
                unsafe { blas.gemm(cfg, &b, &a, &mut c) }.unwrap()
            })
            .unwrap()
        })
        .unwrap()
    })
    .unwrap();
}

/// cuBLAS on berth's buffers matches the host and berth's `sgemm_tiled`, and a berth launch
/// reading cuBLAS's product (with no wait in between) sees all of it.
#[test]
#[cfg(feature = "gpu")]
fn cublas_through_cudarc_on_berth_buffers_matches_host_and_sgemm_tiled() {
    use berth_examples::compute::{TILE, sgemm_tiled};
    let (_g, gpu) = gpu();
    let n = 512;
    let (a, b) = (random_f32(n * n), random_f32(n * n));
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut by_cublas = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let mut by_berth = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let mut consumed = gpu.alloc_zeroed::<f32>(n * n).unwrap();
    let stream = gpu.stream().unwrap();
    cublas_sgemm(&stream, n, &da, &db, &mut by_cublas);
    let t = TILE as u32;
    let grid = Grid::new((n as u32 / t, n as u32 / t), (t, t));
    // On the default stream: ordered after cuBLAS's work only by the recorded use.
    sgemm_tiled(&gpu, grid, n as u32, &by_cublas, &db, &mut consumed)
        .unwrap()
        .wait()
        .unwrap();
    sgemm_tiled(&gpu, grid, n as u32, &da, &db, &mut by_berth)
        .unwrap()
        .wait()
        .unwrap();
    let (c, berth_c) = (by_cublas.to_vec().unwrap(), by_berth.to_vec().unwrap());
    let host = |x: &[f32], y: &[f32], i: usize, j: usize| -> f64 {
        (0..n)
            .map(|k| f64::from(x[i * n + k]) * f64::from(y[k * n + j]))
            .sum()
    };
    let near = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-3 * want.abs().max(1.0);
    for (i, j) in [(0, 0), (1, 7), (n - 1, n - 1), (n / 2, 3), (17, n - 2)] {
        assert!(
            near(c[i * n + j], host(&a, &b, i, j)),
            "cuBLAS at ({i}, {j})"
        );
    }
    for (x, y) in c.iter().zip(&berth_c) {
        assert!(near(*y, f64::from(*x)), "sgemm_tiled {y} vs cuBLAS {x}");
    }
    let consumed = consumed.to_vec().unwrap();
    for (i, j) in [(0, 0), (5, 9), (n - 1, 0), (n / 3, n / 4)] {
        assert!(
            near(consumed[i * n + j], host(&c, &b, i, j)),
            "consumer at ({i}, {j})"
        );
    }
}

/// Memory cudarc allocated becomes a berth buffer without a copy, and kernels take it.
#[test]
#[cfg(feature = "gpu")]
fn a_cudarc_slice_adopted_by_berth_holds_its_data_and_takes_launches() {
    let (_g, gpu) = gpu();
    let n = 100_003;
    let (x, y) = (random_f32(n), random_f32(n));
    let cuda = gpu.cudarc_context().unwrap().default_stream();
    let slice = cuda.clone_htod(&y).unwrap();
    let mut dy = berth::DeviceBuffer::from_cudarc(&gpu, slice).unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);
    let dx = gpu.upload(&x).unwrap();
    saxpy(&gpu, Grid::cover(n), 2.0, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    let got = dy.to_vec().unwrap();
    assert_eq!(got, saxpy_on(&gpu, 2.0, &x, &y));
}
