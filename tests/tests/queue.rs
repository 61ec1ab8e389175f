//! Queued launches and graphs, on both backends: dependent launches queued in a scope without
//! waiting give the host's result; a scope that returns early, panics or meets a kernel fault in
//! the middle of its queue ends with every buffer idle and its error reported once; graphs
//! replay their launches, with changed scalars too; leaked guards of either stay sound; and the
//! invariants that keep them sound (only held buffers in a graph, no `&` and `&mut` of one
//! buffer in one launch) are typed errors when broken.
//!
//! One test body, two backends, as in `gpu/`: the simulator by default, the GPU with
//! `--features gpu`. The fault test runs in a child process on the GPU (a trap poisons the
//! process's CUDA state on this driver).

use berth::{DeviceBuffer, Error, Gpu, Grid};
use berth_examples::chain::{
    chain_host, gated_jacobi, jacobi, jacobi_host, relax_weighted, relax_weighted_host,
    relax_weighted_or_fail,
};
use berth_fixtures::gated::{gated_fill_pinned, gated_fill_within};
use berth_tests::gpu;
use berth_tests::{in_child, random_f32, run_isolated};
use std::time::Duration;

/// Elements of the chains: small on the simulator (it runs every thread on the host).
const N: usize = if cfg!(feature = "gpu") { 1 << 16 } else { 1000 };
/// Launches of the long chain.
const STEPS: usize = 1000;
/// How long the gated launches of the tests that must never wait on the host wait for their
/// gate before they fail: the closure opens it right after queueing, so a host wait on the way
/// fails the test within this bound instead of hanging it.
const PATIENCE_NS: u64 = 2_000_000_000;

/// Two buffers holding `x`: the chain's ping and pong.
fn pair(gpu: &Gpu, x: &[f32]) -> (DeviceBuffer<f32>, DeviceBuffer<f32>) {
    (gpu.upload(x).unwrap(), gpu.upload(x).unwrap())
}

fn assert_bits(got: &[f32], want: &[f32], what: &str) {
    let bad = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    assert_eq!(got.len(), want.len(), "{what}: length");
    assert_eq!(bad, 0, "{what}: {bad} elements differ from the host");
}

fn a_plain(gpu: &Gpu) -> DeviceBuffer<f32> {
    gpu.alloc_zeroed(N).unwrap()
}

fn jacobi_steps(x: &[f32], steps: usize) -> Vec<f32> {
    chain_host(x, steps, |_, a, b| jacobi_host(a, b))
}

// ---- scopes ---------------------------------------------------------------------------------

#[test]
fn a_scope_queues_a_thousand_dependent_launches_and_gets_the_host_result() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let launched = gpu
        .scope(|s| {
            for _ in 0..STEPS / 2 {
                jacobi(s, g, &a, &mut b)?.detach();
                jacobi(s, g, &b, &mut a)?.detach();
            }
            Ok(s.launches())
        })
        .unwrap();
    assert_eq!(launched, STEPS as u64);
    assert_bits(
        &a.to_vec().unwrap(),
        &jacobi_steps(&x, STEPS),
        "a after the scope",
    );
}

#[test]
fn queueing_in_a_scope_never_waits_on_the_host() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let gate = gpu.signals(1).unwrap();
    // The first launch cannot finish before the closure opens its gate, after queueing the
    // rest: any host wait for it on the way would stall until the kernel gives up (10 s) and
    // the scope would fail.
    gpu.scope(|s| {
        gated_jacobi(s, g, &gate, &a, &mut b)?.detach();
        jacobi(s, g, &b, &mut a)?.detach();
        for _ in 0..49 {
            jacobi(s, g, &a, &mut b)?.detach();
            jacobi(s, g, &b, &mut a)?.detach();
        }
        gate.store(0, 1);
        Ok(())
    })
    .unwrap();
    assert_bits(&a.to_vec().unwrap(), &jacobi_steps(&x, 100), "a");
}

