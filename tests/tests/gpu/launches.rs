//! Launches and their arguments: typed errors for bad launches and lengths, structs and
//! `bool`s by value, dynamic shared memory, two-dimensional grids.

use super::*;

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
    use berth_fixtures::args::{Affine, affine_clamp};
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
    use berth_fixtures::args::add_coordinates;
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
