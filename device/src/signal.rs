//! Signals between a running kernel and the host, in mapped (zero-copy) host memory.
//!
//! A kernel takes them as `#[mapped] s: &Signals`, `#[mapped] inbox: &Inbox<T>` (the host
//! sends, the kernel receives) or `#[mapped] outbox: &Outbox<T>` (the other way); the host
//! holds the matching `berth::SignalBuffer`, `berth::InboxBuffer<T>` (which only sends) or
//! `berth::OutboxBuffer<T>` (which only receives) and uses it while the kernel runs. Neither side ever holds a Rust reference to the shared cells: every access is
//! an atomic at system scope (`ld.acquire.sys` / `st.release.sys` on the GPU), so a spin loop
//! cannot be optimised into reading a stale value, and what a release store publishes (a
//! mailbox item) is visible to the acquiring side. Waits are bounded by a timeout in
//! nanoseconds (`%globaltimer` on the GPU, a monotonic clock on the host): a lost partner
//! ends the wait, never hangs it.

use crate::DeviceCopy;
use core::sync::atomic::{AtomicU32, Ordering};

/// Nanoseconds from a monotonic clock: `%globaltimer` on the GPU (nanoseconds, updated about
/// every microsecond), process time on the host.
///
/// ```
/// use berth_device::signal::now_ns;
/// let start = now_ns();
/// // … work, or a bounded wait …
/// let waited = now_ns().wrapping_sub(start);
/// assert!(waited < 60_000_000_000); // monotonic: never "negative"
/// ```
#[inline(always)]
#[must_use]
pub fn now_ns() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reads a special register; no memory access.
        unsafe {
            core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack));
        }
        t
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::host::now_ns()
    }
}

/// A kernel's view of `u32` signal cells in mapped host memory.
///
/// ```
/// use berth_device::Signals;
/// /// A kernel body's side of a progress flag: publish each chunk's number, stop when asked.
/// fn worker(s: &Signals, chunks: u32) -> u32 {
///     for c in 0..chunks {
///         if s.load(1) != 0 {
///             return c; // the host asked to stop
///         }
///         // … the chunk's work …
///         s.store(0, c + 1); // progress, visible to the host
///     }
///     chunks
/// }
/// let mut cells = [0u32; 2];
/// // SAFETY: `cells` outlives the view and is reached only through it. (In a kernel the
/// // launcher builds the view of a `#[mapped] &Signals` argument.)
/// let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), 2) };
/// assert_eq!((worker(&s, 3), s.load(0)), (3, 3));
/// s.store(1, 1);
/// assert_eq!(worker(&s, 3), 0);
/// ```
pub struct Signals {
    ptr: *mut u32,
    len: usize,
}

impl Signals {
    /// The view of a kernel argument.
    ///
    /// # Safety
    /// `ptr` addresses `len` `u32` cells, 4-aligned, valid for the kernel, accessed by every
    /// party only atomically.
    ///
    /// ```
    /// use berth_device::Signals;
    /// let mut cells = [0u32; 4];
    /// // SAFETY: 4 aligned cells that outlive the view, reached only through it (atomically).
    /// let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// assert_eq!(s.len(), 4);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut u32, len: usize) -> Self {
        Signals { ptr, len }
    }

    /// Number of cells.
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// assert_eq!(s.len(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no cells.
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// assert!(!s.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    #[track_caller]
    fn cell(&self, i: usize) -> &AtomicU32 {
        if i >= self.len {
            crate::panic::index_out_of_bounds(i, self.len)
        }
        // SAFETY: in bounds; `from_raw`'s contract makes the cell an atomic-only u32.
        unsafe { AtomicU32::from_ptr(self.ptr.add(i)) }
    }

    /// Read cell `i` (acquire, system scope).
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// s.store(0, 7);
    /// assert_eq!(s.load(0), 7);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> u32 {
        self.cell(i).load(Ordering::Acquire)
    }

    /// Write cell `i` (release, system scope): everything written before is visible to the
    /// side that reads `v`.
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// // Write the results, then publish: a reader that loads 1 from cell 0 sees them.
    /// s.store(0, 1);
    /// assert_eq!(s.load(0), 1);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: u32) {
        self.cell(i).store(v, Ordering::Release)
    }

    /// Add to cell `i`, returning the previous value, ordered like a release store followed
    /// by an acquire load. (On this target `fetch_add` alone drops its ordering, so the fences
    /// are explicit.)
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// // Claim a ticket: every caller gets a different previous value.
    /// assert_eq!((s.add(1, 1), s.add(1, 1)), (0, 1));
    /// assert_eq!(s.load(1), 2);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn add(&self, i: usize, v: u32) -> u32 {
        let c = self.cell(i);
        core::sync::atomic::fence(Ordering::Release);
        let old = c.fetch_add(v, Ordering::Relaxed);
        core::sync::atomic::fence(Ordering::Acquire);
        old
    }

    /// Wait until `ready(cell i)` holds, for at most `timeout_ns`; the value, or `None` when
    /// the time ran out.
    ///
    /// ```
    /// # use berth_device::Signals;
    /// # let mut cells = [0u32; 2];
    /// # // SAFETY: `cells` outlives the view and is reached only through it.
    /// # let s = unsafe { Signals::from_raw(cells.as_mut_ptr(), cells.len()) };
    /// s.store(0, 3);
    /// // Ready: the value comes back at once.
    /// assert_eq!(s.wait(0, |v| v >= 3, 1_000_000), Some(3));
    /// // Never ready: `None` after the timeout (1 ms), no hang.
    /// assert_eq!(s.wait(1, |v| v != 0, 1_000_000), None);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self, i: usize, ready: impl Fn(u32) -> bool, timeout_ns: u64) -> Option<u32> {
        let c = self.cell(i);
        poll_until(timeout_ns, || {
            let v = c.load(Ordering::Acquire);
            ready(v).then_some(v)
        })
    }
}

