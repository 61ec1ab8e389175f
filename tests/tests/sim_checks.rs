//! The simulator's checks of what compute-sanitizer cannot see, on deliberately broken
//! kernels (`examples/src/sim_checks.rs`): races on global and mapped memory within a block
//! and between blocks (blocks sharing an element through block-scoped atomics among them),
//! shared-memory races (an atomic meeting a plain access among them) named by array and
//! element, reads of shared memory nobody wrote, and launches over the device's limits. (An
//! atomic meeting a plain access of global memory cannot be written: an `#[atomic]` argument
//! is reached only through atomics.)
//! Each report must name the kernel, the element and both source lines; each kernel's correct
//! version must pass.

use berth::{DeviceLimits, Error, Gpu, Grid};
use berth_fixtures::sim_checks::*;

/// `fixtures/src/sim_checks.rs:LINE:` of the line containing `needle`.
fn at(needle: &str) -> String {
    let src = berth_tests::SIM_CHECKS;
    format!("{}:{}:", src.path, src.line(needle))
}

/// The simulator's report of a failed launch: (kernel, block, thread, problem).
fn report(r: berth::Result<()>) -> (&'static str, [u32; 3], [u32; 3], String) {
    match r {
        Err(Error::Simulator {
            kernel,
            block,
            thread,
            problem,
        }) => {
            println!("reported: {problem}");
            (kernel, block, thread, problem)
        }
        other => panic!("expected a simulator report, got {other:?}"),
    }
}

fn has(problem: &str, parts: &[&str]) {
    for p in parts {
        assert!(problem.contains(p), "`{p}` missing from: {problem}");
    }
}

#[test]
fn threads_of_a_block_writing_one_element_are_a_located_race() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(8).unwrap();
    let r = all_write_first(&gpu, Grid::new(1, 32), &mut out)
        .unwrap()
        .wait();
    let (kernel, block, _, problem) = report(r);
    let line = at("unsafe { *out.get_unchecked_mut(0) = thread::global_x()");
    assert_eq!((kernel, block), ("all_write_first", [0, 0, 0]));
    has(
        &problem,
        &[
            "data race on element 0 of `out` (global memory), within one block: threads (",
            "both wrote it",
            "with no sync_threads() between them",
            &line,
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(8).unwrap();
    // The correct version passes, on one block and on many.
    for grid in [Grid::new(1, 32), Grid::cover(8)] {
        each_writes_own(&gpu, grid, &mut out)
            .unwrap()
            .wait()
            .unwrap();
    }
    assert_eq!(out.to_vec().unwrap(), (0..8).collect::<Vec<u32>>());
}

#[test]
fn blocks_writing_one_element_are_a_race_naming_both_blocks() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(8).unwrap();
    // One thread per block: only blocks can race.
    let r = all_write_first(&gpu, Grid::new(4, 1), &mut out)
        .unwrap()
        .wait();
    let (kernel, _, thread, problem) = report(r);
    assert_eq!((kernel, thread), ("all_write_first", [0, 0, 0]));
    has(
        &problem,
        &[
            "data race on element 0 of `out` (global memory), between blocks",
            "thread (0, 0, 0) of block (",
            "wrote it at",
            &at("unsafe { *out.get_unchecked_mut(0) = thread::global_x()"),
        ],
    );
    let blocks = problem.matches("of block (").count();
    assert_eq!(blocks, 2, "{problem}");
}

