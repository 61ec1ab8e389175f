//! Collectives on the [`DeviceBuffer`]s of a [`DeviceSet`]: all-reduce, broadcast and
//! all-gather, one buffer per member.
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
//! A collective returns once queued. Each buffer records the NCCL work as a use of its memory
//! (exclusive for what it writes), ending where the member's collective stream will be once the
//! work is done, as a launch's does: reading, writing or freeing a buffer, or launching on it,
//! waits for the collective first; [`DeviceSet::synchronize`] waits for all.
//!
//! On the simulator the set performs the collectives itself, on the host, with the same
//! checks and results, so that the multi-GPU code paths run in CI.

use crate::buffer::DeviceBuffer;
use crate::devices::DeviceSet;
use crate::error::{Error, Result};
use berth_device::DeviceCopy;
use std::sync::Arc;

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
    /// belongs to member `i`; all have one length.
    pub fn all_reduce<T: CollectiveType>(
        &self,
        bufs: &mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<()> {
        let len = self.check_buffers("all_reduce", bufs.iter(), None)?;
        if len == 0 {
            return Ok(());
        }
        if self.on_simulator() {
            let mut acc = self.read(0, &bufs[0])?;
            for (i, b) in bufs.iter().enumerate().skip(1) {
                for (a, v) in acc.iter_mut().zip(self.read(i, b)?) {
                    *a = T::combine(op, *a, v);
                }
            }
            return self.write_all(bufs.iter_mut(), &acc);
        }
        nccl::all_reduce(self, bufs, op)
    }

    /// Copy member `root`'s buffer into every other member's. `bufs[i]` belongs to member
    /// `i`; all have one length.
    pub fn broadcast<T: CollectiveType>(
        &self,
        bufs: &mut [DeviceBuffer<T>],
        root: usize,
    ) -> Result<()> {
        let len = self.check_buffers("broadcast", bufs.iter(), None)?;
        self.device(root)?;
        if len == 0 {
            return Ok(());
        }
        if self.on_simulator() {
            let data = self.read(root, &bufs[root])?;
            return self.write_all(bufs.iter_mut(), &data);
        }
        nccl::broadcast(self, bufs, root)
    }

    /// Gather every member's `send` buffer, in member order, into every member's `recv`
    /// buffer: `recv[i]` (of member `i`) holds `len() × send[0].len()` elements.
    pub fn all_gather<T: CollectiveType>(
        &self,
        send: &[DeviceBuffer<T>],
        recv: &mut [DeviceBuffer<T>],
    ) -> Result<()> {
        let len = self.check_buffers("all_gather (send)", send.iter(), None)?;
        self.check_buffers("all_gather (recv)", recv.iter(), Some(len * self.len()))?;
        if len == 0 {
            return Ok(());
        }
        if self.on_simulator() {
            let mut all = Vec::with_capacity(len * self.len());
            for (i, b) in send.iter().enumerate() {
                all.extend(self.read(i, b)?);
            }
            return self.write_all(recv.iter_mut(), &all);
        }
        nccl::all_gather(self, send, recv)
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

    use super::{CollectiveType, ReduceOp};
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
    ) -> Result<()> {
        Err(refused())
    }

    pub(super) fn broadcast<T: CollectiveType>(
        _: &DeviceSet,
        _: &mut [DeviceBuffer<T>],
        _: usize,
    ) -> Result<()> {
        Err(refused())
    }

    pub(super) fn all_gather<T: CollectiveType>(
        _: &DeviceSet,
        _: &[DeviceBuffer<T>],
        _: &mut [DeviceBuffer<T>],
    ) -> Result<()> {
        Err(refused())
    }
}

#[cfg(feature = "nccl")]
mod nccl {
    //! The collectives through NCCL: the set's communicators, made once, and each collective
    //! queued for every member in one group, its use of each buffer recorded on the member's
    //! collective stream.

    use super::{CollectiveType, ReduceOp};
    use crate::buffer::DeviceBuffer;
    use crate::devices::DeviceSet;
    use crate::error::{Error, Result};
    use crate::stream::Stream;
    use crate::track::{Access, Completion};
    use cudarc::nccl::sys::{ncclComm_t, ncclRedOp_t};
    use std::ffi::c_void;

    /// The set's communicators, one per member, and the stream of each member they queue on.
    struct Comms {
        comms: Vec<ncclComm_t>,
        streams: Vec<Stream>,
    }

    // SAFETY: an NCCL communicator may be used from any thread, one call at a time: the set
    // keeps it behind its mutex; the streams are berth's (`Send`).
    unsafe impl Send for Comms {}

    impl Drop for Comms {
        fn drop(&mut self) {
            for s in &self.streams {
                // The communicators' work must be done before they go.
                let _ = s.synchronize();
            }
            for &c in &self.comms {
                // SAFETY: made by ncclCommInitAll in `with_comms`, destroyed once, here, after
                // its work completed.
                let _ = unsafe { cudarc::nccl::result::comm_destroy(c) };
            }
        }
    }

    fn nccl_error(call: &str, e: cudarc::nccl::result::NcclError) -> Error {
        Error::Usage(format!("NCCL call {call} failed: ncclResult_t {:?}", e.0))
    }

    /// One member's part of a collective: its communicator and stream.
    pub(super) struct Rank {
        comm: ncclComm_t,
        stream: cudarc::driver::sys::CUstream,
    }

