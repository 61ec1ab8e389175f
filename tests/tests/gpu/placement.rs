//! Placements: pinned memory copied asynchronously, mapped and registered host memory read
//! in place, write-combined inputs, and what tracing says each did.

use super::*;

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
    use berth_fixtures::args::mapped_iota;
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
    use berth_examples::gather_mapped;
    use berth_fixtures::args::mapped_iota;
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

/// Memory berth did not allocate — an `Arc<[f32]>` and small arrays on one heap page —
/// is read in place (`#[mapped]`) and copied from where it is (`#[pinned_async]`), is
/// refused by a `&mut` argument, and sharing a page twice reuses its registration (on the GPU
/// the driver would refuse a second registration of the page).
#[test]
fn shared_host_memory_is_read_in_place_and_copied_from_where_it_is() {
    use berth_examples::{gather_mapped, saxpy_pinned};
    use berth_fixtures::args::mapped_iota;
    use std::sync::Arc;
    let (_g, gpu) = gpu();
    let n = 50_000;
    let table: Arc<[f32]> = random_f32(n).into();
    let shared = gpu.share(table.clone()).unwrap();
    assert_eq!(
        shared.as_ptr(),
        table.as_ptr(),
        "registered in place, not copied"
    );
    let idx: Vec<u32> = random_u32(4096).iter().map(|i| i % n as u32).collect();
    let want: Vec<f32> = idx.iter().map(|&i| table[i as usize]).collect();
    let didx = gpu.upload(&idx).unwrap();
    let mut out = gpu.upload(&vec![f32::NAN; idx.len()]).unwrap();
    gather_mapped(&gpu, Grid::cover(idx.len()), &shared, &didx, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), want);

    let mut y = gpu.pinned_from(&vec![1.0f32; n]).unwrap();
    saxpy_pinned(&gpu, Grid::cover(n), 2.0, &shared, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        y.iter()
            .zip(table.iter())
            .all(|(&y, &x)| y == 1.0 + 2.0 * x)
    );

    // Read-only to launches.
    let mut words = gpu.share(Arc::<[u32]>::from(vec![0u32; 64])).unwrap();
    match mapped_iota(&gpu, Grid::cover(64), 7, &mut words) {
        Err(e) => assert!(e.to_string().contains("read-only memory"), "{e}"),
        Ok(_) => panic!("a kernel was allowed to write shared memory"),
    }

    // Small arrays, likely on one heap page, and one buffer shared twice.
    let small: Vec<Arc<[f32]>> = (0..8).map(|i| vec![i as f32; 100].into()).collect();
    let shares: Vec<_> = small
        .iter()
        .map(|a| gpu.share(a.clone()).unwrap())
        .collect();
    let again = gpu.share(small[3].clone()).unwrap();
    let mut sums = gpu.upload(&[0.0f32]).unwrap();
    for (i, s) in shares.iter().enumerate() {
        gather_mapped(
            &gpu,
            Grid::cover(1),
            s,
            &gpu.upload(&[99u32]).unwrap(),
            &mut sums,
        )
        .unwrap()
        .wait()
        .unwrap();
        assert_eq!(sums.to_vec().unwrap()[0], i as f32);
    }
    drop(shares);
    gather_mapped(
        &gpu,
        Grid::cover(1),
        &again,
        &gpu.upload(&[5u32]).unwrap(),
        &mut sums,
    )
    .unwrap()
    .wait()
    .unwrap();
    assert_eq!(sums.to_vec().unwrap()[0], 3.0);
}