#[test]
fn work_of_another_streams_scope_or_a_leaked_guard_is_waited_for_by_the_gpu_not_the_host() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let gate = gpu.signals(1).unwrap();
    let side = gpu.stream().unwrap();
    // The gated launch, on a stream of its own, cannot finish before the gate opens, which
    // happens only after the launches that depend on it are queued on the default stream:
    // waiting for it on the host on the way would stall until the kernel gives up (10 s).
    side.scope(|s| {
        gated_jacobi(s, g, &gate, &a, &mut b)?.detach();
        // Reads `b`, which the gated launch writes, and writes `a`, which it reads.
        let next = jacobi(&gpu, g, &b, &mut a)?;
        gate.store(0, 1);
        next.wait()
    })
    .unwrap();
    assert_bits(
        &a.to_vec().unwrap(),
        &jacobi_steps(&x, 2),
        "a after a plain launch",
    );

    gate.store(0, 0);
    side.scope(|s| {
        gated_jacobi(s, g, &gate, &a, &mut b)?.detach();
        gpu.scope(|d| {
            for _ in 0..50 {
                jacobi(d, g, &b, &mut a)?.detach();
                jacobi(d, g, &a, &mut b)?.detach();
            }
            gate.store(0, 1);
            Ok(())
        })
    })
    .unwrap();
    assert_bits(
        &b.to_vec().unwrap(),
        &jacobi_steps(&x, 103),
        "b after a scope",
    );
    // And the other way round: the side stream orders itself after the default stream's
    // queued work, a leaked guard's.
    gate.store(0, 0);
    std::mem::forget(gated_jacobi(&gpu, g, &gate, &b, &mut a).unwrap());
    let next = jacobi(&side, g, &a, &mut b).unwrap();
    gate.store(0, 1);
    next.wait().unwrap();
    assert_bits(
        &b.to_vec().unwrap(),
        &jacobi_steps(&x, 105),
        "b after a leaked guard",
    );
}

#[test]
fn dropped_guards_in_a_scope_leave_their_launches_queued() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let stream = gpu.stream().unwrap();
    stream
        .scope(|s| {
            for _ in 0..50 {
                // Guards dropped at the end of each statement, without `detach`.
                let _ = jacobi(s, g, &a, &mut b)?;
                let _ = jacobi(s, g, &b, &mut a)?;
            }
            // Host access inside the scope waits for the launches queued on the buffer.
            assert_bits(&a.to_vec()?, &jacobi_steps(&x, 100), "a inside the scope");
            jacobi(s, g, &a, &mut b)?.detach();
            Ok(())
        })
        .unwrap();
    assert_bits(
        &b.to_vec().unwrap(),
        &jacobi_steps(&x, 101),
        "b after the scope",
    );
}

