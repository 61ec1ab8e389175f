//! Device sets: one context per device, portable host memory, peer views (in place and
//! copied), collectives and errors that name the device.
//!
//! One test body, two backends: with `--features gpu` the set is every GPU of the machine, and
//! a test that needs two devices prints why it is skipped on a machine with one; without it
//! (CI) the set is two simulated devices, with peer links or, for the copy path, without.

use berth::{DeviceSet, Error, Grid, PeerPath, PipelineOptions, ReduceOp};
use berth_examples::chain::{gated_jacobi, jacobi_host};
use berth_examples::{F4, MAPPED_SUM_BLOCK, affine_one_pipelined, mapped_sum, saxpy, saxpy_pinned};
use berth_tests::random_f32;
use std::sync::Mutex;

/// Tests share the devices; run one at a time.
static DEVICES: Mutex<()> = Mutex::new(());

/// Two devices or more: every GPU with `--features gpu`, else two simulated devices (`links`:
/// whether they read each other's memory in place). `None`, with the reason printed, on a
/// machine with one GPU.
fn set(links: bool) -> Option<(std::sync::MutexGuard<'static, ()>, DeviceSet)> {
    let guard = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    let set = if cfg!(feature = "gpu") {
        DeviceSet::all().expect("a GPU is required for --features gpu")
    } else if links {
        DeviceSet::simulated(2)
    } else {
        DeviceSet::simulated_without_peer_access(2)
    };
    if set.len() < 2 {
        println!(
            "skipped: this test needs two devices; the machine has {} ({})",
            set.len(),
            set.gpus()[0].name()
        );
        return None;
    }
    Some((guard, set))
}

fn saxpy_host(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| y + a * x).collect()
}

#[test]
fn a_set_has_one_context_per_device() {
    let Some((_g, set)) = set(true) else { return };
    let ordinals: Vec<usize> = set.iter().map(|g| g.ordinal()).collect();
    for (i, o) in ordinals.iter().enumerate() {
        assert!(!ordinals[..i].contains(o), "ordinals {ordinals:?} repeat");
    }
    // Each member allocates and runs on its own.
    let got = set
        .run_each(|i, gpu| {
            let n = 1000 + i;
            let x = random_f32(n);
            let dx = gpu.upload(&x)?;
            let mut dy = gpu.alloc_zeroed::<f32>(n)?;
            saxpy(gpu, Grid::cover(n), 2.0, &dx, &mut dy)?.wait()?;
            Ok((dy.to_vec()?, x))
        })
        .unwrap();
    assert_eq!(got.len(), set.len());
    for (y, x) in got {
        assert_eq!(y, saxpy_host(2.0, &x, &vec![0.0; x.len()]));
    }
    set.synchronize().unwrap();
    assert!(set.device(set.len()).is_err());
}

