//! Host backing of the device API: a per-OS-thread execution context.
//!
//! An executor that runs kernel bodies on the CPU (the simulator) gives each simulated GPU
//! thread an OS thread (or a slot on one), and installs its coordinates and the services of
//! its block ([`BlockServices`]) with [`enter`]. Without an executor the body sees a grid of
//! one block of one thread, a barrier that returns at once, and private shared memory.
//!
//! The device API reports every element access a checker needs to the installed services:
//! shared-memory accesses (for the block's race and initialisation checks) and accesses to
//! global or mapped memory through `&mut [T]` views and atomics ([`note_global`], for the
//! launch's race check). Without an executor the reports go nowhere.
//!
//! Warp calls end here too: [`warp`] says what a lane asks for and what its warp computes, and
//! the installed services meet the lanes ([`BlockServices::warp`]). The kernel-facing
//! functions of [`crate::warp`] call into this module; nothing here calls back into them.

pub mod async_proxy;
pub mod warp;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// Coordinates of one simulated thread (`u32` per axis, as in CUDA).
///
/// ```
/// use berth_device::host::{self, Coords};
/// use berth_device::{block, thread};
/// // Thread 3 of block 1, in a grid of 2 blocks of 64 threads.
/// let c = Coords { thread: [3, 0, 0], block: [1, 0, 0], block_dim: [64, 1, 1], grid_dim: [2, 1, 1] };
/// let _as = host::enter_thread(c);
/// assert_eq!((thread::global_x(), block::dim_x()), (67, 64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coords {
    /// `threadIdx`
    pub thread: [u32; 3],
    /// `blockIdx`
    pub block: [u32; 3],
    /// `blockDim`
    pub block_dim: [u32; 3],
    /// `gridDim`
    pub grid_dim: [u32; 3],
}

impl Coords {
    /// A grid of one block of one thread.
    ///
    /// ```
    /// use berth_device::host::Coords;
    /// use berth_device::thread;
    /// // What a body sees outside an executor.
    /// assert_eq!(Coords::SINGLE.grid_dim, [1, 1, 1]);
    /// assert_eq!(thread::count(), 1);
    /// ```
    pub const SINGLE: Coords = Coords {
        thread: [0; 3],
        block: [0; 3],
        block_dim: [1; 3],
        grid_dim: [1; 3],
    };
}

/// What a kernel thread does to one element of memory, as the race checks see it.
///
/// ```
/// use berth_device::host::Access::{self, *};
/// /// Two accesses by threads of one block race unless both read, or both are atomic.
/// fn conflict_in_block(a: Access, b: Access) -> bool {
///     let atomic = |k| matches!(k, Atomic | BlockAtomic);
///     !(a == Read && b == Read || atomic(a) && atomic(b))
/// }
/// /// Between blocks, an atomic at block scope is not atomic at all.
/// fn conflict_across_blocks(a: Access, b: Access) -> bool {
///     conflict_in_block(a, b) || a == BlockAtomic || b == BlockAtomic
/// }
/// assert!(conflict_in_block(Write, Read) && !conflict_in_block(Atomic, BlockAtomic));
/// assert!(!conflict_across_blocks(Atomic, Atomic) && conflict_across_blocks(Atomic, BlockAtomic));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A plain read.
    Read,
    /// A plain write (or a `&mut` to the element, which may be written).
    Write,
    /// An atomic (a read-modify-write, or an atomic load) at device or system scope: atomic
    /// with respect to other atomics only.
    Atomic,
    /// An atomic at block scope ([`Scope::Block`](crate::atomic::Scope::Block), PTX
    /// `atom.cta`): atomic with respect to other atomics of the same block only. For the
    /// threads of another block it is no atomic at all: it races with any access of theirs to
    /// the element, atomic or not.
    BlockAtomic,
}

/// The side of a mailbox a kernel thread takes in a turn: [`BlockServices::mailbox_turn`].
///
/// ```
/// use berth_device::host::MailboxRole;
/// // `send` and `reserve` take the sending side, `recv` the receiving one.
/// assert_ne!(MailboxRole::Sender, MailboxRole::Receiver);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MailboxRole {
    /// Sending: [`Mailbox::send`](crate::Mailbox::send) or
    /// [`Mailbox::reserve`](crate::Mailbox::reserve).
    Sender,
    /// Receiving: [`Mailbox::recv`](crate::Mailbox::recv).
    Receiver,
}

/// The call site of an access, as `#[track_caller]` gives it.
///
/// ```
/// use berth_device::host::At;
/// #[track_caller]
/// fn here() -> At {
///     core::panic::Location::caller()
/// }
/// let at = here();
/// assert_eq!((at.file(), at.line()), (file!(), line!() - 1));
/// ```
pub type At = &'static core::panic::Location<'static>;

