//! Host memory the GPU can reach: [`PinnedBuffer`] (page-locked, copied asynchronously),
//! [`MappedBuffer`] (page-locked and mapped into the GPU's address space: kernels read and
//! write it in place) and [`Registered`] (existing host memory, page-locked and mapped for a
//! while).
//!
//! Flags are chosen by policy, not inherited: cudarc's `alloc_pinned` is write-combined by
//! default, which makes every CPU read of the buffer slow. Here write-combining is used only
//! when asked for with [`HostAccess::WriteOnly`] (the host writes, the device reads), and an
//! allocation refused with that flag falls back to plain pinned memory.

use crate::backend::{HOST_DEVICEMAP, HOST_PORTABLE, HOST_WRITECOMBINED};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::fault::Borrow;
use crate::gpu::Gpu;
use crate::pool::size_class;
use crate::track::Uses;
use berth_device::DeviceCopy;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// How the host uses a pinned buffer; decides write-combining.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostAccess {
    /// The host reads and writes it (results read back): plain cached pinned memory.
    #[default]
    ReadWrite,
    /// The host only writes it and the device only reads it: write-combined where the
    /// platform allows (no CPU cache pollution, possibly faster PCIe writes; CPU reads of
    /// such memory are very slow).
    WriteOnly,
}

/// Options of a pinned allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedOptions {
    /// How the host uses the buffer.
    pub access: HostAccess,
    /// Usable by every CUDA context of the process, not only the allocating one (needed when
    /// several GPUs share the buffer). Always on where the machine has more than one GPU.
    pub portable: bool,
}

/// The `cuMemHostAlloc` flags a buffer really got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFlags(pub u32);

impl HostFlags {
    /// Write-combined.
    pub fn write_combined(self) -> bool {
        self.0 & HOST_WRITECOMBINED != 0
    }
    /// Mapped into the device's address space.
    pub fn device_mapped(self) -> bool {
        self.0 & HOST_DEVICEMAP != 0
    }
    /// Portable across contexts.
    pub fn portable(self) -> bool {
        self.0 & HOST_PORTABLE != 0
    }
}

impl std::fmt::Display for HostFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = vec!["pinned"];
        if self.write_combined() {
            parts.push("write-combined");
        }
        if self.device_mapped() {
            parts.push("mapped");
        }
        if self.portable() {
            parts.push("portable");
        }
        f.write_str(&parts.join("+"))
    }
}

/// One page-locked allocation from the Gpu's pinned pool, returned to it on drop.
struct PinnedAlloc {
    ptr: *mut u8,
    class: usize,
    flags: u32,
    gpu: Arc<Inner>,
    uses: Uses,
}

// SAFETY: the allocation is page-locked host memory owned by this value alone (returned to the
// pool on drop, from any thread: the pool and the context are `Sync`); the raw pointer is what
// keeps it from being `Send` automatically. Element types are the buffers' concern: a
// `PinnedBuffer<T>` is `Send` only for `T: Send`.
unsafe impl Send for PinnedAlloc {}

impl PinnedAlloc {
    fn new(gpu: &Arc<Inner>, bytes: usize, wanted: u32) -> Result<Self> {
        // Counted while it lives: a reset of the context would unmap it (it refuses instead).
        gpu.ops().fault().begin_borrow(Borrow::HostBuffer)?;
        Self::alloc(gpu, bytes, wanted).inspect_err(|_| {
            gpu.ops().fault().end_borrow(Borrow::HostBuffer);
        })
    }

