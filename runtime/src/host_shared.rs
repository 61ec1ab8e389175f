//! Host memory that berth did not allocate and that its owner shares immutably — an Arrow
//! buffer, an `Arc<[T]>`, a `'static` slice — reached by kernels without a copy:
//! [`Gpu::share`] page-locks and maps it where it is for as long as the [`HostShared`] holds
//! the owner, and kernels read it in place (`#[mapped]`) or copy it asynchronously from where
//! it is (`#[pinned_async]`, elementwise pipelines included).
//!
//! What keeps it sound is the owner type's promise ([`SharedHost`]): the memory stays where it
//! is, allocated and unchanged, while the value lives. `HostShared` holds the value, so
//! neither a free nor a write can happen under a kernel, and it is read-only to launches:
//! passing it to a `&mut [T]` argument is refused.

use crate::backend::{HOST_DEVICEMAP, HOST_PORTABLE};
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::fault::Borrow;
use crate::gpu::Gpu;
use crate::host_mem::HostFlags;
use crate::track::Uses;
use berth_device::DeviceCopy;
use std::ffi::c_void;
use std::ops::Deref;
use std::sync::Arc;

/// An owner of host memory that others may share but no one changes: the memory stays at one
/// address, allocated and unwritten, while the value lives.
///
/// # Safety
/// An implementation promises, for as long as the value lives (moved or not):
/// 1. every call of [`host_slice`](SharedHost::host_slice) returns the same slice (address and
///    length);
/// 2. that memory stays allocated;
/// 3. nothing writes it: not the value's own methods, not another owner of the same memory
///    (a clone of an `Arc`, another Arrow buffer over the same bytes), not code that holds a
///    raw pointer to it. Elements without interior mutability guarantee nothing of this by
///    themselves: the owner type does (`Arc<[T]>` hands out no `&mut` while shared; an Arrow
///    `Buffer` is immutable).
pub unsafe trait SharedHost: Send + Sync + 'static {
    /// The element type kernels see.
    type Elem: DeviceCopy;
    /// The memory.
    fn host_slice(&self) -> &[Self::Elem];
}

// SAFETY: an `Arc<[T]>` gives `&mut` access only while it is the sole owner
// (`Arc::get_mut`), which it is not while a `HostShared` holds this clone; the slice it
// points to never moves or changes length, and stays allocated while any clone lives.
// `DeviceCopy` elements are plain data with no interior mutability.
unsafe impl<T: DeviceCopy + Send + Sync + 'static> SharedHost for Arc<[T]> {
    type Elem = T;
    fn host_slice(&self) -> &[T] {
        self
    }
}

// SAFETY: as for `Arc<[T]>`: the `Vec` inside cannot be reached mutably (and so cannot
// reallocate) while this clone exists.
unsafe impl<T: DeviceCopy + Send + Sync + 'static> SharedHost for Arc<Vec<T>> {
    type Elem = T;
    fn host_slice(&self) -> &[T] {
        self
    }
}

// SAFETY: a `'static` shared slice is never freed, and a shared reference forbids writes
// for its whole life (`DeviceCopy` elements have no interior mutability).
unsafe impl<T: DeviceCopy + Send + Sync + 'static> SharedHost for &'static [T] {
    type Elem = T;
    fn host_slice(&self) -> &[T] {
        self
    }
}

#[cfg(feature = "arrow")]
mod arrow_impls {
    use super::SharedHost;
    use arrow_buffer::{ArrowNativeType, Buffer, ScalarBuffer};
    use berth_device::DeviceCopy;

    // SAFETY: an Arrow `Buffer` is an immutable view of reference-counted bytes: its safe
    // API writes them only through `into_mutable`, which requires the sole reference (this
    // clone makes that impossible while it lives), and the bytes are freed only when the
    // last reference goes. Its pointer and length are fixed at construction.
    unsafe impl SharedHost for Buffer {
        type Elem = u8;
        fn host_slice(&self) -> &[u8] {
            self.as_slice()
        }
    }

    // SAFETY: a `ScalarBuffer` is a typed `Buffer` (see above), aligned for `T` at
    // construction; `T` is a plain number (`ArrowNativeType`) that the GPU may copy.
    unsafe impl<T: ArrowNativeType + DeviceCopy> SharedHost for ScalarBuffer<T> {
        type Elem = T;
        fn host_slice(&self) -> &[T] {
            self
        }
    }
}

/// Shared host memory of an owner `H`, page-locked and mapped into the GPU's address space
/// where it is, while this value holds the owner ([`Gpu::share`]). Kernels take it for
/// `#[mapped]` arguments (read in place) and `#[pinned_async]` ones (copied asynchronously
/// from these pages, no staging copy on the host), never for `&mut` ones. It derefs to the
/// elements; [`into_owner`](HostShared::into_owner) unregisters and gives the owner back.
///
/// Registration page-locks every page the memory touches, and a page can be registered once:
/// two values over memory sharing a page (two slices of one Arrow buffer) are refused with an
/// `Error::Usage` that says so. Share the whole buffer once and pass slices' offsets to the
/// kernel instead.
pub struct HostShared<H: SharedHost> {
    owner: Option<H>,
    /// The owner's slice, read once (the owner promises it never changes).
    host: *const H::Elem,
    len: usize,
    device: u64,
    gpu: Arc<Inner>,
    pub(crate) uses: Uses,
    /// Alive while this value is: its address identifies this sharing of the memory to a
    /// [`DeviceCache`](crate::DeviceCache), which holds a `Weak` of it.
    pub(crate) alive: Arc<()>,
}