/// Read `*src` with volatile loads of its words in ascending address order (words as wide as
/// its alignment, up to 8 bytes), as nvcc reads a `volatile` struct. A plain `read_volatile` of
/// a mailbox item let LLVM issue the last field's load first (12, 4, 8 for a 12-byte item);
/// after such loads ptxas had the item's first use wait for the last load issued, and the
/// release that follows cost about 0.5 µs more a message on the H200 than after loads issued
/// in field order (`bench/signals/echo_variants.cu`, `docs/design-notes.md`).
///
/// # Safety
/// `src` is valid for volatile reads of `T` and aligned, and every bit pattern read is a valid
/// `T` (`DeviceCopy`'s contract).
#[inline(always)]
unsafe fn read_volatile_in_order<T: DeviceCopy>(src: *const T) -> T {
    let mut out = core::mem::MaybeUninit::<T>::uninit();
    let dst = out.as_mut_ptr();
    // SAFETY: the caller's contract; words of `T`'s alignment tile it exactly (a size is a
    // multiple of the alignment).
    unsafe {
        match core::mem::align_of::<T>() {
            1 => copy_words::<u8, T>(src, dst),
            2 => copy_words::<u16, T>(src, dst),
            4 => copy_words::<u32, T>(src, dst),
            _ => copy_words::<u64, T>(src, dst),
        }
        out.assume_init()
    }
}

/// Copy `*src` to `*dst` as volatile reads of `W` words, first word first.
///
/// # Safety
/// `src` and `dst` are valid for `T` and aligned for `W`, whose size divides `T`'s.
#[inline(always)]
unsafe fn copy_words<W: Copy, T>(src: *const T, dst: *mut T) {
    let (src, dst) = (
        src.cast::<core::mem::MaybeUninit<W>>(),
        dst.cast::<core::mem::MaybeUninit<W>>(),
    );
    for i in 0..core::mem::size_of::<T>() / core::mem::size_of::<W>() {
        // SAFETY: word `i` lies inside both (the caller's contract); `MaybeUninit` words take
        // any bytes.
        unsafe { dst.add(i).write(src.add(i).read_volatile()) };
    }
}

/// Polls between two reads of the clock in [`poll_until`].
const POLLS_PER_CLOCK_READ: u32 = 16;