    /// Queue `queue(i, rank)` for every member inside one NCCL group, with the set's
    /// communicators (made on first use), then record where each member's collective stream
    /// will be once the work is done; `done(i, completion)` notes it on the buffers used.
    fn with_comms(
        set: &DeviceSet,
        mut queue: impl FnMut(usize, &Rank) -> Result<()>,
        mut done: impl FnMut(usize, &std::sync::Arc<Completion>),
    ) -> Result<()> {
        let mut slot = set.collectives.lock().expect("poisoned");
        if slot.as_ref().is_none_or(|b| !b.is::<Comms>()) {
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
                streams.push(g.stream().map_err(|e| set.on_device(i, e))?);
            }
            let ordinals: Vec<i32> = set.iter().map(|g| g.ordinal() as i32).collect();
            let mut comms = vec![std::ptr::null_mut(); set.len()];
            // SAFETY: `comms` has room for one communicator per ordinal; the ordinals are the
            // set's distinct devices.
            unsafe {
                cudarc::nccl::result::comm_init_all(
                    comms.as_mut_ptr(),
                    ordinals.len() as i32,
                    ordinals.as_ptr(),
                )
            }
            .map_err(|e| nccl_error("ncclCommInitAll", e))?;
            *slot = Some(Box::new(Comms { comms, streams }));
        }
        let c = slot
            .as_ref()
            .and_then(|b| b.downcast_ref::<Comms>())
            .expect("made above");
        cudarc::nccl::result::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        let mut first = Ok(());
        for (i, (&comm, stream)) in c.comms.iter().zip(&c.streams).enumerate() {
            let rank = Rank {
                comm,
                stream: stream.handle,
            };
            if let Err(e) = queue(i, &rank) {
                first = first.and(Err(set.on_device(i, e)));
            }
        }
        let end = cudarc::nccl::result::group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
        // The work is queued now (at the group's end): note where each stream will be.
        for (i, (g, stream)) in set.iter().zip(&c.streams).enumerate() {
            let completion = g
                .inner
                .bind()
                .and_then(|()| Completion::record(&g.inner, &[stream.handle]))
                .map_err(|e| set.on_device(i, e))?;
            done(i, &completion);
        }
        first.and(end.map(|_| ()))
    }

    /// Make `b` ready for a collective on `rank`'s stream: its context current, and earlier
    /// work that conflicts with `access` ordered before it.
    fn prepare<T: CollectiveType>(b: &DeviceBuffer<T>, rank: &Rank, access: Access) -> Result<()> {
        b.gpu.bind()?;
        b.uses.before_gpu(access, Some(rank.stream));
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

    pub(super) fn all_reduce<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        op: ReduceOp,
    ) -> Result<()> {
        let op = op_of(op);
        let dtype = <T as cudarc::nccl::NcclType>::as_nccl_type();
        with_comms(
            set,
            |i, rank| {
                let b = &bufs[i];
                prepare(b, rank, Access::Exclusive)?;
                // SAFETY: `b` is `len()` elements of T on member i's device, borrowed
                // exclusively by this call and noted as used until the stream passes the
                // collective (`done`), so nothing reads, writes or frees it before then;
                // `rank` is member i's communicator and a stream of its context.
                unsafe {
                    cudarc::nccl::result::all_reduce(
                        b.ptr as *const c_void,
                        b.ptr as *mut c_void,
                        b.len(),
                        dtype,
                        op,
                        rank.comm,
                        rank.stream as _,
                    )
                }
                .map(|_| ())
                .map_err(|e| nccl_error("ncclAllReduce", e))
            },
            |i, c| bufs[i].uses.add(c, Access::Exclusive),
        )
    }

    pub(super) fn broadcast<T: CollectiveType>(
        set: &DeviceSet,
        bufs: &mut [DeviceBuffer<T>],
        root: usize,
    ) -> Result<()> {
        let dtype = <T as cudarc::nccl::NcclType>::as_nccl_type();
        with_comms(
            set,
            |i, rank| {
                let b = &bufs[i];
                prepare(b, rank, Access::Exclusive)?;
                // SAFETY: as in `all_reduce`.
                unsafe {
                    cudarc::nccl::result::broadcast(
                        b.ptr as *const c_void,
                        b.ptr as *mut c_void,
                        b.len(),
                        dtype,
                        root as i32,
                        rank.comm,
                        rank.stream as _,
                    )
                }
                .map(|_| ())
                .map_err(|e| nccl_error("ncclBroadcast", e))
            },
            |i, c| bufs[i].uses.add(c, Access::Exclusive),
        )
    }

    pub(super) fn all_gather<T: CollectiveType>(
        set: &DeviceSet,
        send: &[DeviceBuffer<T>],
        recv: &mut [DeviceBuffer<T>],
    ) -> Result<()> {
        let dtype = <T as cudarc::nccl::NcclType>::as_nccl_type();
        with_comms(
            set,
            |i, rank| {
                let (s, r) = (&send[i], &recv[i]);
                prepare(s, rank, Access::Shared)?;
                prepare(r, rank, Access::Exclusive)?;
                // SAFETY: `s` holds `s.len()` elements and `r` `set.len() × s.len()` (checked
                // by the caller), both of member i's device; `s` is borrowed shared and `r`
                // exclusively by this call, and both are noted as used until the stream passes
                // the collective (`done`); `rank` is member i's communicator and stream.
                unsafe {
                    cudarc::nccl::result::all_gather(
                        s.ptr as *const c_void,
                        r.ptr as *mut c_void,
                        s.len(),
                        dtype,
                        rank.comm,
                        rank.stream as _,
                    )
                }
                .map(|_| ())
                .map_err(|e| nccl_error("ncclAllGather", e))
            },
            |i, c| {
                send[i].uses.add(c, Access::Shared);
                recv[i].uses.add(c, Access::Exclusive);
            },
        )
    }
}
