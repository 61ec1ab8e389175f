//! Peer placement: device memory of one GPU used by a kernel on another ([`PeerView`]).
//!
//! Where the topology lets the launching device access the owner's memory
//! (`cuDeviceCanAccessPeer`, queried, never assumed), peer access is enabled on demand, once per
//! pair of contexts, and the kernel reads the owner's memory in place over the peer link
//! (NVLink on the H200 machines). Elsewhere the view is a copy on the launching device, made
//! with a peer copy when the view is made. Either way the view is a device argument of the
//! launching device: it goes where a `DeviceBuffer` goes, with the same compile-time check of
//! the argument's kind; kernels only read it (a `&mut [T]` argument refuses it at launch,
//! since writes to a copy would not reach the owner).

use crate::args::{ArgRef, DeviceArg, sealed};
use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::error::Result;
use crate::fault::Borrow;
use crate::gpu::Gpu;
use crate::track::Access;
use berth_device::DeviceCopy;
use std::sync::Arc;

/// How a [`PeerView`] reaches its owner's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerPath {
    /// The launching device is the owner.
    Local,
    /// In place, over the peer link (peer access enabled).
    Direct,
    /// A copy on the launching device, made when the view was made.
    Copied,
}

/// A [`DeviceBuffer`] of one device seen by kernels of another, for read-only slice arguments
/// without a placement attribute. Made by [`DeviceBuffer::peer_view`]; borrows its owner, so the
/// owner outlives every launch that reads it in place.
pub struct PeerView<'b, T> {
    owner: &'b DeviceBuffer<T>,
    on: Arc<Inner>,
    copy: Option<DeviceBuffer<T>>,
    path: PeerPath,
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// This buffer as an argument of kernels launched on `on`: in place where `on` can access
    /// this buffer's device (enabling peer access the first time), else a copy on `on` made
    /// now (a peer copy, waited for). Later writes to the buffer reach a direct view but not a
    /// copied one: make the view after the writes.
    ///
    /// Errors: a failed query, enable or copy ([`crate::Error::Driver`] naming the call), out
    /// of memory on `on` for the copy; [`crate::Error::Usage`] naming both devices if one is a
    /// GPU and the other the CPU simulator.
    pub fn peer_view(&self, on: &Gpu) -> Result<PeerView<'_, T>> {
        let view = |copy, path| PeerView {
            owner: self,
            on: on.inner.clone(),
            copy,
            path,
        };
        if Arc::ptr_eq(&self.gpu, &on.inner) {
            return Ok(view(None, PeerPath::Local));
        }
        self.gpu
            .same_backend(&on.inner, "DeviceBuffer::peer_view")?;
        let mine = self.gpu.ops();
        mine.fault().ensure_alive()?;
        if on.inner.reaches(&self.gpu)? {
            // Counted while the view lives, which keeps the owner's context from being reset
            // under launches that read its memory (refused if the owner was lost meanwhile).
            mine.fault().begin_borrow(Borrow::PeerView)?;
            return Ok(view(None, PeerPath::Direct));
        }
        self.peer_copy(on)
    }

    /// This buffer as an argument of kernels launched on `on`, always through a copy on `on`
    /// made now (a peer copy, waited for), even where `on` could read it in place. On the
    /// owner's own device the view is the buffer itself. Errors as for
    /// [`DeviceBuffer::peer_view`].
    pub fn peer_copy(&self, on: &Gpu) -> Result<PeerView<'_, T>> {
        let view = |copy, path| PeerView {
            owner: self,
            on: on.inner.clone(),
            copy,
            path,
        };
        if Arc::ptr_eq(&self.gpu, &on.inner) {
            return Ok(view(None, PeerPath::Local));
        }
        self.gpu
            .same_backend(&on.inner, "DeviceBuffer::peer_copy")?;
        let (mine, theirs) = (self.gpu.ops(), on.inner.ops());
        mine.fault().ensure_alive()?;
        let copy = on.alloc_zeroed::<T>(self.len())?;
        if self.bytes() > 0 {
            copy.uses.before_host_write();
            on.inner.bind()?;
            let stream = on.inner.default_stream;
            // The copy reads the owner's memory: earlier writers of it go first (the stream
            // waits for them, or the host does).
            self.uses
                .before_gpu(Access::Shared, Some((&on.inner, stream)));
            // SAFETY: `copy.ptr` is `bytes()` of device memory of `on`, `self.ptr` as many of
            // this buffer's device; both stay alive (the borrow of `self`, `copy` owned here)
            // until the stream is synchronised below; earlier writers of `self` are ordered
            // before the copy above, and `self` is borrowed shared, so nothing writes it
            // meanwhile.
            unsafe {
                theirs.copy_peer(stream, copy.ptr, mine, self.ptr, self.bytes(), "peer_view")
            }?;
            on.inner.sync(stream, None)?;
        }
        Ok(view(Some(copy), PeerPath::Copied))
    }
}

