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

use crate::buffer::DeviceBuffer;
use crate::devices::DeviceSet;
use crate::error::{Error, Result};
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::sync::Arc;

mod comms;

use comms::Members;

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

/// The reduction of an all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! collective_trait {
    ($($bound:tt)*) => {
        /// An element type collectives reduce: the integer and floating-point types NCCL has.
        pub trait CollectiveType: DeviceCopy + sealed::Sealed $($bound)* {
            /// `a op b`, as the reduction computes it on the simulator.
            #[doc(hidden)]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
        }
    };
}

#[cfg(feature = "nccl")]
collective_trait!(+ cudarc::nccl::NcclType);
#[cfg(not(feature = "nccl"))]
collective_trait!();

macro_rules! int_collective {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveType for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
        }
    )*};
}

macro_rules! float_collective {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveType for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
        }
    )*};
}

int_collective!(i8, u8, i32, u32, i64, u64);
float_collective!(f32, f64);

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
        if self.on_simulator() {
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
        if self.on_simulator() {
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
        if self.on_simulator() {
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
        if self.on_simulator() {
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
        if self.on_simulator() {
            let acc = self.combine_all(send.iter(), op)?;
            for (i, (r, part)) in recv.iter_mut().zip(acc.chunks(len)).enumerate() {
                r.copy_from(part).map_err(|e| self.on_device(i, e))?;
            }
            return Ok(done);
        }
        nccl::reduce_scatter(self, send, recv, op)
            .map(|m| Collective::new(self, "reduce_scatter", m))
    }

    /// The element-wise reduction of every member's buffer, on the host (the simulator's).
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

    /// The collectives run on the host: the members are simulated.
    fn on_simulator(&self) -> bool {
        // No CUDA context: the simulator's members.
        self.iter().all(|g| g.inner.ops().raw_context().is_null())
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
mod nccl {
    //! The collectives through NCCL: the set's communicators, made once, and each collective
    //! queued for every member in one group, its use of each buffer noted as a lazy completion
    //! of the member's collective stream (no event is recorded per call: the guard waits for
    //! the stream, and a wait through a buffer's uses drains it).

    use super::comms::{self, Comms, Communicators};
    use super::{CollectiveType, Members, ReduceOp};
    use crate::buffer::DeviceBuffer;
    use crate::context::Inner;
    use crate::devices::DeviceSet;
    use crate::error::{Error, Result};
    use crate::fault::Borrow;
    use crate::track::{Access, Completion};
    use cudarc::driver::sys::CUstream;
    use cudarc::nccl::sys::{ncclComm_t, ncclRedOp_t};
    use std::ffi::c_void;
    use std::sync::Arc;

    /// NCCL's communicators of a set, one per member (from `ncclCommInitAll`).
    struct Nccl(Vec<ncclComm_t>);

    // SAFETY: an NCCL communicator may be used from any thread, one call at a time: the set
    // keeps it behind its mutex.
    unsafe impl Send for Nccl {}

    impl Communicators for Nccl {
        type Comm = ncclComm_t;

        fn comm(&self, i: usize) -> ncclComm_t {
            self.0[i]
        }

        fn group_start(&mut self) -> Result<()> {
            cudarc::nccl::result::group_start()
                .map(|_| ())
                .map_err(|e| nccl_error("ncclGroupStart", e))
        }

        fn group_end(&mut self) -> Result<()> {
            cudarc::nccl::result::group_end()
                .map(|_| ())
                .map_err(|e| nccl_error("ncclGroupEnd", e))
        }

        fn abort(&mut self) {
            for c in self.0.drain(..) {
                // SAFETY: made by ncclCommInitAll in `make`, torn down once, here. Every
                // member context is still there: a reset waits for the communicators to go.
                let _ = unsafe { cudarc::nccl::result::comm_abort(c) };
            }
        }

        fn destroy(&mut self) {
            for c in self.0.drain(..) {
                // SAFETY: as for `abort`; its work is complete (the caller drained the streams).
                let _ = unsafe { cudarc::nccl::result::comm_destroy(c) };
            }
        }
    }

    fn nccl_error(call: &str, e: cudarc::nccl::result::NcclError) -> Error {
        Error::Usage(format!("NCCL call {call} failed: ncclResult_t {:?}", e.0))
    }

    /// One member's part of a collective: its communicator and stream.
    type Rank = comms::Rank<ncclComm_t>;

    /// The set's communicators, each member's context counted as borrowed by them, with a
    /// pooled stream of each member to queue on.
    fn make(set: &DeviceSet) -> Result<Comms<Nccl>> {
        // SAFETY: only probes whether libnccl can be opened: cudarc's entry points panic
        // when it cannot, which is why this runs before the first of them.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(Error::NoDriver(
                "libnccl.so not found on the library path (the collectives need NCCL; \
                 cudarc looks for the unversioned name, which NCCL's development package \
                 installs)"
                    .into(),
            ));
        }
        let mut streams = Vec::with_capacity(set.len());
        for (i, g) in set.iter().enumerate() {
            let s = g
                .inner
                .bind()
                .and_then(|()| g.inner.take_stream())
                .map_err(|e| set.on_device(i, e));
            match s {
                Ok(s) => streams.push((g.inner.clone(), s)),
                Err(e) => {
                    for (g, s) in streams {
                        g.put_stream(s);
                    }
                    return Err(e);
                }
            }
        }
        // NCCL allocates in every member's context (device and pinned host memory) and its
        // threads use it: no member may be reset while the communicators live.
        let mut noted = 0;
        let note = streams.iter().try_for_each(|(g, _)| {
            g.ops().fault().begin_borrow(Borrow::Communicator)?;
            noted += 1;
            Ok::<_, Error>(())
        });
        let give_back = |streams: Vec<(Arc<Inner>, CUstream)>, noted: usize| {
            for (i, (g, s)) in streams.into_iter().enumerate() {
                if i < noted {
                    g.ops().fault().end_borrow(Borrow::Communicator);
                }
                g.put_stream(s);
            }
        };
        if let Err(e) = note {
            let e = set.on_device(noted, e);
            give_back(streams, noted);
            return Err(e);
        }
        let ordinals: Vec<i32> = set.iter().map(|g| g.ordinal() as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); set.len()];
        // SAFETY: `comms` has room for one communicator per ordinal; the ordinals are the
        // set's distinct devices.
        let made = unsafe {
            cudarc::nccl::result::comm_init_all(
                comms.as_mut_ptr(),
                ordinals.len() as i32,
                ordinals.as_ptr(),
            )
        }
        .map_err(|e| nccl_error("ncclCommInitAll", e));
        if let Err(e) = made {
            give_back(streams, noted);
            return Err(e);
        }
        Ok(Comms::new(Nccl(comms), streams))
    }

    /// Queue `queue(i, rank)` for every member inside one NCCL group, with the set's
    /// communicators (made on first use); `done(i, completion)` notes the end of member `i`'s
    /// part, a lazy completion of its collective stream, on the buffers used. Each member's
    /// stream and completion, for the guard. See [`comms::queue_collective`] for a lost
    /// member.
    fn with_comms(
        set: &DeviceSet,
        queue: impl FnMut(usize, &Rank) -> Result<()>,
        done: impl FnMut(usize, &Arc<Completion>),
    ) -> Result<Members> {
        let mut slot = set.collectives.lock().expect("poisoned");
        comms::queue_collective(set, &mut slot, || make(set), queue, done)
    }

    /// Make `b` ready for a collective on `rank`'s stream: its context current, and earlier
    /// work that conflicts with `access` ordered before it.
    fn prepare<T: CollectiveType>(b: &DeviceBuffer<T>, rank: &Rank, access: Access) -> Result<()> {
        b.gpu.bind()?;
        b.uses.before_gpu(access, Some((&b.gpu, rank.stream)));
        Ok(())
    }

    fn op_of(op: ReduceOp) -> ncclRedOp_t {
        match op {
            ReduceOp::Sum => ncclRedOp_t::ncclSum,
            ReduceOp::Prod => ncclRedOp_t::ncclProd,
            ReduceOp::Min => ncclRedOp_t::ncclMin,
            ReduceOp::Max => ncclRedOp_t::ncclMax,
        }
    }

    /// An NCCL call's outcome.
    type Called =
        std::result::Result<cudarc::nccl::result::NcclStatus, cudarc::nccl::result::NcclError>;

    /// Queue a collective that works in place on `bufs` (member `i`'s buffer used with
    /// `access(i)`): `call(pointer, len, rank)` is the NCCL call of one member.
    fn in_place<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        name: &'static str,
        access: impl Fn(usize) -> Access,
        call: impl Fn(*mut c_void, usize, &Rank) -> Called,
    ) -> Result<Members> {
        with_comms(
            set,
            |i, rank| {
                let b = &bufs[i];
                prepare(b, rank, access(i))?;
                call(b.ptr as *mut c_void, b.len(), rank)
                    .map(|_| ())
                    .map_err(|e| nccl_error(name, e))
            },
            |i, c| bufs[i].uses.add(c, access(i)),
        )
    }

    /// Queue a collective from `send` (read) into `recv` (written), both member `i`'s for
    /// member `i`: `call(send, recv, rank)` is the NCCL call of one member.
    fn send_recv<T: CollectiveType>(
        set: &DeviceSet,
        send: &[DeviceBuffer<T>],
        recv: &mut [DeviceBuffer<T>],
        name: &'static str,
        call: impl Fn(&DeviceBuffer<T>, &DeviceBuffer<T>, &Rank) -> Called,
    ) -> Result<Members> {
        with_comms(
            set,
            |i, rank| {
                let (s, r) = (&send[i], &recv[i]);
                prepare(s, rank, Access::Shared)?;
                prepare(r, rank, Access::Exclusive)?;
                call(s, r, rank)
                    .map(|_| ())
                    .map_err(|e| nccl_error(name, e))
            },
            |i, c| {
                send[i].uses.add(c, Access::Shared);
                recv[i].uses.add(c, Access::Exclusive);
            },
        )
    }

    fn dtype<T: CollectiveType>() -> cudarc::nccl::sys::ncclDataType_t {
        <T as cudarc::nccl::NcclType>::as_nccl_type()
    }

    // SAFETY (of every NCCL call below): the caller checked that each member's buffers are
    // of that member's device and have the lengths the call reads and writes (`len` elements
    // in place; `recv` `set.len()` times `send` for an all-gather, the reverse for a
    // reduce-scatter); this call borrows them (written ones exclusively) and notes them as
    // used until the member's stream passes the collective, so nothing reads, writes or frees
    // them before then; `rank` is the member's communicator and a stream of its context.

    pub(super) fn all_reduce<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<Members> {
        let op = op_of(op);
        in_place(
            set,
            bufs,
            "ncclAllReduce",
            |_| Access::Exclusive,
            |p, len, rank| {
                // SAFETY: see above; in place, as NCCL allows.
                unsafe {
                    cudarc::nccl::result::all_reduce(
                        p,
                        p,
                        len,
                        dtype::<T>(),
                        op,
                        rank.comm,
                        rank.stream as _,
                    )
                }
            },
        )
    }

    pub(super) fn broadcast<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        root: usize,
    ) -> Result<Members> {
        in_place(
            set,
            bufs,
            "ncclBroadcast",
            |_| Access::Exclusive,
            |p, len, rank| {
                // SAFETY: see above; in place, as NCCL allows.
                unsafe {
                    cudarc::nccl::result::broadcast(
                        p,
                        p,
                        len,
                        dtype::<T>(),
                        root as i32,
                        rank.comm,
                        rank.stream as _,
                    )
                }
            },
        )
    }

    pub(super) fn reduce<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        op: ReduceOp,
        root: usize,
    ) -> Result<Members> {
        let op = op_of(op);
        // Only the root's buffer is written; the others are read.
        let access = |i: usize| {
            if i == root {
                Access::Exclusive
            } else {
                Access::Shared
            }
        };
        in_place(set, bufs, "ncclReduce", access, |p, len, rank| {
            // SAFETY: see above; in place, as NCCL allows (on other ranks than the root the
            // receive pointer is unused).
            unsafe {
                cudarc::nccl::result::reduce(
                    p,
                    p,
                    len,
                    dtype::<T>(),
                    op,
                    root as i32,
                    rank.comm,
                    rank.stream as _,
                )
            }
        })
    }

    pub(super) fn all_gather<T: CollectiveType>(
        set: &DeviceSet,
        send: &[DeviceBuffer<T>],
        recv: &mut [DeviceBuffer<T>],
    ) -> Result<Members> {
        send_recv(set, send, recv, "ncclAllGather", |s, r, rank| {
            // SAFETY: see above; `s` and `r` are distinct allocations.
            unsafe {
                cudarc::nccl::result::all_gather(
                    s.ptr as *const c_void,
                    r.ptr as *mut c_void,
                    s.len(),
                    dtype::<T>(),
                    rank.comm,
                    rank.stream as _,
                )
            }
        })
    }

    pub(super) fn reduce_scatter<T: CollectiveType>(
        set: &DeviceSet,
        send: &[DeviceBuffer<T>],
        recv: &mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<Members> {
        let op = op_of(op);
        send_recv(set, send, recv, "ncclReduceScatter", |s, r, rank| {
            // SAFETY: see above; `s` and `r` are distinct allocations.
            unsafe {
                cudarc::nccl::result::reduce_scatter(
                    s.ptr as *const c_void,
                    r.ptr as *mut c_void,
                    r.len(),
                    dtype::<T>(),
                    op,
                    rank.comm,
                    rank.stream as _,
                )
            }
        })
    }
}
