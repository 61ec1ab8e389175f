//! The host side of signals: [`SignalBuffer`] (`u32` cells), [`InboxBuffer`] and
//! [`OutboxBuffer`] (rings of `T` the host sends into a kernel or receives from it) in mapped
//! host memory, used while a kernel that takes them (`#[mapped] s: &Signals`,
//! `#[mapped] inbox: &Inbox<T>`, `#[mapped] outbox: &Outbox<T>`) runs.
//!
//! A launch borrows them shared, so the host keeps using them meanwhile — through atomics
//! only: neither type hands out references to the cells. Waits take a timeout and return
//! [`Error::Timeout`] when the kernel does not answer.

use crate::args::{ArgRef, MappedArg};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::host_mem::MappedBuffer;
use berth_device::DeviceCopy;
use berth_device::signal::Slot;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// `u32` cells in mapped host memory, shared with running kernels (`#[mapped] s: &Signals`).
pub struct SignalBuffer {
    mem: MappedBuffer<u32>,
}

/// A kernel's inbox in mapped host memory (`#[mapped] inbox: &Inbox<T>`): the host sends,
/// the running kernel receives, in the order sent. Made by [`Gpu::inbox`].
///
/// Several host threads may send at once: each message is claimed with an atomic
/// compare-and-swap of its slot's sequence number, so no two threads write one message, none
/// is lost, and messages keep the order of their claims.
pub struct InboxBuffer<T: DeviceCopy>(Ring<T>);

/// A kernel's outbox in mapped host memory (`#[mapped] outbox: &Outbox<T>`): the running
/// kernel sends, the host receives, in the order sent. Made by [`Gpu::outbox`].
///
/// Several host threads may receive at once: each message goes to one of them (claimed as
/// [`InboxBuffer`]'s sends are).
pub struct OutboxBuffer<T: DeviceCopy>(Ring<T>);

/// The ring under both: slots of `T` with their sequence numbers, and the host's counts.
struct Ring<T: DeviceCopy> {
    mem: MappedBuffer<Slot<T>>,
    /// Messages claimed by host senders.
    sent: AtomicU32,
    /// Messages claimed by host receivers.
    received: AtomicU32,
}

impl Gpu {
    /// `n` signal cells, zeroed.
    pub fn signals(&self, n: usize) -> Result<SignalBuffer> {
        Ok(SignalBuffer {
            mem: self.mapped_zeroed(n)?,
        })
    }

    /// A kernel's inbox of `capacity` slots (`#[mapped] inbox: &Inbox<T>`), which the host
    /// sends into: the capacity is a power of two from 2 to 2^30, else
    /// [`Error::MailboxCapacity`]. (With one slot, "message `n` published" and "free for
    /// message `n + 1`" would be the same sequence number; with a capacity that does not divide
    /// 2^31, a slot's numbers would skip when the message counts wrap.)
    pub fn inbox<T: DeviceCopy>(&self, capacity: usize) -> Result<InboxBuffer<T>> {
        self.ring(capacity).map(InboxBuffer)
    }

    /// A kernel's outbox of `capacity` slots (`#[mapped] outbox: &Outbox<T>`), which the host
    /// receives from; the capacity as for [`Gpu::inbox`].
    pub fn outbox<T: DeviceCopy>(&self, capacity: usize) -> Result<OutboxBuffer<T>> {
        self.ring(capacity).map(OutboxBuffer)
    }

    fn ring<T: DeviceCopy>(&self, capacity: usize) -> Result<Ring<T>> {
        if !(2..=MAX_MAILBOX).contains(&capacity) || !capacity.is_power_of_two() {
            return Err(Error::MailboxCapacity { capacity });
        }
        let mut mem = self.mapped_zeroed::<Slot<T>>(capacity)?;
        for (k, slot) in mem.iter_mut().enumerate() {
            slot.seq = Slot::<T>::initial_seq(k);
        }
        Ok(Ring {
            mem,
            sent: AtomicU32::new(0),
            received: AtomicU32::new(0),
        })
    }
}