/// Names one `shared_array!` expansion on the host. Each expansion declares its own `static`
/// key, whose address tells it apart from every other; the name (the expansion's module path,
/// array name and location) is for messages only: two arrays made by one invocation of a
/// user's macro share it.
///
/// ```
/// use berth_device::host::SharedKey;
/// static A: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
/// static B: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
/// assert_eq!(A.name(), B.name());
/// assert!(A.is(&A) && !A.is(&B));
/// ```
#[derive(Debug)]
pub struct SharedKey {
    name: &'static str,
}

impl SharedKey {
    /// A key named `name` (`path::NAME (file:line:column)`); declare it as a `static`.
    ///
    /// ```
    /// use berth_device::host::SharedKey;
    /// static KEY: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
    /// assert_eq!(KEY.name(), "k::TILE (src/lib.rs:3:9)");
    /// ```
    #[must_use]
    pub const fn new(name: &'static str) -> SharedKey {
        SharedKey { name }
    }

    /// The name, for messages.
    ///
    /// ```
    /// use berth_device::host::SharedKey;
    /// static KEY: SharedKey = SharedKey::new("k::TILE (src/lib.rs:3:9)");
    /// assert!(KEY.name().starts_with("k::TILE"));
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether `self` and `other` are one key (one expansion): the same `static`.
    ///
    /// ```
    /// use berth_device::host::SharedKey;
    /// static A: SharedKey = SharedKey::new("TILE");
    /// static B: SharedKey = SharedKey::new("TILE");
    /// assert!(A.is(&A) && !A.is(&B));
    /// ```
    #[must_use]
    pub fn is(&self, other: &SharedKey) -> bool {
        core::ptr::eq(self, other)
    }
}