#[test]
fn blocks_sharing_an_element_through_block_scoped_atomics_race_naming_both_blocks() {
    let gpu = Gpu::simulator();
    let mut count = gpu.alloc_zeroed::<u32>(4).unwrap();
    let r = block_scoped_shared_counter(&gpu, Grid::new(4, 32), &mut count)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "block_scoped_shared_counter");
    let line = at("unsafe { count.atomic_add_scoped_unchecked(0, 1, Scope::Block) };");
    has(
        &problem,
        &[
            "data race on element 0 of `count` (global memory), between blocks",
            "updated it atomically with Scope::Block at",
            "atomic only with respect to the threads of its own block",
            "use Scope::Device for an element that blocks share",
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    assert_eq!(problem.matches("of block (").count(), 2, "{problem}");
    assert_eq!(problem.matches(&line).count(), 2, "{problem}");
    // Within one block, block scope is enough.
    let mut one = gpu.alloc_zeroed::<u32>(1).unwrap();
    block_scoped_shared_counter(&gpu, Grid::new(1, 64), &mut one)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(one.to_vec().unwrap(), [64]);
}

#[test]
fn block_scope_on_each_blocks_own_element_and_device_scope_on_a_shared_one_pass() {
    let gpu = Gpu::simulator();
    let mut count = gpu.alloc_zeroed::<u32>(4).unwrap();
    block_scoped_own_counter(&gpu, Grid::new(4, 32), &mut count)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(count.to_vec().unwrap(), [32; 4]);
    let mut total = gpu.alloc_zeroed::<u32>(1).unwrap();
    device_scoped_shared_counter(&gpu, Grid::new(4, 32), &mut total)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(total.to_vec().unwrap(), [128]);
}

#[test]
fn overlapping_matrix_tiles_are_a_located_race() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(2 * 16).unwrap();
    let r = matrix_patches(&gpu, Grid::new(1, 15), 1, &mut out)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "matrix_patches");
    has(
        &problem,
        &[
            "data race on element ",
            "of `out` (global memory), within one block",
            "both wrote it",
            &at("unsafe { patch.write(r, c, x as u32) };"),
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(2 * 16).unwrap();
    // Disjoint patches pass, and land where they are meant to.
    matrix_patches(&gpu, Grid::new(1, 8), 2, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<u32> = (0..2).flat_map(|_| (0..16).map(|c| c / 2)).collect();
    assert_eq!(out.to_vec().unwrap(), want);
}

#[test]
fn a_write_and_another_threads_read_of_it_race_unless_a_barrier_separates_them() {
    let gpu = Gpu::simulator();
    let n = 64;
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut seen = gpu.alloc_zeroed::<u32>(n).unwrap();
    let r = read_neighbour_unsynced(&gpu, Grid::new(2, 32), &mut out, &mut seen)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "read_neighbour_unsynced");
    has(
        &problem,
        &[
            "of `out` (global memory), within one block",
            "wrote it at",
            "read it at",
            &at("out[o] = i as u32 + 1;"),
            &at("seen[o] = unsafe { *out.get_unchecked(i ^ 1) };"),
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut seen = gpu.alloc_zeroed::<u32>(n).unwrap();
    read_neighbour_synced(&gpu, Grid::new(2, 32), &mut out, &mut seen)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<u32> = (0..n as u32).map(|i| (i ^ 1) + 1).collect();
    assert_eq!(seen.to_vec().unwrap(), want);
}

#[test]
fn a_race_in_mapped_memory_is_reported_as_one() {
    let gpu = Gpu::simulator();
    let mut out = gpu.mapped_zeroed::<u32>(4).unwrap();
    let r = mapped_all_write_first(&gpu, Grid::new(2, 16), &mut out)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "mapped_all_write_first");
    has(
        &problem,
        &[
            "element 0 of `out` (mapped host memory)",
            "both wrote it",
            &at("unsafe { *out.get_unchecked_mut(0) = thread::idx_x() as u32 };"),
        ],
    );
}

#[test]
fn a_shared_race_names_the_array_the_element_and_both_lines() {
    use berth_fixtures::broken::shared_race;
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(4).unwrap();
    let r = shared_race(&gpu, Grid::new(4, 32), &mut out)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "shared_race");
    let broken = berth_tests::BROKEN;
    let decl = broken.line("shared_array!(RACE_TILE: [u32; 32])");
    let store = broken.line("unsafe { tile.write(0, thread::idx_x() as u32) };");
    has(
        &problem,
        &[
            "data race on shared memory between two barriers",
            &format!(
                "`RACE_TILE[0]` (the shared_array! at {}:{decl}:",
                broken.path
            ),
            "both wrote it",
            &format!("at {}:{store}:", broken.path),
        ],
    );
}

#[test]
fn one_writer_then_a_barrier_is_not_a_shared_race() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(4).unwrap();
    shared_one_writer(&gpu, Grid::new(4, 32), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), [32; 4]);
    // Any block shape: the writer is the block's first thread.
    let mut out = gpu.alloc_zeroed::<u32>(2).unwrap();
    shared_one_writer(&gpu, Grid::new(2, (8, 4, 2)), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), [64; 2]);
}