/// The most slots a mailbox may have (2^30: a power of two dividing the 2^31 message counts).
const MAX_MAILBOX: usize = 1 << 30;

/// Poll `ready` until it holds, for at most `timeout` (any `Duration`: one too long for the
/// clock waits without end); whether it held.
fn spin_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    // No clock read when the first poll succeeds (a send into a ring with room). Then a tight
    // poll (the clock read only every 64 polls): a kernel's answer usually lands within a few
    // µs, and a `pause` or a clock read per poll adds to every round trip (the H200
    // reference: 2.8 µs with a tight loop, 3.1 µs with `spin_loop()` per poll). After 50 µs,
    // poll politely.
    if ready() {
        return true;
    }
    let start = Instant::now();
    let deadline = start.checked_add(timeout);
    let past = |now: Instant| deadline.is_some_and(|d| now >= d);
    let hot_until = start + Duration::from_micros(50);
    let mut polls = 0u32;
    loop {
        if ready() {
            return true;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(64) {
            let now = Instant::now();
            if past(now) {
                return false;
            }
            if now >= hot_until {
                break;
            }
        }
    }
    loop {
        if ready() {
            return true;
        }
        if past(Instant::now()) {
            return false;
        }
        std::hint::spin_loop();
    }
}

impl SignalBuffer {
    fn cell(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.mem.elems(), "signal {i} of {}", self.mem.elems());
        // SAFETY: in bounds of the live mapped allocation; the cells are only ever accessed
        // atomically (by this type and by kernels), never through references to `u32`.
        unsafe { AtomicU32::from_ptr(self.mem.host_ptr().add(i)) }
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.mem.elems()
    }

    /// Whether there are no cells.
    pub fn is_empty(&self) -> bool {
        self.mem.elems() == 0
    }

    /// Read cell `i` (acquire).
    ///
    /// # Panics
    /// If `i >= self.len()`, as indexing a slice does.
    pub fn load(&self, i: usize) -> u32 {
        self.cell(i).load(Ordering::Acquire)
    }

    /// Write cell `i` (release).
    ///
    /// # Panics
    /// If `i >= self.len()`, as indexing a slice does.
    pub fn store(&self, i: usize, v: u32) {
        self.cell(i).store(v, Ordering::Release)
    }

    /// Add to cell `i`; the previous value.
    ///
    /// # Panics
    /// If `i >= self.len()`, as indexing a slice does.
    pub fn add(&self, i: usize, v: u32) -> u32 {
        self.cell(i).fetch_add(v, Ordering::AcqRel)
    }

    /// Wait until `ready(cell i)`, at most `timeout`; the value. A cell past the end is
    /// [`Error::Usage`].
    pub fn wait(&self, i: usize, ready: impl Fn(u32) -> bool, timeout: Duration) -> Result<u32> {
        if i >= self.len() {
            return Err(Error::Usage(format!(
                "signal {i} of a buffer of {} signals",
                self.len()
            )));
        }
        let c = self.cell(i);
        let mut v = 0;
        if spin_until(timeout, || {
            v = c.load(Ordering::Acquire);
            ready(v)
        }) {
            Ok(v)
        } else {
            Err(Error::Timeout {
                what: format!("signal {i} (last value {v})"),
                after: timeout,
            })
        }
    }

    pub(crate) fn arg(&self) -> ArgRef<'_> {
        MappedArg::<u32>::__arg(&self.mem)
    }
}

impl<T: DeviceCopy> InboxBuffer<T> {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Send the next item to the kernel, waiting at most `timeout` for a free slot
    /// ([`Error::Timeout`] if the kernel has not taken the message `capacity` sends ago).
    pub fn send(&self, item: T, timeout: Duration) -> Result<()> {
        self.0.send(item, timeout)
    }

    pub(crate) fn arg(&self) -> ArgRef<'_> {
        self.0.arg()
    }
}