/// What a block shares among its threads: the barrier and the shared-memory arena.
///
/// ```
/// use berth_device::host::{self, Access, At, BlockServices, Coords};
/// use berth_device::{SliceMut, thread};
/// use std::{cell::RefCell, rc::Rc};
///
/// /// A block of one thread that logs its global-memory accesses.
/// #[derive(Default)]
/// struct Logged(RefCell<Vec<(usize, Access)>>);
/// // SAFETY: the block is the one host thread that enters it: its barrier has nobody to wait
/// // for, and each shared array is fresh, leaked memory, 16-aligned (all this example asks).
/// unsafe impl BlockServices for Logged {
///     fn barrier(&self, _at: At) {} // one thread: nobody to wait for
///     fn global_access(&self, addr: usize, _bytes: usize, access: Access, _at: At) {
///         self.0.borrow_mut().push((addr, access));
///     }
///     fn shared(&self, _key: &'static host::SharedKey, bytes: usize, _align: usize) -> *mut u8 {
///         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
///     }
///     fn dynamic_shared(&self) -> (*mut u8, usize) {
///         (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0)
///     }
/// }
///
/// let log = Rc::new(Logged::default());
/// let mut data = [0u32; 2];
/// let addr = data.as_ptr() as usize;
/// {
///     // SAFETY: this thread alone runs the launch, under services that keep their contract.
///     let _in_block = unsafe { host::enter(Coords::SINGLE, log.clone()) };
///     // SAFETY: `data` outlives the view; this thread is the launch.
///     let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), 2) };
///     out[thread::index()] = 7; // the body's write, reported to the block
/// }
/// assert_eq!(data, [7, 0]);
/// assert_eq!(*log.0.borrow(), [(addr, Access::Write)]);
/// ```
///
/// # Safety
/// Kernel bodies trust these answers as they trust the GPU's hardware:
/// 1. [`barrier`](BlockServices::barrier) returns only once every thread of the block that runs
///    under these services has reached a barrier, and orders everything each of them did
///    before it ahead of everything any of them does after it (or never returns to a thread
///    that is discarded instead).
/// 2. [`shared`](BlockServices::shared) returns, for each `key`, the same pointer to `bytes`
///    bytes aligned to `align`, valid for reads and writes, reached by the threads of this block
///    only, overlapping no other array it hands out, live until every thread of the block has
///    finished or been discarded; [`dynamic_shared`](BlockServices::dynamic_shared) likewise
///    for its one array (16-aligned, the size it returns).
/// 3. [`warp`](BlockServices::warp) returns what [`warp::exchange`] gives the calling lane for
///    the calls of the lanes it met, and [`warp_active_mask`](BlockServices::warp_active_mask)
///    names the calling lane.
///
/// The access reports (`shared_access`, `global_access`, and the `async_*` reports of
/// asynchronous copies, which the device API performs itself) are for checkers only: ignoring
/// them is sound.
///
/// ```compile_fail,E0200
/// use berth_device::host::{At, BlockServices};
/// /// Not `unsafe impl`: nothing would promise that `shared` returns memory.
/// struct Dangling;
/// impl BlockServices for Dangling {
///     fn barrier(&self, _: At) {}
///     fn shared(&self, _: &'static berth_device::host::SharedKey, _: usize, _: usize) -> *mut u8 {
///         16 as *mut u8
///     }
///     fn dynamic_shared(&self) -> (*mut u8, usize) {
///         (16 as *mut u8, 0)
///     }
/// }
/// ```
pub unsafe trait BlockServices {
    /// Wait until every thread of the block has called `barrier`; `at` is the call site.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // SAFETY: this thread alone runs the launch, under services that keep their contract.
    /// let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    /// // SAFETY: this host thread is the whole block, and it reaches the barrier.
    /// unsafe { berth_device::sync_threads() }; // reaches `barrier`, located at this line
    /// assert_eq!(block.barriers.get(), 1);
    /// ```
    fn barrier(&self, at: &'static core::panic::Location<'static>);
    /// A shared-memory access by the current thread, at `at` (for the race and
    /// initialisation checks): `addr` of `bytes` bytes. The default ignores it.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // SAFETY: this thread alone runs the launch, under services that keep their contract.
    /// let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    /// // An executor's report of a shared-memory store and load by the current thread.
    /// let at = core::panic::Location::caller();
    /// block.shared_access(0x100, 4, Access::Write, at);
    /// block.shared_access(0x100, 4, Access::Read, at);
    /// assert_eq!(*block.shared.borrow(), [Access::Write, Access::Read]);
    /// ```
    fn shared_access(&self, addr: usize, bytes: usize, access: Access, at: At) {
        let _ = (addr, bytes, access, at);
    }
    /// An access by the current thread to global or mapped memory (an element of a `&mut [T]`
    /// argument, plain or atomic), at `at`; see [`note_global`]. The default ignores it.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // SAFETY: this thread alone runs the launch, under services that keep their contract.
    /// let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    /// let mut data = [1u32, 2];
    /// // SAFETY: `data` outlives the view; this thread is the launch.
    /// let out = unsafe { berth_device::SliceMut::from_raw(data.as_mut_ptr(), 2) };
    /// // SAFETY: no thread writes element 1.
    /// let _ = unsafe { out.read(1) };
    /// assert_eq!(*block.global.borrow(), [(data.as_ptr() as usize + 4, Access::Read)]);
    /// ```
    fn global_access(&self, addr: usize, bytes: usize, access: Access, at: At) {
        let _ = (addr, bytes, access, at);
    }
    /// An asynchronous copy ([`async_copy`](crate::async_copy)) by the current thread of
    /// `bytes` bytes to the shared-memory address `addr`, issued at `at`. The device API has
    /// already made the copy (the simulator copies at issue) and reported its elements as
    /// writes through [`shared_access`](BlockServices::shared_access); this report says that
    /// the bytes stay in flight until the thread waits for the copy's group. The default
    /// ignores it.
    ///
    /// ```
    /// use berth_device::host::{self, At, BlockServices, Coords};
    /// use berth_device::{async_copy, shared_array};
    /// use std::{cell::RefCell, rc::Rc};
    ///
    /// /// A block of one thread that logs its asynchronous copies, commits and waits.
    /// #[derive(Default)]
    /// struct Copies(RefCell<Vec<String>>);
    /// // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// // wait for, and each shared array is fresh, leaked memory, 16-aligned.
    /// unsafe impl BlockServices for Copies {
    ///     fn barrier(&self, _: At) {}
    ///     fn async_copy(&self, _: usize, bytes: usize, _: At) {
    ///         self.0.borrow_mut().push(format!("copy {bytes}"));
    ///     }
    ///     fn async_commit(&self, _: At) {
    ///         self.0.borrow_mut().push("commit".into());
    ///     }
    ///     fn async_wait(&self, pending: usize, _: At) {
    ///         self.0.borrow_mut().push(format!("wait {pending}"));
    ///     }
    ///     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    ///         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    ///     }
    ///     fn dynamic_shared(&self) -> (*mut u8, usize) {
    ///         (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0)
    ///     }
    /// }
    /// let block = Rc::new(Copies::default());
    /// {
    ///     // SAFETY: this thread alone runs the launch, under services that keep their contract.
    ///     let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    ///     let tile = shared_array!(T: [u32; 4]);
    ///     // SAFETY: one thread, which waits before it reads.
    ///     let v = unsafe {
    ///         #[repr(align(16))]
    ///         struct Aligned([u32; 4]);
    ///         async_copy::copy_cg::<u32, 4>(tile, 0, &Aligned([1, 2, 3, 4]).0, 0);
    ///         async_copy::wait_all();
    ///         tile.read(2)
    ///     };
    ///     assert_eq!(v, 3);
    /// }
    /// assert_eq!(*block.0.borrow(), ["copy 16", "commit", "wait 0"]);
    /// ```
    fn async_copy(&self, addr: usize, bytes: usize, at: At) {
        let _ = (addr, bytes, at);
    }
    /// The current thread closed its asynchronous copies into a group
    /// ([`async_copy::commit`](crate::async_copy::commit)), at `at`. The default ignores it;
    /// the example of [`async_copy`](BlockServices::async_copy) logs it.
    ///
    /// ```
    /// // Outside an executor a commit goes nowhere.
    /// berth_device::async_copy::commit();
    /// ```
    fn async_commit(&self, at: At) {
        let _ = at;
    }
    /// The current thread waited until at most `pending` of its most recent groups of
    /// asynchronous copies are in flight ([`async_copy::wait`](crate::async_copy::wait)), at
    /// `at`. The default ignores it; the example of [`async_copy`](BlockServices::async_copy)
    /// logs it.
    ///
    /// ```
    /// // Outside an executor a wait goes nowhere.
    /// berth_device::async_copy::wait::<1>();
    /// ```
    fn async_wait(&self, pending: usize, at: At) {
        let _ = (pending, at);
    }
    /// A turn of the current thread on the kernel's side of a mailbox, at `at`: a send or a
    /// reservation (`role` [`MailboxRole::Sender`]) or a receive ([`MailboxRole::Receiver`]) on
    /// the ring whose first slot is at `ring`. A mailbox's contract gives each role to one
    /// thread of the launch; an executor that sees a second thread take a role the launch has
    /// seen another take may stop the thread (panic) and report both. The default ignores it.
    ///
    /// ```
    /// use berth_device::host::{self, At, BlockServices, Coords, MailboxRole};
    /// use berth_device::{Mailbox, Slot};
    /// use std::{cell::RefCell, rc::Rc};
    ///
    /// /// A block of one thread that logs its mailbox turns.
    /// #[derive(Default)]
    /// struct Turns(RefCell<Vec<(usize, MailboxRole)>>);
    /// // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// // wait for, and each shared array is fresh, leaked memory, 16-aligned.
    /// unsafe impl BlockServices for Turns {
    ///     fn barrier(&self, _: At) {}
    ///     fn mailbox_turn(&self, ring: usize, role: MailboxRole, _: At) {
    ///         self.0.borrow_mut().push((ring, role));
    ///     }
    ///     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    ///         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    ///     }
    ///     fn dynamic_shared(&self) -> (*mut u8, usize) {
    ///         (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0)
    ///     }
    /// }
    /// let block = Rc::new(Turns::default());
    /// let mut ring: Vec<Slot<u32>> = (0..2).map(|k| Slot { seq: Slot::<u32>::initial_seq(k), item: 0 }).collect();
    /// let at = ring.as_ptr() as usize;
    /// {
    ///     // SAFETY: this thread alone runs the launch, under services that keep their contract.
    ///     let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    ///     // SAFETY: a fresh ring of 2 slots that outlives the view and is reached only through
    ///     // it; this one thread is its only sender and only receiver.
    ///     unsafe {
    ///         let m = Mailbox::from_raw(ring.as_mut_ptr(), ring.len());
    ///         assert!(m.send(0, 7, 1_000));
    ///         assert_eq!(m.recv(0, 1_000), Some(7));
    ///     }
    /// }
    /// assert_eq!(*block.0.borrow(), [(at, MailboxRole::Sender), (at, MailboxRole::Receiver)]);
    /// ```
    fn mailbox_turn(&self, ring: usize, role: MailboxRole, at: At) {
        let _ = (ring, role, at);
    }
    /// The block's static shared array of the `shared_array!` expansion `key` (`bytes` long,
    /// `align`-aligned; its contents are undefined until written, as on the GPU). Keys are told
    /// apart by [`SharedKey::is`], not by their names.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // An executor hands out `bytes` of 16-aligned, block-private memory per key.
    /// static TILE: host::SharedKey = host::SharedKey::new("k::TILE (src/lib.rs:3:9)");
    /// let p = block.shared(&TILE, 64, 16);
    /// assert!(!p.is_null() && p as usize % 16 == 0);
    /// ```
    fn shared(&self, key: &'static SharedKey, bytes: usize, align: usize) -> *mut u8;
    /// The block's dynamic shared memory: pointer and size in bytes.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // This block was launched without dynamic shared memory.
    /// let (_ptr, bytes) = block.dynamic_shared();
    /// assert_eq!(bytes, 0);
    /// ```
    fn dynamic_shared(&self) -> (*mut u8, usize);
    /// A warp collective by the current thread, reached at `at`: meet the lanes its mask
    /// names, return this lane's result ([`warp::exchange`]). The default is a
    /// warp whose only live lane is the calling thread.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// use berth_device::host::warp::Op;
    /// use berth_device::warp;
    /// // SAFETY: this thread alone runs the launch, under services that keep their contract.
    /// let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    /// // This executor's warp is the calling lane: a shuffle returns the lane's own value.
    /// assert_eq!(warp::shfl_down(1, 9u32, 1), 9);
    /// let call = block.warps.borrow()[0];
    /// assert_eq!((call.op, call.mask, call.value, call.arg), (Op::Down, 1, 9, 1));
    /// ```
    fn warp(&self, call: warp::Call, at: &'static core::panic::Location<'static>) -> u64 {
        lone_lane(call, at)
    }
    /// The lanes of the current thread's warp that are inside the block and have not
    /// returned. The default: the calling lane.
    ///
    /// ```
    /// # use berth_device::host::{self, Access, At, BlockServices, Coords};
    /// # use berth_device::host::warp::Call;
    /// # use std::{cell::{Cell, RefCell}, rc::Rc};
    /// # #[derive(Default)]
    /// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
    /// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
    /// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
    /// # unsafe impl BlockServices for Rec {
    /// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
    /// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
    /// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
    /// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
    /// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
    /// #     }
    /// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
    /// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
    /// # }
    /// # let block = Rc::new(Rec::default());
    /// // SAFETY: this thread alone runs the launch, under services that keep their contract.
    /// let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
    /// // The default: only the calling lane (lane 0 here) is live.
    /// assert_eq!(berth_device::warp::active_mask(), 1);
    /// ```
    fn warp_active_mask(&self) -> u32 {
        1 << lane()
    }
    /// An operation of the current thread on the block's mbarriers and bulk copies, at `at`
    /// ([`async_proxy::AsyncProxy::apply`] gives its meaning, its result and its errors). The
    /// default applies it to a model of the calling OS thread's own (a block of one thread).
    ///
    /// ```
    /// use berth_device::host::async_proxy::AsyncOp;
    /// use berth_device::host;
    /// // Outside an executor: the thread's own model.
    /// host::async_proxy(AsyncOp::Init { bar: 16, count: 1 }, core::panic::Location::caller());
    /// assert_eq!(host::async_proxy(AsyncOp::TryWait { bar: 16, parity: 1 }, core::panic::Location::caller()), 1);
    /// ```
    fn async_proxy(&self, op: async_proxy::AsyncOp, at: At) -> Result<u64, String> {
        let _ = at;
        OWN_PROXY.with(|p| p.borrow_mut().apply(0, op))
    }
    /// The current thread waits for another thread of the block (an mbarrier phase that has
    /// not completed), at `at`: an executor runs the other threads before it returns. The
    /// default has no other thread, so the wait could never end: it panics.
    ///
    /// ```should_panic
    /// use berth_device::{mbarrier::MBarriers, shared_array};
    /// let store = shared_array!(B: [u64; 1]);
    /// // SAFETY: one thread, the whole block.
    /// let bars = unsafe { MBarriers::init(store, 2) };
    /// // SAFETY: one of the phase's two arrivals: the phase does not complete.
    /// unsafe { bars.get(0).arrive() };
    /// bars.get(0).wait(0); // nobody else can arrive: reported
    /// ```
    fn spin(&self, at: At) {
        panic!(
            "an mbarrier wait at {}:{} that no other thread can end (one thread, outside a launch)",
            at.file(),
            at.line()
        );
    }
}

/// A warp call in a warp whose only live lane is the caller (no executor, or one without
/// warps): it must name itself, and reads of other lanes return its own value.
fn lone_lane(call: warp::Call, at: &'static core::panic::Location<'static>) -> u64 {
    let lane = lane();
    let me = 1u32 << lane;
    if call.mask & me == 0 {
        panic!(
            "{}() at {}:{}: the mask {:#010x} does not name the calling lane {lane}",
            call.op.name(),
            at.file(),
            at.line(),
            call.mask
        );
    }
    let mut calls = [None; 32];
    calls[lane] = Some(call);
    match warp::exchange(&calls, me, me) {
        Ok(r) => r[lane],
        Err((_, problem)) => panic!("{problem} at {}:{}", at.file(), at.line()),
    }
}

/// A thread's own shared arrays outside an executor, by key address and size.
type PrivateShared = HashMap<(usize, usize), Box<[u128]>>;

thread_local! {
    static COORDS: Cell<Coords> = const { Cell::new(Coords::SINGLE) };
    static SERVICES: RefCell<Option<Rc<dyn BlockServices>>> = const { RefCell::new(None) };
    // Outside an executor: each expansion's array, per size (a generic helper's one expansion
    // may ask for several).
    static PRIVATE_SHARED: RefCell<PrivateShared> = RefCell::new(HashMap::new());
    // Outside an executor: the thread's own mbarriers and bulk copies.
    static OWN_PROXY: RefCell<async_proxy::AsyncProxy> = RefCell::new(Default::default());
}

/// Install `coords` and `services` for the current OS thread until the returned guard drops:
/// what an executor does around each simulated thread's turn.
///
/// # Safety
/// 1. `coords` are the calling thread's own place in the launch it runs: no two threads of a
///    launch run at once with the same coordinates (device views hand out elements by thread
///    index on that ground: `Own`, grid-stride loops), and each coordinate lies inside its
///    dimension.
/// 2. `services` keep the contract of [`BlockServices`] for the block of `coords`. An executor
///    that suspends a simulated thread inside [`BlockServices::barrier`] or
///    [`BlockServices::warp`] (a coroutine) keeps `services` alive itself until that thread has
///    finished or been discarded: those calls hold no count of the `Rc` while suspended.
/// 3. The call is not made from a kernel body (whose coordinates are its executor's).
///
/// ```
/// # use berth_device::host::{self, Access, At, BlockServices, Coords};
/// # use berth_device::host::warp::Call;
/// # use std::{cell::{Cell, RefCell}, rc::Rc};
/// # #[derive(Default)]
/// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
/// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
/// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
/// # unsafe impl BlockServices for Rec {
/// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
/// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
/// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
/// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
/// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
/// #     }
/// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
/// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
/// # }
/// # let block = Rc::new(Rec::default());
/// use berth_device::thread;
/// let coords = Coords { thread: [1, 0, 0], block: [0, 0, 0], block_dim: [2, 1, 1], grid_dim: [1, 1, 1] };
/// {
///     // SAFETY: this thread alone runs the launch, under services that keep their contract.
///     let _in_block = unsafe { host::enter(coords, block.clone()) };
///     assert_eq!(thread::index().get(), 1);
///     // SAFETY: the call is outside any branch, so every thread of the block reaches it
///     // (here `Rec::barrier`, which returns at once).
///     unsafe { berth_device::sync_threads() };
/// }
/// // Dropped: back to a grid of one thread, and the block saw one barrier.
/// assert_eq!((thread::count(), block.barriers.get()), (1, 1));
/// ```
pub unsafe fn enter(coords: Coords, services: Rc<dyn BlockServices>) -> Entered {
    let prev_coords = COORDS.with(|c| c.replace(coords));
    let prev_services = SERVICES.with(|s| s.borrow_mut().replace(services));
    Entered {
        prev_coords,
        prev_services,
    }
}

/// Install `coords` for the current OS thread, without block services, until the returned
/// guard drops: the calling thread runs a kernel body as that one thread of a launch, alone.
/// Its barrier returns at once, its shared memory is its own, and its warp is its own lane.
/// For a unit test of index arithmetic, or an example.
///
/// # Panics
/// Inside an executor's launch (a kernel body on the simulator): there every thread's
/// coordinates are the executor's, and device views rely on no two threads sharing them.
///
/// ```
/// use berth_device::host::{self, Coords};
/// use berth_device::thread;
/// {
///     let _as = host::enter_thread(Coords {
///         thread: [3, 0, 0],
///         block: [2, 0, 0],
///         block_dim: [128, 1, 1],
///         grid_dim: [8, 1, 1],
///     });
///     assert_eq!((thread::global_x(), thread::count()), (2 * 128 + 3, 1024));
/// }
/// // The guard restored what was there before: outside an executor, a grid of one thread.
/// assert_eq!(thread::count(), 1);
/// ```
#[track_caller]
pub fn enter_thread(coords: Coords) -> Entered {
    if services().is_some() {
        panic!(
            "host::enter_thread inside a simulated launch: a kernel thread's coordinates are its \
             executor's (no two threads may share them); call it only outside a launch"
        );
    }
    let prev_coords = COORDS.with(|c| c.replace(coords));
    let prev_services = SERVICES.with(|s| s.borrow_mut().take());
    Entered {
        prev_coords,
        prev_services,
    }
}

/// Restores the previous context when dropped. See [`enter`].
///
/// ```
/// use berth_device::host::{self, Coords};
/// use berth_device::block;
/// let outer = host::enter_thread(Coords { block_dim: [64, 1, 1], ..Coords::SINGLE });
/// {
///     let _inner = host::enter_thread(Coords { block_dim: [8, 1, 1], ..Coords::SINGLE });
///     assert_eq!(block::dim_x(), 8);
/// }
/// assert_eq!(block::dim_x(), 64); // the inner guard restored the outer context
/// drop(outer);
/// assert_eq!(block::dim_x(), 1);
/// ```
#[must_use]
pub struct Entered {
    prev_coords: Coords,
    prev_services: Option<Rc<dyn BlockServices>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        COORDS.with(|c| c.set(self.prev_coords));
        let prev = self.prev_services.take();
        SERVICES.with(|s| *s.borrow_mut() = prev);
    }
}

