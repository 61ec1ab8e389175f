//! The example kernels against host references, at sizes that are and are not multiples of
//! the block: saxpy, block sums, the compute kernels.

use super::*;

#[test]
fn saxpy_matches_host_bit_for_bit() {
    let (_g, gpu) = gpu();
    for &n in SIZES {
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
        let want = saxpy_on(&gpu, a, &x, &y);
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
    assert_eq!(dy.to_vec().unwrap(), saxpy_on(&gpu, -0.75, &x, &y));
}

#[test]
fn block_sum_matches_host() {
    let (_g, gpu) = gpu();
    for &n in SIZES {
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
        let got = sum_f64(&parts);
        let want = sum_f64(&x);
        let scale: f64 = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>().max(1.0);
        assert!(
            (got - want).abs() <= 1e-5 * scale,
            "n = {n}: got {got}, want {want}"
        );
    }
}

#[test]
fn compute_kernels_match_host() {
    use berth::PipelineOptions;
    use berth_examples::{busy, relax, relax_pipelined};
    let (_g, gpu) = gpu();
    // relax: `steps` dependent multiply-adds from x[i], each as the backend computes it.
    let n = 50_003;
    let steps = 37;
    let x = random_f32(n);
    let host = |mut v: f32| {
        for _ in 0..steps {
            v = mul_add_on(&gpu, v, 0.9999, 0.0001);
        }
        v
    };
    let want: Vec<f32> = x.iter().map(|&v| host(v)).collect();
    let px = gpu.pinned_from(&x).unwrap();
    let mut py = gpu.pinned_zeroed::<f32>(n).unwrap();
    relax(&gpu, Grid::cover(n), steps, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &want[..]);
    py.fill(f32::NAN);
    let opts = PipelineOptions {
        chunk_bytes: Some(4096 * 4),
        ..Default::default()
    };
    relax_pipelined(&gpu, opts, steps, &px, &mut py)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&py[..], &want[..]);
    // busy: the same kind of chain from i * 1e-6.
    let m = 2 * 256 + 17;
    let mut out = gpu.upload(&vec![f32::NAN; m]).unwrap();
    busy(&gpu, Grid::cover(m), 100, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = (0..m)
        .map(|i| {
            let mut v = i as f32 * 1e-6;
            for _ in 0..100 {
                v = mul_add_on(&gpu, v, 0.999_999, 1e-7);
            }
            v
        })
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
}
