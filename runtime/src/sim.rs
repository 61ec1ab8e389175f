//! The CPU simulator: runs a kernel's body on the host over its grid, with GPU semantics and
//! checks the GPU cannot make.
//!
//! - Blocks are spread over worker threads (one per core); blocks run independently, as on
//!   the GPU.
//! - Within a block, a kernel whose body calls `sync_threads` runs each GPU thread as a
//!   stackful coroutine (corosensei) on the worker: a thread reaching the barrier yields, and
//!   the block resumes all of them once every thread is there, so the barrier is real and
//!   costs a context switch, not an OS thread per GPU thread. Warp operations use the same
//!   machinery: the lanes of a warp meet at each warp call (`sim_warp`). Other kernels run
//!   their threads one after another as plain calls.
//! - Static and dynamic shared memory are per-block arenas (zeroed); slices are host memory
//!   (the simulator's "device" memory), so `#[pinned_async]` data is copied in and out and
//!   `#[mapped]` memory is shared with the host, as on the GPU.
//! - Checks: a panic (out-of-bounds index, `gpu_assert!`, any `panic!`) is reported with the
//!   kernel, block, thread, file, line and message; two threads of a block touching one
//!   shared-memory element between two barriers, at least one writing, is a race report; a
//!   barrier reached by only part of a block is reported instead of hanging, and so is a warp
//!   call whose mask names a lane that never meets it.

use crate::error::{Error, PanicReport, Result};
use crate::launch::{Grid, Kernel};
use crate::sim_warp::{self, Wait};
use berth_device::host::{self, BlockServices, Coords};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, Location};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// Coroutine stack per simulated thread: kernel bodies are small, debug builds less so.
const STACK_BYTES: usize = 256 << 10;

/// The launch's parameter pointers, shared read-only by the worker threads.
struct Params<'a>(&'a [*mut c_void]);
// SAFETY: the pointers address parameter values that live (unchanged) for the whole launch;
// the memory the values point to is what the kernel's threads access, as on the GPU.
unsafe impl Sync for Params<'_> {}