#[test]
fn host_reads_inside_a_scope_wait_for_a_launch_still_running() {
    let (_g, gpu) = gpu();
    let n = 1 << 12;
    let mut out = gpu.pinned_zeroed::<u32>(n).unwrap();
    let gate = gpu.signals(1).unwrap();
    std::thread::scope(|t| {
        t.spawn(|| {
            std::thread::sleep(Duration::from_millis(150));
            gate.store(0, 1);
        });
        gpu.scope(|s| {
            gated_fill_pinned(s, Grid::cover(n), 7, &gate, &mut out)?.detach();
            // The launch waits for the gate; this read must wait for the launch.
            let first = out.to_vec();
            assert!(
                first.iter().all(|&v| v == 7),
                "read before the launch ended"
            );
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn a_detached_copy_to_pinned_memory_in_a_scope_stays_queued_without_waiting() {
    let (_g, gpu) = gpu();
    let n = 1 << 12;
    let gate = gpu.signals(1).unwrap();
    let mut dev = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut host = gpu.pinned_zeroed::<u32>(n).unwrap();
    // The copy queues behind the gated fill of `dev`, which cannot finish before the gate
    // opens after the copy's guard is detached: a host wait in the detach would stall until the
    // fill gives up, and the scope would report its failure.
    gpu.scope(|s| {
        gated_fill_within(s, Grid::cover(n), PATIENCE_NS, 5, &gate, &mut dev)?.detach();
        dev.copy_to_pinned(s, &mut host)?.detach();
        gate.store(0, 1);
        // The detached copy's use of `host` is noted: this read waits for it.
        assert!(host.iter().all(|&v| v == 5), "read before the copy ended");
        Ok(())
    })
    .unwrap();
    assert!(host.iter().all(|&v| v == 5), "host after the scope");
}

#[test]
fn a_detached_copy_from_pinned_memory_in_a_scope_stays_queued_without_waiting() {
    let (_g, gpu) = gpu();
    let n = 1 << 12;
    let gate = gpu.signals(1).unwrap();
    let src = gpu.pinned_from(&vec![9u32; n]).unwrap();
    let mut dev = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut back = gpu.pinned_zeroed::<u32>(n).unwrap();
    // The copy into `dev` queues behind a gated fill of another buffer; so does a copy back,
    // whose guard is dropped instead of detached. Neither may wait on the host.
    gpu.scope(|s| {
        gated_fill_within(s, Grid::cover(n), PATIENCE_NS, 1, &gate, &mut blocker)?.detach();
        dev.copy_from_pinned(s, &src)?.detach();
        let _ = dev.copy_to_pinned(s, &mut back)?;
        gate.store(0, 1);
        Ok(())
    })
    .unwrap();
    assert!(back.iter().all(|&v| v == 9), "copied back");
    assert!(dev.to_vec().unwrap().iter().all(|&v| v == 9), "dev");
    assert!(blocker.to_vec().unwrap().iter().all(|&v| v == 1), "blocker");
}

#[test]
fn refilling_the_pinned_source_of_a_copy_in_a_scope_waits_for_that_copy_alone() {
    let (_g, gpu) = gpu();
    let n = 1 << 12;
    let gate = gpu.signals(1).unwrap();
    let mut src = gpu.pinned_from(&vec![3u32; n]).unwrap();
    let mut dev = gpu.alloc_zeroed::<u32>(n).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(n).unwrap();
    // The copy from `src` is queued before a gated fill of another buffer, whose gate opens
    // only after `src` is written again: a write that waited for everything the scope queued
    // would wait for the fill, which then gives up, and the scope would report its failure.
    gpu.scope(|s| {
        dev.copy_from_pinned(s, &src)?.detach();
        gated_fill_within(s, Grid::cover(n), PATIENCE_NS, 1, &gate, &mut blocker)?.detach();
        // Waits for the copy, which read the old values.
        src.iter_mut().for_each(|v| *v = 4);
        gate.store(0, 1);
        Ok(())
    })
    .unwrap();
    assert!(
        dev.to_vec().unwrap().iter().all(|&v| v == 3),
        "copied before the refill"
    );
    assert!(blocker.to_vec().unwrap().iter().all(|&v| v == 1), "blocker");
    assert!(src.iter().all(|&v| v == 4), "refilled");
}

#[test]
fn pinned_launches_in_a_scope_reuse_their_staging() {
    let (_g, gpu) = gpu();
    let n = 3000;
    let x = gpu.pinned_from(&random_f32(n)).unwrap();
    let mut y = gpu.pinned_zeroed::<f32>(n).unwrap();
    // Warm the pool, then count what a queue of 100 launches allocates.
    berth_examples::affine_one(&gpu, Grid::cover(n), 2.0, &x, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    let before = gpu.pool_stats();
    gpu.scope(|s| {
        for _ in 0..100 {
            berth_examples::affine_one(s, Grid::cover(n), 2.0, &x, &mut y)?.detach();
        }
        Ok(())
    })
    .unwrap();
    let after = gpu.pool_stats();
    assert!(
        after.device_allocations - before.device_allocations <= 2,
        "staging was not reused in the scope: {before:?} → {after:?}"
    );
    let want: Vec<f32> = x.iter().map(|&v| 2.0 * v + 1.0).collect();
    assert_bits(&y, &want, "y");
}

#[test]
fn an_early_return_from_a_scope_waits_and_reports_the_closures_error() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let r: berth::Result<()> = gpu.scope(|s| {
        for _ in 0..20 {
            jacobi(s, g, &a, &mut b)?.detach();
            jacobi(s, g, &b, &mut a)?.detach();
        }
        Err(Error::Usage("stop here".into()))
    });
    assert!(
        matches!(&r, Err(Error::Usage(m)) if m == "stop here"),
        "{r:?}"
    );
    // Every queued launch ran; nothing is left for the next wait to report.
    gpu.synchronize().unwrap();
    assert_bits(&a.to_vec().unwrap(), &jacobi_steps(&x, 40), "a");
    assert_bits(&b.to_vec().unwrap(), &jacobi_steps(&x, 39), "b");
}

#[test]
fn a_panic_in_a_scope_waits_for_the_queued_work() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gpu.scope(|s| -> berth::Result<()> {
            for _ in 0..20 {
                jacobi(s, g, &a, &mut b)?.detach();
                jacobi(s, g, &b, &mut a)?.detach();
            }
            panic!("the closure panics with 40 launches queued");
        })
    }));
    assert!(r.is_err(), "the panic goes on to the caller");
    gpu.synchronize().unwrap();
    assert_bits(&a.to_vec().unwrap(), &jacobi_steps(&x, 40), "a");
    // The buffers are free to go: dropping them must not wait forever or fault.
    drop((a, b));
}

/// `jacobi` ties its input's length to its output's once, up front (`Slice::prefix`), so that
/// its neighbour reads need no checks: an input one element short stops the launch there,
/// with the line, on both PTX entries (a one-dimensional grid runs the linear one).
#[test]
fn a_short_input_stops_jacobi_at_its_one_check() {
    if cfg!(feature = "gpu") && !in_child() {
        let (ok, out) = run_isolated("a_short_input_stops_jacobi_at_its_one_check");
        assert!(ok, "child failed:\n{out}");
        return;
    }
    let line = berth_tests::CHAIN.line("let a = a.prefix(n);");
    // A GPU context is lost with the first panic: one grid per process there.
    let grids = if cfg!(feature = "gpu") {
        vec![Grid::cover(N)]
    } else {
        vec![Grid::cover(N), Grid::new((4, 2), 128)]
    };
    for g in grids {
        let (_g, gpu) = gpu();
        let a = gpu.upload(&random_f32(N - 1)).unwrap();
        let mut b = gpu.alloc_zeroed::<f32>(N).unwrap();
        let err = jacobi(&gpu, g, &a, &mut b)
            .and_then(|p| p.wait())
            .unwrap_err();
        let berth::Error::KernelPanic { kernel, report, .. } = &err else {
            panic!("{g:?}: expected the kernel's panic, got {err}");
        };
        assert_eq!(kernel, "jacobi");
        assert!(report.file.ends_with("chain.rs"), "{g:?}: {report}");
        assert_eq!(report.line, line, "{g:?}: {report}");
        let want = format!("the len is {} but the index is {}", N - 1, N - 1);
        assert!(report.message.contains(&want), "{g:?}: {report}");
    }
}

#[test]
fn a_fault_in_the_middle_of_a_queue_is_reported_once() {
    if cfg!(feature = "gpu") && !in_child() {
        let (ok, out) = run_isolated("a_fault_in_the_middle_of_a_queue_is_reported_once");
        assert!(ok, "child failed:\n{out}");
        return;
    }
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let r = gpu.scope(|s| {
        for k in 0..40 {
            let w = if k == 20 { -1.0 } else { 0.5 };
            relax_weighted_or_fail(s, g, w, &a, &mut b)?.detach();
            relax_weighted(s, g, 0.5, &b, &mut a)?.detach();
        }
        Ok(())
    });
    let err = r.expect_err("the fault must be reported by the scope");
    assert!(
        matches!(err, Error::KernelPanic { .. } | Error::KernelFault { .. }),
        "expected the kernel's failure, got {err}"
    );
    assert!(err.to_string().contains("relax_weighted"), "{err}");
    // Reported once as the kernel's failure; after it the context is lost and says so, on
    // the simulator as on a GPU.
    let again = gpu.synchronize();
    assert!(matches!(again, Err(Error::ContextLost(_))), "{again:?}");
    assert!(a.to_vec().unwrap_err().is_context_lost());
    let after = relax_weighted(&gpu, g, 0.5, &a, &mut b).and_then(|p| p.wait());
    assert!(after.unwrap_err().is_context_lost());
    drop((a, b));
}

#[test]
fn leaked_guards_of_a_scope_stay_sound() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    gpu.scope(|s| {
        for _ in 0..10 {
            std::mem::forget(jacobi(s, g, &a, &mut b)?);
            std::mem::forget(jacobi(s, g, &b, &mut a)?);
        }
        Ok(())
    })
    .unwrap();
    assert_bits(&a.to_vec().unwrap(), &jacobi_steps(&x, 20), "a");
    // Leaked guards of plain launches on the same buffers: later work and host access wait.
    std::mem::forget(jacobi(&gpu, g, &a, &mut b).unwrap());
    std::mem::forget(jacobi(&gpu, g, &b, &mut a).unwrap());
    assert_bits(
        &a.to_vec().unwrap(),
        &jacobi_steps(&x, 22),
        "a after leaked launches",
    );
}

