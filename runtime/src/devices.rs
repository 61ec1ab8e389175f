//! Device sets: every GPU of the process (or a chosen few), one context per device, and the
//! simulated set that runs the same multi-GPU code on the CPU ([`DeviceSet`]).
//!
//! Each member is an ordinary [`Gpu`]: its own primary context, default stream, pools and
//! module cache. Host memory allocated by any member is portable (berth makes pinned and
//! mapped allocations portable whenever the process sees more than one device), so a staging
//! ring filled on one device's behalf can be copied to any other. Operations of the set that
//! fail on one member say which: [`Error::OnDevice`] names its index, ordinal and name.

use crate::backend::open;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use std::any::Any;
use std::sync::{Arc, Mutex};

/// Several devices, one context each: every GPU of the process ([`DeviceSet::all`]), a chosen
/// few ([`DeviceSet::cuda`]), or simulated devices on the CPU ([`DeviceSet::simulated`]).
///
/// Members are indexed `0..len()` in the order given; a member's [`Gpu::ordinal`] is its CUDA
/// ordinal (its index on the simulator). Cheap to clone (shared handles).
#[derive(Clone)]
pub struct DeviceSet {
    gpus: Vec<Gpu>,
    /// State the collectives keep for the set (NCCL communicators), made on first use.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) collectives: Arc<Mutex<Option<Box<dyn Any + Send>>>>,
}

impl std::fmt::Debug for DeviceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSet")
            .field("gpus", &self.gpus)
            .finish()
    }
}

impl DeviceSet {
    /// How many CUDA devices the driver reports: `Error::NoDriver` without a driver.
    pub fn cuda_count() -> Result<usize> {
        open::cuda_device_count()
    }

    /// Every CUDA device, in ordinal order. `Error::NoDriver` / `Error::NoDevice` when there
    /// is none; a device that fails to open is an [`Error::OnDevice`] naming it.
    pub fn all() -> Result<DeviceSet> {
        let n = DeviceSet::cuda_count()?;
        if n == 0 {
            return Err(Error::NoDevice {
                ordinal: 0,
                count: 0,
            });
        }
        DeviceSet::cuda(&(0..n).collect::<Vec<_>>())
    }

    /// The CUDA devices with these ordinals, in this order (each at most once).
    pub fn cuda(ordinals: &[usize]) -> Result<DeviceSet> {
        if ordinals.is_empty() {
            return Err(Error::Usage("DeviceSet::cuda: no ordinals given".into()));
        }
        for (i, o) in ordinals.iter().enumerate() {
            if ordinals[..i].contains(o) {
                return Err(Error::Usage(format!(
                    "DeviceSet::cuda: ordinal {o} is given twice (a device is one member)"
                )));
            }
        }
        let mut gpus = Vec::with_capacity(ordinals.len());
        for (device, &ordinal) in ordinals.iter().enumerate() {
            let gpu = Gpu::with_ordinal(ordinal).map_err(|e| match e {
                e @ (Error::NoDriver(_) | Error::NoDevice { .. }) => e,
                e => Error::OnDevice {
                    device,
                    ordinal,
                    name: "not opened".into(),
                    source: Box::new(e),
                },
            })?;
            gpus.push(gpu);
        }
        Ok(DeviceSet::of(gpus))
    }

    /// `count` (≥ 1) simulated devices on the CPU that read each other's memory in place, as
    /// GPUs with peer access do.
    pub fn simulated(count: usize) -> DeviceSet {
        DeviceSet::simulated_set(count, true)
    }

    /// `count` (≥ 1) simulated devices without peer links: memory of one member used on
    /// another is copied, as between GPUs that cannot access each other.
    pub fn simulated_without_peer_access(count: usize) -> DeviceSet {
        DeviceSet::simulated_set(count, false)
    }

    fn simulated_set(count: usize, links: bool) -> DeviceSet {
        let count = count.max(1);
        let set = open::new_simulated_set();
        DeviceSet::of(
            (0..count)
                .map(|i| Gpu::simulated_member(set, i, count, links))
                .collect(),
        )
    }

    fn of(gpus: Vec<Gpu>) -> DeviceSet {
        DeviceSet {
            gpus,
            collectives: Arc::new(Mutex::new(None)),
        }
    }

