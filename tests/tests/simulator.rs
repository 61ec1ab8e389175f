//! What only the CPU simulator does: picking it, and the checks it makes that a GPU cannot —
//! a located report of a panicking thread, shared-memory races, a barrier reached by part of
//! a block — on deliberately broken kernels. (The example kernels' results on the simulator
//! are checked by `tests/gpu/`, the same tests the GPU runs.)

use berth::{Backend, Error, Gpu, Grid};
use berth_examples::{block_sum, saxpy};
use berth_fixtures::broken::{half_barrier, hidden_barrier, shared_race, split_barrier};
use berth_fixtures::faults::{divide, unchecked_copy};
use berth_fixtures::{rotate_plain, rotate_unguarded};
use berth_tests::{random_f32, random_u32, saxpy_host};

fn sim() -> Gpu {
    let gpu = Gpu::simulator();
    assert_eq!(gpu.backend(), Backend::Simulator);
    assert!(gpu.name().contains("CPU simulator"), "{}", gpu.name());
    gpu
}

/// A failed launch stops the simulated context as a fault stops a GPU's: later work is refused
/// with an error naming the fault, and `recover` gives a fresh context that works.
fn still_works(gpu: &Gpu) {
    assert!(gpu.is_lost());
    let err = gpu.upload(&[1u32, 2, 3]).unwrap_err();
    assert!(
        matches!(&err, Error::ContextLost(why) if why.contains("kernel")),
        "expected ContextLost naming the failed kernel, got {err}"
    );
    let gpu = gpu.recover().unwrap();
    assert!(!gpu.is_lost());
    let (x, y) = (random_f32(3000), random_f32(3000));
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y).unwrap();
    saxpy(&gpu, Grid::cover(3000), 2.0, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(2.0, &x, &y));
}

#[test]
fn the_backend_is_chosen_and_visible() {
    // SAFETY: the only test in this binary that touches the environment, before any thread
    // of its own; other tests do not read BERTH_BACKEND.
    unsafe { std::env::set_var("BERTH_BACKEND", "simulator") };
    let gpu = Gpu::new_or_simulator().unwrap();
    assert_eq!(gpu.backend(), Backend::Simulator);
    // SAFETY: as above.
    unsafe { std::env::remove_var("BERTH_BACKEND") };
    // Without a driver, the fallback is the simulator as well; with one, the GPU.
    // SAFETY: only checks whether libcuda can be opened.
    let driver = unsafe { berth::raw::sys::is_culib_present() };
    let gpu = Gpu::new_or_simulator().unwrap();
    assert_eq!(gpu.backend() == Backend::Cuda, driver && Gpu::new().is_ok());
}

#[test]
fn out_of_bounds_names_kernel_block_thread_and_location() {
    let gpu = sim();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let err = unchecked_copy(&gpu, Grid::cover(n), &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "unchecked_copy");
    assert_eq!(
        (report.file.as_str(), report.line),
        (
            berth_tests::FAULTS.path,
            berth_tests::FAULTS.line("out[i] = x[i];")
        ),
        "{report}"
    );
    assert_eq!(
        report.message,
        "index out of bounds: the len is 1000 but the index is 1000"
    );
    assert_eq!(
        (report.block, report.thread),
        ([3, 0, 0], [232, 0, 0]),
        "{report}"
    );
    println!("reported: {err}");
    still_works(&gpu);
}