#[test]
fn errors_of_a_set_name_the_device() {
    let Some((_g, set)) = set(true) else { return };
    let e = set
        .run_each(|i, gpu| {
            if i == 1 {
                gpu.alloc_zeroed::<u8>(usize::MAX / 2).map(|_| ())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    let Error::OnDevice {
        device, ordinal, ..
    } = &e
    else {
        panic!("not an OnDevice error: {e}")
    };
    assert_eq!((*device, *ordinal), (1, set.gpus()[1].ordinal()));
    assert!(e.to_string().starts_with("device 1 of the set"), "{e}");
}

#[test]
fn a_peer_buffer_is_read_in_place_where_the_topology_allows() {
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 100_003;
    let x = random_f32(n);
    let y = random_f32(n);
    let dx = g0.upload(&x).unwrap();
    let mut dy = g1.upload(&y).unwrap();
    let view = dx.peer_view(g1).unwrap();
    let direct = set.can_access_peer(1, 0).unwrap();
    let expected = if direct {
        PeerPath::Direct
    } else {
        PeerPath::Copied
    };
    assert_eq!(view.path(), expected);
    saxpy(g1, Grid::cover(n), 0.5, &view, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    drop(view);
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(0.5, &x, &y));
    // The owner is untouched and still usable on its own device.
    assert_eq!(dx.to_vec().unwrap(), x);
    // On the owner's device the view is the buffer itself.
    assert_eq!(dx.peer_view(g0).unwrap().path(), PeerPath::Local);
}

#[test]
fn a_peer_buffer_is_copied_where_the_topology_does_not_allow_it() {
    let Some((_g, set)) = set(false) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 70_001;
    let x = random_f32(n);
    let y = random_f32(n);
    let dx = g0.upload(&x).unwrap();
    let mut dy = g1.upload(&y).unwrap();
    // Without peer links (the simulated set here) the view is a copy; on GPUs that have them,
    // `peer_copy` takes the same path on purpose.
    let view = if cfg!(feature = "gpu") {
        dx.peer_copy(g1).unwrap()
    } else {
        assert!(!set.can_access_peer(1, 0).unwrap());
        dx.peer_view(g1).unwrap()
    };
    assert_eq!(view.path(), PeerPath::Copied);
    saxpy(g1, Grid::cover(n), -1.5, &view, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(-1.5, &x, &y));
}

#[test]
fn a_peer_view_is_refused_as_an_output() {
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let dx = g1.upload(&[1.0f32; 64]).unwrap();
    let dy = g0.upload(&[2.0f32; 64]).unwrap();
    let mut view = dy.peer_view(g1).unwrap();
    let Err(e) = saxpy(g1, Grid::cover(64), 1.0, &dx, &mut view) else {
        panic!("a peer view was taken as an output")
    };
    assert!(
        matches!(&e, Error::InvalidLaunch { reason, .. } if reason.contains("peer view")),
        "{e}"
    );
    drop(view);
    assert_eq!(dy.to_vec().unwrap(), vec![2.0f32; 64]);
}

#[test]
fn a_device_buffer_of_another_device_is_refused() {
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let dx = g0.upload(&[1.0f32; 64]).unwrap();
    let mut dy = g1.upload(&[2.0f32; 64]).unwrap();
    let Err(e) = saxpy(g1, Grid::cover(64), 1.0, &dx, &mut dy) else {
        panic!("a buffer of another device was taken")
    };
    assert!(matches!(e, Error::WrongContext { .. }), "{e}");
}

#[test]
fn pinned_memory_of_one_device_is_used_by_another() {
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 50_000;
    let x = random_f32(n);
    let y = random_f32(n);
    // Allocated through device 0, used by a launch on device 1: portable.
    let px = g0.pinned_from(&x).unwrap();
    let mut py = g0.pinned_from(&y).unwrap();
    assert!(px.flags().portable());
    saxpy_pinned(g1, Grid::cover(n), 3.0, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], saxpy_host(3.0, &x, &y).as_slice());
}

#[test]
fn mapped_memory_of_one_device_is_read_in_place_by_another() {
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 40_000;
    let v: Vec<F4> = (0..n)
        .map(|i| {
            let f = (i % 7) as f32;
            F4 {
                x: f,
                y: 1.0,
                z: -f,
                w: 0.5,
            }
        })
        .collect();
    // Mapped through device 0, read in place by a kernel on device 1.
    let mx = g0.mapped_from(&v).unwrap();
    assert!(mx.flags().portable());
    let blocks = 64;
    let mut partial = g1.alloc_zeroed::<f32>(blocks).unwrap();
    mapped_sum(
        g1,
        Grid::new(blocks as u32, MAPPED_SUM_BLOCK),
        &mx,
        &mut partial,
    )
    .unwrap()
    .wait()
    .unwrap();
    let got: f64 = partial
        .to_vec()
        .unwrap()
        .iter()
        .map(|&p| f64::from(p))
        .sum();
    let want: f64 = v.iter().map(|f| f64::from(f.x + f.y + f.z + f.w)).sum();
    assert_eq!(got, want);
}

#[test]
fn all_reduce_broadcast_and_all_gather_combine_every_device() {
    let Some((_g, set)) = set(true) else { return };
    let n = 4099;
    let data: Vec<Vec<i32>> = (0..set.len())
        .map(|d| {
            (0..n)
                .map(|i| (i as i32 % 97) * (d as i32 + 1) - 40)
                .collect()
        })
        .collect();
    let upload = |data: &[Vec<i32>]| -> Vec<_> {
        set.iter()
            .zip(data)
            .map(|(g, d)| g.upload(d).unwrap())
            .collect()
    };
    for (op, f) in [
        (
            ReduceOp::Sum,
            (|a: i32, b: i32| a + b) as fn(i32, i32) -> i32,
        ),
        (ReduceOp::Max, |a: i32, b: i32| a.max(b)),
        (ReduceOp::Min, |a: i32, b: i32| a.min(b)),
    ] {
        let mut bufs = upload(&data);
        set.all_reduce(&mut bufs, op).unwrap().wait().unwrap();
        let want: Vec<i32> = (0..n)
            .map(|i| data.iter().map(|d| d[i]).reduce(f).unwrap())
            .collect();
        for (d, b) in bufs.iter().enumerate() {
            assert_eq!(b.to_vec().unwrap(), want, "{op:?} on device {d}");
        }
    }

    let mut bufs = upload(&data);
    set.broadcast(&mut bufs, 1).unwrap().wait().unwrap();
    for b in &bufs {
        assert_eq!(b.to_vec().unwrap(), data[1]);
    }

    let send = upload(&data);
    let mut recv: Vec<_> = set
        .iter()
        .map(|g| g.alloc_zeroed::<i32>(n * set.len()).unwrap())
        .collect();
    set.all_gather(&send, &mut recv).unwrap().wait().unwrap();
    let want: Vec<i32> = data.concat();
    for r in &recv {
        assert_eq!(r.to_vec().unwrap(), want);
    }

    // f32 sums of integers are exact.
    let mut fbufs: Vec<_> = set
        .iter()
        .enumerate()
        .map(|(d, g)| g.upload(&vec![d as f32 + 0.5; 1 << 16]).unwrap())
        .collect();
    // Dropping the guard also waits.
    drop(set.all_reduce(&mut fbufs, ReduceOp::Sum).unwrap());
    let want: f32 = (0..set.len()).map(|d| d as f32 + 0.5).sum();
    assert!(fbufs[0].to_vec().unwrap().iter().all(|&v| v == want));
}

#[test]
fn collectives_refuse_buffers_of_the_wrong_device_naming_it() {
    let Some((_g, set)) = set(true) else { return };
    let mut bufs: Vec<_> = set.iter().map(|g| g.upload(&[1u32; 8]).unwrap()).collect();
    bufs.swap(0, 1);
    let e = set
        .all_reduce(&mut bufs, ReduceOp::Sum)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, Error::OnDevice { device: 0, .. }), "{e}");
    bufs.swap(0, 1);
    bufs.pop();
    let e = set
        .all_reduce(&mut bufs, ReduceOp::Sum)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    let mut short: Vec<_> = set
        .iter()
        .enumerate()
        .map(|(d, g)| g.upload(&vec![1u32; 8 + d]).unwrap())
        .collect();
    let e = set
        .all_reduce(&mut short, ReduceOp::Sum)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, Error::OnDevice { device: 1, .. }), "{e}");
}