pub(crate) fn with<R>(f: impl FnOnce(&Coords) -> R) -> R {
    COORDS.with(|c| f(&c.get()))
}

/// The current thread's lane in its warp: its x-fastest index in the block, modulo 32.
fn lane() -> usize {
    with(|c| {
        let [x, y, z] = c.thread.map(|v| v as usize);
        let [dx, dy, _] = c.block_dim.map(|v| v as usize);
        ((z * dy + y) * dx + x) % 32
    })
}

fn services() -> Option<Rc<dyn BlockServices>> {
    SERVICES.with(|s| s.borrow().clone())
}

/// Call `f` with the current services without holding a count of them: for the calls that may
/// suspend the calling thread (a barrier, a warp call). A suspended simulated thread can be
/// discarded without being resumed (its block stopped at another thread's panic), and an `Rc`
/// clone on its stack would then leak the whole block.
fn with_suspending<R>(f: impl FnOnce(&dyn BlockServices) -> R) -> Option<R> {
    let p = SERVICES.with(|s| s.borrow().as_ref().map(Rc::as_ptr))?;
    // SAFETY: installed by `enter`, whose contract keeps the services alive until every thread
    // that ran under them has finished or been discarded.
    Some(f(unsafe { &*p }))
}

pub(crate) fn barrier(at: &'static core::panic::Location<'static>) {
    with_suspending(|s| s.barrier(at));
}

