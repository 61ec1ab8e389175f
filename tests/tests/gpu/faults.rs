//! Panics, faults and recovery: a kernel's panic or `gpu_assert!` comes back located, a fault
//! poisons only its context, and a reset waits for what the lost context lent out.

use super::*;

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
    let line = berth_tests::COMPUTE.line(".tiles_across::<REG8_TILE, BK>(0);");
    assert_eq!(
        (report.file.as_str(), report.line),
        (berth_tests::COMPUTE.path, line),
        "{report}"
    );
    assert_eq!(
        report.message,
        "index (127, 135) out of bounds: the matrix is 128 × 132 (rows × columns)"
    );
    // The trap loses the context with everything in it, on both backends.
    assert!(gpu.is_lost());
    assert!(dc.to_vec().unwrap_err().is_context_lost());
}

/// A fault that surfaces where another kernel crate's module is loaded (its first launch) is
/// reported as the fault it is, naming the kernel that faulted, not as a module the driver
/// rejected; on the simulator the launch is refused naming it too.
#[test]
fn a_fault_surfacing_at_another_crates_first_launch_names_the_faulting_kernel() {
    in_child_on_the_gpu!(
        "a_fault_surfacing_at_another_crates_first_launch_names_the_faulting_kernel"
    );
    let (_g, gpu) = gpu();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    // The faulting kernel is a fixture; the launch after it is the examples crate's first.
    let other_x = gpu.upload(&random_f32(n)).unwrap();
    let mut other = gpu.alloc_zeroed::<f32>(n).unwrap();
    let failing = unchecked_copy(&gpu, Grid::cover(n), &x, &mut out).unwrap();
    // The trap has happened (on a GPU within microseconds; the simulator's stream has run
    // the launch once the context is poisoned).
    let start = std::time::Instant::now();
    while !gpu.is_lost() && start.elapsed() < std::time::Duration::from_secs(1) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let err = saxpy(&gpu, Grid::cover(n), 2.0, &other_x, &mut other)
        .and_then(|p| p.wait())
        .expect_err("a launch after a fault cannot succeed");
    println!("reported: {err}");
    assert!(err.is_context_lost(), "{err}");
    assert!(
        err.to_string().contains("unchecked_copy"),
        "the error names the kernel that faulted: {err}"
    );
    assert!(!err.to_string().contains("rejected"), "{err}");
    drop(failing);
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
        let (ok, out) = run_isolated(&berth_tests::test_path(
            module_path!(),
            "kernel_panic_is_reported_and_context_recovers",
        ));
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
    assert_eq!(report.file, berth_tests::FAULTS.path, "{report}");
    assert_eq!(
        report.line,
        berth_tests::FAULTS.line("out[i] = x[i];"),
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
        let (ok, out) = run_isolated(&berth_tests::test_path(module_path!(), name));
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
        let (ok, out) = run_isolated(&berth_tests::test_path(
            module_path!(),
            "a_reset_waits_until_the_lost_contexts_host_buffers_are_dropped",
        ));
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
        let (ok, out) = run_isolated(&berth_tests::test_path(
            module_path!(),
            "a_reset_waits_until_the_device_sets_communicators_are_gone",
        ));
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
        let (ok, out) = run_isolated(&berth_tests::test_path(
            module_path!(),
            "new_gpu_after_an_unrecovered_fault_is_fresh_or_a_typed_error",
        ));
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
#[cfg(feature = "gpu")]
fn core_panic_ends_the_launch_with_an_error_naming_the_kernel() {
    if !in_child() {
        let (ok, out) = run_isolated(&berth_tests::test_path(
            module_path!(),
            "core_panic_ends_the_launch_with_an_error_naming_the_kernel",
        ));
        assert!(ok, "child failed:\n{out}");
        return;
    }
    use berth_fixtures::faults::divide;
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
    use berth_fixtures::warp_ops::ballot_without_caller;
    let (_g, gpu) = gpu();
    let mut out = gpu.upload(&vec![u32::MAX; 64]).unwrap();
    let err = ballot_without_caller(&gpu, Grid::new(1, 64), &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let line = berth_tests::WARP_OPS.line("warp::ballot(next, true)");
    match &err {
        Error::KernelPanic { kernel, report, .. } => {
            assert_eq!(kernel, "ballot_without_caller", "{err}");
            assert_eq!(report.file, berth_tests::WARP_OPS.path, "{report}");
            assert_eq!(report.line, line, "{report}");
            assert_eq!(
                report.message, "a warp collective's mask leaves out the calling lane",
                "{report}"
            );
        }
        Error::Simulator { problem, .. } => {
            assert!(problem.contains("does not name the calling lane"), "{err}");
            assert!(
                problem.contains(&format!("{}:{line}", berth_tests::WARP_OPS.path)),
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
    use berth_fixtures::faults::copy_below;
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
    assert_eq!(report.file, berth_tests::FAULTS.path);
    assert_eq!(report.message, "value not below the limit");
    assert_eq!(
        report.line,
        berth_tests::FAULTS.line("gpu_assert!(x[i] < limit"),
        "{report}"
    );
    assert_eq!(
        (report.block[0], report.thread[0]),
        (4321 / 256, 4321 % 256),
        "{report}"
    );
    println!("reported: {err}");
}

/// `add_coordinates` (no declared block) launched on `grid`, whose grid or block has two
/// layers along z, so that two threads would get every 2D position: its
/// `thread::index_2d()` stops the kernel at that line with a message saying what to do,
/// before any thread writes.
fn index_2d_stops_a_launch_with_z_layers(grid: Grid) {
    use berth_fixtures::args::add_coordinates;
    let (_g, gpu) = gpu();
    let (w, h) = (40usize, 20usize);
    let a = gpu.upload(&random_f32(w * h)).unwrap();
    let mut out = gpu.upload(&random_f32(w * h)).unwrap();
    let err = add_coordinates(&gpu, grid, w as u32, &a, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected a kernel panic at thread::index_2d(), got {err}");
    };
    assert_eq!(kernel, "add_coordinates");
    assert!(
        report
            .message
            .starts_with("thread::index_2d() needs a launch whose grid and block have z extent 1")
            && report.message.contains("#[gpu_kernel(block = (16, 16))]"),
        "{report}"
    );
    assert_eq!(
        (report.file.as_str(), report.line),
        (
            berth_tests::ARGS.path,
            berth_tests::ARGS.line("let p = thread::index_2d();")
        ),
        "{report}"
    );
}

/// A grid with two layers along z: see [`index_2d_stops_a_launch_with_z_layers`].
#[test]
fn index_2d_stops_a_grid_with_two_layers() {
    in_child_on_the_gpu!("index_2d_stops_a_grid_with_two_layers");
    index_2d_stops_a_launch_with_z_layers(Grid::new((3, 2, 2), (16, 16)));
}

/// A block with two layers along z: see [`index_2d_stops_a_launch_with_z_layers`].
#[test]
fn index_2d_stops_a_block_with_two_layers() {
    in_child_on_the_gpu!("index_2d_stops_a_block_with_two_layers");
    index_2d_stops_a_launch_with_z_layers(Grid::new((3, 3), (16, 8, 2)));
}

/// Reads whose checks the builder tests together (one straight stretch, no declared block)
/// run and report as written: every thread in range sums its four reads; a thread whose third
/// and fourth reads are both out of range reports the third, with its index, length and line.
#[test]
fn combined_checks_report_the_first_read_out_of_range_in_program_order() {
    in_child_on_the_gpu!("combined_checks_report_the_first_read_out_of_range_in_program_order");
    let (_g, gpu) = gpu();
    let (n, stride) = (1000usize, 7usize);
    let x = random_u32(n + 3 * stride);
    let dx = gpu.upload(&x).unwrap();
    let mut out = gpu.upload(&vec![u32::MAX; n]).unwrap();
    four_reads(&gpu, Grid::cover(n), stride as u32, &dx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<u32> = (0..n)
        .map(|i| (0..4).fold(0u32, |acc, k| acc.wrapping_add(x[i + k * stride])))
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    // One thread, `x` of 2 × stride: its third read (index 14) and fourth (21) are past the
    // end; the third is reported.
    let short = gpu.upload(&x[..2 * stride]).unwrap();
    let mut one = gpu.upload(&[u32::MAX]).unwrap();
    let err = four_reads(&gpu, Grid::new(1, 1), stride as u32, &short, &mut one)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "four_reads");
    assert_eq!(
        (report.file.as_str(), report.line),
        (
            berth_tests::FAULTS.path,
            berth_tests::FAULTS.line("// third read")
        ),
        "{report}"
    );
    assert_eq!(
        report.message, "index out of bounds: the len is 14 but the index is 14",
        "{report}"
    );
}

/// A counted loop's check, which the builder tests before the loop for the loop's last step,
/// runs and reports as written: every thread in range sums its strided reads; a thread whose
/// reads go out of range from the fourth step (index 12 of 10) reports that step's index, not
/// the last step's (20).
#[test]
fn a_counted_loops_check_reports_the_first_step_out_of_range() {
    in_child_on_the_gpu!("a_counted_loops_check_reports_the_first_step_out_of_range");
    let (_g, gpu) = gpu();
    let (n, stride, span) = (1000usize, 4usize, 24usize);
    let x = random_u32(n + span);
    let dx = gpu.upload(&x).unwrap();
    let mut out = gpu.upload(&vec![u32::MAX; n]).unwrap();
    strided_sum(
        &gpu,
        Grid::cover(n),
        stride as u32,
        span as u32,
        &dx,
        &mut out,
    )
    .unwrap()
    .wait()
    .unwrap();
    let want: Vec<u32> = (0..n)
        .map(|i| {
            (0..span)
                .step_by(stride)
                .fold(0u32, |acc, t| acc.wrapping_add(x[i + t]))
        })
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    let short = gpu.upload(&x[..10]).unwrap();
    let mut one = gpu.upload(&[u32::MAX]).unwrap();
    let err = strided_sum(
        &gpu,
        Grid::new(1, 1),
        stride as u32,
        span as u32,
        &short,
        &mut one,
    )
    .unwrap()
    .wait()
    .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "strided_sum");
    assert_eq!(
        (report.file.as_str(), report.line),
        (
            berth_tests::FAULTS.path,
            berth_tests::FAULTS.line("// strided read")
        ),
        "{report}"
    );
    assert_eq!(
        report.message, "index out of bounds: the len is 10 but the index is 12",
        "{report}"
    );
}
