//! Collectives on the [`DeviceBuffer`]s of a [`DeviceSet`]: all-reduce, broadcast,
//! all-gather, reduce and reduce-scatter (NCCL's five), one buffer per member.
//!
//! On GPUs they are NCCL's (through cudarc's `nccl` module; berth's `nccl` feature), run from
//! one process and one thread: the set's communicators are made once with `ncclCommInitAll`,
//! and each collective is queued for every member inside one NCCL group
//! (`ncclGroupStart`/`ncclGroupEnd`), on a stream of each member's own. One thread suffices
//! because NCCL calls only queue work; the group lets one thread queue every rank's part
//! without deadlocking on the first. One process per device (`ncclCommInitRank` with an id
//! shared out of band) is the shape for several hosts; `docs/multi-gpu.md` says how the same
//! calls map there.
//!
//! A collective returns once queued, with a guard ([`Collective`]) that keeps its buffers
//! borrowed: [`Collective::wait`] waits for each member's collective stream and returns the
//! outcome, naming the device of a failure; dropping the guard also waits. Each buffer also
//! records the NCCL work as a use of its memory (exclusive for what it writes), as a launch's
//! does, so a guard that is detached or leaked leaves nothing unsound: reading, writing or
//! freeing a buffer, or launching on it, waits for the collective first.
//!
//! On the simulator the set performs the collectives itself, on the host, with the same
//! checks and results, so that the multi-GPU code paths run in CI.

use crate::backend::CollectiveEngine;
use crate::buffer::DeviceBuffer;
use crate::devices::DeviceSet;
use crate::error::{Error, Result};
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::sync::Arc;

mod comms;
mod ops;

use comms::Members;
pub use ops::{CollectiveType, ReduceOp};

/// A collective in flight on every member of a set. It keeps the collective's buffers
/// borrowed; [`Collective::wait`] waits for every member's part and returns the outcome (a
/// failure as [`Error::OnDevice`], naming the member). Dropping it without waiting also waits
/// (a failure is then kept for the member's next synchronise).
///
/// [`Collective::detach`] leaves the collective queued instead: its buffers' borrows end, and
/// host access to them, or a launch that takes them, waits for the collective first (a launch
/// queued on the collective's stream needs no wait). Leaking the guard with `mem::forget` does
/// the same. On the simulator the collective is complete when the call returns.
#[must_use = "a collective is asynchronous: call .wait() for its outcome, or .detach() to leave it queued"]
pub struct Collective<'a> {
    set: &'a DeviceSet,
    what: &'static str,
    /// Each member's collective stream and the end of the work queued there, in member order;
    /// empty on the simulator, and once waited for or detached.
    members: Members,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> Collective<'a> {
    fn new(set: &'a DeviceSet, what: &'static str, members: Members) -> Self {
        Collective {
            set,
            what,
            members,
            _borrows: PhantomData,
        }
    }

    /// Wait for the collective on every member; the first failure (lowest member) names its
    /// device. Every member is waited for even after a failure.
    pub fn wait(mut self) -> Result<()> {
        let mut first = Ok(());
        for (i, r) in self.finish().into_iter().enumerate() {
            if let Err(e) = r {
                first = first.and(Err(self.set.on_device(i, e)));
            }
        }
        first
    }

    /// Leave the collective queued: see [`Collective`].
    pub fn detach(mut self) {
        self.members.clear();
    }

    /// Which collective this is (`"all_reduce"`, `"broadcast"`, `"all_gather"`, `"reduce"` or
    /// `"reduce_scatter"`).
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// Wait for each member's stream and mark its part done: the outcome per member. A member
    /// lost meanwhile does not hold the others up forever ([`comms::wait_parts`]).
    fn finish(&mut self) -> Vec<Result<()>> {
        let members = std::mem::take(&mut self.members);
        if members.is_empty() {
            return Vec::new();
        }
        comms::wait_parts(self.set, members, self.what)
    }
}

impl Drop for Collective<'_> {
    fn drop(&mut self) {
        let streams: Vec<_> = self.members.iter().map(|(s, _)| *s).collect();
        for ((r, stream), g) in self.finish().into_iter().zip(streams).zip(self.set.iter()) {
            if let Err(e) = r {
                // Nobody asked for the outcome: keep it for the member's next synchronise.
                g.inner.keep_failure(stream, e);
            }
        }
    }
}

impl std::fmt::Debug for Collective<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collective")
            .field("what", &self.what)
            .field("members", &self.members.len())
            .finish()
    }
}