/// Run `k` over `grid` with the parameter values `ptrs` point to, to completion.
///
/// # Safety
/// `ptrs` holds one pointer per parameter of `k` (as for `cuLaunchKernel`), to values of the
/// parameters' types; every slice they describe is live host memory for the launch.
pub(crate) unsafe fn run(k: &'static Kernel, grid: &Grid, ptrs: &mut [*mut c_void]) -> Result<()> {
    install_panic_hook();
    let (g, t) = (grid.blocks, grid.threads);
    let blocks = g.x as usize * g.y as usize * g.z as usize;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let params = Params(ptrs);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(blocks)
        .max(1);
    let dims = Dims {
        grid: [g.x, g.y, g.z],
        block: [t.x, t.y, t.z],
        shared_bytes: grid.shared_bytes as usize,
    };
    let work = || {
        let mut stacks: Vec<DefaultStack> = Vec::new();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks || stop.load(Ordering::Relaxed) {
                break;
            }
            let bidx = [
                (b % g.x as usize) as u32,
                ((b / g.x as usize) % g.y as usize) as u32,
                (b / (g.x as usize * g.y as usize)) as u32,
            ];
            if let Err(e) = run_block(k, &dims, bidx, &params, &mut stacks) {
                stop.store(true, Ordering::Relaxed);
                failure.lock().expect("poisoned").get_or_insert(e);
            }
        }
    };
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    match failure.into_inner().expect("poisoned") {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[derive(Clone, Copy)]
struct Dims {
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: usize,
}

impl Dims {
    fn threads(&self) -> usize {
        self.block.iter().map(|&d| d as usize).product()
    }
    fn coords(&self, block: [u32; 3], t: usize) -> Coords {
        let [bx, by, _] = self.block.map(|d| d as usize);
        Coords {
            thread: [
                (t % bx) as u32,
                ((t / bx) % by) as u32,
                (t / (bx * by)) as u32,
            ],
            block,
            block_dim: self.block,
            grid_dim: self.grid,
        }
    }
}

/// Accesses to one shared-memory address in the current barrier interval.
#[derive(Default, Clone, Copy)]
struct Access {
    writer: Option<usize>,
    reader: Option<usize>,
    readers: u32,
}

/// One block's shared memory, barrier bookkeeping and race tracking.
struct Block {
    statics: RefCell<HashMap<&'static str, Box<[u128]>>>,
    dynamic: RefCell<Box<[u128]>>,
    dynamic_bytes: usize,
    /// Yielder of each thread's coroutine (coroutine mode only).
    yielders: RefCell<Vec<*const Yielder<(), ()>>>,
    current: Cell<usize>,
    coroutines: bool,
    barrier_at: Cell<Option<&'static Location<'static>>>,
    /// A barrier or warp call (its name) reached outside coroutine mode.
    stray_barrier: Cell<Option<(&'static str, &'static Location<'static>)>>,
    /// Each thread's pending warp call, and the result it gets when its warp meets.
    warp_calls: RefCell<Vec<sim_warp::Pending>>,
    warp_results: RefCell<Vec<u64>>,
    /// Threads that had returned when the current round began.
    returned: RefCell<Vec<bool>>,
    accesses: RefCell<HashMap<usize, Access>>,
    race: RefCell<Option<(usize, String)>>,
}

impl Block {
    fn new(dims: &Dims, coroutines: bool) -> Self {
        Block {
            statics: RefCell::new(HashMap::new()),
            dynamic: RefCell::new(vec![0u128; dims.shared_bytes.div_ceil(16)].into_boxed_slice()),
            dynamic_bytes: dims.shared_bytes,
            yielders: RefCell::new(vec![std::ptr::null(); dims.threads()]),
            current: Cell::new(0),
            coroutines,
            barrier_at: Cell::new(None),
            stray_barrier: Cell::new(None),
            warp_calls: RefCell::new(vec![None; dims.threads()]),
            warp_results: RefCell::new(vec![0; dims.threads()]),
            returned: RefCell::new(vec![false; dims.threads()]),
            accesses: RefCell::new(HashMap::new()),
            race: RefCell::new(None),
        }
    }
}

impl Block {
    /// Yield the running thread's coroutine (at a barrier or a warp call).
    fn suspend(&self) {
        let y = self.yielders.borrow()[self.current.get()];
        // SAFETY: the yielder of the running coroutine, set when it started; it lives as
        // long as the coroutine, which is the one executing this call.
        unsafe { (*y).suspend(()) };
    }
}

impl BlockServices for Block {
    fn barrier(&self, at: &'static Location<'static>) {
        if !self.coroutines {
            // The body does not name sync_threads, so the threads run one after another: a
            // barrier reached from a helper cannot be honoured.
            self.stray_barrier.set(Some(("sync_threads", at)));
            panic!("{STRAY_BARRIER}");
        }
        self.barrier_at.set(Some(at));
        self.suspend();
    }

    fn warp(&self, call: berth_device::warp::Call, at: &'static Location<'static>) -> u64 {
        if !self.coroutines {
            self.stray_barrier.set(Some((call.op.name(), at)));
            panic!("{STRAY_BARRIER}");
        }
        let t = self.current.get();
        self.warp_calls.borrow_mut()[t] = Some((call, at));
        self.suspend();
        self.warp_results.borrow()[t]
    }

    fn warp_active_mask(&self) -> u32 {
        let t = self.current.get();
        let (w, returned) = (t / 32, self.returned.borrow());
        (0..32)
            .filter(|l| returned.get(w * 32 + l) == Some(&false))
            .fold(0, |m, l| m | 1 << l)
    }

    fn shared(&self, key: &'static str, bytes: usize, align: usize) -> *mut u8 {
        assert!(align <= 16, "shared arrays are at most 16-byte aligned");
        let mut m = self.statics.borrow_mut();
        let buf = m
            .entry(key)
            .or_insert_with(|| vec![0u128; bytes.div_ceil(16).max(1)].into_boxed_slice());
        buf.as_mut_ptr().cast()
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        (
            self.dynamic.borrow_mut().as_mut_ptr().cast(),
            self.dynamic_bytes,
        )
    }

    fn shared_access(&self, addr: usize, _bytes: usize, write: bool) {
        let t = self.current.get();
        let mut map = self.accesses.borrow_mut();
        let a = map.entry(addr).or_default();
        let conflict = if write {
            match (a.writer, a.reader) {
                (Some(w), _) if w != t => Some(format!("threads {w} and {t} both wrote it")),
                (_, Some(r)) if r != t || a.readers > 1 => {
                    Some(format!("thread {t} wrote it after thread {r} read it"))
                }
                _ => None,
            }
        } else {
            match a.writer {
                Some(w) if w != t => Some(format!("thread {t} read it after thread {w} wrote it")),
                _ => None,
            }
        };
        if write {
            a.writer = Some(t);
        } else {
            if a.reader.is_some_and(|r| r != t) {
                a.readers += 1;
            }
            a.reader.get_or_insert(t);
        }
        if let Some(c) = conflict {
            self.race.borrow_mut().get_or_insert((t, c));
        }
    }
}

/// Whether `k` needs coroutines: its body names `sync_threads` (the macro's hint), or its PTX
/// entry reaches a barrier through any function it calls (helpers included). Cached.
fn uses_barrier(k: &'static Kernel) -> bool {
    static CACHE: Mutex<Option<HashMap<usize, bool>>> = Mutex::new(None);
    let key = k as *const Kernel as usize;
    let mut cache = CACHE.lock().expect("poisoned");
    *cache
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| k.uses_barrier || crate::ptx::entry_uses_barrier(k.ptx, k.name))
}

const STRAY_BARRIER: &str = "berth simulator: sync_threads() outside the kernel body";

fn run_block(
    k: &'static Kernel,
    dims: &Dims,
    block: [u32; 3],
    params: &Params<'_>,
    stacks: &mut Vec<DefaultStack>,
) -> Result<()> {
    let n = dims.threads();
    let coroutines = uses_barrier(k);
    let services = Rc::new(Block::new(dims, coroutines));
    let fail = |t: usize, problem: String| Error::Simulator {
        kernel: k.name,
        block,
        thread: dims.coords(block, t).thread,
        problem,
    };
    if !coroutines {
        for t in 0..n {
            services.current.set(t);
            let _in = host::enter(dims.coords(block, t), services.clone());
            // SAFETY: `run`'s contract: the pointers match the kernel's parameters.
            let r = in_kernel(|| unsafe { (k.sim)(params.0) });
            if let Err(report) = r {
                if let Some((what, at)) = services.stray_barrier.get() {
                    return Err(fail(
                        t,
                        format!(
                            "{what}() at {}:{} was reached, but neither the kernel body nor its PTX shows a barrier or warp operation (was the PTX built from other sources?); rebuild the kernel crate",
                            at.file(),
                            at.line()
                        ),
                    ));
                }
                return Err(panic_error(k, block, dims.coords(block, t).thread, report));
            }
        }
        return race_error(&services, &fail);
    }

    // Coroutine mode: every thread is a coroutine; a barrier is a yield.
    while stacks.len() < n {
        stacks.push(DefaultStack::new(STACK_BYTES).map_err(|e| {
            Error::Usage(format!(
                "the simulator could not allocate a coroutine stack: {e}"
            ))
        })?);
    }
    type Co = Coroutine<(), (), std::result::Result<(), Captured>, DefaultStack>;
    let mut threads: Vec<Option<Co>> = Vec::with_capacity(n);
    // Borrowed, not an `Rc` clone: a coroutine that never ran (its block stopped at an earlier
    // thread's panic) is reset with its closure still on its stack, never dropped.
    let svc: &Block = &services;
    for t in 0..n {
        let stack = stacks.pop().expect("allocated above");
        // SAFETY: the coroutine borrows `params` and `services` (alive for the whole launch)
        // and is driven to completion or reset before this function returns.
        let co = unsafe {
            Coroutine::with_stack_unchecked(stack, move |y: &Yielder<(), ()>, ()| {
                svc.yielders.borrow_mut()[t] = y as *const _;
                // SAFETY: `run`'s contract.
                in_kernel(|| (k.sim)(params.0))
            })
        };
        threads.push(Some(co));
    }
    let mut wait = vec![Wait::No; n];
    let mut result = Ok(());
    'rounds: loop {
        for t in 0..n {
            let Some(co) = threads[t].as_mut() else {
                continue;
            };
            if wait[t] != Wait::No {
                continue;
            }
            services.current.set(t);
            let step = {
                let _in = host::enter(dims.coords(block, t), services.clone());
                co.resume(())
            };
            match step {
                CoroutineResult::Yield(()) => {
                    let at_warp = services.warp_calls.borrow()[t].is_some();
                    wait[t] = if at_warp { Wait::Warp } else { Wait::Barrier };
                }
                CoroutineResult::Return(r) => {
                    stacks.push(threads[t].take().expect("present").into_stack());
                    wait[t] = Wait::Done;
                    if let Err(report) = r {
                        result = Err(panic_error(k, block, dims.coords(block, t).thread, report));
                        break 'rounds;
                    }
                }
            }
        }
        // A thread that returned in this round was active for the others in it (`active_mask`
        // does not depend on the order the round ran its threads in).
        for (r, w) in services.returned.borrow_mut().iter_mut().zip(&wait) {
            *r = *w == Wait::Done;
        }
        // No thread can run: let the warps that can meet exchange values and go on.
        let released = sim_warp::release(
            &mut wait,
            &mut services.warp_calls.borrow_mut(),
            &mut services.warp_results.borrow_mut(),
        );
        match released {
            Ok(true) => continue,
            Ok(false) => {}
            Err((t, problem)) => {
                result = Err(fail(t, problem));
                break;
            }
        }
        let done = wait.iter().filter(|&&w| w == Wait::Done).count();
        let at_barrier = n - done;
        if done == n {
            break;
        }
        if done > 0 {
            let at = services
                .barrier_at
                .get()
                .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
            let t = wait.iter().position(|&w| w == Wait::Barrier).unwrap_or(0);
            result = Err(fail(
                t,
                format!(
                    "a barrier reached by only part of the block: {at_barrier} threads wait in sync_threads(){at}, {done} have returned (on the GPU this hangs or is undefined)"
                ),
            ));
            break;
        }
        // Every thread is at the barrier: a new interval begins.
        if let Err(e) = race_error(&services, &fail) {
            result = Err(e);
            break;
        }
        services.accesses.borrow_mut().clear();
        wait.iter_mut().for_each(|w| *w = Wait::No);
    }
    for co in threads.iter_mut().filter_map(Option::as_mut) {
        // SAFETY: an unfinished coroutine is suspended in `sync_threads` or a warp call inside the kernel
        // body; kernel frames hold plain data (views, DeviceCopy values), nothing to drop.
        unsafe { co.force_reset() };
    }
    for co in threads.into_iter().flatten() {
        stacks.push(co.into_stack());
    }
    result?;
    race_error(&services, &fail)
}