#[test]
fn a_core_panic_is_located_too() {
    let gpu = sim();
    let x = gpu.upload(&random_u32(500)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(500).unwrap();
    let err = divide(&gpu, Grid::cover(500), 0, &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "divide");
    assert!(report.message.contains("divide by zero"), "{report}");
    assert_eq!(report.file, berth_tests::FAULTS.path);
    assert_eq!(report.thread, [0, 0, 0]);
    still_works(&gpu);
}

#[test]
fn shared_memory_races_are_reported() {
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(4).unwrap();
    let err = shared_race(&gpu, Grid::new(4, 32), &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::Simulator {
        kernel, problem, ..
    } = &err
    else {
        panic!("expected a simulator report, got {err}");
    };
    assert_eq!(*kernel, "shared_race");
    assert!(
        problem.contains("data race on shared memory") && problem.contains("both wrote"),
        "{err}"
    );
    println!("reported: {err}");
    still_works(&gpu);
}

#[test]
fn a_tree_reduction_refuses_a_block_shape_its_shared_slots_do_not_fit() {
    // block_tree_sum gives thread `idx_x` its slot: a 2D block would have two threads per
    // slot (a shared race), a non-power-of-two one would read slots nobody wrote.
    for threads in [berth::Dim3::from((16, 16)), berth::Dim3::from(96)] {
        let gpu = sim();
        let x = gpu.upload(&vec![1.0f32; 1024]).unwrap();
        let mut partial = gpu.alloc_zeroed::<f32>(2).unwrap();
        let err = block_sum(&gpu, Grid::new(2, threads), &x, &mut partial)
            .unwrap()
            .wait()
            .unwrap_err();
        let Error::KernelPanic { kernel, report, .. } = &err else {
            panic!("expected KernelPanic, got {err}");
        };
        assert_eq!(*kernel, "block_sum");
        assert!(
            report
                .message
                .contains("block_tree_sum: the block must be 1D"),
            "{report}"
        );
        still_works(&gpu);
    }
}

#[test]
fn a_barrier_reached_by_part_of_a_block_is_reported_not_hung() {
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(64).unwrap();
    let err = half_barrier(&gpu, Grid::new(2, 32), &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::Simulator {
        kernel,
        problem,
        thread,
        ..
    } = &err
    else {
        panic!("expected a simulator report, got {err}");
    };
    assert_eq!(*kernel, "half_barrier");
    assert!(
        problem.contains("only part of the block") && problem.contains("16 threads wait"),
        "{err}"
    );
    assert!(
        problem.contains(berth_tests::BROKEN.path),
        "names the barrier: {err}"
    );
    assert!(thread[0] < 16, "{err}");
    println!("reported: {err}");
    still_works(&gpu);
}

#[test]
fn a_block_split_between_two_barriers_is_reported() {
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(64).unwrap();
    let err = split_barrier(&gpu, Grid::new(2, 32), &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::Simulator {
        kernel,
        problem,
        thread,
        ..
    } = &err
    else {
        panic!("expected a simulator report, got {err}");
    };
    assert_eq!(*kernel, "split_barrier");
    assert!(problem.contains("different barriers"), "{err}");
    assert!(
        problem.matches(berth_tests::BROKEN.path).count() == 2,
        "names both barriers: {err}"
    );
    assert_eq!(
        thread[0], 16,
        "the first thread at the other barrier: {err}"
    );
}

#[test]
fn a_barrier_in_a_helper_function_is_honoured() {
    // The body does not name sync_threads; its PTX shows the barrier through the helper.
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(64).unwrap();
    hidden_barrier(&gpu, Grid::new(2, 32), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 2));
}

/// A coherent system (Grace Hopper: pageable memory read through the host's page tables),
/// simulated by its attribute profile: `#[pinned_async]` arguments, pipelined launches and
/// `#[auto]` arguments are all passed as host memory directly — no staging, no copies — and
/// give the same results.
#[test]
fn a_coherent_profile_passes_host_memory_directly() {
    use berth::PipelineOptions;
    use berth::placement::{Choice, DeviceProfile, decide};
    use berth_examples::{affine_one_pipelined, gather_auto, saxpy_pinned};
    use berth_tests::affine_host;
    let gpu = sim();
    let coherent = DeviceProfile {
        pageable_memory_access: true,
        uses_host_page_tables: true,
    };
    assert!(gpu.set_device_profile(coherent));
    assert!(
        !gpu.set_device_profile(DeviceProfile::default()),
        "set once"
    );
    assert_eq!(gpu.device_profile().unwrap(), coherent);

    let n = 10_001;
    let (x, y) = (random_f32(n), random_f32(n));
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_from(&y).unwrap();
    saxpy_pinned(&gpu, Grid::cover(n), 2.0, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &saxpy_host(2.0, &x, &y)[..]);

    let mut out = gpu.pinned_from(&vec![f32::NAN; n]).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(4096 * 4),
        streams: Some(2),
        ..Default::default()
    };
    let stats = affine_one_pipelined(&gpu, opts, -1.5, &px, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&out[..], &affine_host(-1.5, &x)[..]);
    assert!(stats.chunks > 1 && stats.staging_bytes == 0, "{stats:?}");

    let table = gpu.mapped_from(&x).unwrap();
    let idx: Vec<u32> = random_u32(777).iter().map(|i| i % n as u32).collect();
    let didx = gpu.upload(&idx).unwrap();
    let mut got = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    let d = decide(
        &gpu.link_costs(),
        &coherent,
        &berth::Touch::All.access(n, 4),
    );
    assert_eq!(d.choice, Choice::Direct);
    gather_auto(
        &gpu,
        Grid::cover(idx.len()),
        berth::Touch::All,
        &table,
        &didx,
        &mut got,
    )
    .unwrap()
    .wait()
    .unwrap();
    let want: Vec<f32> = idx.iter().map(|&i| x[i as usize]).collect();
    assert_eq!(got.to_vec().unwrap(), want);

    // Nothing was staged: every launch used the host memory itself.
    let pool = gpu.pool_stats();
    assert_eq!(pool.device_allocations + pool.device_reuses, 0, "{pool:?}");
}

/// A pipelined launch whose chunks' blocks exceed the device's limits is refused before it
/// queues anything or writes its outputs, on the default profile and on a coherent one (where
/// the outputs are written in place, zeroed first by a run that goes ahead).
#[test]
fn a_refused_pipelined_launch_leaves_its_outputs_unchanged() {
    use berth::placement::DeviceProfile;
    use berth::{DeviceLimits, PipelineOptions};
    use berth_fixtures::language::scale_pinned_pipelined;
    for coherent in [false, true] {
        let gpu = sim();
        assert!(gpu.set_device_limits(DeviceLimits {
            threads_per_block: 256,
            ..DeviceLimits::H200
        }));
        if coherent {
            assert!(gpu.set_device_profile(DeviceProfile {
                pageable_memory_access: true,
                uses_host_page_tables: true,
            }));
        }
        let n = 10_000;
        let x = gpu.pinned_from(&random_f32(n)).unwrap();
        let poison = random_f32(n);
        let mut y = gpu.pinned_from(&poison).unwrap();
        let opts = PipelineOptions {
            chunk_bytes: Some(4096 * 4),
            streams: Some(2),
            threads_per_block: 512,
            ..Default::default()
        };
        let e = scale_pinned_pipelined::<f32>(&gpu, opts, 2.0, &x, &mut y)
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("at most 256 threads per block")),
            "coherent {coherent}: {e}"
        );
        let same = y
            .iter()
            .zip(&poison)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "coherent {coherent}: the refused launch changed its output"
        );
    }
}