impl<T: DeviceCopy> OutboxBuffer<T> {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Receive the next item from the kernel, waiting at most `timeout`
    /// ([`Error::Timeout`]).
    pub fn recv(&self, timeout: Duration) -> Result<T> {
        self.0.recv(timeout)
    }

    pub(crate) fn arg(&self) -> ArgRef<'_> {
        self.0.arg()
    }
}

impl<T: DeviceCopy> Ring<T> {
    fn capacity(&self) -> usize {
        self.mem.elems()
    }

    /// The slot of message `n`: `n % capacity`, as a mask (the capacity is a power of two,
    /// checked by [`Gpu::inbox`] / [`Gpu::outbox`]), since a poll forms it every time.
    fn slot(&self, n: u32) -> usize {
        n as usize & (self.mem.elems() - 1)
    }

    fn seq(&self, n: u32) -> &AtomicU32 {
        let k = self.slot(n);
        // SAFETY: slot k (< len) of the live mapped ring; `seq` is only accessed atomically.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.mem.host_ptr().add(k)).seq) }
    }

    fn item(&self, n: u32) -> *mut T {
        let k = self.slot(n);
        // SAFETY: slot k (< len) of the live mapped ring.
        unsafe { &raw mut (*self.mem.host_ptr().add(k)).item }
    }

    /// Claim the next message of `counter` once its slot shows `seq(n) == want(n)`, holding
    /// the slot (`want(n) | HELD`): the claimed `n`, or the last `n` tried when `timeout`
    /// passes first.
    fn claim(
        &self,
        counter: &AtomicU32,
        want: impl Fn(u32) -> u32,
        timeout: Duration,
    ) -> std::result::Result<u32, u32> {
        let mut n = counter.load(Ordering::Relaxed);
        let claimed = spin_until(timeout, || {
            n = counter.load(Ordering::Relaxed);
            let (s, w) = (self.seq(n), Slot::<T>::count(want(n)));
            // Another host thread may take the slot between the check and the swap: then the
            // swap fails and the next poll looks again. Only the thread holding message `n`'s
            // slot advances the counter past `n`.
            s.load(Ordering::Relaxed) == w
                && s.compare_exchange(w, w | Slot::<T>::HELD, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        });
        if claimed {
            counter.store(n.wrapping_add(1), Ordering::Relaxed);
            Ok(n)
        } else {
            Err(n)
        }
    }

    fn send(&self, item: T, timeout: Duration) -> Result<()> {
        let claimed = self.claim(&self.sent, |n| n, timeout);
        let (Ok(n) | Err(n)) = claimed;
        let s = self.seq(n);
        if claimed.is_err() {
            return Err(Error::Timeout {
                what: format!(
                    "a free mailbox slot for message {n} (the kernel has not taken message {})",
                    n.wrapping_sub(self.capacity() as u32)
                ),
                after: timeout,
            });
        }
        // SAFETY: this thread holds the freed slot of message n (claimed and acquired above):
        // nobody else touches the item until it is published.
        unsafe { self.item(n).write_volatile(item) };
        s.store(Slot::<T>::count(n.wrapping_add(1)), Ordering::Release);
        Ok(())
    }

    fn recv(&self, timeout: Duration) -> Result<T> {
        let claimed = self.claim(&self.received, |n| n.wrapping_add(1), timeout);
        let (Ok(n) | Err(n)) = claimed;
        let s = self.seq(n);
        if claimed.is_err() {
            return Err(Error::Timeout {
                what: format!("mailbox message {n} from the kernel"),
                after: timeout,
            });
        }
        // SAFETY: this thread holds the slot of published message n (claimed and acquired
        // above): nobody else touches the item until it is freed here.
        let item = unsafe { self.item(n).read_volatile() };
        s.store(
            Slot::<T>::count(n.wrapping_add(self.capacity() as u32)),
            Ordering::Release,
        );
        Ok(item)
    }

    fn arg(&self) -> ArgRef<'_> {
        MappedArg::<Slot<T>>::__arg(&self.mem)
    }
}
