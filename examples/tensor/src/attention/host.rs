//! The host side of [`flash_attention_kernel`](super::flash_attention_kernel): argument
//! checks, the grid and the dynamic shared memory of a launch.

use super::{ATTN_BM, ATTN_THREADS, attention_shared_bytes, flash_attention_kernel};
use crate::attention_wgmma::flash_attention_wgmma_kernel;
use berth::tma::TensorMap;
use berth::{DeviceBuffer, DeviceCopy, Error, Grid, Pending, Queue, Result, bf16, f16};

/// The element types the attention kernels are built for (`bf16`, `f16`): the `mma.sync`
/// kernel's and the warpgroup kernel's
/// ([`flash_attention_wgmma`](crate::attention_wgmma::flash_attention_wgmma)).
pub trait AttentionInput: DeviceCopy + sealed::Sealed {
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn __launch<'l>(
        on: &'l impl Queue,
        grid: Grid,
        d: usize,
        seq: u32,
        causal: bool,
        scale: f32,
        qkv: [&'l DeviceBuffer<Self>; 3],
        o: &'l mut DeviceBuffer<Self>,
    ) -> Result<Pending<'l>>;

    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn __launch_wgmma<'l>(
        on: &'l impl Queue,
        grid: Grid,
        d: usize,
        seq: u32,
        causal: bool,
        scale: f32,
        qkv: [&'l DeviceBuffer<Self>; 3],
        maps: &'l DeviceBuffer<TensorMap>,
        o: &'l mut DeviceBuffer<Self>,
    ) -> Result<Pending<'l>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for berth::bf16 {}
    impl Sealed for berth::f16 {}
}

macro_rules! input {
    ($t:ty) => {
        impl AttentionInput for $t {
            fn __launch<'l>(
                on: &'l impl Queue,
                grid: Grid,
                d: usize,
                seq: u32,
                causal: bool,
                scale: f32,
                [q, k, v]: [&'l DeviceBuffer<Self>; 3],
                o: &'l mut DeviceBuffer<Self>,
            ) -> Result<Pending<'l>> {
                if d == 64 {
                    flash_attention_kernel::<$t, 64>(on, grid, seq, causal, scale, q, k, v, o)
                } else {
                    flash_attention_kernel::<$t, 128>(on, grid, seq, causal, scale, q, k, v, o)
                }
            }

            fn __launch_wgmma<'l>(
                on: &'l impl Queue,
                grid: Grid,
                d: usize,
                seq: u32,
                causal: bool,
                scale: f32,
                [q, k, v]: [&'l DeviceBuffer<Self>; 3],
                maps: &'l DeviceBuffer<TensorMap>,
                o: &'l mut DeviceBuffer<Self>,
            ) -> Result<Pending<'l>> {
                if d == 64 {
                    flash_attention_wgmma_kernel::<$t, 64>(
                        on, grid, seq, causal, scale, q, k, v, maps, o,
                    )
                } else {
                    flash_attention_wgmma_kernel::<$t, 128>(
                        on, grid, seq, causal, scale, q, k, v, maps, o,
                    )
                }
            }
        }
    };
}
input!(bf16);
input!(f16);

/// `o = softmax(q · kᵀ / √d) · v` for each of `batch_heads` matrices, `q`, `k`, `v` and `o`
/// all `[batch_heads, seq, d]` row-major; with `causal`, query `i` attends to keys `0..=i`
/// only. `f32` products, sums and softmax; `o` rounded to `T`.
///
/// `d` must be 64 or 128 and `seq` a positive multiple of 128 ([`ATTN_BM`]); other shapes,
/// and buffers of another length than `batch_heads · seq · d`, are an
/// [`Error::InvalidLaunch`] before anything is queued. Asynchronous, as a kernel launcher:
/// `wait()` on the result.
#[allow(clippy::too_many_arguments)]
pub fn flash_attention<'l, T: AttentionInput>(
    on: &'l impl Queue,
    q: &'l DeviceBuffer<T>,
    k: &'l DeviceBuffer<T>,
    v: &'l DeviceBuffer<T>,
    o: &'l mut DeviceBuffer<T>,
    batch_heads: usize,
    seq: usize,
    d: usize,
    causal: bool,
) -> Result<Pending<'l>> {
    let refuse = |reason: String| Error::InvalidLaunch {
        kernel: "flash_attention_kernel",
        reason,
    };
    if d != 64 && d != 128 {
        return Err(refuse(format!(
            "head dimension {d}: only 64 and 128 are built"
        )));
    }
    if seq == 0 || !seq.is_multiple_of(ATTN_BM) {
        return Err(refuse(format!(
            "sequence length {seq}: must be a positive multiple of {ATTN_BM}"
        )));
    }
    if batch_heads == 0 {
        return Err(refuse("batch_heads is 0".into()));
    }
    let len = batch_heads
        .checked_mul(seq)
        .and_then(|x| x.checked_mul(d))
        .ok_or_else(|| refuse(format!("{batch_heads}·{seq}·{d} elements overflow")))?;
    for (name, got) in [
        ("q", q.len()),
        ("k", k.len()),
        ("v", v.len()),
        ("o", o.len()),
    ] {
        if got != len {
            return Err(refuse(format!(
                "`{name}` holds {got} elements, not batch_heads·seq·d = {len}"
            )));
        }
    }
    let blocks = u32::try_from(batch_heads * (seq / ATTN_BM))
        .map_err(|_| refuse(format!("{batch_heads}·{seq} / {ATTN_BM} blocks exceed u32")))?;
    let seq32 = u32::try_from(seq).map_err(|_| refuse(format!("seq {seq} exceeds u32")))?;
    let grid =
        Grid::new(blocks, ATTN_THREADS as u32).shared_bytes(attention_shared_bytes(d) as u32);
    let scale = 1.0 / (d as f32).sqrt();
    T::__launch(on, grid, d, seq32, causal, scale, [q, k, v], o)
}