    fn alloc(gpu: &Arc<Inner>, bytes: usize, wanted: u32) -> Result<Self> {
        gpu.bind()?;
        let class = size_class(bytes.max(1));
        let try_flags = |flags: u32| {
            gpu.pinned
                .take(class, flags, |c| gpu.ops().alloc_host(c, flags))
                .map(|p| (p, flags))
        };
        let (p, flags) = match try_flags(wanted) {
            Ok(v) => v,
            // Write-combining is an optimisation: without it the buffer still works.
            Err(_) if wanted & HOST_WRITECOMBINED != 0 => {
                tracing::debug!(
                    "write-combined pinned allocation refused; using plain pinned memory"
                );
                try_flags(wanted & !HOST_WRITECOMBINED)?
            }
            Err(e) => return Err(e),
        };
        Ok(PinnedAlloc {
            ptr: p as *mut u8,
            class,
            flags,
            gpu: gpu.clone(),
            uses: Uses::default(),
        })
    }

    fn device_ptr(&self) -> Result<u64> {
        self.gpu.ops().mapped_address(self.ptr as u64)
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        // Back in the pool it may be handed out again: nothing may still copy into it, even
        // work whose guard was leaked.
        self.uses.before_host_write();
        if !self.gpu.is_lost() {
            self.gpu.pinned.put(self.class, self.flags, self.ptr as u64);
        }
        self.gpu.ops().fault().end_borrow(Borrow::HostBuffer);
    }
}

/// `len` elements of `T` in page-locked host memory: the fast path for bulk copies
/// (`#[pinned_async]` kernel arguments). Derefs to `[T]` for the host.
pub struct PinnedBuffer<T> {
    alloc: PinnedAlloc,
    len: usize,
    _t: PhantomData<T>,
}

// `Send` for `T: Send` as its parts are (`PinnedAlloc` owns the memory and is `Send`).
// SAFETY: shared access is read-only through `Deref` (the host and the GPU write only through
// `&mut`), and `T: Sync`.
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<T> {}

/// `len` elements of `T` in page-locked host memory mapped into the GPU's address space:
/// kernels (`#[mapped]` arguments) read and write it in place, no copy. Derefs to `[T]`.
pub struct MappedBuffer<T> {
    alloc: PinnedAlloc,
    device: u64,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: as for PinnedBuffer.
unsafe impl<T: DeviceCopy + Sync> Sync for MappedBuffer<T> {}

/// The alignment every allocation of berth's has at least: the driver's device allocations
/// (256 bytes), its pinned host allocations (a page) and the simulator's (256 bytes).
pub(crate) const MAX_ALIGN: usize = 256;

/// The bytes of `len` elements of `T`, for a new allocation: a size no allocation can have is
/// out of memory, and a `T` aligned beyond [`MAX_ALIGN`] is refused (its elements could not
/// be placed where `&[T]` and the GPU's accesses need them).
pub(crate) fn checked_bytes<T>(len: usize) -> Result<usize> {
    if std::mem::align_of::<T>() > MAX_ALIGN {
        return Err(Error::Usage(format!(
            "`{}` is aligned to {} bytes; berth's allocations are aligned to {MAX_ALIGN}",
            std::any::type_name::<T>(),
            std::mem::align_of::<T>()
        )));
    }
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or(Error::OutOfMemory {
            bytes: usize::MAX,
            free: 0,
            total: 0,
        })
}

fn zero_fill(p: *mut u8, bytes: usize) {
    // SAFETY: `p` is an allocation of at least `bytes` bytes owned by the caller.
    unsafe { std::ptr::write_bytes(p, 0, bytes) }
}

impl Gpu {
    /// A pinned buffer of `len` zeroed elements, for data the host reads and writes.
    pub fn pinned_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        self.pinned_with(len, PinnedOptions::default())
    }

    /// A pinned buffer holding a copy of `data`, for data the host reads and writes (inputs
    /// that are also read back, outputs).
    pub fn pinned_from<T: DeviceCopy>(&self, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut b = self.pinned_with(data.len(), PinnedOptions::default())?;
        b.copy_from_slice(data);
        Ok(b)
    }