#[test]
fn several_host_threads_queue_on_one_scope() {
    let (_g, gpu) = gpu();
    let xs: Vec<Vec<f32>> = (0..2).map(|_| random_f32(N)).collect();
    let mut bufs: Vec<(DeviceBuffer<f32>, DeviceBuffer<f32>)> =
        xs.iter().map(|x| pair(&gpu, x)).collect();
    let g = Grid::cover(N);
    gpu.scope(|s| {
        std::thread::scope(|t| {
            for (a, b) in bufs.iter_mut() {
                t.spawn(move || -> berth::Result<()> {
                    for _ in 0..25 {
                        jacobi(s, g, a, b)?.detach();
                        jacobi(s, g, b, a)?.detach();
                    }
                    Ok(())
                });
            }
        });
        Ok(())
    })
    .unwrap();
    for (x, (a, _)) in xs.iter().zip(&bufs) {
        assert_bits(
            &a.to_vec().unwrap(),
            &jacobi_steps(x, 50),
            "a of one thread",
        );
    }
}

#[test]
fn waiting_for_one_launch_in_a_scope_takes_its_failure() {
    let (_g, gpu) = gpu();
    if cfg!(feature = "gpu") {
        return; // a fault loses the context on a GPU: covered by the child-process test
    }
    let x = random_f32(N);
    let (a, mut b) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let r = gpu.scope(|s| {
        let failed = relax_weighted_or_fail(s, g, -1.0, &a, &mut b)?.wait();
        assert!(
            matches!(failed, Err(Error::KernelPanic { .. })),
            "the guard's wait reports the failure: {failed:?}"
        );
        // The context is lost to it: the next launch is refused, and the scope reports
        // that (not the failure again, which the wait took).
        jacobi(s, g, &a, &mut b)?.detach();
        Ok(())
    });
    let err = r.expect_err("a launch after the fault is refused");
    assert!(
        matches!(&err, Error::ContextLost(why) if why.contains("relax_weighted_or_fail")),
        "{err}"
    );
}

