//! Explicit asynchronous copies between pinned host memory and device memory.
//!
//! Copies from pageable memory exist only as the synchronous, clearly named
//! [`Gpu::upload`](crate::Gpu::upload) / [`DeviceBuffer::to_vec`]; the asynchronous ones take
//! pinned memory by type, so a slow staged copy is never made silently.

use crate::args::PinnedArg;
use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::launch::pending::Pending;
use crate::queue::{Queue, QueueRef};
use crate::track::Access;
use berth_device::DeviceCopy;
use std::sync::Arc;

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Copy all of `src` (pinned host memory) into this buffer, asynchronously on `on`. The
    /// guard keeps both borrowed until the copy is done. Lengths must match. On a
    /// [`Scope`](crate::Scope) the copy is queued like a launch: dropping or detaching its
    /// guard leaves it queued without waiting (see [`Pending`]); the copy records an event of
    /// its own, so that writing `src` again in the scope waits for this copy, not for the
    /// kernels queued after it.
    pub fn copy_from_pinned<'l>(
        &'l mut self,
        on: &'l impl Queue,
        src: &'l impl PinnedArg<T>,
    ) -> Result<Pending<'l>> {
        let a = src.__arg();
        let (gpu, len) = (on.__queue().0, a.len);
        self.check_copy(gpu, a.gpu, len, "copy_from_pinned")?;
        self.copy_prefix_from_pinned(on, src, len)
    }

    /// Copy the first `n` elements of `src` (pinned host memory) into the first `n` of this
    /// buffer, asynchronously on `on`, as [`copy_from_pinned`](DeviceBuffer::copy_from_pinned)
    /// does; `n` is at most either length.
    pub(crate) fn copy_prefix_from_pinned<'l>(
        &'l mut self,
        on: &'l impl Queue,
        src: &'l impl PinnedArg<T>,
        n: usize,
    ) -> Result<Pending<'l>> {
        self.copy_into_from_pinned(on, src, n, 0)
    }

    /// Copy the first `n` elements of `src` (pinned host memory) into elements `at..at + n`
    /// of this buffer, asynchronously on `on`, as
    /// [`copy_from_pinned`](DeviceBuffer::copy_from_pinned) does; `n` at most `src`'s length,
    /// and `at + n` at most this buffer's.
    pub(crate) fn copy_into_from_pinned<'l>(
        &'l mut self,
        on: &'l impl Queue,
        src: &'l impl PinnedArg<T>,
        n: usize,
        at: usize,
    ) -> Result<Pending<'l>> {
        let QueueRef(gpu, stream, mode) = on.__queue();
        mode.not_recording("a copy")?;
        let a = src.__arg();
        self.check_copy(gpu, a.gpu, self.len(), "copy_into_from_pinned")?;
        let room = self.len().saturating_sub(at);
        if n > a.len || at > self.len() || n > room {
            return Err(Error::LengthMismatch {
                what: format!(
                    "DeviceBuffer::copy_into_from_pinned: elements to copy vs the pinned memory \
                     and the buffer's elements from {at}"
                ),
                expected: a.len.min(room),
                got: n,
            });
        }
        let bytes = n * std::mem::size_of::<T>();
        gpu.bind()?;
        a.uses.before_gpu(Access::Shared, Some((gpu, stream)));
        self.uses.before_gpu(Access::Exclusive, Some((gpu, stream)));
        // No reset between the check and the copy (see `FaultState::enter`).
        let _section = gpu.ops().fault().enter()?;
        if bytes > 0 {
            // SAFETY: `a.addr` is pinned memory of at least `bytes` bytes, and the device
            // allocation at `self.ptr` holds elements `at..at + n` (`n` is at most the pinned
            // length and `at + n` at most the buffer's, checked above); both stay borrowed by
            // the guard until completion.
            let dst = self.ptr + (at * std::mem::size_of::<T>()) as u64;
            unsafe { gpu.copy_h2d(stream, dst, a.addr, bytes, "copy host→device") }?;
        }
        tracing::debug!(bytes, memory = %a.flags.map_or_else(String::new, |f| f.to_string()), stream = ?stream, "copy host→device");
        let uses = [(a.uses, Access::Shared), (&self.uses, Access::Exclusive)];
        Pending::copy(gpu, stream, mode, "copy host→device", &uses)
    }

    /// Copy this buffer into `dst` (pinned host memory), asynchronously on `on`. The guard
    /// keeps both borrowed until the copy is done. Lengths must match. On a
    /// [`Scope`](crate::Scope), as [`DeviceBuffer::copy_from_pinned`].
    pub fn copy_to_pinned<'l>(
        &'l self,
        on: &'l impl Queue,
        dst: &'l mut impl PinnedArg<T>,
    ) -> Result<Pending<'l>> {
        let QueueRef(gpu, stream, mode) = on.__queue();
        mode.not_recording("a copy")?;
        let a = dst.__arg();
        self.check_copy(gpu, a.gpu, a.len, "copy_to_pinned")?;
        gpu.bind()?;
        a.uses.before_gpu(Access::Exclusive, Some((gpu, stream)));
        self.uses.before_gpu(Access::Shared, Some((gpu, stream)));
        // No reset between the check and the copy (see `FaultState::enter`).
        let _section = gpu.ops().fault().enter()?;
        if a.bytes > 0 {
            // SAFETY: as in copy_from_pinned; `dst` is borrowed mutably by the guard.
            unsafe { gpu.copy_d2h(stream, a.addr, self.ptr, a.bytes, "copy device→host") }?;
        }
        tracing::debug!(bytes = a.bytes, stream = ?stream, "copy device→host");
        let uses = [(a.uses, Access::Exclusive), (&self.uses, Access::Shared)];
        Pending::copy(gpu, stream, mode, "copy device→host", &uses)
    }

    fn check_copy(
        &self,
        queue_gpu: &Arc<Inner>,
        host_gpu: &Arc<Inner>,
        len: usize,
        what: &str,
    ) -> Result<()> {
        if !Arc::ptr_eq(queue_gpu, &self.gpu) || !Arc::ptr_eq(host_gpu, &self.gpu) {
            return Err(Error::Usage(format!(
                "DeviceBuffer::{what}: the buffers and the stream belong to different GPU contexts"
            )));
        }
        if len != self.len() {
            return Err(Error::LengthMismatch {
                what: format!("DeviceBuffer::{what}: pinned host buffer vs device buffer"),
                expected: self.len(),
                got: len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::gpu::Gpu;

    /// Copies at an offset write exactly the elements they name, and refuse any that would
    /// reach past the buffer (or read past the pinned memory), with a typed error and the
    /// buffer left as it was.
    #[test]
    fn copies_at_an_offset_stay_within_both_buffers() {
        let gpu = Gpu::simulator();
        let mut dev = gpu.upload(&[0u32; 8]).unwrap();
        let mut host = gpu.pinned_zeroed::<u32>(4).unwrap();
        host.copy_from_slice(&[1, 2, 3, 4]);
        dev.copy_into_from_pinned(&gpu, &host, 3, 5)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(dev.to_vec().unwrap(), [0, 0, 0, 0, 0, 1, 2, 3]);
        for (n, at) in [(4, 5), (1, 8), (0, 9), (5, 0)] {
            assert!(
                matches!(
                    dev.copy_into_from_pinned(&gpu, &host, n, at),
                    Err(Error::LengthMismatch { .. })
                ),
                "{n} at {at}"
            );
        }
        dev.copy_into_from(1, &[7, 8]).unwrap();
        for (at, data) in [(7, &[1u32, 2][..]), (9, &[][..])] {
            assert!(matches!(
                dev.copy_into_from(at, data),
                Err(Error::LengthMismatch { .. })
            ));
        }
        assert_eq!(dev.to_vec().unwrap(), [0, 7, 8, 0, 0, 1, 2, 3]);
        assert_eq!(dev.range_to_vec(1..3).unwrap(), [7, 8]);
        assert_eq!(dev.range_to_vec(6..20).unwrap(), [2, 3]);
        assert!(dev.range_to_vec(9..12).unwrap().is_empty());
        assert_eq!(dev.prefix_to_vec(2).unwrap(), [0, 7]);
    }
}