/// Copies over host memory that crosses the edge of a shared registration arrive whole: the
/// driver refuses one copy over two registrations, or over registered and unregistered pages,
/// so berth cuts such a copy where a registration begins or ends.
#[test]
fn copies_across_the_edges_of_shared_registrations_arrive_whole() {
    use berth_examples::saxpy_pinned;
    let (_g, gpu) = gpu();
    let n = 8 * 1024;
    // `gpu.share` takes `'static` memory: a box given up here and taken back at the end.
    let raw: *mut [f32] = Box::into_raw(random_f32(n).into_boxed_slice());
    // SAFETY: `raw` is a live allocation that nothing else points to; it is freed below only
    // after every reference made from it here is dead (the shares dropped first).
    let data: &'static mut [f32] = unsafe { &mut *raw };
    // An edge inside a page: the tail's first page is also the head's last.
    let (head, tail) = data.split_at_mut(3 * 1024 + 7);
    let head: &'static [f32] = head;
    // The second share covers pages the first registered and pages it did not: it spans
    // two registrations.
    let first = gpu.share(&head[..1500]).unwrap();
    let second = gpu.share(&head[1000..]).unwrap();
    let m = head.len() - 1000;

    // Copied in by a launch (`#[pinned_async]`), and by an explicit copy.
    let mut y = gpu.pinned_from(&vec![1.0f32; m]).unwrap();
    saxpy_pinned(&gpu, Grid::cover(m), 2.0, &second, &mut y)
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        y.iter()
            .zip(&head[1000..])
            .all(|(&y, &x)| y == 1.0 + 2.0 * x)
    );
    let mut d = gpu.upload(&vec![f32::NAN; m]).unwrap();
    d.copy_from_pinned(&gpu, &second).unwrap().wait().unwrap();
    assert_eq!(d.to_vec().unwrap(), &head[1000..]);

    // Pageable memory whose first page is registered and the rest not, both ways.
    let want = random_f32(tail.len());
    let mut t = gpu.upload(&want).unwrap();
    t.copy_to(tail).unwrap();
    assert_eq!(&tail[..], &want[..]);
    t.copy_from(&vec![f32::NAN; tail.len()]).unwrap();
    t.copy_from(tail).unwrap();
    assert_eq!(t.to_vec().unwrap(), want);
    drop((first, second));
    // SAFETY: made by `Box::into_raw` above; the shares that held parts of it are dropped
    // (their registrations gone) and `head`, `tail` are not used again.
    drop(unsafe { Box::from_raw(raw) });
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

/// A device cache keeps the shared column read most within its budget: kernels read the
/// device copy as device memory (a plain `&[T]` argument) and get what the host memory holds,
/// the column it does not keep is read from host memory, and a group over the budget is a
/// typed error.
#[test]
fn a_device_cache_keeps_the_column_read_most_and_kernels_read_its_copy() {
    use berth::Placed;
    use berth_examples::{saxpy, saxpy_pinned};
    use std::sync::Arc;
    let (_g, gpu) = gpu();
    let n = 1 << 20;
    let hot_data: Arc<[f32]> = random_f32(n).into();
    let hot = gpu.share(hot_data.clone()).unwrap();
    let cold = gpu.share(Arc::<[f32]>::from(vec![3.0f32; n])).unwrap();
    let mut cache = gpu.device_cache(4 * n);
    cache.note(&[&hot, &cold]);
    assert!(cache.admit(&[&hot]).unwrap());
    assert!(
        !cache.admit(&[&cold]).unwrap(),
        "no room beside the column read most"
    );
    let mut y = gpu.upload(&vec![1.0f32; n]).unwrap();
    match cache.place(&hot) {
        Placed::Resident(x) => saxpy(&gpu, Grid::cover(n), 2.0, x, &mut y)
            .unwrap()
            .wait()
            .unwrap(),
        Placed::Host(_) => panic!("the column read most is not resident"),
    };
    let want: Vec<f32> = hot_data.iter().map(|&x| 1.0 + 2.0 * x).collect();
    assert_eq!(y.to_vec().unwrap(), want);
    let mut y = gpu.pinned_from(&vec![1.0f32; n]).unwrap();
    match cache.place(&cold) {
        Placed::Host(x) => saxpy_pinned(&gpu, Grid::cover(n), 2.0, x, &mut y)
            .unwrap()
            .wait()
            .unwrap(),
        Placed::Resident(_) => panic!("the budget holds one column"),
    };
    assert!(y.iter().all(|&v| v == 7.0));
    assert!(cache.resident_bytes() <= cache.budget());
    let e = cache.require(&[&hot, &cold]).unwrap_err();
    assert!(
        matches!(e, Error::DeviceBudget { needed, .. } if needed == 8 * n),
        "{e}"
    );
}