// ---- graphs ---------------------------------------------------------------------------------

#[test]
fn a_graph_replays_a_thousand_launches_and_changed_scalars() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    {
        let mut graph = gpu.graph();
        let (mut a, mut b) = (
            graph.hold(&mut a_buf).unwrap(),
            graph.hold(&mut b_buf).unwrap(),
        );
        let mut record = |graph: &mut berth::Graph<'_>, w: f32| {
            graph.record(|r| {
                for _ in 0..STEPS / 2 {
                    relax_weighted(r, g, w, &a, &mut b)?.detach();
                    relax_weighted(r, g, w, &b, &mut a)?.detach();
                }
                Ok(())
            })
        };
        record(&mut graph, 0.5).unwrap();
        assert_eq!(graph.launches(), STEPS);
        graph.run(&gpu).unwrap().wait().unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
        record(&mut graph, 0.25).unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
    }
    let want = chain_host(&x, 3 * STEPS, |k, a, b| {
        relax_weighted_host(if k < 2 * STEPS { 0.5 } else { 0.25 }, a, b)
    });
    assert_bits(&a_buf.to_vec().unwrap(), &want, "a after three replays");
}

#[test]
fn recording_another_chain_rebuilds_the_graph() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    {
        let mut graph = gpu.graph();
        let (mut a, mut b) = (
            graph.hold(&mut a_buf).unwrap(),
            graph.hold(&mut b_buf).unwrap(),
        );
        let mut record = |graph: &mut berth::Graph<'_>, pairs: usize, w: Option<f32>| {
            graph.record(|r| {
                for _ in 0..pairs {
                    match w {
                        Some(w) => {
                            relax_weighted(r, g, w, &a, &mut b)?.detach();
                            relax_weighted(r, g, w, &b, &mut a)?.detach();
                        }
                        None => {
                            jacobi(r, g, &a, &mut b)?.detach();
                            jacobi(r, g, &b, &mut a)?.detach();
                        }
                    }
                }
                Ok(())
            })
        };
        record(&mut graph, 1, None).unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
        // More launches, then other kernels: rebuilt, not updated.
        record(&mut graph, 3, None).unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
        record(&mut graph, 3, Some(0.75)).unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
        // An empty recording replays nothing.
        record(&mut graph, 0, None).unwrap();
        graph.run(&gpu).unwrap().wait().unwrap();
    }
    let want = chain_host(&x, 14, |k, a, b| {
        if k < 8 {
            jacobi_host(a, b)
        } else {
            relax_weighted_host(0.75, a, b)
        }
    });
    assert_bits(&a_buf.to_vec().unwrap(), &want, "a");
}

