//! attention: berth's tensor-core attention forward kernels (`bf16` or `f16` `q`, `k`, `v`,
//! `[heads, seq, d]` row-major, `f32` softmax and sums) on random inputs: `--kernel mma`
//! (`flash_attention`, FlashAttention-2 on `mma.sync`, sm_80 and later) or `--kernel wgmma`
//! (`flash_attention_wgmma`, FlashAttention-3's layout on `wgmma` and bulk tensor copies,
//! sm_90); prints the median time of `--reps` runs (after one warm-up) and its TFLOP/s
//! (4·seq²·d per head, half of it with `--causal`), and checks sampled output rows against
//! the host's softmax in `f64`. The `wgmma` kernel's line names it after the element type
//! (`attention bf16 wgmma: …`).
//!
//! `cargo run --release -p berth-examples --bin attention -- [--kernel mma|wgmma] [--seq 4096]
//! [--d 128] [--heads 16] [--causal] [--f16] [--reps 20]` (`seq` a multiple of 128, `d` 64 or
//! 128; `heads` counts batch × heads). On the CPU simulator it runs once, at the size given
//! (keep it small there: `--seq 256 --heads 2`).

use berth::{Backend, DeviceBuffer, Gpu, bf16, f16};
use berth_examples::attention::{ATTN_BM, AttentionInput, flash_attention};
use berth_examples::attention_wgmma::{attention_wgmma_maps, flash_attention_wgmma};
use berth_examples::cli::{exit_with, init_logging};
use clap::Parser;
use rand::Rng;
use std::time::Instant;

type Failure = Box<dyn std::error::Error>;

fn main() {
    init_logging();
    exit_with("attention", run(Args::parse()));
}

/// The attention kernels the example runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kernel {
    /// FlashAttention-2 on warp-level `mma.sync`
    Mma,
    /// FlashAttention-3's layout on warpgroup `wgmma` and bulk tensor copies (sm_90)
    Wgmma,
}

/// berth's tensor-core attention forward pass, timed and checked.
#[derive(Parser)]
struct Args {
    /// The kernel: `mma` (`mma.sync`) or `wgmma` (warpgroup MMA, sm_90)
    #[arg(long, value_enum, default_value_t = Kernel::Mma)]
    kernel: Kernel,
    /// Sequence length (a multiple of 128)
    #[arg(long, default_value_t = 4096)]
    seq: usize,
    /// Head dimension (64 or 128)
    #[arg(long, default_value_t = 128)]
    d: usize,
    /// Independent attention matrices: batch × heads
    #[arg(long, default_value_t = 16)]
    heads: usize,
    /// Mask keys after each query (causal attention)
    #[arg(long)]
    causal: bool,
    /// `f16` inputs and output instead of `bf16`
    #[arg(long)]
    f16: bool,
    /// Timed repetitions (after one warm-up)
    #[arg(long, default_value_t = 20)]
    reps: usize,
}

/// The element types the kernel runs, with their conversions.
trait Input: AttentionInput + Send + Sync {
    const NAME: &'static str;
    fn round(x: f32) -> Self;
    fn widen(self) -> f32;
}