fn race_error(services: &Block, fail: &impl Fn(usize, String) -> Error) -> Result<()> {
    match services.race.borrow_mut().take() {
        Some((t, what)) => Err(fail(
            t,
            format!(
                "a data race on shared memory between two barriers: {what} (threads are numbered within the block)"
            ),
        )),
        None => Ok(()),
    }
}

/// Where and why a simulated thread panicked.
struct Captured {
    file: String,
    line: u32,
    column: u32,
    message: String,
}

thread_local! {
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<Captured>> = const { RefCell::new(None) };
}

/// Run one simulated thread's body, turning a panic into its location and message.
fn in_kernel(f: impl FnOnce()) -> std::result::Result<(), Captured> {
    IN_KERNEL.with(|c| c.set(true));
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    IN_KERNEL.with(|c| c.set(false));
    r.map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| Captured {
                file: String::new(),
                line: 0,
                column: 0,
                message: payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default(),
            })
    })
}

/// A panic hook that, inside a simulated kernel, records the panic instead of printing it,
/// and otherwise defers to the hook that was installed before.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_KERNEL.with(Cell::get) {
                let loc = info.location();
                let message = info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| {
                        info.payload()
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                    })
                    .unwrap_or_default();
                LAST_PANIC.with(|p| {
                    *p.borrow_mut() = Some(Captured {
                        file: loc.map(|l| l.file().to_owned()).unwrap_or_default(),
                        line: loc.map_or(0, |l| l.line()),
                        column: loc.map_or(0, |l| l.column()),
                        message,
                    })
                });
            } else {
                previous(info);
            }
        }));
    });
}

fn panic_error(k: &'static Kernel, block: [u32; 3], thread: [u32; 3], c: Captured) -> Error {
    Error::KernelPanic {
        kernel: k.name.to_owned(),
        report: PanicReport {
            file: c.file,
            line: c.line,
            column: c.column,
            message: c.message,
            block,
            thread,
        },
        context_lost: false,
    }
}