#[test]
fn a_graph_replays_inside_a_scope_and_on_a_stream() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    {
        let mut graph = gpu.graph();
        let (mut a, mut b) = (
            graph.hold(&mut a_buf).unwrap(),
            graph.hold(&mut b_buf).unwrap(),
        );
        graph
            .record(|r| {
                jacobi(r, g, &a, &mut b)?.detach();
                jacobi(r, g, &b, &mut a)?.detach();
                Ok(())
            })
            .unwrap();
        gpu.scope(|s| {
            for _ in 0..10 {
                graph.run(s)?.detach();
            }
            Ok(())
        })
        .unwrap();
        let stream = gpu.stream().unwrap();
        graph.run(&stream).unwrap().wait().unwrap();
        // Dropped without waiting (not in a scope): the guard waits.
        let _ = graph.run(&gpu).unwrap();
    }
    assert_bits(&a_buf.to_vec().unwrap(), &jacobi_steps(&x, 24), "a");
}

#[test]
fn replays_of_one_graph_from_several_threads_are_ordered() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    {
        let mut graph = gpu.graph();
        let (mut a, mut b) = (
            graph.hold(&mut a_buf).unwrap(),
            graph.hold(&mut b_buf).unwrap(),
        );
        graph
            .record(|r| {
                for _ in 0..5 {
                    jacobi(r, g, &a, &mut b)?.detach();
                    jacobi(r, g, &b, &mut a)?.detach();
                }
                Ok(())
            })
            .unwrap();
        let streams: Vec<berth::Stream> = (0..3).map(|_| gpu.stream().unwrap()).collect();
        let graph = &graph;
        std::thread::scope(|t| {
            for stream in &streams {
                t.spawn(move || {
                    for _ in 0..4 {
                        // Leaked: only the graph's own ordering keeps the replays apart.
                        std::mem::forget(graph.run(stream).unwrap());
                    }
                });
            }
        });
    }
    assert_bits(
        &a_buf.to_vec().unwrap(),
        &jacobi_steps(&x, 120),
        "a after 12 replays",
    );
}

#[test]
fn leaked_graph_replays_stay_sound() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    {
        let mut graph = gpu.graph();
        let (mut a, mut b) = (
            graph.hold(&mut a_buf).unwrap(),
            graph.hold(&mut b_buf).unwrap(),
        );
        graph
            .record(|r| {
                for _ in 0..50 {
                    jacobi(r, g, &a, &mut b)?.detach();
                    jacobi(r, g, &b, &mut a)?.detach();
                }
                Ok(())
            })
            .unwrap();
        std::mem::forget(graph.run(&gpu).unwrap());
        std::mem::forget(graph.run(&gpu).unwrap());
        // The graph is dropped with its replays possibly in flight.
    }
    // Host access waits for them; the buffers are then dropped safely.
    assert_bits(&a_buf.to_vec().unwrap(), &jacobi_steps(&x, 200), "a");
    // A leaked graph: its borrows end without any code running.
    let mut graph = gpu.graph();
    let (mut a, mut b) = (
        graph.hold(&mut a_buf).unwrap(),
        graph.hold(&mut b_buf).unwrap(),
    );
    graph
        .record(|r| {
            jacobi(r, g, &a, &mut b)?.detach();
            jacobi(r, g, &b, &mut a)?.detach();
            Ok(())
        })
        .unwrap();
    std::mem::forget(graph.run(&gpu).unwrap());
    std::mem::forget(graph);
    assert_bits(
        &a_buf.to_vec().unwrap(),
        &jacobi_steps(&x, 202),
        "a after a leaked graph",
    );
    drop((a_buf, b_buf));
}

