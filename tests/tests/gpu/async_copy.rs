//! Asynchronous global-to-shared copies: a two-stage pipeline of tiles staged with
//! `cp.async`, each thread summing what its neighbour copied, against the host's sums.

use super::*;
use berth_fixtures::async_copy::stage_sums;

#[test]
fn tiles_staged_by_asynchronous_copies_sum_like_the_host() {
    let (_g, gpu) = gpu();
    // (blocks, threads per block, tiles per block), a partial warp among them.
    for (blocks, threads, tiles) in [(1, 32, 1), (3, 64, 2), (2, 256, 5), (4, 48, 3)] {
        let len = 4 * threads;
        let x = random_f32(blocks * tiles * len);
        let dx = gpu.upload(&x).unwrap();
        let mut out = gpu.upload(&vec![f32::NAN; blocks * threads]).unwrap();
        stage_sums(
            &gpu,
            Grid::new(blocks as u32, threads as u32),
            tiles as u32,
            &dx,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        let got = out.to_vec().unwrap();
        for b in 0..blocks {
            for t in 0..threads {
                let from = 4 * ((t + 1) % threads);
                // The kernel's order: tile by tile, four elements each, in `f32`.
                let want = (0..tiles).fold(0.0f32, |acc, k| {
                    (0..4).fold(acc, |acc, i| acc + x[(b * tiles + k) * len + from + i])
                });
                assert_eq!(
                    got[b * threads + t],
                    want,
                    "block {b}, thread {t} of {threads}, {tiles} tiles"
                );
            }
        }
    }
}