/// Every set the machine can make: the two-device one of [`set`] and, on a GPU, one of device
/// 0 alone, whose collectives NCCL runs as a communicator of one rank (an all-gather then
/// copies on the GPU), so these paths run on a one-GPU machine too.
fn sets_of_every_size() -> (std::sync::MutexGuard<'static, ()>, Vec<DeviceSet>) {
    let mut sets = Vec::new();
    if let Some((g, set)) = set(true) {
        sets.push(set);
        drop(g);
    }
    let guard = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    if cfg!(feature = "gpu") {
        sets.push(DeviceSet::cuda(&[0]).expect("a GPU is required for --features gpu"));
        println!("running on a set of device 0 alone (NCCL with one rank)");
    }
    (guard, sets)
}

#[test]
fn a_detached_or_leaked_collective_is_waited_for_by_whatever_touches_its_buffers() {
    let (_g, sets) = sets_of_every_size();
    for set in sets {
        let n = (1 << 20) + 17;
        let m = set.len();
        let data: Vec<Vec<f32>> = (0..m).map(|_| random_f32(n)).collect();
        let want: Vec<f32> = data.concat();
        let buffers = |set: &DeviceSet| {
            let send: Vec<_> = set
                .iter()
                .zip(&data)
                .map(|(g, d)| g.upload(d).unwrap())
                .collect();
            let recv: Vec<_> = set
                .iter()
                .map(|g| g.upload(&vec![f32::NAN; n * m]).unwrap())
                .collect();
            (send, recv)
        };
        for round in 0..3 {
            let (send, mut recv) = buffers(&set);
            let c = set.all_gather(&send, &mut recv).unwrap();
            assert_eq!(c.what(), "all_gather");
            if round == 0 {
                c.detach();
            } else {
                std::mem::forget(c);
            }
            if round < 2 {
                // A host read waits for the collective.
                for (d, r) in recv.iter().enumerate() {
                    assert_eq!(r.to_vec().unwrap(), want, "{m} devices, device {d}");
                }
            } else {
                // So does a launch that reads it, on a stream of its own.
                for (d, (g, r)) in set.iter().zip(&recv).enumerate() {
                    let mut y = g.alloc_zeroed::<f32>(n * m).unwrap();
                    saxpy(g, Grid::cover(n * m), 1.0, r, &mut y)
                        .unwrap()
                        .wait()
                        .unwrap();
                    assert_eq!(y.to_vec().unwrap(), want, "{m} devices, device {d}");
                }
            }
            // Sending buffers freed while the collective may be in flight wait for it too.
            drop(send);
        }
        // A leaked collective outlives the set: the set's communicators wait for their streams
        // when they go (and the streams go back to the contexts' pools), so the buffers hold
        // the result, and writing and freeing them is safe.
        let (send, mut recv) = buffers(&set);
        std::mem::forget(set.all_gather(&send, &mut recv).unwrap());
        let gpus = set.gpus().to_vec();
        drop(set);
        for (r, g) in recv.iter_mut().zip(&gpus) {
            assert_eq!(r.to_vec().unwrap(), want, "{m} devices, after the set went");
            r.copy_from(&vec![2.0; n * m]).unwrap();
            assert!(r.to_vec().unwrap().iter().all(|&v| v == 2.0));
            g.synchronize().unwrap();
        }
        drop((send, recv));
    }
}

