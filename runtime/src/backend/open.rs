//! Making a context of either backend: the CUDA driver on a device, or the simulator, alone
//! or as a member of a simulated device set. The layers above choose a backend here, once per
//! context ([`crate::gpu::Gpu`], [`crate::devices::DeviceSet`]), and never name the backends'
//! own modules.

use crate::backend::Ops;
use crate::backend::driver::Driver;
use crate::backend::sim::{Simulator, new_set_id};
use crate::error::Result;

/// A context of the CUDA driver on the device with ordinal `ordinal`.
pub(crate) fn cuda(ordinal: usize) -> Result<Box<dyn Ops>> {
    Ok(Box::new(Driver::with_ordinal(ordinal)?))
}

/// The number of CUDA devices: [`Error::NoDriver`](crate::error::Error::NoDriver) without a driver.
pub(crate) fn cuda_device_count() -> Result<usize> {
    crate::backend::driver::device_count()
}

/// A simulated context, a device set of its own.
pub(crate) fn simulator() -> Box<dyn Ops> {
    Box::new(Simulator::new())
}

/// A fresh simulated device set's identity, for [`simulated_member`].
pub(crate) fn new_simulated_set() -> u64 {
    new_set_id()
}

/// Device `index` of the simulated device set `set` of `count` devices; `links`: whether the
/// set's devices read each other's memory in place.
pub(crate) fn simulated_member(set: u64, index: usize, count: usize, links: bool) -> Box<dyn Ops> {
    Box::new(Simulator::member_of(set, index, count, links))
}
