//! What only the CPU simulator does: picking it, and the checks it makes that a GPU cannot —
//! a located report of a panicking thread, shared-memory races, a barrier reached by part of
//! a block — on deliberately broken kernels. (The example kernels' results on the simulator
//! are checked by `tests/gpu.rs`, the same tests the GPU runs.)

use berth::{Backend, Error, Gpu, Grid};
use berth_examples::broken::{half_barrier, hidden_barrier, shared_race, split_barrier};
use berth_examples::{block_sum, divide, saxpy, unchecked_copy};
use berth_tests::{random_f32, random_u32, saxpy_host};

fn sim() -> Gpu {
    let gpu = Gpu::simulator();
    assert_eq!(gpu.backend(), Backend::Simulator);
    assert!(gpu.name().contains("CPU simulator"), "{}", gpu.name());
    gpu
}

/// The simulator stays usable after a failed launch.
fn still_works(gpu: &Gpu) {
    let (x, y) = (random_f32(3000), random_f32(3000));
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y).unwrap();
    saxpy(gpu, Grid::cover(3000), 2.0, &dx, &mut dy)
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
            "examples/src/lib.rs",
            berth_tests::example_line("out[i] = x[i];")
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
    assert_eq!(report.file, "examples/src/lib.rs");
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
    let gpu = sim();
    let x = gpu.upload(&vec![1.0f32; 1024]).unwrap();
    for threads in [berth::Dim3::from((16, 16)), berth::Dim3::from(96)] {
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
    }
    still_works(&gpu);
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
        problem.contains("examples/src/lib.rs"),
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
        problem.matches("examples/src/lib.rs").count() == 2,
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

/// The 1-based line of `needle` in `examples/src/warp_ops.rs`.
fn warp_line(needle: &str) -> usize {
    include_str!("../../examples/src/warp_ops.rs")
        .lines()
        .position(|l| l.contains(needle))
        .expect("in warp_ops.rs")
        + 1
}

#[test]
fn a_warp_call_naming_a_lane_that_returned_is_reported() {
    use berth_examples::warp_ops::broken::shfl_after_return;
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
        "warp::shfl_xor() at examples/src/warp_ops.rs:{}",
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
    use berth_examples::warp_ops::broken::shfl_outside_mask;
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
        problem.contains(&format!("examples/src/warp_ops.rs:{line}")),
        "{err}"
    );
    still_works(&gpu);
}

#[test]
fn lanes_at_different_warp_calls_are_reported() {
    use berth_examples::warp_ops::broken::divergent_warp_calls;
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
fn a_shuffle_in_a_helper_function_is_honoured() {
    // The body names no warp operation; its PTX shows `shfl.sync` through the helper.
    use berth_examples::warp_ops::broken::hidden_shuffle;
    let gpu = sim();
    let mut out = gpu.alloc_zeroed::<u32>(100).unwrap();
    hidden_shuffle(&gpu, Grid::new(2, 64), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<u32> = (0..100).map(|i| i ^ 1).collect();
    assert_eq!(out.to_vec().unwrap(), want);
}