#[test]
fn an_atomic_and_a_plain_write_of_one_shared_element_race() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(2).unwrap();
    let r = shared_flag_mixed(&gpu, Grid::new(2, 32), &mut out)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "shared_flag_mixed");
    has(
        &problem,
        &[
            "`MIXED_FLAG[0]`",
            "wrote it at",
            "updated it atomically at",
            &at("unsafe { flag.write(0, 1) };"),
            &at("unsafe { flag.atomic_add(0, 1) };"),
        ],
    );
}

#[test]
fn shared_bins_nobody_cleared_are_reported_and_cleared_ones_pass() {
    let gpu = Gpu::simulator();
    let n = 1000;
    let xs: Vec<u32> = (0..n).map(|i| i * 7 + 3).collect();
    let x = gpu.upload(&xs).unwrap();
    let mut hist = gpu.alloc_zeroed::<u32>(16).unwrap();
    let r = histogram_uncleared(&gpu, Grid::cover(n as usize), &x, &mut hist)
        .unwrap()
        .wait();
    let (kernel, _, _, problem) = report(r);
    assert_eq!(kernel, "histogram_uncleared");
    has(
        &problem,
        &[
            "an atomic update of shared memory that no thread of the block has written",
            "`UNCLEARED_BINS[",
            &at("unsafe { bins.atomic_add(x[i] as usize % 16, 1) };"),
            "0xff",
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    let x = gpu.upload(&xs).unwrap();
    let mut hist = gpu.alloc_zeroed::<u32>(16).unwrap();
    histogram_cleared(&gpu, Grid::cover(n as usize), &x, &mut hist)
        .unwrap()
        .wait()
        .unwrap();
    let mut want = [0u32; 16];
    xs.iter().for_each(|v| want[*v as usize % 16] += 1);
    assert_eq!(hist.to_vec().unwrap(), want);
}

#[test]
fn an_unwritten_element_of_dynamic_shared_memory_is_reported() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(2).unwrap();
    let grid = Grid::new(2, 32).shared_bytes(33 * 4);
    let r = dynamic_read_back(&gpu, grid, 1, &mut out).unwrap().wait();
    let (kernel, _, thread, problem) = report(r);
    assert_eq!((kernel, thread), ("dynamic_read_back", [0, 0, 0]));
    has(
        &problem,
        &[
            "a read of shared memory that no thread of the block has written",
            "element 32 of the dynamic shared array",
            &at("*slot = unsafe { tile.read(k) };"),
        ],
    );
    // The report stopped the simulated context, as a fault stops a GPU's: the correct version
    // runs on a fresh one.
    let gpu = gpu.recover().unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(2).unwrap();
    dynamic_read_back(&gpu, grid, 0, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), [32, 32]);
}

#[test]
fn launches_over_the_h200s_limits_are_refused_when_queued() {
    let gpu = Gpu::simulator();
    assert_eq!(gpu.device_limits().unwrap(), DeviceLimits::H200);
    let mut out = gpu.alloc_zeroed::<u32>(1).unwrap();
    // 1 MiB of dynamic shared memory: refused at the launch, as the GPU's driver refuses it.
    let e = dynamic_read_back(&gpu, Grid::new(1, 32).shared_bytes(1 << 20), 0, &mut out)
        .map(|_| ())
        .unwrap_err();
    let Error::InvalidLaunch { kernel, reason } = &e else {
        panic!("expected InvalidLaunch, got {e}");
    };
    assert_eq!(*kernel, "dynamic_read_back");
    has(
        reason,
        &["1048576 bytes of dynamic shared memory", "232448 bytes"],
    );
    // The opt-in maximum itself is fine.
    dynamic_read_back(&gpu, Grid::new(1, 32).shared_bytes(227 * 1024), 0, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), [32]);
    // 2048 threads per block.
    let e = each_writes_own(&gpu, Grid::new(1, 2048), &mut out)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("at most 1024")),
        "{e}"
    );
}

