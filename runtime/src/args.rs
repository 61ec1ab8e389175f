//! What each placement accepts. Generated launchers take `impl DeviceArg<T>`,
//! `impl PinnedArg<T>` or `impl MappedArg<T>` for slice arguments, so passing the wrong kind of
//! memory is a compile error that names the kind the argument needs and how to make it.

use crate::buffer::DeviceBuffer;
use crate::context::Inner;
use crate::host_mem::{HostFlags, MappedBuffer, PinnedBuffer, Registered};
use crate::host_shared::{HostShared, SharedHost};
use crate::track::Uses;
use berth_device::DeviceCopy;
use std::sync::Arc;

/// What a launch needs to know about one slice argument.
#[doc(hidden)]
pub struct ArgRef<'a> {
    /// Device address (device memory, mapped memory) or host address (pinned memory).
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) bytes: usize,
    pub(crate) gpu: &'a Arc<Inner>,
    pub(crate) flags: Option<HostFlags>,
    /// Host address of host memory (pinned or mapped); 0 for device memory.
    pub(crate) host: u64,
    /// What the GPU may still do with the memory.
    pub(crate) uses: &'a Uses,
    /// The graph that holds the memory for its whole life ([`crate::Held`]); 0 for none.
    pub(crate) held: u64,
    /// Memory a launch may only read (a peer view, which may be a copy of its owner's memory;
    /// shared host memory, which its owner shares with others):
    /// passing it to a `&mut [T]` argument is refused.
    pub(crate) read_only: bool,
}

pub(crate) mod sealed {
    /// Only berth's memory kinds are arguments.
    pub trait Sealed {}
}

/// Memory for a slice argument without a placement attribute: device memory.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory: this kernel argument has no placement attribute, so it takes a `DeviceBuffer<{T}>`",
    label = "expected a `DeviceBuffer<{T}>`",
    note = "make one with `gpu.upload(&data)?` or `gpu.alloc_zeroed::<{T}>(n)?`",
    note = "to pass host memory instead, mark the kernel's argument `#[pinned_async]` (copied asynchronously from a `PinnedBuffer`) or `#[mapped]` (read in place from a `MappedBuffer`)"
)]
pub trait DeviceArg<T>: sealed::Sealed {
    #[doc(hidden)]
    fn __arg(&self) -> ArgRef<'_>;
}

/// Memory for a `#[pinned_async]` slice argument: page-locked host memory.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not pinned host memory: this `#[pinned_async]` kernel argument takes a `PinnedBuffer<{T}>`",
    label = "expected a `PinnedBuffer<{T}>`",
    note = "make one with `gpu.pinned_from(&data)?` or `gpu.pinned_zeroed::<{T}>(n)?`; pageable memory such as a `Vec` would need a slow synchronous copy, which berth never makes silently",
    note = "a `MappedBuffer<{T}>`, a `Registered<{T}>` and a `HostShared` (`gpu.share(buffer)?`) are pinned too and also work; data already on the GPU goes to an argument without `#[pinned_async]`"
)]
pub trait PinnedArg<T>: sealed::Sealed {
    #[doc(hidden)]
    fn __arg(&self) -> ArgRef<'_>;
}

/// Memory for a `#[mapped]` slice argument: host memory mapped into the GPU's address space.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not mapped host memory: this `#[mapped]` kernel argument takes a `MappedBuffer<{T}>`, a `Registered<{T}>` or a `HostShared`",
    label = "expected a `MappedBuffer<{T}>`, `Registered<{T}>` or `HostShared`",
    note = "make one with `gpu.mapped_from(&data)?` (or `gpu.managed_from(&data)?` for a large table read sparsely), map an existing `Vec` in place with `gpu.register(data)?`, or shared memory such as an Arrow buffer with `gpu.share(buffer)?`",
    note = "a `PinnedBuffer` is page-locked but not mapped into the GPU's address space; a `DeviceBuffer` is not host memory"
)]
pub trait MappedArg<T>: sealed::Sealed {
    #[doc(hidden)]
    fn __arg(&self) -> ArgRef<'_>;
}