#[test]
fn collectives_and_leaked_launches_on_other_streams_order_each_other_on_the_gpu() {
    let (_g, sets) = sets_of_every_size();
    for set in sets {
        let n = (1 << 16) + 3;
        let m = set.len();
        let g = Grid::cover(n);
        let data: Vec<Vec<f32>> = (0..m).map(|_| random_f32(n)).collect();
        let a: Vec<_> = set
            .iter()
            .zip(&data)
            .map(|(g, d)| g.upload(d).unwrap())
            .collect();
        let mut b: Vec<_> = set
            .iter()
            .map(|g| g.upload(&vec![f32::NAN; n]).unwrap())
            .collect();
        let gates: Vec<_> = set.iter().map(|g| g.signals(1).unwrap()).collect();
        // Each device's `b` is written behind a gate by a launch whose guard is leaked.
        for (d, gpu) in set.iter().enumerate() {
            std::mem::forget(gated_jacobi(gpu, g, &gates[d], &a[d], &mut b[d]).unwrap());
        }
        // On GPUs the gates open only once the all-reduce is queued behind those launches on
        // its own streams: a host wait for them on the way would stall until the kernels give
        // up (10 s). The simulator reduces on the host, in the call, so they open first there.
        let open = || gates.iter().for_each(|gate| gate.store(0, 1));
        if !cfg!(feature = "gpu") {
            open();
        }
        let c = set.all_reduce(&mut b, ReduceOp::Sum).unwrap();
        if cfg!(feature = "gpu") {
            open();
        }
        c.detach();
        // A launch reading the result, on the default stream, orders itself after the
        // collective.
        let mut want = vec![0.0f32; n];
        let mut step = vec![0.0f32; n];
        for x in &data {
            jacobi_host(x, &mut step);
            want.iter_mut().zip(&step).for_each(|(w, s)| *w += s);
        }
        for (d, (gpu, r)) in set.iter().zip(&b).enumerate() {
            let mut y = gpu.alloc_zeroed::<f32>(n).unwrap();
            saxpy(gpu, g, 1.0, r, &mut y).unwrap().wait().unwrap();
            assert_eq!(y.to_vec().unwrap(), want, "{m} devices, device {d}");
        }
    }
}