/// Runs a broken warp kernel over two blocks of 64 threads; its simulator report.
fn warp_report(
    launch: impl FnOnce(&Gpu, &mut berth::DeviceBuffer<u32>) -> berth::Result<()>,
) -> (Gpu, Error) {
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(128).unwrap();
    let err = launch(&gpu, &mut out).unwrap_err();
    assert!(matches!(err, Error::Simulator { .. }), "{err}");
    println!("reported: {err}");
    (gpu, err)
}

/// The 1-based line of `needle` in `fixtures/src/broken.rs`.
fn warp_line(needle: &str) -> u32 {
    berth_tests::BROKEN.line(needle)
}

#[test]
fn a_warp_call_naming_a_lane_that_returned_is_reported() {
    use berth_fixtures::broken::shfl_after_return;
    let (gpu, err) = warp_report(|gpu, out| shfl_after_return(gpu, Grid::new(2, 64), out)?.wait());
    let Error::Simulator {
        kernel,
        thread,
        problem,
        ..
    } = &err
    else {
        unreachable!()
    };
    // Both blocks fail alike; whichever worker reports first, lane 0 names lane 16.
    assert_eq!((*kernel, *thread), ("shfl_after_return", [0, 0, 0]));
    let at = format!(
        "warp::shfl_xor() at fixtures/src/broken.rs:{}",
        warp_line("let v = warp::shfl_xor(FULL_MASK, i.get() as u32, 1);")
    );
    assert!(problem.contains(&at), "{err}");
    assert!(
        problem.contains("names lane 16, which has returned"),
        "{err}"
    );
    still_works(&gpu);
}