pub(crate) fn warp_call(call: warp::Call, at: &'static core::panic::Location<'static>) -> u64 {
    with_suspending(|s| s.warp(call, at)).unwrap_or_else(|| lone_lane(call, at))
}

pub(crate) fn warp_active_mask() -> u32 {
    services().map_or(1 << lane(), |s| s.warp_active_mask())
}

/// Apply `op` through the current services (or the thread's own model outside an executor),
/// stopping the thread with a located report when the model refuses it; the model's result.
///
/// ```
/// use berth_device::host::{self, async_proxy::AsyncOp};
/// let at = core::panic::Location::caller();
/// host::async_proxy(AsyncOp::Init { bar: 32, count: 1 }, at);
/// assert_eq!(host::async_proxy(AsyncOp::Arrive { bar: 32, tx: 0 }, at), 0);
/// ```
pub fn async_proxy(op: async_proxy::AsyncOp, at: At) -> u64 {
    let r = match services() {
        Some(s) => s.async_proxy(op, at),
        None => OWN_PROXY.with(|p| p.borrow_mut().apply(0, op)),
    };
    r.unwrap_or_else(|problem| panic!("{problem} (at {}:{})", at.file(), at.line()))
}

/// The current thread waits for another thread of the block to change an mbarrier's state.
pub(crate) fn spin(at: At) {
    match with_suspending(|s| s.spin(at)) {
        Some(()) => {}
        None => panic!(
            "an mbarrier wait at {}:{} that no other thread can end (one thread, outside a launch)",
            at.file(),
            at.line()
        ),
    }
}