#[test]
fn reduce_and_reduce_scatter_match_the_host() {
    let (_g, sets) = sets_of_every_size();
    for set in sets {
        let m = set.len();
        let part = 1000 + 7;
        let data: Vec<Vec<i64>> = (0..m)
            .map(|d| {
                random_f32(part * m)
                    .iter()
                    .map(|v| (v * 1000.0) as i64 + d as i64)
                    .collect()
            })
            .collect();
        let upload = |data: &[Vec<i64>]| -> Vec<_> {
            set.iter()
                .zip(data)
                .map(|(g, d)| g.upload(d).unwrap())
                .collect()
        };
        for (op, f) in [
            (
                ReduceOp::Sum,
                (|a: i64, b: i64| a + b) as fn(i64, i64) -> i64,
            ),
            (ReduceOp::Min, |a: i64, b: i64| a.min(b)),
        ] {
            let want: Vec<i64> = (0..part * m)
                .map(|i| data.iter().map(|d| d[i]).reduce(f).unwrap())
                .collect();
            // Reduce to the last member; the others keep their data.
            let root = m - 1;
            let mut bufs = upload(&data);
            let c = set.reduce(&mut bufs, op, root).unwrap();
            assert_eq!(c.what(), "reduce");
            c.wait().unwrap();
            for (d, b) in bufs.iter().enumerate() {
                let expect = if d == root { &want } else { &data[d] };
                assert_eq!(&b.to_vec().unwrap(), expect, "{op:?}, device {d} of {m}");
            }
            // Reduce-scatter: member d gets part d of the reduction.
            let send = upload(&data);
            let mut recv: Vec<_> = set
                .iter()
                .map(|g| g.upload(&vec![i64::MIN; part]).unwrap())
                .collect();
            set.reduce_scatter(&send, &mut recv, op)
                .unwrap()
                .wait()
                .unwrap();
            for (d, r) in recv.iter().enumerate() {
                assert_eq!(
                    r.to_vec().unwrap(),
                    want[d * part..(d + 1) * part],
                    "{op:?}, device {d} of {m}"
                );
            }
        }
        // A receive buffer of the wrong length, and a root outside the set, are refused.
        let send = upload(&data);
        let mut short: Vec<_> = set
            .iter()
            .map(|g| g.alloc_zeroed::<i64>(part + 1).unwrap())
            .collect();
        let e = set
            .reduce_scatter(&send, &mut short, ReduceOp::Sum)
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e, Error::OnDevice { device: 0, .. }), "{e}");
        let mut bufs = upload(&data);
        assert!(set.reduce(&mut bufs, ReduceOp::Sum, m).is_err());
    }
}

#[test]
fn collectives_queued_from_several_threads_on_one_set_each_get_their_own_result() {
    let (_g, sets) = sets_of_every_size();
    for set in sets {
        let m = set.len() as u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let set = &set;
                s.spawn(move || {
                    for round in 0..20u64 {
                        let mut bufs: Vec<_> = set
                            .iter()
                            .enumerate()
                            .map(|(d, g)| {
                                g.upload(&vec![t * 1000 + round + d as u64; 4099]).unwrap()
                            })
                            .collect();
                        let c = set.all_reduce(&mut bufs, ReduceOp::Sum).unwrap();
                        // Half are waited for through the guard, half through the buffers.
                        if round % 2 == 0 {
                            c.wait().unwrap();
                        } else {
                            c.detach();
                        }
                        let want = m * (t * 1000 + round) + m * (m - 1) / 2;
                        for b in &bufs {
                            assert!(b.to_vec().unwrap().iter().all(|&v| v == want), "thread {t}");
                        }
                    }
                });
            }
        });
        set.synchronize().unwrap();
    }
}

#[test]
fn a_collective_of_one_device_set_runs_and_reports_through_its_guard() {
    let (_g, sets) = sets_of_every_size();
    for set in sets {
        let n = 4096 + 3;
        let mut bufs: Vec<_> = set
            .iter()
            .enumerate()
            .map(|(d, g)| g.upload(&vec![d as i64 + 1; n]).unwrap())
            .collect();
        let m = set.len() as i64;
        for _ in 0..3 {
            set.all_reduce(&mut bufs, ReduceOp::Sum)
                .unwrap()
                .wait()
                .unwrap();
        }
        // The first sum leaves 1 + 2 + … + m everywhere; each further one multiplies it by m.
        let want = m * (m + 1) / 2 * m * m;
        for b in &bufs {
            assert!(b.to_vec().unwrap().iter().all(|&v| v == want));
        }
        // Empty buffers queue nothing and wait for nothing.
        let mut empty: Vec<_> = set
            .iter()
            .map(|g| g.alloc_zeroed::<u8>(0).unwrap())
            .collect();
        set.broadcast(&mut empty, 0).unwrap().wait().unwrap();
        assert!(set.broadcast(&mut bufs, set.len()).is_err());
    }
}