impl<T: DeviceCopy> PeerView<'_, T> {
    /// How the view reaches its owner's memory.
    pub fn path(&self) -> PeerPath {
        self.path
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.owner.is_empty()
    }
}

impl<T> Drop for PeerView<'_, T> {
    fn drop(&mut self) {
        if self.path == PeerPath::Direct {
            // Launches through the view whose guards were detached or leaked may still read
            // the owner's memory: a reset of the owner waits for them.
            let fault = self.owner.gpu.ops().fault();
            fault.note_peer_reads(self.owner.uses.pending_elsewhere(self.owner.gpu.id));
            fault.end_borrow(Borrow::PeerView);
        }
    }
}

impl<T> std::fmt::Debug for PeerView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerView")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<T> sealed::Sealed for PeerView<'_, T> {}

impl<T: DeviceCopy> DeviceArg<T> for PeerView<'_, T> {
    fn __arg(&self) -> ArgRef<'_> {
        let (mem, uses) = match &self.copy {
            Some(c) => (c.ptr, &c.uses),
            None => (self.owner.ptr, &self.owner.uses),
        };
        ArgRef {
            addr: mem,
            len: self.owner.len(),
            bytes: self.owner.bytes(),
            gpu: &self.on,
            flags: None,
            host: 0,
            uses,
            held: 0,
            read_only: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::DeviceSet;
    use crate::fault::Borrow;

    /// A view read in place is counted on its owner's context while it lives (a reset of the
    /// owner is refused meanwhile); a copied or local one is not, since it reads nothing of the
    /// owner's memory after it is made.
    #[test]
    fn a_direct_view_is_counted_on_its_owner_while_it_lives() {
        let set = DeviceSet::simulated(2);
        let (owner, on) = (&set.gpus()[1], &set.gpus()[0]);
        let views = || owner.inner.ops().fault().borrowed(Borrow::PeerView);
        let x = owner.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let (a, b) = (x.peer_view(on).unwrap(), x.peer_view(on).unwrap());
        assert_eq!(a.path(), PeerPath::Direct);
        assert_eq!(views(), 2);
        drop(a);
        assert_eq!(views(), 1);
        let (copied, local) = (x.peer_copy(on).unwrap(), x.peer_view(owner).unwrap());
        assert_eq!(
            (copied.path(), local.path()),
            (PeerPath::Copied, PeerPath::Local)
        );
        assert_eq!(views(), 1);
        drop((b, copied, local));
        assert_eq!(views(), 0);

        let unlinked = DeviceSet::simulated_without_peer_access(2);
        let y = unlinked.gpus()[1].upload(&[4u32]).unwrap();
        assert_eq!(
            y.peer_view(&unlinked.gpus()[0]).unwrap().path(),
            PeerPath::Copied
        );
        assert_eq!(
            unlinked.gpus()[1]
                .inner
                .ops()
                .fault()
                .borrowed(Borrow::PeerView),
            0
        );
    }

    /// The topology is asked, and peer access enabled, once per pair of contexts: later views
    /// of any buffer of the same owner reuse the answer; another owner context (another set,
    /// or one without links) is asked for itself.
    #[test]
    fn peer_access_is_asked_once_per_pair_of_contexts() {
        let set = DeviceSet::simulated(2);
        let (owner, on) = (&set.gpus()[1], &set.gpus()[0]);
        let (x, y) = (
            owner.upload(&[1u8; 4]).unwrap(),
            owner.upload(&[2u8; 4]).unwrap(),
        );
        for _ in 0..3 {
            assert_eq!(x.peer_view(on).unwrap().path(), PeerPath::Direct);
            assert_eq!(y.peer_view(on).unwrap().path(), PeerPath::Direct);
        }
        assert_eq!(on.inner.known_peers(), vec![(owner.inner.id, true)]);

        let unlinked = DeviceSet::simulated_without_peer_access(2);
        let z = unlinked.gpus()[1].upload(&[3u8; 4]).unwrap();
        let view = z.peer_view(&unlinked.gpus()[0]).unwrap();
        assert_eq!(view.path(), PeerPath::Copied);
        assert_eq!(
            unlinked.gpus()[0].inner.known_peers(),
            vec![(unlinked.gpus()[1].inner.id, false)]
        );
        assert_eq!(
            on.inner.known_peers().len(),
            1,
            "another set's answers are its own"
        );
    }

    /// A view or host buffer that is leaked (`mem::forget`) is never uncounted: its owner's
    /// context then stays un-resettable, which keeps the memory it points at alive. Leaked on
    /// two threads at once, both are counted.
    #[test]
    fn leaked_views_and_host_buffers_stay_counted() {
        let set = DeviceSet::simulated(2);
        let (owner, on) = (&set.gpus()[1], &set.gpus()[0]);
        let x = owner.upload(&[1u32, 2, 3]).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| std::mem::forget(x.peer_view(on).unwrap()));
            s.spawn(|| std::mem::forget(owner.pinned_zeroed::<u32>(8).unwrap()));
        });
        let fault = owner.inner.ops().fault();
        assert_eq!(fault.borrowed(Borrow::PeerView), 1);
        assert_eq!(fault.borrowed(Borrow::HostBuffer), 1);
    }

    /// Memory of one backend is never handed to a context of another (a CUDA GPU's device
    /// address is no host pointer for the simulator, and the simulator's memory is nothing a
    /// GPU reaches): a view or a copy either way is a typed error naming both devices, and
    /// nothing is counted or copied. A simulated context posing as a CUDA one stands in for
    /// the GPU (the real pair is tested on the GPU machine, `tests/tests/gpu/`).
    #[test]
    fn a_view_across_backends_is_refused() {
        use crate::backend::Backend;
        let sim = Gpu::simulator();
        let cuda = Gpu::from_backend(crate::backend::sim::testing::posing_as(Backend::Cuda));
        let (x, y) = (
            sim.upload(&[1u32, 2]).unwrap(),
            cuda.upload(&[3u32, 4]).unwrap(),
        );
        for e in [
            x.peer_view(&cuda).unwrap_err(),
            x.peer_copy(&cuda).unwrap_err(),
            y.peer_view(&sim).unwrap_err(),
            y.peer_copy(&sim).unwrap_err(),
        ] {
            let crate::Error::Usage(why) = &e else {
                panic!("{e:?}")
            };
            assert!(why.contains("different backends"), "{why}");
            for g in [&sim, &cuda] {
                assert!(why.contains(g.name()), "{why}");
            }
            assert!(
                why.contains("a CUDA GPU") && why.contains("the CPU simulator"),
                "{why}"
            );
        }
        for g in [&sim, &cuda] {
            assert_eq!(g.inner.ops().fault().borrowed(Borrow::PeerView), 0);
            assert!(g.inner.known_peers().is_empty(), "the topology was asked");
        }
    }

    /// Memory of a lost context is not handed to another device, in place or copied: a
    /// typed error, and nothing counted.
    #[test]
    fn a_view_of_a_lost_owner_is_refused() {
        let set = DeviceSet::simulated(2);
        let (owner, on) = (&set.gpus()[1], &set.gpus()[0]);
        let x = owner.upload(&[1u32, 2]).unwrap();
        owner
            .inner
            .ops()
            .fault()
            .mark_lost("lost for the test".into());
        for e in [x.peer_view(on).unwrap_err(), x.peer_copy(on).unwrap_err()] {
            assert!(
                matches!(e, crate::Error::ContextLost(ref why) if why == "lost for the test"),
                "{e:?}"
            );
        }
        assert_eq!(owner.inner.ops().fault().borrowed(Borrow::PeerView), 0);
    }
}
