//! Attention on tensor cores (`berth_examples::attention`) against the host's softmax in
//! `f64` of the same rounded inputs, causal and not, for both head dimensions; and the
//! shapes the launcher refuses.

use super::*;
use berth::{DeviceBuffer, bf16, f16};
use berth_examples::attention::{
    ATTN_THREADS, AttentionInput, attention_shared_bytes, flash_attention, flash_attention_kernel,
};

/// `softmax(q · kᵀ / √d) · v` per matrix in `f64`, and for each output element the scale of
/// its rounding error: `Σ p_j |v_j| / Σ p_j`, the probability-weighted magnitude of the
/// values it averages.
pub(super) fn host_attention(
    (q, k, v): (&[f64], &[f64], &[f64]),
    bh: usize,
    seq: usize,
    d: usize,
    causal: bool,
) -> (Vec<f64>, Vec<f64>) {
    let scale = 1.0 / (d as f64).sqrt();
    let (mut out, mut mag) = (vec![0.0; bh * seq * d], vec![0.0; bh * seq * d]);
    let mut p = vec![0.0; seq];
    for h in 0..bh {
        let at = |i: usize| h * seq * d + i * d;
        for i in 0..seq {
            let keys = if causal { i + 1 } else { seq };
            for (j, pj) in p.iter_mut().enumerate().take(keys) {
                *pj = (0..d).map(|c| q[at(i) + c] * k[at(j) + c]).sum::<f64>() * scale;
            }
            let max = p[..keys].iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for pj in &mut p[..keys] {
                *pj = (*pj - max).exp();
                sum += *pj;
            }
            for c in 0..d {
                let (mut o, mut m) = (0.0, 0.0);
                for (j, pj) in p.iter().enumerate().take(keys) {
                    o += pj * v[at(j) + c];
                    m += pj * v[at(j) + c].abs();
                }
                out[at(i) + c] = o / sum;
                mag[at(i) + c] = m / sum;
            }
        }
    }
    (out, mag)
}

/// Runs the kernel on fresh random `q`, `k`, `v` rounded to `T` (`q` spread over `[-3, 3)`,
/// so that the rows' softmax is far from flat and the running maximum moves between key
/// steps) into a poisoned `o`, and checks every element against [`host_attention`].
fn check<T: AttentionInput>(
    gpu: &berth::Gpu,
    (bh, seq, d, causal): (usize, usize, usize, bool),
    round: impl Fn(f32) -> T,
    widen: impl Fn(T) -> f32,
    poison: T,
) {
    let n = bh * seq * d;
    let make = |spread: f32| -> Vec<T> {
        random_f32(n)
            .into_iter()
            .map(|x| round(x * spread))
            .collect()
    };
    let (q, k, v) = (make(3.0), make(1.0), make(1.0));
    let wide = |x: &[T]| -> Vec<f64> { x.iter().map(|&y| f64::from(widen(y))).collect() };
    let (dq, dk, dv): (DeviceBuffer<T>, DeviceBuffer<T>, DeviceBuffer<T>) = (
        gpu.upload(&q).unwrap(),
        gpu.upload(&k).unwrap(),
        gpu.upload(&v).unwrap(),
    );
    let mut dout = gpu.upload(&vec![poison; n]).unwrap();
    flash_attention(gpu, &dq, &dk, &dv, &mut dout, bh, seq, d, causal)
        .unwrap()
        .wait()
        .unwrap();
    let got = dout.to_vec().unwrap();
    let (want, mag) = host_attention((&wide(&q), &wide(&k), &wide(&v)), bh, seq, d, causal);
    for i in 0..n {
        // The kernel rounds the probabilities to `T` before `p · v` while the row sum keeps
        // them in `f32`: each product is off by at most the unit roundoff u (2^-8 for bf16,
        // 2^-11 for f16), so the average by at most u · Σ p_j |v_j| / Σ p_j = u · mag.
        // Rounding `o` to `T` adds u · |o| ≤ u · mag. Twice their sum (2^-6 · mag) leaves room
        // for the `f32` sums and `ex2.approx` (a few ulp of `f32`).
        let tol = mag[i] * 2f64.powi(-6) + 1e-6;
        let g = f64::from(widen(got[i]));
        assert!(
            (g - want[i]).abs() <= tol,
            "{} bh {bh} seq {seq} d {d} causal {causal}: o[{}][{}][{}] is {g}, want {} (±{tol})",
            std::any::type_name::<T>(),
            i / (seq * d),
            i / d % seq,
            i % d,
            want[i]
        );
    }
}