    /// A pinned buffer of `len` zeroed elements with explicit options (write-combining for
    /// host-write-only inputs, portability).
    pub fn pinned_with<T: DeviceCopy>(
        &self,
        len: usize,
        opts: PinnedOptions,
    ) -> Result<PinnedBuffer<T>> {
        let bytes = checked_bytes::<T>(len)?;
        let alloc = self.zeroed_alloc(bytes, self.pinned_flags(opts))?;
        Ok(PinnedBuffer {
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// As [`Gpu::pinned_zeroed`], for memory this device alone streams (a shard of a dataset
    /// split across a device set): allocated and zeroed on a thread bound to the CPUs of the
    /// device's NUMA node, where the system names one, so that the pages sit next to the
    /// device's link instead of on the calling thread's node. A buffer the pool hands back is
    /// reused wherever it lies.
    pub(crate) fn pinned_zeroed_near<T: DeviceCopy>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        match self.inner.ops().near_cpus() {
            Some(cpus) => self.pinned_zeroed_on(&cpus, len),
            None => self.pinned_zeroed(len),
        }
    }

    /// [`Gpu::pinned_zeroed`], allocated and zeroed on a thread bound to `cpus`.
    fn pinned_zeroed_on<T: DeviceCopy>(
        &self,
        cpus: &[usize],
        len: usize,
    ) -> Result<PinnedBuffer<T>> {
        let bytes = checked_bytes::<T>(len)?;
        let flags = self.pinned_flags(PinnedOptions::default());
        let alloc = crate::numa::on_cpus(cpus, || self.zeroed_alloc(bytes, flags))?;
        Ok(PinnedBuffer {
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// The `cuMemHostAlloc` flags `opts` ask for on this machine.
    fn pinned_flags(&self, opts: PinnedOptions) -> u32 {
        let mut flags = 0;
        if opts.access == HostAccess::WriteOnly {
            flags |= HOST_WRITECOMBINED;
        }
        if opts.portable || self.inner.ops().device_count() > 1 {
            flags |= HOST_PORTABLE;
        }
        flags
    }

    /// `bytes` of pinned memory with `flags`, from the pool or new, zeroed.
    fn zeroed_alloc(&self, bytes: usize, flags: u32) -> Result<PinnedAlloc> {
        let alloc = PinnedAlloc::new(&self.inner, bytes, flags)?;
        zero_fill(alloc.ptr, bytes);
        Ok(alloc)
    }

    /// A mapped buffer of `len` zeroed elements.
    pub fn mapped_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<MappedBuffer<T>> {
        let bytes = checked_bytes::<T>(len)?;
        let mut flags = HOST_DEVICEMAP;
        if self.inner.ops().device_count() > 1 {
            flags |= HOST_PORTABLE;
        }
        let alloc = PinnedAlloc::new(&self.inner, bytes, flags)?;
        zero_fill(alloc.ptr, bytes);
        let device = alloc.device_ptr()?;
        Ok(MappedBuffer {
            alloc,
            device,
            len,
            _t: PhantomData,
        })
    }

    /// A mapped buffer holding a copy of `data`.
    pub fn mapped_from<T: DeviceCopy>(&self, data: &[T]) -> Result<MappedBuffer<T>> {
        let mut b = self.mapped_zeroed(data.len())?;
        b.copy_from_slice(data);
        Ok(b)
    }
}

macro_rules! host_slice {
    ($ty:ident) => {
        impl<T: DeviceCopy> $ty<T> {
            /// The flags the allocation really got (write-combining may have been refused).
            pub fn flags(&self) -> HostFlags {
                HostFlags(self.alloc.flags)
            }

            /// Size in bytes.
            pub fn bytes(&self) -> usize {
                self.len * std::mem::size_of::<T>()
            }

            pub(crate) fn host_ptr(&self) -> *mut T {
                self.alloc.ptr.cast()
            }

            /// The number of elements, read without the host access `Deref` makes (which
            /// first waits for GPU work that may write the memory): for passing the memory
            /// to more GPU work (ordered on the GPU, not by a host wait), and for memory the
            /// host and a running kernel share through atomics (signal cells, mailboxes).
            pub(crate) fn elems(&self) -> usize {
                self.len
            }

            pub(crate) fn gpu(&self) -> &Arc<Inner> {
                &self.alloc.gpu
            }

            pub(crate) fn uses(&self) -> &Uses {
                &self.alloc.uses
            }
        }

        impl<T: DeviceCopy> Deref for $ty<T> {
            type Target = [T];
            fn deref(&self) -> &[T] {
                self.alloc.uses.before_host_read();
                // SAFETY: the allocation holds `len` initialised (zeroed or copied) elements of
                // a DeviceCopy type, and stays mapped while `self` lives (a reset of its
                // context, which would unmap it, is refused meanwhile: `prepare_reset`). No GPU work writes it while the slice lives: a live launch
                // that writes it borrows the buffer exclusively, and the work of a leaked one
                // was waited for just above. Work queued later needs `&mut self`, which this
                // shared borrow excludes.
                unsafe { std::slice::from_raw_parts(self.host_ptr(), self.len) }
            }
        }

        impl<T: DeviceCopy> DerefMut for $ty<T> {
            fn deref_mut(&mut self) -> &mut [T] {
                self.alloc.uses.before_host_write();
                // SAFETY: as in `deref`, and no GPU work reads it either: `&mut self` excludes
                // live launches, and leaked ones were waited for just above.
                unsafe { std::slice::from_raw_parts_mut(self.host_ptr(), self.len) }
            }
        }

        impl<T: DeviceCopy> std::fmt::Debug for $ty<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("len", &self.len)
                    .field("type", &std::any::type_name::<T>())
                    .field("flags", &self.flags().to_string())
                    .finish()
            }
        }
    };
}

host_slice!(PinnedBuffer);
host_slice!(MappedBuffer);

impl<T: DeviceCopy> MappedBuffer<T> {
    /// A zeroed mapped buffer of the context `gpu` (for the runtime's own use).
    pub(crate) fn zeroed_in(gpu: &Arc<Inner>, len: usize) -> Result<Self> {
        let bytes = checked_bytes::<T>(len)?;
        let alloc = PinnedAlloc::new(gpu, bytes, HOST_DEVICEMAP)?;
        zero_fill(alloc.ptr, bytes);
        let device = alloc.device_ptr()?;
        Ok(MappedBuffer {
            alloc,
            device,
            len,
            _t: PhantomData,
        })
    }

    /// The address kernels use for this memory.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }
}

/// Host memory that already exists (a `Vec`), page-locked and mapped into the GPU's address
/// space while this value owns it (`cuMemHostRegister`). Kernels take it for `#[mapped]`
/// arguments like a [`MappedBuffer`]; it derefs to `[T]`, and [`Registered::into_inner`]
/// unregisters it and gives the `Vec` back. Registration costs about as much as pinning
/// (~0.44 s/GiB on the H200 machine): register long-lived data once.
///
/// It owns the `Vec` instead of borrowing it: a borrow would end if this value were leaked
/// (`mem::forget`) and leave the memory to the host while GPU work of a leaked launch guard
/// still wrote into it. Leaking an owner only leaks the memory.
pub struct Registered<T> {
    data: Vec<T>,
    device: u64,
    gpu: Arc<Inner>,
    pub(crate) uses: Uses,
    /// Whether the driver registration is still in place (until `into_inner` or drop).
    registered: bool,
}

/// A refused [`Gpu::register`]: why, and the `Vec` given back unchanged.
pub struct RegisterError<T> {
    /// Why the memory could not be registered.
    pub error: Box<Error>,
    /// The memory, unchanged.
    pub data: Vec<T>,
}

impl<T> std::fmt::Debug for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterError")
            .field("error", &self.error)
            .field("len", &self.data.len())
            .finish()
    }
}

impl<T> std::fmt::Display for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<T> std::error::Error for RegisterError<T> {}

impl<T> From<RegisterError<T>> for Error {
    fn from(e: RegisterError<T>) -> Error {
        *e.error
    }
}

impl Gpu {
    /// Page-lock and map `data` until the returned value is dropped or
    /// [`into_inner`](Registered::into_inner)ed. On failure the `Vec` comes back in the error.
    pub fn register<T: DeviceCopy>(
        &self,
        data: Vec<T>,
    ) -> std::result::Result<Registered<T>, RegisterError<T>> {
        // Counted while registered: a reset would drop the registration under kernels of
        // other devices that read the memory in place (it refuses instead).
        if let Err(error) = self.inner.ops().fault().begin_borrow(Borrow::HostBuffer) {
            return Err(RegisterError {
                error: Box::new(error),
                data,
            });
        }
        match self.register_ptr(&data) {
            Ok(device) => Ok(Registered {
                data,
                device,
                gpu: self.inner.clone(),
                uses: Uses::default(),
                registered: true,
            }),
            Err(error) => {
                self.inner.ops().fault().end_borrow(Borrow::HostBuffer);
                Err(RegisterError {
                    error: Box::new(error),
                    data,
                })
            }
        }
    }