#[test]
fn a_recording_takes_only_buffers_its_graph_holds() {
    let (_g, gpu) = gpu();
    let x = random_f32(N);
    let (mut a_buf, mut b_buf) = pair(&gpu, &x);
    let (mut c_buf, mut d_buf) = pair(&gpu, &x);
    let g = Grid::cover(N);
    let other = gpu.graph();
    let foreign = other.hold(&mut c_buf).unwrap();
    let mut graph = gpu.graph();
    let mut a = graph.hold(&mut a_buf).unwrap();
    let b = graph.hold(&mut b_buf).unwrap();
    let invalid = |r: berth::Result<()>, what: &str| match r {
        Err(Error::InvalidLaunch { reason, .. }) => eprintln!("{what}: {reason}"),
        other => panic!("{what}: expected InvalidLaunch, got {other:?}"),
    };
    // A plain buffer: its borrow would end before the graph does.
    invalid(
        graph.record(|r| jacobi(r, g, &b, &mut d_buf)?.wait()),
        "plain buffer",
    );
    // Another graph's handle.
    invalid(
        graph.record(|r| jacobi(r, g, &foreign, &mut a)?.wait()),
        "handle of another graph",
    );
    // One buffer as `&` and `&mut` of one launch (handles are `Copy`).
    let mut alias = b;
    invalid(
        graph.record(|r| jacobi(r, g, &b, &mut alias)?.wait()),
        "aliased handles",
    );
    // Held buffers outside a recording of their graph (on a queue, in a scope).
    let r = jacobi(&gpu, g, &b, &mut d_buf).map(|p| p.detach());
    assert!(matches!(r, Err(Error::InvalidLaunch { .. })), "{r:?}");
    let r = gpu.scope(|s| jacobi(s, g, &a_plain(&gpu), &mut alias).map(|p| p.detach()));
    assert!(matches!(r, Err(Error::InvalidLaunch { .. })), "{r:?}");
    // Copies and events cannot be recorded; graphs do not nest.
    let ev = gpu.event().unwrap();
    let r = graph.record(|r| ev.record(r));
    assert!(matches!(r, Err(Error::Usage(_))), "{r:?}");
    let r = graph.record(|r| other.run(r).map(|p| p.detach()));
    assert!(matches!(r, Err(Error::Usage(_))), "{r:?}");
    let mut host = gpu.pinned_zeroed::<f32>(N).unwrap();
    let r = graph.record(|r| a_plain(&gpu).copy_to_pinned(r, &mut host)?.wait());
    assert!(matches!(r, Err(Error::Usage(_))), "{r:?}");
    assert_eq!(
        graph.launches(),
        0,
        "failed recordings leave the graph as it was"
    );
    drop(graph);
    drop(other);
}

#[test]
fn a_dropped_guards_failure_is_reported_by_the_next_wait_on_its_stream() {
    let (_g, gpu) = gpu();
    if cfg!(feature = "gpu") {
        return; // on a GPU the fault loses the context: every later call reports it
    }
    let x = random_f32(N);
    let (a, mut b) = pair(&gpu, &x);
    drop(relax_weighted_or_fail(&gpu, Grid::cover(N), -1.0, &a, &mut b).unwrap());
    // Nobody took the failure: the next synchronise that covers it reports it, as the
    // kernel's own.
    let r = gpu.synchronize();
    assert!(matches!(r, Err(Error::KernelPanic { .. })), "{r:?}");
    // The context is lost to it: later work is refused, naming the fault.
    let again = jacobi(&gpu, Grid::cover(N), &a, &mut b).and_then(|p| p.wait());
    let err = again.expect_err("work after a fault is refused");
    assert!(
        matches!(&err, Error::ContextLost(why) if why.contains("relax_weighted_or_fail")),
        "{err}"
    );
    let fresh = gpu.recover().unwrap();
    let (a, mut b) = pair(&fresh, &x);
    jacobi(&fresh, Grid::cover(N), &a, &mut b)
        .unwrap()
        .wait()
        .unwrap();
    assert_bits(&b.to_vec().unwrap(), &jacobi_steps(&x, 1), "b");
}