#[test]
fn the_simulator_enforces_the_limits_it_is_given() {
    let gpu = Gpu::simulator();
    let small = DeviceLimits {
        threads_per_block: 512,
        shared_per_block_optin: 64 * 1024,
        ..DeviceLimits::H200
    };
    assert!(gpu.set_device_limits(small));
    assert!(!gpu.set_device_limits(DeviceLimits::H200), "set once");
    let mut out = gpu.alloc_zeroed::<u32>(1024).unwrap();
    let e = each_writes_own(&gpu, Grid::new(1, 1024), &mut out)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("at most 512 threads per block")),
        "{e}"
    );
    let e = dynamic_read_back(&gpu, Grid::new(1, 32).shared_bytes(100 * 1024), 0, &mut out)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("65536 bytes")),
        "{e}"
    );
    each_writes_own(&gpu, Grid::new(2, 512), &mut out)
        .unwrap()
        .wait()
        .unwrap();
}

#[test]
fn two_shared_arrays_of_one_name_in_one_scope_are_two_arrays() {
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(100).unwrap();
    twin_arrays_in_one_scope(&gpu, Grid::new(2, 64), &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 3));
}

/// Two threads of one launch taking the kernel's side of a mailbox (a worker picked by
/// `global_x() == 0` on a grid of two rows) are a report naming both threads, the mailbox and
/// the line; the host's messages are still all answered (by the first thread).
#[test]
fn two_threads_on_one_side_of_a_mailbox_are_a_report_naming_both() {
    use std::time::Duration;
    let gpu = Gpu::simulator();
    let t = Duration::from_secs(20);
    let inbox = gpu.inbox::<u32>(4).unwrap();
    let outbox = gpu.outbox::<u32>(4).unwrap();
    let stream = gpu.stream().unwrap();
    let run = relay_per_row(&stream, Grid::new((1, 2), 1), 3, 20_000, &inbox, &outbox).unwrap();
    for n in 0..3u32 {
        inbox.send(10 * n, t).unwrap();
        assert_eq!(outbox.recv(t).unwrap(), 10 * n + 1, "message {n}");
    }
    let (kernel, block, thread, problem) = report(run.wait());
    let line = at("let Some(v) = (unsafe { inbox.recv(n, patience) })");
    assert_eq!(kernel, "relay_per_row");
    assert!(block == [0, 0, 0] || block == [0, 1, 0], "{block:?}");
    assert_eq!(thread, [0, 0, 0]);
    has(
        &problem,
        &[
            "two threads of the launch take one side of a mailbox",
            "thread (0, 0, 0) of block (0, 0, 0)",
            "thread (0, 0, 0) of block (0, 1, 0)",
            "received from `inbox` (mapped host memory) at ",
            &line,
            "thread::index() != 0",
        ],
    );
}

/// The correct worker, `relay` (picked by `thread::index() == 0`), serves a mailbox alone on
/// a grid of two rows and two layers of 2×2 blocks: one thread of the whole launch.
#[test]
fn a_worker_picked_by_its_own_index_is_one_thread_of_any_grid() {
    use berth_fixtures::signals::relay;
    use std::time::Duration;
    let gpu = Gpu::simulator();
    let t = Duration::from_secs(20);
    let inbox = gpu.inbox::<u32>(4).unwrap();
    let outbox = gpu.outbox::<u32>(4).unwrap();
    let ctl = gpu.signals(1).unwrap();
    let stream = gpu.stream().unwrap();
    let grid = Grid::new((1, 2, 2), (2, 2));
    let run = relay(&stream, grid, 0, 5, 20_000, &inbox, &outbox, &ctl).unwrap();
    for n in 0..5u32 {
        inbox.send(n, t).unwrap();
        assert_eq!(outbox.recv(t).unwrap(), n + 1, "message {n}");
    }
    run.wait().unwrap();
    assert_eq!(ctl.load(0), 2);
}

