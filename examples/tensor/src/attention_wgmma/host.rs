//! The host side of [`flash_attention_wgmma_kernel`](super::flash_attention_wgmma_kernel): the
//! tensor maps of `q`, `k` and `v`, argument checks, the grid and the dynamic shared memory of
//! a launch.

use super::{FA3_BM, FA3_BN, FA3_THREADS, attention_wgmma_shared_bytes};
use crate::attention::AttentionInput;
use berth::tma::TensorMap;
use berth::{DeviceBuffer, Error, Gpu, Grid, Pending, Queue, Result};

/// The tensor maps of one attention's `q`, `k` and `v` ([`attention_wgmma_maps`]), in device
/// memory, with the shape and buffers they were made for.
pub struct AttentionWgmmaMaps {
    maps: DeviceBuffer<TensorMap>,
    shape: [usize; 3],
    bufs: [u64; 3],
}

fn refuse(reason: String) -> Error {
    Error::InvalidLaunch {
        kernel: "flash_attention_wgmma_kernel",
        reason,
    }
}

/// `batch_heads · seq · d` after checking the shape the kernel runs.
fn check(batch_heads: usize, seq: usize, d: usize) -> Result<usize> {
    if d != 64 && d != 128 {
        return Err(refuse(format!(
            "head dimension {d}: only 64 and 128 are built"
        )));
    }
    if seq == 0 || !seq.is_multiple_of(FA3_BM) {
        return Err(refuse(format!(
            "sequence length {seq}: must be a positive multiple of {FA3_BM}"
        )));
    }
    if batch_heads == 0 {
        return Err(refuse("batch_heads is 0".into()));
    }
    let len = batch_heads
        .checked_mul(seq)
        .and_then(|x| x.checked_mul(d))
        .ok_or_else(|| refuse(format!("{batch_heads}·{seq}·{d} elements overflow")))?;
    if u32::try_from(batch_heads * seq).is_err() {
        return Err(refuse(format!(
            "{batch_heads}·{seq} rows exceed what a tensor map addresses"
        )));
    }
    Ok(len)
}

fn check_lengths(len: usize, bufs: [(&str, usize); 4]) -> Result<()> {
    for (name, got) in bufs {
        if got != len {
            return Err(refuse(format!(
                "`{name}` holds {got} elements, not batch_heads·seq·d = {len}"
            )));
        }
    }
    Ok(())
}

/// The tensor maps [`flash_attention_wgmma`] needs for `q`, `k` and `v` (each
/// `[batch_heads, seq, d]` row-major, seen as `batch_heads·seq` rows of `d`, copied in boxes
/// of 128 rows by 64 columns): made once per set of buffers and shape, reused by every launch
/// on them.
///
/// # Errors
/// [`Error::InvalidLaunch`] for a shape the kernel does not run (`d` 64 or 128, `seq` a
/// positive multiple of 128, the buffers `batch_heads·seq·d` long); the runtime's errors.
pub fn attention_wgmma_maps<T: AttentionInput>(
    gpu: &Gpu,
    [q, k, v]: [&DeviceBuffer<T>; 3],
    batch_heads: usize,
    seq: usize,
    d: usize,
) -> Result<AttentionWgmmaMaps> {
    let len = check(batch_heads, seq, d)?;
    check_lengths(
        len,
        [("q", q.len()), ("k", k.len()), ("v", v.len()), ("o", len)],
    )?;
    let rows = batch_heads * seq;
    let maps = [
        gpu.tensor_map(q, rows, d, FA3_BN)?,
        gpu.tensor_map(k, rows, d, FA3_BN)?,
        gpu.tensor_map(v, rows, d, FA3_BN)?,
    ];
    Ok(AttentionWgmmaMaps {
        maps: gpu.upload(&maps)?,
        shape: [batch_heads, seq, d],
        bufs: [q.device_ptr(), k.device_ptr(), v.device_ptr()],
    })
}

/// `o = softmax(q · kᵀ / √d) · v` for each of `batch_heads` matrices on warpgroup tensor cores
/// (FlashAttention-3's layout), `q`, `k`, `v` and `o` all `[batch_heads, seq, d]` row-major,
/// with the maps [`attention_wgmma_maps`] made for these `q`, `k` and `v`; with `causal`,
/// query `i` attends to keys `0..=i` only. `f32` products, sums and softmax; `o` rounded to
/// `T`. Needs an sm_90 GPU (H100, H200) or the simulator. Asynchronous, as a kernel launcher:
/// `wait()` on the result.
///
/// # Errors
/// [`Error::InvalidLaunch`] when the maps were made for other buffers, or `o` is not
/// `batch_heads·seq·d` long; the launch's errors.
pub fn flash_attention_wgmma<'l, T: AttentionInput>(
    on: &'l impl Queue,
    maps: &'l AttentionWgmmaMaps,
    [q, k, v]: [&'l DeviceBuffer<T>; 3],
    o: &'l mut DeviceBuffer<T>,
    causal: bool,
) -> Result<Pending<'l>> {
    let [batch_heads, seq, d] = maps.shape;
    let len = check(batch_heads, seq, d)?;
    check_lengths(
        len,
        [
            ("q", q.len()),
            ("k", k.len()),
            ("v", v.len()),
            ("o", o.len()),
        ],
    )?;
    if maps.bufs != [q.device_ptr(), k.device_ptr(), v.device_ptr()] {
        return Err(refuse(
            "the tensor maps were made for other buffers (attention_wgmma_maps)".to_owned(),
        ));
    }
    let blocks = u32::try_from(batch_heads * (seq / FA3_BM))
        .map_err(|_| refuse(format!("{batch_heads}·{seq} / {FA3_BM} blocks exceed u32")))?;
    let seq32 = u32::try_from(seq).map_err(|_| refuse(format!("seq {seq} exceeds u32")))?;
    let grid =
        Grid::new(blocks, FA3_THREADS as u32).shared_bytes(attention_wgmma_shared_bytes(d) as u32);
    let scale = 1.0 / (d as f32).sqrt();
    T::__launch_wgmma(on, grid, d, seq32, causal, scale, [q, k, v], &maps.maps, o)
}
