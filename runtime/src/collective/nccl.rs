//! The collectives through NCCL: the set's communicators, made once, and each collective
//! queued for every member in one group, its use of each buffer noted as a lazy completion
//! of the member's collective stream (no event is recorded per call: the guard waits for
//! the stream, and a wait through a buffer's uses drains it).
//!
//! NCCL is a library of its own that queues on CUDA streams: this module lends it the driver's
//! handle of each member's collective stream
//! ([`StreamOps::raw_stream`](crate::backend::StreamOps::raw_stream)), one of the few places
//! above the backend that hold a driver handle (listed in `docs/runtime-layers.md`).

use super::comms::{self, Comms, Communicators, Members};
use super::ops::{CollectiveType, ReduceOp};
use crate::backend::StreamId;
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
    let give_back = |streams: Vec<(Arc<Inner>, StreamId)>, noted: usize| {
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
/// work that conflicts with `access` ordered before it. The driver's handle of the stream, for
/// NCCL: a pooled stream of `b`'s context, which lives as long as the context, and the
/// communicators hold a reset of the context off ([`Borrow::Communicator`]).
fn prepare<T: CollectiveType>(
    b: &DeviceBuffer<T>,
    rank: &Rank,
    access: Access,
) -> Result<CUstream> {
    b.gpu.bind()?;
    let stream = b.gpu.ops().raw_stream(rank.stream).ok_or(Error::NeedsGpu {
        what: "NCCL collectives",
    })?;
    b.uses.before_gpu(access, Some((&b.gpu, rank.stream)));
    Ok(stream)
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
    call: impl Fn(*mut c_void, usize, &Rank, CUstream) -> Called,
) -> Result<Members> {
    with_comms(
        set,
        |i, rank| {
            let b = &bufs[i];
            let stream = prepare(b, rank, access(i))?;
            call(b.ptr as *mut c_void, b.len(), rank, stream)
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
    call: impl Fn(&DeviceBuffer<T>, &DeviceBuffer<T>, &Rank, CUstream) -> Called,
) -> Result<Members> {
    with_comms(
        set,
        |i, rank| {
            let (s, r) = (&send[i], &recv[i]);
            prepare(s, rank, Access::Shared)?;
            let stream = prepare(r, rank, Access::Exclusive)?;
            call(s, r, rank, stream)
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
// them before then; `rank` is the member's communicator, and `stream` the driver's handle of
// `rank`'s stream, a stream of the member's context.

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
        |p, len, rank, stream| {
            // SAFETY: see above; in place, as NCCL allows.
            unsafe {
                cudarc::nccl::result::all_reduce(
                    p,
                    p,
                    len,
                    dtype::<T>(),
                    op,
                    rank.comm,
                    stream as _,
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
        |p, len, rank, stream| {
            // SAFETY: see above; in place, as NCCL allows.
            unsafe {
                cudarc::nccl::result::broadcast(
                    p,
                    p,
                    len,
                    dtype::<T>(),
                    root as i32,
                    rank.comm,
                    stream as _,
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
    in_place(set, bufs, "ncclReduce", access, |p, len, rank, stream| {
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
                stream as _,
            )
        }
    })
}

pub(super) fn all_gather<T: CollectiveType>(
    set: &DeviceSet,
    send: &[DeviceBuffer<T>],
    recv: &mut [DeviceBuffer<T>],
) -> Result<Members> {
    send_recv(set, send, recv, "ncclAllGather", |s, r, rank, stream| {
        // SAFETY: see above; `s` and `r` are distinct allocations.
        unsafe {
            cudarc::nccl::result::all_gather(
                s.ptr as *const c_void,
                r.ptr as *mut c_void,
                s.len(),
                dtype::<T>(),
                rank.comm,
                stream as _,
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
    send_recv(
        set,
        send,
        recv,
        "ncclReduceScatter",
        |s, r, rank, stream| {
            // SAFETY: see above; `s` and `r` are distinct allocations.
            unsafe {
                cudarc::nccl::result::reduce_scatter(
                    s.ptr as *const c_void,
                    r.ptr as *mut c_void,
                    r.len(),
                    dtype::<T>(),
                    op,
                    rank.comm,
                    stream as _,
                )
            }
        },
    )
}