/// A table for an `#[auto] &Rows<T>` kernel argument, read a row at a time by id: a
/// [`HotTier`](crate::HotTier), whose rows resident in device memory the kernel reads there
/// (looked up in its slot table) and the others from the host table in place, or an
/// [`InPlaceRows`](crate::InPlaceRows), all of whose rows it reads in place.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a table read by rows: this `#[auto] &Rows<{T}>` kernel argument takes a `HotTier<{T}>` or an `InPlaceRows`",
    label = "expected a `HotTier<{T}>` or an `InPlaceRows`",
    note = "make one with `gpu.hot_tier(table, width, budget)?` over a `MappedBuffer` or a `ManagedBuffer`: a budget that holds the whole table keeps all of it in device memory, a budget of 0 reads every row in place; or read every row in place with `InPlaceRows::new(&table, width)?`",
    note = "to read the table as a flat slice instead, declare the argument `#[auto] table: &[T]` and pass the table"
)]
pub trait RowSource<T>: sealed::Sealed {
    #[doc(hidden)]
    fn __rows(&self) -> RowsRef<'_>;
}

/// What a launch needs to know about a table read by rows.
#[doc(hidden)]
pub struct RowsRef<'a> {
    /// The table (mapped host memory).
    pub(crate) table: ArgRef<'a>,
    /// Elements per row.
    pub(crate) width: usize,
    /// A hot tier's device rows and slot table, and its capacity in rows, where the kernel
    /// reads through it. Every slot table entry below the capacity names a slot holding that
    /// row once the work queued on the two buffers before the launch has run.
    pub(crate) tier: Option<(ArgRef<'a>, ArgRef<'a>, usize)>,
    /// Rows resident by the host's record, for the log line.
    pub(crate) resident: usize,
}

impl<T> sealed::Sealed for DeviceBuffer<T> {}
impl<T> sealed::Sealed for PinnedBuffer<T> {}
impl<T> sealed::Sealed for MappedBuffer<T> {}
impl<T> sealed::Sealed for Registered<T> {}
impl<H: SharedHost> sealed::Sealed for HostShared<H> {}

impl<T: DeviceCopy> DeviceArg<T> for DeviceBuffer<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.ptr,
            len: self.len(),
            bytes: self.bytes(),
            gpu: &self.gpu,
            flags: None,
            host: 0,
            uses: &self.uses,
            held: 0,
            read_only: false,
        }
    }
}

impl<T: DeviceCopy> PinnedArg<T> for PinnedBuffer<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.host_ptr() as u64,
            len: self.elems(),
            bytes: self.bytes(),
            gpu: self.gpu(),
            flags: Some(self.flags()),
            host: self.host_ptr() as u64,
            uses: self.uses(),
            held: 0,
            read_only: false,
        }
    }
}

impl<T: DeviceCopy> PinnedArg<T> for MappedBuffer<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.host_ptr() as u64,
            len: self.elems(),
            bytes: self.bytes(),
            gpu: self.gpu(),
            flags: Some(self.flags()),
            host: self.host_ptr() as u64,
            uses: self.uses(),
            held: 0,
            read_only: false,
        }
    }
}

impl<T: DeviceCopy> MappedArg<T> for MappedBuffer<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.device_ptr(),
            len: self.elems(),
            bytes: self.bytes(),
            gpu: self.gpu(),
            flags: Some(self.flags()),
            host: self.host_ptr() as u64,
            uses: self.uses(),
            held: 0,
            read_only: false,
        }
    }
}

impl<T: DeviceCopy> MappedArg<T> for Registered<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.device_ptr(),
            len: self.elems(),
            bytes: self.bytes(),
            gpu: self.gpu(),
            flags: Some(HostFlags(
                crate::backend::HOST_DEVICEMAP | crate::backend::HOST_PORTABLE,
            )),
            host: self.host_ptr() as u64,
            uses: &self.uses,
            held: 0,
            read_only: false,
        }
    }
}

impl<T: DeviceCopy> PinnedArg<T> for Registered<T> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.host_ptr() as u64,
            ..MappedArg::__arg(self)
        }
    }
}

impl<H: SharedHost> MappedArg<H::Elem> for HostShared<H> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.device_ptr(),
            len: self.elems(),
            bytes: self.bytes(),
            gpu: self.gpu(),
            flags: Some(self.flags()),
            host: self.host_ptr() as u64,
            uses: &self.uses,
            held: 0,
            read_only: true,
        }
    }
}

impl<H: SharedHost> PinnedArg<H::Elem> for HostShared<H> {
    fn __arg(&self) -> ArgRef<'_> {
        ArgRef {
            addr: self.host_ptr() as u64,
            ..MappedArg::__arg(self)
        }
    }
}
