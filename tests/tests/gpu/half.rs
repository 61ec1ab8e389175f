//! Half precision: packed `f16x2` multiply-adds, a dot product accumulated in `f32`, and
//! every `f16`/`bf16` operation against the host's.

use super::*;

#[test]
fn haxpy2_rounds_each_fma_once() {
    use berth::device::half::{HalfExt, f16x2};
    use berth::f16;
    use berth_examples::half_precision::haxpy2;
    let (_g, gpu) = gpu();
    let pairs = |v: Vec<f32>| -> Vec<f16x2> {
        v.chunks(2)
            .map(|c| f16x2::new(f16::from_f32(c[0] * 50.0), f16::from_f32(c[1] * 50.0)))
            .collect()
    };
    for n in [1, 255, 256, 257, 100_003] {
        let (x, y) = (pairs(random_f32(2 * n)), pairs(random_f32(2 * n)));
        let a = f16x2::new(f16::from_f32(1.5), f16::from_f32(-0.3));
        let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
        let nan = f16x2::splat(f16::NAN);
        let mut out = gpu.upload(&vec![nan; n]).unwrap();
        haxpy2(&gpu, Grid::cover(n), a, &dx, &dy, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let got = out.to_vec().unwrap();
        for i in 0..n {
            // The correctly rounded a * x + y, element by element.
            let want = f16x2::new(a.lo.fma_rn(x[i].lo, y[i].lo), a.hi.fma_rn(x[i].hi, y[i].hi));
            assert_eq!(got[i].to_bits(), want.to_bits(), "n = {n}, pair {i}");
        }
    }
}

#[test]
fn hdot_accumulates_halves_in_f32() {
    use berth::device::half::f16x2;
    use berth::f16;
    use berth_examples::half_precision::{HDOT_BLOCK, hdot};
    let (_g, gpu) = gpu();
    for n in [1, 255, 4099, (1 << 20) + 3] {
        let v = |s: Vec<f32>| -> Vec<f16x2> {
            s.chunks(2)
                .map(|c| f16x2::new(f16::from_f32(c[0]), f16::from_f32(c[1])))
                .collect()
        };
        let (x, y) = (v(random_f32(2 * n)), v(random_f32(2 * n)));
        let blocks = n.div_ceil(HDOT_BLOCK as usize).clamp(1, 132 * 8) as u32;
        let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
        let mut partial = gpu.upload(&vec![f32::NAN; blocks as usize]).unwrap();
        hdot(&gpu, Grid::new(blocks, HDOT_BLOCK), &dx, &dy, &mut partial)
            .unwrap()
            .wait()
            .unwrap();
        let parts = partial.to_vec().unwrap();
        assert!(parts.iter().all(|p| p.is_finite()), "n = {n}");
        let got = sum_f64(&parts);
        let terms = x.iter().zip(&y).flat_map(|(a, b)| {
            [
                f64::from(a.lo.to_f32()) * f64::from(b.lo.to_f32()),
                f64::from(a.hi.to_f32()) * f64::from(b.hi.to_f32()),
            ]
        });
        let (want, scale) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
        assert!(
            (got - want).abs() <= 1e-5 * f64::max(scale, 1.0),
            "n = {n}: got {got}, want {want}"
        );
    }
}

#[test]
fn half_operations_match_their_host_definitions() {
    use berth::device::half::{HalfExt, bf16x2, f16x2};
    use berth::{bf16, f16};
    use berth_fixtures::half::{HALF_OPS_OUT, half_ops};
    let (_g, gpu) = gpu();
    let n = 50_001;
    let x: Vec<f16> = random_f32(n)
        .iter()
        .map(|&v| f16::from_f32(v * 100.0))
        .collect();
    let y: Vec<bf16> = random_f32(n)
        .iter()
        .map(|&v| bf16::from_f32(v * 1e4))
        .collect();
    let z: Vec<f32> = random_f32(n).iter().map(|&v| v * 300.0).collect();
    let (dx, dy, dz) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&y).unwrap(),
        gpu.upload(&z).unwrap(),
    );
    let k = HALF_OPS_OUT * n;
    let mut wide = gpu.upload(&vec![f32::NAN; k]).unwrap();
    let mut halves = gpu.upload(&vec![f16::NAN; k]).unwrap();
    let mut brains = gpu.upload(&vec![bf16::NAN; k]).unwrap();
    let mut pairs = gpu.upload(&vec![f16x2::splat(f16::NAN); n]).unwrap();
    half_ops(
        &gpu,
        Grid::cover(n),
        &dx,
        &dy,
        &dz,
        &mut wide,
        &mut halves,
        &mut brains,
        &mut pairs,
    )
    .unwrap()
    .wait()
    .unwrap();
    let (wide, halves) = (wide.to_vec().unwrap(), halves.to_vec().unwrap());
    let (brains, pairs) = (brains.to_vec().unwrap(), pairs.to_vec().unwrap());
    for i in 0..n {
        let (h, b, f) = (x[i], y[i], z[i]);
        // Conversions and single operations: the `half` crate's own (software) conversions
        // around one f32 operation, which rounds once.
        let (fh, fb) = (f16::from_f32(f), bf16::from_f32(f));
        let p = f16x2::new(
            f16::from_f32(f16::from_f32(f * 1.0).to_f32() * h.to_f32()),
            f16::from_f32(f16::from_f32(-f).to_f32() * h.to_f32()),
        );
        let p = f16x2::new(
            f16::from_f32(p.lo.to_f32() + f16::from_f32(b.to_f32()).to_f32()),
            f16::from_f32(p.hi.to_f32() + f16::from_f32(b.to_f32()).to_f32()),
        );
        let q = bf16x2::from_f32s(f, h.to_f32()).fma(bf16x2::splat(b), bf16x2::splat(fb));
        let r = (bf16x2::splat(b) + q) * q;
        let want_wide = [
            h.to_f32(),
            b.to_f32(),
            p.lo.to_f32() + p.hi.to_f32(),
            r.lo.to_f32() + r.hi.to_f32(),
        ];
        let want_halves = [
            fh,
            f16::from_f32(h.to_f32() + fh.to_f32()),
            f16::from_f32(h.to_f32() * fh.to_f32()),
            h.fma_rn(h, fh),
        ];
        let want_brains = [
            fb,
            bf16::from_f32(b.to_f32() + fb.to_f32()),
            bf16::from_f32(b.to_f32() * fb.to_f32()),
            b.fma_rn(b, fb),
        ];
        let s = HALF_OPS_OUT * i..HALF_OPS_OUT * (i + 1);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&wide[s.clone()]), bits(&want_wide), "element {i}");
        let hb = |v: &[f16]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(hb(&halves[s.clone()]), hb(&want_halves), "element {i}");
        let bb = |v: &[bf16]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bb(&brains[s]), bb(&want_brains), "element {i}");
        let want_pair = f16x2::new(p.lo, f16::from_f32(q.hi.to_f32()));
        assert_eq!(pairs[i].to_bits(), want_pair.to_bits(), "element {i}");
    }
}