/// Poll `ready` until it gives a value, for about `timeout_ns` at most (`None` then). A poll
/// of mapped memory from the GPU is a round trip over the link, so the clock is read only once
/// the first poll has failed, and then every [`POLLS_PER_CLOCK_READ`] polls: the timeout may
/// pass by that many polls before it is noticed.
#[inline(always)]
fn poll_until<R>(timeout_ns: u64, mut ready: impl FnMut() -> Option<R>) -> Option<R> {
    if let Some(r) = ready() {
        return Some(r);
    }
    let start = now_ns();
    let mut polls = 0u32;
    loop {
        if let Some(r) = ready() {
            return Some(r);
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(POLLS_PER_CLOCK_READ) && now_ns().wrapping_sub(start) > timeout_ns {
            return None;
        }
        core::hint::spin_loop();
    }
}

/// One slot of a mailbox ring: a sequence number and an item. Shared layout of host and
/// device.
///
/// `seq`'s low 31 bits count messages (message numbers are taken modulo 2^31); its top bit,
/// [`Slot::HELD`], is set while one party holds the slot to write or read its item.
///
/// ```
/// use berth_device::Slot;
/// // A fresh ring of 4 slots, as the host lays it out: slot k waits for message k.
/// let ring: Vec<Slot<f32>> = (0..4).map(|k| Slot { seq: Slot::<f32>::initial_seq(k), item: 0.0 }).collect();
/// assert_eq!(ring[3].seq, 3);
/// ```
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Slot<T> {
    /// Whose turn: message `n` may be written when `seq == n` and read when `seq == n + 1`
    /// (counted modulo 2^31); [`Slot::HELD`] is set while someone writes or reads the item.
    pub seq: u32,
    /// The item.
    pub item: T,
}

// SAFETY: `#[repr(C)]` of a u32 and a DeviceCopy item, no pointers; all-zero bytes are a
// value. A slot may have padding (`Slot<u64>`: 4 bytes after `seq`), so `__BERTH_NO_PADDING`
// refuses such an instance wherever its bytes would be read as bytes (a kernel scalar).
unsafe impl<T: DeviceCopy> DeviceCopy for Slot<T> {
    const __BERTH_NO_PADDING: () = {
        let () = T::__BERTH_NO_PADDING;
        assert!(
            size_of::<Slot<T>>() == size_of::<u32>() + size_of::<T>(),
            "this `Slot<T>` has padding bytes after its `u32` sequence number (its item is aligned to more than 4), which must not be copied to the GPU as a scalar: pass the ring as `#[mapped] &Inbox<T>` or `&Outbox<T>`"
        );
    };
}

impl<T> Slot<T> {
    /// The bit of `seq` set while one party holds the slot (writing or reading its item); the
    /// other 31 bits count messages.
    ///
    /// ```
    /// use berth_device::Slot;
    /// // Message 5's sequence number while its producer writes the item:
    /// let writing = 5 | Slot::<u32>::HELD;
    /// assert_eq!(writing & !Slot::<u32>::HELD, 5);
    /// ```
    pub const HELD: u32 = 1 << 31;

    /// The `seq` that stands for message count `n` (its low 31 bits).
    ///
    /// ```
    /// use berth_device::Slot;
    /// assert_eq!(Slot::<u32>::count(7), 7);
    /// assert_eq!(Slot::<u32>::count(7 + (1 << 31)), 7); // counted modulo 2^31
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn count(n: u32) -> u32 {
        n & !Self::HELD
    }

    /// Slots of a fresh ring: slot `k` ready for message `k`.
    ///
    /// ```
    /// use berth_device::Slot;
    /// assert_eq!((Slot::<u32>::initial_seq(0), Slot::<u32>::initial_seq(5)), (0, 5));
    /// ```
    pub fn initial_seq(k: usize) -> u32 {
        k as u32
    }
}

/// A ring of `T` in mapped host memory between the host and a kernel: the protocol under
/// [`Inbox`] (the host sends, the kernel receives) and [`Outbox`] (the kernel sends), which
/// are what kernels take as arguments. On its own it is the two-way view, for code that lays
/// out a ring itself (`from_raw`).
///
/// Messages are numbered 0, 1, 2, … (modulo 2^31) by the caller: message `n` lives in slot
/// `n % capacity`. The sender of `n` waits for `seq == n` (acquire), writes the item and
/// publishes `seq = n + 1` (release); the receiver of `n` waits for `seq == n + 1`, reads the
/// item and frees the slot for message `n + capacity`. The host's `InboxBuffer` and
/// `OutboxBuffer` hold a slot (`seq`'s [`Slot::HELD`] bit) while they write or read an item,
/// which the kernel's waits see as "not yet".
///
/// # One sender and one receiver on the kernel's side
///
/// The kernel's side waits with loads, not a compare-and-swap: a GPU's atomic
/// read-modify-write on mapped host memory is not atomic against the host's on a machine
/// without host-native atomics (PCIe), and on some machines it does not reach host memory at
/// all. So the kernel's [`send`](Self::send), [`reserve`](Self::reserve) and
/// [`recv`](Self::recv) are `unsafe`: one thread of the launch sends on a mailbox, and one
/// receives on it (the same thread or another); no other thread of the launch takes either
/// role. The simulator checks it: a second thread taking a role is a launch error naming both
/// threads and the mailbox. The usual shape is one thread of the launch serving requests,
/// picked by `if thread::index() != 0 { return; }` (thread numbers are distinct over every
/// axis of the grid and the block; `thread::global_x()` is 0 in one thread of each row and
/// layer of a 2D or 3D grid): the host sends into its inbox and receives from its outbox, the
/// kernel the other way round. The types keep the host out of the kernel's role
/// (`InboxBuffer` only sends, `OutboxBuffer` only receives); two launches running at once on
/// one buffer would share the kernel's role, a logic error: messages are lost or mixed, but
/// every access of an item on either side stays a volatile access of plain data (any bytes
/// are a valid `T`) in memory outside Rust's allocations, and `seq` an atomic.
///
/// ```
/// use berth_device::{Mailbox, Slot};
/// let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
/// // SAFETY: a fresh ring of 2 slots (a power of two) that outlives the view and is reached
/// // only through it. (In a kernel the launcher builds the view of a `#[mapped] &Inbox<T>`
/// // or `&Outbox<T>` argument.)
/// let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
/// // One side sends messages 0 and 1, the other receives them in order.
/// // SAFETY: this one thread is the ring's only sender and only receiver.
/// unsafe {
///     assert!(m.send(0, 10, 1_000_000) && m.send(1, 11, 1_000_000));
///     assert!(!m.send(2, 12, 1_000_000)); // the ring is full: times out
///     assert_eq!((m.recv(0, 1_000_000), m.recv(1, 1_000_000)), (Some(10), Some(11)));
/// }
/// ```
pub struct Mailbox<T> {
    ptr: *mut Slot<T>,
    len: usize,
}

impl<T: DeviceCopy> Mailbox<T> {
    /// The view of a kernel argument.
    ///
    /// # Safety
    /// 1. `ptr` addresses `len` slots laid out by the host's `InboxBuffer` or `OutboxBuffer` (slot `k`'s `seq`
    ///    starts at `k`), valid for the kernel.
    /// 2. `len` is a power of two, at least 2 and at most 2^30: then a slot's free and
    ///    published sequence numbers never coincide, even after the counters wrap.
    /// 3. Every party accesses `seq` only atomically, and touches `item` only in its turn
    ///    under the protocol above.
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// assert_eq!(m.capacity(), 2);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut Slot<T>, len: usize) -> Self {
        Mailbox { ptr, len }
    }

    /// Slots in the ring.
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // Messages `n` and `n + capacity` share a slot.
    /// assert_eq!(m.capacity(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn slot(&self, n: u32) -> *mut Slot<T> {
        // `len` is a power of two (`from_raw`'s contract), so the mask is `n % len`: a kernel
        // forms a slot's address on every turn, and a division by a length known only at run
        // time costs a GPU thread about a hundred cycles. Even for a length that breaks the
        // contract, the masked index is at most `len - 1`.
        // SAFETY (of the pointer arithmetic): `n & (len - 1) <= len - 1 < len` (len > 0 is
        // checked by callers).
        unsafe { self.ptr.add(n as usize & (self.len - 1)) }
    }

    #[inline(always)]
    fn seq(&self, n: u32) -> &AtomicU32 {
        // SAFETY: a live slot of the ring; `seq` is atomic-only by `from_raw`'s contract.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.slot(n)).seq) }
    }

    /// Wait until message `n`'s `seq` shows `want` (acquire), at most `timeout_ns`; whether
    /// it does. A slot the host holds (`HELD` set) never shows it. On the simulator the slot is
    /// then held (`HELD` set) until the turn ends.
    fn wait_turn(&self, n: u32, want: u32, timeout_ns: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let s = self.seq(n);
        let want = Slot::<T>::count(want);
        poll_until(timeout_ns, || {
            #[cfg(target_arch = "nvptx64")]
            let turn = s.load(Ordering::Acquire) == want;
            // The simulator's threads are host threads, and its mapped memory a Rust
            // allocation: there the turn is held by compare-and-swap, as the host's calls hold
            // it, so that parties taking one role by mistake still never touch an item at
            // once (the GPU cannot swap on host memory; see the type).
            #[cfg(not(target_arch = "nvptx64"))]
            let turn = s.load(Ordering::Relaxed) == want
                && s.compare_exchange(
                    want,
                    want | Slot::<T>::HELD,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok();
            turn.then_some(())
        })
        .is_some()
    }

    /// Receive message `n`, waiting at most `timeout_ns`.
    ///
    /// # Safety
    /// No other thread of the launch receives on this mailbox (see
    /// [the type](Self#one-sender-and-one-receiver-on-the-kernels-side)).
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the ring's only sender and only receiver.
    /// unsafe {
    ///     assert_eq!(m.recv(0, 1_000), None); // nothing sent yet: timed out
    ///     assert!(m.send(0, 42, 1_000));
    ///     assert_eq!(m.recv(0, 1_000), Some(42));
    ///     assert_eq!(m.recv(0, 1_000), None); // received already: the slot waits for message 2
    /// }
    /// ```
    #[track_caller]
    pub unsafe fn recv(&self, n: u32, timeout_ns: u64) -> Option<T> {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::mailbox_turn(self.ptr as usize, crate::host::MailboxRole::Receiver);
        if !self.wait_turn(n, n.wrapping_add(1), timeout_ns) {
            return None;
        }
        // SAFETY: the item lies in the live ring (`from_raw`'s contract); message n is
        // published (acquired above) and this thread is the launch's only receiver (the
        // caller's contract), so the sender is done with it. A volatile read of plain data:
        // any bytes are a valid `T`.
        let item = unsafe { read_volatile_in_order(&raw const (*self.slot(n)).item) };
        self.seq(n).store(
            Slot::<T>::count(n.wrapping_add(self.len as u32)),
            Ordering::Release,
        );
        Some(item)
    }

    /// Send message `n`, waiting at most `timeout_ns` for the slot to be free; `false` if it
    /// did not free up in time.
    ///
    /// # Safety
    /// No other thread of the launch sends on this mailbox (see
    /// [the type](Self#one-sender-and-one-receiver-on-the-kernels-side)).
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the ring's only sender and only receiver.
    /// unsafe {
    ///     assert!(m.send(0, 1, 1_000) && m.send(1, 2, 1_000));
    ///     assert!(!m.send(2, 3, 1_000)); // slot 0 still holds message 0
    ///     assert_eq!(m.recv(0, 1_000), Some(1));
    ///     assert!(m.send(2, 3, 1_000)); // freed
    /// }
    /// ```
    #[track_caller]
    pub unsafe fn send(&self, n: u32, item: T, timeout_ns: u64) -> bool {
        // SAFETY: the caller's contract is `reserve`'s.
        match unsafe { self.reserve(n, timeout_ns) } {
            Some(slot) => {
                slot.publish(item);
                true
            }
            None => false,
        }
    }

    /// Wait (at most `timeout_ns`) until the slot of message `n` is free: the later
    /// [`Reserved::publish`] then writes without waiting. Reserving the reply slot before
    /// waiting for the request takes a link round trip off every request–reply exchange (the
    /// slot was usually freed long before).
    ///
    /// # Safety
    /// No other thread of the launch sends on this mailbox (see
    /// [the type](Self#one-sender-and-one-receiver-on-the-kernels-side)).
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // Reserve the reply's slot first; the later publish does not wait.
    /// // SAFETY: this one thread is the ring's only sender and only receiver.
    /// let reply = unsafe { m.reserve(0, 1_000) }.expect("a fresh ring's slot 0 is free");
    /// // … wait for the request, compute …
    /// reply.publish(99);
    /// // SAFETY: as above.
    /// assert_eq!(unsafe { m.recv(0, 1_000) }, Some(99));
    /// ```
    #[track_caller]
    pub unsafe fn reserve(&self, n: u32, timeout_ns: u64) -> Option<Reserved<'_, T>> {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::host::mailbox_turn(self.ptr as usize, crate::host::MailboxRole::Sender);
        // `then`, not `then_some`: a `Reserved` must exist only for a slot whose turn came (its
        // drop lets go of the slot).
        self.wait_turn(n, n, timeout_ns)
            .then(|| Reserved { mailbox: self, n })
    }
}