impl DeviceSet {
    /// Replace every buffer by the element-wise reduction (`op`) of all of them. `bufs[i]`
    /// belongs to member `i`; all have one length. Returns once queued: see [`Collective`].
    pub fn all_reduce<'a, T: CollectiveType>(
        &'a self,
        bufs: &'a mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<Collective<'a>> {
        let len = self.check_buffers("all_reduce", bufs.iter(), None)?;
        let done = Collective::new(self, "all_reduce", Vec::new());
        if len == 0 {
            return Ok(done);
        }
        if self.on_host() {
            let acc = self.combine_all(bufs.iter(), op)?;
            return self.write_all(bufs.iter_mut(), &acc).map(|()| done);
        }
        nccl::all_reduce(self, bufs, op).map(|m| Collective::new(self, "all_reduce", m))
    }

    /// Copy member `root`'s buffer into every other member's. `bufs[i]` belongs to member
    /// `i`; all have one length. Returns once queued: see [`Collective`].
    pub fn broadcast<'a, T: CollectiveType>(
        &'a self,
        bufs: &'a mut [DeviceBuffer<T>],
        root: usize,
    ) -> Result<Collective<'a>> {
        let len = self.check_buffers("broadcast", bufs.iter(), None)?;
        self.device(root)?;
        let done = Collective::new(self, "broadcast", Vec::new());
        if len == 0 {
            return Ok(done);
        }
        if self.on_host() {
            let data = self.read(root, &bufs[root])?;
            return self.write_all(bufs.iter_mut(), &data).map(|()| done);
        }
        nccl::broadcast(self, bufs, root).map(|m| Collective::new(self, "broadcast", m))
    }

    /// Gather every member's `send` buffer, in member order, into every member's `recv`
    /// buffer: `recv[i]` (of member `i`) holds `len() × send[0].len()` elements. Returns once
    /// queued: see [`Collective`].
    pub fn all_gather<'a, T: CollectiveType>(
        &'a self,
        send: &'a [DeviceBuffer<T>],
        recv: &'a mut [DeviceBuffer<T>],
    ) -> Result<Collective<'a>> {
        let len = self.check_buffers("all_gather (send)", send.iter(), None)?;
        self.check_buffers("all_gather (recv)", recv.iter(), Some(len * self.len()))?;
        let done = Collective::new(self, "all_gather", Vec::new());
        if len == 0 {
            return Ok(done);
        }
        if self.on_host() {
            let mut all = Vec::with_capacity(len * self.len());
            for (i, b) in send.iter().enumerate() {
                all.extend(self.read(i, b)?);
            }
            return self.write_all(recv.iter_mut(), &all).map(|()| done);
        }
        nccl::all_gather(self, send, recv).map(|m| Collective::new(self, "all_gather", m))
    }

    /// Reduce every member's buffer element-wise (`op`) into member `root`'s; the others
    /// keep theirs. `bufs[i]` belongs to member `i`; all have one length. Returns once queued:
    /// see [`Collective`].
    pub fn reduce<'a, T: CollectiveType>(
        &'a self,
        bufs: &'a mut [DeviceBuffer<T>],
        op: ReduceOp,
        root: usize,
    ) -> Result<Collective<'a>> {
        let len = self.check_buffers("reduce", bufs.iter(), None)?;
        self.device(root)?;
        let done = Collective::new(self, "reduce", Vec::new());
        if len == 0 {
            return Ok(done);
        }
        if self.on_host() {
            let acc = self.combine_all(bufs.iter(), op)?;
            bufs[root]
                .copy_from(&acc)
                .map_err(|e| self.on_device(root, e))?;
            return Ok(done);
        }
        nccl::reduce(self, bufs, op, root).map(|m| Collective::new(self, "reduce", m))
    }

    /// Reduce every member's `send` buffer element-wise (`op`) and scatter the result: member
    /// `i`'s `recv` buffer gets part `i` of it, in member order. Every `send[i]` holds
    /// `len() × recv[0].len()` elements. Returns once queued: see [`Collective`].
    pub fn reduce_scatter<'a, T: CollectiveType>(
        &'a self,
        send: &'a [DeviceBuffer<T>],
        recv: &'a mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<Collective<'a>> {
        let len = self.check_buffers("reduce_scatter (recv)", recv.iter(), None)?;
        self.check_buffers("reduce_scatter (send)", send.iter(), Some(len * self.len()))?;
        let done = Collective::new(self, "reduce_scatter", Vec::new());
        if len == 0 {
            return Ok(done);
        }
        if self.on_host() {
            let acc = self.combine_all(send.iter(), op)?;
            for (i, (r, part)) in recv.iter_mut().zip(acc.chunks(len)).enumerate() {
                r.copy_from(part).map_err(|e| self.on_device(i, e))?;
            }
            return Ok(done);
        }
        nccl::reduce_scatter(self, send, recv, op)
            .map(|m| Collective::new(self, "reduce_scatter", m))
    }

    /// The element-wise reduction of every member's buffer, on the host.
    fn combine_all<'a, T: CollectiveType>(
        &self,
        mut bufs: impl Iterator<Item = &'a DeviceBuffer<T>>,
        op: ReduceOp,
    ) -> Result<Vec<T>> {
        let mut acc = match bufs.next() {
            Some(b) => self.read(0, b)?,
            None => return Ok(Vec::new()),
        };
        for (i, b) in bufs.enumerate() {
            for (a, v) in acc.iter_mut().zip(self.read(i + 1, b)?) {
                *a = T::combine(op, *a, v);
            }
        }
        Ok(acc)
    }

    /// The collectives run on the host: every member's backend says so.
    fn on_host(&self) -> bool {
        self.iter()
            .all(|g| g.inner.ops().collective_engine() == CollectiveEngine::Host)
    }

    /// One buffer per member, each of member `i`, all of one length (`want` if given): that
    /// length.
    fn check_buffers<'a, T: DeviceCopy + 'a>(
        &self,
        what: &str,
        bufs: impl ExactSizeIterator<Item = &'a DeviceBuffer<T>>,
        want: Option<usize>,
    ) -> Result<usize> {
        if bufs.len() != self.len() {
            return Err(Error::LengthMismatch {
                what: format!("DeviceSet::{what}: one buffer per device"),
                expected: self.len(),
                got: bufs.len(),
            });
        }
        let mut len = want;
        for (i, (b, g)) in bufs.zip(self.iter()).enumerate() {
            if !Arc::ptr_eq(&b.gpu, &g.inner) {
                return Err(self.on_device(
                    i,
                    Error::Usage(format!(
                        "DeviceSet::{what}: buffer {i} does not belong to device {i} of the set"
                    )),
                ));
            }
            match len {
                Some(l) if l != b.len() => {
                    return Err(self.on_device(
                        i,
                        Error::LengthMismatch {
                            what: format!("DeviceSet::{what}: buffer {i}"),
                            expected: l,
                            got: b.len(),
                        },
                    ));
                }
                _ => len = Some(b.len()),
            }
        }
        Ok(len.unwrap_or(0))
    }

    fn read<T: DeviceCopy>(&self, i: usize, b: &DeviceBuffer<T>) -> Result<Vec<T>> {
        b.to_vec().map_err(|e| self.on_device(i, e))
    }

    fn write_all<'a, T: DeviceCopy + 'a>(
        &self,
        bufs: impl Iterator<Item = &'a mut DeviceBuffer<T>>,
        data: &[T],
    ) -> Result<()> {
        for (i, b) in bufs.enumerate() {
            b.copy_from(data).map_err(|e| self.on_device(i, e))?;
        }
        Ok(())
    }
}