#[test]
fn a_pipelined_launch_spreads_over_every_device() {
    let Some((_g, set)) = set(true) else { return };
    let n = (1 << 20) + 4321;
    let x = random_f32(n);
    let xs = set.shard_from(&x).unwrap();
    let mut ys = set.shard_zeroed_like::<f32, _>(&xs).unwrap();
    // Every device gets a share (equal links here: about half each).
    assert_eq!(xs.ranges().len(), set.len());
    for r in xs.ranges() {
        assert!(r.len() > n / (2 * set.len()), "{:?}", xs.ranges());
    }
    assert_eq!(xs.len(), n);
    let progress = Mutex::new(vec![(0usize, 0usize); set.len()]);
    let report = |d: usize, done: usize, chunks: usize| {
        let mut p = progress.lock().unwrap();
        assert!(done >= p[d].0, "progress went back on device {d}");
        p[d] = (done, chunks);
    };
    let opts = PipelineOptions {
        chunk_bytes: Some(64 << 10),
        streams: Some(2),
        ..Default::default()
    };
    let stats = set
        .pipelined(&xs, &mut ys, &report, |gpu, x, y, p| {
            p.follow(affine_one_pipelined(gpu, opts, 1.5, x, y)?)
        })
        .unwrap();
    assert_eq!(stats.len(), set.len());
    for (d, (done, chunks)) in progress.into_inner().unwrap().into_iter().enumerate() {
        assert!(
            chunks > 1 && done == chunks,
            "device {d}: {done} of {chunks}"
        );
    }
    let y = ys.to_vec();
    for i in (0..n).step_by(997).chain(n - 10..n) {
        assert_eq!(y[i], 1.5 * x[i] + 1.0, "element {i}");
    }
    assert_eq!(ys.get(n - 1), Some(&(1.5 * x[n - 1] + 1.0)));
}

/// A failing chunk on one device is reported with the device and the chunk's place in the whole
/// dataset. (The simulator only: on a GPU the trap would end the process's CUDA use.)
#[cfg(not(feature = "gpu"))]
#[test]
fn a_failed_chunk_names_the_device_and_the_chunk() {
    use berth_fixtures::faults::scale_finite_pipelined;
    let Some((_g, set)) = set(true) else { return };
    let chunk = 8192;
    let n = chunk * 40;
    let mut x = random_f32(n);
    let bad = n / 2 + chunk * 5 + 7;
    x[bad] = f32::NAN;
    let xs = set.shard_from(&x).unwrap();
    let mut ys = set.shard_zeroed_like::<f32, _>(&xs).unwrap();
    let start1 = xs.ranges()[1].start;
    assert!(xs.ranges()[1].contains(&bad));
    let opts = PipelineOptions {
        chunk_bytes: Some(chunk * 4),
        streams: Some(2),
        ..Default::default()
    };
    let err = set
        .pipelined(&xs, &mut ys, &|_, _, _| {}, |gpu, x, y, p| {
            p.follow(scale_finite_pipelined(gpu, opts, 2.0, x, y)?)
        })
        .unwrap_err();
    let Error::OnDevice {
        device: 1, source, ..
    } = &err
    else {
        panic!("expected an error of device 1, got {err}")
    };
    let Error::PipelineChunk {
        chunk: c, elements, ..
    } = source.as_ref()
    else {
        panic!("expected a failed chunk, got {source}")
    };
    // The fault stops every stream of the device, so a chunk before the failing one may not
    // have run either: the report names the first chunk that did not complete.
    let local = (bad - start1) / chunk;
    assert!(*c <= local, "{err}");
    assert_eq!(elements.len(), chunk, "{err}");
    assert!(
        elements.start <= bad && elements.start >= start1,
        "{elements:?} in the whole dataset: {err}"
    );
    assert!(err.to_string().contains("device 1 of the set"), "{err}");
}

/// A launch on one device reading another's buffer through a peer view, its guard leaked:
/// freeing the owner on its own device waits for the other device's kernel, which is still
/// held at a gate the host opens later. The kernel's output is right, and nothing is freed
/// under it.
#[test]
fn freeing_a_buffer_whose_peer_view_a_leaked_launch_reads_waits_for_it() {
    use berth_examples::chain::{gated_jacobi, jacobi_host};
    use std::time::{Duration, Instant};
    let Some((_g, set)) = set(true) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 50_001;
    let x = random_f32(n);
    let dx = g0.upload(&x).unwrap();
    let mut out = g1.upload(&vec![f32::NAN; n]).unwrap();
    let gate = g1.signals(1).unwrap();
    let view = dx.peer_view(g1).unwrap();
    std::mem::forget(gated_jacobi(g1, Grid::cover(n), &gate, &view, &mut out).unwrap());
    drop(view);
    let hold = Duration::from_millis(200);
    let freed_after = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(hold);
            gate.store(0, 1);
        });
        let t = Instant::now();
        drop(dx);
        t.elapsed()
    });
    assert!(
        freed_after >= hold / 2,
        "the owner was freed after {freed_after:?}, before the gate opened ({hold:?})"
    );
    let mut want = vec![0.0; n];
    jacobi_host(&x, &mut want);
    assert_eq!(out.to_vec().unwrap(), want);
}