/// A kernel's inbox: a [`Mailbox`] the host sends into and the kernel receives from
/// (`#[mapped] inbox: &Inbox<T>`; the host's side is `berth::InboxBuffer<T>`, which can only
/// send). The direction is in the type on both sides, so neither side can take the other's
/// role by mistake.
///
/// ```
/// use berth_device::{Inbox, Slot};
/// let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
/// ring[0].item = 7; // the host wrote message 0…
/// ring[0].seq = 1; // …and published it
/// // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
/// let inbox = unsafe { Inbox::from_raw(ring.as_mut_ptr(), ring.len()) };
/// // SAFETY: this one thread is the inbox's only receiver.
/// assert_eq!(unsafe { inbox.recv(0, 1_000) }, Some(7));
/// ```
#[repr(transparent)]
pub struct Inbox<T>(Mailbox<T>);

impl<T: DeviceCopy> Inbox<T> {
    /// The view of a kernel argument.
    ///
    /// # Safety
    /// [`Mailbox::from_raw`]'s contract; the host only sends into the ring.
    ///
    /// ```
    /// # use berth_device::{Inbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// let inbox = unsafe { Inbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// assert_eq!(inbox.capacity(), 2);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut Slot<T>, len: usize) -> Self {
        // SAFETY: the caller's contract.
        Inbox(unsafe { Mailbox::from_raw(ptr, len) })
    }

    /// Slots in the ring.
    ///
    /// ```
    /// # use berth_device::{Inbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Inbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // Messages `n` and `n + capacity` share a slot.
    /// assert_eq!(m.capacity(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Receive message `n` (the host numbers its sends 0, 1, 2, …), waiting at most
    /// `timeout_ns`; `None` if it did not arrive in time.
    ///
    /// # Safety
    /// [`Mailbox::recv`]'s: no other thread of the launch receives from this inbox.
    ///
    /// ```
    /// # use berth_device::{Inbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Inbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the inbox's only receiver.
    /// assert_eq!(unsafe { m.recv(0, 1_000) }, None); // the host sent nothing: timed out
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn recv(&self, n: u32, timeout_ns: u64) -> Option<T> {
        // SAFETY: the caller's contract.
        unsafe { self.0.recv(n, timeout_ns) }
    }
}

