//! GPU tests: the example kernels on the real device, against host references on fresh
//! random data, at sizes that are and are not multiples of the block; the panic path with its
//! report and the recovery of the context; typed errors for bad launches.
//!
//! Built only with `--features gpu` (CI has no GPU): `cargo xtask gpu` stages them for the GPU
//! machine.
#![cfg(feature = "gpu")]

use berth::{Error, Gpu, Grid};
use berth_examples::{REDUCE_BLOCK, block_sum, saxpy, unchecked_copy};
use berth_tests::{random_f32, random_u32, reduce_blocks, saxpy_host, sum_f64};
use std::sync::Mutex;

/// Tests share the device; the fault test resets the primary context, so run one at a time.
static DEVICE: Mutex<()> = Mutex::new(());

fn gpu() -> (std::sync::MutexGuard<'static, ()>, Gpu) {
    let guard = DEVICE.lock().unwrap_or_else(|p| p.into_inner());
    (
        guard,
        Gpu::new().expect("a GPU is required for --features gpu"),
    )
}

const SIZES: [usize; 8] = [1, 255, 256, 257, 1000, 4099, (1 << 20) + 3, 10_000_019];

#[test]
fn saxpy_matches_host_bit_for_bit() {
    let (_g, gpu) = gpu();
    for n in SIZES {
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
        let want = saxpy_host(a, &x, &y);
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
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(-0.75, &x, &y));
}

#[test]
fn block_sum_matches_host() {
    let (_g, gpu) = gpu();
    for n in SIZES {
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
        let got: f64 = parts.iter().map(|&p| f64::from(p)).sum();
        let want = sum_f64(&x);
        let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
        assert!(
            (got - want).abs() <= 1e-5 * scale,
            "n = {n}: got {got}, want {want}"
        );
    }
}

#[test]
fn kernel_panic_is_reported_and_context_recovers() {
    let (_g, gpu) = gpu();
    let n = 1000;
    let x = gpu.upload(&random_u32(n)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(n).unwrap();
    // 1024 threads for 1000 elements: threads 1000.. index past the end.
    let err = unchecked_copy(&gpu, Grid::cover(n), &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report } = &err else {
        panic!("expected KernelPanic, got {err}");
    };
    assert_eq!(kernel, "unchecked_copy");
    assert!(report.file.ends_with("examples/src/lib.rs"), "{report}");
    assert!(
        report
            .message
            .contains("index out of bounds: the len is 1000 but the index is 10"),
        "{report}"
    );
    assert_eq!(
        report.block[0], 3,
        "only block 3 holds threads past 1000: {report}"
    );
    assert!(report.thread[0] >= 1000 - 768, "{report}");
    assert!(err.is_context_lost());
    eprintln!("reported: {err}");

    // The context is poisoned: further work is refused with a typed error, not a hang.
    assert!(gpu.is_lost());
    let again = gpu.alloc_zeroed::<u32>(4).unwrap_err();
    assert!(matches!(again, Error::ContextLost(_)), "{again}");
    drop(out);
    drop(x);

    // Recovery gives a working context.
    let gpu = gpu.recover().unwrap();
    let xs = random_f32(5000);
    let ys = random_f32(5000);
    let dx = gpu.upload(&xs).unwrap();
    let mut dy = gpu.upload(&ys).unwrap();
    saxpy(&gpu, Grid::cover(5000), 3.0, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(3.0, &xs, &ys));
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
    // A buffer of another context is refused before anything runs.
    let other = Gpu::new().unwrap();
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
fn new_context_after_an_unrecovered_fault_works() {
    let (_g, gpu) = gpu();
    let x = gpu.upload(&random_u32(300)).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(300).unwrap();
    let err = unchecked_copy(&gpu, Grid::cover(300), &x, &mut out)
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::KernelPanic { .. }), "{err}");
    // Keep the lost handles alive: a new Gpu must reset the poisoned context and mark them.
    let fresh = Gpu::new().unwrap();
    assert!(gpu.is_lost());
    let xs = random_f32(1000);
    let ys = random_f32(1000);
    let dx = fresh.upload(&xs).unwrap();
    let mut dy = fresh.upload(&ys).unwrap();
    saxpy(&fresh, Grid::cover(1000), 0.5, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), saxpy_host(0.5, &xs, &ys));
    drop((x, out, gpu));
}