#[test]
fn a_shuffle_reading_a_lane_outside_its_mask_is_reported() {
    use berth_fixtures::broken::shfl_outside_mask;
    let (gpu, err) = warp_report(|gpu, out| shfl_outside_mask(gpu, Grid::new(2, 64), out)?.wait());
    let Error::Simulator {
        thread, problem, ..
    } = &err
    else {
        unreachable!()
    };
    assert_eq!(thread[0], 0, "{err}");
    assert!(
        problem.contains("lane 0 reads lane 16, which is not in its mask 0x0000ffff"),
        "{err}"
    );
    let line = warp_line("warp::shfl_xor(0x0000_ffff, i.get() as u32, 16)");
    assert!(
        problem.contains(&format!("fixtures/src/broken.rs:{line}")),
        "{err}"
    );
    still_works(&gpu);
}

#[test]
fn lanes_at_different_warp_calls_are_reported() {
    use berth_fixtures::broken::divergent_warp_calls;
    let (gpu, err) =
        warp_report(|gpu, out| divergent_warp_calls(gpu, Grid::new(2, 64), out)?.wait());
    let Error::Simulator { problem, .. } = &err else {
        unreachable!()
    };
    assert!(
        problem.contains("warp::shfl_xor()") && problem.contains("waits at warp::ballot()"),
        "{err}"
    );
    still_works(&gpu);
}

#[test]
fn an_mma_without_the_whole_warp_is_reported_where_it_is_called() {
    use berth_fixtures::broken::mma_half_warp;
    let (gpu, err) = warp_report(|gpu, out| mma_half_warp(gpu, Grid::new(2, 64), out)?.wait());
    let Error::Simulator { problem, .. } = &err else {
        unreachable!()
    };
    let at = format!(
        "mma::mma() at fixtures/src/broken.rs:{}",
        warp_line("let d = unsafe { mma::mma(a, b, FragC::zero()) };")
    );
    assert!(problem.contains(&at), "{err}");
    assert!(problem.contains("which has returned"), "{err}");
    still_works(&gpu);
}

/// A tensor-core call (`op`, at the fixture line holding `call`) in a block of 48 threads,
/// whose second warp is partial: reported as a warp-wide operation, where it is called.
fn a_partial_warp_call_is_reported(
    launch: impl FnOnce(&Gpu, &mut berth::DeviceBuffer<u32>) -> berth::Result<()>,
    op: &str,
    call: &str,
) {
    let (gpu, err) = warp_report(launch);
    let Error::Simulator { problem, .. } = &err else {
        unreachable!()
    };
    assert!(
        problem.contains(&format!("mma::{op}() in lane 0 is a warp-wide operation")),
        "{err}"
    );
    assert!(
        problem.contains(&format!("fixtures/src/broken.rs:{}", warp_line(call))),
        "{err}"
    );
    still_works(&gpu);
}

#[test]
fn an_ldmatrix_in_a_partial_warp_is_reported_where_it_is_called() {
    use berth_fixtures::broken::ldmatrix_partial_warp;
    a_partial_warp_call_is_reported(
        |gpu, out| ldmatrix_partial_warp(gpu, Grid::new(1, 48), out)?.wait(),
        "ldmatrix",
        "let a = unsafe { FragA::ldmatrix(tile, 16, 0, 0) };",
    );
}