/// A kernel's outbox: a [`Mailbox`] the kernel sends into and the host receives from
/// (`#[mapped] outbox: &Outbox<T>`; the host's side is `berth::OutboxBuffer<T>`, which can
/// only receive).
///
/// ```
/// use berth_device::{Outbox, Slot};
/// let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
/// // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
/// let outbox = unsafe { Outbox::from_raw(ring.as_mut_ptr(), ring.len()) };
/// // SAFETY: this one thread is the outbox's only sender.
/// assert!(unsafe { outbox.send(0, 42, 1_000) });
/// assert_eq!((ring[0].seq, ring[0].item), (1, 42)); // published for the host
/// ```
#[repr(transparent)]
pub struct Outbox<T>(Mailbox<T>);

impl<T: DeviceCopy> Outbox<T> {
    /// The view of a kernel argument.
    ///
    /// # Safety
    /// [`Mailbox::from_raw`]'s contract; the host only receives from the ring.
    ///
    /// ```
    /// # use berth_device::{Outbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// let outbox = unsafe { Outbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// assert_eq!(outbox.capacity(), 2);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut Slot<T>, len: usize) -> Self {
        // SAFETY: the caller's contract.
        Outbox(unsafe { Mailbox::from_raw(ptr, len) })
    }

    /// Slots in the ring.
    ///
    /// ```
    /// # use berth_device::{Outbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Outbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// assert_eq!(m.capacity(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Send message `n` (numbered 0, 1, 2, … by the kernel; the host receives them in that
    /// order), waiting at most `timeout_ns` for its slot to be free; `false` if it did not free
    /// up in time.
    ///
    /// # Safety
    /// [`Mailbox::send`]'s: no other thread of the launch sends into this outbox.
    ///
    /// ```
    /// # use berth_device::{Outbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Outbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the outbox's only sender.
    /// unsafe {
    ///     assert!(m.send(0, 1, 1_000) && m.send(1, 2, 1_000));
    ///     assert!(!m.send(2, 3, 1_000)); // the host has not received message 0: timed out
    /// }
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn send(&self, n: u32, item: T, timeout_ns: u64) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.0.send(n, item, timeout_ns) }
    }

    /// Wait (at most `timeout_ns`) until the slot of message `n` is free, to publish into it
    /// later without waiting ([`Mailbox::reserve`]).
    ///
    /// # Safety
    /// [`Mailbox::reserve`]'s: no other thread of the launch sends into this outbox.
    ///
    /// ```
    /// # use berth_device::{Outbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Outbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the outbox's only sender.
    /// let reply = unsafe { m.reserve(0, 1_000) }.expect("a fresh ring's slot 0 is free");
    /// reply.publish(9);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn reserve(&self, n: u32, timeout_ns: u64) -> Option<Reserved<'_, T>> {
        // SAFETY: the caller's contract.
        unsafe { self.0.reserve(n, timeout_ns) }
    }
}