pub(crate) fn shared_access(addr: usize, bytes: usize, access: Access, at: At) {
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.shared_access(addr, bytes, access, at);
        }
    });
}

pub(crate) fn async_copy(addr: usize, bytes: usize, at: At) {
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.async_copy(addr, bytes, at);
        }
    });
}

pub(crate) fn async_commit(at: At) {
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.async_commit(at);
        }
    });
}

pub(crate) fn async_wait(pending: usize, at: At) {
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.async_wait(pending, at);
        }
    });
}

/// [`shared_access`] for element `p`, located as [`note_element`] is.
#[inline]
#[track_caller]
pub(crate) fn note_shared_element<T>(p: *const T, access: Access) {
    shared_access(
        p as usize,
        core::mem::size_of::<T>(),
        access,
        core::panic::Location::caller(),
    );
}

/// Report an access of the current simulated thread to global or mapped memory: `bytes`
/// bytes at `addr` (one element), of kind `access`, made at `at` (pass
/// `Location::caller()` from a `#[track_caller]` accessor, so the report names the kernel's
/// line). The executor checks the launch's accesses against each other: two threads
/// touching one element, at least one writing, with no barrier of their block between them
/// and not both atomically, is a data race it reports — and so are two threads of different
/// blocks touching one element where either uses an atomic at block scope
/// ([`Access::BlockAtomic`]). Device views call this from their element accessors; a view
/// of kernel memory that hands out elements by other means (raw pointers) is not checked.
/// Outside an executor it does nothing.
///
/// ```
/// # use berth_device::host::{self, Access, At, BlockServices, Coords};
/// # use berth_device::host::warp::Call;
/// # use std::{cell::{Cell, RefCell}, rc::Rc};
/// # #[derive(Default)]
/// # struct Rec { barriers: Cell<u32>, shared: RefCell<Vec<Access>>, global: RefCell<Vec<(usize, Access)>>, warps: RefCell<Vec<Call>> }
/// # // SAFETY: the block is the one host thread that enters it: its barrier has nobody to
/// # // wait for, and each shared array is fresh, leaked memory, 16-aligned (all these ask).
/// # unsafe impl BlockServices for Rec {
/// #     fn barrier(&self, _: At) { self.barriers.set(self.barriers.get() + 1) }
/// #     fn shared_access(&self, _: usize, _: usize, a: Access, _: At) { self.shared.borrow_mut().push(a) }
/// #     fn global_access(&self, addr: usize, _: usize, a: Access, _: At) { self.global.borrow_mut().push((addr, a)) }
/// #     fn shared(&self, _: &'static host::SharedKey, bytes: usize, _: usize) -> *mut u8 {
/// #         Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice()).as_mut_ptr().cast()
/// #     }
/// #     fn dynamic_shared(&self) -> (*mut u8, usize) { (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0) }
/// #     fn warp(&self, call: Call, _: At) -> u64 { self.warps.borrow_mut().push(call); call.value }
/// # }
/// # let block = Rc::new(Rec::default());
/// /// A custom view's accessor reports its element, located at its caller.
/// #[track_caller]
/// fn read_at(p: *const f32, i: usize) -> f32 {
///     let e = p.wrapping_add(i);
///     host::note_global(e as usize, 4, Access::Read, core::panic::Location::caller());
///     // SAFETY: the caller passes an in-bounds index of a live array.
///     unsafe { *e }
/// }
/// let data = [0.5f32, 1.5];
/// {
///     // SAFETY: this thread alone runs the launch, under services that keep their contract.
///     let _in_block = unsafe { host::enter(Coords::SINGLE, block.clone()) };
///     assert_eq!(read_at(data.as_ptr(), 1), 1.5);
/// }
/// assert_eq!(*block.global.borrow(), [(data.as_ptr() as usize + 4, Access::Read)]);
/// // Outside an executor the report goes nowhere.
/// assert_eq!(read_at(data.as_ptr(), 0), 0.5);
/// ```
#[inline]
pub fn note_global(addr: usize, bytes: usize, access: Access, at: At) {
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.global_access(addr, bytes, access, at);
        }
    });
}