    /// Register the memory of `data` with the driver; its device address.
    fn register_ptr<T: DeviceCopy>(&self, data: &[T]) -> Result<u64> {
        if data.is_empty() || std::mem::size_of::<T>() == 0 {
            return Err(Error::Usage(
                "cannot register an empty slice: there is no memory to map".into(),
            ));
        }
        self.inner.bind()?;
        // SAFETY: the memory of a `Vec` that the `Registered` made from it owns (it never
        // reallocates: only slices of it are handed out); unregistered before the `Vec` is
        // given back or freed.
        unsafe {
            self.inner
                .ops()
                .register(data.as_ptr().cast_mut().cast(), std::mem::size_of_val(data))
        }
    }
}

impl<T: DeviceCopy> Registered<T> {
    pub(crate) fn gpu(&self) -> &Arc<Inner> {
        &self.gpu
    }

    pub(crate) fn host_ptr(&self) -> *const T {
        self.data.as_ptr()
    }

    /// The number of elements, without the host access `Deref` makes (see `MappedBuffer`'s).
    pub(crate) fn elems(&self) -> usize {
        self.data.len()
    }

    /// The address kernels use for this memory.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.data[..])
    }

    /// Unregister the memory (after any GPU work still using it) and give the `Vec` back.
    pub fn into_inner(mut self) -> Vec<T> {
        self.unregister();
        std::mem::take(&mut self.data)
    }
}

