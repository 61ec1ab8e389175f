//! The host side of [`wgmma_gemm_kernel`](super::wgmma_gemm_kernel): the tensor maps of the
//! operands, argument checks, the grid and the dynamic shared memory of a launch.

use super::{WG_BK, WG_BM, WG_BN, WG_SHARED_BYTES, WG_THREADS, wgmma_gemm_kernel};
use berth::tma::TensorMap;
use berth::{DeviceBuffer, DeviceCopy, Error, Gpu, Grid, Pending, Queue, Result, bf16, f16};

/// The element types the kernel is built for (`bf16`, `f16`).
pub trait WgmmaGemmInput: DeviceCopy + sealed::Sealed {
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn __launch<'l>(
        on: &'l impl Queue,
        grid: Grid,
        dims: [u32; 3],
        a: &'l DeviceBuffer<Self>,
        b: &'l DeviceBuffer<Self>,
        maps: &'l DeviceBuffer<TensorMap>,
        c: &'l mut DeviceBuffer<f32>,
    ) -> Result<Pending<'l>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for berth::bf16 {}
    impl Sealed for berth::f16 {}
}

macro_rules! input {
    ($t:ty) => {
        impl WgmmaGemmInput for $t {
            fn __launch<'l>(
                on: &'l impl Queue,
                grid: Grid,
                [m, n, k]: [u32; 3],
                a: &'l DeviceBuffer<Self>,
                b: &'l DeviceBuffer<Self>,
                maps: &'l DeviceBuffer<TensorMap>,
                c: &'l mut DeviceBuffer<f32>,
            ) -> Result<Pending<'l>> {
                wgmma_gemm_kernel::<$t>(on, grid, m, n, k, a, b, maps, c)
            }
        }
    };
}
input!(bf16);
input!(f16);

/// The tensor maps of one GEMM's `a` and `b` ([`wgmma_gemm_maps`]), in device memory, with the
/// shape they were made for.
pub struct WgmmaGemmMaps {
    maps: DeviceBuffer<TensorMap>,
    dims: [usize; 3],
    a: u64,
    b: u64,
}

/// The tensor maps [`wgmma_gemm`] needs for `a` (`m × k`) and `b` (`n × k`): made once per
/// pair of buffers and shape, reused by every launch on them.
///
/// # Errors
/// [`Error::InvalidLaunch`] for a shape the kernel does not run (`m`, `n`, `k` positive
/// multiples of 128, 256 and 64, the buffers `m·k` and `n·k` long); the runtime's errors.
pub fn wgmma_gemm_maps<T: WgmmaGemmInput>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<WgmmaGemmMaps> {
    check(m, n, k, a.len(), b.len(), None)?;
    let maps = [
        gpu.tensor_map(a, m, k, WG_BM)?,
        gpu.tensor_map(b, n, k, WG_BN)?,
    ];
    Ok(WgmmaGemmMaps {
        maps: gpu.upload(&maps)?,
        dims: [m, n, k],
        a: a.device_ptr(),
        b: b.device_ptr(),
    })
}

fn refuse(reason: String) -> Error {
    Error::InvalidLaunch {
        kernel: "wgmma_gemm_kernel",
        reason,
    }
}

fn check(m: usize, n: usize, k: usize, a: usize, b: usize, c: Option<usize>) -> Result<()> {
    if m == 0
        || n == 0
        || k == 0
        || !m.is_multiple_of(WG_BM)
        || !n.is_multiple_of(WG_BN)
        || !k.is_multiple_of(WG_BK)
        || u32::try_from(m.max(n).max(k)).is_err()
    {
        return Err(refuse(format!(
            "{m}×{n}×{k}: m, n and k must be positive multiples of {WG_BM}, {WG_BN} and {WG_BK}"
        )));
    }
    for (name, got, want) in [
        ("a", a, m * k),
        ("b", b, n * k),
        ("c", c.unwrap_or(m * n), m * n),
    ] {
        if got != want {
            return Err(refuse(format!("`{name}` holds {got} elements, not {want}")));
        }
    }
    Ok(())
}

/// `c = a · bᵀ` on warpgroup tensor cores: `a` (`m × k`) and `b` (`n × k`) row-major `T`,
/// `c` (`m × n`) row-major `f32`, with the maps [`wgmma_gemm_maps`] made for these `a` and
/// `b`. Needs an sm_90 GPU (H100, H200) or the simulator. Asynchronous, as a kernel launcher:
/// `wait()` on the result.
///
/// # Errors
/// [`Error::InvalidLaunch`] when the maps were made for other buffers or another shape, or
/// `c` is not `m·n` long; the launch's errors.
pub fn wgmma_gemm<'l, T: WgmmaGemmInput>(
    on: &'l impl Queue,
    maps: &'l WgmmaGemmMaps,
    a: &'l DeviceBuffer<T>,
    b: &'l DeviceBuffer<T>,
    c: &'l mut DeviceBuffer<f32>,
) -> Result<Pending<'l>> {
    let [m, n, k] = maps.dims;
    check(m, n, k, a.len(), b.len(), Some(c.len()))?;
    if maps.a != a.device_ptr() || maps.b != b.device_ptr() {
        return Err(refuse(
            "the tensor maps were made for other buffers (wgmma_gemm_maps)".to_owned(),
        ));
    }
    let blocks = u32::try_from((m / WG_BM) * (n / WG_BN))
        .map_err(|_| refuse(format!("{m}×{n} needs more than u32::MAX blocks")))?;
    let grid = Grid::new(blocks, WG_THREADS as u32).shared_bytes(WG_SHARED_BYTES as u32);
    T::__launch(
        on,
        grid,
        [m as u32, n as u32, k as u32],
        a,
        b,
        &maps.maps,
        c,
    )
}
