//! The public handle of a context, [`Gpu`]: which device it runs on (a CUDA GPU or the CPU
//! simulator), what the device is, and context-wide waits, pools and recovery.

use crate::backend::open;
use crate::backend::{Backend, Ops};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::limits::DeviceLimits;
use crate::pool::PoolStats;
use std::sync::Arc;

/// A GPU context: one device, its default stream, and the kernels loaded into it.
///
/// Cheap to clone (a shared handle). Creating one never panics: without a driver or device it
/// returns [`Error::NoDriver`] / [`Error::NoDevice`].
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal())
            .field("name", &self.name())
            .finish()
    }
}

impl Gpu {
    pub(crate) fn from_backend(backend: Box<dyn Ops>) -> Gpu {
        Gpu {
            inner: Arc::new(Inner::new(backend)),
        }
    }

    /// The first GPU (ordinal 0).
    pub fn new() -> Result<Gpu> {
        Gpu::with_ordinal(0)
    }

    /// The GPU with the given ordinal.
    ///
    /// If the device's primary context was poisoned by an earlier fault (in this process),
    /// every berth handle on it is marked lost and the context is reset first: a poisoned
    /// context can never run anything again.
    pub fn with_ordinal(ordinal: usize) -> Result<Gpu> {
        Ok(Gpu::from_backend(open::cuda(ordinal)?))
    }

    /// The CPU simulator: kernels run on the host with GPU semantics (grid, blocks, barriers,
    /// shared memory) and checks the GPU cannot make. Always available.
    pub fn simulator() -> Gpu {
        Gpu::from_backend(open::simulator())
    }

    /// Device `index` of a simulated device set of `count` devices (`set` from
    /// `open::new_simulated_set`); `links`: whether they read each other's memory in place.
    pub(crate) fn simulated_member(set: u64, index: usize, count: usize, links: bool) -> Gpu {
        Gpu::from_backend(open::simulated_member(set, index, count, links))
    }

    /// The first GPU, or the CPU simulator when there is none (no driver or no device); the
    /// reason is logged. `BERTH_BACKEND=simulator` asks for the simulator, `cuda` insists on
    /// the GPU; any other value is an [`Error::Usage`] naming the valid ones. Which one you
    /// got: [`Gpu::backend`].
    pub fn new_or_simulator() -> Result<Gpu> {
        match std::env::var("BERTH_BACKEND") {
            Ok(v) if v == "simulator" || v == "sim" => return Ok(Gpu::simulator()),
            Ok(v) if v == "cuda" || v == "gpu" => return Gpu::new(),
            Ok(v) if !v.is_empty() => {
                return Err(Error::Usage(format!(
                    "BERTH_BACKEND={v:?} is not a backend: use `simulator` (or `sim`) for the CPU \
                     simulator, `cuda` (or `gpu`) to insist on a GPU, or leave it unset for a \
                     GPU when there is one and the simulator otherwise"
                )));
            }
            _ => {}
        }
        match Gpu::new() {
            Ok(g) => Ok(g),
            Err(e @ (Error::NoDriver(_) | Error::NoDevice { .. })) => {
                tracing::info!(reason = %e, "no GPU: falling back to the CPU simulator");
                Ok(Gpu::simulator())
            }
            Err(e) => Err(e),
        }
    }

    /// Which backend runs this context's kernels.
    pub fn backend(&self) -> Backend {
        self.inner.ops().kind()
    }

    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        self.inner.ops().name()
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ops().ordinal()
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.inner.ops().compute_capability()
    }

    /// (free, total) device memory in bytes (host memory on the simulator).
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.inner.ops().memory_info()
    }

    /// The launch limits of this context's device: read from the device on a GPU; on the
    /// simulator, the limits it enforces — [`DeviceLimits::H200`] unless
    /// [`Gpu::set_device_limits`] chose others.
    pub fn device_limits(&self) -> Result<DeviceLimits> {
        self.inner.ops().device_limits()
    }

    /// Make the simulator enforce `limits` (another GPU's, to check that launches fit it).
    /// `false` if this context already used or was given limits, or is a GPU (whose limits
    /// are its own).
    pub fn set_device_limits(&self, limits: DeviceLimits) -> bool {
        self.inner.ops().set_device_limits(limits)
    }

    /// Wait for all work on every stream of this context.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.ops().synchronize()
    }

    /// Allocation counters of the staging and pinned pools.
    pub fn pool_stats(&self) -> PoolStats {
        use std::sync::atomic::Ordering::Relaxed;
        let (s, p) = (&self.inner.staging, &self.inner.pinned);
        PoolStats {
            device_allocations: s.allocations.load(Relaxed),
            device_bytes: s.bytes.load(Relaxed),
            device_reuses: s.reuses.load(Relaxed),
            pinned_allocations: p.allocations.load(Relaxed),
            pinned_bytes: p.bytes.load(Relaxed),
            pinned_reuses: p.reuses.load(Relaxed),
        }
    }

    /// Free the memory cached by the pools (buffers in use are not affected).
    pub fn trim_pools(&self) -> Result<()> {
        self.inner.bind()?;
        self.inner.free_pools();
        Ok(())
    }

    /// Whether an earlier fault made this context unusable.
    pub fn is_lost(&self) -> bool {
        self.inner.ops().is_lost()
    }

    /// Tear down a context lost to a fault and return a fresh one on the same device.
    ///
    /// Every device buffer, stream and module of a lost GPU context becomes inert: dropping
    /// them frees nothing (the reset already released their memory). On the CPU simulator,
    /// which a failed kernel or a failed check stops as a fault stops a GPU, this returns a
    /// fresh simulated context of the same device, and the lost one's buffers stay
    /// ordinary memory, freed when dropped. Calling this on a healthy context is refused,
    /// since it would destroy live allocations. So is the reset while handles outside the context
    /// still use memory it would free: pinned, mapped or registered host buffers of the
    /// context (the host reads them in safe code), peer views of its memory, device sets with
    /// NCCL communicators on it, and cudarc objects made from it; and launches of other
    /// devices that read its memory through peer views since dropped (their guards leaked) and
    /// still run after two seconds of waiting for them. That is
    /// [`Error::ResetRefused`], naming how many of each; copy out what they hold, drop them
    /// and call this again (a refused call takes nothing: this handle stays). Once the
    /// context was reset, through this handle or another (or by a new `Gpu` on the device),
    /// a recovery through it is refused: it would reset the context made since.
    ///
    /// Some drivers keep the whole process's CUDA state unusable after a kernel trap, reset or
    /// not (NVIDIA 580 / CUDA 13 on the H200 does: measured, see GPU-RESULTS.md). Then this
    /// returns [`Error::ProcessPoisoned`], and the recovery is a new process:
    /// [`restart_process`](crate::restart_process) re-executes the program.
    pub fn recover(&self) -> Result<Gpu> {
        // The lost context's handles stay inert (their drops touch no driver object), so this
        // one may live on beside the fresh context; a refused call leaves it as it was.
        Ok(Gpu::from_backend(self.inner.ops().recover()?))
    }
}
