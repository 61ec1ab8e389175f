//! Attention on warpgroup tensor cores (`berth_examples::attention_wgmma`: bulk tensor copies,
//! mbarriers, `wgmma` with the probabilities as a register A operand and `v` transposed)
//! against the host's softmax in `f64` of the same rounded inputs, causal and not, for both
//! head dimensions; and the shapes and maps the launcher refuses.

use super::attention::host_attention;
use super::*;
use berth::{DeviceBuffer, bf16, f16};
use berth_examples::attention::AttentionInput;
use berth_examples::attention_wgmma::{attention_wgmma_maps, flash_attention_wgmma};

/// Runs the kernel on fresh random `q`, `k`, `v` rounded to `T` (`q` spread over `[-3, 3)`,
/// so that the rows' softmax is far from flat and the running maximum moves between key
/// tiles) into a poisoned `o`, and checks every element against [`host_attention`].
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
    let maps = attention_wgmma_maps(gpu, [&dq, &dk, &dv], bh, seq, d).unwrap();
    let stream = gpu.stream().unwrap();
    flash_attention_wgmma(&stream, &maps, [&dq, &dk, &dv], &mut dout, causal)
        .unwrap()
        .wait()
        .unwrap();
    let got = dout.to_vec().unwrap();
    let (want, mag) = host_attention((&wide(&q), &wide(&k), &wide(&v)), bh, seq, d, causal);
    for i in 0..n {
        // As for the `mma.sync` kernel: the probabilities rounded to `T` before `p · v` and
        // `o` rounded to `T` each cost at most u · mag (u = 2^-8 for bf16, 2^-11 for f16);
        // twice their sum leaves room for the `f32` sums and `ex2.approx`.
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

/// Sequence lengths of the `bf16` cases: one and two query (and key) tiles, and on the GPU a
/// longer one with more key tiles than stages.
const SEQS: &[usize] = if cfg!(feature = "gpu") {
    &[128, 256, 1024]
} else {
    &[128, 256]
};

#[test]
fn wgmma_attention_with_64_wide_heads_matches_the_host() {
    let (_g, gpu) = gpu();
    for &seq in SEQS {
        for causal in [false, true] {
            check(
                &gpu,
                (2, seq, 64, causal),
                bf16::from_f32,
                bf16::to_f32,
                bf16::NAN,
            );
        }
    }
    // Three matrices of three query tiles: more key tiles than stages, the causal grid's
    // reversed tile order.
    check(
        &gpu,
        (3, 384, 64, true),
        bf16::from_f32,
        bf16::to_f32,
        bf16::NAN,
    );
    check(
        &gpu,
        (2, 128, 64, true),
        f16::from_f32,
        f16::to_f32,
        f16::NAN,
    );
}

#[test]
fn wgmma_attention_with_128_wide_heads_matches_the_host() {
    let (_g, gpu) = gpu();
    for &seq in SEQS {
        for causal in [false, true] {
            check(
                &gpu,
                (2, seq, 128, causal),
                bf16::from_f32,
                bf16::to_f32,
                bf16::NAN,
            );
        }
    }
    check(
        &gpu,
        (3, 384, 128, false),
        bf16::from_f32,
        bf16::to_f32,
        bf16::NAN,
    );
    check(
        &gpu,
        (2, 256, 128, true),
        f16::from_f32,
        f16::to_f32,
        f16::NAN,
    );
}

#[test]
fn wgmma_attention_refuses_other_shapes_and_other_buffers() {
    let (_g, gpu) = gpu();
    let buf = |n: usize| gpu.upload(&vec![bf16::from_f32(0.5); n]).unwrap();
    let refused = |e: Option<Error>, what: &str| match e {
        Some(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains(what), "{reason}"),
        other => panic!("expected InvalidLaunch naming {what:?}, got {other:?}"),
    };
    let n = 2 * 192 * 64;
    let (q, k, v) = (buf(n), buf(n), buf(n));
    refused(
        attention_wgmma_maps(&gpu, [&q, &k, &v], 2, 192, 64).err(),
        "sequence length 192",
    );
    let n = 128 * 96;
    let (q, k, v) = (buf(n), buf(n), buf(n));
    refused(
        attention_wgmma_maps(&gpu, [&q, &k, &v], 1, 128, 96).err(),
        "head dimension 96",
    );
    let n = 128 * 64;
    let (q, k, v, other) = (buf(n), buf(n - 1), buf(n), buf(n));
    refused(
        attention_wgmma_maps(&gpu, [&q, &k, &v], 1, 128, 64).err(),
        "`k` holds",
    );
    let k = buf(n);
    let maps = attention_wgmma_maps(&gpu, [&q, &k, &v], 1, 128, 64).unwrap();
    let stream = gpu.stream().unwrap();
    let mut o = buf(n);
    refused(
        flash_attention_wgmma(&stream, &maps, [&q, &other, &v], &mut o, false).err(),
        "other buffers",
    );
    let mut short = buf(n - 8);
    refused(
        flash_attention_wgmma(&stream, &maps, [&q, &k, &v], &mut short, false).err(),
        "`o` holds",
    );
}

#[test]
fn the_wgmma_attention_kernel_launched_directly_with_a_bad_length_stops_with_a_report() {
    use berth_examples::attention_wgmma::{
        FA3_THREADS, attention_wgmma_shared_bytes, flash_attention_wgmma_kernel,
    };
    // The report is a trap, which poisons the process's CUDA state on a GPU: a child runs it.
    in_child_on_the_gpu!(
        "the_wgmma_attention_kernel_launched_directly_with_a_bad_length_stops_with_a_report"
    );
    let (_g, gpu) = gpu();
    // Past the launcher's checks: the kernel's own refuse a sequence length that is not a
    // multiple of 128 as a panic report.
    let n = 192 * 64;
    let buf = || gpu.upload(&vec![bf16::from_f32(0.5); n]).unwrap();
    let (q, k, v, mut o) = (buf(), buf(), buf(), buf());
    let maps = [
        gpu.tensor_map(&q, 192, 64, 128).unwrap(),
        gpu.tensor_map(&k, 192, 64, 128).unwrap(),
        gpu.tensor_map(&v, 192, 64, 128).unwrap(),
    ];
    let maps = gpu.upload(&maps).unwrap();
    let grid =
        Grid::new(2, FA3_THREADS as u32).shared_bytes(attention_wgmma_shared_bytes(64) as u32);
    let r = flash_attention_wgmma_kernel::<bf16, 64>(
        &gpu, grid, 192, false, 0.125, &q, &k, &v, &maps, &mut o,
    )
    .and_then(|p| p.wait());
    match r {
        Err(Error::KernelPanic { .. }) => {}
        other => panic!("expected a kernel panic report, got {other:?}"),
    }
}