/// `atomics_scoped` numbers its blocks over the whole grid before updating a block's own
/// slots at block scope: on a 2D grid (where `block::idx_x()` is shared by a column of
/// blocks) each block still has its own slot, and the launch is race-free.
#[test]
fn block_scoped_slots_are_per_block_on_a_2d_grid() {
    use berth_fixtures::atomics::atomics_scoped;
    let gpu = Gpu::simulator();
    let x: Vec<u32> = (0..4 * 32).collect();
    let dx = gpu.upload(&x).unwrap();
    let mut per_block = gpu.alloc_zeroed::<u32>(4).unwrap();
    let mut last = gpu.upload(&[-1i32; 4]).unwrap();
    let mut total = gpu.upload(&[0, 0, u64::MAX]).unwrap();
    let mut owner = gpu.alloc_zeroed::<i64>(7).unwrap();
    let mut fsum = gpu.alloc_zeroed::<f32>(1).unwrap();
    let mut dsum = gpu.alloc_zeroed::<f64>(5).unwrap();
    atomics_scoped(
        &gpu,
        Grid::new((2, 2), 32),
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
    assert_eq!(per_block.to_vec().unwrap(), [32; 4]);
    let dsum = dsum.to_vec().unwrap();
    let per: Vec<f64> = (0..4)
        .map(|b| (32 * b..32 * b + 32).map(|v| f64::from(v % 8)).sum())
        .collect();
    assert_eq!(dsum[1..], per[..]);
}

/// Launches the asynchronous-copy fixture `$kernel` of `broken.rs` on 128 fresh elements, one
/// block of 32 threads; its report.
macro_rules! async_report {
    ($kernel:ident) => {{
        use berth_fixtures::broken::$kernel;
        let gpu = Gpu::simulator();
        let x = gpu.upload(&berth_tests::random_u32(128)).unwrap();
        let mut out = gpu.alloc_zeroed::<u32>(32).unwrap();
        report($kernel(&gpu, Grid::new(1, 32), &x, &mut out).and_then(|p| p.wait()))
    }};
}

#[test]
fn a_read_of_an_asynchronous_copy_before_its_wait_is_reported() {
    let (kernel, _, thread, problem) = async_report!(async_read_before_wait);
    assert_eq!((kernel, thread), ("async_read_before_wait", [0, 0, 0]));
    let broken = berth_tests::BROKEN;
    let copy = broken.line("unsafe { async_copy::copy_cg::<u32, 4>(tile, 4 * t, &x, 4 * t) };");
    let read = broken.line("let v = unsafe { tile.read(4 * t) };");
    has(
        &problem,
        &[
            "a read of shared memory while an asynchronous copy (cp.async) to it is in flight, before the wait for its group",
            "`EARLY[0]`",
            "thread (0, 0, 0) read it at",
            &format!("{}:{read}:", broken.path),
            &format!("the same thread copied it at {}:{copy}:", broken.path),
        ],
    );
}

#[test]
fn a_read_of_another_threads_copy_without_a_barrier_after_its_wait_is_reported() {
    let (kernel, _, thread, problem) = async_report!(async_read_without_barrier);
    assert_eq!((kernel, thread), ("async_read_without_barrier", [1, 0, 0]));
    let broken = berth_tests::BROKEN;
    let read = broken.line("let v = unsafe { tile.read(4 * t.saturating_sub(1)) };");
    has(
        &problem,
        &[
            "a read of shared memory that another thread's asynchronous copy (cp.async) wrote, with no barrier after the copying thread's wait",
            "`UNSYNCED[0]`",
            &format!("thread (1, 0, 0) read it at {}:{read}:", broken.path),
            "thread (0, 0, 0) copied it at",
            "a sync_threads() after it",
        ],
    );
}

#[test]
fn a_wait_that_leaves_the_copys_group_in_flight_does_not_complete_it() {
    let (kernel, _, _, problem) = async_report!(async_wait_too_shallow);
    assert_eq!(kernel, "async_wait_too_shallow");
    has(
        &problem,
        &[
            "before the wait for its group",
            "`SHALLOW[4]`",
            &at_broken("let v = unsafe { tile.read(4 * ((t + 1) % 32)) };"),
        ],
    );
}

#[test]
fn a_thread_returning_with_a_copy_in_flight_is_reported() {
    let (kernel, _, _, problem) = async_report!(async_never_waited);
    assert_eq!(kernel, "async_never_waited");
    has(
        &problem,
        &[
            "returned with an asynchronous copy (cp.async) it started at",
            &at_broken("unsafe { async_copy::copy_ca::<u32, 4>(tile, 4 * t, &x, 4 * t) };"),
            "still in flight",
        ],
    );
}

#[test]
fn an_asynchronous_copy_past_the_end_of_its_source_fails_at_its_line() {
    use berth_fixtures::broken::async_copy_past_the_end;
    let gpu = Gpu::simulator();
    let x = gpu.upload(&berth_tests::random_u32(128)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(32).unwrap();
    let err = async_copy_past_the_end(&gpu, Grid::new(1, 32), &x, &mut out)
        .and_then(|p| p.wait())
        .unwrap_err();
    let text = err.to_string();
    for part in [
        "async_copy_past_the_end",
        "the len is 128 but the index is 129",
        &at_broken("x.len() - 2"),
    ] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
}

/// `fixtures/src/broken.rs:LINE:` of the line containing `needle`.
fn at_broken(needle: &str) -> String {
    let src = berth_tests::BROKEN;
    format!("{}:{}:", src.path, src.line(needle))
}

#[test]
fn a_tensor_core_read_of_a_bulk_copy_nobody_waited_for_is_reported() {
    use berth_fixtures::broken::{WGMMA_BEFORE_WAIT_SHARED, wgmma_before_wait};
    let gpu = Gpu::simulator();
    let a: Vec<berth::bf16> = berth_tests::random_f32(64 * 64)
        .into_iter()
        .map(berth::bf16::from_f32)
        .collect();
    let da = gpu.upload(&a).unwrap();
    let maps = gpu
        .upload(&[gpu.tensor_map(&da, 64, 64, 64).unwrap()])
        .unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(128).unwrap();
    let grid = Grid::new(1, 128).shared_bytes(WGMMA_BEFORE_WAIT_SHARED);
    let r = wgmma_before_wait(&gpu, grid, &da, &maps, &mut out).and_then(|p| p.wait());
    let Err(Error::KernelPanic { kernel, report, .. }) = r else {
        panic!("expected a stopped thread, got {r:?}");
    };
    assert_eq!(
        (kernel.as_str(), report.thread),
        ("wgmma_before_wait", [0, 0, 0])
    );
    let broken = berth_tests::BROKEN;
    let line = broken.line("wgmma::mma_async(");
    has(
        &report.message,
        &[
            "a read of shared bytes",
            "by a thread that did not wait on the mbarrier",
            &format!("{}:{line}", broken.path),
        ],
    );
}

#[test]
fn an_mbarrier_phase_that_can_never_complete_is_reported() {
    use berth_fixtures::broken::mbarrier_never_completes;
    let gpu = Gpu::simulator();
    let mut out = gpu.alloc_zeroed::<u32>(64).unwrap();
    let (kernel, _, _, problem) =
        report(mbarrier_never_completes(&gpu, Grid::new(1, 64), &mut out).and_then(|p| p.wait()));
    assert_eq!(kernel, "mbarrier_never_completes");
    has(
        &problem,
        &["threads wait on an mbarrier phase that no thread can complete"],
    );
}

#[test]
fn a_plain_read_of_a_bulk_copy_nobody_waited_for_is_reported() {
    use berth_fixtures::broken::tma_read_before_wait;
    let gpu = Gpu::simulator();
    let a = vec![berth::bf16::ONE; 8 * 64];
    let da = gpu.upload(&a).unwrap();
    let maps = gpu
        .upload(&[gpu.tensor_map(&da, 8, 64, 8).unwrap()])
        .unwrap();
    let mut out = gpu.alloc_zeroed::<f32>(32).unwrap();
    let r =
        tma_read_before_wait(&gpu, Grid::new(1, 32), &da, &maps, &mut out).and_then(|p| p.wait());
    let Err(Error::KernelPanic { report, .. }) = r else {
        panic!("expected a stopped thread, got {r:?}");
    };
    let broken = berth_tests::BROKEN;
    let line = broken.line("let v = unsafe { tile.read(skip + thread::linear_in_block()) };");
    has(
        &report.message,
        &[
            "a read of shared bytes",
            "by a thread that did not wait on the mbarrier",
            &format!("{}:{line}", broken.path),
        ],
    );
}
