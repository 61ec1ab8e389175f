//! Warp operations against their definitions (`berth_tests::warp_ref`): collectives,
//! 64-bit shuffles, partial warps.

use super::*;

#[test]
fn warp_collectives_match_their_definitions() {
    use berth_fixtures::warp_ops::{WARP_LANES_OUT, warp_lanes};
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for (n, block) in [(1, 32), (255, 256), (1000, 64), (4099, 256), (70_001, 128)] {
        // Small values make the votes and matches go both ways.
        let x: Vec<u32> = random_u32(n)
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 3 == 0 { v % 97 } else { v })
            .collect();
        let dx = gpu.upload(&x).unwrap();
        let mut out = gpu.upload(&vec![0xdead_beef; n * WARP_LANES_OUT]).unwrap();
        warp_lanes(&gpu, Grid::cover_with_block(n, block), &dx, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        let got = out.to_vec().unwrap();
        let want = warp_ref::warp_lanes(&x, block as usize);
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "n = {n}: thread {}, result {}: got {:#x}, want {:#x}",
                i / WARP_LANES_OUT,
                i % WARP_LANES_OUT,
                got[i],
                want[i]
            );
        }
    }
}

#[test]
fn warp_shuffles_move_64_bit_values_and_reduce_floats() {
    use berth_fixtures::warp_ops::warp_wide;
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for n in [1, 33, 256, 10_007] {
        let x: Vec<f64> = random_f32(n).iter().map(|&v| f64::from(v) / 3.0).collect();
        let y: Vec<i64> = random_u32(n)
            .iter()
            .map(|&v| (i64::from(v) << 31) - (1 << 62))
            .collect();
        let z = random_f32(n);
        let warps = n.div_ceil(32);
        let (dx, dy, dz) = (
            gpu.upload(&x).unwrap(),
            gpu.upload(&y).unwrap(),
            gpu.upload(&z).unwrap(),
        );
        let mut wide = gpu.upload(&vec![f64::NAN; n]).unwrap();
        let mut ints = gpu.upload(&vec![i64::MIN; n]).unwrap();
        let mut stats = gpu.upload(&vec![f32::NAN; 3 * warps]).unwrap();
        warp_wide(
            &gpu,
            Grid::cover(n),
            &dx,
            &dy,
            &dz,
            &mut wide,
            &mut ints,
            &mut stats,
        )
        .unwrap()
        .wait()
        .unwrap();
        let (w, i, s) = warp_ref::warp_wide(&x, &y, &z);
        assert_eq!(wide.to_vec().unwrap(), w, "n = {n}");
        assert_eq!(ints.to_vec().unwrap(), i, "n = {n}");
        let got = stats.to_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&s), "n = {n}: warp sums bit for bit");
    }
}

#[test]
fn partial_warps_have_only_the_lanes_inside_the_block() {
    use berth_fixtures::warp_ops::warp_active;
    use berth_tests::warp_ref;
    let (_g, gpu) = gpu();
    for block in [32usize, 48, 100, 256] {
        let mut out = gpu.upload(&vec![0xdead_beef; 2 * block]).unwrap();
        warp_active(&gpu, Grid::new(3, block as u32), &mut out)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            out.to_vec().unwrap(),
            warp_ref::warp_active(block),
            "block {block}"
        );
    }
}