#[test]
fn an_stmatrix_in_a_partial_warp_is_reported_where_it_is_called() {
    use berth_fixtures::broken::stmatrix_partial_warp;
    a_partial_warp_call_is_reported(
        |gpu, out| stmatrix_partial_warp(gpu, Grid::new(1, 48), out)?.wait(),
        "stmatrix",
        "unsafe { FragC::zero().stmatrix(tile, 8, 0, 0) };",
    );
}

#[test]
fn a_shuffle_in_a_helper_function_is_honoured() {
    // The body names no warp operation; its PTX shows `shfl.sync` through the helper.
    use berth_fixtures::broken::hidden_shuffle;
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(100).unwrap();
    hidden_shuffle(&gpu, Grid::new(2, 64), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<u32> = (0..100).map(|i| i ^ 1).collect();
    assert_eq!(out.to_vec().unwrap(), want);
}

/// A failure poisons the simulated context as a fault poisons a GPU's: work queued behind the
/// failed launch on its stream (a launch and a copy) does not report `Ok` for work that never
/// ran, and its outputs are left as they were.
#[test]
fn work_queued_behind_a_failed_launch_reports_the_fault_not_ok() {
    let gpu = sim();
    let n = 1000;
    let gate = gpu.signals(1).unwrap();
    let mut held = gpu.alloc_zeroed::<u32>(n).unwrap();
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let (xs, ys) = (random_f32(n), random_f32(n));
    let dx = gpu.upload(&xs).unwrap();
    let mut dy = gpu.upload(&ys).unwrap();
    let host = gpu.pinned_from(&random_f32(n)).unwrap();
    let mut dz = gpu.upload(&vec![-7.0f32; n]).unwrap();
    // Everything is queued behind a gated kernel, so it is queued before the failure.
    let first =
        berth_fixtures::gated::gated_fill(&gpu, Grid::cover(n), 1, &gate, &mut held).unwrap();
    let failing = unchecked_copy(&gpu, Grid::cover(n), &x, &mut out).unwrap();
    let unrelated = saxpy(&gpu, Grid::cover(n), 2.0, &dx, &mut dy).unwrap();
    let copy = dz.copy_from_pinned(&gpu, &host).unwrap();
    gate.store(0, 1);
    // A wait is a synchronise of the stream, as on a GPU: the failed launch's, first.
    let err = failing.wait().unwrap_err();
    assert!(matches!(err, Error::KernelPanic { .. }), "{err}");
    for (what, r) in [("launch", unrelated.wait()), ("copy", copy.wait())] {
        let err = r.expect_err(what);
        assert!(
            matches!(&err, Error::ContextLost(why) if why.contains("unchecked_copy")),
            "{what}: expected the context lost to `unchecked_copy`, got {err}"
        );
    }
    drop(first);
    assert!(gpu.is_lost());
    // A read of the outputs is refused too, as on a GPU.
    assert!(dy.to_vec().unwrap_err().is_context_lost());
    still_works(&gpu);
}

/// An operation never reports another's failure: a synchronous upload made once a launch on
/// another stream failed reports the context lost to that launch, and the failed launch's own
/// wait still gets its panic.
#[test]
fn an_unrelated_operation_does_not_take_a_failed_launchs_report() {
    let gpu = sim();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let stream = gpu.stream().unwrap();
    let failing = unchecked_copy(&stream, Grid::cover(n), &x, &mut out).unwrap();
    let start = std::time::Instant::now();
    while !gpu.is_lost() {
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let err = gpu.upload(&[1u32, 2, 3]).unwrap_err();
    assert!(
        matches!(&err, Error::ContextLost(why) if why.contains("unchecked_copy")),
        "{err}"
    );
    let err = gpu.synchronize().unwrap_err();
    assert!(
        matches!(err, Error::KernelPanic { .. }),
        "a whole-context synchronise covers the failed launch, which nobody waited for yet: {err}"
    );
    // Taken once: the launch's own wait now reports the context lost to it.
    let err = failing.wait().unwrap_err();
    assert!(matches!(err, Error::ContextLost(_)), "{err}");
}

/// The failed launch's own wait gets its panic even after other operations saw the fault.
#[test]
fn a_failed_launchs_wait_gets_its_own_panic_after_others_saw_the_fault() {
    let gpu = sim();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let stream = gpu.stream().unwrap();
    let failing = unchecked_copy(&stream, Grid::cover(n), &x, &mut out).unwrap();
    let start = std::time::Instant::now();
    while !gpu.is_lost() {
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(gpu.upload(&[1u32]).unwrap_err().is_context_lost());
    let err = failing.wait().unwrap_err();
    let Error::KernelPanic { kernel, .. } = &err else {
        panic!("expected the launch's own panic, got {err}");
    };
    assert_eq!(kernel, "unchecked_copy");
}

/// Chunks of 4096 elements (16 blocks of 256 threads each) over `streams` streams.
fn chunks_of_16_blocks(streams: usize) -> berth::PipelineOptions {
    berth::PipelineOptions {
        chunk_bytes: Some(4096 * 4),
        streams: Some(streams),
        threads_per_block: 256,
        ..Default::default()
    }
}

/// The simulator on the default profile (staging buffers, reused by the chunks of a stream) or
/// a coherent one (each chunk passed its window of the host memory).
fn sim_on(coherent: bool) -> Gpu {
    let gpu = sim();
    if coherent {
        assert!(gpu.set_device_profile(berth::placement::DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: true,
        }));
    }
    gpu
}

/// The chunks of a pipelined launch are checked as one launch: block `b` of one chunk and
/// block `b` of another are different blocks, so a block-scoped atomic that is right within
/// one launch (each block its own slot) races between chunks — whatever streams the plan
/// gives them, on either profile. The report names both chunks, blocks and threads.
#[test]
fn blocks_of_two_chunks_on_one_element_at_block_scope_race_naming_both_chunks() {
    use berth_fixtures::chunks::count_blocks_block_scoped_pipelined;
    let line = berth_tests::line_in(
        "fixtures/src/chunks.rs",
        include_str!("../../fixtures/src/chunks.rs"),
        "unsafe { per_block.atomic_add_scoped_unchecked(b, 1, Scope::Block) };",
    );
    let site = format!("updated it atomically with Scope::Block at fixtures/src/chunks.rs:{line}:");
    for (coherent, streams) in [(false, 2), (false, 1), (true, 3)] {
        let gpu = sim_on(coherent);
        let n = 3 * 4096 + 1000;
        let x = gpu.pinned_from(&random_u32(n)).unwrap();
        let mut y = gpu.pinned_from(&vec![0u32; n]).unwrap();
        let mut per_block = gpu.alloc_zeroed::<u32>(16).unwrap();
        let opts = chunks_of_16_blocks(streams);
        let err = count_blocks_block_scoped_pipelined(&gpu, opts, &x, &mut y, &mut per_block)
            .unwrap()
            .wait()
            .unwrap_err();
        let Error::PipelineChunk { kernel, source, .. } = &err else {
            panic!("expected the pipeline's report, got {err}");
        };
        assert_eq!(*kernel, "count_blocks_block_scoped");
        let Error::Simulator {
            kernel,
            block,
            thread,
            problem,
        } = source.as_ref()
        else {
            panic!("expected a simulator report, got {source}");
        };
        println!("reported: {problem}");
        let what = format!("coherent {coherent}, {streams} streams: {problem}");
        assert_eq!(
            (*kernel, *block, *thread),
            ("count_blocks_block_scoped", [0, 0, 0], [0, 0, 0]),
            "{what}"
        );
        for part in [
            "a data race on element 0 of `per_block` (global memory), between chunks of a pipelined launch",
            "a block of one chunk and a block of another are different blocks",
            "use Scope::Device for an element that the chunks share",
        ] {
            assert!(problem.contains(part), "`{part}` missing: {what}");
        }
        assert_eq!(problem.matches(&site).count(), 2, "{what}");
        let chunks: Vec<usize> = problem
            .split("thread (0, 0, 0) of block (0, 0, 0) of chunk ")
            .skip(1)
            .map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap()
            })
            .collect();
        assert!(
            chunks.len() == 2 && chunks[0] != chunks[1] && chunks.iter().all(|&c| c < 4),
            "two different chunks: {what}"
        );
        still_works(&gpu);
    }
}