impl Input for bf16 {
    const NAME: &'static str = "bf16";
    fn round(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl Input for f16 {
    const NAME: &'static str = "f16";
    fn round(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// Row `i` of head `h`'s output on the host, in `f64`, and the probability-weighted mean of
/// `|v|` per column (the scale of the kernel's rounding error).
fn host_row(
    (q, k, v): (&[f32], &[f32], &[f32]),
    (seq, d, causal): (usize, usize, bool),
    h: usize,
    i: usize,
) -> (Vec<f64>, Vec<f64>) {
    let at = |r: usize| (h * seq + r) * d;
    let keys = if causal { i + 1 } else { seq };
    let scale = 1.0 / (d as f64).sqrt();
    let s: Vec<f64> = (0..keys)
        .map(|j| {
            (0..d)
                .map(|c| f64::from(q[at(i) + c]) * f64::from(k[at(j) + c]))
                .sum::<f64>()
                * scale
        })
        .collect();
    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = p.iter().sum();
    let (mut out, mut mag) = (vec![0.0; d], vec![0.0; d]);
    for (j, pj) in p.iter().enumerate() {
        for c in 0..d {
            out[c] += pj * f64::from(v[at(j) + c]) / sum;
            mag[c] += pj * f64::from(v[at(j) + c]).abs() / sum;
        }
    }
    (out, mag)
}

fn one<T: Input>(gpu: &Gpu, args: &Args, reps: usize) -> Result<bool, Failure> {
    let (seq, d, heads, causal) = (args.seq, args.d, args.heads, args.causal);
    let n = heads * seq * d;
    let mut rng = rand::rng();
    let mut random = |spread: f32| -> Vec<T> {
        (0..n)
            .map(|_| T::round(rng.random_range(-spread..spread)))
            .collect()
    };
    let (q, k, v) = (random(2.0), random(1.0), random(1.0));
    let (dq, dk, dv) = (gpu.upload(&q)?, gpu.upload(&k)?, gpu.upload(&v)?);
    let mut dout: DeviceBuffer<T> = gpu.upload(&vec![T::round(f32::NAN); n])?;
    let flops = 4.0 * (seq * seq * d * heads) as f64 * if causal { 0.5 } else { 1.0 };
    let stream = gpu.stream()?;
    let maps = if args.kernel == Kernel::Wgmma {
        Some(attention_wgmma_maps(gpu, [&dq, &dk, &dv], heads, seq, d)?)
    } else {
        None
    };
    let launch = |dout: &mut DeviceBuffer<T>| -> Result<(), Failure> {
        match &maps {
            Some(maps) => {
                flash_attention_wgmma(&stream, maps, [&dq, &dk, &dv], dout, causal)?.wait()?;
            }
            None => flash_attention(&stream, &dq, &dk, &dv, dout, heads, seq, d, causal)?.wait()?,
        }
        Ok(())
    };
    // One warm-up, then the median of the timed runs (as the PyTorch anchor reports); with no
    // repetitions (the simulator), one run.
    if reps > 0 {
        launch(&mut dout)?;
    }
    let mut times = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        launch(&mut dout)?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let best = times[times.len() / 2];
    let out = dout.to_vec()?;
    let widen = |x: &[T]| -> Vec<f32> { x.iter().map(|&y| y.widen()).collect() };
    let (qf, kf, vf) = (widen(&q), widen(&k), widen(&v));
    // Unit roundoff of `T` (bf16 2^-8, f16 2^-11) in the probabilities and in the output,
    // twice over: the tests' tolerance (`tests/tests/gpu/attention.rs`).
    let u = if T::NAME == "bf16" {
        2f64.powi(-8)
    } else {
        2f64.powi(-11)
    };
    let rows = 32;
    let mut off = 0;
    for _ in 0..rows {
        let (h, i) = (rng.random_range(0..heads), rng.random_range(0..seq));
        let (want, mag) = host_row((&qf, &kf, &vf), (seq, d, causal), h, i);
        for c in 0..d {
            let got = f64::from(out[(h * seq + i) * d + c].widen());
            if (got - want[c]).abs() > 4.0 * u * mag[c] + 1e-6 || got.is_nan() {
                off += 1;
            }
        }
    }
    println!(
        "attention {}{}: {heads} × {seq} × {d}{}: median {:.3} ms ({:.1} TFLOP/s); {off} of {} \
         sampled outputs off the host's",
        T::NAME,
        if args.kernel == Kernel::Wgmma {
            " wgmma"
        } else {
            ""
        },
        if causal { ", causal" } else { "" },
        best * 1e3,
        flops / best / 1e12,
        rows * d
    );
    Ok(off == 0)
}

fn run(args: Args) -> Result<bool, Failure> {
    let (seq, d) = (args.seq, args.d);
    if seq == 0 || !seq.is_multiple_of(ATTN_BM) || (d != 64 && d != 128) || args.heads == 0 {
        return Err(format!(
            "--seq {seq} --d {d} --heads {}: seq must be a positive multiple of {ATTN_BM}, d 64 \
             or 128, heads positive",
            args.heads
        )
        .into());
    }
    let gpu = Gpu::new_or_simulator()?;
    let reps = if gpu.backend() == Backend::Simulator {
        0
    } else {
        args.reps
    };
    println!("attention: on {}", gpu.name());
    if args.f16 {
        one::<f16>(&gpu, &args, reps)
    } else {
        one::<bf16>(&gpu, &args, reps)
    }
}