    /// Every GPU, or `simulated` simulated devices when there is no GPU (no driver or no
    /// device; the reason is logged). `BERTH_BACKEND` chooses as for
    /// [`Gpu::new_or_simulator`].
    pub fn all_or_simulated(simulated: usize) -> Result<DeviceSet> {
        match std::env::var("BERTH_BACKEND") {
            Ok(v) if v == "simulator" || v == "sim" => return Ok(DeviceSet::simulated(simulated)),
            Ok(v) if v == "cuda" || v == "gpu" => return DeviceSet::all(),
            Ok(v) if !v.is_empty() => {
                return Err(Error::Usage(format!(
                    "BERTH_BACKEND={v:?} is not a backend: use `simulator` (or `sim`) or `cuda` \
                     (or `gpu`), or leave it unset"
                )));
            }
            _ => {}
        }
        match DeviceSet::all() {
            Ok(s) => Ok(s),
            Err(e @ (Error::NoDriver(_) | Error::NoDevice { .. })) => {
                tracing::info!(reason = %e, "no GPU: a simulated device set");
                Ok(DeviceSet::simulated(simulated))
            }
            Err(e) => Err(e),
        }
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Whether the set has no device (never, for a set made by this type's constructors).
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// The members, in order.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Member `device`; an [`Error::Usage`] naming the set's size if there is none.
    pub fn device(&self, device: usize) -> Result<&Gpu> {
        self.gpus.get(device).ok_or_else(|| {
            Error::Usage(format!(
                "device {device} is not in the set: it has {} device(s)",
                self.gpus.len()
            ))
        })
    }

    /// Iterate over the members.
    pub fn iter(&self) -> std::slice::Iter<'_, Gpu> {
        self.gpus.iter()
    }

    /// Wrap `e`, a failure on member `device`, as an [`Error::OnDevice`] naming it.
    pub fn on_device(&self, device: usize, e: Error) -> Error {
        match (e, self.gpus.get(device)) {
            (e @ Error::OnDevice { .. }, _) => e,
            (e, Some(g)) => Error::OnDevice {
                device,
                ordinal: g.ordinal(),
                name: g.name().to_owned(),
                source: Box::new(e),
            },
            (e, None) => e,
        }
    }

    /// Run `f` on every member, one thread per member, and collect the results in order; the
    /// first failure (lowest index) as an [`Error::OnDevice`].
    pub fn run_each<R: Send>(&self, f: impl Fn(usize, &Gpu) -> Result<R> + Sync) -> Result<Vec<R>> {
        let results: Vec<Result<R>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .gpus
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let f = &f;
                    s.spawn(move || f(i, g))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r,
                    Err(p) => std::panic::resume_unwind(p),
                })
                .collect()
        });
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.map_err(|e| self.on_device(i, e)))
            .collect()
    }

    /// Wait for all work on every member; the first failure names its device.
    pub fn synchronize(&self) -> Result<()> {
        for (i, g) in self.gpus.iter().enumerate() {
            g.synchronize().map_err(|e| self.on_device(i, e))?;
        }
        Ok(())
    }

    /// Whether kernels on member `on` can access member `owner`'s device memory in place, as
    /// the topology says (`cuDeviceCanAccessPeer` on GPUs; queried, never assumed). `true` for
    /// `on == owner`.
    pub fn can_access_peer(&self, on: usize, owner: usize) -> Result<bool> {
        let (a, b) = (self.device(on)?, self.device(owner)?);
        a.can_access(b).map_err(|e| self.on_device(on, e))
    }
}

impl Gpu {
    /// Whether kernels of this context can access `owner`'s device memory in place: the same
    /// device, or a peer the topology links to this one (`cuDeviceCanAccessPeer`).
    pub fn can_access(&self, owner: &Gpu) -> Result<bool> {
        self.inner
            .ops()
            .can_access_peer(owner.inner.ops().peer_id())
    }
}

impl<'a> IntoIterator for &'a DeviceSet {
    type Item = &'a Gpu;
    type IntoIter = std::slice::Iter<'a, Gpu>;
    fn into_iter(self) -> Self::IntoIter {
        self.gpus.iter()
    }
}