/// The corrected kernel, which updates the element the chunks share at device scope, passes on
/// either profile, and every chunk's threads are counted: the check between chunks reports no
/// correct kernel (the chunks' own pieces of the bulk arguments, staging reused by the chunks
/// of a stream included).
#[test]
fn chunks_sharing_an_element_at_device_scope_pass_and_count_every_thread() {
    use berth_fixtures::chunks::count_blocks_device_scoped_pipelined;
    for coherent in [false, true] {
        let gpu = sim_on(coherent);
        let n = 3 * 4096 + 1000;
        let xs = random_u32(n);
        let x = gpu.pinned_from(&xs).unwrap();
        let mut y = gpu.pinned_from(&vec![0u32; n]).unwrap();
        let mut per_block = gpu.alloc_zeroed::<u32>(16).unwrap();
        let stats = count_blocks_device_scoped_pipelined(
            &gpu,
            chunks_of_16_blocks(2),
            &x,
            &mut y,
            &mut per_block,
        )
        .unwrap()
        .wait()
        .unwrap();
        assert_eq!(
            (stats.chunks, stats.chunk_elems),
            (4, 4096),
            "coherent {coherent}"
        );
        assert_eq!(&y[..], &xs[..], "coherent {coherent}");
        let mut want = vec![0u32; 16];
        for c in 0..stats.chunks {
            let len = stats.chunk_elems.min(n - c * stats.chunk_elems);
            for (b, w) in want.iter_mut().enumerate() {
                *w += len.saturating_sub(b * 256).min(256) as u32;
            }
        }
        assert_eq!(per_block.to_vec().unwrap(), want, "coherent {coherent}");
        assert!(!gpu.is_lost());
    }
}