/// The free slot of message `n` of a [`Mailbox`], which this sender alone may fill (the
/// contract of [`Mailbox::reserve`]) and the receiver does not touch until it is published.
/// Dropped unpublished, the slot stays free for message `n`. Leaked (`mem::forget`), it stays
/// reserved: on the simulator, which holds reserved slots, later sends and receives of message
/// `n` time out (`false`, `None`); the ring's other slots are not affected.
///
/// ```
/// # use berth_device::{Mailbox, Slot};
/// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
/// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
/// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
/// // SAFETY: this one thread is the ring's only sender and only receiver.
/// unsafe {
///     let slot = m.reserve(0, 1_000).unwrap();
///     slot.publish(5);
///     assert!(m.reserve(2, 1_000).is_none()); // message 2's slot holds message 0 until received
///     drop(m.reserve(1, 1_000).unwrap()); // reserved, then given up: message 1 is still to send
///     assert!(m.send(1, 6, 1_000));
/// }
/// ```
pub struct Reserved<'m, T: DeviceCopy> {
    mailbox: &'m Mailbox<T>,
    n: u32,
}

impl<T: DeviceCopy> Drop for Reserved<'_, T> {
    /// An unpublished reservation leaves the slot free for message `n` (on the simulator it
    /// lets go of the slot it held).
    fn drop(&mut self) {
        #[cfg(not(target_arch = "nvptx64"))]
        self.mailbox
            .seq(self.n)
            .store(Slot::<T>::count(self.n), Ordering::Release);
    }
}