// SAFETY: the raw pointer is the owner's memory, which the owner (`Send + Sync`) shares
// across threads itself; it is only read, through `&self`.
unsafe impl<H: SharedHost> Send for HostShared<H> {}
// SAFETY: as above; host access through `&self` only reads.
unsafe impl<H: SharedHost> Sync for HostShared<H> {}

impl Gpu {
    /// Page-lock and map the memory of `owner` where it is, until the returned value is
    /// dropped or [`into_owner`](HostShared::into_owner)ed: a zero-copy way for kernels to
    /// read memory berth did not allocate, such as Arrow arrays (`ScalarBuffer<T>` and
    /// `Buffer`, with the `arrow` feature). Registration costs about as much as pinning (~0.44
    /// s/GiB on an H200 machine): share long-lived data once.
    ///
    /// Refused (`Error::Usage`) for empty memory and for memory of which a page is already
    /// registered; `Error::ContextLost` on a lost context.
    pub fn share<H: SharedHost>(&self, owner: H) -> Result<HostShared<H>> {
        let (host, len) = {
            let s = owner.host_slice();
            (s.as_ptr(), s.len())
        };
        let bytes = len * std::mem::size_of::<H::Elem>();
        if bytes == 0 {
            return Err(Error::Usage(
                "cannot share empty memory with the GPU: there is nothing to map".into(),
            ));
        }
        // Counted while registered, like `Registered`: a reset would drop the registration
        // under work that reads the memory in place.
        self.inner.ops().fault().begin_borrow(Borrow::HostBuffer)?;
        let registered = self
            .inner
            .bind()
            .and_then(|()| register_pages(&self.inner, host as u64, bytes));
        match registered {
            Ok(device) => Ok(HostShared {
                owner: Some(owner),
                host,
                len,
                device,
                gpu: self.inner.clone(),
                uses: Uses::default(),
                alive: Arc::new(()),
            }),
            Err(e) => {
                self.inner.ops().fault().end_borrow(Borrow::HostBuffer);
                Err(e)
            }
        }
    }
}