/// The two ways a tile kernel meets a block wider than its tile: `rotate_plain` checks the
/// block's shape and fails with its message; `rotate_unguarded` fails at the tile's bounds
/// check. (Both compile without the tile's checks only where the shape is known: the checks a
/// kernel keeps are the ones that catch this.) On blocks of 32 both rotate each block.
#[test]
fn a_block_wider_than_the_tile_fails_at_the_shape_check_or_the_tiles_bounds_check() {
    let n = 96;
    let x = random_u32(n);
    let want: Vec<u32> = (0..n).map(|i| x[i / 32 * 32 + 31 - i % 32]).collect();
    for unguarded in [false, true] {
        let gpu = sim();
        let dx = gpu.upload(&x).unwrap();
        let mut out = gpu.upload(&vec![u32::MAX; n]).unwrap();
        let grid = Grid::new(3, 32);
        let done = if unguarded {
            rotate_unguarded(&gpu, grid, &dx, &mut out)
        } else {
            rotate_plain(&gpu, grid, &dx, &mut out)
        };
        done.unwrap().wait().unwrap();
        assert_eq!(out.to_vec().unwrap(), want, "unguarded: {unguarded}");
        let grid = Grid::new(2, 64);
        let err = if unguarded {
            rotate_unguarded(&gpu, grid, &dx, &mut out)
        } else {
            rotate_plain(&gpu, grid, &dx, &mut out)
        }
        .unwrap()
        .wait()
        .unwrap_err();
        let Error::KernelPanic { report, .. } = &err else {
            panic!("expected KernelPanic, got {err}");
        };
        let message = if unguarded {
            "index out of bounds: the len is 32 but the index is 32"
        } else {
            "rotate_plain: the block must be 32 threads along x"
        };
        assert!(report.message.starts_with(message), "{report}");
        still_works(&gpu);
    }
}