impl<T> Registered<T> {
    fn unregister(&mut self) {
        // Nothing may still reach the memory once it changes hands, even work whose guard
        // was leaked.
        self.uses.before_host_write();
        if !std::mem::replace(&mut self.registered, false) {
            return;
        }
        self.gpu.ops().fault().end_borrow(Borrow::HostBuffer);
        // A later registration here may be other pages: its rate is measured afresh.
        let key = (
            self.data.as_ptr() as u64,
            std::mem::size_of_val(&self.data[..]),
        );
        self.gpu.random_rates.lock().expect("poisoned").remove(&key);
        if self.gpu.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: registered in `Gpu::register`, unregistered once (the flag above); no GPU
        // work uses it any more (waited for above).
        unsafe { self.gpu.ops().unregister(self.data.as_mut_ptr().cast()) };
    }
}

impl<T> Deref for Registered<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // No GPU work writes the memory while the slice lives (see `PinnedBuffer`'s `Deref`).
        self.uses.before_host_read();
        &self.data
    }
}

impl<T> DerefMut for Registered<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.uses.before_host_write();
        &mut self.data
    }
}

impl<T: DeviceCopy> std::fmt::Debug for Registered<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("len", &self.data.len())
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T> Drop for Registered<T> {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests {
    use crate::fault::Borrow;
    use crate::gpu::Gpu;

    /// Every page-locked host allocation is counted while its handle lives, whatever the
    /// handle (pinned, mapped, signals, an inbox or outbox), and not once it is gone: the count is what
    /// keeps a reset of the context from unmapping memory under a live buffer. A lost context
    /// refuses new ones without counting them.
    #[test]
    fn host_allocations_are_counted_while_they_live() {
        let gpu = Gpu::simulator();
        let live = || gpu.inner.ops().fault().borrowed(Borrow::HostBuffer);
        let pinned = gpu.pinned_from(&[1u32, 2, 3]).unwrap();
        let mapped = gpu.mapped_zeroed::<u8>(5).unwrap();
        let signals = gpu.signals(2).unwrap();
        let (inbox, outbox) = (gpu.inbox::<u64>(4).unwrap(), gpu.outbox::<u64>(4).unwrap());
        assert_eq!(live(), 5);
        drop(mapped);
        assert_eq!(live(), 4);
        let moved = std::thread::spawn(move || pinned.iter().sum::<u32>());
        assert_eq!(moved.join().unwrap(), 6);
        drop((signals, inbox, outbox));
        assert_eq!(live(), 0, "pool reuse does not count");
        let again = gpu.pinned_zeroed::<u32>(3).unwrap();
        assert_eq!(live(), 1, "a buffer from the pool counts");
        drop(again);
        let registered = gpu.register(vec![5u32; 1000]).unwrap();
        assert_eq!(live(), 1, "registered memory counts");
        assert_eq!(registered.into_inner().len(), 1000);
        assert_eq!(live(), 0);
        let registered = gpu.register(vec![5u32; 1000]).unwrap();
        drop(registered);
        assert_eq!(live(), 0);
        assert!(gpu.register(Vec::<u32>::new()).is_err());
        assert_eq!(live(), 0, "a refused registration is not counted");

        // A context with nothing pooled (a lost one frees nothing; its reset would).
        let lost = Gpu::simulator();
        lost.inner
            .ops()
            .fault()
            .mark_lost("lost for the test".into());
        let e = lost.pinned_zeroed::<u32>(3).unwrap_err();
        assert!(e.is_context_lost(), "{e}");
        assert!(lost.mapped_zeroed::<u32>(3).is_err());
        let refused = lost.register(vec![1u8; 10]).unwrap_err();
        assert_eq!(refused.data.len(), 10, "the data comes back");
        assert_eq!(lost.inner.ops().fault().borrowed(Borrow::HostBuffer), 0);
    }

    /// Pinned memory made on a thread bound to a node's CPUs (what a device set's shards
    /// get where the system names their device's node) comes back zeroed, is the caller's to
    /// use, and may go to another thread and back to the pool from there.
    #[test]
    fn pinned_memory_made_on_bound_cpus_is_zeroed_and_moves_between_threads() {
        let gpu = Gpu::simulator();
        let cpus: Vec<usize> =
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        let mut b = gpu.pinned_zeroed_on::<u32>(&cpus, 4097).unwrap();
        assert!(b.iter().all(|&v| v == 0));
        b[4096] = 7;
        let before = gpu.pool_stats();
        let sum = std::thread::spawn(move || {
            let s: u32 = b.iter().sum();
            drop(b);
            s
        })
        .join()
        .unwrap();
        assert_eq!(sum, 7);
        // Dropped on the other thread, it went back to the pool: the next one reuses it,
        // zeroed again.
        let again = gpu.pinned_zeroed_on::<u32>(&cpus, 4097).unwrap();
        assert!(again.iter().all(|&v| v == 0));
        let after = gpu.pool_stats();
        assert_eq!(after.pinned_allocations, before.pinned_allocations);
        assert_eq!(after.pinned_reuses, before.pinned_reuses + 1);
    }
}