impl<T: DeviceCopy> Reserved<'_, T> {
    /// Write the item and publish it to the consumer (release).
    ///
    /// ```
    /// # use berth_device::{Mailbox, Slot};
    /// # let mut ring: Vec<Slot<u64>> = (0..2).map(|k| Slot { seq: Slot::<u64>::initial_seq(k), item: 0 }).collect();
    /// # // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through it.
    /// # let m = unsafe { Mailbox::from_raw(ring.as_mut_ptr(), ring.len()) };
    /// // SAFETY: this one thread is the ring's only sender and only receiver.
    /// unsafe {
    ///     m.reserve(0, 1_000).unwrap().publish(8);
    ///     assert_eq!(m.recv(0, 1_000), Some(8));
    /// }
    /// ```
    #[inline(always)]
    pub fn publish(self, item: T) {
        let (m, n) = (self.mailbox, self.n);
        core::mem::forget(self);
        // SAFETY: the item lies in the live ring (`from_raw`'s contract); the slot of message n
        // is free (acquired by `reserve`) and this thread is the launch's only sender
        // (`reserve`'s contract), so the receiver does not read it until it is published below.
        unsafe { (&raw mut (*m.slot(n)).item).write_volatile(item) };
        m.seq(n)
            .store(Slot::<T>::count(n.wrapping_add(1)), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{Mailbox, Slot, read_volatile_in_order};
    use crate::DeviceCopy;

    /// Items of every word width (1, 2, 4 and 8 bytes, and 16-aligned) read back whole.
    #[test]
    fn items_read_in_order_come_back_whole() {
        fn round_trip<T: DeviceCopy + PartialEq + core::fmt::Debug>(v: T) {
            // SAFETY: a live, aligned `T`.
            assert_eq!(unsafe { read_volatile_in_order(&raw const v) }, v);
        }
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[repr(C, align(16))]
        struct Wide([u64; 4]);
        // SAFETY: four `u64`, no padding, no pointers, zero bytes are a value.
        unsafe impl DeviceCopy for Wide {}
        round_trip([1u8, 2, 3]);
        round_trip([0xbeefu16, 7, 9]);
        round_trip([7u32, 0, 0x3f80_0000]);
        round_trip(-3.5f64);
        round_trip([u64::MAX, 1]);
        round_trip(Wide([1, 2, 3, u64::MAX]));
        round_trip(true);
    }

    fn ring<const N: usize>() -> Vec<Slot<u64>> {
        (0..N)
            .map(|k| Slot {
                seq: Slot::<u64>::initial_seq(k),
                item: 0,
            })
            .collect()
    }

    /// A slot the host holds (its `HELD` bit set while it writes or reads the item) is not
    /// the kernel's turn: the kernel's waits see it as "not yet", whatever the count.
    #[test]
    fn a_slot_the_host_holds_is_not_the_kernels_turn() {
        let mut cells = ring::<2>();
        cells[0].seq = Slot::<u64>::HELD; // the host is writing message 0
        cells[1].seq = 1 | Slot::<u64>::HELD; // ...and holds message 1's free slot
        let p = cells.as_mut_ptr();
        // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through
        // it; this thread is its only kernel-side sender and receiver.
        unsafe {
            let m = Mailbox::from_raw(p, 2);
            assert_eq!(m.recv(0, 1_000), None);
            assert!(m.reserve(1, 1_000).is_none());
            // The host publishes message 0: now it is the kernel's turn to receive it.
            (*p).item = 9;
            (*p).seq = 1;
            assert_eq!(m.recv(0, 1_000), Some(9));
        }
    }

    /// On the simulator a role taken by several threads (outside `send`'s contract) still
    /// hands each message to one of them: the turn is held by compare-and-swap there.
    #[test]
    fn threads_sending_and_receiving_one_message_each_take_it_once() {
        /// Run `f` on 8 threads at once, each with its own view of the ring (as each simulated
        /// thread has its own view of a kernel argument).
        fn on_8_threads<R: Send>(
            ring: &mut [Slot<u64>],
            f: impl Fn(&Mailbox<u64>, u64) -> R + Sync,
        ) -> Vec<R> {
            let (addr, len) = (ring.as_mut_ptr() as usize, ring.len());
            let go = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..8u64)
                    .map(|t| {
                        let (f, go) = (&f, &go);
                        s.spawn(move || {
                            // SAFETY: the ring outlives the scope and is reached only through
                            // these views.
                            let m = unsafe { Mailbox::from_raw(addr as *mut Slot<u64>, len) };
                            go.wait();
                            f(&m, t)
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            })
        }
        for _ in 0..50 {
            let mut cells = ring::<4>();
            // SAFETY: outside the contract on purpose; the simulator's claim keeps it race-free.
            let sent = on_8_threads(&mut cells, |m, t| unsafe { m.send(0, 100 + t, 1_000_000) });
            assert_eq!(sent.iter().filter(|&&s| s).count(), 1, "{sent:?}");
            // SAFETY: as above.
            let got = on_8_threads(&mut cells, |m, _| unsafe { m.recv(0, 1_000_000) });
            let got: Vec<u64> = got.into_iter().flatten().collect();
            let winner = sent.iter().position(|&s| s).unwrap() as u64;
            assert_eq!(got, [100 + winner]);
        }
    }

    /// A reservation leaked with `mem::forget` keeps its slot held on the simulator: message
    /// 0 can then never be sent or received (both time out, nothing torn is read), and the
    /// ring's other slots go on working.
    #[test]
    fn a_leaked_reservation_keeps_its_slot_and_nothing_else() {
        let mut cells = ring::<2>();
        // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through
        // it; this thread is its only sender and receiver.
        unsafe {
            let m = Mailbox::from_raw(cells.as_mut_ptr(), 2);
            core::mem::forget(m.reserve(0, 1_000).expect("a fresh ring's slot 0 is free"));
            assert!(!m.send(0, 7, 1_000), "a second sender took the leaked slot");
            assert!(m.reserve(0, 1_000).is_none());
            assert_eq!(
                m.recv(0, 1_000),
                None,
                "a message nobody published was read"
            );
            assert!(m.send(1, 8, 1_000));
            assert_eq!(m.recv(1, 1_000), Some(8));
        }
        assert_eq!(cells[0].seq & Slot::<u64>::HELD, Slot::<u64>::HELD);
    }

    #[test]
    fn counts_wrap_at_two_to_the_31() {
        let mut cells = ring::<2>();
        // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through
        // it; this thread is its only sender and receiver.
        unsafe {
            let m = Mailbox::from_raw(cells.as_mut_ptr(), cells.len());
            // Message 2^31 is message 0: same slot, same sequence number.
            assert!(m.send(1 << 31, 7, 1_000));
            assert_eq!(m.recv(0, 1_000), Some(7));
        }
        assert_eq!(cells[0].seq, 2);
    }
}