/// Two devices, the second reading the first's memory in place, or `None` with the reason
/// printed: a view that is a copy is made by a host-waited peer copy.
fn peer_linked_set() -> Option<(std::sync::MutexGuard<'static, ()>, DeviceSet)> {
    let (g, set) = set(true)?;
    if !set.can_access_peer(1, 0).unwrap() {
        println!("skipped: device 1 cannot read device 0's memory in place");
        return None;
    }
    Some((g, set))
}

/// A write on one device whose guard is leaked, held at a gate, then a launch on another
/// device reading the written buffer through a peer view: the reader's stream waits for the
/// writer on the GPU, so the host queues it at once and only then opens the gate. A host wait
/// on the way would stall until the gated kernel gives up (10 s) and fails.
#[test]
fn a_launch_reading_a_peer_buffer_waits_for_the_owners_leaked_write_on_the_gpu() {
    let Some((_g, set)) = peer_linked_set() else {
        return;
    };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 50_001;
    let (x, y0) = (random_f32(n), random_f32(n));
    let a = g0.upload(&x).unwrap();
    let mut b = g0.upload(&vec![f32::NAN; n]).unwrap();
    let gate = g0.signals(1).unwrap();
    std::mem::forget(gated_jacobi(g0, Grid::cover(n), &gate, &a, &mut b).unwrap());
    let view = b.peer_view(g1).unwrap();
    assert_eq!(view.path(), PeerPath::Direct);
    let mut y = g1.upload(&y0).unwrap();
    let read = saxpy(g1, Grid::cover(n), 1.0, &view, &mut y).unwrap();
    gate.store(0, 1);
    read.wait().unwrap();
    let mut step = vec![0.0; n];
    jacobi_host(&x, &mut step);
    assert_eq!(y.to_vec().unwrap(), saxpy_host(1.0, &step, &y0));
}

/// The other way round: a launch on the second device reading the first's buffer in place,
/// its guard leaked and held at a gate, then a launch on the owner's device writing that
/// buffer. The writer's stream waits for the reader on the GPU; the reader sees the old
/// contents and the buffer ends with the new ones.
#[test]
fn a_write_on_the_owners_device_waits_for_a_leaked_peer_read_on_the_gpu() {
    let Some((_g, set)) = peer_linked_set() else {
        return;
    };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 50_001;
    let (x, z) = (random_f32(n), random_f32(n));
    let mut a = g0.upload(&x).unwrap();
    let mut out = g1.upload(&vec![f32::NAN; n]).unwrap();
    let gate = g1.signals(1).unwrap();
    let view = a.peer_view(g1).unwrap();
    std::mem::forget(gated_jacobi(g1, Grid::cover(n), &gate, &view, &mut out).unwrap());
    drop(view);
    let dz = g0.upload(&z).unwrap();
    let write = saxpy(g0, Grid::cover(n), 1.0, &dz, &mut a).unwrap();
    gate.store(0, 1);
    write.wait().unwrap();
    let mut want = vec![0.0; n];
    jacobi_host(&x, &mut want);
    assert_eq!(
        out.to_vec().unwrap(),
        want,
        "the reader saw the new contents"
    );
    assert_eq!(a.to_vec().unwrap(), saxpy_host(1.0, &z, &x));
}

/// A launch on the second device reading the first device's buffer in place, its guard leaked
/// and held at a gate, then an all-reduce that writes that buffer: on GPUs the collective is
/// ordered after the read on the GPU, so the gate opens only once the all-reduce is queued (a
/// host wait on the way would stall until the kernel gives up). The simulator reduces on the
/// host, in the call, so the gate opens first there. The reader sees the old contents.
#[test]
fn a_collective_is_ordered_after_a_leaked_peer_read_of_its_buffer() {
    let Some((_g, set)) = peer_linked_set() else {
        return;
    };
    let g1 = &set.gpus()[1];
    let n = (1 << 16) + 3;
    // Whole numbers: their sums, and the reader's quarters of them, are exact in any order.
    let data: Vec<Vec<f32>> = set
        .iter()
        .map(|_| random_f32(n).iter().map(|x| (x * 1000.0).round()).collect())
        .collect();
    let mut bufs: Vec<_> = set
        .iter()
        .zip(&data)
        .map(|(g, d)| g.upload(d).unwrap())
        .collect();
    let mut out = g1.upload(&vec![f32::NAN; n]).unwrap();
    let gate = g1.signals(1).unwrap();
    let view = bufs[0].peer_view(g1).unwrap();
    std::mem::forget(gated_jacobi(g1, Grid::cover(n), &gate, &view, &mut out).unwrap());
    drop(view);
    if !cfg!(feature = "gpu") {
        gate.store(0, 1);
    }
    let c = set.all_reduce(&mut bufs, ReduceOp::Sum).unwrap();
    if cfg!(feature = "gpu") {
        gate.store(0, 1);
    }
    c.wait().unwrap();
    let mut want = vec![0.0; n];
    jacobi_host(&data[0], &mut want);
    assert_eq!(
        out.to_vec().unwrap(),
        want,
        "the reader saw the reduced contents"
    );
    let sum: Vec<f32> = (0..n).map(|i| data.iter().map(|d| d[i]).sum()).collect();
    for (d, b) in bufs.iter().enumerate() {
        assert_eq!(b.to_vec().unwrap(), sum, "device {d}");
    }
}

