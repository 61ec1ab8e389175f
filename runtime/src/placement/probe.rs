//! What the placement model measures on the device: the coherence attributes (read once per
//! context, or set for testing), and the random-read rate of one mapped allocation (the
//! runtime's probe kernel, timed with events, cached per allocation).

use crate::args::{ArgRef, MappedArg};
use crate::backend::StreamId;
use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::error::Result;
use crate::event::Timing;
use crate::gpu::Gpu;
use crate::launch::grid::Grid;
use crate::launch::kernel::Entry;
use crate::own_kernels::RANDOM_PROBE;
use crate::placement::calibration::link_costs;
use crate::placement::model::{DeviceProfile, probe_reads};
use berth_device::DeviceCopy;

/// The coherence attributes of the context `gpu` (see [`Gpu::device_profile`]).
pub(crate) fn device_profile(gpu: &Inner) -> Result<DeviceProfile> {
    if let Some(p) = gpu.profile.get() {
        return Ok(*p);
    }
    match gpu.ops().device_profile()? {
        Some(p) => Ok(*gpu.profile.get_or_init(|| p)),
        // No attributes to read: the default, until the context is given a profile.
        None => Ok(DeviceProfile::default()),
    }
}

/// Whether the context `gpu` reads host memory coherently ([`DeviceProfile::coherent`]);
/// `false` when the attributes cannot be read.
pub(crate) fn coherent(gpu: &Inner) -> bool {
    device_profile(gpu).is_ok_and(|p| p.coherent())
}

/// [`Gpu::measure_random_reads`] of the argument `a` on `stream`, `reads` reads a run.
pub(crate) fn random_read_rate(
    gpu: &Gpu,
    a: &ArgRef<'_>,
    stream: StreamId,
    reads: usize,
) -> Result<f64> {
    let inner = &gpu.inner;
    let key = (a.host, a.bytes);
    if let Some(&r) = inner.random_rates.lock().expect("poisoned").get(&key) {
        return Ok(r);
    }
    let words = a.bytes / 4;
    // Without a link (the simulator) there is no rate to measure: the model's stands.
    if !inner.ops().has_link() || words == 0 {
        return Ok(link_costs(inner).random_per_s(a.bytes));
    }
    inner.bind()?;
    let func = inner.ops().function(&RANDOM_PROBE, Entry::General)?;
    let sink: DeviceBuffer<u32> = gpu.alloc_zeroed(1)?;
    let timing = Timing::new(inner)?;
    let grid = Grid::cover(reads);
    let mut best = f64::INFINITY;
    for _ in 0..2 {
        let mut values = [a.addr, words as u64, reads as u64, sink.ptr];
        let mut ptrs = values.each_mut().map(|v| std::ptr::from_mut(v).cast());
        let ms = timing.time(stream, || {
            // SAFETY: RANDOM_PROBE takes four u64s (checked at load): the device address of
            // `words` live u32s of mapped memory (borrowed by the caller), the counts, and a
            // device u32 alive until after the wait in `time`. It only reads the memory.
            unsafe {
                inner
                    .ops()
                    .launch(&RANDOM_PROBE, func, &grid, stream, &mut ptrs)
            }
        })?;
        best = best.min(ms);
    }
    let rate = reads as f64 / (best.max(1e-6) * 1e-3);
    tracing::debug!(
        bytes = a.bytes,
        reads,
        rate_per_s = rate,
        model_per_s = link_costs(inner).random_per_s(a.bytes),
        "random-read rate of one mapped allocation measured"
    );
    inner
        .random_rates
        .lock()
        .expect("poisoned")
        .insert(key, rate);
    Ok(rate)
}

impl Gpu {
    /// Use `profile` as this context's coherence attributes instead of the device's: to run,
    /// on any machine (the simulator included), the paths a coherent system takes. `false`
    /// if the context already read or was given a profile.
    pub fn set_device_profile(&self, profile: DeviceProfile) -> bool {
        self.inner.profile.set(profile).is_ok()
    }

    /// The device's coherence attributes (all false on the simulator unless set with
    /// [`Gpu::set_device_profile`]).
    pub fn device_profile(&self) -> Result<DeviceProfile> {
        device_profile(&self.inner)
    }

    /// Random 4-byte reads per second of this mapped memory, measured once per allocation
    /// (two runs of the runtime's probe kernel, the faster kept) and cached: the rate of one
    /// allocation depends on its physical layout, not only its size. `#[auto]` launches use it
    /// for close calls ([`worth_probing`](crate::placement::worth_probing)). On the simulator
    /// (no link) it is the model's rate for the size. Waits for the GPU's default stream.
    pub fn measure_random_reads<T: DeviceCopy>(&self, memory: &impl MappedArg<T>) -> Result<f64> {
        let a = memory.__arg();
        let costs = link_costs(&self.inner);
        let reads = probe_reads(
            a.bytes as f64 / costs.copy_bytes_per_s,
            costs.random_per_s(a.bytes),
        );
        random_read_rate(self, &a, self.inner.default_stream, reads)
    }
}