/// The size of a host page.
fn page_size() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sysconf` reads a constant of the system; no memory is involved.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            return p as u64;
        }
    }
    4096
}

/// The pages that hold `host..host + bytes`.
fn page_hull(host: u64, bytes: usize) -> (u64, u64) {
    let p = page_size();
    (host / p * p, (host + bytes as u64).div_ceil(p) * p)
}

/// Register the pages of `host..host + bytes` that no registration of the context covers yet,
/// count one more user of every run covering them, and return the memory's device address.
fn register_pages(inner: &Arc<Inner>, host: u64, bytes: usize) -> Result<u64> {
    let (start, end) = page_hull(host, bytes);
    let mut runs = inner.shared_pages.lock().expect("poisoned");
    let mut failed = None;
    for (a, b) in runs.gaps(start, end) {
        // SAFETY: the pages `a..b` hold bytes of the owner's memory, which stays allocated
        // at this address while the owner lives (`SharedHost`'s contract); the run is
        // unregistered only when no shared value uses it (`release`), each value holding its
        // owner until then. Other bytes of these pages (other allocations) may be freed
        // meanwhile, which the contract allows: no device work reaches them, as a value's
        // device range covers its own bytes only.
        match unsafe { inner.ops().register(a as *mut c_void, (b - a) as usize) } {
            Ok(device) => runs.insert(a, b, device),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let runs_here = runs.overlapping(start, end);
    // The device sees the memory as one range only if every run maps at the same offset from
    // its host address (true wherever the GPU uses host addresses for registered memory).
    let offset = runs_here
        .first()
        .map(|(s, r)| r.device.wrapping_sub(*s))
        .unwrap_or(0);
    if failed.is_none()
        && runs_here
            .iter()
            .any(|(s, r)| r.device.wrapping_sub(*s) != offset)
    {
        failed = Some(Error::Usage(
            "this memory shares pages with other shared memory, and the GPU maps the two at \
             addresses that are not contiguous: share memory that does not share pages (one \
             Arrow buffer instead of slices of it)"
                .into(),
        ));
    }
    if let Some(e) = failed {
        for s in runs.drop_unused() {
            // SAFETY: registered just above by this call, used by nothing yet.
            unsafe { inner.ops().unregister(s as *mut c_void) };
        }
        return Err(e);
    }
    runs.acquire(start, end);
    Ok(host.wrapping_add(offset))
}

impl<H: SharedHost> HostShared<H> {
    pub(crate) fn gpu(&self) -> &Arc<Inner> {
        &self.gpu
    }

    pub(crate) fn host_ptr(&self) -> *const H::Elem {
        self.host
    }

    /// The number of elements.
    pub fn elems(&self) -> usize {
        self.len
    }

    /// The address kernels use for this memory.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<H::Elem>()
    }

    /// The flags the memory is registered with: mapped, portable.
    pub fn flags(&self) -> HostFlags {
        HostFlags(HOST_DEVICEMAP | HOST_PORTABLE)
    }

    /// The owner, without waiting for the GPU: only shared access, which the GPU's reads
    /// allow.
    pub fn owner(&self) -> &H {
        self.owner.as_ref().expect("owner present until into_owner")
    }

    /// Unregister the memory (after any GPU work still reading it) and give the owner back.
    pub fn into_owner(mut self) -> H {
        self.unregister();
        self.owner.take().expect("owner present until into_owner")
    }

    fn unregister(&mut self) {
        if self.owner.is_none() {
            return;
        }
        // The pages stop being mapped: nothing may still read them, even work whose guard
        // was leaked.
        self.uses.before_host_write();
        self.gpu.ops().fault().end_borrow(Borrow::HostBuffer);
        let key = (self.host as u64, self.bytes());
        self.gpu.random_rates.lock().expect("poisoned").remove(&key);
        let (start, end) = page_hull(self.host as u64, self.bytes());
        let free = self
            .gpu
            .shared_pages
            .lock()
            .expect("poisoned")
            .release(start, end);
        if self.gpu.is_lost() || self.gpu.bind().is_err() {
            return;
        }
        for s in free {
            // SAFETY: a run registered by `register_pages`, which no shared value uses any
            // more (the last one is this, whose GPU work was waited for above); forgotten by
            // the table, so unregistered once.
            unsafe { self.gpu.ops().unregister(s as *mut c_void) };
        }
    }
}

impl<H: SharedHost> Deref for HostShared<H> {
    type Target = [H::Elem];
    fn deref(&self) -> &[H::Elem] {
        // Kernels never write this memory (it is read-only to launches), so the host may
        // read it at any time.
        self.owner().host_slice()
    }
}

impl<H: SharedHost> std::fmt::Debug for HostShared<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostShared")
            .field("len", &self.len)
            .field("type", &std::any::type_name::<H::Elem>())
            .field("owner", &std::any::type_name::<H>())
            .finish()
    }
}

impl<H: SharedHost> Drop for HostShared<H> {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests {
    use crate::fault::Borrow;
    use crate::gpu::Gpu;
    use std::sync::Arc;

    /// Shared memory is the owner's own (same address, no copy), counted while registered,
    /// refused when empty or on a lost context, and the owner comes back unchanged.
    #[test]
    fn shared_memory_is_the_owners_and_counted_while_registered() {
        let gpu = Gpu::simulator();
        let live = || gpu.inner.ops().fault().borrowed(Borrow::HostBuffer);
        let data: Arc<[u32]> = (0..1000u32).collect::<Vec<_>>().into();
        let shared = gpu.share(data.clone()).unwrap();
        assert_eq!(shared.as_ptr(), data.as_ptr(), "no copy");
        assert_eq!((shared.elems(), shared.bytes()), (1000, 4000));
        assert_eq!(shared[999], 999);
        assert_eq!(live(), 1);
        let back = shared.into_owner();
        assert!(Arc::ptr_eq(&back, &data));
        assert_eq!(live(), 0);
        drop(gpu.share(data.clone()).unwrap());
        assert_eq!(live(), 0);

        static TABLE: [u8; 3] = [1, 2, 3];
        assert_eq!(&*gpu.share(&TABLE[..]).unwrap(), &[1, 2, 3]);
        let e = gpu.share(Arc::<[u64]>::from(Vec::new())).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        assert_eq!(live(), 0);

        // Memory shared twice, and two allocations sharing a page, reuse the registration of
        // the pages they share; it goes with its last user.
        let runs = || {
            gpu.inner
                .shared_pages
                .lock()
                .unwrap()
                .overlapping(0, u64::MAX)
        };
        let small: Arc<[u8]> = vec![1u8; 100].into();
        let (a, b) = (
            gpu.share(small.clone()).unwrap(),
            gpu.share(small.clone()).unwrap(),
        );
        assert_eq!(a.device_ptr(), b.device_ptr());
        let other: Arc<[u8]> = vec![2u8; 100].into();
        let c = gpu.share(other).unwrap();
        let before = runs().len();
        assert!((1..=2).contains(&before), "{before} runs");
        drop(a);
        assert_eq!(runs().len(), before);
        drop((b, c));
        assert!(runs().is_empty());

        let lost = Gpu::simulator();
        lost.inner
            .ops()
            .fault()
            .mark_lost("lost for the test".into());
        assert!(lost.share(data).unwrap_err().is_context_lost());
        assert_eq!(lost.inner.ops().fault().borrowed(Borrow::HostBuffer), 0);
    }
}