/// [`note_global`] for element `p`, located at the caller (or at its caller, through
/// `#[track_caller]` accessors).
#[inline]
#[track_caller]
pub(crate) fn note_element<T>(p: *const T, access: Access) {
    note_global(
        p as usize,
        core::mem::size_of::<T>(),
        access,
        core::panic::Location::caller(),
    );
}

/// Report a turn of the current thread on the kernel's side of the mailbox whose first slot
/// is `ring`, made at the caller (or at its caller, through `#[track_caller]` methods):
/// [`BlockServices::mailbox_turn`]. Outside an executor it does nothing.
#[inline]
#[track_caller]
pub(crate) fn mailbox_turn(ring: usize, role: MailboxRole) {
    let at = core::panic::Location::caller();
    // Without a count of the services held across the call: an executor may stop the thread
    // there (a panic), like a panic in the kernel body.
    SERVICES.with(|s| {
        if let Some(s) = s.borrow().as_ref() {
            s.mailbox_turn(ring, role, at);
        }
    });
}

pub(crate) fn shared(key: &'static SharedKey, bytes: usize, align: usize) -> *mut u8 {
    if let Some(s) = services() {
        return s.shared(key, bytes, align);
    }
    assert!(align <= 16, "shared arrays are at most 16-byte aligned");
    PRIVATE_SHARED.with(|m| {
        let mut m = m.borrow_mut();
        let words = bytes.div_ceil(16).max(1);
        let buf = m
            .entry((key as *const SharedKey as usize, bytes))
            .or_insert_with(|| vec![0u128; words].into_boxed_slice());
        buf.as_mut_ptr().cast()
    })
}

