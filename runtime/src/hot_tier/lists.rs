//! Lists the host writes for the kernels a refresh queues: device memory, and the pinned
//! memory their copies come from.

use crate::buffer::DeviceBuffer;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::host_mem::PinnedBuffer;
use crate::queue::Queue;
use berth_device::DeviceCopy;

/// Entries of a miss log at most with room for captures ([`HotTier::capture_room`](super::HotTier::capture_room)): 16 MiB.
pub(super) const ROOM_MAX: usize = 1 << 22;

/// Lists a refresh puts on the device through pinned memory, without waiting for the work
/// queued (longer ones, as a refresh that admits a whole tier's worth of rows makes, are
/// copied from the host's list, so that the pinned memory kept stays small).
pub(super) const PINNED_LIST_MAX: usize = ROOM_MAX;

/// A list of `u32` the host rewrites for the kernels queued after it: device memory, and the
/// pinned memory its copies come from; each grown (to a power of two) when a list is longer,
/// and kept.
pub(super) struct Staged<T: DeviceCopy = u32> {
    pub(super) dev: DeviceBuffer<T>,
    pub(super) host: PinnedBuffer<T>,
}

impl<T: DeviceCopy> Staged<T> {
    pub(super) fn new(gpu: &Gpu) -> Result<Staged<T>> {
        Ok(Staged {
            dev: gpu.alloc_zeroed(0)?,
            host: gpu.pinned_zeroed(0)?,
        })
    }

    /// Put `data` at the start of the device list for the work queued next on `queue`:
    /// written into the pinned memory (waiting, on the host, only for the copy that last read
    /// it), then copied on `queue`'s stream and left queued ([`write`](Staged::write), then
    /// [`send`](Staged::send)).
    pub(super) fn put(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        data: &[T],
        pinned_max: usize,
    ) -> Result<()> {
        self.write(gpu, data, pinned_max)?;
        self.send(gpu, queue, 0, data, pinned_max)
    }

    /// [`send`](Staged::send) `data` to elements `at..` of the device list, where `written`
    /// says [`write`](Staged::write) wrote it already (on the ranking's thread); else write it
    /// first.
    pub(super) fn deliver(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        at: usize,
        data: &[T],
        pinned_max: usize,
        written: bool,
    ) -> Result<()> {
        if !written {
            self.write(gpu, data, pinned_max)?;
        }
        self.send(gpu, queue, at, data, pinned_max)
    }

    /// Write `data` into the pinned memory (grown if it is shorter), waiting, on the host,
    /// only for the copy that last read it; on any thread. Nothing for a list longer than
    /// `pinned_max`.
    pub(super) fn write(&mut self, gpu: &Gpu, data: &[T], pinned_max: usize) -> Result<()> {
        if data.len() > pinned_max {
            return Ok(());
        }
        if self.host.len() < data.len() {
            self.host = gpu.pinned_zeroed::<T>(data.len().next_power_of_two())?;
        }
        self.host[..data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Put `data`, which [`write`](Staged::write) wrote into the pinned memory, at elements
    /// `at..` of the device list for the work queued next on `queue`: copied on `queue`'s
    /// stream and left queued. The kernel queued next on that stream reads it after the copy;
    /// the buffers' uses record the copy, so that it follows the kernels still reading the
    /// list (on the GPU, by the stream or an event), and the next host access or the drop
    /// waits for it. A list written from 0 that is longer than the device list replaces it by
    /// a longer one (a power of two); one written from elsewhere must fit. A list longer than
    /// `pinned_max` is copied from `data` instead, the host waiting for the device list's
    /// readers.
    pub(super) fn send(
        &mut self,
        gpu: &Gpu,
        queue: &impl Queue,
        at: usize,
        data: &[T],
        pinned_max: usize,
    ) -> Result<()> {
        if at == 0 && self.dev.len() < data.len() {
            self.dev = gpu.alloc_zeroed::<T>(data.len().next_power_of_two())?;
        }
        if data.len() > pinned_max {
            return self.dev.copy_into_from(at, data);
        }
        self.dev
            .copy_into_from_pinned(queue, &self.host, data.len(), at)?
            .leave_queued();
        Ok(())
    }
}

/// The lists of a refresh's fill (rows and their slots) and slot table update (rows and their
/// entries), on the device and in pinned memory, which the ranking's thread writes.
pub(super) struct PlanLists {
    pub(super) fill: (Staged, Staged),
    pub(super) update: (Staged, Staged),
}

impl PlanLists {
    pub(super) fn new(gpu: &Gpu) -> Result<PlanLists> {
        Ok(PlanLists {
            fill: (Staged::new(gpu)?, Staged::new(gpu)?),
            update: (Staged::new(gpu)?, Staged::new(gpu)?),
        })
    }
}
