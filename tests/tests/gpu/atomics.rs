//! Atomics: integer, wide and float atomics fold every element; scoped atomics count per
//! block and across the grid.

use super::*;

#[test]
fn atomics_count_and_return_previous_values() {
    use berth_examples::histogram;
    use berth_fixtures::args::tickets;
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
fn wide_and_float_atomics_fold_every_element() {
    use berth_fixtures::atomics::atomics_wide;
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
    use berth_fixtures::atomics::atomics_scoped;
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