pub(crate) fn dynamic_shared() -> (*mut u8, usize) {
    match services() {
        Some(s) => s.dynamic_shared(),
        None => (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0),
    }
}

/// Nanoseconds since the first call in this process (the simulator's `%globaltimer`).
pub(crate) fn now_ns() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::{At, BlockServices, Coords, enter, enter_thread};
    use std::rc::Rc;

    /// A block of the one thread that enters it.
    struct One;
    // SAFETY: one thread: the barrier has nobody to wait for; shared arrays are fresh leaked
    // memory, 16-aligned (all these tests ask).
    unsafe impl BlockServices for One {
        fn barrier(&self, _: At) {}
        fn shared(&self, _: &'static super::SharedKey, bytes: usize, _: usize) -> *mut u8 {
            Box::leak(vec![0u128; bytes.div_ceil(16)].into_boxed_slice())
                .as_mut_ptr()
                .cast()
        }
        fn dynamic_shared(&self) -> (*mut u8, usize) {
            (core::ptr::NonNull::<u128>::dangling().as_ptr().cast(), 0)
        }
    }

    #[test]
    fn enter_thread_is_refused_inside_a_launch() {
        let inside = Coords {
            thread: [1, 0, 0],
            block_dim: [2, 1, 1],
            ..Coords::SINGLE
        };
        // SAFETY: this thread alone runs the launch, as thread 1; `One` keeps the contract.
        let _in = unsafe { enter(inside, Rc::new(One)) };
        let Err(err) = std::panic::catch_unwind(|| enter_thread(Coords::SINGLE)) else {
            panic!("enter_thread was allowed inside a launch");
        };
        let msg = (err.downcast_ref::<&str>().copied())
            .or_else(|| err.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("");
        assert!(msg.contains("inside a simulated launch"), "{msg}");
        // The thread kept its own coordinates.
        assert_eq!(crate::thread::idx_x(), 1);
    }
}