#[cfg(not(feature = "nccl"))]
mod nccl {
    //! Without the `nccl` feature, collectives on GPUs are refused.

    use super::{CollectiveType, Members, ReduceOp};
    use crate::buffer::DeviceBuffer;
    use crate::devices::DeviceSet;
    use crate::error::{Error, Result};

    fn refused() -> Error {
        Error::Usage(
            "collectives on GPUs need NCCL: build berth with the `nccl` feature (the simulator \
             runs them without it)"
                .into(),
        )
    }

    pub(super) fn all_reduce<T: CollectiveType>(
        _: &DeviceSet,
        _: &mut [DeviceBuffer<T>],
        _: ReduceOp,
    ) -> Result<Members> {
        Err(refused())
    }

    pub(super) fn broadcast<T: CollectiveType>(
        _: &DeviceSet,
        _: &mut [DeviceBuffer<T>],
        _: usize,
    ) -> Result<Members> {
        Err(refused())
    }

    pub(super) fn all_gather<T: CollectiveType>(
        _: &DeviceSet,
        _: &[DeviceBuffer<T>],
        _: &mut [DeviceBuffer<T>],
    ) -> Result<Members> {
        Err(refused())
    }

    pub(super) fn reduce<T: CollectiveType>(
        _: &DeviceSet,
        _: &mut [DeviceBuffer<T>],
        _: ReduceOp,
        _: usize,
    ) -> Result<Members> {
        Err(refused())
    }

    pub(super) fn reduce_scatter<T: CollectiveType>(
        _: &DeviceSet,
        _: &[DeviceBuffer<T>],
        _: &mut [DeviceBuffer<T>],
        _: ReduceOp,
    ) -> Result<Members> {
        Err(refused())
    }
}

#[cfg(feature = "nccl")]
mod nccl;