/// Sequence lengths of the `bf16` cases: one and two query tiles, and on the GPU a longer one
/// with many key steps.
const SEQS: &[usize] = if cfg!(feature = "gpu") {
    &[128, 256, 1024]
} else {
    &[128, 256]
};

fn check_bf16(gpu: &berth::Gpu, shape: (usize, usize, usize, bool)) {
    check(gpu, shape, bf16::from_f32, bf16::to_f32, bf16::NAN);
}

fn check_f16(gpu: &berth::Gpu, shape: (usize, usize, usize, bool)) {
    check(gpu, shape, f16::from_f32, f16::to_f32, f16::NAN);
}

#[test]
fn attention_with_64_wide_heads_matches_the_host() {
    let (_g, gpu) = gpu();
    for &seq in SEQS {
        for causal in [false, true] {
            check_bf16(&gpu, (2, seq, 64, causal));
        }
    }
    // Three matrices of three query tiles: the causal grid's reversed tile order.
    check_bf16(&gpu, (3, 384, 64, true));
    check_f16(&gpu, (2, 128, 64, true));
}

#[test]
fn attention_with_128_wide_heads_matches_the_host() {
    let (_g, gpu) = gpu();
    for &seq in SEQS {
        for causal in [false, true] {
            check_bf16(&gpu, (2, seq, 128, causal));
        }
    }
    check_bf16(&gpu, (3, 384, 128, true));
    check_f16(&gpu, (2, 128, 128, false));
}

#[test]
fn attention_refuses_shapes_it_is_not_built_for() {
    let (_g, gpu) = gpu();
    let buf = |n: usize| gpu.upload(&vec![bf16::from_f32(0.5); n]).unwrap();
    let refused = |r: berth::Result<berth::Pending<'_>>, what: &str| match r {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains(what), "{reason}"),
        Err(e) => panic!("expected InvalidLaunch naming {what:?}, got {e}"),
        Ok(_) => panic!("expected InvalidLaunch naming {what:?}, got a launch"),
    };
    // seq not a multiple of 128.
    let (q, k, v, mut o) = (
        buf(2 * 192 * 64),
        buf(2 * 192 * 64),
        buf(2 * 192 * 64),
        buf(2 * 192 * 64),
    );
    refused(
        flash_attention(&gpu, &q, &k, &v, &mut o, 2, 192, 64, false),
        "sequence length 192",
    );
    // A head dimension without an instance.
    let n = 128 * 96;
    let (q, k, v, mut o) = (buf(n), buf(n), buf(n), buf(n));
    refused(
        flash_attention(&gpu, &q, &k, &v, &mut o, 1, 128, 96, true),
        "head dimension 96",
    );
    // A buffer of the wrong length.
    let n = 128 * 64;
    let (q, k, v, mut o) = (buf(n), buf(n - 1), buf(n), buf(n));
    refused(
        flash_attention(&gpu, &q, &k, &v, &mut o, 1, 128, 64, false),
        "`k` holds",
    );
}

#[test]
fn the_attention_kernel_launched_directly_with_a_bad_length_stops_with_a_report() {
    // The report is a trap, which poisons the process's CUDA state on a GPU: a child runs it.
    in_child_on_the_gpu!(
        "the_attention_kernel_launched_directly_with_a_bad_length_stops_with_a_report"
    );
    let (_g, gpu) = gpu();
    // Past the launcher's checks: the kernel's own refuse the launch as a panic report.
    let n = 192 * 64;
    let buf = || gpu.upload(&vec![bf16::from_f32(0.5); n]).unwrap();
    let (q, k, v, mut o) = (buf(), buf(), buf(), buf());
    let grid = Grid::new(2, ATTN_THREADS as u32).shared_bytes(attention_shared_bytes(64) as u32);
    let r = flash_attention_kernel::<bf16, 64>(&gpu, grid, 192, false, 0.125, &q, &k, &v, &mut o)
        .and_then(|p| p.wait());
    match r {
        Err(Error::KernelPanic { .. }) => {}
        other => panic!("expected a kernel panic report, got {other:?}"),
    }
}