/// A peer copy of a buffer that a leaked launch on its own device is still writing, held at a
/// gate another thread opens later: the copy is ordered after the write and holds its result.
#[test]
fn a_peer_copy_of_a_buffer_a_leaked_launch_writes_holds_the_written_values() {
    use std::time::Duration;
    let Some((_g, set)) = set(false) else { return };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 40_001;
    let x = random_f32(n);
    let a = g0.upload(&x).unwrap();
    let mut b = g0.upload(&vec![f32::NAN; n]).unwrap();
    let gate = g0.signals(1).unwrap();
    std::mem::forget(gated_jacobi(g0, Grid::cover(n), &gate, &a, &mut b).unwrap());
    let copy = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            gate.store(0, 1);
        });
        b.peer_copy(g1).unwrap()
    });
    assert_eq!(copy.path(), PeerPath::Copied);
    let mut y = g1.alloc_zeroed::<f32>(n).unwrap();
    saxpy(g1, Grid::cover(n), 1.0, &copy, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    let mut want = vec![0.0; n];
    jacobi_host(&x, &mut want);
    assert_eq!(y.to_vec().unwrap(), want);
}

/// Pipelined runs over every shard of a set, each leaked: reading the output shards waits
/// for the GPUs (no change behind the reader), and freeing the shards after that is clean.
#[test]
fn leaked_pipelined_runs_of_a_set_are_waited_for_by_reads_and_frees() {
    let Some((_g, set)) = set(true) else { return };
    let n = (1 << 19) + 77;
    let x = random_f32(n);
    let xs = set.shard_from(&x).unwrap();
    let mut ys = set.shard_zeroed_like::<f32, _>(&xs).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(64 << 10),
        streams: Some(2),
        ..Default::default()
    };
    for (d, gpu) in set.iter().enumerate() {
        let run = affine_one_pipelined(gpu, opts, -2.0, &xs.shards()[d], &mut ys.shards_mut()[d])
            .unwrap();
        std::mem::forget(run);
    }
    let y = ys.to_vec();
    for i in (0..n).step_by(509).chain(n - 5..n) {
        assert_eq!(y[i], -2.0 * x[i] + 1.0, "element {i}");
    }
    drop(ys);
    drop(xs);
    // The devices still work.
    let dx = set.gpus()[1].upload(&x[..1000]).unwrap();
    assert_eq!(dx.to_vec().unwrap(), &x[..1000]);
}

/// Inside a scope of the second device, a launch reading the first device's buffer in place,
/// then host copies into and out of that buffer on its own device: each copy first waits for
/// the scope's queued read (which makes the reader's context current) and then runs on the
/// owner's. The reader sees the old contents, the buffer the new ones.
#[test]
fn host_copies_after_a_scoped_peer_read_run_on_the_owners_device() {
    let Some((_g, set)) = peer_linked_set() else {
        return;
    };
    let (g0, g1) = (&set.gpus()[0], &set.gpus()[1]);
    let n = 50_001;
    let (x, y0, z) = (random_f32(n), random_f32(n), random_f32(n));
    let mut a = g0.upload(&x).unwrap();
    let mut y = g1.upload(&y0).unwrap();
    let back = g1
        .scope(|s| {
            let view = a.peer_view(g1)?;
            saxpy(s, Grid::cover(n), 2.0, &view, &mut y)?.detach();
            drop(view);
            a.copy_from(&z)?;
            a.to_vec()
        })
        .unwrap();
    assert_eq!(back, z, "the owner's buffer after the copy");
    assert_eq!(
        y.to_vec().unwrap(),
        saxpy_host(2.0, &x, &y0),
        "the scoped reader"
    );
}
